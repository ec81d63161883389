"""Server presets (PRE-3): the admin's preset files, served read-only to every user.

They live one file each, `NAME.yaml`, in `<TopDir>/config/presets/`, or in the directory
xce.yaml's `presets_dir` names (absolute, or relative to the TopDir). They are not part of
the ClusterConfig: each request looks at the directory again and re-reads only the files
whose size, mtime or inode changed, so an edited file is served changed with no restart
and no `build --apply`. A file that is not a valid preset is left out, never served
half-read, with one warning in the daemon's log for each version of it (its problems with
FILE:LINE:COL, as `xceadmin build` reports them).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Callable

from xced.config.presets import (
    MAX_SERVER_PRESETS,
    Preset,
    load_preset_file,
    preset_paths,
    server_preset_problem,
    unsafe_presets_dir,
)

log = logging.getLogger("xced.server.presets")

class PresetShelf:
    """The server presets of the directory `directory()` gives (called at each look, so a
    live config change of `presets_dir` is followed). `current()` -> {name: Preset}; it
    reads files, so routes call it in a worker thread (`asyncio.to_thread`), never on the
    event loop: a slow disk or a large directory must not stall the daemon (D-8)."""

    def __init__(self, directory: Callable[[], Path]) -> None:
        self._directory = directory
        self._cache: dict[str, tuple[tuple[int, int, int, int], Preset | None]] = {}
        self._dir: Path | None = None
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def _warn_once(self, key: str, msg: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(msg, *args)

    def current(self) -> dict[str, Preset]:
        """The valid presets now on disk, by name, sorted (the rules of
        xced.config.presets.load_presets_dir, which `xceadmin build` applies)."""
        with self._lock:
            return self._current()

    def _current(self) -> dict[str, Preset]:
        d = self._directory()
        if d != self._dir:
            self._cache, self._dir, self._warned = {}, d, set()
        if not d.is_dir():
            if d.exists():
                self._warn_once("notdir", "server presets not read: %s is not a directory", d)
            self._cache = {}
            return {}
        why = unsafe_presets_dir(d)
        if why is not None:
            self._warn_once("unsafe:" + why, "server presets not read: %s", why)
            self._cache = {}
            return {}
        paths = preset_paths(d)
        if len(paths) > MAX_SERVER_PRESETS:
            self._warn_once("cap", "%s holds %d preset files; serving the first %d by name", d, len(paths),
                            MAX_SERVER_PRESETS)
            paths = paths[:MAX_SERVER_PRESETS]
        seen: dict[str, tuple[tuple[int, int, int, int], Preset | None]] = {}
        for p in paths:
            try:
                st = os.lstat(p)
            except OSError:
                continue
            stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            old = self._cache.get(p.name)
            if old is not None and old[0] == stamp:
                seen[p.name] = old
                continue
            problem = server_preset_problem(p)
            errors: list = []
            pr = None
            if problem is None:
                pr = load_preset_file(p, errors, [], allow_origin=False)
            if pr is None:  # at most five problems: one bad file must not flood the log
                shown = "; ".join(str(e) for e in errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5
                                                                 else "")
                log.warning("server preset %s left out: %s", p, problem or shown or "not valid")
            seen[p.name] = (stamp, pr)
        self._cache = seen
        return {pr.name: pr for _, pr in seen.values() if pr is not None}

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
from pathlib import Path
from typing import Callable

from xced.config.presets import Preset, load_preset_file, preset_paths

log = logging.getLogger("xced.server.presets")

#: the most preset files served from one directory; the rest are left out with a warning
MAX_SERVER_PRESETS = 1000


class PresetShelf:
    """The server presets of the directory `directory()` gives (called at each look, so a
    live config change of `presets_dir` is followed). `current()` -> {name: Preset}."""

    def __init__(self, directory: Callable[[], Path]) -> None:
        self._directory = directory
        self._cache: dict[str, tuple[tuple[int, int, int], Preset | None]] = {}
        self._dir: Path | None = None
        self._warned_cap = False

    def current(self) -> dict[str, Preset]:
        """The valid presets now on disk, by name, sorted."""
        d = self._directory()
        if d != self._dir:
            self._cache, self._dir = {}, d
        paths = preset_paths(d)
        if len(paths) > MAX_SERVER_PRESETS:
            if not self._warned_cap:
                log.warning("%s holds %d preset files; serving the first %d by name", d, len(paths),
                            MAX_SERVER_PRESETS)
                self._warned_cap = True
            paths = paths[:MAX_SERVER_PRESETS]
        seen: dict[str, tuple[tuple[int, int, int], Preset | None]] = {}
        for p in paths:
            try:
                st = os.stat(p)
            except OSError:
                continue
            stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
            old = self._cache.get(p.name)
            if old is not None and old[0] == stamp:
                seen[p.name] = old
                continue
            errors: list = []
            pr = load_preset_file(p, errors, [], allow_origin=False)
            if pr is None:
                log.warning("server preset %s left out: %s", p, "; ".join(str(e) for e in errors) or "not valid")
            seen[p.name] = (stamp, pr)
        self._cache = seen
        return {pr.name: pr for _, pr in seen.values() if pr is not None}

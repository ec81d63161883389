"""One way to write a file so that no reader, and no crash, ever sees half of it: a temporary
file beside it, with its mode set before anything is written, fsync'd, then renamed over
the target (and the directory fsync'd when asked). Keys, keys.yaml and presets use it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(path: Path | str, data: bytes, mode: int, *, sync_dir: bool = False) -> None:
    """Write `data` to `path` with `mode` (0o600, 0o644), atomically; the temporary file is
    removed on any failure. `sync_dir` fsyncs the directory after the rename, so the rename
    itself survives a power loss. Raises OSError."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
        if sync_dir:
            dfd = os.open(p.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

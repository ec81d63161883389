"""Names shared by the daemon and the CLIs: environment variables, paths, defaults.

DESIGN "Conventions": environment names live here and nowhere else.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ENV_TOPDIR = "XCE_TOPDIR"
ENV_SOCKET = "XCE_SOCKET"
ENV_CONTROLLER = "XCE_CONTROLLER"
ENV_DEBUG = "XCE_DEBUG"
ENV_TEST_USER = "XCE_TEST_USER"

API_PREFIX = "/xce/v1"
SOCKET_NAME = "xced.sock"
PORT_FILE = "xced.port"
PID_FILE = "xced.pid"
DB_NAME = "xce.db"
#: AF_UNIX sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107


def default_topdir() -> Path:
    """The TopDir used when neither `--topdir` nor XCE_TOPDIR is given: the user's data dir."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("xce", appauthor=False))


def resolve_topdir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--topdir` if given, else XCE_TOPDIR, else `default_topdir()`; made absolute."""
    if explicit:
        return Path(explicit).expanduser().absolute()
    env = os.environ.get(ENV_TOPDIR)
    if env:
        return Path(env).expanduser().absolute()
    return default_topdir()


def socket_path(topdir: Path) -> Path:
    """The daemon's Unix socket for TopDir `topdir` (DESIGN "Sockets and ports").

    `<TopDir>/run/xced.sock`, or, when that path would pass the 107-byte limit
    of AF_UNIX, a short path under the runtime dir named by a hash of the TopDir.
    XCE_SOCKET is applied by the caller, not here.
    """
    p = topdir / "run" / SOCKET_NAME
    if len(os.fsencode(str(p))) <= MAX_SOCKET_PATH:
        return p
    digest = hashlib.sha256(os.fsencode(str(topdir))).hexdigest()[:16]
    base = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/xce-{os.getuid()}"
    return Path(base) / f"xced-{digest}.sock"


def client_socket_path(topdir: str | os.PathLike[str] | None = None) -> Path:
    """Where a client finds the daemon: XCE_SOCKET, else the socket of the resolved TopDir."""
    env = os.environ.get(ENV_SOCKET)
    if env and not topdir:
        return Path(env)
    return socket_path(resolve_topdir(topdir))

"""Names shared by the daemon and the CLIs: the environment variables that point them at a
cluster (XCE_TOPDIR, XCE_SOCKET, XCE_CONTROLLER, XCE_CONTROLLER_KEY, XCE_TEST_USER, XCE_DEBUG,
XCE_CONNECT_TIMEOUT, XCE_TEST_FAULT, XCE_LOG_LEVEL; ENVIRONMENT describes each for the man
pages), the files of a
TopDir's run/ and state/, and defaults. Code uses these names, never the literals (DESIGN
"Conventions"); the names of a job's own environment (JOB-3: XCE_JOBID, LSB_HOSTS, ...)
are xced/worker/env.py's.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

ENV_TOPDIR = "XCE_TOPDIR"
ENV_SOCKET = "XCE_SOCKET"
#: tcp://HOST:PORT of the controller. Set by a worker inside the jobs it runs (their way to
#: the controller, xced.worker.env); `Client.connect` uses it when no socket or TopDir is given.
#: With ENV_CONTROLLER_KEY beside it, `xceadmin` signs with its admin key over pinned TLS.
ENV_CONTROLLER = "XCE_CONTROLLER"
#: the controller's key (its keys/host.pub, or a fingerprint SHA256:...) that a remote
#: `xceadmin` pins TLS to (KEY-6); the environment's form of `xceadmin --controller-key`
ENV_CONTROLLER_KEY = "XCE_CONTROLLER_KEY"
ENV_DEBUG = "XCE_DEBUG"
ENV_TEST_USER = "XCE_TEST_USER"
#: seconds a client keeps trying to reach the daemon (CLI-1, JOB-10): the whole of a retried
#: submit or listing, each single request, and how long `submit -K` and `wait` ride out a
#: daemon that does not answer; default DEFAULT_CONNECT_TIMEOUT_S
ENV_CONNECT_TIMEOUT = "XCE_CONNECT_TIMEOUT"
DEFAULT_CONNECT_TIMEOUT_S = 60.0
#: a fault the daemon injects into itself, for tests (mode: test only; xced.daemon refuses it
#: in production): "exit-after-commit:submit" ends xced right after a submit's commit, before
#: its answer
ENV_TEST_FAULT = "XCE_TEST_FAULT"
#: the daemon's log level (DEBUG, INFO, WARNING, ERROR); default INFO
ENV_LOG_LEVEL = "XCE_LOG_LEVEL"

#: The environment each tool reads, for its man page's ENVIRONMENT (tools/clidocs.py, CLI-5):
#: (name, the tools that read it, what it does).
ENVIRONMENT: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (ENV_TOPDIR, ("xcecli", "xceadmin", "xced"),
     "the cluster's TopDir, when --topdir is not given (default: the personal cluster in the user's data "
     "directory, made on the daemon's first start)"),
    (ENV_SOCKET, ("xcecli", "xceadmin", "xced"),
     "the daemon's Unix socket, instead of the TopDir's run/xced.sock"),
    (ENV_CONTROLLER, ("xcecli", "xceadmin"),
     "tcp://HOST:PORT of the controller: set by a worker inside the jobs it runs; with XCE_CONTROLLER_KEY, "
     "xceadmin's signed path to a controller on another host"),
    (ENV_CONTROLLER_KEY, ("xceadmin",),
     "the controller's key (its keys/host.pub, or a fingerprint SHA256:...) that TLS is pinned to; the "
     "environment's form of --controller-key"),
    (ENV_CONNECT_TIMEOUT, ("xcecli", "xceadmin"),
     f"how long a client keeps trying to reach the daemon, retries included: seconds, or a duration such as "
     f"5m (default {DEFAULT_CONNECT_TIMEOUT_S:g} s); past it the command exits 3"),
    (ENV_TEST_USER, ("xcecli", "xceadmin"),
     "act as this user (a daemon in mode: test only); xcecli's --as-user"),
    ("XCE_JOBID, XCE_JOBINDEX, XCE_JOB_TOKEN", ("xcecli",),
     "set inside a job: which job `xcecli launch` starts a task of, and the token that proves it runs inside it"),
    ("XCE_CONTAINMENT", ("xced",),
     "how a worker contains each job's processes: auto (the default: a cgroup where the daemon may make one, "
     "else a child subreaper) or subreaper"),
    (ENV_TEST_FAULT, ("xced",),
     "a fault the daemon injects into itself, for tests (mode: test only; refused in production), e.g. "
     "exit-after-commit:submit"),
    (ENV_DEBUG, ("xcecli", "xceadmin", "xced"), "1: an error also prints its Python traceback"),
    (ENV_LOG_LEVEL, ("xced",), "the log level: DEBUG, INFO (the default), WARNING or ERROR"),
    ("VISUAL, EDITOR", ("xcecli",), "the editor of `xcecli presets edit` (default: vi)"),
    ("XDG_CONFIG_HOME", ("xcecli",), "where the local presets live: $XDG_CONFIG_HOME/xce/presets (default "
                                    "~/.config/xce/presets)"),
)

#: The files of a TopDir, for the man pages' FILES (tools/clidocs.py, CLI-5): (path, what it is).
FILES: tuple[tuple[str, str], ...] = (
    ("TOPDIR/config/xce.yaml", "the cluster: name, mode, admins, defaults, listen, limits"),
    ("TOPDIR/config/queues.yaml, hosts.yaml", "queues and hosts"),
    ("TOPDIR/config/applications.yaml, projects.yaml, rbac.yaml, keys.yaml",
     "application profiles, projects, roles and the trusted host keys (each optional)"),
    ("TOPDIR/config/presets/NAME.yaml", "server presets"),
    ("TOPDIR/run/xced.sock", "the daemon's Unix socket (the API)"),
    ("TOPDIR/run/xced.sock.path", "where the socket is instead, when its path under the TopDir would pass the "
                                  "107 bytes a Unix socket path may have"),
    ("$TMPDIR/xce-UID/", "the socket's directory in that case (mode 0711)"),
    ("TOPDIR/run/xced.pid, xced.port, xced.ready", "the daemon's process ID, its TCP port, and that it serves"),
    ("TOPDIR/state/xce.db", "the store (SQLite): jobs, events, host events, keys; the daemon's alone"),
    ("TOPDIR/jobs/", "each job's directory: its script, environment and exit status"),
    ("TOPDIR/keys/host.key, host.pub", "this xced's Ed25519 key pair (host.key is mode 0600)"),
    ("~/.config/xce/presets/", "the user's own presets"),
)

API_PREFIX = "/xce/v1"
SOCKET_NAME = "xced.sock"
#: in run/: the socket's absolute path, when it is not run/xced.sock (D-7)
SOCKET_PATH_FILE = "xced.sock.path"
PORT_FILE = "xced.port"
PID_FILE = "xced.pid"
#: in run/: flock-ed by the running xced of the TopDir
LOCK_FILE = "xced.lock"
#: in run/: written once the daemon serves (its socket path, or a worker's controller URL)
READY_FILE = "xced.ready"
DB_NAME = "xce.db"
#: the umask of a job whose submit names none (D-7: LSF's and Slurm's default)
DEFAULT_UMASK = 0o022
#: AF_UNIX sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107


def default_topdir() -> Path:
    """The TopDir used when neither `--topdir` nor XCE_TOPDIR is given: the user's data dir."""
    from pathlib import Path

    return Path(_default_topdir_text())


def _default_topdir_text() -> str:
    from platformdirs import user_data_dir

    return user_data_dir("xce", appauthor=False)


def topdir_text(explicit: str | os.PathLike[str] | None = None) -> str:
    """`resolve_topdir` as text, with no pathlib (the CLI's start-up, CLI-7): `--topdir` if
    given, else XCE_TOPDIR, else the user's data dir; `~` expanded, made absolute against
    the current directory, a trailing `/` dropped."""
    raw = os.fspath(explicit) if explicit else os.environ.get(ENV_TOPDIR)
    if not raw:
        return _default_topdir_text()
    p = os.path.expanduser(raw)
    if not os.path.isabs(p):
        p = os.path.join(os.getcwd(), p)
    return p.rstrip("/") or "/"


def resolve_topdir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--topdir` if given, else XCE_TOPDIR, else `default_topdir()`; made absolute."""
    from pathlib import Path

    return Path(topdir_text(explicit))


def socket_path(topdir: Path) -> Path:
    """Where clients find the socket of the daemon of TopDir `topdir` (D-7): the path
    recorded in `<TopDir>/run/xced.sock.path` when the daemon put its socket elsewhere
    (its path would pass the 107-byte limit of AF_UNIX, or XCE_SOCKET said so), else
    `<TopDir>/run/xced.sock`. Clients of every user read the same record, so they find a
    root daemon's socket too; none computes it from its own uid. XCE_SOCKET is applied by
    the caller, not here. The daemon's side is `xced.config.topdir.daemon_socket_path`."""
    from pathlib import Path

    return Path(socket_path_text(str(topdir)))


def socket_path_text(topdir: str) -> str:
    """`socket_path` as text, with no pathlib (the CLI's start-up, CLI-7)."""
    run = os.path.join(topdir, "run")
    try:
        with open(os.path.join(run, SOCKET_PATH_FILE), "rb") as f:
            recorded = os.fsdecode(f.read(4096).strip())
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        recorded = ""
    if recorded.startswith("/"):
        return recorded
    return os.path.join(run, SOCKET_NAME)


def client_socket_path(topdir: str | os.PathLike[str] | None = None) -> str:
    """Where a client finds the daemon: XCE_SOCKET, else the socket of the resolved TopDir
    (text: the CLI's start-up imports no pathlib, CLI-7)."""
    env = os.environ.get(ENV_SOCKET)
    if env and not topdir:
        return env
    return socket_path_text(topdir_text(topdir))

"""The TopDir on disk: its layout, the modes that keep users apart, and where its socket is.

Rules (D-7, after how sshd's StrictModes and Slurm's spool directories are kept):

- `<TopDir>` and `config/` are 0755: everyone may read the config and reach `run/`.
- `run/` is 0755: it holds the Unix socket (0666: anyone may connect; the daemon knows
  who from SO_PEERCRED) and `xced.sock.path`, which every user's client reads.
- `state/` is 0700 and the store `state/xce.db` 0600: only the daemon's user reads jobs'
  environments and the hashes of their launch tokens.
- `jobs/` is 0711: users reach their own job directories by name and list nothing.
- None of these may be writable by group or others, nor owned by another user: a user who
  could write there could swap the store, a job's spec or the socket. xced refuses to
  start on such a TopDir and names each path with the mode it needs. Modes that are only
  more readable than needed (an older TopDir's 0644 store) are tightened in place.

The socket is `<TopDir>/run/xced.sock` unless that path passes the 107-byte limit of
AF_UNIX (or XCE_SOCKET names another place); then it lives in `$TMPDIR/xce-<uid>/`
(default `/tmp`), a directory of the daemon's user alone, mode 0711, checked before use,
and `<TopDir>/run/xced.sock.path` holds its absolute path on one line, so that clients of
every user find it (they never compute it from their own uid).

Stdlib only: xceadmin init and the clients import it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

from xced.constants import DB_NAME, MAX_SOCKET_PATH, SOCKET_NAME, SOCKET_PATH_FILE

__all__ = [
    "LAYOUT",
    "ModeProblem",
    "UnsafeDirectory",
    "check_store_file",
    "daemon_socket_path",
    "fallback_socket_dir",
    "make_layout",
    "private_socket_dir",
]

#: directory -> (mode it is made with, whether the daemon's user must own it). Relative to the TopDir.
LAYOUT: dict[str, tuple[int, bool]] = {
    "": (0o755, False),
    "config": (0o755, False),
    "run": (0o755, True),
    "state": (0o700, True),
    "jobs": (0o711, True),
    "keys": (0o711, True),  # the host key pair (KEY-2): host.key 0600, host.pub read by name
}
#: the store file's mode
STORE_MODE = 0o600
#: the fallback socket directory's mode: its owner alone may list, create or remove entries;
#: others may only reach the socket in it by name (0700 would lock every other user out).
SOCKET_DIR_MODE = 0o711


@dataclass(frozen=True)
class ModeProblem:
    """One path whose owner or mode lets other users change it; `str()` says how to fix it."""

    path: Path
    mode: int
    owner: str
    owner_ok: bool
    needed_mode: int
    needed_owner: str

    def __str__(self) -> str:
        fix = [f"chmod {self.needed_mode:04o} {self.path}"]
        if not self.owner_ok:
            fix.insert(0, f"chown {self.needed_owner.split(' or ')[0]} {self.path}")
        return (f"{self.path}: mode {self.mode:04o}, owned by {self.owner}; needs mode {self.needed_mode:04o} "
                f"(not writable by group or others), owned by {self.needed_owner} ({'; '.join(fix)})")


class UnsafeDirectory(Exception):
    """A directory the daemon would trust is owned by another user or open to others; the
    message names it, its owner and mode, and what to do."""


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _fd_dir(path: Path) -> int:
    """An fd on directory `path` itself, never through a symlink at its last component."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def make_layout(top: Path, *, check: bool = True, only: tuple[str, ...] | None = None) -> list[ModeProblem]:
    """Make the TopDir's directories (LAYOUT) with their modes where missing, tighten the
    ones only more readable than needed, and return the problems that make the TopDir
    unsafe (owned by another user, writable by group or others). Modes are set through an
    fd (fchmod), never by a path that could be a symlink. `check` False only makes; `only`
    names the LAYOUT entries to handle (a worker host needs no config/ or state/).
    Raises OSError when a directory cannot be made, UnsafeDirectory when one is a symlink."""
    euid = os.geteuid()
    me = _user(euid)
    problems: list[ModeProblem] = []
    for rel, (mode, must_own) in LAYOUT.items():
        if only is not None and rel not in only:
            continue
        path = top / rel if rel else top
        made = False
        try:
            os.mkdir(path, mode)
            made = True
        except FileExistsError:
            pass
        except FileNotFoundError:
            if rel:
                raise
            os.makedirs(path, mode)
            made = True
        if made:
            fd = _fd_dir(path)
            try:
                os.fchmod(fd, mode)  # the umask may have taken bits from it
            finally:
                os.close(fd)
            continue
        if not check:
            continue
        try:
            fd = _fd_dir(path)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafeDirectory(f"{path} is a symbolic link or not a directory; the TopDir's {rel or 'top'} "
                                      f"directory must be a real directory") from None
            raise
        try:
            st = os.fstat(fd)
            owners_ok = (euid,) if must_own else (euid, 0)
            needed_owner = me if must_own or euid == 0 else f"{me} or root"
            if st.st_uid not in owners_ok or st.st_mode & 0o022:
                problems.append(ModeProblem(path, stat.S_IMODE(st.st_mode), _user(st.st_uid),
                                            st.st_uid in owners_ok, mode, needed_owner))
            elif st.st_uid == euid and stat.S_IMODE(st.st_mode) & ~mode:
                os.fchmod(fd, stat.S_IMODE(st.st_mode) & mode)
        finally:
            os.close(fd)
    return problems


def check_store_file(top: Path) -> list[ModeProblem]:
    """The store file and its WAL companions: owned by the daemon's user and writable by
    nobody else (else a problem); more readable than 0600 is tightened to 0600."""
    euid = os.geteuid()
    problems: list[ModeProblem] = []
    for name in (DB_NAME, DB_NAME + "-wal", DB_NAME + "-shm"):
        path = top / "state" / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise UnsafeDirectory(f"{path} is a symbolic link; the store must be a plain file of {_user(euid)}") \
                    from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != euid or st.st_mode & 0o022:
                problems.append(ModeProblem(path, stat.S_IMODE(st.st_mode), _user(st.st_uid), st.st_uid == euid,
                                            STORE_MODE, _user(euid)))
            elif stat.S_IMODE(st.st_mode) & ~STORE_MODE:
                os.fchmod(fd, STORE_MODE)
        finally:
            os.close(fd)
    return problems


def check_config_files(top: Path) -> list[ModeProblem]:
    """Every file and directory in `config/` (followed through symlinks): owned by the
    daemon's user or root and writable by nobody else, or a user could name themselves an
    admin, switch the cluster to test mode or add a host at the next start."""
    euid = os.geteuid()
    me = _user(euid)
    needed = me if euid == 0 else f"{me} or root"
    problems: list[ModeProblem] = []
    try:
        entries = sorted(os.scandir(top / "config"), key=lambda d: d.name)
    except FileNotFoundError:
        return problems
    for entry in entries:
        try:
            st = os.stat(entry.path)
        except OSError:
            continue
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid not in (euid, 0) or mode & 0o022:
            want = 0o755 if stat.S_ISDIR(st.st_mode) else 0o644
            problems.append(ModeProblem(Path(entry.path), mode, _user(st.st_uid), st.st_uid in (euid, 0),
                                        mode & ~0o022 if st.st_uid in (euid, 0) else want, needed))
    return problems


def check_ancestors(path: Path) -> list[ModeProblem]:
    """The directories above `path`: each owned by root or the daemon's user, and writable by
    nobody else unless sticky (like /tmp), or another user could move `path` away and put
    their own in its place (the rule sshd's StrictModes applies)."""
    euid = os.geteuid()
    problems: list[ModeProblem] = []
    for d in reversed(path.absolute().parents):
        try:
            st = os.stat(d)
        except OSError:
            continue
        mode = stat.S_IMODE(st.st_mode)
        sticky = bool(st.st_mode & stat.S_ISVTX)
        if st.st_uid not in (euid, 0) or (mode & 0o022 and not sticky):
            problems.append(ModeProblem(d, mode, _user(st.st_uid), st.st_uid in (euid, 0), mode & ~0o022,
                                        f"{_user(euid)} or root" if euid else "root"))
    return problems


def fallback_socket_dir(uid: int | None = None) -> Path:
    """`$TMPDIR/xce-<uid>` (TMPDIR defaulting to /tmp): where a daemon of user `uid` (default:
    this process's) puts its socket when `<TopDir>/run/xced.sock` would be too long."""
    base = os.environ.get("TMPDIR") or "/tmp"
    if len(os.fsencode(base)) > MAX_SOCKET_PATH - 40:
        base = "/tmp"
    return Path(base) / f"xce-{os.geteuid() if uid is None else uid}"


def daemon_socket_path(top: Path) -> Path:
    """Where the daemon of TopDir `top` binds its socket when XCE_SOCKET does not say:
    `<TopDir>/run/xced.sock`, or, when that would pass AF_UNIX's 107 bytes,
    `<fallback dir>/xced-<first 16 hex digits of sha256(TopDir)>.sock`."""
    p = top / "run" / SOCKET_NAME
    if len(os.fsencode(str(p))) <= MAX_SOCKET_PATH:
        return p
    digest = hashlib.sha256(os.fsencode(str(top))).hexdigest()[:16]
    return fallback_socket_dir() / f"xced-{digest}.sock"


def private_socket_dir(path: Path) -> None:
    """Make the fallback socket directory `path` (mode 0711, this user's), or check the one
    that exists: it must be a real directory (not a symlink) owned by this user, writable and
    readable by nobody else. Raises UnsafeDirectory saying who owns it and what to do."""
    euid = os.geteuid()
    try:
        os.mkdir(path, SOCKET_DIR_MODE)
        fresh = True
    except FileExistsError:
        fresh = False
    try:
        fd = _fd_dir(path)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeDirectory(f"the socket directory {path} is a symbolic link or not a directory; someone may "
                                  f"be trying to capture the daemon's clients. Remove it, or set XCE_SOCKET to a "
                                  f"path in a directory of {_user(euid)}") from None
        raise
    try:
        st = os.fstat(fd)
        if fresh:
            os.fchmod(fd, SOCKET_DIR_MODE)
            return
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid != euid or mode & 0o066:
            who = _user(st.st_uid)
            what = "change" if mode & 0o022 else "list"
            why = f"it belongs to {who}" if st.st_uid != euid else f"its mode {mode:04o} lets others {what} it"
            raise UnsafeDirectory(
                f"refusing the socket directory {path}: {why}, so another user could swap the socket and capture "
                f"clients' requests (their whole environment included). It must be owned by {_user(euid)} with mode "
                f"0711 or 0700: remove it (rm -r {path}) and start xced again, or set XCE_SOCKET to a path in a "
                f"directory of {_user(euid)}")
    finally:
        os.close(fd)


def check_socket_parent(sock: Path) -> None:
    """The directory holding an explicit socket path (XCE_SOCKET) must not let another user
    put a socket of their own at that name: owned by this user or root and writable by
    nobody else. A sticky shared directory like /tmp is refused too: while the daemon is
    down, anyone may create the name there and catch its clients. Raises UnsafeDirectory."""
    parent = sock.parent
    try:
        st = os.stat(parent)
    except FileNotFoundError:
        raise UnsafeDirectory(f"the socket's directory {parent} does not exist (XCE_SOCKET={sock})") from None
    euid = os.geteuid()
    above = check_ancestors(parent)
    if above:
        raise UnsafeDirectory(f"refusing XCE_SOCKET={sock}: a directory above it lets other users swap it: {above[0]}")
    if st.st_uid not in (euid, 0) or st.st_mode & 0o022:
        raise UnsafeDirectory(f"refusing XCE_SOCKET={sock}: its directory {parent} (mode "
                              f"{stat.S_IMODE(st.st_mode):04o}, owned by {_user(st.st_uid)}) lets other users put "
                              f"a socket of their own there; use a directory owned by {_user(euid)} that nobody "
                              f"else may write, or leave XCE_SOCKET unset")


def write_socket_path_file(top: Path, sock: Path) -> None:
    """Record where the socket is (`run/xced.sock.path`, mode 0644, one line) when it is not
    at `<TopDir>/run/xced.sock`; remove a stale record when it is."""
    target = top / "run" / SOCKET_PATH_FILE
    if sock == top / "run" / SOCKET_NAME:
        try:
            target.unlink()
        except FileNotFoundError:
            pass
        return
    tmp = target.with_name(f".{SOCKET_PATH_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.fchmod(fd, 0o644)
        os.write(fd, os.fsencode(str(sock.absolute())) + b"\n")
    finally:
        os.close(fd)
    os.replace(tmp, target)

"""The per-job supervisor process (JOB-1, JOB-2, JOB-8), like Slurm's slurmstepd.

Run as ``python -m xced.worker.supervisor JOBDIR``. One supervisor runs each
job, in its own session, so that ``xced`` can die (even by SIGKILL) and be
restarted while jobs run: the supervisor starts the job, enforces its run
limit, runs the kill sequence on request, and records the exit status durably
in JOBDIR before it exits (DESIGN rule 3).

This module uses the standard library only, besides two stdlib-only modules of
xced (``xced.worker.env`` for a hook's environment, ``xced.constants``), and must
start fast: the daemon imports its file names from here (``xced.worker.procs``),
never the other way round.

The job directory protocol (JOBDIR is created by the caller):

``spec.json``  (written by ``procs.launch``) what to run::

    {"job_id": int, "index": int, "argv": [str, ...], "cwd": str,
     "env": {str: str}, "stdout": str, "stderr": str,
     "run_limit_s": float | null, "memory_limit_mb": int | null, "grace_s": float,
     "kill_interval_s": float, "uid": int | null, "gid": int | null, "groups": [int] | null,
     "umask": int, "hooks": {...} | null, "host": str | null, "host_ntasks": int | null,
     "dir_names": {"stdout": "ID.out", "stderr": "ID.err"} | absent,
     "overwrite": {"stdout": bool, "stderr": bool} | absent}

    Relative output paths are taken relative to ``cwd``. When ``stderr`` names
    the same file as ``stdout`` the file is opened once and both streams share
    it. Output files are opened O_APPEND|O_CREAT as the job's user with its
    umask (missing parent directories are created), and also O_TRUNC for a stream
    that ``overwrite`` names (-oo/-eo, LSF bsub -oo: "If the specified file already
    exists, it is overwritten"): at every run's start, so a requeued or retried run
    overwrites its earlier run's output too, as LSF's does; a file both streams share
    is truncated when either asks; only the default ``stdout``,
    ``stderr`` and a task's ``output`` directly in JOBDIR are made by the
    supervisor itself (0600) and handed to that user (D-7). Every file of the
    protocol is 0600 and never written through a symlink. An output path that
    turns out to be an existing directory (`-o DIR` without the slash, JOB-12)
    is written as DIR/<dir_names[stream]>, and the job's LSB_OUTPUTFILE /
    LSB_ERRORFILE name that file. An output that is a FIFO is opened without blocking:
    with no reader the job does not start, its reason "cannot open output: stdout PATH
    is a FIFO with no reader" (a FIFO with a reader is written as any file). Waiting for
    a reader would hang the job's start, out of reach of bkill; LSF, whose sbatchd opens
    the files and would hang the same way, documents no FIFO output at all.

``lock``  the supervisor holds ``flock(LOCK_EX)`` on it for its whole life;
    a held lock means "a supervisor is alive here" without trusting PIDs.
    If the lock is taken already the supervisor exits with status 75.

``supervisor.pid``  the supervisor's pid, written after taking the lock and
    after its signal handlers are in place.

``job.json``  ``{"pid": int, "pgid": int, "start_time": float, "containment": str,
    "stdout": str, "stderr": str}`` written as soon as the job has started (epoch
    seconds; the output paths it writes, a directory resolved). The job leads its own
    session and process group (pgid == pid). ``containment`` names how its processes
    are kept together: ``"cgroup-v2"``, ``"cgroup-v1"`` or ``"subreaper"``
    (``xced.worker.contain``).

``contain.json``  the job's cgroups and processes (pid and /proc start time),
    rewritten whenever that set changes (``xced.worker.contain``): what the worker
    ends when the supervisor itself dies.

``status.json``  ``{"exit_code": int, "signal": int | null, "signal_name":
    str | null, "start_time": float | null, "end_time": float, "reason": str |
    null}`` written (tmp file, fsync, rename, fsync of the directory) before
    the supervisor exits. ``exit_code`` is 128+N when the job died of signal N.
    ``reason`` is ``"run limit"``, ``"killed"``, ``"cannot execute: <strerror>:
    <argv0>"`` (exit code 127 or 126), ``"cannot open output: <strerror>:
    <path>"``, ``"cannot change directory: <strerror>: <cwd>"``, ``"cannot
    start job: ..."`` / ``"supervisor error: ..."`` (exit code 1), or null.

``kill_requested``  an empty marker file written by ``procs.request_kill``
    so that a kill request made before the supervisor could receive SIGUSR1
    is not lost. A kill requested before the job started means the job is
    never started (exit code 1, reason "killed").

``supervisor.log``  the supervisor's own stdout and stderr.

Containment (JOB-1, issue 15): the supervisor is a child subreaper, so every
process the job starts stays its descendant even after ``setsid`` or a double
fork; where the daemon runs as root and a cgroup hierarchy is writable the job
also gets its own cgroup, joined before the job's first instruction, with the
memory limit set in it. The memory limit counts the resident memory of all the
job's processes. When the job's main process ends, every other process of the
job is SIGKILLed and reaped, and status.json is written only once none remains,
so the job's slots are freed only then.

Signals: SIGUSR1 starts LSF's kill sequence (SIGINT, then SIGTERM after
``kill_interval_s``, then SIGKILL after another ``kill_interval_s``, each sent
to every process of the job followed by SIGCONT). SIGINT, SIGHUP, SIGTERM and
SIGPIPE do not affect the supervisor. Stop and resume are done by the worker
sending SIGSTOP/SIGCONT to the job's process group and to the processes outside
it that contain.json lists; the supervisor keeps working while the job is stopped.

Exit status of the supervisor: 0 once status.json is written, 75 when another
supervisor holds the lock, 2 on a usage error.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time

from xced.model.jobs import EndReason  # stdlib only, like this module
from xced.worker import contain  # stdlib only, like this module
from xced.worker.env import hook_environment  # stdlib only, like this module

SPEC_FILE = "spec.json"
LOCK_FILE = "lock"
PID_FILE = "supervisor.pid"
JOB_FILE = "job.json"
STATUS_FILE = "status.json"
KILL_FILE = "kill_requested"
LOG_FILE = "supervisor.log"
HOOKS_LOG = "hooks.log"
#: seconds between looks for a kill request while a pre hook runs
HOOK_POLL_S = 0.1
#: what one hook may write to hooks.log (bytes); the rest is counted and dropped
HOOK_LOG_MAX_BYTES = 1 << 20

#: Files of the protocol; job output never goes to one of them.
PROTOCOL_FILES = frozenset({SPEC_FILE, LOCK_FILE, PID_FILE, JOB_FILE, STATUS_FILE, KILL_FILE, LOG_FILE,
                            contain.CONTAIN_FILE})
#: The output files the worker puts in JOBDIR when the job names none (a task's: `output`)
DEFAULT_OUTPUTS = frozenset({"stdout", "stderr", "output"})

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_LOCKED = 75  # EX_TEMPFAIL: another supervisor holds JOBDIR/lock

REASON_RUN_LIMIT = EndReason.RUN_LIMIT
REASON_MEMORY_LIMIT = EndReason.MEMORY_LIMIT
#: seconds between two looks at the job's processes when it has a memory limit: their set
#: (contain.json), their resident memory (JOB-2 memory limit), a kernel OOM kill in their cgroup
MEM_CHECK_S = 0.5
#: seconds between two looks at the job's processes when it has none (contain.json, orphans to
#: reap): one look reads every /proc/PID/stat of the host, about 1 ms per 70 processes
TRACK_S = 2.0
#: seconds after the main process ended before a job's survivors that will not die are logged
STRAGGLER_LOG_S = 10.0
REASON_KILLED = EndReason.KILLED

#: Signals the supervisor itself shrugs off (it lives in its own session).
_SHRUGGED = (signal.SIGINT, signal.SIGHUP, signal.SIGTERM)


def log(msg: str) -> None:
    """One line to the supervisor's stderr (JOBDIR/supervisor.log)."""
    try:
        sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} supervisor[{os.getpid()}] {msg}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _copy_capped(rfd: int, logfd: int, cap: int) -> None:
    """Copy a hook's output from pipe `rfd` to `logfd` until EOF, keeping at most `cap`
    bytes and noting how many were dropped; closes both fds."""
    kept = dropped = 0
    try:
        while True:
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            room = cap - kept
            if room > 0:
                os.write(logfd, chunk[:room])
                kept += min(room, len(chunk))
            dropped += max(0, len(chunk) - max(room, 0))
        if dropped:
            os.write(logfd, f"\n[hooks.log: {dropped} more bytes of this hook's output dropped; "
                            f"each hook keeps at most {cap} bytes]\n".encode())
    except OSError:
        pass
    finally:
        os.close(rfd)
        os.close(logfd)


def write_json_atomic(path: str, obj: object, *, durable: bool = True) -> None:
    """Write `obj` as JSON to `path` atomically (tmp file, rename). `durable` also fsyncs the
    file and the directory, so it survives a power loss: status.json must (JOB-8); files that
    only matter while processes live (spec, pid, job.json) need not."""
    directory = os.path.dirname(path) or "."
    tmp = f"{path}.{os.getpid()}.tmp"
    data = json.dumps(obj, separators=(",", ":")).encode()
    try:  # a new file of our own, never one someone left there for us to fill (D-7)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)  # a full disk must not keep a half-written file
        raise
    os.close(fd)
    os.replace(tmp, path)
    if not durable:
        return
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def group_rss_kb(pgid: int) -> int:
    """Resident memory (kB) of every process in process group `pgid`, from /proc. Not the
    memory limit's measure any more (a process that calls setsid leaves the group): that is
    `contain.rss_kb` of all the job's processes (JOB-2, issue 15)."""
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        rest = data[data.rfind(b")") + 2:].split()
        # fields after comm: state(0) ppid(1) pgrp(2) ... rss is field 24 of stat, i.e. rest[21]
        if len(rest) > 21 and int(rest[2]) == pgid:
            total += int(rest[21]) * page_kb
    return total


def signal_name(sig: int) -> str:
    """`SIGTERM` for 15; `SIG<n>` for a number Python has no name for."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"SIG{sig}"


class _Setup(Exception):
    """The job could not be started; carries the status to record."""

    def __init__(self, exit_code: int, reason: str) -> None:
        super().__init__(reason)
        self.exit_code = exit_code
        self.reason = reason


class _AsUser:
    """Context manager: effective uid/gid/groups of the job while opening its files (root only)."""

    def __init__(self, ident: tuple[int, int, list[int]] | None) -> None:
        self.ident = ident

    def __enter__(self) -> None:
        if self.ident is None:
            return
        uid, gid, groups = self.ident
        self.saved = (os.getegid(), os.getgroups())
        os.setgroups(groups)
        os.setegid(gid)
        os.seteuid(uid)

    def __exit__(self, *exc: object) -> None:
        if self.ident is None:
            return
        egid, groups = self.saved
        os.seteuid(0)
        os.setegid(egid)
        os.setgroups(groups)


def _open_append(path: str, truncate: bool = False) -> int:
    """Open `path` for appending, creating it (and its parents) with the umask applied;
    `truncate` (-oo/-eo) empties an existing file first (O_TRUNC; writes still append, so
    the job's processes sharing it never write over each other)."""
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    # O_NONBLOCK: a FIFO without a reader must not hang the job's start (where no kill could
    # reach it): the open fails with ENXIO instead (open(2)); O_NONBLOCK is cleared again at
    # once, so the job writes as to any file (a FIFO with a reader blocks the writer, as it should).
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK
                 | (os.O_TRUNC if truncate else 0), 0o666)
    try:
        os.set_blocking(fd, True)
    except OSError:
        os.close(fd)
        raise
    return fd


def _is_fifo(path: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def _is_inside(path: str, directory: str) -> bool:
    parent = os.path.realpath(os.path.dirname(path))
    top = os.path.realpath(directory)
    return parent == top or parent.startswith(top + os.sep)


class Supervisor:
    """One job's supervisor: state and the wait loop. See the module docstring."""

    def __init__(self, jobdir: str) -> None:
        self.jobdir = os.path.abspath(jobdir)
        self.spec: dict = {}
        self.wake_r = -1
        self.kill_flag = False
        #: a kill request (SIGUSR1) raises _Setup(killed) at once: set only around the calls
        #: of the job's start that may block (an NSS look-up, chdir or open on a hung mount)
        self.interruptible = False
        self.proc: subprocess.Popen | None = None
        self.pid = 0
        self.pgid = 0
        self.pidfd = -1
        self.start_time: float | None = None
        #: the stdout and stderr paths the job writes (a -o DIR resolved, JOB-12)
        self.outputs: tuple[str, str] = ("", "")
        self.reason: str | None = None
        self.run_deadline: float | None = None
        self.mem_limit_kb: int | None = None
        self.mem_check: float | None = None
        self.grace_deadline: float | None = None
        self.kill_deadline: float | None = None
        self.kill_step = 0
        #: how the job's processes are kept (contain.MODES) and its cgroups, if any
        self.containment = contain.MODE_SUBREAPER
        self.cgroup: contain.Cgroup | None = None
        #: the job's processes at the last look: pid -> /proc start time
        self.tracked: dict[int, int] = {}
        self.scan_at: float | None = None

    def path(self, name: str) -> str:
        return os.path.join(self.jobdir, name)

    # ---- start-up ----------------------------------------------------------

    def take_lock(self) -> int | None:
        """Open JOBDIR/lock and flock it; the fd is never inherited. None if someone holds it."""
        import fcntl

        fd = os.open(self.path(LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    def setup_signals(self) -> None:
        """Wake-up pipe for select; SIGUSR1 = kill request; shrug off INT/HUP/TERM.

        Shrugged signals get a no-op *handler*, not SIG_IGN, because handled
        signals are reset to the default at exec while ignored ones would be
        inherited by the job. Dispositions inherited from the daemon as
        SIG_IGN (SIGCHLD above all, which would make the job unwaitable) are
        reset, and the signal mask is cleared.
        """
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for sig in signal.valid_signals():
            if sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python's; Popen restores them for the job
                continue
            try:
                if signal.getsignal(sig) == signal.SIG_IGN:
                    signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError, RuntimeError):
                pass
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wake_r = r
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)

        def on_usr1(signum: int, frame: object) -> None:
            self.kill_flag = True
            if self.interruptible:  # a call of the job's start that may block: give it up now
                self.interruptible = False
                raise _Setup(1, REASON_KILLED)

        def shrug(signum: int, frame: object) -> None:
            pass

        signal.signal(signal.SIGUSR1, on_usr1)
        for sig in _SHRUGGED:
            signal.signal(sig, shrug)

    def identity(self) -> tuple[int, int, list[int]] | None:
        """(uid, gid, groups) the job runs as, or None for the supervisor's own user."""
        uid = self.spec.get("uid")
        if uid is None or os.geteuid() != 0:
            return None
        uid = int(uid)
        gid = self.spec.get("gid")
        groups = self.spec.get("groups")
        if gid is None or groups is None:
            import pwd

            try:
                pw = pwd.getpwuid(uid)
            except KeyError:
                pw = None
            if gid is None:
                if pw is None:
                    raise _Setup(1, f"cannot start job: uid {uid} has no passwd entry and no gid was given")
                gid = pw.pw_gid
            if groups is None:
                groups = os.getgrouplist(pw.pw_name, int(gid)) if pw is not None else [int(gid)]
        return uid, int(gid), [int(g) for g in groups]

    def open_output(self, path: str, ident: tuple[int, int, list[int]] | None, truncate: bool = False) -> int:
        """Open one output file for appending (D-7); `truncate` (-oo/-eo, LSF bsub -oo/-eo)
        empties an -o/-e file first, never a default file in JOBDIR.

        The default output files (`stdout`, `stderr`, a task's `output`, directly in JOBDIR)
        are made here by the supervisor, mode 0600 whatever the umask, never through a
        symlink, and handed to the job's user: JOBDIR is not the user's to write, which is
        what keeps spec.json and status.json out of their reach. Every other path (-o, -e) is
        opened as the job's user only, created with the job's umask, so the kernel applies
        that user's permissions to every component of it; a path into JOBDIR itself is
        refused. Raises PermissionError / OSError."""
        if os.path.dirname(path) == self.jobdir and os.path.basename(path) in DEFAULT_OUTPUTS:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise PermissionError(13, "not a regular file", path)
                if ident is not None and st.st_uid != ident[0]:
                    os.fchown(fd, ident[0], ident[1])
            except OSError:
                os.close(fd)
                raise
            return fd
        if path == self.jobdir or path.startswith(self.jobdir + os.sep) or _is_inside(path, self.jobdir):
            raise PermissionError(13, "output may not go into the job's own directory, where only its default "
                                      "stdout and stderr live", path)
        with _AsUser(ident):
            return _open_append(path, truncate)

    def open_in_dir(self, path: str, stream: str, ident: tuple[int, int, list[int]] | None,
                    truncate: bool = False) -> tuple[int, str]:
        """Open output `path` (open_output); when it names a directory that exists (`-o DIR`
        without the trailing slash), open DIR/ID.out (DIR/ID.err for "stderr") in it instead,
        as `-o DIR/` does (JOB-12; LSF: "Standard output: output_directory/job_ID.out"). Only
        here, on the execution host and as the job's user, is it known whether DIR exists.
        Returns (fd, the path opened). Raises OSError."""
        try:
            return self.open_output(path, ident, truncate), path
        except IsADirectoryError:
            name = (self.spec.get("dir_names") or {}).get(stream)
            if not name:
                raise
            inner = os.path.join(path, name)
            return self.open_output(inner, ident, truncate), inner

    def open_outputs(self, ident: tuple[int, int, list[int]] | None) -> tuple[int, int]:
        """Open the job's stdout and stderr files (one file when both name the same); the
        paths opened are kept in self.outputs (a directory resolved, JOB-12)."""
        cwd = self.spec["cwd"]
        out_path = os.path.normpath(os.path.join(cwd, self.spec["stdout"]))
        err_path = os.path.normpath(os.path.join(cwd, self.spec["stderr"]))
        path = out_path
        over = self.spec.get("overwrite") or {}
        trunc_out, trunc_err = bool(over.get("stdout")), bool(over.get("stderr"))
        try:
            out, out_path2 = self.open_in_dir(out_path, "stdout", ident,
                                              trunc_out or (trunc_err and err_path == out_path))
            if err_path == out_path:
                self.outputs = (out_path2, out_path2)
                return out, out
            path = err_path
            try:
                err, err_path2 = self.open_in_dir(err_path, "stderr", ident, trunc_err)
            except BaseException:
                os.close(out)
                raise
            self.outputs = (out_path2, err_path2)
            return out, err
        except OSError as e:
            if e.errno == errno.ENXIO and _is_fifo(path):
                what = "stdout" if path == out_path else "stderr"
                raise _Setup(1, f"cannot open output: {what} {path} is a FIFO with no reader") from None
            raise _Setup(1, f"cannot open output: {e.strerror}: {path}") from None

    def check_cwd(self, ident: tuple[int, int, list[int]] | None) -> None:
        """Fail early, with the right reason, when the job's user cannot enter cwd."""
        cwd = self.spec["cwd"]
        here = os.getcwd()
        try:
            with _AsUser(ident):
                os.chdir(cwd)
        except OSError as e:
            raise _Setup(1, f"cannot change directory: {e.strerror}: {cwd}") from None
        finally:
            os.chdir(here)

    @contextlib.contextmanager
    def killable(self):
        """Within: a kill request (SIGUSR1) ends the job's start at once, raising
        _Setup(1, killed) out of whatever call waits (PEP 475 retries a call a signal
        interrupts unless its handler raises), so that a start stuck in the kernel (an NSS
        look-up, a chdir or an open on a hung file system) still honours bkill. Only around
        calls that leave nothing behind when abandoned: never around Popen."""
        if self.kill_flag:
            raise _Setup(1, REASON_KILLED)
        root = os.geteuid() == 0
        saved = (os.getegid(), os.getgroups()) if root else None
        self.interruptible = True
        try:
            yield
        finally:
            try:
                self.interruptible = False
            finally:
                if saved is not None and (os.geteuid() != 0 or os.getegid() != saved[0]):
                    # abandoned inside _AsUser: the supervisor's own identity back, to record the end
                    os.seteuid(0)
                    os.setegid(saved[0])
                    os.setgroups(saved[1])

    def start_job(self) -> None:
        """Start the job in its own session; write job.json. Raises _Setup when it cannot start."""
        spec = self.spec
        argv = [str(a) for a in spec["argv"]]
        if not argv:
            raise _Setup(127, "cannot execute: empty command")
        with self.killable():
            ident = self.identity()
            self.check_cwd(ident)
            out, err = self.open_outputs(ident)
        if self.kill_flag or os.path.exists(self.path(KILL_FILE)):  # killed while it was starting
            os.close(out)
            if err != out:
                os.close(err)
            raise _Setup(1, REASON_KILLED)
        kwargs: dict = {}
        if ident is not None:
            kwargs = {"user": ident[0], "group": ident[1], "extra_groups": ident[2]}
        self.make_cgroup()
        env = {str(k): str(v) for k, v in spec["env"].items()}
        for var, given, opened in (("LSB_OUTPUTFILE", spec["stdout"], self.outputs[0]),
                                   ("LSB_ERRORFILE", spec["stderr"], self.outputs[1])):
            if var in env and os.path.normpath(os.path.join(spec["cwd"], given)) != opened:
                env[var] = opened  # -o DIR resolved to DIR/ID.out above (JOB-12)
        popen_kwargs = dict(cwd=spec["cwd"], env=env,
                            stdin=subprocess.DEVNULL, stdout=out, stderr=err, close_fds=True,
                            start_new_session=True, **kwargs)
        try:
            if self.cgroup is not None:
                try:
                    self.proc = self.popen_in_cgroup(argv, popen_kwargs)
                except subprocess.SubprocessError as e:  # it could not join: nothing of it ran
                    log(f"cannot put the job in its cgroup ({e}); contained by the subreaper only")
                    self.drop_cgroup()
            if self.proc is None:
                self.proc = subprocess.Popen(argv, **popen_kwargs)
        except OSError as e:
            self.drop_cgroup()
            if e.filename == spec["cwd"] and e.filename != argv[0]:
                # _posixsubprocess failed before exec: chdir, setgroups or setuid.
                raise _Setup(1, f"cannot start job: {e.strerror}") from None
            code = 127 if isinstance(e, (FileNotFoundError, NotADirectoryError)) else 126
            what = argv[0]
            script = os.path.join(spec.get("cwd") or "/", argv[0])
            if isinstance(e, FileNotFoundError) and os.path.isfile(script):
                try:  # the file is there: it is the #! interpreter that is missing (read as the job's user)
                    with _AsUser(ident):
                        fd = os.open(script, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                    with os.fdopen(fd, "rb") as f:
                        first = f.readline(256)
                    if first.startswith(b"#!"):
                        what = f"{argv[0]} (its interpreter {first[2:].strip().split()[0].decode(errors='replace')})"
                except (OSError, IndexError):
                    pass
            raise _Setup(code, f"cannot execute: {e.strerror}: {what}") from None
        finally:
            os.close(out)
            if err != out:
                os.close(err)
        self.start_time = time.time()
        start_mono = time.monotonic()
        self.pid = self.pgid = self.proc.pid
        self.pidfd = os.pidfd_open(self.pid)
        limit = spec.get("run_limit_s")
        if limit is not None:
            self.run_deadline = start_mono + float(limit)
        if spec.get("memory_limit_mb"):
            self.mem_limit_kb = int(spec["memory_limit_mb"]) * 1024
            self.mem_check = start_mono + MEM_CHECK_S
        self.tracked = {self.pid: contain.starttime(self.pid) or 0}
        self.record()
        self.scan_at = start_mono + self.scan_interval()
        write_json_atomic(self.path(JOB_FILE), {"pid": self.pid, "pgid": self.pgid, "start_time": self.start_time,
                                                "containment": self.containment, "stdout": self.outputs[0],
                                                "stderr": self.outputs[1]}, durable=False)
        log(f"job {spec.get('job_id')}[{spec.get('index')}] started: pid {self.pid}, contained by {self.containment}")

    # ---- containment (JOB-1, issue 15) ------------------------------------------

    def make_cgroup(self) -> None:
        """Make the job's cgroup when this host offers one (contain.detect), recorded in
        contain.json before the job starts; else the job is contained by the subreaper only."""
        try:
            modes = contain.candidates()
        except ValueError as e:
            log(f"{e}; using the subreaper")
            modes = [contain.MODE_SUBREAPER]
        for mode in modes:
            if mode == contain.MODE_SUBREAPER:
                break
            try:
                self.cgroup = contain.Cgroup.create(mode, self.jobdir, int(self.spec.get("job_id", 0)),
                                                    int(self.spec.get("index", 0)), self.spec.get("memory_limit_mb"))
                self.containment = mode
                break
            except OSError as e:
                log(f"cannot make the job's {mode} cgroup ({e}); trying the next mechanism")
        self.record()

    def drop_cgroup(self) -> None:
        """Remove the job's cgroup (the job did not start in it, or has ended)."""
        if self.cgroup is not None:
            if not self.cgroup.remove():
                log(f"cannot remove the cgroups {self.cgroup.dirs}")
            self.cgroup = None
        self.containment = contain.MODE_SUBREAPER if self.proc is None else self.containment

    def popen_in_cgroup(self, argv: list[str], popen_kwargs: dict) -> subprocess.Popen:
        """Popen the job so that it joins its cgroup before its first instruction: the child,
        between fork and exec (after it took the job's user), sends its pid and waits; a thread
        here (root) writes that pid into the cgroups' cgroup.procs and lets it go on. Raises
        subprocess.SubprocessError when it could not join (nothing of the job ran), OSError as
        Popen does."""
        assert self.cgroup is not None
        cg = self.cgroup
        to_parent_r, to_parent_w = os.pipe2(os.O_CLOEXEC)
        to_child_r, to_child_w = os.pipe2(os.O_CLOEXEC)
        failure: list[str] = []

        def mover() -> None:
            data = os.read(to_parent_r, 32)
            if not data:
                return  # the child ended before it asked (chdir or setuid failed)
            try:
                cg.join(int(data))
                os.write(to_child_w, b"g")
            except (OSError, ValueError) as e:
                failure.append(str(e))
                os.write(to_child_w, b"f")

        def preexec() -> None:  # in the child: no allocation-heavy work, no locks
            os.write(to_parent_w, str(os.getpid()).encode())
            if os.read(to_child_r, 1) != b"g":
                raise OSError("cannot join the job's cgroup")

        t = threading.Thread(target=mover, daemon=True)
        t.start()
        try:
            return subprocess.Popen(argv, preexec_fn=preexec, **popen_kwargs)
        except subprocess.SubprocessError as e:
            raise subprocess.SubprocessError(failure[0] if failure else str(e)) from None
        finally:
            os.close(to_parent_w)  # the mover sees EOF if the child never asked
            t.join(5.0)
            for fd in (to_parent_r, to_child_r, to_child_w):
                os.close(fd)

    def record(self) -> None:
        """Write contain.json: the job's cgroups and processes (best effort: a full disk
        only weakens what the worker can end should this supervisor die)."""
        try:
            contain.write_record(self.jobdir, self.containment, self.cgroup.dirs if self.cgroup else [],
                                 sorted(self.tracked.items()))
        except OSError as e:
            log(f"cannot write {contain.CONTAIN_FILE}: {e}")

    def scan_interval(self) -> float:
        """Seconds to the next look at the job's processes (MEM_CHECK_S with a memory limit)."""
        return MEM_CHECK_S if self.mem_limit_kb is not None else TRACK_S

    def reap_orphans(self, table: dict) -> None:
        """Reap the job's processes re-parented to this subreaper that have ended (never the
        main process: finish() reads its status)."""
        me = os.getpid()
        for pid, info in table.items():
            if info.ppid == me and info.state == "Z" and pid != self.pid:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass

    def job_processes(self, table: dict | None = None) -> dict:
        """The job's live processes now (pid -> contain.ProcInfo): this supervisor's
        descendants and its cgroups' members, zombies left out."""
        table = contain.proc_table() if table is None else table
        procs = {p: i for p, i in contain.descendants({os.getpid()}, table).items() if i.state != "Z"}
        if self.cgroup is not None:
            for p in self.cgroup.pids():
                if p in table and table[p].state != "Z" and p != os.getpid():
                    procs[p] = table[p]
        return procs

    def scan(self, now: float, grace: float) -> None:
        """One look at the job's processes: reap ended orphans, rewrite contain.json when the
        set changed, end the job at its memory limit (resident memory of all its processes,
        JOB-2) or when the kernel killed one of them for it (an OOM kill in its cgroup)."""
        table = contain.proc_table()
        self.reap_orphans(table)
        procs = self.job_processes(table)
        seen = {p: i.starttime for p, i in procs.items()}
        if seen != self.tracked:
            self.tracked = seen
            self.record()
        if self.cgroup is not None and self.reason is None and self.cgroup.oom_kills() > 0:
            self.reason = REASON_MEMORY_LIMIT
            self.mem_check = None
            log(f"the kernel killed a process of the job at its memory limit ({self.mem_limit_kb} kB): SIGKILL")
            self.signal_group(signal.SIGKILL)
        if self.mem_check is not None and now >= self.mem_check:
            rss = contain.rss_kb(procs.values())
            if self.mem_limit_kb is not None and rss > self.mem_limit_kb:
                self.mem_check = None
                if self.reason is None:
                    self.reason = REASON_MEMORY_LIMIT
                log(f"memory limit reached ({rss} kB resident in {len(procs)} processes > {self.mem_limit_kb} kB): "
                    f"SIGTERM")
                self.signal_group(signal.SIGTERM)
                if self.grace_deadline is None:
                    self.grace_deadline = now + grace
            else:
                self.mem_check = now + MEM_CHECK_S

    def end_all(self) -> None:
        """The main process has ended (an unreaped zombie): SIGKILL every other process of the
        job, reap those re-parented here, and return once none remains; then remove its
        cgroup. A kernel OOM kill seen in the cgroup makes the reason "memory limit"."""
        started = time.monotonic()
        delay, told = 0.005, False
        while True:
            table = contain.proc_table()
            self.reap_orphans(table)
            procs = self.job_processes(table)
            procs.pop(self.pid, None)
            if not procs:
                break
            try:
                os.killpg(self.pgid, signal.SIGKILL)  # the zombie leader still holds the group id
            except (ProcessLookupError, PermissionError):
                pass
            if self.cgroup is not None:
                self.cgroup.kill()
            contain.signal_procs([(p, i.starttime) for p, i in procs.items()], signal.SIGKILL)
            if not told and time.monotonic() - started > STRAGGLER_LOG_S:
                told = True
                log(f"processes of the job still there after SIGKILL: {sorted(procs)}; waiting for them")
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        if self.cgroup is not None and self.reason is None and self.cgroup.oom_kills() > 0:
            self.reason = REASON_MEMORY_LIMIT
            log("the kernel killed a process of the job at its memory limit")
        self.tracked = {}
        if self.cgroup is not None:
            cg, self.cgroup = self.cgroup, None
            if not cg.remove():
                log(f"cannot remove the cgroups {cg.dirs}")
        self.record()

    # ---- the wait loop -----------------------------------------------------

    def signal_group(self, sig: int) -> None:
        """`sig` to every process of the job (its process group, and each of its processes
        outside it: contain), then SIGCONT so a stopped job can act on it. SIGKILL also goes
        to the job's cgroup as a whole."""
        for s in (sig, signal.SIGCONT) if sig not in (signal.SIGKILL, signal.SIGCONT) else (sig,):
            try:
                os.killpg(self.pgid, s)
            except ProcessLookupError:
                pass
            except PermissionError as e:
                log(f"cannot send {signal_name(s)} to process group {self.pgid}: {e.strerror}")
            try:
                others = [(p, i.starttime) for p, i in self.job_processes().items() if i.pgrp != self.pgid]
            except OSError:
                others = []
            contain.signal_procs(others, s)
            if s == signal.SIGKILL and self.cgroup is not None:
                self.cgroup.kill()

    def kill_sequence_step(self, now: float) -> None:
        """bkill: SIGINT, SIGTERM after kill_interval_s, SIGKILL after another one."""
        interval = float(self.spec.get("kill_interval_s", 10.0))
        sig = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)[self.kill_step]
        log(f"kill sequence: {signal_name(sig)}")
        self.signal_group(sig)
        self.kill_step += 1
        self.kill_deadline = now + interval if self.kill_step < 3 else None

    def supervise(self) -> float:
        """Wait for the job's main process to end, acting on deadlines and requests.

        No polling: select() on the job's pidfd and the signal wake-up pipe with
        a timeout of the time left to the next deadline. Returns the epoch time
        the job's process was seen to end.
        """
        grace = float(self.spec.get("grace_s", 10.0))
        while True:
            now = time.monotonic()
            if self.kill_flag and self.kill_step == 0:
                log("kill requested")
                if self.reason is None:
                    self.reason = REASON_KILLED
                self.kill_sequence_step(now)
            if self.run_deadline is not None and now >= self.run_deadline:
                self.run_deadline = None
                if self.reason is None:
                    self.reason = REASON_RUN_LIMIT
                log("run limit reached: SIGTERM")
                self.signal_group(signal.SIGTERM)
                self.grace_deadline = now + grace
            if self.scan_at is not None and now >= self.scan_at:
                self.scan(now, grace)
                self.scan_at = now + self.scan_interval()
            if self.grace_deadline is not None and now >= self.grace_deadline:
                self.grace_deadline = None
                log(f"{self.reason or 'limit'} grace expired: SIGKILL")
                self.signal_group(signal.SIGKILL)
            if self.kill_deadline is not None and now >= self.kill_deadline:
                self.kill_sequence_step(now)
            deadlines = [d for d in (self.run_deadline, self.grace_deadline, self.kill_deadline, self.scan_at)
                         if d is not None]
            timeout = max(0.0, min(deadlines) - now) if deadlines else None
            # poll, not select: select() refuses descriptors numbered 1024 or more (D-8)
            poller = select.poll()
            poller.register(self.pidfd, select.POLLIN)
            poller.register(self.wake_r, select.POLLIN)
            ready = {fd for fd, _ in poller.poll(None if timeout is None else timeout * 1000)}
            if self.wake_r in ready:
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            if self.pidfd in ready:
                return time.time()

    def finish(self, end_time: float) -> dict:
        """Collect the exit status (without reaping yet), SIGKILL the group, write status.json, reap."""
        info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        sig: int | None = None
        if info.si_code == os.CLD_EXITED:
            exit_code = info.si_status
        else:  # CLD_KILLED, CLD_DUMPED
            sig = info.si_status
            exit_code = 128 + sig
        # The leader is still an unreaped zombie, so the group id cannot have
        # been reused: no stray process of the job survives it, in its group or out of it.
        self.end_all()
        # post hooks run however the job ended (JOB-6), before the status is recorded
        why = self.run_hooks(("job_post_exec", "post_job_exec", "post_host_exec"),
                             {"XCE_JOB_EXIT_CODE": str(exit_code)}, stop_at_failure=False)
        status = {
            "exit_code": exit_code,
            "signal": sig,
            "signal_name": signal_name(sig) if sig is not None else None,
            "start_time": self.start_time,
            "end_time": end_time,
            "reason": self.reason or why,
        }
        self.write_status(status)
        assert self.proc is not None
        self.proc.wait()  # reap
        os.close(self.pidfd)
        log(f"job ended: exit code {exit_code}" + (f" ({signal_name(sig)})" if sig else ""))
        return status

    # ---- profile hooks (JOB-6) ---------------------------------------------

    def run_hook(self, name: str, hook: dict, extra_env: dict | None = None) -> str | None:
        """Run one hook with `/bin/sh -c` as the job's user, in the job's environment plus
        XCE_JOB_HOST_DIR, XCE_HOST_NTASKS, XCE_HOST_TASK_INDEX and XCE_HOOK; its output goes
        to JOBDIR/hooks.log. Returns None when it succeeded, else the reason that names it
        ("pre_job_exec exited 2", "post_host_exec timed out after 300 s on h2")."""
        spec = self.spec
        timeout = float(hook.get("timeout_s", 300.0))
        env = hook_environment(spec["env"], self.jobdir, spec.get("host_ntasks"), name, extra_env)
        ident = self.identity()
        kwargs: dict = {}
        if ident is not None:
            kwargs = {"user": ident[0], "group": ident[1], "extra_groups": ident[2]}
        cwd = spec["cwd"] if os.path.isdir(spec["cwd"]) else "/tmp"
        logfd = self.open_hooks_log(ident)
        rfd, wfd = os.pipe()
        try:
            os.write(logfd, f"--- {name}: {hook['command']}\n".encode())
            p = subprocess.Popen(["/bin/sh", "-c", hook["command"]], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                 stdout=wfd, stderr=wfd, close_fds=True, start_new_session=True, **kwargs)
        except OSError as e:
            os.close(rfd)
            os.close(logfd)
            return f"{name} could not start: {e.strerror}"
        finally:
            os.close(wfd)
        copier = threading.Thread(target=_copy_capped, args=(rfd, logfd, HOOK_LOG_MAX_BYTES), daemon=True)
        copier.start()
        try:
            return self._wait_hook(name, p, timeout)
        finally:
            copier.join(5.0)

    def open_hooks_log(self, ident: tuple[int, int, list[int]] | None) -> int:
        """JOBDIR/hooks.log, mode 0600, the job's user's (D-7): the hooks' output is theirs."""
        fd = os.open(self.path(HOOKS_LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        if ident is not None:
            try:
                if os.fstat(fd).st_uid != ident[0]:
                    os.fchown(fd, ident[0], ident[1])
            except OSError:
                os.close(fd)
                raise
        return fd

    def _wait_hook(self, name: str, p: subprocess.Popen, timeout: float) -> str | None:
        spec = self.spec
        deadline = time.monotonic() + timeout
        killable = name.startswith("pre_") or name == "job_pre_exec"
        rc = None
        why = None
        while rc is None:
            try:
                rc = p.wait(HOOK_POLL_S)
            except subprocess.TimeoutExpired:
                if killable and (self.kill_flag or os.path.exists(self.path(KILL_FILE))):
                    why = REASON_KILLED  # a kill ends a pre hook at once; the job never starts
                elif time.monotonic() >= deadline:
                    why = f"{name} timed out after {timeout:g} s on {spec.get('host') or 'this host'}"
                if why is not None:
                    self._kill_group(p.pid)
                    p.wait()
                    return why
        self._kill_group(p.pid)  # what the hook left running in its group ends with it
        if rc < 0:
            return f"{name} was killed by {signal_name(-rc)}"
        return f"{name} exited {rc}" if rc != 0 else None

    @staticmethod
    def _kill_group(pgid: int) -> None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def run_hooks(self, names: tuple[str, ...], extra_env: dict | None = None, stop_at_failure: bool = True) -> str | None:
        """Run the spec's hooks of `names` in order; the first failure's reason (or None)."""
        hooks = self.spec.get("hooks") or {}
        first = None
        for name in names:
            if name in hooks and hooks[name]:
                why = self.run_hook(name, hooks[name], extra_env)
                if why and first is None:
                    first = why
                    log(f"hook failed: {why}")
                    if stop_at_failure:
                        break
        return first

    def write_status(self, status: dict) -> None:
        """Write status.json durably, the job's end as the worker learns it (JOB-8). When it
        cannot be written (the disk is full, an I/O error), the supervisor keeps the status
        in memory and tries again, with a delay growing from 0.5 s to 5 s, holding its lock
        meanwhile, so the worker sees a live supervisor rather than a lost one, and learns
        the real exit code once the disk has room (D-8). A job directory that is gone (its
        TopDir removed) is no full disk: there is no one left to tell, and the supervisor
        ends rather than try for ever."""
        delay, told = 0.5, None
        while True:
            try:
                write_json_atomic(self.path(STATUS_FILE), status)
                if told is not None:
                    log("status.json written at last")
                return
            except OSError as e:
                if not os.path.isdir(self.jobdir):
                    log(f"the job directory {self.jobdir} is gone; the job's status ({status}) is not kept")
                    return
                if str(e) != told:
                    told = str(e)
                    log(f"cannot write status.json ({e}); kept, and written again in {delay:g} s until it is")
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def write_failure(self, exit_code: int, reason: str) -> None:
        """status.json for a job that never started."""
        self.write_status(
            {
                "exit_code": exit_code,
                "signal": None,
                "signal_name": None,
                "start_time": None,
                "end_time": time.time(),
                "reason": reason,
            },
        )
        log(f"job not started: {reason}")

    def run(self) -> int:
        lock_fd = self.take_lock()
        if lock_fd is None:
            log(f"another supervisor holds {self.path(LOCK_FILE)}")
            return EXIT_LOCKED
        try:
            self.setup_signals()
            if not contain.set_child_subreaper():  # before any child: the job's orphans come back here
                log("prctl(PR_SET_CHILD_SUBREAPER) refused: a process that leaves the job's session escapes")
            write_json_atomic(self.path(PID_FILE), os.getpid(), durable=False)
            try:
                with open(self.path(SPEC_FILE), "rb") as f:
                    self.spec = json.load(f)
                # D-7: the job, its hooks and its output files get the submitter's umask
                os.umask(int(self.spec.get("umask", 0o022)) & 0o777)
                if self.kill_flag or os.path.exists(self.path(KILL_FILE)):
                    raise _Setup(1, REASON_KILLED)
                # JOB-6, JOB-7: the profile's hooks are the outer layer, the job's -E/-Ep the inner
                why = self.run_hooks(("pre_host_exec", "pre_job_exec", "job_pre_exec"))
                if why is None and (self.kill_flag or os.path.exists(self.path(KILL_FILE))):
                    why = REASON_KILLED
                if why is not None:
                    self.run_hooks(("job_post_exec", "post_job_exec", "post_host_exec"), {"XCE_JOB_EXIT_CODE": "1"},
                                   stop_at_failure=False)
                    raise _Setup(1, why)
                self.start_job()
            except _Setup as e:
                self.write_failure(e.exit_code, e.reason)
                return EXIT_OK
            except Exception as e:  # noqa: BLE001 - recorded, the worker must hear of it
                import traceback

                traceback.print_exc()
                self.write_failure(1, f"supervisor error: {type(e).__name__}: {e}")
                return EXIT_OK
            try:
                end_time = self.supervise()
            except BaseException:
                # Never leave a job running unsupervised: end it, then record.
                import traceback

                traceback.print_exc()
                self.signal_group(signal.SIGKILL)
                end_time = time.time()
                if self.reason is None:
                    self.reason = EndReason.SUPERVISOR_ERROR
            self.finish(end_time)
            return EXIT_OK
        finally:
            os.close(lock_fd)  # exit releases it anyway; status.json is on disk by now


def main(argv: list[str] | None = None) -> int:
    """``python -m xced.worker.supervisor JOBDIR``; see the module docstring."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m xced.worker.supervisor JOBDIR\n")
        return EXIT_USAGE
    return Supervisor(args[0]).run()


if __name__ == "__main__":
    sys.exit(main())

"""The worker's handle on per-job supervisor processes (JOB-1, JOB-2, JOB-8).

Used inside the daemon's asyncio loop, Linux only. ``launch`` starts a
supervisor (``xced.worker.supervisor``) for one job in a job directory;
``attach`` finds it again after the daemon was restarted. The job directory
protocol is described in ``xced.worker.supervisor``; in short, a supervisor is
alive exactly while ``JOBDIR/lock`` is flock-ed, and it writes
``JOBDIR/status.json`` before it exits (DESIGN rule 3), so nothing here trusts a
PID on its own.

Public API::

    JobStatus                       exit status of one job, as in status.json
    SupervisorHandle.wait()         await the supervisor's exit -> JobStatus
    SupervisorHandle.started(t)     await job.json -> dict | None
    launch(jobdir, spec)            -> SupervisorHandle
    attach(jobdir)                  -> SupervisorHandle | JobStatus | None
    is_alive(jobdir)                -> bool
    signal_job(jobdir, sig)         -> bool
    request_kill(jobdir)            -> bool
    JobDirBusy                      raised by launch when a supervisor is alive there
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import signal as _signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from xced.model.jobs import EndReason
from xced.worker import contain
from xced.worker.supervisor import (
    JOB_FILE,
    KILL_FILE,
    LOCK_FILE,
    LOG_FILE,
    PID_FILE,
    SPEC_FILE,
    STATUS_FILE,
    write_json_atomic,
)

__all__ = [
    "REASON_SUPERVISOR_LOST",
    "JobDirBusy",
    "JobStatus",
    "SupervisorHandle",
    "attach",
    "is_alive",
    "launch",
    "request_kill",
    "signal_job",
]

REASON_SUPERVISOR_LOST = EndReason.SUPERVISOR_LOST

#: spec.json keys and their types; launch() rejects a spec without them.
_REQUIRED_SPEC = {
    "job_id": int,
    "index": int,
    "argv": list,
    "cwd": str,
    "env": dict,
    "stdout": str,
    "stderr": str,
}
_SPEC_DEFAULTS: dict[str, Any] = {
    "run_limit_s": None,
    "memory_limit_mb": None,
    "grace_s": 10.0,
    "kill_interval_s": 10.0,
    "uid": None,
    "gid": None,
    "groups": None,
    "hooks": None,
    "host": None,
    "host_ntasks": None,
    "umask": 0o022,
    #: the dispatch count (SCHED-4): what the worker reports the element's copy as
    "attempt": 0,
    #: the files an output path that is an existing directory gets in it (JOB-12):
    #: {"stdout": "ID.out", "stderr": "ID.err"}; None: such a path fails as before
    "dir_names": None,
    #: -oo/-eo (JOB-12, LSF bsub -oo/-eo): {"stdout": bool, "stderr": bool}, the streams whose
    #: file is truncated when the run starts; None: both appended to
    "overwrite": None,
}
#: Files a previous run in the same JOBDIR may have left; launch() removes them.
_STALE = (STATUS_FILE, JOB_FILE, PID_FILE, KILL_FILE, contain.CONTAIN_FILE)


class JobDirBusy(OSError):
    """launch() was asked to use a job directory whose supervisor is still alive (errno EBUSY)."""


@dataclass
class JobStatus:
    """How a job ended: the content of JOBDIR/status.json (JOB-1, JOB-2).

    - ``exit_code``: the exit status, or 128+N when the job died of signal N;
      127/126 when the command could not be found/executed.
    - ``signal``/``signal_name``: N and e.g. ``"SIGTERM"`` when killed by a signal.
    - ``start_time``: epoch seconds the job started; None if it never did.
    - ``end_time``: epoch seconds the job's process ended (recorded by the
      supervisor, so it is right even when nobody was watching).
    - ``reason``: ``"run limit"``, ``"killed"``, ``"cannot execute: ..."``,
      ``"supervisor lost"`` (the supervisor died without recording a status),
      or None for a normal end.
    """

    exit_code: int
    signal: int | None = None
    signal_name: str | None = None
    start_time: float | None = None
    end_time: float = 0.0
    reason: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobStatus:
        """Build from a status.json mapping; ValueError names a missing or bad field."""
        try:
            exit_code = int(data["exit_code"])
            end_time = float(data["end_time"])
        except KeyError as e:
            raise ValueError(f"status: field {e.args[0]!r} is missing") from None
        except (TypeError, ValueError) as e:
            raise ValueError(f"status: bad exit_code or end_time: {e}") from None
        sig = data.get("signal")
        start = data.get("start_time")
        return cls(
            exit_code=exit_code,
            signal=int(sig) if sig is not None else None,
            signal_name=data.get("signal_name"),
            start_time=float(start) if start is not None else None,
            end_time=end_time,
            reason=data.get("reason"),
        )

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> JobStatus:
        """Read a status.json file. Raises FileNotFoundError, or ValueError when malformed."""
        with open(path, "rb") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: not JSON: {e}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: not a JSON object")
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """The status.json shape."""
        return asdict(self)


# ---- the lock ---------------------------------------------------------------


def _lock_held(jobdir: Path) -> bool:
    """True when some process holds flock(LOCK_EX) on JOBDIR/lock (a live supervisor)."""
    try:
        fd = os.open(jobdir / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def is_alive(jobdir: str | os.PathLike[str]) -> bool:
    """True while the job directory's supervisor lives, i.e. holds JOBDIR/lock (JOB-8).

    Never raises for a missing directory or lock file (that is "not alive").
    """
    return _lock_held(Path(jobdir))


def _read_json(path: Path) -> Any:
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _read_pid(jobdir: Path) -> int | None:
    data = _read_json(jobdir / PID_FILE)
    return data if isinstance(data, int) and data > 0 else None


def _lost_status(jobdir: Path, exit_code: int = 1) -> JobStatus:
    """The status of a job whose supervisor died without recording one, after ending every
    process of the job that is left (its cgroups, and the processes its supervisor recorded in
    contain.json, with their descendants: JOB-1, issue 15), so that its slots are freed only
    once none remains. Blocks until then (at most contain.kill_recorded's 10 s)."""
    n = contain.kill_recorded(str(jobdir))
    if n:
        import logging

        logging.getLogger("xced.worker").warning("%s: its supervisor is gone; %d processes of the job ended",
                                                 jobdir, n)
    job = _read_json(jobdir / JOB_FILE)
    start = job.get("start_time") if isinstance(job, dict) else None
    return JobStatus(exit_code=exit_code, start_time=start, end_time=time.time(), reason=REASON_SUPERVISOR_LOST)


# ---- the handle -------------------------------------------------------------


class SupervisorHandle:
    """A live supervisor of one job: `jobdir`, `pid`, and how to await it (JOB-8).

    Holds a pidfd of the supervisor, so waiting works for a child (made by
    ``launch``) and for a non-child found by ``attach`` after a restart.
    """

    def __init__(self, jobdir: Path, pid: int, pidfd: int, popen: subprocess.Popen | None = None) -> None:
        self.jobdir = Path(jobdir)
        self.pid = pid
        self._pidfd: int | None = pidfd
        self._popen = popen
        self._exit: asyncio.Future[None] | None = None
        self._status: JobStatus | None = None

    def __repr__(self) -> str:
        return f"SupervisorHandle(jobdir={str(self.jobdir)!r}, pid={self.pid})"

    def _exited(self) -> asyncio.Future[None]:
        """One future per handle, done when the supervisor process has exited."""
        if self._exit is None:
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[None] = loop.create_future()
            self._exit = fut
            if self._pidfd is None:
                fut.set_result(None)
            else:
                fd = self._pidfd

                def on_exit() -> None:
                    loop.remove_reader(fd)
                    if not fut.done():
                        fut.set_result(None)

                loop.add_reader(fd, on_exit)
        return self._exit

    def _has_exited(self) -> bool:
        if self._exit is not None and self._exit.done():
            return True
        if self._pidfd is None:
            return True
        import select

        # poll, not select: select() refuses a descriptor numbered 1024 or more, which a daemon
        # with a thousand clients or jobs has (D-8)
        p = select.poll()
        p.register(self._pidfd, select.POLLIN)
        return bool(p.poll(0))

    def _reap(self) -> int | None:
        """Reap the supervisor if it is our child; its wait status as Popen.returncode, else None."""
        if self._popen is not None:
            return self._popen.poll()
        if self._pidfd is not None:
            # After a restart in place (exec) the supervisor may still be our
            # child; P_PIDFD names exactly that process, never a reused pid.
            try:
                info = os.waitid(os.P_PIDFD, self._pidfd, os.WEXITED | os.WNOHANG)
            except ChildProcessError:
                return None
            if info is not None:
                return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        return None

    def close(self) -> None:
        """Release the pidfd (wait() does this itself). Safe to call twice.

        A wait() still pending on this handle is cancelled.
        """
        if self._exit is not None and not self._exit.done() and self._pidfd is not None:
            try:
                self._exit.get_loop().remove_reader(self._pidfd)
            except RuntimeError:  # that loop is closed
                pass
            self._exit.cancel()  # pending waiters get CancelledError rather than hang
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    async def wait(self) -> JobStatus:
        """Await the supervisor's exit and return the job's status (JOB-1, JOB-8).

        Reads JOBDIR/status.json, which the supervisor writes before exiting.
        If it died without writing one (e.g. SIGKILLed), returns
        ``JobStatus(exit_code=1, reason="supervisor lost", end_time=now)``
        (exit_code 137 when the supervisor is seen to have died of SIGKILL).
        Never polls: the pidfd is registered with ``loop.add_reader``. Safe to
        call more than once and from several tasks; all get the same status.
        Raises ValueError when status.json is malformed.
        """
        if self._status is not None:
            return self._status
        await asyncio.shield(self._exited())
        if self._status is not None:
            return self._status
        rc = self._reap()
        self.close()
        try:
            status = JobStatus.from_file(self.jobdir / STATUS_FILE)
        except FileNotFoundError:
            status = await asyncio.to_thread(_lost_status, self.jobdir,
                                             128 + _signal.SIGKILL if rc == -_signal.SIGKILL else 1)
        self._status = status
        return status

    async def started(self, timeout: float) -> dict | None:
        """Wait up to `timeout` seconds for the job to start; job.json's content or None.

        Returns ``{"pid": int, "pgid": int, "start_time": float}`` once
        JOBDIR/job.json exists, or None when the supervisor exited without
        starting the job (status.json says why) or the time ran out. Checks in
        5 ms steps (start-up takes a few tens of ms).
        """
        deadline = time.monotonic() + timeout
        path = self.jobdir / JOB_FILE
        while True:
            exited = self._has_exited()  # before reading, so a job that started and ended is seen
            data = _read_json(path)
            if isinstance(data, dict):
                return data
            if exited or time.monotonic() >= deadline:
                return None
            await asyncio.sleep(0.005)


# ---- module functions -------------------------------------------------------


def _validate_spec(spec: dict[str, Any]) -> dict[str, Any]:
    for key, typ in _REQUIRED_SPEC.items():
        if key not in spec:
            raise ValueError(f"spec: field {key!r} is missing")
        if not isinstance(spec[key], typ) or (typ is int and isinstance(spec[key], bool)):
            raise ValueError(f"spec: field {key!r} must be {typ.__name__}, got {type(spec[key]).__name__}")
    if not spec["argv"] or not all(isinstance(a, str) for a in spec["argv"]):
        raise ValueError("spec: field 'argv' must be a non-empty list of strings")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in spec["env"].items()):
        raise ValueError("spec: field 'env' must map strings to strings")
    unknown = set(spec) - set(_REQUIRED_SPEC) - set(_SPEC_DEFAULTS)
    if unknown:
        raise ValueError(f"spec: unknown field(s) {sorted(unknown)}; valid: {sorted({*_REQUIRED_SPEC, *_SPEC_DEFAULTS})}")
    full = {**_SPEC_DEFAULTS, **spec}
    for key in ("run_limit_s", "memory_limit_mb", "grace_s", "kill_interval_s"):
        value = full[key]
        if value is None and key in ("run_limit_s", "memory_limit_mb"):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"spec: field {key!r} must be a number of seconds >= 0, got {value!r}")
    for key in ("uid", "gid"):
        if full[key] is not None and (isinstance(full[key], bool) or not isinstance(full[key], int)):
            raise ValueError(f"spec: field {key!r} must be an integer or null, got {full[key]!r}")
    um = full["umask"]
    if isinstance(um, bool) or not isinstance(um, int) or not 0 <= um <= 0o777:
        raise ValueError(f"spec: field 'umask' must be an integer from 0 to 0o777 (511), got {um!r}")
    groups = full["groups"]
    if groups is not None and not (isinstance(groups, list) and all(isinstance(g, int) for g in groups)):
        raise ValueError(f"spec: field 'groups' must be a list of integers or null, got {groups!r}")
    return full


def _supervisor_env() -> dict[str, str]:
    """The daemon's environment, with this xced first on PYTHONPATH so `-m` finds the same code."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = root if not old else f"{root}{os.pathsep}{old}"
    return env


#: seconds the worker waits for the supervisor launcher to answer one request (D-8)
LAUNCH_TIMEOUT_S = 10.0


class LauncherTimeout(OSError):
    """The supervisor launcher did not answer in time (it is stopped or hung); it has been
    killed and the next launch starts a new one."""


class Launcher:
    """The worker's end of a supervisor launcher process (xced.worker.launcher): forks
    supervisors instead of starting a new interpreter for each job. Started lazily,
    restarted if it died, killed and replaced when it does not answer within the timeout.
    Talked to without blocking the event loop (D-8): a stopped launcher delays only the
    launches waiting on it. Used from the event loop thread only."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen | None = None
        self._lock: asyncio.Lock | None = None  # one request at a time on the socket

    @property
    def pid(self) -> int | None:
        """The launcher process's pid while it runs (for tests that stop it), else None."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "xced.worker.launcher", str(theirs.fileno())],
                env=_supervisor_env(), stdin=subprocess.DEVNULL, close_fds=True, pass_fds=(theirs.fileno(),),
                start_new_session=True)
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock = ours

    async def spawn(self, jobdir: Path, timeout: float = LAUNCH_TIMEOUT_S) -> tuple[int, int]:
        """Fork a supervisor for `jobdir`; returns (pid, pidfd). A launcher that died is
        started again (one retry); one that does not answer within `timeout` seconds is
        killed (its supervisors live on) and LauncherTimeout is raised. Raises OSError."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            for attempt in (1, 2):
                if self._sock is None or (self._proc is not None and self._proc.poll() is not None):
                    self.close()
                    self._start()
                assert self._sock is not None
                try:
                    msg, fds = await asyncio.wait_for(self._ask(self._sock, f"{jobdir}\n".encode()), timeout)
                except asyncio.TimeoutError:
                    self.kill()
                    raise LauncherTimeout(errno.ETIMEDOUT, f"the supervisor launcher did not answer in {timeout:g} s "
                                                           f"(stopped or hung); it was replaced") from None
                except OSError:
                    self.close()
                    if attempt == 2:
                        raise
                    continue
                text = msg.decode().strip()
                if not msg:
                    self.close()
                    if attempt == 2:
                        raise OSError(errno.EPIPE, "the supervisor launcher exited")
                    continue
                if not fds:
                    raise OSError(errno.EIO, f"supervisor launcher: {text or 'no answer'}")
                return int(text), fds[0]
        raise OSError(errno.EIO, "supervisor launcher unavailable")  # pragma: no cover

    @staticmethod
    async def _ask(sock: socket.socket, line: bytes) -> tuple[bytes, list[int]]:
        """Send one request line and read the answer with its passed fd, never blocking."""
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(sock, line)
        while True:
            try:
                msg, fds, _, _ = socket.recv_fds(sock, 1024, 1)
                return msg, fds
            except (BlockingIOError, InterruptedError):
                pass
            ready = loop.create_future()
            loop.add_reader(sock.fileno(), lambda: ready.done() or ready.set_result(None))
            try:
                await ready
            finally:
                loop.remove_reader(sock.fileno())

    def kill(self) -> None:
        """Kill the launcher at once (it does not answer); the supervisors it forked live on."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        self.close()

    def close(self) -> None:
        """Close our end; the launcher exits (its supervisors keep running)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None


def _prepare(jobdir: Path, spec: dict[str, Any]) -> None:
    """Validate `spec`, make JOBDIR, check no supervisor lives there, remove what a previous
    run left, write spec.json. Raises ValueError, JobDirBusy, OSError."""
    full = _validate_spec(spec)
    if not jobdir.is_dir():
        jobdir.mkdir(mode=0o700, parents=True, exist_ok=True)
    if _lock_held(jobdir):
        raise JobDirBusy(errno.EBUSY, "a supervisor is still running in this job directory (lock held)", str(jobdir))
    for name in _STALE:
        try:
            (jobdir / name).unlink()
        except FileNotFoundError:
            pass
    write_json_atomic(str(jobdir / SPEC_FILE), full, durable=False)


def launch(jobdir: str | os.PathLike[str], spec: dict[str, Any]) -> SupervisorHandle:
    """Start the supervisor of one job as ``python -m xced.worker.supervisor JOBDIR`` (an
    interpreter start-up) and return at once (JOB-1, JOB-8); `launch_via` forks it from
    the launcher instead (a few ms).

    `spec` is the spec.json mapping (see ``xced.worker.supervisor``): required
    ``job_id, index, argv, cwd, env, stdout, stderr``; optional ``run_limit_s``
    (seconds or None, JOB-2), ``grace_s`` and ``kill_interval_s`` (seconds,
    default 10), ``uid, gid, groups``. Writes JOBDIR/spec.json atomically
    (creating JOBDIR if needed), removes status/job files a previous run left,
    and starts the supervisor in its own session with stdout/stderr to
    JOBDIR/supervisor.log. Does not wait for the job to start; see
    ``SupervisorHandle.started``.

    Raises ValueError for a bad spec (the field named), JobDirBusy when a
    supervisor is alive in JOBDIR, OSError when the directory or the process
    cannot be made.
    """
    jobdir = Path(jobdir).absolute()
    _prepare(jobdir, spec)
    log_fd = os.open(jobdir / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        popen = subprocess.Popen(
            [sys.executable, "-m", "xced.worker.supervisor", str(jobdir)],
            cwd=str(jobdir),
            env=_supervisor_env(),
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            close_fds=True,
            start_new_session=True,
        )
    finally:
        os.close(log_fd)
    # Our unreaped child: its pid cannot have been reused yet.
    pidfd = os.pidfd_open(popen.pid)
    return SupervisorHandle(jobdir, popen.pid, pidfd, popen)


async def launch_via(jobdir: str | os.PathLike[str], spec: dict[str, Any], launcher: Launcher,
                     timeout: float = LAUNCH_TIMEOUT_S, killed=None) -> SupervisorHandle:
    """As `launch`, with the supervisor forked by `launcher` (see Launcher.spawn); raises
    LauncherTimeout when the launcher does not answer within `timeout` seconds. `killed()`
    (when given) says whether the element was killed before its launch: the kill marker is
    then written before the fork, so the supervisor finds it at its start and never starts
    the job (JOB-1: a kill is never lost, nor does the command run first)."""
    jobdir = Path(jobdir).absolute()
    _prepare(jobdir, spec)
    if killed is not None and killed():
        _mark_killed(jobdir)
    pid, pidfd = await launcher.spawn(jobdir, timeout)
    return SupervisorHandle(jobdir, pid, pidfd)


def attach(jobdir: str | os.PathLike[str], *, settle_s: float = 2.0) -> SupervisorHandle | JobStatus | None:
    """Find a job's supervisor again, e.g. after the daemon restarted (JOB-8).

    - Lock held (supervisor alive): a SupervisorHandle on it. The pid comes
      from supervisor.pid; it is opened as a pidfd and then the lock is checked
      again, so the pidfd cannot name a reused pid.
    - Lock free and status.json present: ``JobStatus.from_file`` (the job ended
      while nobody watched; its real end_time is kept).
    - Lock free, no status.json, job.json present (the job started): ``JobStatus(
      exit_code=1, reason="supervisor lost", end_time=now)``, once every process of the
      job that is left has been ended (JOB-1: see ``_lost_status``).
    - Otherwise (nothing was launched here, or the supervisor died before it started
      the job): None; the job never ran, so it pends again rather than end EXIT. When a
      spec.json is there, the kill marker is left too, so that a supervisor forked only
      after this look never starts this copy of the job (it would run twice).

    A supervisor that holds the lock but has not yet written supervisor.pid
    (its first milliseconds) is waited for up to `settle_s` seconds, and so
    is a launched supervisor that has not yet taken the lock; this call blocks
    meanwhile. Raises ValueError for a malformed status.json, TimeoutError
    when the lock stays held but supervisor.pid names no live process.
    """
    jobdir = Path(jobdir).absolute()
    deadline = time.monotonic() + settle_s
    while True:
        if _lock_held(jobdir):
            pid = _read_pid(jobdir)
            if pid is not None:
                try:
                    pidfd = os.pidfd_open(pid)
                except ProcessLookupError:
                    pidfd = None
                if pidfd is not None:
                    if _lock_held(jobdir):
                        return SupervisorHandle(jobdir, pid, pidfd)
                    os.close(pidfd)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{jobdir}: lock held but supervisor.pid names no live process")
            time.sleep(0.005)
            continue
        status_path = jobdir / STATUS_FILE
        if status_path.exists():
            return JobStatus.from_file(status_path)
        if (jobdir / SPEC_FILE).exists():
            if _read_pid(jobdir) is None and time.monotonic() < deadline:
                # Launched but the supervisor may not have taken the lock yet.
                time.sleep(0.005)
                continue
            if not (jobdir / JOB_FILE).exists():
                try:  # a supervisor forked after this look (a launcher slowed as its daemon died)
                    _mark_killed(jobdir)  # finds the marker and never starts the job: it pends again
                except OSError:
                    pass
                contain.kill_recorded(str(jobdir))  # what it may have forked into the job's cgroup
                return None  # the job itself never started (D-8: it pends again, never EXIT)
            return _lost_status(jobdir)
        return None


def signal_job(jobdir: str | os.PathLike[str], sig: int) -> bool:
    """Send `sig` to the job's process group, e.g. SIGSTOP/SIGCONT (D-5 USUSP); True if sent.

    Only while the supervisor is alive (lock held), the job has started
    (job.json) and not yet ended (no status.json). Why the pgid from job.json
    is safe to signal: the job leads its own process group (pgid == its pid);
    a process-group id cannot be reused while any member of the group exists,
    and the leader stays an unreaped zombie of the supervisor until the
    supervisor has SIGKILLed the group and written status.json. So while the
    lock is held and there is no status.json, the pgid is the job's. The only
    gap is the instant between our check and the kill(2), and a reuse there
    would need the whole pid space to wrap meanwhile.

    Returns False (never raises) when the job is not running; PermissionError
    propagates when the daemon may not signal the job.
    """
    jobdir = Path(jobdir)
    if not _lock_held(jobdir):
        return False
    job = _read_json(jobdir / JOB_FILE)
    if not isinstance(job, dict) or not isinstance(job.get("pgid"), int) or job["pgid"] <= 1:
        return False
    if (jobdir / STATUS_FILE).exists():
        return False
    try:
        os.killpg(job["pgid"], sig)
    except ProcessLookupError:
        return False
    # and the job's processes that left its group (setsid), as its supervisor last saw them
    rec = contain.read_record(str(jobdir)) or {}
    table = contain.proc_table()
    others = [(int(p), int(st)) for p, st in rec.get("procs") or []
              if int(p) in table and table[int(p)].pgrp != job["pgid"]]
    contain.signal_procs(others, sig)
    return True


def _mark_killed(jobdir: Path) -> None:
    """Write JOBDIR/kill_requested, the marker a supervisor reads at its start and before it
    starts the job (it then never does)."""
    os.close(os.open(jobdir / KILL_FILE, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))


def request_kill(jobdir: str | os.PathLike[str]) -> bool:
    """Ask the supervisor to end the job with LSF's kill sequence (bkill); True if it will.

    The sequence (in the supervisor): SIGINT, SIGTERM after kill_interval_s,
    SIGKILL after another kill_interval_s, each to the job's process group
    followed by SIGCONT; the job's reason becomes "killed" unless the run
    limit (JOB-2) already set one.

    Writes the JOBDIR/kill_requested marker, then sends SIGUSR1 to the live
    supervisor through a pidfd (checked against the lock, so never to a
    reused pid). A supervisor still starting up finds the marker instead,
    and then does not start the job at all. Returns False when the job has
    already ended (status.json) or its supervisor is gone.
    """
    jobdir = Path(jobdir)
    if (jobdir / STATUS_FILE).exists() or not (jobdir / SPEC_FILE).exists():
        return False
    _mark_killed(jobdir)
    if not _lock_held(jobdir):
        # Not started yet (it will see the marker), or already gone.
        return _read_pid(jobdir) is None and not (jobdir / STATUS_FILE).exists()
    pid = _read_pid(jobdir)
    if pid is None:
        return True  # holds the lock, has not installed its handler yet: it will see the marker
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        if not _lock_held(jobdir):
            return False
        _signal.pidfd_send_signal(pidfd, _signal.SIGUSR1)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(pidfd)

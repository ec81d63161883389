"""The worker role in the daemon's own process (D-1): starts each element under its
supervisor, watches it, and reports to the controller. It never touches the store
(DESIGN rule 3): everything durable about a running job is in its job directory.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import pwd
import stat
import signal as _signal
import time
from pathlib import Path

from xced.model.jobs import output_file_name
from xced.model.state import SCRIPT_ARG, with_script
from xced.worker import procs
from xced.worker.env import (element_environment, expand_output_path, hosts_per_slot, task_environment,
                             task_starter_line)

#: signals that ask a job to end (LSF: what a pending job takes, as a kill)
_ENDING_SIGNALS = frozenset({_signal.SIGKILL, _signal.SIGTERM, _signal.SIGINT})
log = logging.getLogger("xced.worker")


def write_user_file(path: Path, text: str, uid: int | None, gid: int | None) -> None:
    """Write a file of the job directory that the job reads (the host file): mode 0600,
    handed to the job's user when the daemon runs as root (D-7). Never through a symlink."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        if uid is not None and os.geteuid() == 0:
            os.fchown(fd, uid, gid if gid is not None else -1)
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def write_script(jobdir: Path, text: str, uid: int | None, gid: int | None) -> Path:
    """JOBDIR/script: the job's script (JOB-12: one read from standard input, `bsub <
    job.lsf`, kept with the job), rewritten at each start of the element. Mode 0700 and
    handed to the job's user when the daemon runs as root, so that only that user (and
    root) can read it (D-7); JOBDIR stays the daemon's, so the user cannot replace it. Never
    written through a symlink. Returns its path."""
    path = jobdir / "script"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o700)
    try:
        if uid is not None and os.geteuid() == 0:
            os.fchown(fd, uid, gid if gid is not None else -1)
        os.fchmod(fd, 0o700)
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)
    return path


def write_hostfile(jobdir: Path, alloc, uid: int | None, gid: int | None) -> Path:
    """JOBDIR/hostfile (LSB_DJOB_HOSTFILE): one host name per slot of `alloc`, the job user's."""
    path = jobdir / "hostfile"
    write_user_file(path, "".join(h + "\n" for h in hosts_per_slot(alloc)), uid, gid)
    return path


def groups_of(user: str, uid: int | None, gid: int | None) -> list[int] | None:
    """The supplementary groups a job of `user` runs with (D-6), or None when it runs as the daemon's user."""
    return os.getgrouplist(user, gid) if uid is not None and gid is not None else None


def spec_attempt(jd: Path) -> int:
    """The attempt (dispatch count, SCHED-4) the element's spec.json in job directory `jd`
    names; 0 when it names none or cannot be read."""
    try:
        return int(json.loads((jd / "spec.json").read_bytes()).get("attempt") or 0)
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def _outputs(started: dict) -> tuple[str, str] | None:
    """The (stdout, stderr) paths a supervisor's job.json names (JOB-12), or None."""
    out, err = started.get("stdout"), started.get("stderr")
    return (out, err) if isinstance(out, str) and isinstance(err, str) and out and err else None


#: seconds a start waits for a stale copy of the same element (fenced, SCHED-4) to end in
#: the job directory it needs, polled every STALE_POLL_S
STALE_WAIT_S = 120.0
STALE_POLL_S = 0.2


class LocalWorker:
    """Serves host `host` for `controller`; job directories under `<TopDir>/jobs/ID/INDEX`."""

    def __init__(self, host: str, topdir: Path, controller, client_env: dict[str, str] | None = None) -> None:
        """`client_env`: how a job on this host reaches the daemon (XCE_SOCKET or
        XCE_CONTROLLER), for `xcecli launch` from inside the job; the environments themselves
        are built by xced.worker.env."""
        self.host = host
        self.jobs_dir = topdir / "jobs"
        self.controller = controller
        self.client_env = dict(client_env or {})
        self._tasks: set[asyncio.Task] = set()
        #: elements whose supervisor is being launched (spec.json not written yet), and whether
        #: a kill arrived meanwhile: delivered as soon as the launch has written the spec
        self._launching: dict[tuple[int, int], bool] = {}
        self.launcher = procs.Launcher()
        self.task_starter = task_starter_line()
        self._groups: dict[tuple[int, int], bool] = {}
        #: launch failures already logged, by message: one line per distinct failure (DISPATCH-2)
        self._failures_logged: set[str] = set()

    @property
    def launch_timeout_s(self) -> float:
        """Seconds to wait for the supervisor launcher before replacing it (D-8): xce.yaml's
        launch_timeout in the daemon (a config applied live changes it), else the default."""
        config = getattr(self.controller, "config", None)
        return config.settings.launch_timeout_s if config is not None else procs.LAUNCH_TIMEOUT_S

    def _log_once(self, why: str, ref: str) -> None:
        """Log a launch failure the first time its message is seen; a dispatch retried after
        the same failure adds nothing to the log (its pend reason and history say it)."""
        if why in self._failures_logged:
            return
        if len(self._failures_logged) > 1000:  # bounded: many distinct failures are logged anew
            self._failures_logged.clear()
        self._failures_logged.add(why)
        log.error("%s (job %s); each later start that fails the same way is in the job's history only", why, ref)

    def jobdir(self, job_id: int, index: int) -> Path:
        return self.jobs_dir / str(job_id) / str(index)

    def make_jobdir(self, job_id: int, index: int, uid: int | None, gid: int | None) -> Path:
        """Make (or fix) `jobs/ID` and `jobs/ID/INDEX` so that only the job's user and the
        daemon's user can read them (D-7). They stay the daemon's (root's) to write, so a
        job's user can never forge its spec.json or status.json. A job of another user (the
        daemon runs as root) gets group = the user's primary group and mode 0750 when that
        group is the user's own (useradd's default), else mode 0711 (reachable by name,
        listable by nobody else); every file in it is 0600 of its reader. Otherwise 0700."""
        mode, group = 0o700, -1
        if uid is not None and gid is not None and os.geteuid() == 0 and uid != 0:
            if self._private_group(uid, gid):
                mode, group = 0o750, gid
            else:
                mode, group = 0o711, 0
        jd = self.jobdir(job_id, index)
        for d in (jd.parent, jd):
            try:
                os.mkdir(d, 0o700)
            except FileExistsError:
                pass
            except FileNotFoundError:  # jobs/ itself (a worker's first job): 0711, D-7
                self.jobs_dir.mkdir(mode=0o711, parents=True, exist_ok=True)
                os.mkdir(d, 0o700)
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                if group != -1:
                    os.fchown(fd, 0, group)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        return jd

    def _private_group(self, uid: int, gid: int) -> bool:
        """True when group `gid` is user `uid`'s alone: no other member, no other user's
        primary group (a user-private group). Cached per (uid, gid)."""
        key = (uid, gid)
        if key not in self._groups:
            import grp

            try:
                name = pwd.getpwuid(uid).pw_name
                members = set(grp.getgrgid(gid).gr_mem)
            except KeyError:
                self._groups[key] = False
            else:
                self._groups[key] = members <= {name} and not any(
                    p.pw_gid == gid and p.pw_uid != uid for p in pwd.getpwall())
        return self._groups[key]

    def _spawn(self, coro) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    # ---------------------------------------------------------------- start

    def start(self, info) -> None:
        """Start one element (a StartInfo from the controller): write its host file and
        spec, launch its supervisor, and watch it. Failure to launch -> on_start_failed."""
        jd = self.jobdir(info.job_id, info.index)
        try:
            stale = procs.is_alive(jd)
        except OSError:  # a job directory that cannot be looked at: make_jobdir below says why
            stale = False
        if stale:
            # a stale copy of this element (another attempt, fenced at this worker's rejoin,
            # SCHED-4) is still ending in the job directory: start once it has ended
            self._spawn(self._start_after_stale(info, jd))
            return
        try:
            self.make_jobdir(info.job_id, info.index, info.run_uid, info.run_gid)
            hostfile = write_hostfile(jd, info.alloc, info.run_uid, info.run_gid)
            argv = list(info.argv)
            if info.script is not None or any(SCRIPT_ARG in a for a in argv):  # JOB-12
                if info.script is None:
                    raise ValueError("the job's script is not in the store (the daemon's log says more)")
                argv = with_script(argv, str(write_script(jd, info.script, info.run_uid, info.run_gid)))
            # JOB-12: -o/-e with %J, %I, %% expanded and DIR/ resolved to DIR/ID.out here; a
            # path naming an existing directory without the slash is resolved by the
            # supervisor, as the job's user (dir_names below)
            own_out = expand_output_path(info.stdout, info.job_id, info.index, info.cwd) if info.stdout else None
            own_err = (expand_output_path(info.stderr, info.job_id, info.index, info.cwd, "stderr")
                       if info.stderr else None)
            out = own_out or str(jd / "stdout")
            err = own_err or (out if info.stdout else str(jd / "stderr"))
            env = element_environment(info, hostfile, self.client_env, self.task_starter, own_out, own_err)
            # the job directory stays the daemon's: a job's user must not be able to forge
            # spec.json, job.json or status.json (D-7: see make_jobdir)
            spec = {
                "job_id": info.job_id, "index": info.index, "argv": argv, "cwd": info.cwd,
                "env": env, "stdout": out, "stderr": err, "run_limit_s": info.run_limit_s,
                "memory_limit_mb": info.memory_limit_mb, "hooks": info.hooks or None, "host": self.host,
                "host_ntasks": dict(info.alloc).get(self.host, 1),
                "grace_s": info.grace_s, "kill_interval_s": info.kill_interval_s,
                "uid": info.run_uid, "gid": info.run_gid,
                "groups": groups_of(info.run_as, info.run_uid, info.run_gid),
                "umask": info.umask, "attempt": info.attempt,
                "dir_names": {"stdout": output_file_name(info.job_id, info.index, "stdout"),
                              "stderr": output_file_name(info.job_id, info.index, "stderr")},
                # -oo/-eo (LSF bsub -oo/-eo): the element's own file, truncated at this run's start
                "overwrite": {"stdout": bool(info.stdout_overwrite and own_out),
                              "stderr": bool(info.stderr_overwrite and own_err)},
            }
        except (OSError, ValueError) as e:
            self._start_failed(info, e)
            return
        self._launching[(info.job_id, info.index)] = False
        self._spawn(self._launch(info, jd, spec))

    async def _start_after_stale(self, info, jd: Path) -> None:
        """Start `info` once the stale copy in `jd` has ended (the controller killed it when
        this worker rejoined, SCHED-4); after STALE_WAIT_S the start fails (retryable)."""
        deadline = time.monotonic() + STALE_WAIT_S
        log.info("start of %s[%s] (attempt %d) waits for the stale copy of attempt %d to end", info.job_id,
                 info.index, info.attempt, spec_attempt(jd))
        while procs.is_alive(jd):  # it was looked at before: an OSError here is a fault to see
            if time.monotonic() > deadline:
                self._start_failed(info, OSError(f"a stale copy of the job (attempt {spec_attempt(jd)}) still runs "
                                                 f"in {jd} after {STALE_WAIT_S:.0f} s"))
                return
            await asyncio.sleep(STALE_POLL_S)
        self.start(info)

    def _start_failed(self, info, e: Exception) -> None:
        why = f"cannot launch on {self.host}: {e}"
        self._log_once(why, f"{info.job_id}[{info.index}]")
        self.controller.on_start_failed(info.job_id, info.index, why, attempt=info.attempt)

    async def _launch(self, info, jd: Path, spec: dict) -> None:
        """Fork the element's supervisor through the launcher, without blocking the loop. A
        launcher that does not answer is replaced (procs.LauncherTimeout); it may have
        forked the supervisor before it hung, so the job directory is looked at first: a
        supervisor found there is watched (the job never runs twice), else the element goes
        back to PEND and is dispatched again (D-8)."""
        key = (info.job_id, info.index)
        try:
            handle = await procs.launch_via(jd, spec, self.launcher, self.launch_timeout_s,
                                            killed=lambda: bool(self._launching.get(key)))
        except procs.LauncherTimeout as e:
            if self._launching.pop(key, False):
                procs.request_kill(jd)  # it may have forked the supervisor: the marker stops it
            found = await asyncio.to_thread(procs.attach, jd)
            if found is None:
                self._start_failed(info, e)
            elif isinstance(found, procs.JobStatus):
                self._report(info.job_id, info.index, found, info.attempt)
            else:
                await self._watch(info.job_id, info.index, found, info.attempt)
            return
        except (OSError, ValueError) as e:
            self._launching.pop(key, None)
            self._start_failed(info, e)
            return
        if self._launching.pop(key, False):  # killed while it was being launched
            procs.request_kill(jd)
        await self._watch(info.job_id, info.index, handle, info.attempt)

    async def _watch(self, job_id: int, index: int, handle, attempt: int) -> None:
        """Report the start and then the end of the element of dispatch `attempt` (SCHED-4)."""
        started = await handle.started(timeout=60.0)
        if started is not None:
            self.controller.on_started(job_id, index, started["start_time"], started.get("containment"),
                                       attempt=attempt, outputs=_outputs(started))
        st = await handle.wait()
        self._report(job_id, index, st, attempt)

    def _report(self, job_id: int, index: int, st, attempt: int) -> None:
        from xced.model.state import EndStatus

        if st.reason == procs.REASON_SUPERVISOR_LOST and not (self.jobdir(job_id, index) / "job.json").exists():
            # the supervisor died before it started the job: it never ran, so it pends again
            self.controller.on_start_failed(job_id, index, f"the supervisor on {self.host} died before it started "
                                                           f"the job", attempt=attempt)
            return
        self.controller.on_finished(job_id, index, EndStatus(
            st.exit_code, st.signal_name, st.start_time, st.end_time if st.end_time else time.time(), st.reason),
            attempt=attempt)

    # ---------------------------------------------------------------- tasks (xcecli launch)

    async def launch_task(self, task) -> dict:
        """Run one task (a TaskSpec) of a running job on this host under its own supervisor
        in JOBDIR/tasks/ID, and return how it ended with its output (at most 1 MB). Its
        spec.json names the element's attempt, which a rejoin reports (SCHED-4 fencing)."""
        td = self.jobdir(task.job_id, task.index) / "tasks" / str(task.task_id)
        try:
            self.make_jobdir(task.job_id, task.index, task.run_uid, task.run_gid)
            (td.parent).mkdir(mode=0o700, exist_ok=True)
            td.mkdir(mode=0o700, exist_ok=True)
            out = td / "output"
            jd = self.jobdir(task.job_id, task.index)
            if not (jd / "hostfile").exists():  # a host other than the job's first: LSB_DJOB_HOSTFILE here too
                write_hostfile(jd, task.alloc, task.run_uid, task.run_gid)
            env = task_environment(task, self.host, jd, self.client_env, self.task_starter)
            spec = {"job_id": task.job_id, "index": task.index, "argv": list(task.argv), "cwd": task.cwd,
                    "env": env, "stdout": str(out), "stderr": str(out), "run_limit_s": task.run_limit_s,
                    "kill_interval_s": task.kill_interval_s, "uid": task.run_uid, "gid": task.run_gid,
                    "groups": groups_of(task.run_as, task.run_uid, task.run_gid), "umask": task.umask,
                    "attempt": task.attempt}
            handle = await procs.launch_via(td, spec, self.launcher, self.launch_timeout_s)
        except (OSError, ValueError) as e:
            return {"host": self.host, "task_id": task.task_id, "exit_code": 1, "signal": None,
                    "reason": f"cannot start the task on {self.host}: {e}", "output": ""}
        st = await handle.wait()
        try:
            with open(td / "output", "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 2**20))
                output = f.read().decode(errors="replace")
        except OSError:
            output = ""
        return {"host": self.host, "task_id": task.task_id, "exit_code": st.exit_code, "signal": st.signal_name,
                "reason": st.reason, "output": output}

    def end_tasks(self, job_id: int, index: int, attempt: int | None = None) -> None:
        """The job's script ended (or it is being killed): end its tasks on this host; with
        `attempt`, only the tasks of that dispatch (a stale copy's, SCHED-4 fencing)."""
        tasks = self.jobdir(job_id, index) / "tasks"
        if not tasks.is_dir():
            return
        for td in tasks.iterdir():
            if procs.is_alive(td) and (attempt is None or spec_attempt(td) == attempt):
                procs.request_kill(td)

    # ---------------------------------------------------------------- after a restart

    def reattach(self, job_id: int, index: int, attempt: int | None = None) -> None:
        """JOB-8: find the element's supervisor after a daemon restart. A live one is watched
        again; one that ended while the daemon was down is reported with its recorded status
        and end time; one never launched goes back to PEND, and so does one whose job
        directory holds another `attempt`'s copy (the start of this one never reached this
        host, SCHED-4). Done in a task: finding the supervisor may wait up to 2 s for one in
        its first milliseconds, which runs in a thread so that the event loop answers
        meanwhile (issue 15: restart time, D-8)."""
        self._spawn(self._reattach(job_id, index, attempt))

    async def _reattach(self, job_id: int, index: int, expected: int | None = None) -> None:
        jd = self.jobdir(job_id, index)
        attempt = spec_attempt(jd)
        if expected is not None and attempt != expected and (jd / "spec.json").exists():
            self.controller.on_start_failed(job_id, index, f"the start of attempt {expected} never reached "
                                                           f"{self.host} (its job directory holds attempt {attempt})",
                                            attempt=expected)
            return
        try:
            res = await asyncio.to_thread(procs.attach, jd)
        except (OSError, ValueError) as e:  # TimeoutError is an OSError
            log.error("re-attaching %s[%s]: %s; its supervisor is taken as lost", job_id, index, e)
            res = procs.JobStatus(exit_code=1, end_time=time.time(), reason=procs.REASON_SUPERVISOR_LOST)
        if res is None:
            self.controller.on_start_failed(job_id, index, "not started before the daemon stopped", attempt=attempt)
        elif isinstance(res, procs.JobStatus):
            try:
                started = json.loads((jd / "job.json").read_bytes())
            except (OSError, ValueError):
                started = None
            if isinstance(started, dict) and started.get("start_time") is not None:
                # ended while the daemon was down: its start (and containment, JOB-1) is known too
                self.controller.on_started(job_id, index, started["start_time"], started.get("containment"),
                                           attempt=attempt, outputs=_outputs(started))
            self._report(job_id, index, res, attempt)
        else:
            await self._watch(job_id, index, res, attempt)

    # ---------------------------------------------------------------- control

    def kill(self, job_id: int, index: int, attempt: int | None = None) -> bool:
        """Ask the element's supervisor to end it (bkill's sequence, procs.request_kill); True if
        it will. An element still being launched (its spec not yet written, so no supervisor to
        ask) is killed as soon as its launch has written it: the kill is never lost. With
        `attempt` (SCHED-4 fencing): only a copy of that dispatch; another is left alone."""
        key = (job_id, index)
        if attempt is not None:
            jd = self.jobdir(job_id, index)
            return (jd / "spec.json").exists() and spec_attempt(jd) == attempt and procs.request_kill(jd)
        if key in self._launching:
            self._launching[key] = True
            return True
        return procs.request_kill(self.jobdir(job_id, index))

    def signal(self, job_id: int, index: int, sig: int) -> bool:
        """Send `sig` to the element's job (procs.signal_job); True if it was sent, or will be.
        A KILL, TERM or INT that reaches an element still starting (being launched, or its
        supervisor not yet past starting the job: no job.json and no status.json) ends it as
        `kill` does, as soon as it can: such a signal asks the job to end, and there is no
        process yet to take it, so it would be lost and the job run on (LSF bkill -s KILL; a
        pending job takes these three signals as a kill too). Another signal to a job that has
        not started is not sent (False)."""
        from xced.worker.supervisor import JOB_FILE, STATUS_FILE

        jd = self.jobdir(job_id, index)
        if procs.signal_job(jd, sig):
            return True
        if sig in _ENDING_SIGNALS and ((job_id, index) in self._launching
                                       or not ((jd / JOB_FILE).exists() or (jd / STATUS_FILE).exists())):
            return self.kill(job_id, index)
        return False

    def read_output(self, job_id: int, index: int, stream: str, max_bytes: int) -> dict | None:
        """The element's stdout or stderr so far (`xcecli peek`, LSF bpeek): None when it has
        none yet (not launched here: no spec.json); else {"text": str, "skipped": int}, the
        file's last `max_bytes` at most, started at a line boundary when it was cut (`skipped`:
        the bytes not shown, 0 when the whole file is there), or {"error": str} saying why the
        file cannot be read (it could not be opened, is not a regular file of the job's user,
        or the job's start failed before it). The file is read only when it is a regular file
        of the job's own user, opened without following a symlink at its name and without
        blocking: the daemon reads as root, and an -o path is the user's to point anywhere (D-7)."""
        jd = self.jobdir(job_id, index)
        try:
            spec = json.loads((jd / "spec.json").read_bytes())
        except (OSError, ValueError):
            return None
        path = spec.get(stream)
        started = False
        try:  # the path the supervisor opened (a -o DIR resolved to DIR/ID.out, JOB-12)
            path = json.loads((jd / "job.json").read_bytes()).get(stream) or path
            started = True
        except (OSError, ValueError, AttributeError):
            pass
        if not started:
            try:  # the start failed (an output it could not open ...): its reason is the answer
                why = json.loads((jd / "status.json").read_bytes()).get("reason")
            except (OSError, ValueError, AttributeError):
                why = None
            if why:
                return {"error": f"the job did not start: {why}"}
        owner = spec.get("uid") if spec.get("uid") is not None else os.geteuid()
        if isinstance(path, str) and not os.path.isabs(path):
            path = os.path.join(str(spec.get("cwd") or "/"), path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            if not started and isinstance(e, FileNotFoundError):
                return None  # launched, not yet started
            why = "it is a symbolic link, which is not followed" if e.errno == errno.ELOOP else e.strerror
            return {"error": f"{path}: {why}"}
        except (TypeError, ValueError):
            return None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != owner:
                log.warning("peek of %s[%s]: %s is not a regular file of uid %s; not read", job_id, index, path, owner)
                what = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file" \
                    if not stat.S_ISREG(st.st_mode) else "not the job user's file"
                return {"error": f"{path}: {what}, which is not read"}
            start = max(0, st.st_size - max_bytes)
            f.seek(start)
            data = f.read(max_bytes)
            if start:
                nl = data.find(b"\n")
                if 0 <= nl < len(data) - 1:
                    data = data[nl + 1:]
                    start += nl + 1
            return {"text": data.decode(errors="replace"), "skipped": start}

    async def close(self) -> None:
        """Stop watching (the jobs and their supervisors keep running, JOB-8)."""
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.launcher.close()


"""What users do to jobs (CLI-3; LSF bkill, bstop, bresume, brequeue, bwait, bpeek, blaunch):
each checks who may, through the policy of the config in force (`self.policy`, RBAC-1,
RBAC-3), then is one stimulus of the state machine. Kill needs `job:kill`, stop and resume
`job:modify`, requeue `job:requeue`: the job's owner, or who holds it over the job's project
(its project admins, a role bound at or above it, the cluster admins); releasing a system
hold needs `cluster:admin`. In LSF, bkill of another user's job likewise needs the LSF
administrator or the queue / user-group administrator.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread and changes state only through the shell (`_commit`).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import secrets

from xced.api.errors import Conflict, NotFound, PermissionDenied
from xced.controller import machine as m
from xced.controller.retry import STORE_ERRORS
from xced.model.jobs import ACTIVE, FINISHED, PENDING, JobState
from xced.model.spec import EffectiveJob
from xced.model.state import Element, Job
from xced.policy.rbac import Caller
from xced.store.base import token_hash

S = JobState


def _subject(job, index: int | list[int] | None) -> tuple[str, str]:
    """What a refusal names: the element asked for (`12[3]`, its state), the elements of a
    list (`12[1-3,7]`, their states: "DONE, EXIT") or the job (its state)."""
    if isinstance(index, list):
        if len(index) == 1:
            index = index[0]
        else:
            from xced.api.arrays import format_runs, runs_of

            states = sorted({job.elements[i].state.value for i in index if i in job.elements})
            return f"{job.id}[{format_runs(runs_of(index))}]", ", ".join(states)
    if index is not None and index in job.elements:
        e = job.elements[index]
        return e.ref, e.state.value
    return str(job.id), job.state().value


class ActionsMixin:
    """What users do to jobs (CLI-3; LSF bkill, bstop, bresume, brequeue, bwait, bpeek, blaunch): a part of the Controller."""

    def _begin_action(self, job_id: int, caller: Caller, permission: str, doing: str) -> tuple[Job, str]:
        """The job of a user action (kill/stop/resume/requeue) once the caller holds
        `permission` on it (`Policy.authorize_job`: its owner, or who holds it over the job's
        project), and the actor name its events carry. Raises NotFound, PermissionDenied
        naming who may `doing` ("kill it")."""
        job = self.job(job_id)
        self.policy.authorize_job(caller, permission, job.user, job.spec.project, f"job {job.id}", doing)
        return job, f"user:{caller.user}"

    def kill(self, job_id: int, index: int | list[int] | None, caller: Caller, record_done: bool = False,
             force: bool = False, comment: str | None = None) -> list[str]:
        """`xcecli kill` (LSF bkill): pending elements end EXIT at once; running ones get
        INT, TERM, KILL spaced by kill_interval (the supervisor runs the sequence) and end when
        their processes do. With `record_done` (LSF `bkill -d`: "Kills the jobs, and records
        the jobs as DONE after the jobs exit") each element ends DONE instead, its reason
        ending "recorded DONE (bkill -d)" (machine.Kill). With `force` (LSF `bkill -r`:
        "Removes a job from the LSF system without waiting for the job to terminate in the
        operating system") every unfinished element is EXIT at once, "removed by USER (bkill
        -r); its processes are being killed", its slots free for the session this starts,
        and the sequence still goes to its processes. `record_done` and `force` exclude
        each other (the route refuses both). `comment` (LSF `bkill -C kill_reason`) is
        recorded with the kill ("; kill reason: TEXT", machine.Kill). Needs job:kill (RBAC-3; PermissionDenied naming
        who may). Raises Conflict when every element has finished."""
        job, actor = self._begin_action(job_id, caller, "job:kill", "kill it")
        changes = self._changes(self._elements(job, index),
                                self._stim(m.Kill, "kill", actor, user=caller.user, record_done=record_done,
                                           force=force, comment=comment))
        if not changes:
            ref, state = _subject(job, index)
            raise Conflict(f"job {ref} has already finished ({state}); nothing to kill")
        self._commit(changes)
        self._job_changed(job)
        self.kick()  # a killed pending job may have been the head that blocked its queue
        return [e.ref for e, _, _ in changes]

    def send_signal(self, job_id: int, index: int | list[int] | None, signum: int, name: str,
                    caller: Caller) -> tuple[str, list[str]]:
        """`xcecli kill -s SIG` (LSF `bkill -s`): signal `signum` (`name`, "SIGUSR1") to the
        job or element `index`. Returns (the action it was, for the answer: "kill", or "stop"
        / "resume" for STOP, TSTP and CONT, which are `stop` and `resume` so that the state
        follows, USUSP and back; the elements acted on).

        Running and stopped elements get the signal on their first host, to their process
        group, with a SIGNAL event ("signal SIGUSR1 requested by USER"; LSF's bhist shows
        "Signal <USR1> requested by user or administrator <USER>"); the job goes on unless
        the signal ends it, and then ends as its processes do (EXIT, killed by that signal).
        No state changes here, so this is a note of the shell, not a transition. Pending
        elements take only KILL, TERM or INT, which kill them (EXIT at once), as LSF sends
        pending jobs no other signal ("You cannot send arbitrary signals to a pending job":
        https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=execution-send-signal-job).
        Needs job:kill (RBAC-3; PermissionDenied naming who may). Raises Conflict when no
        element could take it (all finished, or pending and another signal)."""
        import signal as _sig

        if signum in (_sig.SIGSTOP, _sig.SIGTSTP):
            return "stop", self.stop(job_id, index, caller)
        if signum == _sig.SIGCONT:
            return "resume", self.resume(job_id, index, caller)
        job, actor = self._begin_action(job_id, caller, "job:kill", "send it a signal")
        els = self._elements(job, index)
        pending = [e for e in els if e.state in PENDING]
        changes = []
        if pending and signum in (_sig.SIGKILL, _sig.SIGTERM, _sig.SIGINT):
            changes += self._changes(pending, self._stim(m.Kill, "kill", actor, user=caller.user))
        stim = self._stim(m.Kill, "signal", actor, user=caller.user)  # the request the events name
        for e in els:
            if e.state in ACTIVE:
                changes.append((e, stim, m.Outcome(e.state, {}, {}, [m.Event(
                    "SIGNAL", None, None, f"signal {name} requested by {caller.user}")], [m.SignalElement(signum)])))
        if not changes:
            ref, state = _subject(job, index)
            if pending:
                raise Conflict(f"job {ref} is pending ({state}): only KILL, TERM or INT (which kill it), STOP or "
                               f"CONT can be sent to a pending job, as in LSF; {name} goes to running jobs")
            raise Conflict(f"job {ref} has already finished ({state}); nothing to signal")
        self._commit(changes)
        self._job_changed(job)
        self.kick()
        return "kill", [e.ref for e, _, _ in changes]

    def stop(self, job_id: int, index: int | list[int] | None, caller: Caller) -> list[str]:
        """`xcecli stop` (LSF bstop): a running element is stopped (SIGSTOP, USUSP); a pending
        one gets a `user` hold (PSUSP). Needs job:modify (RBAC-3; PermissionDenied naming who may).
        Raises Conflict when nothing could be stopped."""
        job, actor = self._begin_action(job_id, caller, "job:modify", "stop it")
        changes = self._changes(self._elements(job, index), self._stim(m.Stop, "stop", actor))
        if not changes:
            ref, state = _subject(job, index)
            raise Conflict(f"job {ref}: nothing to stop (state {state})")
        self._commit(changes)
        self.kick()  # a held head no longer blocks its queue
        return [e.ref for e, _, _ in changes]

    def resume(self, job_id: int, index: int | list[int] | None, caller: Caller) -> list[str]:
        """`xcecli resume` (LSF bresume): USUSP -> RUN (SIGCONT); releases the `user` hold of a
        PSUSP element, never a `system` hold (D-5). Needs job:modify (RBAC-3; PermissionDenied
        naming who may). Raises Conflict when nothing resumes."""
        job, actor = self._begin_action(job_id, caller, "job:modify", "resume it")
        els = self._elements(job, index)
        changes = self._changes(els, self._stim(m.Resume, "resume", actor))
        if not changes:
            if any(e.state is S.PSUSP and "system" in e.holds for e in els):
                raise Conflict(f"job {job_id} is held by the system, not by its user; an admin releases it with "
                               f"`xcecli release {job_id}`")
            ref, state = _subject(job, index)
            raise Conflict(f"job {ref}: nothing to resume (state {state}); only stopped jobs resume")
        self._commit(changes)
        self.kick()
        return [e.ref for e, _, _ in changes]

    def release(self, job_id: int, index: int | list[int] | None, caller: Caller) -> list[str]:
        """`xcecli release` (Slurm scontrol release): an admin releases the `system` hold of PSUSP
        elements (D-5: a user's resume never does), e.g. after declined dispatches (DISPATCH-2)
        or a config that refused the job (CFG-3). The job is merged again with the config in
        force first; if that still refuses it, the hold stays (Conflict naming why). Needs
        cluster:admin (PermissionDenied naming the admins). Raises Conflict when nothing is
        held by the system."""
        job = self.job(job_id)
        self.policy.authorize(caller, "cluster:admin", None,
                              "release a system hold (a hold of your own goes with `xcecli resume`)")
        els = [e for e in self._elements(job, index) if e.state is S.PSUSP and "system" in e.holds]
        if not els:
            raise Conflict(f"job {job_id}: nothing is held by the system")
        new, rr = job.effective, None
        if all(e.state in PENDING for e in job.elements.values()):  # none started: merge it again now
            why, merged, rr = self._remerged(job)
            if why is not None:
                raise Conflict(f"job {job_id}: the config in force still refuses it: {why}")
            new = merged or new
        new = new.accepted()
        changes = self._changes(els, self._stim(m.Release, "release", f"admin:{caller.user}",
                                                reason="system hold released by an admin"))
        write, remember = self._respec([(job, new, rr)])
        self._commit(changes, write, memory=remember)
        self.kick()
        return [e.ref for e, _, _ in changes]

    def requeue(self, job_id: int, index: int | list[int] | None, caller: Caller, hold: bool = False) -> list[str]:
        """`xcecli requeue` (LSF brequeue): a running element is killed and returns to PEND
        with the same ID and submit time; a finished one returns to PEND at once. With `hold`
        (LSF `brequeue -H`: "Requeues jobs to PSUSP job status") each returns PSUSP instead,
        held by its user, until `bresume` / `xcecli resume` releases it. It is merged
        again with the config in force (MERGE-1, CFG-3), as a pending job is when the config
        changes (unless other elements of its array still run: they share one set of values).
        Refused (Conflict) when its queue or its application profile no longer exists or the
        config in force refuses it; then nothing changes. Needs job:requeue (RBAC-3;
        PermissionDenied naming who may)."""
        job, actor = self._begin_action(job_id, caller, "job:requeue", "requeue it")
        if self.config.queue(job.queue) is None:
            raise Conflict(f"job {job_id}: its queue {job.queue!r} no longer exists; it cannot pend there again")
        app = job.spec.app
        if app and app not in self.config.applications:
            raise Conflict(f"job {job_id}: its application profile {app!r} no longer exists; it cannot run again")
        els = self._elements(job, index)
        chosen = {e.index for e in els}
        specs: list[tuple[Job, EffectiveJob, object]] = []
        if all(e.state not in ACTIVE for e in job.elements.values() if e.index not in chosen):
            why, new, rr = self._remerged(job, check_hosts=True)
            if why is not None:
                raise Conflict(f"job {job_id}: the config in force refuses it, so it was not requeued: {why}")
            if new is not None:
                specs.append((job, new, rr))
        away = frozenset(h for h in self.hosts if h not in self.workers)  # SCHED-4: requeued at once there
        changes = self._changes(els, self._stim(m.Requeue, "requeue", actor, user=caller.user, away=away,
                                                             hold=hold))
        if not changes:
            ref, state = _subject(job, index)
            raise Conflict(f"job {ref} is {'pending' if state in ('PEND', 'PSUSP') else state}; only running or "
                           f"finished jobs can be requeued")
        write, remember = self._respec(specs)
        self._commit(changes, write if specs else None, memory=remember)
        self.kick()
        return [e.ref for e, _, _ in changes]

    async def wait(self, job_id: int, timeout: float, index: int | None = None) -> Job:
        """Return the job once every element (or element `index`) has finished, or after
        `timeout` seconds. Raises NotFound for an unknown job or element."""
        job = self.job(job_id)
        if index is not None:
            e = self._elements(job, index)[0]
            if e.state in FINISHED:
                return job
        if job.finished() or self.stopping:  # a stopping daemon answers at once (wake_waiters)
            return job
        fut = asyncio.get_running_loop().create_future()
        entry = (fut, index)
        self._waiters.setdefault(job_id, []).append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            lst = self._waiters.get(job_id)
            if lst and entry in lst:
                lst.remove(entry)
        return job

    async def read_output(self, job_id: int, index: int | None, stream: str, max_bytes: int) -> tuple[Element, dict | None]:
        """Output of an element so far (`xcecli peek`), read by the worker of its first host:
        (the element, None when there is none yet, else {"text": str, "skipped": int} or
        {"error": str}, as xced.worker.local.LocalWorker.read_output). `index` None means the
        job itself, or for an array its first running element."""
        job = self.job(job_id)
        if index is not None or not job.is_array:
            e = self._elements(job, index if index is not None else 0)[0]
        else:
            els = list(job.elements.values())
            e = next((x for x in els if x.state in ACTIVE), next((x for x in els if x.alloc), els[0]))
        w = self.workers.get(e.alloc[0][0]) if e.alloc else None
        if w is None:
            return e, None
        text = w.read_output(job.id, e.index, stream, max_bytes)
        if inspect.isawaitable(text):
            text = await text
        if isinstance(text, str):  # a worker of an older XCE
            text = {"text": text, "skipped": 0}
        return e, text if isinstance(text, dict) else None

    async def launch(self, job_id: int, index: int, host: str, argv: list[str], token: str | None,
                     caller: Caller | None, peer_uid: int | None = None, rank: int | None = None) -> dict:
        """`xcecli launch HOST -- CMD` (LSF blaunch, JOB-7): start one task of running element
        (job_id, index) on `host`, one of the job's hosts, as the job's user, and return how
        it ended: {"host", "task_id", "exit_code", "signal", "reason", "output"} (output capped
        at 1 MB).

        The task's names (JOB-7, JOB-6): XCE_TASK_ID is `rank`, its place in the job's
        LSB_HOSTS (0 = the first slot; what `launch --all`, so XCE_TASK_STARTER, gives each
        task: MPI-style ranks in LSB_HOSTS order, the same from run to run), or without a
        rank the job's next task number (from 1); XCE_HOST_TASK_INDEX is the place in
        LSB_HOSTS of `host`'s first slot, as the host hooks see it; XCE_TASK_HOST is `host`.
        The profile's job starter wraps the task's command as it wraps the job's (JOB-7:
        tasks start inside it, as LSF's JOB_STARTER wraps the job).

        Who may (D-7): the job's owner (`caller`, without a token), or a process inside the
        job, which proves it with the element's launch token (XCE_JOB_TOKEN) and, on the Unix
        socket, by running as the job's user (`peer_uid` from SO_PEERCRED). Cluster admins
        may not: a task runs as the job's user, so that would let an admin act as any user.
        Raises NotFound, PermissionDenied (a wrong, old or other job's token; another user),
        Conflict (not running, host not in the job)."""
        job = self.job(job_id)
        e = job.elements.get(index)
        if e is None:
            raise NotFound(f"job {job_id} has no element {index}")
        if token is not None:
            if not e.token_hash or not secrets.compare_digest(token_hash(token), e.token_hash):
                raise PermissionDenied(f"job {e.ref}: the launch token is not this job's (wrong, from an earlier run "
                                       f"of it, or another job's); `xcecli launch` works from inside the job")
            run_uid = job.spec.run_uid
            if peer_uid is not None and peer_uid != (run_uid if run_uid is not None else os.geteuid()):
                raise PermissionDenied(f"job {e.ref} runs as {job.spec.run_as}; its launch token works only for "
                                       f"processes of that user inside the job")
        elif caller is None or caller.user != job.user:
            raise PermissionDenied(f"job {e.ref} belongs to {job.user}; only its owner and its own tasks may launch "
                                   f"tasks in it")
        if e.state not in ACTIVE:
            raise Conflict(f"job {e.ref} is {e.state}; tasks can be launched only while it runs")
        hosts = [h for h, _ in e.alloc]
        if host not in hosts:
            raise Conflict(f"host {host!r} is not one of job {e.ref}'s hosts ({' '.join(hosts)})")
        w = self.workers.get(host)
        if w is None:
            raise Conflict(f"host {host} is not reachable now (its worker has not joined)")
        slots = [h for h, n in e.alloc for _ in range(n)]  # LSB_HOSTS
        if rank is not None and (rank >= len(slots) or slots[rank] != host):
            raise Conflict(f"rank {rank} is not a slot of {host} in job {e.ref}'s LSB_HOSTS "
                           f"({' '.join(slots[:64])}{' ...' if len(slots) > 64 else ''}); ranks go from 0 to "
                           f"{len(slots) - 1}, in that order")
        self._task_ids[(job_id, index)] = tid = self._task_ids.get((job_id, index), 0) + 1
        profile = self.config.applications.get(job.spec.app) if job.spec.app else None
        if profile is not None and profile.job_starter:
            from xced.controller.dispatch import wrap_with_job_starter

            argv = wrap_with_job_starter(profile.job_starter, list(argv))
        task = self._task_spec(e, tid, argv, {"XCE_TASK_ID": str(tid if rank is None else rank), "XCE_TASK_HOST": host,
                                              "XCE_HOST_TASK_INDEX": str(slots.index(host))})
        self.store_event_only(job_id, index, "LAUNCH", f"user:{job.user}" if caller is None else f"user:{caller.user}",
                              f"task {tid} on {host}: {' '.join(argv)[:200]}")
        result = await w.launch_task(task)
        if not isinstance(result, dict):
            raise Conflict(f"task {tid} on {host}: the host's worker did not answer")
        result.setdefault("host", host)
        result.setdefault("task_id", tid)
        return result

    def store_event_only(self, job_id: int, index: int | None, kind: str, actor: str, reason: str | None) -> None:
        """Record an event that is not a state transition (a task launch, a hook run); one the
        store refuses now is kept and written once it takes writes again (D-8)."""
        t, sid = self.clock(), self._sid(kind.lower())

        def write() -> None:
            with self.store.tx():
                self.store.add_event(t, job_id, index, kind, None, None, actor, reason, sid)
        try:
            write()
        except STORE_ERRORS as e:
            self._retry_later(("event", sid), f"the {kind} event of job {job_id}", write, e)

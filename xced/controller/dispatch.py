"""Scheduling (D-4, DESIGN rule 1, DISPATCH-1, DISPATCH-2): sessions on events after a
coalescing delay, the snapshot they read, and the re-check and application of their
decisions.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread and changes state only through the shell (`_commit`).
"""

from __future__ import annotations

import asyncio
import secrets
import shlex
from dataclasses import replace

from xced.controller import machine as m
from xced.controller.retry import SESSION_KEY, STORE_ERRORS
from xced.controller.machine import transition
from xced.model.jobs import JobState
from xced.model.state import SCRIPT_ARG, Element, StartInfo
from xced.policy.projects import reserve_use
from xced.scheduler.session import SessionResult, schedule
from xced.scheduler.snapshot import JobSnap, QueueSnap, RunSnap, Snapshot, wall_clock
from xced.store.base import token_hash

S = JobState


def wrap_with_job_starter(starter: str, argv: list[str]) -> list[str]:
    """JOB-7 (LSF JOB_STARTER): run the job command through the profile's job starter, a
    shell command line in which `%USRCMD` stands for the job's command (appended when absent)."""
    cmd = shlex.join(argv)
    line = starter.replace("%USRCMD", cmd) if "%USRCMD" in starter else f"{starter} {cmd}"
    return ["/bin/sh", "-c", line]


def _element_use(e: Element, into: dict[str, float]) -> dict[str, float]:
    """Add what a running element holds to `into`, {"slots", "mem_mb", resource: amount} (PRJ-7)."""
    return reserve_use(e.reserve or {h: {"slots": n} for h, n in e.alloc}, into)


class DispatchMixin:
    """Scheduling (D-4, DESIGN rule 1, DISPATCH-1, DISPATCH-2): a part of the Controller."""

    @property
    def session_asked(self) -> bool:
        """Whether a scheduler session is asked for and not yet run (D-4)."""
        return self._session_scheduled

    def run_session(self) -> None:
        """Run a scheduler session now, without the coalescing delay (a session asked for is
        run by this one): what a test or a simulator drives instead of the event loop."""
        self._session()

    def kick(self) -> None:
        """Ask for a scheduler session after the coalescing delay (D-4); idempotent. Any
        stimulus but a submit into a blocked queue comes here, so it ends the shortcut. While
        a session waits for the store (D-8), none is asked for: that one runs when it can."""
        self.shortcut.invalidate()
        if self._session_scheduled or self._session_waits_for_store():
            return
        self._session_scheduled = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._session_scheduled = False
            return
        loop.call_later(self.config.settings.sched_delay_s, self._session)

    def snapshot(self) -> Snapshot:
        """The scheduler's view now (D-4): hosts with free supply, queues, pending elements.
        An element waiting out the backoff after a failed dispatch (DISPATCH-2) is left out;
        a session is asked for when the first such wait ends. With projects defined (PRJ-6,
        PRJ-7), each element carries its project and user, and the running and stopped
        elements' use comes along as `usage`; the session carves the shares from the usable
        hosts' totals (the `hosts` here, from self.hosts)."""
        now = self.clock()
        wake: float | None = None
        hosts = [self._host_supply(h) for h in self.hosts.values()]
        queues = [QueueSnap(q.name, q.priority, i, q.host_limit, q.backfill) for i, q in enumerate(self.config.queues)]
        backfill = any(q.backfill for q in self.config.queues)
        pending: list[JobSnap] = []
        running: list[RunSnap] = []
        array_running: dict[int, int] = {}
        apps = self.config.applications
        projects = self.config.projects if self.config.projects.projects else None  # PRJ-4: open mode, no caps
        usage: dict[tuple[str, str], dict[str, float]] = {}  # PRJ-7: summed per (project, user)
        exclusive: set[str] = set()  # hosts running an exclusive job (docs/lsf-behaviour.md section 6)
        for job in self.active.values():
            sp, eff = job.spec, job.effective
            limit = sp.array_limit
            prof = apps.get(sp.app) if sp.app else None
            phash = prof.content_hash() if prof is not None else None
            nrun = 0
            for e in job.elements.values():
                st = e.state
                if st is S.PEND and e.retry_at is not None and e.retry_at > now:
                    wake = e.retry_at if wake is None else min(wake, e.retry_at)
                    continue
                if st is S.PEND or st is S.PSUSP:
                    # JOB-5: an element waiting for its -w dependency is left out (reason set there)
                    if sp.dependency and self._dependency_waits(job, e, pending):
                        continue
                    pending.append(JobSnap(job.id, e.index, job.queue, job.submit_time, eff.ntasks_min,
                                           eff.ntasks_max, job.resreq, limit, st is S.PSUSP, phash,
                                           eff.run_limit_s, e.pend_reason,
                                           sp.project if projects else None, job.user if projects else None,
                                           sp.exclusive))
                elif st is S.RUN or st is S.USUSP:
                    nrun += 1
                    if sp.exclusive:  # LSF bsub -x: its hosts take no other job while it runs
                        exclusive.update(e.reserve or dict(e.alloc))
                    if projects is not None and sp.project is not None:  # PRJ-7: what it holds counts
                        _element_use(e, usage.setdefault((sp.project, job.user), {}))
                    if backfill:  # SCHED-1: when the running work ends at the latest
                        rl = eff.run_limit_s
                        running.append(RunSnap(job.id, e.index, e.start_time + rl if rl and e.start_time else None,
                                               e.reserve or {h: {"slots": n} for h, n in e.alloc}))
            if limit is not None:
                array_running[job.id] = nrun
        if wake is not None:
            self._kick_at(wake, now)
        if exclusive:
            hosts = [replace(h, exclusive=True) if h.name in exclusive else h for h in hosts]
        return Snapshot(hosts, queues, pending, array_running, running, wall_clock(now), projects,
                        [(p, u, used) for (p, u), used in usage.items()])

    def project_usage(self) -> list[tuple[str, str, dict[str, float]]]:
        """What the running and stopped elements of jobs with a project hold (PRJ-7), summed
        per (project, user): [(project, user, {"slots", "mem_mb", resource: amount})], the
        `usage` that xced.policy.projects.report and QuotaBook read (the snapshot's, with projects)."""
        usage: dict[tuple[str, str], dict[str, float]] = {}
        for job in self.active.values():
            if job.spec.project is not None:
                for e in job.elements.values():
                    if e.state in (S.RUN, S.USUSP):
                        _element_use(e, usage.setdefault((job.spec.project, job.user), {}))
        return [(p, u, used) for (p, u), used in usage.items()]

    def _kick_at(self, when: float, now: float) -> None:
        """Ask for a session at `when` (epoch seconds; the end of a dispatch backoff), unless
        one is already asked for by then."""
        if self._wake_at is not None and self._wake_at <= when:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: whoever drives the controller runs the sessions
            return
        self._wake_at = when

        def wake() -> None:
            self._wake_at = None
            self.kick()
        loop.call_later(max(when - now, 0.0), wake)

    def _session(self) -> None:
        """One scheduler session; when the store refuses its decisions (D-8: nothing was
        applied), the session is kept and run again once the store takes writes."""
        self._session_scheduled = False
        try:
            self._run_session()
        except STORE_ERRORS as e:
            self.shortcut.invalidate()  # its findings were never applied
            self._retry_later(SESSION_KEY, "the scheduler's decisions", self._run_session, e)

    def _run_session(self) -> None:
        snap = self.snapshot()
        if not snap.pending:
            return
        now = self.clock()
        result = schedule(snap, now)
        self.sessions += 1
        self.traces.append((result.trace, result.heads, snap.clock))
        if self.recorder is not None and not self.recorder.session(now, self._config_hash, snap, result):
            self.recorder = None  # it could not write; it logged why
        self.apply(result)
        self.shortcut.after_session(result.blocked, result.unsatisfiable, self._session_scheduled)

    def attach_recorder(self, recorder) -> None:
        """Record every later session to `recorder` (an xced.sim.recording.Recorder); None stops."""
        self.recorder = recorder

    def apply(self, result: SessionResult) -> None:
        """Apply a session's decisions (DESIGN rule 1): re-check each dispatch against the
        current state, commit all accepted dispatches in one transaction, then start them."""
        sid, now = self._sid("session"), self.clock()
        reasons: list = []
        for (jid, idx), reason in result.pend_reasons.items():
            job = self.jobs.get(jid)
            e = job.elements.get(idx) if job is not None else None
            if e is not None and e.state is S.PEND:  # SCHED-3: only a changed reason replaces the last one
                reasons += self._changes([e], m.Pending(sid, "scheduler", now, reason=reason))
        if reasons:
            self._commit(reasons)
        if not result.dispatches:
            return
        changes: list = []
        taken: dict[str, dict[str, float]] = {}  # what this session's accepted dispatches take, per host
        for d in result.dispatches:
            job = self.jobs.get(d.job_id)
            e = job.elements.get(d.index) if job else None
            if e is None or e.state is not S.PEND or any(x is e for x, _, _ in changes):
                continue
            reserve = d.reserve or {host: {"slots": n} for host, n in d.alloc}
            if not self._fits(reserve, taken):
                continue
            app = job.spec.app
            why = None
            if app and app not in self.config.applications:
                why = f"application profile {app!r} no longer exists"
            elif app and d.profile_hash is not None and self.config.applications[app].content_hash() != d.profile_hash:
                why = f"application profile {app!r} changed between decision and dispatch"
            if why is not None:
                stim = m.Declined(sid, "system", now, why=why, limit=self.config.settings.max_dispatch_failures)
                changes.append((e, stim, transition(e, stim)))
                continue
            token = secrets.token_hex(16)  # D-7: the store keeps its hash only
            stim = m.Dispatch(sid, "scheduler", now, alloc=tuple((h, n) for h, n in d.alloc), reserve=d.reserve or {},
                              token=token, token_hash=token_hash(token),
                              note=f" (profile {app} {d.profile_hash[:12]})" if app and d.profile_hash else "")
            changes.append((e, stim, transition(e, stim)))
            for host, held in reserve.items():
                t = taken.setdefault(host, {})
                for k, v in held.items():
                    t[k] = t.get(k, 0.0) + v
        self._commit(changes)

    def _start(self, e: Element) -> None:
        """Start a dispatched element on its first host. When its profile has a
        pre_host_exec and the job spans several hosts, that hook runs first on each other
        host (JOB-6: once on each host); the first host's own runs in its supervisor."""
        info = self.start_info(e)
        profile = self._profile_of(e.job)
        others = [h for h, _ in e.alloc[1:]]
        if profile is None or not others or (profile.pre_host_exec is None and profile.post_host_exec is None):
            self.workers[e.alloc[0][0]].start(info)
            return
        self._host_hooked.add((e.job.id, e.index))
        if profile.pre_host_exec is None:
            self.workers[e.alloc[0][0]].start(info)
            return
        asyncio.ensure_future(self._start_after_host_hooks(e, info, profile.pre_host_exec.model_dump(), others))

    def start_info(self, e: Element) -> StartInfo:
        """What the first host's worker needs to start element `e` (JOB-1, JOB-3, JOB-6, JOB-7):
        the command (wrapped by the profile's job starter), limits (s, MB), allocation, the
        job's and the profile's environments, and the hooks to run around it."""
        job = e.job
        sp, eff = job.spec, job.effective
        st = self.config.settings
        argv = list(sp.argv)
        script = None
        if sp.script_digest:  # JOB-12: the worker writes the script and puts its path here
            argv.append(SCRIPT_ARG)
            script = self.job_script(job)
        profile = self.config.applications.get(sp.app) if sp.app else None
        if profile is not None and profile.job_starter:
            argv = wrap_with_job_starter(profile.job_starter, argv)
        return StartInfo(job.id, e.index, job.name, job.queue, job.user, argv, sp.cwd, self.job_env(job),
                         sp.stdout, sp.stderr, eff.run_limit_s, eff.memory_limit_mb,
                         list(e.alloc), sp.run_as, sp.run_uid, sp.run_gid,
                         st.kill_interval_s, st.limit_grace_s, e.token or "", sp.umask,
                         dict(eff.profile_env), dict(eff.export_env), sp.app or None,
                         self._hooks(profile, sp), sp.project, e.attempt, eff.ntasks_max, sp.shown_command(),
                         script, sp.stdout_overwrite, sp.stderr_overwrite)

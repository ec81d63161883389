"""Scheduling (D-4, DESIGN rule 1, DISPATCH-1, DISPATCH-2): sessions on events after a
coalescing delay, the snapshot they read, and the re-check and application of their
decisions.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread and changes state only through the shell (`_commit`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import itertools
import logging
import secrets
import shlex
import sys
import time
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
log = logging.getLogger("xced.controller")

#: a session whose pending elements x hosts reach this is computed in the scheduler's thread,
#: off the event loop (issue 19 part 3; below it a session takes about a millisecond)
THREAD_WORK = 20_000
#: about the longest one slice of a session's application holds the event loop, seconds
#: (issue 19 part 3: the aim is at most 50 ms of blocking at a time)
SLICE_S = 0.01
#: the pause between two slices, seconds: the loop's other work (a request's next step, a
#: report) runs in it, however many turns of the loop it takes (issue 19 part 3)
SLICE_GAP_S = 0.001
#: the interpreter's thread switch interval while the scheduler's thread computes, seconds
#: (CPython's default is 0.005): the loop thread waits that long for the GIL each time it has
#: something to do. Measured with 2,000 hosts filling on a loaded 2-core machine: with the
#: default, 1 to 46 loop-lag probe gaps over 50 ms (up to 102 ms); with 0.001, none (up to 41
#: ms), and the session no slower
GIL_SWITCH_S = 0.001


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
        run by this one), computed and applied at once, even on the event loop: what a test
        or a simulator drives instead of the event loop."""
        self._session_scheduled = False
        try:
            self._run_session()
        except STORE_ERRORS as e:
            self._store_refused_session(e)

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
        hosts' totals (the `hosts` here: the controller's host view, `host_view_now`)."""
        now = self.clock()
        wake: float | None = None
        hosts = self.host_view_now()  # issue 19 part 4: made again only where hosts changed
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
        order = self.host_order_now()
        if exclusive:
            hosts = [replace(h, exclusive=True) if h.name in exclusive else h for h in hosts]
            order = [k for k in order if k[2] not in exclusive]  # no task goes there (host_order_key)
        return Snapshot(hosts, queues, pending, array_running, running, wall_clock(now), projects,
                        [(p, u, used) for (p, u), used in usage.items()], order)

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
        """One scheduler session, asked for by `kick` (D-4). On the event loop (issue 19 part
        3): a session with much to decide (pending x hosts >= THREAD_WORK) is computed in
        the scheduler's thread (the scheduler is pure, D-4: it reads only the snapshot, made
        here on the loop), and every session's decisions are applied on the loop in slices
        of about SLICE_S seconds, each slice re-checked against the state of its own time
        (DISPATCH-2) and committed in one transaction, the loop answering between slices.
        While one session is computed or applied, another asked for waits for it and then
        runs on what it applied. When the store refuses its decisions (D-8: the refused
        slice applied nothing), the session is kept and run again once the store takes writes."""
        if self._session_busy:
            self._session_again = True  # _session_scheduled stays True: kicks meanwhile wait for it
            return
        self._session_scheduled = False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        try:
            self._run_session(loop)
        except STORE_ERRORS as e:
            self._store_refused_session(e)

    def _store_refused_session(self, e: Exception) -> None:
        self.shortcut.invalidate()  # its findings were never applied
        self._retry_later(SESSION_KEY, "the scheduler's decisions", self._run_session, e)

    def _run_session(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Snapshot, decide, apply: at once without `loop` (a retry, a test, `run_session`),
        else as `_session` says."""
        snap = self.snapshot()
        if not snap.pending:
            return
        now = self.clock()
        if loop is not None and len(snap.pending) * max(len(snap.hosts), 1) >= THREAD_WORK:
            self._session_busy = True
            if self._sched_pool is None:
                self._sched_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="xced-sched")
            self._switch_was = sys.getswitchinterval()
            sys.setswitchinterval(min(self._switch_was, GIL_SWITCH_S))
            fut = loop.run_in_executor(self._sched_pool, schedule, snap, now)
            fut.add_done_callback(functools.partial(self._computed, snap, now))
            return
        self._decided(snap, now, schedule(snap, now), loop)

    def _computed(self, snap: Snapshot, now: float, fut: asyncio.Future) -> None:
        """The scheduler's thread has decided (on the loop, a done-callback of `fut`)."""
        sys.setswitchinterval(self._switch_was)
        try:
            result = fut.result()
        except Exception:  # noqa: BLE001 - a scheduler fault must not stop every later session
            log.exception("the scheduler failed; its session is dropped (jobs stay pending)")
            self._session_over()
            return
        self._decided(snap, now, result, asyncio.get_running_loop())

    def _decided(self, snap: Snapshot, now: float, result: SessionResult,
                 loop: asyncio.AbstractEventLoop | None) -> None:
        """Note the session (count, trace, recording) and apply its decisions: all at once
        without `loop`; else the first slice now and each next one in a later turn of the loop."""
        self.sessions += 1
        self.traces.append((result.trace, result.heads, snap.clock))
        if self.recorder is not None and not self.recorder.session(now, self._config_hash, snap, result):
            self.recorder = None  # it could not write; it logged why
        slices = self._apply_slices(result, loop is not None)
        if loop is None:
            for _ in slices:
                pass
            self.shortcut.after_session(result.blocked, result.unsatisfiable, self._session_scheduled,
                                        bool(result.reservations), result.headed)
            self._refresh_reasons_later(result)
            return
        self._session_busy = True
        self._next_slice(loop, slices, result)

    def _next_slice(self, loop: asyncio.AbstractEventLoop, slices, result: SessionResult) -> None:
        """Apply one slice of a session's decisions; the next in a later turn of the loop."""
        try:
            next(slices)
        except StopIteration:
            self.shortcut.after_session(result.blocked, result.unsatisfiable,
                                        self._session_scheduled or self._session_again, bool(result.reservations),
                                        result.headed)
            self._refresh_reasons_later(result)
            self._session_over()
            return
        except STORE_ERRORS as e:  # this slice applied nothing; the slices before it stand
            self._store_refused_session(e)
            self._session_over()
            return
        except Exception:  # noqa: BLE001 - as a failed callback would: logged, and sessions go on
            log.exception("applying the scheduler's decisions failed; the rest of its session is dropped")
            self.shortcut.invalidate()
            self._session_over()
            return
        if self.stopping:  # the daemon stops: the rest stays pending, as stored
            self._session_over()
            return
        loop.call_later(SLICE_GAP_S, self._next_slice, loop, slices, result)

    def _refresh_reasons_later(self, result: SessionResult) -> None:
        """After a session whose reasons may be out of date (`result.stale`: a job started
        behind one it pended, and that job's reason may count what it took, "1 free slot
        ... would start now with -n 1"), ask for a session `pend_reason_update` seconds
        later (xce.yaml, default 5), unless another session runs by then (SCHED-3). A
        session decides jobs in queue order, and sessions run on events; without this the
        reason would stand until the next event, which on a quiet cluster may never come.
        LSF's reasons too are those of its last scheduling turn, made again every
        PEND_REASON_UPDATE_INTERVAL. The cost: at most one session per quiet spell, as an
        event's own session comes first and the refresh then finds a session after it.

        One timer at most, whatever the rate of stale sessions (a busy backfilling cluster
        has many a second): the latest stale session is marked, and the timer, when it
        fires, refreshes, waits on for a mark made after it was set, or drops a mark a
        later session has already made good."""
        if not result.stale:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: whoever drives the controller runs the sessions
            return
        wait = self.config.settings.pend_reason_update_s
        self._stale_mark = (self.sessions, loop.time() + wait)
        if not self._refresh_timer:
            self._refresh_timer = True
            loop.call_later(wait, self._refresh_reasons)

    def _refresh_reasons(self) -> None:
        """`_refresh_reasons_later`'s timer: a session when none has run since the latest
        stale one and its time has come; set again for a later mark's time."""
        self._refresh_timer = False
        mark, self._stale_mark = self._stale_mark, None
        if mark is None or self.sessions != mark[0] or self.stopping:
            return  # a session after the stale one decided every pending job again
        loop = asyncio.get_running_loop()
        left = mark[1] - loop.time()
        if left > 0:  # a later stale session moved the mark after the timer was set
            self._stale_mark = mark
            self._refresh_timer = True
            loop.call_later(left, self._refresh_reasons)
            return
        self.kick()

    def _session_over(self) -> None:
        """The session in flight is applied (or dropped): one asked for meanwhile runs next."""
        self._session_busy = False
        if self._session_again:
            self._session_again = False
            if self._session_waits_for_store():  # the kept session runs when the store takes writes
                self._session_scheduled = False
            else:  # in a turn of the loop of its own
                asyncio.get_running_loop().call_soon(self._session)

    def attach_recorder(self, recorder) -> None:
        """Record every later session to `recorder` (an xced.sim.recording.Recorder); None stops."""
        self.recorder = recorder

    def apply(self, result: SessionResult) -> None:
        """Apply a session's decisions at once (DESIGN rule 1): `_apply_slices` to its end."""
        for _ in self._apply_slices(result, False):
            pass

    def _apply_slices(self, result: SessionResult, sliced: bool):
        """Apply a session's decisions (DESIGN rule 1, DISPATCH-2), a generator: its changed
        pend reasons, then its dispatches, each re-checked against the state when its slice
        runs (the element still PEND, its hosts served and with room beyond what the slice
        takes, its profile still there with the hash the decision carries) and committed in
        one transaction per slice; then the starts. `sliced`: a slice ends (the generator
        yields) once it has taken about SLICE_S seconds, so that the caller lets the event
        loop run between slices (issue 19 part 3); else all in one slice each. A store error
        raised from a slice's commit leaves that slice unapplied."""
        sid = self._sid("session")
        budget = SLICE_S if sliced else float("inf")
        pend = iter(result.pend_reasons.items())
        while True:
            now, reasons, t0, done = self.clock(), [], time.perf_counter(), True
            for count, ((jid, idx), reason) in enumerate(pend, 1):
                job = self.jobs.get(jid)
                e = job.elements.get(idx) if job is not None else None
                if e is not None and e.state is S.PEND:  # SCHED-3: only a changed reason replaces the last one
                    reasons += self._changes([e], m.Pending(sid, "scheduler", now, reason=reason))
                if count % 64 == 0 and time.perf_counter() - t0 > budget:
                    done = False
                    break
            if reasons:
                self._commit(reasons)
            if done:
                break
            yield
        todo = iter(result.dispatches)
        seen: set[tuple[int, int]] = set()  # nothing is dispatched twice, in one slice or across them
        while True:
            # the decisions take a third of a slice: its commit and starts take about twice that
            now, changes, t0, done = self.clock(), [], time.perf_counter(), True
            taken: dict[str, dict[str, float]] = {}  # what this slice's accepted dispatches take, per host
            for count, d in enumerate(todo, 1):
                if count % 64 == 0 and time.perf_counter() - t0 > budget / 3:
                    done = False
                    todo = itertools.chain((d,), todo)
                    break
                key = (d.job_id, d.index)
                job = self.jobs.get(d.job_id)
                e = job.elements.get(d.index) if job else None
                if e is None or e.state is not S.PEND or key in seen:
                    continue
                reserve = d.reserve or {host: {"slots": n} for host, n in d.alloc}
                if not self._fits(reserve, taken):
                    continue
                seen.add(key)
                app = job.spec.app
                why = None
                if app and app not in self.config.applications:
                    why = f"application profile {app!r} no longer exists"
                elif app and d.profile_hash is not None and \
                        self.config.applications[app].content_hash() != d.profile_hash:
                    why = f"application profile {app!r} changed between decision and dispatch"
                if why is not None:
                    stim = m.Declined(sid, "system", now, why=why, limit=self.config.settings.max_dispatch_failures)
                    changes.append((e, stim, transition(e, stim)))
                    continue
                token = secrets.token_hex(16)  # D-7: the store keeps its hash only
                stim = m.Dispatch(sid, "scheduler", now, alloc=tuple((h, n) for h, n in d.alloc),
                                  reserve=d.reserve or {}, token=token, token_hash=token_hash(token),
                                  note=f" (profile {app} {d.profile_hash[:12]})" if app and d.profile_hash else "")
                changes.append((e, stim, transition(e, stim)))
                for host, held in reserve.items():
                    t = taken.setdefault(host, {})
                    for k, v in held.items():
                        t[k] = t.get(k, 0.0) + v
            self._commit(changes)
            if done:
                return
            yield

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

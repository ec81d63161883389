"""The controller (D-1, D-3, D-5, DESIGN rule 2): owns all state and is its only writer.

Every stimulus (a scheduler decision, a job end, a user action, a config that refuses a
job) goes through the state machine of `machine.py`, which returns each element's new
fields, its events and its effects without doing I/O. The shell here (`_commit`) writes
them in one store transaction, then changes memory, then runs the effects (start a job,
send a signal), so a failed commit changes nothing. Each concern of the controller lives
in a module of its own (hosts, submit, dependencies, reconfig, dispatch, hooks, reports,
actions, explain, queries), mixed into `Controller`; docs/architecture.md follows a submit
through them.

In memory it keeps every job it knows (loaded from the store at start); the store is
the durable truth. Scheduler sessions run on events (submit, job end, resume, release,
host change) after a coalescing delay of at most 10 ms (D-4); there is no polling timer.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import pwd
import time
from pathlib import Path
from typing import Callable

from xced.api.errors import NotFound
from xced.controller import machine as m
from xced.controller.machine import IllegalTransition, Outcome, Stimulus, transition
from xced.controller.hosts import HostsMixin, WorkerLink
from xced.controller.submit import SubmitMixin, effective_resreq
from xced.controller.pack import PackMixin
from xced.controller.dependencies import DependenciesMixin
from xced.controller.queries import QueriesMixin
from xced.controller.reconfig import ReconfigMixin
from xced.controller.dispatch import DispatchMixin
from xced.controller.hooks import HooksMixin
from xced.controller.reports import ReportsMixin
from xced.controller.actions import ActionsMixin
from xced.controller.explain import ExplainMixin
from xced.controller.keys import KeysMixin
from xced.controller.envs import EnvsMixin
from xced.controller.retention import RetentionMixin, job_from_rows, last_end
from xced.controller.peers import PeersMixin
from xced.controller.retry import RetryMixin
from xced.policy.rbac import Policy
from xced.model.config import ClusterConfig
from xced.model.jobs import ACTIVE, FINISHED, JobState
from xced.model.state import Element, HostState, Job
from xced.resreq import parse, shared
from xced.scheduler.shortcut import SubmitShortcut
from xced.store.base import Store

log = logging.getLogger("xced.controller")

S = JobState


def _stored(fields: dict) -> dict:
    """An outcome's stored fields as the store's columns take them."""
    out = dict(fields)
    if "state" in out:
        out["state"] = str(out["state"])
    if "holds" in out:
        out["holds"] = ",".join(sorted(out["holds"]))
    return out


def write_changes(store, changes) -> None:
    """The store writes of `changes` ((Element, Stimulus, Outcome) triples): each outcome's
    stored fields and events, inside the caller's transaction (the shell's writes, DESIGN
    rule 2; `Controller._commit`, and a submit's -H in its own transaction)."""
    for e, st, out in changes:
        if out.fields:
            store.update_element(e.job.id, e.index, **_stored(out.fields))
        for ev in out.events:
            store.add_event(st.time, e.job.id, e.index, ev.kind, ev.from_state, ev.to_state,
                            ev.actor or st.actor, ev.reason, st.id)


def _daemon_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


#: sessions whose decision traces are kept for `xcecli why` (D-4)
TRACE_SESSIONS = 64


class Controller(HostsMixin, SubmitMixin, DependenciesMixin, ReconfigMixin, DispatchMixin, HooksMixin, ReportsMixin,
                 ActionsMixin, ExplainMixin, QueriesMixin, RetryMixin, KeysMixin, PeersMixin, EnvsMixin, RetentionMixin,
                 PackMixin):
    """Owns jobs, hosts and the store. All methods run on the event loop thread.

    Errors raised to the API: InvalidRequest (bad submit), NotFound (unknown job),
    PermissionDenied (not the owner nor an admin), Conflict (wrong state).
    """

    def __init__(self, config: ClusterConfig, store: Store, topdir: Path,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        #: the permission rules of the config in force (RBAC-1; xced.policy.rbac)
        self.policy = Policy(config)
        self.store = store
        self.topdir = topdir
        self.clock = clock
        self._base_clock = clock
        #: seconds added to the clock: `xceadmin debug clock --advance` moves it on in test mode
        #: only (and from then on `clock` is the shifted one), so that expiry and grace periods
        #: are tested without sleeping
        self.clock_offset = 0.0
        self.daemon_user = _daemon_user()
        self.jobs: dict[int, Job] = {}
        #: jobs with an element not yet finished: what sessions and snapshots look at
        self.active: dict[int, Job] = {}
        self.hosts: dict[str, HostState] = {
            h.name: HostState(h.name, h.slots, h.memory_mb, dict(h.resources), dict(h.attributes), list(h.tags))
            for h in config.hosts
        }
        self.workers: dict[str, WorkerLink] = {}
        self._session_scheduled = False
        #: a session is being computed (in the scheduler's thread) or applied in slices (issue 19)
        self._session_busy = False
        #: a session was asked for while one was busy: it runs when that one is over
        self._session_again = False
        #: the scheduler's thread (xced.controller.dispatch), made at the first large session
        self._sched_pool = None
        self._switch_was = 0.005  # the switch interval to restore after it (dispatch.GIL_SWITCH_S)
        self._wake_at: float | None = None
        #: the latest session whose reasons may be stale: (the session count after it, the
        #: loop time its refresh is due), and whether the one refresh timer is set (SCHED-3)
        self._stale_mark: tuple[int, float] | None = None
        self._refresh_timer = False
        #: the last stop/resume signal of each element whose worker was away (D-8), sent at its join
        self._unsent_signals: dict[tuple[int, int], int] = {}  # a session asked for at the end of a dispatch backoff
        self._init_retry()
        #: the last session's findings a submit may pend with, without a session of its own (D-4)
        self.shortcut = SubmitShortcut()
        self._waiters: dict[int, list[tuple[asyncio.Future, int | None]]] = {}
        #: the daemon is stopping (SIGTERM): waits answer at once
        self.stopping = False
        self._task_ids: dict[tuple[int, int], int] = {}
        #: elements whose profile host hooks run on their other hosts too (JOB-6)
        self._host_hooked: set[tuple[int, int]] = set()
        self.sessions = 0
        #: the last sessions' decision traces, blocked heads with their reservations, and the
        #: clocks they read by, newest last (D-4, SCHED-1, for `xcecli why`)
        self.traces: collections.deque[tuple[list, dict, object]] = collections.deque(maxlen=TRACE_SESSIONS)
        #: an open recording of every session (SIM-2, an xced.sim.recording.Recorder), or None
        self.recorder = None
        self._config_hash = config.content_hash()
        self._boot = format(int(time.time()) % 36**6, "x")
        self._stim_seq = 0
        self._init_peers()
        self._init_hosts()
        self._init_envs()
        self._init_retention()
        self._load()
        self.remerged_at_start = self._remerge_pending("system")

    def _load(self) -> None:
        """The jobs a restart keeps in memory (xced.controller.retention): unfinished ones,
        those whose last element ended within the clean period, and the finished ones an
        unfinished job's dependency names; the rest stay in the store."""
        horizon = self.clean_horizon()
        rows = iter(self.store.load_elements(horizon))
        row = next(rows, None)
        for jrow in self.store.load_jobs(horizon):
            els = []
            while row is not None and row[0] == jrow[0]:
                els.append(row)
                row = next(rows, None)
            job = self.jobs[jrow[0]] = job_from_rows(jrow, els)
            if job.unfinished == 0 and last_end(job) < horizon:  # an element ended lately, not the job
                del self.jobs[jrow[0]]
        self._use_loaded()
        self._load_referenced()  # after _use_loaded: the active jobs name them
        for job in self.jobs.values():
            eff_text = job.effective.resreq
            job.resreq = shared(parse(eff_text) if eff_text else effective_resreq(job.spec.resreq))

    def _sid(self, kind: str) -> str:
        """A new stimulus ID: `KIND-BOOT.N` (BOOT names this daemon run), on every event it causes."""
        self._stim_seq += 1
        return f"{kind}-{self._boot}.{self._stim_seq}"

    def _shifted_clock(self) -> float:
        return self._base_clock() + self.clock_offset

    def advance_clock(self, caller, seconds: float) -> dict:
        """Move the daemon's clock on by `seconds` (test mode only: a production daemon's clock
        is the machine's). Returns {"now", "offset"}. Raises PermissionDenied in production
        mode or for a caller who is not a cluster admin, InvalidRequest for a step not
        greater than 0 or over 10 years."""
        from xced.api.errors import InvalidRequest, PermissionDenied
        from xced.model.units import MAX_RUN_LIMIT_S
        from xced.policy.rbac import require_admin

        if self.config.settings.mode != "test":
            raise PermissionDenied("the daemon's clock can be advanced in mode: test only; a production daemon "
                                   "keeps the machine's time")
        require_admin(caller, "advance the daemon's clock")
        if not 0 < seconds <= MAX_RUN_LIMIT_S:
            raise InvalidRequest(f"--advance: a step of more than 0 s and at most {MAX_RUN_LIMIT_S // 86400} days",
                                 field="advance_s")
        self.clock_offset += seconds
        self.clock = self._shifted_clock
        log.warning("test clock advanced by %.0f s by %s (now %.0f s ahead of the machine)", seconds, caller.user,
                    self.clock_offset)
        self.kick()
        self.sweep_soon()  # keys that expire in the step close their channels now (KEY-4)
        self._safe_lost_check()  # hosts whose grace ends in the step are lost now (SCHED-4)
        self.purge_finished()  # jobs whose clean period ends in the step leave memory now
        return {"now": self.clock(), "offset": self.clock_offset}

    def _stim(self, cls, kind: str, actor: str, **args) -> Stimulus:
        return cls(self._sid(kind), actor, self.clock(), **args)

    def _commit(self, changes: list[tuple[Element, Stimulus, Outcome]], extra: Callable[[], None] | None = None,
                durable: bool = False, memory: Callable[[], None] | None = None) -> None:
        """The shell (DESIGN rule 2): write every change's stored fields and events (and
        `extra`'s writes, such as a job's new spec) in one store transaction; only after the
        commit change memory (`memory` first: the job-level values `extra` stored), then run
        the effects. A transaction that fails raises and leaves memory as it was."""
        store = self.store
        writes = [(e, st, out) for e, st, out in changes if out.fields or out.events]
        if writes or extra is not None:
            with store.tx(durable=durable):
                write_changes(store, writes)
                if extra is not None:
                    extra()
        if memory is not None:
            memory()
        for e, _, out in changes:
            self._apply_memory(e, out)
        for e, _, out in changes:
            for eff in out.effects:
                self._effect(e, eff)

    def _apply_memory(self, e: Element, out: Outcome) -> None:
        """After the commit: the element's new fields, what it holds on its hosts (RES-2), and
        the job's unfinished count and place among the active jobs."""
        old, new = e.state, out.state
        if old in ACTIVE and new not in ACTIVE:
            self._use(e, -1)  # with what it held
        for k, v in out.fields.items():
            setattr(e, k, v)
        for k, v in out.memory.items():
            setattr(e, k, v)
        if new in ACTIVE and old not in ACTIVE:
            self._use(e, +1)
        if new in FINISHED and old not in FINISHED:
            e.job.unfinished -= 1
            self._unsent_signals.pop((e.job.id, e.index), None)
        elif old in FINISHED and new not in FINISHED:
            e.job.unfinished += 1
            self._revive(e.job)  # a job read back from the store and requeued is live again
            self.active[e.job.id] = e.job

    def _effect(self, e: Element, eff) -> None:
        """Run one effect of a committed change (the only place changes reach workers)."""
        job_id, index = e.job.id, e.index
        if isinstance(eff, m.StartElement):
            self._start(e)
        elif isinstance(eff, m.KillElement):
            self._each_first_host([e], lambda w, x: w.kill(job_id, index))
            self._end_tasks(job_id, index, [h for h, _ in e.alloc[1:]])
        elif isinstance(eff, m.SignalElement):
            # a worker that is away gets the signal when it joins again (D-8)
            self._unsent_signals[(job_id, index)] = eff.sig
            self._each_first_host([e], lambda w, x: (w.signal(job_id, index, eff.sig),
                                                     self._unsent_signals.pop((job_id, index), None)))
        elif isinstance(eff, m.EndTasks):
            self._end_tasks(job_id, index, list(eff.hosts))
        else:  # pragma: no cover - a new effect type without its runner
            raise TypeError(f"no runner for effect {eff!r}")

    def _changes(self, elements: list[Element], stim: Stimulus) -> list[tuple[Element, Stimulus, Outcome]]:
        """The outcomes of `stim` on each of `elements` that it applies to: a pair the table
        refuses (kill a finished element of an array) or asks nothing of is left out."""
        out = []
        for e in elements:
            try:
                o = transition(e, stim)
            except IllegalTransition:
                continue
            if o is not None:
                out.append((e, stim, o))
        return out

    def job(self, job_id: int) -> Job:
        """The job with ID `job_id`, in memory or recalled from the store (`recall`, which a
        route awaits first for a job that may have been purged). Raises NotFound."""
        j = self.jobs.get(job_id) or self._recall_get(job_id)
        if j is None:
            raise NotFound(f"job {job_id} not found; `xcecli jobs -a -u all` lists the jobs the cluster knows")
        return j

    def _elements(self, job: Job, index: int | list[int] | None) -> list[Element]:
        """The elements a user action names: every one (None), one (`index`), or several (a
        list, JobAction.indices: all of them, in the order given). Raises NotFound for a job
        that is not an array, or naming the indices it lacks (nothing is acted on then)."""
        if index is None:
            return list(job.elements.values())
        if isinstance(index, list):
            if not job.is_array:
                raise NotFound(f"job {job.id} is not an array; refer to it as {job.id}")
            lacking = [i for i in index if i not in job.elements]
            if lacking:
                from xced.api.arrays import format_runs, runs_of

                raise NotFound(f"job {job.id} has no element {format_runs(runs_of(set(lacking)))}; its indices are "
                               f"{job.spec.array_spec}")
            return [job.elements[i] for i in index]
        e = job.elements.get(index)
        if e is None:
            if not job.is_array:
                raise NotFound(f"job {job.id} is not an array; refer to it as {job.id}")
            raise NotFound(f"job {job.id} has no element {index}; its indices are {job.spec.array_spec}")
        return [e]



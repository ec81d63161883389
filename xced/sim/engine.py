"""Replay a workload through the daemon's scheduler on a virtual clock (SIM-1).

`simulate(jobs, machine_procs, policy)` feeds `SimJob`s (xced.sim.swf) to the very
`schedule()` that `xced` runs (xced.scheduler.session), with the same snapshot types,
the same placement code and the same per-session unsatisfiable-request cache (SCHED-2).

The machine is one host of `machine_procs` slots: an SWF job of N processors is a job
of N tasks on it (the traces do not say how processors sat on nodes, so nothing is
lost by pooling them). Each job's run limit is its requested time (the estimate EASY
uses, SCHED-1) and it runs for its duration (run time clamped to the estimate, so no
job outlives its estimate).

Sessions. By default all events of one time (job ends and submissions) are taken first
and one session follows, as the daemon's coalescing delay (`sched_delay`) does; it runs
only when something can change then: an end (processors were freed) or a submission
that could start on the free processors (a job that cannot start cannot backfill, and a
new job is last in the queue, so it changes no other decision). With
`per_event=True` the events are taken as the published simulators order them (pyss): at
one time, job ends before submissions, a session after each end and after each
submission that could start.

What a session is shown. A session reads the pending jobs in the scheduler's order
(SCHED-1: submit time, then job ID; the simulator has one queue) and decides each job
from what the jobs before it took, so a session over a part of the queue decides the
jobs of that part as a session over the whole queue does, provided the part holds every
job that could start or become the blocked head. With F processors free, at most F jobs
start (each takes at least one), so the head is among the first F + 1 jobs. Jobs of one
class (same processors, same run limit) are decided alike within a session, and what is
free and what the head's reservation spares only shrink as the session goes on, so once
one job of a class does not start no later one does, and at most F // procs of the class
start. The session is therefore shown the first F + 1 jobs and the first F // procs jobs
of each class with at most F processors: at most a few hundred jobs on a small machine
however deep the queue, so a burst of 10,000 submissions costs about what the same jobs
cost spread out. `full_queue=True` shows every session the whole queue (the plain
definition; quadratic on bursts), the reference the tests compare the two with.

Policies: `"easy"` (FCFS with EASY backfilling: the queue's `backfill: true`) and
`"fcfs"` (strict first come, first served).

Projects (PRJ-6, PRJ-7; `projects=`, `xceadmin sim run --projects FILE`): SWF group G runs
in project `/g<G>` and SWF user U as user `u<U>` (-1: no project, no user), and each session
holds the jobs to their projects' shares and quotas exactly as the daemon does (the snapshot
carries the projects and the running use; the scheduler builds the book). A job that no cap
could ever hold (more processors than its project's quota or share of the machine) is
refused, as the daemon refuses it at submit: it is not replayed and is counted in
`SimResult.refused`. A job held by a cap starts nothing and blocks nobody, so the window
above no longer bounds where the head is; with projects, a class is also keyed by project
and user, and a session is shown the first F // procs + 1 jobs of each class (at most
F // procs of a class start, and the first of a class that does not start is the only one
of it that can be the head: a cap's headroom only shrinks in a session, so if an earlier job
of the class was held by a cap, so is every later one).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence

from typing import TYPE_CHECKING

from xced.scheduler.session import schedule
from xced.scheduler.snapshot import HostSupply, JobSnap, QueueSnap, RunSnap, Snapshot
from xced.sim.metrics import JobOutcome
from xced.sim.swf import SimJob

if TYPE_CHECKING:
    from xced.model.project import ProjectsConfig

__all__ = ["SimResult", "simulate"]

HOST = "sim"
QUEUE = "sim"
_END, _SUBMIT = 0, 1
_MEM_MB = 1 << 40  # the traces say nothing about memory: never the constraint


@dataclass(slots=True)
class SimResult:
    """What a replay produced: one JobOutcome per job (in end order), the number of
    scheduling sessions run, and the simulated time span (first submit, last end), s."""

    outcomes: list[JobOutcome] = field(default_factory=list)
    sessions: int = 0
    first_submit: float = 0.0
    last_end: float = 0.0
    #: with projects: the jobs refused as no cap could ever hold them (job IDs of the trace),
    #: and the refusal of the first (what the daemon would answer at submit)
    refused: list[int] = field(default_factory=list)
    refused_example: str | None = None


class _Queue:
    """The pending jobs in the scheduler's order (submit time, then position in `jobs`,
    which is the snapshot's job ID), all of them and by class (processors, run limit), as
    sorted lists of (submit, position): appends in event order, removals by bisection."""

    __slots__ = ("snaps", "order", "classes", "extra")

    def __init__(self, projects: bool = False) -> None:
        self.snaps: dict[int, JobSnap] = {}
        self.order: list[tuple[float, int]] = []
        #: processors -> (run limit, project, user) -> the class's jobs, in order
        self.classes: dict[int, dict[tuple, list[tuple[float, int]]]] = {}
        #: with projects, one more job of each class (the module docstring)
        self.extra = 1 if projects else 0

    def __bool__(self) -> bool:
        return bool(self.snaps)

    def add(self, pos: int, snap: JobSnap) -> None:
        key = (snap.submit_time, pos)
        self.snaps[pos] = snap
        self.order.append(key)  # submissions arrive in (time, position) order: still sorted
        self.classes.setdefault(snap.ntasks_min, {}).setdefault((snap.run_limit_s, snap.project, snap.user),
                                                                []).append(key)

    def remove(self, pos: int) -> None:
        snap = self.snaps.pop(pos)
        key = (snap.submit_time, pos)
        del self.order[bisect_left(self.order, key)]
        group = self.classes[snap.ntasks_min]
        cls = (snap.run_limit_s, snap.project, snap.user)  # what decides a class alike (module docstring)
        members = group[cls]
        del members[bisect_left(members, key)]
        if not members:
            del group[cls]
            if not group:
                del self.classes[snap.ntasks_min]

    def window(self, free: int) -> list[JobSnap]:
        """The jobs a session with `free` processors free must see to decide as it would
        over the whole queue (the rule in the module docstring), in order."""
        keys = set(self.order[:free + 1])
        extra = self.extra
        for procs, group in self.classes.items():
            if procs <= free or extra:
                n = free // procs + extra
                for members in group.values():
                    keys.update(members[:n])
        return [self.snaps[pos] for _, pos in sorted(keys)]


def sim_project(j: SimJob) -> tuple[str | None, str | None]:
    """The project and user an SWF job runs as with a projects file: `/g<group>` and `u<user>`
    (None for an unknown, -1, number)."""
    return (f"/g{j.group_id}" if j.group_id >= 0 else None), (f"u{j.user_id}" if j.user_id >= 0 else None)


def simulate(jobs: Sequence[SimJob], machine_procs: int, policy: Literal["easy", "fcfs"] = "easy", *,
             per_event: bool = False, full_queue: bool = False,
             progress: Callable[[int], None] | None = None, projects: "ProjectsConfig | None" = None) -> SimResult:
    """Replay `jobs` (sorted by submit time, s) on `machine_procs` processors with `policy`.

    Returns a SimResult. By default one session runs per distinct event time at which
    something can change (an end, or a submission that could start); `per_event=True`
    runs one after each end and each submission that could start (pyss's order: ends
    first). `full_queue=True` shows each session every pending job instead of the part
    that decides it (same decisions, slower; see the module docstring). `progress(n)` is
    called now and then with the number of jobs finished so far. Raises ValueError for an
    unknown policy, or a job that asks for fewer than 1 or more processors than the
    machine has (the SWF reader drops those, SIM-1). `projects`: replay under these projects'
    shares and quotas (the module docstring; None or none defined: no caps).
    """
    if policy not in ("easy", "fcfs"):
        raise ValueError(f"policy {policy!r}: valid policies are easy (FCFS with EASY backfilling) and fcfs")
    for j in jobs:
        if j.procs > machine_procs:
            raise ValueError(f"job {j.job_id} asks for {j.procs} processors; the machine has {machine_procs}")
        if j.procs < 1:
            raise ValueError(f"job {j.job_id} asks for {j.procs} processors; a job needs at least 1")
    queues = [QueueSnap(QUEUE, 0, 0, None, policy == "easy")]
    if projects is not None and not projects.projects:
        projects = None
    result = SimResult()
    who: list[tuple[str | None, str | None]] = [sim_project(j) if projects else (None, None) for j in jobs]
    if projects is not None:
        from xced.policy.projects import never_fits

        supply = {"slots": machine_procs, "mem_mb": _MEM_MB}
        seen: dict[tuple, str | None] = {}
        for pos, j in enumerate(jobs):
            key = (*who[pos], j.procs)
            if key not in seen:
                seen[key] = never_fits(projects, supply, who[pos][0], who[pos][1], {"slots": j.procs})
            if seen[key] is not None:
                result.refused.append(j.job_id)
                result.refused_example = result.refused_example or f"job {j.job_id}: {seen[key]}"
    refused = set(result.refused)
    events: list[tuple[float, int, int, int]] = []  # (time, kind, seq, job position)
    for pos, j in enumerate(jobs):
        if refused and j.job_id in refused:
            continue
        events.append((float(j.submit), _SUBMIT, pos, pos))
    heapq.heapify(events)
    pending = _Queue(projects is not None)
    running: dict[int, RunSnap] = {}
    usage: dict[int, tuple[str | None, str | None, dict[str, float]]] = {}  # with projects: what runs, by position
    started: dict[int, float] = {}
    free = machine_procs
    seq = len(jobs)
    done = 0

    def session(now: float) -> None:
        nonlocal free, seq
        if not pending:
            return
        shown = list(pending.snaps.values()) if full_queue else pending.window(free)
        snap = Snapshot([HostSupply(HOST, machine_procs, free, _MEM_MB, _MEM_MB)], queues, shown,
                        {}, list(running.values()))
        if projects is not None:
            snap.projects, snap.usage = projects, list(usage.values())
        out = schedule(snap, now, explain=False)
        result.sessions += 1
        for d in out.dispatches:
            pos = d.job_id  # the snapshot's job ID is the job's position in `jobs`
            pending.remove(pos)
            j = jobs[pos]
            free -= d.ntasks
            started[pos] = now
            running[pos] = RunSnap(pos, 0, now + j.estimate_s, {HOST: {"slots": d.ntasks}})
            if projects is not None:
                usage[pos] = (*who[pos], {"slots": d.ntasks})
            seq += 1
            heapq.heappush(events, (now + j.duration_s, _END, seq, pos))

    changed = False  # one session per time: did an end, or a submission that fits, happen at this time?
    while events:
        now, kind, _, pos = heapq.heappop(events)
        j = jobs[pos]
        if kind == _END:
            rs = running.pop(pos)
            if usage:
                usage.pop(pos, None)
            free += int(rs.reserve[HOST]["slots"])
            result.outcomes.append(JobOutcome(j.job_id, float(j.submit), started[pos], now, j.procs))
            done += 1
            if progress is not None and done % 1000 == 0:
                progress(done)
            if per_event:
                session(now)
            else:
                changed = True
        else:
            js = JobSnap(pos, 0, QUEUE, float(j.submit), j.procs, j.procs, run_limit_s=j.estimate_s)
            if projects is not None:
                js.project, js.user = who[pos]
            pending.add(pos, js)
            if per_event:
                if j.procs <= free:
                    session(now)
            else:
                changed = changed or j.procs <= free
        if not per_event and changed and (not events or events[0][0] != now):
            session(now)
            changed = False
    if progress is not None:
        progress(done)
    if result.outcomes:
        result.first_submit = min(o.submit for o in result.outcomes)
        result.last_end = max(o.end for o in result.outcomes)
    return result

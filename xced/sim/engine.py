"""Replay a workload through the daemon's scheduler on a virtual clock (SIM-1).

`simulate(jobs, machine_procs, policy)` feeds `SimJob`s (xced.sim.swf) to the very
`schedule()` that `xced` runs (xced.scheduler.session), with the same snapshot types,
the same placement code and the same per-session unsatisfiable-request cache (SCHED-2).

The machine is one host of `machine_procs` slots: an SWF job of N processors is a job
of N tasks on it (the traces do not say how processors sat on nodes, so nothing is
lost by pooling them). Each job's run limit is its requested time (the estimate EASY
uses, SCHED-1) and it runs for its duration (run time clamped to the estimate, so no
job outlives its estimate).

Events, as the published simulators order them (pyss): at one time, job ends come
before submissions; after each end a session runs; after each submission a session
runs when the new job could start on the free processors (if it cannot, no decision
can change: nothing was freed, and a job that cannot start cannot backfill). With
`per_event=False` all events of one time are taken first and one session follows, as
the daemon's coalescing delay does (again only when an end or a submission that could
start happened at that time).

Policies: `"easy"` (FCFS with EASY backfilling: the queue's `backfill: true`) and
`"fcfs"` (strict first come, first served).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence

from xced.scheduler.session import schedule
from xced.scheduler.snapshot import HostSupply, JobSnap, QueueSnap, RunSnap, Snapshot
from xced.sim.metrics import JobOutcome
from xced.sim.swf import SimJob

__all__ = ["SimResult", "simulate"]

HOST = "sim"
QUEUE = "sim"
_END, _SUBMIT = 0, 1
_MEM_MB = 1 << 40  # the traces say nothing about memory: never the constraint


@dataclass(slots=True)
class SimResult:
    """What a replay produced: one JobOutcome per job (in start order), the number of
    scheduling sessions run, and the simulated time span (first submit, last end), s."""

    outcomes: list[JobOutcome] = field(default_factory=list)
    sessions: int = 0
    first_submit: float = 0.0
    last_end: float = 0.0


def simulate(jobs: Sequence[SimJob], machine_procs: int, policy: Literal["easy", "fcfs"] = "easy", *,
             per_event: bool = True, progress: Callable[[int], None] | None = None) -> SimResult:
    """Replay `jobs` (sorted by submit time) on `machine_procs` processors with `policy`.

    Returns a SimResult. `progress(n)` is called now and then with the number of jobs
    finished so far. Raises ValueError for an unknown policy, or a job that asks for more
    processors than the machine has (the SWF reader drops those, SIM-1).
    """
    if policy not in ("easy", "fcfs"):
        raise ValueError(f"policy {policy!r}: valid policies are easy (FCFS with EASY backfilling) and fcfs")
    for j in jobs:
        if j.procs > machine_procs:
            raise ValueError(f"job {j.job_id} asks for {j.procs} processors; the machine has {machine_procs}")
    queues = [QueueSnap(QUEUE, 0, 0, None, policy == "easy")]
    events: list[tuple[float, int, int, int]] = []  # (time, kind, seq, job position)
    for pos, j in enumerate(jobs):
        events.append((float(j.submit), _SUBMIT, pos, pos))
    heapq.heapify(events)
    pending: dict[int, JobSnap] = {}  # position -> snapshot, in submit order (dicts keep insertion order)
    running: dict[int, RunSnap] = {}
    started: dict[int, float] = {}
    free = machine_procs
    result = SimResult()
    seq = len(jobs)
    done = 0

    def session(now: float) -> None:
        nonlocal free, seq
        if not pending:
            return
        snap = Snapshot([HostSupply(HOST, machine_procs, free, _MEM_MB, _MEM_MB)], queues, list(pending.values()),
                        {}, list(running.values()))
        out = schedule(snap, now, explain=False)
        result.sessions += 1
        for d in out.dispatches:
            pos = d.job_id  # the snapshot's job ID is the job's position in `jobs`
            pending.pop(pos)
            j = jobs[pos]
            free -= d.ntasks
            started[pos] = now
            running[pos] = RunSnap(pos, 0, now + j.estimate_s, {HOST: {"slots": d.ntasks}})
            seq += 1
            heapq.heappush(events, (now + j.duration_s, _END, seq, pos))

    changed = False  # per_event=False: did an end, or a submission that fits, happen at this time?
    while events:
        now, kind, _, pos = heapq.heappop(events)
        j = jobs[pos]
        if kind == _END:
            rs = running.pop(pos)
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
            pending[pos] = JobSnap(pos, 0, QUEUE, float(j.submit), j.procs, j.procs, run_limit_s=j.estimate_s)
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


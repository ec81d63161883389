"""Scheduler sessions (D-4, SCHED-1 without backfill, RES-3..RES-6): `schedule(snapshot, now)`.

Pure: reads a Snapshot, returns decisions and a trace; never writes state. The
controller re-checks and applies the decisions (DESIGN rule 1); the simulator calls
the same function.

Policy: queues by priority (higher first; ties by their order in queues.yaml); within a
queue, first come first served by submit time, then job ID, then array index. v1 is
strict FCFS: when a queue's first waiting job cannot start, the jobs behind it in that
queue wait too (no backfill yet), so jobs of one queue start in submit order. Held
elements and elements over their array's `%N` limit never block.

Placement is the planner's (`placement.place`): the largest task count in the job's
range that fits now (RES-3), span/same/order/rusage and the queue's host limit
(RES-4, RES-5), capacity-driven host order. What a dispatch reserves (slots, memory,
resources) is taken from the session's free supply before the next job is placed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xced.model.jobs import PendReason
from xced.scheduler.placement import HostSupply, Plan, PlacementRequest, place
from xced.scheduler.snapshot import JobSnap, Snapshot


@dataclass(slots=True)
class Dispatch:
    """Start element (job_id, index) with `alloc` = [(host, slots), ...] (the first host runs
    the script) and `reserve` = {host: {"slots": n, "mem": MB, res: amount}} held while it runs."""

    job_id: int
    index: int
    alloc: list[tuple[str, int]]
    reserve: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the profile's content hash the decision was made with (DISPATCH-1)
    profile_hash: str | None = None

    @property
    def ntasks(self) -> int:
        return sum(n for _, n in self.alloc)


@dataclass(slots=True)
class SessionResult:
    """Decisions of one session: dispatches in order, pend reasons by (job_id, index), trace lines."""

    dispatches: list[Dispatch] = field(default_factory=list)
    pend_reasons: dict[tuple[int, int], PendReason] = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)
    #: queues whose head could not start, with the reason every later job of the queue gets
    blocked: dict[str, PendReason] = field(default_factory=dict)


REASON_HELD = "The job is held while pending (PSUSP)"
REASON_ARRAY_LIMIT = "The job array has reached its limit of {limit} running elements"
REASON_BEHIND = "Waiting behind job {ref} in queue {queue} (first come, first served)"
REASON_NO_HOSTS = "No host is available: every host is closed or down"


def _ref(j: JobSnap) -> str:
    return str(j.job_id) if j.index == 0 else f"{j.job_id}[{j.index}]"


class _Supply:
    """The session's free supply, updated as dispatches are decided."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.hosts: dict[str, HostSupply] = {
            h.name: HostSupply(h.name, h.slots, h.slots_free, h.mem_mb, h.mem_free_mb, dict(h.resources),
                               dict(h.resources_free), dict(h.attributes), frozenset(h.tags), h.status)
            for h in snapshot.hosts}

    def usable(self) -> bool:
        return any(h.status == "ok" for h in self.hosts.values())

    def take(self, plan: Plan) -> None:
        for name, res in plan.reserve.items():
            h = self.hosts[name]
            free = dict(h.resources_free)
            for k, v in res.items():
                if k not in ("slots", "mem"):
                    free[k] = free.get(k, 0.0) - v
            self.hosts[name] = HostSupply(h.name, h.slots, h.slots_free - int(res.get("slots", 0)), h.mem_mb,
                                          h.mem_free_mb - int(res.get("mem", 0)), h.resources, free, h.attributes,
                                          h.tags, h.status)


def schedule(snapshot: Snapshot, now: float) -> SessionResult:
    """Run one scheduling session over `snapshot` at time `now` (epoch seconds).

    Returns a SessionResult: dispatches (each with its host allocation and reservations),
    a structured pend reason (RES-6) for every pending element not dispatched, and a
    human-readable trace. Never raises for a well-formed snapshot.
    """
    res = SessionResult()
    queues = {q.name: q for q in snapshot.queues}
    qkey = {q.name: (-q.priority, q.position) for q in snapshot.queues}
    order = sorted(snapshot.pending,
                   key=lambda j: (qkey.get(j.queue, (0, 1 << 30)), j.submit_time, j.job_id, j.index))
    supply = _Supply(snapshot)
    array_running = dict(snapshot.array_running)
    blocked = res.blocked  # queue -> the one reason shared by every job behind its head
    res.trace.append(f"session at {now:.3f}: {len(order)} pending, "
                     f"{sum(1 for h in supply.hosts.values() if h.status == 'ok')} usable hosts, "
                     f"{sum(h.slots_free for h in supply.hosts.values() if h.status == 'ok')} free slots")
    no_hosts = PendReason(REASON_NO_HOSTS)
    for j in order:
        key = (j.job_id, j.index)
        if j.held:
            continue  # the controller keeps the hold's own reason
        if j.array_limit is not None and array_running.get(j.job_id, 0) >= j.array_limit:
            res.pend_reasons[key] = PendReason(REASON_ARRAY_LIMIT.format(limit=j.array_limit))
            continue
        behind = blocked.get(j.queue)
        if behind is not None:
            res.pend_reasons[key] = behind  # one shared object: cheap for 10,000 jobs behind a head
            continue
        ref = _ref(j)
        if not supply.usable():
            res.pend_reasons[key] = no_hosts
            blocked[j.queue] = PendReason(REASON_BEHIND.format(ref=ref, queue=j.queue))
            continue
        q = queues.get(j.queue)
        req = PlacementRequest(j.ntasks_min, j.ntasks_max, j.resreq, q.host_limit if q else None)
        out = place(req, list(supply.hosts.values()), max_host_lines=50)
        if isinstance(out, Plan):
            supply.take(out)
            res.dispatches.append(Dispatch(j.job_id, j.index, list(out.alloc), out.reserve, j.profile_hash))
            if j.array_limit is not None:
                array_running[j.job_id] = array_running.get(j.job_id, 0) + 1
            res.trace.append(f"{ref}: dispatch {out.ntasks} task(s) on " + " ".join(f"{h}:{n}" for h, n in out.alloc))
            continue
        pr = out.pend_reason()
        res.pend_reasons[key] = pr
        blocked[j.queue] = PendReason(REASON_BEHIND.format(ref=ref, queue=j.queue))
        res.trace.append(f"{ref}: pend: {pr.main}")
    return res

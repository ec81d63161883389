"""Scheduler v1 (D-4, SCHED-1 without backfill, RES-6): `schedule(snapshot, now)`.

Pure: reads a Snapshot, returns decisions and a trace; never writes state. The
controller re-checks and applies the decisions (DESIGN rule 1); the simulator calls
the same function.

Policy: queues by priority (higher first; ties by their order in queues.yaml); within a
queue, first come first served by submit time, then job ID, then array index. v1 is
strict FCFS: when a queue's first waiting job cannot start for want of slots or memory,
the jobs behind it in that queue wait too (no backfill yet), so jobs of one queue start
in submit order. Held elements and elements over their array's `%N` limit never block.

Placement: a job takes the largest task count in its range that fits now (RES-3), on
the hosts with the most free slots first (RES-4 capacity-driven), ties by host name.
A job's memory reservation (`mem_mb`) is held on every host it uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xced.model.jobs import HostShortfall, PendReason
from xced.scheduler.snapshot import JobSnap, Snapshot


@dataclass(slots=True)
class Dispatch:
    """Start element (job_id, index) with `alloc` = [(host, slots), ...]; first host runs the script."""

    job_id: int
    index: int
    alloc: list[tuple[str, int]]

    @property
    def ntasks(self) -> int:
        return sum(n for _, n in self.alloc)


@dataclass(slots=True)
class SessionResult:
    """Decisions of one session: dispatches in order, pend reasons by (job_id, index), trace lines."""

    dispatches: list[Dispatch] = field(default_factory=list)
    pend_reasons: dict[tuple[int, int], PendReason] = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)


REASON_HELD = "The job was suspended while pending"
REASON_ARRAY_LIMIT = "The job array has reached its limit of {limit} running elements"
REASON_BEHIND = "Waiting behind job {ref} in queue {queue} (first come, first served)"
REASON_NO_HOSTS = "No host is available: every host is closed or down"


def _ref(j: JobSnap) -> str:
    return str(j.job_id) if j.index == 0 else f"{j.job_id}[{j.index}]"


def schedule(snapshot: Snapshot, now: float) -> SessionResult:
    """Run one scheduling session over `snapshot` at time `now` (epoch seconds).

    Returns a SessionResult: dispatches (each with its host allocation), a structured
    pend reason for every pending element not dispatched, and a human-readable trace.
    Never raises for any well-formed snapshot.
    """
    res = SessionResult()
    qprio = {q.name: (-q.priority, q.position) for q in snapshot.queues}
    order = sorted(
        snapshot.pending,
        key=lambda j: (qprio.get(j.queue, (0, 1 << 30)), j.submit_time, j.job_id, j.index),
    )
    hosts = [h for h in snapshot.hosts if h.status == "ok"]
    free = {h.name: h.slots_free for h in hosts}
    memfree = {h.name: h.mem_free_mb for h in hosts}
    total = {h.name: h.slots for h in hosts}
    array_running = dict(snapshot.array_running)
    blocked: dict[str, str] = {}  # queue -> ref of the job that blocks it
    res.trace.append(f"session at {now:.3f}: {len(order)} pending, {len(hosts)} usable hosts, "
                     f"{sum(free.values())} free slots")

    for j in order:
        key = (j.job_id, j.index)
        ref = _ref(j)
        if j.held:
            res.pend_reasons[key] = PendReason(REASON_HELD)
            continue
        if j.array_limit is not None and array_running.get(j.job_id, 0) >= j.array_limit:
            res.pend_reasons[key] = PendReason(REASON_ARRAY_LIMIT.format(limit=j.array_limit))
            continue
        if j.queue in blocked:
            res.pend_reasons[key] = PendReason(REASON_BEHIND.format(ref=blocked[j.queue], queue=j.queue))
            continue
        if not hosts:
            res.pend_reasons[key] = PendReason(REASON_NO_HOSTS)
            blocked[j.queue] = ref
            continue
        # hosts able to take at least one task: free slots and (if asked) memory
        cands = [h for h in hosts if free[h.name] > 0 and (j.mem_mb is None or memfree[h.name] >= j.mem_mb)]
        cap = sum(free[h.name] for h in cands)
        if cap >= j.ntasks_min:
            want = min(j.ntasks_max, cap)
            cands.sort(key=lambda h: (-free[h.name], h.name))
            alloc: list[tuple[str, int]] = []
            left = want
            for h in cands:
                if left == 0:
                    break
                take = min(free[h.name], left)
                alloc.append((h.name, take))
                left -= take
            for name, n in alloc:
                free[name] -= n
                if j.mem_mb is not None:
                    memfree[name] -= j.mem_mb
            res.dispatches.append(Dispatch(j.job_id, j.index, alloc))
            if j.array_limit is not None:
                array_running[j.job_id] = array_running.get(j.job_id, 0) + 1
            res.trace.append(f"{ref}: dispatch {want} task(s) on " + " ".join(f"{h}:{n}" for h, n in alloc))
            continue
        # cannot start: structured reason with per-host shortfalls (RES-6)
        short = []
        for h in sorted(hosts, key=lambda h: h.name):
            if j.mem_mb is not None and memfree[h.name] < j.mem_mb:
                short.append(HostShortfall(h.name, "mem", memfree[h.name], j.mem_mb,
                                           f"{h.name}: mem {memfree[h.name]} MB free of {h.mem_mb} MB, needs {j.mem_mb} MB"))
            elif free[h.name] < j.ntasks_min:
                short.append(HostShortfall(h.name, "slots", free[h.name], j.ntasks_min,
                                           f"{h.name}: slots {free[h.name]} free of {total[h.name]}, needs {j.ntasks_min}"))
        total_free = sum(free.values())
        if sum(total.values()) < j.ntasks_min:
            main = f"Not enough slots in the cluster: {sum(total.values())} in all, the job needs {j.ntasks_min}"
        elif j.mem_mb is not None and not any(memfree[h.name] >= j.mem_mb for h in hosts):
            main = f"Not enough memory: no host has {j.mem_mb} MB free"
        else:
            main = f"Not enough free slots: {cap} usable of {total_free} free, the job needs {j.ntasks_min}"
        res.pend_reasons[key] = PendReason(main, short)
        blocked[j.queue] = ref
        res.trace.append(f"{ref}: pend: {main}")
    return res

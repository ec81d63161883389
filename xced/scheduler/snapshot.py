"""What the scheduler sees (D-4): a plain, immutable-by-convention snapshot of hosts,
queues and pending work, built by the controller (or the simulator) for one session.

Units: memory MB, slots integers, times epoch seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from xced.model.jobs import PendReason
from xced.resreq import ResReq

if TYPE_CHECKING:  # pydantic stays out of the simulator's imports until projects are used
    from xced.model.project import ProjectsConfig


@dataclass(slots=True, frozen=True)
class HostSupply:
    """One host's supply now (RES-2), the one host shape the scheduler and the placement
    planner read. Memory in MB. ``resources``: totals of numeric consumable resources
    (gpu, licences); ``resources_free``: what is free of them; ``attributes``: string
    attributes (type, model); ``tags``: boolean resources; ``status``: ``"ok"`` is
    usable, anything else (closed, unavail, ...) is not; ``load``: LSF's load indices its
    worker last reported (RES-7, names and units of xced.model.load; empty: none, as in
    the simulator). ``njobs``: how many elements run there (0 where unknown, as in the
    simulator); ``exclusive``: one of them is an exclusive job (``bsub -x``, docs/lsf-behaviour.md
    section 6): the host then offers no slot to any other job; ``last_dispatch``: when a job
    was last dispatched to it (ties go to the host dispatched to least recently). Never changed once made: the
    scheduler's working copies replace a host's record rather than write to it."""

    name: str
    slots: int
    slots_free: int
    mem_mb: int
    mem_free_mb: int
    resources: dict[str, float] = field(default_factory=dict)
    resources_free: dict[str, float] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    tags: frozenset[str] = frozenset()
    status: str = "ok"
    load: dict[str, float] = field(default_factory=dict)
    njobs: int = 0
    exclusive: bool = False
    #: when a job was last dispatched to it (epoch seconds on the snapshot's clock; 0: never,
    #: or not known): among hosts equally good for a request, the one dispatched to least
    #: recently goes first, so load spreads (RES-4; xced.scheduler.placement, host order)
    last_dispatch: float = 0.0


def host_order_key(h: HostSupply) -> tuple[int, float, str] | None:
    """Host h's place in the default host order (RES-4, xced.scheduler.placement: most free
    slots, least recently dispatched to, name) among the hosts a task of a plain request can
    go to, as a sort key; None when none can (no free slot, not ok, or it runs an exclusive
    job). The host index of a session (issue 19) is the sorted list of these keys."""
    if h.slots_free > 0 and h.status == "ok" and not h.exclusive:
        return (-h.slots_free, h.last_dispatch, h.name)
    return None


@dataclass(slots=True)
class QueueSnap:
    """A queue's policy (MERGE-2): priority (higher first), position in queues.yaml for
    ties, its host limit per job (LSF HOSTLIMIT_PER_JOB) and whether it backfills."""

    name: str
    priority: int
    position: int
    host_limit: int | None = None
    #: EASY backfilling in this queue (SCHED-1); False: strict first come, first served
    backfill: bool = False


@dataclass(slots=True)
class JobSnap:
    """One pending element with its effective resource requirement (merged, RES-1).
    `array_limit` is the `%N` of its array (None: no cap)."""

    job_id: int
    index: int
    queue: str
    submit_time: float
    ntasks_min: int
    ntasks_max: int
    resreq: ResReq = ResReq()
    array_limit: int | None = None
    held: bool = False
    #: content hash of the job's profile as the snapshot saw it (DISPATCH-1), None: no profile
    profile_hash: str | None = None
    #: the effective run limit, seconds: the backfill estimate (SCHED-1); None: unbounded
    run_limit_s: float | None = None
    #: the pend reason the controller last accepted for it (SCHED-3: not pushed again)
    last_reason: PendReason | None = None
    #: its project's path (PRJ-1) and its user: whose caps it is held to (PRJ-6, PRJ-7);
    #: a project of None is never capped (open mode, a record older than projects)
    project: str | None = None
    user: str | None = None
    #: an exclusive job (LSF bsub -x, docs/lsf-behaviour.md section 6): it goes only to hosts
    #: where nothing runs, and while it runs they take no other job
    exclusive: bool = False


@dataclass(slots=True)
class RunSnap:
    """A running element as backfilling sees it (SCHED-1): when it is expected to end at
    the latest (start + run limit, epoch seconds; None: no run limit) and what it holds,
    {host: {"slots": n, "mem": MB, resource: amount}}."""

    job_id: int
    index: int
    end_estimate: float | None
    reserve: dict[str, dict[str, float]]


@dataclass(frozen=True, slots=True)
class Clock:
    """How the times of a snapshot read (D-4): `wall` True for epoch seconds of the daemon's
    clock, shown as clock times with `utc_offset_s` (the daemon's time zone); False for a
    simulator's trace clock, shown as seconds. The scheduler never looks at the machine's
    own time zone or guesses from the size of a number."""

    wall: bool = False
    utc_offset_s: int = 0


#: the clock of a simulator's replay (and of tests that build snapshots by hand)
TRACE_CLOCK = Clock()


def format_when(t: float, clock: Clock) -> str:
    """A time as a reader sees it by `clock`: "2026-12-01 13:05:00" in the daemon's time
    zone (its UTC offset, seconds, on the clock), or "t=3600 s" on a simulator's trace clock."""
    if clock.wall:
        return datetime.fromtimestamp(t, timezone(timedelta(seconds=clock.utc_offset_s))).strftime("%Y-%m-%d %H:%M:%S")
    return f"t={t:.0f} s"


def wall_clock(now: float) -> Clock:
    """The daemon's clock at `now` (epoch seconds), with its time zone's offset then."""
    import time

    return Clock(True, time.localtime(now).tm_gmtoff)


@dataclass(slots=True)
class Snapshot:
    """Input of `schedule()`. `array_running` counts running elements per array job ID;
    `running` lists the running elements (needed for backfill reservations only); `clock`
    says how times read (the daemon's wall clock in its time zone, or a trace clock).
    `projects`: the projects config in force, whose shares are carved from the usable hosts'
    totals and whose caps hold the pending jobs (PRJ-6, PRJ-7; None or no project: open
    mode, no caps); `usage`: what the running and stopped elements hold, one
    (project, user, {"slots", "mem_mb", resource: amount}) each or summed per (project, user)
    (xced.policy.projects.reserve_use makes the dict from a reserve); read only with projects.
    `host_order`: the host index kept by whoever builds the snapshot, or None."""

    hosts: list[HostSupply]
    queues: list[QueueSnap]
    pending: list[JobSnap]
    array_running: dict[int, int] = field(default_factory=dict)
    running: list[RunSnap] = field(default_factory=list)
    clock: "Clock" = field(default_factory=lambda: TRACE_CLOCK)
    projects: "ProjectsConfig | None" = None
    usage: list[tuple[str | None, str | None, dict[str, float]]] = field(default_factory=list)
    #: the sorted keys (`host_order_key`) of the hosts that have one, exactly: the host index,
    #: which the controller keeps up to date as hosts change (issue 19 part 4), so that a
    #: session does not sort every host; None: the session sorts them itself
    host_order: list[tuple[int, float, str]] | None = None

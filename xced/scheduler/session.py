"""Scheduler sessions (D-4, SCHED-1, SCHED-2, SCHED-3, RES-3..RES-6): `schedule(snapshot, now)`.

Pure: reads a Snapshot, returns decisions and a trace; never writes state. The
controller re-checks and applies the decisions (DESIGN rule 1); the simulator
(`xced/sim/`) calls the same function.

Policy (SCHED-1): queues by priority (higher first; ties by their order in queues.yaml);
within a queue, first come first served by submit time, then job ID, then array index.
When a queue's first waiting job (its head) cannot start:

- without backfill (`backfill: false`), the jobs behind it in that queue wait too, so
  jobs of one queue start in submit order;
- with backfill (`backfill: true`, EASY backfilling), the head gets a reservation: the
  earliest time it could start if every running job ran to its run limit (the estimate),
  with the resources it would take then. A later job (of this queue or of any queue after
  it in the session) may start now only if it does not delay any reservation made so far:
  it ends by the reservation's start (now + its run limit), or the reserved head still
  fits at that time with what the later job holds. A job without a run limit counts as
  never ending. Reservations of different queues are computed independently.

Held elements, elements over their array's `%N` limit, and elements no host could ever run
even idle ("can never start", waiting for a host to join) never block their queue.

Placement is the planner's (`placement.place`): the largest task count in the job's
range that fits now (RES-3), span/same/order/rusage and the queue's host limit
(RES-4, RES-5), capacity-driven host order. What a dispatch reserves (slots, memory,
resources) is taken from the session's free supply before the next job is placed.

SCHED-2: within a session the free supply only shrinks, so a request proved unable to
start now stays so. The first job that proves it leaves its full pend reason in the
session's cache, keyed by the request (task range, resreq, host limit); later jobs with
the same request get that reason without a search and the trace says so. The cache is
new every session.

SCHED-3: a reason equal to the one the controller last accepted for a job
(`JobSnap.last_reason`) is left out of `SessionResult.pend_reasons`.

Projects (PRJ-6, PRJ-7): with projects in the snapshot, the session builds one
`xced.policy.projects.QuotaBook` (shares carved from the usable hosts' totals, the running
use rolled up) and holds each job of a project to its caps, which the book alone decides:

- before placement, a job whose slot headroom is less than its `ntasks_min` pends with
  every cap in its way (`PendReason.caps`, the first as `main`: "project /physics/hep at
  quota: 32/32 slots"); such a job never blocks its queue nor becomes a backfill head, as
  in LSF a job pending on a limit does not hold the jobs behind it; a task range's
  `ntasks_max` is cut to the headroom (RES-3);
- after placement, the plan's full use (slots, memory, resources) is checked too; a task
  range shrinks to the largest count whose plan fits, else the job pends on its caps;
- a job that fits no host now and would block its queue or head a reservation is first held
  to its memory and resource caps (`least_need`): held back by them, it blocks nobody;
- a dispatch's use is taken from the book before the next job is decided.

A pend on caps is never put in the SCHED-2 cache (it says nothing about the request, only
about its project's use), and the cache is keyed by the request as placed (the task range
after the cut), so a reason proved for one project's job holds for any job it reaches.
Jobs with no project are never capped; without projects there is no book at all.

Exclusive jobs (LSF bsub -x; IBM bsub -x page, "Exclusive scheduling"; docs/lsf-behaviour.md
section 6): the planner places an exclusive job only on hosts where nothing runs and its plan
holds every slot of them, so a dispatch, a backfill check and a reservation all see those
hosts full until it ends (`Plan.held_slots`); the session marks them as running an exclusive
job for the reasons of later jobs. An exclusive request is never "slots alone": a head's
reservation for one is placed on real hosts. The SCHED-2 cache key carries the flag.
"""

from __future__ import annotations

import bisect
import gc
from dataclasses import dataclass, field, replace

from xced.model.jobs import HINT_START_WITH, PendReason
from xced.policy.projects import SLOTS, Cap, QuotaBook, least_need, reserve_use, supply_totals
from xced.scheduler.placement import (Plan, PlacementRequest, Shortfall, matching_hosts, ordered_form, place,
                                      place_ordered, shortfall, why_not_ordered)
from xced.scheduler.snapshot import Clock, HostSupply, JobSnap, Snapshot, format_when, host_order_key


@dataclass(slots=True)
class Dispatch:
    """Start element (job_id, index) with `alloc` = [(host, slots), ...] (the first host runs
    the script) and `reserve` = {host: {"slots": n, "mem": MB, res: amount}} held while it runs.
    `backfill`: it starts ahead of a reserved queue head (SCHED-1)."""

    job_id: int
    index: int
    alloc: list[tuple[str, int]]
    reserve: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the profile's content hash the decision was made with (DISPATCH-1)
    profile_hash: str | None = None
    backfill: bool = False

    @property
    def ntasks(self) -> int:
        return sum(n for _, n in self.alloc)


@dataclass(slots=True)
class Reservation:
    """A blocked queue head's reserved start (SCHED-1, EASY): `start` epoch seconds,
    `job` its reference ("12" or "12[3]")."""

    job: str
    queue: str
    start: float


@dataclass(slots=True)
class TraceLine:
    """One line of a session's decision trace (D-4): the element it is about ("12[3]",
    None for the session's own line) and what the session decided. `str()` gives the line
    as a reader sees it, "12[3]: dispatch 4 task(s) on h1:4". Never changed once made (not
    frozen only because a frozen dataclass costs twice as much to make, and a busy session
    makes one per pending job)."""

    ref: str | None
    text: str

    def __str__(self) -> str:
        return self.text if self.ref is None else f"{self.ref}: {self.text}"


@dataclass(slots=True)
class SessionResult:
    """Decisions of one session: dispatches in order, pend reasons by (job_id, index) (only
    those that changed, SCHED-3), the reservations made, and the decision trace (D-4)."""

    dispatches: list[Dispatch] = field(default_factory=list)
    pend_reasons: dict[tuple[int, int], PendReason] = field(default_factory=dict)
    trace: list[TraceLine] = field(default_factory=list)
    #: queues whose head could not start and that do not backfill, with the reason every
    #: later job of the queue gets
    blocked: dict[str, PendReason] = field(default_factory=dict)
    reservations: list[Reservation] = field(default_factory=list)
    #: every blocked head of a backfilling queue by reference ("12", "12[3]"): its
    #: reservation, or None when none can be foreseen (NO_RESERVATION)
    heads: dict[str, Reservation | None] = field(default_factory=dict)
    #: the session's unsatisfiable-request cache (SCHED-2): (ntasks_min, ntasks_max, resreq,
    #: host_limit) -> the full reason; still true after the session, as supply only shrank
    unsatisfiable: dict[tuple, PendReason] = field(default_factory=dict)
    #: the backfilling queues whose head could not start (each has an entry in `heads`)
    headed: set[str] = field(default_factory=set)
    #: a job was dispatched after an earlier job of this session had pended: the reasons
    #: given before it may count slots, memory or cap use it then took ("1 free slot ...
    #: would start now with -n 1"), so they are that much out of date until a later session
    #: decides those jobs again (the controller runs one, `pend_reason_update` seconds later)
    stale: bool = False


REASON_ARRAY_LIMIT = "The job array has reached its limit of {limit} running elements"
REASON_BEHIND = "Waiting behind job {ref} in queue {queue} (first come, first served)"
REASON_NO_HOSTS = "No host is available: every host is closed or down"
REASON_DELAY = ("Would delay job {ref}, which has resources reserved from {when} (backfill); "
                "a run limit (-W) ending by then would let it start now")
TRACE_CACHE_HIT = "no plan generated: skipped, same request as {proved} proved unsatisfiable earlier this session"
#: a blocked head for which no start time can be foreseen: running work ending at its run
#: limits never makes room for it, because work with no run limit holds what it needs, or a
#: select on a load index (whose future no run limit tells) or a closed host keeps it out
NO_RESERVATION = ("no reservation: running work ending at its run limits would not make room for it (work with no "
                  "run limit, a load index or a closed host decides when it starts)")


def reservation_text(r: "Reservation | None", clock: Clock) -> str:
    """What a blocked head's reservation (SCHED-1) says to a reader: "reserved from WHEN
    (backfill)", or NO_RESERVATION for None."""
    return NO_RESERVATION if r is None else f"reserved from {format_when(r.start, clock)} (backfill)"

_INF = float("inf")
_UNSEEN = object()
_BY_NAME = object()  # the key of the name order in _FreeHosts._matches


def request_key(req: PlacementRequest) -> tuple:
    """The SCHED-2 cache key of a request, which the controller's submit shortcut
    (xced.scheduler.shortcut) uses too: (ntasks_min, ntasks_max, resreq, host_limit), with
    a last True for an exclusive job (LSF bsub -x), which other jobs' proofs do not decide."""
    key = (req.ntasks_min, req.ntasks_max, req.resreq, req.host_limit)
    return key + (True,) if req.exclusive else key


def _first(x: tuple) -> float:
    return x[0]


def _ref(j: JobSnap) -> str:
    return str(j.job_id) if j.index == 0 else f"{j.job_id}[{j.index}]"




class _FreeHosts:
    """The session's working view of the hosts (not a host shape of its own): the
    snapshot's HostSupply records by name, each replaced by a new one as dispatches are
    decided (copy on write: the snapshot is never changed).

    Issue 19 (RES-4): beside them, once a plain request needs it, an index of the hosts a
    task can go to, kept in the default host order (`placement.place_ordered`): a sorted list
    of (-free slots, last dispatch, name), updated host by host as dispatches are taken
    (a bisection and a move in a C list), so that placing a plain request reads the hosts it
    uses, not every host. `now`: the session's time, each host's last dispatch once one is
    decided for it here."""

    __slots__ = ("hosts", "now", "_avail", "_order", "_matches")

    def __init__(self, hosts: dict[str, HostSupply], now: float = 0.0,
                 order: list[tuple[int, float, str]] | None = None, matches: dict | None = None) -> None:
        self.hosts = hosts
        self.now = now
        self._avail: list[HostSupply] | None = None
        self._order = order
        #: what placing never changes in a session, so copies share it: select -> the hosts
        #: it is true on (placement.matching_hosts), once per session; and, under _BY_NAME,
        #: the hosts' order by name (`_names_order`)
        self._matches = matches if matches is not None else {}

    def avail(self) -> list[HostSupply]:
        """The usable hosts with a free slot: the only ones a task can go to, so placement
        searches these (a busy cluster of 5,000 hosts may have a few hundred)."""
        if self._avail is None:
            self._avail = [h for h in self.hosts.values() if h.slots_free > 0 and h.status == "ok"]
        return self._avail

    _key = staticmethod(host_order_key)

    def _ordered(self) -> list[tuple[int, float, str]]:
        if self._order is None:
            key = self._key
            self._order = sorted(k for k in map(key, self.hosts.values()) if k is not None)
        return self._order

    def place(self, req: PlacementRequest, explain: bool) -> Plan | Shortfall:
        """`placement.place` over the hosts with a free slot (a plain request through the
        index, `placement.place_ordered`: the same plan); when nothing fits and a reason is
        wanted, again over every host, for the full per-host reason (RES-6)."""
        form = ordered_form(req)
        if form is not None:
            match = self._match(form[2])
            if form[2] is None or match is not None:
                got = place_ordered(req, form, (k[2] for k in self._ordered()), self.hosts, match)
                if got is not None:
                    return got
        out = place(req, self.avail(), explain=False)
        if isinstance(out, Plan) or not explain:
            return out
        return shortfall(req, list(self.hosts.values()), max_host_lines=50, by_name=self._names_order(),
                         matches=self._matches)

    def full_scan(self, req: PlacementRequest) -> str | None:
        """Why placing `req` reads every usable host rather than the index (the decision trace
        says so, issue 19 part 1), or None when the index places it."""
        form = ordered_form(req)
        if form is None:
            return why_not_ordered(req)
        if form[2] is not None and self._match(form[2]) is None:
            return "a select on free slots, memory or a resource"
        return None

    def _names_order(self) -> list[int]:
        """The hosts' indices (in `hosts` order, which never changes in a session) sorted by
        name, made once per session: what an explanation reads hosts in (RES-6)."""
        order = self._matches.get(_BY_NAME)
        if order is None:
            names = list(self.hosts)
            order = self._matches[_BY_NAME] = sorted(range(len(names)), key=names.__getitem__)
        return order

    def _match(self, sel) -> frozenset[str] | None:
        """The hosts select `sel` is true on (placement.matching_hosts), once per session;
        None for no select, or one that reads what placing changes."""
        if sel is None:
            return None
        match = self._matches.get(sel, _UNSEEN)
        if match is _UNSEEN:
            match = self._matches[sel] = matching_hosts(sel, list(self.hosts.values()))
        return match

    @classmethod
    def of(cls, snapshot: Snapshot, now: float = 0.0) -> "_FreeHosts":
        order = snapshot.host_order
        return cls({h.name: h for h in snapshot.hosts}, now, list(order) if order is not None else None)

    def copy(self) -> "_FreeHosts":
        return _FreeHosts(dict(self.hosts), self.now, list(self._order) if self._order is not None else None,
                          self._matches)

    def usable(self) -> bool:
        return any(h.status == "ok" for h in self.hosts.values())

    def free_slots(self) -> int:
        return sum(h.slots_free for h in self.hosts.values() if h.status == "ok")

    def take(self, reserve: dict[str, dict[str, float]], sign: int = 1, exclusive: bool = False) -> None:
        """Take (`sign` 1: a dispatch, which makes `now` each host's last dispatch) or give
        back (-1) what `reserve` holds on each host; `exclusive`: it is an exclusive job's,
        whose hosts then run an exclusive job (a host left with every slot free runs none)."""
        self._avail = None
        order = self._order
        for name, res in reserve.items():
            h = self.hosts.get(name)
            if h is None:
                continue
            free = h.resources_free
            if len(res) > 2 or any(k not in ("slots", "mem") for k in res):
                free = dict(free)
                for k, v in res.items():
                    if k not in ("slots", "mem"):
                        free[k] = free.get(k, 0.0) - sign * v
            slots_free = h.slots_free - sign * int(res.get("slots", 0))
            njobs = max(h.njobs + sign, 0)
            excl = (h.exclusive or exclusive) if sign > 0 else h.exclusive and not exclusive
            if slots_free >= h.slots:
                njobs, excl = 0, False
            new = self.hosts[name] = HostSupply(h.name, h.slots, slots_free, h.mem_mb,
                                                h.mem_free_mb - sign * int(res.get("mem", 0)), h.resources, free,
                                                h.attributes, h.tags, h.status, h.load, njobs, excl,
                                                self.now if sign > 0 else h.last_dispatch)
            if order is not None:
                old_key, new_key = self._key(h), self._key(new)
                if old_key != new_key:
                    if old_key is not None:
                        i = bisect.bisect_left(order, old_key)
                        if i < len(order) and order[i] == old_key:
                            del order[i]
                    if new_key is not None:
                        bisect.insort(order, new_key)


@dataclass(slots=True)
class _Reserved:
    """A reservation in the making: the head's request, its start, and the free supply at
    that start (less what later, longer backfilled jobs hold). For a request of slots
    alone (`extra` is not None) only the count of slots to spare at the start matters."""

    public: Reservation
    req: PlacementRequest
    start: float
    supply: _FreeHosts | None
    extra: int | None
    #: where the head would go at `start` (general requests), kept up to date
    plan: Plan | None = None
    #: the head's new plan found by the last `_delays` check that passed
    pending_plan: Plan | None = None
    #: when the head, started at `start`, ends at the latest (its run limit); inf: no limit
    end: float = _INF


def _slots_only(req: PlacementRequest) -> bool:
    return req.host_limit is None and req.resreq.is_empty and not req.exclusive


def _reserve(req: PlacementRequest, supply: _FreeHosts, ends: list[tuple[float, dict]], now: float
             ) -> tuple[float, _FreeHosts | None, int | None, Plan | None] | None:
    """The earliest time `req` fits if running work ends at its estimates (`ends`: sorted
    (end, reserve)): (start, supply then, slots to spare (slots-only requests), the plan
    then (other requests)); None when it never fits that way."""
    if _slots_only(req):
        free = supply.free_slots()
        ok = {n for n, h in supply.hosts.items() if h.status == "ok"}
        need = req.ntasks_min
        i, n = 0, len(ends)
        while i < n:
            t = ends[i][0]
            while i < n and ends[i][0] == t:
                free += sum(int(r.get("slots", 0)) for host, r in ends[i][1].items() if host in ok)
                i += 1
            if free >= need:
                return max(t, now), None, free - need, None
        return None
    # Distinct end times, and how many ends have passed by each.
    times: list[float] = []
    upto: list[int] = []
    for i, (t, _) in enumerate(ends):
        if times and times[-1] == t:
            upto[-1] = i + 1
        else:
            times.append(t)
            upto.append(i + 1)
    if not times:
        return None
    # Supply only grows as work ends, so fitting is monotone in time. Skip the times before
    # enough slots are free at all (a count), then gallop forward (1, 2, 4, ... times at a
    # step, releasing as it goes), then bisect the last step from a copy taken before it:
    # a few placements and each release applied about twice.
    ok = {n for n, h in supply.hosts.items() if h.status == "ok"}
    free = supply.free_slots()
    k = 0
    done = 0  # ends released into `cur` so far
    while k < len(times):
        while done < upto[k]:
            free += sum(int(r.get("slots", 0)) for host, r in ends[done][1].items() if host in ok)
            done += 1
        if free >= req.ntasks_min:
            break
        k += 1
    if k == len(times):
        return None
    cur = supply.copy()
    for _, reserve in ends[:upto[k]]:
        cur.take(reserve, -1)
    done = upto[k]
    prev_k, prev = -1, None  # the last probe that did not fit, and its supply
    step = 1
    while True:
        got = cur.place(req, False)
        if isinstance(got, Plan):
            break
        if k == len(times) - 1:
            return None
        prev_k, prev = k, cur.copy()
        k = min(k + step, len(times) - 1)
        step *= 2
        for _, reserve in ends[done:upto[k]]:
            cur.take(reserve, -1)
        done = upto[k]
    lo, hi, best, plan = prev_k + 1, k, cur, got
    while lo < hi and prev is not None:  # bisect (prev_k, k]: rebuild from `prev` each probe
        mid = (lo + hi) // 2
        trial = prev.copy()
        for _, reserve in ends[upto[prev_k]:upto[mid]]:
            trial.take(reserve, -1)
        out = trial.place(req, False)
        if isinstance(out, Plan):
            hi, best, plan = mid, trial, out
        else:
            lo = mid + 1
    return max(times[hi], now), best, None, plan


def _delays(r: _Reserved, plan: Plan) -> bool:
    """Would `plan`, held past r.start, keep r's head from starting then? When `plan`
    touches none of the hosts of the head's planned placement, that placement still
    stands; otherwise the head is placed again without what `plan` holds."""
    if r.extra is not None:  # a head of slots alone can use any host
        return plan.held_slots > r.extra
    if r.plan is not None and not (plan.reserve.keys() & r.plan.reserve.keys()):
        return False
    trial = r.supply.copy()
    trial.take(plan.reserve, exclusive=plan.exclusive)
    got = trial.place(r.req, False)
    if isinstance(got, Plan):
        r.pending_plan = got
        return False
    return True


def _hint_with_reservations(pr: PendReason, late: list[_Reserved], clock: Clock) -> PendReason:
    """RES-6 under SCHED-1: "would start now with -n N" is true only if N tasks would not
    delay a reserved head the job outlasts; otherwise say what else it needs."""
    n = pr.start_with
    caps = [r.extra for r in late if r.extra is not None]
    if len(caps) == len(late) and n <= min(caps):
        return pr  # heads of slots alone with room to spare: the hint holds
    first = min(late, key=lambda r: r.start)
    return PendReason(pr.main, pr.hosts, f"{HINT_START_WITH.format(n=n)} and a run limit (-W) ending by {format_when(first.start, clock)}, "
                                         f"so as not to delay job {first.public.job}'s reservation", n)


def _copy_reason(pr: PendReason) -> PendReason:
    """A deep copy of a pend reason (SCHED-2 keeps its own, bug-1932)."""
    return PendReason(pr.main, [replace(h) for h in pr.hosts], pr.hint, pr.start_with, pr.cause, pr.caps)


def caps_reason(caps: list[Cap]) -> PendReason:
    """The pend reason of a job held back by its project's caps (PRJ-6, PRJ-7): every cap
    in its way as a line (`caps`), the first as the main reason."""
    lines = tuple(c.text for c in caps)
    return PendReason(lines[0], caps=lines, cause="quota")


def _over_caps(book: QuotaBook, j: JobSnap) -> tuple[PendReason, str] | None:
    """The memory and resource caps (PRJ-7) the least `j` holds (`least_need`: its rusage for
    ntasks_min tasks) is over, as (reason, trace text), or None: checked for a job that did not
    fit the hosts before it blocks its queue or heads a reservation, so that a job its caps
    hold back never does (a job that fits the hosts has its plan held to the caps instead)."""
    need = least_need(j.ntasks_min, j.resreq)
    room = book.room(j.project, j.user)
    if not room or all(v <= room.get(r, _INF) + 1e-9 for r, v in need.items() if r != SLOTS):
        return None
    caps = book.check(j.project, j.user, need)
    if not caps:
        return None
    pr = caps_reason(caps)
    return pr, f"pend on project caps: {'; '.join(pr.caps)}"


def _within_caps(book: QuotaBook, j: JobSnap, req: PlacementRequest, plan: Plan, supply: "_FreeHosts"
                 ) -> Plan | list[Cap]:
    """`plan` when its full use (slots, memory, resources) fits the caps of `j`'s project
    (PRJ-7); else, for a task range, the plan of the largest count that fits them (RES-3:
    a bisection over the counts below the plan's); else the caps in the way of the smallest."""
    caps = book.check(j.project, j.user, reserve_use(plan.reserve))
    if not caps:
        return plan
    lo, hi, best = req.ntasks_min, plan.ntasks - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        got = supply.place(replace(req, ntasks_max=mid), False)
        if not isinstance(got, Plan):
            break
        over = book.check(j.project, j.user, reserve_use(got.reserve))
        if over:
            caps, hi = over, got.ntasks - 1
        else:
            best, lo = got, mid + 1
    return best if best is not None else caps


def schedule(snapshot: Snapshot, now: float, *, explain: bool = True) -> SessionResult:
    """Run one scheduling session over `snapshot` at time `now` (epoch seconds).

    Returns a SessionResult: dispatches (each with its host allocation and reservations),
    a structured pend reason (RES-6) for every pending element not dispatched whose reason
    changed (SCHED-3), the backfill reservations, and a human-readable trace (D-4). Never
    raises for a well-formed snapshot. `explain=False` (the simulator) keeps pend reasons
    to their main line: the decisions are the same, only the reasons are shorter.

    Python's cyclic garbage collector is paused while the session runs (and left as it was
    found): a busy session makes a trace line and a reason key per pending job, none of them
    in a cycle, and every few hundred of them would start a collection that walks the
    snapshot's and the daemon's objects again. Measured on 100,000 pending jobs over 5,000
    hosts (bench/sched.py): 0.55 s with it running, 0.33 s paused (issue 19).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        return _schedule(snapshot, now, explain)
    finally:
        if was:
            gc.enable()


def _schedule(snapshot: Snapshot, now: float, explain: bool) -> SessionResult:
    res = SessionResult()
    queues = {q.name: q for q in snapshot.queues}
    qkey = {q.name: (-q.priority, q.position) for q in snapshot.queues}
    order = sorted(snapshot.pending,
                   key=lambda j: (qkey.get(j.queue, (0, 1 << 30)), j.submit_time, j.job_id, j.index))
    supply = _FreeHosts.of(snapshot, now)
    array_running = dict(snapshot.array_running)
    blocked = res.blocked  # queue -> the one reason shared by every job behind its head
    heads = res.headed  # backfilling queues whose head is blocked
    reserved: list[_Reserved] = []
    ends: list[tuple[float, dict]] | None = None  # running work by estimated end, built on first need
    started: list[tuple[float, dict]] = []  # this session's dispatches until `ends` is built
    unsat: dict[tuple, tuple[PendReason, str]] = {}  # SCHED-2
    trace = res.trace
    reasons = res.pend_reasons
    n_usable, free_slots = 0, 0  # free slots on usable hosts, kept up to date as dispatches are decided
    for h in snapshot.hosts:
        if h.status == "ok":
            n_usable += 1
            free_slots += h.slots_free
    usable = n_usable > 0
    trace.append(TraceLine(None, f"session at {now:.3f}: {len(order)} pending, {n_usable} usable hosts, "
                                 f"{free_slots} free slots"))
    no_hosts = PendReason(REASON_NO_HOSTS)
    projects = snapshot.projects
    book = QuotaBook(projects, supply_totals(snapshot.hosts), snapshot.usage) \
        if projects is not None and projects.projects else None
    #: (project, user, slots) -> the reason and trace text of a job its slot caps hold back,
    #: until the next dispatch changes the use: many jobs of one user share one
    held_by_caps: dict[tuple, tuple[PendReason, str]] = {}
    headroom = book.headroom if book is not None else None
    rooms: dict[tuple, int | None] = {}  # (project, user) -> its slot headroom, until the next dispatch

    #: (id(last reason), id(new reason)) -> whether they are equal (SCHED-3), compared once
    #: per pair: the controller gives the jobs of a group the one reason object a session gave
    #: them, so in a busy cluster's steady state 100,000 jobs hold a few last reasons, each
    #: equal to this session's (with up to 50 host lines, a deep comparison: ~1 s a session
    #: when made for each job). Both objects live through the session, so an id is never reused.
    same: dict[tuple[int, int], bool] = {}

    def pend(j: JobSnap, reason: PendReason) -> None:
        last = j.last_reason
        if last is reason:
            return
        if last is not None:
            k = (id(last), id(reason))
            eq = same.get(k)
            if eq is None:
                eq = same[k] = last == reason
            if eq:
                return
        reasons[(j.job_id, j.index)] = reason

    # Per session, what jobs with the same request share (a busy cluster's 100,000 pending jobs
    # hold a few distinct requests): the request and its SCHED-2 key, by the values that make
    # them (the requirement by identity: the snapshot keeps it alive for the session); the
    # trace text of a cache hit, by the job that proved it; a hinted reason, by the reason and
    # the reservations it is hinted against (each kept alive by `unsat` and `reserved`).
    requests: dict[tuple, tuple[PlacementRequest, tuple]] = {}
    hit_texts: dict[str, str] = {}
    hinted: dict[tuple, PendReason] = {}
    #: Jobs decided as a group (issue 19): once a job of a request proved unsatisfiable (a
    #: SCHED-2 hit) has only pended, with nothing else following from it (its queue's head is
    #: already blocked, or it can never start), a later job with the same request, queue and
    #: run limit, whose project's caps leave it its whole task range, is decided the same: the
    #: same reason and trace text, without the steps that lead there. (queue, ntasks_min, ntasks_max, resreq by identity,
    #: exclusive, run limit) -> (reason, trace text); cleared at every dispatch and every new
    #: reservation, the only steps that change what those jobs would be told.
    settled: dict[tuple, tuple[PendReason, str]] = {}
    #: project -> user -> (its slot headroom, `taken` then): a floor of its headroom that
    #: outlives dispatches, as a dispatch of n slots lowers any cap's headroom by n at most;
    #: `rooms` (exact) is cleared at every dispatch, and asking it again for each of a
    #: session's thousands of (project, user) pairs after each dispatch cost more than the
    #: group decision saved
    floors: dict[str, dict[str | None, tuple[float, float]]] = {}
    taken = 0.0  # slots the session's dispatches of jobs in a project took so far

    held_seen = 0  # held jobs passed over so far: every other job before this one pended or started
    for i, j in enumerate(order):
        if j.held:
            held_seen += 1
            continue  # the controller keeps the hold's own reason
        if j.array_limit is not None and array_running.get(j.job_id, 0) >= j.array_limit:
            pend(j, PendReason(REASON_ARRAY_LIMIT.format(limit=j.array_limit)))
            continue
        behind = blocked.get(j.queue)
        if behind is not None:
            pend(j, behind)  # one shared object: cheap for 10,000 jobs behind a head
            continue
        if held_by_caps and usable and j.project is not None:
            # held back by its project's caps as an earlier job of the same (project, user,
            # ntasks_min) was since the last dispatch: what the steps below would find again
            room = rooms.get((j.project, j.user), _UNSEEN)
            if room is not _UNSEEN and room is not None and room < j.ntasks_min:
                held = held_by_caps.get((j.project, j.user, j.ntasks_min))
                if held is not None:
                    pend(j, held[0])
                    trace.append(TraceLine(_ref(j), held[1]))
                    continue
        if settled:
            got_s = settled.get((j.queue, j.ntasks_min, j.ntasks_max, id(j.resreq), j.exclusive, j.run_limit_s))
            if got_s is not None and headroom is not None and j.project is not None:
                # its project's caps must not be in the way (PRJ-6, PRJ-7)
                of_project = floors.get(j.project)
                if of_project is None:
                    of_project = floors[j.project] = {}
                floor = of_project.get(j.user)
                if floor is None or floor[0] - (taken - floor[1]) < j.ntasks_max:
                    who = (j.project, j.user)
                    room = rooms.get(who, _UNSEEN)
                    if room is _UNSEEN:
                        room = rooms[who] = headroom(j.project, j.user)
                    of_project[j.user] = (_INF if room is None else room, taken)
                    if room is not None and room < j.ntasks_max:
                        got_s = None
            if got_s is not None:  # decided as an earlier job with the same request: see `settled`
                pend(j, got_s[0])
                trace.append(TraceLine(_ref(j), got_s[1]))
                continue
        ref = _ref(j)
        q = queues.get(j.queue)
        if not usable:
            pend(j, no_hosts)
            blocked[j.queue] = PendReason(REASON_BEHIND.format(ref=ref, queue=j.queue))
            continue
        ntasks_max = j.ntasks_max
        capped = headroom is not None and j.project is not None
        if capped:  # PRJ-6, PRJ-7: the project's caps first; a job held by them blocks nobody
            who = (j.project, j.user)
            room = rooms.get(who, _UNSEEN)
            if room is _UNSEEN:
                room = rooms[who] = headroom(j.project, j.user)
            if room is None or room >= ntasks_max:
                pass  # nothing in the way: the common case, kept short
            elif room < j.ntasks_min:
                ckey = (j.project, j.user, j.ntasks_min)
                held = held_by_caps.get(ckey)
                if held is None:
                    caps = book.check(j.project, j.user, {SLOTS: j.ntasks_min})
                    if caps:
                        pr = caps_reason(caps)
                        held = held_by_caps[ckey] = (pr, f"pend on project caps: {'; '.join(pr.caps)}")
                if held is not None:
                    pend(j, held[0])
                    trace.append(TraceLine(ref, held[1]))
                    continue
            else:
                ntasks_max = room
                trace.append(TraceLine(ref, f"task range {j.ntasks_min},{j.ntasks_max} cut to "
                                            f"{j.ntasks_min},{ntasks_max} by the project caps"))
        made = requests.get(rkey := (j.ntasks_min, ntasks_max, id(j.resreq), j.queue, j.exclusive))
        if made is None:
            req = PlacementRequest(j.ntasks_min, ntasks_max, j.resreq, q.host_limit if q else None, j.exclusive)
            made = requests[rkey] = (req, request_key(req))
        req, key = made
        hit = unsat.get(key)
        end = now + j.run_limit_s if j.run_limit_s is not None else _INF
        late = [r for r in reserved if end > r.start] if reserved else reserved
        delayed = None
        out: Plan | Shortfall | None = None
        if hit is not None:
            pass
        elif not explain and req.ntasks_min > free_slots:
            out = Shortfall(f"{req.ntasks_min} slots needed, {free_slots} free on the usable hosts")  # no search
        else:
            now_req = req
            if late and req.ntasks_min <= free_slots and _slots_only(req):
                # heads of slots alone leave `extra` slots spare at their start: a job that
                # outlasts it takes at most that many (a task range shrinks to fit, RES-3)
                caps = [r.extra for r in late if r.extra is not None]
                if caps and min(caps) < req.ntasks_min:
                    delayed = next(r for r in late if r.extra is not None and r.extra < req.ntasks_min)
                elif caps and min(caps) < req.ntasks_max:
                    now_req = PlacementRequest(req.ntasks_min, min(caps), req.resreq, req.host_limit)
            if delayed is None:
                out = supply.place(now_req, explain)
        if capped and delayed is None and isinstance(out, Plan):
            got_plan = _within_caps(book, j, req, out, supply)
            if not isinstance(got_plan, Plan):
                pr = caps_reason(got_plan)
                pend(j, pr)
                trace.append(TraceLine(ref, f"pend on project caps: {'; '.join(pr.caps)}"))
                continue
            out = got_plan
        if delayed is None and isinstance(out, Plan):
            delayed = next((r for r in late if _delays(r, out)), None)
            if delayed is not None and req.ntasks_min < out.ntasks:
                # the count that fits now delays a head: the smallest count of the range may not
                small = supply.place(replace(req, ntasks_max=req.ntasks_min), False)
                if isinstance(small, Plan) and (not capped or not book.check(j.project, j.user,
                                                                             reserve_use(small.reserve))):
                    for r in late:
                        r.pending_plan = None
                    if next((r for r in late if _delays(r, small)), None) is None:
                        out, delayed = small, None
            if delayed is None:
                settled.clear()
                supply.take(out.reserve, exclusive=out.exclusive)
                free_slots -= out.held_slots
                if capped:
                    used = reserve_use(out.reserve)
                    book.take(j.project, j.user, used)
                    taken += used.get(SLOTS, 0)
                    held_by_caps.clear()
                    rooms.clear()
                for r in late:
                    if r.extra is not None:
                        r.extra -= out.held_slots
                    else:
                        r.supply.take(out.reserve, exclusive=out.exclusive)
                        if r.pending_plan is not None:
                            r.plan, r.pending_plan = r.pending_plan, None
                backfill = j.queue in heads or bool(reserved)
                if i - held_seen > len(res.dispatches):  # an earlier job pended: its reason may count this one's take
                    res.stale = True
                res.dispatches.append(Dispatch(j.job_id, j.index, list(out.alloc), out.reserve, j.profile_hash,
                                               backfill))
                if end != _INF:
                    if ends is None:
                        started.append((end, out.reserve))
                    else:
                        bisect.insort(ends, (end, out.reserve), key=_first)
                if j.array_limit is not None:
                    array_running[j.job_id] = array_running.get(j.job_id, 0) + 1
                scan = supply.full_scan(req)
                trace.append(TraceLine(ref, f"{'backfill' if backfill else 'dispatch'} {out.ntasks} task(s) on "
                                       + " ".join(f"{h}:{n}" for h, n in out.alloc)
                                       + (f" (every host read: {scan})" if scan else "")))
                continue
        if delayed is not None:
            for r in late:
                r.pending_plan = None
            pend(j, PendReason(REASON_DELAY.format(ref=delayed.public.job, when=format_when(delayed.start, snapshot.clock))))
            trace.append(TraceLine(ref, f"pend: fits now but would delay the reservation of {delayed.public.job}"))
            if j.queue not in heads and (q is None or not q.backfill):
                # a strict queue stays strict: its first job waits (for another queue's
                # reservation), so the jobs behind it wait too
                blocked[j.queue] = PendReason(REASON_BEHIND.format(ref=ref, queue=j.queue))
            continue
        if hit is not None:
            pr, proved, never = hit
            text = hit_texts.get(proved)
            if text is None:
                text = hit_texts[proved] = TRACE_CACHE_HIT.format(proved=proved)
            trace.append(TraceLine(ref, text))
        else:
            pr = out.pend_reason()
            never = isinstance(out, Shortfall) and out.never
            unsat[key] = (_copy_reason(pr), ref, never)
            res.unsatisfiable[key] = pr
            scan = supply.full_scan(req)
            trace.append(TraceLine(ref, f"pend: {pr.main}" + (f" (every host read: {scan})" if scan else "")))
        if late and pr.start_with is not None:
            hkey = (id(pr), *map(id, late))
            got_pr = hinted.get(hkey)
            if got_pr is None:
                got_pr = hinted[hkey] = _hint_with_reservations(pr, late, snapshot.clock)
            pr = got_pr
        if capped and not never and j.queue not in heads and j.resreq.rusage:
            # it would block its queue or head a reservation: not when its caps hold it back too
            # (its memory or resources; its slots were checked above), which blocks nobody (PRJ-7)
            held = _over_caps(book, j)
            if held is not None:
                pend(j, held[0])
                trace.append(TraceLine(ref, held[1]))
                continue
        pend(j, pr)
        if never or j.queue in heads:
            # no host could ever run it, even idle: it waits for a host to join, blocking nobody;
            # or a later job of a backfilling queue: it just cannot start now
            if hit is not None and ntasks_max == j.ntasks_max:  # not cut by its project's caps
                settled[(j.queue, j.ntasks_min, j.ntasks_max, id(j.resreq), j.exclusive, j.run_limit_s)] = (pr, text)
            continue
        if q is None or not q.backfill:
            blocked[j.queue] = PendReason(REASON_BEHIND.format(ref=ref, queue=j.queue))
            continue
        heads.add(j.queue)
        if ends is None:
            ends = [(max(r.end_estimate, now), r.reserve) for r in snapshot.running if r.end_estimate is not None]
            ends.extend(started)
            ends.sort(key=_first)
        search_supply, search_ends = supply, ends
        if reserved:
            # the heads reserved before this one hold what they will take, from now (which is
            # on the safe side) until their own run limits end: a later head's reservation
            # never counts on resources an earlier one has
            search_supply = supply.copy()
            search_ends = list(ends)
            for r in reserved:
                if r.plan is None:  # a head of slots alone: where it would go at its start
                    then = supply.copy()
                    for t_end, reserve in ends:
                        if t_end > r.start:
                            break
                        then.take(reserve, -1)
                    got_plan = then.place(PlacementRequest(r.req.ntasks_min, r.req.ntasks_min), False)
                    if not isinstance(got_plan, Plan):
                        continue
                    r.plan = got_plan
                search_supply.take(r.plan.reserve, exclusive=r.plan.exclusive)
                if r.end != _INF:
                    bisect.insort(search_ends, (r.end, r.plan.reserve), key=_first)
        got = _reserve(req, search_supply, search_ends, now)
        if got is None:
            res.heads[ref] = None
            trace.append(TraceLine(ref, NO_RESERVATION))
            continue
        start, sup_then, extra, plan_then = got
        r = _Reserved(Reservation(ref, j.queue, start), req, start, sup_then, extra, plan_then,
                      end=start + j.run_limit_s if j.run_limit_s is not None else _INF)
        reserved.append(r)
        settled.clear()
        res.reservations.append(r.public)
        res.heads[ref] = r.public
        trace.append(TraceLine(ref, reservation_text(r.public, snapshot.clock)))
    return res

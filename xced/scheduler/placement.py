"""The placement planner (RES-3, RES-4, RES-5, RES-6): where a job's tasks go now.

Pure (DESIGN rule 1): plain data in, plain data out, no I/O, no clock, never
mutates its inputs. Used by ``schedule()`` and by the simulator.

Public API::

    place(req, hosts, *, explain=True, max_host_lines=None) -> Plan | Shortfall
                                                 the largest count in [min, max] that fits now
    shortfall(req, hosts, *, max_host_lines=None) -> Shortfall
                                                 why it does not fit, for a caller that found so
    plan_fixed(req, n, hosts) -> Plan | None     exactly n tasks (None: does not fit now)
    never_satisfiable(req, hosts) -> str | None  why the request could not start even on an
                                                 idle cluster (submit-time refusal, MERGE-2)
    HostSupply, PlacementRequest                 inputs
    Plan, Shortfall                              outputs (Shortfall.pend_reason() -> PendReason)

What a ``select[]`` sees on a host (the mapping given to ``select_matches`` /
``explain_select``):

    slots      free slots              maxslots   total slots
    mem        free memory, MB         maxmem     total memory, MB
    <res>      free amount of each numeric resource in ``HostSupply.resources``
    max<res>   its total
    <attr>     each string attribute (``type``, ``model``, ...)
    hname      the host name
    <tag>      True for each tag (a boolean resource; absent tags are undefined)
    r15s r1m r15m ut pg io ls it tmp swp ncpus maxswp maxtmp
               LSF's load indices the host's worker last reported (RES-7; ut in
               percent, 0..100, as LSF's select string page says; undefined until
               reported). ``maxmem`` stays the declared memory above.

A host is a candidate only when its status is ``"ok"``, its select is true, it has
every resource its rusage names (``mem`` always exists) and it defines every
``same[]`` attribute. A resource listed in ``resources`` but missing from
``resources_free`` counts as 0 free (never over-commit).

Rules (IBM Spectrum LSF 10.1 span/order/usage/same pages; docs/lsf-behaviour.md
sections 1-2; where XCE differs, SPEC wins):

- Exclusive jobs (``PlacementRequest.exclusive``, LSF ``bsub -x``; IBM bsub -x page and
  "Exclusive scheduling"; docs/lsf-behaviour.md section 6): a host is a candidate for an
  exclusive job only when nothing runs there (no slot in use, no job); its plan reserves
  every slot of each host it uses (``Plan.reserve``), so while it runs those hosts offer
  no slot to anyone. A host flagged ``HostSupply.exclusive`` (it runs an exclusive job)
  is a candidate for no job. Both show in the per-host lines and, when they leave no
  candidate, in the main reason: "exclusive job: host h1 has 1 job running", "host h1
  runs an exclusive job". The never-satisfiable check (idle cluster) ignores both.

- rusage (RES-2, PROF-4): a term reserves per task unless it says ``/host`` (once on
  every host used) or ``/job`` (once for the whole job, on its first host; for a
  compound request, on the first host of that part). This is XCE's rule; LSF's
  cluster default is per host. ``mem`` is memory (MB); any other name is a numeric
  resource of ``HostSupply.resources``; a term of 0 reserves nothing (MERGE-3).
  ``duration``/``decay`` are accepted but v1 holds every reservation for the life of
  the job. rusage ``||`` alternatives are tried in written order and the first that
  places (at any count in the range) wins; ``Plan.alternative`` says which.
- Host order (RES-4, capacity-driven): most free slots first; among hosts with as many
  free slots, the one a job was dispatched to least recently first
  (``HostSupply.last_dispatch``), then by host name. LSF breaks such ties its own way and
  does not document it; this rule spreads single jobs over equally free hosts from session
  to session, as arrays spread, instead of giving the same few hosts (first by name) every
  job, and it stays deterministic for a given snapshot (SIM-2).
  ``order[...]`` keys replace that: ``slots``, ``mem`` and consumable resources sort
  most-free first, ``maxslots``/``maxmem``/``max<res>`` largest first, LSF's load
  indices (RES-7, xced.model.load) best first by their direction (``r15s``, ``r1m``,
  ``r15m``, ``ut``, ``pg``, ``io``, ``ls`` least first; ``it``, ``tmp``, ``swp``,
  ``ncpus``, ``maxswp``, ``maxtmp`` most first; a host that has not reported the index
  after the others; a load index no host has reported is ignored), a tag puts the hosts
  that have it first, and ``-`` (``OrderKey.desc``) reverses a key (``order[-slots]``
  packs onto the fullest hosts, as in LSF). Several keys sort lexicographically, then
  by the host dispatched to least recently, then by name. A key no host has is refused at submit (RES-1); one that reaches the planner
  anyway is ignored, and when no key is usable the default order applies.
- Load indices in a select (RES-7): the values the host's worker last reported, ``ut``
  in percent (LSF's select string page). The never-satisfiable check leaves out what
  reads a load index (it may hold later, or the host has not reported yet): such a job
  pends, with a reason naming the index, instead of being refused.
- span (RES-4): none or ``hosts=-1`` fills hosts in order, each taking as many tasks
  as its slots and per-task rusage allow. ``ptile=N``: N tasks on every host but one,
  which takes the remainder when the count is not a multiple of N (``-n 10
  span[ptile=4]`` -> 4,4,2; the partial host is listed last unless it must be the
  first host for a ``/job`` reservation). ``hosts=1``: all tasks on one host.
  ``block=N``: every host takes a multiple of N; the count must be a multiple of N.
- ``host_limit`` (the queue's HOSTLIMIT_PER_JOB): never more hosts than that. When
  filling in order would need too many hosts, the planner keeps the hosts with the
  largest capacity (ties by order) and fills those in order, so the documented LSF
  false failure (A=2, B=4, C=4, D=8 free, limit 2, 10 tasks -> pend) cannot happen:
  that job gets D:8 + B:2. For a compound request the limit applies to each part and
  to the union of the parts' hosts.
- ``same[a:b]`` (RES-5): candidates are partitioned by their value tuple (a host
  attribute, the host name for ``hname``, else a resource total or a tag); the plan
  is made within each group and the group giving the largest count wins (ties: the
  group whose best host comes first in host order).
- Task range (RES-3): the largest count in [min, max] that fits now; a job whose
  MIN fits is never left pending for want of MAX (bug-1931). The search probes the
  largest count the supply could hold, then bisects over the counts the span allows
  (multiples of ``block``), assuming feasibility is monotone among them. Every probe
  is a full plan and the search keeps the plan of its best feasible probe, so the
  count returned always comes with a real, verified plan.
- Compound ``N1*{...} + N2*{...}``: parts are placed in written order, each exactly
  its count with its own select/order/rusage/span/same, drawing on the supply the
  earlier parts left. The job's count is the sum: ``-n`` must be exactly that sum.
  A host used by several parts appears once in ``Plan.alloc`` with their total.
  Alternative ``{...} || {...}``: the first alternative (in order) that places now wins.
- XCE refuses what LSF would leave pending forever: a ``ptile`` larger than the
  job's largest count (``-n 4 span[ptile=8]``), a ``block`` no count of the range is
  a multiple of, a compound sum different from ``-n``. ``place`` reports those as a
  Shortfall with ``never=True``; ``plan_fixed`` returns None.

Cost: one call reads the select's names once per host and evaluates the select once
per distinct tuple of their values (outcomes are memoised by expression and values,
a pure memo bounded in size), sorts the candidates once per part, and each probe of
the range search is one linear pass, so a call is O(H log H + H log N); nothing is
O(H^2). Building a Shortfall (pending jobs only) also runs the idle-cluster check and
the smaller-count search; pass ``explain=False`` to ``place`` to skip the explanation
when only the verdict matters, ``max_host_lines`` to bound the per-host lines.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from xced.model.jobs import HINT_START_WITH, HostShortfall, PendReason
from xced.model.load import INCREASING, LOAD_INDICES, NOT_PLACED, select_value
from xced.scheduler.snapshot import HostSupply
from xced.resreq import (
    Binary,
    BoolOp,
    Defined,
    Expr,
    Name,
    OrderKey,
    ResReq,
    Span,
    Unary,
    explain_select,
    render,
    render_expr,
    select_matches,
)

__all__ = [
    "HostSupply",
    "PlacementRequest",
    "Plan",
    "Shortfall",
    "matching_hosts",
    "never_satisfiable",
    "ordered_form",
    "place",
    "place_ordered",
    "why_not_ordered",
    "plan_fixed",
]

_EPS = 1e-9
_INF = float("inf")


# --------------------------------------------------------------------------- inputs


@dataclass(slots=True, frozen=True)
class PlacementRequest:
    """What to place: the task range (RES-3), the merged requirement (simple,
    compound or alternative) and the queue's HOSTLIMIT_PER_JOB (None: no limit)."""

    ntasks_min: int
    ntasks_max: int
    resreq: ResReq = field(default_factory=ResReq)
    host_limit: int | None = None
    #: LSF bsub -x: only hosts where nothing runs, and the whole of each host it uses
    exclusive: bool = False


# --------------------------------------------------------------------------- outputs


@dataclass(slots=True)
class Plan:
    """Where the job goes. ``alloc``: (host, tasks) in placement order; the first host
    runs the job script. ``reserve``: per host, what it holds while the job runs:
    ``slots``, ``mem`` (MB) and other resources (only non-zero amounts besides
    ``slots``). ``alternative``: for an alternative request the index of the
    ``{...}`` used; for a simple request with rusage ``||`` the index of the rusage
    alternative used; else None."""

    alloc: list[tuple[str, int]]
    reserve: dict[str, dict[str, float]]
    alternative: int | None = None
    #: the plan of an exclusive job: ``reserve`` holds every slot of its hosts
    exclusive: bool = False

    @property
    def ntasks(self) -> int:
        return sum(n for _, n in self.alloc)

    @property
    def held_slots(self) -> int:
        """The slots the plan takes from its hosts: its task count, or for an exclusive
        job every slot of its hosts."""
        return sum(int(r.get("slots", 0)) for r in self.reserve.values()) if self.exclusive else self.ntasks


@dataclass(slots=True)
class Shortfall:
    """Why nothing fits now (RES-6): ``main`` (one line), per-host ``hosts`` lines,
    ``hint`` (what would make it start: "would start now with -n 4", "waits for 2
    more free slots on any host with gpu >= 1", "can never start: ..."), and
    ``never`` (True when not even an idle cluster could satisfy it)."""

    main: str
    hosts: list[HostShortfall] = field(default_factory=list)
    hint: str | None = None
    never: bool = False
    #: the smaller task count that would start now ("would start now with -n N"), or None
    start_with: int | None = None

    def pend_reason(self) -> PendReason:
        """The model's PendReason: main reason, host lines and the hint (RES-6)."""
        return PendReason(self.main, list(self.hosts), self.hint, self.start_with)


# --------------------------------------------------------------------------- helpers


def _fmt(v: float) -> str:
    if isinstance(v, float):
        if v.is_integer():
            return str(int(v))
        return f"{v:.6g}"
    return str(v)


def _num(v: float) -> float:
    """Integral floats as ints (clean JSON in reservations)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _nspell(lo: int, hi: int) -> str:
    return f"-n {lo}" if lo == hi else f"-n {lo},{hi}"


def _span_text(span: Span) -> str:
    if span.ptile is not None:
        return f"span[ptile={span.ptile}]"
    if span.block is not None:
        return f"span[block={span.block}]"
    return f"span[hosts={span.hosts}]"


def _span_kind(span: Span | None) -> tuple[str, int]:
    """("none"|"ptile"|"one"|"block", parameter)."""
    if span is None:
        return "none", 1
    if span.ptile is not None:
        return "ptile", span.ptile
    if span.block is not None:
        return "block", span.block
    if span.hosts == 1:
        return "one", 1
    return "none", 1  # hosts=-1: as if no span


class _Counters:
    """The free counters of the hosts during one call of the planner (not a host shape:
    working numbers over the caller's HostSupply list): copies of the counters, resource
    dicts shared with the caller's HostSupply until written (copy on write). ``idle``: totals as
    free and every host usable (the never-satisfiable check)."""

    __slots__ = ("_own", "barred", "by_name", "hosts", "idle", "mem", "res", "slots", "usable")

    def __init__(self, hosts: Sequence[HostSupply], idle: bool = False, exclusive: bool = False) -> None:
        self.hosts = hosts
        self.idle = idle
        #: the host indices in name order, when the caller knows them (else sorted on need)
        self.by_name: list[int] | None = None
        #: per host, why exclusivity keeps it from the job (``_barred``); None: nothing does
        self.barred: list[str | None] | None = None
        if idle:
            self.slots = [h.slots for h in hosts]
            self.mem = [float(h.mem_mb) for h in hosts]
            self.res = [h.resources for h in hosts]
            self.usable = [True] * len(hosts)
        else:
            self.slots = [h.slots_free for h in hosts]
            self.mem = [float(h.mem_free_mb) for h in hosts]
            self.res = [h.resources_free for h in hosts]
            self.usable = [h.status == "ok" for h in hosts]
            if exclusive or any(h.exclusive for h in hosts):
                self.barred = [_barred(h, exclusive) for h in hosts]
                self.usable = [u and b is None for u, b in zip(self.usable, self.barred)]
        self._own = [False] * len(hosts)

    def fork(self) -> _Counters:
        s = _Counters.__new__(_Counters)
        s.hosts, s.idle, s.usable, s.barred, s.by_name = self.hosts, self.idle, self.usable, self.barred, self.by_name
        s.slots, s.mem, s.res = list(self.slots), list(self.mem), list(self.res)
        s._own = [False] * len(self.hosts)
        return s

    def free(self, i: int, r: str) -> float:
        if r == "mem":
            return self.mem[i]
        return float(self.res[i].get(r, 0.0))

    def total(self, i: int, r: str) -> float:
        h = self.hosts[i]
        return float(h.mem_mb) if r == "mem" else float(h.resources.get(r, 0.0))

    def take(self, i: int, slots: int, amounts: Mapping[str, float]) -> None:
        self.slots[i] -= slots
        for r, v in amounts.items():
            if r == "mem":
                self.mem[i] -= v
            else:
                if not self._own[i]:
                    self.res[i] = dict(self.res[i])
                    self._own[i] = True
                self.res[i][r] = self.res[i].get(r, 0.0) - v  # type: ignore[index]

    def view(self, i: int) -> dict[str, object]:
        """What the select sees on host i (see the module docstring)."""
        h = self.hosts[i]
        v: dict[str, object] = dict(h.attributes)
        for k, x in h.load.items():  # RES-7: LSF's load indices (ut in percent, as a select reads it)
            if k not in NOT_PLACED:
                v[k] = select_value(k, x)
        free = self.res[i]
        for r, tot in h.resources.items():
            v[r] = free.get(r, 0.0)
            v["max" + r] = tot
        for t in h.tags:
            v[t] = True
        v["slots"] = self.slots[i]
        v["maxslots"] = h.slots
        v["mem"] = self.mem[i]
        v["maxmem"] = h.mem_mb
        v["hname"] = h.name
        return v


def _barred(h: HostSupply, exclusive: bool) -> str | None:
    """Why host ``h`` takes no task of a job for exclusivity (LSF bsub -x, docs/lsf-behaviour.md
    section 6), or None: it runs an exclusive job (no job may join it), or the job is
    exclusive and something runs there (a job, or a slot in use)."""
    if h.exclusive:
        return f"host {h.name} runs an exclusive job"
    if exclusive:
        if h.njobs > 0:
            return f"exclusive job: host {h.name} has {h.njobs} job{'s' if h.njobs != 1 else ''} running"
        if h.slots_free < h.slots:
            return f"exclusive job: host {h.name} has {h.slots - h.slots_free} of {h.slots} slots in use"
    return None


@dataclass(slots=True, frozen=True)
class _Demand:
    """One rusage alternative, aggregated: amounts per task, per host, per job."""

    task: dict[str, float]
    host: dict[str, float]
    job: dict[str, float]
    names: tuple[str, ...]  # every resource named, mem included
    text: str

    @property
    def has_job(self) -> bool:
        return bool(self.job)

    def amounts(self, tasks: int, first: bool) -> dict[str, float]:
        out: dict[str, float] = {}
        for r in self.names:
            v = self.task.get(r, 0.0) * tasks + self.host.get(r, 0.0)
            if first:
                v += self.job.get(r, 0.0)
            if v:
                out[r] = v
        return out


_NO_DEMAND = _Demand({}, {}, {}, (), "")


def _demand(part: ResReq, alt: int) -> _Demand:
    """One rusage alternative of a simple part, summed per resource and method. One pass
    over its terms (a dict of the names, never a list searched per term: D-8)."""
    if not part.rusage:
        return _NO_DEMAND
    task: dict[str, float] = {}
    host: dict[str, float] = {}
    job: dict[str, float] = {}
    names: dict[str, None] = {}  # first-seen order, each once
    texts: list[str] = []
    for term, _duration, _decay in part.rusage_terms(alt):
        if not term.value:
            continue  # MERGE-3: 0 means none
        per = term.per or "task"
        bucket = job if per == "job" else host if per == "host" else task
        bucket[term.name] = bucket.get(term.name, 0.0) + float(term.value)
        names.setdefault(term.name)
        unit = " MB" if term.name == "mem" or term.unit == "MB" else ""
        texts.append(f"{term.name}={_fmt(float(term.value))}{unit} per {per}")
    return _Demand(task, host, job, tuple(names), ", ".join(texts))


def _caps(sup: _Counters, i: int, d: _Demand) -> tuple[int, int]:
    """(tasks host i can take, tasks it can take as the job's first host holding the
    /job reservation too); (0, 0) when it cannot hold the per-host reservation."""
    cap = capj = sup.slots[i]
    if cap <= 0:
        return 0, 0
    if not d.names:
        return cap, cap
    for r in d.names:
        a = sup.free(i, r) - d.host.get(r, 0.0)
        if a < -_EPS:
            return 0, 0
        aj = a - d.job.get(r, 0.0)
        t = d.task.get(r, 0.0)
        if t > 0:
            cap = min(cap, math.floor(a / t + _EPS))
            capj = min(capj, math.floor(aj / t + _EPS)) if aj >= -_EPS else 0
        elif aj < -_EPS:
            capj = 0
    cap = max(cap, 0)
    return cap, max(min(capj, cap), 0)


def _same_key(h: HostSupply, attrs: tuple[str, ...]) -> tuple[object, ...] | None:
    key: list[object] = []
    for a in attrs:
        if a in h.attributes:
            key.append(h.attributes[a])
        elif a == "hname":
            key.append(h.name)
        elif a in h.resources:
            key.append(h.resources[a])
        elif a in h.tags:
            key.append(True)
        else:
            return None
    return tuple(key)


def _same_text(attrs: tuple[str, ...]) -> str:
    text = ":".join(attrs)
    return text if len(text) <= 200 else text[:197] + "..."  # a short reason for a long same[]


def _sort_key(order: tuple[OrderKey, ...], sup: _Counters) -> Callable[[int], tuple]:
    """Host i's sort key for ``order[...]`` (RES-4, RES-7): each key best first (LSF's order
    string sorts each index by its direction, docs/lsf-behaviour.md section 1); ``-``
    reverses it. A host without the load index sorts after those with it, either way."""
    hosts = sup.hosts
    getters: list[Callable[[int], object]] = []
    for k in order:
        n = k.name
        s = 1 if k.desc else -1  # slots, memory, resources: most first
        g: Callable[[int], float] | None
        if n == "slots":
            g = sup.slots.__getitem__
        elif n == "mem":
            g = sup.mem.__getitem__
        elif n == "maxslots":
            g = lambda i: hosts[i].slots
        elif n == "maxmem":
            g = lambda i: hosts[i].mem_mb
        elif any(n in h.resources for h in hosts):
            g = lambda i, n=n: sup.res[i].get(n, 0.0)  # type: ignore[misc]
        elif n.startswith("max") and any(n[3:] in h.resources for h in hosts):
            g = lambda i, r=n[3:]: hosts[i].resources.get(r, 0.0)  # type: ignore[misc]
        elif n in LOAD_INDICES and any(n in h.load for h in hosts):
            # RES-7: r15s, r1m, r15m, ut, pg, io, ls grow with load (least first); it, tmp,
            # swp, ncpus, maxswp, maxtmp are better larger (most first)
            sign = (1 if n in INCREASING else -1) * (-1 if k.desc else 1)
            getters.append(lambda i, n=n, sign=sign: (0, sign * hosts[i].load[n]) if n in hosts[i].load
                           else (1, 0.0))
            continue
        elif any(n in h.tags for h in hosts):
            g = lambda i, n=n: 1.0 if n in hosts[i].tags else 0.0  # type: ignore[misc]  # a tag: hosts with it first
        else:
            g = None  # no host has it (a load index none has reported; from an older job): ignored
        if g is not None:
            getters.append(lambda i, g=g, s=s: s * g(i))
    if not getters:
        slots = sup.slots
        return lambda i: (-slots[i], hosts[i].last_dispatch, hosts[i].name)
    return lambda i: (*(g(i) for g in getters), hosts[i].last_dispatch, hosts[i].name)


# --------------------------------------------------------------------------- filling


def _fill_units(seq: list[tuple[int, int]], n: int, u: int, limit: int | None,
                forced: bool) -> list[tuple[int, int]] | None:
    """No span (u=1) or block=u: hosts in order, each as many units as it can."""
    if n % u:
        return None
    out: list[tuple[int, int]] = []
    rem = n
    for pos, (i, c) in enumerate(seq):
        if rem == 0:
            break
        k = min(c - c % u, rem)
        if k <= 0:
            if pos == 0 and forced:
                return None
            continue
        out.append((i, k))
        rem -= k
    if rem:
        return None
    if limit is None or len(out) <= limit:
        return out
    # The host limit binds: keep the (forced) first host, then the hosts with the most
    # room, and fill those in order. Avoids LSF's documented false failure.
    start = 1 if forced else 0
    rest = range(start, len(seq))
    top = heapq.nlargest(limit - start, rest, key=lambda j: (seq[j][1] - seq[j][1] % u, -j))
    chosen = list(range(start)) + sorted(top)
    out = []
    rem = n
    for j in chosen:
        i, c = seq[j]
        k = min(c - c % u, rem)
        if k > 0:
            out.append((i, k))
            rem -= k
        if rem == 0:
            break
    return out if rem == 0 else None


def _fill_ptile(seq: list[tuple[int, int]], n: int, p: int, limit: int | None,
                forced: bool) -> list[tuple[int, int]] | None:
    full, r = divmod(n, p)
    if limit is not None and full + (1 if r else 0) > limit:
        return None
    out: list[tuple[int, int]] = []
    partial: tuple[int, int] | None = None
    for pos, (i, c) in enumerate(seq):
        if full == 0 and r == 0:
            break
        if full and c >= p:
            out.append((i, p))
            full -= 1
        elif r and c >= r:
            if pos == 0 and forced:
                out.append((i, r))
            else:
                partial = (i, r)
            r = 0
        elif pos == 0 and forced:
            return None
    if full or r:
        return None
    if partial is not None:
        out.append(partial)  # LSF: the last host takes the remainder
    return out


def _fill(kind: str, p: int, seq: list[tuple[int, int]], n: int, limit: int | None,
          forced: bool = False) -> list[tuple[int, int]] | None:
    if n <= 0 or (limit is not None and limit < 1):
        return None
    if kind == "ptile":
        return _fill_ptile(seq, n, p, limit, forced)
    if kind == "one":
        for pos, (i, c) in enumerate(seq):
            if c >= n:
                return [(i, n)]
            if forced and pos == 0:
                return None
        return None
    return _fill_units(seq, n, p if kind == "block" else 1, limit, forced)


def _head_need(kind: str, p: int, n: int) -> int:
    if kind == "one":
        return n
    if kind == "block":
        return p
    if kind == "ptile":
        return n % p or p
    return 1


class _Group:
    """Candidates of one same[] group in host order: (index, cap, cap as first host)."""

    __slots__ = ("rows", "seq")

    def __init__(self, rows: list[tuple[int, int, int]]) -> None:
        self.rows = rows
        self.seq = [(i, c) for i, c, _ in rows]

    def fill(self, kind: str, p: int, n: int, limit: int | None, d: _Demand) -> list[tuple[int, int]] | None:
        if not d.has_job:
            return _fill(kind, p, self.seq, n, limit)
        # The /job reservation goes on the first host: try the first host in order that
        # can hold it with its share, then the one that can take the most tasks with it.
        need = _head_need(kind, p, n)
        heads: list[int] = []
        for pos, (_, _, cj) in enumerate(self.rows):
            if cj >= need:
                heads.append(pos)
                break
        if heads:
            best = max(range(len(self.rows)), key=lambda j: (self.rows[j][2], -j))
            if best != heads[0]:
                heads.append(best)
        for pos in heads:
            i, _, cj = self.rows[pos]
            seq = [(i, cj)] + self.seq[:pos] + self.seq[pos + 1:]
            got = _fill(kind, p, seq, n, limit, forced=True)
            if got is not None:
                return got
        return None

    def bound(self, kind: str, p: int, limit: int | None) -> int:
        """An upper bound of the count this group can hold under the span."""
        if kind == "one":
            return max((c for _, c in self.seq), default=0)
        if kind == "ptile":
            caps = [min(c, p) for _, c in self.seq]
        elif kind == "block":
            caps = [c - c % p for _, c in self.seq]
        else:
            caps = [c for _, c in self.seq]
        if limit is not None and limit < len(caps):
            return sum(heapq.nlargest(limit, caps))
        return sum(caps)


def _search(g: _Group, kind: str, p: int, lo: int, hi: int, limit: int | None,
            d: _Demand) -> tuple[int, list[tuple[int, int]]] | None:
    """The largest allowed count in [lo, hi] the group places, with its plan (RES-3)."""
    step = p if kind == "block" else 1
    hi = min(hi, g.bound(kind, p, limit))
    a = -(-lo // step)  # in units of step
    b = hi // step
    if a > b:
        return None
    got = g.fill(kind, p, b * step, limit, d)
    if got is not None:
        return b * step, got
    got = g.fill(kind, p, a * step, limit, d)
    if got is None:
        return None
    best = (a * step, got)
    lo_u, hi_u = a, b - 1
    while lo_u < hi_u:
        mid = (lo_u + hi_u + 1) // 2
        got = g.fill(kind, p, mid * step, limit, d)
        if got is not None:
            lo_u, best = mid, (mid * step, got)
        else:
            hi_u = mid - 1
    return best


# --------------------------------------------------------------------------- placing


@dataclass(slots=True)
class _Placed:
    """Internal result: per part, (alloc by host index, demand); which alternative."""

    segments: list[tuple[list[tuple[int, int]], _Demand]]
    alternative: int | None = None

    @property
    def ntasks(self) -> int:
        return sum(k for alloc, _ in self.segments for _, k in alloc)


_MISSING = object()
#: Memo of select outcomes by (expression, values of the names it reads). The outcome
#: is a function of those values alone, so this is invisible to callers; it spares
#: evaluating the same select on hundreds of alike hosts in every call.
_SELECT_MEMO: dict[tuple[Expr, tuple[object, ...]], bool] = {}
_SELECT_MEMO_MAX = 1 << 16
_NAMES_MEMO: dict[Expr, tuple[str, ...]] = {}


def _select_names(e: Expr) -> tuple[str, ...]:
    names = _NAMES_MEMO.get(e)
    if names is None:
        found: dict[str, None] = {}  # first-seen order, each once
        stack = [e]
        while stack:
            node = stack.pop()
            if isinstance(node, (Name, Defined)):
                found.setdefault(node.name)
            elif isinstance(node, BoolOp):
                stack.extend(reversed(node.operands))
            elif isinstance(node, Binary):
                stack.extend((node.left, node.right))
            elif isinstance(node, Unary):
                stack.append(node.operand)
        names = _NAMES_MEMO[e] = tuple(found)
        if len(_NAMES_MEMO) > 4096:
            _NAMES_MEMO.clear()
    return names


def _lookup(sup: _Counters, i: int, name: str) -> object:
    """One value of ``sup.view(i)`` without building the view (same precedence)."""
    if name == "slots":
        return sup.slots[i]
    if name == "mem":
        return sup.mem[i]
    h = sup.hosts[i]
    if name == "maxslots":
        return h.slots
    if name == "maxmem":
        return h.mem_mb
    if name == "hname":
        return h.name
    if name in h.tags:
        return True
    if name in h.resources:
        return sup.res[i].get(name, 0.0)
    if name.startswith("max") and name[3:] in h.resources:
        return h.resources[name[3:]]
    if name in h.load and name not in NOT_PLACED:
        return select_value(name, h.load[name])
    return h.attributes.get(name, _MISSING)


def _select_true(sel: Expr, names: tuple[str, ...], sup: _Counters, i: int,
                 local: dict[tuple[object, ...], bool]) -> bool:
    values = tuple([_lookup(sup, i, n) for n in names])
    got = local.get(values)
    if got is None:
        key = (sel, values)
        got = _SELECT_MEMO.get(key)
        if got is None:
            view = {n: v for n, v in zip(names, values) if v is not _MISSING}
            got = select_matches(sel, view)
            if len(_SELECT_MEMO) >= _SELECT_MEMO_MAX:
                _SELECT_MEMO.clear()
            _SELECT_MEMO[key] = got
        local[values] = got
    return got


def _matching(part: ResReq, sup: _Counters) -> list[int]:
    sel = part.select
    usable = sup.usable
    if sel is None:
        return [i for i in range(len(sup.hosts)) if usable[i]]
    names = _select_names(sel)
    local: dict[tuple[object, ...], bool] = {}
    return [i for i in range(len(sup.hosts)) if usable[i] and _select_true(sel, names, sup, i, local)]


def _groups(part: ResReq, sup: _Counters, match: list[int], d: _Demand) -> list[_Group]:
    hosts = sup.hosts
    res_names = [r for r in d.names if r != "mem"]
    rows: list[tuple[int, int, int]]
    keys: dict[int, tuple[object, ...]] = {}
    if not d.names and not part.same:
        slots = sup.slots
        rows = [(i, slots[i], slots[i]) for i in match if slots[i] > 0]
    else:
        rows = []
        for i in match:
            h = hosts[i]
            if res_names and any(r not in h.resources for r in res_names):
                continue
            if part.same:
                key = _same_key(h, part.same)
                if key is None:
                    continue
                keys[i] = key
            cap, capj = _caps(sup, i, d)
            if cap > 0:
                rows.append((i, cap, capj))
    sk = _sort_key(part.order, sup)
    rows.sort(key=lambda row: sk(row[0]))
    if not part.same:
        return [_Group(rows)]
    by_key: dict[tuple[object, ...], list[tuple[int, int, int]]] = {}
    for row in rows:
        by_key.setdefault(keys[row[0]], []).append(row)
    return [_Group(r) for r in by_key.values()]


def _place_simple(part: ResReq, sup: _Counters, lo: int, hi: int,
                  limit: int | None) -> _Placed | None:
    kind, p = _span_kind(part.span)
    match = _matching(part, sup)
    nalts = max(len(part.rusage), 1)
    for alt in range(nalts):
        d = _demand(part, alt)
        best: tuple[int, list[tuple[int, int]]] | None = None
        for g in _groups(part, sup, match, d):
            got = _search(g, kind, p, lo, hi, limit, d)
            if got is not None and (best is None or got[0] > best[0]):
                best = got
                if got[0] >= hi:
                    break
        if best is not None:
            return _Placed([(best[1], d)], alt if len(part.rusage) > 1 else None)
    return None


def _compound_total(rr: ResReq) -> int:
    return sum(p.count or 0 for p in rr.parts)


def _place_rr(rr: ResReq, sup: _Counters, lo: int, hi: int, limit: int | None) -> _Placed | None:
    if rr.kind == "simple":
        return _place_simple(rr, sup, lo, hi, limit)
    if rr.kind == "compound":
        if not lo == hi == _compound_total(rr):
            return None
        work = sup.fork()
        segments = []
        for part in rr.parts:
            got = _place_simple(part.resreq, work, part.count or 0, part.count or 0, limit)
            if got is None:
                return None
            for alloc, d in got.segments:
                for pos, (i, k) in enumerate(alloc):
                    work.take(i, k, d.amounts(k, pos == 0))
            segments.extend(got.segments)
        if limit is not None and len({i for alloc, _ in segments for i, _ in alloc}) > limit:
            return None
        return _Placed(segments)
    for ai, part in enumerate(rr.parts):
        if _rr_error(part.resreq, lo, hi, limit) is not None:
            continue
        got = _place_rr(part.resreq, sup, lo, hi, limit)
        if got is not None:
            got.alternative = ai
            return got
    return None


def _to_plan(placed: _Placed, hosts: Sequence[HostSupply], exclusive: bool = False) -> Plan:
    alloc: dict[str, int] = {}
    reserve: dict[str, dict[str, float]] = {}
    for seg, d in placed.segments:
        for pos, (i, k) in enumerate(seg):
            name = hosts[i].name
            alloc[name] = alloc.get(name, 0) + k
            r = reserve.setdefault(name, {"slots": 0})
            r["slots"] += k
            for res, v in d.amounts(k, pos == 0).items():
                r[res] = r.get(res, 0.0) + v
    if exclusive:  # LSF bsub -x: the job holds its hosts whole, so they take no other job
        by_name = {h.name: h for h in hosts} if len(reserve) > 1 else None
        for name, r in reserve.items():
            h = by_name[name] if by_name is not None else next(h for h in hosts if h.name == name)
            r["slots"] = h.slots
    for r in reserve.values():
        for key, v in r.items():
            r[key] = _num(v)
    return Plan(list(alloc.items()), reserve, placed.alternative, exclusive)


# --------------------------------------------------------------------------- request rules


def _simple_error(rr: ResReq, lo: int, hi: int, what: str) -> str | None:
    span = rr.span
    if span is None:
        return None
    if span.ptile is not None and span.ptile > hi:
        return f"{_span_text(span)} with {what}: ptile is larger than the task count"
    if span.block is not None:
        b = span.block
        if -(-lo // b) * b > hi:
            if lo == hi:
                return f"{_span_text(span)} with {what}: the task count is not a multiple of {b}"
            return f"{_span_text(span)} with {what}: no count in the range is a multiple of {b}"
    if span.hosts is not None and span.hosts not in (1, -1):
        return f"{_span_text(span)} is not supported: use hosts=1 or hosts=-1"
    return None


def _rr_error(rr: ResReq, lo: int, hi: int, limit: int | None) -> str | None:
    """What makes the request itself unplaceable whatever the supply (XCE refuses what
    LSF would leave pending forever), or None."""
    if lo < 1 or hi < lo:
        return f"invalid task range {_nspell(lo, hi)}"
    if limit is not None and limit < 1:
        return f"the host limit is {limit}"
    if rr.kind == "simple":
        return _simple_error(rr, lo, hi, _nspell(lo, hi))
    if rr.kind == "compound":
        total = _compound_total(rr)
        if not lo == hi == total:
            counts = "+".join(str(p.count) for p in rr.parts)
            return (f"the compound request places {total} tasks ({counts}) but the job asks for "
                    f"{_nspell(lo, hi)}: -n must be {total}")
        for k, part in enumerate(rr.parts, 1):
            c = part.count or 0
            why = _simple_error(part.resreq, c, c, f"{c} tasks")
            if why:
                return f"part {k}: {why}"
        return None
    whys = []
    for k, part in enumerate(rr.parts, 1):
        why = _rr_error(part.resreq, lo, hi, limit)
        if why is None:
            return None
        whys.append(f"alternative {k}: {why}")
    return "; ".join(whys) or "an alternative request with no alternatives"


# --------------------------------------------------------------------------- public API


def plan_fixed(req: PlacementRequest, n: int, hosts: Sequence[HostSupply]) -> Plan | None:
    """A plan for exactly ``n`` tasks on the hosts' free supply now, or None.

    The request's own rules (``_rr_error``: ptile larger than the job's largest
    count, block, compound sum) are judged on ``req.ntasks_min/max``; ``n`` may be
    any count (a range job with ``span[ptile=2]`` may place 1 task)."""
    if _rr_error(req.resreq, req.ntasks_min, req.ntasks_max, req.host_limit) is not None:
        return None
    got = _place_rr(req.resreq, _Counters(hosts, exclusive=req.exclusive), n, n, req.host_limit)
    return None if got is None else _to_plan(got, hosts, req.exclusive)


def place(req: PlacementRequest, hosts: Sequence[HostSupply], *, explain: bool = True,
          max_host_lines: int | None = None) -> Plan | Shortfall:
    """Place the largest count in [min, max] that fits now (RES-3, RES-4, RES-5), or
    say why not (RES-6). ``explain=False`` returns a bare Shortfall (main line only)
    without the per-host lines, hint and idle-cluster check. ``max_host_lines`` keeps
    the per-host lines of the first that many hosts (by name) and sums up the rest in
    one last line (host ``"*"``, resource ``"more"``, ``free`` = hosts left out)."""
    err = _rr_error(req.resreq, req.ntasks_min, req.ntasks_max, req.host_limit)
    if err is not None:
        return Shortfall(f"The request can never start: {err}", [], f"can never start: {err}", True)
    sup = _Counters(hosts, exclusive=req.exclusive)
    got = _place_rr(req.resreq, sup, req.ntasks_min, req.ntasks_max, req.host_limit)
    if got is not None:
        return _to_plan(got, hosts, req.exclusive)
    if not explain:
        return Shortfall(f"The resource requirement cannot be met now for {req.ntasks_min} tasks")
    return _shortfall(req, hosts, sup, max_host_lines)


def shortfall(req: PlacementRequest, hosts: Sequence[HostSupply], *, max_host_lines: int | None = None,
              by_name: list[int] | None = None, matches: dict | None = None) -> Shortfall:
    """Why ``req`` does not fit on ``hosts`` now (RES-6), for a caller that has found it does
    not (``place`` on them, or on the hosts with a free slot, returned a Shortfall): what
    ``place(..., explain=True)`` says then, without placing it again. ``max_host_lines`` as
    for ``place``. A caller explaining many requests over the same hosts (a session) may
    give what it knows of them: ``by_name``, the indices of ``hosts`` in name order, and
    ``matches``, select -> ``matching_hosts(select, hosts)``, read and filled here."""
    err = _rr_error(req.resreq, req.ntasks_min, req.ntasks_max, req.host_limit)
    if err is not None:
        return Shortfall(f"The request can never start: {err}", [], f"can never start: {err}", True)
    sup = _Counters(hosts, exclusive=req.exclusive)
    sup.by_name = by_name
    return _shortfall(req, hosts, sup, max_host_lines, matches)


#: a requirement -> its ordered form (``ordered_form``), bounded as _NAMES_MEMO
_ORDERED_MEMO: dict[ResReq, tuple[bool, float, Expr | None] | None] = {}


def ordered_form(req: PlacementRequest) -> tuple[bool, float, Expr | None] | None:
    """Whether ``place_ordered`` can place ``req`` (issue 19, RES-4: placement without a scan
    of every host): ``(one_host, mem_per_task_mb, select)`` for a plain request, else None.
    Plain: a simple requirement with no order or same, a span of none, ``hosts=-1`` or
    ``hosts=1`` (one_host), at most one rusage alternative whose terms are all ``mem`` per
    task; no queue host limit, not exclusive. Its select (None: none) must also read only
    what a session does not change (``matching_hosts``). Such a request's hosts are taken
    in the default host order alone, so a host index kept in that order places it without
    a scan."""
    if req.exclusive or req.host_limit is not None:
        return None
    rr = req.resreq
    got = _ORDERED_MEMO.get(rr, _MISSING)
    if got is _MISSING:
        got = None
        if rr.kind == "simple" and not rr.order and not rr.same and len(rr.rusage) <= 1:
            kind, _ = _span_kind(rr.span)
            d = _demand(rr, 0)
            if kind in ("none", "one") and not d.host and not d.job and all(n == "mem" for n in d.names):
                got = (kind == "one", d.task.get("mem", 0.0), rr.select)
        if len(_ORDERED_MEMO) > 4096:
            _ORDERED_MEMO.clear()
        _ORDERED_MEMO[rr] = got
    return got


def why_not_ordered(req: PlacementRequest) -> str:
    """Why ``ordered_form`` does not take ``req`` (it reads every usable host instead), as the
    decision trace says it (issue 19 part 1): "order[]", "span[ptile=4]", ... ; "" when it
    takes it."""
    rr = req.resreq
    if req.exclusive:
        return "an exclusive job (-x)"
    if req.host_limit is not None:
        return "the queue's host limit"
    if rr.kind != "simple":
        return f"a {rr.kind} requirement"
    if rr.order:
        return render(ResReq(order=rr.order))
    if rr.same:
        return render(ResReq(same=rr.same))
    if len(rr.rusage) > 1:
        return "rusage alternatives (||)"
    kind, p = _span_kind(rr.span)
    if kind in ("ptile", "block"):
        return f"span[{kind}={p}]"
    d = _demand(rr, 0)
    if d.host or d.job:
        return "a /host or /job rusage term"
    other = [n for n in d.names if n != "mem"]
    if other:
        return f"rusage of {', '.join(other)}"
    return ""


def matching_hosts(sel: Expr, hosts: Sequence[HostSupply]) -> frozenset[str] | None:
    """The names of the hosts whose values make ``sel`` true (what ``place`` reads: module
    docstring), or None when ``sel`` reads a value that placing jobs changes (``slots``,
    ``mem``, the free amount of a resource), so that the answer holds for one session only
    while nothing else changes: computed once per distinct select in a session (issue 19,
    as SCHED-2 keeps what a session proved). One evaluation per distinct tuple of the
    values it reads (the select memo)."""
    names = _select_names(sel)
    if "slots" in names or "mem" in names:
        return None
    for h in hosts:
        for n in names:
            if n in h.resources and n not in h.tags:
                return None
    sup = _Counters(hosts)
    local: dict[tuple[object, ...], bool] = {}
    return frozenset(hosts[i].name for i in range(len(hosts)) if _select_true(sel, names, sup, i, local))


def _ordered_cap(h: HostSupply, per_task: float) -> int:
    """The tasks host ``h`` can take of a plain request needing ``per_task`` MB each
    (``_caps`` for a demand of memory per task alone)."""
    cap = h.slots_free
    if cap <= 0 or not per_task:
        return max(cap, 0)
    if h.mem_free_mb < -_EPS:
        return 0
    return max(min(cap, math.floor(h.mem_free_mb / per_task + _EPS)), 0)


def place_ordered(req: PlacementRequest, form: tuple[bool, float, Expr | None], order: Iterable[str],
                  hosts: Mapping[str, HostSupply], match: frozenset[str] | None = None) -> Plan | None:
    """The plan ``place`` gives a plain request (``form`` from ``ordered_form``), or None when
    it does not fit, reading the hosts in ``order``: the names of the usable hosts (status ok,
    not running an exclusive job) with a free slot, in the default host order (most free
    slots, least recently dispatched to, name; module docstring); ``match``: the hosts its
    select is true on (``matching_hosts``; None: it has none). The same rules: without a
    span, hosts in order each take as many tasks as they can until the largest count of the
    range (RES-3) is placed; with ``span[hosts=1]``, the first host in order that holds the
    largest count any host can hold. Costs the hosts it reads: a job that fits the first
    host reads one (a full read only when a one-host job fits no host whole)."""
    one, per_task, _sel = form
    lo, hi = req.ntasks_min, req.ntasks_max
    if lo < 1 or hi < lo:
        return None
    if match is not None:
        order = (name for name in order if name in match)
    alloc: list[tuple[str, int]] = []
    if one:
        best_cap, best = 0, None
        for name in order:
            cap = _ordered_cap(hosts[name], per_task)
            if cap >= hi:
                best_cap, best = hi, name
                break
            if cap > best_cap:
                best_cap, best = cap, name
        if best is None or best_cap < lo:
            return None
        alloc.append((best, best_cap))
    else:
        rem = hi
        for name in order:
            cap = _ordered_cap(hosts[name], per_task)
            if cap > 0:
                k = min(cap, rem)
                alloc.append((name, k))
                rem -= k
                if rem == 0:
                    break
        if hi - rem < lo:
            return None
    reserve: dict[str, dict[str, float]] = {}
    for name, k in alloc:
        reserve[name] = {"slots": k, "mem": _num(per_task * k)} if per_task else {"slots": k}
    return Plan(alloc, reserve)


def never_satisfiable(req: PlacementRequest, hosts: Sequence[HostSupply], *, matches: dict | None = None
                      ) -> str | None:
    """Why the request could never start, judged on the hosts' totals as if the
    cluster were idle and every host open (a closed or down host may come back), or
    None when it could. For submit-time refusal (MERGE-2). ``matches``: select ->
    ``matching_hosts(select, hosts)``, a memo the caller keeps for these hosts."""
    err = _rr_error(req.resreq, req.ntasks_min, req.ntasks_max, req.host_limit)
    if err is not None:
        return err
    rr = _without_load(req.resreq)
    if _fits_idle_plain(req if rr is req.resreq else replace(req, resreq=rr), hosts, matches):
        return None
    idle = _Counters(hosts, idle=True)
    if _place_rr(rr, idle, req.ntasks_min, req.ntasks_max, req.host_limit) is not None:
        return None
    return _diagnose(rr, idle, req.ntasks_min, req.ntasks_max, req.host_limit, 0).never


def _fits_idle_plain(req: PlacementRequest, hosts: Sequence[HostSupply], matches: dict | None = None) -> bool:
    """True when ``req`` is plain (``ordered_form``, its select reading only what an idle
    cluster does not change) and fits the hosts' totals, every host open: what ``_place_rr``
    over idle counters finds, told from a sum (spread) or a maximum (span[hosts=1]) of the
    tasks each matching host holds, with no sort (issue 19: a busy session asks this once per
    distinct request, over 5,000 hosts). False when it cannot say so: the full check decides."""
    form = ordered_form(req)
    if form is None:
        return False
    one, per_task, sel = form
    match = None
    if sel is not None:
        match = matches.get(sel, _MISSING) if matches is not None else _MISSING
        if match is _MISSING:
            match = matching_hosts(sel, hosts)
            if matches is not None:
                matches[sel] = match
        if match is None:
            return False
    lo = req.ntasks_min
    total = 0
    for h in hosts:
        if match is not None and h.name not in match:
            continue
        cap = h.slots
        if cap <= 0:
            continue
        if per_task:
            cap = min(cap, math.floor(h.mem_mb / per_task + _EPS)) if h.mem_mb >= -_EPS else 0
        if one:
            if cap >= lo:
                return True
        else:
            total += max(cap, 0)
            if total >= lo:
                return True
    return False


#: the load index names a select may read (RES-7): unknown until a worker reports them
_LOAD_NAMES = frozenset(LOAD_INDICES) - NOT_PLACED


def _static_select(sel: Expr | None) -> Expr | None:
    """``sel`` without what reads a load index (RES-7): load changes, and a host may not
    have reported yet, so the never-satisfiable check (MERGE-2) judges only the rest. Of an
    ``&&`` chain the operands that read none are kept; any other expression that reads one
    is dropped whole (None: no condition)."""
    if sel is None or not _LOAD_NAMES.intersection(_select_names(sel)):
        return sel
    if isinstance(sel, BoolOp) and sel.op == "&&":
        kept = [o for o in sel.operands if not _LOAD_NAMES.intersection(_select_names(o))]
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else BoolOp("&&", tuple(kept))
    return None


def select_reads_load(rr: ResReq) -> bool:
    """Whether a select of `rr` (any part's) reads a load index (RES-7: r15s, ut, io ...):
    only such a pending job can become able to start when a host's load changes, as load
    moves nothing else a placement counts (slots, memory and resources are reservations).
    An order string on load only picks among hosts a job fits anyway."""
    return _without_load(rr) is not rr


def _without_load(rr: ResReq) -> ResReq:
    """``rr`` with each select made ``_static_select`` (itself when none reads a load index)."""
    if rr.kind == "simple":
        sel = _static_select(rr.select)
        return rr if sel is rr.select else replace(rr, select=sel)
    parts = tuple(replace(p, resreq=_without_load(p.resreq)) for p in rr.parts)
    return rr if all(a.resreq is b.resreq for a, b in zip(parts, rr.parts)) else replace(rr, parts=parts)


# --------------------------------------------------------------------------- explaining


@dataclass(slots=True)
class _Diag:
    main: str
    lines: list[HostShortfall]
    wait: str | None
    never: str
    #: hosts with a shortfall left out of `lines` (beyond the `room` the diagnosis was given)
    more: int = 0


#: the longest select text a reason quotes (a select of a thousand terms gives a short reason)
_SELECT_SHOWN = 200


def _sel(sel: Expr) -> str:
    text = render_expr(sel)
    return text if len(text) <= _SELECT_SHOWN else text[:_SELECT_SHOWN - 3] + "..."


def _where(sel: Expr | None) -> str:
    return "any host" if sel is None else f"any host with {_sel(sel)}"


def _diagnose(rr: ResReq, sup: _Counters, lo: int, hi: int, limit: int | None, room: float = _INF) -> _Diag:
    """Why ``rr`` cannot place [lo, hi] tasks on ``sup``, with the per-host lines of the first
    ``room`` hosts (by name) that have any; the hosts past those are only counted (``more``)."""
    if rr.kind == "simple":
        return _diagnose_simple(rr, sup, lo, limit, _nspell(lo, hi), room)
    if rr.kind == "compound":
        work = sup.fork()
        used: set[int] = set()
        for k, part in enumerate(rr.parts, 1):
            c = part.count or 0
            got = _place_simple(part.resreq, work, c, c, limit)
            if got is None:
                dg = _diagnose_simple(part.resreq, work, c, limit, f"{c} tasks", room)
                return _Diag(f"part {k} ({c} tasks): {dg.main}", dg.lines, dg.wait, f"part {k}: {dg.never}", dg.more)
            for alloc, d in got.segments:
                for pos, (i, n) in enumerate(alloc):
                    work.take(i, n, d.amounts(n, pos == 0))
                    used.add(i)
        main = (f"Host limit {limit}: the parts of the compound request use {len(used)} hosts"
                if limit is not None and len(used) > limit else "The parts of the compound request do not fit together")
        return _Diag(main, [], None, main[0].lower() + main[1:])
    alts = [(k, p) for k, p in enumerate(rr.parts, 1) if _rr_error(p.resreq, lo, hi, limit) is None]
    dgs = [(k, _diagnose(p.resreq, sup, lo, hi, limit, room)) for k, p in alts]
    if not dgs:
        why = _rr_error(rr, lo, hi, limit) or "no alternative"
        return _Diag(f"The request can never start: {why}", [], None, why)
    k, first = dgs[0]
    return _Diag(f"No alternative fits now (alternative {k}: {first.main})", first.lines, first.wait,
                 "; ".join(f"alternative {k}: {dg.never}" for k, dg in dgs), first.more)


def _diagnose_simple(part: ResReq, sup: _Counters, n: int, limit: int | None, what: str,
                     room: float = _INF) -> _Diag:
    """Why ``part`` cannot place ``n`` tasks on ``sup`` (first rusage alternative); per-host
    lines for the first ``room`` hosts (by name) that have any, the rest counted in ``more``
    (their lines are never made: a busy cluster's 5,000 hosts each have one, issue 19)."""
    hosts = sup.hosts
    kind, p = _span_kind(part.span)
    d = _demand(part, 0)
    res_names = [r for r in d.names if r != "mem"]
    need_k = _head_need(kind, p, n) if kind != "ptile" else min(p, n)
    lines: list[HostShortfall] = []
    matching: list[int] = []
    caps: dict[int, int] = {}
    limiting: dict[str, None] = {}  # the resources that bound a host's count, first-seen order
    sel_ok = 0
    barred: list[str] = []  # LSF bsub -x: hosts exclusivity keeps from the job
    lined = 0  # hosts with lines so far; past `room`, hosts with a shortfall are only counted
    more = 0
    sel_names = _select_names(part.select) if part.select is not None else ()
    sel_seen: dict[tuple[object, ...], bool] = {}
    by_name = sup.by_name if sup.by_name is not None else sorted(range(len(hosts)), key=[h.name for h in hosts].__getitem__)
    for i in by_name:
        h = hosts[i]
        detail = lined < room
        if sup.barred is not None and sup.barred[i] is not None and hosts[i].status == "ok":
            barred.append(sup.barred[i])
            if detail:
                lines.append(HostShortfall(h.name, "exclusive", 0, 0, sup.barred[i]))
                lined += 1
            else:
                more += 1
            continue
        if not sup.usable[i]:
            if detail:
                lines.append(HostShortfall(h.name, "status", 0, 0, f"{h.name}: status {h.status}"))
                lined += 1
            else:
                more += 1
            continue
        if part.select is not None:
            if detail:
                why = explain_select(part.select, sup.view(i))
                if why is not None:
                    lines.append(HostShortfall(h.name, "select", 0, 1, f"{h.name}: select false: {why}"))
                    lined += 1
                    continue
            elif not _select_true(part.select, sel_names, sup, i, sel_seen):  # the same verdict, no text
                more += 1
                continue
        sel_ok += 1
        missing = [r for r in res_names if r not in h.resources] if res_names else None
        if missing:
            if detail:
                for r in missing:
                    need = d.task.get(r, 0.0) * need_k + d.host.get(r, 0.0) + d.job.get(r, 0.0)
                    lines.append(HostShortfall(h.name, r, 0, need, f"{h.name}: no resource {r}"))
                lined += 1
            else:
                more += 1
            continue
        if part.same and _same_key(h, part.same) is None:
            if detail:
                a = next(a for a in part.same if _same_key(h, (a,)) is None)
                lines.append(HostShortfall(h.name, a, 0, 0, f"{h.name}: same[{_same_text(part.same)}]: {a} not defined"))
                lined += 1
            else:
                more += 1
            continue
        matching.append(i)
        free = sup.slots[i]
        caps[i] = _caps(sup, i, d)[0] if d.names else (free if free > 0 else 0)
        short = free < need_k
        if short and detail:
            lines.append(HostShortfall(h.name, "slots", free, need_k,
                                       f"{h.name}: slots {free} free of {h.slots}, needs {need_k}"))
        for r in d.names:
            need = d.task.get(r, 0.0) * need_k + d.host.get(r, 0.0)
            have = sup.free(i, r)
            if have + _EPS < need:
                short = True
                if detail:
                    unit = " MB" if r == "mem" else ""
                    lines.append(HostShortfall(h.name, r, _num(have), _num(need),
                                               f"{h.name}: {r} {_fmt(have)}{unit} free of {_fmt(sup.total(i, r))}{unit}, "
                                               f"needs {_fmt(need)}{unit}"))
            t = d.task.get(r, 0.0)
            bound = math.floor((have - d.host.get(r, 0.0)) / t + _EPS) if t > 0 else (free if have + _EPS >= need else 0)
            if bound < free:
                limiting.setdefault(r)
        if short:
            if detail:
                lined += 1
            else:
                more += 1

    where = _where(part.select)
    total = len(hosts)
    able = [i for i in matching if caps[i] > 0]
    S = sum(max(sup.slots[i], 0) for i in matching)
    C = sum(caps[i] for i in matching)
    short = ", ".join(limiting) or "resources"
    rus = f"rusage[{d.text}]" if d.text else "its rusage"
    wait: str | None = None
    never = ""

    if not matching and barred:  # exclusivity left no candidate: say so first
        main = "; ".join(barred[:2]) + (f"; and {len(barred) - 2} more host(s)" if len(barred) > 2 else "")
        wait = ("waits for a host where no job runs" if barred[0].startswith("exclusive job")
                else "waits for the exclusive job to end")
        return _Diag(main, lines, wait, "no host can run it", more)
    if not matching:
        main = f"Not enough hosts match: 0 of {total} hosts can take a task"
        if res_names and not any(r in h.resources for h in hosts for r in res_names):
            r = next(r for r in res_names if not any(r in h.resources for h in hosts))
            never = f"no host has resource {r}"
        elif part.select is not None and sel_ok == 0:
            never = f"no host matches select[{_sel(part.select)}]"
        elif sel_ok and res_names and not part.same:
            never = f"no host that matches the select has resource {', '.join(res_names)}"
        elif part.same:
            never = f"no matching host defines {_same_text(part.same)} (same[{_same_text(part.same)}])"
        else:
            never = "no host can run it"
        return _Diag(main, lines, None, never, more)

    sk = _sort_key(part.order, sup)
    union = _Group(sorted(((i, caps[i], caps[i]) for i in able), key=lambda row: sk(row[0])))
    fits_union = union.fill(kind, p, n, limit, _NO_DEMAND) is not None

    if not fits_union:
        if kind == "one":
            maxfree = max(sup.slots[i] for i in matching)
            if maxfree < n:
                main = f"span[hosts=1]: no host has {n} free slots"
                wait = f"waits for {n} free slots on one host" + (
                    "" if part.select is None else f" with {_sel(part.select)}")
                never = f"span[hosts=1] with {what}: the largest matching host has {maxfree} slots"
            else:
                main = f"span[hosts=1]: no host has room for {n} tasks ({short} short)"
                wait = f"waits for {short} to be released on one host"
                never = f"span[hosts=1] with {what}: no matching host can hold {n} tasks with {rus}"
        elif kind == "ptile":
            full, r = divmod(n, p)
            needed = full + (1 if r else 0)
            nfull = sum(1 for i in able if caps[i] >= p)
            if limit is not None and needed > limit:
                main = f"span[ptile={p}]: {n} tasks need {needed} hosts, the host limit is {limit}"
                never = f"span[ptile={p}] with {what} needs {needed} hosts, more than the host limit of {limit}"
            elif nfull < full:
                main = f"span[ptile={p}]: {nfull} of the {full} hosts needed can take {p} tasks"
                wait = f"waits for {full - nfull} more host(s) with {p} free slots" + (
                    "" if part.select is None else f" and {_sel(part.select)}")
                never = f"span[ptile={p}] with {what}: only {nfull} matching hosts can take {p} tasks, {full} needed"
            else:
                main = f"span[ptile={p}]: no other host can take the last {r} tasks"
                wait = f"waits for one more host with {r} free slots"
                never = f"span[ptile={p}] with {what}: no other matching host for the last {r} tasks"
        else:
            u = p if kind == "block" else 1
            Cu = sum(caps[i] - caps[i] % u for i in able)
            top = sum(heapq.nlargest(limit, (caps[i] - caps[i] % u for i in able))) if limit is not None else Cu
            if S < n:
                main = f"Not enough free slots: {S} free on matching hosts, the job needs {n}"
                wait = f"waits for {n - S} more free slot(s) on {where}"
                never = f"{what}: matching hosts have {S} slots in all"
            elif C < n:
                main = f"Not enough free {short}: matching hosts can take {C} tasks, the job needs {n}"
                wait = f"waits for {short} to be released on {where}"
                never = (f"no matching host can hold one task with {rus}" if C == 0
                         else f"{what}: matching hosts can hold {C} tasks with {rus}")
            elif Cu < n:
                main = f"span[block={u}]: matching hosts can take {Cu} tasks in blocks of {u}, the job needs {n}"
                wait = f"waits for free blocks of {u} slots on {where}"
                never = f"span[block={u}] with {what}: matching hosts can hold {Cu} tasks in blocks of {u}"
            elif limit is not None and top < n:
                main = f"Host limit {limit}: the best {limit} host(s) can take {top} tasks, the job needs {n}"
                wait = f"waits for {limit} hosts with {n} free slots between them"
                never = (f"{what} needs more than the host limit of {limit} host(s): the largest {limit} "
                         f"matching host(s) can take {top} tasks")
            else:
                main = "The resource requirement cannot be met now"
                never = "the resource requirement cannot be met even on an idle cluster"
        return _Diag(main, lines, wait, never, more)

    if part.same:
        groups = _groups(part, sup, matching, d)
        best_n, best_g = 0, None
        for g in groups:
            got = _search(g, kind, p, 1, n, limit, d)
            if got is not None and got[0] > best_n:
                best_n, best_g = got[0], g
        attrs = _same_text(part.same)
        on = ""
        if best_g is not None:
            key = _same_key(hosts[best_g.rows[0][0]], part.same)
            on = f" on {', '.join(f'{a}={_fmt(v)}' for a, v in zip(part.same, key or (), strict=False))}"
        main = f"same[{attrs}]: no group of hosts with one {attrs} can take {n} tasks (at most {best_n}{on})"
        wait = f"waits for {n} free slots on hosts sharing one {attrs}"
        never = f"same[{attrs}] with {what}: no group of matching hosts with one {attrs} can hold {n} tasks"
        return _Diag(main, lines, wait, never, more)
    if d.has_job:
        jobs = ", ".join(f"{r}={_fmt(v)}" for r, v in d.job.items())
        main = f"rusage {jobs} per job: no host can hold it together with its first tasks"
        wait = f"waits for {jobs} on one of the job's hosts"
        never = f"rusage {jobs} per job: no matching host can hold it with a task"
        return _Diag(main, lines, wait, never, more)
    return _Diag("The resource requirement cannot be met now", lines, None,
                 "the resource requirement cannot be met even on an idle cluster", more)


def _shortfall(req: PlacementRequest, hosts: Sequence[HostSupply], sup: _Counters,
               max_host_lines: int | None, matches: dict | None = None) -> Shortfall:
    rr, lo, hi, limit = req.resreq, req.ntasks_min, req.ntasks_max, req.host_limit
    dg = _diagnose(rr, sup, lo, hi, limit, _INF if max_host_lines is None else max_host_lines)
    lines = dg.lines
    if dg.more:
        lines.append(HostShortfall("*", "more", dg.more, 0, f"and {dg.more} more host(s) with shortfalls"))
    never = never_satisfiable(req, hosts, matches=matches)
    if never is not None:
        return Shortfall(dg.main, lines, f"can never start: {never}", True)
    hint, start_with = dg.wait, None
    if lo > 1 and rr.kind == "simple":
        floor = 1
        if rr.span is not None and rr.span.ptile is not None:
            floor = rr.span.ptile  # -n k with k < ptile would be refused
        if floor <= lo - 1:
            smaller = _place_rr(rr, sup, floor, lo - 1, limit)
            if smaller is not None:
                hint, start_with = HINT_START_WITH.format(n=smaller.ntasks), smaller.ntasks
    return Shortfall(dg.main, lines, hint, False, start_with)

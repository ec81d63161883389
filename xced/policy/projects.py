"""Share carving and quotas (PRJ-6, PRJ-7): the one place a project's caps are decided.

Pure (DESIGN rules 1 and 5): plain data in, plain data out, no I/O, no clock. The scheduler
builds one `QuotaBook` per session (D-4), the controller's submit path asks `never_fits`,
and `GET /projects` / `xcecli projects` show `report`. Nothing else re-implements a cap.

Resources are keyed as the API shows them: `slots` (integer slots; one task takes one slot),
`mem_mb` (MB) and the name of each consumable resource of hosts.yaml (`gpu`, licences).

Share carving (PRJ-6), once per session, against the supply of the hosts present now
(`supply_totals`: the totals of the usable hosts, so shares follow workers as they come and go):

- the cluster is the parent of a top-level project; its amount of a resource is the supply;
- `share: 60%` (`share_percent`) is that percentage of every resource of the parent's
  resolved amount; a per-resource percentage (`share: {slots: 50%}`) of that resource;
- an absolute amount (`share: {slots: 40}`) is taken as is, but never more than the
  parent's resolved amount: a larger one is capped at the parent's share and flagged
  (`Resolved.capped`; `report` lists it, so `xcecli projects` can say "capped at the
  parent's share"). Siblings that still add up to more than their parent (absolute
  amounts under a percentage parent on a cluster that shrank) are scaled down in
  proportion to fit, and flagged likewise;
- a project with no share of a resource (no `share` at all, or a per-resource share that
  does not name it) has no share of its own: it draws that resource, together with its
  parent's own jobs and its other share-less siblings, from the parent's *unassigned part*
  (the parent's resolved amount minus its children's resolved shares). At the top, projects
  without a share draw from the cluster's unassigned part. A share-less project's children
  carve their percentages from the pool it draws from;
- rounding: slots, memory (whole MB) and every resource whose supply is a whole number are
  rounded DOWN (floor) at each level, so siblings never add up to more than their parent
  (3 projects of 33% of 100 slots get 33 each and 1 slot stays unassigned); a resource whose
  supply is fractional is not rounded.

Caps (PRJ-7). v1 is strict, with no borrowing of idle share: a subtree never holds more than
its resolved share. The effective cap of a subtree is the tighter of its share and its
`quota` (absolute, over the whole subtree); `member_quota` caps each member's (user's) use
over the subtree; the unassigned part of a project caps what its own jobs and its share-less
children hold together. Use is what running and stopped (RUN, USUSP) elements reserve, rolled
up once per session from the snapshot (`QuotaBook`). A job with no project (open mode, a
record older than projects) is never capped and counts in no project's use; no project
defined (open mode, PRJ-4): no book at all, at no cost. A job of a project the config no
longer defines (a running job after a reconfig) counts as a share-less child of its nearest
defined ancestor (or of the cluster).

LSF: the nearest is `lsb.resources` Limit sections with `PROJECTS`/`PER_PROJECT` and
`PER_USER` consumers (`SLOTS`, `MEM`, `RESOURCE`): a job over a limit pends ("Resource
limit ... has been reached") while the jobs behind it still start, the most restrictive
limit wins, and `blimits` shows USED/LIMIT (`3/10`), as the cap lines here do. The share
tree resembles LSF's hierarchical fairshare (`lsb.users` share trees), but shares here are
hard caps, not priorities.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the types only: the scheduler and the simulator import this without pydantic
    from xced.model.project import ProjectConfig, ProjectsConfig

__all__ = ["CLUSTER", "Cap", "CapTree", "QuotaBook", "Resolved", "Usage", "never_fits", "report", "reserve_use",
           "resolve_shares", "supply_totals", "tree_for"]

#: the keys of slots and of memory (MB): xced.model.project's SLOTS and MEM (a test holds them equal)
SLOTS = "slots"
MEM = "mem_mb"
#: the cluster's key among the resolved pools (the parent of every top-level project)
CLUSTER = ""
#: tolerance of the float comparisons (amounts are whole slots and MB, or resource units)
_EPS = 1e-9

#: one running element's use, as the snapshot gives it: (project path or None, user, use
#: {"slots", "mem_mb", resource: amount})
Usage = tuple["str | None", "str | None", Mapping[str, float]]


# --------------------------------------------------------------------------- inputs


def reserve_use(reserve: Mapping[str, Mapping[str, float]], into: dict[str, float] | None = None
                ) -> dict[str, float]:
    """What a dispatch or a running element holds, summed over its hosts: a reserve
    {host: {"slots": n, "mem": MB, resource: amount}} (the scheduler's and the store's
    shape) -> {"slots": n, "mem_mb": MB, resource: amount}, added to `into` when given (so
    the elements of one (project, user) sum into one dict) and returned. The one place the
    two shapes meet (PRJ-7)."""
    out: dict[str, float] = {} if into is None else into
    for held in reserve.values():
        for k, v in held.items():
            if v:
                key = MEM if k == "mem" else k
                out[key] = out.get(key, 0) + v
    return out


def supply_totals(hosts: Iterable, usable_only: bool = True) -> dict[str, float]:
    """The supply shares are carved from (PRJ-6): {"slots", "mem_mb", resource: total} summed
    over `hosts` (objects with `slots`, `mem_mb`, `resources` (totals) and `status`, as
    xced.scheduler.snapshot.HostSupply). `usable_only`: only hosts whose status is "ok" (the
    hosts present now: what a session carves); False: every host, as if all were up (what
    the submit-time check `never_fits` should be given)."""
    hosts = [h for h in hosts if h.status == "ok"] if usable_only else list(hosts)
    out: dict[str, float] = {SLOTS: sum(h.slots for h in hosts), MEM: sum(h.mem_mb for h in hosts)}
    for h in hosts:
        if h.resources:
            for k, v in h.resources.items():
                out[k] = out.get(k, 0) + v
    return out


# --------------------------------------------------------------------------- carving


@dataclass(slots=True)
class Resolved:
    """One project's shares resolved against a supply (PRJ-6), per resource: `share` its own
    resolved share (only the resources it has a share of); `pool` the most its subtree may
    hold by shares (its share, or for a resource it has no share of, the parent's unassigned
    part it draws from); `unassigned` its pool minus its children's shares (what its own
    jobs and its share-less children draw from); `capped` the resources whose share was cut
    to fit the parent's ("capped at the parent's share"), with the amount asked."""

    path: str
    share: dict[str, float] = field(default_factory=dict)
    pool: dict[str, float] = field(default_factory=dict)
    unassigned: dict[str, float] = field(default_factory=dict)
    capped: dict[str, float] = field(default_factory=dict)
    #: the resources some child has a share of (so the unassigned part is a cap of its own)
    carved: set[str] = field(default_factory=set)


def _parent(path: str, known: Mapping[str, object]) -> str:
    """The nearest defined ancestor of `path` (CLUSTER for none)."""
    while True:
        path = path.rsplit("/", 1)[0]
        if not path:
            return CLUSTER
        if path in known:
            return path


def _share_of(p: ProjectConfig, r: str) -> tuple[str, float] | None:
    """("percent", p) or ("amount", a) of resource `r` in `p`'s share, None when it has none."""
    term = p.share.get(r)
    if term is not None:
        return ("percent", term.percent) if term.percent is not None else ("amount", term.amount)
    if p.share_percent is not None:
        return "percent", p.share_percent
    return None


def _resources(projects: ProjectsConfig, supply: Mapping[str, float]) -> list[str]:
    """Every resource a cap can be about: slots, mem_mb, the supply's, and those named in a
    share, quota or member_quota."""
    out = [SLOTS, MEM] + [k for k in supply if k not in (SLOTS, MEM)]
    for p in projects.projects:
        for k in (*p.share, *p.quota, *p.member_quota):
            if k not in out:
                out.append(k)
    return out


def resolve_shares(projects: ProjectsConfig, supply: Mapping[str, float]) -> dict[str, Resolved]:
    """Carve every project's share top-down from `supply` (PRJ-6, the rules of the module
    docstring): {path: Resolved}, with the cluster under CLUSTER ("") (its `pool` is the
    supply, its `unassigned` what the top-level shares leave). Projects are read parents
    before children (ProjectsConfig's order); a project whose parent is not defined hangs
    from its nearest defined ancestor. Amounts: slots, MB, resource units."""
    known = {p.path: p for p in projects.projects}
    res = {CLUSTER: Resolved(CLUSTER)}
    children: dict[str, list[ProjectConfig]] = {CLUSTER: []}
    for p in projects.projects:
        res[p.path] = Resolved(p.path)
        children[p.path] = []
        children[_parent(p.path, known)].append(p)
    for r in _resources(projects, supply):
        whole = r in (SLOTS, MEM) or float(supply.get(r, 0)).is_integer()
        res[CLUSTER].pool[r] = float(supply.get(r, 0))
        for node in [CLUSTER, *known]:  # parents before children: a node's pool is known here
            me = res[node]
            base = me.pool[r]
            asked: list[tuple[ProjectConfig, float]] = []
            for c in children[node]:
                s = _share_of(c, r)
                if s is None:
                    continue
                kind, v = s
                want = v * base / 100.0 if kind == "percent" else v
                if whole:
                    want = math.floor(want + _EPS)
                asked.append((c, want))
            got = [min(w, base) for _, w in asked]
            total = sum(got)
            if total > base + _EPS:  # scale down to fit, in proportion
                got = [g * base / total for g in got]
                if whole:
                    got = [math.floor(g + _EPS) for g in got]
            for (c, want), g in zip(asked, got):
                rc = res[c.path]
                rc.share[r] = rc.pool[r] = float(g)
                if g < want - _EPS:
                    rc.capped[r] = float(want)
                me.carved.add(r)
            left = max(base - sum(got), 0.0)
            me.unassigned[r] = left
            for c in children[node]:
                if r not in res[c.path].share:
                    res[c.path].pool[r] = left
    return res


# --------------------------------------------------------------------------- caps


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _unit(r: str) -> str:
    return "slots" if r == SLOTS else "MB of memory" if r == MEM else r


def _amount(v: float, r: str) -> str:
    """'32 slots', '1 slot', '4096 MB of memory', '2 gpu'."""
    return f"{_fmt(v)} {'slot' if r == SLOTS and v == 1 else _unit(r)}"


def _ratio(use: float, limit: float, r: str) -> str:
    """'32/32 slots' (blimits' USED/LIMIT)."""
    return f"{_fmt(use)}/{_fmt(limit)} {_unit(r)}"


def _where(project: str) -> str:
    return "the cluster" if project == CLUSTER else project


@dataclass(frozen=True, slots=True)
class Cap:
    """One cap in a job's way (PRJ-6, PRJ-7), as data and as text. `kind`: "quota" (the
    subtree's quota), "share" (the subtree's resolved share), "unassigned" (the unassigned
    part of `project`, CLUSTER "" for the cluster's, which its own jobs and its share-less
    children draw from) or "member_quota" (`user`'s use over the subtree); `resource`;
    `limit` and `use` now and `need` the job's (slots, MB, resource units); `capped`: the
    share was capped at the parent's share. `text` reads as a pend reason line:
    "project /physics/hep at quota: 32/32 slots", "user bob at member_quota of /physics/hep:
    8/8 slots", "unassigned part of /physics at share: 20/20 slots, 4 needed"."""

    kind: str
    project: str
    resource: str
    limit: float
    use: float
    need: float
    user: str | None = None
    capped: bool = False

    @property
    def text(self) -> str:
        ratio = _ratio(self.use, self.limit, self.resource)
        if self.kind == "member_quota":
            head = f"user {self.user} at member_quota of {self.project}"
        elif self.kind == "unassigned":
            head = f"unassigned part of {_where(self.project)} at share"
        elif self.kind == "share" and self.capped:
            head = f"project {self.project} at share (capped at the parent's share)"
        else:
            head = f"project {self.project} at {self.kind}"
        full = self.use + _EPS >= self.limit
        return f"{head}: {ratio}" + ("" if full else f", {_fmt(self.need)} needed")

    def never_text(self) -> str:
        """The cap as a submit-time refusal names it: "project /physics/hep has a quota of 32 slots"."""
        a = _amount(self.limit, self.resource)
        if self.kind == "member_quota":
            return f"user {self.user}'s member_quota in {self.project} is {a}"
        if self.kind == "unassigned":
            return f"the unassigned part of {_where(self.project)} is {a}"
        if self.kind == "share":
            return f"project {self.project}'s share of the whole cluster is {a}"
        return f"project {self.project} has a quota of {a}"


class CapTree:
    """The caps of a projects config over a supply (PRJ-6, PRJ-7), without any use: the
    resolved shares and, per (project, user), the constraints in a job's way (limit, and the
    counter of use it is held to) and the counters its use adds to, worked out on first need
    and kept. It depends on the config and the supply alone, so one serves every session
    while neither changes (`tree_for`); `QuotaBook` adds a session's use to it."""

    __slots__ = ("projects", "supply", "resolved", "resources", "known", "limit", "ctr", "meta", "ctr_ids",
                 "cons_ids", "plans", "_lock")

    def __init__(self, projects: ProjectsConfig, supply: Mapping[str, float]) -> None:
        import threading

        self.projects = projects
        self.supply = dict(supply)
        self.resolved = resolve_shares(projects, supply)
        self.resources = _resources(projects, supply)
        self.known = {p.path: p for p in projects.projects}
        self.limit: list[float] = []  # per constraint
        self.ctr: list[int] = []  # per constraint: its counter
        self.meta: list[tuple[str, str, str, str | None, bool]] = []  # per constraint: kind, project, res, user, capped
        self.ctr_ids: dict[tuple, int] = {}  # ("sub"|"pool", node, res) or ("member", node, user, res) -> counter
        self.cons_ids: dict[tuple, int] = {}
        #: (project, user) -> ({res: constraint ids}, {res: counter ids})
        self.plans: dict[tuple[str, str | None], tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]] = {}
        self._lock = threading.Lock()

    def _counter(self, key: tuple) -> int:
        i = self.ctr_ids.get(key)
        if i is None:
            i = self.ctr_ids[key] = len(self.ctr_ids)
        return i

    def _cons(self, kind: str, project: str, r: str, limit: float, ctr_key: tuple, user: str | None = None,
              capped: bool = False) -> int:
        key = (kind, project, r, user)
        i = self.cons_ids.get(key)
        if i is None:
            i = self.cons_ids[key] = len(self.limit)
            self.limit.append(limit)
            self.ctr.append(self._counter(ctr_key))
            self.meta.append((kind, project, r, user, capped))
        return i

    def plan(self, project: str, user: str | None):
        """The constraints in the way of a job of (project, user) and the counters its use
        adds to, per resource (the module docstring's rules): ({res: constraint ids, nearest
        project first}, {res: counter ids})."""
        got = self.plans.get((project, user))
        if got is not None:
            return got
        with self._lock:  # two threads (a session, a report) may ask at once
            return self.plans.get((project, user)) or self._build(project, user)

    def _build(self, project: str, user: str | None):
        known, res = self.known, self.resolved
        chain: list[str] = []  # the defined ancestors, the project itself first when defined
        path = project if project in known else _parent(project, known)
        while path != CLUSTER:
            chain.append(path)
            path = _parent(path, known)
        own = project if project in known else None  # the pool its own jobs draw from
        draws = chain[0] if own is None and chain else (CLUSTER if own is None else None)
        cons: dict[str, tuple[int, ...]] = {}
        ctrs: dict[str, tuple[int, ...]] = {}
        for r in self.resources:
            cl: list[int] = []
            cr: list[int] = []

            def unassigned(node: str) -> None:
                cr.append(self._counter(("pool", node, r)))
                if r in res[node].carved:  # else the node's own caps say the same
                    cl.append(self._cons("unassigned", node, r, res[node].unassigned[r], ("pool", node, r)))

            if own is not None:
                unassigned(own)
            elif draws is not None:
                unassigned(draws)  # an undefined project: a share-less child of its nearest ancestor
            for a in chain:
                p = known[a]
                sub = ("sub", a, r)
                cr.append(self._counter(sub))
                if r in p.quota:
                    cl.append(self._cons("quota", a, r, float(p.quota[r]), sub))
                if r in res[a].share:
                    cl.append(self._cons("share", a, r, res[a].share[r], sub, capped=r in res[a].capped))
                else:
                    unassigned(_parent(a, known))
                if r in p.member_quota and user is not None:
                    mk = ("member", a, user, r)
                    cr.append(self._counter(mk))
                    cl.append(self._cons("member_quota", a, r, float(p.member_quota[r]), mk, user))
            if cl:
                cons[r] = tuple(dict.fromkeys(cl))
            ctrs[r] = tuple(dict.fromkeys(cr))
        got = self.plans[(project, user)] = (cons, ctrs)
        return got


#: the trees of the last few (config, supply) pairs: a session reuses its predecessor's
_TREES: list[tuple[object, tuple, CapTree]] = []
_TREES_KEPT = 4


def tree_for(projects: ProjectsConfig, supply: Mapping[str, float]) -> CapTree:
    """The CapTree of `projects` over `supply`, the one made for this very config object and
    an equal supply if it is among the last few, else a new one. (A tree keeps its config
    alive, so the object compared by identity cannot be another config at the same address.)"""
    key = tuple(sorted(supply.items()))
    for cfg, sup, tree in _TREES:
        if cfg is projects and sup == key:
            return tree
    tree = CapTree(projects, supply)
    _TREES.insert(0, (projects, key, tree))
    del _TREES[_TREES_KEPT:]
    return tree


class QuotaBook:
    """The caps of one session and the use against them (PRJ-6, PRJ-7; LSF lsb.resources
    limits with PROJECTS and PER_USER consumers): built once from the projects config, the
    supply totals of the hosts present (`supply_totals`) and the running usage (one
    `Usage` per running element, or, cheaper, summed per (project, user) as the
    controller's snapshot gives it).

    - `check(project, user, need)`: every cap that `need` ({"slots", "mem_mb", res}) would
      pass, nearest project first (per project: quota, share or unassigned part, member_quota);
      [] when it fits;
    - `headroom(project, user)`: the slots a job may still take (an int, possibly <= 0), or
      None when no cap bounds its slots: a task range `-n 2,8` shrinks to it (RES-3);
    - `take(project, user, used)`: a dispatch's use, counted before the next job is decided.

    A job's caps and counters are worked out once per (project, user) and kept across
    sessions while the config and the supply stay the same (`CapTree`, `tree_for`), and the
    slot headroom is kept until the next `take`, so a session of 100,000 jobs costs a dict
    lookup or two per job. A `project` of None is never capped: `check` gives [], `headroom`
    None, `take` counts nothing. Never raises for any project path or user."""

    __slots__ = ("tree", "projects", "supply", "resolved", "resources", "_use", "_headroom", "_room")

    def __init__(self, projects: ProjectsConfig, supply: Mapping[str, float],
                 usage: Iterable[Usage] = ()) -> None:
        self.tree = tree = tree_for(projects, supply)
        self.projects, self.supply, self.resolved, self.resources = projects, tree.supply, tree.resolved, tree.resources
        self._use: list[float] = [0.0] * len(tree.ctr_ids)  # per counter
        self._headroom: dict[tuple[str, str | None], int | None] = {}
        self._room: dict[tuple[str, str | None], dict[str, float]] = {}
        use, plans = self._use, tree.plans
        for project, user, used in usage:  # as `take`, without its bookkeeping
            if project is not None:
                got = plans.get((project, user)) or self._plan(project, user)
                ctrs = got[1]
                for r, v in used.items():
                    for i in ctrs.get(r, ()):
                        use[i] += v

    def _plan(self, project: str, user: str | None):
        got = self.tree.plan(project, user)
        if len(self._use) < len(self.tree.ctr_ids):  # the tree grew new counters: none used yet
            self._use.extend([0.0] * (len(self.tree.ctr_ids) - len(self._use)))
        return got

    # -------------------------------------------------------------- the session's calls
    def check(self, project: str | None, user: str | None, need: Mapping[str, float]) -> list[Cap]:
        """Every cap `need` ({"slots": n, "mem_mb": MB, resource: amount}) would pass for a
        job of `project` by `user`, as Cap records (their `text` is the pend reason line),
        nearest project first; [] when it fits (PRJ-6, PRJ-7). Resources the job does not
        need never stop it, even where a cap is over (the supply shrank)."""
        if project is None:
            return []
        cons = self._plan(project, user)[0]
        t, use = self.tree, self._use
        out: list[Cap] = []
        for r in sorted(need, key=lambda k: k != SLOTS) if len(need) > 1 else need:  # slots first
            v = need[r]
            for c in cons.get(r, ()) if v > 0 else ():
                u = use[t.ctr[c]]
                if u + v > t.limit[c] + _EPS:
                    kind, p, res, who, capped = t.meta[c]
                    out.append(Cap(kind, p, res, t.limit[c], u, v, who, capped))
        return out

    def headroom(self, project: str | None, user: str | None) -> int | None:
        """The slots a job of `project` by `user` may still take under every cap (the least
        limit minus use of its slot caps, rounded down; <= 0 when one is full or over), or
        None when nothing caps its slots (no project, or no slot cap on its way)."""
        if project is None:
            return None
        key = (project, user)
        try:
            return self._headroom[key]
        except KeyError:
            pass
        cons = self._plan(project, user)[0].get(SLOTS)
        h = None
        if cons:
            use, lim, ctr = self._use, self.tree.limit, self.tree.ctr
            h = math.floor(min(lim[c] - use[ctr[c]] for c in cons) + _EPS)
        self._headroom[key] = h
        return h

    def room(self, project: str | None, user: str | None) -> dict[str, float]:
        """Per resource other than slots, what a job of `project` by `user` may still take
        under every cap ({"mem_mb": MB, "gpu": n}; a resource nothing caps is left out), kept
        until the next `take`: the session's cheap test before `check` names the caps."""
        if project is None:
            return {}
        key = (project, user)
        got = self._room.get(key)
        if got is None:
            use, lim, ctr = self._use, self.tree.limit, self.tree.ctr
            got = self._room[key] = {r: min(lim[c] - use[ctr[c]] for c in cons)
                                     for r, cons in self._plan(project, user)[0].items() if r != SLOTS and cons}
        return got

    def take(self, project: str | None, user: str | None, used: Mapping[str, float]) -> None:
        """Count `used` ({"slots", "mem_mb", resource: amount}, e.g. `reserve_use` of a
        dispatch's reserve) against every counter of (project, user)."""
        if project is None:
            return
        ctrs = self._plan(project, user)[1]
        use = self._use
        for r, v in used.items():
            for i in ctrs.get(r, ()):
                use[i] += v
        if self._headroom:
            self._headroom.clear()
        if self._room:
            self._room.clear()

    def never(self, project: str | None, user: str | None, need: Mapping[str, float]) -> list[Cap]:
        """The caps `need` is over even with no use at all, so that it could never start (the
        submit-time refusal, `never_fits`): quotas and member_quotas always; shares and
        unassigned parts only of a resource the supply has some of (a share of nothing grows
        when a host with it joins)."""
        if project is None:
            return []
        cons = self._plan(project, user)[0]
        t = self.tree
        out = []
        for r in sorted(need, key=lambda k: k != SLOTS):
            v = need[r]
            for c in cons.get(r, ()) if v > 0 else ():
                kind, p, res, u, capped = t.meta[c]
                if v > t.limit[c] + _EPS and (kind in ("quota", "member_quota") or self.supply.get(r, 0) > 0):
                    out.append(Cap(kind, p, res, t.limit[c], 0.0, v, u, capped))
        return out

    # -------------------------------------------------------------- the report
    def use_of(self, project: str) -> dict[str, float]:
        """The running use of `project`'s subtree per resource (0 where none)."""
        ids = self.tree.ctr_ids
        return {r: _num(self._use[i]) if (i := ids.get(("sub", project, r))) is not None and i < len(self._use) else 0
                for r in self.resources}

    def report(self) -> dict:
        """See `report` (the module function)."""
        res, known = self.resolved, self.tree.known
        rows = []
        cap_of: dict[str, dict[str, float]] = {CLUSTER: dict(res[CLUSTER].pool)}
        for p in self.projects.projects:
            rp = res[p.path]
            parent = cap_of[_parent(p.path, known)]
            cap = {}
            for r in self.resources:
                c = min(rp.pool[r], parent[r])
                if r in p.quota:
                    c = min(c, float(p.quota[r]))
                cap[r] = c
            cap_of[p.path] = cap
            members: dict[str, dict[str, float]] = {}
            if p.member_quota:
                for (kind, *rest), i in self.tree.ctr_ids.items():
                    if kind == "member" and rest[0] == p.path and i < len(self._use) and self._use[i]:
                        members.setdefault(rest[1], {})[rest[2]] = _num(self._use[i])
            rows.append({
                "path": p.path,
                "share": _nums(rp.share),
                "draws_from": None if rp.share else (_parent(p.path, known) or "/"),
                "unassigned": _nums(rp.unassigned) if rp.carved else {},
                "quota": _nums(p.quota),
                "member_quota": _nums(p.member_quota),
                "cap": _nums(cap),
                "capped": sorted(rp.capped),
                "use": self.use_of(p.path),
                "member_use": dict(sorted(members.items())),
            })
        return {"supply": _nums(self.supply), "unassigned": _nums(res[CLUSTER].unassigned), "projects": rows}


def _num(v: float) -> float | int:
    return int(v) if float(v).is_integer() else v


def _nums(d: Mapping[str, float]) -> dict[str, float | int]:
    return {k: _num(v) for k, v in d.items()}


# --------------------------------------------------------------------------- entry points


def least_need(nmin: int, resreq) -> dict[str, float]:
    """The least a job holds when it runs (PRJ-7: the submit check, and the session's check
    before placement): {"slots": nmin, "mem_mb": MB,
    resource: amount}, its rusage taken per task (LSF's default method, as placement takes
    it), per job, or once for a per-host term (at least one host). Only a simple requirement
    with one rusage alternative says for sure; otherwise slots alone."""
    need: dict[str, float] = {SLOTS: nmin}
    if resreq is None or resreq.kind != "simple" or len(resreq.rusage) != 1:
        return need
    for group in resreq.rusage[0]:
        for term in group.terms:
            key = MEM if term.name == "mem" else term.name
            if key != MEM and term.unit == "MB":
                continue  # swp, tmp: no cap is kept on them
            amount = term.value * (nmin if (term.per or "task") == "task" else 1)
            if amount > 0:
                need[key] = need.get(key, 0) + amount
    return need


def never_fits(projects: ProjectsConfig, supply: Mapping[str, float], project: str | None, user: str | None,
               need: Mapping[str, float]) -> str | None:
    """The submit-time refusal (PRJ-7; issue 12 part 4): why a job of `project` by `user`
    needing `need` ({"slots": ntasks_min, "mem_mb": MB, resource: amount}) could never start
    under its project's caps, or None when it could. A cap it is over even on an empty
    cluster: a quota or member_quota smaller than the request, or a share of the whole
    cluster (carved from `supply`, which should be `supply_totals(hosts, usable_only=False)`:
    every host, as if all were up) smaller than it. A resource the cluster has none of yet
    is judged on quotas only (a share of it grows when a host with it joins). No project,
    or open mode: None. Text: "The job needs 64 slots and can never start in project
    /physics/hep: project /physics/hep has a quota of 32 slots"."""
    if project is None or not projects.projects:
        return None
    caps = QuotaBook(projects, supply).never(project, user, need)
    if not caps:
        return None
    needs = ", ".join(_amount(v, r) for r, v in need.items() if v > 0 and any(c.resource == r for c in caps))
    return f"The job needs {needs} and can never start in project {project}: " + \
        "; ".join(dict.fromkeys(c.never_text() for c in caps))


def report(projects: ProjectsConfig, supply: Mapping[str, float], usage: Iterable[Usage] = ()) -> dict:
    """What `GET /projects` and `xcecli projects` show (PRJ-6, PRJ-7): the shares resolved
    against `supply` (`supply_totals` of the hosts present) and the use now (`usage`, as
    the scheduler's snapshot has it). Shape (amounts: slots, MB, resource units; ints when
    whole):

        {"supply": {"slots": 100, "mem_mb": 409600, "gpu": 8},
         "unassigned": {...},       # the cluster's unassigned part (projects without a share draw on it)
         "projects": [{             # parents before children, as ProjectsConfig
             "path": "/physics/hep",
             "share": {"slots": 36, ...},   # its own resolved share ({} when it has none)
             "draws_from": None,    # no share of its own: the parent path ("/": the cluster)
                                    #   whose unassigned part it draws from; else None
             "unassigned": {...},   # its share minus its children's ({} when no child has a share)
             "quota": {"slots": 32}, "member_quota": {"slots": 8},   # as configured
             "cap": {"slots": 32, ...},     # the effective cap of the subtree: the tighter of
                                    #   its share (or pool), its quota and its ancestors' caps
             "capped": ["slots"],   # resources whose share is capped at the parent's share
             "use": {"slots": 12, "mem_mb": 2048, "gpu": 0},   # the subtree's running use
             "member_use": {"bob": {"slots": 8}},   # per member with use, the resources of
                                    #   its member_quota ({} for a project without one)
         }, ...]}
    """
    return QuotaBook(projects, supply, usage).report()

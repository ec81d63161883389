"""The compiler of `config/projects.yaml` and `config/rbac.yaml` (PRJ-1..PRJ-8, RBAC-1..RBAC-4, CFG-2).

Both files are optional. Without a project the cluster is in open mode (PRJ-4); without
rbac.yaml no role is bound. Every problem is reported at once as FILE:LINE:COL with what
would be valid; warnings are separate. The compiled forms are `ProjectsConfig` and
`RbacConfig` of xced.model.project.

projects.yaml::

    groups:                      # groups defined in config, beside the system's
      hep: [erin, frank]         #   NAME: [user, ...]
    projects:                    # a mapping from path to project, in any order
      /physics:
        description: free text
        share: 60%               # a percentage of every resource of the parent
        admins: [alice]          # users and @groups: job permissions over the subtree (RBAC-3)
      /physics/hep:
        share: {slots: 40}       # or per resource: {slots: 50%, gpu: 8, mem: 256GB}
        quota: {slots: 32}       # cap on the whole subtree's concurrent use
        member_quota: {slots: 8} # cap per member, over the subtree
        members: [bob, "@hep"]   # users, and groups written @name (quoted); never projects
    default_projects:            # a group's default project (PRJ-3), in this order
      hep: /physics/hep

rbac.yaml::

    roles:                       # NAME: [permission, ...] (RBAC-1)
      operator: [job:view, job:kill, job:requeue]
    bindings:                    # a role for users and groups over a subtree (RBAC-2)
      - {role: operator, users: [oscar], groups: [], scope: /physics}   # scope / = the cluster

Paths are `/` and names joined by `/` (at most MAX_PROJECT_DEPTH deep); every ancestor of
a project must be a project too. The compiled list holds parents before children, in
file order otherwise. Resources of share, quota and member_quota: `slots` (whole slots),
`mem` (MB, or with a unit KB/MB/GB/TB; compiled to `mem_mb`) and any consumable resource
(`gpu`, ...). A share is greater than 0; a quota or member_quota is 0 or more.

Build checks (`reference_problems`, which the daemon runs again on a compiled config,
CFG-3): parents, default_projects, xce.yaml's default_project and binding scopes name
projects; bindings name roles; roles holding `cluster:admin` or `cluster:view` are bound
at `/` only; and shares do not over-carve (PRJ-6): siblings' percentages of a resource
(a `share: N%` counts for every resource) add up to at most 100%, and where the parent's
share of a resource is absolute, the siblings' absolute amounts plus their percentages of
it add up to at most that amount. Absolute shares of top-level projects are not held to
hosts.yaml (workers join later), but exceeding its totals is a warning.

Warnings: a resource no host of hosts.yaml declares (when it declares hosts), a
`@group` that is neither in `groups:` nor a system group of this host (system groups
differ between hosts), member_quota above quota, a binding with neither users nor groups,
a role that grants nothing, a name listed twice.
"""

from __future__ import annotations

import difflib
import grp
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from xced.config.diagnostics import Diagnostic
from xced.config.loader import (
    NAME_FORM,
    NAME_RE,
    RESOURCE_FORM,
    RESOURCE_RE,
    Pos,
    _check_mapping,
    _Field,
    _got,
    _Invalid,
    _is_int,
    _is_map,
    _is_number,
    _is_seq,
    _item_pos,
    _key_pos,
    _memory,
    _node_pos,
    _one_of,
    _project_path,
    _read_yaml,
    _Source,
    _str,
    _text,
    _value_pos,
)
from xced.model.project import (
    MAX_PRINCIPAL,
    MAX_PROJECT_DEPTH,
    MEM,
    PERMISSIONS,
    SLOTS,
    USER_FORM,
    USER_PATTERN,
    Binding,
    ProjectConfig,
    ProjectsConfig,
    RbacConfig,
    ShareTerm,
)
from xced.model.units import MAX_RESOURCE, MAX_SLOTS, format_memory

__all__ = ["PROJECTS_FILE", "RBAC_FILE", "Problem", "ProjectsResult", "host_totals", "load_projects",
           "reference_problems"]

PROJECTS_FILE = "projects.yaml"
RBAC_FILE = "rbac.yaml"

USER_RE = re.compile(USER_PATTERN)
GROUP_FORM = f"{NAME_FORM}, not starting with '-'"
_PERCENT_RE = re.compile(r"\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))\s*%\s*")
#: the permissions that cover the whole cluster: a role holding one is bound at `/` only
CLUSTER_WIDE = ("cluster:admin", "cluster:view")
#: the most names a message lists before it says how many there are
_LISTED = 12
#: slack of the share sums, so that 33.3% + 33.3% + 33.4% is 100%
_EPS = 1e-9

_TOP_FIELDS = {"groups": _Field(lambda v, w: v), "projects": _Field(lambda v, w: v),
               "default_projects": _Field(lambda v, w: v)}
_PROJECT_FIELDS = {
    "description": _Field(_text),
    "share": _Field(lambda v, w: v),  # the checks below
    "quota": _Field(lambda v, w: v),
    "member_quota": _Field(lambda v, w: v),
    "members": _Field(lambda v, w: v),
    "admins": _Field(lambda v, w: v),
}
_RBAC_FIELDS = {"roles": _Field(lambda v, w: v), "bindings": _Field(lambda v, w: v)}
_BINDING_FIELDS = {
    "role": _Field(_str(NAME_RE, NAME_FORM), required=True),
    "users": _Field(lambda v, w: v),
    "groups": _Field(lambda v, w: v),
    "scope": _Field(lambda v, w: v),
}
_MAX_DESCRIPTION = 4096


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Problem:
    """One cross-reference problem of compiled projects and roles, its whole message, and
    where it is, for the loader to place: ("project", path), ("share", path, resource or
    None), ("default_projects", group), ("default_project",) (xce.yaml), ("binding", index,
    "role" | "scope"). `warning`: not a reason to refuse the config. `missing`: "project"
    or "role" when the problem is a name that is not one (so a loader that could not
    read every project or role can leave it out), else ""."""

    at: tuple
    message: str
    warning: bool = False
    missing: str = ""


@dataclass
class ProjectsResult:
    """What `load_projects` returns. `projects` / `rbac` are None when their file had an
    error; `elsewhere` holds the problems located in another file (xce.yaml's
    default_project), for the loader to place there."""

    projects: ProjectsConfig | None
    rbac: RbacConfig | None
    elsewhere: list[Problem] = field(default_factory=list)


# --------------------------------------------------------------------------- the rules


def _some(names: Iterable[str]) -> str:
    """Names for a message: all of a few, the first _LISTED of many with the count."""
    names = list(names)
    if not names:
        return "(none)"
    if len(names) <= _LISTED:
        return _one_of(names)
    return f"{_one_of(names[:_LISTED])}, ... ({len(names)} in all)"


def _close(word: str, choices: Iterable[str]) -> str:
    """' (did you mean "X"?)' for a near miss among `choices`, else ''."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def host_totals(hosts: Iterable[Mapping[str, Any]] | None) -> dict[str, float] | None:
    """What the hosts of hosts.yaml hold together, keyed as shares are: {"slots": N,
    "mem_mb": MB, RESOURCE: amount}. `hosts` are mappings with `slots`, `memory_mb` and
    `resources` (the loader's checked entries or HostConfig.model_dump()). None when there
    are none: the supply comes from workers that join."""
    hosts = list(hosts or ())
    if not hosts:
        return None
    totals: dict[str, float] = {SLOTS: 0.0, MEM: 0.0}
    for h in hosts:
        totals[SLOTS] += float(h.get("slots", 0))
        totals[MEM] += float(h.get("memory_mb", 0))
        for name, amount in (h.get("resources") or {}).items():
            totals[name] = totals.get(name, 0.0) + float(amount)
    return totals


def _resource_name(r: str) -> str:
    return "mem" if r == MEM else r


def _amount_text(r: str, v: float) -> str:
    """40 slots, 256GB of mem, 8 gpu."""
    if r == MEM:
        return f"{format_memory(round(v, 3))} of mem"
    return f"{v:g} {r}"


def reference_problems(projects: ProjectsConfig, rbac: RbacConfig, *, default_project: str | None = None,
                       totals: Mapping[str, float] | None = None) -> list[Problem]:
    """The cross-reference rules of projects and roles (PRJ-1, PRJ-3, PRJ-6, RBAC-1, RBAC-2),
    on compiled configs: every project's parent is a project listed before it, paths are
    unique and at most MAX_PROJECT_DEPTH deep; default_projects and `default_project`
    (xce.yaml; checked only once projects are defined) name projects; bindings name roles
    and scopes that are `/` or a project; a role holding cluster:admin or cluster:view is
    bound at `/` only; and shares do not over-carve (`_carving_problems`). `totals` (see
    `host_totals`) adds the warning that top-level absolute shares exceed hosts.yaml.
    Never raises."""
    problems: list[Problem] = []
    paths = projects.paths()
    known = set(paths)
    seen: set[str] = set()
    for p in projects.projects:
        if p.path in seen:
            problems.append(Problem(("project", p.path), f"project {p.path} is defined twice; paths must be unique"))
        depth = p.path.count("/")
        if depth > MAX_PROJECT_DEPTH:
            problems.append(Problem(("project", p.path), f"project {p.path} is {depth} levels deep; a project tree "
                                                         f"has at most {MAX_PROJECT_DEPTH} levels"))
        parent = p.parent
        if parent is not None and parent not in known:
            problems.append(Problem(("project", p.path),
                                    f"project {p.path}: its parent {parent} is not a project; declare {parent} "
                                    f"in {PROJECTS_FILE} too (every ancestor of a project is a project, PRJ-1)",
                                    missing="project"))
        elif parent is not None and parent not in seen:
            problems.append(Problem(("project", p.path), f"project {p.path} is listed before its parent {parent}; "
                                                         "the compiled list holds parents before children"))
        seen.add(p.path)

    def not_a_project(what: str, path: str) -> str:
        return (f"{what} {path} is not a project of {PROJECTS_FILE}{_close(path, paths)}; "
                f"projects: {_some(paths)}")

    for group, path in projects.default_projects.items():
        if path not in known:
            problems.append(Problem(("default_projects", group),
                                    not_a_project(f"default_projects: the default project of group {group},", path),
                                    missing="project"))
    if default_project is not None and paths and default_project not in known:
        problems.append(Problem(("default_project",), not_a_project("default_project", default_project),
                                missing="project"))

    roles = rbac.roles
    for i, b in enumerate(rbac.bindings):
        # named by what it binds, not by number: a binding the loader refused is not in the list
        label = f"the binding of role {b.role} at {b.scope}"
        if b.role not in roles:
            problems.append(Problem(("binding", i, "role"),
                                    f'{label}: role "{b.role}" is not a role of {RBAC_FILE}{_close(b.role, roles)}; '
                                    f"roles: {_some(roles)}", missing="role"))
        if b.scope != "/" and b.scope not in known:
            where = f"projects: {_some(paths)}" if paths else f"no project is defined in {PROJECTS_FILE} (open mode)"
            problems.append(Problem(("binding", i, "scope"),
                                    f"{label}: scope {b.scope} is not a project{_close(b.scope, paths)}; valid: / "
                                    f"(the whole cluster) or a project path; {where}", missing="project"))
        wide = [perm for perm in CLUSTER_WIDE if perm in roles.get(b.role, ())]
        if wide and b.scope != "/":
            problems.append(Problem(("binding", i, "scope"),
                                    f'{label}: role "{b.role}" holds {" and ".join(wide)}, which '
                                    f"{'cover' if len(wide) > 1 else 'covers'} the whole cluster, so it is bound at "
                                    f"scope / only, got scope {b.scope}; bind it at /, "
                                    f"or bind a role without {' and '.join(wide)} here"))
    problems.extend(_carving_problems(projects.projects, totals))
    return problems


def _carving_problems(projects: list[ProjectConfig], totals: Mapping[str, float] | None) -> list[Problem]:
    """PRJ-6: shares are carved from the parent's. For each parent (the cluster for
    top-level projects) and each resource named by its children's shares: the children's
    percentages (a `share: N%` counts for every resource) add up to at most 100%; where
    the parent's share of the resource is absolute, the children's absolute amounts plus
    their percentages of it add up to at most that amount. For top-level projects that
    second sum is held to `totals` (hosts.yaml) as a warning only. Each problem is placed
    at the share of the child that tips the sum over."""
    by_path = {p.path: p for p in projects}
    children: dict[str | None, list[ProjectConfig]] = {}
    for p in projects:
        if p.has_share:
            children.setdefault(p.parent, []).append(p)
    problems: list[Problem] = []
    for parent, kids in children.items():
        owner = by_path.get(parent) if parent is not None else None
        if parent is not None and owner is None:
            continue  # reported as a parent that is not a project
        of = f"the children of {parent}" if parent is not None else "the top-level projects"
        whose = f"{parent}'s share" if parent is not None else "the whole cluster"

        # a percentage of every resource
        total, tip = 0.0, None
        for k in kids:
            if k.share_percent is not None:
                total += k.share_percent
                if tip is None and total > 100 + _EPS:
                    tip = k
        if tip is not None:
            problems.append(Problem(("share", tip.path, None),
                                    f"shares of {of} add up to {total:g}% of every resource, more than {whose} "
                                    f"(100%)"))
            continue

        for r in dict.fromkeys(r for k in kids for r in k.share):
            def pct(k: ProjectConfig) -> float:
                if k.share_percent is not None:
                    return k.share_percent
                term = k.share.get(r)
                return term.percent if term is not None and term.percent is not None else 0.0

            total, tip = 0.0, None
            for k in kids:
                total += pct(k)
                if tip is None and total > 100 + _EPS:
                    tip = k
            if tip is not None:
                problems.append(Problem(("share", tip.path, r if r in tip.share else None),
                                        f"shares of {of} add up to {total:g}% of {_resource_name(r)}, more than "
                                        f"{whose} (100%)"))
                continue

            if owner is not None:
                term = owner.share.get(r)
                cap = term.amount if term is not None and term.amount is not None else None
            else:
                cap = totals.get(r) if totals else None
            if cap is None:
                continue  # a percentage of a supply that changes: resolved at each session
            absolute = percent = 0.0
            tip = None
            for k in kids:
                term = k.share.get(r)
                if term is not None and term.amount is not None:
                    absolute += term.amount
                else:
                    percent += pct(k)
                if tip is None and absolute > 0 and absolute + percent / 100 * cap > cap * (1 + _EPS) + _EPS:
                    tip = k
            if tip is None:
                continue
            whole = absolute + percent / 100 * cap
            parts = (f" ({_amount_text(r, absolute)}, plus {percent:g}% of {_amount_text(r, cap)})"
                     if percent else "")
            at = ("share", tip.path, r if r in tip.share else None)
            if owner is not None:
                problems.append(Problem(at, f"shares of {of} add up to {_amount_text(r, whole)}{parts}, more than "
                                            f"{whose} ({_amount_text(r, cap)})"))
            else:
                problems.append(Problem(at, f"shares of {of} add up to {_amount_text(r, whole)}{parts}, more than "
                                            f"the hosts of hosts.yaml hold ({_amount_text(r, cap)}); that much "
                                            "comes only from workers that join", warning=True))
    return problems


# --------------------------------------------------------------------------- projects.yaml


class _Checker:
    """The walk over one projects.yaml (and then rbac.yaml) document: checks, compiles
    and remembers where each thing is, so the cross-reference problems can be placed."""

    def __init__(self, src: _Source, hosts: list[dict[str, Any]] | None):
        self.src = src
        declared: set[str] = set()
        for h in hosts or ():
            declared.update(h.get("resources", {}))
        #: the consumable resources of hosts.yaml; None: no hosts to compare with
        self.declared: set[str] | None = declared if hosts else None
        self.config_groups: list[str] = []
        self.system_groups: dict[str, bool] = {}
        #: the paths declared with a valid form, in file order, and whether that is all of
        #: them (False when `projects:` is not a mapping, so which exist is not known)
        self.paths_declared: list[str] = []
        self.paths_known = True
        #: where things are: a project's key and node, its share's terms, a default_projects entry
        self.project_at: dict[str, tuple[Pos, Any]] = {}
        self.share_at: dict[str, dict[str, Pos]] = {}
        self.default_at: dict[str, Pos] = {}
        self.projects_node: Any = None

    # ---- names

    def group_known(self, group: str, pos: Pos, what: str) -> None:
        """Warn about a group that is neither in `groups:` nor a system group here."""
        if group in self.config_groups:
            return
        if group not in self.system_groups:
            try:
                grp.getgrnam(group)
                self.system_groups[group] = True
            except (KeyError, OverflowError, ValueError, OSError):
                self.system_groups[group] = False
        if not self.system_groups[group]:
            self.src.warn(pos, f"{what}: group {group} is neither in groups: of {PROJECTS_FILE}"
                               f"{_close(group, self.config_groups)} nor a system group of this host; nobody is "
                               "in it unless the daemon's host knows it")

    def group_name(self, v: Any, pos: Pos, what: str) -> str | None:
        """A group's name as `groups:` keys, default_projects keys and bindings' groups
        write it (no @); an error and None when it is not one."""
        if isinstance(v, str) and v.startswith("@") and len(v) > 1:
            self.src.error(pos, f"{what} {_got(v)}: a group's name is written without @ here (@ marks a group "
                                f'among the users of members and admins); write "{v[1:]}"')
            return None
        if not isinstance(v, str) or not NAME_RE.fullmatch(v) or v.startswith("-") or len(v) > MAX_PRINCIPAL:
            self.src.error(pos, f"{what} must be a group name ({GROUP_FORM}), got {_got(v)}")
            return None
        return str(v)

    def user_name(self, v: Any, pos: Pos, what: str) -> str | None:
        if isinstance(v, str) and v.startswith("@"):
            self.src.error(pos, f"{what} {_got(v)} is a group; list groups under groups: (without @)")
            return None
        if isinstance(v, str) and v.startswith("/"):
            self.src.error(pos, f"{what} {_got(v)} names a project; list user names here")
            return None
        if not isinstance(v, str) or not USER_RE.fullmatch(v) or len(v) > MAX_PRINCIPAL:
            self.src.error(pos, f"{what} must be a user name ({USER_FORM}), got {_got(v)}")
            return None
        return str(v)

    def name_list(self, node: Any, key: str, what: str, one: Any, example: str) -> list[str] | None:
        """`node[key]`: a list checked item by item with `one(value, pos, what)` (null is
        empty); repeated names are warnings. None after an error of the list's shape."""
        v = node[key]
        if v is None:
            return []
        if not _is_seq(v):
            self.src.error(_value_pos(node, key), f"{what} must be a list, e.g. {example}, got {_got(v)}")
            return None
        out: list[str] = []
        for i, item in enumerate(v):
            name = one(item, _item_pos(v, i), f"{what}[{i + 1}]")
            if name is None:
                continue
            if name in out:
                self.src.warn(_item_pos(v, i), f"{what}: {name} is listed twice")
                continue
            out.append(name)
        return out

    def principal(self, v: Any, pos: Pos, what: str) -> str | None:
        """A member or admin: a user name, or a group written @name; never a project (PRJ-2)."""
        if isinstance(v, str) and v.startswith("/"):
            self.src.error(pos, f"{what} {_got(v)} names a project; members and admins are users and groups "
                                f"written @name, never projects (PRJ-2): list the users or groups of {v} instead")
            return None
        if isinstance(v, str) and v.startswith("@"):
            group = v[1:]
            if not NAME_RE.fullmatch(group) or group.startswith("-") or len(v) > MAX_PRINCIPAL:
                self.src.error(pos, f"{what} must be a user name or @group, the group's name being {GROUP_FORM}, "
                                    f"got {_got(v)}")
                return None
            self.group_known(group, pos, what)
            return str(v)
        if not isinstance(v, str) or not USER_RE.fullmatch(v) or len(v) > MAX_PRINCIPAL:
            self.src.error(pos, f'{what} must be a user name ({USER_FORM}) or a group written "@name", '
                                f"got {_got(v)}")
            return None
        return str(v)

    # ---- resources

    def resource_key(self, node: Any, k: Any, what: str) -> str | None:
        """A key of share, quota, member_quota: slots, mem (-> mem_mb) or a consumable
        resource; a resource no host of hosts.yaml declares is a warning."""
        pos = _key_pos(node, k)
        if not isinstance(k, str) or not RESOURCE_RE.fullmatch(k):
            self.src.error(pos, f"{what}: a resource is slots, mem or a consumable resource of hosts.yaml "
                                f"({RESOURCE_FORM}), got {_got(k)}")
            return None
        if k == MEM:
            self.src.error(pos, f'{what}: memory is written mem, in MB or with a unit (e.g. mem: 256GB), got "{k}"')
            return None
        if k == SLOTS:
            return SLOTS
        if k == "mem":
            return MEM
        if self.declared is not None and k not in self.declared:
            declared = sorted(self.declared)
            self.src.warn(pos, f'{what}: no host of hosts.yaml declares resource "{k}"'
                               f"{_close(k, [SLOTS, 'mem', *declared])}; declared: slots, mem"
                               f"{', ' + _one_of(declared) if declared else ''} (a worker that joins may offer it)")
        return k

    @staticmethod
    def amount(r: str, v: Any, what: str, *, share: bool) -> float:
        """An absolute amount of resource `r`: whole slots, memory (MB or with a unit) or a
        number of units; greater than 0 in a share, 0 or more in a quota. Raises _Invalid."""
        low = "greater than 0" if share else "0 or more"
        if r == SLOTS:
            if not _is_int(v) or not (1 if share else 0) <= v <= MAX_SLOTS:
                also = ', or a percentage of the parent\'s like "50%"' if share else ""
                raise _Invalid(f"{what} must be a whole number of slots from {1 if share else 0} to {MAX_SLOTS}"
                               f"{also}, got {_got(v)}")
            return float(v)
        if r == MEM:
            if not share and _is_int(v) and v == 0:
                return 0.0
            return float(_memory(v, what))
        if not _is_number(v) or not math.isfinite(float(v)) or v > MAX_RESOURCE or (v <= 0 if share else v < 0):
            raise _Invalid(f"{what} must be a number {low} and at most {MAX_RESOURCE:g}, got {_got(v)}")
        return float(v)

    def percent(self, v: Any, pos: Pos, what: str) -> float | None:
        """"60%" -> 60.0: greater than 0 and at most 100; an error and None otherwise."""
        m = _PERCENT_RE.fullmatch(v) if isinstance(v, str) else None
        value = float(m.group(1)) if m else None
        if value is None or not 0 < value <= 100:
            self.src.error(pos, f'{what} must be a percentage of the parent\'s greater than 0% and at most 100% '
                                f'(e.g. "60%"), got {_got(v)}')
            return None
        return value

    def share(self, pnode: Any, label: str) -> tuple[float | None, dict[str, ShareTerm], dict[str, Pos]]:
        """(share_percent, per-resource terms, where each term is) of a project."""
        v = pnode["share"]
        pos = _value_pos(pnode, "share")
        what = f"{label}: share"
        if v is None:
            return None, {}, {}
        if isinstance(v, str):
            if "%" in v:
                return self.percent(v, pos, what), {}, {}
            self.src.error(pos, f'{what} must be a percentage of every resource of the parent (e.g. "60%") or a '
                                f'mapping of resource to amount or percentage (e.g. {{slots: 40, gpu: 50%, mem: '
                                f'256GB}}), got {_got(v)}')
            return None, {}, {}
        if _is_number(v):
            self.src.error(pos, f'{what} {_got(v)} is a bare number: a percentage of the parent\'s is written with '
                                f'% (share: {_got(v)}%), and an absolute share names its resource: share: '
                                f'{{slots: {_got(v)}}}')
            return None, {}, {}
        if not _is_map(v):
            self.src.error(pos, f'{what} must be a percentage (e.g. "60%") or a mapping of resource to amount or '
                                f"percentage (e.g. {{slots: 40, gpu: 50%}}), got {_got(v)}")
            return None, {}, {}
        terms: dict[str, ShareTerm] = {}
        where: dict[str, Pos] = {}
        for k in v:
            r = self.resource_key(v, k, what)
            if r is None:
                continue
            item, ipos, iwhat = v[k], _value_pos(v, k), f"{what}.{k}"
            if isinstance(item, str) and "%" in item:
                p = self.percent(item, ipos, iwhat)
                if p is not None:
                    terms[r], where[r] = ShareTerm(percent=p), ipos
                continue
            try:
                terms[r], where[r] = ShareTerm(amount=self.amount(r, item, iwhat, share=True)), ipos
            except _Invalid as e:
                self.src.error(ipos, str(e))
        return None, terms, where

    def quota(self, pnode: Any, key: str, label: str) -> dict[str, float]:
        """quota / member_quota: {resource: amount >= 0}, absolute only."""
        v = pnode[key]
        what = f"{label}: {key}"
        if v is None:
            return {}
        if not _is_map(v):
            self.src.error(_value_pos(pnode, key), f"{what} must be a mapping of resource to amount (e.g. {{slots: "
                                                   f"32, mem: 256GB, gpu: 4}}), got {_got(v)}")
            return {}
        out: dict[str, float] = {}
        for k in v:
            r = self.resource_key(v, k, what)
            if r is None:
                continue
            item, ipos = v[k], _value_pos(v, k)
            if isinstance(item, str) and "%" in item:
                self.src.error(ipos, f"{what}.{k} is a percentage, got {_got(item)}; a {key} is an absolute cap "
                                     f"on concurrent use (e.g. {k}: 32): percentages belong in share")
                continue
            try:
                out[r] = self.amount(r, item, f"{what}.{k}", share=False)
            except _Invalid as e:
                self.src.error(ipos, str(e))
        return out

    def where(self, at: tuple) -> Pos:
        """The position of a Problem's `at` in projects.yaml."""
        kind = at[0]
        if kind == "default_projects":
            return self.default_at.get(at[1], (0, 0))
        kpos, pnode = self.project_at.get(at[1], ((0, 0), None))
        if kind == "share":
            terms = self.share_at.get(at[1], {})
            if at[2] is not None and at[2] in terms:
                return terms[at[2]]
            if _is_map(pnode) and "share" in pnode:
                return _value_pos(pnode, "share")
        return kpos

    # ---- the file

    def groups(self, doc: Any) -> dict[str, list[str]]:
        node = doc["groups"]
        if node is None:
            return {}
        if not _is_map(node):
            self.src.error(_value_pos(doc, "groups"), f"groups must be a mapping of group name to its users (e.g. "
                                                      f"hep: [erin, frank]), got {_got(node)}")
            return {}
        out: dict[str, list[str]] = {}
        for k in node:
            name = self.group_name(k, _key_pos(node, k), "a group of groups:")
            if name is None:
                continue
            users = self.name_list(node, k, f"group {name}", self.user_name, "[erin, frank]")
            out[name] = users or []
        return out

    def project(self, path: str, pnode: Any) -> dict[str, Any] | None:
        """One project's keyword arguments of ProjectConfig (those that are valid)."""
        label = f"project {path}"
        values = _check_mapping(self.src, pnode, _value_pos(self.projects_node, path), _PROJECT_FIELDS,
                                where=label, prefix=f"{label}: ", null_ok=True)
        if values is None:
            return None
        if pnode is None:
            return {"path": path}
        kw: dict[str, Any] = {"path": path}
        description = values.get("description")
        if description is not None:
            if len(description) > _MAX_DESCRIPTION:
                self.src.error(_value_pos(pnode, "description"), f"{label}: description is {len(description)} "
                                                                 f"characters; at most {_MAX_DESCRIPTION}")
            else:
                kw["description"] = description
        if "share" in pnode:
            kw["share_percent"], kw["share"], self.share_at[path] = self.share(pnode, label)
        for key in ("quota", "member_quota"):
            if key in pnode:
                kw[key] = self.quota(pnode, key, label)
        for key in ("members", "admins"):
            if key in pnode:
                kw[key] = self.name_list(pnode, key, f"{label}: {key}", self.principal, '[bob, "@hep"]') or []
        for r, cap in kw.get("member_quota", {}).items():
            if r in kw.get("quota", {}) and cap > kw["quota"][r]:
                self.src.warn(_value_pos(pnode["member_quota"], "mem" if r == MEM else r),
                              f"{label}: member_quota of {_resource_name(r)} ({_amount_text(r, cap)}) is larger "
                              f"than its quota ({_amount_text(r, kw['quota'][r])}): no member can use more than "
                              "the quota")
        return kw

    def projects(self, doc: Any) -> list[ProjectConfig]:
        node = self.projects_node = doc["projects"]
        if node is None:
            return []
        if not _is_map(node):
            self.paths_known = False
            hint = " (a list is not accepted: write `/path:` keys)" if _is_seq(node) else ""
            self.src.error(_value_pos(doc, "projects"), f"projects must be a mapping of project path to project"
                                                        f"{hint}, e.g. {{/physics: {{share: 60%}}}}, got {_got(node)}")
            return []
        compiled: list[ProjectConfig] = []
        for k in node:
            kpos = _key_pos(node, k)
            try:
                path = _project_path(k, "a project path")
            except _Invalid as e:
                self.src.error(kpos, str(e))
                continue
            self.paths_declared.append(path)
            self.project_at[path] = (kpos, node[path])
            kw = self.project(path, node[path])
            if kw is None:
                continue
            try:
                compiled.append(ProjectConfig(**kw))
            except ValidationError as e:  # the checks above should make this unreachable
                from xced.config.applications import _pydantic_message

                self.src.error(kpos, f"project {path}: {_pydantic_message(e)}")
        return _parents_first(compiled)

    def default_projects(self, doc: Any) -> dict[str, str]:
        node = doc["default_projects"]
        if node is None:
            return {}
        if not _is_map(node):
            self.src.error(_value_pos(doc, "default_projects"), f"default_projects must be a mapping of group name "
                                                                f"to project path (e.g. hep: /physics/hep), got "
                                                                f"{_got(node)}")
            return {}
        out: dict[str, str] = {}
        for k in node:
            group = self.group_name(k, _key_pos(node, k), "a group of default_projects")
            if group is None:
                continue
            self.group_known(group, _key_pos(node, k), "default_projects")
            try:
                out[group] = _project_path(node[k], f"default_projects.{group}")
            except _Invalid as e:
                self.src.error(_value_pos(node, k), str(e))
                continue
            self.default_at[group] = _value_pos(node, k)
        return out


def _parents_first(projects: list[ProjectConfig]) -> list[ProjectConfig]:
    """File order, except that a child declared before its parent comes right after it
    (siblings keep their order). Children of a parent that is not declared go last."""
    waiting: dict[str, list[ProjectConfig]] = {}
    out: list[ProjectConfig] = []
    placed: set[str] = set()

    def place(p: ProjectConfig) -> None:
        stack = [p]
        while stack:
            q = stack.pop()
            out.append(q)
            placed.add(q.path)
            stack.extend(reversed(waiting.pop(q.path, [])))

    for p in projects:
        if p.parent is None or p.parent in placed:
            place(p)
        else:
            waiting.setdefault(p.parent, []).append(p)
    for kids in waiting.values():
        out.extend(kids)
    return out


# --------------------------------------------------------------------------- rbac.yaml


def _check_rbac(c: _Checker, doc: Any) -> tuple[RbacConfig, list[tuple[Any, Pos]], bool]:
    """rbac.yaml -> RbacConfig of its valid parts; each compiled binding's node and
    position, for placing its problems; and whether every role is known (False when
    `roles:` is not a mapping). Problems of the file's own shapes are reported."""
    src = c.src
    if doc is None:
        return RbacConfig(), [], True
    values = _check_mapping(src, doc, _node_pos(doc) or (0, 0), _RBAC_FIELDS, where=RBAC_FILE, prefix="")
    if values is None:
        return RbacConfig(), [], False
    roles: dict[str, list[str]] = {}
    node = doc.get("roles")
    roles_known = node is None or _is_map(node)
    if _is_map(node):
        for name in node:
            npos = _key_pos(node, name)
            if not isinstance(name, str) or not NAME_RE.fullmatch(name):
                src.error(npos, f"a role name must consist of {NAME_FORM}, got {_got(name)}")
                continue
            perms = node[name]
            label = f'role "{name}"'
            if perms is None or perms == []:
                src.warn(_value_pos(node, name), f"{label} grants no permission; give it a list of permissions: "
                                                 f"{_one_of(list(PERMISSIONS))}")
                roles[name] = []
                continue
            if not _is_seq(perms):
                src.error(_value_pos(node, name), f"{label} must be a list of permissions (e.g. [job:view, job:kill]),"
                                                  f" got {_got(perms)}")
                roles[name] = []
                continue
            held: list[str] = []
            for i, perm in enumerate(perms):
                ipos = _item_pos(perms, i)
                if not isinstance(perm, str) or perm not in PERMISSIONS:
                    hint = _close(perm, PERMISSIONS) if isinstance(perm, str) else ""
                    src.error(ipos, f"{label}: unknown permission {_got(perm)}{hint}; permissions: "
                                    f"{_one_of(list(PERMISSIONS))}")
                elif perm in held:
                    src.warn(ipos, f"{label}: {perm} is listed twice")
                else:
                    held.append(perm)
            roles[name] = held
    elif node is not None:
        src.error(_value_pos(doc, "roles"), f"roles must be a mapping of role name to a list of permissions (e.g. "
                                            f"operator: [job:view, job:kill]), got {_got(node)}")

    bindings: list[Binding] = []
    placed: list[tuple[Any, Pos]] = []
    node = doc.get("bindings")
    if _is_seq(node):
        for i, item in enumerate(node):
            ipos = _item_pos(node, i)
            label = f"binding #{i + 1}"
            bv = _check_mapping(src, item, ipos, _BINDING_FIELDS, where=label, prefix=f"{label}: ")
            if bv is None or "role" not in bv:
                continue
            kw: dict[str, Any] = {"role": bv["role"]}
            shapes_ok = True
            for key, one, example in (("users", c.user_name, "[oscar]"), ("groups", _binding_group(c), "[hep]")):
                if key in item:
                    names = c.name_list(item, key, f"{label}: {key}", one, example)
                    shapes_ok = shapes_ok and names is not None
                    kw[key] = names or []
            if shapes_ok and not kw.get("users") and not kw.get("groups"):
                src.warn(_node_pos(item) or ipos, f'{label}: role "{kw["role"]}" is bound to nobody; give users '
                                                  "or groups")
            if "scope" in item and item["scope"] is not None:
                scope = item["scope"]
                if scope != "/":
                    try:
                        scope = _project_path(scope, f"{label}: scope")
                    except _Invalid as e:
                        src.error(_value_pos(item, "scope"), f"{e}; or / for the whole cluster")
                        continue
                kw["scope"] = scope
            try:
                bindings.append(Binding(**kw))
            except ValidationError as e:  # the checks above should make this unreachable
                from xced.config.applications import _pydantic_message

                src.error(ipos, f"{label}: {_pydantic_message(e)}")
                continue
            placed.append((item, ipos))
    elif node is not None:
        src.error(_value_pos(doc, "bindings"), f"bindings must be a list of {{role, users, groups, scope}}, e.g. "
                                               f"[{{role: operator, users: [oscar], scope: /physics}}], got "
                                               f"{_got(node)}")
    try:
        return RbacConfig(roles=roles, bindings=bindings), placed, roles_known
    except ValidationError as e:  # unreachable after the checks above
        from xced.config.applications import _pydantic_message

        src.error(_node_pos(doc) or (0, 0), _pydantic_message(e))
        return RbacConfig(), [], False


def _binding_group(c: _Checker):
    def one(v: Any, pos: Pos, what: str) -> str | None:
        name = c.group_name(v, pos, what)
        if name is not None:
            c.group_known(name, pos, what)
        return name

    return one


# --------------------------------------------------------------------------- entry point


def load_projects(config_dir: Path | str, errors: list[Diagnostic], warnings: list[Diagnostic], *,
                  hosts: list[dict[str, Any]] | None = None, default_project: str | None = None) -> ProjectsResult:
    """Compile the optional `projects.yaml` and `rbac.yaml` of `config_dir`, appending
    diagnostics to `errors` / `warnings` (CFG-2; never raises for bad input). A missing
    file compiles to the empty config (open mode, no roles). `hosts` are hosts.yaml's
    entries as the loader checked them (slots, memory_mb, resources), for the warnings
    about resources no host declares and about shares over hosts.yaml's totals; None
    skips those. `default_project` is xce.yaml's: once projects are defined it must name
    one; that problem comes back in `elsewhere`, for the loader to place in xce.yaml."""
    config_dir = Path(config_dir)
    src = _Source(config_dir / PROJECTS_FILE, errors, warnings)
    c = _Checker(src, hosts)
    groups: dict[str, list[str]] = {}
    projects: list[ProjectConfig] = []
    defaults: dict[str, str] = {}
    if (config_dir / PROJECTS_FILE).exists():
        loaded, doc = _read_yaml(src)
        values = None
        if loaded and doc is not None:
            values = _check_mapping(src, doc, _node_pos(doc) or (0, 0), _TOP_FIELDS, where=PROJECTS_FILE, prefix="")
        c.paths_known = loaded and (doc is None or values is not None)
        if values is not None:
            if "groups" in doc:
                groups = c.groups(doc)
                c.config_groups = list(groups)
            if "projects" in doc:
                projects = c.projects(doc)
            if "default_projects" in doc:
                defaults = c.default_projects(doc)

    rsrc = _Source(config_dir / RBAC_FILE, errors, warnings)
    rc = _Checker(rsrc, hosts)  # the same names, reported into rbac.yaml
    rc.config_groups, rc.system_groups = c.config_groups, c.system_groups
    rbac, placed, roles_known = RbacConfig(), [], True
    if (config_dir / RBAC_FILE).exists():
        loaded, doc = _read_yaml(rsrc)
        rbac, placed, roles_known = _check_rbac(rc, doc) if loaded else (RbacConfig(), [], False)

    # The cross-references, on what compiled; a project with errors still counts as
    # declared (with no share), so nothing is reported twice.
    have = {p.path: p for p in projects}
    view = ProjectsConfig(groups={}, default_projects=defaults, projects=_parents_first(
        [have.get(path) or ProjectConfig(path=path) for path in c.paths_declared]))
    elsewhere: list[Problem] = []
    for p in reference_problems(view, rbac, default_project=default_project, totals=host_totals(hosts)):
        if (p.missing == "project" and not c.paths_known) or (p.missing == "role" and not roles_known):
            continue  # which projects (roles) there are is not known: the file's error says why
        kind = p.at[0]
        if kind == "default_project":
            elsewhere.append(p)
        elif kind == "binding":
            item, ipos = placed[p.at[1]]
            _report(rsrc, p, _value_pos(item, p.at[2]) if p.at[2] in item else ipos)
        else:
            _report(src, p, c.where(p.at))
    compiled: ProjectsConfig | None = None
    try:
        compiled = ProjectsConfig(groups=groups, projects=projects, default_projects=defaults)
    except ValidationError as e:  # unreachable after the checks above
        from xced.config.applications import _pydantic_message

        src.error("file", _pydantic_message(e))
    return ProjectsResult(projects=None if src.failed else compiled, rbac=None if rsrc.failed else rbac,
                          elsewhere=elsewhere)


def _report(src: _Source, p: Problem, pos: Pos) -> None:
    (src.warn if p.warning else src.error)(pos, p.message)

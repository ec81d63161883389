"""Permissions (RBAC-1..RBAC-4, PRJ-2..PRJ-4, PRJ-8, SUBMIT-1, D-6, D-7): the only place a
permission is decided.

`Policy(config)` is compiled once per config in force; `Policy.authorize(caller,
permission, scope)` is the one call, raising PermissionDenied, and `Policy.grants` the same
test as a value (the basis, or None). Every API route declares what it needs through it
(xced.server.auth.requires). The rules:

- every user holds `queue:submit` and `cluster:view` (anyone may list job summaries: ID,
  user, queue, project, state, times, command, as LSF's bjobs and Slurm's squeue show them);
- a job's owner holds every job permission on that job (`job:view`, `job:kill`,
  `job:modify`, `job:requeue`), as in LSF and Slurm;
- `project:submit` comes from membership of that very project (users, and groups written
  `@name`: system groups plus those of projects.yaml; no inheritance from ancestors, PRJ-2),
  or from a role bound at a scope that covers the project (RBAC-2);
- roles are bound at project scopes and cover the subtree; scope `/` covers the cluster;
- project admins hold every job permission and `project:view` over their subtree, never
  `project:submit`: they submit as members, like everyone else (RBAC-3);
- cluster admins (named in xce.yaml, or holding a role with `cluster:admin` at `/`) hold
  everything; root is not implicitly one (D-6) and gets nothing it is not granted;
- open mode (no project defined, PRJ-4): submits are not checked (basis `open`).

A job's environment, its output and its hook logs need `job:view` over its project (D-7):
its owner, project admins above it, holders of a role with `job:view` there, cluster admins.
"""

from __future__ import annotations

import grp
import re
import os
import pwd
import time
from dataclasses import dataclass

from xced.model.project import (JOB_PERMISSIONS, MAX_PROJECT_PATH, OPEN_DEFAULT_PROJECT, PERMISSIONS, PROJECT_PATH_FORM,
                                PROJECT_PATH_PATTERN, ancestors, within)

#: RBAC-1: what every user holds, everywhere
EVERYONE = frozenset({"queue:submit", "cluster:view"})
_PATH = re.compile(PROJECT_PATH_PATTERN)
#: seconds a user's system groups are remembered (LSF refreshes its user groups likewise)
GROUP_CACHE_S = 60.0
#: the name a cluster admin's basis gets when it submits outside its memberships
ADMIN_BASIS = "role:cluster-admin@/"


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: a user name, the uid/gid from SO_PEERCRED (None over TCP or when
    asserted), whether the name was asserted in test mode (D-6), and whether that user is a
    cluster admin (named in xce.yaml, or holding `cluster:admin` at `/`)."""

    user: str
    uid: int | None
    gid: int | None
    asserted: bool
    is_admin: bool


def system_groups(user: str, gid: int | None) -> tuple[str, ...]:
    """The user's system groups by name, the primary group first (the gid from SO_PEERCRED,
    else the passwd entry's), then the others in the order the system lists them. A user
    the system does not know (an asserted test user) has none."""
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        pw = None
    primary = gid if gid is not None else (pw.pw_gid if pw is not None else None)
    gids: list[int] = []
    if pw is not None:
        try:
            gids = os.getgrouplist(user, primary if primary is not None else pw.pw_gid)
        except OSError:
            gids = []
    if primary is not None:
        gids = [primary] + [g for g in gids if g != primary]
    out: list[str] = []
    for g in gids:
        try:
            name = grp.getgrgid(g).gr_name
        except KeyError:
            continue
        if name not in out:
            out.append(name)
    return tuple(out)


class Policy:
    """The permission rules of one config (module docstring). Build one per config in force;
    it keeps users' system groups for GROUP_CACHE_S seconds."""

    def __init__(self, config) -> None:
        self.config = config
        self.projects = config.projects
        self.open_mode = self.projects.open_mode
        self._by_path = {p.path: p for p in self.projects.projects}
        self._config_groups: dict[str, set[str]] = {}
        for g, users in self.projects.groups.items():
            for u in users:
                self._config_groups.setdefault(u, set()).add(g)
        self._roles = {name: frozenset(perms) for name, perms in config.rbac.roles.items()}
        self._group_cache: dict[tuple[str, int | None], tuple[float, tuple[str, ...]]] = {}
        self._admins = frozenset(config.settings.admins)

    # ------------------------------------------------------------------ who is who
    def groups_of(self, caller: Caller) -> tuple[str, ...]:
        """The caller's groups, primary first: its system groups (none for an asserted user
        the system does not know), then the groups of projects.yaml that list it, in file order."""
        key = (caller.user, caller.gid)
        now = time.monotonic()
        hit = self._group_cache.get(key)
        if hit is not None and now - hit[0] < GROUP_CACHE_S:
            sys_groups = hit[1]
        else:
            sys_groups = system_groups(caller.user, None if caller.asserted else caller.gid)
            self._group_cache[key] = (now, sys_groups)
        mine = self._config_groups.get(caller.user, set())
        extra = [g for g in self.projects.groups if g in mine and g not in sys_groups]
        return sys_groups + tuple(extra)

    def _primary_group(self, caller: Caller) -> str | None:
        """The caller's primary group: the first of its system groups (the SO_PEERCRED gid, else
        the passwd entry's); None for a user the system does not know (config groups have no order
        of primacy: `default_projects` decides among them)."""
        self.groups_of(caller)  # fills the cache
        hit = self._group_cache.get((caller.user, caller.gid))
        return hit[1][0] if hit is not None and hit[1] else None

    def is_admin(self, user: str) -> bool:
        """A cluster admin: named in xce.yaml's admins, or bound to a role holding
        `cluster:admin` at scope `/` (a user binding; a group binding is resolved per caller)."""
        if user in self._admins:
            return True
        return any(b.scope == "/" and user in b.users and "cluster:admin" in self._roles.get(b.role, ())
                   for b in self.config.rbac.bindings)

    def caller(self, user: str, uid: int | None, gid: int | None, asserted: bool) -> Caller:
        """The Caller of a request, with whether it is a cluster admin by this config."""
        c = Caller(user, uid, gid, asserted, False)
        admin = self.is_admin(user) or self._admin_by_group(c)
        return Caller(user, uid, gid, asserted, admin)

    def _admin_by_group(self, caller: Caller) -> bool:
        bindings = [b for b in self.config.rbac.bindings
                    if b.scope == "/" and b.groups and "cluster:admin" in self._roles.get(b.role, ())]
        if not bindings:
            return False
        groups = set(self.groups_of(caller))
        return any(groups & set(b.groups) for b in bindings)

    def _names(self, principals: list[str], caller: Caller, groups: set[str] | None) -> tuple[bool, set[str] | None]:
        """Whether `caller` is among `principals` (users and @groups); the groups looked up, if any.
        A principal written `@name` is a group only: a user whose name starts with `@` is never it."""
        if caller.user in principals and not caller.user.startswith("@"):
            return True, groups
        wanted = {p[1:] for p in principals if p.startswith("@")}
        if not wanted:
            return False, groups
        if groups is None:
            groups = set(self.groups_of(caller))
        return bool(wanted & groups), groups

    def is_member(self, caller: Caller, path: str) -> bool:
        """PRJ-2: the caller is a member of that very project (by name or by group)."""
        p = self._by_path.get(path)
        return p is not None and self._names(p.members, caller, None)[0]

    def member_projects(self, caller: Caller) -> list[str]:
        """The projects the caller may submit to as a member, in file order."""
        groups: set[str] | None = None
        out = []
        for p in self.projects.projects:
            ok, groups = self._names(p.members, caller, groups)
            if ok:
                out.append(p.path)
        return out

    # ------------------------------------------------------------------ permissions
    def grants(self, caller: Caller, permission: str, scope: str | None) -> str | None:
        """The basis on which `caller` holds `permission` over project `scope` (None: a thing
        with no project, or the cluster), or None when it does not hold it. Bases: "admin"
        (cluster admin), "everyone" (queue:submit, cluster:view), "member" (project:submit on
        that project), "project-admin@/path", "role:NAME@/scope". Job ownership is the
        caller's own business: see `may_job`."""
        if permission not in PERMISSIONS:
            raise ValueError(f"unknown permission {permission!r}; permissions: {', '.join(PERMISSIONS)}")
        if caller.is_admin:
            return "admin"
        if permission in EVERYONE:
            return "everyone"
        if permission == "cluster:admin":
            return None
        groups: set[str] | None = None
        if permission == "project:submit" and scope is not None:
            ok, groups = self._names(self._by_path[scope].members if scope in self._by_path else [], caller, groups)
            if ok:
                return "member"
        if scope is not None and (permission in JOB_PERMISSIONS or permission == "project:view"):
            for path in ancestors(scope):  # RBAC-3: project admins over the subtree
                p = self._by_path.get(path)
                if p is not None and p.admins:
                    ok, groups = self._names(p.admins, caller, groups)
                    if ok:
                        return f"project-admin@{path}"
        for b in self.config.rbac.bindings:  # RBAC-2: a role bound at a scope covers the subtree
            if permission not in self._roles.get(b.role, ()) or not within(scope, b.scope):
                continue
            if caller.user in b.users:
                return f"role:{b.role}@{b.scope}"
            if b.groups:
                if groups is None:
                    groups = set(self.groups_of(caller))
                if groups & set(b.groups):
                    return f"role:{b.role}@{b.scope}"
        return None

    def authorize(self, caller: Caller, permission: str, scope: str | None = None, what: str | None = None) -> str:
        """RBAC-1, the one call every route's permission goes through (xced.server.auth.requires):
        the basis on which `caller` holds `permission` over project `scope` (None: the
        cluster), as `grants` gives it.

        Raises PermissionDenied, one line naming the caller, what it may not do (`what`: "apply
        a config"), the permission, and who holds it by this config (`who_holds`): for
        `cluster:admin` "user X is not a cluster admin; only the cluster admins may ...", as
        LSF's badmin and bkill of another user's job answer to anyone but the LSF
        administrators. Raises ValueError for a permission RBAC-1 does not list (a bug)."""
        basis = self.grants(caller, permission, scope)
        if basis is not None:
            return basis
        from xced.api.errors import PermissionDenied

        if permission == "cluster:admin":
            raise PermissionDenied(f"user {caller.user} is not a cluster admin; only the cluster admins may "
                                   f"{what or 'do this'}: {self._cluster_admins()}")
        where = f" over project {scope}" if scope else ""
        doing = f", so may not {what}" if what else ""
        raise PermissionDenied(f"user {caller.user} does not hold {permission}{where}{doing}; only these do: "
                               f"{self.who_holds(permission, scope)}")

    def may_job(self, caller: Caller, permission: str, owner: str, project: str | None) -> bool:
        """A job permission (`job:view`, `job:kill`, `job:modify`, `job:requeue`) on a job of
        `owner` in `project` (None: a job with no project): its owner always, else `grants`
        over the job's project (project admins above it, roles bound at or above it, cluster
        admins; RBAC-3, D-7). In LSF, bkill/bstop/bresume/brequeue of another user's job
        need the LSF administrator or the queue/user-group administrator likewise."""
        if permission not in JOB_PERMISSIONS:
            raise ValueError(f"{permission!r} is not a job permission; job permissions: {', '.join(JOB_PERMISSIONS)}")
        return caller.user == owner or self.grants(caller, permission, project) is not None

    def authorize_job(self, caller: Caller, permission: str, owner: str, project: str | None, what: str,
                      doing: str | None = None) -> None:
        """`may_job`, or PermissionDenied naming the job (`what`: "job 12"), its owner and
        project, what the caller may not do (`doing`, else the permission's own verb: "kill
        it") and who may, by name (`who_holds`): "job 12 belongs to frank in project
        /physics/hep; user nora may not kill it (job:kill over /physics/hep); only these may:
        its owner; ..."."""
        if not self.may_job(caller, permission, owner, project):
            from xced.api.errors import PermissionDenied

            where = f" in project {project}" if project else ""
            over = f" over {project}" if project else ""
            raise PermissionDenied(f"{what} belongs to {owner}{where}; user {caller.user} may not "
                                   f"{doing or JOB_VERBS[permission]} ({permission}{over}); only these may: "
                                   f"{self.who_holds(permission, project, owner=owner)}")

    # ------------------------------------------------------------------ who may
    def who_holds(self, permission: str, scope: str | None, owner: str | None = None) -> str:
        """Who holds `permission` over project `scope` by this config, by name, for a refusal
        ("its owner (frank); the admins of /physics/hep or a project above it: alice (/physics);
        holders of a role with job:kill there: oscar (operator@/physics); the cluster admins:
        admin"). Groups are written @name; long lists are cut after MAX_NAMED names."""
        parts = []
        if owner is not None:
            parts.append(f"its owner ({owner})")
        if permission == "project:submit" and scope is not None:
            p = self._by_path.get(scope)
            parts.append(f"the members of {scope}: {_listed(p.members if p else [])}")
        if scope is not None and (permission in JOB_PERMISSIONS or permission == "project:view"):
            admins = [f"{a} ({path})" for path in ancestors(scope) if (p := self._by_path.get(path)) is not None
                      for a in p.admins]
            parts.append(f"the admins of {scope} or a project above it: {_listed(admins)}")
        holders = [f"{who} ({b.role}@{b.scope})" for b in self.config.rbac.bindings
                   if permission in self._roles.get(b.role, ()) and within(scope, b.scope)
                   for who in [*b.users, *(f"@{g}" for g in b.groups)]]
        there = f"bound at {scope} or above" if scope else "bound at /"
        parts.append(f"holders of a role with {permission} {there} (rbac.yaml): {_listed(holders)}")
        parts.append(f"the cluster admins: {self._cluster_admins()}")
        return "; ".join(parts)

    def _cluster_admins(self) -> str:
        """The cluster admins by name: xce.yaml's admins, then the users and @groups of roles
        with `cluster:admin` bound at `/`."""
        names = list(dict.fromkeys(self.config.settings.admins))
        for b in self.config.rbac.bindings:
            if b.scope == "/" and "cluster:admin" in self._roles.get(b.role, ()):
                names += [n for n in [*b.users, *(f"@{g}" for g in b.groups)] if n not in names]
        return (f"{_listed(names)} (admins in xce.yaml, or a role with cluster:admin bound at / in "
                f"rbac.yaml; root is not one unless named)")

    # ------------------------------------------------------------------ submits
    def submit_project(self, caller: Caller, requested: str | None) -> tuple[str | None, str]:
        """SUBMIT-1, PRJ-2..PRJ-4: the project a submit goes to and the basis it is let in on.

        Open mode: `requested` as given, else xce.yaml's default_project, else
        OPEN_DEFAULT_PROJECT (LSF's `default`), basis "open". Else the
        project is `requested`, or the caller's default (`default_project`) and the caller
        must hold `project:submit` on it: basis "member", "role:NAME@/scope", or for a cluster
        admin outside its memberships ADMIN_BASIS. Raises InvalidRequest for a path that is
        not a project, PermissionDenied with the reason and the projects the caller may use."""
        from xced.api.errors import InvalidRequest, PermissionDenied

        check_path(requested)
        if self.open_mode:
            return requested or self.config.settings.default_project or OPEN_DEFAULT_PROJECT, "open"
        path = requested if requested is not None else self.default_project(caller)
        if path is None:
            raise PermissionDenied(f"no project given (-P) and user {caller.user} has no default project; "
                                   f"{self._may_use(caller)}")
        if path not in self._by_path:
            raise InvalidRequest(f"-P {path}: no such project; projects: {_some(list(self._by_path))} "
                                 f"(xcecli projects shows the tree)", field="project")
        basis = self.grants(caller, "project:submit", path)
        if basis is None:
            how = "" if requested is not None else " (its default project)"
            raise PermissionDenied(f"user {caller.user} is not a member of project {path}{how}; "
                                   f"{self._may_use(caller)}")
        if basis == "admin":
            basis = "member" if self.is_member(caller, path) else ADMIN_BASIS
        return path, basis

    def default_project(self, caller: Caller) -> str | None:
        """PRJ-3: the default project of the caller's primary group, else of its other groups
        in the order `default_projects` lists them, else xce.yaml's `default_project`."""
        defaults = self.projects.default_projects
        if defaults:
            groups = self.groups_of(caller)
            primary = self._primary_group(caller)
            if primary is not None and primary in defaults:
                return defaults[primary]
            mine = set(groups)
            for g, path in defaults.items():
                if g in mine:
                    return path
        return self.config.settings.default_project

    def _may_use(self, caller: Caller) -> str:
        """The projects the caller may submit to, as the end of a refusal."""
        mine = [p.path for p in self.projects.projects if self.grants(caller, "project:submit", p.path)]
        if not mine:
            return "you may submit to no project: ask a cluster admin to add you to one (projects.yaml)"
        return f"projects you may use: {_some(mine)} (submit with -P PATH)"

    def still_allowed(self, user: str, project: str | None, basis: str) -> str | None:
        """PRJ-5, at a config change: why a pending job of `user` in `project`, let in on
        `basis`, may no longer run (the project was removed, the user is no longer a member
        or no longer holds the role), or None. Jobs let in `direct` or `open` in open mode are
        not checked; an `open` job under a config with projects is checked like a submit."""
        if basis == "direct" or self.open_mode:
            return None
        if project is None or project not in self._by_path:
            if not project:
                return "projects are defined now and the job has none"
            if basis == "open":
                return f"project {project} is not a project of projects.yaml (the job was submitted in open mode)"
            return f"project {project} removed"
        caller = self.caller(user, None, None, False)
        if self.grants(caller, "project:submit", project) is None:
            if basis.startswith("role:"):
                return f"user {user} no longer holds project:submit on {project} (it was let in as {basis})"
            return f"user {user} is no longer a member of project {project}"
        return None

    # ------------------------------------------------------------------ visibility
    def visible_projects(self, caller: Caller) -> list[str]:
        """PRJ-8: the projects the caller belongs to, plus the subtrees where it holds
        `project:view`; all of them for cluster admins. In file order."""
        if caller.is_admin:
            return list(self._by_path)
        mine = set(self.member_projects(caller))
        return [p for p in self._by_path if p in mine or self.grants(caller, "project:view", p) is not None]


#: the most names a refusal lists of each kind of holder (who_holds)
MAX_NAMED = 8
#: what each job permission lets one do to a job, as a refusal says it
JOB_VERBS = {"job:view": "see its environment, output and hook logs", "job:kill": "kill it",
             "job:modify": "stop or resume it", "job:requeue": "requeue it"}


def _listed(names: list[str]) -> str:
    """The names joined with commas, the first MAX_NAMED of them then "and N more"; "none"
    for no name."""
    if not names:
        return "none"
    head = ", ".join(names[:MAX_NAMED])
    return head if len(names) <= MAX_NAMED else f"{head} and {len(names) - MAX_NAMED} more"


def check_path(path: str | None) -> None:
    """A project path as a request gives it (`-P`, GET /jobs?project=): None, or PROJECT_PATH_FORM
    in at most MAX_PROJECT_PATH characters (PRJ-1). Raises InvalidRequest naming what is valid."""
    if path is None:
        return
    from xced.api.errors import InvalidRequest

    if len(path) > MAX_PROJECT_PATH:
        raise InvalidRequest(f"-P: the project path has {len(path)} characters, more than the {MAX_PROJECT_PATH} a "
                             f"project path may have", field="project")
    if not _PATH.fullmatch(path):
        raise InvalidRequest(f"-P {path!r}: a project is named by its path, {PROJECT_PATH_FORM}; a name may not "
                             f"start with '.' or '-'", field="project")


def _some(names: list[str], most: int = 20) -> str:
    """At most `most` names, then how many there are in all (a refusal stays one short line)."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, ... ({len(names)} in all)"


def require_admin(caller: Caller, what: str, hint: str = "") -> None:
    """`cluster:admin` (RBAC-1) for a caller a Policy made (`Policy.caller`: admins named in
    xce.yaml, or a role with cluster:admin bound at `/`; root is not implicitly one, D-6),
    where no Policy is at hand (the controller's config swap). Raises PermissionDenied saying
    who may `what` ("apply a config"), and `hint`. Routes use `Policy.authorize`."""
    if not caller.is_admin:
        from xced.api.errors import PermissionDenied

        raise PermissionDenied(f"user {caller.user} is not a cluster admin; only the cluster admins (admins in "
                               f"xce.yaml, or a role with cluster:admin bound at / in rbac.yaml) may {what}{hint}")

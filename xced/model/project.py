"""Projects, roles and bindings as the compiled config holds them (PRJ-1..PRJ-8, RBAC-1..RBAC-4).

`config/projects.yaml` compiles to `ProjectsConfig`, `config/rbac.yaml` to `RbacConfig`
(xced.config.projects does it, with file:line:col for every problem); both sit on
`ClusterConfig`. Pure data, no I/O. Resources are keyed as the API shows them: `slots`
(integer slots), `mem_mb` (MB) and any consumable resource of hosts.yaml (`gpu`, ...).

A project is named by its path (`/physics/hep`, PRJ-1): the path is its identity. A share
(PRJ-6) is carved from the parent's (the cluster's, for a top-level project): either a
percentage of every resource (`share: 60%` -> `share_percent=60`) or, per resource, a
percentage or an absolute amount (`share: {slots: 50%, gpu: 8}`). `quota` caps the whole
subtree's concurrent use and `member_quota` each member's use over the subtree (PRJ-7).
Members are user names and groups written `@name` (system groups, plus `groups:` of
projects.yaml), never projects (PRJ-2).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xced.model.units import MAX_RESOURCE, NAME_PATTERN

#: a project path: `/` then one or more names of letters, digits, '_', '.' and '-', joined by `/`
PROJECT_PATH_PATTERN = r"^(/[A-Za-z0-9_][A-Za-z0-9_.-]*)+$"
PROJECT_PATH_FORM = "'/' followed by names of letters, digits, '_', '.' and '-' joined by '/' (e.g. /physics/hep)"
#: the deepest a project tree goes, and the longest path
MAX_PROJECT_DEPTH = 16
MAX_PROJECT_PATH = 255
#: the project of a job submitted in open mode (PRJ-4) without -P when xce.yaml names no
#: default_project: LSF's project `default`
OPEN_DEFAULT_PROJECT = "/default"
#: the key of memory in shares and quotas (MB) and the key of slots
MEM = "mem_mb"
SLOTS = "slots"

#: RBAC-1: every permission there is
PERMISSIONS = ("queue:submit", "project:submit", "project:view", "job:view", "job:kill", "job:modify",
               "job:requeue", "cluster:view", "cluster:admin")
Permission = Literal["queue:submit", "project:submit", "project:view", "job:view", "job:kill", "job:modify",
                     "job:requeue", "cluster:view", "cluster:admin"]
#: RBAC-3: what a project admin holds over the subtree
JOB_PERMISSIONS = ("job:view", "job:kill", "job:modify", "job:requeue")

#: a user name (as in a member list, a group of projects.yaml, a binding): a letter, digit,
#: '_' or '.' first, then also '-' and '$' (Samba's machine accounts end in '$'), at most 256
USER_PATTERN = r"^[A-Za-z0-9_.][A-Za-z0-9_.$-]*$"
USER_FORM = "letters, digits, '_', '.', '-' and '$', not starting with '-' or '$'"
MAX_PRINCIPAL = 256

ProjectPath = Annotated[str, Field(pattern=PROJECT_PATH_PATTERN, max_length=MAX_PROJECT_PATH)]
User = Annotated[str, Field(pattern=USER_PATTERN, max_length=MAX_PRINCIPAL)]
#: a member or admin: a user name, or `@group`
Principal = Annotated[str, Field(pattern=r"^@?" + USER_PATTERN[1:], max_length=MAX_PRINCIPAL)]
ResourceKey = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)]
Amount = Annotated[float, Field(ge=0, le=MAX_RESOURCE)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShareTerm(_Strict):
    """One resource's share (PRJ-6): `percent` of the parent's (0 < p <= 100) or an absolute
    `amount` (slots, MB for mem_mb, units of the resource). Exactly one is set."""

    percent: float | None = Field(None, gt=0, le=100)
    amount: Amount | None = None

    @model_validator(mode="after")
    def _one(self) -> "ShareTerm":
        if (self.percent is None) == (self.amount is None):
            raise ValueError("a share term is either a percent or an amount, exactly one")
        return self


class ProjectConfig(_Strict):
    """One project of projects.yaml. `share_percent`: `share: 60%`, a percentage of every
    resource of the parent; `share`: per resource; at most one of the two is given, and a
    project with neither draws from its parent's unassigned part (PRJ-6)."""

    path: ProjectPath
    description: str = Field("", max_length=4096)
    share_percent: float | None = Field(None, gt=0, le=100)
    share: dict[ResourceKey, ShareTerm] = Field(default_factory=dict)
    quota: dict[ResourceKey, Amount] = Field(default_factory=dict)
    member_quota: dict[ResourceKey, Amount] = Field(default_factory=dict)
    members: list[Principal] = Field(default_factory=list)
    admins: list[Principal] = Field(default_factory=list)

    @property
    def parent(self) -> str | None:
        """The parent's path, or None for a top-level project."""
        head = self.path.rsplit("/", 1)[0]
        return head or None

    @property
    def has_share(self) -> bool:
        return self.share_percent is not None or bool(self.share)


class ProjectsConfig(_Strict):
    """projects.yaml compiled. `projects` are parents before children (file order
    otherwise); `groups` are groups defined in config beside the system's; `default_projects`
    maps a group to its default project, in file order (PRJ-3). No project at all is open
    mode (PRJ-4)."""

    groups: dict[Annotated[str, Field(pattern=NAME_PATTERN)], list[User]] = Field(default_factory=dict)
    projects: list[ProjectConfig] = Field(default_factory=list)
    default_projects: dict[Annotated[str, Field(pattern=NAME_PATTERN)], ProjectPath] = Field(default_factory=dict)

    @property
    def open_mode(self) -> bool:
        """PRJ-4: until any project is defined, submits are not checked."""
        return not self.projects

    def get(self, path: str) -> ProjectConfig | None:
        for p in self.projects:
            if p.path == path:
                return p
        return None

    def paths(self) -> list[str]:
        return [p.path for p in self.projects]


class Binding(_Strict):
    """A role bound to users and groups at a project scope (RBAC-2): it covers the subtree;
    scope `/` is the whole cluster."""

    role: Annotated[str, Field(pattern=NAME_PATTERN)]
    users: list[User] = Field(default_factory=list)
    groups: list[Annotated[str, Field(pattern=NAME_PATTERN)]] = Field(default_factory=list)
    scope: Annotated[str, Field(pattern=r"^/$|" + PROJECT_PATH_PATTERN[1:], max_length=MAX_PROJECT_PATH)] = "/"


class RbacConfig(_Strict):
    """rbac.yaml compiled (RBAC-4): roles by name, each a list of permissions (RBAC-1), and
    the bindings of roles to users and groups at scopes."""

    roles: dict[Annotated[str, Field(pattern=NAME_PATTERN)], list[Permission]] = Field(default_factory=dict)
    bindings: list[Binding] = Field(default_factory=list)


def ancestors(path: str) -> list[str]:
    """`/a/b/c` -> ["/a/b/c", "/a/b", "/a"]: the path and every ancestor, nearest first."""
    out = []
    while path:
        out.append(path)
        path = path.rsplit("/", 1)[0]
    return out


def within(path: str | None, scope: str) -> bool:
    """Whether project `path` lies in the subtree of `scope` (`/` holds every path, and a job
    with no project too)."""
    if scope == "/":
        return True
    return path is not None and (path == scope or path.startswith(scope + "/"))

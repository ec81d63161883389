"""Application profiles (PROF-1..PROF-10): what every job of an application must have.

A `Profile` is compiled from `config/applications.yaml` by
`xced.config.applications` and stored in `ClusterConfig.applications`. Units:
memory in MB, time in seconds. Models are frozen and refuse unknown fields.

- `Profile.content_hash()`: sha256 (hex) of the canonical JSON of the profile
  without `description` (DISPATCH-1).
- `BUILTIN_PROFILES` / `builtin_profiles()`: the built-in `default` profile, which
  requires nothing (PROF-1); a file profile named `default` replaces it.
- `export_name(name)`: the documented conversion of a param or annotation name to
  the tail of its environment variable (PROF-6, PROF-7): upper-case, and every
  character that is not A-Z or 0-9 becomes `_` (`team.owner` -> `TEAM_OWNER`);
  the variable is `XCE_APP_PARAM_<NAME>` / `XCE_APP_ANN_<NAME>`.
- Size limits of annotations: at most `MAX_ANNOTATIONS` per profile, each value
  at most `MAX_ANNOTATION_BYTES` bytes of UTF-8 (the same limit holds for param
  defaults, `MAX_PARAM_BYTES`).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from xced.resreq import ResReqError, parse_select, render_expr

__all__ = [
    "ANNOTATION_ENV_PREFIX",
    "BUILTIN_PROFILES",
    "DEFAULT_HOOK_TIMEOUT_S",
    "MAX_ANNOTATIONS",
    "MAX_ANNOTATION_BYTES",
    "MAX_PARAM_BYTES",
    "PARAM_ENV_PREFIX",
    "Hook",
    "OrderKey",
    "Profile",
    "ProfileLimits",
    "Replicas",
    "RusageEntry",
    "ServicePort",
    "ServiceProbe",
    "ServiceSpec",
    "SpanSpec",
    "builtin_profiles",
    "export_name",
]

DEFAULT_HOOK_TIMEOUT_S = 300.0
MAX_ANNOTATIONS = 64
MAX_ANNOTATION_BYTES = 4096
MAX_PARAM_BYTES = 4096
PARAM_ENV_PREFIX = "XCE_APP_PARAM_"
ANNOTATION_ENV_PREFIX = "XCE_APP_ANN_"

_EXPORT_RE = re.compile(r"[^A-Z0-9]")


def export_name(name: str) -> str:
    """`team.owner` -> `TEAM_OWNER`: upper-case, non-alphanumerics to `_`."""
    return _EXPORT_RE.sub("_", name.upper())


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Hook(_Strict):
    """A pre/post hook (JOB-6): a shell command and its timeout (> 0, default 300 s)."""

    command: str = Field(min_length=1)
    timeout_s: float = Field(default=DEFAULT_HOOK_TIMEOUT_S, gt=0)


class RusageEntry(_Strict):
    """One rusage entry of a profile (PROF-4). `value` is in MB for memory
    resources (`unit` "MB"), else in the resource's own unit (`unit` None).
    `per`: task (default), host or job. `default: true`: the value is the
    profile's per-resource default that a job's own term replaces whole, in either
    direction (PROF-4, MERGE-3). Without it the entry binds like every profile value
    (PROF-3): every job reserves it and a job term that differs is refused."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    value: float = Field(ge=0)
    unit: str | None = None
    per: Literal["task", "host", "job"] = "task"
    default: bool = False


class SpanSpec(_Strict):
    """`span[...]`: exactly one of ptile (>= 1), hosts (1 or -1), block (>= 1)."""

    ptile: int | None = Field(default=None, ge=1)
    hosts: Literal[1, -1] | None = None
    block: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _exactly_one(self) -> SpanSpec:
        given = [k for k in ("ptile", "hosts", "block") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"span needs exactly one of ptile, hosts, block; got {given or 'none'}")
        return self


class OrderKey(_Strict):
    name: str = Field(min_length=1)
    desc: bool = False


class ProfileLimits(_Strict):
    run_limit_s: int | None = Field(default=None, gt=0)
    memory_limit_mb: int | None = Field(default=None, gt=0)
    task_min: int | None = Field(default=None, ge=1)
    task_max: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _range(self) -> ProfileLimits:
        if self.task_min is not None and self.task_max is not None and self.task_min > self.task_max:
            raise ValueError(f"task_min {self.task_min} is more than task_max {self.task_max}")
        return self


class ServiceProbe(_Strict):
    """A health probe of a service (stored; services do not run yet)."""

    name: Literal["liveness", "readiness", "startup"]
    type: Literal["exec", "http", "tcp"]
    command: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    path: str | None = None
    interval_s: float = Field(default=10.0, gt=0)
    timeout_s: float = Field(default=5.0, gt=0)
    failure_threshold: int = Field(default=3, ge=1)

    @model_validator(mode="after")
    def _shape(self) -> ServiceProbe:
        if self.type == "exec" and not self.command:
            raise ValueError("an exec probe needs command")
        if self.type in ("http", "tcp") and self.port is None:
            raise ValueError(f"a {self.type} probe needs port")
        return self


class ServicePort(_Strict):
    name: str = Field(min_length=1)
    #: 0 = any free port chosen at start.
    port: int = Field(ge=0, le=65535)
    protocol: Literal["tcp", "udp"] = "tcp"


class Replicas(_Strict):
    min: int = Field(default=1, ge=0)
    max: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _range(self) -> Replicas:
        if self.min > self.max:
            raise ValueError(f"replicas min {self.min} is more than max {self.max}")
        return self


class ServiceSpec(_Strict):
    probes: list[ServiceProbe] = Field(default_factory=list)
    restart_policy: Literal["always", "on-failure", "never"] = "on-failure"
    ports: list[ServicePort] = Field(default_factory=list)
    replicas: Replicas = Replicas()


class Profile(_Strict):
    """One application profile (PROF-3). Every value binds: a job may add to it,
    never change or remove it (the merge, MERGE-*, is elsewhere)."""

    name: str = Field(min_length=1)
    description: str = ""
    kind: Literal["batch", "service"] = "batch"
    mode: Literal["direct"] = "direct"
    launch_type: str = "direct"
    #: the profile env, kept apart from the job's env (PROF-10).
    env: dict[str, str] = Field(default_factory=dict)
    pre_job_exec: Hook | None = None
    post_job_exec: Hook | None = None
    pre_host_exec: Hook | None = None
    post_host_exec: Hook | None = None
    job_starter: str | None = None
    #: canonical select expression text (render_expr), or None.
    select: str | None = None
    rusage: list[RusageEntry] = Field(default_factory=list)
    span: SpanSpec | None = None
    same: list[str] = Field(default_factory=list)
    order: list[OrderKey] = Field(default_factory=list)
    limits: ProfileLimits = ProfileLimits()
    #: declared params and their default values (PROF-6).
    params: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    on_host_failure: Literal["requeue", "exit"] = "requeue"
    #: JOB-7: False forbids the job's own -E/-Ep.
    allow_job_pre_post_exec: bool = True
    service: ServiceSpec | None = None

    @field_validator("select")
    @classmethod
    def _canonical_select(cls, v: str | None) -> str | None:
        if v is None:
            return None
        try:
            return render_expr(parse_select(v, capped=True))  # an admin writes it: the request caps (D-8)
        except ResReqError as e:
            raise ValueError(f"select: {e}") from None

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        if self.kind == "service" and self.service is None:
            raise ValueError("a service profile needs a service section")
        if self.kind == "batch" and self.service is not None:
            raise ValueError("a service section needs kind: service")
        names = [r.name for r in self.rusage]
        if len(set(names)) != len(names):
            raise ValueError("a resource appears twice in rusage")
        if len(self.annotations) > MAX_ANNOTATIONS:
            raise ValueError(f"at most {MAX_ANNOTATIONS} annotations")
        for what, mapping, limit in (("annotation", self.annotations, MAX_ANNOTATION_BYTES),
                                     ("param", self.params, MAX_PARAM_BYTES)):
            seen: dict[str, str] = {}
            for k, v in mapping.items():
                if len(v.encode()) > limit:
                    raise ValueError(f"{what} {k}: value longer than {limit} bytes")
                conv = export_name(k)
                if conv in seen:
                    raise ValueError(f"{what} names {seen[conv]} and {k} both convert to {conv}")
                seen[conv] = k
        return self

    def content_hash(self) -> str:
        """sha256 over canonical JSON of the profile, description excluded (DISPATCH-1)."""
        data = self.model_dump(mode="json", exclude={"description"})
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()


BUILTIN_PROFILES: dict[str, Profile] = {
    "default": Profile(name="default", description="built-in profile: requires nothing (PROF-1)"),
}


def builtin_profiles() -> dict[str, Profile]:
    """A fresh dict of the built-in profiles (only `default`)."""
    return dict(BUILTIN_PROFILES)

"""The compiled cluster configuration (CFG-1, CFG-2): what `xceadmin build` produces
from the YAML files of a TopDir and what the daemon runs on.

Units: memory in MB, time in seconds, slots as integers. The bounds of every value are
here (from xced.model.units, which the YAML loader's messages use too), so a compiled
config handed to the daemon (`PUT /xce/v1/config`, CFG-3) is held to the same bounds as
`xceadmin build` holds the YAML to.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from xced.model.profile import Profile, builtin_profiles
from xced.model.keys import KeysConfig
from xced.model.project import PROJECT_PATH_PATTERN, ProjectsConfig, RbacConfig
from xced.model.units import (DEFAULT_CLEAN_PERIOD_S, DEFAULT_HOST_LOST_GRACE_S, DEFAULT_PEND_REASON_UPDATE_S, MAX_CLEAN_PERIOD_S, DEFAULT_MAX_ARRAY_SIZE, MAX_ARRAY_SIZE_SETTING, MAX_DISPATCH_FAILURES, MAX_INTERVAL_S, MAX_MEMORY_MB, MAX_RESOURCE, MAX_RUN_LIMIT_S,
                              MAX_SCHED_DELAY_S, MAX_SLOTS, MAX_STORE_BUSY_TIMEOUT_S, NAME_PATTERN, RESOURCE_PATTERN, HOST_PATTERN)

Mode = Literal["production", "test"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ListenSettings(_Strict):
    """TCP listener for peers (D-2). `port` 0 picks a free port and writes it to
    `<TopDir>/run/xced.port`; None means no TCP listener. `tls`: whether the port serves
    TLS pinned to the controller's key (KEY-6) and peers answer a key challenge (KEY-3);
    None: yes in production (which refuses false), no in test mode, where `true` tests
    the keyed flow with the test clock."""

    host: str = "127.0.0.1"
    port: int | None = Field(None, ge=0, le=65535)
    tls: bool | None = None

    def keyed(self, mode: str) -> bool:
        """Whether peers authenticate with keys over TLS in `mode` (see `tls`)."""
        return self.tls if self.tls is not None else mode != "test"


class ClusterSettings(_Strict):
    """Contents of `config/xce.yaml`."""

    cluster_name: str = Field("xce", pattern=NAME_PATTERN)
    mode: Mode = "production"
    admins: list[str] = Field(default_factory=list)
    default_application: str | None = None
    #: the cluster default project (PRJ-3), after a group's default of projects.yaml
    default_project: str | None = Field(None, pattern=PROJECT_PATH_PATTERN)
    default_queue: str | None = Field(None, pattern=NAME_PATTERN)
    listen: ListenSettings = ListenSettings()
    #: seconds between INT, TERM and KILL of `xcecli kill` (LSF JOB_TERMINATE_INTERVAL).
    kill_interval_s: float = Field(10.0, gt=0, le=MAX_INTERVAL_S)
    #: seconds between SIGTERM and SIGKILL when a run limit is reached (JOB-2).
    limit_grace_s: float = Field(10.0, gt=0, le=MAX_INTERVAL_S)
    #: coalescing delay of scheduler sessions, seconds (D-4; at most 0.010).
    sched_delay_s: float = Field(0.005, ge=0, le=MAX_SCHED_DELAY_S)
    #: seconds a request that writes waits for a store another process has locked, then
    #: answers 503 store_busy (D-8)
    store_busy_timeout_s: float = Field(5.0, gt=0, le=MAX_STORE_BUSY_TIMEOUT_S)
    #: failed starts or declined dispatches in a row before an element gets a system hold
    #: (DISPATCH-2)
    max_dispatch_failures: int = Field(5, ge=1, le=MAX_DISPATCH_FAILURES)
    #: seconds a worker waits for its supervisor launcher to answer before it replaces it and
    #: the job is dispatched again (D-8)
    launch_timeout_s: float = Field(10.0, gt=0, le=MAX_INTERVAL_S)
    #: the most elements a job array may have, and the largest `%limit` (JOB-4, D-8); as
    #: LSF's MAX_JOB_ARRAY_SIZE (lsb.params), default 1000
    max_array_size: int = Field(DEFAULT_MAX_ARRAY_SIZE, ge=1, le=MAX_ARRAY_SIZE_SETTING)
    presets_dir: str | None = None
    #: seconds a finished job stays in the daemon's memory (and in `xcecli jobs` without -a)
    #: after its last element ended; then it is read from the store (LSF CLEAN_PERIOD,
    #: Slurm MinJobAge). 0 purges at the next sweep.
    clean_period_s: float = Field(DEFAULT_CLEAN_PERIOD_S, ge=0, le=MAX_CLEAN_PERIOD_S)
    #: seconds a host may be without its worker before its jobs are requeued or ended EXIT
    #: as their profiles' on_host_failure says (SCHED-4); longer than a worker restart plus
    #: its rejoin. On the daemon's clock (the test clock moves it).
    host_lost_grace_s: float = Field(DEFAULT_HOST_LOST_GRACE_S, ge=1, le=MAX_INTERVAL_S)
    #: seconds after a session that dispatched a job behind one it pended before another
    #: session decides the pending jobs again, unless one has by then (SCHED-3; LSF's
    #: PEND_REASON_UPDATE_INTERVAL): how long a reason may count what a later job took
    pend_reason_update_s: float = Field(DEFAULT_PEND_REASON_UPDATE_S, ge=1, le=MAX_INTERVAL_S)


class QueueConfig(_Strict):
    """One queue of `config/queues.yaml` (MERGE-2: priority and per-job ceilings)."""

    name: str = Field(pattern=NAME_PATTERN)
    priority: int = Field(30, ge=-(2**31), le=2**31 - 1)
    description: str = ""
    max_tasks: int | None = Field(None, ge=1, le=MAX_SLOTS)
    max_run_limit_s: int | None = Field(None, ge=1, le=MAX_RUN_LIMIT_S)
    max_memory_mb: int | None = Field(None, ge=1, le=MAX_MEMORY_MB)
    host_limit: int | None = Field(None, ge=1, le=MAX_SLOTS)
    backfill: bool = False


class HostConfig(_Strict):
    """One host of `config/hosts.yaml` (RES-2)."""

    name: str = Field(pattern="^" + HOST_PATTERN + "$")
    slots: int = Field(ge=1, le=MAX_SLOTS)
    memory_mb: int = Field(ge=1, le=MAX_MEMORY_MB)
    resources: dict[Annotated[str, Field(pattern=RESOURCE_PATTERN)], Annotated[float, Field(ge=0, le=MAX_RESOURCE)]] = \
        Field(default_factory=dict)
    attributes: dict[str, str] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)


class ClusterConfig(_Strict):
    """The whole compiled configuration. `queues` are in file order; the default
    queue is `settings.default_queue`, else the first queue."""

    settings: ClusterSettings
    queues: list[QueueConfig]
    hosts: list[HostConfig]
    #: application profiles by name (PROF-1): the built-in `default` plus those of
    #: applications.yaml (a file profile named `default` replaces the built-in one).
    applications: dict[str, Profile] = Field(default_factory=builtin_profiles)
    #: projects.yaml (PRJ-1..PRJ-8); none: open mode (PRJ-4)
    projects: ProjectsConfig = Field(default_factory=ProjectsConfig)
    #: rbac.yaml (RBAC-1..RBAC-4)
    rbac: RbacConfig = Field(default_factory=RbacConfig)
    #: keys.yaml: the trusted host keys (KEY-2), written by `xceadmin keys`
    keys: KeysConfig = Field(default_factory=KeysConfig)

    def content_hash(self) -> str:
        """sha256 over canonical JSON of the whole config (CFG-2), hex, 64 chars."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def queue(self, name: str) -> QueueConfig | None:
        for q in self.queues:
            if q.name == name:
                return q
        return None

    @property
    def default_queue(self) -> str:
        return self.settings.default_queue or self.queues[0].name

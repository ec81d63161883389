"""What the scheduler sees (D-4): a plain, immutable-by-convention snapshot of hosts,
queues and pending work, built by the controller (or the simulator) for one session.

Units: memory MB, slots integers, times epoch seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class HostSnap:
    """A host's supply now: total and free slots and memory (RES-2)."""

    name: str
    slots: int
    slots_free: int
    mem_mb: int
    mem_free_mb: int
    status: str = "ok"


@dataclass(slots=True)
class QueueSnap:
    """A queue's policy (MERGE-2): priority (higher first), position in queues.yaml for ties."""

    name: str
    priority: int
    position: int


@dataclass(slots=True)
class JobSnap:
    """One pending element. `mem_mb` is reserved on every host the element uses (None: none).
    `array_limit` is the `%N` of its array (None: no cap)."""

    job_id: int
    index: int
    queue: str
    submit_time: float
    ntasks_min: int
    ntasks_max: int
    mem_mb: int | None = None
    array_limit: int | None = None
    held: bool = False


@dataclass(slots=True)
class Snapshot:
    """Input of `schedule()`. `array_running` counts running elements per array job ID."""

    hosts: list[HostSnap]
    queues: list[QueueSnap]
    pending: list[JobSnap]
    array_running: dict[int, int] = field(default_factory=dict)

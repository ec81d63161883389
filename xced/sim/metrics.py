"""Scheduling metrics of a finished (simulated or replayed) workload (SPEC SIM-1).

Pure and standalone: the standard library only.

Definitions, as in tests/data/README.md's reference result (Gaussier, Glesser, Reis and
Trystram, SC'15, pyss) and SPEC SIM-1 (wait time, bounded slowdown, utilization,
makespan).  For a job with submit time ``s``, start ``b``, end ``e`` on ``p`` processors:

- wait = ``b - s`` (seconds);
- duration = ``e - b`` (seconds);
- flow time = wait + duration = ``e - s`` (seconds);
- bounded slowdown = ``max(1, flow / max(TAU, duration))`` with ``TAU = 10`` seconds
  (dimensionless);

and for the workload, with ``first_submit`` the earliest submit and ``last_end`` the
latest end:

- makespan = ``last_end - first_submit`` (seconds);
- utilisation = ``sum(p * duration) / (machine_procs * makespan)`` (fraction of the
  machine's processor-seconds over the makespan, 0..1).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "TAU_S",
    "JobOutcome",
    "Metrics",
    "bounded_slowdown",
    "compute_metrics",
    "queue_length_series",
    "utilisation_series",
]

#: The bounded-slowdown threshold, seconds: jobs shorter than this count as this long.
TAU_S = 10.0


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """One finished job: times in seconds on one clock (a trace's or the daemon's),
    ``submit <= start <= end``; ``procs`` processors held from ``start`` to ``end``."""

    job_id: int
    submit: float
    start: float
    end: float
    procs: int

    @property
    def wait_s(self) -> float:
        """Seconds from submit to start."""
        return self.start - self.submit

    @property
    def duration_s(self) -> float:
        """Seconds from start to end."""
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Metrics:
    """The workload's metrics (definitions in the module docstring; times in seconds).

    ``jobs``: finished jobs counted; ``machine_procs``: processors of the machine;
    ``avg_wait_s``, ``median_wait_s``, ``max_wait_s``: wait times; ``avg_flow_s``: mean
    flow time (wait + duration); ``avg_bounded_slowdown``: mean bounded slowdown
    (tau = 10 s, always >= 1); ``utilisation``: 0..1; ``makespan_s``: last end minus
    first submit.
    """

    jobs: int
    machine_procs: int
    avg_wait_s: float
    median_wait_s: float
    max_wait_s: float
    avg_flow_s: float
    avg_bounded_slowdown: float
    utilisation: float
    makespan_s: float

    def to_json(self) -> dict[str, Any]:
        """A plain dict (ints and floats only), ready for ``json.dumps``."""
        return asdict(self)


def bounded_slowdown(wait_s: float, duration_s: float, tau_s: float = TAU_S) -> float:
    """``max(1, (wait + duration) / max(tau, duration))``, dimensionless (tau = 10 s;
    tests/data/README.md's reference definition)."""
    return max(1.0, (wait_s + duration_s) / max(tau_s, duration_s))


def _check(o: JobOutcome) -> None:
    if not (o.submit <= o.start <= o.end):
        raise ValueError(
            f"job {o.job_id}: times must satisfy submit <= start <= end, "
            f"got submit={o.submit}, start={o.start}, end={o.end}"
        )
    if o.procs <= 0:
        raise ValueError(f"job {o.job_id}: procs must be a positive number of processors, got {o.procs}")


def compute_metrics(records: Iterable[JobOutcome], machine_procs: int) -> Metrics:
    """Metrics of finished jobs on a machine of ``machine_procs`` processors (SPEC SIM-1).

    ``records``: one :class:`JobOutcome` per finished job, any order.  Definitions and
    units in the module docstring.  A zero makespan (every job submitted, started and
    ended at one instant) gives utilisation 0.

    Raises ``ValueError`` when there are no records, ``machine_procs`` is not positive,
    or a record has ``procs <= 0`` or times out of order (``submit <= start <= end``).
    """
    if machine_procs <= 0:
        raise ValueError(f"machine_procs must be a positive number of processors, got {machine_procs}")
    outcomes = list(records)
    if not outcomes:
        raise ValueError("no finished jobs: metrics need at least one job outcome")
    waits: list[float] = []
    total_flow = 0.0
    total_bsld = 0.0
    area = 0.0
    first_submit = outcomes[0].submit
    last_end = outcomes[0].end
    for o in outcomes:
        _check(o)
        wait = o.start - o.submit
        duration = o.end - o.start
        waits.append(wait)
        total_flow += wait + duration
        total_bsld += max(1.0, (wait + duration) / max(TAU_S, duration))
        area += o.procs * duration
        first_submit = min(first_submit, o.submit)
        last_end = max(last_end, o.end)
    n = len(outcomes)
    makespan = last_end - first_submit
    return Metrics(
        jobs=n,
        machine_procs=machine_procs,
        avg_wait_s=sum(waits) / n,
        median_wait_s=float(statistics.median(waits)),
        max_wait_s=float(max(waits)),
        avg_flow_s=total_flow / n,
        avg_bounded_slowdown=total_bsld / n,
        utilisation=area / (machine_procs * makespan) if makespan > 0 else 0.0,
        makespan_s=float(makespan),
    )


def _steps(events: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sum (time, delta) events into step points: after all events at ``t`` the running
    total is ``value``; points where the total does not change are left out."""
    events.sort(key=lambda e: e[0])
    points: list[tuple[float, float]] = []
    total: float = 0
    i, n = 0, len(events)
    while i < n:
        t = events[i][0]
        while i < n and events[i][0] == t:
            total += events[i][1]
            i += 1
        if not points or points[-1][1] != total:
            points.append((t, total))
    return points


def queue_length_series(outcomes: Sequence[JobOutcome]) -> list[tuple[float, int]]:
    """Jobs waiting (submitted, not yet started) over time, as step points.

    Returns ``[(t, n), ...]`` sorted by ``t`` (seconds): from ``t`` until the next
    point, ``n`` jobs wait; before the first point none do.  A job that starts at its
    submit time never counts.  O(n log n) in the number of jobs.
    """
    events: list[tuple[float, float]] = []
    for o in outcomes:
        events.append((o.submit, 1))
        events.append((o.start, -1))
    return [(t, int(v)) for t, v in _steps(events)]


def utilisation_series(outcomes: Sequence[JobOutcome], machine_procs: int) -> list[tuple[float, float]]:
    """Fraction of the machine's processors busy over time, as step points.

    Returns ``[(t, u), ...]`` sorted by ``t`` (seconds): from ``t`` until the next point,
    ``u`` (0..1 when the jobs fit the machine) of ``machine_procs`` processors run jobs;
    before the first point, 0.  O(n log n).  Raises ``ValueError`` if ``machine_procs``
    is not positive.
    """
    if machine_procs <= 0:
        raise ValueError(f"machine_procs must be a positive number of processors, got {machine_procs}")
    events: list[tuple[float, float]] = []
    for o in outcomes:
        if o.end > o.start:
            events.append((o.start, o.procs))
            events.append((o.end, -o.procs))
    return [(t, busy / machine_procs) for t, busy in _steps(events)]

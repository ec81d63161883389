"""What a requirement's rusage reserves, term by term, with its method and the job's total
(RES-2, issue 15): the one place `show`, `--dry-run` and the merge's rusage-over-limit check
(MERGE-2) read a reservation's method and total from.

The method (LSF 10.1.0.9's ``/task``, ``/host``, ``/job`` suffix) of a term that names none
is **per task**: XCE's rule (SPEC PROF-4, README "Resource requirements"), as LSF with
``RESOURCE_RESERVE_PER_TASK=y`` in lsb.params; LSF's own cluster default is per host.
The scheduler's placement (xced.scheduler.placement._demand) takes terms the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ._ast import ResReq, Span
from ._parser import format_number

#: the method of a term that names none (XCE's rule; LSF's RESOURCE_RESERVE_PER_TASK=y)
DEFAULT_PER: Literal["task"] = "task"


@dataclass(frozen=True, slots=True)
class Reserved:
    """One rusage term with its method and what the job holds of it in all.

    ``value`` is per ``per`` (MB when ``unit == "MB"``, else a count); ``count`` is the
    number of tasks (``per == "task"``) or hosts (``"host"``) it is multiplied by, 1 for
    ``"job"``; ``total = value * count``. ``exact`` is False when ``count`` is only the
    least it can be: a pending job with a task range (its ``-n MIN``), or a per-host term of
    a job whose number of hosts is not known before it is placed (at least one)."""

    name: str
    value: int | float
    unit: Literal["MB"] | None
    per: Literal["task", "host", "job"]
    count: int
    total: int | float
    exact: bool

    def to_json(self) -> dict:
        """``{"name", "value", "unit", "per", "count", "total", "exact"}`` (JobOut.reserve)."""
        return {"name": self.name, "value": self.value, "unit": self.unit, "per": self.per,
                "count": self.count, "total": self.total, "exact": self.exact}


def _num(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


def _hosts(span: Span | None, nmin: int, nmax: int, nhosts: int | None) -> tuple[int, bool]:
    """(how many hosts the job spans, whether that is exact) for a per-host term."""
    if nhosts is not None:
        return nhosts, True
    if nmax == 1 or (span is not None and span.hosts == 1):
        return 1, True
    if span is not None and span.ptile:
        return math.ceil(nmin / span.ptile), nmin == nmax
    return 1, False


def _simple(req: ResReq, alt: int, nmin: int, nmax: int, nhosts: int | None) -> list[Reserved]:
    out: list[Reserved] = []
    if not req.rusage:
        return out
    for term, _duration, _decay in req.rusage_terms(alt):
        if not term.value:
            continue  # MERGE-3: 0 means none
        per = term.per or DEFAULT_PER
        if per == "task":
            count, exact = nmin, nmin == nmax or nhosts is not None
        elif per == "host":
            count, exact = _hosts(req.span, nmin, nmax, nhosts)
        else:
            count, exact = 1, True
        unit = "MB" if term.unit == "MB" else None
        out.append(Reserved(term.name, term.value, unit, per, count, _num(term.value * count), exact))
    return out


def reserve_ways(req: ResReq | None, ntasks_min: int, ntasks_max: int | None = None,
                 nhosts: int | None = None) -> list[list[Reserved]]:
    """Every way `req` may reserve, in preference order: one list of terms per rusage ``||``
    alternative of a simple request (``[[]]`` when it reserves nothing); a compound request
    is one way, each part's terms (of its first alternative) taken with that part's count; an
    alternative request gives its parts' ways in order.

    `ntasks_min`/`ntasks_max` (>= 1; max None = min) is the job's task range, `nhosts` the
    number of hosts it was placed on when it is known (then `ntasks_min` is the tasks it
    runs with and every total is exact). Pure; raises nothing."""
    nmax = ntasks_max if ntasks_max is not None else ntasks_min
    if req is None:
        return [[]]
    if req.kind == "compound":
        terms: list[Reserved] = []
        for p in req.parts:
            n = p.count or 1
            terms += _simple(p.resreq, 0, n, n, None)
        return [terms]
    if req.kind == "alternative":
        return [way for p in req.parts for way in reserve_ways(p.resreq, ntasks_min, ntasks_max, nhosts)] or [[]]
    if not req.rusage:
        return [[]]
    return [_simple(req, i, ntasks_min, nmax, nhosts) for i in range(len(req.rusage))]


def reserve_terms(req: ResReq | None, ntasks_min: int, ntasks_max: int | None = None,
                  nhosts: int | None = None) -> list[Reserved]:
    """The terms of the preferred way `req` reserves (``reserve_ways(...)[0]``)."""
    return reserve_ways(req, ntasks_min, ntasks_max, nhosts)[0]


def reserve_line(r: dict, ntasks_max: int | None = None) -> str:
    """One term as `xcecli show` and `submit --dry-run` print it, from its JSON form
    (`Reserved.to_json`): "mem 1000 MB per task x 4 tasks = 4000 MB reserved",
    "fluent_lic 1 per job = 1 reserved", "scratch 10 per host x 1 host = 10 reserved at least
    (each further host reserves as much again)". A per-task term counted at a task range's
    MIN (`exact` false) with the range's `ntasks_max` gives both ends: "mem 1000 MB per task
    x 2-8 tasks = 2000-8000 MB reserved". ASCII only, as the CLI prints."""
    unit = f" {r['unit']}" if r.get("unit") else ""
    value, total = _num(r["value"]), _num(r["total"])
    per, count = r["per"], r["count"]
    text = f"{r['name']} {format_number(value)}{unit} per {per}"
    exact = r.get("exact", True)
    if per == "task" and not exact and ntasks_max is not None and ntasks_max > count:
        most = _num(value * ntasks_max)
        return (f"{text} x {count}-{ntasks_max} tasks = {format_number(total)}-{format_number(most)}{unit} "
                f"reserved")
    if per != "job":
        text += f" x {count} {per}{'' if count == 1 else 's'}"
    text += f" = {format_number(total)}{unit} reserved"
    if not exact:
        text += (" at least (at the fewest tasks; more tasks reserve more)" if per == "task"
                 else " at least (each further host reserves as much again)")
    return text

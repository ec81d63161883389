"""What an rusage reserves, term by term: its method and the job's total (RES-2, issue 15;
xced/resreq/_reserve.py). A term without /task, /host or /job is per task (XCE's rule, as
LSF's RESOURCE_RESERVE_PER_TASK=y; LSF's own default is per host)."""

from __future__ import annotations

import pytest

from xced.resreq import DEFAULT_PER, parse, reserve_line, reserve_terms, reserve_ways


def lines(text: str, nmin: int, nmax: int | None = None, nhosts: int | None = None) -> list[str]:
    return [reserve_line(r.to_json(), nmax) for r in reserve_terms(parse(text), nmin, nmax, nhosts)]


# (rule, -R, ntasks_min, ntasks_max, hosts placed on, the lines show prints)
ROWS = [
    ("per task by default: the issue's 4-task job", "rusage[mem=1000]", 4, None, None,
     ["mem 1000 MB per task x 4 tasks = 4000 MB reserved"]),
    ("one task", "rusage[mem=4GB]", 1, None, None, ["mem 4096 MB per task x 1 task = 4096 MB reserved"]),
    ("/task written", "rusage[mem=500/task]", 2, None, None, ["mem 500 MB per task x 2 tasks = 1000 MB reserved"]),
    ("/job once", "rusage[mem=1000/job:lic=2/job]", 8, None, None,
     ["mem 1000 MB per job = 1000 MB reserved", "lic 2 per job = 2 reserved"]),
    ("/host: the hosts a ptile gives", "rusage[scratch=10/host] span[ptile=2]", 6, None, None,
     ["scratch 10 per host x 3 hosts = 30 reserved"]),
    ("/host: span[hosts=1]", "rusage[mem=100/host] span[hosts=1]", 4, None, None,
     ["mem 100 MB per host x 1 host = 100 MB reserved"]),
    ("/host before placement: one host at least", "rusage[mem=100/host]", 4, None, None,
     ["mem 100 MB per host x 1 host = 100 MB reserved at least (each further host reserves as much again)"]),
    ("/host once placed: exact", "rusage[mem=100/host]", 4, None, 3,
     ["mem 100 MB per host x 3 hosts = 300 MB reserved"]),
    ("a task range pending: both ends", "rusage[mem=1000]", 2, 8, None,
     ["mem 1000 MB per task x 2-8 tasks = 2000-8000 MB reserved"]),
    ("a task range placed: what it runs with", "rusage[mem=1000]", 5, 5, 2,
     ["mem 1000 MB per task x 5 tasks = 5000 MB reserved"]),
    ("MERGE-3: 0 reserves nothing", "rusage[mem=0:gpu=1]", 2, None, None, ["gpu 1 per task x 2 tasks = 2 reserved"]),
    ("fractions kept", "rusage[lic=0.5]", 3, None, None, ["lic 0.5 per task x 3 tasks = 1.5 reserved"]),
    ("no rusage", "select[mem>100]", 4, None, None, []),
    ("compound: each part with its count", "2*{rusage[mem=100]} + 3*{rusage[mem=50/job]}", 5, None, None,
     ["mem 100 MB per task x 2 tasks = 200 MB reserved", "mem 50 MB per job = 50 MB reserved"]),
    ("|| : the preferred alternative", "rusage[mem=1000 || mem=500]", 2, None, None,
     ["mem 1000 MB per task x 2 tasks = 2000 MB reserved"]),
]


@pytest.mark.parametrize("rule,text,nmin,nmax,nhosts,want", ROWS, ids=[r[0] for r in ROWS])
def test_reserve_lines(rule, text, nmin, nmax, nhosts, want):
    assert lines(text, nmin, nmax, nhosts) == want


def test_json_form_and_every_way():
    """JobOut.reserve / the dry run's `reserve`: {"name", "value", "unit", "per", "count",
    "total", "exact"}; reserve_ways gives every || alternative, an alternative request's
    parts in order."""
    assert DEFAULT_PER == "task"
    [r] = reserve_terms(parse("rusage[mem=1000]"), 4)
    assert r.to_json() == {"name": "mem", "value": 1000, "unit": "MB", "per": "task", "count": 4, "total": 4000,
                           "exact": True}
    [r] = reserve_terms(parse("rusage[gpu=1/host]"), 4)
    assert r.to_json() == {"name": "gpu", "value": 1, "unit": None, "per": "host", "count": 1, "total": 1,
                           "exact": False}
    ways = reserve_ways(parse("rusage[mem=1000 || mem=500:gpu=1]"), 2)
    assert [[(t.name, t.total) for t in w] for w in ways] == [[("mem", 2000)], [("mem", 1000), ("gpu", 2)]]
    ways = reserve_ways(parse("{rusage[mem=9]} || {rusage[mem=5/job]}"), 3)
    assert [[(t.name, t.per, t.total) for t in w] for w in ways] == [[("mem", "task", 27)], [("mem", "job", 5)]]
    assert reserve_ways(None, 1) == [[]] and reserve_terms(parse(""), 1) == []

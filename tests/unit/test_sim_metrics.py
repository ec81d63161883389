"""xced.sim.metrics: workload metrics (SPEC SIM-1), on small hand-computed examples."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xced.sim.metrics import (
    JobOutcome,
    Metrics,
    bounded_slowdown,
    compute_metrics,
    queue_length_series,
    utilisation_series,
)


def out(job_id: int, submit: float, start: float, end: float, procs: int = 1) -> JobOutcome:
    return JobOutcome(job_id=job_id, submit=submit, start=start, end=end, procs=procs)


def test_short_job_bounded_by_tau():
    # duration 2 s, wait 8 s: flow 10 s over max(10 s, 2 s) = 1.0
    assert bounded_slowdown(8, 2) == 1.0
    # duration 2 s, wait 18 s: 20 / 10 = 2.0 (not 20 / 2)
    assert bounded_slowdown(18, 2) == 2.0
    # no wait: never below 1
    assert bounded_slowdown(0, 1) == 1.0
    # long job: (wait + run) / run
    assert bounded_slowdown(100, 100) == 2.0


def test_two_jobs_by_hand():
    # machine of 4 processors
    # job 1: submit 0, start 0, end 100 on 2 procs  -> wait 0, flow 100, bsld 1
    # job 2: submit 10, start 100, end 110 on 4 procs -> wait 90, flow 100, bsld 100/10 = 10
    m = compute_metrics([out(1, 0, 0, 100, 2), out(2, 10, 100, 110, 4)], machine_procs=4)
    assert m == Metrics(
        jobs=2,
        machine_procs=4,
        avg_wait_s=45.0,
        median_wait_s=45.0,
        max_wait_s=90.0,
        avg_flow_s=100.0,
        avg_bounded_slowdown=5.5,
        # busy 2*100 + 4*10 = 240 processor-seconds over 4 * 110
        utilisation=240 / 440,
        makespan_s=110.0,
    )


def test_median_odd_and_order_free():
    jobs = [out(3, 0, 30, 40), out(1, 0, 0, 10), out(2, 0, 5, 15)]
    m = compute_metrics(jobs, machine_procs=1)
    assert m.median_wait_s == 5.0
    assert m.max_wait_s == 30.0
    assert m.makespan_s == 40.0
    assert compute_metrics(list(reversed(jobs)), 1) == m


def test_makespan_starts_at_first_submit_not_zero():
    m = compute_metrics([out(1, 1000, 1000, 1010, 1)], machine_procs=1)
    assert m.makespan_s == 10.0
    assert m.utilisation == 1.0


def test_zero_makespan_gives_zero_utilisation():
    m = compute_metrics([out(1, 5, 5, 5)], machine_procs=2)
    assert (m.makespan_s, m.utilisation, m.avg_bounded_slowdown) == (0.0, 0.0, 1.0)


def test_to_json_round_trips():
    m = compute_metrics([out(1, 0, 8, 10)], machine_procs=1)
    d = m.to_json()
    assert json.loads(json.dumps(d)) == d
    assert d["avg_bounded_slowdown"] == 1.0
    assert d["avg_wait_s"] == 8.0
    assert set(d) == {"jobs", "machine_procs", "avg_wait_s", "median_wait_s", "max_wait_s", "avg_flow_s",
                      "avg_bounded_slowdown", "utilisation", "makespan_s"}


@pytest.mark.parametrize(
    "records, procs, message",
    [
        ([], 4, "no finished jobs"),
        ([out(1, 0, 0, 1)], 0, "machine_procs must be a positive number of processors, got 0"),
        ([out(7, 10, 5, 20)], 4, "job 7: times must satisfy submit <= start <= end, got submit=10, start=5, end=20"),
        ([out(8, 0, 5, 4)], 4, "job 8: times must satisfy submit <= start <= end"),
        ([out(9, 0, 0, 1, procs=0)], 4, "job 9: procs must be a positive number of processors, got 0"),
    ],
)
def test_bad_input(records, procs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        compute_metrics(records, procs)


def test_queue_length_series():
    jobs = [
        out(1, 0, 0, 10),    # never waits
        out(2, 1, 10, 20),   # waits 1..10
        out(3, 2, 20, 30),   # waits 2..20
        out(4, 2, 10, 12),   # waits 2..10
    ]
    assert queue_length_series(jobs) == [(0, 0), (1, 1), (2, 3), (10, 1), (20, 0)]


def test_utilisation_series():
    jobs = [out(1, 0, 0, 10, 2), out(2, 0, 5, 10, 2), out(3, 0, 10, 20, 1), out(4, 0, 3, 3, 4)]
    # 0: 2/4, 5: 4/4, 10: job 1 and 2 end, job 3 starts: 1/4, 20: 0; a zero-length job adds nothing
    assert utilisation_series(jobs, 4) == [(0, 0.5), (5, 1.0), (10, 0.25), (20, 0.0)]
    assert utilisation_series([], 4) == []
    with pytest.raises(ValueError, match="machine_procs must be a positive"):
        utilisation_series(jobs, 0)


outcomes = st.lists(
    st.tuples(
        st.integers(0, 10_000),  # submit
        st.integers(0, 10_000),  # wait
        st.integers(0, 10_000),  # duration
        st.integers(1, 16),      # procs
    ).map(lambda t: JobOutcome(0, t[0], t[0] + t[1], t[0] + t[1] + t[2], t[3])),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(outcomes)
def test_properties(jobs):
    m = compute_metrics(jobs, machine_procs=16)
    assert m.avg_bounded_slowdown >= 1.0
    assert m.utilisation >= 0.0  # jobs here may overlap beyond the machine: no upper bound
    assert m.max_wait_s >= m.median_wait_s >= 0
    assert m.avg_flow_s >= m.avg_wait_s
    # the queue empties and the machine goes idle at the end
    q = queue_length_series(jobs)
    assert q[-1][1] == 0 and all(n >= 0 for _, n in q)
    assert [t for t, _ in q] == sorted({t for t, _ in q})
    u = utilisation_series(jobs, 16)
    if u:
        assert u[-1][1] == 0.0 and all(v >= 0 for _, v in u)
    # the series' area is the busy processor-seconds behind the utilisation figure
    area = sum((t1 - t0) * v * 16 for (t0, v), (t1, _) in itertools.pairwise(u))
    assert area == pytest.approx(m.utilisation * 16 * m.makespan_s)

"""The simulator (SIM-1) replays real traces through the daemon's own `schedule()`.

The correctness target is a published result: on KTH-SP2, FCFS with EASY backfilling on
100 processors, average bounded slowdown 92.58 and average flow time 15,697 s (Gaussier,
Glesser, Reis and Trystram, SC'15, pyss; see tests/data/README.md).
"""

from __future__ import annotations

import pytest

from tests.conftest import DATA
from xced.sim.engine import simulate
from xced.sim.metrics import compute_metrics
from xced.sim.swf import SimJob, read_swf

KTH = DATA / "KTH-SP2-1996-2.1-cln.swf.gz"

pytestmark = pytest.mark.timeout(120)


def test_kth_sp2_easy_matches_the_published_result_within_one_percent():
    trace = read_swf(KTH)
    assert len(trace.jobs) == 28_481 and trace.machine_procs == 100
    result = simulate(trace.jobs, trace.machine_procs, "easy")
    m = compute_metrics(result.outcomes, trace.machine_procs)
    assert m.jobs == 28_481
    assert abs(m.avg_bounded_slowdown - 92.58) / 92.58 < 0.01, m
    assert abs(m.avg_flow_s - 15_697) / 15_697 < 0.01, m
    # FCFS without backfill waits much longer on the same trace
    fcfs = compute_metrics(simulate(trace.jobs[:3000], trace.machine_procs, "fcfs").outcomes, 100)
    easy = compute_metrics(simulate(trace.jobs[:3000], trace.machine_procs, "easy").outcomes, 100)
    assert fcfs.avg_wait_s > easy.avg_wait_s


def J(i, submit, procs, est, dur):
    return SimJob(i, submit, procs, est, dur, -1, -1)


def test_small_easy_case_by_hand():
    """10 processors. Job 1 (8 procs, 100 s) runs at 0. Job 2 (10 procs) must wait for it:
    reserved at 100. Job 3 (2 procs, estimate 50) fits beside job 1 and ends before 100:
    it backfills at 1. Job 4 (2 procs, estimate 500) would delay job 2: it waits until job
    2 ends at 200 (2 procs spare only after job 2 ends)."""
    jobs = [J(1, 0, 8, 100, 100), J(2, 1, 10, 100, 100), J(3, 1, 2, 50, 50), J(4, 2, 2, 500, 10)]
    starts = {o.job_id: o.start for o in simulate(jobs, 10, "easy").outcomes}
    assert starts == {1: 0, 3: 1, 2: 100, 4: 200}
    starts = {o.job_id: o.start for o in simulate(jobs, 10, "fcfs").outcomes}
    assert starts == {1: 0, 2: 100, 3: 200, 4: 200}


def test_jobs_end_before_submissions_at_the_same_time():
    """pyss's event order: an end at t frees processors for a job submitted at t."""
    jobs = [J(1, 0, 10, 5, 5), J(2, 5, 10, 5, 5)]
    assert [(o.job_id, o.start) for o in simulate(jobs, 10, "easy").outcomes] == [(1, 0), (2, 5)]


def test_bad_policy_and_oversized_job():
    with pytest.raises(ValueError, match="valid policies are easy"):
        simulate([], 10, "sjf")
    with pytest.raises(ValueError, match="asks for 11 processors; the machine has 10"):
        simulate([J(1, 0, 11, 5, 5)], 10)

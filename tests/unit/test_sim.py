"""The simulator (SIM-1) replays real traces through the daemon's own `schedule()`.

The correctness target is a published result: on KTH-SP2, FCFS with EASY backfilling on
100 processors, average bounded slowdown 92.58 and average flow time 15,697 s (Gaussier,
Glesser, Reis and Trystram, SC'15, pyss; see tests/data/README.md). pyss runs a session
per event; the simulator runs one per distinct time, as the daemon coalesces, and must
stay within 1% of that result.
"""

from __future__ import annotations

import random

import pytest

import xced.sim.engine as engine
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
    with pytest.raises(ValueError, match="asks for 0 processors; a job needs at least 1"):
        simulate([J(1, 0, 0, 5, 5)], 10)


def sessions_seen(monkeypatch) -> list[tuple[float, int]]:
    """Every session the simulator runs from now on, as (time, pending jobs it was shown)."""
    seen: list[tuple[float, int]] = []
    real = engine.schedule

    def counting(snapshot, now, **kw):
        seen.append((now, len(snapshot.pending)))
        return real(snapshot, now, **kw)

    monkeypatch.setattr(engine, "schedule", counting)
    return seen


def test_one_session_per_distinct_time_at_which_something_can_change(monkeypatch):
    """2 processors, six 1-processor jobs of 10 s at t=0 and a 2-processor job at t=5.
    Something can change at 0 (submissions that fit), 10, 20 and 30 (two ends each). At 5
    nothing can: the job submitted then cannot start (no processor is free). At 40 job 7
    ends with nothing pending. One session per changing time; per event, one per end and
    per submission that fits."""
    jobs = [J(i, 0, 1, 10, 10) for i in range(1, 7)] + [J(7, 5, 2, 10, 10)]
    seen = sessions_seen(monkeypatch)
    for policy in ("easy", "fcfs"):
        seen.clear()
        r = simulate(jobs, 2, policy)
        assert {o.job_id: o.start for o in r.outcomes} == {1: 0, 2: 0, 3: 10, 4: 10, 5: 20, 6: 20, 7: 30}
        assert [t for t, _ in seen] == [0, 10, 20, 30] and r.sessions == 4
        seen.clear()
        r = simulate(jobs, 2, policy, per_event=True)
        assert {o.job_id: o.start for o in r.outcomes} == {1: 0, 2: 0, 3: 10, 4: 10, 5: 20, 6: 20, 7: 30}
        assert [t for t, _ in seen] == [0, 0, 10, 10, 20, 20, 30, 30] and r.sessions == 8


def test_a_burst_runs_one_small_session_per_distinct_time(monkeypatch):
    """2,000 jobs of 1 processor and 100 s submitted at t=0 on 8 processors: eight start at
    each multiple of 100 s, one session at each of those 250 times, and no session is shown
    more than the 2 x 8 + 1 jobs that can decide it, however deep the queue (shown the whole
    queue, the first would see 2,000)."""
    jobs = [J(i, 0, 1, 100, 100) for i in range(1, 2001)]
    seen = sessions_seen(monkeypatch)
    for policy in ("easy", "fcfs"):
        seen.clear()
        r = simulate(jobs, 8, policy)
        assert {o.job_id: o.start for o in r.outcomes} == {i: (i - 1) // 8 * 100 for i in range(1, 2001)}
        times = [t for t, _ in seen]
        assert times == [k * 100 for k in range(250)] and r.sessions == 250
        assert max(n for _, n in seen) <= 2 * 8 + 1


def mixed_burst(n: int, seed: int) -> list[SimJob]:
    """n jobs at t=0 of 1 to 16 processors and three requested times, run times below them."""
    rnd = random.Random(seed)
    jobs = []
    for i in range(1, n + 1):
        est = rnd.choice((60, 600, 3600))
        jobs.append(J(i, 0, rnd.choice((1, 1, 2, 3, 4, 8, 16)), est, rnd.randint(1, est)))
    return jobs


def per_job(result) -> dict[int, tuple[float, float]]:
    return {o.job_id: (o.start, o.end) for o in result.outcomes}


@pytest.mark.parametrize("policy", ["easy", "fcfs"])
def test_a_burst_ends_with_the_per_job_results_of_sessions_shown_the_whole_queue(policy):
    """Sessions are shown only the part of the queue that decides them (xced.sim.engine): a
    mixed burst of 600 jobs on 16 processors gets every job's start and end exactly as
    sessions shown every pending job give them, with as many sessions, in both modes; so
    does the same burst spread over time, and the first 3,000 jobs of KTH-SP2."""
    jobs = mixed_burst(600, seed=3)
    spread = [J(j.job_id, 30 * i, j.procs, j.estimate_s, j.duration_s) for i, j in enumerate(jobs)]
    for js in (jobs, spread):
        for per_event in (False, True):
            got = simulate(js, 16, policy, per_event=per_event)
            want = simulate(js, 16, policy, per_event=per_event, full_queue=True)
            assert len(got.outcomes) == 600 and per_job(got) == per_job(want)
            assert got.sessions == want.sessions
    kth = read_swf(KTH).jobs[:3000]
    assert per_job(simulate(kth, 100, policy)) == per_job(simulate(kth, 100, policy, full_queue=True))


# ---- projects (PRJ-6, PRJ-7): SWF group G is project /g<G>, user U is u<U> ----------------------

def PJ(i, submit, procs, est, dur, group, user=1):
    return SimJob(i, submit, procs, est, dur, user, -1, group)


def projects(*rows):
    from xced.model.project import ProjectConfig, ProjectsConfig, ShareTerm

    out = []
    for path, kw in rows:
        kw = dict(kw)
        if "share" in kw:
            kw["share"] = {r: ShareTerm(amount=v) for r, v in kw["share"].items()}
        out.append(ProjectConfig(path=path, **kw))
    return ProjectsConfig(projects=out)


def test_a_share_holds_a_group_to_its_part_of_the_machine_and_the_rest_waits_for_its_own():
    """10 processors; /g1 has a share of 4, every other group draws from the 6 left (v1 is
    strict: nobody borrows an idle share). Job 1 (/g1, 4) runs at 0; job 2 (/g1, 2) would pass
    the share: it waits for job 1 to end at 100, while job 3 (/g2, 6), behind it in the queue,
    starts at 2; job 4 (/g2, 1) finds the unassigned part full and waits for job 3 to end at
    52, though 0 of /g1's 4 are idle then. Job 5 (/g1, 5) could never fit the share: refused,
    as at submit."""
    cfg = projects(("/g1", {"share": {"slots": 4}}))
    jobs = [PJ(1, 0, 4, 100, 100, 1), PJ(2, 1, 2, 100, 100, 1), PJ(3, 2, 6, 50, 50, 2), PJ(4, 3, 1, 10, 10, 2),
            PJ(5, 4, 5, 10, 10, 1)]
    r = simulate(jobs, 10, "easy", projects=cfg)
    assert {o.job_id: o.start for o in r.outcomes} == {1: 0, 3: 2, 2: 100, 4: 52}
    assert r.refused == [5] and r.refused_example == (
        "job 5: The job needs 5 slots and can never start in project /g1: project /g1's share of the whole "
        "cluster is 4 slots")
    # without the projects, job 2 starts at 1 and job 3 waits for 6 processors until 100
    assert {o.job_id: o.start for o in simulate(jobs[:4], 10, "easy").outcomes} == {1: 0, 2: 1, 3: 100, 4: 3}


def test_member_quota_and_jobs_with_no_group():
    cfg = projects(("/g1", {"member_quota": {"slots": 2}}))
    jobs = [PJ(1, 0, 2, 100, 100, 1, user=7), PJ(2, 0, 2, 100, 100, 1, user=7), PJ(3, 0, 2, 100, 100, 1, user=8),
            PJ(4, 0, 8, 100, 100, -1)]
    starts = {o.job_id: o.start for o in simulate(jobs, 20, "easy", projects=cfg).outcomes}
    assert starts == {1: 0, 3: 0, 4: 0, 2: 100}  # u7 waits for its own job; group -1 is never capped


@pytest.mark.parametrize("policy", ["easy", "fcfs"])
def test_with_projects_sessions_shown_a_window_decide_as_sessions_shown_the_whole_queue(policy):
    """A job held by a cap blocks nobody, so the window of the engine takes one more job per
    class (processors, run limit, project, user): the first 2,000 jobs of KTH-SP2 under
    shares, a quota and a member_quota end exactly as with sessions shown every pending job."""
    from xced.model.project import ProjectConfig, ProjectsConfig

    cfg = ProjectsConfig(projects=[ProjectConfig(path="/g6", share_percent=30),
                                   ProjectConfig(path="/g3", share_percent=40, quota={"slots": 30},
                                                 member_quota={"slots": 20}),
                                   ProjectConfig(path="/g86", share_percent=10)])
    kth = read_swf(KTH).jobs[:2000]
    got = simulate(kth, 100, policy, projects=cfg)
    want = simulate(kth, 100, policy, projects=cfg, full_queue=True)
    assert got.refused == want.refused and got.refused
    assert per_job(got) == per_job(want) and len(got.outcomes) == 2000 - len(got.refused)
    assert per_job(got) != per_job(simulate([j for j in kth if j.job_id not in set(got.refused)], 100, policy))

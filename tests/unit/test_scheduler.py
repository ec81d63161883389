"""Scheduler v1 over plain snapshots, no daemon (D-4, SCHED-1 FCFS, RES-3 task range, RES-6)."""

from __future__ import annotations

from xced.resreq import parse
from xced.scheduler.session import schedule
from xced.scheduler.snapshot import HostSupply, JobSnap, QueueSnap, Snapshot


def host(name, slots, free=None, mem=8192, memfree=None, status="ok"):
    return HostSupply(name, slots, slots if free is None else free, mem, mem if memfree is None else memfree,
                      status=status)


def job(jid, nmin=1, nmax=None, queue="normal", t=None, idx=0, R="", limit=None, held=False):
    return JobSnap(jid, idx, queue, float(jid if t is None else t), nmin, nmax or nmin, parse(R), limit, held)


QUEUES = [QueueSnap("normal", 30, 0), QueueSnap("high", 50, 1), QueueSnap("low", 10, 2)]


def run(hosts, jobs, array_running=None):
    return schedule(Snapshot(hosts, QUEUES, jobs, array_running or {}), 1000.0)


def test_fcfs_head_blocks_its_queue():
    r = run([host("h1", 4, free=2)], [job(1, 3), job(2, 1)])
    assert r.dispatches == []
    pr = r.pend_reasons[(1, 0)]
    assert pr.main == "Not enough free slots: 2 free on matching hosts, the job needs 3"
    assert pr.hint == "would start now with -n 2"
    assert r.pend_reasons[(2, 0)].main == "Waiting behind job 1 in queue normal (first come, first served)"


def test_submit_time_then_id_order():
    r = run([host("h1", 1)], [job(5, t=10), job(3, t=10), job(9, t=5)])
    assert [(d.job_id) for d in r.dispatches] == [9]
    r = run([host("h1", 2)], [job(5, t=10), job(3, t=10)])
    assert [d.job_id for d in r.dispatches] == [3, 5]


def test_queue_priority_first_and_lower_queue_not_blocked_by_higher():
    r = run([host("h1", 2)], [job(1, 1, queue="low"), job(2, 2, queue="high"), job(3, 1, queue="normal")])
    assert [d.job_id for d in r.dispatches] == [2]
    r = run([host("h1", 2)], [job(1, 1, queue="low"), job(2, 3, queue="high")])
    # the high queue's head cannot fit; a lower queue still runs (no reservation in v1)
    assert [d.job_id for d in r.dispatches] == [1]


def test_task_range_takes_largest_that_fits_bug_1931():
    r = run([host("h1", 4, free=2)], [job(1, 2, 5)])
    assert [(d.job_id, d.alloc) for d in r.dispatches] == [(1, [("h1", 2)])]
    r = run([host("h1", 8)], [job(1, 2, 5)])
    assert r.dispatches[0].alloc == [("h1", 5)]


def test_capacity_driven_host_order_and_spread():
    r = run([host("a", 4, free=1), host("b", 4, free=3), host("c", 4, free=3)], [job(1, 5)])
    assert r.dispatches[0].alloc == [("b", 3), ("c", 2)]


def test_rusage_memory_reserved_with_shortfalls():
    r = run([host("h1", 4, mem=1000, memfree=500), host("h2", 4, mem=1000, memfree=1000)],
            [job(1, 1, R="rusage[mem=800]"), job(2, 1, R="rusage[mem=800]")])
    assert [(d.job_id, d.alloc) for d in r.dispatches] == [(1, [("h2", 1)])]
    assert r.dispatches[0].reserve == {"h2": {"slots": 1, "mem": 800}}
    pr = r.pend_reasons[(2, 0)]
    assert [h.resource for h in pr.hosts] == ["mem", "mem"]
    assert all("needs 800" in h.message for h in pr.hosts), [h.message for h in pr.hosts]


def test_array_limit_and_held_do_not_block():
    jobs = [job(1, idx=i, limit=2, t=1) for i in (1, 2, 3)] + [job(2, held=True), job(3)]
    r = run([host("h1", 8)], jobs, {1: 1})
    assert [(d.job_id, d.index) for d in r.dispatches] == [(1, 1), (3, 0)]
    assert r.pend_reasons[(1, 2)].main == "The job array has reached its limit of 2 running elements"
    assert (2, 0) not in r.pend_reasons  # a held element keeps the reason its hold gave it


def test_closed_hosts_are_not_used():
    r = run([host("h1", 4, status="unavail")], [job(1)])
    assert r.dispatches == []
    assert r.pend_reasons[(1, 0)].main.startswith("No host is available")


def test_never_dispatches_more_than_free():
    hosts = [host("h1", 3), host("h2", 2)]
    r = run(hosts, [job(i, 2) for i in range(1, 8)])
    used = {}
    for d in r.dispatches:
        for h, n in d.alloc:
            used[h] = used.get(h, 0) + n
    assert used == {"h1": 3, "h2": 1} or sum(used.values()) <= 5
    assert all(used[h.name] <= h.slots for h in hosts if h.name in used)


# ---- EASY backfilling (SCHED-1), the unsatisfiable-request cache (SCHED-2), SCHED-3 ----------

from xced.model.jobs import PendReason  # noqa: E402
from xced.scheduler.snapshot import RunSnap  # noqa: E402

BF = [QueueSnap("normal", 30, 0, backfill=True), QueueSnap("low", 10, 1)]


def bjob(jid, n, limit_s, queue="normal", R=""):
    return JobSnap(jid, 0, queue, float(jid), n, n, parse(R), run_limit_s=limit_s)


def brun(hosts, jobs, running, queues=BF, **kw):
    return schedule(Snapshot(hosts, queues, jobs, {}, running), 1000.0, **kw)


def test_easy_backfill_starts_short_jobs_that_end_before_the_heads_reservation():
    # 10 slots; 6 busy until now+100 (job 90) and 2 until now+500 (job 91): 2 free now.
    # Head 1 needs 8: it fits when job 90 ends, at now+100, leaving 0 spare.
    running = [RunSnap(90, 0, 1100.0, {"h1": {"slots": 6}}), RunSnap(91, 0, 1500.0, {"h1": {"slots": 2}})]
    jobs = [bjob(1, 8, 50), bjob(2, 2, 100), bjob(3, 2, 60)]
    r = brun([host("h1", 10, free=2)], jobs, running)
    assert [(d.job_id, d.backfill) for d in r.dispatches] == [(2, True)]  # ends at +100: no delay
    assert [(x.job, x.start) for x in r.reservations] == [("1", 1100.0)]
    assert r.pend_reasons[(3, 0)].main.startswith("Not enough free slots")  # nothing left now
    # a job that would outlast the reservation and take slots the head needs waits
    r = brun([host("h1", 10, free=2)], [bjob(1, 8, 50), bjob(2, 2, 101)], running)
    assert r.dispatches == []
    assert r.pend_reasons[(2, 0)].main == ("Would delay job 1, which has resources reserved from t=1100 s "
                                           "(backfill); a run limit (-W) ending by then would let it start now")
    # without a run limit a job never ends: it cannot backfill into slots the head needs
    r = brun([host("h1", 10, free=2)], [bjob(1, 8, 50), bjob(2, 1, None)], running)
    assert r.dispatches == []


def test_easy_backfill_uses_slots_the_head_leaves_spare():
    # head needs 6 of the 8 free at +100: 2 spare then, so a long 2-slot job may start now
    running = [RunSnap(90, 0, 1100.0, {"h1": {"slots": 6}})]
    r = brun([host("h1", 10, free=4)], [bjob(1, 8, 50), bjob(2, 2, 10_000), bjob(3, 2, 10_000)], running)
    assert [d.job_id for d in r.dispatches] == [2]  # the second long one would take the head's slots
    assert r.pend_reasons[(3, 0)].main.startswith("Would delay job 1")


def test_easy_backfill_general_request_checks_the_heads_plan_at_its_start():
    # gpu head: needs gpu=2 on one host; h2's gpus are busy until +300
    hosts = [HostSupply("h1", 4, 4, 8192, 8192, {"gpu": 2}, {"gpu": 2}),
             HostSupply("h2", 4, 4, 8192, 8192, {"gpu": 2}, {"gpu": 0})]
    running = [RunSnap(90, 0, 1300.0, {"h2": {"slots": 0, "gpu": 2}})]
    head = JobSnap(1, 0, "normal", 1.0, 1, 1, parse("rusage[gpu=3] span[hosts=1]"), run_limit_s=50)
    small = JobSnap(2, 0, "normal", 2.0, 1, 1, parse("rusage[gpu=1]"), run_limit_s=10_000)
    r = brun(hosts, [head, small], running)
    # gpu=3 on one host never fits (2 per host): no reservation, the small job runs
    assert r.reservations == [] and [d.job_id for d in r.dispatches] == [2]
    head = JobSnap(1, 0, "normal", 1.0, 1, 1, parse("rusage[gpu=2] span[hosts=1]"), run_limit_s=50)
    hosts[0] = HostSupply("h1", 4, 4, 8192, 8192, {"gpu": 2}, {"gpu": 1})
    running.append(RunSnap(91, 0, 5000.0, {"h1": {"slots": 0, "gpu": 1}}))
    r = brun(hosts, [head, small], running)
    # the head's reservation is h2 at +300; a long gpu=1 job on h1 does not touch it
    assert [(x.job, x.start) for x in r.reservations] == [("1", 1300.0)]
    assert [(d.job_id, d.alloc) for d in r.dispatches] == [(2, [("h1", 1)])]


def test_non_backfill_queue_stays_strict_fcfs_and_lower_queues_respect_reservations():
    running = [RunSnap(90, 0, 1100.0, {"h1": {"slots": 6}})]
    fcfs = [QueueSnap("normal", 30, 0), QueueSnap("low", 10, 1)]
    r = brun([host("h1", 10, free=4)], [bjob(1, 8, 50), bjob(2, 1, 10)], running, queues=fcfs)
    assert r.dispatches == [] and r.pend_reasons[(2, 0)].main.startswith("Waiting behind job 1")
    # a lower queue's long job may not take the reserved slots of the backfilling queue's head
    r = brun([host("h1", 10, free=4)], [bjob(1, 8, 50), bjob(2, 4, 10_000, queue="low")], running)
    assert r.dispatches == [] and r.pend_reasons[(2, 0)].main.startswith("Would delay job 1")
    # ... and a strict queue whose first job waits for that reservation stays strict
    r = brun([host("h1", 10, free=4)], [bjob(1, 8, 50), bjob(2, 4, 10_000, queue="low"),
                                        bjob(3, 1, 10, queue="low")], running)
    assert r.dispatches == []
    assert r.pend_reasons[(3, 0)].main == "Waiting behind job 2 in queue low (first come, first served)"


def test_unsatisfiable_cache_restores_full_reasons_bug_1932():
    """SCHED-2: identical requests after the first that proved it cannot start are not
    searched again; each gets the full reason, and the trace says which job proved it."""
    jobs = [bjob(k, 8, 50, R="span[hosts=1]") for k in (1, 2, 3)]
    r = brun([host("h1", 10, free=2), host("h2", 4)], jobs, [])
    first = r.pend_reasons[(1, 0)]
    assert first.hosts and first.hint  # the full reason, per-host lines and hint
    for k in (2, 3):
        got = r.pend_reasons[(k, 0)]
        assert (got.main, got.hosts, got.hint) == (first.main, first.hosts, first.hint)
    for k in (2, 3):
        assert f"{k}: no plan generated: skipped, same request as 1 proved unsatisfiable earlier this session" \
            in [str(t) for t in r.trace]
    # the cache is per session: a new session with slots free dispatches
    r = brun([host("h1", 10)], jobs, [])
    assert [d.job_id for d in r.dispatches] == [1]


def test_reason_equal_to_the_last_accepted_is_not_pushed_again():
    """SCHED-3."""
    r = run([host("h1", 4, free=2)], [job(1, 3), job(2, 1)])
    last = {k: v for k, v in r.pend_reasons.items()}
    again = [job(1, 3), job(2, 1)]
    again[0].last_reason = PendReason(last[(1, 0)].main, list(last[(1, 0)].hosts), last[(1, 0)].hint)
    again[1].last_reason = last[(2, 0)]
    r = run([host("h1", 4, free=2)], again)
    assert r.pend_reasons == {}
    again[1].last_reason = PendReason("something else")
    assert list(run([host("h1", 4, free=2)], again).pend_reasons) == [(2, 0)]


def test_one_last_reason_object_shared_by_many_jobs_is_compared_per_new_reason():
    """SCHED-3 in a busy cluster's steady state: the controller keeps the one reason object a
    session gave a group of jobs, so many jobs carry the same last reason. Each job is still
    judged against what this session says of it: the jobs it still fits push nothing, a job
    told something else now gets its new reason."""
    rr = parse("")  # one object, as the controller gives jobs of one requirement

    def jobs(last=None):
        return [JobSnap(k, 0, "normal", float(k), 3, 3, rr, run_limit_s=60, last_reason=last) for k in (1, 2, 3)]

    first = brun([host("h1", 4, free=2)], jobs(), []).pend_reasons
    shared = first[(2, 0)]
    assert first[(3, 0)] is shared and first[(1, 0)] == shared  # job 1 proved it, 2 and 3 share it
    never = JobSnap(5, 0, "low", 5.0, 9, 9, parse("select[type==nosuch]"), last_reason=shared)
    r = brun([host("h1", 4, free=2)], jobs(shared) + [never], [])
    assert r.pend_reasons.keys() == {(5, 0)} and "can never start" in r.pend_reasons[(5, 0)].hint
    r = brun([host("h1", 4, free=1)], jobs(shared), [])  # one slot fewer free: each is told so
    assert r.pend_reasons.keys() == {(1, 0), (2, 0), (3, 0)}
    assert "1 free" in r.pend_reasons[(3, 0)].main


def test_reservation_of_a_general_head_is_the_earliest_end_that_frees_enough():
    """The reserved start of a head with span[hosts=1] is the first estimated end after which
    one host has room (binary search over end times gives the same as a scan)."""
    hosts = [host("h1", 8, free=0), host("h2", 8, free=1)]
    running = [RunSnap(90 + k, 0, 1000.0 + 100 * k, {"h1" if k % 2 else "h2": {"slots": 1}}) for k in range(1, 16)]
    head = JobSnap(1, 0, "normal", 1.0, 5, 5, parse("span[hosts=1]"), run_limit_s=10)
    r = brun(hosts, [head], running)
    # h2 frees one slot at +200, +400, ... : 1 + 4 -> 5 free at +800
    assert [(x.job, x.start) for x in r.reservations] == [("1", 1800.0)]


def test_a_second_reservation_counts_what_the_first_head_will_take():
    """8 slots, 6 busy until +60 (a low-queue job). mid's head needs 4 from +60 for 300 s;
    low's head needs 8: not at +60 (mid's head holds 4 then) but at +360. A strict-queue job
    of 2 slots ending at +180 delays neither and starts now."""
    queues = [QueueSnap("mid", 40, 0, None, True), QueueSnap("low", 20, 1, None, True),
              QueueSnap("strictlow", 10, 2, None, False)]
    running = [RunSnap(66, 0, 1060.0, {"h1": {"slots": 6}})]
    jobs = [bjob(67, 4, 300, queue="mid"), bjob(68, 8, 300, queue="low"), bjob(69, 2, 180, queue="strictlow")]
    r = brun([host("h1", 8, free=2)], jobs, running, queues=queues)
    assert [(x.job, x.start) for x in r.reservations] == [("67", 1060.0), ("68", 1360.0)]
    assert [d.job_id for d in r.dispatches] == [69]


def test_a_task_range_shrinks_to_backfill_beside_a_reservation():
    """RES-3 with SCHED-1: -n 1,2 runs with 1 when 2 would take a slot the head needs."""
    running = [RunSnap(90, 0, 1060.0, {"h1": {"slots": 6}})]
    head = bjob(74, 7, 300)
    ranged = JobSnap(75, 0, "normal", 75.0, 1, 2, parse(""), run_limit_s=None)
    r = brun([host("h1", 8, free=2)], [head, ranged], running)
    assert [(d.job_id, d.ntasks) for d in r.dispatches] == [(75, 1)]
    # the same with a general head (span[hosts=1]): the smallest count is tried too
    head = JobSnap(74, 0, "normal", 74.0, 7, 7, parse("span[hosts=1]"), run_limit_s=300)
    r = brun([host("h1", 8, free=2)], [head, ranged], running)
    assert [(d.job_id, d.ntasks) for d in r.dispatches] == [(75, 1)]


def test_smaller_count_hint_tells_the_reservation_it_must_not_delay():
    """RES-6 with SCHED-1: "would start now with -n 1" is said only when 1 task would not
    delay a reserved head; otherwise the hint says the run limit it also needs."""
    running = [RunSnap(32, 0, 1120.0, {"h1": {"slots": 4}}), RunSnap(33, 0, 1600.0, {"h1": {"slots": 2}})]
    head = bjob(34, 5, 300)
    ranged = JobSnap(37, 0, "normal", 37.0, 1, 2, parse(""), run_limit_s=None)
    two = JobSnap(38, 0, "normal", 38.0, 2, 2, parse(""), run_limit_s=None)
    r = brun([host("h1", 8, free=2)], [head, ranged, two], running)
    assert [(d.job_id, d.ntasks) for d in r.dispatches] == [(37, 1)]  # 1 spare at +120 for the head
    hint = r.pend_reasons[(38, 0)].hint
    assert hint == ("would start now with -n 1 and a run limit (-W) ending by t=1120 s, "
                    "so as not to delay job 34's reservation")
    short = JobSnap(39, 0, "normal", 39.0, 2, 2, parse(""), run_limit_s=60)  # ends before +120
    r = brun([host("h1", 8, free=2)], [head, ranged, short], running)
    assert r.pend_reasons[(39, 0)].hint == "would start now with -n 1"


def test_identical_jobs_decided_as_a_group_keep_their_own_run_limits_hint():
    """Issue 19 (SCHED-2 with SCHED-1): once a request is proved unsatisfiable behind a
    reserved head, later identical jobs are decided as a group, but the group is per run limit:
    "would start now with -n 1" holds for a job that ends before the head's reservation, and
    one that outlasts it is told the run limit it needs too (RES-6). Interleaved jobs must each
    get their own, with a trace line naming the job that proved the request."""
    running = [RunSnap(32, 0, 1120.0, {"h1": {"slots": 4}}), RunSnap(33, 0, 1600.0, {"h1": {"slots": 2}})]
    head = bjob(34, 5, 300)
    ranged = JobSnap(37, 0, "normal", 37.0, 1, 2, parse(""), run_limit_s=None)
    limits = {38: None, 39: 60, 40: None, 41: 60, 42: None, 43: 60}
    rr = parse("")  # one object, as the controller gives jobs of one requirement (xced.resreq.shared)
    two = [JobSnap(k, 0, "normal", float(k), 2, 2, rr, run_limit_s=v) for k, v in limits.items()]
    r = brun([host("h1", 8, free=2)], [head, ranged, *two], running)
    assert [(d.job_id, d.ntasks) for d in r.dispatches] == [(37, 1)]
    long_hint = ("would start now with -n 1 and a run limit (-W) ending by t=1120 s, "
                 "so as not to delay job 34's reservation")
    for k, v in limits.items():
        assert r.pend_reasons[(k, 0)].hint == (long_hint if v is None else "would start now with -n 1"), k
        assert r.pend_reasons[(k, 0)].main == r.pend_reasons[(38, 0)].main
    trace = [str(t) for t in r.trace]
    for k in list(limits)[1:]:
        assert f"{k}: no plan generated: skipped, same request as 38 proved unsatisfiable earlier this session" \
            in trace


def test_reservation_times_read_in_the_snapshots_time_zone(monkeypatch):
    """The scheduler takes its clock from its input (D-4): a daemon's snapshot reads as clock
    times in the daemon's time zone, whatever the machine's TZ; a trace clock as seconds."""
    import time as _time

    from xced.scheduler.snapshot import Clock

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    _time.tzset()
    try:
        running = [RunSnap(90, 0, 7200.0, {"h1": {"slots": 6}}), RunSnap(91, 0, 9000.0, {"h1": {"slots": 2}})]
        snap = Snapshot([host("h1", 10, free=2)], BF, [bjob(1, 8, 50), bjob(2, 2, 10_000)], {}, running,
                        Clock(True, -5 * 3600))
        r = schedule(snap, 3600.0)
        assert r.pend_reasons[(2, 0)].main.startswith("Would delay job 1, which has resources reserved from "
                                                      "1969-12-31 21:00:00 (backfill)")
    finally:
        monkeypatch.delenv("TZ")
        _time.tzset()


def test_a_job_no_host_could_ever_run_does_not_block_a_strict_queue():
    """A strict FCFS head that no host could run even idle (say its gpu host left the
    config) pends saying so, and the jobs behind it start: it waits for a host, not a turn."""
    r = run([host("h1", 4)], [job(1, R="rusage[gpu=1]"), job(2)])
    assert [d.job_id for d in r.dispatches] == [2]
    assert "can never start" in (r.pend_reasons[(1, 0)].hint or "")
    assert "normal" not in r.blocked


# ---- project caps (PRJ-6, PRJ-7): shares and quotas hold jobs back, never their queue ----------

from xced.model.project import ProjectConfig, ProjectsConfig, ShareTerm  # noqa: E402

PROJECTS = ProjectsConfig(projects=[
    ProjectConfig(path="/physics", share_percent=50),
    ProjectConfig(path="/physics/hep", share={"slots": ShareTerm(amount=16)}, quota={"slots": 12},
                  member_quota={"slots": 8}),
    ProjectConfig(path="/physics/astro"),
    ProjectConfig(path="/bio", share_percent=25, quota={"mem_mb": 4096}),
    ProjectConfig(path="/chem"),  # no share: the cluster's unassigned part, 25%
])


def pjob(jid, project, user, nmin=1, nmax=None, queue="normal", R=""):
    return JobSnap(jid, 0, queue, float(jid), nmin, nmax or nmin, parse(R), project=project, user=user)


def prun(hosts, jobs, usage=(), queues=QUEUES, projects=PROJECTS):
    return schedule(Snapshot(hosts, queues, jobs, projects=projects, usage=list(usage)), 1000.0)


def test_a_job_over_its_quota_pends_naming_the_cap_and_does_not_block_its_queue():
    """32 slots: /physics 16, /physics/hep 16 but a quota of 12, of which 10 run. Job 1 (-n 4)
    would pass it: it pends on the cap; job 2 of /bio, behind it in the same strict FCFS queue,
    starts (as LSF: a job pending on a limit holds nobody up)."""
    usage = [("/physics/hep", "erin", {"slots": 6}), ("/physics/hep", "frank", {"slots": 4})]
    r = prun([host("h1", 32, free=22)], [pjob(1, "/physics/hep", "bob", 4), pjob(2, "/bio", "gina", 4)], usage)
    assert [d.job_id for d in r.dispatches] == [2]
    pr = r.pend_reasons[(1, 0)]
    assert pr.main == "project /physics/hep at quota: 10/12 slots, 4 needed"
    assert pr.caps == (pr.main,) and pr.hosts == [] and "normal" not in r.blocked
    assert "1: pend on project caps: project /physics/hep at quota: 10/12 slots, 4 needed" in [str(t) for t in r.trace]
    # a quota pend says nothing of the request: it is not cached as unsatisfiable (SCHED-2)
    assert r.unsatisfiable == {}


def test_every_cap_in_the_way_reaches_the_reason():
    usage = [("/physics/hep", "bob", {"slots": 8}), ("/physics/hep", "erin", {"slots": 4}),
             ("/physics/astro", "dave", {"slots": 4})]
    r = prun([host("h1", 32, free=16)], [pjob(1, "/physics/hep", "bob", 1)], usage)
    pr = r.pend_reasons[(1, 0)]
    assert pr.caps == ("project /physics/hep at quota: 12/12 slots",
                       "user bob at member_quota of /physics/hep: 8/8 slots",
                       "project /physics at share: 16/16 slots")
    assert pr.main == pr.caps[0] and pr.cause == "quota"
    # astro draws from /physics's unassigned part, which hep's share takes whole
    r = prun([host("h1", 32, free=16)], [pjob(1, "/physics/astro", "dave", 1)], usage)
    assert r.pend_reasons[(1, 0)].caps == ("unassigned part of /physics at share: 4/0 slots",
                                           "project /physics at share: 16/16 slots")


def test_a_task_range_shrinks_to_the_headroom():
    usage = [("/physics/hep", "erin", {"slots": 7})]
    r = prun([host("h1", 32, free=25)], [pjob(1, "/physics/hep", "bob", 2, 8)], usage)
    assert [(d.job_id, d.ntasks) for d in r.dispatches] == [(1, 5)]  # 12 - 7
    assert "1: task range 2,8 cut to 2,5 by the project caps" in [str(t) for t in r.trace]
    # the min does not fit the headroom: it pends on the cap
    r = prun([host("h1", 32, free=25)], [pjob(1, "/physics/hep", "bob", 6, 8)], usage)
    assert r.pend_reasons[(1, 0)].main == "project /physics/hep at quota: 7/12 slots, 6 needed"


def test_a_dispatch_takes_its_use_before_the_next_job_is_decided():
    jobs = [pjob(1, "/physics/hep", "bob", 6), pjob(2, "/physics/hep", "erin", 6), pjob(3, "/physics/hep", "ivan", 6)]
    r = prun([host("h1", 32)], jobs)
    assert [d.job_id for d in r.dispatches] == [1, 2]
    assert r.pend_reasons[(3, 0)].main == "project /physics/hep at quota: 12/12 slots"
    # member_quota over several jobs of one user: 8
    jobs = [pjob(1, "/physics/hep", "bob", 5), pjob(2, "/physics/hep", "bob", 5), pjob(3, "/bio", "bob", 5)]
    r = prun([host("h1", 32)], jobs)
    assert [d.job_id for d in r.dispatches] == [1, 3]
    assert r.pend_reasons[(2, 0)].main == "user bob at member_quota of /physics/hep: 5/8 slots, 5 needed"


def test_a_job_decided_with_its_group_is_still_held_to_its_own_caps_after_a_dispatch():
    """Issue 19 with PRJ-7: identical jobs are decided as a group only while their own
    project's caps leave them their whole range, and a dispatch between them counts: bob's
    job 6 is like jobs 1-3 and 5 (-n 4 on no host that exists: can never start), but bob's
    job 4 took 5 of his member_quota of 8 meanwhile, so job 6 pends on that cap, not with the
    group's reason; alice, with her quota untouched, keeps the group's."""
    never = parse("select[type==nosuch]")  # one object, as the controller gives jobs of one requirement

    def nj(jid, user):
        return JobSnap(jid, 0, "normal", float(jid), 4, 4, never, project="/physics/hep", user=user)

    jobs = [nj(1, "bob"), nj(2, "bob"), nj(3, "bob"), pjob(4, "/physics/hep", "bob", 5), nj(5, "alice"),
            nj(6, "bob")]
    r = prun([host("h1", 32)], jobs)
    assert [d.job_id for d in r.dispatches] == [4]
    for k in (1, 2, 3, 5):
        assert "can never start" in (r.pend_reasons[(k, 0)].hint or ""), k
    assert r.pend_reasons[(6, 0)].main == "user bob at member_quota of /physics/hep: 5/8 slots, 4 needed"


def test_jobs_held_by_the_same_cap_share_its_reason_until_a_dispatch_changes_the_use():
    """PRJ-6, PRJ-7: bob's jobs 2 and 3 are held by his member_quota of 8 (5 used); job 4 of
    erin takes 4 more of /physics/hep's quota of 12, so bob's job 5, held like them, is told
    of both caps now, with the numbers after that dispatch."""
    jobs = [pjob(1, "/physics/hep", "bob", 5), pjob(2, "/physics/hep", "bob", 5), pjob(3, "/physics/hep", "bob", 5),
            pjob(4, "/physics/hep", "erin", 4), pjob(5, "/physics/hep", "bob", 5)]
    r = prun([host("h1", 32)], jobs)
    assert [d.job_id for d in r.dispatches] == [1, 4]
    member = "user bob at member_quota of /physics/hep: 5/8 slots, 5 needed"
    assert r.pend_reasons[(2, 0)].caps == r.pend_reasons[(3, 0)].caps == (member,)
    assert r.pend_reasons[(5, 0)].caps == ("project /physics/hep at quota: 9/12 slots, 5 needed", member)


def test_the_plans_memory_is_held_to_the_caps_too():
    """/bio's quota is 4096 MB: 8 tasks of 1 GB each would pass it; the range shrinks to 4,
    and a fixed -n 8 pends naming the memory."""
    hosts = [host("h1", 16, mem=65536), host("h2", 16, mem=65536)]
    r = prun(hosts, [pjob(1, "/bio", "gina", 1, 8, R="rusage[mem=1024]")])
    assert [(d.ntasks, d.reserve) for d in r.dispatches] == [(4, {"h1": {"slots": 4, "mem": 1024 * 4}})]
    r = prun(hosts, [pjob(1, "/bio", "gina", 8, R="rusage[mem=1024]"), pjob(2, "/bio", "gina", 2)])
    assert r.pend_reasons[(1, 0)].main == "project /bio at quota: 0/4096 MB of memory, 8192 needed"
    assert [d.job_id for d in r.dispatches] == [2]


def test_the_unsatisfiable_cache_never_carries_a_cap_to_another_project():
    """SCHED-2 with caps: a quota pend is never cached, so job 2 of another project with the
    same request is placed; a request proved unable to start (job 3, more than the free
    slots) is skipped for job 4 of another project, which gets the host reason it proved."""
    usage = [("/physics/hep", "erin", {"slots": 12})]
    jobs = [pjob(1, "/physics/hep", "bob", 4), pjob(2, "/bio", "gina", 4),
            pjob(3, "/bio", "gina", 10, queue="low"), pjob(4, "/chem", "carl", 10, queue="low")]
    r = prun([host("h1", 64, free=12)], jobs, usage, queues=[QueueSnap("normal", 30, 0, backfill=True),
                                                            QueueSnap("low", 10, 1, backfill=True)])
    assert [d.job_id for d in r.dispatches] == [2]
    assert r.pend_reasons[(1, 0)].main == "project /physics/hep at quota: 12/12 slots"
    assert r.pend_reasons[(3, 0)].main == "Not enough free slots: 8 free on matching hosts, the job needs 10"
    assert r.pend_reasons[(4, 0)].main == r.pend_reasons[(3, 0)].main and r.pend_reasons[(4, 0)].caps == ()
    assert "4: no plan generated: skipped, same request as 3 proved unsatisfiable earlier this session" in \
        [str(t) for t in r.trace]
    assert all(not pr.caps for pr in r.unsatisfiable.values())


def test_a_capped_job_never_becomes_a_backfill_head():
    usage = [("/physics/hep", "erin", {"slots": 12})]
    running = [RunSnap(90, 0, 2000.0, {"h1": {"slots": 12}})]
    snap = Snapshot([host("h1", 24, free=12)], BF, [pjob(1, "/physics/hep", "bob", 2), pjob(2, "/bio", "gina", 2)],
                    {}, running, projects=PROJECTS, usage=usage)
    r = schedule(snap, 1000.0)
    assert [d.job_id for d in r.dispatches] == [2] and r.reservations == [] and r.heads == {}


def test_open_mode_and_jobs_without_a_project_are_never_capped():
    jobs = [job(1, 8), job(2, 8)]
    plain = run([host("h1", 16)], jobs)
    for projects in (None, ProjectsConfig()):
        got = prun([host("h1", 16)], [job(1, 8), job(2, 8)], projects=projects)
        assert [(d.job_id, d.alloc) for d in got.dispatches] == [(d.job_id, d.alloc) for d in plain.dispatches]
    # projects defined, but these jobs have none (old records): never capped
    got = prun([host("h1", 16)], [job(1, 8), job(2, 8)], usage=[("/bio", "x", {"slots": 4})])
    assert [d.job_id for d in got.dispatches] == [1, 2]


def test_a_job_whose_memory_no_cap_leaves_room_for_pends_on_the_cap_before_any_search():
    """PRJ-7: /bio's quota is 4096 MB and 3 GB of it run; a job needing 2 GB pends naming the
    memory cap, not the hosts' free memory (which is short too), and, held by its caps, it
    heads no backfill reservation and blocks nobody in its queue."""
    hosts = [host("h1", 16, free=15, mem=4096, memfree=1024)]  # hank's job holds 3 GB of it
    usage = [("/bio", "hank", {"slots": 1, "mem_mb": 3072})]
    queues = [QueueSnap("normal", 30, 0, backfill=True)]
    r = prun(hosts, [pjob(1, "/bio", "gina", 1, R="rusage[mem=2048]"), pjob(2, "/chem", "carl", 1)], usage,
             queues=queues)
    pr = r.pend_reasons[(1, 0)]
    assert pr.main == "project /bio at quota: 3072/4096 MB of memory, 2048 needed" and pr.hosts == []
    assert "1" not in r.heads and [d.job_id for d in r.dispatches] == [2]


def test_a_session_that_starts_a_job_behind_one_it_pended_says_its_reasons_may_be_stale():
    """SCHED-3: a session decides jobs in order, so head 1's "2 free" was given before job 2
    backfilled into those slots: the session says so (`stale`), and the controller decides
    the pending jobs again later (xced.controller.dispatch, pend_reason_update)."""
    running = [RunSnap(90, 0, 1100.0, {"h1": {"slots": 8}})]
    r = brun([host("h1", 10, free=2)], [bjob(1, 10, 50), bjob(2, 2, 50)], running)
    assert [d.job_id for d in r.dispatches] == [2]
    assert r.pend_reasons[(1, 0)].main == "Not enough free slots: 2 free on matching hosts, the job needs 10"
    assert r.stale
    # the next session, on the state after that dispatch, tells head 1 what is free now
    again = brun([host("h1", 10, free=0)], [bjob(1, 10, 50)],
                 running + [RunSnap(2, 0, 1050.0, {"h1": {"slots": 2}})])
    assert again.pend_reasons[(1, 0)].main == "Not enough free slots: 0 free on matching hosts, the job needs 10"
    assert not again.stale


def test_dispatches_before_any_pend_and_held_jobs_leave_the_reasons_current():
    """Only a dispatch after a job that pended makes a reason stale: dispatches first, then
    pends, are decided on the state those dispatches left; a held job decides nothing."""
    assert not run([host("h1", 4)], [job(1, 2), job(2, 2), job(3, 1)]).stale  # 1, 2 start; 3 pends after
    r = run([host("h1", 4)], [job(1, 1, held=True), job(2, 2)])
    assert [d.job_id for d in r.dispatches] == [2] and not r.stale
    assert not run([host("h1", 4, free=0)], [job(1, 1), job(2, 1)]).stale  # nothing starts
    r = run([host("h1", 4, free=1)], [job(1, 2, queue="high"), job(2, 1)])  # 1 pends, 2 starts in its queue
    assert [d.job_id for d in r.dispatches] == [2] and r.stale

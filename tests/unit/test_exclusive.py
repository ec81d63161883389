"""Exclusive jobs in the planner and the scheduler session, no daemon (issue 18 part 4, CLI-8,
RES-6, SCHED-1). LSF's rule (IBM bsub -x page and "Exclusive scheduling"; docs/lsf-behaviour.md
section 6): an exclusive job is dispatched only to hosts where no other job is running, and
while it runs no other job is dispatched to those hosts.
"""

from __future__ import annotations

from xced.resreq import parse
from xced.scheduler.placement import HostSupply, PlacementRequest, Plan, Shortfall, never_satisfiable, place
from xced.scheduler.session import schedule
from xced.scheduler.snapshot import JobSnap, QueueSnap, RunSnap, Snapshot


def host(name, slots, free=None, njobs=0, exclusive=False, mem=8192):
    return HostSupply(name, slots, slots if free is None else free, mem, mem, njobs=njobs, exclusive=exclusive)


def xreq(n, rr="", exclusive=True):
    return PlacementRequest(n, n, parse(rr), None, exclusive)


def test_exclusive_job_skips_a_busy_host_and_holds_the_idle_one_whole():
    """bsub -x (IBM bsub -x): only a host with no job running is a candidate, even when the
    busy host has more free slots; the plan holds every slot of the host it uses."""
    got = place(xreq(1), [host("h1", 8, 7, njobs=1), host("h2", 4)])
    assert isinstance(got, Plan)
    assert got.alloc == [("h2", 1)]
    assert got.reserve == {"h2": {"slots": 4}}
    assert got.held_slots == 4 and got.ntasks == 1


def test_exclusive_job_pends_with_the_busy_host_named():
    """The exclusive job's pend reason names the host and what runs there (RES-6; LSF
    bjobs -l shows why an exclusive job pends)."""
    got = place(xreq(1), [host("h1", 4, 3, njobs=1)])
    assert isinstance(got, Shortfall) and not got.never
    assert got.main == "exclusive job: host h1 has 1 job running"
    assert [h.message for h in got.hosts] == ["exclusive job: host h1 has 1 job running"]
    assert got.hint == "waits for a host where no job runs"
    # without a job count (a simulator's hosts), the slots in use are named
    got = place(xreq(1), [host("h1", 4, 1), host("h2", 2, 0, njobs=2)])
    assert got.main == ("exclusive job: host h1 has 3 of 4 slots in use; "
                        "exclusive job: host h2 has 2 jobs running")
    assert [h.message for h in got.hosts] == ["exclusive job: host h1 has 3 of 4 slots in use",
                                              "exclusive job: host h2 has 2 jobs running"]


def test_a_host_running_an_exclusive_job_takes_nothing_else():
    """While an exclusive job runs, no other job is dispatched to its host (IBM "Exclusive
    scheduling"), whatever its free slots say, and the pend reason says why."""
    hosts = [host("h1", 4, 3, njobs=1, exclusive=True)]
    got = place(PlacementRequest(1, 1), hosts)
    assert isinstance(got, Shortfall)
    assert got.main == "host h1 runs an exclusive job"
    assert [h.message for h in got.hosts] == ["host h1 runs an exclusive job"]
    assert got.hint == "waits for the exclusive job to end"
    # beside a free host, the other job goes there
    got = place(PlacementRequest(2, 2), hosts + [host("h2", 2)])
    assert isinstance(got, Plan) and got.alloc == [("h2", 2)]


def test_never_satisfiable_ignores_exclusivity():
    """The submit-time check (MERGE-2) judges an idle cluster: an exclusive job is never
    refused because a host is busy now; one larger than any host set is."""
    assert never_satisfiable(xreq(2, "span[hosts=1]"), [host("h1", 4, 0, njobs=3)]) is None
    assert never_satisfiable(xreq(8), [host("h1", 4)]) is not None


def job(jid, n=1, t=None, exclusive=False, run_limit=None):
    return JobSnap(jid, 0, "normal", float(jid if t is None else t), n, n, parse(""), run_limit_s=run_limit,
                   exclusive=exclusive)


def test_session_exclusive_then_others_pend_with_the_reason():
    """One session: the exclusive job starts on the idle host and holds all of it; the next
    job, which would fit the free slots, pends with "host h1 runs an exclusive job"
    (docs/lsf-behaviour.md section 6)."""
    snap = Snapshot([host("h1", 4)], [QueueSnap("normal", 0, 0, backfill=True)], [job(1, exclusive=True), job(2)])
    res = schedule(snap, 100.0)
    assert [(d.job_id, d.alloc, d.reserve) for d in res.dispatches] == [(1, [("h1", 1)], {"h1": {"slots": 4}})]
    assert res.pend_reasons[(2, 0)].main == "host h1 runs an exclusive job"


def test_session_exclusive_head_reserves_the_busy_host_and_backfill_respects_it():
    """An exclusive job behind a running job pends with its reason and, in a backfilling
    queue, gets a reservation from that job's end (SCHED-1 with bsub -x): a later long job
    that would take the reserved host pends, a short one that ends by then backfills."""
    hosts = [host("h1", 4, 3, njobs=1), host("h2", 2)]
    running = [RunSnap(9, 0, 1000.0, {"h1": {"slots": 1}})]
    snap = Snapshot(hosts, [QueueSnap("normal", 0, 0, backfill=True)],
                    [job(1, n=3, exclusive=True, run_limit=600), job(2, n=1, run_limit=5000),
                     job(3, n=1, run_limit=500)], running=running)
    res = schedule(snap, 100.0)
    head = res.pend_reasons[(1, 0)]
    assert [h.message for h in head.hosts] == ["exclusive job: host h1 has 1 job running"]
    assert [r.start for r in res.reservations] == [1000.0]
    assert res.pend_reasons[(2, 0)].main.startswith("Would delay job 1")
    assert [(d.job_id, d.alloc, d.backfill) for d in res.dispatches] == [(3, [("h1", 1)], True)]


def test_session_backfill_leaves_the_hosts_of_a_running_exclusive_job_alone_until_it_ends():
    """A running exclusive job holds its host whole (its reserve), so a head that needs that
    host is reserved from the exclusive job's end, not before (IBM "Exclusive scheduling")."""
    hosts = [host("h1", 4, 0, njobs=1, exclusive=True)]
    running = [RunSnap(9, 0, 700.0, {"h1": {"slots": 4}})]
    snap = Snapshot(hosts, [QueueSnap("normal", 0, 0, backfill=True)], [job(1, n=2, run_limit=60)],
                    running=running)
    res = schedule(snap, 100.0)
    assert res.pend_reasons[(1, 0)].main == "host h1 runs an exclusive job"
    assert [r.start for r in res.reservations] == [700.0]
    assert res.dispatches == []


def test_exclusive_request_is_its_own_sched2_cache_entry():
    """SCHED-2: a proof that an exclusive -n 1 cannot start does not decide a plain -n 1 of
    another queue, which starts on the busy host's free slot."""
    hosts = [host("h1", 2, 1, njobs=1), host("h2", 2)]
    queues = [QueueSnap("a", 30, 0), QueueSnap("b", 20, 1), QueueSnap("c", 10, 2)]
    jobs = [JobSnap(1, 0, "a", 1.0, 1, 1, exclusive=True), JobSnap(2, 0, "b", 2.0, 1, 1, exclusive=True),
            JobSnap(3, 0, "c", 3.0, 1, 1)]
    res = schedule(Snapshot(hosts, queues, jobs), 100.0)
    assert [(d.job_id, d.alloc) for d in res.dispatches] == [(1, [("h2", 1)]), (3, [("h1", 1)])]
    assert res.pend_reasons[(2, 0)].main == ("exclusive job: host h1 has 1 job running; "
                                             "host h2 runs an exclusive job")
    assert [h.message for h in res.pend_reasons[(2, 0)].hosts] == ["exclusive job: host h1 has 1 job running",
                                                                   "host h2 runs an exclusive job"]


def test_a_recorded_session_replays_exclusivity():
    """The simulator's replay of a recorded session (D-4) sees what the live one saw: the
    host running an exclusive job, its job count, and the exclusive pending job; a row of a
    recording made before bsub -x reads as before."""
    from xced.sim.recording import snapshot_from_json, snapshot_to_json

    snap = Snapshot([host("h1", 4, 0, njobs=1, exclusive=True), host("h2", 2, 1, njobs=1), host("h3", 2)],
                    [QueueSnap("normal", 0, 0)], [job(1, exclusive=True), job(2)])
    back = snapshot_from_json(snapshot_to_json(snap))
    assert [(h.name, h.njobs, h.exclusive) for h in back.hosts] == [("h1", 1, True), ("h2", 1, False),
                                                                   ("h3", 0, False)]
    assert [j.exclusive for j in back.pending] == [True, False]
    assert schedule(back, 1.0).pend_reasons == schedule(snap, 1.0).pend_reasons
    old = snapshot_to_json(snap)
    old["hosts"][0] = old["hosts"][0][:10]
    assert snapshot_from_json(old).hosts[0].exclusive is False


def test_the_flag_survives_the_store_and_an_old_record_has_none():
    """A job's record (D-5) keeps -x, so a restarted daemon still places it exclusively; a
    record written before -x existed reads as not exclusive."""
    from xced.model.spec import from_record, to_record

    rec = {"argv": ["true"], "run_as": "u", "ntasks_min": 1, "exclusive": True}
    spec, eff = from_record(rec)
    assert spec.exclusive is True
    again = to_record(spec, eff)
    assert again["exclusive"] is True and from_record(again)[0].exclusive is True
    del rec["exclusive"]
    spec, eff = from_record(rec)
    assert spec.exclusive is False and "exclusive" not in to_record(spec, eff)


def test_a_pack_line_and_a_directive_take_x(tmp_path):
    """`-x` on a pack line (LSF bsub -pack lines are bsub's options) and `#BSUB -x` in a
    script (JOB-12) give the submit body's exclusive flag; without it the body has none."""
    from xcecli.submitting import pack_bodies, script_values

    bodies, numbers = pack_bodies("-x -- true\n-n 2 -- true\n", "pack.txt", {"PATH": "/usr/bin:/bin"},
                                  str(tmp_path), 0o022)
    assert [b.get("exclusive") for b in bodies] == [True, None] and numbers == [1, 2]
    values, lines, _ = script_values("#!/bin/sh\n#BSUB -n 2\n#BSUB -x\necho hi\n", "job.lsf")
    assert values["exclusive"] is True and lines["exclusive"] == [3]

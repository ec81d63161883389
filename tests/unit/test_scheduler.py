"""Scheduler v1 over plain snapshots, no daemon (D-4, SCHED-1 FCFS, RES-3 task range, RES-6)."""

from __future__ import annotations

from xced.resreq import parse
from xced.scheduler.session import schedule
from xced.scheduler.snapshot import HostSnap, JobSnap, QueueSnap, Snapshot


def host(name, slots, free=None, mem=8192, memfree=None, status="ok"):
    return HostSnap(name, slots, slots if free is None else free, mem, mem if memfree is None else memfree, status)


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

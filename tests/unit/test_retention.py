"""Retention of finished jobs (issue 15; LSF CLEAN_PERIOD, Slurm MinJobAge) and environments
kept out of memory, on a real Controller over a real SQLite store: a finished job leaves
memory clean_period after its last element ended, stays in the store, and is read back for
show, hist and jobs -a; a restart loads only what is unfinished or lately finished; a job an
unfinished job's -w names is kept."""

from __future__ import annotations

import asyncio

import pytest

from xced.api.errors import NotFound
from xced.controller.controller import Controller
from xced.model.config import ClusterConfig, ClusterSettings, HostConfig, QueueConfig
from xced.model.state import EndStatus
from xced.store.sqlite import SqliteStore

from tests.unit.test_controller import ALICE, BOB, Clock, FakeWorker, req


def _cfg(clean: float = 600.0) -> ClusterConfig:
    return ClusterConfig(settings=ClusterSettings(mode="test", clean_period_s=clean, max_array_size=1000),
                         queues=[QueueConfig(name="normal")], hosts=[HostConfig(name="h1", slots=2, memory_mb=1000)])


def _open(store, tmp_path, clock, clean=600.0) -> Controller:
    c = Controller(_cfg(clean), store, tmp_path, clock=clock)
    c.attach_worker(FakeWorker())
    return c


def _end(c, jid, idx=0, at=1001.0, code=0):
    c.on_finished(jid, idx, EndStatus(code, None, 1000.0, at, None))


@pytest.fixture
def parts(tmp_path):
    store = SqliteStore(tmp_path / "db")
    clock = Clock()
    yield store, clock
    store.close()


def test_a_finished_job_leaves_memory_after_the_clean_period_and_is_read_back(parts, tmp_path):
    store, clock = parts
    c = _open(store, tmp_path, clock)
    done = c.submit(req(env={"SECRET": "s1"}), ALICE)
    running = c.submit(req(), ALICE)
    c.run_session()
    _end(c, done.id, at=1001.0)
    clock.t = 1001.0 + 599  # within the clean period: kept
    assert c.purge_finished() == 0 and done.id in c.jobs
    clock.t = 1001.0 + 601
    assert c.purge_finished() == 1
    assert done.id not in c.jobs and running.id in c.jobs  # a running job is never purged
    assert [j.id for j in c.find_jobs("alice", None, None, False)] == [running.id]
    with pytest.raises(NotFound):
        c.job(done.id)  # until a route recalls it
    asyncio.run(c.recall(done.id))
    back = c.job(done.id)
    assert back.elements[0].state == "DONE" and back.elements[0].end_time == 1001.0
    assert c.job_env(back) == {"SECRET": "s1"}  # its environment, from the store
    assert [r[3] for r in c.job_events(done.id)] == ["SUBMIT", "DISPATCH", "DONE"]  # hist
    assert back.id not in c.jobs  # recalled is not loaded: the scheduler never sees it
    listed = asyncio.run(c.stored_jobs("alice", None, None, None))  # jobs -a
    assert [j.id for j in listed] == [done.id]
    assert asyncio.run(c.stored_jobs("bob", None, None, None)) == []
    asyncio.run(c.recall(10**9))  # an unknown job stays unknown
    with pytest.raises(NotFound):
        c.job(10**9)


def test_a_restart_loads_only_unfinished_and_lately_finished_jobs(parts, tmp_path):
    store, clock = parts
    c = _open(store, tmp_path, clock)
    old = c.submit(req(), ALICE)
    late = c.submit(req(), BOB)
    pending = c.submit(req(ntasks_min=2), ALICE)  # waits for both slots
    c.run_session()
    _end(c, old.id, at=1001.0)
    _end(c, late.id, at=1500.0)
    clock.t = 1700.0  # old ended 699 s ago (out), late 200 s ago (in)
    c2 = _open(store, tmp_path, clock)
    assert sorted(c2.jobs) == sorted([late.id, pending.id])
    assert sorted(c2.active) == [pending.id]
    asyncio.run(c2.recall(old.id))
    assert c2.job(old.id).elements[0].state == "DONE"


def test_a_job_a_pending_dependency_names_is_kept_past_the_clean_period(parts, tmp_path):
    """JOB-5: `-w` of an unfinished job is evaluated against the jobs it names, so they stay."""
    store, clock = parts
    c = _open(store, tmp_path, clock)
    a = c.submit(req(), ALICE)
    b = c.submit(req(), ALICE)
    c.run_session()
    waiter = c.submit(req(dependency=f"done({a.id}) && done({b.id})"), ALICE)
    _end(c, a.id, at=1001.0)
    clock.t = 5000.0
    c.purge_finished()
    assert a.id in c.jobs and waiter.id in c.jobs
    c2 = _open(store, tmp_path, clock)  # a restart loads it again for the waiter's sake
    assert a.id in c2.jobs and c2.jobs[a.id].elements[0].state == "DONE"


def test_clean_period_zero_purges_at_the_next_sweep_and_arrays_go_whole(parts, tmp_path):
    store, clock = parts
    c = _open(store, tmp_path, clock, clean=0.0)
    arr = c.submit(req(name="a[1-50]"), ALICE)
    c.kill(arr.id, None, ALICE)  # every element EXIT while pending
    assert arr.finished()
    clock.t += 1
    assert c.purge_finished() == 1 and arr.id not in c.jobs
    asyncio.run(c.recall(arr.id))
    assert {e.state for e in c.job(arr.id).elements.values()} == {"EXIT"}
    assert len(c.job(arr.id).elements) == 50


def test_element_references_fold_into_ranges_for_a_message():
    """A killed array's message names its indices as LSF writes them, not one by one."""
    from xced.model.jobs import format_refs

    assert format_refs(["5[1]", "5[2]", "5[3]", "5[7]", "6", "7[2]", "7[4]", "7[5]"]) == "5[1-3,7], 6, 7[2,4-5]"
    assert format_refs([f"9[{i}]" for i in range(1, 100_001)]) == "9[1-100000]"
    assert format_refs([]) == "" and format_refs(["12"]) == "12"


def test_a_purged_job_requeued_is_live_again_and_scheduled(parts, tmp_path):
    """brequeue of a job that left memory: it pends again, is listed and runs (it stayed PEND,
    unlisted and unscheduled until a restart)."""
    store, clock = parts
    c = _open(store, tmp_path, clock)
    j = c.submit(req(resreq=["rusage[mem=100]"]), ALICE)
    c.run_session()
    _end(c, j.id, at=1001.0)
    clock.t = 2000.0
    assert c.purge_finished() == 1
    asyncio.run(c.recall(j.id))
    assert c.job(j.id).resreq is not None  # show's reserve lines need it (they were lost)
    c.requeue(j.id, None, ALICE)
    assert j.id in c.jobs and j.id in c.active and j.id not in c._recalled
    assert [x.id for x in c.find_jobs("alice", None, None, False)] == [j.id]
    c.run_session()
    assert c.job(j.id).elements[0].state == "RUN"


def test_a_dependency_on_a_purged_job_is_worked_out_from_its_record(parts, tmp_path):
    """JOB-5: -w naming a job that left memory is taken (it was refused "does not exist"), and
    the job it names is kept from then on, so the condition is met at once."""
    store, clock = parts
    c = _open(store, tmp_path, clock)
    a = c.submit(req(), ALICE)
    c.run_session()
    _end(c, a.id, at=1001.0)
    clock.t = 2000.0
    c.purge_finished()
    text = f"done({a.id})"
    asyncio.run(c.recall_refs(text))
    b = c.submit(req(dependency=text), ALICE)
    assert a.id in c.jobs and c.purge_finished() == 0  # named by an unfinished job: kept
    c.run_session()
    assert b.elements[0].state == "RUN"

"""The controller's sessions on a busy event loop and its host view (issue 19 parts 3 and 4;
D-4, DISPATCH-1, DISPATCH-2, SCHED-1): in-process, the daemon's own Controller with a real
SQLite store and fake worker links whose start() records the call, as in test_controller.py.

- A session with much to decide is computed off the event loop and applied on it in
  slices, so the loop keeps answering while an idle cluster of many hosts fills; each slice
  re-checks its decisions against the state of its own time (DISPATCH-2): a job killed or a
  host closed meanwhile is never dispatched to, nothing is dispatched twice, and a session
  asked for meanwhile runs after, on what was applied (D-4: sessions run on events).
- The scheduler's host view is kept up to date as hosts join and leave and jobs start and
  end, and always equals a view made afresh from the hosts.

The issue's aim (the loop never blocked more than 50 ms at a time while 5,000 hosts fill) is
measured by bench/sched.py, not asserted here: the bound below (1 s) only catches a loop
frozen for the whole fill, as it was before (57 s at 5,000 hosts, about 2 s at 400).
LSF reference: in LSF the scheduler is a process of its own (mbschd) beside mbatchd, which
keeps answering bjobs and bsub while a scheduling cycle runs (IBM Spectrum LSF 10.1, "LSF
daemons": mbschd); issue 19 sets XCE's aims against LSF's (a cycle capped at 45 s).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tests.unit.test_controller import ADMIN, ALICE, Clock, FakeWorker, end, req, session
from xced.api.peer import Join
from xced.controller import dispatch
from xced.controller.controller import Controller
from xced.model.config import ClusterConfig, ClusterSettings, HostConfig, QueueConfig
from xced.scheduler.snapshot import host_order_key
from xced.store.sqlite import SqliteStore


class Link(FakeWorker):
    """A fake worker link for one host, recording each start in a list shared by all hosts."""

    def __init__(self, host, log):
        super().__init__()
        self.host, self.log = host, log

    def start(self, info):
        super().start(info)
        self.log.append((info.job_id, info.index, info.alloc[0][0]))


def cluster(tmp_path, nhosts, slots=4):
    cfg = ClusterConfig(settings=ClusterSettings(mode="test"), queues=[QueueConfig(name="normal")],
                        hosts=[HostConfig(name=f"h{i:04d}", slots=slots, memory_mb=16_000) for i in range(nhosts)])
    c = Controller(cfg, SqliteStore(tmp_path / "db"), tmp_path)
    started: list = []
    c.links = {h.name: Link(h.name, started) for h in cfg.hosts}
    for link in c.links.values():
        c.attach_worker(link)
    return c, started


def fill(c, on_tick, timeout=120.0):
    """Kick one session on a running loop and probe the loop every millisecond until no
    session is busy or asked for; `on_tick(c)` runs at each probe. Returns the probe's
    longest gap beyond its sleep (s) and how many probes ran while a session was busy."""
    async def main():
        loop = asyncio.get_running_loop()
        lag, busy_ticks, t0 = 0.0, 0, time.monotonic()
        c.kick()
        while c.session_asked or c._session_busy:
            assert time.monotonic() - t0 < timeout, "the fill did not end"
            t = loop.time()
            await asyncio.sleep(0.001)
            lag = max(lag, loop.time() - t - 0.001)
            busy_ticks += c._session_busy
            on_tick(c)
        return lag, busy_ticks
    return asyncio.run(main())


def per_host(started):
    out: dict[str, int] = {}
    for _, _, h in started:
        out[h] = out.get(h, 0) + 1
    return out


@pytest.mark.timeout(120)
def test_the_loop_keeps_answering_while_an_idle_cluster_of_250_hosts_fills(tmp_path):
    """Issue 19 part 3 (D-4, loop-lag probe): 1,000 pending jobs (an array of 990 elements
    and 10 single jobs: JOB-4, each element a job to the scheduler) on 250 idle hosts of 4
    slots fill the cluster in one session computed off the loop; a probe task on the loop
    keeps running all through it (its longest gap bounded generously: 1 s), and every job
    starts exactly once, 4 to a host (RES-2)."""
    c, started = cluster(tmp_path, 250)
    jobs = [c.submit(req(name="fill[1-990]"), ALICE)] + [c.submit(req(), ALICE) for _ in range(10)]
    want = sorted((j.id, i) for j in jobs for i in j.elements)
    assert len(want) == 1000
    lag, busy_ticks = fill(c, lambda c: None)
    assert busy_ticks >= 1, "the loop answered nothing while the session was busy"
    assert lag < 1.0, f"the event loop was blocked for {lag:.2f} s during the fill"
    assert sorted((j, i) for j, i, _ in started) == want  # each once
    assert set(per_host(started).values()) == {4} and len(per_host(started)) == 250
    assert all(e.state == "RUN" for j in jobs for e in j.elements.values())
    assert all(h.slots_used == 4 for h in c.hosts.values())


@pytest.mark.timeout(120)
def test_each_slice_rechecks_its_decisions_and_a_session_asked_meanwhile_runs_after(tmp_path, monkeypatch):
    """Issue 19 part 3, DISPATCH-2, D-4: with slices of 64 decisions (SLICE_S 0), a job killed
    while the session is computed and one killed between two slices are never started; a
    host closed between two slices gets nothing more; jobs submitted meanwhile start in the
    session that runs after this one, which sees what it applied (no host over its 4 slots);
    nothing starts twice."""
    monkeypatch.setattr(dispatch, "SLICE_S", 0.0)
    # the real scheduler decides; its thread hands the decisions back only once the loop has
    # killed a job they dispatch (however fast the scheduler is, the kill comes in between)
    gate, schedule = threading.Event(), dispatch.schedule

    def decide_then_wait(snap, now):
        out = schedule(snap, now)
        if len(snap.pending) == 360:  # the first, large session (the next is small: on the loop)
            assert threading.current_thread() is not threading.main_thread(), "decided on the loop's thread"
            assert gate.wait(30), "the loop never ran while the scheduler's thread decided"
        return out

    monkeypatch.setattr(dispatch, "schedule", decide_then_wait)
    c, started = cluster(tmp_path, 100)
    arr = c.submit(req(name="f[1-360]"), ALICE)
    seen = {"computing": None, "between": None, "closed": None, "new": []}

    def on_tick(c):
        if c._session_busy and not started and seen["computing"] is None:  # decided on, not yet applied
            seen["computing"] = (arr.id, 360)
            c.kill(arr.id, 360, ALICE)
            gate.set()

    next_slice = c._next_slice

    def between_slices(*a):
        """What the loop runs after the first slice, before the next (a callback of its own)."""
        if started and seen["between"] is None:
            victim = max(i for i, e in arr.elements.items() if e.state == "PEND")
            c.kill(arr.id, victim, ALICE)
            seen["between"] = (arr.id, victim)
            host = min(sorted(c.hosts), key=lambda h: c.hosts[h].slots_used)  # one with room left
            c.host_control(ADMIN, host, "close", "issue 19 test")
            seen["closed"] = (host, c.hosts[host].slots_used)
            seen["new"] = [c.submit(req(), ALICE) for _ in range(10)]
        return next_slice(*a)

    c._next_slice = between_slices
    lag, busy_ticks = fill(c, on_tick)
    assert seen["computing"] is not None and seen["between"] is not None, "the session was applied in one slice"
    ids = [(j, i) for j, i, _ in started]
    assert len(ids) == len(set(ids)), "a job was started twice"
    assert seen["computing"] not in ids and seen["between"] not in ids
    closed, had = seen["closed"]
    assert had < 4 and per_host(started).get(closed, 0) == had, f"a job was started on {closed} after it was closed"
    assert max(per_host(started).values()) == 4
    assert sum(h.slots_used for h in c.hosts.values()) == len(started)
    # the 358 jobs left and the 10 new ones all start (the 99 open hosts have 396 slots); the new
    # ones in a later session, asked for by their submits while this one was applied
    new = {(j.id, 0) for j in seen["new"]}
    assert sorted(ids) == sorted({(arr.id, i) for i in arr.elements} - {seen["computing"], seen["between"]} | new)
    assert ids[-10:] and set(ids[-10:]) == new and c.sessions >= 2
    assert lag < 1.0


def test_the_host_view_kept_up_to_date_equals_one_made_afresh(tmp_path):
    """Issue 19 part 4 (D-4, RES-2): after each of a varied sequence of host joins (known and
    declared at the join, again with other slots), leaves, closes, opens, load reports, job
    starts (single, multi-host, with memory, exclusive), ends, kills and requeues, the
    controller's host view and the snapshot's hosts equal those made afresh from its hosts, and
    so does the host index it keeps beside them (Snapshot.host_order)."""
    cfg = ClusterConfig(settings=ClusterSettings(mode="test"), queues=[QueueConfig(name="normal")],
                        hosts=[HostConfig(name=f"h{i}", slots=4, memory_mb=4000) for i in range(1, 4)])
    c = Controller(cfg, SqliteStore(tmp_path / "db"), tmp_path, clock=Clock())
    links = {f"h{i}": Link(f"h{i}", []) for i in range(1, 4)}
    steps = []

    def check(what):
        steps.append(what)
        fresh = [c._host_supply(h) for h in c.hosts.values()]
        assert c.host_view_now() == fresh, f"after {what}"
        snap = c.snapshot()
        x = {n for j in c.active.values() if j.spec.exclusive for e in j.elements.values()
             if e.state in ("RUN", "USUSP") for n, _ in e.alloc}
        assert [(h.name, h.slots_free, h.mem_free_mb, h.status, h.njobs, h.exclusive) for h in snap.hosts] == \
            [(h.name, h.slots_free, h.mem_free_mb, h.status, h.njobs, h.name in x) for h in fresh], f"after {what}"
        # the host index the controller keeps (issue 19 parts 1, 4; RES-4): exactly the sorted
        # keys of the snapshot's hosts, exclusive ones out, as a session would sort them itself
        assert snap.host_order == sorted(k for k in map(host_order_key, snap.hosts) if k is not None), \
            f"after {what}"

    check("start")
    c.attach_worker(links["h1"])
    c.attach_worker(links["h2"])
    check("joins")
    w = Link("w9", [])
    c.worker_joined(w, Join(host="w9", slots=2, memory_mb=1000, resources={"gpu": 2.0}))
    check("a host declared at its join")
    a = c.submit(req(resreq=["rusage[mem=1000]"]), ALICE)
    b = c.submit(req(ntasks_min=6), ALICE)
    x = c.submit(req(exclusive=True), ALICE)
    session(c)
    assert a.elements[0].state == "RUN" and b.elements[0].state == "RUN"
    assert c.host_view_now()[0].slots_free < 4  # the view moved on with the starts
    check("starts")
    c.attach_worker(links["h3"])
    session(c)
    check("a join and a session")
    end(c, a.id)
    check("an end")
    c.kill(b.id, None, ALICE)
    check("a kill")
    c.requeue(x.id, None, ALICE)
    check("a requeue")
    c.host_load(links["h1"], {"r1m": 0.5, "ut": 0.25})
    check("a load report")
    c.host_control(ADMIN, "h2", "close", "maintenance")
    check("a close")
    c.worker_left(links["h3"])
    check("a leave")
    c.host_control(ADMIN, "h2", "open", None)
    c.worker_joined(links["h3"], Join(host="h3", slots=4, memory_mb=4000))
    c.worker_joined(w, Join(host="w9", slots=8, memory_mb=2000))  # declared again with other slots
    check("reopen, a rejoin, a host declared again")
    more = [c.submit(req(), ALICE) for _ in range(12)]
    session(c)
    check("a full cluster")
    for j in more[:5]:
        end(c, j.id, code=1)
    c.kill(more[5].id, None, ALICE)
    session(c)
    check("ends, a kill and a session")
    assert c.host_view_now()[-1].name == "w9" and c.host_view_now()[-1].slots == 8
    assert len(steps) == 14


@pytest.mark.timeout(120)
def test_a_commit_failing_between_slices_leaves_the_slices_before_and_the_rest_starts_once_it_clears(tmp_path):
    """D-8, DISPATCH-2 with an injected fault: while 1,000 pending jobs fill 250 idle hosts in
    slices, the store refuses three commits in a row (as a full disk would) from the second
    slice's on. The slices committed before stand, the refused one applies nothing, and once
    the store takes writes again the session is retried: every job starts exactly once, 4 to a
    host, and what is in memory is what is in the store."""
    from contextlib import contextmanager

    from xced.api.errors import StoreUnavailable

    c, started = cluster(tmp_path, 250)
    jobs = [c.submit(req(name="fill[1-990]"), ALICE)] + [c.submit(req(), ALICE) for _ in range(10)]
    real_tx, calls, refused = c.store.tx, [0], []

    @contextmanager
    def flaky_tx(durable=False):
        calls[0] += 1
        if 2 <= calls[0] <= 4:
            refused.append((calls[0], len(started)))
            raise StoreUnavailable("the store refused a write: database or disk is full (injected)")
        with real_tx(durable) as db:
            yield db

    c.store.tx = flaky_tx

    async def main():
        t0 = time.monotonic()
        c.kick()
        while len(started) < 1000 or c.session_asked or c._session_busy:
            assert time.monotonic() - t0 < 90, f"{len(started)} of 1000 started"
            await asyncio.sleep(0.01)
    asyncio.run(main())
    assert [n for n, _ in refused] == [2, 3, 4]  # the fault really hit the fill
    assert 0 < refused[0][1] < 1000, refused  # between slices: the first slice's jobs had started
    assert refused[0][1] == refused[-1][1]  # the refused slices started nothing
    assert sorted((j, i) for j, i, _ in started) == sorted((j.id, i) for j in jobs for i in j.elements)
    assert set(per_host(started).values()) == {4} and len(per_host(started)) == 250
    stored = dict(c.store.db.execute("SELECT state, COUNT(*) FROM elements GROUP BY state").fetchall())
    assert stored == {"RUN": 1000}, stored

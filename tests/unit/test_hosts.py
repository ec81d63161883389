"""Lost hosts, fencing and host control in the controller (SCHED-4, CLI-4; issue 16), with a
real store and fake worker links: the host's worker leaves, the daemon's clock passes the
grace period, and each job there is requeued or ended as its profile says; a rejoining
worker's stale copies are killed and their reports ignored; an admin's close, open and
drain are events that a restart keeps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.unit.test_controller import ADMIN, ALICE, Clock, FakeWorker, req, session
from xced.api.errors import Conflict, NotFound, PermissionDenied
from xced.controller.controller import Controller
from xced.model.config import ClusterConfig, ClusterSettings, HostConfig, QueueConfig
from xced.model.jobs import JobState as S
from xced.model.profile import Profile, builtin_profiles
from xced.model.state import EndStatus
from xced.store.sqlite import SqliteStore


class Link(FakeWorker):
    def __init__(self, host: str) -> None:
        super().__init__()
        self.host = host
        self.reattached = []


def _cfg(grace: float = 120.0) -> ClusterConfig:
    apps = {**builtin_profiles(), "again": Profile(name="again", on_host_failure="requeue"),
            "once": Profile(name="once", on_host_failure="exit")}
    return ClusterConfig(settings=ClusterSettings(mode="test", admins=["admin"], host_lost_grace_s=grace),
                         queues=[QueueConfig(name="normal")],
                         hosts=[HostConfig(name="h1", slots=2, memory_mb=1000),
                                HostConfig(name="h2", slots=2, memory_mb=1000)], applications=apps)


@pytest.fixture
def two(tmp_path):
    store = SqliteStore(tmp_path / "db")
    clock = Clock()
    c = Controller(_cfg(), store, tmp_path, clock=clock)
    links = {h: Link(h) for h in ("h1", "h2")}
    for link in links.values():
        c.attach_worker(link)
    c.links, c.test_clock = links, clock
    yield c
    store.close()


def _on(c, jid: int) -> str:
    return c.jobs[jid].elements[0].alloc[0][0]


def _advance(c, seconds: float) -> None:
    c.test_clock.t += seconds


def test_a_host_away_past_its_grace_requeues_or_ends_its_jobs_as_their_profiles_say(two):
    c = two
    a = c.submit(req(app="again", resreq=["span[hosts=1]"], ntasks_min=2), ALICE)
    b = c.submit(req(app="once", resreq=["span[hosts=1]"], ntasks_min=2), ALICE)
    session(c)
    assert {_on(c, a.id), _on(c, b.id)} == {"h1", "h2"}
    lost, kept = _on(c, a.id), _on(c, b.id)
    c.worker_left(c.links[lost])
    assert c.hosts[lost].status == "unavail" and c.hosts[lost].away_since is not None
    _advance(c, 119)
    assert c.check_lost_hosts() == 0 and a.elements[0].state is S.RUN  # within the grace: it runs on
    _advance(c, 2)
    assert c.check_lost_hosts() == 1
    e = a.elements[0]
    assert e.state is S.PEND and e.alloc == [] and c.hosts[lost].slots_used == 0
    ev = [r for r in c.store.events(a.id) if r[3] == "REQUEUE"][-1]
    assert ev[7] == f"requeued: host {lost} lost" and ev[6] == "system"
    assert c.hosts[lost].lost_at is not None and c.hosts[lost].status_reason.startswith("lost: no worker for")
    assert [k[2] for k in c.store.host_events(lost)] == ["lost"]
    assert b.elements[0].state is S.RUN  # its host is still served
    # the other job's host goes too: its profile says exit
    c.worker_left(c.links[kept])
    _advance(c, 121)
    c.check_lost_hosts()
    assert b.elements[0].state is S.EXIT and b.elements[0].exit_reason == f"host {kept} lost"
    assert a.submit_time == c.jobs[a.id].submit_time and a.spec.app == "again"  # same ID, profile, submit time


def test_a_stale_copy_is_killed_at_the_rejoin_and_its_reports_ignored(two):
    c = two
    j = c.submit(req(app="again"), ALICE)
    session(c)
    first = _on(c, j.id)
    other = "h2" if first == "h1" else "h1"
    e = j.elements[0]
    assert e.attempt == 1 and c.links[first].infos[-1].attempt == 1  # the start carries the attempt
    c.worker_left(c.links[first])
    _advance(c, 121)
    c.check_lost_hosts()
    session(c)
    assert _on(c, j.id) == other and e.attempt == 2
    # the lost host comes back, still running attempt 1, and a copy nobody dispatched (job 999)
    link = c.links[first]
    c.worker_joined(link, SimpleNamespace(running=[(j.id, 0, 1), (999, 0, 1)]))
    assert (j.id, 0) in link.killed and (999, 0) in link.killed
    # the stale copy's end is never the job's result
    c.on_finished(j.id, 0, EndStatus(0, None, 1000.0, 1001.0, None), attempt=1)
    assert e.state is S.RUN and _on(c, j.id) == other
    c.on_finished(j.id, 0, EndStatus(0, None, 1000.0, 1002.0, None), attempt=2)
    assert e.state is S.DONE


def test_a_copy_of_the_current_attempt_is_adopted(two):
    c = two
    j = c.submit(req(), ALICE)
    session(c)
    host = _on(c, j.id)
    c.worker_left(c.links[host])
    c.worker_joined(c.links[host], SimpleNamespace(running=[(j.id, 0, 1)]))
    assert c.links[host].killed == [] and j.elements[0].state is S.RUN
    assert c.hosts[host].status == "ok" and c.hosts[host].away_since is None


def test_a_kill_asked_while_away_ends_the_job_at_the_loss(two):
    c = two
    j = c.submit(req(app="again"), ALICE)
    session(c)
    host = _on(c, j.id)
    c.worker_left(c.links[host])
    c.kill(j.id, None, ALICE)
    assert j.elements[0].state is S.RUN  # acknowledged: asked of a worker that is away
    _advance(c, 121)
    c.check_lost_hosts()
    assert j.elements[0].state is S.EXIT and j.elements[0].exit_reason == f"killed by alice; host {host} lost"


def test_a_requeue_by_hand_of_a_job_on_a_host_without_worker_pends_it_at_once(two):
    c = two
    j = c.submit(req(), ALICE)
    session(c)
    host = _on(c, j.id)
    c.worker_left(c.links[host])
    c.requeue(j.id, None, ALICE)
    assert j.elements[0].state in (S.PEND, S.RUN)  # PEND, and the session that follows may start it elsewhere
    session(c)
    assert _on(c, j.id) != host and j.elements[0].attempt == 2


def test_a_multi_host_job_that_loses_a_host_is_requeued_as_a_whole(two):
    c = two
    j = c.submit(req(app="again", ntasks_min=4), ALICE)  # 2 slots on each host
    session(c)
    e = j.elements[0]
    assert sorted(h for h, _ in e.alloc) == ["h1", "h2"]
    head, second = e.alloc[0][0], e.alloc[1][0]
    c.worker_left(c.links[second])
    _advance(c, 121)
    c.check_lost_hosts()
    assert e.state is S.RUN and e.action == f"lost:requeue:{second}" and (j.id, 0) in c.links[head].killed
    c.on_finished(j.id, 0, EndStatus(143, "SIGTERM", 1000.0, 1001.0, "killed"), attempt=1)
    assert e.state is S.PEND and c.hosts[head].slots_used == 0


def test_close_open_and_drain_are_admin_events_kept_across_a_restart(two, tmp_path):
    c = two
    with pytest.raises(PermissionDenied):
        c.host_control(ALICE, "h1", "close", "mine")
    with pytest.raises(NotFound, match="'nope' is not a host"):
        c.host_control(ADMIN, "nope", "close", None)
    out = c.host_control(ADMIN, "h1", "close", "disk swap")
    assert out["changed"] and out["host"]["status"] == "closed_Adm" and out["host"]["closed_by"] == "admin"
    assert out["host"]["closed_reason"] == "disk swap"
    again = c.host_control(ADMIN, "h1", "close", "disk swap")
    assert not again["changed"] and again["message"] == "host h1 is already closed"
    jobs = [c.submit(req(), ALICE) for _ in range(2)]
    session(c)
    assert {_on(c, j.id) for j in jobs} == {"h2"}  # no new dispatch to a closed host
    out = c.host_control(ADMIN, "h2", "drain", "kernel update")
    assert out["host"]["draining"] and out["host"]["status"] == "closed_Adm" and len(out["host"]["jobs"]) == 2
    for j in jobs:
        c.on_finished(j.id, 0, EndStatus(0, None, 1000.0, 1001.0, None), attempt=1)
    assert not c.hosts["h2"].draining and c.hosts["h2"].closed is not None
    assert [k[2] for k in c.store.host_events("h2")] == ["drain", "drained"]
    assert c.host_control(ADMIN, "h1", "open", None)["host"]["status"] == "ok"
    # a restart keeps h2 closed (drained) and h1 open
    c2 = Controller(_cfg(), c.store, tmp_path, clock=Clock())
    for h in ("h1", "h2"):
        c2.attach_worker(Link(h))
    assert c2.hosts["h2"].status == "closed_Adm" and c2.hosts["h1"].status == "ok"
    assert c2.hosts["h2"].closed[1] == "kernel update" and not c2.hosts["h2"].draining


def test_a_host_that_is_down_cannot_be_drained(two):
    c = two
    c.worker_left(c.links["h1"])
    with pytest.raises(Conflict, match="no worker serves it"):
        c.host_control(ADMIN, "h1", "drain", None)
    assert c.host_control(ADMIN, "h1", "close", None)["changed"]


def test_hosts_never_joined_since_the_start_are_lost_after_the_grace(tmp_path):
    """A controller restarted while a worker is down: its jobs are lost a grace period after
    the start, not kept RUN for ever."""
    store = SqliteStore(tmp_path / "db")
    c = Controller(_cfg(), store, tmp_path, clock=Clock())
    link = Link("h1")
    c.attach_worker(link)
    j = c.submit(req(app="once"), ALICE)
    session(c)
    assert _on(c, j.id) == "h1"
    clock = Clock()
    c2 = Controller(_cfg(), store, tmp_path, clock=clock)
    assert c2.jobs[j.id].elements[0].state is S.RUN and c2.hosts["h1"].status == "unavail"
    clock.t += 121
    c2.check_lost_hosts()
    assert c2.jobs[j.id].elements[0].state is S.EXIT
    store.close()


def test_jobs_of_a_host_declared_at_its_join_are_lost_after_a_restart_without_it(tmp_path):
    """A host no hosts.yaml names is unknown to a restarted controller until its worker
    joins; if it never does, its jobs are still lost a grace period after the start."""
    cfg = ClusterConfig(settings=ClusterSettings(mode="test", host_lost_grace_s=120.0),
                        queues=[QueueConfig(name="normal")], hosts=[])
    store = SqliteStore(tmp_path / "db")
    c = Controller(cfg, store, tmp_path, clock=Clock())
    link = Link("w1")
    c.worker_joined(link, SimpleNamespace(slots=2, memory_mb=100, resources={}, attributes={}, tags=[], running=[]))
    j = c.submit(req(), ALICE)
    session(c)
    assert _on(c, j.id) == "w1"
    clock = Clock()
    c2 = Controller(cfg, store, tmp_path, clock=clock)
    assert "w1" not in c2.hosts and c2.check_lost_hosts() == 0
    clock.t += 121
    assert c2.check_lost_hosts() == 1 and c2.jobs[j.id].elements[0].state is S.PEND
    store.close()


def _lock(store_path):
    """Another process's write lock on the store (a real locked SQLite file)."""
    import sqlite3

    other = sqlite3.connect(str(store_path), isolation_level=None, timeout=0)
    other.execute("BEGIN EXCLUSIVE")
    return other


def test_a_locked_store_delays_a_loss_and_a_drain_and_loses_neither(two, tmp_path):
    """Injected fault: the store is locked by another process when the grace period ends and
    when a draining host's last job ends. Nothing changes in memory that the store did not
    take; the next look (the 5-second watch) finishes both once the lock is gone."""
    from xced.api.errors import StoreBusy

    c = two
    a = c.submit(req(app="again"), ALICE)
    b = c.submit(req(app="again"), ALICE)
    session(c)
    lost = _on(c, a.id)
    c.worker_left(c.links[lost])
    _advance(c, 121)
    lock = _lock(tmp_path / "db")
    try:
        with pytest.raises(StoreBusy):
            c.check_lost_hosts()
        assert a.elements[0].state is S.RUN and c.hosts[lost].lost_at is None  # memory as the store has it
    finally:
        lock.rollback()
        lock.close()
    assert c.check_lost_hosts() >= 1
    assert a.elements[0].state is S.PEND and [k[2] for k in c.store.host_events(lost)] == ["lost"]
    # the rejoin is a host event of its own
    c.attach_worker(c.links[lost])
    assert [k[2] for k in c.store.host_events(lost)] == ["lost", "rejoined"]
    assert c.host_history(lost)[-1][4].startswith("its worker joined again")
    # a drain whose `drained` event the store refuses (a failing write, injected as a
    # trigger in the real store) when the last job ends is finished by the next look
    session(c)
    host = _on(c, a.id)
    assert c.host_control(ADMIN, host, "drain", "swap")["host"]["draining"]
    c.store.db.execute("CREATE TRIGGER fault BEFORE INSERT ON host_events BEGIN SELECT RAISE(ABORT, 'disk I/O "
                       "error'); END")
    for j in (a, b):
        if j.elements[0].alloc and _on(c, j.id) == host:
            c.on_finished(j.id, 0, EndStatus(0, None, 1000.0, 1001.0, None), attempt=j.elements[0].attempt)
    assert c.hosts[host].njobs == 0 and c.hosts[host].draining  # the drained event was refused
    c.check_lost_hosts()
    assert c.hosts[host].draining  # still refused: still draining, nothing claimed
    c.store.db.execute("DROP TRIGGER fault")
    c.check_lost_hosts()
    assert not c.hosts[host].draining and [k[2] for k in c.store.host_events(host)][-1] == "drained"


def test_host_history_of_an_unknown_host_is_not_found(two):
    with pytest.raises(NotFound, match="not a host of this cluster"):
        two.host_history("h9")
    assert two.host_history(None) == []


def test_a_task_on_a_second_host_is_fenced_only_when_it_is_of_another_attempt(tmp_path):
    """SCHED-4 fencing of tasks: a worker of a job's second host lists the element by its
    tasks' attempt (which each task carries); the current attempt is kept, another one's is
    killed and its tasks there ended."""
    cfg = _cfg()
    cfg.hosts.append(HostConfig(name="h3", slots=2, memory_mb=1000))
    store = SqliteStore(tmp_path / "db")
    c = Controller(cfg, store, tmp_path, clock=Clock())
    links = {h: Link(h) for h in ("h1", "h2", "h3")}
    for link in links.values():
        c.attach_worker(link)
    try:
        j = c.submit(req(app="again", ntasks_min=2, resreq=["span[ptile=1]"]), ALICE)
        session(c)
        e = j.elements[0]
        second = e.alloc[1][0]
        assert c._task_spec(e, 1, ["true"], {}).attempt == e.attempt == 1
        c.worker_left(links[second])
        c.worker_joined(links[second], SimpleNamespace(running=[(j.id, 0, 1)]))
        assert links[second].killed == [] and getattr(links[second], "ended", []) == []
        c.worker_left(links[second])
        c.worker_joined(links[second], SimpleNamespace(running=[(j.id, 0, 0)]))  # another attempt's task
        assert links[second].killed == [(j.id, 0)] and links[second].ended == [(j.id, 0)]
        assert e.state is S.RUN and e.attempt == 1
    finally:
        store.close()

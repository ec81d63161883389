"""The controller with a fake worker and a fake clock (no daemon, no processes): the state
machine and its events (D-5, rule 2), holds (D-5), arrays (JOB-4), permissions (D-6)."""

from __future__ import annotations

import asyncio

import pytest

from xced.api.errors import Conflict, InvalidRequest, NotFound, PermissionDenied
from xced.controller.controller import Controller
from xced.model.state import EndStatus
from xced.model.config import ClusterConfig, ClusterSettings, HostConfig, QueueConfig
from xced.policy.rbac import Caller
from xced.store.sqlite import SqliteStore

ALICE = Caller("alice", None, None, True, False)
BOB = Caller("bob", None, None, True, False)
ADMIN = Caller("admin", None, None, True, True)


class FakeWorker:
    host = "h1"

    def __init__(self):
        self.started, self.killed, self.signals, self.infos = [], [], [], []

    def start(self, info):
        self.started.append((info.job_id, info.index, info.alloc))
        self.infos.append(info)

    def kill(self, job_id, index):
        self.killed.append((job_id, index))
        return True

    def signal(self, job_id, index, sig):
        self.signals.append((job_id, index, sig))
        return True

    def reattach(self, job_id, index):
        pass

    def read_output(self, *a):
        return None

    def end_tasks(self, job_id, index):
        self.ended = getattr(self, "ended", []) + [(job_id, index)]

    async def launch_task(self, task):
        return {"exit_code": 0, "output": ""}


class Clock:
    t = 1000.0

    def __call__(self):
        self.t += 0.001
        return self.t


@pytest.fixture
def ctl(tmp_path):
    cfg = ClusterConfig(settings=ClusterSettings(mode="test"),
                        queues=[QueueConfig(name="normal", max_run_limit_s=3600)],
                        hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)])
    store = SqliteStore(tmp_path / "db")
    c = Controller(cfg, store, tmp_path, clock=Clock())
    w = FakeWorker()
    c.workers["h1"] = w
    c.hosts["h1"].status = "ok"
    c.fake = w
    yield c
    store.close()


def req(**kw):
    base = {"argv": ["true"], "cwd": "/tmp", "ntasks_min": 1}
    base.update(kw)
    return base


def session(c):
    c._session_scheduled = False
    c._session()


def end(c, jid, idx=0, code=0, reason=None, sig=None):
    c.on_finished(jid, idx, EndStatus(code, sig, 1000.0, 1001.0, reason))


def kinds(c, jid):
    return [r[3] for r in c.store.events(jid)]


def test_submit_dispatch_done_with_events(ctl):
    j = ctl.submit(req(), ALICE)
    assert j.spec["run_limit_s"] == 3600  # JOB-2: the queue ceiling is the limit of a job without one
    session(ctl)
    assert ctl.fake.started == [(j.id, 0, [("h1", 1)])]
    assert ctl.hosts["h1"].slots_used == 1
    end(ctl, j.id)
    assert j.elements[0].state == "DONE" and ctl.hosts["h1"].slots_used == 0
    assert kinds(ctl, j.id) == ["SUBMIT", "DISPATCH", "DONE"]


def test_exit_reasons(ctl):
    a, b, c = (ctl.submit(req(), ALICE) for _ in range(3))
    session(ctl)
    end(ctl, a.id, code=3)
    end(ctl, b.id, code=143, sig="SIGTERM", reason="run limit")
    end(ctl, c.id, code=137, sig="SIGKILL")
    assert (a.elements[0].state, a.elements[0].exit_reason) == ("EXIT", "exited with code 3")
    assert b.elements[0].exit_reason == "run limit"
    assert c.elements[0].exit_reason == "killed by signal SIGKILL"


def test_kill_pending_array_and_running_element(ctl):
    j = ctl.submit(req(name="a[1-6]%2"), ALICE)
    session(ctl)
    assert [s[1] for s in ctl.fake.started] == [1, 2]
    with pytest.raises(PermissionDenied, match="belongs to alice"):
        ctl.kill(j.id, None, BOB)
    done = ctl.kill(j.id, None, ALICE)
    assert done == [f"{j.id}[{i}]" for i in range(1, 7)]
    assert ctl.fake.killed == [(j.id, 1), (j.id, 2)]
    assert [j.elements[i].state for i in range(3, 7)] == ["EXIT"] * 4
    end(ctl, j.id, 1, code=130, sig="SIGINT", reason="killed")
    assert j.elements[1].exit_reason == "killed by alice"
    end(ctl, j.id, 2, code=0)  # ended on its own before the kill reached it
    assert j.elements[2].state == "DONE"
    with pytest.raises(Conflict, match="already finished"):
        ctl.kill(j.id, None, ALICE)


def test_holds_are_kinds(ctl):
    j = ctl.submit(req(ntasks_min=4), ALICE)
    blocker = ctl.submit(req(ntasks_min=4), ALICE)
    session(ctl)  # j runs, blocker pends
    ctl.stop(blocker.id, None, ALICE)
    e = blocker.elements[0]
    assert e.state == "PSUSP" and e.holds == {"user"}
    e.holds.add("system")  # as a PRJ-5 / DISPATCH-2 system hold would
    ctl.resume(blocker.id, None, ALICE)
    assert e.state == "PSUSP" and e.holds == {"system"}  # releasing user never releases system
    assert kinds(ctl, blocker.id)[-1] == "RELEASE_ONE"
    with pytest.raises(Conflict):
        ctl.resume(blocker.id, None, ALICE)
    ctl.stop(j.id, None, ADMIN)
    assert j.elements[0].state == "USUSP" and ctl.fake.signals[-1][2] == 19
    ctl.resume(j.id, None, ADMIN)
    assert j.elements[0].state == "RUN" and ctl.fake.signals[-1][2] == 18


def test_requeue_running_and_finished(ctl):
    j = ctl.submit(req(), ALICE)
    session(ctl)
    ctl.requeue(j.id, None, ALICE)
    assert j.elements[0].state == "RUN" and ctl.fake.killed == [(j.id, 0)]
    end(ctl, j.id, code=130, sig="SIGINT", reason="killed")
    assert j.elements[0].state == "PEND" and ctl.hosts["h1"].slots_used == 0
    session(ctl)
    end(ctl, j.id, code=0)
    ctl.requeue(j.id, None, ALICE)
    assert j.elements[0].state == "PEND"
    assert kinds(ctl, j.id) == ["SUBMIT", "DISPATCH", "REQUEUE_REQUEST", "REQUEUE", "DISPATCH", "DONE", "REQUEUE"]
    with pytest.raises(Conflict, match="is pending"):
        ctl.requeue(j.id, None, ALICE)


def test_state_survives_reload(ctl, tmp_path):
    j = ctl.submit(req(name="x[1-3]"), ALICE)
    session(ctl)
    end(ctl, j.id, 1, code=2)
    c2 = Controller(ctl.config, ctl.store, tmp_path)
    j2 = c2.jobs[j.id]
    assert [e.state for e in j2.elements.values()] == ["EXIT", "RUN", "RUN"]
    assert j2.elements[1].exit_code == 2 and c2.hosts["h1"].slots_used == 2


def test_bad_submits(ctl):
    for bad, match in [(req(queue="nope"), "unknown queue"), (req(ntasks_min=0), "at least 1"),
                       (req(ntasks_min=5), "can never be satisfied"), (req(run_limit_s=-1), "must be positive"),
                       (req(run_limit_s=7200), "over queue normal's max_run_limit"), (req(cwd="rel"), "absolute"),
                       (req(name="x[3-1]"), "ends before"),
                       (req(resreq=["rusage=[mem=20MB]"]), "column 7: expected '\\[' after 'rusage'"),
                       (req(resreq=["select[gpu>0]"]), "can never start"),
                       (req(ntasks_min=2, resreq=["span[ptile=4]"]), "can never start")]:
        with pytest.raises(InvalidRequest, match=match):
            ctl.submit(bad, ALICE)
    assert ctl.jobs == {}
    with pytest.raises(NotFound):
        ctl.kill(99, None, ALICE)


def test_wait_returns_when_finished(ctl):
    async def main():
        j = ctl.submit(req(), ALICE)
        session(ctl)
        w = asyncio.create_task(ctl.wait(j.id, 5))
        await asyncio.sleep(0.01)
        assert not w.done()
        end(ctl, j.id)
        assert (await w).id == j.id
    asyncio.run(main())


def test_submits_behind_a_blocked_head_need_no_session(ctl):
    """Strict FCFS (D-4, SCHED-1 v1): once a queue's head is blocked, later submits to it get
    the 'waiting behind' reason without a session; any other event runs sessions again."""
    async def main():
        running = ctl.submit(req(ntasks_min=4), ALICE)
        head = ctl.submit(req(ntasks_min=2), ALICE)
        session(ctl)
        assert running.elements[0].state == "RUN" and head.elements[0].state == "PEND"
        before = ctl.sessions
        later = [ctl.submit(req(), ALICE) for _ in range(5)]
        assert ctl.sessions == before and not ctl._session_scheduled
        assert all(j.elements[0].pend_reason.main == f"Waiting behind job {head.id} in queue normal "
                   "(first come, first served)" for j in later)
        ctl.kill(head.id, None, ALICE)  # the head goes: the queue must be looked at again
        assert ctl._session_scheduled
        session(ctl)
        end(ctl, running.id)
        session(ctl)
        assert [j.elements[0].state for j in later] == ["RUN"] * 4 + ["PEND"]
    asyncio.run(main())


def test_vanished_profile_declines_then_system_hold(tmp_path):
    """DISPATCH-2: a job whose profile is gone at dispatch stays PEND (never EXIT); after
    MAX_DECLINES declined dispatches in a row it gets a system hold that names the reason,
    which resume (a user action) does not release."""
    from xced.controller.controller import MAX_DECLINES
    from xced.model.profile import Profile, builtin_profiles

    apps = {**builtin_profiles(), "pytorch": Profile(name="pytorch")}
    cfg = ClusterConfig(settings=ClusterSettings(mode="test"), queues=[QueueConfig(name="normal")],
                        hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)], applications=apps)
    store = SqliteStore(tmp_path / "db")
    c = Controller(cfg, store, tmp_path, clock=Clock())
    c.workers["h1"] = FakeWorker()
    c.hosts["h1"].status = "ok"
    j = c.submit(req(app="pytorch"), ALICE)
    c.config = cfg.model_copy(update={"applications": builtin_profiles()})  # the profile vanished
    for i in range(MAX_DECLINES):
        session(c)
        e = j.elements[0]
        assert e.state == ("PEND" if i < MAX_DECLINES - 1 else "PSUSP")
    assert e.holds == {"system"} and "no longer exists" in e.pend_reason.main
    with pytest.raises(Conflict):
        c.resume(j.id, None, ALICE)
    assert c.workers["h1"].started == []
    store.close()


def test_job_starter_wraps_the_command():
    from xced.controller.controller import wrap_with_job_starter

    assert wrap_with_job_starter("nice -n 5", ["python3", "-c", "print(1)"]) == \
        ["/bin/sh", "-c", "nice -n 5 python3 -c 'print(1)'"]
    assert wrap_with_job_starter("env A=1 %USRCMD; echo done", ["a b"]) == \
        ["/bin/sh", "-c", "env A=1 'a b'; echo done"]


def test_profile_changed_between_decision_and_dispatch_is_declined(tmp_path):
    """DISPATCH-1/2: the decision carries the profile's content hash; if the profile changed
    before the dispatch is applied, the job stays PEND and the decline is counted."""
    from xced.model.profile import Profile, builtin_profiles
    from xced.scheduler.session import schedule

    apps = {**builtin_profiles(), "p": Profile(name="p", env={"A": "1"})}
    cfg = ClusterConfig(settings=ClusterSettings(mode="test"), queues=[QueueConfig(name="normal")],
                        hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)], applications=apps)
    store = SqliteStore(tmp_path / "db")
    c = Controller(cfg, store, tmp_path, clock=Clock())
    c.workers["h1"] = FakeWorker()
    c.hosts["h1"].status = "ok"
    j = c.submit(req(app="p"), ALICE)
    decision = schedule(c.snapshot(), 0.0)
    assert decision.dispatches[0].profile_hash == apps["p"].content_hash()
    c.config = cfg.model_copy(update={"applications": {**builtin_profiles(), "p": Profile(name="p", env={"A": "2"})}})
    c.apply(decision)
    e = j.elements[0]
    assert e.state == "PEND" and "changed between decision and dispatch" in e.pend_reason.main
    assert c.workers["h1"].started == []
    session(c)  # a fresh decision with the new hash goes through
    assert e.state == "RUN"
    assert "(profile p " in [r for r in store.events(j.id) if r[3] == "DISPATCH"][0][7]
    store.close()


def test_requeue_and_restart_keep_the_profile_name(tmp_path):
    """DISPATCH-2 / JOB-4: a requeued element and a restarted controller keep the job's profile
    name, and every element of an array starts with that one profile."""
    from xced.model.profile import Profile, builtin_profiles

    apps = {**builtin_profiles(), "p": Profile(name="p", env={"A": "1"})}
    cfg = ClusterConfig(settings=ClusterSettings(mode="test", default_application="default"),
                        queues=[QueueConfig(name="normal")],
                        hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)], applications=apps)
    store = SqliteStore(tmp_path / "db")
    c = Controller(cfg, store, tmp_path, clock=Clock())
    c.workers["h1"] = FakeWorker()
    c.hosts["h1"].status = "ok"
    j = c.submit(req(app="p", name="a[1-2]"), ALICE)
    session(c)
    assert [i.app for i in c.workers["h1"].infos] == ["p", "p"]
    c.requeue(j.id, 1, ALICE)
    end(c, j.id, 1, code=130, sig="SIGINT", reason="killed")
    assert j.elements[1].state == "PEND"
    store.close()
    store = SqliteStore(tmp_path / "db")
    c2 = Controller(cfg, store, tmp_path, clock=Clock())
    c2.workers["h1"] = FakeWorker()
    c2.hosts["h1"].status = "ok"
    session(c2)
    assert [(i.index, i.app, i.profile_env) for i in c2.workers["h1"].infos] == [(1, "p", {"A": "1"})]
    store.close()

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

    def kill(self, job_id, index, attempt=None):
        self.killed.append((job_id, index))
        return True

    def signal(self, job_id, index, sig):
        self.signals.append((job_id, index, sig))
        return True

    def reattach(self, job_id, index, attempt=None):
        self.reattached = getattr(self, "reattached", []) + [(job_id, index, attempt)]

    def read_output(self, *a):
        return None

    def end_tasks(self, job_id, index, attempt=None):
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
    c.attach_worker(w)
    c.fake = w
    yield c
    store.close()


def controller_on(store, cfg, tmp_path):
    """A Controller over `store` with config `cfg` and a joined fake worker on host h1."""
    c = Controller(cfg, store, tmp_path, clock=Clock())
    c.attach_worker(FakeWorker())
    return c


def req(**kw):
    base = {"argv": ["true"], "cwd": "/tmp", "ntasks_min": 1}
    base.update(kw)
    return base


def session(c):
    c.run_session()


def end(c, jid, idx=0, code=0, reason=None, sig=None):
    c.on_finished(jid, idx, EndStatus(code, sig, 1000.0, 1001.0, reason))


def kinds(c, jid):
    return [r[3] for r in c.store.events(jid)]


def test_jobs_with_one_environment_share_its_row_and_each_gets_its_own_back(ctl):
    """issue 15, issue 17 part 5: identical environments are stored once (the submit writes no
    row for one the controller knows is stored); each job still gets exactly what it was
    submitted with, read back from the store once memory has forgotten them."""
    e1, e2 = {"A": "1", "PATH": "/bin"}, {"A": "2", "PATH": "/bin"}
    jobs = [ctl.submit(req(env=dict(e)), ALICE) for e in (e1, e1, e2, e1)]
    ctl._envs.clear()
    assert [ctl.job_env(j) for j in jobs] == [e1, e1, e2, e1]
    assert ctl.store.db.execute("SELECT COUNT(*) FROM envs").fetchone()[0] == 2


def test_an_environment_record_is_its_own_json_whatever_came_before():
    """The last environment's record is kept (issue 17 part 5): never handed to another
    environment that Python calls equal but JSON writes otherwise (1 == True)."""
    from xced.model.spec import env_record

    assert env_record({"A": 1})[1] == '{"A":1}'
    assert env_record({"A": True})[1] == '{"A":true}'
    assert env_record({"A": "1"})[1] == env_record({"A": "1"})[1] == '{"A":"1"}'
    assert env_record({"A": "1", "B": "2"})[1] == '{"A":"1","B":"2"}'


def test_submit_dispatch_done_with_events(ctl):
    j = ctl.submit(req(), ALICE)
    assert j.effective.run_limit_s == 3600  # JOB-2: the queue ceiling is the limit of a job without one
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


def test_jobs_of_one_requirement_share_one_parsed_requirement_across_submits_and_restarts(ctl, tmp_path):
    """Issue 19 (SCHED-2): the scheduler decides the pending jobs of one request as a group,
    keyed by their requirement's identity, so jobs submitted one by one (a pipeline's 100,000
    `bsub -R "rusage[mem=1GB]"` calls) must hold the same object, after a restart too;
    a different requirement holds another."""
    a = ctl.submit(req(resreq=["rusage[mem=100]"]), ALICE)
    b = ctl.submit(req(resreq=["rusage[mem=100]"]), ALICE)
    c = ctl.submit(req(resreq=["rusage[mem=200]"]), ALICE)
    assert ctl.jobs[a.id].resreq is ctl.jobs[b.id].resreq
    assert ctl.jobs[c.id].resreq is not ctl.jobs[a.id].resreq
    c2 = Controller(ctl.config, ctl.store, tmp_path)
    assert c2.jobs[a.id].resreq is c2.jobs[b.id].resreq
    assert c2.jobs[a.id].resreq == ctl.jobs[a.id].resreq


def test_a_users_hold_says_the_same_after_a_restart(ctl, tmp_path):
    """D-5 (a fresh tester's find): pend reasons are not stored, and a held element is in no
    session, so after a restart `xcecli jobs` showed '-' for a job held by its user (bsub -H)
    that had said "The job was suspended by the user while pending ..." before."""
    j = ctl.submit(req(hold=True), ALICE)
    before = ctl.jobs[j.id].elements[0].pend_reason
    assert before is not None and before.main.startswith("The job was suspended by the user while pending")
    c2 = Controller(ctl.config, ctl.store, tmp_path)
    assert c2.jobs[j.id].elements[0].state == "PSUSP"
    assert c2.jobs[j.id].elements[0].pend_reason == before


def test_containment_is_shown_from_the_start_and_stored_with_the_end(ctl, tmp_path):
    """JOB-1 (issue 15): the mechanism the worker reports with the start is the element's
    `containment` while it runs, is written with its end (migration 0009), and so is still
    there after a reload of the store; a new dispatch forgets it until the next start."""
    from xced.server.convert import element_dict

    j = ctl.submit(req(name="x[1-2]"), ALICE)
    session(ctl)
    ctl.on_started(j.id, 1, 1000.0, "cgroup-v1")
    ctl.on_started(j.id, 2, 1000.0, "subreaper")
    assert element_dict(j.elements[1])["containment"] == "cgroup-v1"
    end(ctl, j.id, 1)
    c2 = Controller(ctl.config, ctl.store, tmp_path)
    e1, e2 = c2.jobs[j.id].elements[1], c2.jobs[j.id].elements[2]
    assert (e1.state, e1.containment) == ("DONE", "cgroup-v1")
    assert (e2.state, e2.containment) == ("RUN", None)  # running: the worker reports it again on reattach
    ctl.requeue(j.id, 1, ALICE)
    session(ctl)
    assert j.elements[1].state == "RUN" and j.elements[1].containment is None


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
        assert ctl.sessions == before and not ctl.session_asked
        assert all(j.elements[0].pend_reason.main == f"Waiting behind job {head.id} in queue normal "
                   "(first come, first served)" for j in later)
        ctl.kill(head.id, None, ALICE)  # the head goes: the queue must be looked at again
        assert ctl.session_asked
        session(ctl)
        end(ctl, running.id)
        session(ctl)
        assert [j.elements[0].state for j in later] == ["RUN"] * 4 + ["PEND"]
    asyncio.run(main())


def test_a_submit_the_last_session_proved_short_still_gets_its_own_run_limits_hint(tmp_path):
    """RES-6 with SCHED-1 (a fresh tester's find): behind a reserved head, a -n 2 job is told
    "would start now with -n 1 and a run limit (-W) ending by ..., so as not to delay job
    B's reservation". A second such job submitted with nothing else happening must be told
    the same: the last session's proof (SCHED-2) says it cannot start, but its smaller count's
    hint depends on its run limit, which only a session weighs (xced.scheduler.shortcut)."""
    cfg = ClusterConfig(settings=ClusterSettings(mode="test"),
                        queues=[QueueConfig(name="normal", max_run_limit_s=3600, backfill=True)],
                        hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)])
    c = controller_on(SqliteStore(tmp_path / "db"), cfg, tmp_path)

    async def main():
        a = c.submit(req(ntasks_min=3, run_limit_s=600), ALICE)
        session(c)
        b = c.submit(req(ntasks_min=4), ALICE)  # the head: reserved from a's end
        session(c)
        first = c.submit(req(ntasks_min=2), ALICE)
        session(c)
        assert a.elements[0].state == "RUN" and b.elements[0].state == "PEND"
        hint = first.elements[0].pend_reason.hint
        assert hint.startswith("would start now with -n 1 and a run limit (-W) ending by ")
        assert hint.endswith(f"so as not to delay job {b.id}'s reservation")
        second = c.submit(req(ntasks_min=2), ALICE)
        told = second.elements[0].pend_reason  # a reason given at the submit, without a session
        assert told is None or told.hint == hint, told
        session(c)
        assert second.elements[0].pend_reason.hint == hint
    asyncio.run(main())
    c.store.close()


def test_a_submit_that_would_head_a_backfilling_queue_gets_its_reservation(tmp_path):
    """SCHED-1 (a fresh tester's find): the last session proved -n 2 short (for a job of a
    strict queue) and only submits followed; a new -n 2 job in a backfilling queue with no
    blocked head heads that queue, so it needs a reservation, which only a session makes: it
    must not just take the proof's reason."""
    cfg = ClusterConfig(settings=ClusterSettings(mode="test"),
                        queues=[QueueConfig(name="normal", max_run_limit_s=3600, backfill=True),
                                QueueConfig(name="strict", max_run_limit_s=3600)],
                        hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)])
    c = controller_on(SqliteStore(tmp_path / "db"), cfg, tmp_path)

    async def main():
        c.submit(req(ntasks_min=3, queue="strict"), ALICE)
        session(c)
        c.submit(req(ntasks_min=2, queue="strict"), ALICE)  # proves -n 2 short, heads "strict"
        session(c)
        head = c.submit(req(ntasks_min=2), ALICE)  # in "normal", whose head it becomes
        assert head.elements[0].pend_reason is None and c.session_asked
        session(c)
        why = c.why(head.id, None)
        assert why["reservation"] is not None and why["reservation"]["text"].startswith("reserved from "), why
    asyncio.run(main())
    c.store.close()


def test_vanished_profile_declines_then_system_hold(tmp_path):
    """DISPATCH-2: a job whose profile is gone at dispatch stays PEND (never EXIT); after
    MAX_DECLINES declined dispatches in a row it gets a system hold that names the reason,
    which resume (a user action) does not release."""
    from xced.controller.machine import MAX_DECLINES
    from xced.model.profile import Profile, builtin_profiles

    apps = {**builtin_profiles(), "pytorch": Profile(name="pytorch")}
    cfg = ClusterConfig(settings=ClusterSettings(mode="test"), queues=[QueueConfig(name="normal")],
                        hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)], applications=apps)
    store = SqliteStore(tmp_path / "db")
    c = controller_on(store, cfg, tmp_path)
    j = c.submit(req(app="pytorch"), ALICE)
    c.config = cfg.model_copy(update={"applications": builtin_profiles()})  # the profile vanished
    for i in range(MAX_DECLINES):
        session(c)
        e = j.elements[0]
        assert e.state == ("PEND" if i < MAX_DECLINES - 1 else "PSUSP")
        if i < MAX_DECLINES - 1:  # each decline waits a doubling backoff before the next dispatch
            assert e.pend_reason.main.endswith(f"dispatched again in {2 ** i:g} s"), e.pend_reason.main
            session(c)  # within the backoff: no dispatch, nothing counted
            assert e.failures == i + 1
            c.clock.t += 2 ** i
    assert e.holds == {"system"} and "no longer exists" in e.pend_reason.main
    with pytest.raises(Conflict):
        c.resume(j.id, None, ALICE)
    assert c.workers["h1"].started == []
    # an admin releases it (D-5) once the profile is back; not a user, not while it is missing
    with pytest.raises(PermissionDenied, match="user alice is not a cluster admin; only the cluster admins may release a "
                                               "system hold"):
        c.release(j.id, None, ALICE)
    admin = Caller("root", 0, 0, False, True)
    with pytest.raises(Conflict, match="still refuses it: its application profile 'pytorch' no longer exists"):
        c.release(j.id, None, admin)
    c.config = cfg
    assert c.release(j.id, None, admin) == [str(j.id)]
    assert e.state == "PEND" and e.holds == set()
    session(c)
    assert e.state == "RUN"
    with pytest.raises(Conflict, match="nothing is held by the system"):
        c.release(j.id, None, admin)
    # requeue is refused when the profile (or the queue) is gone
    end(c, j.id, code=0)
    c.config = cfg.model_copy(update={"applications": builtin_profiles()})
    with pytest.raises(Conflict, match="application profile 'pytorch' no longer exists"):
        c.requeue(j.id, None, ALICE)
    c.config = cfg.model_copy(update={"queues": [QueueConfig(name="other")]})
    with pytest.raises(Conflict, match="its queue 'normal' no longer exists"):
        c.requeue(j.id, None, ALICE)
    store.close()


def test_job_starter_wraps_the_command():
    from xced.controller.dispatch import wrap_with_job_starter

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
    c = controller_on(store, cfg, tmp_path)
    j = c.submit(req(app="p"), ALICE)
    decision = schedule(c.snapshot(), 0.0)
    assert decision.dispatches[0].profile_hash == apps["p"].content_hash()
    c.config = cfg.model_copy(update={"applications": {**builtin_profiles(), "p": Profile(name="p", env={"A": "2"})}})
    c.apply(decision)
    e = j.elements[0]
    assert e.state == "PEND" and "changed between decision and dispatch" in e.pend_reason.main
    assert c.workers["h1"].started == [] and e.failures == 1
    c.clock.t += 1  # after the backoff, a fresh decision with the new hash goes through
    session(c)
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
    c = controller_on(store, cfg, tmp_path)
    j = c.submit(req(app="p", name="a[1-2]"), ALICE)
    session(c)
    assert [i.app for i in c.workers["h1"].infos] == ["p", "p"]
    c.requeue(j.id, 1, ALICE)
    end(c, j.id, 1, code=130, sig="SIGINT", reason="killed")
    assert j.elements[1].state == "PEND"
    store.close()
    store = SqliteStore(tmp_path / "db")
    c2 = controller_on(store, cfg, tmp_path)
    session(c2)
    assert [(i.index, i.app, i.profile_env) for i in c2.workers["h1"].infos] == [(1, "p", {"A": "1"})]
    store.close()


# ---------------------------------------------------------------- dependencies (JOB-5, LSF bsub -w)


def test_dependency_refused_at_submit(ctl):
    """LSF refuses a dependency on a job it cannot find at bsub; parse errors name the column."""
    a = ctl.submit(req(), ALICE)
    arr = ctl.submit(req(name="x[1-3]"), ALICE)
    for text, match in [("done(99)", "^dependency: job 99 does not exist"),
                        (f"done({a.id}) || ended(98)", "^dependency: job 98 does not exist"),
                        (f"done({a.id}[1])", f"job {a.id} is not an array; refer to it as {a.id}"),
                        (f"done({arr.id}[7])", f"job {arr.id} has no element 7; its indices are x\\[1-3\\]"),
                        ("done(1 && done(2)", "column 8: expected '\\)' after job ID, found '&&'"),
                        ("done(1) &&", "column 11: expected a condition .* after '&&', found end of input"),
                        ("", "empty dependency expression")]:
        with pytest.raises(InvalidRequest, match=match) as ei:
            ctl.submit(req(dependency=text), ALICE)
        assert ei.value.field == "dependency"
    assert set(ctl.jobs) == {a.id, arr.id}


def test_dependency_stored_canonical_and_in_dry_run(ctl):
    a = ctl.submit(req(), ALICE)
    b = ctl.submit(req(), ALICE)
    text = f"{a.id}&&(ended( {b.id} )||exit({a.id},2))"
    canon = f"done({a.id}) && (ended({b.id}) || exit({a.id},==2))"
    eff = ctl.submit(req(dependency=text), ALICE, dry_run=True)
    assert eff["dependency"] == canon
    j = ctl.submit(req(dependency=text), ALICE)
    assert j.spec.dependency == canon
    assert ctl.submit(req(), ALICE).spec.dependency is None
    assert ctl.submit(req(), ALICE, dry_run=True)["dependency"] is None


def test_done_dependency_met_after_the_job_ends_done(ctl):
    a = ctl.submit(req(), ALICE)
    b = ctl.submit(req(dependency=f"done({a.id})"), ALICE)
    e = b.elements[0]
    assert e.pend_reason.main == f"Dependency condition not satisfied: done({a.id}) (job {a.id} is PEND)"
    session(ctl)
    assert a.elements[0].state == "RUN" and e.state == "PEND"
    session(ctl)
    assert e.pend_reason.main == f"Dependency condition not satisfied: done({a.id}) (job {a.id} is RUN)"
    assert ctl.why(b.id, None)["main"] == e.pend_reason.main
    assert [s[0] for s in ctl.fake.started] == [a.id]
    end(ctl, a.id)
    session(ctl)  # the next session (kick() after the end) starts it
    assert e.state == "RUN" and e.pend_reason is None
    assert [s[0] for s in ctl.fake.started] == [a.id, b.id]


def test_dependency_on_a_finished_job_is_met_at_submit(ctl):
    a = ctl.submit(req(), ALICE)
    session(ctl)
    end(ctl, a.id)
    b = ctl.submit(req(dependency=str(a.id)), ALICE)  # a bare ID means done(ID)
    assert b.spec.dependency == f"done({a.id})" and b.elements[0].pend_reason is None
    session(ctl)
    assert b.elements[0].state == "RUN"


def test_exit_dependency_met_when_the_job_exits(ctl):
    a = ctl.submit(req(), ALICE)
    b = ctl.submit(req(dependency=f"exit({a.id})"), ALICE)
    c = ctl.submit(req(dependency=f"exit({a.id}, > 3)"), ALICE)
    d = ctl.submit(req(dependency=f"exit({a.id},==3)"), ALICE)
    session(ctl)
    end(ctl, a.id, code=3)
    session(ctl)
    assert b.elements[0].state == "RUN" and d.elements[0].state == "RUN"
    assert c.elements[0].state == "PEND"
    assert c.elements[0].pend_reason.main == (f"Dependency can never be met: exit({a.id},>3) "
                                              f"(job {a.id} ended EXIT with code 3)")


def test_never_dependency_leaves_the_job_pending_with_that_reason(ctl):
    """SPEC JOB-5: a dependency that can never be met leaves the job pending (it is not ended),
    and it never blocks its queue."""
    a = ctl.submit(req(), ALICE)
    b = ctl.submit(req(dependency=f"done({a.id})"), ALICE)
    session(ctl)
    end(ctl, a.id, code=1)
    later = ctl.submit(req(), ALICE)
    session(ctl)
    e = b.elements[0]
    assert e.state == "PEND"
    assert e.pend_reason.main == f"Dependency can never be met: done({a.id}) (job {a.id} ended EXIT with code 1)"
    assert ctl.why(b.id, None) == {"id": str(b.id), "state": "PEND", "main": e.pend_reason.main, "hosts": [],
                                   "hint": None, "caps": [], "trace": [], "reservation": None}
    assert later.elements[0].state == "RUN"  # submitted after b, not held up by it
    for _ in range(3):
        session(ctl)
    assert e.state == "PEND" and kinds(ctl, b.id) == ["SUBMIT"]
    ctl.requeue(a.id, None, ALICE)  # NEVER is relative to now: a requeued job may still end DONE
    session(ctl)
    session(ctl)  # the one asked for after a watched job's dispatch
    assert e.pend_reason.main == f"Dependency condition not satisfied: done({a.id}) (job {a.id} is RUN)"
    end(ctl, a.id)
    session(ctl)
    assert e.state == "RUN"


def test_waiting_dependency_never_blocks_a_strict_fcfs_queue(ctl):
    """The strict FCFS shortcut (xced.scheduler.shortcut): a job that waits for a dependency is not in the
    snapshot, so it is never a queue's blocking head, and jobs behind it start."""
    big = ctl.submit(req(ntasks_min=3), ALICE)
    dep = ctl.submit(req(ntasks_min=2, dependency=f"done({big.id})"), ALICE)
    small = ctl.submit(req(), ALICE)
    session(ctl)
    assert [j.elements[0].state for j in (big, dep, small)] == ["RUN", "PEND", "RUN"]
    assert ctl.shortcut.blocked == {}
    # a dependent job submitted behind a blocked head gets its dependency's reason, no session
    head = ctl.submit(req(ntasks_min=2), ALICE)
    session(ctl)
    assert head.elements[0].pend_reason.main.startswith("Not enough free slots")
    before = ctl.sessions
    late = ctl.submit(req(dependency=f"done({small.id})"), ALICE)
    assert ctl.sessions == before and not ctl.session_asked
    assert late.elements[0].pend_reason.main.startswith("Dependency condition not satisfied")


def test_whole_array_and_element_dependencies(ctl):
    arr = ctl.submit(req(name="x[1-3]"), ALICE)
    one = ctl.submit(req(dependency=f"ended({arr.id}[2])"), ALICE)
    whole = ctl.submit(req(dependency=f"done({arr.id})"), ALICE)
    session(ctl)
    end(ctl, arr.id, 2, code=0)
    session(ctl)
    assert one.elements[0].state == "RUN"
    w = whole.elements[0]
    assert w.state == "PEND"
    assert w.pend_reason.main == (f"Dependency condition not satisfied: done({arr.id}) "
                                  f"(job {arr.id} elements: 1 DONE, 2 RUN)")
    end(ctl, arr.id, 1, code=0)
    end(ctl, arr.id, 3, code=2)  # one element EXIT: done(array) can never be met
    session(ctl)
    assert w.state == "PEND"
    assert w.pend_reason.main == (f"Dependency can never be met: done({arr.id}) "
                                  f"(job {arr.id}[3] ended EXIT with code 2)")


def test_started_dependency_met_by_a_dispatch_runs_another_session(ctl):
    """A dispatch runs no session of its own; when it meets a waiting started() dependency, the
    controller asks for one after the session (an array with a dependency waits as a whole)."""
    async def main():
        a = ctl.submit(req(ntasks_min=2), ALICE)
        arr = ctl.submit(req(name="y[1-2]", dependency=f"started({a.id})"), ALICE)
        assert all(e.pend_reason.main == f"Dependency condition not satisfied: started({a.id}) (job {a.id} is PEND)"
                   for e in arr.elements.values())
        session(ctl)  # a starts in this session; arr's dependency was read before it did
        assert a.elements[0].state == "RUN" and [e.state for e in arr.elements.values()] == ["PEND"] * 2
        await asyncio.sleep(0)  # the check after the session
        assert ctl.session_asked
        session(ctl)
        assert [e.state for e in arr.elements.values()] == ["RUN"] * 2
        # a watched job that does not start asks for nothing (no polling)
        big = ctl.submit(req(ntasks_min=4), ALICE)
        ctl.submit(req(dependency=f"started({big.id})"), ALICE)
        session(ctl)
        await asyncio.sleep(0)
        assert big.elements[0].state == "PEND" and not ctl.session_asked
    asyncio.run(main())


def test_not_dependency(ctl):
    """'!' swaps met and never: !done(A) waits while A runs, is met once A exits, never once A is DONE."""
    a = ctl.submit(req(), ALICE)
    b = ctl.submit(req(), ALICE)
    not_a = ctl.submit(req(dependency=f"!done({a.id})"), ALICE)
    not_b = ctl.submit(req(dependency=f"!done({b.id})"), ALICE)
    session(ctl)
    session(ctl)  # the one asked for after a watched job's dispatch
    assert not_a.elements[0].pend_reason.main == (f"Dependency condition not satisfied: !done({a.id}) "
                                                  f"(job {a.id} is RUN)")
    end(ctl, a.id, code=1)
    end(ctl, b.id, code=0)
    session(ctl)
    assert not_a.elements[0].state == "RUN"
    assert not_b.elements[0].state == "PEND"
    assert not_b.elements[0].pend_reason.main == (f"Dependency can never be met: !done({b.id}) "
                                                  f"(job {b.id} ended DONE)")


def test_held_job_with_a_dependency_keeps_the_hold_reason(ctl):
    a = ctl.submit(req(), ALICE)
    b = ctl.submit(req(dependency=f"done({a.id})"), ALICE)
    ctl.stop(b.id, None, ALICE)
    session(ctl)
    e = b.elements[0]
    assert e.state == "PSUSP" and e.pend_reason.main.startswith("The job was suspended by the user")
    ctl.resume(b.id, None, ALICE)
    session(ctl)
    assert e.state == "PEND" and e.pend_reason.main.startswith("Dependency condition not satisfied")


def test_dependency_survives_reload(ctl, tmp_path):
    a = ctl.submit(req(), ALICE)
    b = ctl.submit(req(dependency=f"ended({a.id})"), ALICE)
    session(ctl)
    c2 = Controller(ctl.config, ctl.store, tmp_path, clock=Clock())
    w = FakeWorker()
    c2.attach_worker(w)
    session(c2)
    assert c2.jobs[b.id].elements[0].pend_reason.main.startswith("Dependency condition not satisfied: ended(")
    end(c2, a.id, code=4)
    session(c2)
    assert c2.jobs[b.id].elements[0].state == "RUN" and w.started[-1][0] == b.id


def test_submit_of_a_request_proved_unsatisfiable_needs_no_session(tmp_path):
    """SCHED-2 at submit: when only submits happened since the last session and that session
    proved the new job's very request cannot start, the job gets that full reason at once and
    no session is asked for (a new job never lets another start); otherwise one is. (The
    running job has no run limit, so no reservation is made: with one, a reason offering a
    smaller count needs a session, test_a_submit_the_last_session_proved_short_...)"""
    cfg = ClusterConfig(settings=ClusterSettings(mode="test"),
                        queues=[QueueConfig(name="normal", backfill=True)],
                        hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)])
    store = SqliteStore(tmp_path / "db")
    c = controller_on(store, cfg, tmp_path)
    c.submit(req(ntasks_min=3), ALICE)
    session(c)
    big = c.submit(req(ntasks_min=2), ALICE)
    session(c)
    first = big.elements[0].pend_reason
    assert first.main == "Not enough free slots: 1 free on matching hosts, the job needs 2"
    again = c.submit(req(ntasks_min=2), ALICE)
    assert c.shortcut.valid is True  # kick() was not called: no session asked for
    assert again.elements[0].pend_reason is first
    other = c.submit(req(ntasks_min=1), ALICE)  # a request not proved: a session decides
    assert c.shortcut.valid is False
    session(c)
    assert other.elements[0].state == "RUN"
    store.close()


def test_requeue_merges_again_with_the_config_in_force(tmp_path):
    """A requeued job runs with what the config says now (MERGE-1); a config that refuses it
    refuses the requeue, and nothing changes."""
    from xced.model.profile import Profile, builtin_profiles

    def cfg_with(entry):
        return ClusterConfig(settings=ClusterSettings(mode="test"), queues=[QueueConfig(name="normal")],
                             hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)],
                             applications={**builtin_profiles(), "p": Profile(name="p", rusage=[entry])})

    store = SqliteStore(tmp_path / "db")
    c = controller_on(store, cfg_with({"name": "mem", "value": 100, "unit": "MB", "default": True}), tmp_path)
    j = c.submit(req(app="p"), ALICE)
    k = c.submit(req(app="p", resreq=["rusage[mem=200]"]), ALICE)
    session(c)
    end(c, j.id)
    end(c, k.id)
    c.config = cfg_with({"name": "mem", "value": 300, "unit": "MB", "default": True})
    c.requeue(j.id, None, ALICE)
    assert j.effective.resreq == "rusage[mem=300/task]"
    c.config = cfg_with({"name": "mem", "value": 100, "unit": "MB"})  # binding now: k's own 200 is refused
    with pytest.raises(Conflict, match="refuses it, so it was not requeued: rusage mem: profile p fixes 100 MB"):
        c.requeue(k.id, None, ALICE)
    assert k.elements[0].state == "DONE" and k.effective.resreq == "rusage[mem=200]"
    store.close()


def test_an_array_with_started_elements_is_held_when_its_queue_goes(tmp_path):
    """CFG-3: an array whose first element runs keeps its values, but its pending elements may
    not run in a queue the new config removed: they get a system hold naming why."""
    cfg = ClusterConfig(settings=ClusterSettings(mode="test", admins=["admin"]),
                        queues=[QueueConfig(name="normal"), QueueConfig(name="short")],
                        hosts=[HostConfig(name="h1", slots=1, memory_mb=1000)])
    store = SqliteStore(tmp_path / "db")
    c = controller_on(store, cfg, tmp_path)
    job = c.submit(req(queue="short", name="sq[1-3]%1"), ALICE)
    session(c)
    assert [e.state for e in job.elements.values()] == ["RUN", "PEND", "PEND"]
    new = cfg.model_copy(update={"queues": [QueueConfig(name="normal")]})
    out = c.apply_config(new, ADMIN)
    assert out["held"] == [f"job {job.id}: its queue 'short' no longer exists"]
    assert [e.state for e in job.elements.values()] == ["RUN", "PSUSP", "PSUSP"]
    assert "its queue 'short' no longer exists" in job.elements[2].pend_reason.main
    store.close()


def test_refusals_about_an_element_name_the_element_and_its_state(ctl):
    job = ctl.submit(req(name="a[1-3]"), ALICE)  # no session: every element pends
    ctl.kill(job.id, 3, ALICE)
    with pytest.raises(Conflict, match=rf"job {job.id}\[3\]: nothing to stop \(state EXIT\)"):
        ctl.stop(job.id, 3, ALICE)
    with pytest.raises(Conflict, match=rf"job {job.id}\[3\] has already finished \(EXIT\)"):
        ctl.kill(job.id, 3, ALICE)
    with pytest.raises(Conflict, match=rf"job {job.id}\[1\]: nothing to resume \(state PEND\)"):
        ctl.resume(job.id, 1, ALICE)
    with pytest.raises(Conflict, match=rf"job {job.id}\[2\] is pending; only running or finished"):
        ctl.requeue(job.id, 2, ALICE)


def test_failed_dispatches_are_counted_across_a_restart(tmp_path):
    """DISPATCH-2: the count of failures in a row is stored; a restart does not reset it, so
    max_dispatch_failures holds the job however often the daemon restarts."""
    from xced.model.profile import Profile, builtin_profiles

    apps = {**builtin_profiles(), "gone": Profile(name="gone")}
    cfg = ClusterConfig(settings=ClusterSettings(mode="test", max_dispatch_failures=3),
                        queues=[QueueConfig(name="normal")], hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)],
                        applications=apps)
    store = SqliteStore(tmp_path / "db")
    c = controller_on(store, cfg, tmp_path)
    j = c.submit(req(app="gone"), ALICE)
    c.config = cfg.model_copy(update={"applications": builtin_profiles()})
    for _ in range(2):
        session(c)
        c.clock.t += 10
    assert j.elements[0].failures == 2 and j.elements[0].state == "PEND"
    store.close()
    store = SqliteStore(tmp_path / "db")
    c = controller_on(store, cfg, tmp_path)  # the profile is back in this config, but...
    assert c.jobs[j.id].elements[0].failures == 2
    c.config = cfg.model_copy(update={"applications": builtin_profiles()})  # ...gone again
    session(c)
    assert c.jobs[j.id].elements[0].state == "PSUSP"  # the third in a row, across the restart
    store.close()


def test_stale_sessions_keep_one_refresh_timer_and_a_later_session_drops_it(tmp_path):
    """SCHED-3, pend_reason_update (a fresh tester's find): a busy backfilling cluster has
    many stale sessions a second; they share one timer on the loop (not one each, which at
    pend_reason_update: 1d would hold millions). The timer asks for a session only when no
    session ran after the latest stale one, and not before that one's time has come."""
    from xced.scheduler.session import SessionResult

    cfg = ClusterConfig(settings=ClusterSettings(mode="test", pend_reason_update_s=1),
                        queues=[QueueConfig(name="normal")], hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)])
    c = controller_on(SqliteStore(tmp_path / "db"), cfg, tmp_path)
    stale = SessionResult(stale=True)

    async def main():
        loop = asyncio.get_running_loop()
        timers = []
        real = loop.call_later


        def counting(delay, cb, *a):
            if getattr(cb, "__name__", "") == "_refresh_reasons":
                timers.append(delay)
            return real(delay, cb, *a)

        loop.call_later = counting
        kicks = []
        c.kick = lambda: kicks.append(loop.time())  # the session it would ask for
        for _ in range(10_000):
            c._refresh_reasons_later(stale)
        assert timers == [1]
        await asyncio.sleep(0.4)
        c._refresh_reasons_later(stale)  # a later stale session: the timer waits for its time too
        await asyncio.sleep(0.8)  # the first deadline passed: set again for the rest, no session yet
        assert len(timers) == 2 and 0 < timers[1] < 0.5 and kicks == []
        await asyncio.sleep(0.5)
        assert len(kicks) == 1  # nothing ran since the latest stale session: a refresh is asked for
        c._refresh_reasons_later(stale)
        c.sessions += 1  # a session after it (not stale) decided every job again
        await asyncio.sleep(1.2)
        assert len(kicks) == 1 and len(timers) == 3
    asyncio.run(main())


def test_a_head_held_back_by_a_load_index_alone_is_not_said_to_wait_for_unlimited_work(tmp_path):
    """SCHED-1, RES-6: the head of a backfilling queue whose select reads a load index that
    no host meets, on an idle cluster, gets no reservation (nothing foreseeable makes room
    for it), and `xcecli why` says so without claiming it waits for work with no run limit
    to end: there is none."""
    cfg = ClusterConfig(settings=ClusterSettings(mode="test"),
                        queues=[QueueConfig(name="normal", backfill=True)],
                        hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)])
    store = SqliteStore(tmp_path / "db")
    c = controller_on(store, cfg, tmp_path)
    j = c.submit(req(resreq=["select[r15s < -1]"]), ALICE)
    session(c)
    assert j.elements[0].state == "PEND"
    why = c.why(j.id, None)
    assert why["reservation"]["start"] is None, why
    text = why["reservation"]["text"]
    assert text.startswith("no reservation: running work ending at its run limits would not make room for it"), text
    assert "a load index" in text and "fits only after work with no run limit ends" not in text
    store.close()

"""The job state machine (xced/controller/machine.py; D-5, DESIGN rule 2), by stimulus: each
test feeds a stimulus to an element and compares the outcome (state, stored fields, events,
effects), as dask's worker state machine tests compare instruction lists. The shell's rule
(commit, then memory, then effects) is tested with a store whose commit fails."""

from __future__ import annotations

import itertools
import signal
import sqlite3

import pytest

from tests.unit.test_controller import ADMIN, ALICE, ctl, req, session  # noqa: F401 (ctl: a fixture)
from xced.api.errors import StoreUnavailable
from xced.controller import machine as m
from xced.controller.machine import IllegalTransition, TABLE, transition
from xced.model.jobs import JobState as S
from xced.model.jobs import PendReason
from xced.model.spec import from_record
from xced.model.state import Element, EndStatus, Job

T = 1000.0


def _el(state: S, holds=(), alloc=(("h1", 2), ("h2", 1)), action=None, failures=0) -> Element:
    job = Job(7, None, "alice", "normal", 1.0, *from_record({"argv": ["true"], "run_as": "alice", "ntasks_min": 1}))
    e = Element(job, 0, state, set(holds), alloc=list(alloc), action=action, failures=failures)
    job.elements[0] = e
    return e


def _stim(cls, **kw):
    return cls("s-1", "user:alice", T, **kw)


def _kinds(out):
    return [(ev.kind, ev.from_state, ev.to_state) for ev in out.events]


#: one stimulus of each type, for the exhaustive table test
SAMPLES = {
    m.Dispatch: _stim(m.Dispatch, alloc=(("h1", 1),), token="t", token_hash="h"),
    m.Declined: _stim(m.Declined, why="profile gone"),
    m.StartFailed: _stim(m.StartFailed, reason="no launcher"),
    m.Started: _stim(m.Started, start_time=T),
    m.Finished: _stim(m.Finished, status=EndStatus(0, None, T, T + 1, None)),
    m.Kill: _stim(m.Kill, user="alice"),
    m.Stop: _stim(m.Stop),
    m.Resume: _stim(m.Resume),
    m.Requeue: _stim(m.Requeue, user="alice"),
    m.SystemHold: _stim(m.SystemHold, reason="config refuses it"),
    m.Release: _stim(m.Release, reason="released"),
    m.HostLost: _stim(m.HostLost, host="h1", policy="requeue"),
    m.Pending: _stim(m.Pending, reason=PendReason("Not enough slots")),
}


def test_every_pair_is_in_the_table_or_refused():
    assert set(SAMPLES) == set(m.STIMULI)
    for cls, state in itertools.product(m.STIMULI, S):
        e = _el(state, holds=("user", "system") if state is S.PSUSP else ())
        before = (e.state, set(e.holds), list(e.alloc))
        if (cls, state) in TABLE:
            out = transition(e, SAMPLES[cls])
            assert out is None or isinstance(out, m.Outcome)
        else:
            with pytest.raises(IllegalTransition, match=f"cannot {cls.__name__.lower()} a job in state {state}"):
                transition(e, SAMPLES[cls])
        assert (e.state, set(e.holds), list(e.alloc)) == before  # the machine never changes the element


def test_a_new_pend_reason_is_kept_in_memory_and_the_same_one_is_nothing():
    """SCHED-3: only a changed reason replaces the last one; it writes nothing to the store."""
    e = _el(S.PEND)
    out = transition(e, _stim(m.Pending, reason=PendReason("Not enough slots")))
    assert out.state is S.PEND and out.memory == {"pend_reason": PendReason("Not enough slots")}
    assert out.fields == {} and out.events == [] and out.effects == []
    e.pend_reason = PendReason("Not enough slots")
    assert transition(e, _stim(m.Pending, reason=PendReason("Not enough slots"))) is None
    assert transition(e, _stim(m.Pending, reason=None)).memory == {"pend_reason": None}
    with pytest.raises(IllegalTransition):
        transition(_el(S.RUN), _stim(m.Pending, reason=None))


def test_nothing_leaves_a_finished_state_but_a_requeue():
    """D-5: only a requeue takes a finished element back; the one other pair of a finished
    state, the end of a removed element's processes (bkill -r), keeps it EXIT."""
    for (cls, state), _ in TABLE.items():
        if state in (S.DONE, S.EXIT):
            assert cls is m.Requeue or (cls, state) == (m.Finished, S.EXIT)
    out = transition(_el(S.EXIT, action="remove:alice"), SAMPLES[m.Finished])
    assert out.state is S.EXIT and "state" not in out.fields and "exit_reason" not in out.fields


def test_dispatch_starts_the_element_with_a_fresh_token():
    out = transition(_el(S.PEND, alloc=()), _stim(m.Dispatch, alloc=(("h1", 2),), reserve={"h1": {"slots": 2}},
                                                  token="tok", token_hash="hash", note=" (profile p abc)"))
    assert out.state is S.RUN and _kinds(out) == [("DISPATCH", "PEND", "RUN")]
    assert out.events[0].reason == "dispatched to h1:2 (profile p abc)"
    assert out.fields["alloc"] == [("h1", 2)] and out.fields["token_hash"] == "hash" and out.fields["start_time"] == T
    assert "token" not in out.fields and out.memory["token"] == "tok"  # D-7: the plain token is never stored
    assert out.effects == [m.StartElement()]


def test_declines_count_back_off_then_hold_the_element():
    """DISPATCH-2: each decline is stored, waits a doubling backoff, and names the failure;
    the limit's failure holds the element."""
    out = transition(_el(S.PEND), _stim(m.Declined, why="profile gone", limit=3))
    assert out.state is S.PEND and out.fields == {"failures": 1} and out.events == []
    assert out.memory["retry_at"] == T + 1.0
    assert out.memory["pend_reason"].main == ("Dispatch declined (1 in a row, 3 hold the job): profile gone; "
                                              "dispatched again in 1 s")
    out = transition(_el(S.PEND, failures=1), _stim(m.Declined, why="profile gone", limit=3))
    assert out.memory["retry_at"] == T + 2.0 and out.fields == {"failures": 2}
    out = transition(_el(S.PEND, failures=2), _stim(m.Declined, why="profile gone", limit=3))
    assert out.state is S.PSUSP and out.fields["holds"] == {"system"} and _kinds(out) == [("HOLD", "PEND", "PSUSP")]
    assert out.memory["pend_reason"].main == "Held by the system after 3 failed dispatches in a row: profile gone"
    assert [m.retry_delay(n) for n in (1, 2, 3, 7, 8, 50)] == [1, 2, 4, 60, 60, 60]


def test_failed_starts_count_with_declines_and_a_start_ends_the_count():
    out = transition(_el(S.RUN, failures=1), _stim(m.StartFailed, reason="cannot make the job directory", limit=3))
    assert out.state is S.PEND and out.fields["failures"] == 2 and out.fields["alloc"] == []
    assert _kinds(out) == [("DISPATCH_FAILED", "RUN", "PEND")] and out.memory["retry_at"] == T + 2.0
    assert "The last start failed (2 in a row, 3 hold the job): cannot make the job directory" in \
        out.memory["pend_reason"].main
    out = transition(_el(S.RUN, failures=2), _stim(m.StartFailed, reason="no launcher", limit=3))
    assert out.state is S.PSUSP and out.fields["holds"] == {"system"} and out.fields["alloc"] == []
    assert _kinds(out) == [("DISPATCH_FAILED", "RUN", "PEND"), ("HOLD", "PEND", "PSUSP")]
    assert transition(_el(S.RUN, failures=2), _stim(m.Started, start_time=T)).memory["failures"] == 0
    end = transition(_el(S.RUN, failures=2), _stim(m.Finished, status=EndStatus(0, None, T, T + 1, None)))
    assert end.fields["failures"] == 0  # stored: a requeued job starts counting from 0


@pytest.mark.parametrize("status,state,kind,reason", [
    (EndStatus(0, None, T, T + 1, None), S.DONE, "DONE", None),
    (EndStatus(3, None, T, T + 1, None), S.EXIT, "EXIT", "exited with code 3"),
    (EndStatus(143, "SIGTERM", T, T + 1, None), S.EXIT, "EXIT", "killed by signal SIGTERM"),
    (EndStatus(143, "SIGTERM", T, T + 1, "run limit"), S.EXIT, "EXIT", "run limit"),
    (EndStatus(1, None, T, T + 1, "supervisor lost"), S.EXIT, "LOST", "the job's supervisor was lost"),
])
def test_ends(status, state, kind, reason):
    out = transition(_el(S.RUN), _stim(m.Finished, status=status))
    assert out.state is state and _kinds(out) == [(kind, "RUN", str(state))] and out.events[0].reason == reason
    assert out.fields["end_time"] == T + 1 and out.memory["pend_reason"] is None
    assert out.effects == [m.EndTasks(("h1", "h2"))]


def test_the_end_of_a_killed_or_requeued_element():
    out = transition(_el(S.RUN, action="kill:bob"), _stim(m.Finished, status=EndStatus(130, None, T, T + 1, "killed")))
    assert out.state is S.EXIT and out.fields["exit_reason"] == "killed by bob"
    out = transition(_el(S.USUSP, action="requeue:bob"), _stim(m.Finished, status=EndStatus(137, "SIGKILL", T, T, "killed")))
    assert out.state is S.PEND and out.fields["alloc"] == [] and out.fields["action"] is None
    assert out.events[0].actor == "user:bob" and _kinds(out) == [("REQUEUE", "USUSP", "PEND")]


def test_kill():
    out = transition(_el(S.PSUSP, holds=("user",)), _stim(m.Kill, user="alice"))
    assert out.state is S.EXIT and out.fields["holds"] == set() and out.fields["exit_reason"] == "killed by alice while pending"
    out = transition(_el(S.RUN), _stim(m.Kill, user="alice"))
    assert out.state is S.RUN and out.fields == {"action": "kill:alice"} and _kinds(out) == [("KILL_REQUEST", None, None)]
    assert out.effects == [m.KillElement()]


def test_a_kills_comment_ends_the_reason_of_its_event():
    """LSF bkill -C kill_reason: the comment ends the kill's event reason, and the exit reason
    of an element the kill ends at once (pending, or removed with -r); a running element's
    KILL_REQUEST carries it, beside bkill -d's note."""
    out = transition(_el(S.PEND), _stim(m.Kill, user="alice", comment="wrong input"))
    assert out.fields["exit_reason"] == "killed by alice while pending; kill reason: wrong input"
    assert out.events[0].reason == out.fields["exit_reason"]
    out = transition(_el(S.RUN), _stim(m.Kill, user="alice", comment="wrong input"))
    assert _kinds(out) == [("KILL_REQUEST", None, None)] and out.events[0].reason == "kill reason: wrong input"
    out = transition(_el(S.RUN), _stim(m.Kill, user="alice", comment="x", record_done=True))
    assert out.events[0].reason == "recorded DONE when it ends (bkill -d); kill reason: x"
    out = transition(_el(S.RUN), _stim(m.Kill, user="alice", comment="x", force=True))
    assert out.fields["exit_reason"] == "removed by alice (bkill -r); its processes are being killed; kill reason: x"
    assert transition(_el(S.RUN), _stim(m.Kill, user="alice")).events[0].reason is None


def test_a_kill_that_records_done_ends_the_element_done():
    """CLI-8 (issue 18), LSF bkill -d: "Kills the jobs, and records the jobs as DONE after the
    jobs exit" (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bkill.1.html;
    docs/lsf-behaviour.md section 6). A pending element ends DONE at once; a running one is
    killed as usual, its wish stored in its action (so a restart keeps it), and ends DONE
    with a reason saying so, whatever its processes' end; a plain kill still ends EXIT."""
    out = transition(_el(S.PSUSP, holds=("user",)), _stim(m.Kill, user="alice", record_done=True))
    why = "killed by alice while pending; recorded DONE (bkill -d)"
    assert out.state is S.DONE and out.fields["state"] is S.DONE and out.fields["holds"] == set()
    assert out.fields["exit_reason"] == why and _kinds(out) == [("KILL", "PSUSP", "DONE")] and out.events[0].reason == why
    out = transition(_el(S.RUN), _stim(m.Kill, user="alice", record_done=True))
    assert out.state is S.RUN and out.fields == {"action": "kill-done:alice"} and out.effects == [m.KillElement()]
    assert _kinds(out) == [("KILL_REQUEST", None, None)] and out.events[0].reason == "recorded DONE when it ends (bkill -d)"
    killed = EndStatus(130, None, T, T + 1, "killed")
    out = transition(_el(S.RUN, action="kill-done:alice"), _stim(m.Finished, status=killed))
    assert out.state is S.DONE and _kinds(out) == [("DONE", "RUN", "DONE")] and out.fields["action"] is None
    assert out.fields["exit_reason"] == out.events[0].reason == "killed by alice; recorded DONE (bkill -d)"
    assert out.fields["exit_code"] == 130 and out.effects == [m.EndTasks(("h1", "h2"))]
    # a job whose SIGTERM handler exits 1 is recorded DONE too ("after the jobs exit")
    out = transition(_el(S.USUSP, action="kill-done:bob"), _stim(m.Finished, status=EndStatus(1, None, T, T + 1, None)))
    assert out.state is S.DONE and out.fields["exit_reason"] == "exited with code 1; killed by bob, recorded DONE (bkill -d)"
    # the same end after a plain kill stays EXIT
    assert transition(_el(S.RUN, action="kill:alice"), _stim(m.Finished, status=killed)).state is S.EXIT
    # a supervisor lost under the kill: nobody knows how it ended, so it is not recorded DONE
    lost = EndStatus(1, None, T, T + 1, "supervisor lost")
    assert transition(_el(S.RUN, action="kill-done:alice"), _stim(m.Finished, status=lost)).state is S.EXIT
    # its host lost while the kill was asked: recorded DONE at the loss; a rejoin asks the kill again
    out = transition(_el(S.RUN, action="kill-done:alice"), m.HostLost("host-1", "system", T, host="h1"))
    assert out.state is S.DONE and out.fields["exit_reason"] == "killed by alice; host h1 lost; recorded DONE (bkill -d)"
    assert m.host_transition(_stim(m.HostJoined, host="h1"), [_el(S.RUN, action="kill-done:alice")]).effects == (
        m.ReattachElement(7, 0, 0), m.KillAgain(7, 0))
    assert m.killed_by("kill-done:alice") == ("alice", True) and m.killed_by("kill:bob") == ("bob", False)
    assert m.killed_by("requeue:bob") is None and m.killed_by(None) is None


def test_a_kill_that_removes_ends_the_element_exit_at_once_and_notes_its_later_end():
    """CLI-8 (issue 18), D-5, LSF bkill -r: "Removes a job from the LSF system without waiting
    for the job to terminate in the operating system. Sends the same series of signals as
    bkill without -r, except that the job is removed from the system immediately"
    (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bkill.1.html; docs/lsf-behaviour.md
    section 6). A running (or stopped) element is EXIT at once with the reason, its action
    "remove:USER" stored and the kill sequence still sent; the end of its processes is then
    only noted and clears the action; a pending one is EXIT at once; a loss of its host or
    an end without the removal changes nothing."""
    why = "removed by alice (bkill -r); its processes are being killed"
    for state in (S.RUN, S.USUSP):
        e = _el(state, action="kill:alice")  # a plain kill under way: the removal wins
        e.start_time = T - 5
        out = transition(e, _stim(m.Kill, user="alice", force=True))
        assert out.state is S.EXIT and out.fields["state"] is S.EXIT and out.fields["action"] == "remove:alice"
        assert out.fields["exit_reason"] == why and out.fields["end_time"] == T and out.fields["start_time"] == T - 5
        assert "alloc" not in out.fields and "reserve" not in out.fields  # kept: where it ran, what the shell frees
        assert _kinds(out) == [("KILL", str(state), "EXIT")] and out.events[0].reason == why
        assert out.effects == [m.KillElement()]
    out = transition(_el(S.PSUSP, holds=("user",)), _stim(m.Kill, user="bob", force=True))
    assert out.state is S.EXIT and out.fields["exit_reason"] == "removed by bob while pending (bkill -r)"
    assert out.fields["holds"] == set() and out.effects == []
    # the worker's later end report: noted, the state and reason kept, the action cleared
    removed = _el(S.EXIT, action="remove:alice")
    out = transition(removed, _stim(m.Finished, status=EndStatus(137, "SIGKILL", T, T + 3, "killed")))
    assert out.state is S.EXIT and out.fields == {"action": None} and _kinds(out) == [("ENDED_AFTER_REMOVE", None, None)]
    assert out.events[0].reason == "its processes were killed by signal SIGKILL after alice removed it (bkill -r)"
    assert out.effects == [m.EndTasks(("h2",))]
    out = transition(removed, _stim(m.Finished, status=EndStatus(1, None, T, T + 3, None)))
    assert out.events[0].reason == "its processes exited with code 1 after alice removed it (bkill -r)"
    # an end report of an element finished otherwise asks nothing; a finished element is never lost
    assert transition(_el(S.EXIT), SAMPLES[m.Finished]) is None
    with pytest.raises(IllegalTransition):
        transition(removed, m.HostLost("host-1", "system", T, host="h1"))
    with pytest.raises(IllegalTransition):  # removed already: a second bkill -r finds it finished
        transition(removed, _stim(m.Kill, user="alice", force=True))
    assert m.removed_by("remove:alice") == "alice" and m.removed_by("kill:alice") is None
    assert m.killed_by("remove:alice") is None and m.removed_by(None) is None


def test_the_shell_frees_a_removed_elements_slots_at_once_and_keeps_it_exit(ctl):
    """RES-2, D-5, LSF bkill -r ("job resources that LSF monitors are released as soon as LSF
    receives the first signal", IBM's bkill page): on a host with 4 slots, a removed job's
    slots go to a pending job at the next session while its worker is told to kill it; the
    worker's end report (still taken from its host's worker until then) adds one event and
    leaves the job EXIT."""
    big = ctl.submit(req(ntasks_min=4), ALICE)
    session(ctl)
    assert big.elements[0].state is S.RUN and ctl.hosts["h1"].slots_used == 4
    waiting = ctl.submit(req(ntasks_min=4), ALICE)
    session(ctl)
    assert waiting.elements[0].state is S.PEND
    assert ctl.kill(big.id, None, ALICE, force=True) == [str(big.id)]
    e = big.elements[0]
    assert e.state is S.EXIT and e.action == "remove:alice" and ctl.fake.killed == [(big.id, 0)]
    assert ctl.hosts["h1"].slots_used == 0 and big.id not in ctl.active
    assert ctl.element_host(big.id, 0) == "h1"  # its worker's end report is still taken (D-7)
    session(ctl)
    assert waiting.elements[0].state is S.RUN and ctl.hosts["h1"].slots_used == 4
    ctl.on_finished(big.id, 0, EndStatus(137, "SIGKILL", T, T + 3, "killed"), attempt=e.attempt)
    assert e.state is S.EXIT and e.action is None and ctl.hosts["h1"].slots_used == 4
    assert ctl.element_host(big.id, 0) is None  # reported: nothing more is taken from a worker about it
    assert e.exit_reason == "removed by alice (bkill -r); its processes are being killed"
    rows = ctl.store.events(big.id)
    assert [r[3] for r in rows][-2:] == ["KILL", "ENDED_AFTER_REMOVE"]
    ctl.on_finished(big.id, 0, EndStatus(137, "SIGKILL", T, T + 3, "killed"))  # a second report: ignored
    assert len(ctl.store.events(big.id)) == len(rows) and e.state is S.EXIT
    ctl.kill(waiting.id, None, ALICE)


def test_stop_and_resume_and_the_two_hold_kinds():
    out = transition(_el(S.RUN), _stim(m.Stop))
    assert out.state is S.USUSP and out.effects == [m.SignalElement(signal.SIGSTOP)]
    out = transition(_el(S.USUSP), _stim(m.Resume))
    assert out.state is S.RUN and out.effects == [m.SignalElement(signal.SIGCONT)]
    out = transition(_el(S.PEND), _stim(m.Stop))
    assert out.state is S.PSUSP and out.fields["holds"] == {"user"} and out.memory["pend_reason"].main.startswith(
        "The job was suspended by the user")
    assert transition(_el(S.PSUSP, holds=("user",)), _stim(m.Stop)) is None  # already held by its user
    out = transition(_el(S.PSUSP, holds=("system",)), _stim(m.Stop))
    assert out.fields["holds"] == {"system", "user"} and "pend_reason" not in out.memory  # the system's reason stays
    # a resume releases the user hold only; the system hold stays (D-5)
    out = transition(_el(S.PSUSP, holds=("user", "system")), _stim(m.Resume))
    assert out.state is S.PSUSP and out.fields["holds"] == {"system"} and _kinds(out) == [("RELEASE_ONE", "PSUSP", "PSUSP")]
    assert transition(_el(S.PSUSP, holds=("system",)), _stim(m.Resume)) is None
    out = transition(_el(S.PSUSP, holds=("system",)), _stim(m.Release, reason="by an admin"))
    assert out.state is S.PEND and out.fields["holds"] == set() and out.fields["failures"] == 0
    assert transition(_el(S.PSUSP, holds=("user",)), _stim(m.Release, reason="x")) is None


def test_requeue():
    out = transition(_el(S.RUN), _stim(m.Requeue, user="alice"))
    assert out.state is S.RUN and out.fields == {"action": "requeue:alice"} and out.effects == [m.KillElement()]
    out = transition(_el(S.EXIT), _stim(m.Requeue, user="alice"))
    assert out.state is S.PEND and out.fields["exit_code"] is None and out.events[0].reason == "requeued by alice"
    with pytest.raises(IllegalTransition):
        transition(_el(S.PEND), _stim(m.Requeue, user="alice"))


def test_a_requeue_with_hold_pends_held_by_its_user_on_every_path():
    """CLI-8, D-5, LSF brequeue -H ("Requeues jobs to PSUSP job status", IBM brequeue.1;
    docs/lsf-behaviour.md section 5 [81]): a finished element is PSUSP with a user hold at
    once; a running one is killed first ("requeue-hold:USER") and is PSUSP, held, when its
    processes end, or when its first host is lost or has no worker; the reason says so, and
    a plain requeue still pends (PEND, no hold)."""
    out = transition(_el(S.DONE), _stim(m.Requeue, user="alice", hold=True))
    assert (out.state, out.fields["holds"]) == (S.PSUSP, {"user"})
    assert out.events[0].reason == "requeued by alice; held (brequeue -H)"
    out = transition(_el(S.RUN), _stim(m.Requeue, user="alice", hold=True))
    assert out.state is S.RUN and out.fields == {"action": "requeue-hold:alice"} and out.effects == [m.KillElement()]
    ended = transition(_el(S.RUN, action="requeue-hold:alice"),
                       _stim(m.Finished, status=EndStatus(None, "SIGTERM", T, T + 1, None)))
    assert (ended.state, ended.fields["holds"], ended.fields["action"]) == (S.PSUSP, {"user"}, None)
    assert (ended.events[0].reason, ended.events[0].actor) == ("requeued; the running job was killed; held "
                                                               "(brequeue -H)", "user:alice")
    lost = transition(_el(S.RUN, action="requeue-hold:bob"), m.HostLost("host-1", "system", T, host="h1",
                                                                         policy="exit"))
    assert (lost.state, lost.fields["holds"]) == (S.PSUSP, {"user"})
    assert lost.events[0].reason == "requeued by bob; host h1 lost; held (brequeue -H)"
    away = transition(_el(S.RUN), _stim(m.Requeue, user="alice", away=frozenset({"h1"}), hold=True))
    assert away.state is S.PSUSP and "holds" in away.fields
    plain = transition(_el(S.RUN, action="requeue:alice"),
                       _stim(m.Finished, status=EndStatus(None, "SIGTERM", T, T + 1, None)))
    assert plain.state is S.PEND and "holds" not in plain.fields


def test_system_hold_keeps_one_hold():
    out = transition(_el(S.PEND), _stim(m.SystemHold, reason="refused: x", pend_reason="Held by the system: x"))
    assert out.state is S.PSUSP and out.fields["holds"] == {"system"} and out.memory["pend_reason"].main == \
        "Held by the system: x"
    out = transition(_el(S.PSUSP, holds=("system",)), _stim(m.SystemHold, reason="again"))
    assert out.fields == {} and out.events == [] and out.memory["pend_reason"].main == "again"


class FailingCommit(Exception):
    pass


def _break_commits(store):
    """Make every later transaction of `store` fail at its first write (as a full disk does)."""
    real = store.update_element

    def boom(*a, **k):
        raise sqlite3.OperationalError("database or disk is full")

    store.update_element = boom
    return real


def test_a_failed_commit_leaves_memory_as_it_was(ctl):
    """D-8 (the shell's rule): the store refuses the transaction, so nothing changes in memory:
    the element stays RUN with its slot, its events are not written, no worker is told. A
    user's request gets the typed error naming the cause; a job's end is kept, and recorded
    with its real end time once the store takes writes again."""
    job = ctl.submit(req(), ALICE)
    session(ctl)
    e = job.elements[0]
    assert e.state is S.RUN and ctl.hosts["h1"].slots_used == 1
    events = len(ctl.store.events(job.id))
    real = _break_commits(ctl.store)
    for act in (lambda: ctl.kill(job.id, None, ALICE), lambda: ctl.stop(job.id, None, ALICE)):
        with pytest.raises(StoreUnavailable, match="the disk holding .* is full"):
            act()
        assert e.state is S.RUN and e.action is None and ctl.hosts["h1"].slots_used == 1
        assert ctl.fake.killed == [] and ctl.fake.signals == [] and job.unfinished == 1
    ctl.on_finished(job.id, 0, EndStatus(0, None, T, T + 1, None))  # the worker's report: kept
    assert e.state is S.RUN and ctl.hosts["h1"].slots_used == 1 and ctl.deferred_writes == [f"the end of {job.id}"]
    assert ctl.retry_now() == 0 and e.state is S.RUN  # the store still refuses it
    assert len(ctl.store.events(job.id)) == events
    ctl.store.update_element = real  # the store works again: the same end is recorded
    assert ctl.retry_now() == 1 and ctl.deferred_writes == []
    assert e.state is S.DONE and ctl.hosts["h1"].slots_used == 0 and e.end_time == T + 1
    assert ctl.store.events(job.id)[-1][0] == T + 1  # the event carries the real end time too (JOB-8)


def test_a_failed_commit_of_a_session_starts_nothing_and_resumes(ctl):
    """D-8: a session whose dispatches the store refuses applies nothing and is kept; no
    other session runs meanwhile, and once the store works the kept one starts the jobs."""
    jobs = [ctl.submit(req(), ALICE) for _ in range(3)]
    real = _break_commits(ctl.store)
    session(ctl)
    assert all(j.elements[0].state is S.PEND for j in jobs) and ctl.hosts["h1"].slots_used == 0
    assert ctl.fake.started == [] and ctl.deferred_writes == ["the scheduler's decisions"]
    late = ctl.submit(req(), ALICE)  # a submit while the session waits asks for no other
    assert not ctl.session_asked
    ctl.store.update_element = real
    assert ctl.retry_now() == 1
    assert all(j.elements[0].state is S.RUN for j in [*jobs, late]) and ctl.hosts["h1"].slots_used == 4


def test_events_carry_the_id_of_their_stimulus(ctl):
    job = ctl.submit(req(), ALICE)
    session(ctl)
    ctl.kill(job.id, None, ADMIN)
    rows = ctl.store.events(job.id)
    kinds = {r[3]: r[8] for r in rows}
    assert kinds["DISPATCH"].startswith("session-") and kinds["KILL_REQUEST"].startswith("kill-")
    assert kinds["DISPATCH"] != kinds["KILL_REQUEST"]


def test_the_architecture_doc_shows_the_table_in_force():
    """docs/architecture.md renders the transition table; it may not drift from the code."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    begin, end = "<!-- transition table: begin -->\n", "<!-- transition table: end -->"
    shown = doc[doc.index(begin) + len(begin):doc.index(end)]
    assert shown == m.render_table(), "docs/architecture.md's table is stale: paste render_table()'s output"


def test_a_host_join_reattaches_what_runs_there_and_a_leave_touches_no_job():
    """JOB-8: a worker that joins finds its running elements again; one that leaves stops
    taking work, and what runs there keeps running (no job effect)."""
    a, b = _el(S.RUN), _el(S.USUSP)
    out = m.host_transition(_stim(m.HostJoined, host="h1"), [a, b])
    assert out == m.HostOutcome("ok", (m.ReattachElement(7, 0, 0), m.ReattachElement(7, 0, 0),
                                       m.SignalAgain(7, 0, signal.SIGSTOP)))  # a stopped job stays stopped
    assert m.host_transition(_stim(m.HostLeft, host="h1"), [a, b]) == m.HostOutcome("unavail", ())
    # what the worker missed while away reaches it (D-8): a kill asked, a resume sent
    killed = _el(S.RUN, action="kill:alice")
    assert m.host_transition(_stim(m.HostJoined, host="h1"), [killed]).effects == (
        m.ReattachElement(7, 0, 0), m.KillAgain(7, 0))
    assert m.host_transition(_stim(m.HostJoined, host="h1"), [a], {(7, 0): signal.SIGCONT}).effects == (
        m.ReattachElement(7, 0, 0), m.SignalAgain(7, 0, signal.SIGCONT))
    with pytest.raises(TypeError, match="not a host stimulus"):
        m.host_transition(_stim(m.Kill), [a])


def test_host_stimuli_reach_the_registry_and_the_worker(ctl):
    job = ctl.submit(req(), ALICE)
    session(ctl)
    link = ctl.fake
    link.reattached = []
    link.reattach = lambda jid, idx, attempt=None: link.reattached.append((jid, idx))
    ctl.worker_left(link)
    assert ctl.hosts["h1"].status == "unavail" and not ctl.is_joined("h1")
    assert job.elements[0].state is S.RUN and link.killed == []  # JOB-8: it keeps running
    ctl.worker_joined(link, None)
    assert ctl.hosts["h1"].status == "ok" and ctl.is_joined("h1") and link.reattached == [(job.id, 0)]
    # a kill and a stop asked while the worker is away reach it when it joins again (D-8)
    ctl.worker_left(link)
    ctl.stop(job.id, None, ALICE)
    assert link.signals == [] and job.elements[0].state is S.USUSP
    ctl.worker_joined(link, None)
    assert link.signals == [(job.id, 0, signal.SIGSTOP)]
    ctl.worker_left(link)
    ctl.kill(job.id, None, ALICE)
    assert link.killed == []
    ctl.worker_joined(link, None)
    assert link.killed == [(job.id, 0)] and job.elements[0].state is S.USUSP  # until its end is reported


def test_a_config_applied_names_itself_on_every_job_event_it_causes(tmp_path):
    """CFG-3: one apply holds two jobs its config refuses; both holds carry that apply's ID."""
    from xced.model.config import ClusterConfig, ClusterSettings, HostConfig, QueueConfig
    from xced.store.sqlite import SqliteStore
    from tests.unit.test_controller import controller_on

    cfg = ClusterConfig(settings=ClusterSettings(mode="test", admins=["admin"]),
                        queues=[QueueConfig(name="normal"), QueueConfig(name="short")],
                        hosts=[HostConfig(name="h1", slots=1, memory_mb=1000)])
    store = SqliteStore(tmp_path / "db")
    c = controller_on(store, cfg, tmp_path)
    jobs = [c.submit(req(queue="short"), ALICE) for _ in range(2)]
    c.apply_config(cfg.model_copy(update={"queues": [QueueConfig(name="normal")]}), ADMIN)
    ids = {r[8] for j in jobs for r in store.events(j.id) if r[3] == "HOLD"}
    assert len(ids) == 1 and next(iter(ids)).startswith("config-")
    store.close()


# ---------------------------------------------------------------------- lost hosts (SCHED-4)


def test_each_dispatch_is_a_new_attempt():
    """SCHED-4 fencing: the dispatch count is stored, and it is what the start carries."""
    e = _el(S.PEND, alloc=())
    e.attempt = 2
    out = transition(e, _stim(m.Dispatch, alloc=(("h1", 1),), token="t", token_hash="h"))
    assert out.fields["attempt"] == 3


def test_a_lost_first_host_requeues_at_once_with_the_reason_and_ends_tasks_elsewhere():
    e = _el(S.RUN)  # h1:2 (first), h2:1
    out = transition(e, m.HostLost("host-1", "system", T, host="h1", policy="requeue"))
    assert out.state is S.PEND and _kinds(out) == [("REQUEUE", "RUN", "PEND")]
    assert out.events[0].reason == "requeued: host h1 lost"
    assert out.fields["alloc"] == [] and out.fields["reserve"] == {} and out.fields["action"] is None
    assert out.effects == [m.EndTasks(("h2",))]


def test_a_lost_host_ends_the_job_exit_when_its_profile_says_exit():
    out = transition(_el(S.USUSP), m.HostLost("host-1", "system", T, host="h1", policy="exit"))
    assert out.state is S.EXIT and out.fields["exit_reason"] == "host h1 lost" and out.fields["end_time"] == T
    assert _kinds(out) == [("EXIT", "USUSP", "EXIT")]


def test_a_lost_second_host_kills_the_copy_on_the_first_and_the_end_requeues_it():
    """A multi-host job is handled as a whole: the first host's copy is killed, and its end
    (whatever its exit status) requeues the job, or ends it for policy exit."""
    e = _el(S.RUN)
    out = transition(e, m.HostLost("host-1", "system", T, host="h2", policy="requeue", first_alive=True))
    assert out.state is S.RUN and _kinds(out) == [("HOST_LOST", None, None)]
    assert out.fields == {"action": "lost:requeue:h2"} and out.effects == [m.KillElement()]
    e.action = "lost:requeue:h2"
    end = transition(e, _stim(m.Finished, status=EndStatus(143, "SIGTERM", T, T + 1, "killed")))
    assert end.state is S.PEND and end.events[0].reason == "requeued: host h2 lost"
    assert m.EndTasks(("h1", "h2")) in end.effects
    e.action = "lost:exit:h2"
    end = transition(e, _stim(m.Finished, status=EndStatus(0, None, T, T + 1, None)))
    assert end.state is S.EXIT and end.fields["exit_reason"] == "host h2 lost"
    # a second loss while that kill runs changes nothing
    assert transition(e, m.HostLost("host-2", "system", T, host="h2", policy="requeue", first_alive=True)) is None


def test_a_kill_asked_while_the_host_was_away_ends_the_job_at_the_loss():
    e = _el(S.RUN, action="kill:alice")
    out = transition(e, m.HostLost("host-1", "system", T, host="h1", policy="requeue"))
    assert out.state is S.EXIT and out.fields["exit_reason"] == "killed by alice; host h1 lost"
    e = _el(S.RUN, action="requeue:bob")
    out = transition(e, m.HostLost("host-1", "system", T, host="h1", policy="exit"))
    assert out.state is S.PEND and out.events[0].reason == "requeued by bob; host h1 lost"


def test_a_requeue_by_hand_of_a_job_whose_host_has_no_worker_pends_it_at_once():
    e = _el(S.RUN)
    out = transition(e, _stim(m.Requeue, user="alice", away=frozenset({"h1"})))
    assert out.state is S.PEND and "its host h1 has no worker now" in out.events[0].reason
    assert out.effects == [m.EndTasks(("h2",))]
    out = transition(e, _stim(m.Requeue, user="alice", away=frozenset({"h2"})))  # first host served: killed first
    assert out.state is S.RUN and out.effects == [m.KillElement()]


def test_a_rejoin_asks_again_for_the_kill_of_a_lost_hosts_copy():
    e = _el(S.RUN, action="lost:requeue:h2")
    out = m.host_transition(m.HostJoined("host-1", "worker:h1", T, host="h1"), [e])
    assert m.KillAgain(7, 0) in out.effects and m.ReattachElement(7, 0, 0) in out.effects

"""The job state machine (DESIGN rule 2, D-5): typed stimuli in, changes out. No I/O.

`transition(element, stimulus)` looks up the pair (type of stimulus, element state) in
TABLE and returns an Outcome: the stored fields to set, the memory-only fields (pend
reason, declined-dispatch count, the plain launch token), the events to write and the
effects to run. It never changes the element: the controller's shell writes the fields
and events in one store transaction, and only after the commit changes memory and runs
the effects, so a failed commit leaves memory exactly as it was. A pair that is not in
TABLE raises IllegalTransition; an entry may return None when the stimulus asks for
nothing to change in that state (stopping a job already held by its user).

The rules, as LSF states them (bkill, bstop, bresume, brequeue; "pending reasons"):

- A kill ends a pending element at once (EXIT, "killed by USER while pending"); a running
  one gets LSF's kill sequence and ends when its processes do (KillRequested). A kill
  that records DONE (`bkill -d`: "Kills the jobs, and records the jobs as DONE after the
  jobs exit", IBM's bkill page) ends the element DONE instead, its reason and events
  ending "recorded DONE (bkill -d)"; so its dependants on done() start and those on
  exit() never do, as with LSF's record. A running element keeps that wish in its stored
  action ("kill-done:USER"), so a daemon restart during the kill still ends it DONE.
- A kill that removes (`bkill -r`: "Removes a job from the LSF system without waiting for
  the job to terminate in the operating system. Sends the same series of signals as bkill
  without -r, except that the job is removed from the system immediately ... job
  resources that LSF monitors are released as soon as LSF receives the first signal",
  IBM's bkill page) ends every unfinished element EXIT at once, "removed by USER (bkill
  -r); its processes are being killed", its slots and reservations released; a running
  one still gets the kill sequence (KillElement) and keeps the stored action
  "remove:USER" until its processes' end is reported, which is then only noted (an
  ENDED_AFTER_REMOVE event, the action cleared): it never changes the finished state. A
  restart or a lost host leaves it finished (only active elements are re-attached or
  lost; a copy a rejoining worker still runs is fenced, SCHED-4).
- A stop suspends a running element (USUSP, SIGSTOP) and puts a `user` hold on a pending
  one (PSUSP); a resume undoes only those: it never releases a `system` hold, which only an
  admin's release does (D-5, two hold kinds that never release each other).
- A requeue of a running element kills it and it pends again when it has ended; a
  finished one pends again at once, with the same ID and submit time.
- A dispatch the controller cannot apply is declined: the element stays PEND. A start the
  worker could not make (no job directory, no launcher) sends it back to PEND. Either way
  it waits a doubling delay before it is dispatched again (1 s, 2 s, ... at most 60 s), its
  pend reason names the failure, and after `max_dispatch_failures` (xce.yaml, default 5)
  in a row it gets a `system` hold (DISPATCH-2). The count is stored, so it survives a
  restart; a start of the job sets it to 0.
- An element ends DONE on exit 0 with no signal and no reason, or when a kill that records
  DONE ended it (bkill -d); else EXIT with the reason ("run limit", "killed by USER",
  "exited with code N", "killed by signal SIGTERM").
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Callable, Union

from xced.model.jobs import FINISHED, EndReason, HoldKind, JobState, PendReason
from xced.model.state import Element, EndStatus

S = JobState

#: failed starts and declined dispatches in a row before a system hold, unless xce.yaml's
#: max_dispatch_failures says otherwise (DISPATCH-2)
MAX_DECLINES = 5
#: the backoff after the first failure, doubled at each one after it up to RETRY_MAX_S (seconds)
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 60.0


def retry_delay(failures: int) -> float:
    """Seconds an element waits before its next dispatch after `failures` failures in a row."""
    return min(RETRY_FIRST_S * 2 ** max(failures - 1, 0), RETRY_MAX_S)
REASON_USER_HOLD = "The job was suspended by the user while pending (xcecli resume releases it)"


# ---------------------------------------------------------------------- stimuli


@dataclass(frozen=True, slots=True)
class Stimulus:
    """What happened, to whom: `id` names the request, session or report that caused it
    (recorded on every event it causes, for `xcecli hist`), `actor` who ("user:alice",
    "scheduler", "worker:h1", "admin:root", "system"), `time` when (epoch seconds)."""

    id: str
    actor: str
    time: float


@dataclass(frozen=True, slots=True)
class Dispatch(Stimulus):
    """The scheduler's decision, re-checked by the controller (DISPATCH-2): start on `alloc`
    ([(host, slots)]) holding `reserve` per host; `token`/`token_hash` are the new launch
    token and its SHA-256 (D-7); `note` ends the event's reason (the profile and its hash)."""

    alloc: tuple[tuple[str, int], ...] = ()
    reserve: dict = field(default_factory=dict)
    token: str = ""
    token_hash: str = ""
    note: str = ""


@dataclass(frozen=True, slots=True)
class Declined(Stimulus):
    """A decision that cannot be applied (the profile vanished or changed): `why`; `limit`
    failures in a row hold the element (max_dispatch_failures)."""

    why: str = ""
    limit: int = MAX_DECLINES


@dataclass(frozen=True, slots=True)
class StartFailed(Stimulus):
    """The worker could not start the element at all (retryable): `reason`; `limit` failures
    in a row hold the element (max_dispatch_failures)."""

    reason: str = ""
    limit: int = MAX_DECLINES


@dataclass(frozen=True, slots=True)
class Started(Stimulus):
    """The worker saw the job's process start at `start_time` (memory only: the end's record
    carries it durably), its processes kept together by `containment` (JOB-1; in memory, and
    stored with the end)."""

    start_time: float = 0.0
    containment: str | None = None
    #: the stdout and stderr paths the job writes, as its supervisor opened them (JOB-12)
    outputs: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Finished(Stimulus):
    """The element's processes ended, as its supervisor recorded it (JOB-8)."""

    status: EndStatus | None = None


@dataclass(frozen=True, slots=True)
class Kill(Stimulus):
    """`xcecli kill` by `user` (LSF bkill); `record_done`: end the element DONE, not EXIT
    (`bkill -d`, `xcecli kill --record-done`); `force`: end it EXIT at once, its processes
    killed after (`bkill -r`, `xcecli kill --force`). `record_done` and `force` never come
    together (xced.api.models.KillRequest refuses it)."""

    user: str = ""
    record_done: bool = False
    #: remove the element at once (`bkill -r`, `xcecli kill --force`): EXIT now, the kill
    #: sequence still sent to its processes
    force: bool = False
    #: why (`bkill -C kill_reason`): "; kill reason: TEXT" ends the kill's event reason
    comment: str | None = None


@dataclass(frozen=True, slots=True)
class Stop(Stimulus):
    """`xcecli stop` (LSF bstop)."""


@dataclass(frozen=True, slots=True)
class Resume(Stimulus):
    """`xcecli resume` (LSF bresume)."""


@dataclass(frozen=True, slots=True)
class Requeue(Stimulus):
    """`xcecli requeue` by `user` (LSF brequeue). `away`: hosts no worker serves now; a
    running element whose first host is one of them pends again at once (nobody could
    carry out its kill: its copy there is fenced when the host rejoins, SCHED-4)."""

    user: str = ""
    away: frozenset = frozenset()
    #: pend again held by its user, PSUSP, not PEND (LSF brequeue -H: "Requeues jobs to PSUSP
    #: job status"); `bresume` releases it
    hold: bool = False


#: the stored action of a running element being requeued: "requeue:USER", or
#: "requeue-hold:USER" when it pends again held (brequeue -H)
REQUEUE_ACTIONS = ("requeue:", "requeue-hold:")


def _requeued(e: Element, hold: bool, reason: str, **fields) -> Outcome:
    """The element pends again with the same ID and submit time: PEND, or PSUSP held by its
    user with `hold` (brequeue -H); one REQUEUE event with `reason`."""
    if hold:
        fields["holds"] = set(e.holds) | {str(HoldKind.USER)}
        reason += "; held (brequeue -H)"
    return _move(e, S.PSUSP if hold else S.PEND, "REQUEUE", reason, **fields)


@dataclass(frozen=True, slots=True)
class SystemHold(Stimulus):
    """Hold by the system (a config that refuses the job, CFG-3; PRJ-5 later): `reason` on
    the event, `pend_reason` what `why` shows."""

    reason: str = ""
    pend_reason: str = ""


@dataclass(frozen=True, slots=True)
class Release(Stimulus):
    """Release of a `system` hold (an admin's `xcecli release`, or a config that takes the job
    again): `reason` on the event."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class HostLost(Stimulus):
    """`host`, where the element runs, has had no worker for longer than host_lost_grace
    (SCHED-4): the element is requeued or ended EXIT as `policy` (its profile's
    on_host_failure, "requeue" or "exit") says. `first_alive`: its first host is another,
    still served, host (the lost one held some of its tasks): the copy there is killed
    first and the element is requeued or ended when its processes have ended."""

    host: str = ""
    policy: str = "requeue"
    first_alive: bool = False


@dataclass(frozen=True, slots=True)
class Pending(Stimulus):
    """Why the element waits now (RES-6), or None when no reason holds any more (its -w
    dependency is met): from a scheduler session (SCHED-3: only a changed reason), the
    dependency check (JOB-5), or the last session's findings at a submit."""

    reason: PendReason | None = None


AnyStimulus = Union[Dispatch, Declined, StartFailed, Started, Finished, Kill, Stop, Resume, Requeue, SystemHold,
                    Release, HostLost, Pending]
STIMULI: tuple[type, ...] = (Dispatch, Declined, StartFailed, Started, Finished, Kill, Stop, Resume, Requeue,
                             SystemHold, Release, HostLost, Pending)


# ---------------------------------------------------------------------- outcomes


@dataclass(frozen=True, slots=True)
class Event:
    """One row of the job's history (D-5): `kind` (DISPATCH, DONE, HOLD, KILL_REQUEST...),
    the states before and after (None for an event that changes no state), the reason, and
    the actor when it is not the stimulus's (the user whose requeue a job end completes)."""

    kind: str
    from_state: str | None
    to_state: str | None
    reason: str | None
    actor: str | None = None


@dataclass(frozen=True, slots=True)
class StartElement:
    """Start the dispatched element on its first host (its profile's host hooks first)."""


@dataclass(frozen=True, slots=True)
class KillElement:
    """Run the kill sequence on the element's first host and end its tasks on the others."""


@dataclass(frozen=True, slots=True)
class SignalElement:
    """Send `sig` to the element's process group on its first host (SIGSTOP, SIGCONT)."""

    sig: int


@dataclass(frozen=True, slots=True)
class EndTasks:
    """The element's script ended: end its launched tasks on every host it ran on."""

    hosts: tuple[str, ...]


Effect = Union[StartElement, KillElement, SignalElement, EndTasks]

#: stored element fields an outcome may set (the store's columns)
STORED = frozenset({"state", "holds", "start_time", "end_time", "exit_code", "exit_signal", "exit_reason", "alloc",
                    "action", "token_hash", "reserve", "containment", "attempt", "failures"})
#: memory-only element fields an outcome may set (a start time the worker saw is kept in memory
#: only: the end's record carries it durably)
MEMORY = frozenset({"pend_reason", "token", "start_time", "failures", "retry_at", "containment", "outputs"})


@dataclass(slots=True)
class Outcome:
    """What one stimulus does to one element: `fields` (stored), `memory` (memory-only),
    `events` and `effects`. `state` is the element's state afterwards."""

    state: S
    fields: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    effects: list = field(default_factory=list)


class IllegalTransition(Exception):
    """`stimulus` is not allowed in state `state`; the message says which states allow it."""

    def __init__(self, stimulus: str, state: S) -> None:
        allowed = sorted(str(f) for (s, f) in TABLE if s.__name__ == stimulus)
        super().__init__(f"cannot {stimulus.lower()} a job in state {state}; allowed from: "
                         f"{', '.join(allowed) or 'none'}")
        self.stimulus = stimulus
        self.state = state


def _move(e: Element, new: S, kind: str, reason: str | None, **fields) -> Outcome:
    """An outcome that moves `e` to `new` with one event of `kind`; a finished element has
    no pend reason."""
    out = Outcome(new, {"state": new, **fields}, {}, [Event(kind, str(e.state), str(new), reason)])
    if new in FINISHED:
        out.memory["pend_reason"] = None
    return out


#: what ends the reason of an element killed with bkill -d (its end is recorded DONE)
RECORDED_DONE = "recorded DONE (bkill -d)"
#: the stored action of a running element being killed: "kill:USER", or "kill-done:USER"
#: when its end is recorded DONE (bkill -d)
KILL_ACTIONS = ("kill:", "kill-done:")


def kill_action(user: str, record_done: bool) -> str:
    """The stored action of a kill by `user` under way: "kill:USER", or "kill-done:USER" for
    one that records the element DONE (bkill -d)."""
    return f"{KILL_ACTIONS[1] if record_done else KILL_ACTIONS[0]}{user}"


def killed_by(action: str | None) -> tuple[str, bool] | None:
    """(user, record_done) of a stored kill action ("kill:alice" -> ("alice", False),
    "kill-done:alice" -> ("alice", True)); None for any other action (a requeue, a lost
    host) or none."""
    for prefix in KILL_ACTIONS:
        if action and action.startswith(prefix):
            return action[len(prefix):], prefix == KILL_ACTIONS[1]
    return None


#: the stored action of an element removed at once (bkill -r) whose processes are still being
#: killed: "remove:USER", cleared when their end is reported
REMOVE_ACTION = "remove:"


def removed_by(action: str | None) -> str | None:
    """The user of a stored removal ("remove:alice" -> "alice", bkill -r) whose processes'
    end is not reported yet; None for any other action or none."""
    if action and action.startswith(REMOVE_ACTION):
        return action[len(REMOVE_ACTION):]
    return None


def _note(e: Element, kind: str, reason: str | None, **fields) -> Outcome:
    """An event that changes no state (a kill or requeue asked of a running element)."""
    return Outcome(e.state, dict(fields), {}, [Event(kind, None, None, reason)])


# ---------------------------------------------------------------------- the table's functions


def _dispatch(e: Element, s: Dispatch) -> Outcome:
    """RUN on the decided hosts with a new launch token; start it there."""
    alloc = [(h, n) for h, n in s.alloc]
    out = _move(e, S.RUN, "DISPATCH", "dispatched to " + " ".join(f"{h}:{n}" for h, n in alloc) + s.note,
                alloc=alloc, start_time=s.time, end_time=None, exit_code=None, exit_signal=None, exit_reason=None,
                action=None, token_hash=s.token_hash, reserve=dict(s.reserve), attempt=e.attempt + 1)
    out.memory.update(pend_reason=None, retry_at=None, token=s.token, containment=None, outputs=None)
    out.effects.append(StartElement())
    return out


def _count_failure(e: Element, s: Declined | StartFailed, out: Outcome, what: str, why: str) -> Outcome:
    """One more failure in a row on `out`: the count stored, the backoff and the pend reason
    naming the failure, or at the limit a system hold."""
    n = e.failures + 1
    out.fields["failures"] = n
    if n < s.limit:
        wait = retry_delay(n)
        out.memory.update(retry_at=s.time + wait, pend_reason=PendReason(
            f"{what} ({n} in a row, {s.limit} hold the job): {why}; dispatched again in {wait:g} s"))
        return out
    was = out.state
    out.state = S.PSUSP
    out.fields.update(state=S.PSUSP, holds=set(e.holds) | {str(HoldKind.SYSTEM)})
    out.events.append(Event("HOLD", str(was), str(S.PSUSP), f"held after {n} failed dispatches in a row: {why}"))
    out.memory.update(retry_at=None, pend_reason=PendReason(
        f"Held by the system after {n} failed dispatches in a row: {why}"))
    return out


def _declined(e: Element, s: Declined) -> Outcome:
    """stays PEND, one more failure counted and a backoff; at max_dispatch_failures in a row PSUSP with a system hold."""
    return _count_failure(e, s, Outcome(e.state), "Dispatch declined", s.why)


def _start_failed(e: Element, s: StartFailed) -> Outcome:
    """PEND again, one more failure counted and a backoff; at max_dispatch_failures in a row PSUSP with a system hold."""
    out = _move(e, S.PEND, "DISPATCH_FAILED", s.reason, alloc=[], start_time=None, reserve={})
    return _count_failure(e, s, out, "The last start failed", s.reason)


def _pending(e: Element, s: Pending) -> Outcome | None:
    """unchanged; the new pend reason is kept in memory (nothing when it is the one it has)."""
    old = e.pend_reason
    if old is s.reason or old == s.reason:
        return None
    return Outcome(e.state, {}, {"pend_reason": s.reason})


def _started(e: Element, s: Started) -> Outcome:
    """unchanged; the start time the worker saw is kept in memory, and its failures in a row end."""
    mem = {"start_time": s.start_time, "failures": 0, "containment": s.containment}
    if s.outputs is not None:
        mem["outputs"] = s.outputs
    return Outcome(e.state, {}, mem)


def _finished(e: Element, s: Finished) -> Outcome:
    """DONE on exit 0, else EXIT with the reason (LOST when the supervisor vanished); DONE when a kill that records DONE asked for the end (bkill -d, "killed by USER; recorded DONE (bkill -d)"); PEND again when a requeue asked for the end; its tasks end on every host."""
    st = s.status
    assert st is not None, "Finished needs the status its supervisor recorded"
    action = e.action or ""
    hosts = tuple(h for h, _ in e.alloc)
    if action.startswith(REQUEUE_ACTIONS):
        out = _requeued(e, action.startswith("requeue-hold:"), "requeued; the running job was killed", alloc=[],
                        reserve={}, start_time=None, end_time=None, exit_code=None, exit_signal=None,
                        exit_reason=None, action=None)
        ev = out.events[0]
        out.events[0] = Event("REQUEUE", ev.from_state, ev.to_state, ev.reason,
                              "user:" + action.split(":", 1)[1])  # the requeue's user, not the worker
        out.effects.append(EndTasks(hosts))
        return out
    if action.startswith("lost:"):  # another host of the job was lost; this copy was killed for it
        _, policy, lost = action.split(":", 2)
        out = _lost_end(e, policy, lost, st.end_time)
        out.effects.append(EndTasks(hosts))
        return out
    if st.reason == EndReason.SUPERVISOR_LOST:
        out = _move(e, S.EXIT, "LOST", "the job's supervisor was lost", end_time=st.end_time,
                    exit_code=st.exit_code, exit_signal=st.signal_name, exit_reason=EndReason.SUPERVISOR_LOST.value,
                    action=None, containment=e.containment)
        out.effects.append(EndTasks(hosts))
        return out
    reason = st.reason
    kill = killed_by(action)
    if kill and st.reason == EndReason.KILLED:
        reason = f"killed by {kill[0]}"
    elif reason is None and st.signal_name:
        reason = f"killed by signal {st.signal_name}"
    elif reason is None and st.exit_code != 0:
        reason = f"exited with code {st.exit_code}"
    done = st.exit_code == 0 and not st.signal_name and not st.reason
    if kill and kill[1] and not done:  # bkill -d: recorded DONE however its processes ended
        done = True
        reason = (f"{reason}; {RECORDED_DONE}" if st.reason == EndReason.KILLED
                  else f"{reason}; killed by {kill[0]}, {RECORDED_DONE}")
    out = _move(e, S.DONE if done else S.EXIT, "DONE" if done else "EXIT", reason,
                start_time=st.start_time or e.start_time, end_time=st.end_time, exit_code=st.exit_code,
                exit_signal=st.signal_name, exit_reason=reason, action=None, failures=0, containment=e.containment)
    out.effects.append(EndTasks(hosts))
    return out


def _with_comment(why: str | None, s: Kill) -> str | None:
    """`why` ended by the kill's comment (bkill -C kill_reason): "WHY; kill reason: TEXT", or
    "kill reason: TEXT" alone."""
    if s.comment is None:
        return why
    return f"{why}; kill reason: {s.comment}" if why else f"kill reason: {s.comment}"


def _kill_pending(e: Element, s: Kill) -> Outcome:
    """EXIT at once, "killed by USER while pending", holds dropped; DONE for a kill that records DONE (bkill -d: "killed by USER while pending; recorded DONE (bkill -d)"); "removed by USER while pending (bkill -r)" for a kill that removes."""
    why = f"killed by {s.user} while pending"
    if s.force:
        why = f"removed by {s.user} while pending (bkill -r)"
    elif s.record_done:
        why = f"{why}; {RECORDED_DONE}"
    why = _with_comment(why, s)
    return _move(e, S.DONE if s.record_done else S.EXIT, "KILL", why, end_time=s.time, exit_reason=why, holds=set())


def _kill_running(e: Element, s: Kill) -> Outcome:
    """unchanged, the kill asked for (KILL_REQUEST; stored action "kill:USER", or "kill-done:USER" when it records DONE, bkill -d); the kill sequence runs on its first host. A kill that removes (bkill -r): EXIT at once, "removed by USER (bkill -r); its processes are being killed", its slots released, stored action "remove:USER"; the kill sequence runs on its first host all the same."""
    if s.force:
        why = _with_comment(f"removed by {s.user} (bkill -r); its processes are being killed", s)
        out = _move(e, S.EXIT, "KILL", why, end_time=s.time, exit_reason=why, action=REMOVE_ACTION + s.user,
                    start_time=e.start_time, failures=0, containment=e.containment)
        out.effects.append(KillElement())
        return out
    out = _note(e, "KILL_REQUEST", _with_comment("recorded DONE when it ends (bkill -d)" if s.record_done else None, s),
                action=kill_action(s.user, s.record_done))
    out.effects.append(KillElement())
    return out


def _finished_removed(e: Element, s: Finished) -> Outcome | None:
    """an element removed at once (bkill -r, stored action "remove:USER") stays EXIT: the end of its processes is noted (ENDED_AFTER_REMOVE, how they ended) and the action cleared; its tasks on other hosts are ended. Nothing for an element not so removed (an end report the shell ignores)."""
    user = removed_by(e.action)
    if user is None:
        return None
    st = s.status
    how = "ended"
    if st is not None:
        how = (f"were killed by signal {st.signal_name}" if st.signal_name else
               f"exited with code {st.exit_code}" if st.exit_code is not None else "ended")
        if st.reason and st.reason != EndReason.KILLED:
            how += f" ({st.reason})"
    out = _note(e, "ENDED_AFTER_REMOVE", f"its processes {how} after {user} removed it (bkill -r)", action=None)
    out.effects.append(EndTasks(tuple(h for h, _ in e.alloc[1:])))
    return out


def _hold(e: Element, kind: HoldKind, event: str, reason: str) -> Outcome:
    holds = set(e.holds) | {str(kind)}
    return _move(e, S.PSUSP, event, reason, holds=holds)


def _stop_running(e: Element, s: Stop) -> Outcome:
    """USUSP; SIGSTOP to its process group."""
    out = _move(e, S.USUSP, "STOP", "The job was suspended by user")
    out.effects.append(SignalElement(signal.SIGSTOP))
    return out


def _stop_pending(e: Element, s: Stop) -> Outcome | None:
    """PSUSP with a user hold (nothing when its user holds it already)."""
    if HoldKind.USER in e.holds:
        return None
    out = _hold(e, HoldKind.USER, "HOLD", "The job was suspended by user while pending")
    if HoldKind.SYSTEM not in e.holds:  # a system hold keeps its own reason (why names both)
        out.memory["pend_reason"] = PendReason(REASON_USER_HOLD)
    return out


def _resume_stopped(e: Element, s: Resume) -> Outcome:
    """RUN; SIGCONT to its process group."""
    out = _move(e, S.RUN, "RESUME", "resumed by user")
    out.effects.append(SignalElement(signal.SIGCONT))
    return out


def _release(e: Element, kind: HoldKind, reason: str) -> Outcome | None:
    """Drop hold `kind`: PEND when no hold is left (event RELEASE), else PSUSP (RELEASE_ONE)."""
    if kind not in e.holds:
        return None
    holds = set(e.holds) - {str(kind)}
    if holds:
        return _move(e, S.PSUSP, "RELEASE_ONE", reason, holds=holds)
    out = _move(e, S.PEND, "RELEASE", reason, holds=holds)
    out.memory["pend_reason"] = None
    return out


def _resume_held(e: Element, s: Resume) -> Outcome | None:
    """the user hold released: PEND, or PSUSP while a system hold stays (nothing without a user hold)."""
    return _release(e, HoldKind.USER, "Waiting for re-scheduling after being resumed by user")


def _release_system(e: Element, s: Release) -> Outcome | None:
    """the system hold released: PEND, or PSUSP while a user hold stays; failures counted from 0."""
    out = _release(e, HoldKind.SYSTEM, s.reason)
    if out is not None:
        out.fields["failures"] = 0
        out.memory.update(retry_at=None, pend_reason=None)
    return out


def _system_hold(e: Element, s: SystemHold) -> Outcome:
    """PSUSP with a system hold, and the reason `why` shows."""
    if HoldKind.SYSTEM in e.holds:
        out = Outcome(e.state)
    else:
        out = _hold(e, HoldKind.SYSTEM, "HOLD", s.reason)
    out.memory["pend_reason"] = PendReason(s.pend_reason or s.reason)
    return out


def _requeue_running(e: Element, s: Requeue) -> Outcome:
    """unchanged, the requeue asked for (REQUEUE_REQUEST); it is killed, and pends again when it has ended; PEND at once when its first host has no worker (the copy there is fenced at its return)."""
    if e.alloc and e.alloc[0][0] in s.away:
        host = e.alloc[0][0]
        out = _requeued(e, s.hold, f"requeued by {s.user}; its host {host} has no worker now: a copy "
                                   f"still running there is killed when it rejoins",
                        alloc=[], reserve={}, start_time=None, end_time=None, exit_code=None, exit_signal=None,
                        exit_reason=None, action=None)
        out.memory.update(pend_reason=None, token=None)
        out.effects.append(EndTasks(tuple(h for h, _ in e.alloc[1:])))
        return out
    out = _note(e, "REQUEUE_REQUEST", None, action=f"{REQUEUE_ACTIONS[1] if s.hold else REQUEUE_ACTIONS[0]}{s.user}")
    out.effects.append(KillElement())
    return out


def _lost_end(e: Element, policy: str, host: str, end_time: float) -> Outcome:
    """The element's end for lost host `host` (SCHED-4): PEND again with the same ID and
    submit time ("requeued: host H lost") for policy "requeue", else EXIT ("host H lost")."""
    if policy == "requeue":
        out = _move(e, S.PEND, "REQUEUE", f"requeued: host {host} lost", alloc=[], reserve={}, start_time=None,
                    end_time=None, exit_code=None, exit_signal=None, exit_reason=None, action=None)
        out.memory.update(pend_reason=None, token=None)
        return out
    why = f"host {host} lost"
    return _move(e, S.EXIT, "EXIT", why, end_time=end_time, exit_reason=why, action=None,
                 containment=e.containment)


def _host_lost(e: Element, s: HostLost) -> Outcome | None:
    """SCHED-4: as its profile's on_host_failure says, PEND again or EXIT at once when the lost host is its first (its copy there is fenced at its return); when another, still served, host is its first, that copy is killed and the end follows its processes' (LOST_HOST_KILL). A kill or requeue asked before wins over the policy (a kill that records DONE, bkill -d, ends it DONE); an element whose own kill is already under way is left to it."""
    action = e.action or ""
    others = tuple(h for h, _ in e.alloc if h != s.host)
    if s.first_alive:
        if action:  # a kill, requeue or an earlier loss is under way on the first host already
            return None
        out = _note(e, "HOST_LOST", f"host {s.host} lost: the job's copy on {e.alloc[0][0]} is killed, then "
                                    f"{'requeued' if s.policy == 'requeue' else 'ended'}",
                    action=f"lost:{s.policy}:{s.host}")
        out.effects.append(KillElement())
        return out
    kill = killed_by(action)
    if kill:
        why = f"killed by {kill[0]}; host {s.host} lost" + (f"; {RECORDED_DONE}" if kill[1] else "")
        out = _move(e, S.DONE if kill[1] else S.EXIT, "DONE" if kill[1] else "EXIT", why, end_time=s.time,
                    exit_reason=why, action=None, containment=e.containment)
    elif action.startswith(REQUEUE_ACTIONS):
        out = _requeued(e, action.startswith("requeue-hold:"), f"requeued by {action.split(':', 1)[1]}; host "
                        f"{s.host} lost", alloc=[], reserve={}, start_time=None, end_time=None, exit_code=None,
                        exit_signal=None, exit_reason=None, action=None)
        out.memory.update(pend_reason=None, token=None)
    else:
        out = _lost_end(e, action.split(":", 2)[1] if action.startswith("lost:") else s.policy, s.host, s.time)
    out.effects.append(EndTasks(others))
    return out


def _requeue_finished(e: Element, s: Requeue) -> Outcome:
    """PEND at once (PSUSP held by its user with `hold`, brequeue -H), with the same ID and submit time."""
    out = _requeued(e, s.hold, f"requeued by {s.user}", alloc=[], reserve={}, start_time=None, end_time=None,
                    exit_code=None, exit_signal=None, exit_reason=None)
    return out


Transition = Callable[[Element, AnyStimulus], "Outcome | None"]

#: (stimulus type, state) -> the function that makes the outcome. A pair not here is refused.
TABLE: dict[tuple[type, S], Transition] = {
    (Dispatch, S.PEND): _dispatch,
    (Declined, S.PEND): _declined,
    (StartFailed, S.RUN): _start_failed,
    (Started, S.RUN): _started,
    (Started, S.USUSP): _started,
    (Finished, S.RUN): _finished,
    (Finished, S.USUSP): _finished,
    (Finished, S.EXIT): _finished_removed,
    (Kill, S.PEND): _kill_pending,
    (Kill, S.PSUSP): _kill_pending,
    (Kill, S.RUN): _kill_running,
    (Kill, S.USUSP): _kill_running,
    (Stop, S.RUN): _stop_running,
    (Stop, S.PEND): _stop_pending,
    (Stop, S.PSUSP): _stop_pending,
    (Resume, S.USUSP): _resume_stopped,
    (Resume, S.PSUSP): _resume_held,
    (Requeue, S.RUN): _requeue_running,
    (Requeue, S.USUSP): _requeue_running,
    (Requeue, S.DONE): _requeue_finished,
    (Requeue, S.EXIT): _requeue_finished,
    (SystemHold, S.PEND): _system_hold,
    (SystemHold, S.PSUSP): _system_hold,
    (Release, S.PSUSP): _release_system,
    (HostLost, S.RUN): _host_lost,
    (HostLost, S.USUSP): _host_lost,
    (Pending, S.PEND): _pending,
    (Pending, S.PSUSP): _pending,
}


def render_table() -> str:
    """The transition table as the Markdown list docs/architecture.md shows (a test keeps the
    two the same): one line per (stimulus, state) pair, with what it does."""
    lines = []
    for (cls, state), fn in TABLE.items():
        lines.append(f"- `{cls.__name__}` in {state}: {' '.join((fn.__doc__ or '').split())}")
    return "\n".join(lines) + "\n"


def transition(e: Element, s: AnyStimulus) -> Outcome | None:
    """The outcome of stimulus `s` on element `e` (which it never changes), or None when
    `s` asks for nothing to change in `e`'s state. Raises IllegalTransition for a pair not
    in TABLE (kill a finished job, dispatch a running one)."""
    fn = TABLE.get((type(s), e.state))
    if fn is None:
        raise IllegalTransition(type(s).__name__, e.state)
    return fn(e, s)


# ---------------------------------------------------------------------- stimuli of the cluster
# What happens to a host or to the whole cluster rather than to one element. Each carries an
# ID like a job stimulus; the job events it causes (a re-merge's holds and releases) record it.


@dataclass(frozen=True, slots=True)
class HostJoined(Stimulus):
    """A worker began serving `host` (D-1): it is usable, and the elements that run there
    are found again (JOB-8). `declared` is False for a host hosts.yaml does not name, which
    the worker's offer declares (RES-2)."""

    host: str = ""
    declared: bool = True


@dataclass(frozen=True, slots=True)
class HostLeft(Stimulus):
    """The worker of `host` went away: the host takes no new work until a worker joins
    again; what runs there keeps running (its supervisors outlive the channel, JOB-8)."""

    host: str = ""


@dataclass(frozen=True, slots=True)
class ConfigApplied(Stimulus):
    """A new config is in force (CFG-3): `config_hash` replaced `previous_hash`; pending jobs
    are merged again under it (their hold and release events carry this stimulus's ID)."""

    config_hash: str = ""
    previous_hash: str = ""


@dataclass(frozen=True, slots=True)
class ReattachElement:
    """Find the element's supervisor on its first host again, or its recorded end (JOB-8):
    that of dispatch `attempt` (a job directory that holds another attempt's copy or end
    is not this start's, SCHED-4)."""

    job_id: int
    index: int
    attempt: int | None = None


@dataclass(frozen=True, slots=True)
class KillAgain:
    """Deliver again the kill an element was asked (its `action`, stored): the worker was away
    when it was asked, or died before it carried it out (D-8)."""

    job_id: int
    index: int


@dataclass(frozen=True, slots=True)
class SignalAgain:
    """Deliver again a stop (SIGSTOP) or resume (SIGCONT) the worker missed (D-8)."""

    job_id: int
    index: int
    sig: int


@dataclass(frozen=True, slots=True)
class HostOutcome:
    """What a host stimulus does: the host's `status` afterwards ("ok", "unavail") and the
    effects to run once it is applied."""

    status: str
    effects: tuple = ()


def host_transition(s: HostJoined | HostLeft, running_there: list[Element],
                    unsent: dict[tuple[int, int], int] | None = None) -> HostOutcome:
    """The outcome of a host stimulus, given the active elements whose first host is
    `s.host` and the signals their worker missed (`unsent`: (job, index) -> the last one).
    A join makes the host usable and re-attaches each element (a job that ended while the
    worker was away is then found ended); then what it was asked meanwhile reaches it (D-8):
    a kill or requeue asked of it (its stored action) is sent again, a stopped one (USUSP)
    is stopped again, a missed resume is sent. Each is harmless when it had arrived. A leave
    makes the host unusable and touches no job. Raises TypeError for another stimulus."""
    if isinstance(s, HostJoined):
        effects: list = []
        for e in running_there:
            key = (e.job.id, e.index)
            effects.append(ReattachElement(*key, e.attempt))
            if (e.action or "").startswith((*KILL_ACTIONS, *REQUEUE_ACTIONS, "lost:")):
                effects.append(KillAgain(*key))
            elif e.state is S.USUSP:
                effects.append(SignalAgain(*key, int(signal.SIGSTOP)))
            elif unsent and key in unsent:
                effects.append(SignalAgain(*key, unsent[key]))
        return HostOutcome("ok", tuple(effects))
    if isinstance(s, HostLeft):
        return HostOutcome("unavail")
    raise TypeError(f"not a host stimulus: {s!r}")

"""When a submit needs no scheduler session (D-4, SCHED-1, SCHED-2): sessions cost O(pending),
so a deep strict-FCFS queue would pay one per submit. A new job only adds demand, so while
nothing but submits has happened since the last session, that session's findings still hold:

- a queue whose head could not start blocks every job behind it (strict FCFS without
  backfill): the new job pends with the head's reason;
- a request the session proved unable to start (SCHED-2's cache) still cannot, since the
  free supply has only shrunk: the new job with that very request gets the proof's reason,
  unless that reason offers a smaller task count ("would start now with -n 1") while the
  session reserved a head's start (SCHED-1): whether that count would delay the reservation
  depends on the new job's run limit, which only a session weighs (the hint then names the
  run limit it also needs, RES-6). Nor does it when the new job would head a backfilling
  queue whose head the session did not find blocked: a head gets a reservation (SCHED-1),
  which only a session makes.

Anything else (a job end, a kill, a release, a host joining, a config change) makes them
stale: the controller calls `invalidate()` whenever it asks for a session.
"""

from __future__ import annotations

from xced.model.jobs import PendReason


class SubmitShortcut:
    """The last session's blocked queues and unsatisfiable requests, while they still hold."""

    def __init__(self) -> None:
        self.blocked: dict[str, PendReason] = {}
        self.unsatisfiable: dict[tuple, PendReason] = {}
        #: True while only submits happened since the session that found them
        self.valid = False
        #: the session reserved a blocked head's start (SCHED-1)
        self.reserved = False
        #: the backfilling queues whose head the session found blocked
        self.headed: set[str] = set()

    def invalidate(self) -> None:
        """Something other than a submit happened: the findings no longer hold."""
        self.valid = False

    def after_session(self, blocked: dict[str, PendReason], unsatisfiable: dict[tuple, PendReason],
                      another_asked: bool, reserved: bool = False, headed: set[str] | None = None) -> None:
        """A session ended with these findings; they hold unless another session is already
        asked for (something happened while it ran). `reserved`: it reserved a head's start;
        `headed`: the backfilling queues whose head it found blocked."""
        self.blocked = blocked
        self.unsatisfiable = unsatisfiable
        self.valid = not another_asked
        self.reserved = reserved
        self.headed = headed or set()

    def reason_for(self, queue: str, request: tuple, backfill: bool = False) -> PendReason | None:
        """The reason a new job in `queue` (`backfill`: a backfilling queue) with `request`
        (ntasks_min, ntasks_max, resreq, host_limit) pends without a session, or None when it
        needs one."""
        if not self.valid:
            return None
        got = self.blocked.get(queue)
        if got is not None:
            return got
        if backfill and queue not in self.headed:
            return None  # it would head its queue: its reservation needs a session
        got = self.unsatisfiable.get(request)
        if got is not None and got.start_with is not None and self.reserved:
            return None  # the smaller count's hint depends on the job's run limit (module docstring)
        return got

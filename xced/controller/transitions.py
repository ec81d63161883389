"""The job state machine as one table (DESIGN rule 2, D-5).

`next_state(stimulus, state)` gives the new state or raises IllegalTransition: a pair
not in the table is an error, never a silent no-op. Each applied transition is written
as an event by the controller.
"""

from __future__ import annotations

from xced.model.jobs import JobState as S

#: (stimulus, from state) -> to state
TABLE: dict[tuple[str, S], S] = {
    ("dispatch", S.PEND): S.RUN,                # scheduler decision applied
    ("dispatch_failed", S.RUN): S.PEND,         # the worker could not start it (retryable)
    ("done", S.RUN): S.DONE,                    # exit 0
    ("done", S.USUSP): S.DONE,
    ("exit", S.RUN): S.EXIT,                    # non-zero exit, signal, limit, kill
    ("exit", S.USUSP): S.EXIT,
    ("lost", S.RUN): S.EXIT,                    # the supervisor vanished without a status
    ("lost", S.USUSP): S.EXIT,
    ("kill", S.PEND): S.EXIT,                   # kill of a pending element ends it at once
    ("kill", S.PSUSP): S.EXIT,
    ("hold", S.PEND): S.PSUSP,                  # xcecli stop of a pending element (user hold)
    ("hold", S.PSUSP): S.PSUSP,                 # a second kind of hold
    ("release", S.PSUSP): S.PEND,               # last hold released
    ("release_one", S.PSUSP): S.PSUSP,          # one kind released, another still holds
    ("stop", S.RUN): S.USUSP,                   # xcecli stop of a running element
    ("resume", S.USUSP): S.RUN,
    ("requeue", S.RUN): S.PEND,                 # the killed element ended; back to pending
    ("requeue", S.USUSP): S.PEND,
    ("requeue", S.DONE): S.PEND,                # brequeue of a finished element
    ("requeue", S.EXIT): S.PEND,
}


class IllegalTransition(Exception):
    """`stimulus` is not allowed in state `state`; the message says which states allow it."""

    def __init__(self, stimulus: str, state: S) -> None:
        allowed = sorted(str(f) for (s, f) in TABLE if s == stimulus)
        super().__init__(f"cannot {stimulus} a job in state {state}; allowed from: {', '.join(allowed) or 'none'}")
        self.stimulus = stimulus
        self.state = state


def next_state(stimulus: str, state: S) -> S:
    """The state after `stimulus` in `state`; IllegalTransition if the pair is not in TABLE."""
    try:
        return TABLE[(stimulus, state)]
    except KeyError:
        raise IllegalTransition(stimulus, state) from None


def allowed(stimulus: str, state: S) -> bool:
    return (stimulus, state) in TABLE

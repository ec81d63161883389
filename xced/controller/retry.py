"""Writes the store refused, kept and done again (D-8, JOB-8).

The shell commits before memory changes (xced.controller.controller `_commit`), so a write
the store refuses (another process holds its lock, its disk is full, an I/O error) changed
nothing: the same stimulus can simply be applied again later. What no user waits for (a
job's end reported by its worker, a start that failed, the scheduler's decisions, a hook's
event) is kept here by a key and applied again, with a growing delay, until the store takes
it; a user's request gets a typed error instead (StoreBusy, StoreUnavailable), and the
API retries a busy store for `store_busy_timeout` seconds before answering it.

Only the newest attempt of each key is kept (the end of 12[3]; the scheduler's session),
so an outage of any length holds one entry per element at most. While a session waits
here no new one is asked for: the retry runs it once the store works again.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from xced.api.errors import StoreBusy, StoreUnavailable

log = logging.getLogger("xced.controller")

#: the store errors a retry waits out (D-8)
STORE_ERRORS = (StoreBusy, StoreUnavailable)
#: first and longest delay between retries, seconds
RETRY_FIRST_S = 0.05
RETRY_MAX_S = 2.0
#: the key of the scheduler's session among the retries
SESSION_KEY = ("session",)


class RetryMixin:
    """Writes the store refused, done again until it takes them (D-8): a part of the Controller."""

    def _init_retry(self) -> None:
        #: key -> (what, the call that applies it again), oldest first
        self._deferred: dict[tuple, tuple[str, Callable[[], None]]] = {}
        self._retry_delay = RETRY_FIRST_S
        self._retry_handle: asyncio.TimerHandle | None = None
        self._store_fault: str | None = None  # the message of the fault being waited out, logged once

    @property
    def deferred_writes(self) -> list[str]:
        """What waits for the store to take it, oldest first ("the end of 12[3]")."""
        return [what for what, _ in self._deferred.values()]

    def _retry_later(self, key: tuple, what: str, apply: Callable[[], None], exc: Exception) -> None:
        """Keep `apply` (which raised the store error `exc` and changed nothing) and call it
        again later; one line in the log per distinct fault, not per attempt."""
        self._deferred.pop(key, None)
        self._deferred[key] = (what, apply)
        message = getattr(exc, "message", str(exc))
        if message != self._store_fault:
            self._store_fault = message
            log.error("the store refused a write (%s): %s; it is kept and retried until the store takes it",
                      what, message)
        self._arm_retry()

    def _arm_retry(self) -> None:
        if self._retry_handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a unit test drives the controller): `retry_now()` does it
            return
        self._retry_handle = loop.call_later(self._retry_delay, self.retry_now)

    def retry_now(self) -> int:
        """Apply every kept write again, oldest first, stopping at the first the store still
        refuses (the rest wait with it). Returns how many were applied."""
        self._retry_handle = None
        done = 0
        for key in list(self._deferred):
            what, apply = self._deferred[key]
            try:
                apply()
            except STORE_ERRORS:
                self._retry_delay = min(self._retry_delay * 2, RETRY_MAX_S)
                self._arm_retry()
                return done
            if self._deferred.get(key, (None, None))[1] is apply:
                del self._deferred[key]
            done += 1
        if self._store_fault is not None:
            log.warning("the store takes writes again: %d kept write(s) applied", done)
        self._store_fault = None
        self._retry_delay = RETRY_FIRST_S
        return done

    def _session_waits_for_store(self) -> bool:
        """True while a scheduler session waits for the store: no other is asked for."""
        return SESSION_KEY in self._deferred

"""Explanations (RES-6, D-4; LSF pending reasons): why an element pends, with each host's
shortfall, what would start it now, and the scheduler's trace lines about it.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread and changes state only through the shell (`_commit`).
"""

from __future__ import annotations

from xced.model.jobs import JobState
from xced.scheduler.session import reservation_text

S = JobState


class ExplainMixin:
    """Explanations (RES-6, D-4; LSF pending reasons): a part of the Controller."""

    def why(self, job_id: int, index: int | None) -> dict:
        """`xcecli why` (RES-6): the element's state, its structured pend reason and hint, the
        lines about it in the newest scheduler session's trace that has any (D-4), and, for
        the blocked head of a backfilling queue, that session's reservation for it (SCHED-1):
        {"start": epoch seconds or None, "text": "reserved from WHEN (backfill)"}, rendered
        here from the session's data by the clock it read. A held element has none. `caps`:
        every project cap in the way of an element held back by its project (PRJ-6, PRJ-7),
        one line each, the first of which is `main`."""
        job = self.job(job_id)
        if index is None:
            els = [e for e in job.elements.values() if e.state in (S.PEND, S.PSUSP)] or list(job.elements.values())
            e = els[0]
        else:
            e = self._elements(job, index)[0]
        pr = e.pend_reason
        ref = e.ref
        trace: list[str] = []
        reservation = None
        for lines, heads, clock in reversed(self.traces):  # the newest session that said something about it
            trace = [str(t) for t in lines if t.ref == ref]
            if trace:
                if ref in heads and e.state is not S.PSUSP:  # a held element holds no reservation
                    r = heads[ref]
                    reservation = {"start": r.start if r is not None else None, "text": reservation_text(r, clock)}
                break
        main = pr.main if pr else None
        if e.state is S.PSUSP and "system" in e.holds:
            if main is None or "system" not in main.lower():
                main = f"Held by the system{': ' + main if main else ''}"
            main += f"; an admin releases it with `xcecli release {e.ref}`"
            if "user" in e.holds:
                main += f". Also held by its user (xcecli stop); `xcecli resume {e.ref}` releases that hold"
        elif e.state is S.PSUSP and main is None:
            main = f"Held by its user (xcecli stop); `xcecli resume {e.ref}` releases it"
        if main is None:
            main = {S.RUN: "The job is running", S.USUSP: "The job is stopped (USUSP)",
                    S.DONE: "The job has finished", S.EXIT: "The job has ended"}.get(e.state)
            if e.state is S.PEND:
                main = "New job is waiting for scheduling"
        return {"id": ref, "state": e.state.value, "main": main,
                "hosts": [{"host": h.host, "resource": h.resource, "free": h.free, "needed": h.needed,
                           "message": h.message} for h in (pr.hosts if pr else [])],
                "hint": pr.hint if pr else None, "caps": list(pr.caps) if pr else [], "trace": trace,
                "reservation": reservation}

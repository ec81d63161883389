"""Dependencies (JOB-5, LSF bsub -w): whether a pending element's -w expression is met, and its
pend reason while it is not.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread and changes state only through the shell (`_commit`).
"""

from __future__ import annotations

import asyncio

from xced.controller import machine as m
from xced.model import deps
from xced.model.jobs import PENDING, JobState, PendReason
from xced.model.state import Element, Job

S = JobState


class DependenciesMixin:
    """Dependencies (JOB-5, LSF bsub -w): a part of the Controller."""

    def _dependency_lookup(self, cache: dict) -> deps.Lookup:
        """The lookup deps.evaluate() asks (JOB-5): a RefState for a plain job or an element, the
        list of the elements' RefStates for a whole array (index None), None for what does not
        exist. `cache` keeps answers for one evaluation round (a snapshot)."""
        jobs = self.jobs

        def lookup(job_id: int, index: int | None):
            key = (job_id, index)
            if key in cache:
                return cache[key]
            job = jobs.get(job_id)
            got: deps.RefState | list[deps.RefState] | None = None
            if job is not None:
                if index is not None:
                    e = job.elements.get(index) if job.is_array else None
                    got = deps.RefState(e.state, e.exit_code, e.index) if e is not None else None
                elif job.is_array:
                    got = [deps.RefState(e.state, e.exit_code, e.index) for e in job.elements.values()]
                elif 0 in job.elements:
                    e = job.elements[0]
                    got = deps.RefState(e.state, e.exit_code)
            cache[key] = got
            return got

        return lookup

    def _dependency_reason(self, job: Job, lookup: deps.Lookup) -> PendReason | None:
        """None when the job's dependency is met (or it has none); else the pend reason, the
        explain() line: "Dependency condition not satisfied: ..." while it may still be met,
        "Dependency can never be met: ..." when it cannot (the job still pends, SPEC JOB-5)."""
        text = job.spec.dependency
        if not text:
            return None
        if job.dependency is None:  # loaded from the store: the canonical text parses
            job.dependency = deps.parse_dependency(text)
        if deps.evaluate(job.dependency, lookup) is deps.Verdict.MET:
            return None
        return PendReason(deps.explain(job.dependency, lookup), cause="dependency")

    def _dependency_waits(self, job: Job, e: Element, batch: list) -> bool:
        """snapshot()'s test (JOB-5): True when pending element `e` waits for its job's dependency,
        so it is not offered to the scheduler (and never becomes a queue's blocking head). A PEND
        element gets the dependency's reason; a held one (PSUSP) keeps its hold's. Once the
        dependency is met, a dependency reason left on the element is cleared.

        `batch` is the snapshot's pending list, which identifies one snapshot: the verdict is
        worked out once per job and the referenced states read once per snapshot, however many
        elements the job has.

        A dispatch runs no session of its own, yet it can meet `started()` (and changes the
        "(job 12 is PEND)" in a reason): so the referenced elements that pend now are watched,
        and once the session is over, a session is asked for if one of them left PEND."""
        if getattr(self, "_dep_batch", None) is not batch:
            self._dep_batch = batch  # a strong reference: no other list can take its id meanwhile
            self._dep_verdicts: dict[int, PendReason | None] = {}
            self._dep_lookup = self._dependency_lookup({})
            self._dep_watched: set[tuple[int, int | None]] = set()
            self._dep_watch: list[Element] = []
        verdicts = self._dep_verdicts
        if job.id in verdicts:
            reason = verdicts[job.id]
        else:
            reason = verdicts[job.id] = self._dependency_reason(job, self._dep_lookup)
            if reason is not None:
                self._dependency_watch(job)
        pr = e.pend_reason
        if reason is None:
            if pr is not None and pr.cause == "dependency":
                self._commit(self._changes([e], self._stim(m.Pending, "dependency", "system", reason=None)))
            return False
        if e.state is S.PEND and pr != reason:
            self._commit(self._changes([e], self._stim(m.Pending, "dependency", "system", reason=reason)))
        return True

    def _dependency_watch(self, job: Job) -> None:
        """Watch the pending elements that `job`'s waiting dependency names (see _dependency_waits);
        the first one of a snapshot arranges the check after its session."""
        first = not self._dep_watch
        for key in deps.refs(job.dependency):
            if key in self._dep_watched:
                continue
            self._dep_watched.add(key)
            ref = self.jobs.get(key[0])
            if ref is not None:
                els = ref.elements.values() if key[1] is None else [ref.elements.get(key[1])]
                self._dep_watch.extend(x for x in els if x is not None and x.state in PENDING)
        if first and self._dep_watch:
            try:
                asyncio.get_running_loop().call_soon(self._dependency_recheck, self._dep_watch)
            except RuntimeError:
                pass  # no event loop (unit tests run sessions by hand)

    def _dependency_recheck(self, watch: list[Element]) -> None:
        """After a session: a watched element was dispatched (it no longer pends), so the
        dependencies that name it are evaluated again (JOB-5)."""
        if any(x.state not in PENDING for x in watch):
            self.kick()

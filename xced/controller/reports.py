"""What workers report (JOB-1, JOB-8): a start seen, a start that failed, an end recorded by
the element's supervisor.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread and changes state only through the shell (`_commit`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from xced.controller import machine as m
from xced.controller.hosts import WorkerLink
from xced.controller.machine import transition
from xced.controller.retry import STORE_ERRORS
from xced.model.jobs import ACTIVE, FINISHED, JobState, format_job_ref
from xced.model.state import EndStatus, Element, Job

log = logging.getLogger("xced.controller")

S = JobState


class ReportsMixin:
    """What workers report (JOB-1, JOB-8): a part of the Controller."""

    def _stale(self, e: Element | None, attempt: int | None, what: str) -> bool:
        """Whether a report (`what`) of dispatch `attempt` about `e` is a stale copy's: `e`
        has been dispatched again since (SCHED-4 fencing). Such a report is ignored and
        logged; None (a worker that names no attempt) is taken as current."""
        if e is None or attempt is None or attempt == e.attempt:
            return False
        log.warning("%s of %s attempt %d ignored: a stale copy (the job's current attempt is %d, on %s)", what,
                    e.ref, attempt, e.attempt, e.alloc[0][0] if e.alloc and e.state in ACTIVE else "no host")
        return True

    def on_started(self, job_id: int, index: int, start_time: float, containment: str | None = None,
                   attempt: int | None = None, outputs: tuple[str, str] | list[str] | None = None) -> None:
        """The worker saw the job's process start: show the real start time and how its
        processes are kept together (`containment`: "cgroup-v2", "cgroup-v1", "subreaper",
        JOB-1). Kept in memory only (no transaction per start); the end's record carries the
        start time durably, and after a restart the worker reports both again from the
        supervisor's job.json. `outputs`: the (stdout, stderr) paths the supervisor opened
        (JOB-12: `show` gives them). A report of another `attempt` than the element's is a
        stale copy's and is ignored (SCHED-4)."""
        job = self.jobs.get(job_id)
        e = job.elements.get(index) if job else None
        if e is not None and e.state in ACTIVE and not self._stale(e, attempt, "start"):
            stim = m.Started("report", "worker", 0.0, start_time=start_time,  # writes nothing: no ID needed
                             containment=containment, outputs=tuple(outputs) if outputs else None)
            self._commit([(e, stim, transition(e, stim))])

    def on_start_failed(self, job_id: int, index: int, reason: str, attempt: int | None = None) -> None:
        """The worker could not start the element at all: back to PEND (retryable). When the
        store refuses the write, it is kept and applied once it takes writes (D-8). A report
        of another `attempt` is a stale copy's and is ignored (SCHED-4)."""
        job = self.jobs.get(job_id)
        e = job.elements.get(index) if job else None
        if e is None or e.state is not S.RUN or self._stale(e, attempt, "failed start"):
            return
        stim = self._stim(m.StartFailed, "report", f"worker:{e.alloc[0][0] if e.alloc else '?'}", reason=reason,
                          limit=self.config.settings.max_dispatch_failures)

        def apply() -> None:
            if e.state is S.RUN:
                self._commit([(e, stim, transition(e, stim))])
                self.kick()
        try:
            apply()
        except STORE_ERRORS as exc:
            self._retry_later(("start", job_id, index), f"the failed start of {e.ref}", apply, exc)

    def on_finished(self, job_id: int, index: int, st: EndStatus, attempt: int | None = None) -> None:
        """An element's processes ended (status from its supervisor's file, JOB-8). When its
        profile has a post_host_exec and it ran on several hosts, its tasks end and that
        hook runs on each other host before the end is recorded (JOB-6); a failing one makes
        a DONE job EXIT with a reason naming the hook and host. The end of another `attempt`
        than the element's is a stale copy's: never recorded as the job's result (SCHED-4)."""
        job = self.jobs.get(job_id)
        e = job.elements.get(index) if job else None
        if self._stale(e, attempt, "end"):
            return
        if e is None:
            log.warning("end of %s ignored: not running here", format_job_ref(job_id, index))
            return
        if e.state not in ACTIVE:
            self._end_after_finish(e, st)
            return
        if (job_id, index) in self._host_hooked:
            self._host_hooked.discard((job_id, index))
            profile = self._profile_of(job)
            if profile is not None and profile.post_host_exec is not None:
                asyncio.ensure_future(self._finish_after_host_hooks(e, st, profile.post_host_exec.model_dump()))
                return
        self._finish(e, st)

    def _finish(self, e: Element, st: EndStatus) -> None:
        """Record the end of element `e` (the machine's Finished) at the end time its
        supervisor recorded (JOB-8: an end found after a restart keeps its real time, on the
        element and on its event), then end its tasks and wake its waiters. An end the store
        refuses is kept and recorded once it takes writes (D-8); the element stays RUN,
        holding its slots, until then."""
        stim = m.Finished(self._sid("report"), f"worker:{e.alloc[0][0] if e.alloc else '?'}",
                          st.end_time or self.clock(), status=st)

        def apply() -> None:
            if e.state in ACTIVE:
                self._commit([(e, stim, transition(e, stim))])
                self._job_changed(e.job)
                self.kick()
        try:
            apply()
        except STORE_ERRORS as exc:
            self._retry_later(("end", e.job.id, e.index), f"the end of {e.ref}", apply, exc)

    def _end_after_finish(self, e: Element, st: EndStatus) -> None:
        """The end of the processes of an element already finished: one removed at once
        (bkill -r) is noted in its events and keeps its state (machine._finished_removed);
        any other is ignored and logged. A store that refuses the note loses that history
        line only: the element's state was recorded at its removal."""
        stim = m.Finished(self._sid("report"), f"worker:{e.alloc[0][0] if e.alloc else '?'}",
                          st.end_time or self.clock(), status=st)
        try:
            out = transition(e, stim)
        except m.IllegalTransition:
            out = None
        if out is None:
            log.warning("end of %s ignored: not running here", e.ref)
            return
        self._host_hooked.discard((e.job.id, e.index))
        try:
            self._commit([(e, stim, out)])
        except STORE_ERRORS as exc:
            log.warning("the end of %s's processes after its removal (bkill -r) is not noted: the store refused "
                        "it: %s", e.ref, exc)

    def _each_first_host(self, elements: list[Element], act: Callable[[WorkerLink, Element], object]) -> None:
        """Call act(worker, element) with the worker of each element's first host, when joined."""
        for e in elements:
            w = self.workers.get(e.alloc[0][0]) if e.alloc else None
            if w is not None:
                act(w, e)

    def _end_tasks(self, job_id: int, index: int, hosts: list[str]) -> None:
        """The job's script ended: end its tasks on every host of the job (D-1, JOB-7)."""
        for h in hosts:
            w = self.workers.get(h)
            if w is not None:
                w.end_tasks(job_id, index)

    def _job_changed(self, job: Job) -> None:
        if job.finished():
            self.active.pop(job.id, None)
        waiters = self._waiters.get(job.id)
        if not waiters:
            return
        for fut, index in list(waiters):
            e = job.elements.get(index) if index is not None else None
            if job.finished() or (e is not None and e.state in FINISHED):
                if not fut.done():
                    fut.set_result(None)
                waiters.remove((fut, index))
        if not waiters:
            del self._waiters[job.id]

    def wake_waiters(self) -> None:
        """The daemon is stopping: every `xcecli wait` / `submit -K` waiting here gets the job as
        it is now (its client asks again, and finds the daemon gone or back), rather than an
        answer cut off by the shutdown."""
        self.stopping = True
        for waiters in self._waiters.values():
            for fut, _ in waiters:
                if not fut.done():
                    fut.set_result(None)

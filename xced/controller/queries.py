"""What the API server reads (CLI-3: jobs, hist, hosts, queues): a small query interface, so
that routes never walk the controller's maps or its store themselves.

Part of the Controller (xced.controller.controller), which mixes these in.
"""

from __future__ import annotations

from typing import Iterator

from xced.model.jobs import FINISHED, PENDING, JobState
from xced.model.state import HostState, Job


class QueriesMixin:
    """Reads for the API server: a part of the Controller."""

    def find_jobs(self, user: str | None, queue: str | None, states: set[JobState] | None,
                  finished_too: bool, project: str | None = None) -> Iterator[Job]:
        """The jobs `xcecli jobs` lists (LSF bjobs), by ID: of `user` (None: every user), in
        `queue`, of `project` (that very project, as LSF's bjobs -P), with an element in one of `states`; without `states`, unfinished jobs and
        those finished within the clean period (xce.yaml clean_period, LSF CLEAN_PERIOD), or
        every job in memory with `finished_too` (bjobs -a; the route adds those only the store
        keeps, xced.controller.retention)."""
        horizon = self.clean_horizon()
        for job in self.jobs.values():
            if user is not None and job.user != user:
                continue
            if queue is not None and job.queue != queue:
                continue
            if project is not None and job.spec.project != project:
                continue
            js = job.state()
            if states is not None and js not in states and not any(e.state in states for e in job.elements.values()):
                continue
            if states is None and not finished_too and js in FINISHED:
                if max((e.end_time or 0 for e in job.elements.values()), default=0) < horizon:
                    continue
            yield job

    def job_events(self, job_id: int) -> list[tuple]:
        """The job's history rows, oldest first (D-5; `xcecli hist`). Raises NotFound."""
        self.job(job_id)
        return self.store.events(job_id)

    def host_states(self) -> list[HostState]:
        """Every host the controller knows, by name (`xcecli hosts`, LSF bhosts)."""
        return sorted(self.hosts.values(), key=lambda h: h.name)

    def queue_counts(self) -> dict[str, tuple[int, int, int]]:
        """Per queue of the config in force: (pending, running, suspended) slots, LSF bqueues'
        PEND, RUN and SUSP ("NJOBS: The total number of slots for jobs in the queue", IBM
        bqueues.1): a running or suspended element counts the slots it holds, a pending one
        the fewest it asks for (its -n min)."""
        counts = {q.name: [0, 0, 0] for q in self.config.queues}
        for job in self.jobs.values():
            c = counts.get(job.queue)
            if c is None:
                continue
            eff = job.effective
            asked = eff.ntasks_min if eff is not None else 1
            for e in job.elements.values():
                slots = sum(n for _, n in e.alloc) if e.alloc else asked
                if e.state in (JobState.PEND, JobState.PSUSP):
                    c[0] += asked
                elif e.state is JobState.RUN:
                    c[1] += slots
                elif e.state is JobState.USUSP:
                    c[2] += slots
        return {k: (v[0], v[1], v[2]) for k, v in counts.items()}

    def project_pending(self) -> dict[str, int]:
        """Pending (PEND, PSUSP) elements per project path, of that very project (PRJ-8;
        `xcecli projects`). What the projects hold now is `project_usage()`'s."""
        out: dict[str, int] = {}
        for job in self.active.values():
            path = job.spec.project
            if path is not None:
                n = sum(1 for e in job.elements.values() if e.state in PENDING)
                if n:
                    out[path] = out.get(path, 0) + n
        return out

"""What the API server reads (CLI-3: jobs, hist, hosts, queues): a small query interface, so
that routes never walk the controller's maps or its store themselves.

Part of the Controller (xced.controller.controller), which mixes these in.
"""

from __future__ import annotations

from typing import Iterator

from xced.model.jobs import ACTIVE, FINISHED, PENDING, JobState
from xced.model.project import MEM, SLOTS, ancestors
from xced.model.state import HostState, Job

#: LSF CLEAN_PERIOD: finished jobs stay in the default listing this long (seconds)
CLEAN_PERIOD_S = 3600.0


class QueriesMixin:
    """Reads for the API server: a part of the Controller."""

    def find_jobs(self, user: str | None, queue: str | None, states: set[JobState] | None,
                  finished_too: bool, project: str | None = None) -> Iterator[Job]:
        """The jobs `xcecli jobs` lists (LSF bjobs), by ID: of `user` (None: every user), in
        `queue`, of `project` (that very project, as LSF's bjobs -P), with an element in one of `states`; without `states`, unfinished jobs and
        those finished within CLEAN_PERIOD_S, or every job with `finished_too` (bjobs -a)."""
        horizon = self.clock() - CLEAN_PERIOD_S
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
        """Per queue of the config in force: (pending, running, suspended) elements (LSF bqueues)."""
        counts = {q.name: [0, 0, 0] for q in self.config.queues}
        for job in self.jobs.values():
            c = counts.get(job.queue)
            if c is None:
                continue
            for e in job.elements.values():
                if e.state in (JobState.PEND, JobState.PSUSP):
                    c[0] += 1
                elif e.state is JobState.RUN:
                    c[1] += 1
                elif e.state is JobState.USUSP:
                    c[2] += 1
        return {k: (v[0], v[1], v[2]) for k, v in counts.items()}

    def project_use(self) -> dict[str, dict]:
        """Per project path (PRJ-7, PRJ-8; `xcecli projects`): {"use": {"slots", "mem_mb",
        RESOURCE...}, "pending": n}. `use` sums what the running (RUN, USUSP) elements of the
        project's whole subtree hold (`Element.reserve`: {host: {"slots", "mem", RESOURCE}}, or
        its allocation's slots where it has none); `pending` counts the pending (PEND, PSUSP)
        elements of that very project. Every project of the config is there (zeros, with every
        consumable resource of the hosts), and so is any other path a live job carries."""
        keys = {SLOTS: 0, MEM: 0, **{r: 0 for h in self.hosts.values() for r in h.resources}}
        out = {p: {"use": dict(keys), "pending": 0} for p in self.config.projects.paths()}

        def entry(path: str) -> dict:
            got = out.get(path)
            if got is None:
                got = out[path] = {"use": dict(keys), "pending": 0}
            return got

        for job in self.active.values():
            path = job.spec.project
            if path is None:
                continue
            for e in job.elements.values():
                if e.state in PENDING:
                    entry(path)["pending"] += 1
                elif e.state in ACTIVE:
                    for held in (e.reserve or {h: {SLOTS: n} for h, n in e.alloc}).values():
                        for k, v in held.items():
                            key = MEM if k == "mem" else k
                            if key in (SLOTS, MEM):
                                v = int(v)
                            for p in ancestors(path):
                                use = entry(p)["use"]
                                use[key] = use.get(key, 0) + v
        return out

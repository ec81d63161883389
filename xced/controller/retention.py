"""Retention of finished jobs (issue 15; LSF CLEAN_PERIOD, Slurm MinJobAge): a job whose
elements have all finished leaves the daemon's memory `clean_period` seconds (xce.yaml,
default one hour) after its last element ended. Its records stay in the store, which
`xcecli show`, `hist`, `wait`, `why` and `jobs -a` then read, in a thread, so that a read
never blocks the event loop (D-8): a job read back is kept in a small cache of recalled jobs
(`RECALL_ELEMENTS` elements at most) that `Controller.job` also looks in. A restart loads only
unfinished jobs, those that ended within the clean period, and the finished jobs an
unfinished job's dependency names (JOB-5: a job is never purged while a -w condition of an
unfinished job names it).

Part of the Controller (xced.controller.controller), which mixes these in.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import json
import logging

from xced.model import deps
from xced.model.jobs import ACTIVE, FINISHED, HoldKind, JobState, PendReason
from xced.model.spec import from_record
from xced.model.state import Element, Job

log = logging.getLogger("xced.controller")

S = JobState

#: the most elements the recalled jobs (read back from the store) keep in memory together; a
#: larger job read back (a big array's `show`) is dropped again after RECALL_HOLD_S seconds
RECALL_ELEMENTS = 20_000
RECALL_HOLD_S = 30.0
#: the longest gap between two purges, seconds (a shorter clean_period purges more often)
PURGE_EVERY_S = 60.0
#: seconds between two looks at whether the heap should be trimmed (after scheduler work)
TRIM_EVERY_S = 10.0


_USER_ONLY = frozenset({HoldKind.USER})


def _element(job: Job, row: tuple) -> Element:
    """An Element of `job` from a store row (job_id, idx, state, holds, start, end, exit_code,
    exit_signal, exit_reason, alloc, action, token_hash, reserve, failures, containment, attempt)."""
    (_, idx, state, holds, st, et, code, sig, reason, alloc, action, thash, reserve, failures, containment,
     attempt) = row
    e = Element(job, idx, S(state), frozenset(h for h in holds.split(",") if h) if holds else frozenset(),
                st, et, code, sig, reason, [tuple(a) for a in json.loads(alloc)] if alloc else (), action,
                token_hash=thash, reserve=json.loads(reserve) if reserve else {}, failures=failures or 0,
                containment=containment, attempt=attempt or 0)
    if e.state is S.PSUSP and e.holds == _USER_ONLY:
        # pend reasons are not stored; a user's hold says what it said before the restart (D-5)
        from xced.controller.machine import REASON_USER_HOLD

        e.pend_reason = PendReason(REASON_USER_HOLD)
    return e


def job_from_rows(row: tuple, element_rows) -> Job:
    """A Job (with its elements, `unfinished` counted) from its store rows: `row` (id, name,
    user, queue, submit_time, spec JSON) and its elements' rows (see `_element`). The parsed
    resreq is the caller's to set."""
    jid, name, user, queue, submit_time, spec = row
    job = Job(jid, name, user, queue, submit_time, *from_record(json.loads(spec)))
    for r in element_rows:
        e = job.elements[r[1]] = _element(job, r)
        if e.state not in FINISHED:
            job.unfinished += 1
    return job


def _with_resreq(job: Job) -> Job:
    """`job` with its effective resreq parsed (as a restart parses it), for show's reserve
    lines and for a job that comes back to life."""
    from xced.controller.submit import effective_resreq
    from xced.resreq import parse, shared

    text = job.effective.resreq
    job.resreq = shared(parse(text) if text else effective_resreq(job.spec.resreq))
    return job


def last_end(job: Job) -> float:
    """When the job's last element ended (epoch seconds; 0 when none has an end time)."""
    return max((e.end_time or 0.0 for e in job.elements.values()), default=0.0)


class RetentionMixin:
    """Purging finished jobs from memory and reading them back: a part of the Controller."""

    def _init_retention(self) -> None:
        #: finished jobs read back from the store, least recently used first
        self._recalled: collections.OrderedDict[int, Job] = collections.OrderedDict()
        self._recalled_elements = 0
        self._purge_handle: asyncio.TimerHandle | None = None
        #: jobs purged since the daemon started (xceadmin / bench read it in `info`)
        self.purged = 0

    def clean_horizon(self) -> float:
        """Jobs whose last element ended before this time (epoch seconds) are out of memory."""
        return self.clock() - self.config.settings.clean_period_s

    def _referenced(self) -> set[int]:
        """The job IDs a -w condition of an unfinished job names (JOB-5): kept in memory."""
        out: set[int] = set()
        for job in self.active.values():
            if job.spec.dependency:
                if job.dependency is None:
                    job.dependency = deps.parse_dependency(job.spec.dependency)
                out.update(jid for jid, _ in deps.refs(job.dependency))
        return out

    def purge_finished(self) -> int:
        """Drop from memory every finished job whose last element ended before the clean
        horizon, unless an unfinished job's dependency names it or a client waits on it; how
        many were dropped. Their records stay in the store."""
        horizon = self.clean_horizon()
        keep = self._referenced()
        gone = [job for jid, job in self.jobs.items()
                if job.unfinished == 0 and jid not in self.active and jid not in keep
                and not self._waiters.get(jid) and last_end(job) < horizon]
        elements = 0
        for job in gone:
            del self.jobs[job.id]
            elements += len(job.elements)
            # elements and their job refer to each other: without the cycle they are freed at
            # once, even those loaded before gc.freeze() (which the collector never visits)
            job.elements = {}
        if gone:
            self.purged += len(gone)
            log.info("purged %d finished job(s), %d element(s), from memory (clean_period %.0f s)", len(gone),
                     elements, self.config.settings.clean_period_s)
            if elements > 10_000:
                _trim_heap()
        return len(gone)

    def start_retention(self) -> None:
        """Purge now, then every min(clean_period / 10, PURGE_EVERY_S) seconds (at least 1 s)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (unit tests purge by hand)
            return

        def tick() -> None:
            try:
                self.purge_finished()
            except Exception:  # noqa: BLE001 - retention must go on
                log.exception("purge of finished jobs failed")
            self._purge_handle = loop.call_later(every, tick)

        every = max(1.0, min(self.config.settings.clean_period_s / 10, PURGE_EVERY_S))
        self._purge_handle = loop.call_later(0, tick)
        seen = [self.sessions]

        def trim() -> None:
            # glibc keeps what a burst of submits or job ends freed; once the scheduler has
            # run since the last look, give it back so that RSS follows what is held
            if self.sessions != seen[0]:
                seen[0] = self.sessions
                _trim_heap(collect=False)
            loop.call_later(TRIM_EVERY_S, trim)

        loop.call_later(TRIM_EVERY_S, trim)

    # ---------------------------------------------------------------- reading back

    def _recall_get(self, job_id: int) -> Job | None:
        job = self._recalled.get(job_id)
        if job is not None:
            self._recalled.move_to_end(job_id)
        return job

    def _keep_recalled(self, job: Job) -> None:
        self._recalled[job.id] = job
        self._recalled_elements += len(job.elements)
        while self._recalled_elements > RECALL_ELEMENTS and len(self._recalled) > 1:
            self._forget_recalled(next(iter(self._recalled)))
        if len(job.elements) > RECALL_ELEMENTS:  # kept for the requests of the next moments only
            try:
                asyncio.get_running_loop().call_later(RECALL_HOLD_S, self._forget_recalled, job.id, True)
            except RuntimeError:
                pass

    def _forget_recalled(self, job_id: int, trim: bool = False) -> None:
        old = self._recalled.pop(job_id, None)
        if old is not None:
            self._recalled_elements -= len(old.elements)
            old.elements = {}
            if trim:
                _trim_heap()

    async def recall(self, job_id: int) -> None:
        """Make a purged job known to `job()` again for a while: read from the store in a
        thread when it is neither in memory nor recalled. Unknown jobs stay unknown (job()
        then raises NotFound). Raises StoreBusy or StoreUnavailable when the store cannot be
        read (503)."""
        if job_id in self.jobs or job_id in self._recalled:
            return
        got = await asyncio.to_thread(self.store.read_job, job_id)
        if got is None or job_id in self.jobs:
            return
        job = job_from_rows(*got)
        if job.unfinished:  # cannot be: an unfinished job is never purged; never shadow memory
            return
        self._keep_recalled(_with_resreq(job))

    async def recall_refs(self, dependency: str | None) -> None:
        """Recall every purged job a submit's -w text names (JOB-5: a dependency on a job that
        left memory is worked out from its record); a text that does not parse is left to
        the submit, which says where it is wrong."""
        if not dependency:
            return
        try:
            refs = deps.refs(deps.parse_dependency(dependency))
        except deps.DependencyError:
            return
        for jid in sorted({jid for jid, _ in refs})[:64]:
            await self.recall(jid)

    def _revive(self, job: Job) -> None:
        """A recalled job becomes live again: requeued (it pends once more), or named by the
        -w of a new job (it is kept while that job is unfinished, as any job a dependency
        names). From then on it is in memory like any other job, and purged like one."""
        if job.id in self.jobs:
            return
        if self._recalled.pop(job.id, None) is not None:
            self._recalled_elements -= len(job.elements)
        if job.resreq is None:
            _with_resreq(job)
        self.jobs[job.id] = job
    async def stored_jobs(self, user: str | None, queue: str | None, project: str | None,
                          states: set[JobState] | None) -> list[Job]:
        """The finished jobs of the store that are not in memory (`xcecli jobs -a`), by ID,
        of `user` and `queue` (None: any), of that very `project`, with an element in one of
        `states` (None: any); read in a thread. Raises StoreBusy or StoreUnavailable."""
        skip = set(self.jobs)

        def read() -> list[Job]:
            out = []
            built = 0
            for row, els in self.store.read_jobs(user, queue):
                if row[0] in skip:
                    continue
                job = job_from_rows(row, els)
                built += len(els)
                if project is not None and job.spec.project != project:
                    continue
                if states is not None and not any(e.state in states for e in job.elements.values()):
                    continue
                out.append(job)
            return out, built

        jobs, built = await asyncio.to_thread(read)
        if built > RECALL_ELEMENTS:  # a big array was read to be listed: its rows go back
            asyncio.get_running_loop().call_soon(_trim_heap)
        return jobs

    def _load_referenced(self) -> None:
        """At start: the finished jobs a loaded job's dependency names, from the store."""
        for jid in sorted(self._referenced() - set(self.jobs)):
            got = self.store.read_job(jid)
            if got is not None:
                self.jobs[jid] = job_from_rows(*got)

    def _use_loaded(self) -> None:
        """At start, after loading: the active map and what running elements hold (RES-2)."""
        for jid, job in self.jobs.items():
            if job.unfinished:
                self.active[jid] = job
            for e in job.elements.values():
                if e.state in ACTIVE:
                    self._use(e, +1)


def _trim_heap(collect: bool = True) -> None:
    """Give freed memory back to the system (glibc's malloc_trim; after a full collection
    with `collect`, as after a large purge), so that the daemon's RSS comes down rather than
    only its heap's use. A few milliseconds on a heap of 100 MB."""
    if collect:
        gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the memory is reused, not returned
        pass

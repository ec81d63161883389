"""Pack submits (CLI-7, issue 17 part 2): many jobs in one request, as LSF's `bsub -pack FILE`.

A pack carries the submitter's environment once and a list of jobs, each a submit's fields
with only its own `--env` additions. Every job is checked by the very code a single submit
runs (`SubmitMixin._check_submit`: the merge, the queue, profile and project checks, the
permissions, the caps, -M over the largest host, -w, max_array_size), then all of them are
committed in one durable store transaction, each with its own ID, or none is: a job that is
refused refuses the whole pack, naming it ("job I of the pack: ..."), and a commit that
fails leaves nothing (D-3). The pack's environment is checked, hashed and stored once.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread and changes state only through the store first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Callable, Iterator, Mapping, NamedTuple, Sequence

from xced.api.errors import StoreBusy, StoreUnavailable, XceError
from xced.api.idempotency import KEEP_S, canonical
from xced.controller import machine as m
from xced.controller.submit import (FAULT_EXIT_AFTER_SUBMIT, FAULT_EXIT_CODE, KEY_PURGE_EVERY_S, _check_names,
                                    _check_utf8, submit_answer)
from xced.model.jobs import JobState
from xced.model.spec import env_record, to_record
from xced.model.state import Element, Job
from xced.policy.rbac import Caller
from xced.scheduler.placement import PlacementRequest
from xced.scheduler.session import request_key
from xced.store.base import record_text

S = JobState
log = logging.getLogger("xced.controller")
#: a pack's checks give the event loop back after this many jobs (a few tens of ms, D-8)
PACK_CHUNK = 500
#: how often a pack is checked while the config changes or jobs leave memory meanwhile; the
#: last try keeps the loop to itself (but to read back a job its -w names from the store)
PACK_CHECK_TRIES = 3


class _Checked(NamedTuple):
    """A pack job as its check made it (SubmitMixin._check_submit's tuple, then the effective
    values and the spec's stored JSON, made before the commit)."""

    name: str | None
    qname: str
    queue: object
    app: str
    profile: object
    eff: object
    spec: object
    array: object
    dependency: object
    env_text: str
    env: dict
    effective: object
    spec_json: str


def _digest_start(env: Mapping[str, str]):
    """A SHA-256 fed the start of a pack's digest: a marker (no single submit's body digest
    can be a pack's) and the pack's environment; each job follows as "\n" + canonical JSON."""
    import hashlib

    return hashlib.sha256(b"pack\n" + canonical(dict(env), floatless=True))  # str: str


def pack_digest(env: Mapping[str, str], jobs: Sequence[Mapping]) -> str:
    """The digest a pack's Idempotency-Key is kept with (JOB-10): the hex SHA-256 of the
    marker, the environment and every job (its SubmitRequest fields, as a dict or a PackJob)
    as canonical JSON (xced.api.idempotency.canonical), so the same pack gives the same
    digest whatever its key order or spacing; `submit_pack` makes it job by job."""
    h = _digest_start(env)
    for job in jobs:
        job = dict(job)
        h.update(b"\n" + canonical(job, floatless=job.get("exdata") is None))
    return h.hexdigest()


@contextlib.contextmanager
def job_of_pack(i: int) -> Iterator[None]:
    """Inside: an XceError about job `i` (0-based) of a pack is raised again as the same kind
    of error (same status and code) whose message starts "job I+1 of the pack: " and whose
    field is `jobs.<i>.<field>` (or `jobs.<i>`), so the client can name the job's line (CLI-7)."""
    try:
        yield
    except XceError as e:
        err = type(e)(f"job {i + 1} of the pack: {e.message}", field=f"jobs.{i}" + (f".{e.field}" if e.field else ""))
        err.status, err.exit_code = e.status, e.exit_code
        raise err from None


class PackMixin:
    """Pack submits (CLI-7): a part of the Controller."""

    async def submit_pack(self, env: dict[str, str], jobs: Sequence[Mapping], caller: Caller,
                          target: Callable[[str | None], tuple[str | None, str | None]], *,
                          key: str | None = None) -> dict:
        """Check and record the jobs `reqs` of a pack (CLI-7, LSF `bsub -pack`), all or none.

        `env` is the pack's environment {name: value}; each of `jobs` maps SubmitRequest's
        fields (a dict, or a PackJob: `dict(job)`), its `env` only the job's own additions,
        laid over `env`. `target(project)` is
        the (project, basis) the API server lets a job of `caller` with -P `project` in with
        (SUBMIT-1; asked once per distinct project). `key` is the pack's one Idempotency-Key
        (JOB-10, checked by the caller), recorded for `caller.user` with the pack's digest
        (`pack_digest`, made as the jobs are checked) in the same transaction as the jobs.

        The checks give the event loop back every PACK_CHUNK jobs, so a large pack does not
        hold up every other request while it is checked (D-8); when the config changed or
        jobs left memory meanwhile, the pack is checked again. From the last check to the
        commit nothing else runs: the key's look-up (`replay_pack`: a twin of this request
        that committed meanwhile gives its answer) and the insert are one step.

        Returns the answer, {"jobs": [SubmitResponse dicts in request order]}. Raises the
        error a single submit of the first job at fault would raise, its message prefixed
        "job I of the pack: " and its field `jobs.<i>[.<field>]` (`job_of_pack`); an error of
        the pack's own `env` names field `env`; Conflict for a key used with another body;
        StoreBusy or StoreUnavailable when the commit fails. Nothing is recorded unless
        every job is."""
        _check_utf8({"env": env})  # the pack's environment, once for every job
        _check_names("--env", env)
        record = env_record(env)
        digest = _digest_start(env) if key is not None else None
        for attempt in range(PACK_CHECK_TRIES):
            state = (self._config_hash, self.purged)
            checked, targets = [], {}
            for i, job in enumerate(jobs):
                req = dict(job)
                if digest is not None and attempt == 0:
                    digest.update(b"\n" + canonical(req, floatless=req.get("exdata") is None))
                if i and i % PACK_CHUNK == 0 and attempt < PACK_CHECK_TRIES - 1:
                    await asyncio.sleep(0)  # let the daemon answer others (the last try keeps the loop)
                with job_of_pack(i):
                    if req.get("dependency"):  # -w naming jobs that left memory: read back (JOB-5)
                        await self.recall_refs(req["dependency"])
                    project = req.get("project")
                    if project not in targets:
                        targets[project] = target(project)
                    c = self._check_submit(req, caller, *targets[project], base_env=env, base_record=record)
                # what the commit writes, made here, a step at a time, rather than while nothing else runs
                effective = self._effective(c[5], c[4])
                checked.append(_Checked(*c, effective, record_text(to_record(c[6], effective))))
            if state == (self._config_hash, self.purged):
                break
        idempotency = None
        if key is not None:
            idempotency = (key, digest.hexdigest())
            answer = self.replay_pack(caller.user, *idempotency)  # a twin committed while this was checked
            if answer is not None:
                return answer
        held = [bool(dict(job).get("hold")) for job in jobs]  # -H on a pack line (LSF's pack takes it)
        made, answers = self._record_pack(caller, checked, idempotency, held)
        try:
            self._pend_or_kick_pack([j for j, h in zip(made, held) if not h], [c for c, h in zip(checked, held) if not h])
        except (StoreBusy, StoreUnavailable) as e:  # the pack is recorded: it is answered, a session pends them
            log.warning("pack of %d jobs from %s: their first pend reasons were not recorded (%s); a scheduler "
                        "session gives them", len(made), caller.user, e.message)
            self.kick()
        return {"jobs": answers}

    def _record_pack(self, caller: Caller, checked: list[_Checked],
                     idempotency: tuple[str, str] | None, held: list[bool] | None = None) -> tuple[list[Job], list[dict]]:
        """Commit every job of a pack in one durable transaction (D-3: acknowledged only after
        it), each distinct environment once, with the pack's idempotency key and its whole
        answer when it has one (JOB-10); then keep the jobs in memory. A failed commit raises
        and leaves memory and store as they were (the IDs it took are skipped, never reused).
        `held[i]`: job i was given -H (LSF's pack takes every bsub option but -I*, -XF, -K,
        -jsdl, -h, -V and -pack: https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.pack.1.html):
        held by its user (PSUSP, D-5) in the same transaction, as a single submit's -H is
        (`_record_submit`)."""
        now = self.clock()
        store = self.store
        n = len(checked)
        ids = store.allocate_job_ids(n)
        jobs: list[Job] = []
        for jid, c in zip(ids, checked):
            job = Job(jid, c.name, caller.user, c.qname, now, c.spec, c.effective)
            job.elements = {i: Element(job, i, S.PEND) for i in (c.array.indices if c.array else (0,))}
            jobs.append(job)
        answers = [submit_answer(job) for job in jobs]
        sid, actor = self._sid("submit"), f"user:{caller.user}"
        holds = [] if not any(held or ()) else [  # LSF bsub -H on a pack line: a Stop stimulus on its new PEND elements
            x for job, h in zip(jobs, held or ()) if h
            for x in self._changes(list(job.elements.values()), self._stim(m.Stop, "submit", actor))]
        envs = {c.spec.env_digest: c.env_text for c in checked}  # each distinct one once
        events = [(now, job.id, None, "SUBMIT", None, "PEND", actor, f"job {i + 1} of a pack of {n}"
                   + (f", {len(job.elements)} elements" if job.spec.is_array else ""), sid)
                  for i, job in enumerate(jobs)]
        with store.tx(durable=True):
            store.insert_jobs(((job.id, job.name, caller.user, job.queue, now, c.spec_json, list(job.elements))
                               for job, c in zip(jobs, checked)), "PEND")
            for digest, text in envs.items():
                store.put_env(digest, text)
            store.add_events(events)
            if holds:  # held in the pack's own transaction (the shell's writes, _commit)
                from xced.controller.controller import write_changes

                write_changes(store, holds)
            if idempotency is not None:
                store.add_idempotency_key(caller.user, idempotency[0], jobs[0].id, idempotency[1], now,
                                          {"jobs": answers})
                if now - self._keys_purged_at >= KEY_PURGE_EVERY_S:
                    store.purge_idempotency_keys(now - KEEP_S)
                    self._keys_purged_at = now
        if self.test_fault == FAULT_EXIT_AFTER_SUBMIT:
            os._exit(FAULT_EXIT_CODE)  # the test's moment: committed, never answered
        for job, c in zip(jobs, checked):
            self._remember_env(job.spec.env_digest, c.env)
            job.resreq = c.eff.resreq
            job.dependency = c.dependency
            job.unfinished = len(job.elements)
            self.jobs[job.id] = job
            self.active[job.id] = job
        for e, _, out in holds:  # only after the commit, as the shell does (DESIGN rule 2)
            self._apply_memory(e, out)
        for e, _, out in holds:
            for eff in out.effects:
                self._effect(e, eff)
        return jobs, answers

    def _pend_or_kick_pack(self, jobs: list[Job], checked: list[_Checked]) -> None:
        """`_pend_or_kick` for a whole pack: the first pend reasons that need no session (a -w
        dependency not met, JOB-5; the last session's findings, xced.scheduler.shortcut) are
        committed together in one transaction, and one session is asked for the rest."""
        changes = []
        kick = False
        lookup = None
        use_shortcut = not self._session_scheduled
        for job, c in zip(jobs, checked):
            qname, queue, eff = c.qname, c.queue, c.eff
            if job.dependency is not None:
                lookup = lookup if lookup is not None else self._dependency_lookup({})
                waiting = self._dependency_reason(job, lookup)
                if waiting is not None:
                    changes += self._changes(list(job.elements.values()), self._stim(
                        m.Pending, "submit", "system", reason=waiting))
                    continue
            known = (self.shortcut.reason_for(qname, request_key(PlacementRequest(
                eff.ntasks_min, eff.ntasks_max, eff.resreq, queue.host_limit, job.spec.exclusive)), queue.backfill)
                     if use_shortcut else None)
            if known is not None:
                changes += self._changes(list(job.elements.values()), self._stim(
                    m.Pending, "submit", "scheduler", reason=known))
                continue
            kick = True
        if changes:
            self._commit(changes)
        if kick:
            self.kick()

    def replay_pack(self, user: str, key: str, digest: str | Callable[[], str]) -> dict | None:
        """JOB-10 for a pack: the answer (PackResponse's fields) of the pack `user` sent with
        idempotency key `key` before, when `digest` (`pack_digest`; or a function that makes
        it, called only when the key is found) is that pack's too; None when `user` has no
        such key. Raises Conflict naming the first job when the key was used with another
        body (another pack, or a single submit)."""
        found = self.store.idempotency_key(user, key)
        if found is None:
            return None
        if callable(digest):
            digest = digest()
        job_id, first_digest, _t, answer = found
        if first_digest != digest or "jobs" not in answer:
            from xced.api.errors import Conflict

            raise Conflict(f"Idempotency-Key {key!r} was used already, for the request that made job {job_id}, with "
                           f"a different request; resend that request unchanged to get its answer again, or make a "
                           f"new key for a new pack", field="Idempotency-Key")
        return answer

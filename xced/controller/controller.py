"""The controller (D-1, D-3, D-5, DESIGN rule 2): owns all state and is its only writer.

Every stimulus (a submit, a scheduler decision, a job end, a user action) becomes
transitions from the one table in `transitions.py`, written with their events in one
store transaction, and only then turned into effects (start a job, send a signal).

In memory it keeps every job it knows (loaded from the store at start); the store is
the durable truth. Scheduler sessions run on events (submit, job end, resume, release,
host change) after a coalescing delay of at most 10 ms (D-4); there is no polling timer.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import json
import logging
import os
import pwd
import secrets
import signal
import time
from pathlib import Path
from typing import Callable, Protocol

from xced.api.errors import Conflict, InvalidRequest, NotFound, PermissionDenied
from xced.controller import machine as m
from xced.controller.machine import IllegalTransition, Outcome, Stimulus, transition
from xced.model import deps
from xced.model.config import ClusterConfig
from xced.model.jobs import (
    ACTIVE,
    FINISHED,
    PENDING,
    ArraySpecError,
    JobState,
    PendReason,
    format_job_ref,
    parse_job_name,
)
from xced.model.state import EndStatus, Element, HostState, Job, StartInfo, TaskSpec
from xced.policy.rbac import Caller, may_control_job, require_admin
from xced.merge import Effective, JobValues, MergeError, merge_job
from xced.resreq import ResReqError, merge, parse, render, to_json
from xced.scheduler.placement import PlacementRequest, never_satisfiable
from xced.scheduler.session import SessionResult, schedule
from xced.scheduler.snapshot import HostSnap, JobSnap, QueueSnap, RunSnap, Snapshot
from xced.store.base import Store, token_hash

log = logging.getLogger("xced.controller")

S = JobState


class WorkerLink(Protocol):
    """The controller's handle on one worker host (in-process now, remote in D-1 multi-host)."""

    host: str

    def start(self, info: StartInfo) -> None: ...
    def kill(self, job_id: int, index: int) -> bool: ...
    def signal(self, job_id: int, index: int, sig: int) -> bool: ...
    def reattach(self, job_id: int, index: int) -> None: ...
    def read_output(self, job_id: int, index: int, stream: str, max_bytes: int) -> str | None: ...
    async def launch_task(self, task: TaskSpec) -> dict: ...
    def end_tasks(self, job_id: int, index: int) -> None: ...


def _stored(fields: dict) -> dict:
    """An outcome's stored fields as the store's columns take them."""
    out = dict(fields)
    if "state" in out:
        out["state"] = str(out["state"])
    if "holds" in out:
        out["holds"] = ",".join(sorted(out["holds"]))
    return out


def _daemon_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


#: the umask of a job whose submit named none (D-7: LSF's and Slurm's default)
DEFAULT_UMASK = 0o022

_NO_RESREQ = parse("")

HOOK_NAMES = ("pre_host_exec", "pre_job_exec", "post_job_exec", "post_host_exec")

#: sessions whose decision traces are kept for `xcecli why` (D-4)
TRACE_SESSIONS = 64


def wrap_with_job_starter(starter: str, argv: list[str]) -> list[str]:
    """JOB-7 (LSF JOB_STARTER): run the job command through the profile's job starter, a
    shell command line in which `%USRCMD` stands for the job's command (appended when absent)."""
    import shlex

    cmd = shlex.join(argv)
    line = starter.replace("%USRCMD", cmd) if "%USRCMD" in starter else f"{starter} {cmd}"
    return ["/bin/sh", "-c", line]


def effective_resreq(texts: list[str]):
    """The job's effective requirement: its `-R` strings parsed and merged as LSF merges
    them (RES-1). Raises ResReqError."""
    parts = [parse(t) for t in texts if t.strip()]
    return merge(parts) if parts else _NO_RESREQ


class Controller:
    """Owns jobs, hosts and the store. All methods run on the event loop thread.

    Errors raised to the API: InvalidRequest (bad submit), NotFound (unknown job),
    PermissionDenied (not the owner nor an admin), Conflict (wrong state).
    """

    def __init__(self, config: ClusterConfig, store: Store, topdir: Path,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.store = store
        self.topdir = topdir
        self.clock = clock
        self.daemon_user = _daemon_user()
        self.jobs: dict[int, Job] = {}
        #: jobs with an element not yet finished: what sessions and snapshots look at
        self.active: dict[int, Job] = {}
        self.hosts: dict[str, HostState] = {
            h.name: HostState(h.name, h.slots, h.memory_mb, dict(h.resources), dict(h.attributes), list(h.tags))
            for h in config.hosts
        }
        self.workers: dict[str, WorkerLink] = {}
        self._session_scheduled = False
        #: strict FCFS shortcut: queues blocked at the last session, valid until anything but a
        #: submit happens (a job end, a kill, a release, a host joining...)
        self._blocked: dict[str, PendReason] = {}
        #: requests the last session proved unable to start, with their reasons (SCHED-2)
        self._unsat: dict[tuple, PendReason] = {}
        self._blocked_valid = False
        self._waiters: dict[int, list[tuple[asyncio.Future, int | None]]] = {}
        self._task_ids: dict[tuple[int, int], int] = {}
        #: elements whose profile host hooks run on their other hosts too (JOB-6)
        self._host_hooked: set[tuple[int, int]] = set()
        self.sessions = 0
        self.last_trace: list[str] = []
        #: the decision traces of the last sessions, newest last (D-4, for `xcecli why`)
        self.traces: collections.deque[list[str]] = collections.deque(maxlen=TRACE_SESSIONS)
        #: an open recording of every session (SIM-2, an xced.sim.recording.Recorder), or None
        self.recorder = None
        self._config_hash = config.content_hash()
        self._boot = format(int(time.time()) % 36**6, "x")
        self._stim_seq = 0
        self._load()
        self.remerged_at_start = self._remerge_pending("system")

    # ------------------------------------------------------------------ loading

    def _load(self) -> None:
        for jid, name, user, queue, submit_time, spec in self.store.load_jobs():
            job = self.jobs[jid] = Job(jid, name, user, queue, submit_time, json.loads(spec))
            eff_text = job.spec.get("effective_resreq")
            job.resreq = parse(eff_text) if eff_text else effective_resreq(job.spec.get("resreq") or [])
        for (jid, idx, state, holds, st, et, code, sig, reason, alloc, action, thash,
             reserve) in self.store.load_elements():
            job = self.jobs[jid]
            e = Element(job, idx, S(state), set(h for h in holds.split(",") if h), st, et, code, sig, reason,
                        [tuple(a) for a in json.loads(alloc)] if alloc else [], action, token_hash=thash,
                        reserve=json.loads(reserve) if reserve else {})
            job.elements[idx] = e
            if e.state not in FINISHED:
                job.unfinished += 1
                self.active[jid] = job
            if e.state in ACTIVE:
                self._use(e, +1)

    def _use(self, e: Element, sign: int, only: str | None = None) -> None:
        """Take (+1) or give back (-1) what a running element holds on its hosts (RES-2);
        `only`: on that host alone."""
        reserve = e.reserve or {host: {"slots": n} for host, n in e.alloc}
        for host, held in reserve.items():
            h = self.hosts.get(host)
            if h is None or (only is not None and host != only):
                continue
            h.njobs += sign
            for k, v in held.items():
                if k == "slots":
                    h.slots_used += sign * int(v)
                elif k == "mem":
                    h.mem_used_mb += sign * int(v)
                else:
                    h.resources_used[k] = h.resources_used.get(k, 0.0) + sign * v

    def worker_joined(self, link: WorkerLink, offer) -> None:
        """A worker host joined over the channel (D-1) with `offer` (a peer.Join). A host
        not in hosts.yaml is declared by what the worker offers (RES-2); a declared host
        keeps its hosts.yaml values."""
        if link.host not in self.hosts:
            self.hosts[link.host] = HostState(link.host, offer.slots, offer.memory_mb, dict(offer.resources),
                                              dict(offer.attributes), list(offer.tags))
            log.info("host %s declared at join: %d slots, %d MB", link.host, offer.slots, offer.memory_mb)
            # what running jobs hold there (known from the store before the host was)
            for job in self.active.values():
                for e in job.elements.values():
                    if e.state in ACTIVE and link.host in (e.reserve or dict(e.alloc)):
                        self._use(e, +1, only=link.host)
        self.attach_worker(link)

    def worker_left(self, link: WorkerLink) -> None:
        """The host's channel closed: it takes no new work until it rejoins; its running
        elements stay RUN (their supervisors keep running, JOB-8)."""
        if self.workers.get(link.host) is link:
            del self.workers[link.host]
            h = self.hosts.get(link.host)
            if h is not None:
                h.status = "unavail"

    def attach_worker(self, link: WorkerLink) -> None:
        """A worker now serves `link.host`: mark it ok, re-attach its running elements, schedule."""
        self.workers[link.host] = link
        if link.host in self.hosts:
            self.hosts[link.host].status = "ok"
        for job in list(self.active.values()):  # reattaching may finish jobs (ended while down)
            for e in list(job.elements.values()):
                if e.state in ACTIVE and e.alloc and e.alloc[0][0] == link.host:
                    link.reattach(job.id, e.index)
        self.kick()

    # ------------------------------------------------------------------ helpers

    def _sid(self, kind: str) -> str:
        """A new stimulus ID: `KIND-BOOT.N` (BOOT names this daemon run), on every event it causes."""
        self._stim_seq += 1
        return f"{kind}-{self._boot}.{self._stim_seq}"

    def _stim(self, cls, kind: str, actor: str, **args) -> Stimulus:
        return cls(self._sid(kind), actor, self.clock(), **args)

    def _commit(self, changes: list[tuple[Element, Stimulus, Outcome]], extra: Callable[[], None] | None = None,
                durable: bool = False, memory: Callable[[], None] | None = None) -> None:
        """The shell (DESIGN rule 2): write every change's stored fields and events (and
        `extra`'s writes, such as a job's new spec) in one store transaction; only after the
        commit change memory (`memory` first: the job-level values `extra` stored), then run
        the effects. A transaction that fails raises and leaves memory as it was."""
        store = self.store
        writes = [(e, st, out) for e, st, out in changes if out.fields or out.events]
        if writes or extra is not None:
            with store.tx(durable=durable):
                for e, st, out in writes:
                    if out.fields:
                        store.update_element(e.job.id, e.index, **_stored(out.fields))
                    for ev in out.events:
                        store.add_event(st.time, e.job.id, e.index, ev.kind, ev.from_state, ev.to_state,
                                        ev.actor or st.actor, ev.reason, st.id)
                if extra is not None:
                    extra()
        if memory is not None:
            memory()
        for e, _, out in changes:
            self._apply_memory(e, out)
        for e, _, out in changes:
            for eff in out.effects:
                self._effect(e, eff)

    def _apply_memory(self, e: Element, out: Outcome) -> None:
        """After the commit: the element's new fields, what it holds on its hosts (RES-2), and
        the job's unfinished count and place among the active jobs."""
        old, new = e.state, out.state
        if old in ACTIVE and new not in ACTIVE:
            self._use(e, -1)  # with what it held
        for k, v in out.fields.items():
            setattr(e, k, v)
        for k, v in out.memory.items():
            setattr(e, k, v)
        if new in ACTIVE and old not in ACTIVE:
            self._use(e, +1)
        if new in FINISHED and old not in FINISHED:
            e.job.unfinished -= 1
        elif old in FINISHED and new not in FINISHED:
            e.job.unfinished += 1
            self.active[e.job.id] = e.job

    def _effect(self, e: Element, eff) -> None:
        """Run one effect of a committed change (the only place changes reach workers)."""
        job_id, index = e.job.id, e.index
        if isinstance(eff, m.StartElement):
            self._start(e)
        elif isinstance(eff, m.KillElement):
            self._each_first_host([e], lambda w, x: w.kill(job_id, index))
            self._end_tasks(job_id, index, [h for h, _ in e.alloc[1:]])
        elif isinstance(eff, m.SignalElement):
            self._each_first_host([e], lambda w, x: w.signal(job_id, index, eff.sig))
        elif isinstance(eff, m.EndTasks):
            self._end_tasks(job_id, index, list(eff.hosts))
        else:  # pragma: no cover - a new effect type without its runner
            raise TypeError(f"no runner for effect {eff!r}")

    def _changes(self, elements: list[Element], stim: Stimulus) -> list[tuple[Element, Stimulus, Outcome]]:
        """The outcomes of `stim` on each of `elements` that it applies to: a pair the table
        refuses (kill a finished element of an array) or asks nothing of is left out."""
        out = []
        for e in elements:
            try:
                o = transition(e, stim)
            except IllegalTransition:
                continue
            if o is not None:
                out.append((e, stim, o))
        return out

    def job(self, job_id: int) -> Job:
        """The job with ID `job_id`. Raises NotFound."""
        j = self.jobs.get(job_id)
        if j is None:
            raise NotFound(f"job {job_id} not found; `xcecli jobs -a -u all` lists the jobs the cluster knows")
        return j

    def _elements(self, job: Job, index: int | None) -> list[Element]:
        if index is None:
            return list(job.elements.values())
        e = job.elements.get(index)
        if e is None:
            if not job.is_array:
                raise NotFound(f"job {job.id} is not an array; refer to it as {job.id}")
            raise NotFound(f"job {job.id} has no element {index}; its indices are {job.spec['array_spec']}")
        return [e]

    def _begin_action(self, job_id: int, caller: Caller) -> tuple[Job, str]:
        """The job of a user action (kill/stop/resume/requeue) once the caller may change it,
        and the actor name its events carry. Raises NotFound, PermissionDenied."""
        job = self.job(job_id)
        self._check_control(caller, job)
        return job, f"user:{caller.user}"

    def _check_control(self, caller: Caller, job: Job) -> None:
        if not may_control_job(caller, job.user):
            raise PermissionDenied(f"job {job.id} belongs to {job.user}; only its owner or a cluster admin "
                                   f"(admins in xce.yaml) may change it")

    # ------------------------------------------------------------------ submit

    def submit(self, req: dict, caller: Caller, *, dry_run: bool = False):
        """Validate and record a job (JOB-1, JOB-4, MERGE-2 ceilings); acknowledged after commit (D-3).

        `req` holds SubmitRequest's fields. Returns the Job; with `dry_run`, records nothing
        and returns the effective values instead (CLI-2 --dry-run): {"queue", "ntasks_min",
        "ntasks_max", "run_limit_s", "memory_limit_mb", "name", "array_size", "run_as",
        "resreq" (the documented JSON form), "resreq_text"}. Raises InvalidRequest naming the
        field and what would be valid.
        """
        cfg = self.config
        qname = req.get("queue") or cfg.default_queue
        queue = cfg.queue(qname)
        if queue is None:
            raise InvalidRequest(f"unknown queue {qname!r}; queues: {', '.join(q.name for q in cfg.queues)}",
                                 field="queue")
        # the application profile (PROF-1, PROF-2): None -> default_application, "" -> none
        app = req.get("app")
        if app is None:
            app = cfg.settings.default_application or ""
        profile = None
        if app:
            profile = cfg.applications.get(app)
            if profile is None:
                raise InvalidRequest(f"unknown application profile {app!r}; profiles: "
                                     f"{', '.join(sorted(cfg.applications))} (xcecli apps lists them)", field="app")
        own_hooks = {k: req.get(k) for k in ("pre_exec", "post_exec") if req.get(k)}
        if own_hooks and profile is not None and not profile.allow_job_pre_post_exec:
            raise InvalidRequest(f"profile {app} does not allow a job's own pre/post-exec (-E/-Ep): it runs its "
                                 f"own hooks around every job (JOB-7)", field="pre_exec")
        # the job's own values: sanity only; policy is the merge's (MERGE-1, DESIGN rule 5)
        nmin, nmax = req.get("ntasks_min"), req.get("ntasks_max")
        if nmin is not None and nmin < 1:
            raise InvalidRequest(f"-n {nmin}: the task count must be at least 1", field="ntasks_min")
        if nmax is not None and nmax < (nmin or 1):
            raise InvalidRequest(f"-n {nmin},{nmax}: the maximum is below the minimum; write -n MIN,MAX with MIN <= MAX",
                                 field="ntasks_max")
        rl = req.get("run_limit_s")
        if rl is not None and rl <= 0:
            raise InvalidRequest(f"run limit {rl} s: must be positive; -W takes [hours:]minutes, e.g. -W 30 or -W 1:30",
                                 field="run_limit_s")
        mem = req.get("memory_limit_mb")
        if mem is not None and mem <= 0:
            raise InvalidRequest(f"memory limit {mem} MB: must be positive, e.g. -M 4GB", field="memory_limit_mb")
        for what, mapping in (("--env", req.get("env") or {}), ("--app-param", req.get("app_params") or {})):
            for k, v in mapping.items():
                if not k or "\0" in k or "\0" in v or (what == "--env" and "=" in k):
                    raise InvalidRequest(f"{what} {k!r}: names must be non-empty without '=' and names and values "
                                         f"without NUL bytes", field="env" if what == "--env" else "app_params")
        if any("\0" in a for a in req.get("argv") or []) or "\0" in (req.get("cwd") or ""):
            raise InvalidRequest("the command or the working directory contains a NUL byte", field="argv")
        for fld, opt in (("stdout", "-o"), ("stderr", "-e")):
            if "\0" in (req.get(fld) or ""):
                raise InvalidRequest(f"{opt} {req[fld]!r}: a file name cannot contain a NUL byte", field=fld)
        texts = list(req.get("resreq") or [])
        try:
            resreq = effective_resreq(texts)
        except ResReqError as e:
            raise InvalidRequest(f"-R: {e}", field="resreq") from None
        if resreq.kind == "compound" and any(p.resreq.span is not None and p.resreq.span.hosts == 1
                                             for p in resreq.parts):
            raise InvalidRequest("-R: span[hosts=1] is not allowed inside a compound request (as in LSF): the parts "
                                 "of a compound job are placed separately; use a simple request to keep every task "
                                 "on one host", field="resreq")
        if resreq.kind == "compound":
            total = sum(p.count or 0 for p in resreq.parts)
            if nmin is None and nmax is None:
                nmin = nmax = total  # the compound counts say how many tasks (LSF)
            elif not (nmin or 1) <= total <= (nmax or nmin or 1):
                asked = str(nmin) if nmax in (None, nmin) else f"{nmin},{nmax}"
                raise InvalidRequest(f"-n {asked} does not match the compound -R, which asks for {total} tasks",
                                     field="ntasks_min")
            else:
                nmin = nmax = total
        job_values = {"ntasks_min": nmin, "ntasks_max": nmax if nmax is not None else nmin, "run_limit_s": rl,
                      "memory_limit_mb": mem, "app_params": dict(req.get("app_params") or {}),
                      "exdata": req.get("exdata")}
        try:
            job_env = dict(req.get("env") or {})
            eff = self._merge(resreq, job_values, job_env, profile, queue)
        except MergeError as e:
            raise InvalidRequest(str(e), field="app") from None
        resreq, nmin, nmax, rl, mem = eff.resreq, eff.ntasks_min, eff.ntasks_max, eff.run_limit_s, eff.memory_limit_mb
        total_slots = sum(h.slots for h in self.hosts.values())
        if nmin > total_slots:
            raise InvalidRequest(f"-n {nmin} can never be satisfied: the cluster has {total_slots} slots in all"
                                 + ("" if self.hosts else " (no host has joined yet)"), field="ntasks_min")
        why = None
        if not resreq.is_empty or queue.host_limit is not None:  # a bare -n was checked just above
            why = never_satisfiable(PlacementRequest(nmin, nmax, resreq, queue.host_limit),
                                    [self._host_snap_supply(h) for h in self.hosts.values()])
        if why:
            raise InvalidRequest(f"the job can never start: {why}", field="resreq")
        cwd = req.get("cwd") or ""
        if not os.path.isabs(cwd):
            raise InvalidRequest(f"cwd {cwd!r} must be an absolute path", field="cwd")
        name = req.get("name")
        array = None
        if name is not None:
            try:
                name, array = parse_job_name(name)
            except ArraySpecError as e:
                raise InvalidRequest(str(e), field="name") from None
        # JOB-5 (LSF bsub -w): parsed, every job it names must exist, stored in canonical form
        dependency = self._check_dependency(req["dependency"]) if req.get("dependency") is not None else None
        # D-6: run as the submitting user when the daemon is root and the user is real
        if os.geteuid() == 0 and not caller.asserted and caller.uid is not None:
            run_as, run_uid, run_gid = caller.user, caller.uid, caller.gid
        else:
            run_as, run_uid, run_gid = self.daemon_user, None, None
        spec = {
            "argv": list(req["argv"]), "cwd": cwd, "env": job_env,  # the same dict as exdata's job env
            "stdout": req.get("stdout"), "stderr": req.get("stderr"),
            "ntasks_min": nmin, "ntasks_max": nmax, "run_limit_s": rl, "memory_limit_mb": mem,
            "array_spec": array.text if array else None, "array_limit": array.limit if array else None,
            "resreq": texts, "app": app, "app_params": eff.app_params, "exdata": eff.exdata,
            "effective_resreq": render(resreq), "profile_env": eff.profile_env, "export_env": eff.export_env,
            "warnings": list(eff.warnings), "own_hooks": own_hooks,
            "profile_hash": profile.content_hash() if profile is not None else None,
            "job_values": job_values, "config_hash": self._config_hash,
            "run_as": run_as, "run_uid": run_uid, "run_gid": run_gid, "asserted": caller.asserted,
            "dependency": deps.render(dependency) if dependency is not None else None,
            "umask": req["umask"] if req.get("umask") is not None else DEFAULT_UMASK,
        }
        indices = array.indices if array else (0,)
        if dry_run:
            warnings = list(eff.warnings)
            groups = [g for alt in resreq.rusage for g in alt] + [
                g for p in resreq.parts for alt in p.resreq.rusage for g in alt]
            if any(g.duration_s is not None or g.decay is not None for g in groups):
                warnings.append("rusage duration and decay are accepted, but this version holds every "
                                "reservation for the life of the job")
            merged = eff.to_json()
            return {**merged, "queue": qname, "app": app or None, "ntasks_min": nmin, "ntasks_max": nmax,
                    "run_limit_s": rl, "memory_limit_mb": mem, "name": name,
                    "array_size": len(indices) if array else 0, "run_as": run_as, "resreq": to_json(resreq),
                    "resreq_text": render(resreq), "dependency": spec["dependency"], "_warnings": warnings}
        now = self.clock()
        jid = self.store.allocate_job_id()
        with self.store.tx(durable=True):
            self.store.insert_job(jid, name, caller.user, qname, now, spec, indices, "PEND")
            self.store.add_event(now, jid, None, "SUBMIT", None, "PEND", f"user:{caller.user}",
                                 f"{len(indices)} elements" if array else None)
        job = Job(jid, name, caller.user, qname, now, spec)
        job.resreq = resreq
        job.dependency = dependency
        job.elements = {i: Element(job, i, S.PEND) for i in indices}
        job.unfinished = len(indices)
        self.jobs[jid] = job
        self.active[jid] = job
        waiting = self._dependency_reason(job, self._dependency_lookup({})) if dependency is not None else None
        behind = self._blocked.get(qname) if self._blocked_valid and not self._session_scheduled else None
        if waiting is not None:
            # JOB-5: not schedulable until its dependency is met, so no session is needed (snapshot()
            # leaves it out; the job end that can meet it runs one); `why` shows the reason at once
            for e in job.elements.values():
                e.pend_reason = waiting
        elif behind is not None:
            # strict FCFS: a job submitted behind a queue's blocked head cannot start before
            # it, and nothing else changed since the last session, so no session is needed
            # (D-4: sessions cost O(pending); this keeps submits cheap at depth).
            for e in job.elements.values():
                e.pend_reason = behind
        elif (self._blocked_valid and not self._session_scheduled
              and (proved := self._unsat.get((nmin, nmax, resreq, queue.host_limit))) is not None):
            # A new job never lets another job start (it only adds demand), so when nothing but
            # submits happened since the last session, a session could start only this job. The
            # last session proved its very request cannot start (SCHED-2), and the free supply
            # has only shrunk since: no session is needed, and the proof's full reason is its own.
            for e in job.elements.values():
                e.pend_reason = proved
        else:
            self.kick()
        return job

    # ------------------------------------------------------------------ dependencies (JOB-5)

    def _check_dependency(self, text: str):
        """A submit's `-w` text -> its parsed form (xced.model.deps), or InvalidRequest naming
        the column and what was expected, or the job or element it names that does not exist
        (LSF refuses a dependency on a job it cannot find at bsub)."""
        try:
            expr = deps.parse_dependency(text)
        except deps.DependencyError as e:
            raise InvalidRequest(f"dependency: {e}", field="dependency") from None
        for jid, idx in sorted(deps.refs(expr), key=lambda r: (r[0], r[1] or 0)):
            job = self.jobs.get(jid)
            if job is None:
                raise InvalidRequest(f"dependency: job {jid} does not exist; `xcecli jobs -a -u all` lists the "
                                     f"jobs the cluster knows", field="dependency")
            if idx is None:
                continue
            if not job.is_array:
                raise InvalidRequest(f"dependency: job {jid} is not an array; refer to it as {jid}",
                                     field="dependency")
            if idx not in job.elements:
                raise InvalidRequest(f"dependency: job {jid} has no element {idx}; its indices are "
                                     f"{job.spec['array_spec']}", field="dependency")
        return expr

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
        text = job.spec.get("dependency")
        if not text:
            return None
        if job.dependency is None:  # loaded from the store: the canonical text parses
            job.dependency = deps.parse_dependency(text)
        if deps.evaluate(job.dependency, lookup) is deps.Verdict.MET:
            return None
        return PendReason(deps.explain(job.dependency, lookup))

    _DEPENDENCY_REASONS = ("Dependency condition not satisfied: ", "Dependency can never be met: ")

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
            if pr is not None and pr.main.startswith(self._DEPENDENCY_REASONS):
                e.pend_reason = None
            return False
        if e.state is S.PEND and pr != reason:
            e.pend_reason = reason
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

    @staticmethod
    def _merge(resreq, values: dict, env: dict, profile, queue) -> Effective:
        """The one merge (MERGE-1) of the job's own values as submitted (`values`: ntasks_min,
        ntasks_max, run_limit_s, memory_limit_mb, app_params, exdata) with its profile and
        queue. Raises MergeError."""
        return merge_job(JobValues(resreq, values["ntasks_min"], values["ntasks_max"], values["run_limit_s"],
                                   values["memory_limit_mb"], env, dict(values["app_params"]), values["exdata"]),
                         profile, queue)

    def _remerged(self, job: Job, check_hosts: bool = False) -> tuple[str | None, dict | None, object]:
        """Re-merge a job none of whose elements has started with the config in force
        (CFG-3: pending jobs see new profiles at their next session), changing nothing:
        (None, its new spec, its new effective resreq), or (the merge's refusal, None, None)
        (the job then keeps its old values and gets a system hold). A job submitted before
        job values were kept gives (None, None, None): its values stay as they were."""
        sp = job.spec
        values = sp.get("job_values")
        if values is None:
            return None, None, None
        app = sp.get("app") or ""
        profile = self.config.applications.get(app) if app else None
        if app and profile is None:
            return f"its application profile {app!r} no longer exists", None, None
        queue = self.config.queue(job.queue)
        if queue is None:
            return f"its queue {job.queue!r} no longer exists", None, None
        try:
            eff = self._merge(effective_resreq(sp.get("resreq") or []), values, dict(sp.get("env") or {}),
                              profile, queue)
        except (MergeError, ResReqError) as e:
            return str(e), None, None
        if check_hosts and self.hosts and (not eff.resreq.is_empty or queue.host_limit is not None):
            never = never_satisfiable(PlacementRequest(eff.ntasks_min, eff.ntasks_max, eff.resreq, queue.host_limit),
                                      [self._host_snap_supply(h) for h in self.hosts.values()])
            if never:  # as at submit (MERGE-2): a job no host could ever take is not left pending silently
                return f"the job can never start: {never}", None, None
        new = dict(sp)  # the env dict stays shared with exdata's job env (one copy in memory)
        new.update({"ntasks_min": eff.ntasks_min, "ntasks_max": eff.ntasks_max, "run_limit_s": eff.run_limit_s,
                    "memory_limit_mb": eff.memory_limit_mb, "app_params": eff.app_params, "exdata": eff.exdata,
                    "effective_resreq": render(eff.resreq), "profile_env": eff.profile_env,
                    "export_env": eff.export_env, "warnings": list(eff.warnings),
                    "profile_hash": profile.content_hash() if profile is not None else None,
                    "config_hash": self._config_hash})
        return None, new, eff.resreq

    def _respec(self, specs: list[tuple[Job, dict, object]]) -> tuple[Callable[[], None], Callable[[], None]]:
        """The (store write, memory change) pair that gives each job its new spec (and its new
        effective resreq when not None), for `_commit`."""
        def write() -> None:
            for job, sp, _ in specs:
                self.store.update_spec(job.id, sp)

        def remember() -> None:
            for job, sp, rr in specs:
                job.spec = sp
                if rr is not None:
                    job.resreq = rr
        return write, remember

    def _remerge_pending(self, actor: str) -> tuple[int, list[str]]:
        """Re-merge every job whose elements all pend and whose values came from another
        config (CFG-3). A job the new config refuses gets a system hold naming why; one an
        earlier config refused and this one takes has that hold released. Returns (jobs
        re-merged, one line per refused job). One transaction."""
        done = 0
        refused: list[str] = []
        specs: list[tuple[Job, dict, object]] = []
        changes: list = []
        sid, now = self._sid("config"), self.clock()
        for job in list(self.active.values()):
            sp = job.spec
            if sp.get("config_hash") == self._config_hash or sp.get("job_values") is None:
                continue
            if any(e.state not in (S.PEND, S.PSUSP) for e in job.elements.values()):
                continue  # an array with started elements keeps the values it started with
            why, new, rr = self._remerged(job, check_hosts=actor != "system")
            if why is None:
                done += 1
                if new.pop("config_refused", None):  # an earlier config refused it; this one takes it
                    changes += self._changes(list(job.elements.values()), m.Release(
                        sid, actor, now, reason="the new config takes it: system hold released"))
                specs.append((job, new, rr))
                continue
            refused.append(f"job {job.id}: {why}")
            new = {**sp, "config_hash": self._config_hash, "config_refused": True}  # refused once per config
            specs.append((job, new, None))
            changes += self._changes(list(job.elements.values()), m.SystemHold(
                sid, actor, now, reason=f"the new config refuses it: {why}",
                pend_reason=f"Held by the system: the config {self._config_hash[:12]} refuses it: {why}"))
        write, remember = self._respec(specs)
        self._commit(changes, write, memory=remember)
        return done, refused

    def apply_config(self, new: ClusterConfig, caller: Caller) -> dict:
        """CFG-3: validate `new` again and swap it in atomically, or refuse it whole.

        Admins only (PermissionDenied). InvalidRequest lists every problem (cross-references,
        settings only a restart can change). On success pending jobs are re-merged with the
        new profiles and queues and a session is asked for. Returns {"hash", "previous_hash",
        "remerged" (jobs), "held" (lines naming the jobs the new config refuses)}.
        """
        from xced.config.live import check_compiled, restart_only_changes

        require_admin(caller, "apply a config")
        problems = check_compiled(new) + [f"{p}: restart xced to apply it"
                                          for p in restart_only_changes(self.config, new)]
        if problems:
            raise InvalidRequest("the daemon refused the config, nothing was applied: " + "; ".join(problems),
                                 field="config")
        previous = self._config_hash
        self.config = new
        self._config_hash = new.content_hash()
        remerged, held = self._remerge_pending(f"admin:{caller.user}")
        if self.recorder is not None:  # SIM-2: the config in force from here on
            self.recorder.config(new)
        self.kick()
        return {"hash": self._config_hash, "previous_hash": previous, "remerged": remerged, "held": held}

    # ------------------------------------------------------------------ scheduling

    def kick(self) -> None:
        """Ask for a scheduler session after the coalescing delay (D-4); idempotent. Any
        stimulus but a submit into a blocked queue comes here, so it ends the shortcut."""
        self._blocked_valid = False
        if self._session_scheduled:
            return
        self._session_scheduled = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._session_scheduled = False
            return
        loop.call_later(self.config.settings.sched_delay_s, self._session)

    def snapshot(self) -> Snapshot:
        """The scheduler's view now (D-4): hosts with free supply, queues, pending elements."""
        hosts = [self._host_snap(h) for h in self.hosts.values()]
        queues = [QueueSnap(q.name, q.priority, i, q.host_limit, q.backfill) for i, q in enumerate(self.config.queues)]
        backfill = any(q.backfill for q in self.config.queues)
        pending: list[JobSnap] = []
        running: list[RunSnap] = []
        array_running: dict[int, int] = {}
        apps = self.config.applications
        for job in self.active.values():
            sp = job.spec
            limit = sp.get("array_limit")
            prof = apps.get(sp["app"]) if sp.get("app") else None
            phash = prof.content_hash() if prof is not None else None
            nrun = 0
            for e in job.elements.values():
                st = e.state
                if st is S.PEND or st is S.PSUSP:
                    # JOB-5: an element waiting for its -w dependency is left out (reason set there)
                    if sp.get("dependency") and self._dependency_waits(job, e, pending):
                        continue
                    pending.append(JobSnap(job.id, e.index, job.queue, job.submit_time, sp["ntasks_min"],
                                           sp["ntasks_max"], job.resreq, limit, st is S.PSUSP, phash,
                                           sp.get("run_limit_s"), e.pend_reason))
                elif st is S.RUN or st is S.USUSP:
                    nrun += 1
                    if backfill:  # SCHED-1: when the running work ends at the latest
                        rl = sp.get("run_limit_s")
                        running.append(RunSnap(job.id, e.index, e.start_time + rl if rl and e.start_time else None,
                                               e.reserve or {h: {"slots": n} for h, n in e.alloc}))
            if limit is not None:
                array_running[job.id] = nrun
        return Snapshot(hosts, queues, pending, array_running, running)

    @staticmethod
    def _host_snap(h: HostState, idle: bool = False) -> HostSnap:
        """A host's supply for the scheduler; `idle`: as if nothing ran (never-satisfiable checks)."""
        free = dict(h.resources) if idle else {k: v - h.resources_used.get(k, 0.0) for k, v in h.resources.items()}
        return HostSnap(h.name, h.slots, h.slots if idle else h.slots - h.slots_used, h.memory_mb,
                        h.memory_mb if idle else h.memory_mb - h.mem_used_mb, "ok" if idle else h.status,
                        dict(h.resources), free, dict(h.attributes), frozenset(h.tags))

    def _host_snap_supply(self, h: HostState):
        from xced.scheduler.placement import HostSupply

        return HostSupply(h.name, h.slots, h.slots, h.memory_mb, h.memory_mb, dict(h.resources), dict(h.resources),
                          dict(h.attributes), frozenset(h.tags), "ok")

    def _session(self) -> None:
        self._session_scheduled = False
        snap = self.snapshot()
        if not snap.pending:
            return
        now = self.clock()
        result = schedule(snap, now)
        self.sessions += 1
        self.last_trace = result.trace
        self.traces.append(result.trace)
        if self.recorder is not None and not self.recorder.session(now, self._config_hash, snap, result):
            self.recorder = None  # it could not write; it logged why
        self.apply(result)
        self._blocked = result.blocked
        self._unsat = result.unsatisfiable
        self._blocked_valid = not self._session_scheduled

    # ------------------------------------------------------------------ recordings (SIM-2)

    def attach_recorder(self, recorder) -> None:
        """Record every later session to `recorder` (an xced.sim.recording.Recorder); None stops."""
        self.recorder = recorder

    def apply(self, result: SessionResult) -> None:
        """Apply a session's decisions (DESIGN rule 1): re-check each dispatch against the
        current state, commit all accepted dispatches in one transaction, then start them."""
        for (jid, idx), reason in result.pend_reasons.items():
            job = self.jobs.get(jid)
            if job is not None and idx in job.elements:
                e = job.elements[idx]
                if e.state is S.PEND and e.pend_reason is not reason and e.pend_reason != reason:
                    e.pend_reason = reason  # SCHED-3: only a changed reason replaces the last one
        if not result.dispatches:
            return
        sid, now = self._sid("session"), self.clock()
        changes: list = []
        taken: dict[str, dict[str, float]] = {}  # what this session's accepted dispatches take, per host
        for d in result.dispatches:
            job = self.jobs.get(d.job_id)
            e = job.elements.get(d.index) if job else None
            if e is None or e.state is not S.PEND or any(x is e for x, _, _ in changes):
                continue
            reserve = d.reserve or {host: {"slots": n} for host, n in d.alloc}
            if not self._fits(reserve, taken):
                continue
            app = job.spec.get("app")
            why = None
            if app and app not in self.config.applications:
                why = f"application profile {app!r} no longer exists"
            elif app and d.profile_hash is not None and self.config.applications[app].content_hash() != d.profile_hash:
                why = f"application profile {app!r} changed between decision and dispatch"
            if why is not None:
                stim = m.Declined(sid, "system", now, why=why)
                changes.append((e, stim, transition(e, stim)))
                continue
            token = secrets.token_hex(16)  # D-7: the store keeps its hash only
            stim = m.Dispatch(sid, "scheduler", now, alloc=tuple((h, n) for h, n in d.alloc), reserve=d.reserve or {},
                              token=token, token_hash=token_hash(token),
                              note=f" (profile {app} {d.profile_hash[:12]})" if app and d.profile_hash else "")
            changes.append((e, stim, transition(e, stim)))
            for host, held in reserve.items():
                t = taken.setdefault(host, {})
                for k, v in held.items():
                    t[k] = t.get(k, 0.0) + v
        self._commit(changes)

    # ------------------------------------------------------------------ host hooks (JOB-6)

    def _profile_of(self, job: Job):
        app = job.spec.get("app")
        return self.config.applications.get(app) if app else None

    def _start(self, e: Element) -> None:
        """Start a dispatched element on its first host. When its profile has a
        pre_host_exec and the job spans several hosts, that hook runs first on each other
        host (JOB-6: once on each host); the first host's own runs in its supervisor."""
        info = self.start_info(e)
        profile = self._profile_of(e.job)
        others = [h for h, _ in e.alloc[1:]]
        if profile is None or not others or (profile.pre_host_exec is None and profile.post_host_exec is None):
            self.workers[e.alloc[0][0]].start(info)
            return
        self._host_hooked.add((e.job.id, e.index))
        if profile.pre_host_exec is None:
            self.workers[e.alloc[0][0]].start(info)
            return
        asyncio.ensure_future(self._start_after_host_hooks(e, info, profile.pre_host_exec.model_dump(), others))

    async def _start_after_host_hooks(self, e: Element, info: StartInfo, hook: dict, hosts: list[str]) -> None:
        why = await self._host_hooks(e, "pre_host_exec", hook, hosts)
        if e.state not in ACTIVE:
            return
        if (e.action or "").startswith("kill:"):  # killed while the hooks ran: the job never starts
            self.on_finished(e.job.id, e.index, EndStatus(130, None, None, self.clock(), "killed"))
            return
        if why is None:
            w = self.workers.get(e.alloc[0][0])
            if w is not None:
                w.start(info)
                return
            why = f"host {e.alloc[0][0]} left while pre_host_exec ran on the job's other hosts"
        self.on_finished(e.job.id, e.index, EndStatus(1, None, None, self.clock(), why))

    async def _host_hooks(self, e: Element, name: str, hook: dict, hosts: list[str],
                          extra: dict | None = None) -> str | None:
        """Run hook `name` on each of `hosts` at once (as a task of the element, with the
        job's environment, XCE_JOB_HOST_DIR, XCE_HOST_NTASKS, XCE_HOST_TASK_INDEX, XCE_HOOK)
        and return the first failure's reason ("pre_host_exec exited 2 on h2",
        "post_host_exec timed out after 300 s on h2"), or None."""
        job = e.job
        sp = job.spec
        first_index: dict[str, int] = {}
        n = 0
        for h, k in e.alloc:
            first_index.setdefault(h, n)
            n += k

        async def one(host: str) -> str | None:
            w = self.workers.get(host)
            if w is None:
                return f"{name} could not run on {host}: its worker is not joined"
            self._task_ids[(job.id, e.index)] = tid = self._task_ids.get((job.id, e.index), 0) + 1
            task = self._task_spec(e, tid, ["/bin/sh", "-c", hook["command"]],
                                   {"XCE_HOOK": name, "XCE_HOST_TASK_INDEX": str(first_index[host]), **(extra or {})},
                                   float(hook.get("timeout_s", 300.0)))
            self.store_event_only(job.id, e.index, "HOOK", "system", f"{name} on {host} (task {tid})")
            try:
                r = await w.launch_task(task)
            except Exception as exc:  # noqa: BLE001 (a worker that vanished mid-hook)
                return f"{name} could not run on {host}: {exc}"
            if not isinstance(r, dict):
                return f"{name} could not run on {host}: its worker did not answer"
            if r.get("reason") == "run limit":
                return f"{name} timed out after {float(hook.get('timeout_s', 300.0)):g} s on {host}"
            if r.get("signal"):
                return f"{name} was killed by {r['signal']} on {host}"
            if r.get("exit_code"):
                return f"{name} exited {r['exit_code']} on {host}"
            return None

        results = await asyncio.gather(*(one(h) for h in hosts))
        return next((r for r in results if r), None)

    def _task_spec(self, e: Element, task_id: int, argv: list[str], extra: dict[str, str],
                   run_limit_s: float | None = None) -> TaskSpec:
        """A task of element `e` for a host of the job (JOB-6 host hooks, JOB-7 `xcecli launch`):
        the pieces its worker builds the environment from (PROF-10: remote tasks get the
        job's and the profile's environments), run as the job's user with its umask."""
        sp = e.job.spec
        return TaskSpec(e.job.id, e.index, task_id, list(argv), sp["cwd"], sp["env"], sp.get("run_uid"),
                        sp.get("run_gid"), sp["run_as"], self.config.settings.kill_interval_s, run_limit_s,
                        sp.get("umask", DEFAULT_UMASK), e.job.name, e.job.queue, list(e.alloc),
                        dict(sp.get("profile_env") or {}), dict(sp.get("export_env") or {}), sp.get("app") or None,
                        dict(extra))

    def _fits(self, reserve: dict[str, dict[str, float]], taken: dict[str, dict[str, float]]) -> bool:
        """DISPATCH re-check (DESIGN rule 1): every host is served and still has what the
        decision reserves on it, beyond what `taken` (this session's accepted dispatches,
        not yet in memory) takes."""
        for host, held in reserve.items():
            h = self.hosts.get(host)
            if h is None or h.status != "ok" or host not in self.workers:
                return False
            t = taken.get(host, {})
            for k, v in held.items():
                v += t.get(k, 0.0)
                if k == "slots":
                    if h.slots - h.slots_used < v:
                        return False
                elif k == "mem":
                    if h.memory_mb - h.mem_used_mb < v:
                        return False
                elif h.resources.get(k, 0.0) - h.resources_used.get(k, 0.0) < v - 1e-9:
                    return False
        return True

    @staticmethod
    def _hooks(profile, sp: dict) -> dict[str, dict]:
        """The hooks to run (JOB-6, JOB-7): the profile's (outer layer) and the job's own -E/-Ep
        (inner layer; the job's own run with the profile's default timeout)."""
        hooks = {n: h.model_dump() for n in HOOK_NAMES if profile is not None and (h := getattr(profile, n)) is not None}
        own = sp.get("own_hooks") or {}
        if own.get("pre_exec"):
            hooks["job_pre_exec"] = {"command": own["pre_exec"], "timeout_s": 300.0}
        if own.get("post_exec"):
            hooks["job_post_exec"] = {"command": own["post_exec"], "timeout_s": 300.0}
        return hooks

    def start_info(self, e: Element) -> StartInfo:
        """What the first host's worker needs to start element `e` (JOB-1, JOB-3, JOB-6, JOB-7):
        the command (wrapped by the profile's job starter), limits (s, MB), allocation, the
        job's and the profile's environments, and the hooks to run around it."""
        job = e.job
        sp = job.spec
        st = self.config.settings
        argv = list(sp["argv"])
        profile = self.config.applications.get(sp["app"]) if sp.get("app") else None
        if profile is not None and profile.job_starter:
            argv = wrap_with_job_starter(profile.job_starter, argv)
        return StartInfo(job.id, e.index, job.name, job.queue, job.user, argv, sp["cwd"], sp["env"],
                         sp.get("stdout"), sp.get("stderr"), sp.get("run_limit_s"), sp.get("memory_limit_mb"),
                         list(e.alloc), sp["run_as"], sp.get("run_uid"), sp.get("run_gid"),
                         st.kill_interval_s, st.limit_grace_s, e.token or "", sp.get("umask", DEFAULT_UMASK),
                         dict(sp.get("profile_env") or {}),
                         dict(sp.get("export_env") or {}), sp.get("app") or None,
                         self._hooks(profile, sp))

    # ------------------------------------------------------------------ worker reports

    def element_host(self, job_id: int, index: int) -> str | None:
        """The first host of element (job_id, index) while it runs (RUN or USUSP, dispatched
        there), else None: the only worker whose reports about it count (D-7)."""
        job = self.jobs.get(job_id)
        e = job.elements.get(index) if job else None
        if e is None or e.state not in ACTIVE or not e.alloc:
            return None
        return e.alloc[0][0]

    def on_started(self, job_id: int, index: int, start_time: float) -> None:
        """The worker saw the job's process start: show the real start time. Kept in memory
        only (no transaction per start); the end's record carries it durably, and after a
        restart the worker reports it again from the supervisor's job.json."""
        job = self.jobs.get(job_id)
        e = job.elements.get(index) if job else None
        if e is not None and e.state in ACTIVE:
            stim = m.Started("report", "worker", 0.0, start_time=start_time)  # writes nothing: no ID needed
            self._commit([(e, stim, transition(e, stim))])

    def on_start_failed(self, job_id: int, index: int, reason: str) -> None:
        """The worker could not start the element at all: back to PEND (retryable)."""
        job = self.jobs.get(job_id)
        e = job.elements.get(index) if job else None
        if e is None or e.state is not S.RUN:
            return
        stim = self._stim(m.StartFailed, "report", f"worker:{e.alloc[0][0] if e.alloc else '?'}", reason=reason)
        self._commit([(e, stim, transition(e, stim))])
        self.kick()

    def on_finished(self, job_id: int, index: int, st: EndStatus) -> None:
        """An element's processes ended (status from its supervisor's file, JOB-8). When its
        profile has a post_host_exec and it ran on several hosts, its tasks end and that
        hook runs on each other host before the end is recorded (JOB-6); a failing one makes
        a DONE job EXIT with a reason naming the hook and host."""
        job = self.jobs.get(job_id)
        e = job.elements.get(index) if job else None
        if e is None or e.state not in ACTIVE:
            log.warning("end of %s ignored: not running here", format_job_ref(job_id, index))
            return
        if (job_id, index) in self._host_hooked:
            self._host_hooked.discard((job_id, index))
            profile = self._profile_of(job)
            if profile is not None and profile.post_host_exec is not None:
                asyncio.ensure_future(self._finish_after_host_hooks(e, st, profile.post_host_exec.model_dump()))
                return
        self._finish(e, st)

    async def _finish_after_host_hooks(self, e: Element, st: EndStatus, hook: dict) -> None:
        hosts = [h for h, _ in e.alloc[1:]]
        self._end_tasks(e.job.id, e.index, hosts)
        why = await self._host_hooks(e, "post_host_exec", hook, hosts, {"XCE_JOB_EXIT_CODE": str(st.exit_code)})
        if e.state not in ACTIVE:
            return
        if why is not None and st.exit_code == 0 and not st.signal_name and not st.reason:
            st = EndStatus(1, None, st.start_time, st.end_time, why)
        self._finish(e, st)

    def _finish(self, e: Element, st: EndStatus) -> None:
        """Record the end of element `e` (the machine's Finished), then end its tasks and
        wake its waiters."""
        stim = self._stim(m.Finished, "report", f"worker:{e.alloc[0][0] if e.alloc else '?'}", status=st)
        self._commit([(e, stim, transition(e, stim))])
        self._job_changed(e.job)
        self.kick()

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

    # ------------------------------------------------------------------ user actions

    def kill(self, job_id: int, index: int | None, caller: Caller) -> list[str]:
        """`xcecli kill` (LSF bkill): pending elements end EXIT at once; running ones get
        INT, TERM, KILL spaced by kill_interval (the supervisor runs the sequence) and end when
        their processes do. Raises Conflict when every element has finished."""
        job, actor = self._begin_action(job_id, caller)
        changes = self._changes(self._elements(job, index), self._stim(m.Kill, "kill", actor, user=caller.user))
        if not changes:
            raise Conflict(f"job {job_id} has already finished; nothing to kill")
        self._commit(changes)
        self._job_changed(job)
        self.kick()  # a killed pending job may have been the head that blocked its queue
        return [e.ref for e, _, _ in changes]

    def stop(self, job_id: int, index: int | None, caller: Caller) -> list[str]:
        """`xcecli stop` (LSF bstop): a running element is stopped (SIGSTOP, USUSP); a pending
        one gets a `user` hold (PSUSP). Raises Conflict when nothing could be stopped."""
        job, actor = self._begin_action(job_id, caller)
        changes = self._changes(self._elements(job, index), self._stim(m.Stop, "stop", actor))
        if not changes:
            raise Conflict(f"job {job_id}: nothing to stop (state {job.state()})")
        self._commit(changes)
        self.kick()  # a held head no longer blocks its queue
        return [e.ref for e, _, _ in changes]

    def resume(self, job_id: int, index: int | None, caller: Caller) -> list[str]:
        """`xcecli resume` (LSF bresume): USUSP -> RUN (SIGCONT); releases the `user` hold of a
        PSUSP element, never a `system` hold (D-5). Raises Conflict when nothing resumes."""
        job, actor = self._begin_action(job_id, caller)
        els = self._elements(job, index)
        changes = self._changes(els, self._stim(m.Resume, "resume", actor))
        if not changes:
            if any(e.state is S.PSUSP and "system" in e.holds for e in els):
                raise Conflict(f"job {job_id} is held by the system, not by its user; an admin releases it with "
                               f"`xcecli release {job_id}`")
            raise Conflict(f"job {job_id}: nothing to resume (state {job.state()}); only stopped jobs resume")
        self._commit(changes)
        self.kick()
        return [e.ref for e, _, _ in changes]

    def release(self, job_id: int, index: int | None, caller: Caller) -> list[str]:
        """`xcecli release` (Slurm scontrol release): an admin releases the `system` hold of PSUSP
        elements (D-5: a user's resume never does), e.g. after declined dispatches (DISPATCH-2)
        or a config that refused the job (CFG-3). The job is merged again with the config in
        force first; if that still refuses it, the hold stays (Conflict naming why). Raises
        PermissionDenied for a non-admin, Conflict when nothing is held by the system."""
        job = self.job(job_id)
        require_admin(caller, "release a system hold", " (a hold of your own goes with `xcecli resume`)")
        els = [e for e in self._elements(job, index) if e.state is S.PSUSP and "system" in e.holds]
        if not els:
            raise Conflict(f"job {job_id}: nothing is held by the system")
        new, rr = dict(job.spec), None
        if all(e.state in PENDING for e in job.elements.values()):  # none started: merge it again now
            why, merged, rr = self._remerged(job)
            if why is not None:
                raise Conflict(f"job {job_id}: the config in force still refuses it: {why}")
            new = merged or new
        new.pop("config_refused", None)
        changes = self._changes(els, self._stim(m.Release, "release", f"admin:{caller.user}",
                                                reason="system hold released by an admin"))
        write, remember = self._respec([(job, new, rr)])
        self._commit(changes, write, memory=remember)
        self.kick()
        return [e.ref for e, _, _ in changes]

    def requeue(self, job_id: int, index: int | None, caller: Caller) -> list[str]:
        """`xcecli requeue` (LSF brequeue): a running element is killed and returns to PEND
        with the same ID and submit time; a finished one returns to PEND at once. It is merged
        again with the config in force (MERGE-1, CFG-3), as a pending job is when the config
        changes (unless other elements of its array still run: they share one set of values).
        Refused (Conflict) when its queue or its application profile no longer exists or the
        config in force refuses it; then nothing changes."""
        job, actor = self._begin_action(job_id, caller)
        if self.config.queue(job.queue) is None:
            raise Conflict(f"job {job_id}: its queue {job.queue!r} no longer exists; it cannot pend there again")
        app = job.spec.get("app")
        if app and app not in self.config.applications:
            raise Conflict(f"job {job_id}: its application profile {app!r} no longer exists; it cannot run again")
        els = self._elements(job, index)
        chosen = {e.index for e in els}
        specs: list[tuple[Job, dict, object]] = []
        if all(e.state not in ACTIVE for e in job.elements.values() if e.index not in chosen):
            why, new, rr = self._remerged(job, check_hosts=True)
            if why is not None:
                raise Conflict(f"job {job_id}: the config in force refuses it, so it was not requeued: {why}")
            if new is not None:
                specs.append((job, new, rr))
        changes = self._changes(els, self._stim(m.Requeue, "requeue", actor, user=caller.user))
        if not changes:
            raise Conflict(f"job {job_id} is pending; only running or finished jobs can be requeued")
        write, remember = self._respec(specs)
        self._commit(changes, write if specs else None, memory=remember)
        self.kick()
        return [e.ref for e, _, _ in changes]

    async def wait(self, job_id: int, timeout: float, index: int | None = None) -> Job:
        """Return the job once every element (or element `index`) has finished, or after
        `timeout` seconds. Raises NotFound for an unknown job or element."""
        job = self.job(job_id)
        if index is not None:
            e = self._elements(job, index)[0]
            if e.state in FINISHED:
                return job
        if job.finished():
            return job
        fut = asyncio.get_running_loop().create_future()
        entry = (fut, index)
        self._waiters.setdefault(job_id, []).append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            lst = self._waiters.get(job_id)
            if lst and entry in lst:
                lst.remove(entry)
        return job

    async def read_output(self, job_id: int, index: int | None, stream: str, max_bytes: int) -> tuple[Element, str | None]:
        """Output of an element so far (`xcecli peek`), read by the worker of its first host.
        `index` None means the job itself, or for an array its first running element."""
        job = self.job(job_id)
        if index is not None or not job.is_array:
            e = self._elements(job, index if index is not None else 0)[0]
        else:
            els = list(job.elements.values())
            e = next((x for x in els if x.state in ACTIVE), next((x for x in els if x.alloc), els[0]))
        w = self.workers.get(e.alloc[0][0]) if e.alloc else None
        if w is None:
            return e, None
        text = w.read_output(job.id, e.index, stream, max_bytes)
        if inspect.isawaitable(text):
            text = await text
        return e, text

    async def launch(self, job_id: int, index: int, host: str, argv: list[str], token: str | None,
                     caller: Caller | None, peer_uid: int | None = None) -> dict:
        """`xcecli launch HOST -- CMD` (LSF blaunch, JOB-7): start one task of running element
        (job_id, index) on `host`, one of the job's hosts, as the job's user, and return how
        it ended: {"host", "task_id", "exit_code", "signal", "reason", "output"} (output capped
        at 1 MB).

        Who may (D-7): the job's owner (`caller`, without a token), or a process inside the
        job, which proves it with the element's launch token (XCE_JOB_TOKEN) and, on the Unix
        socket, by running as the job's user (`peer_uid` from SO_PEERCRED). Cluster admins
        may not: a task runs as the job's user, so that would let an admin act as any user.
        Raises NotFound, PermissionDenied (a wrong, old or other job's token; another user),
        Conflict (not running, host not in the job)."""
        job = self.job(job_id)
        e = job.elements.get(index)
        if e is None:
            raise NotFound(f"job {job_id} has no element {index}")
        if token is not None:
            if not e.token_hash or not secrets.compare_digest(token_hash(token), e.token_hash):
                raise PermissionDenied(f"job {e.ref}: the launch token is not this job's (wrong, from an earlier run "
                                       f"of it, or another job's); `xcecli launch` works from inside the job")
            run_uid = job.spec.get("run_uid")
            if peer_uid is not None and peer_uid != (run_uid if run_uid is not None else os.geteuid()):
                raise PermissionDenied(f"job {e.ref} runs as {job.spec['run_as']}; its launch token works only for "
                                       f"processes of that user inside the job")
        elif caller is None or caller.user != job.user:
            raise PermissionDenied(f"job {e.ref} belongs to {job.user}; only its owner and its own tasks may launch "
                                   f"tasks in it")
        if e.state not in ACTIVE:
            raise Conflict(f"job {e.ref} is {e.state}; tasks can be launched only while it runs")
        hosts = [h for h, _ in e.alloc]
        if host not in hosts:
            raise Conflict(f"host {host!r} is not one of job {e.ref}'s hosts ({' '.join(hosts)})")
        w = self.workers.get(host)
        if w is None:
            raise Conflict(f"host {host} is not reachable now (its worker has not joined)")
        self._task_ids[(job_id, index)] = tid = self._task_ids.get((job_id, index), 0) + 1
        task = self._task_spec(e, tid, argv, {"XCE_TASK_ID": str(tid), "XCE_TASK_HOST": host})
        self.store_event_only(job_id, index, "LAUNCH", f"user:{job.user}" if caller is None else f"user:{caller.user}",
                              f"task {tid} on {host}: {' '.join(argv)[:200]}")
        result = await w.launch_task(task)
        if not isinstance(result, dict):
            raise Conflict(f"task {tid} on {host}: the host's worker did not answer")
        result.setdefault("host", host)
        result.setdefault("task_id", tid)
        return result

    def store_event_only(self, job_id: int, index: int | None, kind: str, actor: str, reason: str | None) -> None:
        """Record an event that is not a state transition (a task launch, a hook run)."""
        with self.store.tx():
            self.store.add_event(self.clock(), job_id, index, kind, None, None, actor, reason, self._sid(kind.lower()))

    def why(self, job_id: int, index: int | None) -> dict:
        """`xcecli why` (RES-6): the element's state, its structured pend reason and hint, and
        the lines about it in the last scheduler session's trace (D-4)."""
        job = self.job(job_id)
        if index is None:
            els = [e for e in job.elements.values() if e.state in (S.PEND, S.PSUSP)] or list(job.elements.values())
            e = els[0]
        else:
            e = self._elements(job, index)[0]
        pr = e.pend_reason
        ref = e.ref
        trace: list[str] = []
        for lines in reversed(self.traces):  # the newest session that said something about it
            trace = [t for t in lines if t.startswith(f"{ref}:")]
            if trace:
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
                "hint": pr.hint if pr else None, "trace": trace}

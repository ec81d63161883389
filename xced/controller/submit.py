"""Submits (JOB-1, JOB-4, JOB-5, MERGE-1, MERGE-2, D-3): the checks of a job's own values, the
one merge with its profile and queue, the spec it is recorded with.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread and changes state only through the shell (`_commit`).
"""

from __future__ import annotations

import os
import sys

from xced.api.idempotency import KEEP_S
from xced.constants import DEFAULT_UMASK
from xced.api.errors import InvalidRequest
from xced.controller import machine as m
from xced.model import deps
from xced.model.jobs import ArraySpecError, JobState, parse_job_name
from xced.model.spec import EffectiveJob, JobSpec, OwnValues, env_record, script_record, to_record
from xced.model.state import Element, Job
from xced.policy.projects import least_need, never_fits, supply_totals
from xced.policy.rbac import Caller
from xced.merge import Effective, JobValues, MergeError, memory_over_hosts, merge_job
from xced.model.units import MAX_ENV_VARS, MAX_EXDATA_DEPTH, MAX_MEMORY_MB, MAX_RUN_LIMIT_S, MAX_SLOTS
from xced.resreq import ResReqError, parse_job, render, reserve_terms, to_json
from xced.scheduler.placement import PlacementRequest, never_satisfiable
from xced.scheduler.session import request_key

S = JobState
#: XCE_TEST_FAULT's value that ends xced right after a submit's commit (xced.daemon.TEST_FAULTS)
FAULT_EXIT_AFTER_SUBMIT = "exit-after-commit:submit"
#: the exit status of a daemon the fault ended (so its test can tell it from a crash)
FAULT_EXIT_CODE = 86
#: idempotency keys older than KEEP_S are deleted at most this often (s), at a submit
KEY_PURGE_EVERY_S = 3600.0


def submit_answer(job: Job) -> dict:
    """What a submit answers (SubmitResponse's fields, CLI-2): the one place they are made,
    for the route and for the answer kept with an idempotency key (JOB-10)."""
    return {"job_id": job.id, "name": job.name, "queue": job.queue, "project": job.spec.project,
            "array_size": len(job.elements) if job.is_array else 0, "app": job.spec.app or None,
            "warnings": list(job.effective.warnings)}


def effective_resreq(texts: list[str]):
    """The job's effective requirement: its `-R` strings parsed and merged as LSF merges
    them (RES-1), held to the request caps (D-8, xced.resreq.parse_job). Raises ResReqError."""
    return parse_job(texts)


#: the job's own limits as exdata's `limits` carries them (MERGE-4): name -> (lowest, highest),
#: the bounds of SubmitRequest's fields of the same names
_EXDATA_LIMITS = {"ntasks_min": (1, MAX_SLOTS), "ntasks_max": (1, MAX_SLOTS), "run_limit_s": (1, MAX_RUN_LIMIT_S),
                  "memory_limit_mb": (1, MAX_MEMORY_MB)}
def _depth(value: object) -> int:
    """How deep JSON `value` nests (a scalar is 0, `{}` and `[]` are 1), without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict):
            v = list(v.values())
        elif not isinstance(v, list):
            continue
        deepest = max(deepest, d)
        if d > MAX_EXDATA_DEPTH:
            break
        todo.extend((x, d + 1) for x in v)
    return deepest


def _check_exdata(exdata: object) -> None:
    """exdata (MERGE-4): an object nesting at most MAX_EXDATA_DEPTH levels whose `limits`,
    when given, holds only the job's limits as positive integers (or null) within the
    bounds of the fields of the same names: `{"limits": {"run_limit_s": -5}}` was accepted
    and dropped. The merge then rewrites env, limits and app_params and keeps meta.
    Raises InvalidRequest naming the value and what would be valid."""
    if exdata is None:
        return
    if _depth(exdata) > MAX_EXDATA_DEPTH:
        raise InvalidRequest(f"exdata nests more than {MAX_EXDATA_DEPTH} levels deep; keep it at most "
                             f"{MAX_EXDATA_DEPTH}", field="exdata")
    limits = exdata.get("limits") if isinstance(exdata, dict) else None
    if limits is None:
        return
    valid = ", ".join(_EXDATA_LIMITS)
    if not isinstance(limits, dict):
        raise InvalidRequest(f"exdata.limits must be an object of {valid} (integers or null), got "
                             f"{type(limits).__name__}", field="exdata")
    for name, value in limits.items():
        if name not in _EXDATA_LIMITS:
            raise InvalidRequest(f"exdata.limits: unknown key {name!r}; valid keys: {valid}", field="exdata")
        low, high = _EXDATA_LIMITS[name]
        if value is not None and (type(value) is not int or not low <= value <= high):
            raise InvalidRequest(f"exdata.limits.{name} {value!r}: must be an integer from {low} to {high}, "
                                 f"or null", field="exdata")


def _check_cwd(cwd: str) -> None:
    """The working directory must be an absolute path of a directory that exists. The
    submitter is on this host (the Unix socket is local, and nothing is taken over TCP
    until peers authenticate, D-6), so it is checked here: LSF's bsub records the
    directory it runs in, which exists; a job sent with one that does not would only end
    EXIT at start with "cannot change directory". Raises InvalidRequest."""
    if not os.path.isabs(cwd):
        raise InvalidRequest(f"cwd {cwd!r} must be an absolute path", field="cwd")
    if not os.path.isdir(cwd):
        raise InvalidRequest(f"cwd {cwd!r} is not a directory on this host; the job starts in its working "
                             f"directory: give an existing absolute directory", field="cwd")


def _check_utf8(req: dict) -> None:
    """Every string of the request is text that UTF-8 can encode: a byte a shell passed that
    is not UTF-8 (`echo $'caf\\xe9'`) arrives as a lone surrogate, which no listing, store
    or process environment could carry again, so the submit is refused naming the field (D-8).
    Walks nested values without recursion. Raises InvalidRequest.

    First one C-speed pass over the whole request: orjson writes UTF-8 and refuses a lone
    surrogate (a fifth of the cost of the json module's pass on a submit with the
    submitter's whole environment, issue 17 part 5, CLI-7); the walk, which names the field,
    runs only when that pass fails or the request holds what orjson cannot write (a key
    that is not a string, an integer over 64 bits)."""
    import orjson  # the daemon's (the client never checks this way)

    try:
        orjson.dumps(req)
        return
    except (TypeError, ValueError):
        pass
    stack: list[tuple[str, object]] = [(k, v) for k, v in req.items()]
    while stack:
        where, v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as e:
                bad = v[e.start]
                shown = f"\\x{ord(bad) - 0xDC00:02x}" if 0xDC80 <= ord(bad) <= 0xDCFF else f"\\u{ord(bad):04x}"
                raise InvalidRequest(f"{where}: the text holds {shown}, which is not UTF-8 (at character {e.start + 1});"
                                     f" XCE keeps commands, names, paths and environments as UTF-8 text: re-encode "
                                     f"or rename it", field=where.split("[", 1)[0].split(".", 1)[0]) from None
        elif isinstance(v, dict):
            for k, x in v.items():
                stack.append((f"{where}.{k}" if isinstance(k, str) and k.isascii() else f"{where} key", k))
                stack.append((f"{where}.{k}" if isinstance(k, str) and k.isascii() else f"{where}[...]", x))
        elif isinstance(v, (list, tuple)):
            stack.extend((f"{where}[{i}]", x) for i, x in enumerate(v))


def _check_own_values(req: dict) -> None:
    """The job's own values, sanity only (policy is the merge's, MERGE-1, DESIGN rule 5):
    task counts, limits, names and values without NUL bytes, exdata's shape
    (`_check_exdata`). Raises InvalidRequest."""
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
        _check_names(what, mapping)
    if any("\0" in a for a in req.get("argv") or []) or "\0" in (req.get("cwd") or "") \
            or "\0" in (req.get("command_line") or ""):
        raise InvalidRequest("the command or the working directory contains a NUL byte", field="argv")
    for fld, opt in (("stdout", "-o"), ("stderr", "-e")):
        if "\0" in (req.get(fld) or ""):
            raise InvalidRequest(f"{opt} {req[fld]!r}: a file name cannot contain a NUL byte", field=fld)
    for fld, opt in (("stdout", "-oo"), ("stderr", "-eo")):
        if req.get(fld + "_overwrite") and req.get(fld) is None:
            raise InvalidRequest(f"{fld}_overwrite (-{opt[1]}o) needs {fld}, the file to overwrite; give {opt} FILE",
                                 field=fld + "_overwrite")
    if not (req.get("argv") or [""])[0]:
        raise InvalidRequest("the command is empty: argv[0] must name a program or script", field="argv")
    for fld, opt in (("name", "-J"), ("queue", "-q"), ("stdout", "-o"), ("stderr", "-e"), ("pre_exec", "-E"),
                     ("post_exec", "-Ep")):
        v = req.get(fld)
        if v is not None and not v.strip():
            raise InvalidRequest(f"{opt} {v!r}: the value is empty; leave the field out for the default", field=fld)
        if v is not None and "\0" in v:
            raise InvalidRequest(f"{opt}: the value contains a NUL byte", field=fld)
    _check_exdata(req.get("exdata"))


def _check_names(what: str, mapping: dict) -> None:
    """`--env` or `--app-param` NAME=VALUE pairs: names non-empty, without '=' for --env, and
    names and values without NUL bytes (a process environment cannot hold them). Raises
    InvalidRequest."""
    for k, v in mapping.items():
        if not k or "\0" in k or "\0" in v or (what == "--env" and "=" in k):
            raise InvalidRequest(f"{what} {k!r}: names must be non-empty without '=' and names and values "
                                 f"without NUL bytes", field="env" if what == "--env" else "app_params")


def _laid_over(base: dict[str, str], own: dict[str, str] | None) -> dict[str, str]:
    """A pack job's environment (CLI-7): the pack's `base` with the job's own --env `own`
    laid over it; `base` itself (shared, not copied) when the job adds nothing. Raises
    InvalidRequest when the two hold more than MAX_ENV_VARS variables together, the bound
    of a single submit's environment (D-8)."""
    if not own:
        return base
    env = {**base, **own}
    if len(env) > MAX_ENV_VARS:
        raise InvalidRequest(f"env: the pack's environment with this job's --env holds {len(env)} variables, more "
                             f"than the {MAX_ENV_VARS} a job's environment may hold (MAX_ENV_VARS, D-8)", field="env")
    return env


def _submit_resreq(texts: list[str], nmin: int | None, nmax: int | None):
    """The job's -R strings merged (RES-1) and its task range: a compound request's counts
    say how many tasks (LSF), and a -n that contradicts them is refused. Returns (resreq,
    nmin, nmax). Raises InvalidRequest with the column of a parse error."""
    try:
        resreq = effective_resreq(texts)
    except ResReqError as e:
        raise InvalidRequest(f"-R: {e}", field="resreq") from None
    if resreq.kind != "compound":
        return resreq, nmin, nmax
    if any(p.resreq.span is not None and p.resreq.span.hosts == 1 for p in resreq.parts):
        raise InvalidRequest("-R: span[hosts=1] is not allowed inside a compound request (as in LSF): the parts "
                             "of a compound job are placed separately; use a simple request to keep every task "
                             "on one host", field="resreq")
    total = sum(p.count or 0 for p in resreq.parts)
    if (nmin is not None or nmax is not None) and not (nmin or 1) <= total <= (nmax or nmin or 1):
        asked = str(nmin) if nmax in (None, nmin) else f"{nmin},{nmax}"
        raise InvalidRequest(f"-n {asked} does not match the compound -R, which asks for {total} tasks",
                             field="ntasks_min")
    return resreq, total, total


def _job_name(text: str | None, max_array_size: int):
    """(name, ArraySpec or None) of a -J value (JOB-4), an array of at most the cluster's
    max_array_size elements (D-8). Raises InvalidRequest."""
    if text is None:
        return None, None
    try:
        return parse_job_name(text, max_array_size)
    except ArraySpecError as e:
        raise InvalidRequest(str(e), field="name") from None


def _profile_values(profile) -> dict | None:
    """The values a profile sets that a submit option also sets, for the dry run: the client
    finds a preset's redundant values with them (MERGE-1, PRE-1)."""
    if profile is None:
        return None
    lim = profile.limits
    return {"name": profile.name, "run_limit_s": lim.run_limit_s, "memory_limit_mb": lim.memory_limit_mb,
            "task_min": lim.task_min, "task_max": lim.task_max, "params": dict(profile.params),
            "env": dict(profile.env)}


def _dry_run(eff, spec: JobSpec, qname: str, app: str, name, array_size: int, profile=None) -> dict:
    """CLI-2 --dry-run: the effective job as the merge made it, recorded nowhere; `profile`
    holds what the job's profile sets (`_profile_values`)."""
    resreq = eff.resreq
    warnings = list(eff.warnings)
    groups = [g for alt in resreq.rusage for g in alt] + [g for p in resreq.parts for alt in p.resreq.rusage for g in alt]
    if any(g.duration_s is not None or g.decay is not None for g in groups):
        warnings.append("rusage duration and decay are accepted, but this version holds every "
                        "reservation for the life of the job")
    return {**eff.to_json(), "queue": qname, "app": app or None, "ntasks_min": eff.ntasks_min,
            "ntasks_max": eff.ntasks_max, "run_limit_s": eff.run_limit_s, "memory_limit_mb": eff.memory_limit_mb,
            "name": name, "array_size": array_size, "run_as": spec.run_as, "resreq": to_json(resreq),
            "resreq_text": render(resreq),
            "reserve": [r.to_json() for r in reserve_terms(resreq, eff.ntasks_min, eff.ntasks_max)],
            "dependency": spec.dependency, "project": spec.project,
            "auth_basis": spec.auth_basis, "profile": _profile_values(profile), "_warnings": warnings}


class SubmitMixin:
    """Submits (JOB-1, JOB-4, JOB-5, MERGE-1, MERGE-2, D-3): a part of the Controller."""

    #: the test fault in force (xced.daemon reads XCE_TEST_FAULT, in mode: test only): with
    #: FAULT_EXIT_AFTER_SUBMIT the process ends right after a submit's commit, before its answer
    test_fault: str | None = None
    #: when keys older than KEEP_S were last deleted (the controller's clock; -inf: not yet)
    _keys_purged_at = float("-inf")

    def submit(self, req: dict, caller: Caller, *, dry_run: bool = False, project: str | None = None,
               basis: str | None = None, idempotency: tuple[str, str] | None = None):
        """Validate and record a job (JOB-1, JOB-4, MERGE-2 ceilings); acknowledged after commit (D-3).

        `req` holds SubmitRequest's fields. `project` and `basis` are what the API server
        resolved and let the submit in on (SUBMIT-1: "member", "role:NAME@/scope", "open"),
        recorded on the job. Without a basis the submit comes through the controller's client
        library, a test tool: recorded with basis "direct" (its `req["project"]` taken as
        given) and refused in production mode (PermissionDenied). Returns the Job; with `dry_run`, records nothing
        and returns the effective values instead (CLI-2 --dry-run): {"queue", "ntasks_min",
        "ntasks_max", "run_limit_s", "memory_limit_mb", "name", "array_size", "run_as",
        "resreq" (the documented JSON form), "resreq_text"}. Raises InvalidRequest naming the
        field and what would be valid.

        `idempotency` is (key, body digest) of the submit's Idempotency-Key (JOB-10), recorded
        for `caller.user` in the transaction that inserts the job; the caller has asked
        `replay_submit` first, so the key is new.
        """
        name, qname, queue, app, profile, eff, spec, array, dependency, env_text, job_env = \
            self._check_submit(req, caller, project, basis)
        indices = array.indices if array else (0,)
        if dry_run:
            return _dry_run(eff, spec, qname, app, name, len(indices) if array else 0, profile)
        job = self._record_submit(name, caller, qname, spec, self._effective(eff, profile), indices, eff.resreq,
                                  dependency, env=(env_text, job_env), idempotency=idempotency,
                                  script=req.get("script"), hold=bool(req.get("hold")))
        if not req.get("hold"):  # a held job waits for its resume, which asks for a session
            self._pend_or_kick(job, qname, request_key(PlacementRequest(eff.ntasks_min, eff.ntasks_max, eff.resreq,
                                                                        queue.host_limit, spec.exclusive)))
        return job

    def _check_submit(self, req: dict, caller: Caller, project: str | None, basis: str | None,
                      base_env: dict[str, str] | None = None, base_record: tuple[str, str] | None = None) -> tuple:
        """Every check of a submit (the one place: a single submit and each job of a pack call
        it) and what it makes: (name, queue name, queue, app, profile, the merge's Effective,
        JobSpec, ArraySpec or None, parsed dependency or None, environment text, environment).
        Records nothing. Raises InvalidRequest (or PermissionDenied) naming the field.

        `base_env` (a pack's environment, CLI-7; checked by the caller) is the environment
        `req["env"]` (the job's own --env) is laid over; `base_record` is its env_record,
        made once for the pack and used for each job that adds nothing to it."""
        _check_utf8(req)  # first: every message below may quote the request's text
        if req.get("script") is not None and base_env is not None:
            raise InvalidRequest("a job of a pack cannot carry a script read from standard input; give each line "
                                 "the script's path", field="script")
        if basis is None:
            if self.config.settings.mode != "test":
                from xced.api.errors import PermissionDenied

                raise PermissionDenied("a submit straight to the controller (basis direct) is a test tool: in "
                                       "production mode every submit goes through the API server, which checks "
                                       "its project (SUBMIT-1)")
            project, basis = req.get("project"), "direct"
        qname, queue, app, profile = self._submit_target(req)
        own_hooks = {k: req.get(k) for k in ("pre_exec", "post_exec") if req.get(k)}
        if own_hooks and profile is not None and not profile.allow_job_pre_post_exec:
            raise InvalidRequest(f"profile {app} does not allow a job's own pre/post-exec (-E/-Ep): it runs its "
                                 f"own hooks around every job (JOB-7)", field="pre_exec")
        _check_own_values(req)
        texts = list(req.get("resreq") or [])
        resreq, nmin, nmax = _submit_resreq(texts, req.get("ntasks_min"), req.get("ntasks_max"))
        if any("order" in t for t in texts):  # RES-1: order[] keys name what hosts have
            self._check_order_names(texts)
        job_values = OwnValues(nmin, nmax if nmax is not None else nmin, req.get("run_limit_s"),
                               req.get("memory_limit_mb"), dict(req.get("app_params") or {}), req.get("exdata"))
        job_env = dict(req.get("env") or {}) if base_env is None else _laid_over(base_env, req.get("env"))
        try:
            eff = self._merge(resreq, job_values, job_env, profile, queue)
        except MergeError as e:
            raise InvalidRequest(str(e), field="app") from None
        too_big = memory_over_hosts(eff.memory_limit_mb, eff.origins.get("memory_limit"),
                                    ((h.name, h.memory_mb) for h in self.hosts.values()))
        if too_big is not None:  # MERGE-2; at submit only: a re-merge never refuses a pending job for it
            raise InvalidRequest(too_big, field="memory_limit_mb")
        self._check_can_start(eff.ntasks_min, eff.ntasks_max, eff.resreq, queue.host_limit)
        self._check_caps(project, caller.user, eff.ntasks_min, eff.resreq)
        _check_cwd(req.get("cwd") or "")
        name, array = _job_name(req.get("name"), self.config.settings.max_array_size)
        # JOB-5 (LSF bsub -w): parsed, every job it names must exist, stored in canonical form
        dependency = self._check_dependency(req["dependency"]) if req.get("dependency") is not None else None
        digest, env_text = base_record if base_record is not None and job_env is base_env else env_record(job_env)
        spec = self._spec(req, caller, sys.intern(digest), texts, app, own_hooks, job_values, array, dependency, project, basis)
        return name, qname, queue, app, profile, eff, spec, array, dependency, env_text, job_env

    def _submit_target(self, req: dict):
        """The queue and the application profile of a submit (PROF-1, PROF-2: app None means the
        cluster's default_application, "" means none): (queue name, queue, app, profile)."""
        cfg = self.config
        qname = req.get("queue") or cfg.default_queue
        queue = cfg.queue(qname)
        if queue is None:
            raise InvalidRequest(f"unknown queue {qname!r}; queues: {', '.join(q.name for q in cfg.queues)}",
                                 field="queue")
        app = req.get("app")
        if app is None:
            app = cfg.settings.default_application or ""
        profile = None
        if app:
            profile = cfg.applications.get(app)
            if profile is None:
                raise InvalidRequest(f"unknown application profile {app!r}; profiles: "
                                     f"{', '.join(sorted(cfg.applications))} (xcecli apps lists them)", field="app")
        return qname, queue, app, profile

    def _never_starts(self, nmin: int, nmax: int, resreq, host_limit: int | None) -> tuple[str, str] | None:
        """MERGE-2, the one never-satisfiable check (at submit, at re-merge, at requeue): why no
        host of the cluster could ever run the request, even idle, as (message, field), or
        None (a request that is only full now pends)."""
        total_slots = sum(h.slots for h in self.hosts.values())
        if nmin > total_slots:
            return (f"-n {nmin} can never be satisfied: the cluster has {total_slots} slots in all"
                    + ("" if self.hosts else " (no host has joined yet)"), "ntasks_min")
        if not resreq.is_empty or host_limit is not None:  # a bare -n was checked just above
            why = never_satisfiable(PlacementRequest(nmin, nmax, resreq, host_limit),
                                    self.host_supplies(idle=True))
            if why:
                return f"the job can never start: {why}", "resreq"
        return None

    def _check_order_names(self, texts: list[str]) -> None:
        """Every ``order[]`` key of the job's -R strings names something a host has, as a
        ``select`` on a resource no host has is refused (RES-1, RES-7): slots, maxslots, mem,
        maxmem, LSF's load indices (xced.model.load: LSF knows them whatever the hosts
        report), a numeric resource of some host (``gpu``, and ``maxgpu``) or a tag. LSF's
        order string takes "any built-in or external load index or static resource" (LSF
        6.2 Administration Guide p. 268; docs/lsf-behaviour.md section 1). Raises
        InvalidRequest naming the -R string, the key's column and what would be valid."""
        from xced.model.load import LOAD_INDICES
        from xced.resreq import order_keys_at

        known = {"slots", "maxslots", "mem", "maxmem", *LOAD_INDICES}
        for h in self.hosts.values():
            known.update(h.resources)
            known.update("max" + r for r in h.resources)
            known.update(h.tags)
        for text in texts:
            if not text.strip():
                continue
            for name, column in order_keys_at(text):
                if name in known:
                    continue
                others = sorted(known - {"slots", "maxslots", "mem", "maxmem", *LOAD_INDICES})
                err = ResReqError(text, column, "a resource to order by", reason=(
                    f"order[{name}]: no host has resource {name!r} to order by; order by slots, maxslots, mem, "
                    f"maxmem, a load index ({', '.join(n for n in LOAD_INDICES if n != 'maxmem')})"
                    + (f" or a host resource ({', '.join(others[:20])})" if others else "")))
                raise InvalidRequest(f"-R: {err}", field="resreq")

    def _check_can_start(self, nmin: int, nmax: int, resreq, host_limit: int | None) -> None:
        """A submit no host could ever run is refused (MERGE-2). Raises InvalidRequest."""
        never = self._never_starts(nmin, nmax, resreq, host_limit)
        if never is not None:
            raise InvalidRequest(never[0], field=never[1])

    def _check_caps(self, project: str | None, user: str, nmin: int, resreq=None) -> None:
        """A submit no cap of its project could ever hold (more slots, memory or resources than
        its quota, its member_quota or its share of the whole cluster with every host up) is
        refused, as LSF's bsub refuses a job over a limit it could never meet (PRJ-7). Raises
        InvalidRequest."""
        if self.config.projects.open_mode or project is None:
            return
        why = never_fits(self.config.projects, supply_totals(self.host_supplies(idle=True)), project, user,
                         least_need(nmin, resreq))
        if why is not None:
            raise InvalidRequest(why, field="ntasks_min")

    def _spec(self, req, caller, env_digest, texts, app, own_hooks, job_values, array, dependency, project,
              basis) -> JobSpec:
        """What the user submitted: its own values as given (job_values, for a later
        re-merge), and who it runs as (D-6: the submitting user when the daemon is root and
        the user is real, else the daemon's user)."""
        if os.geteuid() == 0 and not caller.asserted and caller.uid is not None:
            run_as, run_uid, run_gid = caller.user, caller.uid, caller.gid
        else:
            run_as, run_uid, run_gid = self.daemon_user, None, None
        return JobSpec(
            tuple(req["argv"]), req.get("cwd") or "", env_digest,  # the environment is the store's
            req.get("stdout"), req.get("stderr"), array.text if array else None, array.limit if array else None,
            tuple(texts), app, own_hooks, job_values, run_as, run_uid, run_gid, caller.asserted,
            deps.render(dependency) if dependency is not None else None,
            req["umask"] if req.get("umask") is not None else DEFAULT_UMASK, project, basis,
            script_record(req["script"])[0] if req.get("script") is not None else "",
            bool(req.get("stdout_overwrite")), bool(req.get("stderr_overwrite")), bool(req.get("exclusive")),
            req.get("command_line"))

    def _effective(self, eff: Effective, profile) -> EffectiveJob:
        """The one place a job's effective values (the merge's result, MERGE-1) are made, at
        submit and at every re-merge alike, with the hashes of the profile and of the config
        they came from (DISPATCH-1, CFG-3)."""
        # the dicts are the merge's own, not copies (10,000 pending jobs); the job's environment
        # is left out of exdata: the store keeps it once (xced.controller.envs)
        # either: the rest of exdata (env, limits, app_params) is the effective values' own
        # (MERGE-4), so a job keeps only the `meta` its client sent, untouched
        exdata = eff.exdata
        if isinstance(exdata, dict):
            exdata = {"meta": exdata["meta"]} if "meta" in exdata else None
        return EffectiveJob(eff.ntasks_min, eff.ntasks_max, eff.run_limit_s, eff.memory_limit_mb,
                            eff.app_params, exdata, render(eff.resreq), eff.profile_env,
                            eff.export_env, tuple(eff.warnings),
                            profile.content_hash() if profile is not None else None, self._config_hash)

    def _record_submit(self, name, caller: Caller, qname: str, spec: JobSpec, effective: EffectiveJob, indices,
                       resreq, dependency, env: tuple[str, dict] = ("{}", {}),
                       idempotency: tuple[str, str] | None = None, script: str | None = None,
                       hold: bool = False) -> Job:
        """Commit the job durably (D-3: acknowledged only after this), with its idempotency key
        when it has one (JOB-10: in the same transaction, so a key exists exactly when its job
        does), then keep it in memory. `env`: the environment's canonical text (stored once per
        distinct environment under spec.env_digest) and its dict (cached for the dispatch soon
        after). `script`: the job's script text (JOB-12), kept under spec.script_digest. `hold`
        (LSF bsub -H): every element is held by its user (PSUSP, D-5) in the same transaction,
        through the one transition table (a Stop stimulus on the new PEND elements), so a
        held job is never seen pending, and a failed commit leaves nothing."""
        now = self.clock()
        jid = self.store.allocate_job_id()
        job = Job(jid, name, caller.user, qname, now, spec, effective)
        job.elements = {i: Element(job, i, S.PEND) for i in indices}
        held = self._changes(list(job.elements.values()), self._stim(m.Stop, "submit", f"user:{caller.user}")) \
            if hold else []
        with self.store.tx(durable=True):
            self.store.insert_job(jid, name, caller.user, qname, now, to_record(spec, effective), indices, "PEND")
            if spec.env_digest not in self._envs:  # one in the cache is in the store (xced.controller.envs)
                self.store.put_env(spec.env_digest, env[0])
            if script is not None:  # JOB-12: kept once per distinct script, beside the environments
                self.store.put_env(*script_record(script))
            self.store.add_event(now, jid, None, "SUBMIT", None, "PEND", f"user:{caller.user}",
                                 f"{len(indices)} elements" if spec.is_array else None, self._sid("submit"))
            if held:  # LSF bsub -H: held in the submit's own transaction (the shell's writes, _commit)
                from xced.controller.controller import write_changes

                write_changes(self.store, held)
            if idempotency is not None:
                self.store.add_idempotency_key(caller.user, idempotency[0], jid, idempotency[1], now,
                                               submit_answer(job))
                if now - self._keys_purged_at >= KEY_PURGE_EVERY_S:  # cheap: by the time index, hourly
                    self.store.purge_idempotency_keys(now - KEEP_S)
                    self._keys_purged_at = now
        if self.test_fault == FAULT_EXIT_AFTER_SUBMIT:
            os._exit(FAULT_EXIT_CODE)  # the test's moment: committed, never answered
        self._remember_env(spec.env_digest, env[1])
        job.resreq = resreq
        job.dependency = dependency
        job.unfinished = len(indices)
        self.jobs[jid] = job
        self.active[jid] = job
        for e, _, out in held:  # only after the commit, as the shell does (DESIGN rule 2)
            self._apply_memory(e, out)
        for e, _, out in held:
            for eff in out.effects:
                self._effect(e, eff)
        return job

    def replay_submit(self, user: str, key: str, digest: str) -> dict | None:
        """JOB-10: the answer (SubmitResponse's fields) of the job `user` submitted with
        idempotency key `key` before, when `digest` (xced.api.idempotency.body_digest) is that
        submit's too; None when `user` has no such key (another user's same key is another
        key). Raises Conflict naming the job when the key made a job from another body."""
        found = self.store.idempotency_key(user, key)
        if found is None:
            return None
        job_id, first_digest, _t, answer = found
        if first_digest != digest:
            from xced.api.errors import Conflict

            raise Conflict(f"Idempotency-Key {key!r} was used already, for job {job_id}, with a different request; "
                           f"resend job {job_id}'s request unchanged to get its answer again, or make a new key "
                           f"for a new job", field="Idempotency-Key")
        return answer

    def purge_idempotency_keys(self) -> int:
        """Delete the idempotency keys older than KEEP_S (24 h) by the controller's clock, as
        xced does at start (and hourly at a submit); how many went. Raises StoreBusy or
        StoreUnavailable."""
        now = self.clock()
        with self.store.tx():
            n = self.store.purge_idempotency_keys(now - KEEP_S)
        self._keys_purged_at = now
        return n

    def _pend_or_kick(self, job: Job, qname: str, request: tuple) -> None:
        """A new job's first pend reason, or a session. A job waiting for its -w dependency
        needs none (JOB-5: snapshot() leaves it out; the job end that can meet it runs one);
        nor does one the last session's findings still decide (xced.scheduler.shortcut)."""
        if job.dependency is not None:
            waiting = self._dependency_reason(job, self._dependency_lookup({}))
            if waiting is not None:
                self._commit(self._changes(list(job.elements.values()), self._stim(
                    m.Pending, "submit", "system", reason=waiting)))
                return
        known = (self.shortcut.reason_for(qname, request, self.config.queue(qname).backfill)
                 if not self._session_scheduled else None)
        if known is not None:
            self._commit(self._changes(list(job.elements.values()), self._stim(
                m.Pending, "submit", "scheduler", reason=known)))
            return
        self.kick()

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
            if job is None and (job := self._recall_get(jid)) is not None:
                self._revive(job)  # a purged job the route recalled: named by -w, it is kept
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
                                     f"{job.spec.array_spec}", field="dependency")
        return expr

    @staticmethod
    def _merge(resreq, values: OwnValues, env: dict, profile, queue) -> Effective:
        """The one merge (MERGE-1) of the job's own values as submitted with its profile and
        queue. Raises MergeError."""
        return merge_job(JobValues(resreq, values.ntasks_min, values.ntasks_max, values.run_limit_s,
                                   values.memory_limit_mb, env, dict(values.app_params), values.exdata),
                         profile, queue)

"""Job routes: submit, list, show, events, output, wait, kill/stop/resume/requeue/release (CLI-2, CLI-3).

What each needs (RBAC-1, declared with xced.server.auth.requires): submitting `queue:submit`
(the project's `project:submit` is the policy's `submit_project`, SUBMIT-1); reading
summaries `cluster:view` (anyone may list job summaries, as LSF's bjobs and Slurm's squeue
show them); a job's environment and output `job:view` over its project (D-7); kill
`job:kill`, stop/resume `job:modify`, requeue `job:requeue` (the owner, or who holds it over
the job's project, RBAC-3); releasing a system hold `cluster:admin` (D-5: the system's holds
are the admins'); a task launch its job's token or its owner (TOKEN_OR_OWNER, D-7)."""

from __future__ import annotations


from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import PlainTextResponse
from starlette.convertors import IntegerConvertor, register_url_convertor

from xced.api.errors import InvalidRequest, NotFound, XceError
from xced.api.models import (
    ActionRefusal,
    ActionResult,
    DryRun,
    EventList,
    JobAction,
    JobList,
    JobOut,
    JobTable,
    KillManyRequest,
    KillManyResult,
    KillOptions,
    KillRequest,
    LaunchRequest,
    LaunchResult,
    PackRequest,
    PackResponse,
    RequeueRequest,
    SubmitRequest,
    SubmitResponse,
    WhyOut,
)
from xced.model.jobs import JobState, format_refs
from xced.policy.rbac import Caller, check_path
from xced.server.busy import StoreBusyRetryRoute
from xced.server.auth import TOKEN_OR_OWNER, caller_of, launch_peer, requires
from xced.server.convert import event_dict, job_dict, json_response
from xced.server.responses import BODY, JOB, errors

class _JobIdConvertor(IntegerConvertor):
    """A job ID in a path: at most 18 digits (job IDs are 64-bit), so that a path with a
    longer number is an unknown route (404) rather than a 500 from Python's limit on
    converting thousands of digits (D-8)."""

    regex = "[0-9]{1,18}"


register_url_convertor("jobid", _JobIdConvertor())

router = APIRouter(route_class=StoreBusyRetryRoute)

def _ctl(request: Request):
    return request.app.state.controller


#: the OpenAPI description of the submit's Idempotency-Key header (JOB-10)
_IDEMPOTENCY_DOC = {"parameters": [{
    "name": "Idempotency-Key", "in": "header", "required": False,
    "description": "a key the client makes for this submit and sends with every retry of it: a retry with the "
                   "same key and body gets the first job's answer and creates nothing (keys are kept 24 h, per "
                   "user); the same key with another body is 409 naming the job, a malformed key 422",
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{8,128}$"}}]}


@router.post("/jobs", response_model=SubmitResponse, responses=errors(BODY, 409), openapi_extra=_IDEMPOTENCY_DOC)
async def submit(body: SubmitRequest, request: Request,
                 caller: Caller = Depends(requires("queue:submit"))) -> Response:
    """A submit (CLI-2). With an `Idempotency-Key` header (JOB-10, xced.api.idempotency) a
    retry of a submit the caller made already gets that job's answer and records nothing;
    the same key with another body is 409 naming the job, a malformed key 422."""
    from xced.api.idempotency import HEADER, body_digest, check_key
    from xced.controller.submit import submit_answer

    ctl = _ctl(request)
    # -w naming jobs that left memory: read back first (the one await, before the key's
    # look-up, which must not be separated from the insert by an await)
    await ctl.recall_refs(body.dependency)
    req = body.model_dump()
    idem = None
    keys = request.headers.getlist(HEADER)
    if len(keys) > 1:
        raise InvalidRequest(f"{len(keys)} {HEADER} headers: a submit carries one key", field=HEADER)
    if keys:
        # replay_submit and submit run with no await between them: on the event loop the look-up
        # and the insert of the key are one step, so two tries at once still make one job
        idem = (check_key(keys[0]), body_digest(req))
        answer = ctl.replay_submit(caller.user, *idem)
        if answer is not None:
            return json_response(SubmitResponse(**answer).model_dump())  # a key of an older version: filled in
    project, basis = ctl.policy.submit_project(caller, body.project)  # SUBMIT-1: the API server decides
    job = ctl.submit(req, caller, project=project, basis=basis, idempotency=idem)
    # submit_answer makes every SubmitResponse field: sent as it is, not built into the model and
    # validated and dumped again by FastAPI (issue 17 part 5)
    return json_response(submit_answer(job))


#: the OpenAPI description of a pack's Idempotency-Key header (JOB-10, CLI-7)
_PACK_IDEMPOTENCY_DOC = {"parameters": [{
    **_IDEMPOTENCY_DOC["parameters"][0],
    "description": "one key for the whole pack, made by the client and sent with every retry of it: a retry with "
                   "the same key and body gets the first answer (the same job IDs) and creates nothing (keys are "
                   "kept 24 h, per user); the same key with another body is 409, a malformed key 422"}]}


@router.post("/jobs/pack", response_model=PackResponse, responses=errors(BODY, 409),
             openapi_extra=_PACK_IDEMPOTENCY_DOC)
async def submit_pack(body: PackRequest, request: Request,
                      caller: Caller = Depends(requires("queue:submit"))) -> Response:
    """A pack submit (CLI-7, LSF `bsub -pack`): every job checked as a single submit is, all
    recorded in one transaction or none (xced.controller.pack). A job refused refuses the
    pack: the error of that job's submit, its message prefixed "job I of the pack: ", its
    field `jobs.<i>[.<field>]`. One `Idempotency-Key` for the whole pack (JOB-10), as for
    POST /jobs. Answers PackResponse: each job's SubmitResponse, in request order."""
    from xced.api.idempotency import HEADER, check_key
    from xced.controller.pack import pack_digest

    ctl = _ctl(request)
    key = None
    keys = request.headers.getlist(HEADER)
    if len(keys) > 1:
        raise InvalidRequest(f"{len(keys)} {HEADER} headers: a pack carries one key", field=HEADER)
    if keys:
        key = check_key(keys[0])
        # a retry: its answer at once, without checking it all again (the digest only then)
        answer = ctl.replay_pack(caller.user, key, lambda: pack_digest(body.env, body.jobs))
        if answer is not None:
            return json_response(answer)
    # SUBMIT-1: the API server decides each job's project, by the policy in force at its check
    return json_response(await ctl.submit_pack(body.env, body.jobs, caller,
                                               lambda project: ctl.policy.submit_project(caller, project), key=key))


@router.post("/jobs/dry-run", response_model=DryRun, responses=errors(BODY))
async def dry_run(body: SubmitRequest, request: Request,
                  caller: Caller = Depends(requires("queue:submit"))) -> DryRun:
    """Validate and merge like a submit, record nothing (CLI-2 --dry-run)."""
    ctl = _ctl(request)
    await ctl.recall_refs(body.dependency)
    project, basis = ctl.policy.submit_project(caller, body.project)
    eff = ctl.submit(body.model_dump(), caller, dry_run=True, project=project, basis=basis)
    warnings = eff.pop("_warnings", [])
    return DryRun(effective=eff, warnings=warnings)


@router.get("/jobs/{job_id:jobid}/why", response_model=WhyOut, responses=errors(JOB))
async def why(job_id: int, request: Request, _: Caller = Depends(requires("cluster:view")),
              index: int | None = None) -> Response:
    await _ctl(request).recall(job_id)  # a purged job is read back from the store (issue 15)
    return json_response(_ctl(request).why(job_id, index))


async def _listed_jobs(request: Request, caller: Caller, user: str | None, queue: str | None, project: str | None,
                       state: list[JobState] | None, all: bool) -> list:
    """The jobs of a listing, by ID (GET /jobs and GET /jobs/table share the filters)."""
    check_path(project)  # a malformed path is refused, as at submit, never an empty listing
    want_user = caller.user if user is None else (None if user == "all" else user)
    ctl = _ctl(request)
    jobs = list(ctl.find_jobs(want_user, queue, set(state) if state else None, all, project))
    if all:  # bjobs -a: finished jobs out of memory too (past clean_period), from the store
        jobs = sorted(jobs + await ctl.stored_jobs(want_user, queue, project, set(state) if state else None),
                      key=lambda j: j.id)
    if not jobs:
        _check_names(ctl, caller, user, queue)
    return jobs


def _check_names(ctl, caller: Caller, user: str | None, queue: str | None) -> None:
    """An empty listing's filters are checked (CLI-3; issue 18): a queue the config does not
    have, or a user with no account on this machine (who has no job either, or the listing
    would not be empty; never the caller, who may be a test-mode user, D-6), is refused
    naming it and what would be valid, never answered with an empty table. Raises
    InvalidRequest (field `queue` or `user`)."""
    if queue is not None and not any(q.name == queue for q in ctl.config.queues):
        names = ", ".join(q.name for q in ctl.config.queues)
        raise InvalidRequest(f"queue {queue!r}: no such queue (LSF bjobs -q says the same); the queues are: {names}",
                             field="queue")
    if user is not None and user not in ("all", caller.user):
        import pwd

        try:
            pwd.getpwnam(user)
        except (KeyError, ValueError):  # ValueError: a name with a NUL
            raise InvalidRequest(f"user {user!r}: no such user (no account on this machine, and no job); give a "
                                 f"user name of this machine, or 'all' for every user's jobs", field="user") from None


async def _jobs_by_id(request: Request, caller: Caller, ids: list[int], user: str | None, queue: str | None,
                      project: str | None, state: list[JobState] | None) -> tuple[list, list[int]]:
    """The jobs of `ids` in the order given, each once, whatever their state or age (LSF's
    `bjobs ID`; a job that left memory after the clean period is read back from the store,
    JOB-11), kept only when they pass the filters given (`user` when not 'all', `queue`,
    `project`, an element in one of `state`); and the IDs the cluster does not know."""
    check_path(project)
    ctl = _ctl(request)
    out, missing, seen = [], [], set()
    want = set(state) if state else None
    for jid in ids:
        if not 0 <= jid < 2**63:
            raise InvalidRequest(f"id {jid}: not a job ID; job IDs are whole numbers from 0 to 2^63-1", field="id")
        if jid in seen:
            continue
        seen.add(jid)
        await ctl.recall(jid)
        try:
            job = ctl.job(jid)
        except NotFound:
            missing.append(jid)
            continue
        if user not in (None, "all") and job.user != user or queue is not None and job.queue != queue \
                or project is not None and job.spec.project != project:
            continue
        if want is not None and not any(e.state in want for e in job.elements.values()):
            continue
        out.append(job)
    return out, missing


@router.get("/jobs", response_model=JobList, responses=errors())
async def list_jobs(request: Request, caller: Caller = Depends(requires("cluster:view")),
              user: str | None = Query(None, description="a user name or 'all'; default the caller"),
              queue: str | None = None,
              project: str | None = Query(None, description="that very project's jobs (bjobs -P)"),
              state: list[JobState] | None = Query(None),
              all: bool = Query(False, description="include finished jobs of any age")) -> Response:
    jobs = await _listed_jobs(request, caller, user, queue, project, state, all)
    return request.app.state.listing_cache.listing(jobs, _ctl(request).hosts)


@router.get("/jobs/table", response_model=JobTable, responses=errors())
async def job_table(request: Request, caller: Caller = Depends(requires("cluster:view")),
              fields: str | None = Query(None, max_length=1000,
                                         description="the columns, space or comma separated (xcecli jobs -o); "
                                                     "default: id user state queue hosts name submit_time"),
              user: str | None = Query(None, description="a user name or 'all'; default the caller"),
              queue: str | None = None,
              project: str | None = Query(None, description="that very project's jobs (bjobs -P)"),
              state: list[JobState] | None = Query(None),
              all: bool = Query(False, description="include finished jobs of any age"),
              id: list[int] | None = Query(None, max_length=10000, description=(
                  "only these jobs, in this order, in any state and of any age (LSF bjobs ID...; other filters "
                  "still apply, the default user does not); those the cluster does not know are in `missing`")),
              elements: bool = Query(False, description=(
                  "one row per element, an array's elements each their own row (LSF bjobs)"))) -> Response:
    """The listing of GET /jobs, filtered alike, projected to `fields` (issue 17: a tenth of
    the bytes for the default columns); an unknown field is refused naming the valid ones.
    `fields` may also name xced.api.listing.LSF_FIELDS (for bjobs, CLI-8)."""
    from xced.api.listing import parse_fields
    from xced.server.convert import table_rows

    try:
        cols = parse_fields(fields, lsf=True)
    except ValueError as e:
        raise InvalidRequest(f"fields {fields!r}: {e}", field="fields") from None
    missing: list[int] = []
    if id:
        jobs, missing = await _jobs_by_id(request, caller, id, user, queue, project, state)
    else:
        jobs = await _listed_jobs(request, caller, user, queue, project, state, all)
    return json_response({"fields": cols, "rows": table_rows(jobs, cols, _ctl(request).hosts, per_element=elements),
                          "missing": missing})


@router.get("/jobs/{job_id:jobid}", response_model=JobOut, responses=errors(JOB))
async def show_job(job_id: int, request: Request, caller: Caller = Depends(requires("cluster:view"))) -> Response:
    """The job's summary for anyone (cluster:view); its environment only for its owner and
    the holders of job:view over its project (D-7, RBAC-3), else `env` is null."""
    ctl = _ctl(request)
    await ctl.recall(job_id)
    job = ctl.job(job_id)
    env = ctl.job_env(job) if ctl.policy.may_job(caller, "job:view", job.user, job.spec.project) else None
    return json_response(job_dict(job, env=env, hosts=ctl.hosts, reserve=True))


@router.get("/jobs/{job_id:jobid}/events", response_model=EventList, responses=errors(JOB))
async def job_events(job_id: int, request: Request, _: Caller = Depends(requires("cluster:view"))) -> Response:
    await _ctl(request).recall(job_id)
    return json_response({"events": [event_dict(r) for r in _ctl(request).job_events(job_id)]})


@router.get("/jobs/{job_id:jobid}/output", response_class=PlainTextResponse, responses=errors(JOB))
async def job_output(job_id: int, request: Request,
                     _: Caller = Depends(requires("job:view", "read its output")), index: int | None = None,
                     stream: str = Query("stdout", pattern="^(stdout|stderr)$"),
                     max_bytes: int = Query(65536, ge=1, le=16 * 2**20)) -> PlainTextResponse:
    """`xcecli peek` (LSF bpeek, which only the job's owner and the LSF admins may run): the
    job's owner and the holders of job:view over its project (D-7, RBAC-3). The last
    `max_bytes` of the file, from a line boundary; when that cuts it, a first line
    `<< the first N bytes are not shown: output over 16 MiB >>` says so. InvalidRequest:
    no output yet, or (the job's state given) why its file could not be opened."""
    ctl = _ctl(request)
    await ctl.recall(job_id)
    e, res = await ctl.read_output(job_id, index, stream, max_bytes)
    state = getattr(e.state, "value", e.state)
    ended = state in ("DONE", "EXIT")
    if res is None and ended:
        raise InvalidRequest(f"job {e.ref} has ended ({state}); its {stream} file could not be opened: "
                             f"its host no longer has a record of it")
    if res is None:
        raise InvalidRequest(f"job {e.ref} has no {stream} yet (state {state})")
    if "error" in res:
        now = f"has ended ({state})" if ended else f"is {state}"
        raise InvalidRequest(f"job {e.ref} {now}; its {stream} file could not be opened: {res['error']}")
    text, skipped = str(res.get("text") or ""), int(res.get("skipped") or 0)
    if skipped:  # said, not silent: the first line tells what is cut (issue 18 follow-up)
        text = f"<< the first {skipped} bytes are not shown: output over {_size(max_bytes)} >>\n" + text
    return PlainTextResponse(text)


def _size(n: int) -> str:
    """`n` bytes as "16 MiB", "64 KiB" or "1000 bytes" (exact units only)."""
    for unit, f in (("MiB", 2**20), ("KiB", 2**10)):
        if n % f == 0:
            return f"{n // f} {unit}"
    return f"{n} bytes"


@router.get("/jobs/{job_id:jobid}/wait", response_model=JobOut, responses=errors(JOB))
async def wait_job(job_id: int, request: Request, _: Caller = Depends(requires("cluster:view")),
                   timeout: float = Query(30.0, ge=0, le=300), index: int | None = None) -> Response:
    await _ctl(request).recall(job_id)
    job = await _ctl(request).wait(job_id, timeout, index)
    return json_response(job_dict(job, reserve=True))


#: what each job action needs (RBAC-1, RBAC-3; D-5: a system hold is the admins' to release)
ACTION_PERMISSIONS = {"kill": "job:kill", "stop": "job:modify", "resume": "job:modify", "requeue": "job:requeue",
                      "release": "cluster:admin"}
_DOING = {"kill": "kill it", "stop": "stop it", "resume": "resume it", "requeue": "requeue it",
          "release": "release a system hold (a hold of your own goes with `xcecli resume`)"}


def _indices(job_id: int, refs: list[str]) -> list[int]:
    """The indices of an array's element references ("12[5]" -> 5); a plain job's is 0."""
    cut = len(str(job_id)) + 1
    return [int(r[cut:-1]) if r.endswith("]") else 0 for r in refs]


def action_answer(name: str, job, affected: list[str], index: int | None, full: bool) -> ActionResult:
    """The answer to a job action (CLI-3; issue 17 part 4): `affected` (the controller's
    element references) with `count`; for an array its elements acted on and left alone by
    state (xced.api.arrays.group). Past SUMMARY_OVER elements, unless `full`, the references
    are left out (`complete` false) and the message names at most MAX_RUNS_SHOWN runs:
    killing a 1,000,000-element array answers a few hundred bytes, not 12 MB. The resume and
    release notes (D-5: one kind of hold never releases the other) go in `note` and, as
    before, in the message."""
    from xced.api.arrays import DONE_PHRASE, SUMMARY_OVER, elide_runs, format_runs, group, runs_of

    verb = DONE_PHRASE[name]
    states, skipped = [], []
    done = set(_indices(job.id, affected)) if job.is_array or name in ("resume", "release") else set()
    if job.is_array:
        states = [{"state": st, "count": n, "indices": runs} for st, n, runs in
                  group((i, job.elements[i].state.value) for i in sorted(done))]
        if index is None:
            skipped = [{"state": st, "count": n, "indices": runs} for st, n, runs in
                       group((e.index, e.state.value) for e in job.elements.values() if e.index not in done)]
    addressed = len(affected) + sum(g["count"] for g in skipped)
    complete = full or addressed <= SUMMARY_OVER
    if complete:
        told = format_refs(affected)
    elif job.is_array:
        told = f"{job.id}[{elide_runs(format_runs(runs_of(done)))[0]}]"
    else:
        told = format_refs(affected)
    message, note = f"{verb}: {told}", None
    if name in ("resume", "release"):  # D-5: one kind of hold never releases the other
        kept = "system" if name == "resume" else "user"
        if any(kept in job.elements[i].holds for i in done if i in job.elements):
            how = (f"an admin releases it with `xcecli release {job.id}`" if kept == "system"
                   else f"its user resumes it with `xcecli resume {job.id}`")
            note = f"still held by {'the system' if kept == 'system' else 'its user'} ({how})"
            message = f"{'user hold' if name == 'resume' else 'system hold'} released: {told}; {note}"
    return ActionResult(job_id=job.id, affected=affected if complete else [], message=message, count=len(affected),
                        complete=complete, states=states, skipped=skipped, note=note)


def _action(name: str):
    async def route(job_id: int, request: Request, body: JobAction | None = None,
                    full: bool = Query(False, description="list every element acted on in `affected`, however many "
                                                          "(past 100 the answer gives counts and index runs only)"),
                    caller: Caller = Depends(requires(ACTION_PERMISSIONS[name], _DOING[name]))) -> ActionResult:
        index = body.target() if body else None  # one element, several (JobAction.indices) or the job
        await _ctl(request).recall(job_id)  # a purged job is finished: the action says so, not "not found"
        affected = getattr(_ctl(request), name)(job_id, index, caller)
        return action_answer(name, _ctl(request).job(job_id), affected, index, full)
    route.__name__ = f"{name}_job"
    return route


@router.post("/jobs/{job_id:jobid}/kill", response_model=ActionResult, responses=errors(BODY, JOB, 409))
async def kill_job(job_id: int, request: Request, body: KillRequest | None = None,
                   full: bool = Query(False, description="list every element acted on in `affected`, however many "
                                                         "(past 100 the answer gives counts and index runs only)"),
                   caller: Caller = Depends(requires(ACTION_PERMISSIONS["kill"], _DOING["kill"]))) -> ActionResult:
    """`xcecli kill` (LSF bkill): the kill sequence, or with `signal` that one signal (`bkill -s`,
    KillRequest); the answer's message then reads "SIGUSR1 sent: 12". With `record_done`
    (`bkill -d`) the elements killed end DONE, and the message says so; with `force`
    (`bkill -r`) they are EXIT at once and their processes are killed after. `indices`
    names several elements of an array at once (`bkill "12[1,3,5-7]"`, JobAction)."""
    index = body.target() if body else None
    ctl = _ctl(request)
    await ctl.recall(job_id)  # a purged job is finished: the kill says so, not "not found"
    return _kill_one(ctl, job_id, index, body or KillOptions(), caller, full)


def _kill_one(ctl, job_id: int, index, how: KillOptions, caller: Caller, full: bool) -> ActionResult:
    """Kill job `job_id` (element `index`, a list of them, or None for all) as `how` says
    (KillOptions: the sequence, or one signal; -d, -r, -C) and answer what was done (the
    ActionResult of POST /jobs/{id}/kill). Raises the controller's errors (NotFound,
    Conflict, PermissionDenied)."""
    if how.signal is None:
        killed = ctl.kill(job_id, index, caller, record_done=how.record_done, force=how.force, comment=how.comment)
        res = action_answer("kill", ctl.job(job_id), killed, index, full)
        if how.record_done:
            res.message += "; recorded DONE when killed (bkill -d)"
        if how.force:
            res.message += "; removed at once (bkill -r): EXIT now, its processes are being killed"
        return res
    from xced.model.signals import parse_signal

    num, name = parse_signal(how.signal)
    done, affected = ctl.send_signal(job_id, index, num, name, caller)
    res = action_answer(done, ctl.job(job_id), affected, index, full)
    if done == "kill":
        head, _, tail = res.message.partition(": ")
        res.message = f"{name} sent: {tail}" if tail else res.message
    return res


@router.post("/jobs/kill", response_model=KillManyResult, responses=errors(BODY))
async def kill_jobs(request: Request, body: KillManyRequest,
                    full: bool = Query(False, description="list every element acted on in each `affected`, however "
                                                          "many (past 100 an answer gives counts and index runs only)"),
                    caller: Caller = Depends(requires("cluster:view"))) -> KillManyResult:
    """LSF `bkill 0` / `bkill -b` / `bkill ID ID ...` in one request (KillManyRequest): each
    target is killed as POST /jobs/{id}/kill would kill it, with the same options; one
    refused (unknown, finished, another user's) is answered in its place with the code and
    message that route would give, and the others go on. A store that fails (busy, an I/O
    error) ends the request: with nothing killed yet it is the whole answer (503), else the
    target it failed on and every later one are answered with that error, not tried. The
    route itself needs only what every user holds (cluster:view); job:kill is checked on
    each job, as the one-job route checks it (RBAC-3: its owner, or who holds it over the
    job's project)."""
    ctl = _ctl(request)
    results: list[ActionResult] = []

    def refuse(t, e: XceError) -> ActionResult:
        ref = str(t.job_id) if t.index is None else f"{t.job_id}[{t.index}]"
        return ActionResult(job_id=t.job_id, affected=[], message=e.message, count=0,
                            refused=ActionRefusal(id=ref, code=e.code, reason=e.message))

    for i, t in enumerate(body.targets):
        try:
            await ctl.recall(t.job_id)
            results.append(_kill_one(ctl, t.job_id, t.index, body, caller, full))
        except XceError as e:
            if e.exit_code == 3:  # the store failed (busy, I/O error): no later target is tried
                if all(r.refused is not None for r in results):
                    raise  # nothing done yet: the whole request is answered 503 (and retried when busy)
                results += [refuse(u, e) for u in body.targets[i:]]
                break
            results.append(refuse(t, e))
    return KillManyResult(results=results)


@router.post("/jobs/{job_id:jobid}/requeue", response_model=ActionResult, responses=errors(BODY, JOB, 409))
async def requeue_job(job_id: int, request: Request, body: RequeueRequest | None = None,
                      full: bool = Query(False, description="list every element acted on in `affected`, however many "
                                                            "(past 100 the answer gives counts and index runs only)"),
                      caller: Caller = Depends(requires(ACTION_PERMISSIONS["requeue"], _DOING["requeue"]))
                      ) -> ActionResult:
    """`xcecli requeue` (LSF brequeue): running elements are killed and pend again, finished
    ones pend again at once, with the same ID and submit time; with `hold` (`brequeue -H`)
    they pend held by their user (PSUSP) and the message says so (RequeueRequest)."""
    index = body.target() if body else None
    ctl = _ctl(request)
    await ctl.recall(job_id)  # a purged job is finished: it can be requeued, not "not found"
    hold = bool(body and body.hold)
    res = action_answer("requeue", ctl.job(job_id), ctl.requeue(job_id, index, caller, hold=hold), index, full)
    if hold:
        res.message += "; held when it pends again (brequeue -H): resume releases it"
    return res


for _name in ACTION_PERMISSIONS:
    if _name in ("kill", "requeue"):
        continue
    router.add_api_route(f"/jobs/{{job_id:jobid}}/{_name}", _action(_name), methods=["POST"], response_model=ActionResult,
                         responses=errors(BODY, JOB, 409))


@router.post("/jobs/{job_id:jobid}/launch", response_model=LaunchResult, responses=errors(BODY, JOB, 409),
             dependencies=[Depends(requires(TOKEN_OR_OWNER))])
async def launch_task(job_id: int, body: LaunchRequest, request: Request) -> LaunchResult:
    """Start a task on one of a running job's hosts and answer when it ends (JOB-7). With a
    token the caller proves it runs inside the job; on the Unix socket it must also run as
    the job's user. Over TCP only test mode takes a token (production: KEY-1, D-7)."""
    if body.token is not None:
        peer = launch_peer(request)
        caller, peer_uid = None, peer[1] if peer is not None else None
    else:
        caller, peer_uid = await caller_of(request, TOKEN_OR_OWNER), None
    res = await _ctl(request).launch(job_id, body.index, body.host, body.argv, body.token, caller, peer_uid,
                                     rank=body.rank)
    return LaunchResult(**res)

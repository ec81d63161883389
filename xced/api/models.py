"""Request and response bodies of the `/xce/v1/` API (D-2).

Every body is strict (`extra="forbid"`): an unknown field is a 422 naming the field,
never dropped (bug-1970); request bodies are strict in their types too (`RequestBody`). `--json` output of the CLIs is these models' JSON; their
JSON Schemas are generated into docs/json/ (`python -m xced.api.schema docs/json`).

Units: times are epoch seconds (float), durations seconds, memory MB, slots integers.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator

from xced.api.errors import CODES
from xced.model.jobs import JobState
from xced.model.states import kill_comment_error, one_line_error
from xced.model.units import (
    MAX_APP_PARAMS,
    MAX_DEPENDENCY_LENGTH,
    MAX_ENV_VARS,
    MAX_EXDATA_ITEMS,
    MAX_HOOK_TEXT,
    MAX_SCRIPT_TEXT,
    MAX_MEMORY_MB,
    MAX_NAME_TEXT,
    MAX_KILL_COMMENT,
    MAX_KILL_JOBS,
    MAX_PACK_JOBS,
    MAX_QUEUE_TEXT,
    MAX_RESREQ_STRINGS,
    MAX_RUN_LIMIT_S,
    MAX_SLOTS,
)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestBody(Body):
    """A request body: strict as well (D-2): a JSON value of another type is refused, never
    converted: `{"index": false}` is not index 0, `{"stop": 0}` not false, `"3"` not 3
    (pydantic's strict mode; a JSON integer is still a valid float)."""

    model_config = ConfigDict(extra="forbid", strict=True)


# ---------------------------------------------------------------- requests


#: a lower bound the OpenAPI document states and the submit checks (xced.controller.submit)
_AT_LEAST_1 = {"minimum": 1}
#: ... and a string that must not be blank (null leaves the field to its default)
_NOT_BLANK = {"pattern": r"\S"}


class SubmitRequest(RequestBody):
    """POST /jobs. `name` may carry an array part (`sweep[1-100:2]%10`, JOB-4)."""

    argv: list[str] = Field(min_length=1, json_schema_extra={"prefixItems": [{"type": "string", "minLength": 1}]},
                            description="command and arguments; argv[0] (not empty) is the program or script")
    cwd: str = Field(description="absolute working directory of the job")
    env: dict[str, str] = Field(default_factory=dict, max_length=MAX_ENV_VARS,
                                description="the job's environment (the submitter's, with --env applied); at most "
                                            "MAX_ENV_VARS variables (D-8)")
    name: str | None = Field(None, json_schema_extra=_NOT_BLANK, max_length=MAX_NAME_TEXT)
    queue: str | None = Field(None, json_schema_extra=_NOT_BLANK, max_length=MAX_QUEUE_TEXT)
    project: str | None = Field(None, max_length=MAX_NAME_TEXT,  # the submit names the path's own limit (MAX_PROJECT_PATH)
                                description="-P: the project's path (PRJ-1), e.g. /physics/hep; None: the caller's "
                                            "default project (PRJ-3)")
    # the lower bounds are documented here and checked at submit, whose messages say what -n, -W, -M take
    ntasks_min: int | None = Field(None, le=MAX_SLOTS, json_schema_extra=_AT_LEAST_1,
                                   description="-n MIN; None: the profile's range, else 1")
    ntasks_max: int | None = Field(None, le=MAX_SLOTS, json_schema_extra=_AT_LEAST_1,
                                   description="-n MIN,MAX; None means MIN")
    stdout: str | None = Field(None, json_schema_extra=_NOT_BLANK,
                               description="-o path, %J and %I substituted at dispatch")
    stderr: str | None = Field(None, json_schema_extra=_NOT_BLANK, description="-e path; None means with stdout")
    stdout_overwrite: bool = Field(False, description="-oo: the stdout file is overwritten (truncated) at the start "
                                                      "of each run, where -o appends (LSF bsub -oo); needs stdout")
    stderr_overwrite: bool = Field(False, description="-eo: the stderr file is overwritten (truncated) at the start "
                                                      "of each run, where -e appends (LSF bsub -eo); needs stderr")
    run_limit_s: int | None = Field(None, le=MAX_RUN_LIMIT_S, json_schema_extra=_AT_LEAST_1,
                                    description="-W, seconds (at most 10 years)")
    memory_limit_mb: int | None = Field(None, le=MAX_MEMORY_MB, json_schema_extra=_AT_LEAST_1,
                                        description="-M, MB (at most 1 PB)")
    resreq: list[str] = Field(default_factory=list, max_length=MAX_RESREQ_STRINGS,
                              description="-R strings, merged as LSF merges them (RES-1); at most "
                                          "MAX_RESREQ_STRINGS, with MAX_RESREQ_TERMS terms together (D-8)")
    app: str | None = Field(None, max_length=MAX_QUEUE_TEXT, description="-a profile; None: the cluster's default_application; "
                                                              "'': no profile (PROF-2)")
    app_params: dict[str, str] = Field(default_factory=dict, max_length=MAX_APP_PARAMS,
                                       description="--app-param NAME=VALUE (PROF-6); at most MAX_APP_PARAMS (D-8)")
    pre_exec: str | None = Field(None, json_schema_extra=_NOT_BLANK, max_length=MAX_HOOK_TEXT,
                                 description="-E: the job's own pre-exec (JOB-7 inner layer)")
    post_exec: str | None = Field(None, json_schema_extra=_NOT_BLANK, max_length=MAX_HOOK_TEXT,
                                  description="-Ep: the job's own post-exec")
    exdata: dict | None = Field(None, description="the job's JSON side record (MERGE-4): env, limits, app_params, "
                                                  "meta; nested at most MAX_EXDATA_DEPTH deep, at most "
                                                  "MAX_EXDATA_ITEMS keys, values and elements (D-8)")
    dependency: str | None = Field(None, max_length=MAX_DEPENDENCY_LENGTH,
                                   description="-w: dependency expression, e.g. 'done(12) && ended(13[2])' (JOB-5, "
                                               "LSF bsub -w); every job it names must exist")
    hold: bool = Field(False, strict=True, description="-H: the job is held at submit, PSUSP with a user hold (D-5, "
                                                       "LSF bsub -H), in the submit's own transaction; `xcecli "
                                                       "resume` releases it; in a pack too, as LSF's bsub -pack takes it")
    exclusive: bool = Field(False, strict=True, description="-x: an exclusive job (LSF bsub -x): dispatched only to "
                                                            "hosts where no other job runs, and while it runs no "
                                                            "other job is dispatched to them; every queue allows it")
    script: str | None = Field(None, max_length=MAX_SCRIPT_TEXT,
                               description="a job script read from standard input (JOB-12: `bsub < job.lsf`): kept "
                                           "with the job; the worker writes it to a file of the job's directory, "
                                           "readable by the job's user only (0700), and appends that file's path "
                                           "to argv (the interpreter its #! line names, or /bin/sh); at most "
                                           "MAX_SCRIPT_TEXT characters; not taken in a pack")
    command_line: str | None = Field(None, json_schema_extra=_NOT_BLANK, max_length=MAX_HOOK_TEXT,
                                     description="the command line as the user typed it, shown as the job's "
                                                 "command and default name (bjobs COMMAND and JOB_NAME, "
                                                 "LSB_JOBNAME) in place of argv: bsub sends it for a job it runs "
                                                 "as `/bin/sh -c LINE` or a script it resolved (LSF: \"If no job "
                                                 "name is specified with -J, bjobs ... displays the command as the "
                                                 "job name\"); None: argv, quoted, is shown")
    umask: int = Field(0o022, ge=0, le=0o777, strict=True, description="the submitter's umask as an integer (18 for 022): the "
                                                           "job's output files are made with it and the job runs "
                                                           "with it (D-7, as in LSF and Slurm); default 0o022; "
                                                           "a JSON integer, never a string or a boolean")


    @field_validator("exdata")
    @classmethod
    def _exdata_items(cls, v: dict | None) -> dict | None:
        """D-8: exdata holds at most MAX_EXDATA_ITEMS keys, values and array elements, and no
        number JSON cannot carry (RFC 8259 has no Infinity or NaN: the json module reads
        `NaN`, and `1e400` as infinity, which no listing could show again); walked once,
        without recursion, and given up as soon as it passes the bound (its depth,
        MAX_EXDATA_DEPTH, is the submit's check, xced.controller.submit._check_exdata)."""
        if v is None:
            return v
        import math

        items = 0
        stack: list[object] = [v]
        while stack:
            node = stack.pop()
            children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
            items += len(children) * (2 if isinstance(node, dict) else 1)  # type: ignore[arg-type]
            if items > MAX_EXDATA_ITEMS:
                raise ValueError(f"exdata has more than {MAX_EXDATA_ITEMS} keys, values and array elements "
                                 f"(MAX_EXDATA_ITEMS); keep the side record small")
            for x in children:  # type: ignore[union-attr]
                if isinstance(x, (dict, list)):
                    stack.append(x)
                elif isinstance(x, float) and not math.isfinite(x):
                    raise ValueError(f"exdata holds {x!r}, a number JSON cannot carry (NaN and Infinity are not JSON; "
                                     f"a number as large as 1e400 overflows to infinity); give a finite number")
        return v


class PackJob(SubmitRequest):
    """One job of a pack (POST /jobs/pack): SubmitRequest's fields with their bounds, except
    that `env` holds only this job's own `--env NAME=VALUE` additions; its environment is the
    pack's `env` with these laid over it (CLI-7, issue 17 part 2)."""

    env: dict[str, str] = Field(default_factory=dict, max_length=MAX_ENV_VARS,
                                description="this job's own --env NAME=VALUE additions, laid over the pack's env; at "
                                            "most MAX_ENV_VARS variables, and so is the job's whole environment (D-8)")


class PackRequest(RequestBody):
    """POST /jobs/pack: many jobs in one request, as LSF's `bsub -pack FILE` (CLI-7). The
    client's environment is sent once for the whole pack; every job is checked as a single
    submit, and all are recorded in one transaction or none is. At least 1 and at most
    MAX_PACK_JOBS jobs; the body at most MAX_PACK_REQUEST_BYTES (D-8)."""

    env: dict[str, str] = Field(default_factory=dict, max_length=MAX_ENV_VARS,
                                description="the submitter's environment, once for every job of the pack; at most "
                                            "MAX_ENV_VARS variables (D-8)")
    jobs: list[PackJob] = Field(json_schema_extra={"minItems": 1, "maxItems": MAX_PACK_JOBS},
                                description="the jobs, in order; the answer gives their IDs in the same order")

    @field_validator("jobs", mode="before")
    @classmethod
    def _pack_size(cls, v: object) -> object:
        """At least one job and at most MAX_PACK_JOBS, told before any job is read (D-8)."""
        return list_within(v, MAX_PACK_JOBS, ("pack_empty", "the pack holds no job; give at least one"),
                           ("pack_too_long", "the pack holds {n} jobs, more than the {cap} a pack may hold "
                                             "(MAX_PACK_JOBS, D-8); split it into packs of at most {cap}"))


#: the most array elements one job action may name in `indices` (JobAction; D-8)
MAX_ACTION_INDICES = 100_000


class JobAction(RequestBody):
    """POST /jobs/{id}/{kill|stop|resume|requeue|release}. `index` None means every element;
    `indices` names several elements of an array in one request (LSF's `bkill
    "12[1,3,5-7]"`, IBM bkill.1: `"job_ID[index_list]"`; CLI-8), so an index list costs one
    request, not one per element. `indices` holds 1 to MAX_ACTION_INDICES distinct indices,
    each >= 0, and excludes `index` (422 otherwise, naming what was wrong). Every index must
    be an element of the job, or the whole request is refused (404) naming those it lacks,
    and nothing is done."""

    index: int | None = None
    indices: list[int] | None = Field(None, json_schema_extra={"minItems": 1, "maxItems": MAX_ACTION_INDICES},
                                      description="several elements of an array, each once; not with `index`")

    @field_validator("indices", mode="before")
    @classmethod
    def _few_enough(cls, v: object) -> object:
        """1..MAX_ACTION_INDICES indices, told before each is read (D-8)."""
        return list_within(v, MAX_ACTION_INDICES,
                           ("indices_empty", "indices is empty; give at least one element index, or leave it out for "
                                             "the whole job"),
                           ("indices_too_many", "indices names {n} elements, more than the {cap} one request may name "
                                                "(D-8); split the list"))

    @field_validator("indices")
    @classmethod
    def _distinct(cls, v: list[int] | None, info: ValidationInfo) -> list[int] | None:
        """Each index >= 0 and given once; not with `index`."""
        from pydantic_core import PydanticCustomError

        if v is None:
            return v
        if info.data.get("index") is not None:
            raise PydanticCustomError("index_and_indices", "give either index (one element) or indices (several), "
                                      "not both")
        bad = [i for i in v if i < 0]
        if bad:
            raise PydanticCustomError("index_negative", "indices {bad} are negative; element indices are 0 or more",
                                      {"bad": bad[:5]})
        if len(set(v)) != len(v):
            raise PydanticCustomError("index_repeated", "indices names an element more than once; give each once")
        return v

    def target(self) -> int | list[int] | None:
        """What the controller acts on: the one `index`, the `indices` list, or None (every element)."""
        return self.indices if self.indices is not None else self.index


class RequeueRequest(JobAction):
    """POST /jobs/{id}/requeue (`xcecli requeue`, LSF brequeue): the elements pend again with
    the same ID and submit time. `hold` (LSF `brequeue -H`: "Requeues jobs to PSUSP job
    status", IBM brequeue.1): they pend held by their user, PSUSP, until resumed."""

    hold: bool = Field(False, description="pend again held by the user (PSUSP), as LSF brequeue -H; resume releases it")


def list_within(v: object, cap: int, empty: tuple[str, str], too_many: tuple[str, str]) -> object:
    """A request's list `v` as it came, once it holds 1 to `cap` items, told before any item is
    read (D-8: a request's work is bounded); raises pydantic's custom error `empty` (type,
    message) for an empty list and `too_many` (its message may name {n} and {cap}) for a
    longer one. Anything else goes on to the field's own validation."""
    from pydantic_core import PydanticCustomError

    if isinstance(v, list) and not v:
        raise PydanticCustomError(*empty)
    if isinstance(v, list) and len(v) > cap:
        raise PydanticCustomError(too_many[0], too_many[1], {"n": len(v), "cap": cap})
    return v


def one_line_text(v: str, what: str, instead: str) -> str:
    """`v` if it is one line of text that says something (xced.model.states.one_line_error,
    for a reason every user then reads on one line of a listing or a history); raises
    ValueError naming `what` otherwise, saying `instead` for a blank one."""
    bad = one_line_error(v, what, instead)
    if bad is not None:
        raise ValueError(bad)
    return v


class KillOptions(RequestBody):
    """How a kill is done, the same for one job (POST /jobs/{id}/kill, KillRequest) and for
    many (POST /jobs/kill, KillManyRequest): see KillRequest for `signal`, `record_done`,
    `force` and `comment`."""

    signal: str | None = Field(None, max_length=16, description="a signal by name (TERM, SIGUSR1) or number (15)")
    record_done: bool = Field(False, description="record each element the kill ends DONE, not EXIT (LSF bkill -d); "
                                                 "not with `signal`")
    force: bool = Field(False, description="remove each unfinished element at once: EXIT now, its slots freed, its "
                                           "processes killed after (LSF bkill -r); not with `signal` or `record_done`")
    comment: str | None = Field(None, max_length=MAX_KILL_COMMENT,
                                description="why the job is killed (LSF bkill -C kill_reason): recorded with the kill, "
                                            "in the job's history and in a pending job's exit reason; one line of "
                                            "text; not with `signal`")

    @field_validator("signal", mode="before")
    @classmethod
    def _number_as_text(cls, v: object) -> object:
        """A signal given as a JSON number (9) is taken as its digits ("9"), as bkill -s 9."""
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("signal")
    @classmethod
    def _known(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from xced.model.signals import parse_signal

        return parse_signal(v)[1]

    @field_validator("record_done")
    @classmethod
    def _done_without_signal(cls, v: bool, info: ValidationInfo) -> bool:
        """`record_done` goes with the kill sequence only (LSF: bkill [-r | -s signal | -d])."""
        from pydantic_core import PydanticCustomError

        if v and info.data.get("signal") is not None:
            raise PydanticCustomError("done_with_signal", "record_done (bkill -d) goes with the kill sequence, not "
                                      "with a signal (LSF's -s and -d exclude each other); give one of them")
        return v

    @field_validator("force")
    @classmethod
    def _force_alone(cls, v: bool, info: ValidationInfo) -> bool:
        """`force` goes with neither `signal` nor `record_done` (LSF: bkill [-r | -s signal | -d])."""
        from pydantic_core import PydanticCustomError

        if v and info.data.get("signal") is not None:
            raise PydanticCustomError("force_with_signal", "force (bkill -r) sends the kill sequence, not one signal "
                                      "(LSF's -r and -s exclude each other); give one of them")
        if v and info.data.get("record_done"):
            raise PydanticCustomError("force_with_done", "force (bkill -r) records the job EXIT at once, so it cannot "
                                      "go with record_done (LSF's -r and -d exclude each other); give one of them")
        return v

    @field_validator("comment")
    @classmethod
    def _comment_one_line(cls, v: str | None, info: ValidationInfo) -> str | None:
        """A kill's comment (bkill -C) is one line of the job's history: no control
        characters, not blank, and it goes with a kill, not with one signal."""
        if v is None:
            return v
        bad = kill_comment_error(v)
        if bad is not None:
            raise ValueError(bad)
        if info.data.get("signal") is not None:
            raise ValueError("a kill reason (bkill -C) goes with a kill, not with one signal (-s); give one of them")
        return v


class KillRequest(JobAction, KillOptions):
    """POST /jobs/{id}/kill (`xcecli kill`, LSF bkill). Without `signal`, LSF's kill sequence
    (INT, TERM, KILL spaced by kill_interval). With one (`bkill -s SIG`), that signal alone:
    to running and stopped elements as it is; to pending ones only KILL, TERM or INT (which
    end them EXIT, as a kill does), STOP (a user hold) or CONT (its release), as LSF sends
    pending jobs no other signal. A name (`USR1`, `SIGUSR1`) or a number (`10`); anything
    else is refused (422) listing the valid ones (xced.model.signals).

    `record_done` (`bkill -d`, `xcecli kill --record-done`): the kill sequence as usual (a
    pending element ends at once), but each element it ends is recorded DONE, not EXIT, its
    reason ending "recorded DONE (bkill -d)"; so jobs waiting on its done() start and those
    on its exit() never do. IBM's bkill page: "-d: Kills the jobs, and records the jobs as
    DONE after the jobs exit." With `signal` it is refused (422): LSF's synopsis makes -s
    and -d exclusive.

    `force` (`bkill -r`, `xcecli kill --force`): each unfinished element is recorded EXIT at
    once, "removed by USER (bkill -r); its processes are being killed", and its slots and
    reservations are free for other jobs at once; the kill sequence still goes to its
    processes, whose later end is only noted in its events. IBM's bkill page: "-r: Removes a
    job from the LSF system without waiting for the job to terminate in the operating system.
    Sends the same series of signals as bkill without -r, except that the job is removed from
    the system immediately". With `signal` or `record_done` it is refused (422): LSF's
    synopsis is bkill [-r | -s signal | -d].

    `comment` (`bkill -C kill_reason`, `xcecli kill -C`): why the job is killed, at most
    MAX_KILL_COMMENT characters of one line; recorded with the kill in the job's history (the
    KILL or KILL_REQUEST event) and, for an element that ends at once (pending, or -r), in
    its exit reason, as "...; kill reason: TEXT". Refused (422) with `signal`."""




class KillTarget(RequestBody):
    """One job of a POST /jobs/kill: `job_id`, and `index` for one element of an array (None:
    the whole job)."""

    job_id: int = Field(ge=0, le=10**18 - 1, description="a job ID (one the cluster does not know, 0 included, is "
                                                         "answered not_found in its place)")
    index: int | None = Field(None, ge=0, description="one element of an array; leave it out for the whole job")


class KillManyRequest(KillOptions):
    """POST /jobs/kill (LSF `bkill 0`, `bkill -b`, `bkill ID ID ...`): kill each of `targets` as
    POST /jobs/{id}/kill would, with the same options for all (KillOptions), in one request:
    `bkill 0` over 10,000 jobs is then a few requests, not 10,000 (IBM's "Kill multiple
    jobs": "killing a large number of jobs (approximately greater than 1000 jobs) can take
    a long time to finish"). 1 to MAX_KILL_JOBS targets; each is acted on or refused on its
    own (KillManyResult), as LSF's bkill acts on the jobs it may and names the others."""

    #: 1..MAX_KILL_JOBS targets, told before each is read (D-8)
    targets: Annotated[list[KillTarget], BeforeValidator(lambda v: list_within(
        v, MAX_KILL_JOBS, ("targets_empty", "targets is empty; name at least one job to kill"),
        ("targets_too_many", "targets names {n} jobs, more than the {cap} one request may name (D-8); split the "
                             "list")))] = Field(json_schema_extra={"minItems": 1, "maxItems": MAX_KILL_JOBS},
                                                description="the jobs (or single elements) to kill, in the order given")


class KillManyResult(Body):
    """The answer to POST /jobs/kill: one ActionResult per target, in the order given; a
    target refused (not found, finished, not the caller's) has `refused` set with the code
    and message POST /jobs/{id}/kill would have answered, `affected` empty and `count` 0."""

    results: list[ActionResult]


class LaunchRequest(RequestBody):
    """POST /jobs/{id}/launch (`xcecli launch`, LSF blaunch): run `argv` as one task of the
    running element `index` on `host`, one of the job's hosts. `token` is the element's
    XCE_JOB_TOKEN (from inside the job); without it the caller must own the job."""

    index: int = 0
    host: str
    argv: list[str] = Field(min_length=1)
    token: str | None = None
    rank: int | None = Field(None, ge=0, le=2**31,
                             description="the task's place in the job's LSB_HOSTS (0 = the first slot), which must "
                                         "be a slot on `host`: its XCE_TASK_ID (`launch --all`, XCE_TASK_STARTER); "
                                         "null: the next task number of the job")


# ---------------------------------------------------------------- responses


class ErrorOut(Body):
    """What went wrong, in one line for the user (xced.api.errors)."""

    code: str = Field(description="stable, one of: " + ", ".join(CODES))
    message: str = Field(description="what was wrong and what would be valid")
    field: str | None = Field(None, description="the request field at fault, when there is one")


class ErrorBody(Body):
    """Every error answer of the API, whatever its status (D-2; `XceError.to_body()`)."""

    error: ErrorOut


class LaunchResult(Body):
    """How a launched task ended; `output` is its stdout and stderr (at most the last 1 MB)."""

    host: str
    task_id: int
    exit_code: int
    signal: str | None = None
    reason: str | None = None
    output: str = ""


class SubmitResponse(Body):
    job_id: int
    name: str | None
    queue: str
    project: str | None = Field(None, description="the project the job was let into (PRJ-1, SUBMIT-1)")
    array_size: int = Field(0, description="number of elements, 0 for a plain job")
    app: str | None = Field(None, description="the application profile the job runs with (PROF-2)")
    warnings: list[str] = Field(default_factory=list, description="side effects of the merge (MERGE-1)")


class PackResponse(Body):
    """The answer of POST /jobs/pack (CLI-7): each job's SubmitResponse, in the order of the
    request."""

    jobs: list[SubmitResponse]


class HostShortfallOut(Body):
    host: str
    resource: str
    free: float
    needed: float
    message: str


class PendReasonOut(Body):
    """RES-6: a main reason, per-host shortfalls, and what would make the job start now."""

    main: str
    hosts: list[HostShortfallOut] = Field(default_factory=list)
    hint: str | None = None


class AllocOut(Body):
    host: str
    slots: int


class ElementOut(Body):
    """One element of a job (index 0 for a plain job)."""

    id: str = Field(description="display ID: 123 or 123[4]")
    job_id: int
    index: int
    state: JobState
    holds: list[Literal["user", "system"]] = Field(default_factory=list)
    start_time: float | None = None
    end_time: float | None = None
    exit_code: int | None = None
    exit_signal: str | None = None
    exit_reason: str | None = None
    containment: Literal["cgroup-v2", "cgroup-v1", "subreaper"] | None = Field(
        None, description="how the element's processes are kept together and ended with it (JOB-1): a cgroup "
                          "of the v2 or v1 hierarchy, or the supervisor as their child subreaper; null before "
                          "it started")
    alloc: list[AllocOut] = Field(default_factory=list)
    pend_reason: PendReasonOut | None = None
    host_problem: str | None = Field(None, description="for a running element, why one of its hosts is not ok "
                                                       "(its worker left; its key was revoked or expired, KEY-4): "
                                                       "the element stays RUN until the host rejoins")
    stdout: str | None = Field(None, description="the file its stdout goes to (JOB-12: -o with %J/%I expanded, "
                                                 "a directory resolved to DIR/ID.out; once it started, the "
                                                 "path its host opened, the job directory's file when the job "
                                                 "names none); null: no -o and not started")
    stderr: str | None = Field(None, description="the file its stderr goes to (the stdout file without -e)")


class ReserveOut(Body):
    """One rusage term of a job with its method and what the job holds of it in all (RES-2,
    issue 15): `total = value * count`, `count` its tasks (per task, XCE's default when the
    term names no method), its hosts (per host) or 1 (per job). `exact` is false when `count`
    is only the least: a pending job with a task range (counted at its -n MIN), or a per-host
    term before the job's hosts are known (one host counted)."""

    name: str
    value: int | float = Field(description="per `per`: MB when `unit` is MB, else a count")
    unit: Literal["MB"] | None = None
    per: Literal["task", "host", "job"]
    count: int = Field(description="tasks (per task), hosts (per host) or 1 (per job)")
    total: int | float = Field(description="value x count: what the job reserves of it in all")
    exact: bool = True


class JobOut(Body):
    """A job as `xcecli jobs --json` and `xcecli show --json` print it."""

    job_id: int
    name: str | None
    user: str
    run_as: str = Field(description="the user the job's processes run as (D-6)")
    asserted_user: bool = Field(False, description="submitted by a user asserted in test mode")
    queue: str
    project: str | None = Field(None, description="the project's path (PRJ-1); null: none (open mode)")
    auth_basis: str = Field("direct", description="how the submit was let in (SUBMIT-1): member, "
                                                  "role:NAME@/scope, open, or direct (the controller's client "
                                                  "library, test mode only)")
    app: str | None = Field(None, description="the application profile (PROF-2); null: none")
    app_params: dict[str, str] = Field(default_factory=dict, description="the profile params in force (PROF-6)")
    state: JobState = Field(description="the job's state; for an array the most active element state")
    submit_time: float
    argv: list[str]
    cwd: str
    ntasks_min: int
    ntasks_max: int
    run_limit_s: int | None
    memory_limit_mb: int | None
    array_spec: str | None = None
    array_limit: int | None = None
    resreq_requested: list[str] = Field(default_factory=list, description="the job's own -R strings, as given")
    resreq: str = Field("", description="the effective resource requirement the scheduler places with: the job's "
                                        "-R merged with its profile (MERGE-1), canonical; '' when none")
    reserve: list[ReserveOut] | None = Field(None, description="each rusage term of the effective requirement "
                                             "(its preferred alternative) with its method and the job's total; "
                                             "for an array, what each element reserves; in `show` and `wait`, "
                                             "null in listings")
    dependency: str | None = Field(None, description="the -w dependency in canonical form (JOB-5), e.g. "
                                                     "'done(12) && ended(13[2])'; null: none")
    exclusive: bool = Field(False, description="-x: an exclusive job (LSF bsub -x): it runs only on hosts where "
                                               "no other job runs, and they take no other job meanwhile")
    counts: dict[str, int] = Field(default_factory=dict, description="elements per state")
    elements: list[ElementOut] = Field(default_factory=list)
    env: dict[str, str] | None = Field(None, description="the job's environment as submitted (D-7): in `show` "
                                                         "for the job's owner and cluster admins only; null "
                                                         "for anyone else and in listings")
    umask: int | None = Field(None, description="the umask the job runs with (D-7), e.g. 18 for 022")
    meta: dict | None = Field(None, description="exdata's `meta` as the client sent it, untouched (MERGE-4), e.g. "
                                                "{\"preset\": {\"name\": \"gpu-train\", \"hash\": "
                                                "\"sha256:...\"}} for a job submitted with --preset (PRE-2); "
                                                "null: none")


class JobList(Body):
    jobs: list[JobOut]


class JobTable(Body):
    """GET /jobs/table: the listing of `xcecli jobs -o FIELDS`, projected by the daemon
    (xced.api.listing): `fields` in order, then one row of cells per job, each cell a job
    ID, text, a count, epoch seconds for the *_time fields, or null."""

    fields: list[str]
    rows: list[list[int | float | str | None]]
    missing: list[int] = Field(default_factory=list,
                               description="the job IDs asked for with `id` that the cluster does not know "
                                           "(LSF bjobs: 'Job <ID> is not found')")


class EventOut(Body):
    """One transition or notable event of a job (D-5)."""

    time: float
    id: str
    kind: str
    from_state: JobState | None = None
    to_state: JobState | None = None
    actor: str
    reason: str | None = None
    stimulus: str | None = Field(None, description="the ID of the request, scheduler session or worker report "
                                                   "that caused it (e.g. 'kill-3f2a.12'); events recorded "
                                                   "before IDs were kept have none")


class EventList(Body):
    events: list[EventOut]


class HostOut(Body):
    """One host (LSF bhosts): status, slots and memory, who closed it and why, and the jobs
    running there (CLI-3, CLI-4, SCHED-4). Times are epoch seconds on the daemon's clock."""

    name: str
    status: Literal["ok", "closed_Adm", "unavail"] = Field(
        description="LSF bhosts' words: ok (a worker serves it, open), closed_Adm (closed by an admin: no new "
                    "dispatches), unavail (no worker serves it)")
    slots: int
    slots_used: int
    memory_mb: int
    memory_used_mb: int
    njobs: int
    resources: dict[str, float] = Field(default_factory=dict)
    attributes: dict[str, str] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    status_reason: str | None = Field(None, description="why the host is not served, when known (its worker's channel "
                                                        "closed, no heartbeat, its key revoked or expired, lost)")
    closed_by: str | None = Field(None, description="the admin who closed or drained it (CLI-4)")
    closed_reason: str | None = Field(None, description="the reason the admin gave")
    closed_at: float | None = None
    draining: bool = Field(False, description="closed by a drain whose last job has not ended yet")
    away_since: float | None = Field(None, description="when its worker went away; its jobs are requeued or ended "
                                                       "host_lost_grace after it (SCHED-4)")
    lost_at: float | None = Field(None, description="when it was declared lost, until a worker serves it again")
    last_heard: float | None = Field(None, description="when the controller last heard from the worker that serves "
                                                       "(or served) it over its channel: its join, a report, or a "
                                                       "heartbeat, which an idle worker sends every 10 s (SCHED-4); "
                                                       "null for the controller's own worker")
    load: dict[str, float] | None = Field(None, description="LSF's load indices its worker last reported (RES-7): "
                                                            "r15s, r1m, r15m (run queue), ut (CPU, 0..1), pg "
                                                            "(pages/s), io (KB/s), ls (users), it (idle minutes), "
                                                            "tmp, swp (free MB), ncpus, maxmem, maxswp, maxtmp (MB); "
                                                            "null before its first report")
    load_at: float | None = Field(None, description="when that report came")
    jobs: list[str] = Field(default_factory=list, description="the jobs running there (IDs as 12 or 12[3]; the "
                                                              "first 1,000)")


class HostList(Body):
    hosts: list[HostOut]


class HostControlRequest(Body):
    """`xceadmin hosts open|close|drain HOST --reason TEXT` (CLI-4). The reason is shown to
    every user by `xcecli hosts` and `xceadmin hosts hist`: one line of text, so control
    characters (newlines, tabs, terminal escapes) are refused, as in a job name, and so is a
    reason of spaces alone."""

    reason: str | None = Field(None, max_length=1000)

    @field_validator("reason")
    @classmethod
    def _one_line(cls, v: str | None) -> str | None:
        if v is None:
            return v
        return one_line_text(v, "the reason", "leave --reason out")


class HostControlResult(Body):
    """The host after an open, close or drain; `changed` is false when it was so already
    (`message` says so: "host h2 is already closed")."""

    host: HostOut
    changed: bool
    message: str


class HostEventOut(Body):
    """One entry of a host's history (LSF badmin hhist; CLI-4, SCHED-4): `kind` is open,
    close or drain (by the admin `actor`), drained (its last job ended), lost (no worker for
    host_lost_grace) or rejoined (a worker serves it again after it was lost). `time` is
    epoch seconds on the daemon's clock."""

    time: float
    host: str
    kind: Literal["open", "close", "drain", "drained", "lost", "rejoined"]
    actor: str
    reason: str | None


class HostEventList(Body):
    """`GET /hosts/events`: the history of every host, or of one (`?host=NAME`), oldest first."""

    events: list[HostEventOut]


class QueueOut(Body):
    """A queue of `GET /queues` (LSF bqueues): `njobs`, `pend`, `run`, `susp` are slots, as
    LSF's NJOBS, PEND, RUN and SUSP (IBM bqueues.1: "NJOBS: The total number of slots for jobs
    in the queue"): a pending job counts the fewest slots it asks for, a running or
    suspended one those it holds (xced.controller.queries.queue_counts)."""

    name: str
    priority: int
    description: str
    default: bool
    max_tasks: int | None
    max_run_limit_s: int | None
    max_memory_mb: int | None
    host_limit: int | None
    backfill: bool
    njobs: int
    pend: int
    run: int
    susp: int


class QueueList(Body):
    queues: list[QueueOut]


class ElementGroup(Body):
    """Elements of one array in one state (issue 17 part 4): how many, and their indices as
    runs, exact: "1-500000,500002" (xced.api.arrays.format_runs)."""

    state: JobState
    count: int
    indices: str = Field(description="the indices, consecutive ones folded: \"1-10,12,15-20\"")


class ActionRefusal(Body):
    """A job ID that `xcecli kill` (stop, resume, requeue, release) named and the daemon
    refused whole, with why: the error answer's code and message (xced.api.errors)."""

    id: str = Field(description="the reference as given: \"999\" or \"12[4]\"")
    code: str = Field(description="the error's code, one of: " + ", ".join(CODES))
    reason: str


class ActionResult(Body):
    """Result of kill/stop/resume/requeue/release of one job: what was done to which elements
    (CLI-3; issue 17 part 4). `affected` lists every element acted on, unless the action
    touched more than 100 (xced.api.arrays.SUMMARY_OVER) and the request did not ask for the
    full list (`?full=true`): then `complete` is false, `affected` is empty and `count`,
    `states` say what it did. For an array, `states` groups the elements acted on by their
    state after the action, `skipped` the elements it left alone by their state (a kill leaves
    finished ones). `xcecli ... --json` prints a list of these, one per JOB argument; an ID the
    daemon refused whole is an entry with `refused` set, `affected` empty and `count` 0 (the
    API itself answers such an ID with its error)."""

    job_id: int
    affected: list[str]
    message: str = Field(description="what was done, the elements folded into runs (\"kill requested: 5[1-3,7]\"); "
                                     "past 100 elements, unless `complete`, at most 10 runs are named")
    count: int = Field(0, description="how many elements the action acted on")
    complete: bool = Field(True, description="false: `affected` was left out (more than 100 elements)")
    states: list[ElementGroup] = Field(default_factory=list,
                                       description="an array's elements acted on, by their state after the action")
    skipped: list[ElementGroup] = Field(default_factory=list,
                                        description="an array's elements left alone, by their state")
    note: str | None = Field(None, description="what the action could not do, e.g. a hold of the other kind kept")
    refused: ActionRefusal | None = Field(None, description="xcecli --json only: this JOB argument was refused")


class DryRun(Body):
    """`xcecli submit --dry-run --json`: what the job would be, computed by the daemon with its
    live config and the same code as a submit (CLI-2). `effective.resreq` is the parsed,
    merged requirement in its documented JSON form (README, "Resource requirements")."""

    effective: dict
    warnings: list[str] = Field(default_factory=list)


class ReservationOut(Body):
    """A blocked head's backfill reservation (SCHED-1): `start` in epoch seconds (None: no
    start can be foreseen, since running work ending at its run limits would not make room
    for it: work with no run limit, a load index or a closed host decides; so none was
    made), and the line that says so ("reserved from 2026-12-01 13:05:00 (backfill)")."""

    start: float | None
    text: str


class WhyOut(Body):
    """`xcecli why ID --json`: why an element pends (RES-6) and the scheduler's last word on it."""

    id: str
    state: JobState
    main: str | None
    hosts: list[HostShortfallOut] = Field(default_factory=list)
    hint: str | None = None
    #: every project cap in its way (PRJ-6, PRJ-7), one line each, nearest project first:
    #: "project /physics/hep at quota: 32/32 slots"; empty unless its project holds it back
    caps: list[str] = Field(default_factory=list)
    trace: list[str] = Field(default_factory=list)
    #: the blocked head of a backfilling queue (SCHED-1): its reservation in the newest
    #: session's trace about it, else None
    reservation: ReservationOut | None = None


class AppOut(Body):
    """An application profile as `xcecli apps show NAME --json` prints it (PROF-3): its
    content hash (DISPATCH-1) and every value it binds (the Profile model's fields)."""

    name: str
    description: str = ""
    kind: str
    content_hash: str
    default: bool = Field(False, description="the cluster's default_application")
    profile: dict


class AppList(Body):
    apps: list[AppOut]


class Info(Body):
    """GET /info: who the daemon is and who it thinks you are."""

    cluster_name: str
    mode: Literal["production", "test"]
    version: str
    config_hash: str
    user: str
    asserted_user: bool
    is_admin: bool
    topdir: str
    daemon_user: str


class ClusterParams(Body):
    """GET /params (LSF `lsid`, `bparams`, `badmin showconf mbd`; CLI-8): the cluster's name, the
    host the controller runs on (LSF's master host), XCE's version, and the settings of
    config/xce.yaml in force (xced.model.config.ClusterSettings, as JSON: `clean_period_s`,
    `kill_interval_s` ...), which any user may read, as LSF's bparams shows lsb.params."""

    cluster_name: str
    master_host: str = Field(description="the name of the machine the controller runs on")
    version: str
    settings: dict = Field(description="ClusterSettings in force, as JSON")


class ApplyConfigRequest(RequestBody):
    """PUT /config (`xceadmin build --apply`, CFG-3): a compiled ClusterConfig (its
    `model_dump(mode="json")`) and the hash the compiler gave it, which the daemon checks."""

    config: dict
    hash: str = Field(min_length=64, max_length=64)


class ApplyConfigResult(Body):
    """What a config swap did: the new and previous content hashes, how many pending jobs
    were re-merged with the new profiles and queues, and one line per job the new config
    refuses (each now on a system hold naming why)."""

    hash: str
    previous_hash: str
    remerged: int
    held: list[str]


class RecordRequest(RequestBody):
    """POST /sim/record (`xceadmin sim record`, SIM-2): start recording every scheduler
    session to `<TopDir>/recordings/NAME.jsonl` (a new file the daemon creates), or `stop`."""

    name: str | None = Field(default=None, min_length=1, max_length=1000)  # the daemon says what is valid
    stop: bool = False


class RecordResult(Body):
    """The recording's file and how many sessions it holds so far."""

    path: str
    sessions: int



class ProjectOut(Body):
    """One project as `xcecli projects --json` shows it (PRJ-6..PRJ-8). Resources are keyed
    `slots`, `mem_mb` (MB) and the consumable resources of hosts.yaml (`gpu`, ...); amounts
    are integers when whole."""

    path: str = Field(description="the project's path, its identity (PRJ-1)")
    description: str = ""
    share: dict[str, int | float] = Field(default_factory=dict, description="its own share (PRJ-6) resolved "
                                          "against the hosts present now, rounded down; {}: no share of its own")
    share_configured: dict[str, float] | None = Field(None, description="the share as projects.yaml gives it: "
                                                      "{\"percent\": P} for `share: P%` of every resource of "
                                                      "the parent; else per resource its amount, or "
                                                      "RESOURCE_percent for a percentage; null: none")
    draws_from: str | None = Field(None, description="no share of its own: the path whose unassigned part it draws "
                                                     "from (\"/\": the cluster's); else null")
    unassigned: dict[str, int | float] = Field(default_factory=dict, description="its share minus its children's "
                                               "shares: what its own jobs and its share-less children draw from")
    quota: dict[str, int | float] = Field(default_factory=dict, description="the cap on the subtree's concurrent "
                                          "use (PRJ-7)")
    member_quota: dict[str, int | float] = Field(default_factory=dict, description="the cap on each member's "
                                                 "concurrent use over the subtree (PRJ-7)")
    cap: dict[str, int | float] = Field(default_factory=dict, description="the effective cap of the subtree: the "
                                        "tighter of its share (or the part it draws from), its quota and its "
                                        "ancestors' caps")
    capped: list[str] = Field(default_factory=list, description="resources whose absolute share is more than the "
                                                                "parent's share now, so capped at it")
    use: dict[str, int | float] = Field(default_factory=dict, description="what the subtree's running (RUN, USUSP) "
                                        "elements hold now")
    member_use: dict[str, dict[str, int | float]] = Field(default_factory=dict, description="per member with use, "
                                                          "of the resources of its member_quota")
    pending: int = Field(0, description="pending (PEND, PSUSP) elements of that very project")
    members: list[str] = Field(default_factory=list, description="users and @groups who may submit (PRJ-2)")
    admins: list[str] = Field(default_factory=list, description="the project admins (RBAC-3)")


class ProjectList(Body):
    """GET /projects (PRJ-8): the projects the caller may see, parents before children: those
    it belongs to, the subtrees where it holds project:view, every one for a cluster admin;
    `supply` is what the shares were carved from (the usable hosts' totals)."""

    projects: list[ProjectOut]
    supply: dict[str, int | float] = Field(default_factory=dict)


class PresetOut(Body):
    """A server preset (PRE-3), as `GET /presets/{name}` serves it: its name, its content hash
    ("sha256:<hex>" over the values' canonical JSON, PRE-2) and its values, by the long names
    of `xcecli submit`'s options (xced.api.submit_options), written as on the command line."""

    name: str
    hash: str
    values: dict[str, str | list[str] | dict[str, str]]


class PresetList(Body):
    """`GET /presets`: every valid server preset, sorted by name."""

    presets: list[PresetOut]


#: the latest time a request may name (the year 2100), in epoch seconds: far enough, and a
#: timestamp every platform can convert
MAX_EPOCH = 4_102_444_800


class KeyTrustRequest(RequestBody):
    """POST /keys/trust (`xceadmin keys trust`, KEY-2): trust a public key for a host and roles."""

    public_key: str = Field(max_length=16384, description="one OpenSSH line `ssh-ed25519 AAAA... [comment]`, or PEM")
    host: str = Field(max_length=255)
    roles: list[str] = Field(min_length=1, max_length=4, description="worker, scheduler, apiserver, admin")
    expires: float | None = Field(None, ge=0, le=MAX_EPOCH, allow_inf_nan=False,
                                  description="epoch seconds; null: never (or see expires_in_s); left out "
                                              "with expires_in_s too: never for a new key, kept for a key "
                                              "trusted again")
    expires_in_s: float | None = Field(None, gt=0, le=MAX_RUN_LIMIT_S, allow_inf_nan=False,
                                       description="expires this many seconds after now on the daemon's clock")
    comment: str = Field("", max_length=1024)
    unrevoke: bool = Field(False, description="trust a revoked key again (logged as an `unrevoked` key event)")


class KeyRevokeRequest(RequestBody):
    """POST /keys/revoke (`xceadmin keys revoke`, KEY-4)."""

    fingerprint: str = Field(max_length=128, description="the fingerprint, or a prefix of it that only one key has")
    reason: str | None = Field(None, max_length=1024)


class KeyTokenRequest(RequestBody):
    """POST /keys/token (`xceadmin keys token`, KEY-5)."""

    role: str = Field(max_length=32)
    host: str | None = Field(None, max_length=255)
    expires_s: float = Field(gt=0, le=7 * 86400, allow_inf_nan=False,
                             description="how long the token is valid, seconds (at most 7 days)")


class KeyRevocationOut(Body):
    time: float
    actor: str
    reason: str | None = None


class KeyOut(Body):
    """A key as `xceadmin keys list --json` prints it (KEY-2): `revoked` is set for a revoked
    key (which the store keeps, whatever keys.yaml says); `last_seen` is when a peer last
    joined with it (null: never)."""

    fingerprint: str
    host: str | None
    roles: list[str]
    expires: float | None
    added: float | None
    comment: str
    public_key: str | None
    expired: bool
    revoked: KeyRevocationOut | None = None
    last_seen: float | None = None
    replaced: KeyOut | None = Field(None, description="in the answer of a trust: the entry it replaced, if any")


class KeyList(Body):
    keys: list[KeyOut]


class KeyRevokeResult(Body):
    fingerprint: str
    host: str | None
    closed: int = Field(description="channels authenticated with the key that were closed before the answer")
    already: KeyRevocationOut | None = Field(None, description="the revocation it had already, when it had one")


class KeyTokenOut(Body):
    token: str = Field(description="the token, shown this once; the controller keeps its digest only")
    expires: float
    role: str
    host: str | None
    controller: str | None = Field(None, description="the controller's key fingerprint the token carries (its "
                                                      "TLS pin), or null for a controller without a key")


class ClockRequest(RequestBody):
    """POST /debug/clock (`xceadmin debug clock --advance`, test mode only)."""

    advance_s: float = Field(gt=0, le=MAX_RUN_LIMIT_S, allow_inf_nan=False,
                             description="seconds to move the daemon's clock on (at most 10 years)")


class ClockOut(Body):
    now: float = Field(description="the daemon's time now, epoch seconds")
    offset: float = Field(description="how far ahead of the machine's clock it runs, seconds")


class ChallengeRequest(RequestBody):
    """POST /peers/challenge (KEY-3): a fresh nonce for a peer to sign."""

    purpose: Literal["session", "enroll"] = Field(description="session: an HTTP peer's session; enroll: a "
                                                               "token's enrolment (the worker channel has its own)")


class ChallengeOut(Body):
    nonce: str
    cluster: str
    purpose: str
    controller: str | None = Field(None, description="the controller's key fingerprint (its TLS pin)")
    mode: Literal["test", "production"] = Field(description="the cluster's mode (xce.yaml `mode`): a login host's API "
                                                            "server refuses its clients' asserted users unless it is "
                                                            "test (KEY-1, D-6)")
    expires_in_s: float


class SignedAnswer(RequestBody):
    """A peer's answer to a challenge (KEY-3): the host and role it acts as, the challenge's
    nonce, and its key's signature of xced.auth.keys.join_payload over them."""

    host: str = Field(max_length=255)
    role: str = Field(max_length=32)
    nonce: str = Field(max_length=128)
    signature: str = Field(max_length=512, description="base64 Ed25519 signature of xced.auth.keys.join_payload")


class SessionRequest(SignedAnswer):
    """POST /peers/session (KEY-3): a signed answer to a `session` challenge."""

    fingerprint: str = Field(max_length=128)


class SessionOut(Body):
    session: str = Field(description="the bearer token of the session: `Authorization: XCE-Session TOKEN`")
    expires_in_s: float
    host: str
    role: str


class EnrollRequest(SignedAnswer):
    """POST /peers/enroll (KEY-5): trade a one-time token for trust of a key, signed by it."""

    token: str = Field(max_length=256)
    public_key: str = Field(max_length=16384)


#: the models whose JSON `--json` prints, published as docs/json/NAME.schema.json (CLI-1)
PUBLISHED = {
    "submit": SubmitResponse,
    "pack": PackResponse,
    "job": JobOut,
    "jobs": JobList,
    "events": EventList,
    "hosts": HostList,
    "queues": QueueList,
    "action": ActionResult,
    "launch": LaunchResult,
    "dryrun": DryRun,
    "apps": AppList,
    "app": AppOut,
    "why": WhyOut,
    "info": Info,
    "config-apply": ApplyConfigResult,
    "sim-record": RecordResult,
    "projects": ProjectList,
    "presets": PresetList,
    "preset": PresetOut,
    "keys": KeyList,
    "key": KeyOut,
    "key-revoke": KeyRevokeResult,
    "key-token": KeyTokenOut,
    "clock": ClockOut,
}

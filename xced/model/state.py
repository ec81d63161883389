"""Runtime domain types of jobs and hosts (D-5, JOB-1, RES-2): what the controller keeps in
memory for every job, element and host, and what passes between controller and worker.
Pure data: no I/O. Times epoch seconds, memory MB, slots integers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xced.model.jobs import JobState, PendReason, format_job_ref
from xced.model.spec import EffectiveJob, JobSpec

S = JobState

#: where the path of the job's script goes in a StartInfo's argv (JOB-12): the controller
#: appends it to the argv of a job that has a script (before a job starter wraps it), and
#: the worker replaces it (`with_script`) by the path of the copy it writes to the job's
#: directory. NUL bytes: a submitted argv can never hold one (refused at submit).
SCRIPT_ARG = "\0script\0"


def with_script(argv: list[str], path: str) -> list[str]:
    """`argv` with SCRIPT_ARG replaced by `path`: a word that is SCRIPT_ARG becomes `path`;
    inside a job starter's shell line (xced.controller.dispatch.wrap_with_job_starter) the
    shell-quoted SCRIPT_ARG becomes the shell-quoted path."""
    import shlex

    quoted, to = shlex.quote(SCRIPT_ARG), shlex.quote(path)
    return [path if a == SCRIPT_ARG else a.replace(quoted, to).replace(SCRIPT_ARG, to) for a in argv]


@dataclass(slots=True)
class Element:
    """One element of a job (index 0 for a plain job) with its own state (JOB-4)."""

    job: "Job"
    index: int
    state: JobState
    #: never changed in place (a transition gives a new set), so that an element without holds
    #: shares the one empty frozenset rather than keeping a set of its own (1,000,000 elements)
    holds: set[str] | frozenset[str] = frozenset()
    start_time: float | None = None
    end_time: float | None = None
    exit_code: int | None = None
    exit_signal: str | None = None
    exit_reason: str | None = None
    #: [(host, slots), ...]; never changed in place either (empty: the shared ())
    alloc: list[tuple[str, int]] | tuple = ()
    action: str | None = None  # "kill:ACTOR", "kill-done:ACTOR" (bkill -d), "requeue:ACTOR" or "requeue-hold:ACTOR" (brequeue -H) while a running element is being ended
    pend_reason: PendReason | None = None
    #: the running element's launch token (XCE_JOB_TOKEN, how its own tasks prove they run inside
    #: it to `xcecli launch`): the plain token in memory from dispatch to start only, its SHA-256
    #: in the store (D-7)
    token: str | None = None
    token_hash: str | None = None
    #: failed starts and declined dispatches in a row (DISPATCH-2), stored; 0 again once it starts
    failures: int = 0
    #: not dispatched again before this time (epoch seconds; the backoff after a failure), in memory
    retry_at: float | None = None
    #: what the running element holds per host: {"h1": {"slots": 4, "mem": 4096, "gpu": 1}}
    reserve: dict[str, dict[str, float]] = field(default_factory=dict)
    #: how its processes were kept together, as its supervisor reported at the start
    #: ("cgroup-v2", "cgroup-v1", "subreaper"; JOB-1); stored with its end (migration 0009)
    containment: str | None = None
    #: the stdout and stderr paths its last run writes, as its supervisor reported at the start
    #: (JOB-12: a -o DIR resolved on the execution host); in memory only, None before
    outputs: tuple[str, str] | None = None
    #: how many times it has been dispatched (stored, migration 0011): every dispatch carries
    #: it to the worker, and a copy or report of another attempt is stale and fenced (SCHED-4)
    attempt: int = 0

    @property
    def ref(self) -> str:
        return format_job_ref(self.job.id, self.index)


@dataclass(slots=True)
class Job:
    """A submitted job: what its user asked (`spec`), what the merge made of it
    (`effective`, replaced at a re-merge, CFG-3) and its elements by index."""

    id: int
    name: str | None
    user: str
    queue: str
    submit_time: float
    spec: JobSpec
    effective: EffectiveJob
    elements: dict[int, Element] = field(default_factory=dict)
    unfinished: int = 0  # elements not DONE/EXIT, kept by Controller._transition
    resreq: object = None  # the effective xced.resreq.ResReq (effective.resreq parsed), parsed once
    dependency: object = None  # the -w expression (xced.model.deps.DepExpr) of spec.dependency, parsed once

    @property
    def array_limit(self) -> int | None:
        return self.spec.array_limit

    @property
    def is_array(self) -> bool:
        return self.spec.array_spec is not None

    def finished(self) -> bool:
        return self.unfinished == 0

    def state(self) -> JobState:
        """The job's summary state: the most active state among its elements."""
        if len(self.elements) == 1:  # a plain job: its element's (listings ask this of 10,000 jobs)
            for e in self.elements.values():
                return e.state
        present = {e.state for e in self.elements.values()}
        for s in (S.RUN, S.USUSP, S.PEND, S.PSUSP, S.EXIT, S.DONE):
            if s in present:
                return s
        return S.DONE


@dataclass(slots=True)
class HostState:
    """A host's declared supply and current use (RES-2); `status` ok when a worker serves it."""

    name: str
    slots: int
    memory_mb: int
    resources: dict[str, float]
    attributes: dict[str, str]
    tags: list[str]
    slots_used: int = 0
    mem_used_mb: int = 0
    njobs: int = 0
    #: "ok" (a worker serves it, open), "closed_Adm" (served, closed by an admin) or
    #: "unavail" (no worker): LSF bhosts' words; only "ok" takes new dispatches
    status: str = "unavail"
    resources_used: dict[str, float] = field(default_factory=dict)
    #: why the host is not ok, when known: "its worker's channel closed", "key SHA256:... revoked"
    status_reason: str | None = None
    #: an admin's close or drain (CLI-4, LSF badmin hclose): (who, why, when), kept across
    #: restarts as host events; None while open
    closed: tuple[str, str | None, float] | None = None
    #: a drain runs: closed, and its last job has not ended yet
    draining: bool = False
    #: daemon-clock time its worker went away (or the controller started without it); None
    #: while served. Its jobs are lost host_lost_grace seconds after it (SCHED-4)
    away_since: float | None = None
    #: daemon-clock time it was declared lost (its jobs requeued or ended), until it rejoins
    lost_at: float | None = None
    #: daemon-clock time the controller last heard from its worker over the channel (its join,
    #: a report, or a heartbeat every heartbeat_s, SCHED-4); kept after the worker has gone
    last_heard: float | None = None
    #: LSF's load indices its worker last reported (RES-7, xced.model.load; memory only)
    load: dict[str, float] = field(default_factory=dict)
    #: daemon-clock time of that report; None: none yet
    load_at: float | None = None
    #: daemon-clock time a job last began to hold slots here (a dispatch, or a running job
    #: taken up again at a restart); 0: never. Ties between equally free hosts go to the
    #: host dispatched to least recently (RES-4, xced.scheduler.placement); memory only
    last_dispatch: float = 0.0


@dataclass(slots=True)
class StartInfo:
    """What a worker needs to start one element (JOB-1, JOB-3)."""

    job_id: int
    index: int
    name: str | None
    queue: str
    user: str
    argv: list[str]
    cwd: str
    env: dict[str, str]
    stdout: str | None
    stderr: str | None
    run_limit_s: int | None
    memory_limit_mb: int | None
    alloc: list[tuple[str, int]]
    run_as: str
    run_uid: int | None
    run_gid: int | None
    kill_interval_s: float
    grace_s: float
    token: str = ""
    #: the submitter's umask (e.g. 0o022): the job's output files are made with it and the job
    #: runs with it (D-7, as LSF and Slurm do)
    umask: int = 0o022
    #: PROF-10: the profile's env travels apart from the job's; the profile's names win
    profile_env: dict[str, str] = field(default_factory=dict)
    #: XCE_APP_PARAM_* and XCE_APP_ANN_* (PROF-6, PROF-7)
    export_env: dict[str, str] = field(default_factory=dict)
    app: str | None = None
    #: the profile's hooks (JOB-6): {"pre_job_exec": {"command": str, "timeout_s": float}, ...}
    hooks: dict[str, dict] = field(default_factory=dict)
    #: the job's project path (PRJ-1): XCE_PROJECT and LSB_PROJECT_NAME; None: no project
    project: str | None = None
    #: the element's dispatch count (SCHED-4 fencing): the worker keeps it in spec.json and
    #: sends it with every report; a report of another attempt is ignored
    attempt: int = 0
    #: the most tasks the job asked for (-n MIN,MAX: MAX): LSB_MAX_NUM_PROCESSORS; None: its slots
    ntasks_max: int | None = None
    #: the job's command line as submitted (before a job starter): LSB_JOBNAME of a job without -J
    command: str | None = None
    #: the job's script (JOB-12: one read from standard input), which the worker writes to
    #: the job's directory and puts where argv holds SCRIPT_ARG; None: the job has none
    script: str | None = None
    #: -oo / -eo (LSF bsub -oo/-eo): truncate the stdout / stderr file at the run's start
    stdout_overwrite: bool = False
    stderr_overwrite: bool = False


@dataclass(slots=True)
class TaskSpec:
    """One task of a running parallel job started on a host of the job by `xcecli launch`
    (LSF blaunch; JOB-7), or a host hook run there (JOB-6): what its worker needs to build
    its environment (xced.worker.env.task_environment) and run it."""

    job_id: int
    index: int
    task_id: int
    argv: list[str]
    cwd: str
    #: the job's own environment, as submitted
    env: dict[str, str]
    run_uid: int | None
    run_gid: int | None
    run_as: str
    kill_interval_s: float
    #: seconds before the task is ended (a host hook's timeout, JOB-6); None: no limit
    run_limit_s: float | None = None
    #: the job's umask (D-7): the task runs with it
    umask: int = 0o022
    name: str | None = None
    queue: str = ""
    alloc: list[tuple[str, int]] = field(default_factory=list)
    profile_env: dict[str, str] = field(default_factory=dict)
    export_env: dict[str, str] = field(default_factory=dict)
    app: str | None = None
    #: the task's own names: XCE_TASK_ID, XCE_TASK_HOST; XCE_HOOK, XCE_HOST_TASK_INDEX, XCE_JOB_EXIT_CODE
    extra: dict[str, str] = field(default_factory=dict)
    #: the job's project path (PRJ-1), as on StartInfo
    project: str | None = None
    #: the element's attempt (its dispatch count) the task belongs to: a task of another
    #: attempt found on a rejoining host is a stale copy's, fenced (SCHED-4)
    attempt: int = 0
    #: as on StartInfo: LSB_MAX_NUM_PROCESSORS and LSB_JOBNAME of a job without -J
    ntasks_max: int | None = None
    command: str | None = None


@dataclass(slots=True)
class EndStatus:
    """How an element ended, as its supervisor recorded it (times epoch seconds)."""

    exit_code: int
    signal_name: str | None
    start_time: float | None
    end_time: float
    reason: str | None

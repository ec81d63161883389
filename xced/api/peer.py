"""The worker channel (D-1, KEY-4): messages between the controller and a worker host over
one persistent WebSocket at `/xce/v1/workers/channel`.

Every message is a JSON object with an `op`. The worker opens the channel; in production
mode the controller sends `challenge` (nonce, cluster, purpose), and the worker's `join`
carries its key's fingerprint and signature of it (KEY-3). After `joined` both sides send
messages at any time:

    worker -> controller   join, started, finished, start_failed, launch, reply, heartbeat
    controller -> worker   challenge, joined, refused, start, kill, signal, reattach, end_tasks, request,
                           launched

The worker sends `heartbeat` every `heartbeat_s` seconds (the `joined` answer says how
often; HEARTBEAT_S by default); a controller that hears nothing from a worker for
HEARTBEAT_MISSES beats closes its channel: the host is away, and lost after
host_lost_grace (SCHED-4). Every report about an element carries its `attempt` (the
dispatch count the start carried): a report of another attempt is a stale copy's, ignored.

`request`/`reply` carry an `rid` and are how the controller asks a worker something
(e.g. `read_output` for `xcecli peek`). Units: seconds, MB, slots.

The worker's join carries its first measure of LSF's load indices (`load`), and each
heartbeat the next (RES-7; names and units: xced.model.load).

Every message after the join is one of the typed unions below, `WorkerMessage` (worker ->
controller) and `ControllerMessage` (controller -> worker), parsed strictly at the end
that receives it: a message that fits neither is refused and logged, never half applied.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from xced.model.units import MAX_MEMORY_MB, MAX_RESOURCE, MAX_SLOTS

CHANNEL_PATH = "/workers/channel"
#: the most resources, attributes or tags a host may declare at its join, each name and value
#: at most MAX_NAME characters (a host of hosts.yaml declares a handful)
MAX_ENTRIES = 1024
MAX_NAME = 255
#: seconds between two heartbeats of a worker (SCHED-4)
HEARTBEAT_S = 10.0
#: heartbeats missed in a row after which the controller takes the worker as gone
HEARTBEAT_MISSES = 3


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: a resource, attribute or tag name a worker declares at its join: not empty, at most
#: MAX_NAME characters, no control character (a fresh tester's finding: an attribute
#: holding an escape sequence reached admins' terminals through pend reasons)
_Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME, pattern=r"^[^\x00-\x1f\x7f-\x9f]+$")]
#: an attribute's value: as a name, but it may be empty
_Value = Annotated[str, Field(max_length=MAX_NAME, pattern=r"^[^\x00-\x1f\x7f-\x9f]*$")]


class Join(_Msg):
    """A worker announces itself and what it offers (RES-2). `running` lists the elements
    whose supervisors it still has, as (job ID, index, attempt) (after a restart of either
    side, JOB-8); the controller kills those that are not the current attempt of an element
    dispatched to this host (SCHED-4 fencing). A pair without an attempt is attempt 0."""

    op: Literal["join"] = "join"
    host: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")  # xced.model.units.HOST_PATTERN
    #: the bounds of hosts.yaml (xced.model.units: MAX_SLOTS, MAX_MEMORY_MB, MAX_RESOURCE): a
    #: join offering more is refused with the bound (issue 19: 10^12 slots was taken)
    slots: int = Field(ge=1, le=MAX_SLOTS)
    memory_mb: int = Field(ge=1, le=MAX_MEMORY_MB)
    resources: dict[_Name, Annotated[float, Field(ge=0, le=MAX_RESOURCE, allow_inf_nan=False)]] = Field(
        default_factory=dict, max_length=MAX_ENTRIES)
    attributes: dict[_Name, _Value] = Field(default_factory=dict, max_length=MAX_ENTRIES)
    tags: list[_Name] = Field(default_factory=list, max_length=MAX_ENTRIES)
    running: list[tuple[int, int, int] | tuple[int, int]] = Field(default_factory=list, max_length=1_000_000)
    version: str = ""
    #: the host's load indices now (RES-7, xced.model.load; checked by check_load); null
    #: from a worker that measures none
    load: dict[str, float] | None = Field(None, max_length=64)
    #: production mode (KEY-3): the role, the key's fingerprint, and its signature of the
    #: controller's challenge (xced.auth.keys.join_payload, purpose "worker-channel")
    role: str = Field("worker", max_length=32)
    fingerprint: str | None = Field(None, max_length=128)
    signature: str | None = Field(None, max_length=512)


class EndStatusMsg(_Msg):
    exit_code: int
    signal_name: str | None = None
    start_time: float | None = None
    end_time: float
    reason: str | None = None


#: a job ID and an element index as the channel carries them
JobId = Annotated[int, Field(ge=1, le=10**18)]
Index = Annotated[int, Field(ge=0, le=2**31)]


class StartedMsg(_Msg):
    """The job's process started at `start_time` (epoch seconds), its processes kept
    together by `containment` (JOB-1, issue 15; null from a worker that names none)."""

    op: Literal["started"]
    job_id: JobId
    index: Index
    start_time: float
    containment: Literal["cgroup-v2", "cgroup-v1", "subreaper"] | None = None
    #: the dispatch this copy came from (null from a worker that names none: taken as current)
    attempt: int | None = Field(None, ge=0)
    #: the (stdout, stderr) paths the job writes (JOB-12; null from a worker that names none)
    outputs: tuple[Annotated[str, Field(max_length=4096)], Annotated[str, Field(max_length=4096)]] | None = None


class FinishedMsg(_Msg):
    """The element ended as its supervisor recorded it (JOB-8)."""

    op: Literal["finished"]
    job_id: JobId
    index: Index
    status: EndStatusMsg
    attempt: int | None = Field(None, ge=0)


class StartFailedMsg(_Msg):
    """The worker could not start the element at all (retryable)."""

    op: Literal["start_failed"]
    job_id: JobId
    index: Index
    reason: str = Field(max_length=4096)
    attempt: int | None = Field(None, ge=0)


class HeartbeatMsg(_Msg):
    """The worker is alive (every `heartbeat_s` seconds, SCHED-4), with its host's load
    indices now (RES-7: {index: value}, names and units of xced.model.load, checked there;
    null from a worker that measures none). LSF's LIM updates most indices every 15 s; the
    heartbeat's 10 s is as often, and measuring costs well under a millisecond."""

    op: Literal["heartbeat"]
    load: dict[str, float] | None = Field(None, max_length=64)


class LaunchMsg(_Msg):
    """A process of a job running on this worker asks for a task on one of the job's hosts
    (`xcecli launch`, LSF blaunch, JOB-7), through the worker's own socket: relayed with its
    launch token and its uid from SO_PEERCRED, answered by `launched` with the same `lid`."""

    op: Literal["launch"]
    lid: int = Field(ge=1)
    job_id: JobId
    index: Index
    host: str = Field(max_length=255)
    argv: list[str] = Field(min_length=1, max_length=4096)
    token: str = Field(max_length=256)
    uid: int | None = Field(None, ge=0, le=2**32)
    #: the task's place in LSB_HOSTS (LaunchRequest.rank), null: none given
    rank: int | None = Field(None, ge=0, le=2**31)


class ReplyMsg(_Msg):
    """The answer to the controller's request `rid` (a task's end, an output)."""

    op: Literal["reply"]
    rid: int = Field(ge=1)
    result: Any = None


WorkerMessage = Annotated[Union[StartedMsg, FinishedMsg, StartFailedMsg, LaunchMsg, ReplyMsg, HeartbeatMsg],
                          Field(discriminator="op")]
#: parses one worker -> controller message; raises pydantic.ValidationError
WORKER_MESSAGE: TypeAdapter = TypeAdapter(WorkerMessage)


class StartMsg(_Msg):
    """Start an element: the fields of xced.model.state.StartInfo."""

    op: Literal["start"]
    info: dict


class ElementMsg(_Msg):
    """kill (LSF's kill sequence), reattach (find its supervisor again: that of dispatch
    `attempt`, SCHED-4), end_tasks."""

    op: Literal["kill", "reattach", "end_tasks"]
    job_id: JobId
    index: Index
    attempt: int | None = Field(None, ge=0)


class SignalMsg(_Msg):
    """Send `sig` to the element's process group (SIGSTOP, SIGCONT)."""

    op: Literal["signal"]
    job_id: JobId
    index: Index
    sig: int = Field(ge=1, le=64)


class RequestMsg(_Msg):
    """Ask the worker something: run a task (`launch_task`, args {"task": TaskSpec fields}) or
    read an output (`read_output`, args {job_id, index, stream, max_bytes})."""

    op: Literal["request"]
    rid: int = Field(ge=1)
    what: Literal["launch_task", "read_output"]
    args: dict


class LaunchedMsg(_Msg):
    """The answer to a worker's `launch`: the task's end (`result`, LaunchResult's fields)
    or `error` ({"status", "code", "message"}, the API's error as the controller raised it)."""

    op: Literal["launched"]
    lid: int = Field(ge=1)
    result: dict | None = None
    error: dict | None = None


ControllerMessage = Annotated[Union[StartMsg, ElementMsg, SignalMsg, RequestMsg, LaunchedMsg],
                              Field(discriminator="op")]
#: parses one controller -> worker message; raises pydantic.ValidationError
CONTROLLER_MESSAGE: TypeAdapter = TypeAdapter(ControllerMessage)

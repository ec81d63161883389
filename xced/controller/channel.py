"""The controller's end of the worker channel (D-1): `RemoteWorkerLink` is the controller's
WorkerLink for a host joined over TCP, whose calls become messages on the host's channel
(`xced.api.peer`), and `handle_worker_message` applies what the worker reports. The
worker's end is `xced.worker.remote`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import asdict
from typing import Any, Callable

from pydantic import ValidationError

from xced.api.peer import WORKER_MESSAGE, FinishedMsg, HeartbeatMsg, LaunchMsg, ReplyMsg, StartedMsg
from xced.model.jobs import ACTIVE
from xced.model.state import EndStatus, StartInfo

log = logging.getLogger("xced.controller.channel")

#: seconds a controller waits for a worker's reply to a request
REQUEST_TIMEOUT_S = 10.0


class RemoteWorkerLink:
    """The controller's handle on a worker joined over the channel. `send` queues one
    message (a dict) for the channel's sender; replies resolve pending requests."""

    def __init__(self, host: str, send: Callable[[dict], None]) -> None:
        self.host = host
        self._send = send
        self._rids = itertools.count(1)
        #: why the controller closed the channel (a revoked or expired key), for the host's status
        self.left_reason: str | None = None
        #: the launches it relays, running (xced.controller.channel.relay_launch)
        self.tasks: set[asyncio.Task] = set()
        self._pending: dict[int, asyncio.Future] = {}
        #: refused messages by kind (`refused`): the first of each kind is logged, the rest counted
        self.refusals: dict[str, int] = {}

    def refused(self, kind: str) -> bool:
        """Count a refused message of `kind` (why it was refused and its op, or its fault's
        field and type); True for the first of its kind on this channel, the only one
        logged: a worker that floods its channel with bad reports makes one line per kind,
        not one per message (issue 19), and `close` logs how many more there were."""
        n = self.refusals.get(kind, 0)
        self.refusals[kind] = n + 1
        return n == 0

    def start(self, info: StartInfo) -> None:
        self._send({"op": "start", "info": asdict(info)})

    def kill(self, job_id: int, index: int, attempt: int | None = None) -> bool:
        """LSF's kill sequence for the element on this host; `attempt`: only a copy of that
        dispatch (a stale copy, SCHED-4 fencing)."""
        self._send({"op": "kill", "job_id": job_id, "index": index, "attempt": attempt})
        return True

    def signal(self, job_id: int, index: int, sig: int) -> bool:
        self._send({"op": "signal", "job_id": job_id, "index": index, "sig": int(sig)})
        return True

    def reattach(self, job_id: int, index: int, attempt: int | None = None) -> None:
        self._send({"op": "reattach", "job_id": job_id, "index": index, "attempt": attempt})

    async def launch_task(self, task) -> dict:
        """Run a task on this host and wait for its end (no timeout: tasks run as long as they run)."""
        return await self.request("launch_task", timeout=None, task=asdict(task))

    def end_tasks(self, job_id: int, index: int, attempt: int | None = None) -> None:
        """End the element's tasks on this host; `attempt`: only those of that dispatch (SCHED-4)."""
        self._send({"op": "end_tasks", "job_id": job_id, "index": index, "attempt": attempt})

    async def read_output(self, job_id: int, index: int, stream: str, max_bytes: int) -> dict | str | None:
        """The worker's answer (LocalWorker.read_output; a str from a worker of an older XCE)."""
        res = await self.request("read_output", job_id=job_id, index=index, stream=stream, max_bytes=max_bytes)
        return res if isinstance(res, (str, dict)) else None

    async def request(self, what: str, timeout: float | None = REQUEST_TIMEOUT_S, **args: Any) -> Any:
        """Ask the worker something; its reply's `result`, or None after `timeout` seconds
        or when the channel closes."""
        rid = next(self._rids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        self._send({"op": "request", "rid": rid, "what": what, "args": args})
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            return None
        finally:
            self._pending.pop(rid, None)

    def resolve(self, rid: int, result: Any) -> None:
        fut = self._pending.get(rid)
        if fut is not None and not fut.done():
            fut.set_result(result)

    def close(self) -> None:
        more = {k: n - 1 for k, n in self.refusals.items() if n > 1}
        if more:
            log.warning("worker %s: refused messages not logged, by kind: %s", self.host,
                        ", ".join(f"{k} {n}" for k, n in sorted(more.items())))
        for fut in self._pending.values():
            if not fut.done():
                fut.set_result(None)
        for t in list(self.tasks):  # no channel to answer on: the tasks themselves run on
            t.cancel()


def handle_worker_message(ctl, link: RemoteWorkerLink, raw: dict) -> bool:
    """Apply one message from a joined worker to the controller: one of
    xced.api.peer.WorkerMessage, parsed strictly (anything else is refused and logged). A
    report about an element (started, finished, start_failed) is accepted only when that
    element runs on this very worker's host, i.e. was dispatched to it (D-7): a worker may
    not end, or claim, a job of another host. Returns whether the message was applied."""
    try:
        msg = WORKER_MESSAGE.validate_python(raw)
    except ValidationError as e:
        err = e.errors()[0]
        if link.refused(f"invalid {'.'.join(str(x) for x in err.get('loc', ())) or 'op'} {err.get('type')}"):
            log.warning("worker %s sent a message that is not part of the channel (%s: %s); refused (the first "
                        "of its kind on this channel: the others are counted, not logged)", link.host,
                        ".".join(str(x) for x in err.get("loc", ())) or "op", err.get("msg"))
        return False
    if isinstance(msg, HeartbeatMsg):  # any message counts as one (the channel's route notes the time)
        if msg.load:  # RES-7: the host's load indices now
            ctl.host_load(link, msg.load)
        return True
    if isinstance(msg, ReplyMsg):
        link.resolve(msg.rid, msg.result)
        return True
    if isinstance(msg, LaunchMsg):
        return relay_launch(ctl, link, msg)
    host = ctl.element_host(msg.job_id, msg.index)
    if host != link.host and msg.attempt is not None and ctl.is_stale_copy(msg.job_id, msg.index, msg.attempt):
        if link.refused(f"stale {msg.op}"):
                log.info("worker %s reported %s of a stale copy of job %s (attempt %d); ignored (SCHED-4)", link.host,
                     msg.op, f"{msg.job_id}[{msg.index}]" if msg.index else msg.job_id, msg.attempt)
        return False
    if host != link.host:
        if link.refused(f"not its job {msg.op}"):
            log.warning("worker %s reported %s of job %s, which %s; refused (the first of its kind on this channel: "
                        "the others are counted, not logged)", link.host, msg.op,
                        f"{msg.job_id}[{msg.index}]" if msg.index else msg.job_id,
                        "is not running" if host is None else f"runs on {host}, not on {link.host}")
        return False
    if isinstance(msg, StartedMsg):
        ctl.on_started(msg.job_id, msg.index, msg.start_time, msg.containment, attempt=msg.attempt,
                       outputs=msg.outputs)
    elif isinstance(msg, FinishedMsg):
        st = msg.status
        ctl.on_finished(msg.job_id, msg.index, EndStatus(st.exit_code, st.signal_name, st.start_time, st.end_time,
                                                         st.reason), attempt=msg.attempt)
    else:
        ctl.on_start_failed(msg.job_id, msg.index, msg.reason, attempt=msg.attempt)
    return True


def relay_launch(ctl, link: RemoteWorkerLink, msg: LaunchMsg) -> bool:
    """A launch a worker relays for a process of a job that runs on it (JOB-7 across hosts
    in production, where jobs reach the controller through their host's worker only): the
    job must hold this worker's host (D-7: a worker relays for its own jobs only); then
    `ctl.launch` with the job's token and the process's uid, as for the controller's own
    socket, answered by `launched` when the task ends. Returns whether it was taken."""
    job = ctl.jobs.get(msg.job_id)
    e = job.elements.get(msg.index) if job else None
    if e is None or link.host not in (h for h, _ in e.alloc) or e.state not in ACTIVE:
        if link.refused("launch"):
            log.warning("worker %s relayed a launch for %s, which does not run there; refused", link.host,
                        f"{msg.job_id}[{msg.index}]" if msg.index else msg.job_id)
        link._send({"op": "launched", "lid": msg.lid, "error": {
            "status": 403, "code": "forbidden",
            "message": f"job {msg.job_id} does not run on {link.host}: a worker relays launches of its own jobs only"}})
        return False

    async def run() -> None:
        from xced.api.errors import XceError

        try:
            result = await ctl.launch(msg.job_id, msg.index, msg.host, list(msg.argv), msg.token, None, msg.uid,
                                      rank=msg.rank)
            link._send({"op": "launched", "lid": msg.lid, "result": result})
        except XceError as err:
            link._send({"op": "launched", "lid": msg.lid, "error": {"status": err.status, "code": err.code,
                                                                   "message": err.message}})
        except Exception as err:  # noqa: BLE001 - the job's process gets an answer in any case
            log.exception("relayed launch of job %s failed", msg.job_id)
            link._send({"op": "launched", "lid": msg.lid, "error": {"status": 500, "code": "server_error",
                                                                   "message": f"internal error in xced: {err}"}})

    task = asyncio.get_running_loop().create_task(run())
    link.tasks.add(task)
    task.add_done_callback(link.tasks.discard)
    return True

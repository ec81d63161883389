"""Worker hosts that join a controller over TCP (D-1): both ends of the worker channel.

Controller side: `RemoteWorkerLink` is the controller's WorkerLink for a joined host; its
calls become messages on the host's channel (`xced.api.peer`).

Worker side: `run_worker()` is `xced --roles worker --controller tcp://HOST:PORT`: it
joins, runs the elements the controller dispatches to it under their supervisors (the
same LocalWorker as the single-process daemon), reports starts and ends, and rejoins
after a lost connection, listing the elements it still supervises so nothing is lost
(JOB-8). Test mode only for now: peers authenticate with keys in their own issue (KEY-1).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from xced.api.peer import CHANNEL_PATH, EndStatusMsg, Join
from xced.constants import API_PREFIX
from xced.model.state import EndStatus, StartInfo

log = logging.getLogger("xced.worker.remote")

#: seconds before the first attempt to rejoin the controller; doubles up to REJOIN_MAX_S
REJOIN_DELAY_S = 0.5
REJOIN_MAX_S = 10.0
#: seconds a worker keeps retrying when its host name is still joined (its own old channel)
DUPLICATE_RETRY_S = 30.0
#: seconds a controller waits for a worker's reply to a request
REQUEST_TIMEOUT_S = 10.0


class RemoteWorkerLink:
    """The controller's handle on a worker joined over the channel. `send` queues one
    message (a dict) for the channel's sender; replies resolve pending requests."""

    def __init__(self, host: str, send: Callable[[dict], None]) -> None:
        self.host = host
        self._send = send
        self._rids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}

    def start(self, info: StartInfo) -> None:
        self._send({"op": "start", "info": asdict(info)})

    def kill(self, job_id: int, index: int) -> bool:
        self._send({"op": "kill", "job_id": job_id, "index": index})
        return True

    def signal(self, job_id: int, index: int, sig: int) -> bool:
        self._send({"op": "signal", "job_id": job_id, "index": index, "sig": int(sig)})
        return True

    def reattach(self, job_id: int, index: int) -> None:
        self._send({"op": "reattach", "job_id": job_id, "index": index})

    async def launch_task(self, task) -> dict:
        """Run a task on this host and wait for its end (no timeout: tasks run as long as they run)."""
        return await self.request("launch_task", timeout=None, task=asdict(task))

    def end_tasks(self, job_id: int, index: int) -> None:
        self._send({"op": "end_tasks", "job_id": job_id, "index": index})

    async def read_output(self, job_id: int, index: int, stream: str, max_bytes: int) -> str | None:
        res = await self.request("read_output", job_id=job_id, index=index, stream=stream, max_bytes=max_bytes)
        return res if isinstance(res, str) else None

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
        for fut in self._pending.values():
            if not fut.done():
                fut.set_result(None)


#: the worker's reports about an element; each is accepted only from the element's first host
_ELEMENT_REPORTS = ("started", "finished", "start_failed")


def handle_worker_message(ctl, link: RemoteWorkerLink, msg: dict) -> bool:
    """Apply one message from a joined worker to the controller. A report about an element
    (started, finished, start_failed) is accepted only when that element runs on this very
    worker's host, i.e. was dispatched to it (D-7): a worker may not end, or claim, a job of
    another host. Anything else is refused and logged. Returns whether it was accepted."""
    op = msg.get("op")
    if op in _ELEMENT_REPORTS:
        job_id, index = int(msg["job_id"]), int(msg["index"])
        host = ctl.element_host(job_id, index)
        if host != link.host:
            log.warning("worker %s reported %s of job %s, which %s; refused", link.host, op,
                        f"{job_id}[{index}]" if index else job_id,
                        "is not running" if host is None else f"runs on {host}, not on {link.host}")
            return False
    if op == "started":
        ctl.on_started(job_id, index, float(msg["start_time"]))
    elif op == "finished":
        st = EndStatusMsg.model_validate(msg["status"])
        ctl.on_finished(job_id, index, EndStatus(st.exit_code, st.signal_name, st.start_time, st.end_time, st.reason))
    elif op == "start_failed":
        ctl.on_start_failed(job_id, index, str(msg["reason"]))
    elif op == "reply":
        link.resolve(int(msg["rid"]), msg.get("result"))
    else:
        log.warning("worker %s sent an unknown message %r; refused", link.host, op)
        return False
    return True


# ---------------------------------------------------------------------- worker side


class ChannelReporter:
    """What the worker's LocalWorker reports to: messages queued for the controller. The
    queue outlives a lost connection, so reports made while disconnected go out on rejoin."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict] = asyncio.Queue()

    def on_started(self, job_id: int, index: int, start_time: float) -> None:
        self.queue.put_nowait({"op": "started", "job_id": job_id, "index": index, "start_time": start_time})

    def on_finished(self, job_id: int, index: int, st: EndStatus) -> None:
        self.queue.put_nowait({"op": "finished", "job_id": job_id, "index": index, "status": {
            "exit_code": st.exit_code, "signal_name": st.signal_name, "start_time": st.start_time,
            "end_time": st.end_time, "reason": st.reason}})

    def on_start_failed(self, job_id: int, index: int, reason: str) -> None:
        self.queue.put_nowait({"op": "start_failed", "job_id": job_id, "index": index, "reason": reason})


def running_elements(jobs_dir: Path) -> list[tuple[int, int]]:
    """(job_id, index) of every element whose supervisor is alive on this host."""
    from xced.worker import procs

    out = []
    if not jobs_dir.is_dir():
        return out
    for jd in jobs_dir.iterdir():
        if not jd.name.isdigit():
            continue
        for ed in jd.iterdir():
            if ed.name.isdigit() and procs.is_alive(ed):
                out.append((int(jd.name), int(ed.name)))
    return sorted(out)


async def run_worker(url: str, join: Join, topdir: Path, stop: asyncio.Event) -> None:
    """Serve as worker host `join.host` for the controller at `url` (`tcp://HOST:PORT`)
    until `stop` is set. Rejoins after a lost connection every REJOIN_DELAY_S."""
    import websockets

    from xced.worker.local import LocalWorker

    if not url.startswith("tcp://"):
        raise ValueError(f"--controller {url!r}: expected tcp://HOST:PORT")
    ws_url = "ws://" + url[len("tcp://"):] + API_PREFIX + CHANNEL_PATH
    reporter = ChannelReporter()
    worker = LocalWorker(join.host, topdir, reporter, {"XCE_CONTROLLER": url})
    delay = REJOIN_DELAY_S
    started = time.monotonic()
    try:
        while not stop.is_set():
            try:
                async with websockets.connect(ws_url, max_size=2**24, open_timeout=5) as ws:
                    delay = REJOIN_DELAY_S
                    await _serve_channel(ws, join, worker, reporter, topdir, stop)
            except (OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException) as e:
                log.warning("channel to %s: %s; rejoining in %.1f s (is the controller running, and is %s its "
                            "run/xced.port?)", url, e, delay, url)
            except _Refused as e:
                # a restarted worker may race its old channel's close: retry that for a while
                if "already joined" in str(e) and time.monotonic() - started < DUPLICATE_RETRY_S:
                    log.warning("the controller refused this worker for now: %s; retrying", e)
                else:
                    log.error("the controller refused this worker: %s", e)
                    raise
            if not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                except asyncio.TimeoutError:
                    pass
                delay = min(delay * 2, REJOIN_MAX_S)
    finally:
        await worker.close()


class _Refused(Exception):
    pass


async def _serve_channel(ws, join: Join, worker, reporter: ChannelReporter, topdir: Path, stop: asyncio.Event) -> None:
    hello = join.model_copy(update={"running": running_elements(topdir / "jobs")})
    await ws.send(hello.model_dump_json())
    answer = json.loads(await ws.recv())
    if answer.get("op") != "joined":
        raise _Refused(answer.get("reason", "no reason given"))
    log.info("joined the controller as host %s", join.host)

    async def sender() -> None:
        while True:
            msg = await reporter.queue.get()
            try:
                await ws.send(json.dumps(msg))
            except Exception:
                reporter.queue.put_nowait(msg)  # resend after rejoining
                raise

    task_runs: set[asyncio.Task] = set()

    async def run_task(msg: dict) -> None:
        from xced.model.state import TaskSpec

        result = await worker.launch_task(TaskSpec(**msg["args"]["task"]))
        reporter.queue.put_nowait({"op": "reply", "rid": msg["rid"], "result": result})

    async def receiver() -> None:
        async for raw in ws:
            msg = json.loads(raw)
            op = msg.get("op")
            if op == "start":
                info = dict(msg["info"])
                info["alloc"] = [tuple(a) for a in info["alloc"]]
                worker.start(StartInfo(**info))
            elif op == "kill":
                worker.kill(msg["job_id"], msg["index"])
            elif op == "signal":
                worker.signal(msg["job_id"], msg["index"], msg["sig"])
            elif op == "reattach":
                worker.reattach(msg["job_id"], msg["index"])
            elif op == "end_tasks":
                worker.end_tasks(msg["job_id"], msg["index"])
            elif op == "request" and msg.get("what") == "launch_task":
                task_msg = msg  # answered when the task ends; the channel keeps serving meanwhile
                task_runs.add(asyncio.create_task(run_task(task_msg)))
            elif op == "request":
                result = None
                if msg.get("what") == "read_output":
                    a = msg["args"]
                    result = worker.read_output(a["job_id"], a["index"], a["stream"], a["max_bytes"])
                reporter.queue.put_nowait({"op": "reply", "rid": msg["rid"], "result": result})
            else:
                log.warning("unknown message from the controller: %r", op)

    tasks = {asyncio.create_task(sender()), asyncio.create_task(receiver()), asyncio.create_task(stop.wait())}
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in done:
            if t.exception() is not None and not isinstance(t.exception(), asyncio.CancelledError):
                raise t.exception()
    finally:
        for t in (*tasks, *task_runs):
            t.cancel()
        await asyncio.gather(*tasks, *task_runs, return_exceptions=True)

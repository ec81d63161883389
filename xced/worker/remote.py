"""Worker hosts that join a controller over TCP (D-1): the worker's end of the channel (the
controller's end is `xced.controller.channel`).

`run_worker()` is `xced --roles worker --controller tcp://HOST:PORT`: it
joins, runs the elements the controller dispatches to it under their supervisors (the
same LocalWorker as the single-process daemon), reports starts and ends, and rejoins
after a lost connection, listing the elements it still supervises so nothing is lost
(JOB-8).

With a pin (the controller's key fingerprint: `--controller-key`, the enrolment token's,
or the one saved in `<TopDir>/keys/controller` at the last join) the channel is TLS pinned
to the controller's key (KEY-6, xced.auth.tls) and the worker answers the controller's
challenge with its own host key (KEY-3). Without one it joins a test-mode controller over
plain TCP, as harnesses do. `--enroll TOKEN` first trades the token for trust of the
worker's key (KEY-5). A refusal (an untrusted, revoked or expired key) ends the worker
with the controller's reason; it does not retry. A controller that cannot be reached, or
whose store is busy or failing, is tried again with a back-off, enrolment included; so is a
refusal of a host name that is joined already, logged once: it may be this worker's own old
channel, which the controller drops at the latest when its heartbeats stop (SCHED-4).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

from xced.api.peer import CHANNEL_PATH, HEARTBEAT_S, Join
from xced.auth.tls import save_pin as _save_pin
from xced.constants import API_PREFIX
from xced.model.state import EndStatus, StartInfo

log = logging.getLogger("xced.worker.remote")

#: seconds before the first attempt to rejoin the controller; doubles up to REJOIN_MAX_S
REJOIN_DELAY_S = 0.5
REJOIN_MAX_S = 10.0


# ---------------------------------------------------------------------- worker side


#: messages that belong to the channel they were made for: a reply names a request of that
#: channel (its `rid`), a relayed launch was answered `unreachable` when the channel was lost
CHANNEL_BOUND_OPS = frozenset({"reply", "launch", "heartbeat"})


class ChannelReporter:
    """What the worker's LocalWorker reports to: messages queued for the controller. The
    queue outlives a lost connection, so reports made while disconnected go out on rejoin;
    what belongs to the lost channel is dropped at its end (`channel_lost`)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict] = asyncio.Queue()

    def channel_lost(self) -> int:
        """Drop the queued messages bound to the channel that ended (CHANNEL_BOUND_OPS): a
        reply sent on the next channel could answer another request of the same `rid` there
        (a stale task's end taken for a new task's, SCHED-4), and a launch the job's process
        was told failed would run all the same. Reports (started, finished, start_failed)
        stay, in order. Returns how many were dropped."""
        keep, dropped = [], 0
        while not self.queue.empty():
            msg = self.queue.get_nowait()
            if msg.get("op") in CHANNEL_BOUND_OPS:
                dropped += 1
            else:
                keep.append(msg)
        for msg in keep:
            self.queue.put_nowait(msg)
        return dropped

    def on_started(self, job_id: int, index: int, start_time: float, containment: str | None = None,
                   attempt: int | None = None, outputs: tuple[str, str] | None = None) -> None:
        self.queue.put_nowait({"op": "started", "job_id": job_id, "index": index, "start_time": start_time,
                               "containment": containment, "attempt": attempt,
                               "outputs": list(outputs) if outputs else None})

    def on_finished(self, job_id: int, index: int, st: EndStatus, attempt: int | None = None) -> None:
        self.queue.put_nowait({"op": "finished", "job_id": job_id, "index": index, "status": {
            "exit_code": st.exit_code, "signal_name": st.signal_name, "start_time": st.start_time,
            "end_time": st.end_time, "reason": st.reason}, "attempt": attempt})

    def on_start_failed(self, job_id: int, index: int, reason: str, attempt: int | None = None) -> None:
        self.queue.put_nowait({"op": "start_failed", "job_id": job_id, "index": index, "reason": reason,
                               "attempt": attempt})


class LaunchRelay:
    """The worker's end of the launches it relays (JOB-7; xced.server.relay serves the
    socket): `forward(job_id, body, uid)` sends a `launch` on the channel and waits for its
    `launched`, returning (HTTP status, JSON body). While the channel is down, and for a
    launch in flight when it drops, the answer is 503 `unreachable`: the job's process may
    try again; a task already started keeps running and is ended with its job."""

    def __init__(self) -> None:
        import itertools

        self.reporter: ChannelReporter | None = None
        self.connected = False
        self._lids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}

    async def forward(self, job_id: int, body: dict, uid: int | None) -> tuple[int, dict]:
        if not self.connected or self.reporter is None:
            return self._unreachable("this worker is not joined to the controller now")
        from pydantic import ValidationError

        from xced.api.peer import LaunchMsg

        lid = next(self._lids)
        msg = {"op": "launch", "lid": lid, "job_id": job_id, "index": body["index"], "host": body["host"],
               "argv": body["argv"], "token": body["token"], "uid": uid, "rank": body.get("rank")}
        try:  # what the controller would refuse unanswered is answered here
            LaunchMsg.model_validate(msg)
        except ValidationError as e:
            err = e.errors()[0]
            return 422, {"error": {"code": "invalid", "message": f"not a launch this host relays: "
                                   f"{'.'.join(str(x) for x in err.get('loc', ()))}: {err.get('msg')}",
                                   "field": None}}
        fut = asyncio.get_running_loop().create_future()
        self._pending[lid] = fut
        self.reporter.queue.put_nowait(msg)
        try:
            return await fut
        finally:
            self._pending.pop(lid, None)

    def answer(self, lid: int, result: dict | None, error: dict | None) -> None:
        fut = self._pending.get(lid)
        if fut is None or fut.done():
            return
        if result is not None:
            fut.set_result((200, result))
        else:
            err = error or {}
            fut.set_result((int(err.get("status", 500)), {"error": {"code": err.get("code", "server_error"),
                                                                     "message": err.get("message", "no answer"),
                                                                     "field": None}}))

    def lost(self) -> None:
        self.connected = False
        for fut in self._pending.values():
            if not fut.done():
                fut.set_result(self._unreachable("the channel to the controller was lost while the task ran; the "
                                                 "task keeps running and is ended with its job"))

    @staticmethod
    def _unreachable(why: str) -> tuple[int, dict]:
        return 503, {"error": {"code": "unreachable", "message": why, "field": None}}


def running_elements(jobs_dir: Path) -> list[tuple[int, int, int]]:
    """(job_id, index, attempt) of every element with a live supervisor on this host: its
    own (on its first host) or a task's (`xcecli launch` or a host hook, in JOBDIR/tasks/ID,
    on any host of the job). The attempt is the one the spec.json names (0 when it names
    none: dispatched before attempts were kept). What the join reports, for the
    controller's fencing (SCHED-4): a stale task on a job's second host is found too."""
    from xced.worker import procs
    from xced.worker.local import spec_attempt

    out: set[tuple[int, int, int]] = set()
    if not jobs_dir.is_dir():
        return []
    for jd in jobs_dir.iterdir():
        if not jd.name.isdigit():
            continue
        for ed in jd.iterdir():
            if not ed.name.isdigit():
                continue
            if procs.is_alive(ed):
                out.add((int(jd.name), int(ed.name), spec_attempt(ed)))
            tasks = ed / "tasks"
            if tasks.is_dir():
                for td in tasks.iterdir():
                    if td.name.isdigit() and procs.is_alive(td):
                        out.add((int(jd.name), int(ed.name), spec_attempt(td)))
    return sorted(out)


async def run_worker(url: str, join: Join, topdir: Path, stop: asyncio.Event, *, pin: str | None = None, key=None,
                     enroll: str | None = None, relay: LaunchRelay | None = None,
                     job_env: dict[str, str] | None = None) -> None:
    """Serve as worker host `join.host` for the controller at `url` (`tcp://HOST:PORT`)
    until `stop` is set. Rejoins after a lost connection every REJOIN_DELAY_S. With `pin`
    and `key`: TLS pinned to the controller, and a keyed join; `enroll`: a token to trade
    for trust of `key` first; `relay`: the launches this worker's socket relays, and
    `job_env` what its jobs are given to reach it (default: XCE_CONTROLLER, the test-mode
    way over TCP). Raises _Refused (an Exception) with the controller's reason
    when it refuses this worker, PinMismatch for a controller with another key."""
    import websockets
    import websockets.exceptions

    from xced.api.peer_client import parse_controller_url
    from xced.worker.local import LocalWorker

    host, port = parse_controller_url(url)
    netloc = url[len("tcp://"):]
    ws_url = ("wss://" if pin else "ws://") + netloc + API_PREFIX + CHANNEL_PATH
    reporter = ChannelReporter()
    if relay is not None:
        relay.reporter = reporter
    worker = LocalWorker(join.host, topdir, reporter, job_env if job_env is not None else {"XCE_CONTROLLER": url})
    from xced.worker.load import LoadSampler

    sampler = LoadSampler()  # RES-7: kept across rejoins, so its averages go on
    delay = REJOIN_DELAY_S
    refused_said: str | None = None  # the duplicate-name refusal last logged (logged once)
    ssl_ctx = None
    try:
        while not stop.is_set():
            try:
                if pin and ssl_ctx is None:
                    from xced.auth.tls import pinned_client_context

                    ssl_ctx = await asyncio.to_thread(pinned_client_context, host, port, pin)
                if enroll:
                    await _enroll(url, pin, key, join.host, enroll)
                    enroll = None
                async with websockets.connect(ws_url, max_size=2**24, open_timeout=5, ssl=ssl_ctx) as ws:
                    def joined() -> None:  # the delay starts over only once joined, never at a refusal
                        nonlocal delay, refused_said
                        delay = REJOIN_DELAY_S
                        refused_said = None
                        if pin:
                            _save_pin(topdir, pin)

                    try:
                        await _serve_channel(ws, join, worker, reporter, topdir, stop, key, joined, relay, sampler)
                    finally:
                        if relay is not None:
                            relay.lost()
                        reporter.channel_lost()
            except (OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException) as e:
                import ssl

                from xced.auth.tls import PinMismatch

                if isinstance(e, PinMismatch):
                    raise
                if isinstance(e, ssl.SSLCertVerificationError) and pin:
                    ssl_ctx = None  # the controller presents another certificate now: probe it again (KEY-6)
                if not pin and isinstance(e, websockets.exceptions.InvalidHandshake) and await _speaks_tls(host, port):
                    raise _Refused(f"the controller at {url} serves TLS (production mode, or listen.tls): this worker "
                                   f"needs its key: give --controller-key (the controller's keys/host.pub or its "
                                   f"fingerprint) or --enroll TOKEN") from None
                log.warning("channel to %s: %s; rejoining in %.1f s (is the controller running, and is %s its "
                            "run/xced.port?)", url, e, delay, url)
            except _Refused as e:
                # a restarted worker may race its old channel's close (which the controller
                # drops at the latest when its heartbeats stop), and a second worker of the same
                # name waits for the first to go: tried again with the back-off, said once
                if "already joined" in str(e):
                    if refused_said != str(e):
                        log.warning("the controller refused this worker: %s; trying again with a back-off of up to "
                                    "%.0f s (said once)", e, REJOIN_MAX_S)
                        refused_said = str(e)
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


async def _speaks_tls(host: str, port: int) -> bool:
    """Whether the controller at host:port answers a TLS handshake (a keyed controller that
    a worker without a pin reached over plain TCP)."""
    from xced.auth.tls import presented_certificate

    try:
        await asyncio.to_thread(presented_certificate, host, port, 5.0)
        return True
    except OSError:
        return False


async def _enroll(url: str, pin: str | None, key, host: str, token: str) -> None:
    """Trade `token` for trust of `key` as a worker of `host` (KEY-5). Raises _Refused with
    the controller's reason; OSError, which `run_worker` retries with its back-off, when
    the controller cannot be reached or its store is busy or failing (503): the controller
    spends the token only in the transaction that trusts the key, so a failed try leaves
    it good for the next."""
    from xced.api.errors import DaemonUnreachable, StoreBusy, StoreUnavailable, XceError
    from xced.api.peer_client import PeerClient
    from xced.auth.keys import public_line

    if not pin:
        raise _Refused("enrolment needs the controller's key: the token carries none; give --controller-key")
    pc = PeerClient(url, pin, key, host, "worker")
    try:
        entry = await pc.enroll(token, public_line(key.public_key(), f"xced worker {host}"))
    except (DaemonUnreachable, StoreBusy, StoreUnavailable) as e:
        raise OSError(f"enrolment: {e.message}") from None
    except XceError as e:
        raise _Refused(f"enrolment refused: {e.message}") from None
    finally:
        await pc.close()
    log.info("enrolled: key %s trusted as worker of %s", entry["fingerprint"], host)


async def _serve_channel(ws, join: Join, worker, reporter: ChannelReporter, topdir: Path, stop: asyncio.Event,
                         key=None, on_joined=None, relay: LaunchRelay | None = None, sampler=None) -> None:
    from xced.worker.load import safe_sample

    # RES-7: the join carries the host's load indices now, each heartbeat the next ones
    load = safe_sample(sampler) if sampler is not None else None
    hello = join.model_copy(update={"running": running_elements(topdir / "jobs"), "load": load})
    if key is not None:  # a keyed join (KEY-3): the controller's challenge comes first
        from xced.auth.keys import fingerprint, join_payload, sign

        ch = json.loads(await ws.recv())
        if ch.get("op") != "challenge":
            raise _Refused(ch.get("reason", "the controller sent no challenge (is it in test mode? then drop "
                                            "--controller-key)"))
        payload = join_payload(cluster=ch["cluster"], purpose="worker-channel", nonce=ch["nonce"], host=join.host,
                               role="worker")
        hello = hello.model_copy(update={"fingerprint": fingerprint(key.public_key()), "signature": sign(key, payload)})
    await ws.send(hello.model_dump_json())
    answer = json.loads(await ws.recv())
    if answer.get("op") == "challenge":
        raise _Refused("the controller runs in production mode and asks for this worker's key: give --controller-key "
                       "(its keys/host.pub or fingerprint) or --enroll TOKEN")
    if answer.get("op") != "joined":
        raise _Refused(answer.get("reason", "no reason given"))
    log.info("joined the controller as host %s", join.host)
    if on_joined is not None:
        on_joined()
    if relay is not None:
        relay.connected = True

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
        from pydantic import ValidationError

        from xced.api.peer import CONTROLLER_MESSAGE, ElementMsg, LaunchedMsg, RequestMsg, SignalMsg, StartMsg

        async for raw in ws:
            if '"refused"' in raw[:40]:  # the controller closes the channel (a revoked or expired key)
                log.error("the controller closed the channel: %s", json.loads(raw).get("reason"))
                continue
            try:
                msg = CONTROLLER_MESSAGE.validate_json(raw)
            except ValidationError as e:
                log.warning("the controller sent a message that is not part of the channel (%s); ignored",
                            e.errors()[0].get("msg"))
                continue
            if isinstance(msg, LaunchedMsg):
                if relay is not None:
                    relay.answer(msg.lid, msg.result, msg.error)
            elif isinstance(msg, StartMsg):
                info = dict(msg.info)
                info["alloc"] = [tuple(a) for a in info["alloc"]]
                worker.start(StartInfo(**info))
            elif isinstance(msg, ElementMsg):
                if msg.op == "reattach":
                    worker.reattach(msg.job_id, msg.index, msg.attempt)
                else:
                    {"kill": worker.kill, "end_tasks": worker.end_tasks}[msg.op](msg.job_id, msg.index,
                                                                                 attempt=msg.attempt)
            elif isinstance(msg, SignalMsg):
                worker.signal(msg.job_id, msg.index, msg.sig)
            elif isinstance(msg, RequestMsg) and msg.what == "launch_task":
                # answered when the task ends; the channel keeps serving meanwhile
                task_runs.add(asyncio.create_task(run_task(msg.model_dump())))
            else:
                a = msg.args
                result = worker.read_output(a["job_id"], a["index"], a["stream"], a["max_bytes"])
                reporter.queue.put_nowait({"op": "reply", "rid": msg.rid, "result": result})

    beat = float(answer.get("heartbeat_s") or HEARTBEAT_S)

    async def heartbeat() -> None:
        # SCHED-4: a controller that hears nothing for HEARTBEAT_MISSES beats drops the channel
        while True:
            await asyncio.sleep(beat)
            now = safe_sample(sampler) if sampler is not None else None
            reporter.queue.put_nowait({"op": "heartbeat", "load": now} if now else {"op": "heartbeat"})

    tasks = {asyncio.create_task(sender()), asyncio.create_task(receiver()), asyncio.create_task(stop.wait()),
             asyncio.create_task(heartbeat())}
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in done:
            if t.exception() is not None and not isinstance(t.exception(), asyncio.CancelledError):
                raise t.exception()
    finally:
        for t in (*tasks, *task_runs):
            t.cancel()
        await asyncio.gather(*tasks, *task_runs, return_exceptions=True)

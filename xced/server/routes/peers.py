"""Peer routes (D-1, KEY-3, KEY-5): the worker channel, and the key handshake of HTTP peers.

- `WebSocket /xce/v1/workers/channel` (xced.api.peer), a PEER route. In production mode the
  controller opens it with a challenge; the worker's join names its host and key and signs
  the challenge (purpose `worker-channel`), and the controller checks it
  (xced.controller.peers.authenticate) before anything else is read. Everything the worker
  sends afterwards is bound to that host, and only the messages its role's allowlist names
  are taken (xced.auth.roles). Revoking the key, or its expiry, closes the channel. In test
  mode workers may join without keys, for harnesses (a keyed join is checked all the same
  when the controller has a key: `listen.tls: true`).
- Bounds (issue 19): a join past the controller's host capacity (its open-file limit,
  xced.server.fdlimit) or offering more than hosts.yaml's bounds is refused with the bound;
  a worker that floods its channel is read at FLOOD_RATE messages a second (ChannelThrottle).
- `POST /peers/challenge`, `/peers/session`, `/peers/enroll`: OPEN routes (anyone, TCP
  included; the body carries the proof). A login host's API server or a remote `xceadmin`
  answers a challenge with its key's signature and gets a session; a new host trades an
  enrolment token for trust of its key.
"""

from __future__ import annotations

import asyncio
import logging
import time

from fastapi import APIRouter, Depends, Request, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from xced.api.errors import PermissionDenied
from xced.api.models import ChallengeOut, ChallengeRequest, EnrollRequest, KeyOut, SessionOut, SessionRequest
from xced.api.peer import CHANNEL_PATH, HEARTBEAT_MISSES, Join
from xced.auth.roles import message_allowed
from xced.controller.channel import RemoteWorkerLink, handle_worker_message
from xced.server.auth import OPEN, PEER, requires
from xced.server.busy import StoreBusyRetryRoute
from xced.server.responses import BODY, errors

router = APIRouter(route_class=StoreBusyRetryRoute)
log = logging.getLogger("xced.server.peers")

#: seconds a worker has to answer the channel's challenge
JOIN_TIMEOUT_S = 30.0
#: the WebSocket close code of a refused or revoked peer (RFC 6455: policy violation)
POLICY_VIOLATION = 1008


#: messages a worker may send per second on its channel, sustained (heartbeats come every
#: HEARTBEAT_S; a host with thousands of slots running short jobs reports a few hundred
#: starts and ends a second; a rejoin flushes its queued reports at this pace)
FLOOD_RATE = 500.0
#: messages it may send at once above that rate (a burst of reports, a rejoin's backlog)
FLOOD_BURST = 2000
#: messages read from one channel before the receiver yields to the others, throttled or not
YIELD_EVERY = 64


class ChannelThrottle:
    """A token bucket for one worker channel: FLOOD_RATE messages a second with bursts of
    FLOOD_BURST. `await pace()` before handling each message: past the bucket it sleeps until
    a token is due, so a flooding worker's messages are read no faster than the rate (TCP
    pushes back on it, nothing is dropped: a report is never lost), and every YIELD_EVERY
    messages it yields to the event loop, so no channel starves the others or the clients.
    The first throttling of a channel is logged once, with the host; its end is not."""

    def __init__(self, host: str, rate: float = FLOOD_RATE, burst: int = FLOOD_BURST) -> None:
        self.host, self.rate, self.burst = host, rate, burst
        self.tokens = float(burst)
        self.stamp = time.monotonic()
        self.count = 0
        #: messages that had to wait for a token
        self.throttled = 0

    async def pace(self) -> None:
        """Take a token for one message: at once while the bucket has one (yielding every
        YIELD_EVERY messages), else after sleeping until the next is due (1/rate s)."""
        now = time.monotonic()
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        self.count += 1
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            if self.count % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            return
        if self.throttled == 0:
            log.warning("worker %s floods its channel: more than %d messages at once and %g a second after; its "
                        "messages are now read at %g a second (logged once per channel)", self.host, self.burst,
                        self.rate, self.rate)
        self.throttled += 1
        wait = (1.0 - self.tokens) / self.rate
        self.tokens -= 1.0
        await asyncio.sleep(wait)


def join_problem(e: ValidationError) -> str:
    """The refusal of a join that is not a valid xced.api.peer.Join: each wrong field (up to
    three) with its value and pydantic's reason, which names the bound ("less than or equal
    to 1000000"), then the largest host a join may declare (the bounds of hosts.yaml)."""
    from xced.model.units import MAX_MEMORY_MB, MAX_RESOURCE, MAX_SLOTS

    parts = []
    for err in e.errors()[:3]:
        where = ".".join(str(x) for x in err.get("loc", ())) or "the message"
        got = repr(err.get("input"))
        parts.append(f"{where} {got[:60]}: {err.get('msg')}")
    more = f" (and {e.error_count() - 3} more)" if e.error_count() > 3 else ""
    return (f"bad join message: {'; '.join(parts)}{more}. A host declares at most {MAX_SLOTS} slots, "
            f"{MAX_MEMORY_MB} MB of memory (1 PB) and {MAX_RESOURCE:g} of each resource, as in hosts.yaml")


async def _refuse(ws: WebSocket, reason: str) -> None:
    await ws.send_json({"op": "refused", "reason": reason})
    await ws.close(code=POLICY_VIOLATION)


@router.websocket(CHANNEL_PATH, dependencies=[Depends(requires(PEER))])
async def worker_channel(ws: WebSocket) -> None:
    ctl = ws.app.state.controller
    await ws.accept()
    production = ctl.config.settings.mode != "test"
    # a controller with a key challenges every worker; test mode takes one that joins without (harnesses)
    challenge = ctl.challenge("worker-channel") if production or ctl.own_fingerprint else None
    if challenge is not None:
        await ws.send_json({"op": "challenge", **challenge})
    try:
        join = Join.model_validate(await asyncio.wait_for(ws.receive_json(), JOIN_TIMEOUT_S))
    except asyncio.TimeoutError:
        await _refuse(ws, f"no join message within {JOIN_TIMEOUT_S:.0f} s")
        return
    except ValidationError as e:
        await _refuse(ws, join_problem(e))
        return
    except ValueError as e:
        await _refuse(ws, f"bad join message: {e}")
        return
    except WebSocketDisconnect:
        return
    ident = None
    if challenge is not None and (production or join.fingerprint or join.signature):
        if not join.fingerprint or not join.signature:
            await _refuse(ws, "this controller runs in production mode: a worker joins with its host key (give the "
                              "worker --controller-key, or --enroll TOKEN), never without one (KEY-1)")
            return
        if not message_allowed(join.role, "started"):  # before the key is checked: no "joined" event for it
            await _refuse(ws, f"a peer in the {join.role} role may not open the worker channel")
            return
        try:
            ident = ctl.authenticate("worker-channel", join.fingerprint, join.host, join.role, challenge["nonce"],
                                     join.signature)
        except PermissionDenied as e:
            await _refuse(ws, e.message)
            return
    if ctl.is_joined(join.host):
        await _refuse(ws, f"host {join.host} is already joined (another worker, or this one still connected); host "
                          f"names must be unique")
        return
    budget = getattr(ctl, "fd_budget", None)
    channels = getattr(ws.app.state, "worker_channels", None)  # the channels taken past their join
    if channels is None:
        channels = ws.app.state.worker_channels = set()
    queue: asyncio.Queue[dict] = asyncio.Queue()
    link = RemoteWorkerLink(join.host, queue.put_nowait)
    if budget is not None and len(channels) >= budget.host_capacity:
        reason = budget.refusal(len(channels))
        # logged once per stretch of refusals (until a join is taken again): a fleet past the limit is one line
        if not getattr(ws.app.state, "capacity_logged", False):
            ws.app.state.capacity_logged = True
            log.error("worker %s refused: %s", join.host, reason)
        await _refuse(ws, reason)
        return
    ws.app.state.capacity_logged = False
    channels.add(link)  # counted from now, with no await between the check and this: joins at once are not over-taken
    beat = ctl.heartbeat_s
    try:
        await ws.send_json({"op": "joined", "host": join.host, "heartbeat_s": beat})
    except BaseException:
        channels.discard(link)
        raise
    gone = asyncio.Event()

    async def close(reason: str) -> None:
        link.left_reason = reason
        try:
            await ws.send_json({"op": "refused", "reason": reason})
            await ws.close(code=POLICY_VIOLATION)
        except Exception:  # noqa: BLE001 - closed already
            pass
        await gone.wait()

    handle = ctl.register_channel(ident, close) if ident is not None else None

    async def sender() -> None:
        while True:
            await ws.send_json(await queue.get())

    heard = [time.monotonic()]
    throttle = ChannelThrottle(join.host)

    async def receiver() -> None:
        while True:
            msg = await ws.receive_json()
            await throttle.pace()  # a flooding worker is read at FLOOD_RATE, others go on (issue 19)
            heard[0] = time.monotonic()  # any message is a sign of life, a heartbeat included (SCHED-4)
            ctl.worker_heard(link)
            op = msg.get("op") if isinstance(msg, dict) else None
            if ident is not None and not message_allowed(ident.role, str(op)):
                log.warning("worker %s sent %r, which its role may not send; refused", join.host, op)
                continue
            handle_worker_message(ctl, link, msg)

    send_task = asyncio.create_task(sender())
    ctl.worker_joined(link, join)
    recv_task = asyncio.create_task(receiver())
    try:
        # a worker that is stopped, or whose host froze, keeps its TCP connection open: only
        # its heartbeats stopping tell (HEARTBEAT_MISSES in a row: the channel is dropped)
        while True:
            done, _ = await asyncio.wait({recv_task}, timeout=beat)
            if done:
                recv_task.result()  # how it ended: a disconnect, or a failure
                break
            silent = time.monotonic() - heard[0]
            if silent > beat * HEARTBEAT_MISSES:
                link.left_reason = f"its worker sent nothing for {silent:.0f} s (a heartbeat is due every {beat:g} s)"
                log.warning("worker %s: %s; its channel is dropped", join.host, link.left_reason)
                break
    except WebSocketDisconnect:
        pass
    except RuntimeError:  # closed by `close` (a revoked key) while receiving
        pass
    except Exception:
        log.exception("worker channel of %s failed", join.host)
    finally:
        recv_task.cancel()
        send_task.cancel()
        channels.discard(link)
        link.close()
        if handle is not None:
            ctl.unregister_channel(handle)
        ctl.worker_left(link)
        gone.set()
        log.info("worker %s left", join.host)


@router.post("/peers/challenge", response_model=ChallengeOut, responses=errors(BODY),
             dependencies=[Depends(requires(OPEN))])
async def challenge(body: ChallengeRequest, request: Request) -> ChallengeOut:
    """A fresh nonce to sign (KEY-3): answered once, within a minute."""
    return ChallengeOut(**request.app.state.controller.challenge(body.purpose))


@router.post("/peers/session", response_model=SessionOut, responses=errors(BODY),
             dependencies=[Depends(requires(OPEN))])
async def session(body: SessionRequest, request: Request) -> SessionOut:
    """A session for a peer that signed a `session` challenge with a trusted key (KEY-3):
    its token goes in `Authorization: XCE-Session TOKEN` over the pinned TLS channel."""
    ctl = request.app.state.controller
    ident = ctl.authenticate("session", body.fingerprint, body.host, body.role, body.nonce, body.signature)
    return SessionOut(**ctl.open_session(ident))


@router.post("/peers/enroll", response_model=KeyOut, responses=errors(BODY, 409),
             dependencies=[Depends(requires(OPEN))])
async def enroll(body: EnrollRequest, request: Request) -> KeyOut:
    """Trade a one-time enrolment token for trust of the signing key (KEY-5)."""
    ctl = request.app.state.controller
    return KeyOut(**ctl.enroll(body.token, body.public_key, body.host, body.role, body.nonce, body.signature))

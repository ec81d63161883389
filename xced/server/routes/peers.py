"""The worker channel route (D-1): `WebSocket /xce/v1/workers/channel` (xced.api.peer).

A peer route (xced.server.auth.PEER): worker hosts, not users, come here; they will
authenticate with host keys (KEY-1, a later issue), and until then only test mode takes them."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, Depends, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from xced.api.peer import CHANNEL_PATH, Join
from xced.controller.channel import RemoteWorkerLink, handle_worker_message
from xced.server.auth import PEER, requires

router = APIRouter()
log = logging.getLogger("xced.server.peers")


@router.websocket(CHANNEL_PATH, dependencies=[Depends(requires(PEER))])
async def worker_channel(ws: WebSocket) -> None:
    ctl = ws.app.state.controller
    await ws.accept()
    if ctl.config.settings.mode != "test":
        await ws.send_json({"op": "refused", "reason": "worker hosts join without keys only in mode: test; "
                                                      "keys (KEY-1) are not built yet"})
        await ws.close()
        return
    try:
        join = Join.model_validate(await ws.receive_json())
    except (ValidationError, ValueError) as e:
        await ws.send_json({"op": "refused", "reason": f"bad join message: {e}"})
        await ws.close()
        return
    if ctl.is_joined(join.host):
        await ws.send_json({"op": "refused", "reason": f"host {join.host} is already joined (another worker, or this "
                                                      f"one still connected); host names must be unique"})
        await ws.close()
        return
    queue: asyncio.Queue[dict] = asyncio.Queue()
    link = RemoteWorkerLink(join.host, queue.put_nowait)
    await ws.send_json({"op": "joined", "host": join.host})

    async def sender() -> None:
        while True:
            await ws.send_json(await queue.get())

    send_task = asyncio.create_task(sender())
    ctl.worker_joined(link, join)
    try:
        while True:
            msg = await ws.receive_json()
            handle_worker_message(ctl, link, msg)
    except WebSocketDisconnect:
        pass
    except Exception:
        log.exception("worker channel of %s failed", join.host)
    finally:
        send_task.cancel()
        link.close()
        ctl.worker_left(link)
        log.info("worker %s left", join.host)

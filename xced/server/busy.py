"""Requests that write wait out a store another process has locked (D-8), without blocking
the event loop: the store fails at once when its lock is taken (StoreBusy), and the route is
run again after a short sleep, for up to `store_busy_timeout` seconds (xce.yaml); then the
client gets 503 `store_busy`, "store busy (locked by another process), retry" (exit 3).

A route can simply run again: the controller commits before it changes memory, so a
request the store refused changed nothing. Reads never wait: they answer from memory, and
SQLite's WAL lets them read while another process writes.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Coroutine

from fastapi import Request, Response
from fastapi.routing import APIRoute

from xced.api.errors import StoreBusy

#: the first and the longest sleep between two tries, seconds
FIRST_SLEEP_S = 0.01
MAX_SLEEP_S = 0.2


class StoreBusyRetryRoute(APIRoute):
    """An APIRoute whose handler runs again while the store is busy (see the module)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def retrying(request: Request) -> Response:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + request.app.state.controller.config.settings.store_busy_timeout_s
            sleep = FIRST_SLEEP_S
            while True:
                try:
                    return await handler(request)
                except StoreBusy:
                    left = deadline - loop.time()
                    if left <= 0:
                        raise
                    await asyncio.sleep(min(sleep, left))
                    sleep = min(sleep * 2, MAX_SLEEP_S)

        return retrying

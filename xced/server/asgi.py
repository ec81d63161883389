"""The frame of the API server's own ASGI middlewares (D-2): they act on HTTP requests and
pass everything else (the worker channel's WebSocket, lifespan events) through untouched."""

from __future__ import annotations


class HttpMiddleware:
    """An ASGI middleware whose `http(scope, receive, send)` sees HTTP requests only."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope, receive, send) -> None:  # pragma: no cover - each middleware has its own
        raise NotImplementedError

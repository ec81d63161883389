"""The API server's body limit (D-8: every request is bounded in size and work).

`BodyLimit` is an ASGI middleware in front of the app: a request whose body is larger than
its route's limit is answered 413 in the API's error shape (`PayloadTooLarge`,
`{"error": {"code": "too_large", ...}}`) before anything parses it, and the connection stays
open: uvicorn drops the rest of the body as it arrives and reads the next request, so the
client reads the answer instead of a reset connection.

Limits (xced.model.units): `MAX_REQUEST_BYTES` for every request, and for a cluster
admin's `PUT /config` (`xceadmin build --apply` of a large cluster) `MAX_CONFIG_REQUEST_BYTES`;
anyone else's is held to `MAX_REQUEST_BYTES` there too, so nobody but an admin can make the
daemon parse more than a megabyte, except on `POST /jobs/pack` (`xcecli submit --pack`,
CLI-7), whose body anyone may make up to `MAX_PACK_REQUEST_BYTES`: many jobs, each a
submit's worth. A body with a Content-Length is judged by it at once
(HTTP parsers hold the body to it); a chunked body is counted as it arrives, held until
its end (at most the limit), then handed on.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from xced.api.errors import PayloadTooLarge, XceError
from xced.constants import API_PREFIX
from xced.model.units import MAX_CONFIG_REQUEST_BYTES, MAX_PACK_REQUEST_BYTES, MAX_REQUEST_BYTES
from xced.server.asgi import HttpMiddleware

__all__ = ["BodyLimit"]

#: (method, path) -> the larger body limit of an admin's request there, bytes, and its name
_ADMIN_LIMITS = {("PUT", f"{API_PREFIX}/config"): (MAX_CONFIG_REQUEST_BYTES, "MAX_CONFIG_REQUEST_BYTES")}
#: (method, path) -> the body limit of anyone's request there, bytes, and its name
_ROUTE_LIMITS = {("POST", f"{API_PREFIX}/jobs/pack"): (MAX_PACK_REQUEST_BYTES, "MAX_PACK_REQUEST_BYTES")}


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n % (1 << 20) == 0 else f"{n} bytes"


async def _is_admin(scope) -> bool:
    """Whether the caller of this request is a cluster admin (the API's own rule, D-6)."""
    from xced.server.auth import caller_of

    try:
        return (await caller_of(Request(scope))).is_admin
    except XceError:
        return False


class BodyLimit(HttpMiddleware):
    """ASGI middleware: refuse a body over its route's limit (see the module docstring)."""

    async def http(self, scope, receive, send) -> None:
        admin_limit = _ADMIN_LIMITS.get((scope.get("method", ""), scope.get("path", "")))
        declared: int | None = None
        chunked = False
        for key, value in scope.get("headers", ()):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = None
            elif key == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        limit, name = _ROUTE_LIMITS.get((scope.get("method", ""), scope.get("path", "")),
                                        (MAX_REQUEST_BYTES, "MAX_REQUEST_BYTES"))
        if admin_limit is not None and (chunked or (declared or 0) > limit) and await _is_admin(scope):
            limit, name = admin_limit
        if declared is not None and declared > limit:
            await self._refuse(scope, receive, send, limit, name, f"is {declared} bytes", admin_limit)
            return
        if not chunked:  # no body, or one held to its Content-Length by the HTTP parser
            await self.app(scope, receive, send)
            return
        held: list[dict] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nothing to answer
                return
            size += len(message.get("body", b""))
            if size > limit:
                await self._refuse(scope, receive, send, limit, name, f"is more than {limit} bytes", admin_limit)
                return
            held.append(message)
            if not message.get("more_body", False):
                break
        body = b"".join(m.get("body", b"") for m in held)
        first = True

        async def replay():
            nonlocal first
            if first:
                first = False
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _refuse(scope, receive, send, limit: int, name: str, what: str,
                      admin_limit: tuple[int, str] | None) -> None:
        more = ""
        if admin_limit is not None and limit < admin_limit[0]:
            more = f"; a cluster admin may send up to {_size(admin_limit[0])} here ({admin_limit[1]})"
        hint = ("split the pack into smaller ones" if name == "MAX_PACK_REQUEST_BYTES" else
                "for a submit: a shorter environment, fewer -R strings or a smaller exdata")
        err = PayloadTooLarge(
            f"the request body {what}; the API server reads at most {_size(limit)} ({name}, D-8){more}, so "
            f"nothing was done: send a smaller request ({hint})")
        await JSONResponse(err.to_body(), status_code=err.status)(scope, receive, send)

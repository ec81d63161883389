"""A worker host's own socket (JOB-7 across hosts, KEY-1): `xcecli launch` from inside a
job that runs on a worker joined with its key.

In production a job's processes cannot reach the controller over TCP (only key-
authenticated peers can, KEY-3), so a keyed worker serves a Unix socket in its TopDir
(`run/xced.sock`, given to its jobs as XCE_SOCKET) that takes one request, LSF's blaunch:
`POST /xce/v1/jobs/{id}/launch` with the job's launch token. It relays it over the
worker's authenticated channel (xced.api.peer.LaunchMsg) with the caller's uid from
SO_PEERCRED; the controller checks the token and that uid as for its own socket, and that
the job runs on this worker (xced.controller.channel.relay_launch).

Every other request is answered 403 saying what the socket is for. Errors are the API's
error shape; a lost channel while the task runs is 503 `unreachable` (the task itself
keeps running and is ended with its job).

`create_relay_app(forward)` builds the ASGI app (Starlette; no module globals):
`forward(job_id, body, uid)` is awaited with the validated LaunchRequest fields and
returns (status, JSON body).
"""

from __future__ import annotations

import json
import logging
from typing import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from xced.constants import API_PREFIX
from xced.server.auth import PEER_KEY

__all__ = ["create_relay_app"]

log = logging.getLogger("xced.server.relay")

#: the largest launch body read (bytes): argv and a token
MAX_LAUNCH_BYTES = 1 << 20
_WHAT = ("this is a worker host's socket: it relays `xcecli launch` from inside the jobs running here (with their "
         "XCE_JOB_TOKEN); submit and query from the controller host or a login host")


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, "field": None}}, status_code=status)


def create_relay_app(forward: Callable[[int, dict, int | None], Awaitable[tuple[int, dict]]]) -> Starlette:
    """The relay's ASGI app (see the module docstring)."""
    from pydantic import ValidationError

    from xced.api.models import LaunchRequest

    async def launch(request: Request) -> JSONResponse:
        try:
            job_id = int(request.path_params["job_id"])
        except ValueError:
            job_id = 0
        if not 1 <= job_id <= 10**18:
            return _error(404, "not_found", f"job {request.path_params['job_id'][:40]!r}: a job ID is a positive "
                                            f"integer of at most 18 digits")
        body = await request.body()
        if len(body) > MAX_LAUNCH_BYTES:
            return _error(413, "too_large", f"a launch request is at most {MAX_LAUNCH_BYTES} bytes")
        try:
            req = LaunchRequest.model_validate(json.loads(body or b"null"))
        except (ValueError, ValidationError) as e:
            return _error(422, "invalid", f"not a launch request: {str(e).splitlines()[0]}")
        if not req.token:
            return _error(403, "forbidden", "on a worker host only a job's own processes launch its tasks, with its "
                                            "XCE_JOB_TOKEN; launch as the job's owner from the controller host or a "
                                            "login host")
        peer = request.scope.get(PEER_KEY)
        status, out = await forward(job_id, req.model_dump(), peer[1] if peer else None)
        return JSONResponse(out, status_code=status)

    async def other(request: Request) -> JSONResponse:
        return _error(403, "forbidden", _WHAT)

    routes = [Route(API_PREFIX + "/jobs/{job_id}/launch", launch, methods=["POST"]),
              Route("/{path:path}", other, methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])]
    return Starlette(routes=routes)

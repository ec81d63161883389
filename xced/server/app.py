"""The API server (D-2): FastAPI under `/xce/v1/`, strict bodies, one error shape.

`create_app(controller)` builds the app; there are no module globals.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from xced import __version__
from xced.api.errors import InvalidRequest, ServerError, XceError
from xced.constants import API_PREFIX

log = logging.getLogger("xced.server")


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """One line naming the offending field(s) (D-2, bug-1970), plus the first field name."""
    unknown: list[str] = []
    parts: list[str] = []
    for err in exc.errors():
        loc = [str(x) for x in err.get("loc", ()) if x not in ("body", "query", "path")]
        fld = ".".join(loc) or "body"
        typ = err.get("type", "")
        if typ == "json_invalid":
            return (f"the request body is not valid JSON ({err.get('ctx', {}).get('error', 'invalid')}); send one "
                    f"JSON object with the fields the API documents", None)
        if typ == "extra_forbidden":
            unknown.append(fld)
        elif typ == "missing":
            parts.append(f"field {fld!r} is required")
        else:
            parts.append(f"field {fld!r}: {err.get('msg', 'invalid')}")
    if unknown:
        names = ", ".join(repr(u) for u in unknown)
        parts.insert(0, f"unknown field{'s' if len(unknown) > 1 else ''} {names} in the request: "
                        f"not part of the XCE API, so refused rather than ignored")
    first = unknown[0] if unknown else None
    if first is None and exc.errors():
        first = ".".join(str(x) for x in exc.errors()[0].get("loc", ()) if x not in ("body", "query", "path")) or None
    return "; ".join(parts[:5]) or "invalid request", first


class _AnswerEveryError:
    """ASGI middleware: an exception no handler took (a bug) is answered with the API's error
    shape, 500 `server_error`, and not raised further. Raised further, as Starlette's own
    last-resort handler does, uvicorn would close the connection after the answer, so the
    client's next request on it would fail as "daemon unreachable" (D-2)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:  # noqa: BLE001 - the last resort: every error gets an answer
            log.exception("internal error")
            if started:  # part of an answer went out: nothing sane can follow on this connection
                raise
            err = ServerError(f"internal error in xced ({type(exc).__name__}: {exc}); see the daemon's log")
            await JSONResponse(err.to_body(), status_code=err.status)(scope, receive, send)


def create_app(controller) -> FastAPI:
    """The ASGI app serving `controller` under API_PREFIX, OpenAPI at `/xce/v1/openapi.json`."""
    app = FastAPI(title="XCE", version=__version__, openapi_url=f"{API_PREFIX}/openapi.json",
                  docs_url=f"{API_PREFIX}/docs", redoc_url=None)
    app.state.controller = controller

    @app.exception_handler(XceError)
    async def _xce_error(_: Request, exc: XceError) -> JSONResponse:
        return JSONResponse(exc.to_body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        msg, fld = _validation_message(exc)
        err = InvalidRequest(msg, field=fld)
        return JSONResponse(err.to_body(), status_code=err.status)

    app.add_middleware(_AnswerEveryError)

    from xced.server.routes import cluster, jobs, peers

    app.include_router(jobs.router, prefix=API_PREFIX)
    app.include_router(cluster.router, prefix=API_PREFIX)
    app.include_router(peers.router, prefix=API_PREFIX)
    return app

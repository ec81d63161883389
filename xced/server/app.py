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

    @app.exception_handler(Exception)
    async def _bug(_: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error")
        err = ServerError(f"internal error in xced ({type(exc).__name__}: {exc}); see the daemon's log")
        return JSONResponse(err.to_body(), status_code=err.status)

    from xced.server.routes import cluster, jobs, peers

    app.include_router(jobs.router, prefix=API_PREFIX)
    app.include_router(cluster.router, prefix=API_PREFIX)
    app.include_router(peers.router, prefix=API_PREFIX)
    return app

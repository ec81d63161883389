"""The API server (D-2): FastAPI under `/xce/v1/`, strict bodies, one error shape.

`create_app(controller)` builds the app; there are no module globals. Every error answer,
FastAPI's and Starlette's own included (a body that is not JSON: 400; a path no route
serves: 404; a method the path does not take: 405, with `Allow`; a request that does not
validate: 422; a bug: 500), is `XceError.to_body()`: `{"error": {"code", "message",
"field"}}`; each route documents the statuses it can return (xced.server.responses).

Every route declares the permission it needs (RBAC-1, xced.server.auth.requires), shown in
its OpenAPI operation as `x-xce-permission`; `create_app` refuses to build an app with a
route that declares none. FastAPI's own OpenAPI document and docs page (`public_routes`)
are public: the API is documented to anyone (D-2).
"""

from __future__ import annotations

import logging
import re

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from xced import __version__
from xced.api.errors import InvalidRequest, MalformedBody, MethodNotAllowed, NotFound, ServerError, XceError
from xced.constants import API_PREFIX
from xced.server.asgi import HttpMiddleware
from xced.server.convert import ListingCache
from xced.server.limits import BodyLimit
from xced.server.responses import errors_as_json

log = logging.getLogger("xced.server")


_SEND_JSON = "send one JSON object with the fields the API documents"


def _not_json(exc: RequestValidationError) -> MalformedBody | None:
    """The 400 of a body that is not JSON at all (FastAPI reports it as a validation error)."""
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            return MalformedBody(f"the request body is not valid JSON ({err.get('ctx', {}).get('error', 'invalid')}); "
                                 f"{_SEND_JSON}")
    return None


def _method_table(routers) -> list[tuple[re.Pattern[str], frozenset[str]]]:
    """(path regex, methods) of every HTTP route of `routers` under API_PREFIX."""
    from starlette.routing import compile_path

    return [(compile_path(API_PREFIX + route.path)[0], frozenset(route.methods))
            for router in routers for route in router.routes if getattr(route, "methods", None)]


def _allowed(request: Request) -> str:
    """The methods the request's path takes, for a 405's `Allow`: of every route whose path
    matches (Starlette names only the first one's: `DELETE /jobs` said POST, not GET)."""
    path = request.url.path
    return ", ".join(sorted({m for regex, methods in request.app.state.methods if regex.match(path)
                             for m in methods}))


def _http_error(request: Request, exc: StarletteHTTPException) -> XceError:
    """Starlette's and FastAPI's own HTTP errors in the API's error shape: 404 for a path
    no route serves, 405 for a method the path does not take, 400 for a body FastAPI could
    not read (JSON nested deeper than the parser goes, RecursionError)."""
    path = request.url.path
    where = f"{request.method} {path if len(path) <= 120 else path[:100] + f'... ({len(path)} characters)'}"
    if exc.status_code == 404:
        hint = ("; a job ID is a positive integer of at most 18 digits" if path.startswith(f"{API_PREFIX}/jobs/")
                else "")
        return NotFound(f"{where}: no such route in the XCE API{hint}; {API_PREFIX}/openapi.json lists them")
    if exc.status_code == 405:
        return MethodNotAllowed(f"{where}: this path does not take {request.method}; it takes "
                                f"{_allowed(request) or 'nothing'}")
    if exc.status_code == 400:
        cause = exc.__cause__
        why = ("it nests deeper than the parser goes" if isinstance(cause, RecursionError)
               else f"{type(cause).__name__}: {cause}" if cause is not None else str(exc.detail))
        return MalformedBody(f"the request body could not be read as JSON ({why}); {_SEND_JSON}")
    err = XceError(f"{where}: {exc.detail}")
    err.status = exc.status_code
    return err


def _validation_message(errs: list[dict]) -> tuple[str, str | None]:
    """One line naming the offending field(s) of validation errors `errs` (pydantic's, as
    FastAPI gives them; D-2, bug-1970), plus the first field name."""
    unknown: list[str] = []
    parts: list[str] = []
    for err in errs:
        loc = [str(x) for x in err.get("loc", ()) if x not in ("body", "query", "path")]
        fld = ".".join(loc) or "body"
        typ = err.get("type", "")
        if typ == "extra_forbidden":
            unknown.append(fld)
        elif not loc and err.get("loc", ())[:1] == ("body",):  # the body itself: a list, a string, ...
            parts.append(("the request has no body" if typ == "missing" else
                          "the request body must be a JSON object") + f"; {_SEND_JSON}")
        elif typ == "missing":
            parts.append(f"field {fld!r} is required")
        else:  # our validators' own messages, without pydantic's "Value error, " before them
            parts.append(f"field {fld!r}: {str(err.get('msg', 'invalid')).removeprefix('Value error, ')}")
    if unknown:
        names = ", ".join(repr(u) for u in unknown)
        parts.insert(0, f"unknown field{'s' if len(unknown) > 1 else ''} {names} in the request: "
                        f"not part of the XCE API, so refused rather than ignored")
    first = unknown[0] if unknown else None
    if first is None and errs:
        first = ".".join(str(x) for x in errs[0].get("loc", ()) if x not in ("body", "query", "path")) or None
    return "; ".join(parts[:5]) or "invalid request", first


def _pack_job_error(errs: list[dict]) -> InvalidRequest | None:
    """A pack submit's (POST /jobs/pack, CLI-7) validation errors inside one of its jobs, as
    the submit's: the first job at fault, `i`, is named "job i+1 of the pack: " followed by
    what a single submit of that job would be told, with field `jobs.<i>.<field>` (or
    `jobs.<i>`), so the client can point at the job's line. None when the first error is not
    inside a job."""
    loc = tuple(errs[0].get("loc", ())) if errs else ()
    if loc[:2] != ("body", "jobs") or len(loc) < 3 or not isinstance(loc[2], int):
        return None
    i = loc[2]
    own = [{**e, "loc": ("body", *tuple(e["loc"])[3:])} for e in errs
           if tuple(e.get("loc", ()))[:3] == ("body", "jobs", i)]
    if all(len(e["loc"]) == 1 for e in own):  # the job itself: a list, a string, null...
        return InvalidRequest(f"job {i + 1} of the pack: a job must be a JSON object with a submit's fields "
                              f"(argv, cwd, ...)", field=f"jobs.{i}")
    msg, fld = _validation_message(own)
    return InvalidRequest(f"job {i + 1} of the pack: {msg}", field=f"jobs.{i}" + (f".{fld}" if fld else ""))


class _AnswerEveryError(HttpMiddleware):
    """ASGI middleware: an exception no handler took (a bug) is answered with the API's error
    shape, 500 `server_error`, and not raised further. Raised further, as Starlette's own
    last-resort handler does, uvicorn would close the connection after the answer, so the
    client's next request on it would fail as "daemon unreachable" (D-2)."""

    async def http(self, scope, receive, send) -> None:
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


def public_routes(app: FastAPI) -> set[str]:
    """The paths of FastAPI's own routes, open to anyone: the OpenAPI document and the docs
    page with its OAuth2 redirect (no API data; D-2: the OpenAPI document is served)."""
    return {p for p in (app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url) if p}


def create_app(controller) -> FastAPI:
    """The ASGI app serving `controller` under API_PREFIX, OpenAPI at `/xce/v1/openapi.json`."""
    app = FastAPI(title="XCE", version=__version__, openapi_url=f"{API_PREFIX}/openapi.json",
                  docs_url=f"{API_PREFIX}/docs", redoc_url=None,
                  # FastAPI's OpenTelemetry hooks, which XCE does not use: off, or every request
                  # asks OpenTelemetry whether a provider is set (issue 17 part 5)
                  telemetry={"tracing": False, "metrics": False, "logs": False})
    app.state.controller = controller
    app.state.listing_cache = ListingCache()
    from xced.config.presets import presets_directory
    from xced.server.presets import PresetShelf

    app.state.presets = PresetShelf(lambda: presets_directory(controller.topdir,
                                                              controller.config.settings.presets_dir))

    @app.exception_handler(XceError)
    async def _xce_error(_: Request, exc: XceError) -> JSONResponse:
        return JSONResponse(exc.to_body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        err = _not_json(exc)
        if err is None:
            err = _pack_job_error(exc.errors())
        if err is None:
            msg, fld = _validation_message(exc.errors())
            err = InvalidRequest(msg, field=fld)
        return JSONResponse(err.to_body(), status_code=err.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        err = _http_error(request, exc)
        headers = {"Allow": _allowed(request)} if exc.status_code == 405 else None
        return JSONResponse(err.to_body(), status_code=err.status, headers=headers)

    app.add_middleware(_AnswerEveryError)
    app.add_middleware(BodyLimit)  # outermost: an over-size body is refused before anything reads it (D-8)

    from xced.server.auth import OPENAPI_KEY, all_routes, route_permissions, undeclared
    from xced.server.routes import cluster, jobs, keys, peers, presets, projects

    routers = (jobs.router, cluster.router, projects.router, presets.router, keys.router, peers.router)
    for router in routers:  # the declaration in each operation of the OpenAPI document
        for route in router.routes:
            if isinstance(route, APIRoute) and (declared := route_permissions(route)):
                route.openapi_extra = {**(route.openapi_extra or {}), OPENAPI_KEY: declared[0]}
        app.include_router(router, prefix=API_PREFIX)
    app.state.methods = _method_table(routers)
    bad = undeclared(all_routes(app), public_routes(app))
    if bad:  # a route added without saying who may use it (RBAC-1): a bug, caught at start and by the tests
        raise RuntimeError("routes without a permission declaration: " + "; ".join(bad))

    fastapi_openapi = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            errors_as_json(fastapi_openapi())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app

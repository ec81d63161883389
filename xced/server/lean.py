"""A lean route handler for the API's hottest route, POST /jobs (issue 17 part 5, CLI-7, D-2).

FastAPI's generic request handler solves a dependency graph, wraps the body's validation
in its own field machinery, parses the Content-Type with the email package and validates
and dumps the answer against `response_model`: a third of the daemon's CPU for one
submit, more than the submit itself. `LeanBodyRoute` is an APIRoute (the OpenAPI
document, the permission declaration and the middlewares are the route's as before)
whose handler does only what that route needs, in FastAPI's order and with FastAPI's
errors, so every answer is the one the API gave before:

1. the body is read; with a Content-Type `application/json` or `application/*+json` (or
   none, where the route is not strict_content_type, FastAPI's default), it is parsed
   with Python's json (as Starlette's Request.json), else it stays bytes (which no
   model accepts: 422 "must be a JSON object"); text that is not JSON is 400
   (RequestValidationError `json_invalid`), JSON nested deeper than the parser goes 400
   (HTTPException from the RecursionError); no body at all is 422 "has no body";
2. the route's one dependency (its permission, `requires`) runs: a refusal (403) comes
   before the body is validated (RBAC-1);
3. the body is validated by its model, strict as declared (extra="forbid", bounds): the
   errors are pydantic's with the location under "body", as FastAPI reports them;
4. the endpoint is called with the model, the request and the dependency's value, and
   must answer a Response (json_response): nothing validates or dumps it again.

Exceptions go where FastAPI's would (the app's handlers, the StoreBusy retry of
StoreBusyRetryRoute). The route's shape is checked when the app is built: exactly one
body model, one dependency of the request alone, and a Request parameter.
"""

from __future__ import annotations

import inspect
import json
import typing
from typing import Any, Callable, Coroutine

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.params import Depends as DependsParam
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException

from xced.server.busy import StoreBusyRetryRoute


#: no body at all
_MISSING = object()


def _is_json(content_type: str | None, strict: bool) -> bool:
    """Whether FastAPI reads a body with this Content-Type as JSON: a media type
    `application/json` or `application/<anything>+json` (parameters ignored, case folded,
    as email.message parses it; a value that is not one type/subtype is text/plain), or
    none at all unless the route is `strict` about it (FastAPI's strict_content_type,
    the default)."""
    if not content_type:
        return not strict
    media = content_type.split(";", 1)[0].strip().lower()
    if media.count("/") != 1:
        return False
    main, sub = media.split("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


class _LeanHandler(APIRoute):
    """The lean handler itself (see the module); StoreBusyRetryRoute wraps it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        hints = typing.get_type_hints(self.endpoint)
        sig = inspect.signature(self.endpoint)
        body_name = model = request_name = dep_name = dep = None
        for name, p in sig.parameters.items():
            hint = hints.get(name)
            if isinstance(p.default, DependsParam):
                if dep is not None:
                    raise RuntimeError(f"{self.path}: LeanBodyRoute takes one dependency")
                dep_name, dep = name, p.default.dependency
            elif hint is Request:
                request_name = name
            elif isinstance(hint, type) and issubclass(hint, BaseModel):
                if model is not None:
                    raise RuntimeError(f"{self.path}: LeanBodyRoute takes one body model")
                body_name, model = name, hint
            else:
                raise RuntimeError(f"{self.path}: LeanBodyRoute cannot pass parameter {name!r}")
        if model is None or dep is None or request_name is None or \
                list(inspect.signature(dep).parameters) != ["request"]:
            raise RuntimeError(f"{self.path}: LeanBodyRoute needs a body model, a Request and one dependency of "
                               f"the request alone")
        endpoint = self.endpoint
        strict = getattr(self, "strict_content_type", True)
        strict = bool(getattr(strict, "value", strict))  # FastAPI's Default(True) placeholder

        async def handler(request: Request) -> Response:
            data: Any = _MISSING  # FastAPI: no body at all is a missing body (JSON null is a body)
            try:
                raw = await request.body()
                if raw:
                    data = json.loads(raw) if _is_json(request.headers.get("content-type"), strict) else raw
            except json.JSONDecodeError as e:
                raise RequestValidationError([{"type": "json_invalid", "loc": ("body", e.pos),
                                               "msg": "JSON decode error", "input": {}, "ctx": {"error": e.msg}}],
                                             body=e.doc) from e
            except HTTPException:
                raise
            except Exception as e:  # RecursionError (nested deeper than the parser goes), a client gone
                raise HTTPException(status_code=400, detail="There was an error parsing the body") from e
            value = await dep(request)  # the permission (403) before the body's validation (422)
            if data is _MISSING:
                raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required",
                                               "input": None}])
            try:
                body = model.model_validate(data)
            except ValidationError as e:
                raise RequestValidationError([{**err, "loc": ("body", *err.get("loc", ()))}
                                              for err in e.errors(include_url=False)], body=data) from None
            return await endpoint(**{body_name: body, request_name: request, dep_name: value})

        return handler


class LeanBodyRoute(StoreBusyRetryRoute, _LeanHandler):
    """An APIRoute with the lean handler (see the module), run again while the store is busy
    (StoreBusyRetryRoute, D-8)."""

"""The error answers each route documents in the OpenAPI document (D-2): every status a
route can return is listed there, each with the API's one error shape (`ErrorBody`, the
wire form of `xced.api.errors`), in place of FastAPI's `{"detail": ...}` 422 schema, which
the API never sends.

    @router.get("/jobs/{job_id:jobid}", responses=errors(JOB))

Statuses (their causes; the error classes are in xced.api.errors):

    400  the body is not JSON at all (MalformedBody): only routes that take a body
    413  the body is over the server's limit (PayloadTooLarge, xced.server.limits): only
         routes that take a body
    401  over TCP, no session of a key-authenticated peer, or one that is over
         (Unauthenticated, KEY-3): every route
    403  the caller may not do this (PermissionDenied): every route, since the caller's
         identity itself can be refused (xced.server.auth.caller_of)
    404  no such job / profile / element (NotFound)
    409  the job's state does not allow it, or a submit's Idempotency-Key was used for another
         request (Conflict, JOB-10)
    422  the request is not valid (InvalidRequest): every route (path, query, body)
    500  a bug in xced (ServerError): every route, answered by the last-resort middleware
    503  the store is busy or cannot be written (StoreBusy, StoreUnavailable): every route
         runs under StoreBusyRetryRoute
"""

from __future__ import annotations

from typing import Any

from xced.api.models import ErrorBody

__all__ = ["ALWAYS", "BODY", "JOB", "errors", "errors_as_json"]

_WHY = {
    400: "the request body is not JSON (code malformed)",
    401: "over TCP: no session of a key-authenticated peer, or it is over; authenticate again (code "
         "unauthenticated)",
    403: "the caller may not do this (code forbidden)",
    404: "no such job, element or profile (code not_found)",
    409: "the job's state does not allow this, or a submit's Idempotency-Key was used for another request "
         "(code conflict)",
    413: "the request body is over the API server's limit, MAX_REQUEST_BYTES (code too_large)",
    422: "the request is not valid: a path, query or body value, named in `field` (code invalid)",
    500: "a bug in xced; the daemon's log has the traceback (code server_error)",
    503: "the store is busy or cannot be written; nothing was changed, retry (code store_busy, "
         "store_unavailable)",
}

#: what every route may answer
ALWAYS = (401, 403, 422, 500, 503)
#: ... and a route that takes a body
BODY = (400, 413)
#: ... and a route about one job
JOB = (404,)


def errors(*groups: tuple[int, ...] | int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route: ALWAYS plus the given statuses (ints or tuples of
    them), each documented with ErrorBody and its cause."""
    statuses = set(ALWAYS)
    for g in groups:
        statuses.update(g if isinstance(g, tuple) else (g,))
    return {s: {"model": ErrorBody, "description": _WHY[s]} for s in sorted(statuses)}


def errors_as_json(doc: dict[str, Any]) -> dict[str, Any]:
    """Make every documented error answer of OpenAPI document `doc` (in place) JSON: FastAPI
    files a route's extra responses under the route's own media type, so the errors of
    `GET /jobs/{id}/output` (text/plain when it answers 200) were documented as text."""
    ref = {"$ref": "#/components/schemas/ErrorBody"}
    for ops in doc.get("paths", {}).values():
        for op in ops.values():
            for status, resp in op.get("responses", {}).items():
                if status.isdigit() and int(status) in _WHY:
                    resp["content"] = {"application/json": {"schema": dict(ref)}}
    return doc

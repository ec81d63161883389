"""The error tree of the XCE API (DESIGN rule 6, CLI-1).

Every error has a stable `code`, an HTTP status and the CLI exit code it maps to:

    XceError                      base; exit 1
    ├── InvalidRequest  422       bad input: unknown field, bad value, unknown queue (exit 1)
    ├── NotFound        404       no such job / host / queue (exit 1)
    ├── PermissionDenied 403      not yours, not an admin, --as-user in production (exit 1)
    ├── Conflict        409       the job is in a state where this cannot be done (exit 1)
    ├── ServerError     500       a bug in xced; the message says where to look (exit 1)
    └── DaemonUnreachable         the client could not reach xced (exit 3)

The wire form of an error is `{"error": {"code": str, "message": str, "field": str|null}}`.
"""

from __future__ import annotations


class XceError(Exception):
    """Base of all XCE API errors. `message` is one line for the user."""

    code = "error"
    status = 400
    exit_code = 1

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def to_body(self) -> dict:
        return {"error": {"code": self.code, "message": self.message, "field": self.field}}


class InvalidRequest(XceError):
    code = "invalid"
    status = 422


class NotFound(XceError):
    code = "not_found"
    status = 404


class PermissionDenied(XceError):
    code = "forbidden"
    status = 403


class Conflict(XceError):
    code = "conflict"
    status = 409


class ServerError(XceError):
    code = "server_error"
    status = 500


class DaemonUnreachable(XceError):
    code = "unreachable"
    status = 0
    exit_code = 3


_BY_CODE = {c.code: c for c in (InvalidRequest, NotFound, PermissionDenied, Conflict, ServerError)}


def from_body(status: int, body: object) -> XceError:
    """Rebuild a typed error from an HTTP error response (status, parsed JSON body)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        cls = _BY_CODE.get(err.get("code"), XceError)
        return cls(str(err.get("message", "")), field=err.get("field"))
    return ServerError(f"xced answered HTTP {status}: {str(body)[:200]}")

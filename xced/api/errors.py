"""The error tree of the XCE API (DESIGN rule 6, CLI-1).

Every error has a stable `code`, an HTTP status and the CLI exit code it maps to:

    XceError                      base; exit 1
    ├── InvalidRequest  422       bad input: unknown field, bad value, unknown queue (exit 1)
    │   ├── MalformedBody 400     the body is not JSON at all (exit 1)
    │   └── MethodNotAllowed 405  the path takes other methods, named in `Allow` (exit 1)
    ├── NotFound        404       no such job / host / queue (exit 1)
    ├── Unauthenticated 401       over TCP: no session, or one that is over; the peer
    │                             authenticates with its key again (KEY-3) (exit 1)
    ├── PermissionDenied 403      not yours, not an admin, --as-user in production (exit 1)
    ├── Conflict        409       the job is in a state where this cannot be done (exit 1)
    ├── PayloadTooLarge 413       the request body is over the server's limit (MAX_REQUEST_BYTES
    │                             of xced.model.units; the message names it); not read (exit 1)
    ├── ServerError     500       a bug in xced; the message says where to look (exit 1)
    ├── StoreBusy       503       another process holds the store's lock past store_busy_timeout;
    │                             nothing was changed, retry (exit 3)
    ├── StoreUnavailable 503      the store cannot be written: its disk is full, it is read-only,
    │                             an I/O error; the message names the cause; nothing was changed (exit 3)
    └── DaemonUnreachable         the client could not reach xced (exit 3)
        └── ControllerUnreachable 503  a login host's API server could not reach its controller
                                  (or the controller presented another key than its pin); the
                                  request was not carried out (exit 3)

Exit 3 means "try again later": the request was not carried out, and the same request may
succeed once the daemon (or its store) is back.

The wire form of an error is `{"error": {"code": str, "message": str, "field": str|null}}`.
"""

from __future__ import annotations

#: The exit codes of xcecli and xceadmin (CLI-1), for their man pages' EXIT STATUS
#: (tools/clidocs.py): (code, what it means). `xcecli submit -K` also passes the job's own
#: exit code through, as `bsub -K` does.
CLI_EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "the command did what was asked"),
    (1, "the request was refused: bad input, no permission, an unknown job, host or queue, a config with "
        "errors"),
    (2, "a usage error: an unknown option or command, a missing or malformed argument"),
    (3, "the daemon could not be reached, or its store could not be written: nothing was done, and the same "
        "command may succeed later (submit, submit -K, wait and jobs keep trying for XCE_CONNECT_TIMEOUT first; "
        "the other commands exit 3 at once)"),
)


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


class MalformedBody(InvalidRequest):
    """The request body could not be read as JSON (a syntax error, or nested deeper than the
    parser goes): HTTP's 400, where a JSON body that is not a valid request is 422."""

    code = "malformed"
    status = 400


class MethodNotAllowed(InvalidRequest):
    """The path exists but not with this method; the answer's `Allow` header names those it takes."""

    code = "method_not_allowed"
    status = 405


class NotFound(XceError):
    code = "not_found"
    status = 404


class PermissionDenied(XceError):
    code = "forbidden"
    status = 403


class Unauthenticated(XceError):
    """A TCP peer's session is unknown or over (a restarted controller, SESSION_LIFE_S of
    xced.controller.peers): the peer authenticates with its key again and resends (KEY-3)."""

    code = "unauthenticated"
    status = 401


class Conflict(XceError):
    code = "conflict"
    status = 409


class PayloadTooLarge(XceError):
    """The request body is larger than the API server reads (D-8: every request is bounded
    in size); it was refused unread, and the message names the limit in bytes."""

    code = "too_large"
    status = 413


class ServerError(XceError):
    code = "server_error"
    status = 500


class StoreBusy(XceError):
    """The store stayed locked by another process for the whole of `store_busy_timeout`
    seconds (D-8); the request changed nothing and may be sent again."""

    code = "store_busy"
    status = 503
    exit_code = 3


class StoreUnavailable(XceError):
    """The store refused a write (disk full, read-only file, I/O error; D-8); the message
    names the cause and the path. The request changed nothing."""

    code = "store_unavailable"
    status = 503
    exit_code = 3


class DaemonUnreachable(XceError):
    code = "unreachable"
    status = 0
    exit_code = 3


class ControllerUnreachable(DaemonUnreachable):
    """A login host's API server (xced.server.login) could not pass the request on: its
    controller cannot be reached, or presents a key other than the pinned one. Nothing was
    carried out. A DaemonUnreachable, so a client rides it out as it rides out a stopped
    daemon (`xcecli wait`, `submit -K`), and the CLI exits 3."""

    code = "controller_unreachable"
    status = 503
    exit_code = 3


_BY_CODE = {c.code: c for c in (InvalidRequest, NotFound, PermissionDenied, Unauthenticated, Conflict, PayloadTooLarge, ServerError,
                                 StoreBusy, StoreUnavailable, MalformedBody, MethodNotAllowed, ControllerUnreachable)}
#: every `code` an error answer may carry (the API documents them, xced.api.models.ErrorBody)
CODES = tuple(_BY_CODE)


def from_body(status: int, body: object) -> XceError:
    """Rebuild a typed error from an HTTP error response (status, parsed JSON body)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        cls = _BY_CODE.get(err.get("code"), XceError)
        return cls(str(err.get("message", "")), field=err.get("field"))
    return ServerError(f"xced answered HTTP {status}: {str(body)[:200]}")

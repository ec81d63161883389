"""A login host's API server (KEY-3, D-6, SUBMIT-1): `xced --roles apiserver --controller
tcp://CTL:PORT --controller-key FILE|SHA256:...`.

As on LSF's and Slurm's login nodes, users of a login host submit to the cluster's master
from there: they run `xcecli` against the Unix socket of the login host's TopDir exactly
as on the controller host. This server

1. identifies each client by SO_PEERCRED (`xced.server.auth.PeerCredProtocol`), with the
   Unix socket's one rule (`xced.server.auth.unix_identity`): an xced not running as root
   serves only its own user and root; an asserted user (`X-XCE-As-User`, `xcecli
   --as-user`, XCE_TEST_USER) only when the controller says the cluster is in test mode,
   so a production login host refuses it (403) before anything is passed on (KEY-1, D-6).
   A production login host must run as root: its key lets it name any user, so one run
   by a user would let that user act as anyone; run by another user it refuses every
   request, saying so (test mode keeps it for harnesses);
2. passes every request under /xce/v1/ to the controller over its pinned TLS channel
   (xced.api.peer_client.PeerClient, authenticated with the login host's own key in the
   `apiserver` role), naming the user it identified (`x-xce-user`, `x-xce-uid`,
   `x-xce-gid`; xced.server.auth.USER_HEADER, UID_HEADER, GID_HEADER). The controller
   checks that user's permissions as it does for its own socket's clients (KEY-3);
3. streams the controller's answer back as it is (status, content type, body), with no
   read timeout: long polls (`xcecli wait`, `submit -K`) answer when the controller does.
   A client that goes away while it waits has its request to the controller dropped.

It never serves the worker channel (workers connect to the controller directly, D-1).

Its own answers, in the API's error shape (`{"error": {"code", "message", "field"}}`):

- 503 `controller_unreachable` (xced.api.errors.ControllerUnreachable, exit 3 in the CLI,
  which a `wait` rides out): the controller cannot be reached, or presents a key other
  than the pinned one; nothing was done;
- 403 `forbidden`: the client may not use this login host (unix_identity), or the
  controller refuses the login host's key (untrusted, revoked, expired, trusted for
  another host or only in another role than apiserver): the message says which and what
  the cluster admin does about it;
- 404 `not_found`: a path outside /xce/v1/, or the worker channel;
- 413 `too_large`: a body over MAX_CONFIG_REQUEST_BYTES (the largest any route takes;
  the controller holds each route to its own limit);
- 500 `server_error`: a bug here; the login host's log has the traceback.

`create_login_app(forwarder)` builds the ASGI app (Starlette; no module globals).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from xced.api import errors
from xced.api.peer import CHANNEL_PATH
from xced.constants import API_PREFIX
from xced.model.units import MAX_CONFIG_REQUEST_BYTES
from xced.server.auth import (AS_USER_HEADER, GID_HEADER, PEER_KEY, UID_HEADER, USER_HEADER, _user_name,
                              unix_identity)

__all__ = ["LoginForwarder", "create_login_app"]

log = logging.getLogger("xced.server.login")

#: HTTP methods passed on (every method the API has, and a few it may answer 405 to)
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
#: request headers never passed on: hop-by-hop ones (RFC 9110 7.6.1), those httpx sets itself
#: (host, content-length), the login host's own session, and the identity headers, which
#: are the login host's to set (a client could otherwise name any user)
_DROP_REQUEST = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                           "transfer-encoding", "upgrade", "host", "content-length", "authorization", "cookie",
                           "expect", USER_HEADER, UID_HEADER, GID_HEADER, AS_USER_HEADER})
#: answer headers not passed back: hop-by-hop ones, and those uvicorn sets itself
_DROP_RESPONSE = frozenset({"connection", "keep-alive", "transfer-encoding", "upgrade", "trailer", "date", "server"})


class LoginForwarder:
    """What the login host's app needs: `client`, a PeerClient of the controller in the
    `apiserver` role; `topdir`, where the controller's pin is saved at the first session
    (`keys/controller`), or None; `daemon_user`, the user this xced runs as (default: its
    effective uid's name). `fingerprint` names the login host's key in refusals."""

    def __init__(self, client, *, topdir: Path | None = None, daemon_user: str | None = None,
                 fingerprint: str | None = None) -> None:
        self.client = client
        self.topdir = topdir
        self.daemon_user = daemon_user or _user_name(os.geteuid())
        self.fingerprint = fingerprint
        self._pin_saved = False

    # ------------------------------------------------------------------ the controller's session

    async def connect(self) -> str:
        """Authenticate to the controller if there is no session yet, and return the
        cluster's mode ("test" or "production"; production when the controller does not
        say). Saves the controller's pin in the TopDir after the first session. Raises
        ControllerUnreachable (cannot reach it; another key than the pin) or
        PermissionDenied (the controller refuses this login host's key), with messages for
        the login host's users."""
        from xced.auth.tls import PinMismatch

        pc = self.client
        try:
            await pc.session()
        except PinMismatch as e:
            raise errors.ControllerUnreachable(f"this login host does not trust the controller: {e}") from None
        except (ssl.SSLError, OSError) as e:
            raise errors.ControllerUnreachable(self._unreachable(f"cannot reach the controller at {pc.url}: {e}")) \
                from None
        except errors.DaemonUnreachable as e:
            raise errors.ControllerUnreachable(self._unreachable(e.message)) from None
        except errors.PermissionDenied as e:
            raise errors.PermissionDenied(self._refused(e.message)) from None
        except errors.XceError as e:
            raise type(e)(f"the controller at {pc.url} did not give this login host a session: {e.message}",
                          field=e.field) from None
        if not self._pin_saved and self.topdir is not None:
            from xced.auth.tls import save_pin

            try:
                save_pin(self.topdir, pc.pin)
                self._pin_saved = True
            except OSError as e:
                log.warning("could not save the controller's pin in %s: %s", self.topdir / "keys", e)
        return pc.mode or "production"

    def _unreachable(self, why: str) -> str:
        return f"this login host ({self.client.host}): {why}; nothing was done: try again once the controller is back"

    def _refused(self, why: str) -> str:
        pc = self.client
        hint = "" if "xceadmin keys trust" in why else (
            f"; a cluster admin trusts it with `xceadmin keys trust host.pub --host {pc.host} --role apiserver` "
            f"(the login host's keys/host.pub" + (f", {self.fingerprint})" if self.fingerprint else ")"))
        return (f"this login host ({pc.host}) cannot act for users: the controller at {pc.url} refuses its key: "
                f"{why}{hint}")

    # ------------------------------------------------------------------ one request

    async def forward(self, request: Request):
        """Answer one HTTP request (see the module docstring): an ASGI response, or raises
        XceError for an answer of the login host's own."""
        raw = request.scope.get("raw_path")
        path = raw.decode("latin-1") if raw else request.url.path  # as sent: percent-escapes stay escaped
        if not (path == API_PREFIX or path.startswith(API_PREFIX + "/")):
            raise errors.NotFound(f"{request.method} {path[:120]}: a login host serves the XCE API under {API_PREFIX}/ "
                                  f"only")
        rel = path[len(API_PREFIX):] or "/"
        if rel == CHANNEL_PATH:
            raise errors.NotFound(f"{API_PREFIX}{CHANNEL_PATH}: a login host does not serve the worker channel; "
                                  f"workers connect to the controller directly (xced --roles worker --controller "
                                  f"{self.client.url})")
        peer = request.scope.get(PEER_KEY)
        if peer is None:
            raise errors.PermissionDenied("a login host takes requests on its Unix socket only, where it knows who "
                                          "calls (SO_PEERCRED)")
        asserted = request.headers.get(AS_USER_HEADER)
        # who may use this login host does not depend on the controller: refuse first
        unix_identity(peer, None, mode="production", daemon_user=self.daemon_user)
        body = await _read_body(request)
        mode = await self.connect()
        if mode != "test" and os.geteuid() != 0:
            raise errors.PermissionDenied(
                f"this login host runs as {self.daemon_user}, not root, and the cluster is in production mode: its "
                f"key lets it act for any user, so {self.daemon_user} could act as anyone; a production login host "
                f"runs as root (KEY-7)")
        user, _, _, is_asserted = unix_identity(peer, asserted, mode=mode, daemon_user=self.daemon_user)
        headers = [(k, v) for k, v in request.headers.items() if k not in _DROP_REQUEST]
        if "accept-encoding" not in request.headers:
            headers.append(("accept-encoding", "identity"))  # the answer goes back as it comes: no decoding here
        real = _user_name(peer[1])
        headers += [(USER_HEADER, real), (UID_HEADER, str(peer[1])), (GID_HEADER, str(peer[2]))]
        if is_asserted:  # test mode: the controller takes it (and its own checks) from here
            headers.append((AS_USER_HEADER, user))
        target = rel + (("?" + request.url.query) if request.url.query else "")
        log.debug("%s %s for %s (uid %s)", request.method, target, real, peer[1])
        r = await self._send(request, target, headers, body)
        if r is None:
            return _Nothing()
        return _Relay(r)

    async def _send(self, request: Request, target: str, headers: list, body: bytes):
        """The controller's open answer, or None when the client went away first (the
        request to the controller is then dropped). Raises as `connect`."""
        pc = self.client
        upstream = asyncio.ensure_future(pc.request(request.method, target, headers=headers, content=body or None,
                                                    stream=True))
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({upstream, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not upstream.done():
                upstream.cancel()
            gone.cancel()
        if not upstream.done() or upstream.cancelled():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                r = await upstream  # it may have answered meanwhile: close that answer
                await r.aclose()
            return None
        try:
            return upstream.result()
        except errors.PermissionDenied as e:  # the session was refused (a revoked key): the request itself was not
            raise errors.PermissionDenied(self._refused(e.message)) from None
        except errors.DaemonUnreachable as e:
            raise errors.ControllerUnreachable(self._unreachable(e.message)) from None
        except ssl.SSLError as e:
            raise errors.ControllerUnreachable(self._unreachable(f"cannot reach the controller at {pc.url}: {e}")) \
                from None
        except errors.XceError as e:
            raise type(e)(f"the controller at {pc.url}: {e.message}", field=e.field) from None

    async def close(self) -> None:
        """Close the connections to the controller."""
        await self.client.close()


async def _read_body(request: Request) -> bytes:
    """The whole request body, at most MAX_CONFIG_REQUEST_BYTES; PayloadTooLarge beyond."""
    limit = MAX_CONFIG_REQUEST_BYTES
    declared = request.headers.get("content-length")
    too_large = errors.PayloadTooLarge(f"the request body is larger than the {limit >> 20} MiB a login host passes on "
                                       f"(MAX_CONFIG_REQUEST_BYTES); it was not read")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks, n = [], 0
    async for chunk in request.stream():
        n += len(chunk)
        if n > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def _disconnected(request: Request) -> None:
    """Return once the client of `request` (whose body was read) has gone away."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


class _Nothing:
    """The answer to a client that went away: nothing."""

    async def __call__(self, scope, receive, send) -> None:
        return None


class _Relay:
    """The controller's answer `r` (an open httpx.Response), passed back as it comes:
    status, headers (but hop-by-hop ones), and the body's bytes undecoded. Closes `r`. A
    connection to the controller lost in the middle of the body cuts the client's
    connection too, so the client never takes a part of an answer for the whole."""

    def __init__(self, r) -> None:
        self.r = r

    async def __call__(self, scope, receive, send) -> None:
        import httpx

        r = self.r
        try:
            headers = [(k.lower(), v) for k, v in r.headers.raw if k.lower().decode("latin-1") not in _DROP_RESPONSE]
            await send({"type": "http.response.start", "status": r.status_code, "headers": headers})
            try:
                async for chunk in r.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except httpx.HTTPError as e:
                log.warning("lost the controller's answer to %s %s midway: %s", scope.get("method"), scope.get("path"),
                            e)
                return  # uvicorn closes the connection of an answer left unfinished
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await r.aclose()


def _error_response(err: errors.XceError) -> JSONResponse:
    return JSONResponse(err.to_body(), status_code=err.status)


def create_login_app(forwarder: LoginForwarder) -> Starlette:
    """The login host's ASGI app over `forwarder` (see the module docstring): every HTTP
    request is forwarded or answered in the API's error shape; a WebSocket (the worker
    channel) is refused with close code 1008 before it is accepted."""

    async def http(request: Request):
        try:
            return await forwarder.forward(request)
        except ClientDisconnect:  # gone while sending its body: no one to answer
            return _Nothing()
        except errors.XceError as e:
            if e.status >= 500 or e.status == 403:
                log.warning("%s %s refused (%s): %s", request.method, request.url.path, e.code, e.message)
            return _error_response(e)
        except Exception as e:  # noqa: BLE001 - a bug: still an answer in the API's shape
            log.exception("internal error")
            return _error_response(errors.ServerError(f"internal error in the login host's xced ({type(e).__name__}: "
                                                      f"{e}); see its log"))

    async def websocket(ws: WebSocket) -> None:
        await ws.close(code=1008, reason="a login host does not serve the worker channel; workers connect to the "
                                          "controller directly")

    app = Starlette(routes=[Route("/{path:path}", http, methods=METHODS),
                            WebSocketRoute("/{path:path}", websocket)])
    app.state.forwarder = forwarder
    return app

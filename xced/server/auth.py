"""Who is calling (D-6): the peer's uid from SO_PEERCRED on the Unix socket, never a
claim in the request; in test mode a client may assert a user with the
`X-XCE-As-User` header (`xcecli --as-user`, XCE_TEST_USER), which production refuses.
"""

from __future__ import annotations

import os
import pwd
import socket
import struct

from fastapi import Request
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from xced.api.errors import PermissionDenied
from xced.policy.rbac import Caller

AS_USER_HEADER = "x-xce-as-user"
PEER_KEY = "xce.peer"  # scope key: (pid, uid, gid) of a Unix-socket peer, or None


def peer_credentials(sock: socket.socket | None) -> tuple[int, int, int] | None:
    """(pid, uid, gid) of the process at the other end of a Unix socket, or None (TCP)."""
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", raw)


class PeerCredProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, plus the peer's credentials in every request scope."""

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        try:
            self._xce_peer = peer_credentials(transport.get_extra_info("socket"))
        except OSError:
            self._xce_peer = None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[PEER_KEY] = self._xce_peer  # type: ignore[index]


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


#: D-7, KEY-1: until peers authenticate with host keys, nobody over TCP can be identified, so
#: TCP takes no user request in any mode (test mode: a launch with a job's token only)
TCP_REFUSED = ("xced takes no user request over TCP until peers authenticate with host keys (KEY-1), and in "
               "production mode no launch either; use the Unix socket on the controller host")


def launch_peer(request: Request) -> tuple[int, int, int] | None:
    """A launch with a token (D-7): the Unix-socket peer's (pid, uid, gid), or None over TCP,
    which only test mode accepts. Raises PermissionDenied for TCP in production."""
    peer = request.scope.get(PEER_KEY)
    if peer is None and request.app.state.controller.config.settings.mode != "test":
        raise PermissionDenied(TCP_REFUSED)
    return peer


async def caller_of(request: Request) -> Caller:
    """FastAPI dependency: the Caller of this request. Raises PermissionDenied for any
    request over TCP (user requests over TCP come through an authenticated API server,
    KEY-3, later: nobody can be identified there yet, test mode included) and for an
    asserted user in production mode.

    A daemon that does not run as root runs every job as its own user (D-6), so it serves
    only its own user and root on the Unix socket: anyone else would get that user's
    identity (D-7; slurmd run as a user likewise runs jobs of that user only). For the same
    reason only those two may assert a user in test mode: an asserted user's job runs as
    the daemon's user, root's included."""
    ctl = request.app.state.controller
    settings = ctl.config.settings
    peer = request.scope.get(PEER_KEY)
    asserted = request.headers.get(AS_USER_HEADER)
    euid = os.geteuid()
    if peer is None:  # nobody over TCP can be identified until peers authenticate with keys
        raise PermissionDenied(TCP_REFUSED)
    if peer[1] not in (euid, 0) and (asserted is not None or euid != 0):
        me = ctl.daemon_user
        if asserted is not None:
            who = "root" if euid == 0 else f"{me}, the user this xced runs as, and root"
            raise PermissionDenied(f"--as-user (XCE_TEST_USER) is only for {who}: an asserted user's job runs as {me}")
        raise PermissionDenied(f"this xced runs as {me}, not root, so it would run your jobs as {me}; it serves only "
                               f"{me} (and root). Ask for a cluster whose xced runs as root, or start your own `xced`")
    if asserted is not None:
        if settings.mode != "test":
            raise PermissionDenied("--as-user (XCE_TEST_USER) is refused: the cluster runs in production mode; "
                                   "it is allowed only with `mode: test` in xce.yaml")
        name = asserted.strip()
        if not name or any(c.isspace() or c in ":/" for c in name):
            raise PermissionDenied(f"--as-user {asserted!r}: not a valid user name")
        return Caller(name, None, None, True, name in settings.admins)
    _, uid, gid = peer
    name = _user_name(uid)
    return Caller(name, uid, gid, False, name in settings.admins)

"""Who is calling (D-6) and what each route needs (RBAC-1).

The caller is the peer's uid from SO_PEERCRED on the Unix socket, never a claim in the
request; in test mode a client may assert a user with the `X-XCE-As-User` header (`xcecli
--as-user`, XCE_TEST_USER), which production refuses. Whether it is a cluster admin is the
config's to say (`Policy.caller`: admins in xce.yaml, or a role with cluster:admin bound at
`/`); root is not implicitly one (D-6).

Every route declares what it needs with one dependency, `requires(PERMISSION)`, which asks
the one call, `Policy.authorize` (or `Policy.authorize_job` over the job's project for the job
permissions), before the route runs; or it declares a marker (TOKEN_OR_OWNER, PEER,
NO_PERMISSION) for a route that proves who it serves otherwise. `create_app` refuses to
build an app with a route that declares nothing (`undeclared`), and the declaration is in
each operation of the OpenAPI document as `x-xce-permission`.
"""

from __future__ import annotations

import logging
import os
import pwd
import socket
import struct

from fastapi import Request
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from xced.api.errors import NotFound, PermissionDenied
from xced.model.project import JOB_PERMISSIONS, PERMISSIONS
from xced.policy.rbac import Caller

AS_USER_HEADER = "x-xce-as-user"
PEER_KEY = "xce.peer"  # scope key: (pid, uid, gid) of a Unix-socket peer, or None


class Peer(tuple):
    """(pid, uid, gid) of a Unix-socket peer, as SO_PEERCRED gives them when it connects, with
    its user name once looked up (`name`): the peer of a connection cannot change, so the
    name is looked up once per connection, not at every request on it (getpwuid reads the
    user database each time; issue 17 part 5)."""

    name: str | None = None


def peer_credentials(sock: socket.socket | None) -> Peer | None:
    """(pid, uid, gid) of the process at the other end of a Unix socket, or None (TCP)."""
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return Peer(struct.unpack("3i", raw))


def _peer_name(peer: tuple[int, int, int]) -> str:
    """The user name of `peer`'s uid (`_user_name`), kept on a Peer for its next request."""
    name = getattr(peer, "name", None)
    if name is None:
        name = _user_name(peer[1])
        if isinstance(peer, Peer):
            peer.name = name
    return name


#: the open Unix-socket connections one user (other than the daemon's own) may hold at once
#: (D-8; a second fresh tester's finding: 200 idle connections of one local user used up a
#: daemon's descriptors and every other client waited until they closed)
MAX_CONNECTIONS_PER_USER = 64


class PeerCredProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, plus the peer's credentials in every request scope.

    A user other than the daemon's own holds at most MAX_CONNECTIONS_PER_USER connections to
    the Unix socket at once: one more is closed as it is made, logged once per stretch of
    such refusals, so that one user's idle connections cannot take the descriptors every
    other client needs (the xcecli of each command opens one; a pipeline's parallel calls a
    few tens). The daemon's own user (root for a system cluster) is not counted."""

    #: uid -> its open connections now (one daemon per process)
    _open: dict[int, int] = {}
    #: uids refused since their last accepted connection (each logged once)
    _refused: set[int] = set()

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._xce_uid = None
        try:
            self._xce_peer = peer_credentials(transport.get_extra_info("socket"))
        except OSError:
            self._xce_peer = None
        if self._xce_peer is not None and self._xce_peer[1] != os.geteuid():
            uid = self._xce_peer[1]
            n = self._open.get(uid, 0)
            if n >= MAX_CONNECTIONS_PER_USER:
                if uid not in self._refused:
                    self._refused.add(uid)
                    logging.getLogger("xced.server").warning(
                        "user %s holds %d connections to the Unix socket, the most one user may: more are closed "
                        "as they are made until some of those close", _user_name(uid), n)
                transport.close()
                return
            self._refused.discard(uid)
            self._open[uid] = n + 1
            self._xce_uid = uid

    def connection_lost(self, exc) -> None:  # type: ignore[override]
        uid = getattr(self, "_xce_uid", None)
        if uid is not None:
            self._xce_uid = None
            n = self._open.get(uid, 1) - 1
            if n > 0:
                self._open[uid] = n
            else:
                self._open.pop(uid, None)
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[PEER_KEY] = self._xce_peer  # type: ignore[index]
        self.scope[TRANSPORT_KEY] = self.transport  # type: ignore[index]

    def on_headers_complete(self) -> None:
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not None and self.cycle is not before:  # a new request's cycle (not an upgrade)
            self.cycle.transport = OneWriteTransport(self.transport, self.cycle)


class OneWriteTransport:
    """The transport uvicorn's request cycle writes a response to, sending a response whose
    length is known in one write: the status line and headers are held until the body's
    first bytes, then both go in one `send`. uvicorn writes them apart, which costs a
    second system call on the daemon and a second wake-up of the client for each answer
    (about 4% of the daemon's CPU per submit, issue 17 part 5).

    Only a response with a Content-Length above 0 to a method other than HEAD is held (its
    body must follow); a chunked one, an empty one, `100 Continue` and every write of a
    response under way pass straight through. `close()` sends what is held first, so a
    response whose app failed after its headers still sends them. Everything else is the
    transport's own (`__getattr__`)."""

    __slots__ = ("_transport", "_cycle", "_held")

    def __init__(self, transport, cycle) -> None:
        self._transport = transport
        self._cycle = cycle
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
            return
        c = self._cycle
        if c.response_started and not c.response_complete and c.chunked_encoding is False \
                and c.expected_content_length > 0 and c.scope["method"] != "HEAD":
            self._held = bytes(data)  # the status line and headers: the body follows
            return
        self._transport.write(data)

    def close(self) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            self._transport.write(held)
        self._transport.close()

    def __getattr__(self, name: str):
        return getattr(self._transport, name)


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


#: KEY-1, KEY-3: over TCP the daemon takes only peers that authenticated with their keys
TCP_REFUSED = ("over TCP xced takes requests only from peers that authenticated with their host keys (a login "
               "host's API server, a signed xceadmin; KEY-3); on the controller host, use its Unix socket")
#: the header of an HTTP peer's session (xced.controller.peers.open_session)
SESSION_SCHEME = "xce-session"
#: the headers with which a login host's API server names the user it identified (KEY-3)
USER_HEADER, UID_HEADER, GID_HEADER = "x-xce-user", "x-xce-uid", "x-xce-gid"
TRANSPORT_KEY = "xce.transport"  # scope key: the connection's transport (closed when its key is revoked)


def launch_peer(request: Request) -> tuple[int, int, int] | None:
    """A launch with a token (D-7): the Unix-socket peer's (pid, uid, gid), or None over TCP,
    which only test mode accepts. Raises PermissionDenied for TCP in production."""
    peer = request.scope.get(PEER_KEY)
    if peer is None and request.app.state.controller.config.settings.mode != "test":
        raise PermissionDenied(TCP_REFUSED)
    return peer


def peer_of(request: Request, declared: str):
    """The key-authenticated peer (xced.controller.peers.PeerIdentity) of a TCP request to a
    route that declares `declared`, checked against its role's allowlist
    (xced.auth.roles). Raises Unauthenticated (401: no session, or one that is over) or
    PermissionDenied (a key no longer trusted, or a role that may not use the route)."""
    from xced.auth.roles import route_allowed
    from xced.api.errors import Unauthenticated

    ctl = request.app.state.controller
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != SESSION_SCHEME or not token.strip():
        raise Unauthenticated(TCP_REFUSED)
    ident = ctl.session_identity(token.strip(), request.scope.get(TRANSPORT_KEY))
    if not route_allowed(ident.role, declared):
        hint = (": a cluster admin's request goes from the controller host, or from another host signed with the "
                "admin key (`xceadmin --controller URL --controller-key KEY ...`)" if ident.role == "apiserver" and
                declared == "cluster:admin" else "")
        raise PermissionDenied(f"a peer in the {ident.role} role (host {ident.host}) may not use this route "
                               f"(it needs {declared}); KEY-3's allowlist of the role does not include it{hint}")
    return ident


def _tcp_caller(request: Request, declared: str) -> Caller:
    """The Caller of a TCP request (KEY-3): a login host's API server acting for the user it
    identified (USER_HEADER, UID_HEADER, GID_HEADER), or an admin key acting as a cluster
    admin named `admin-key@HOST`. Raises as `peer_of`, and PermissionDenied for a user
    claimed by a peer of another role, or missing from an API server's request."""
    from xced.auth.roles import ACTS_FOR_USERS

    ctl = request.app.state.controller
    ident = peer_of(request, declared)
    user = request.headers.get(USER_HEADER)
    asserted = request.headers.get(AS_USER_HEADER)
    if ident.role not in ACTS_FOR_USERS:
        if user is not None or asserted is not None:
            raise PermissionDenied(f"a peer in the {ident.role} role (host {ident.host}) cannot act for users; only "
                                   f"an API server (apiserver role) passes on the requests of users it identified")
        return Caller(f"admin-key@{ident.host}", None, None, False, True)
    if asserted is not None and ctl.config.settings.mode != "test":
        raise PermissionDenied("--as-user (XCE_TEST_USER) is refused: the cluster runs in production mode")
    if user is None or not user.strip():
        raise PermissionDenied(f"the API server of {ident.host} did not say which user it acts for ({USER_HEADER})")
    try:
        uid = int(request.headers[UID_HEADER]) if UID_HEADER in request.headers else None
        gid = int(request.headers[GID_HEADER]) if GID_HEADER in request.headers else None
    except ValueError:
        raise PermissionDenied(f"the API server of {ident.host} sent a uid or gid that is not a number") from None
    if os.geteuid() != 0 and user not in (ctl.daemon_user, "root"):
        raise PermissionDenied(f"this xced runs as {ctl.daemon_user}, not root, so it would run your jobs as "
                               f"{ctl.daemon_user}; it serves only {ctl.daemon_user} (and root)")
    if asserted is not None:
        return ctl.policy.caller(asserted.strip(), None, None, True)
    return ctl.policy.caller(user, uid, gid, False)


def unix_identity(peer: tuple[int, int, int], asserted: str | None, *, mode: str,
                  daemon_user: str) -> tuple[str, int | None, int | None, bool]:
    """Who a Unix-socket client is, by its SO_PEERCRED `peer` (pid, uid, gid) and the
    `X-XCE-As-User` header it sent (`asserted`, or None), for a daemon whose cluster runs in
    `mode` ("test" or "production") and that runs as `daemon_user`: (user name, uid, gid,
    whether the user is asserted); an asserted user has no uid or gid. The one rule of the
    Unix socket, for the controller's API server (`caller_of`) and a login host's
    (xced.server.login) alike.

    A daemon that does not run as root runs every job as its own user (D-6), so it serves
    only its own user and root: anyone else would get that user's identity (D-7; slurmd
    run as a user likewise runs jobs of that user only). For the same reason only those two
    may assert a user in test mode: an asserted user's job runs as the daemon's user, root's
    included. Production refuses every asserted user, whoever asks, before anything else
    (KEY-1, D-6). Raises PermissionDenied saying which rule refused and what would be
    allowed."""
    if asserted is not None and mode != "test":  # first: in production nobody may, whoever asks
        raise PermissionDenied("--as-user (XCE_TEST_USER) is refused: the cluster runs in production mode; "
                               "it is allowed only with `mode: test` in xce.yaml")
    euid = os.geteuid()
    if peer[1] not in (euid, 0) and (asserted is not None or euid != 0):
        me = daemon_user
        if asserted is not None:
            who = "root" if euid == 0 else f"{me}, the user this xced runs as, and root"
            raise PermissionDenied(f"--as-user (XCE_TEST_USER) is only for {who}: an asserted user's job runs as {me}")
        raise PermissionDenied(f"this xced runs as {me}, not root, so it would run your jobs as {me}; it serves only "
                               f"{me} (and root). Ask for a cluster whose xced runs as root, or start your own `xced`")
    if asserted is not None:
        name = asserted.strip()
        if not name or name[0] in "@-" or any(c.isspace() or c in ":/" for c in name):
            raise PermissionDenied(f"--as-user {asserted!r}: not a valid user name (no spaces, ':' or '/', and "
                                   f"not starting with '@', which names a group, or '-')")
        return name, None, None, True
    _, uid, gid = peer
    return _peer_name(peer), uid, gid, False


async def caller_of(request: Request, declared: str = "cluster:view") -> Caller:
    """The Caller of this request, for a route that declares `declared`. On the Unix socket:
    the peer by SO_PEERCRED (an asserted user in test mode only), by `unix_identity`, whose
    docstring says the rule (a daemon not running as root serves only its own user and
    root). Over TCP: a key-authenticated peer (`_tcp_caller`). Raises PermissionDenied (or
    Unauthenticated, 401)."""
    ctl = request.app.state.controller
    peer = request.scope.get(PEER_KEY)
    if peer is None:
        return _tcp_caller(request, declared)
    user, uid, gid, asserted = unix_identity(peer, request.headers.get(AS_USER_HEADER),
                                             mode=ctl.config.settings.mode, daemon_user=ctl.daemon_user)
    return ctl.policy.caller(user, uid, gid, asserted)


#: what a route may declare instead of a permission, for a route that proves itself otherwise:
#: POST /jobs/{id}/launch takes the job's launch token (a process inside the job) or the job's
#: owner, and no one else, cluster admins included (D-7, JOB-7; xced.controller.actions.launch)
TOKEN_OR_OWNER = "token-or-owner"
#: a route of peer hosts (the worker channel, D-1): its peers authenticate in the channel with
#: their keys (KEY-3; unauthenticated in test mode only)
PEER = "peer"
#: a route that needs no permission (RBAC-4: the preset routes): anyone on the Unix socket, and
#: over TCP an authenticated peer whose role allows it (a login host's users)
NO_PERMISSION = "none"
#: a route of the key handshake itself (challenge, session, enrolment, KEY-3, KEY-5): open to
#: anyone, TCP included; its body carries the proof
OPEN = "open"
MARKERS = (TOKEN_OR_OWNER, PEER, NO_PERMISSION, OPEN)
#: the permissions a route may need of the cluster as a whole (RBAC-1)
CLUSTER_PERMISSIONS = ("queue:submit", "cluster:view", "cluster:admin")
#: the attribute of a `requires` dependency naming what it declares, and the OpenAPI key saying it
PERMISSION_ATTR = "xce_permission"
OPENAPI_KEY = "x-xce-permission"


def requires(permission: str, what: str | None = None):
    """A FastAPI dependency declaring (and checking) what a route needs; it carries the
    declaration as its `xce_permission` attribute, which `route_permissions` reads.

    - a cluster permission (`queue:submit`, `cluster:view`, `cluster:admin`): the dependency
      gives the route the Caller once `Policy.authorize(caller, permission, None, what)`
      holds (RBAC-1: everyone holds queue:submit and cluster:view);
    - a job permission (`job:view`, `job:kill`, `job:modify`, `job:requeue`) for a route with
      `{job_id}` in its path: the job's owner, or who holds it over the job's project
      (`Policy.authorize_job`; RBAC-3: the project admins above it; a role bound there; the
      cluster admins). For an unknown job it lets the route answer: a request that is not
      valid gets its 422 first, then the route's 404 (every such route looks the job up);
    - a marker (TOKEN_OR_OWNER, PEER, NO_PERMISSION, OPEN): the route proves it; here only
      a TCP peer's role (KEY-3) is checked, for NO_PERMISSION and for TOKEN_OR_OWNER under a
      session.

    `project:submit` and `project:view` are decided with their project where it is known
    (`Policy.submit_project`, `Policy.visible_projects`), never as a route's whole need: a
    ValueError, as is any name RBAC-1 does not list. `what` ("apply a config") is what a
    refusal says the caller may not do. Refusals are PermissionDenied (403), and come before
    the body is validated (422): who may not make a request learns nothing from its body."""
    if permission in JOB_PERMISSIONS:
        async def dependency(request: Request, job_id: int) -> Caller:
            caller = await caller_of(request, permission)
            ctl = request.app.state.controller
            try:
                job = ctl.job(job_id)
            except NotFound:  # not a permission matter: the route answers 404, once the request is valid
                return caller
            ctl.policy.authorize_job(caller, permission, job.user, job.spec.project, f"job {job_id}", what)
            return caller
    elif permission in CLUSTER_PERMISSIONS:
        async def dependency(request: Request) -> Caller:  # type: ignore[misc]
            caller = await caller_of(request, permission)
            request.app.state.controller.policy.authorize(caller, permission, None, what)
            return caller
    elif permission == NO_PERMISSION:
        async def dependency(request: Request) -> None:  # type: ignore[misc]
            # anyone on the Unix socket; over TCP, a peer whose role allows it (KEY-3)
            if request.scope.get(PEER_KEY) is None:
                await caller_of(request, permission)
            return None
    elif permission == TOKEN_OR_OWNER:
        async def dependency(request: Request) -> None:  # type: ignore[misc]
            # the route proves the token or the owner itself, after reading the body; but a
            # key-authenticated TCP peer (a session) is held to its role's allowlist first,
            # before the body, as on every other route (KEY-3): a worker, scheduler or admin
            # key is refused naming its role, not answered a 422 about the body. A TCP
            # request without a session goes on to the route (`launch_peer`: a token over
            # TCP in test mode only; production refuses it)
            if request.scope.get(PEER_KEY) is None and request.headers.get("authorization") is not None:
                peer_of(request, permission)
            return None
    elif permission in MARKERS:
        async def dependency() -> None:  # type: ignore[misc]
            return None
    elif permission in PERMISSIONS:
        raise ValueError(f"{permission} is decided with its project (Policy.submit_project, "
                         f"Policy.visible_projects), not as a route's permission")
    else:
        raise ValueError(f"{permission!r} is neither a permission ({', '.join(PERMISSIONS)}) nor a marker "
                         f"({', '.join(MARKERS)})")
    setattr(dependency, PERMISSION_ATTR, permission)
    dependency.__name__ = "requires_" + permission.replace(":", "_").replace("-", "_")
    return dependency


def route_permissions(route) -> list[str]:
    """What a route (an APIRoute or APIWebSocketRoute) declares through `requires`, from its
    dependencies and theirs, in order: [] for a route that declares nothing."""
    found: list[str] = []
    stack = [route.dependant] if getattr(route, "dependant", None) is not None else []
    while stack:
        d = stack.pop(0)
        p = getattr(d.call, PERMISSION_ATTR, None)
        if p is not None:
            found.append(p)
        stack.extend(d.dependencies)
    return found


def all_routes(app) -> list[tuple[str, str, object]]:
    """Every route `app` serves as (path with its prefix, "GET,HEAD" or "WEBSOCKET", the route
    as it was declared): the routes of included routers too, on FastAPI versions that keep
    those lazily (`fastapi.routing.iter_route_contexts`) as on those that copy them."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # an older FastAPI: app.routes holds every route, with its prefix
        found = [(r.path, getattr(r, "methods", None), r) for r in app.routes]
    else:
        found = [(c.path, c.methods, c.original_route) for c in iter_route_contexts(app.routes)]
    return [(path, ",".join(sorted(methods or ())) or "WEBSOCKET", route) for path, methods, route in found]


def undeclared(routes: list[tuple[str, str, object]], public: set[str]) -> list[str]:
    """The routes among `routes` (`all_routes(app)`) that do not declare exactly one
    permission or marker with `requires`, as "METHODS PATH (why)"; routes of plain Starlette
    (FastAPI's own OpenAPI document and its docs pages) only when their path is not in
    `public`. [] when every route is declared."""
    bad = []
    for path, methods, route in routes:
        if getattr(route, "dependant", None) is None:
            if path not in public:
                bad.append(f"{methods} {path} (not an API route, and not one of the public documentation routes)")
            continue
        got = route_permissions(route)
        if len(got) != 1:
            bad.append(f"{methods} {path} ({'declares nothing' if not got else 'declares ' + ', '.join(got)}; "
                       f"declare one with xced.server.auth.requires)")
    return bad

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

import os
import pwd
import socket
import struct

from fastapi import Depends, Request
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from xced.api.errors import NotFound, PermissionDenied
from xced.model.project import JOB_PERMISSIONS, PERMISSIONS
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
        if not name or name[0] in "@-" or any(c.isspace() or c in ":/" for c in name):
            raise PermissionDenied(f"--as-user {asserted!r}: not a valid user name (no spaces, ':' or '/', and "
                                   f"not starting with '@', which names a group, or '-')")
        return ctl.policy.caller(name, None, None, True)
    _, uid, gid = peer
    return ctl.policy.caller(_user_name(uid), uid, gid, False)


#: what a route may declare instead of a permission, for a route that proves itself otherwise:
#: POST /jobs/{id}/launch takes the job's launch token (a process inside the job) or the job's
#: owner, and no one else, cluster admins included (D-7, JOB-7; xced.controller.actions.launch)
TOKEN_OR_OWNER = "token-or-owner"
#: a route of peer hosts (the worker channel, D-1): its peers authenticate with host keys (KEY-1,
#: later); until then only test mode takes them
PEER = "peer"
#: a route that needs no permission (RBAC-4: the preset routes): anyone on the Unix socket, never
#: over TCP, where no one can be identified yet
NO_PERMISSION = "none"
MARKERS = (TOKEN_OR_OWNER, PEER, NO_PERMISSION)
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
    - a marker (TOKEN_OR_OWNER, PEER, NO_PERMISSION): no check here, the route proves it.

    `project:submit` and `project:view` are decided with their project where it is known
    (`Policy.submit_project`, `Policy.visible_projects`), never as a route's whole need: a
    ValueError, as is any name RBAC-1 does not list. `what` ("apply a config") is what a
    refusal says the caller may not do. Refusals are PermissionDenied (403), and come before
    the body is validated (422): who may not make a request learns nothing from its body."""
    if permission in JOB_PERMISSIONS:
        async def dependency(request: Request, job_id: int, caller: Caller = Depends(caller_of)) -> Caller:
            ctl = request.app.state.controller
            try:
                job = ctl.job(job_id)
            except NotFound:  # not a permission matter: the route answers 404, once the request is valid
                return caller
            ctl.policy.authorize_job(caller, permission, job.user, job.spec.project, f"job {job_id}", what)
            return caller
    elif permission in CLUSTER_PERMISSIONS:
        async def dependency(request: Request, caller: Caller = Depends(caller_of)) -> Caller:  # type: ignore[misc]
            request.app.state.controller.policy.authorize(caller, permission, None, what)
            return caller
    elif permission == NO_PERMISSION:
        async def dependency(request: Request) -> None:  # type: ignore[misc]
            # anyone, but as every user request: on the Unix socket (over TCP nobody can be
            # identified until peers authenticate with keys, KEY-3)
            if request.scope.get(PEER_KEY) is None:
                raise PermissionDenied(TCP_REFUSED)
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

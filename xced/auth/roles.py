"""What each role of a peer key may do (KEY-3): the per-role allowlists.

A peer authenticated with its key (xced.controller.peers) acts in one role, and each role
has the routes and channel messages it may send. A route is named by what it declares
(xced.server.auth.requires): a permission, or a marker for a route that proves who it
serves otherwise. The table is the rule; `route_allowed` and `message_allowed` read it,
and the API server asks them before any route runs.

- `worker`: the worker channel only (the `peer` marker), and on it the worker's own
  messages (started, finished, start_failed, reply, heartbeat) and the launches it relays for the
  jobs running on it (launch: with the job's token; xced.controller.channel). A worker cannot submit, kill, read
  jobs, or change config.
- `apiserver`: a login host's API server acts for the users it identified by SO_PEERCRED
  (LSF's and Slurm's login nodes): every user route, with that user's permissions, but
  not the cluster admin's routes (keys, config, recordings, the test clock): those take
  the admin key (`xceadmin --controller`), so a login host, even its root, cannot change
  what the cluster trusts; never the worker channel.
- `admin`: `xceadmin` signing with its admin key from another host: the cluster admin's
  routes (cluster:admin, cluster:view), the job routes as a cluster admin, and the routes
  that need no permission; never a submit (an admin key is nobody's Unix user, so a job
  would have no one to run as), a launch, or the worker channel.
- `scheduler`: nothing yet. The scheduler runs inside the controller; a scheduler key is
  accepted in the trusted list and by enrolment for the day it runs apart.

Only `apiserver` acts for users (`acts_for_users`): a peer of another role that names a
user is refused.
"""

from __future__ import annotations

from xced.model.keys import ROLES

__all__ = ["ACTS_FOR_USERS", "ROLE_MESSAGES", "ROLE_ROUTES", "message_allowed", "route_allowed"]

_JOB = ("job:view", "job:kill", "job:modify", "job:requeue")
#: role -> what its routes may declare (permissions and markers of xced.server.auth)
ROLE_ROUTES: dict[str, frozenset[str]] = {
    "worker": frozenset({"peer"}),
    "apiserver": frozenset({"queue:submit", "cluster:view", *_JOB, "none", "token-or-owner"}),
    "admin": frozenset({"cluster:view", "cluster:admin", *_JOB, "none"}),
    "scheduler": frozenset(),
}
#: role -> the worker-channel messages (xced.api.peer.WorkerMessage ops) it may send
ROLE_MESSAGES: dict[str, frozenset[str]] = {
    "worker": frozenset({"started", "finished", "start_failed", "launch", "reply", "heartbeat"}),
    "apiserver": frozenset(),
    "admin": frozenset(),
    "scheduler": frozenset(),
}
#: the roles whose requests carry a user for the permission checks
ACTS_FOR_USERS = frozenset({"apiserver"})

assert set(ROLE_ROUTES) == set(ROLES) == set(ROLE_MESSAGES)


def route_allowed(role: str, declared: str) -> bool:
    """Whether a peer in `role` may use a route that declares `declared` (a permission or a
    marker of xced.server.auth); False for an unknown role."""
    return declared in ROLE_ROUTES.get(role, frozenset())


def message_allowed(role: str, op: str) -> bool:
    """Whether a peer in `role` may send worker-channel message `op`."""
    return op in ROLE_MESSAGES.get(role, frozenset())

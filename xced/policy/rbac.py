"""Permission checks (RBAC-1, D-6), v1: the smallest rule set the job commands need.

v1 rules: anyone who can reach the daemon may view the cluster and every job
(`cluster:view`, `job:view`) and submit to any queue (`queue:submit`), but a job's
environment (which holds the submitter's secrets) only its owner and the cluster admins
see (D-7; the projects issue widens it to `job:view` over the job's project); a job's owner
and the cluster admins named in xce.yaml may kill, stop, resume and requeue it
(`job:kill`, `job:modify`, `job:requeue`). Root is not implicitly an admin (D-6).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: a user name, the uid/gid from SO_PEERCRED (None over TCP), whether
    the name was asserted in test mode (D-6), and whether that user is a cluster admin."""

    user: str
    uid: int | None
    gid: int | None
    asserted: bool
    is_admin: bool


def may_control_job(caller: Caller, job_user: str) -> bool:
    """`job:kill` / `job:modify` / `job:requeue`: the owner or a cluster admin."""
    return caller.is_admin or caller.user == job_user


def may_view_env(caller: Caller, job_user: str) -> bool:
    """A job's environment (D-7): the submitter's whole shell environment, keys and
    passwords included, so only the job's owner and the cluster admins see it, as only the
    owner (and root) can read a process's /proc/PID/environ."""
    return caller.is_admin or caller.user == job_user


def require_admin(caller: Caller, what: str, hint: str = "") -> None:
    """`cluster:admin` (RBAC-1): only the admins named in xce.yaml (root is not implicitly one,
    D-6). Raises PermissionDenied saying who may `what` ("apply a config"), and `hint`."""
    if not caller.is_admin:
        from xced.api.errors import PermissionDenied

        raise PermissionDenied(f"user {caller.user} is not a cluster admin; only the admins named in xce.yaml "
                               f"may {what}{hint}")

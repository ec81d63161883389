"""Project routes (PRJ-8): `GET /projects`, the projects the caller may see.

Listing needs `cluster:view` (everyone); which projects it shows is the policy's
(`Policy.visible_projects`): those the caller belongs to, the subtrees where it holds
`project:view` (project admins, roles), every one for a cluster admin. Each comes with its
configured share, quota and member quota, what its subtree's running elements hold now and
its own pending elements (`Controller.project_use`).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from xced.api.models import ProjectList, ProjectOut
from xced.model.project import ProjectConfig
from xced.policy.rbac import Caller
from xced.server.auth import requires
from xced.server.busy import StoreBusyRetryRoute
from xced.server.responses import errors

router = APIRouter(route_class=StoreBusyRetryRoute)


def configured_share(p: ProjectConfig) -> dict[str, float] | None:
    """The share as projects.yaml gives it (PRJ-6): {"percent": P} for `share: P%`; else per
    resource the amount, or `RESOURCE_percent` for a percentage of the parent's
    (`{slots: 50%, gpu: 8}` -> {"slots_percent": 50, "gpu": 8}); None for no share."""
    if p.share_percent is not None:
        return {"percent": p.share_percent}
    if not p.share:
        return None
    return {(k if t.amount is not None else f"{k}_percent"): (t.amount if t.amount is not None else t.percent)
            for k, t in p.share.items()}


@router.get("/projects", response_model=ProjectList, responses=errors())
async def projects(request: Request, caller: Caller = Depends(requires("cluster:view"))) -> ProjectList:
    """`xcecli projects` (PRJ-8): the projects `caller` may see, parents before children;
    none in open mode (PRJ-4)."""
    ctl = request.app.state.controller
    use = ctl.project_use()
    out = []
    for path in ctl.policy.visible_projects(caller):
        p = ctl.config.projects.get(path)
        if p is None:
            continue
        u = use.get(path, {"use": {}, "pending": 0})
        out.append(ProjectOut(path=path, share=configured_share(p), quota=dict(p.quota),
                              member_quota=dict(p.member_quota), use=u["use"], pending=u["pending"],
                              members=list(p.members), admins=list(p.admins)))
    return ProjectList(projects=out)

"""Project routes (PRJ-8): `GET /projects`, the projects the caller may see.

Listing needs `cluster:view` (everyone); which projects it shows is the policy's
(`Policy.visible_projects`): those the caller belongs to, the subtrees where it holds
`project:view` (project admins, roles), every one for a cluster admin. Each comes with its
share resolved against the hosts present now, its quota and member quota and its effective
cap (xced.policy.projects.report, the scheduler's own carving), what its subtree's running
elements hold now and its own pending elements.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from xced.api.models import ProjectList, ProjectOut
from xced.model.project import ProjectConfig
from xced.policy.projects import report, supply_totals
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
    cfg = ctl.config.projects
    visible = set(ctl.policy.visible_projects(caller))
    if not visible:
        return ProjectList(projects=[])
    rep = report(cfg, supply_totals(ctl.host_supplies()), ctl.project_usage())
    pending = ctl.project_pending()
    by_path = {p.path: p for p in cfg.projects}
    out = []
    for r in rep["projects"]:
        path = r["path"]
        p = by_path.get(path)
        if path not in visible or p is None:
            continue
        out.append(ProjectOut(path=path, description=p.description, share=r["share"],
                              share_configured=configured_share(p), draws_from=r["draws_from"],
                              unassigned=r["unassigned"], quota=r["quota"], member_quota=r["member_quota"],
                              cap=r["cap"], capped=r["capped"], use=r["use"], member_use=r["member_use"],
                              pending=pending.get(path, 0), members=list(p.members), admins=list(p.admins)))
    return ProjectList(projects=out, supply=rep["supply"])

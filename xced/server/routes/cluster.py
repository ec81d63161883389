"""Cluster routes: info, hosts, queues, apps (CLI-3), the config swap (CFG-3) and session
recording (SIM-2). Reading needs `cluster:view`, which everyone holds; changing the config and
recording need `cluster:admin` (RBAC-1, RBAC-3: only the cluster admin changes projects, by
config; LSF's badmin likewise is the LSF administrators')."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Request

import xced
from xced.api.errors import Conflict, InvalidRequest, NotFound
from xced.api.models import (ApplyConfigRequest, ApplyConfigResult, AppList, AppOut, ClusterParams, HostControlRequest,
                             HostEventList, HostEventOut,
                             HostControlResult, HostList, HostOut, Info, QueueList, QueueOut, RecordRequest,
                             RecordResult)
from xced.policy.rbac import Caller
from xced.server.busy import StoreBusyRetryRoute
from xced.server.auth import requires
from xced.server.responses import BODY, errors

router = APIRouter(route_class=StoreBusyRetryRoute)


@router.get("/info", response_model=Info, responses=errors())
async def info(request: Request, caller: Caller = Depends(requires("cluster:view"))) -> Info:
    ctl = request.app.state.controller
    s = ctl.config.settings
    return Info(cluster_name=s.cluster_name, mode=s.mode, version=xced.__version__,
                config_hash=ctl.config.content_hash(), user=caller.user, asserted_user=caller.asserted,
                is_admin=caller.is_admin, topdir=str(ctl.topdir), daemon_user=ctl.daemon_user)


@router.get("/params", response_model=ClusterParams, responses=errors())
async def params(request: Request, _: Caller = Depends(requires("cluster:view"))) -> ClusterParams:
    """The settings in force (LSF bparams, badmin showconf mbd, lsid; CLI-8)."""
    import socket

    ctl = request.app.state.controller
    return ClusterParams(cluster_name=ctl.config.settings.cluster_name, master_host=socket.gethostname(),
                         version=xced.__version__, settings=ctl.config.settings.model_dump(mode="json"))


@router.put("/config", response_model=ApplyConfigResult, responses=errors(BODY))
async def apply_config(body: ApplyConfigRequest, request: Request,
                       caller: Caller = Depends(requires("cluster:admin", "apply a config"))) -> ApplyConfigResult:
    """CFG-3: parse the compiled config again with the strict models, check its hash and
    cross-references, and swap it in whole or refuse it whole (422 listing every problem)."""
    from pydantic import ValidationError

    from xced.model.config import ClusterConfig

    ctl = request.app.state.controller
    try:
        cfg = ClusterConfig.model_validate(body.config, strict=True)  # no "4" for 4, no true for 1 (D-2)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}"
                             for err in e.errors()[:20])
        raise InvalidRequest(f"the daemon refused the config, nothing was applied: {problems}",
                             field="config") from None
    if cfg.content_hash() != body.hash:
        raise InvalidRequest("the daemon refused the config, nothing was applied: its content hash is "
                             f"{cfg.content_hash()}, not {body.hash} as sent; compile it again with "
                             "`xceadmin build --apply`", field="hash")
    return ApplyConfigResult(**ctl.apply_config(cfg, caller))


@router.post("/sim/record", response_model=RecordResult, responses=errors(BODY, 409))
async def sim_record(body: RecordRequest, request: Request,
                     caller: Caller = Depends(requires("cluster:admin", "record sessions"))) -> RecordResult:
    """SIM-2: start or stop recording the scheduler's sessions (admins only)."""
    from xced.sim.recording import Recorder

    if body.stop == (body.name is not None):
        raise InvalidRequest("give either name (start recording) or stop: true", field="name")
    ctl = request.app.state.controller
    if body.stop:
        if ctl.recorder is None:
            raise Conflict("no recording is running; start one with `xceadmin sim record --name NAME`")
        rec = ctl.recorder
        ctl.attach_recorder(None)
        return RecordResult(**rec.close())
    if ctl.recorder is not None:
        raise Conflict(f"already recording to {ctl.recorder.path}; stop it first (`xceadmin sim record --stop`)")
    owner = (caller.uid, caller.gid) if caller.uid is not None and not caller.asserted else None
    rec = Recorder(ctl.topdir, body.name, ctl.config, owner)
    ctl.attach_recorder(rec)
    return RecordResult(path=rec.path, sessions=0)


@router.get("/hosts", response_model=HostList, responses=errors())
async def hosts(request: Request, _: Caller = Depends(requires("cluster:view"))) -> HostList:
    """Every host (LSF bhosts; CLI-3): its status, slots, memory, admin closure and jobs."""
    ctl = request.app.state.controller
    jobs = ctl.jobs_by_host()
    return HostList(hosts=[HostOut(**ctl.host_view(h, jobs)) for h in ctl.host_states()])


@router.get("/hosts/events", response_model=HostEventList, responses=errors(404))
async def host_events(request: Request, host: str | None = None,
                      _: Caller = Depends(requires("cluster:view"))) -> HostEventList:
    """Every host's history, or `host`'s, oldest first (LSF badmin hhist; CLI-4): opens,
    closes and drains with the admin's name and reason, drained, lost and rejoined; kept
    across restarts. 404 for a host the cluster does not know and never knew."""
    rows = request.app.state.controller.host_history(host)
    return HostEventList(events=[HostEventOut(time=t, host=h, kind=k, actor=a, reason=r) for t, h, k, a, r in rows])


@router.post("/hosts/{name}/{op}", response_model=HostControlResult, responses=errors(BODY, 404, 409))
async def host_control(name: str, op: Literal["open", "close", "drain"], body: HostControlRequest,
                       request: Request,
                       caller: Caller = Depends(requires("cluster:admin", "open, close or drain a host"))
                       ) -> HostControlResult:
    """CLI-4 (LSF badmin hopen/hclose, Slurm's drain): `close` stops new dispatches to the
    host, `drain` closes it until its last job has ended (`draining` in `GET /hosts` until
    then), `open` reverses either; each a host event with the admin's name and reason."""
    ctl = request.app.state.controller
    return HostControlResult(**ctl.host_control(caller, name, op, body.reason))


@router.get("/queues", response_model=QueueList, responses=errors())
async def queues(request: Request, _: Caller = Depends(requires("cluster:view"))) -> QueueList:
    ctl = request.app.state.controller
    counts = ctl.queue_counts()
    dq = ctl.config.default_queue
    return QueueList(queues=[
        QueueOut(name=q.name, priority=q.priority, description=q.description, default=q.name == dq,
                 max_tasks=q.max_tasks, max_run_limit_s=q.max_run_limit_s, max_memory_mb=q.max_memory_mb,
                 host_limit=q.host_limit, backfill=q.backfill, njobs=sum(counts[q.name]),
                 pend=counts[q.name][0], run=counts[q.name][1], susp=counts[q.name][2])
        for q in ctl.config.queues])


def _app_out(name: str, profile, default: str | None) -> AppOut:
    return AppOut(name=name, description=profile.description, kind=profile.kind,
                  content_hash=profile.content_hash(), default=name == default,
                  profile=profile.model_dump(mode="json"))


@router.get("/apps", response_model=AppList, responses=errors())
async def apps(request: Request, _: Caller = Depends(requires("cluster:view"))) -> AppList:
    """Application profiles (PROF-9 v1: listing needs only cluster view)."""
    cfg = request.app.state.controller.config
    return AppList(apps=[_app_out(n, p, cfg.settings.default_application) for n, p in sorted(cfg.applications.items())])


@router.get("/apps/{name}", response_model=AppOut, responses=errors(404))
async def app_show(name: str, request: Request, _: Caller = Depends(requires("cluster:view"))) -> AppOut:
    cfg = request.app.state.controller.config
    p = cfg.applications.get(name)
    if p is None:
        raise NotFound(f"no application profile {name!r}; profiles: {', '.join(sorted(cfg.applications))}")
    return _app_out(name, p, cfg.settings.default_application)

"""Key routes (KEY-2, KEY-4, KEY-5): what `xceadmin keys` asks of the controller. Cluster
admins only (on the Unix socket, by SO_PEERCRED). The controller's KeysMixin does the work:
keys.yaml written atomically and applied live, revocations recorded in the store. And the
test clock (`xceadmin debug clock`, test mode only), which key expiry runs on."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from xced.api.models import (
    ClockOut,
    ClockRequest,
    KeyList,
    KeyOut,
    KeyRevokeRequest,
    KeyRevokeResult,
    KeyTokenOut,
    KeyTokenRequest,
    KeyTrustRequest,
)
from xced.policy.rbac import Caller
from xced.server.auth import requires
from xced.server.busy import StoreBusyRetryRoute
from xced.server.responses import BODY, errors

router = APIRouter(route_class=StoreBusyRetryRoute)


@router.get("/keys", response_model=KeyList, responses=errors())
async def keys(request: Request, caller: Caller = Depends(requires("cluster:admin", "list the host keys"))) -> KeyList:
    return KeyList(keys=request.app.state.controller.keys_report(caller))


@router.post("/keys/trust", response_model=KeyOut, responses=errors(BODY, 409))
async def trust(body: KeyTrustRequest, request: Request,
                caller: Caller = Depends(requires("cluster:admin", "trust a host key"))) -> KeyOut:
    ctl = request.app.state.controller
    given = {"expires", "expires_in_s"} & body.model_fields_set
    return KeyOut(**ctl.trust_key(caller, body.public_key, body.host, body.roles, body.expires, body.comment,
                                  body.unrevoke, body.expires_in_s, keep_expiry=not given))


@router.post("/keys/revoke", response_model=KeyRevokeResult, responses=errors(BODY, 404))
async def revoke(body: KeyRevokeRequest, request: Request,
                 caller: Caller = Depends(requires("cluster:admin", "revoke a host key"))) -> KeyRevokeResult:
    """Revoke a key (KEY-4) and answer only once every channel and session authenticated
    with it is closed."""
    ctl = request.app.state.controller
    res = ctl.revoke_key(caller, body.fingerprint, body.reason)
    res["closed"] = await ctl.close_channels(res["fingerprint"], "key revoked")
    return KeyRevokeResult(**res)


@router.post("/keys/token", response_model=KeyTokenOut, responses=errors(BODY))
async def token(body: KeyTokenRequest, request: Request,
                caller: Caller = Depends(requires("cluster:admin", "make an enrolment token"))) -> KeyTokenOut:
    return KeyTokenOut(**request.app.state.controller.make_token(caller, body.role, body.host, body.expires_s))


@router.post("/debug/clock", response_model=ClockOut, responses=errors(BODY))
async def clock(body: ClockRequest, request: Request,
                caller: Caller = Depends(requires("cluster:admin", "advance the daemon's clock"))) -> ClockOut:
    """Test mode only: move the controller's clock on, so that key expiry and grace periods
    are tested without sleeping (issue 14's test clock)."""
    return ClockOut(**request.app.state.controller.advance_clock(caller, body.advance_s))

"""Preset routes (PRE-3, RBAC-4): the server presets, read-only, with no permission needed.

`GET /presets` -> {"presets": [{"name", "hash", "values"}]}, sorted by name;
`GET /presets/{name}` -> one of them, or 404 naming the ones there are. A submit made
from a preset is checked like any other (RBAC-4): the server never learns of presets at
submit, it only keeps the client's `meta` record (PRE-2).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Request

from xced.api.errors import NotFound
from xced.api.models import PresetList, PresetOut
from xced.server.auth import NO_PERMISSION, requires
from xced.server.busy import StoreBusyRetryRoute
from xced.server.convert import json_response
from xced.server.responses import errors

router = APIRouter(route_class=StoreBusyRetryRoute)


def _shelf(request: Request):
    return request.app.state.presets


@router.get("/presets", response_model=PresetList, responses=errors())
async def presets(request: Request, _: None = Depends(requires(NO_PERMISSION))):
    """Every valid server preset (PRE-3)."""
    have = await asyncio.to_thread(_shelf(request).current)
    return json_response({"presets": [p.to_json() for p in have.values()]})


@router.get("/presets/{name}", response_model=PresetOut, responses=errors(404))
async def preset(name: str, request: Request, _: None = Depends(requires(NO_PERMISSION))):
    """One server preset (PRE-3, PRE-4: what `xcecli presets pull NAME` copies)."""
    have = await asyncio.to_thread(_shelf(request).current)
    p = have.get(name)
    if p is None:
        shown = ", ".join(list(have)[:20]) + (f" and {len(have) - 20} more" if len(have) > 20 else "") or "none"
        asked = repr(name) if len(name) <= 80 else f"{name[:80]!r}..."
        raise NotFound(f"no server preset {asked}; the server's presets: {shown}")
    return json_response(p.to_json())

"""The worker channel (D-1, KEY-4): messages between the controller and a worker host over
one persistent WebSocket at `/xce/v1/workers/channel`.

Every message is a JSON object with an `op`. The worker opens the channel and sends
`join`; after `joined` both sides send messages at any time:

    worker -> controller   join, started, finished, start_failed, reply
    controller -> worker   joined, refused, start, kill, signal, reattach, end_tasks, request

`request`/`reply` carry an `rid` and are how the controller asks a worker something
(e.g. `read_output` for `xcecli peek`). Units: seconds, MB, slots.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CHANNEL_PATH = "/workers/channel"


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Join(_Msg):
    """A worker announces itself and what it offers (RES-2). `running` lists the elements
    whose supervisors it still has (after a restart of either side, JOB-8)."""

    op: Literal["join"] = "join"
    host: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    slots: int = Field(ge=1)
    memory_mb: int = Field(ge=1)
    resources: dict[str, float] = Field(default_factory=dict)
    attributes: dict[str, str] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    running: list[tuple[int, int]] = Field(default_factory=list)
    version: str = ""


class EndStatusMsg(_Msg):
    exit_code: int
    signal_name: str | None = None
    start_time: float | None = None
    end_time: float
    reason: str | None = None

"""The Python API client (D-2): httpx over the daemon's Unix socket, error bodies turned
into typed errors (`xced.api.errors`). The CLIs' only way to the daemon; scripts and
the demo use it too.

    c = Client.connect()                 # XCE_SOCKET, else XCE_TOPDIR's socket, else the default TopDir's
    r = c.submit(SubmitRequest(argv=["true"], cwd="/tmp"))
    job = c.wait(r.job_id)

Errors: DaemonUnreachable (exit 3) when the socket is missing or refuses; the typed
XceError subclasses for error answers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from xced.api import errors
from xced.api.models import (
    ActionResult,
    EventList,
    HostList,
    Info,
    JobList,
    JobOut,
    QueueList,
    SubmitRequest,
    SubmitResponse,
)
from xced.constants import API_PREFIX, ENV_SOCKET, ENV_TEST_USER, ENV_TOPDIR, client_socket_path, resolve_topdir

AS_USER_HEADER = "X-XCE-As-User"


class Client:
    """A connection to one xced. `as_user` asserts a user (test mode only, D-6)."""

    def __init__(self, socket: str | os.PathLike[str], *, as_user: str | None = None, timeout: float = 60.0) -> None:
        self.socket = Path(socket)
        headers = {AS_USER_HEADER: as_user} if as_user else {}
        self.http = httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket)),
                                 base_url=f"http://xced{API_PREFIX}", headers=headers, timeout=timeout)

    @classmethod
    def connect(cls, *, topdir: str | None = None, socket: str | None = None, as_user: str | None = None,
                timeout: float = 60.0) -> "Client":
        """Find the daemon: `socket`, else XCE_SOCKET, else the socket of `topdir` /
        XCE_TOPDIR / the default TopDir. `as_user` defaults to XCE_TEST_USER."""
        if not socket and (topdir or (not os.environ.get(ENV_SOCKET) and os.environ.get(ENV_TOPDIR))):
            top = resolve_topdir(topdir)
            if not top.is_dir():
                raise errors.DaemonUnreachable(
                    f"TopDir {top} does not exist; give the TopDir of a running xced (--topdir or XCE_TOPDIR), "
                    f"or run `xced` for a personal cluster")
        path = Path(socket) if socket else client_socket_path(topdir)
        return cls(path, as_user=as_user or os.environ.get(ENV_TEST_USER) or None, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """One request; raises DaemonUnreachable or the typed error of an error answer."""
        try:
            r = self.http.request(method, path, **kw)
        except (httpx.ConnectError, FileNotFoundError, ConnectionRefusedError) as e:
            raise errors.DaemonUnreachable(
                f"cannot reach xced at {self.socket} ({_why(e)}); start it with `xced` "
                f"(or `xced --topdir DIR`), or point XCE_TOPDIR / XCE_SOCKET at a running one") from None
        except httpx.TimeoutException:
            raise errors.DaemonUnreachable(f"xced at {self.socket} did not answer in time") from None
        except httpx.TransportError as e:
            raise errors.DaemonUnreachable(f"lost the connection to xced at {self.socket}: {e}") from None
        if r.status_code >= 400:
            try:
                body = r.json()
            except ValueError:
                body = r.text
            raise errors.from_body(r.status_code, body)
        return r

    # ------------------------------------------------------------------ API

    def info(self) -> Info:
        return Info.model_validate_json(self.request("GET", "/info").content)

    def submit(self, req: SubmitRequest | dict) -> SubmitResponse:
        body = req.model_dump(exclude_none=True) if isinstance(req, SubmitRequest) else req
        return SubmitResponse.model_validate_json(self.request("POST", "/jobs", json=body).content)

    def jobs(self, *, user: str | None = None, queue: str | None = None, states: list[str] | None = None,
             all: bool = False) -> JobList:
        params: dict[str, Any] = {}
        if user:
            params["user"] = user
        if queue:
            params["queue"] = queue
        if states:
            params["state"] = states
        if all:
            params["all"] = "true"
        return JobList.model_validate_json(self.request("GET", "/jobs", params=params).content)

    def job(self, job_id: int) -> JobOut:
        return JobOut.model_validate_json(self.request("GET", f"/jobs/{job_id}").content)

    def events(self, job_id: int) -> EventList:
        return EventList.model_validate_json(self.request("GET", f"/jobs/{job_id}/events").content)

    def output(self, job_id: int, index: int | None = None, stream: str = "stdout", max_bytes: int = 65536) -> str:
        params: dict[str, Any] = {"stream": stream, "max_bytes": max_bytes}
        if index is not None:
            params["index"] = index
        return self.request("GET", f"/jobs/{job_id}/output", params=params).text

    def wait(self, job_id: int, timeout: float | None = None, poll: float = 30.0) -> JobOut:
        """Block until every element of the job has finished (or `timeout` seconds pass)."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
            job = JobOut.model_validate_json(
                self.request("GET", f"/jobs/{job_id}/wait", params={"timeout": step},
                             timeout=step + 30).content)
            if job.state in ("DONE", "EXIT") or (deadline is not None and time.monotonic() >= deadline):
                return job

    def action(self, name: str, job_id: int, index: int | None = None) -> ActionResult:
        """name: kill | stop | resume | requeue."""
        body = {"index": index} if index is not None else {}
        return ActionResult.model_validate_json(self.request("POST", f"/jobs/{job_id}/{name}", json=body).content)

    def hosts(self) -> HostList:
        return HostList.model_validate_json(self.request("GET", "/hosts").content)

    def queues(self) -> QueueList:
        return QueueList.model_validate_json(self.request("GET", "/queues").content)


def _why(e: BaseException) -> str:
    s = str(e)
    if "No such file" in s or isinstance(e, FileNotFoundError):
        return "no socket there"
    if "refused" in s.lower():
        return "connection refused"
    return s or type(e).__name__

"""The Python API client (D-2): HTTP/1.1 over the daemon's Unix socket (or TCP), error
bodies turned into typed errors (`xced.api.errors`). The CLIs' only way to the daemon;
scripts and the demo use it too.

    c = Client.connect()                 # XCE_SOCKET, else XCE_TOPDIR's socket, else the default TopDir's
    r = c.submit(SubmitRequest(argv=["true"], cwd="/tmp"))
    job = c.wait(r.job_id)

It is built on the standard library's `http.client` rather than httpx: `xcecli submit` is
called once per job by pipelines (CLI-6), and importing httpx alone cost more than the
whole 100 ms start-up budget here (bench/RESULTS.md). Response models (pydantic) are
imported only by the methods that return them; `request()` returns plain JSON.

Errors: DaemonUnreachable (exit 3) when the socket is missing, refuses, or the connection
drops; the typed XceError subclasses for error answers.
"""

from __future__ import annotations

import http.client
import json as _json
import os
import socket as _socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from xced.api import errors
from xced.constants import (
    API_PREFIX,
    ENV_CONTROLLER,
    ENV_CONTROLLER_KEY,
    ENV_SOCKET,
    ENV_TEST_USER,
    ENV_TOPDIR,
    MAX_SOCKET_PATH,
    SOCKET_PATH_FILE,
    client_socket_path,
    resolve_topdir,
)

AS_USER_HEADER = "X-XCE-As-User"
#: Reconnect before a request when the connection has been idle this long (seconds); the
#: daemon keeps idle connections for KEEP_ALIVE_S (xced.daemon), well above this.
IDLE_RECONNECT_S = 20.0


class _UnixConnection(http.client.HTTPConnection):
    """http.client over an AF_UNIX stream socket."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("xced", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class Response:
    """An answer: `status`, `body` (bytes), `.text`, `.json()`."""

    __slots__ = ("status", "body")

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        import orjson  # 5x faster than json on 10,000-job listings

        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            raise errors.ServerError(f"the daemon's answer is not JSON: {self.text[:80]!r}") from None


class Client:
    """A connection to one xced. `target` is a Unix socket path or `tcp://HOST:PORT`;
    `as_user` asserts a user (test mode only, D-6)."""

    def __init__(self, target: str | os.PathLike[str], *, as_user: str | None = None, timeout: float = 60.0) -> None:
        t = str(target)
        self.socket = Path(t) if not t.startswith("tcp://") else None
        self.target = t
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if as_user is not None:
            if not as_user or not all(c.isascii() and (c.isalnum() or c in "._-@") for c in as_user):
                raise errors.InvalidRequest(f"--as-user {as_user!r}: a user name is letters, digits and . _ - @")
            self.headers[AS_USER_HEADER] = as_user
        self._conn: http.client.HTTPConnection | None = None
        self._last_use = 0.0

    @classmethod
    def connect(cls, *, topdir: str | None = None, socket: str | None = None, as_user: str | None = None,
                timeout: float = 60.0) -> "Client":
        """Find the daemon: `socket`, else `topdir`'s socket, else XCE_SOCKET, else the socket
        of XCE_TOPDIR, else XCE_CONTROLLER (tcp://HOST:PORT, plain HTTP: set inside jobs on a
        test-mode worker host) unless XCE_CONTROLLER_KEY is set too (that pair is xceadmin's
        signed path to a production controller, KEY-6: xcecli never sends a job's
        environment over plain TCP to it), else the default TopDir's socket. `as_user`
        defaults to XCE_TEST_USER. Raises DaemonUnreachable when an explicit TopDir does not
        exist."""
        if topdir is not None and not topdir.strip():
            raise errors.InvalidRequest("--topdir '': the TopDir is empty; give the TopDir of a running xced")
        if not socket and (topdir or (not os.environ.get(ENV_SOCKET) and os.environ.get(ENV_TOPDIR))):
            top = resolve_topdir(topdir)
            if top.exists() and not top.is_dir():
                raise errors.DaemonUnreachable(f"TopDir {top} is not a directory; give the TopDir of a running xced")
            if not top.is_dir():
                raise errors.DaemonUnreachable(
                    f"TopDir {top} does not exist; give the TopDir of a running xced (--topdir or XCE_TOPDIR), "
                    f"or run `xced` for a personal cluster")
        as_user = as_user if as_user is not None else (os.environ.get(ENV_TEST_USER) or None)
        if (not socket and not topdir and not os.environ.get(ENV_SOCKET) and not os.environ.get(ENV_TOPDIR)
                and os.environ.get(ENV_CONTROLLER) and not os.environ.get(ENV_CONTROLLER_KEY)):
            return cls(os.environ[ENV_CONTROLLER], as_user=as_user, timeout=timeout)
        path = Path(socket) if socket else client_socket_path(topdir)
        return cls(path, as_user=as_user, timeout=timeout)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        now = time.monotonic()
        if self._conn is not None and now - self._last_use > IDLE_RECONNECT_S:
            self.close()  # the server may have dropped an idle keep-alive connection
        self._last_use = now
        if self._conn is None:
            if self.socket is not None:
                self._conn = _UnixConnection(str(self.socket), timeout)
            else:
                hostport = self.target[len("tcp://"):]
                host, _, port = hostport.rpartition(":")
                self._conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        self._conn.timeout = timeout
        if self._conn.sock is not None:
            self._conn.sock.settimeout(timeout)
        return self._conn

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None, json: Any = None,
                timeout: float | None = None) -> Response:
        """One request to `API_PREFIX + path`; raises DaemonUnreachable or the typed error of an
        error answer. `params` values may be lists (repeated keys)."""
        # a path is ASCII on the wire: anything else (a name with ü, a space) is percent-encoded,
        # as a browser would; what is encoded already, and the query, stay as they are
        url = API_PREFIX + quote(path, safe="/?&=%:@!$'()*+,;~[]")
        if params:
            url += ("&" if "?" in url else "?") + urlencode(params, doseq=True)
        body = _json.dumps(json, separators=(",", ":")).encode() if json is not None else None
        headers = dict(self.headers)
        if body is None:
            headers.pop("Content-Type", None)
        tmo = self.timeout if timeout is None else timeout
        if self.socket is not None and len(os.fsencode(str(self.socket))) > MAX_SOCKET_PATH:
            raise errors.DaemonUnreachable(
                f"cannot reach xced: its socket would be {self.socket}, longer than the 107 bytes a Unix socket "
                f"path may have, and no run/{SOCKET_PATH_FILE} in the TopDir says where the daemon put it (is it "
                f"running?); start it with `xced`, or set XCE_SOCKET to the path it printed")
        for attempt in (1, 2):
            conn = self._connection(tmo)
            fresh = conn.sock is None
            try:
                conn.request(method, url, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                status = resp.status
                if resp.will_close:
                    self.close()
                break
            except (FileNotFoundError, ConnectionRefusedError, PermissionError) as e:
                self.close()
                raise errors.DaemonUnreachable(
                    f"cannot reach xced at {self.target} ({_why(e)}); start it with `xced` "
                    f"(or `xced --topdir DIR`), or point XCE_TOPDIR / XCE_SOCKET at a running one") from None
            except TimeoutError:
                self.close()
                raise errors.DaemonUnreachable(f"xced at {self.target} did not answer in {tmo:g} s") from None
            except (http.client.HTTPException, ConnectionError, OSError) as e:
                self.close()
                # a kept-alive connection the server closed meanwhile: retry once on a new one
                if attempt == 1 and not fresh and method == "GET":
                    continue
                raise errors.DaemonUnreachable(f"lost the connection to xced at {self.target}: {e}") from None
        if status >= 400:
            try:
                parsed: Any = _json.loads(data)
            except ValueError:
                parsed = data.decode("utf-8", errors="replace")
            raise errors.from_body(status, parsed)
        return Response(status, data)

    # ------------------------------------------------------------------ API

    def info(self):
        from xced.api.models import Info

        return _model(Info, self.request("GET", "/info").body)

    def submit(self, req) -> "Any":
        """Submit a SubmitRequest (or a dict of its fields); returns a SubmitResponse."""
        from xced.api.models import SubmitRequest, SubmitResponse

        body = req.model_dump(exclude_none=True) if isinstance(req, SubmitRequest) else req
        return _model(SubmitResponse, self.request("POST", "/jobs", json=body).body)

    def jobs_raw(self, *, user: str | None = None, queue: str | None = None, states: list[str] | None = None,
                 all: bool = False, project: str | None = None) -> Response:
        """GET /jobs as the raw answer (plain JSON, no model parsing: fast for big listings)."""
        params: dict[str, Any] = {}
        if user:
            params["user"] = user
        if queue:
            params["queue"] = queue
        if project:
            params["project"] = project
        if states:
            params["state"] = states
        if all:
            params["all"] = "true"
        return self.request("GET", "/jobs", params=params)

    def jobs(self, *, user: str | None = None, queue: str | None = None, states: list[str] | None = None,
             all: bool = False, project: str | None = None):
        """The JobList of `xcecli jobs` (filters as GET /jobs)."""
        from xced.api.models import JobList

        return _model(JobList, self.jobs_raw(user=user, queue=queue, states=states, all=all, project=project).body)

    def job(self, job_id: int):
        from xced.api.models import JobOut

        return _model(JobOut, self.request("GET", f"/jobs/{job_id}").body)

    def events(self, job_id: int):
        from xced.api.models import EventList

        return _model(EventList, self.request("GET", f"/jobs/{job_id}/events").body)

    def output(self, job_id: int, index: int | None = None, stream: str = "stdout", max_bytes: int = 65536) -> str:
        params: dict[str, Any] = {"stream": stream, "max_bytes": max_bytes}
        if index is not None:
            params["index"] = index
        return self.request("GET", f"/jobs/{job_id}/output", params=params).text

    def wait(self, job_id: int, timeout: float | None = None, poll: float = 15.0, index: int | None = None,
             on_lost=None):
        """Block until every element of the job (or element `index`) has finished, or
        `timeout` seconds pass; returns the JobOut.

        A daemon that stops or restarts meanwhile does not end the wait (as `bsub -K` rides
        out an mbatchd restart): the job's supervisor keeps it running, so the client asks
        again, every 0.2 s to 2 s, until the daemon answers; `on_lost(message)` is called
        once when it stops answering. Raises DaemonUnreachable only when `timeout` passes
        with no daemon to ask."""
        from xced.api.models import JobOut

        deadline = None if timeout is None else time.monotonic() + timeout
        pause, told = 0.2, False
        while True:
            step = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
            params: dict[str, Any] = {"timeout": step}
            if index is not None:
                params["index"] = index
            asked = time.monotonic()
            try:
                res = self.request("GET", f"/jobs/{job_id}/wait", params=params, timeout=step + 30)
            except errors.DaemonUnreachable as e:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                if not told and on_lost is not None:
                    on_lost(f"{e.message}; still waiting for job {job_id}, until xced answers again")
                told = True
                time.sleep(pause if deadline is None else max(0.0, min(pause, deadline - time.monotonic())))
                pause = min(pause * 2, 2.0)
                continue
            pause = 0.2
            job = _model(JobOut, res.body)
            els = job.elements if index is None else [e for e in job.elements if e.index == index]
            done = all(e.state in ("DONE", "EXIT") for e in els)
            if done or (deadline is not None and time.monotonic() >= deadline):
                return job
            if time.monotonic() - asked < step / 2:
                time.sleep(0.2)  # answered early without an end (the daemon is stopping): do not spin

    def action(self, name: str, job_id: int, index: int | None = None):
        """name: kill | stop | resume | requeue; returns an ActionResult."""
        from xced.api.models import ActionResult

        body = {"index": index} if index is not None else {}
        return _model(ActionResult, self.request("POST", f"/jobs/{job_id}/{name}", json=body).body)

    def hosts(self):
        from xced.api.models import HostList

        return _model(HostList, self.request("GET", "/hosts").body)

    def queues(self):
        from xced.api.models import QueueList

        return _model(QueueList, self.request("GET", "/queues").body)

    def apply_config(self, config: dict, content_hash: str):
        """CFG-3: hand a compiled ClusterConfig (JSON dict) to the daemon; ApplyConfigResult."""
        from xced.api.models import ApplyConfigResult

        return _model(ApplyConfigResult,
                      self.request("PUT", "/config", json={"config": config, "hash": content_hash}).body)


def _model(cls, body: bytes):
    """Parse an answer into an API model; an answer that does not fit is the daemon's fault."""
    from pydantic import ValidationError

    try:
        return cls.model_validate_json(body)
    except ValidationError as e:
        raise errors.ServerError(f"the daemon's answer does not match {cls.__name__}: "
                                 f"{e.errors()[0].get('msg', 'invalid')}") from None


def _why(e: BaseException) -> str:
    if isinstance(e, FileNotFoundError):
        return "no socket there"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, PermissionError):
        return "permission denied on the socket"
    return str(e) or type(e).__name__

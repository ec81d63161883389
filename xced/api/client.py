"""The Python API client (D-2): HTTP/1.1 over the daemon's Unix socket (or TCP), error
bodies turned into typed errors (`xced.api.errors`). The CLIs' only way to the daemon;
scripts and the demo use it too.

    c = Client.connect()                 # XCE_SOCKET, else XCE_TOPDIR's socket, else the default TopDir's
    r = c.submit(SubmitRequest(argv=["true"], cwd="/tmp"))
    job = c.wait(r.job_id)

The transport is a socket and httptools (the llhttp parser uvicorn already serves with)
rather than httpx or the standard library's `http.client`: `xcecli submit` is called once
per job by pipelines and must start within 50 ms (CLI-7); httpx costs more than that to
import, and `http.client` about 27 ms (it imports `email.parser` and `ssl`), against about
8 ms for httptools here (bench/NOTES-issue17.md). Response models (pydantic) are imported
only by the methods that return them; `request()` returns plain JSON.

Errors: DaemonUnreachable (exit 3) when the socket is missing, refuses, or the connection
drops; the typed XceError subclasses for error answers.

Retries (JOB-10, CLI-1): `submit` sends an Idempotency-Key (xced.api.idempotency) and, like
`jobs`, is sent again when its answer was lost (the daemon unreachable, the connection
dropped, a timeout, 503 store_busy), with the same key, until XCE_CONNECT_TIMEOUT seconds
(default 60) have passed in all; that timeout bounds each single request too. `wait` rides
out a daemon restart and gives up only when the daemon stays unreachable that long.
"""

from __future__ import annotations

import json as _json
import os
import socket as _socket
import time
from typing import Any

from xced.api import errors
from xced.constants import (
    API_PREFIX,
    DEFAULT_CONNECT_TIMEOUT_S,
    ENV_CONNECT_TIMEOUT,
    ENV_CONTROLLER,
    ENV_CONTROLLER_KEY,
    ENV_SOCKET,
    ENV_TEST_USER,
    ENV_TOPDIR,
    MAX_SOCKET_PATH,
    SOCKET_PATH_FILE,
    client_socket_path,
    topdir_text,
)

AS_USER_HEADER = "X-XCE-As-User"
#: Reconnect before a request when the connection has been idle this long (seconds); the
#: daemon keeps idle connections for KEEP_ALIVE_S (xced.daemon), well above this.
IDLE_RECONNECT_S = 20.0
#: the first and the longest pause (seconds) between two tries of a retried request
RETRY_FIRST_S = 0.2
RETRY_MAX_S = 1.0


def connect_timeout() -> float:
    """XCE_CONNECT_TIMEOUT in seconds (a number > 0 and at most a day, or a duration such as
    "90s" or "5m"; default DEFAULT_CONNECT_TIMEOUT_S, 60): how long a client keeps trying to
    reach the daemon, in all and per request (CLI-1). Raises InvalidRequest with exit code 2
    (a usage error, caught before anything is sent) for any other value."""
    text = os.environ.get(ENV_CONNECT_TIMEOUT, "").strip()
    if not text:
        return DEFAULT_CONNECT_TIMEOUT_S
    from xced.model.units import parse_seconds  # only when set: kept off the CLI's start-up (CLI-6)
    try:
        value = parse_seconds(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= MAX_CONNECT_TIMEOUT_S:
        e = errors.InvalidRequest(f"{ENV_CONNECT_TIMEOUT}={text!r}: expected a number of seconds greater than 0 "
                                  f"and at most {MAX_CONNECT_TIMEOUT_S:g} (a day), or a duration such as 90s or 5m "
                                  f"(default {DEFAULT_CONNECT_TIMEOUT_S:g})")
        e.exit_code = 2
        raise e
    return value


#: the longest XCE_CONNECT_TIMEOUT, seconds (a socket's timeout must fit the platform's time_t)
MAX_CONNECT_TIMEOUT_S = 86400.0


def _retriable(e: errors.XceError) -> bool:
    """Whether a request that failed with `e` may simply be sent again (the request was not
    carried out, or its answer was lost, and it is safe to repeat): the daemon unreachable
    (but not a socket the user may not open), or its store busy."""
    return isinstance(e, errors.StoreBusy) or (isinstance(e, errors.DaemonUnreachable)
                                               and not getattr(e, "permanent", False))


class _Answer:
    """httptools' callbacks for one response: the body's chunks, whether it is whole, and
    whether the daemon keeps the connection open after it (`keep`, read as the message
    completes: once the parser has finished, llhttp has reset and says False for every
    answer, which closed every connection after one request)."""

    __slots__ = ("chunks", "done", "keep", "parser")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.done = False
        self.keep = False
        self.parser = None

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        self.done = True
        self.keep = self.parser.should_keep_alive()
        self.parser = None  # no cycle left between the two


class _Connection:
    """One HTTP/1.1 connection to the daemon, over its Unix socket (`path`) or TCP
    (`(host, port)`), kept alive between requests. `exchange` sends one request and reads its
    whole answer; socket errors (OSError, TimeoutError) pass through, a malformed answer or a
    connection the daemon closed first is ConnectionError."""

    def __init__(self, where: str | tuple[str, int], timeout: float) -> None:
        self.where = where
        self.timeout = timeout
        self.sock: _socket.socket | None = None

    def _open(self) -> _socket.socket:
        if isinstance(self.where, tuple):
            return _socket.create_connection(self.where, timeout=self.timeout)
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.where)
        except OSError:
            s.close()
            raise
        return s

    def exchange(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes, bool]:
        """Send one request; returns (status, body, keep_alive)."""
        import httptools

        if self.sock is None:
            self.sock = self._open()
        self.sock.settimeout(self.timeout)
        head = [f"{method} {url} HTTP/1.1", "Host: xced"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        head.append(f"Content-Length: {len(body) if body is not None else 0}")
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b""))
        answer = _Answer()
        parser = answer.parser = httptools.HttpResponseParser(answer)
        while not answer.done:
            data = self.sock.recv(262144)
            if not data:
                raise ConnectionError("the daemon closed the connection before its answer was whole")
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as e:
                raise ConnectionError(f"the daemon's answer is not HTTP: {e}") from None
        return parser.get_status_code(), b"".join(answer.chunks), answer.keep

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


#: what a path may hold on the wire as it is (percent-encoded bytes included)
_PATH_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/?&=%:@!$'()*+,;[]")


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
        """The body as JSON; raises ServerError when it is not. orjson reads answers of
        ORJSON_ABOVE bytes or more (5x faster than json on a listing of 10,000 jobs), the
        standard json the small ones: importing orjson costs about 25 ms here (it imports
        dataclasses, uuid, platform), more than a whole submit may spend (CLI-7)."""
        if len(self.body) < ORJSON_ABOVE:
            try:
                return _json.loads(self.body)
            except ValueError:
                raise errors.ServerError(f"the daemon's answer is not JSON: {self.text[:80]!r}") from None
        import orjson

        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            raise errors.ServerError(f"the daemon's answer is not JSON: {self.text[:80]!r}") from None


#: job IDs in one GET /jobs/table (`Client.table`): about 10 KB of request line
TABLE_IDS_AT_ONCE = 1000

#: answers of this many bytes or more are read with orjson (`Response.json`)
ORJSON_ABOVE = 4 << 20


class Client:
    """A connection to one xced. `target` is a Unix socket path or `tcp://HOST:PORT`;
    `as_user` asserts a user (test mode only, D-6); `timeout` (seconds, default
    XCE_CONNECT_TIMEOUT's `connect_timeout()`) bounds each request and the retries of one."""

    def __init__(self, target: str | os.PathLike[str], *, as_user: str | None = None,
                 timeout: float | None = None) -> None:
        t = os.fspath(target)
        #: the Unix socket's path (text), or None for a tcp:// target
        self.socket: str | None = t if not t.startswith("tcp://") else None
        self.target = t
        self.timeout = connect_timeout() if timeout is None else timeout
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if as_user is not None:
            if not as_user or not all(c.isascii() and (c.isalnum() or c in "._-@") for c in as_user):
                raise errors.InvalidRequest(f"--as-user {as_user!r}: a user name is letters, digits and . _ - @")
            self.headers[AS_USER_HEADER] = as_user
        self._conn: _Connection | None = None
        self._last_use = 0.0

    @classmethod
    def connect(cls, *, topdir: str | None = None, socket: str | None = None, as_user: str | None = None,
                timeout: float | None = None) -> "Client":
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
            top = topdir_text(topdir)
            if os.path.exists(top) and not os.path.isdir(top):
                raise errors.DaemonUnreachable(f"TopDir {top} is not a directory; give the TopDir of a running xced")
            if not os.path.isdir(top):
                raise errors.DaemonUnreachable(
                    f"TopDir {top} does not exist; give the TopDir of a running xced (--topdir or XCE_TOPDIR), "
                    f"or run `xced` for a personal cluster")
        as_user = as_user if as_user is not None else (os.environ.get(ENV_TEST_USER) or None)
        if (not socket and not topdir and not os.environ.get(ENV_SOCKET) and not os.environ.get(ENV_TOPDIR)
                and os.environ.get(ENV_CONTROLLER) and not os.environ.get(ENV_CONTROLLER_KEY)):
            return cls(os.environ[ENV_CONTROLLER], as_user=as_user, timeout=timeout)
        path = os.fspath(socket) if socket else client_socket_path(topdir)
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

    def _connection(self, timeout: float) -> _Connection:
        now = time.monotonic()
        if self._conn is not None and now - self._last_use > IDLE_RECONNECT_S:
            self.close()  # the server may have dropped an idle keep-alive connection
        self._last_use = now
        if self._conn is None:
            if self.socket is not None:
                self._conn = _Connection(self.socket, timeout)
            else:
                hostport = self.target[len("tcp://"):]
                host, _, port = hostport.rpartition(":")
                self._conn = _Connection((host, int(port)), timeout)
        self._conn.timeout = timeout
        return self._conn

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None, json: Any = None,
                timeout: float | None = None, headers: dict[str, str] | None = None) -> Response:
        """One request to `API_PREFIX + path`; raises DaemonUnreachable or the typed error of an
        error answer. `params` values may be lists (repeated keys); `headers` are added to
        the client's own."""
        # a path is ASCII on the wire: anything else (a name with ü, a space) is percent-encoded,
        # as a browser would; what is encoded already, and the query, stay as they are
        if _PATH_SAFE.issuperset(path):
            url = API_PREFIX + path
        else:
            from urllib.parse import quote

            url = API_PREFIX + quote(path, safe="/?&=%:@!$'()*+,;~[]")
        if params:
            from urllib.parse import urlencode

            url += ("&" if "?" in url else "?") + urlencode(params, doseq=True)
        body = _json.dumps(json, separators=(",", ":")).encode() if json is not None else None
        headers = {**self.headers, **(headers or {})}
        if body is None:
            headers.pop("Content-Type", None)
        tmo = self.timeout if timeout is None else timeout
        if self.socket is not None and len(os.fsencode(self.socket)) > MAX_SOCKET_PATH:
            raise errors.DaemonUnreachable(
                f"cannot reach xced: its socket would be {self.socket}, longer than the 107 bytes a Unix socket "
                f"path may have, and no run/{SOCKET_PATH_FILE} in the TopDir says where the daemon put it (is it "
                f"running?); start it with `xced`, or set XCE_SOCKET to the path it printed")
        for attempt in (1, 2):
            conn = self._connection(tmo)
            fresh = conn.sock is None
            try:
                status, data, keep = conn.exchange(method, url, body, headers)
                if not keep:
                    self.close()
                break
            except (FileNotFoundError, ConnectionRefusedError, PermissionError) as e:
                self.close()
                lost = errors.DaemonUnreachable(
                    f"cannot reach xced at {self.target} ({_why(e)}); start it with `xced` "
                    f"(or `xced --topdir DIR`), or point XCE_TOPDIR / XCE_SOCKET at a running one")
                lost.permanent = isinstance(e, PermissionError)  # trying again would not help
                raise lost from None
            except TimeoutError:
                self.close()
                lost = errors.DaemonUnreachable(f"xced at {self.target} did not answer in {tmo:g} s")
                lost.maybe_taken = True  # the request may have reached the daemon
                raise lost from None
            except (ConnectionError, OSError) as e:
                self.close()
                # a kept-alive connection the server closed meanwhile: retry once on a new one
                if attempt == 1 and not fresh and method == "GET":
                    continue
                lost = errors.DaemonUnreachable(f"lost the connection to xced at {self.target}: {e}")
                lost.maybe_taken = True
                raise lost from None
        if status >= 400:
            try:
                parsed: Any = _json.loads(data)
            except ValueError:
                parsed = data.decode("utf-8", errors="replace")
            raise errors.from_body(status, parsed)
        return Response(status, data)

    def request_retried(self, method: str, path: str, *, params: dict[str, Any] | None = None, json: Any = None,
                        headers: dict[str, str] | None = None, on_lost=None) -> Response:
        """`request`, sent again while it fails in a way that may pass (`_retriable`: the daemon
        unreachable, the connection lost before the answer, a timeout, 503 store_busy), with a
        pause of 0.2 s doubling to 1 s, until `timeout` seconds (XCE_CONNECT_TIMEOUT) have
        passed since the first try; each try is bounded by what is left. Only for requests
        that are safe to repeat: reads, and a submit with its Idempotency-Key (JOB-10).
        `on_lost(message)` is called once, at the first failure. Raises the last error, its
        message saying how long it tried."""
        deadline = time.monotonic() + self.timeout
        pause, told, taken = RETRY_FIRST_S, False, False
        while True:
            left = deadline - time.monotonic()
            try:
                return self.request(method, path, params=params, json=json, headers=headers,
                                    timeout=max(0.05, min(self.timeout, left)))
            except errors.XceError as e:
                if not _retriable(e):
                    raise
                taken = taken or getattr(e, "maybe_taken", False)
                left = deadline - time.monotonic()
                if left <= 0:
                    note = ""
                    if taken and method == "POST":  # exit 3, yet it may have been carried out: say so
                        note = ("; a try reached xced and lost its answer, so it may have been carried out: once "
                                "xced is back, look (`xcecli jobs`) before you send it again")
                    raise type(e)(f"{e.message} (tried for {self.timeout:g} s, XCE_CONNECT_TIMEOUT){note}",
                                  field=e.field) from None
                if not told and on_lost is not None:
                    on_lost(f"{e.message}; trying again for up to {self.timeout:g} s (XCE_CONNECT_TIMEOUT)")
                told = True
                time.sleep(min(pause, left))
                pause = min(pause * 2, RETRY_MAX_S)

    # ------------------------------------------------------------------ API

    def info(self):
        from xced.api.models import Info

        return _model(Info, self.request("GET", "/info").body)

    def submit(self, req, *, key: str | None = None, on_lost=None) -> "Any":
        """Submit a SubmitRequest (or a dict of its fields); returns a SubmitResponse. The
        submit carries Idempotency-Key `key` (default: a new one, xced.api.idempotency) and is
        sent again with it while its answer is lost (`request_retried`), so it makes one job
        however often it is sent (JOB-10)."""
        from xced.api.idempotency import HEADER, check_key, new_key
        from xced.api.models import SubmitRequest, SubmitResponse

        body = req.model_dump(exclude_none=True) if isinstance(req, SubmitRequest) else req
        key = new_key() if key is None else check_key(key)
        return _model(SubmitResponse, self.request_retried("POST", "/jobs", json=body, headers={HEADER: key},
                                                           on_lost=on_lost).body)

    def submit_pack(self, env: dict, jobs: list[dict], key: str | None = None, *, on_lost=None) -> dict:
        """Submit a pack (POST /jobs/pack; CLI-7, LSF `bsub -pack`): `env` the environment
        once for every job, `jobs` dicts of SubmitRequest's fields whose `env` holds only each
        job's own --env additions. Returns the raw JSON answer, `{"jobs": [SubmitResponse
        dicts in request order]}` (no pydantic: the CLI's submit path must not import it).
        One Idempotency-Key for the whole pack, `key` (default: a new one), sent again with
        it while its answer is lost (`request_retried`), so the pack is recorded once however
        often it is sent (JOB-10). Raises the error of the first job refused (its field
        `jobs.<i>[.<field>]`, message "job I of the pack: ..."; nothing recorded),
        InvalidRequest for a malformed key, DaemonUnreachable."""
        from xced.api.idempotency import HEADER, check_key, new_key

        key = new_key() if key is None else check_key(key)
        return self.request_retried("POST", "/jobs/pack", json={"env": env, "jobs": jobs}, headers={HEADER: key},
                                    on_lost=on_lost).json()

    def jobs_raw(self, *, user: str | None = None, queue: str | None = None, states: list[str] | None = None,
                 all: bool = False, project: str | None = None, on_lost=None) -> Response:
        """GET /jobs as the raw answer (plain JSON, no model parsing: fast for big listings);
        sent again while the daemon cannot be reached, up to XCE_CONNECT_TIMEOUT (a read is
        safe to repeat: `xcecli jobs` rides out a restart); `on_lost` as `request_retried`."""
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
        return self.request_retried("GET", "/jobs", params=params, on_lost=on_lost)

    def table(self, params: dict[str, Any], ids: list | None = None, on_lost=None) -> dict:
        """GET /jobs/table with `params` as a dict {"fields", "rows", "missing"}; `ids` (job
        IDs, any number) are sent TABLE_IDS_AT_ONCE to a request, the rows and the missing IDs
        put together in order: a request line of 10,000 IDs is more than the daemon's HTTP
        server takes (it answers 400), and `bjobs $(seq 1 12000)` must still work."""
        if not ids:
            return self.request_retried("GET", "/jobs/table", params=params, on_lost=on_lost).json()
        out: dict | None = None
        for k in range(0, len(ids), TABLE_IDS_AT_ONCE):
            part = self.request_retried("GET", "/jobs/table", on_lost=on_lost, params={
                **params, "id": [str(j) for j in ids[k:k + TABLE_IDS_AT_ONCE]]}).json()
            if out is None:
                out = part
            else:
                out["rows"].extend(part["rows"])
                out["missing"].extend(part["missing"])
        return out

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
        out an mbatchd restart; JOB-10): the job's supervisor keeps it running, so the client
        asks again, every 0.2 s to 1 s, until the daemon answers; `on_lost(message)` is
        called once when it stops answering. Raises DaemonUnreachable (exit 3) only when the
        daemon stays unreachable for the client's `timeout` (XCE_CONNECT_TIMEOUT, default
        60 s) in a row, or when `timeout` passes with no daemon to ask."""
        from xced.api.models import JobOut

        deadline = None if timeout is None else time.monotonic() + timeout
        pause, told = RETRY_FIRST_S, False
        lost_since: float | None = None  # when the daemon stopped answering (monotonic s)
        while True:
            now = time.monotonic()
            step = poll if deadline is None else max(0.0, min(poll, deadline - now))
            if lost_since is not None:
                step = 0.0  # while it is away, ask for the job as it is: a short request
            tmo = step + min(30.0, self.timeout)
            if lost_since is not None:
                tmo = max(0.05, min(tmo, lost_since + self.timeout - now))
            params: dict[str, Any] = {"timeout": step}
            if index is not None:
                params["index"] = index
            asked = now
            try:
                res = self.request("GET", f"/jobs/{job_id}/wait", params=params, timeout=tmo)
            except errors.XceError as e:
                if not _retriable(e):
                    raise
                now = time.monotonic()
                if lost_since is None:
                    lost_since = now
                if deadline is not None and now >= deadline:
                    raise
                if now - lost_since >= self.timeout:
                    raise errors.DaemonUnreachable(
                        f"{e.message}; xced has not answered for {self.timeout:g} s (XCE_CONNECT_TIMEOUT), so the "
                        f"wait for job {job_id} ends; the job itself goes on: wait again once xced is back "
                        f"(`xcecli wait {job_id}`)") from None
                if not told and on_lost is not None:
                    on_lost(f"{e.message}; still waiting for job {job_id}, until xced answers again (for up to "
                            f"{self.timeout:g} s, XCE_CONNECT_TIMEOUT)")
                told = True
                left = lost_since + self.timeout - now
                if deadline is not None:
                    left = min(left, deadline - now)
                time.sleep(max(0.0, min(pause, left)))
                pause = min(pause * 2, RETRY_MAX_S)
                continue
            lost_since, pause = None, RETRY_FIRST_S
            job = _model(JobOut, res.body)
            els = job.elements if index is None else [e for e in job.elements if e.index == index]
            done = all(e.state in ("DONE", "EXIT") for e in els)
            if done or (deadline is not None and time.monotonic() >= deadline):
                return job
            if step > 0 and time.monotonic() - asked < step / 2:
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

"""The API client (D-2, CLI-1): error bodies become typed errors with the CLI's exit codes,
bodies and headers go out as the server expects, a dropped keep-alive is survived.

The peer is a real HTTP server on a Unix socket in a thread (http.server), answering
canned responses; the end-to-end tests talk to a real xced."""

from __future__ import annotations

import json
import socketserver
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from xced.api import errors
from xced.api.client import Client
from xced.api.models import SubmitRequest


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class RecordingHandler(BaseHTTPRequestHandler):
    """A canned daemon's request handler (the client's unit tests; never the real API):
    `record(seen)` reads the request and notes (method, path, headers, body) in `seen`,
    `reply(status, data)` answers with `data` bytes."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def record(self, seen: list) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        seen.append((self.command, self.path, dict(self.headers), self.rfile.read(n) if n else b""))

    def reply(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Canned:
    """Routes (method, path) -> (status, body); records what it received."""

    def __init__(self):
        self.routes: dict[tuple[str, str], tuple[int, object]] = {}
        self.seen: list[tuple[str, str, dict, bytes]] = []


@pytest.fixture
def server(tmp_path):
    canned = Canned()

    class Handler(RecordingHandler):
        def _answer(self):
            self.record(canned.seen)
            status, out = canned.routes.get((self.command, self.path.split("?")[0]), (404, {"error": {
                "code": "not_found", "message": "no route", "field": None}}))
            self.reply(status, out.encode() if isinstance(out, str) else json.dumps(out).encode())

        do_GET = do_POST = _answer

    sock = tmp_path / "s.sock"
    srv = _Server(str(sock), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield canned, sock
    srv.shutdown()
    srv.server_close()


def test_submit_sends_body_and_as_user_header(server):
    canned, sock = server
    canned.routes[("POST", "/xce/v1/jobs")] = (200, {"job_id": 7, "name": None, "queue": "normal", "array_size": 0})
    with Client(sock, as_user="alice") as c:
        r = c.submit(SubmitRequest(argv=["true"], cwd="/tmp"))
    assert r.job_id == 7
    method, path, headers, body = canned.seen[-1]
    assert headers["X-XCE-As-User"] == "alice"
    sent = json.loads(body)
    assert sent["argv"] == ["true"] and "ntasks_max" not in sent  # None fields are not sent


def test_requests_share_one_kept_alive_connection_until_the_daemon_closes_it(tmp_path):
    """D-2: a client that makes many requests (an API loop, a pipeline's poller) sends them on
    one HTTP/1.1 connection while the daemon keeps it open, as uvicorn does; when an answer
    says `Connection: close`, the next request opens a new one. (Reading keep-alive after the
    parser had finished said False for every answer, so every request paid a connect, an
    accept and the daemon's peer lookup.)"""
    connections: list[int] = []
    seen: list = []

    class Handler(RecordingHandler):
        def setup(self):
            super().setup()
            connections.append(id(self))

        def do_GET(self):
            self.record(seen)
            data = b'{"cluster_name":"c"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            if self.path.endswith("/close"):
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

    sock = tmp_path / "k.sock"
    srv = _Server(str(sock), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with Client(sock) as c:
            for _ in range(3):
                c.request("GET", "/info")
            assert len(connections) == 1
            c.request("GET", "/close")
            c.request("GET", "/info")
            assert len(connections) == 2 and len(seen) == 5
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("status,code,cls", [
    (422, "invalid", errors.InvalidRequest), (404, "not_found", errors.NotFound),
    (403, "forbidden", errors.PermissionDenied), (409, "conflict", errors.Conflict),
    (500, "server_error", errors.ServerError),
])
def test_error_bodies_become_typed_errors(server, status, code, cls):
    canned, sock = server
    canned.routes[("GET", "/xce/v1/jobs/3")] = (status, {"error": {"code": code, "message": "what was wrong",
                                                                    "field": "x"}})
    with Client(sock) as c, pytest.raises(cls) as ei:
        c.job(3)
    assert ei.value.message == "what was wrong" and ei.value.field == "x" and ei.value.exit_code == 1


def test_non_json_error_is_server_error(server):
    canned, sock = server
    canned.routes[("GET", "/xce/v1/hosts")] = (502, "bad gateway")
    with Client(sock) as c, pytest.raises(errors.ServerError, match="HTTP 502"):
        c.hosts()


def test_query_params_repeat_for_lists(server):
    canned, sock = server
    canned.routes[("GET", "/xce/v1/jobs")] = (200, {"jobs": []})
    with Client(sock) as c:
        assert c.jobs(user="all", states=["PEND", "RUN"]).jobs == []
    assert canned.seen[-1][1] == "/xce/v1/jobs?user=all&state=PEND&state=RUN"


def test_missing_socket_is_unreachable_exit_3(tmp_path):
    with Client(tmp_path / "none.sock") as c, pytest.raises(errors.DaemonUnreachable) as ei:
        c.info()
    assert ei.value.exit_code == 3 and "no socket there" in ei.value.message
    assert "start it with `xced`" in ei.value.message


def test_connect_finds_socket_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("XCE_SOCKET", str(tmp_path / "s.sock"))
    monkeypatch.delenv("XCE_TOPDIR", raising=False)
    assert Client.connect().socket == str(tmp_path / "s.sock")
    monkeypatch.delenv("XCE_SOCKET")
    monkeypatch.setenv("XCE_TOPDIR", str(tmp_path))
    assert Client.connect().socket == str(tmp_path / "run" / "xced.sock")
    with pytest.raises(errors.DaemonUnreachable, match="does not exist"):
        Client.connect(topdir=str(tmp_path / "missing"))


def test_xce_controller_is_only_a_test_mode_jobs_way_and_never_beats_a_topdir(monkeypatch, tmp_path):
    """KEY-6, D-7: XCE_CONTROLLER (plain HTTP over TCP, as jobs on a test-mode worker get it)
    is used only when nothing local is named: XCE_TOPDIR wins over it, and with
    XCE_CONTROLLER_KEY beside it (xceadmin's signed path to a production controller)
    xcecli never sends a job's environment over plain TCP."""
    monkeypatch.delenv("XCE_SOCKET", raising=False)
    monkeypatch.delenv("XCE_TOPDIR", raising=False)
    monkeypatch.setenv("XCE_CONTROLLER", "tcp://127.0.0.1:9")
    assert Client.connect().target == "tcp://127.0.0.1:9"
    monkeypatch.setenv("XCE_TOPDIR", str(tmp_path))
    assert Client.connect().socket == str(tmp_path / "run" / "xced.sock")
    monkeypatch.delenv("XCE_TOPDIR")
    monkeypatch.setenv("XCE_CONTROLLER_KEY", "SHA256:" + "A" * 43)
    assert Client.connect().target != "tcp://127.0.0.1:9" and Client.connect().socket is not None

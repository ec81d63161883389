"""The API client (D-2): error bodies become typed errors with the CLI exit codes of CLI-1.
HTTP is mocked with respx here only; everything else talks to a real xced."""

from __future__ import annotations

import httpx
import pytest
import respx

from xced.api import errors
from xced.api.client import Client
from xced.api.models import SubmitRequest

BASE = "http://xced/xce/v1"


@pytest.fixture
def client(tmp_path):
    c = Client(tmp_path / "sock", as_user="alice")
    yield c
    c.close()


@respx.mock
def test_submit_sends_body_and_as_user_header(client):
    route = respx.post(f"{BASE}/jobs").mock(return_value=httpx.Response(
        200, json={"job_id": 7, "name": None, "queue": "normal", "array_size": 0}))
    r = client.submit(SubmitRequest(argv=["true"], cwd="/tmp"))
    assert r.job_id == 7
    sent = route.calls.last.request
    assert sent.headers["X-XCE-As-User"] == "alice"
    assert b'"argv":["true"]' in sent.content.replace(b" ", b"")
    assert b"ntasks_max" not in sent.content  # None fields are not sent


@respx.mock
@pytest.mark.parametrize("status,code,cls,exit_code", [
    (422, "invalid", errors.InvalidRequest, 1),
    (404, "not_found", errors.NotFound, 1),
    (403, "forbidden", errors.PermissionDenied, 1),
    (409, "conflict", errors.Conflict, 1),
    (500, "server_error", errors.ServerError, 1),
])
def test_error_bodies_become_typed_errors(client, status, code, cls, exit_code):
    respx.get(f"{BASE}/jobs/3").mock(return_value=httpx.Response(
        status, json={"error": {"code": code, "message": "what was wrong", "field": "x"}}))
    with pytest.raises(cls) as ei:
        client.job(3)
    assert ei.value.message == "what was wrong" and ei.value.field == "x" and ei.value.exit_code == exit_code


@respx.mock
def test_non_json_error_is_server_error(client):
    respx.get(f"{BASE}/hosts").mock(return_value=httpx.Response(502, text="bad gateway"))
    with pytest.raises(errors.ServerError, match="HTTP 502"):
        client.hosts()


def test_missing_socket_is_unreachable_exit_3(client):
    with pytest.raises(errors.DaemonUnreachable) as ei:
        client.info()
    assert ei.value.exit_code == 3 and "start it with `xced`" in ei.value.message


def test_connect_finds_socket_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("XCE_SOCKET", str(tmp_path / "s.sock"))
    monkeypatch.delenv("XCE_TOPDIR", raising=False)
    c = Client.connect()
    assert c.socket == tmp_path / "s.sock"
    monkeypatch.delenv("XCE_SOCKET")
    monkeypatch.setenv("XCE_TOPDIR", str(tmp_path))
    assert Client.connect().socket == tmp_path / "run" / "xced.sock"
    with pytest.raises(errors.DaemonUnreachable, match="does not exist"):
        Client.connect(topdir=str(tmp_path / "missing"))

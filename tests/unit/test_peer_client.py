"""The HTTP client of peers (xced.api.peer_client; KEY-3, KEY-6), against answers made up
in-process with respx: what it signs, the session header it sends, one re-authentication
on a 401, error answers as the API's typed errors, and a lost controller as
DaemonUnreachable. TLS is not probed here: the client gets a plain context
(`ssl_context=`), as a caller that probed already would give it; the e2e tests
(tests/e2e/test_peers.py, test_login_host.py) run it against a real controller."""

from __future__ import annotations

import asyncio
import json
import ssl

import httpx
import pytest
import respx

from xced.api import errors
from xced.api.peer_client import PeerClient, parse_controller_url
from xced.auth.keys import fingerprint, generate, join_payload, verify

pytestmark = pytest.mark.timeout(30)

URL = "tcp://127.0.0.1:7070"
BASE = "https://127.0.0.1:7070/xce/v1"
PIN = "SHA256:" + "A" * 43


def _client(key=None) -> PeerClient:
    return PeerClient(URL, PIN, key or generate(), "login1", "apiserver", ssl_context=ssl.create_default_context())


def _challenges(mock: respx.MockRouter, mode: str = "production") -> list[str]:
    """Route POST /peers/challenge to fresh nonces n1, n2, ...; the list of those handed out."""
    nonces: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content) == {"purpose": "session"}
        nonces.append(f"n{len(nonces) + 1}")
        return httpx.Response(200, json={"nonce": nonces[-1], "cluster": "c1", "purpose": "session",
                                         "controller": PIN, "mode": mode, "expires_in_s": 60.0})

    mock.post(f"{BASE}/peers/challenge").mock(side_effect=answer)
    return nonces


def _sessions(mock: respx.MockRouter, key) -> list[dict]:
    """Route POST /peers/session: check the signature like the controller, hand out s1, s2, ..."""
    seen: list[dict] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        payload = join_payload(cluster="c1", purpose="session", nonce=body["nonce"], host=body["host"],
                               role=body["role"])
        assert verify(key.public_key(), body["signature"], payload), body
        seen.append(body)
        return httpx.Response(200, json={"session": f"s{len(seen)}", "expires_in_s": 3600.0, "host": body["host"],
                                         "role": body["role"]})

    mock.post(f"{BASE}/peers/session").mock(side_effect=answer)
    return seen


def test_authenticate_signs_the_challenge_and_sends_the_session_header():
    """KEY-3: the answer is the key's signature over join_payload(cluster, "session", nonce,
    host, role), with the key's fingerprint; the session then rides every request as
    `Authorization: XCE-Session TOKEN`; the challenge's mode is kept."""
    key = generate()

    async def go():
        pc = _client(key)
        with respx.mock(assert_all_called=True) as mock:
            nonces = _challenges(mock)
            seen = _sessions(mock, key)
            jobs = mock.get(f"{BASE}/jobs").mock(return_value=httpx.Response(200, json={"jobs": []}))
            r = await pc.request("GET", "/jobs?user=all", headers={"x-xce-user": "alice"})
            r2 = await pc.request("GET", "/jobs")
        await pc.close()
        return pc, nonces, seen, jobs, r, r2

    pc, nonces, seen, jobs, r, r2 = asyncio.run(go())
    assert r.status_code == 200 and r.json() == {"jobs": []} and r2.status_code == 200
    assert nonces == ["n1"] and len(seen) == 1, "one session serves both requests"
    assert seen[0]["fingerprint"] == fingerprint(key.public_key())
    assert (seen[0]["host"], seen[0]["role"], seen[0]["nonce"]) == ("login1", "apiserver", "n1")
    first = jobs.calls[0].request
    assert first.headers["authorization"] == "XCE-Session s1" and first.headers["x-xce-user"] == "alice"
    assert first.url.params["user"] == "all"
    assert pc.mode == "production"


def test_a_401_authenticates_again_once_and_resends():
    """A controller that lost the session (restarted) answers 401: the client signs a new
    challenge and sends the request once more with the new session; a second 401 is
    returned as it is, never looped on."""
    key = generate()

    async def go():
        pc = _client(key)
        with respx.mock() as mock:
            _challenges(mock, mode="test")
            seen = _sessions(mock, key)
            route = mock.get(f"{BASE}/jobs").mock(side_effect=[
                httpx.Response(401, json={"error": {"code": "unauthenticated", "message": "no such session",
                                                    "field": None}}),
                httpx.Response(200, json={"jobs": []})])
            r = await pc.request("GET", "/jobs")
            tokens = [c.request.headers["authorization"] for c in route.calls]
            sessions_then = len(seen)
            always = mock.get(f"{BASE}/hosts").mock(return_value=httpx.Response(
                401, json={"error": {"code": "unauthenticated", "message": "no", "field": None}}))
            r401 = await pc.request("GET", "/hosts")
        await pc.close()
        return pc, seen, r, tokens, sessions_then, always, r401

    pc, seen, r, tokens, sessions_then, always, r401 = asyncio.run(go())
    assert r.status_code == 200 and tokens == ["XCE-Session s1", "XCE-Session s2"] and sessions_then == 2
    assert r401.status_code == 401 and always.call_count == 2 and len(seen) == 3
    assert pc.mode == "test"


@pytest.mark.parametrize("status, body, cls, says", [
    (403, {"error": {"code": "forbidden", "message": "key SHA256:x is revoked", "field": None}},
     errors.PermissionDenied, "is revoked"),
    (422, {"error": {"code": "invalid", "message": "field 'host' is required", "field": "host"}},
     errors.InvalidRequest, "is required"),
    (503, {"error": {"code": "store_busy", "message": "busy", "field": None}}, errors.StoreBusy, "busy"),
    (503, {"error": {"code": "controller_unreachable", "message": "gone", "field": None}},
     errors.ControllerUnreachable, "gone"),
    (500, "<html>oops</html>", errors.ServerError, "HTTP 500"),
])
def test_error_answers_of_the_handshake_become_the_typed_errors(status, body, cls, says):
    """An error answer to the challenge or session is raised as the API's typed error (its
    code picks the class; a body that is not the API's error shape is a ServerError)."""
    async def go():
        pc = _client()
        with respx.mock() as mock:
            _challenges(mock)
            kw = {"json": body} if isinstance(body, dict) else {"text": body}
            mock.post(f"{BASE}/peers/session").mock(return_value=httpx.Response(status, **kw))
            try:
                with pytest.raises(cls) as got:
                    await pc.request("GET", "/jobs")
            finally:
                await pc.close()
        return got.value

    err = asyncio.run(go())
    assert type(err) is cls and says in err.message
    assert isinstance(errors.ControllerUnreachable("x"), errors.DaemonUnreachable)
    assert errors.ControllerUnreachable.exit_code == 3 and errors.ControllerUnreachable.status == 503


def test_error_answers_of_a_request_are_returned_to_be_passed_on():
    """A request's own error answer (a 403 of the permission checks) is the caller's to pass
    on, as it is: a login host relays it to its user."""
    async def go():
        pc = _client()
        with respx.mock() as mock:
            _challenges(mock)
            mock.post(f"{BASE}/peers/session").mock(return_value=httpx.Response(
                200, json={"session": "s1", "expires_in_s": 1.0, "host": "login1", "role": "apiserver"}))
            mock.post(f"{BASE}/jobs/7/kill").mock(return_value=httpx.Response(
                403, json={"error": {"code": "forbidden", "message": "not yours", "field": None}}))
            r = await pc.request("POST", "/jobs/7/kill", content=b"{}")
        await pc.close()
        return r

    r = asyncio.run(go())
    assert r.status_code == 403 and r.json()["error"]["message"] == "not yours"


def test_a_transport_error_is_daemon_unreachable():
    """A controller that cannot be reached is DaemonUnreachable naming it (exit 3), from
    the handshake as from a request. A GET whose connection is lost before the answer is
    sent once more (a kept-alive connection the controller closed); a POST never is, so a
    submit is never made twice."""
    async def go():
        out = {}
        pc = _client()
        with respx.mock() as mock:
            mock.post(f"{BASE}/peers/challenge").mock(side_effect=httpx.ConnectError("connection refused"))
            with pytest.raises(errors.DaemonUnreachable) as e:
                await pc.request("GET", "/jobs")
            out["handshake"] = e.value
        await pc.close()
        pc = _client()
        with respx.mock() as mock:
            _challenges(mock)
            mock.post(f"{BASE}/peers/session").mock(return_value=httpx.Response(
                200, json={"session": "s1", "expires_in_s": 1.0, "host": "login1", "role": "apiserver"}))
            get = mock.get(f"{BASE}/jobs").mock(side_effect=[httpx.RemoteProtocolError("server disconnected"),
                                                             httpx.Response(200, json={"jobs": []})])
            out["get"] = (await pc.request("GET", "/jobs")).status_code, get.call_count
            post = mock.post(f"{BASE}/jobs").mock(side_effect=httpx.RemoteProtocolError("server disconnected"))
            with pytest.raises(errors.DaemonUnreachable) as e:
                await pc.request("POST", "/jobs", content=b"{}")
            out["post"] = e.value, post.call_count
            mock.get(f"{BASE}/hosts").mock(side_effect=httpx.ConnectTimeout("timed out"))
            with pytest.raises(errors.DaemonUnreachable) as e:
                await pc.request("GET", "/hosts")
            out["connect"] = e.value
        await pc.close()
        return out

    out = asyncio.run(go())
    assert "cannot reach the controller at tcp://127.0.0.1:7070" in out["handshake"].message
    assert "connection refused" in out["handshake"].message and out["handshake"].exit_code == 3
    assert out["get"] == (200, 2)
    assert out["post"][1] == 1 and "server disconnected" in out["post"][0].message
    assert "timed out" in out["connect"].message


def test_parse_controller_url_says_the_form():
    assert parse_controller_url("tcp://ctl.example:7070") == ("ctl.example", 7070)
    assert parse_controller_url("tcp://[::1]:9") == ("::1", 9)
    for bad in ("ctl:7070", "tcp://ctl", "tcp://ctl:0", "tcp://ctl:70000", "http://ctl:1"):
        with pytest.raises(ValueError, match="expected tcp://HOST:PORT"):
            parse_controller_url(bad)

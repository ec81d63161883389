"""xceadmin's two paths to the cluster (issue 14 "Local or live", KEY-3): which one a
command takes (xceadmin.connect), and the signed client (xceadmin.signed.AdminClient) with
the controller's answers mocked by respx: the handshake, a session re-signed after a 401,
typed errors, and one clear message for each way it fails. The end-to-end tests
(tests/e2e/test_remote_admin.py) run it against a real production controller."""

from __future__ import annotations

import json
import ssl

import httpx
import pytest
import respx
import typer

from xced.api import errors
from xced.api.client import Client
from xced.auth import keys as K
from xceadmin import connect as C
from xceadmin.signed import AdminClient

URL = "tcp://ctl.example:7070"
BASE = "https://ctl.example:7070/xce/v1"
ENV = ("XCE_CONTROLLER", "XCE_CONTROLLER_KEY", "XCE_SOCKET", "XCE_TOPDIR")


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    C.set_options()
    yield
    C.set_options()


@pytest.fixture
def pin(tmp_path):
    """A controller key: (its fingerprint, its public key file)."""
    key = K.generate()
    p = tmp_path / "ctl.pub"
    p.write_text(K.public_line(key.public_key(), "ctl") + "\n")
    return K.fingerprint(key.public_key()), p


# ---------------------------------------------------------------- which path (xceadmin.connect)


def test_without_options_or_environment_the_unix_socket_is_used(monkeypatch, pin):
    assert C.remote_target() is None and C.remote_target("/some/topdir") is None
    monkeypatch.setenv("XCE_CONTROLLER", URL)  # alone: what a worker sets inside jobs, as before
    assert C.remote_target() is None
    monkeypatch.setenv("XCE_CONTROLLER_KEY", pin[0])
    monkeypatch.setenv("XCE_SOCKET", "/run/x.sock")  # XCE_SOCKET wins, as in Client.connect
    assert C.remote_target() is None


def test_the_environment_selects_the_signed_path_unless_a_topdir_is_given(monkeypatch, pin):
    monkeypatch.setenv("XCE_CONTROLLER", URL)
    monkeypatch.setenv("XCE_CONTROLLER_KEY", str(pin[1]))  # a key file: its fingerprint is the pin
    r = C.remote_target()
    assert r == C.Remote(URL, pin[0], C.default_key_host(), "XCE_CONTROLLER")
    assert C.remote_target("/ctl/topdir") is None  # --topdir names the daemon: its socket
    assert C.remote_target("/local/config", topdir_names_daemon=False) == r  # build --apply's DIR does not


def test_the_options_select_the_signed_path_and_name_the_host(pin):
    C.set_options(URL, pin[0], "remote1")
    assert C.remote_target() == C.Remote(URL, pin[0], "remote1", "--controller")
    assert C.key_host() == "remote1"
    assert isinstance(C.connect(), AdminClient)
    C.set_options()
    assert type(C.connect(topdir=None)) is Client


@pytest.mark.parametrize("opts, env, topdir, message", [
    ((URL, None, None), {}, None, "give --controller-key FILE|SHA256:... too (or XCE_CONTROLLER_KEY)"),
    ((None, "SHA256:" + "A" * 43, None), {}, None, "--controller-key pins the controller that --controller"),
    ((URL, "PIN", None), {}, "/ctl", "--topdir /ctl names the controller's own TopDir"),
    (("http://ctl:7070", "PIN", None), {}, None, "expected tcp://HOST:PORT"),
    (("tcp://ctl:99999", "PIN", None), {}, None, "a port from 1 to 65535"),
    ((URL, "SHA256:short", None), {}, None, "--controller-key 'SHA256:short': neither a fingerprint"),
    ((None, None, None), {"XCE_CONTROLLER": URL, "XCE_CONTROLLER_KEY": "/no/such.pub"}, None,
     "XCE_CONTROLLER_KEY '/no/such.pub': neither a fingerprint"),
    ((None, None, None), {"XCE_CONTROLLER": "ctl:7070", "XCE_CONTROLLER_KEY": "x"}, None,
     "XCE_CONTROLLER 'ctl:7070': expected tcp://HOST:PORT"),
])
def test_options_that_do_not_fit_are_usage_errors_that_say_what_would(monkeypatch, pin, opts, env, topdir, message):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if opts[1] == "PIN":
        opts = (opts[0], pin[0], opts[2])
    C.set_options(*opts)
    with pytest.raises(typer.BadParameter) as e:
        C.remote_target(topdir)
    assert message in str(e.value), str(e.value)


def test_a_key_host_must_be_a_host_name():
    with pytest.raises(typer.BadParameter, match="--key-host 'a b': a host name is"):
        C.set_options(key_host="a b")
    assert C.HOST_PATTERN.fullmatch(C.default_key_host())


# ---------------------------------------------------------------- the signed client


@pytest.fixture
def admin_key():
    return K.generate()


@pytest.fixture
def plain_tls(monkeypatch):
    """No TLS probe (respx answers instead of a controller): the pinned context is a default one."""
    import xced.auth.tls as tls

    monkeypatch.setattr(tls, "pinned_client_context", lambda host, port, pin, timeout=10: ssl.create_default_context())


def _challenges(router):
    """POST /peers/challenge answers a fresh nonce each time, for cluster c1."""
    import itertools

    n = itertools.count(1)

    def answer(request):
        return httpx.Response(200, json={"nonce": f"n{next(n)}", "cluster": "c1", "purpose": "session",
                                         "controller": None, "expires_in_s": 60})
    return router.post(f"{BASE}/peers/challenge").mock(side_effect=answer)


def test_a_request_is_signed_for_the_admin_role_and_sent_under_the_session(plain_tls, admin_key):
    with respx.mock(assert_all_called=True) as router:
        _challenges(router)
        sess = router.post(f"{BASE}/peers/session").mock(return_value=httpx.Response(
            200, json={"session": "S1", "expires_in_s": 3600, "host": "remote1", "role": "admin"}))
        keys = router.get(f"{BASE}/keys").mock(return_value=httpx.Response(200, json={"keys": []}))
        with AdminClient(URL, "SHA256:pin", "remote1", key=admin_key) as c:
            assert c.request("GET", "/keys").json() == {"keys": []}
            assert c.request("GET", "/keys", params={"x": ["1", "2"]}).status == 200
        answer = json.loads(sess.calls[0].request.content)
        assert answer["role"] == "admin" and answer["host"] == "remote1"
        assert answer["fingerprint"] == K.fingerprint(admin_key.public_key())
        payload = K.join_payload(cluster="c1", purpose="session", nonce=answer["nonce"], host="remote1", role="admin")
        assert K.verify(admin_key.public_key(), answer["signature"], payload)
        assert sess.call_count == 1  # one session for both requests
        assert keys.calls[0].request.headers["authorization"] == "XCE-Session S1"
        assert keys.calls[1].request.url.query == b"x=1&x=2"


def test_a_session_that_is_over_is_signed_again_once(plain_tls, admin_key):
    with respx.mock() as router:
        _challenges(router)
        tokens = iter(["S1", "S2"])
        router.post(f"{BASE}/peers/session").mock(side_effect=lambda r: httpx.Response(
            200, json={"session": next(tokens), "expires_in_s": 1, "host": "h", "role": "admin"}))
        unauth = {"error": {"code": "unauthenticated", "message": "no such session", "field": None}}
        trust = router.post(f"{BASE}/keys/trust").mock(side_effect=[
            httpx.Response(401, json=unauth), httpx.Response(200, json={"fingerprint": "SHA256:x"})])
        with AdminClient(URL, "SHA256:pin", "h", key=admin_key) as c:
            assert c.request("POST", "/keys/trust", json={"a": 1}).json() == {"fingerprint": "SHA256:x"}
        assert [call.request.headers["authorization"] for call in trust.calls] == ["XCE-Session S1",
                                                                                  "XCE-Session S2"]
        assert json.loads(trust.calls[1].request.content) == {"a": 1}


def test_error_answers_are_the_typed_errors_with_their_exit_codes(plain_tls, admin_key):
    with respx.mock() as router:
        _challenges(router)
        router.post(f"{BASE}/peers/session").mock(return_value=httpx.Response(
            200, json={"session": "S", "expires_in_s": 60, "host": "h", "role": "admin"}))
        router.post(f"{BASE}/keys/revoke").mock(return_value=httpx.Response(404, json={"error": {
            "code": "not_found", "message": "no key SHA256:zz", "field": "fingerprint"}}))
        router.post(f"{BASE}/jobs").mock(return_value=httpx.Response(403, json={"error": {
            "code": "forbidden", "message": "a peer in the admin role may not use this route", "field": None}}))
        router.get(f"{BASE}/info").mock(side_effect=httpx.ConnectError("connection reset"))
        with AdminClient(URL, "SHA256:pin", "h", key=admin_key) as c:
            with pytest.raises(errors.NotFound, match="no key SHA256:zz"):
                c.request("POST", "/keys/revoke", json={})
            with pytest.raises(errors.PermissionDenied, match="admin role") as e:
                c.request("POST", "/jobs", json={})
            assert e.value.exit_code == 1
            with pytest.raises(errors.DaemonUnreachable, match="lost the connection to the controller") as e:
                c.request("GET", "/info")
            assert e.value.exit_code == 3


def test_a_refused_key_passes_the_controllers_reason_on_with_what_to_do(plain_tls, admin_key):
    fp = K.fingerprint(admin_key.public_key())
    for reason, hint in ((f"key {fp} is not trusted by this controller", "keys pub --admin --cluster c1"),
                         (f"key {fp} is trusted for host h1, not h2", "--key-host NAME"),
                         (f"key {fp} is revoked; trusting it again takes --unrevoke", "")):
        with respx.mock() as router:
            _challenges(router)
            router.post(f"{BASE}/peers/session").mock(return_value=httpx.Response(403, json={"error": {
                "code": "forbidden", "message": reason, "field": None}}))
            with AdminClient(URL, "SHA256:pin", "h2", key=admin_key) as c, \
                    pytest.raises(errors.PermissionDenied) as e:
                c.request("GET", "/keys")
        assert e.value.message.startswith(f"the controller at {URL} refused admin key {fp} of host h2: {reason}")
        assert hint in e.value.message


def test_no_admin_key_here_says_where_it_looked_and_how_to_make_and_trust_one(plain_tls, tmp_path, monkeypatch):
    import keyring
    from keyring.backends import fail

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    before = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        with respx.mock() as router:
            _challenges(router)
            with AdminClient(URL, "SHA256:pin", "remote1") as c, pytest.raises(errors.PermissionDenied) as e:
                c.request("GET", "/keys")
    finally:
        keyring.set_keyring(before)
    m = e.value.message
    assert m.startswith("no admin key of cluster c1 on this host (looked in the keyring (service xce, user c1, "
                        "backend keyring.backends.fail.Keyring) and the file "), m
    assert str(tmp_path / "xce" / "admin-c1.key") in m
    assert "`xceadmin keys gen --admin`" in m and "`xceadmin keys trust FILE --role admin --host remote1`" in m


@pytest.mark.parametrize("raised, kind, message, code", [
    ("pin", errors.XceError, "not the pinned", 1),
    (ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"), errors.XceError,
     "did not complete a TLS handshake", 1),
    (ConnectionRefusedError(111, "Connection refused"), errors.DaemonUnreachable,
     "cannot reach the controller at tcp://ctl.example:7070: Connection refused", 3),
])
def test_tls_failures_are_one_clear_line(monkeypatch, admin_key, raised, kind, message, code):
    import xced.auth.tls as tls

    if raised == "pin":
        raised = tls.PinMismatch("the controller at ctl.example:7070 presented key SHA256:a, not the pinned SHA256:b")

    def probe(host, port, pin, timeout=10):
        raise raised

    monkeypatch.setattr(tls, "pinned_client_context", probe)
    with AdminClient(URL, "SHA256:b", "h", key=admin_key) as c, pytest.raises(kind) as e:
        c.request("GET", "/keys")
    assert message in e.value.message and e.value.exit_code == code
    assert not e.value.message.startswith("(")  # the message, not an exception's args tuple


def test_the_cluster_name_needs_no_key(plain_tls):
    with respx.mock() as router:
        _challenges(router)
        with AdminClient(URL, "SHA256:pin", "h") as c:
            assert c.cluster_name() == "c1"


def test_a_revoke_of_its_own_key_is_confirmed_by_the_keys_refusal(plain_tls, admin_key):
    """KEY-4: the controller closes the connection of the key it revokes, the one carrying
    the revoke too; `confirm_revoked` signs a fresh challenge and reads the refusal."""
    fp = K.fingerprint(admin_key.public_key())
    with respx.mock() as router:
        _challenges(router)
        router.post(f"{BASE}/peers/session").mock(side_effect=[
            httpx.Response(200, json={"session": "S", "expires_in_s": 60, "host": "h", "role": "admin"}),
            httpx.Response(403, json={"error": {"code": "forbidden", "message": f"key {fp} is revoked; ...",
                                                "field": None}})])
        router.post(f"{BASE}/keys/revoke").mock(side_effect=httpx.RemoteProtocolError("Server disconnected"))
        with AdminClient(URL, "SHA256:pin", "h", key=admin_key) as c:
            assert c.key_fingerprint() == fp
            with pytest.raises(errors.DaemonUnreachable):
                c.request("POST", "/keys/revoke", json={"fingerprint": fp})
            assert c.confirm_revoked()

"""Enrolment tokens, revocation and key expiry across real processes (KEY-2, KEY-4, KEY-5): a controller whose TCP
port serves TLS pinned to its key, and `xced --roles worker --enroll TOKEN` processes that
trade a one-time token for trust of their own key, then join.

What is checked is what an admin sees: the worker's log (the controller's reason for a
refusal: used, when and by whom; expired; another role; another host), `xceadmin keys list`,
keys.yaml, and the token's row in the store. Expiry runs on the test clock of a test-mode
TLS controller (`xceadmin debug clock --advance`), never on a sleep.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3

import pytest

from tests.conftest import short_tmpdir
from tests.e2e.test_peers import KeyedCluster
from xced.auth import keys as K

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def keyed():
    with KeyedCluster.running("xce-enrol-") as c:
        yield c


@pytest.fixture
def keyed_test():
    """The test-mode variant: TLS and keyed joins all the same, plus the test clock."""
    with KeyedCluster.running("xce-enrolt-", mode="test") as c:
        yield c


def _token(c: KeyedCluster, role: str = "worker", host: str | None = "h7", expires: str = "1h") -> str:
    args = ["keys", "token", "--role", role, "--expires", expires] + (["--host", host] if host else [])
    token = c.admin(*args).stdout.strip()
    assert token.startswith(K.TOKEN_PREFIX) and K.token_pin(token) == K.fingerprint(
        K.parse_public_key(c.controller_pub.read_text())), token
    return token


def _keys(c: KeyedCluster) -> dict[str, dict]:
    return {k["fingerprint"]: k for k in json.loads(c.admin("keys", "list", "--json").stdout)["keys"]}


def _enrol(c: KeyedCluster, name: str, token: str, host: str | None = None):
    """Worker `name` (its own TopDir, so its own key) enrolling with `token` as host `host`
    (default `name`), pinned by the token alone."""
    extra = ["--enroll", token] + (["--host-name", host] if host else [])
    return c.worker(name, *extra, pin=False)


def _fp(c: KeyedCluster, name: str) -> str:
    return K.fingerprint(K.read_private_key(c.top / name / "keys" / "host.key").public_key())


def _token_row(c: KeyedCluster, token: str) -> tuple:
    db = sqlite3.connect(c.ctl_top / "state" / "xce.db")
    try:
        return db.execute("SELECT used, used_by FROM enrolment_tokens WHERE digest=?",
                          (K.token_digest(token),)).fetchone()
    finally:
        db.close()


def _refused(c: KeyedCluster, name: str) -> str:
    """Worker `name` ended, refused: its log."""
    assert c.wait_exit(name) != 0, c.log(name)
    return c.log(name)


def test_a_token_enrols_a_new_worker_once_and_its_restart_still_joins(keyed):
    """KEY-5: a worker with no trusted key trades the token for trust of its key (keys list:
    its fingerprint, host h7, role worker) and joins; the same worker restarted with the
    same --enroll still joins (the controller takes the same key asking again); another
    TopDir (another key), as h7 or as h8, is refused, and its log says when and by whom the
    token was used."""
    token = _token(keyed)
    _enrol(keyed, "h7", token)
    keyed.wait_host("h7")
    fp = _fp(keyed, "h7")
    k = _keys(keyed)[fp]
    assert (k["host"], k["roles"], k["revoked"], k["expires"]) == ("h7", ["worker"], None, None), k
    assert k["last_seen"] is not None and "enrolled" in k["comment"]
    used, used_by = _token_row(keyed, token)
    assert used is not None and used_by == f"worker:h7 {fp}"
    assert (keyed.top / "h7" / "keys" / "controller").read_text().strip() == K.token_pin(token)
    # restarted with the same --enroll TOKEN: it asks again with the same key, and joins
    keyed.procs["h7"].send_signal(signal.SIGTERM)
    assert keyed.wait_exit("h7") == 0
    keyed.wait_host("h7", "unavail")
    _enrol(keyed, "h7", token)
    keyed.wait_host("h7")
    assert "enrolment refused" not in keyed.log("h7")
    job = keyed.ctl.submit("--", "true")
    assert keyed.ctl.wait_state(job, ("DONE", "EXIT"))["state"] == "DONE"
    # another host's key with the used token: as h7 (another TopDir), and as h8
    keys_yaml = (keyed.ctl_top / "config" / "keys.yaml").read_bytes()
    for name, host in (("h7-again", "h7"), ("h8", None)):
        _enrol(keyed, name, token, host)
        log = _refused(keyed, name)
        assert "the enrolment token was used already" in log and f"by worker:h7 {fp}" in log, log
        assert "a token is good once" in log
    assert set(_keys(keyed)) == {fp}
    assert (keyed.ctl_top / "config" / "keys.yaml").read_bytes() == keys_yaml


def test_a_token_for_another_role_or_host_is_refused_and_stays_unused(keyed):
    """KEY-5 (and the issue's bad input: enrolling with a token for another role): a worker
    with a token for the apiserver role, or for host h7 while it is h8, is refused saying
    which; nothing is trusted, keys.yaml is not written, and the token is not spent: the
    host it is for still enrols with it."""
    api_token = _token(keyed, role="apiserver", host=None)
    _enrol(keyed, "w1", api_token)
    log = _refused(keyed, "w1")
    assert "enrolment refused: the enrolment token is for the apiserver role, not worker" in log, log
    h7_token = _token(keyed, host="h7")
    _enrol(keyed, "h8", h7_token)
    log = _refused(keyed, "h8")
    assert "enrolment refused: the enrolment token is for host h7, not h8" in log, log
    assert _keys(keyed) == {} and not (keyed.ctl_top / "config" / "keys.yaml").exists()
    assert _token_row(keyed, api_token) == (None, None) and _token_row(keyed, h7_token) == (None, None)
    # neither refusal spent its token
    _enrol(keyed, "h7", h7_token)
    keyed.wait_host("h7")
    from xced.api.peer_client import PeerClient

    key = K.generate()

    async def enrol_apiserver():
        pc = PeerClient(keyed.url, K.token_pin(api_token), key, "login1", "apiserver")
        try:
            return await pc.enroll(api_token, K.public_line(key.public_key(), "login1"))
        finally:
            await pc.close()

    assert asyncio.run(enrol_apiserver())["roles"] == ["apiserver"]
    assert {(k["host"], tuple(k["roles"])) for k in _keys(keyed).values()} == {("h7", ("worker",)),
                                                                              ("login1", ("apiserver",))}


def test_bad_enrolments_are_refused_saying_why_and_write_nothing(keyed):
    """The issue's bad input, at /peers/enroll: a malformed public key, an RSA key, an
    unknown role, a token for another role, a signature of another key, a token this
    controller never made; each is refused with its reason, nothing is trusted, keys.yaml
    is not written, and the token stays unused. A token for an unknown role is never made."""
    from xced.api.errors import InvalidRequest, PermissionDenied
    from xced.api.peer_client import PeerClient, signed_answer

    token = _token(keyed, host=None)
    key, other = K.generate(), K.generate()
    line = K.public_line(key.public_key(), "h7")
    rsa = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 me"
    cases = [  # (role signed and sent, public key, signing key, token, error, message)
        ("worker", "not a key", key, token, InvalidRequest, "does not start with ssh-ed25519"),
        ("worker", rsa, key, token, InvalidRequest, "is an RSA key (ssh-rsa); XCE trusts Ed25519 keys only"),
        ("boss", line, key, token, PermissionDenied, "the enrolment token is for the worker role, not boss"),
        ("apiserver", line, key, token, PermissionDenied, "the enrolment token is for the worker role, not apiserver"),
        ("worker", line, other, token, PermissionDenied, "the signature is not the enrolling key's"),
        ("worker", line, key, K.new_token(K.token_pin(token)), PermissionDenied, "not one this controller made"),
    ]

    async def go():
        pc = PeerClient(keyed.url, K.token_pin(token), key, "h7", "worker")
        try:
            for role, public, signer, tok, error, message in cases:
                ch = await pc.challenge("enroll")
                body = signed_answer(signer, ch, "h7", role, "enroll")
                del body["fingerprint"]
                with pytest.raises(error) as e:
                    await pc._post("/peers/enroll", {**body, "token": tok, "public_key": public})
                assert message in e.value.message, (role, public, e.value.message)
        finally:
            await pc.close()

    asyncio.run(go())
    assert _keys(keyed) == {} and not (keyed.ctl_top / "config" / "keys.yaml").exists()
    assert _token_row(keyed, token) == (None, None)
    # and a token for a role there is not
    r = keyed.admin("keys", "token", "--role", "boss", check=False)
    assert r.returncode != 0 and "--role 'boss': an enrolled host joins as worker, scheduler or apiserver" in \
        r.stderr and "Traceback" not in r.stderr, r.stderr
    db = sqlite3.connect(keyed.ctl_top / "state" / "xce.db")
    try:
        assert db.execute("SELECT COUNT(*) FROM enrolment_tokens").fetchone() == (1,)
    finally:
        db.close()


def test_an_expired_token_is_refused_saying_it_expired(keyed_test):
    """KEY-5: a token past its expiry on the daemon's clock (the test clock moved 2 h past a
    1 h token) is refused, saying when it expired; nothing is trusted."""
    c = keyed_test
    token = _token(c)
    c.admin("debug", "clock", "--advance", "2h")
    _enrol(c, "h7", token)
    log = _refused(c, "h7")
    assert "enrolment refused: the enrolment token expired" in log and "ask the admin for a new one" in log, log
    assert _keys(c) == {} and _token_row(c, token) == (None, None)


def test_an_enrolment_that_fails_halfway_leaves_the_token_unused(keyed):
    """KEY-5: the token is spent in the same transaction that trusts the key, so an
    enrolment refused after the token was checked (here: keys.yaml edited by hand and not
    applied, so the controller will not rewrite it) trusts nothing and spends nothing; once
    the admin applies the edit the same token enrols the host."""
    keyed.trust("w1")  # a keys.yaml to edit
    keys_yaml = keyed.ctl_top / "config" / "keys.yaml"
    edited = keys_yaml.read_text().replace('comment: ""', 'comment: "by hand"')
    assert edited != keys_yaml.read_text()
    keys_yaml.write_text(edited)
    token = _token(keyed)
    _enrol(keyed, "h7", token)
    log = _refused(keyed, "h7")
    assert "differs from the trusted list in force" in log, log
    assert _token_row(keyed, token) == (None, None) and keys_yaml.read_text() == edited
    assert {k["host"] for k in _keys(keyed).values()} == {"w1"}
    keyed.admin("build", "--apply")
    _enrol(keyed, "h7", token)
    keyed.wait_host("h7")
    assert "by hand" in keys_yaml.read_text() and _token_row(keyed, token)[1] == f"worker:h7 {_fp(keyed, 'h7')}"


def test_an_enrolment_whose_commit_fails_spends_nothing_and_the_worker_tries_again():
    """KEY-5, D-8: the controller's store fails the commit that would trust the key
    (tests/faults/xced.py, one failed commit): nothing is trusted and the token stays unused;
    the worker takes the 503 for a passing fault, tries again after its back-off, and the
    same token then enrols it."""
    from tests.conftest import FAULTY_ENV, FAULTY_XCED

    c = KeyedCluster(short_tmpdir("xce-enrolf-"))
    c.ctl.cmd, c.ctl.env = FAULTY_XCED, FAULTY_ENV
    try:
        c.start()
        token = _token(c)
        (c.ctl_top / "state" / "FAULT").write_text("io 1")
        _enrol(c, "h7", token)
        c.wait_host("h7")
        log = c.log("h7")
        assert "enrolment: " in log and "I/O error" in log and "rejoining in" in log, log
        assert not (c.ctl_top / "state" / "FAULT").exists()
        assert _token_row(c, token)[1] == f"worker:h7 {_fp(c, 'h7')}" and set(_keys(c)) == {_fp(c, "h7")}
    finally:
        c.stop()


def test_a_revoked_key_enrolling_again_is_refused_and_spends_no_token(keyed):
    """KEY-4, KEY-5: a token never un-revokes a key (only `keys trust --unrevoke` does): the
    revoked worker's enrolment is refused saying its key is revoked, and the token stays
    unused for a host that may use it."""
    token = _token(keyed)
    _enrol(keyed, "h7", token)
    keyed.wait_host("h7")
    fp = _fp(keyed, "h7")
    keyed.admin("keys", "revoke", fp)
    assert keyed.wait_exit("h7") != 0
    second = _token(keyed)
    for t in (token, second):  # its own (used) token, and a fresh one
        _enrol(keyed, "h7", t)
        log = _refused(keyed, "h7")
        assert f"key {fp} was revoked" in log.split("enrolment refused:")[-1], log
    assert _token_row(keyed, second) == (None, None)
    assert _keys(keyed)[fp]["revoked"] is not None


def test_a_revocation_survives_a_reverted_keys_yaml_at_join(keyed):
    """KEY-2, KEY-4: revoke a worker's key, drop it from keys.yaml and apply, then put the
    old keys.yaml back and apply it (`xceadmin build --apply`): the key is listed as trusted
    by the file again, and its join is still refused as revoked."""
    fp = keyed.trust("w1")
    keyed.worker("w1")
    keyed.wait_host("w1")
    keys_yaml = keyed.ctl_top / "config" / "keys.yaml"
    old = keys_yaml.read_text()
    keyed.admin("keys", "revoke", fp)
    assert keyed.wait_exit("w1") != 0
    keys_yaml.write_text("keys: []\n")
    keyed.admin("build", "--apply")
    keys_yaml.write_text(old)
    keyed.admin("build", "--apply")
    k = _keys(keyed)[fp]
    assert k["host"] == "w1" and k["revoked"] is not None, k
    before = len(keyed.log("w1"))
    keyed.worker("w1")
    log = _refused(keyed, "w1")[before:]
    assert f"the controller refused this worker: key {fp} is revoked" in log, log
    assert keyed.hosts()["w1"] == "unavail"


# ---------------------------------------------------------------- expiry (KEY-4)


def test_an_expiring_key_closes_its_channel_and_its_rejoin_is_refused(keyed_test):
    """KEY-4: a worker's key trusted --expires 1h joins; the test clock moved 2 h on closes
    its live channel (the host goes unavail), and its rejoin is refused saying the key
    expired."""
    c = keyed_test
    c.trust("w1", "--expires", "1h")
    c.worker("w1")
    c.wait_host("w1")
    c.admin("debug", "clock", "--advance", "2h")
    c.wait_host("w1", "unavail", timeout=10)
    log = _refused(c, "w1")
    assert "expired" in log and "trust it again with a new --expires" in log, log
    assert "closed 1 channel(s) of key" in c.ctl.log.read_text()


def test_the_session_of_an_expired_key_is_refused(keyed_test):
    """KEY-4: an HTTP peer's session (a login host's API server) ends with its key: once
    the clock passes the key's expiry, the sweep closes its connection and drops its
    session, the same client's next request is refused saying the key expired, and so is
    a new client's session."""
    from xced.api.errors import PermissionDenied
    from xced.api.peer_client import PeerClient
    from xced.server.auth import USER_HEADER

    c = keyed_test
    pub = c.gen_key("login1")
    c.admin("keys", "trust", str(pub), "--host", "login1", "--role", "apiserver", "--expires", "1h")
    key = K.read_private_key(c.top / "login1" / "keys" / "host.key")
    pin = K.fingerprint(K.parse_public_key(c.controller_pub.read_text()))

    async def go():
        pc = PeerClient(c.url, pin, key, "login1", "apiserver")
        fresh = PeerClient(c.url, pin, key, "login1", "apiserver")
        try:
            r = await pc.request("GET", "/info", headers={USER_HEADER: "root"})
            assert r.status_code == 200, r.text
            await asyncio.to_thread(c.admin, "debug", "clock", "--advance", "2h")
            for client in (pc, fresh):
                with pytest.raises(PermissionDenied, match="login1 expired .* trust it again with a new --expires"):
                    await client.request("GET", "/info", headers={USER_HEADER: "root"})
        finally:
            await pc.close()
            await fresh.close()

    asyncio.run(go())


def test_a_key_dropped_from_keys_yaml_closes_its_channel(keyed):
    """KEY-4: a key no longer in the trusted list (keys.yaml edited, `build --apply`) is
    handled as one revoked, without a revocation: its live channel closes (the host goes
    unavail) and its rejoin is refused as not trusted."""
    keyed.trust("w1")
    keyed.worker("w1")
    keyed.wait_host("w1")
    (keyed.ctl_top / "config" / "keys.yaml").write_text("keys: []\n")
    keyed.admin("build", "--apply")
    keyed.wait_host("w1", "unavail", timeout=10)
    log = _refused(keyed, "w1")
    assert "is not trusted by this controller" in log, log

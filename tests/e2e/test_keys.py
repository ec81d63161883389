"""The trusted list through a real xced (KEY-2, KEY-4, KEY-5, CLI-4): `xceadmin keys trust |
revoke | list | token` on the controller's Unix socket, as a cluster admin.

The keyed join itself (peers proving their key, revocation closing their channels, login
hosts) is not built yet; these tests hold what is: the list in keys.yaml and in force,
revocations that outlive any edit of the file and a restart, one-time tokens kept as a
digest, and every bad input refused with nothing written.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import XCEADMIN, Daemon, write_config
from xced.api.client import Client
from xced.api.errors import InvalidRequest, PermissionDenied
from xced.auth import keys as K

pytestmark = pytest.mark.timeout(120)


def _admin(d: Daemon, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_SOCKET", None)
    return subprocess.run([XCEADMIN, "keys", *args, "--topdir", str(d.top)], capture_output=True, text=True,
                          env=env, timeout=60, input=input)


@pytest.fixture
def ctl(topdir):
    """A test-mode xced whose admins include the user running the tests (SO_PEERCRED)."""
    import pwd

    me = pwd.getpwuid(os.geteuid()).pw_name
    write_config(topdir, admins=(me,))
    d = Daemon(topdir).start()
    try:
        yield d
    finally:
        d.stop()


def _pub(tmp_path: Path, name: str) -> tuple[Path, str]:
    key = K.generate()
    p = tmp_path / f"{name}.pub"
    p.write_text(K.public_line(key.public_key(), name) + "\n")
    return p, K.fingerprint(key.public_key())


def _listed(d: Daemon) -> dict:
    r = _admin(d, "list", "--json")
    assert r.returncode == 0, r.stderr
    return {k["fingerprint"]: k for k in json.loads(r.stdout)["keys"]}


def test_trust_list_revoke_and_a_revocation_outlives_a_reverted_file_and_a_restart(ctl, tmp_path):
    d = ctl
    pub, fp = _pub(tmp_path, "h7")
    r = _admin(d, "trust", str(pub), "--host", "h7", "--role", "worker", "--role", "scheduler", "--expires", "90d")
    assert r.returncode == 0 and f"trusted {fp} for host h7 as worker, scheduler" in r.stderr, r.stderr
    k = _listed(d)[fp]
    assert (k["host"], k["roles"], k["revoked"], k["last_seen"]) == ("h7", ["worker", "scheduler"], None, None)
    assert 89 * 86400 < k["expires"] - k["added"] <= 90 * 86400
    first_expiry = k["expires"]
    keys_yaml = d.top / "config" / "keys.yaml"
    before_revoke = keys_yaml.read_text()
    assert fp not in before_revoke and K.public_line(K.parse_public_key(pub.read_text())).split()[1] in before_revoke
    # the file compiles with the rest: build sees the key too
    b = subprocess.run([XCEADMIN, "build", "--topdir", str(d.top), "--json"], capture_output=True, text=True)
    assert json.loads(b.stdout)["ok"], b.stdout
    r = _admin(d, "revoke", fp[:14], "--reason", "host stolen")
    assert r.returncode == 0 and f"revoked {fp} (host h7); 0 channels closed" in r.stderr, r.stderr
    assert _listed(d)[fp]["revoked"]["reason"] == "host stolen"
    # reverting keys.yaml and applying it, or restarting, never un-revokes (KEY-2)
    keys_yaml.write_text(before_revoke)
    r = subprocess.run([XCEADMIN, "build", "--topdir", str(d.top), "--apply"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _listed(d)[fp]["revoked"] is not None
    d.stop()
    d.start()
    assert _listed(d)[fp]["revoked"] is not None
    r = _admin(d, "trust", str(pub), "--host", "h7", "--role", "worker")
    assert r.returncode == 1 and "was revoked" in r.stderr and "only with --unrevoke, which is logged" in r.stderr
    r = _admin(d, "trust", str(pub), "--host", "h7", "--role", "worker", "--unrevoke")
    assert r.returncode == 0, r.stderr
    k = _listed(d)[fp]
    # trusted again without --expires: it keeps its own expiry (a fresh tester: it became "never")
    assert k["revoked"] is None and k["roles"] == ["worker"] and k["expires"] == first_expiry
    assert "un-revoked by" in d.log.read_text()
    db = sqlite3.connect(d.top / "state" / "xce.db")
    kinds = [row[0] for row in db.execute("SELECT kind FROM key_events WHERE fingerprint=? ORDER BY seq", (fp,))]
    db.close()
    assert kinds == ["trusted", "revoked", "unrevoked", "trusted"]


def test_a_token_is_shown_once_and_kept_only_as_its_digest(ctl):
    d = ctl
    r = _admin(d, "token", "--role", "worker", "--host", "h9", "--expires", "1h")
    assert r.returncode == 0, r.stderr
    token = r.stdout.strip()
    assert token.startswith(K.TOKEN_PREFIX) and "valid until" in r.stderr
    db = sqlite3.connect(d.top / "state" / "xce.db")
    rows = db.execute("SELECT digest, role, host FROM enrolment_tokens").fetchall()
    dump = "\n".join(db.iterdump())
    db.close()
    assert rows == [(K.token_digest(token), "worker", "h9")] and token not in dump


@pytest.mark.parametrize("content,args,needle", [
    ("not a key\n", [], "does not start with ssh-ed25519"),
    ("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ me\n", [], "is an RSA key (ssh-rsa); XCE trusts Ed25519 keys only"),
    (None, ["--role", "boss"], "--role boss: a key is trusted for one or more roles of worker, scheduler, "
                                "apiserver, admin"),
    (None, ["--expires", "2001-01-01T00:00:00Z"], "--expires 2001-01-01T00:00:00Z: that time is in the past"),
    (None, ["--expires", "soon"], "--expires 'soon': expected a duration such as 90d, 12h"),
    (None, ["--expires", "0s"], "the duration must be more than 0"),
    (None, ["--host", "bad host!"], "--host 'bad host!': a host name is a letter or digit"),
    (None, ["--host", ".."], "--host '..': a host name is a letter or digit"),
])
def test_a_bad_trust_is_refused_and_writes_nothing(ctl, tmp_path, content, args, needle):
    d = ctl
    pub, _ = _pub(tmp_path, "h1")
    if content is not None:
        pub.write_text(content)
    keys_yaml = d.top / "config" / "keys.yaml"
    before = keys_yaml.read_bytes() if keys_yaml.exists() else None
    base = {"--host": "h1", "--role": "worker"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    flat = [x for kv in base.items() for x in kv]
    r = _admin(d, "trust", str(pub), *flat)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr  # a usage error
    assert (keys_yaml.read_bytes() if keys_yaml.exists() else None) == before
    assert _listed(d) == {}


def test_a_fingerprint_that_matches_none_or_several_is_refused(ctl, tmp_path):
    d = ctl
    for h in ("a1", "a2"):
        pub, _ = _pub(tmp_path, h)
        assert _admin(d, "trust", str(pub), "--host", h, "--role", "worker").returncode == 0
    r = _admin(d, "revoke", "SHA256:")
    assert r.returncode == 1 and "is the start of 2 fingerprints" in r.stderr
    r = _admin(d, "revoke", "SHA256:nothing-like-this")
    assert r.returncode == 1 and "no key's fingerprint starts with 'SHA256:nothing-like-this'" in r.stderr
    assert all(k["revoked"] is None for k in _listed(d).values())


def test_only_a_cluster_admin_may_read_or_change_the_trusted_list(ctl, tmp_path):
    d = ctl
    pub, _ = _pub(tmp_path, "h1")
    with Client.connect(topdir=str(d.top), as_user="mallory") as c:
        for method, path, body in (("GET", "/keys", None),
                                   ("POST", "/keys/trust", {"public_key": pub.read_text(), "host": "h1",
                                                            "roles": ["admin"]}),
                                   ("POST", "/keys/revoke", {"fingerprint": "SHA256:"}),
                                   ("POST", "/keys/token", {"role": "worker", "expires_s": 60})):
            with pytest.raises(PermissionDenied, match="user mallory is not a cluster admin"):
                c.request(method, path, json=body)
    assert not (d.top / "config" / "keys.yaml").exists()


def test_keys_commands_without_a_daemon_say_so(tmp_path):
    top = tmp_path / "top"
    assert subprocess.run([XCEADMIN, "init", str(top)], capture_output=True).returncode == 0
    r = subprocess.run([XCEADMIN, "keys", "list", "--topdir", str(top)], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if not k.startswith("XCE_")})
    assert r.returncode == 3 and "cannot reach xced" in r.stderr, (r.returncode, r.stderr)


def test_the_test_clock_moves_key_expiry_on_and_production_refuses_it(ctl, tmp_path):
    """Issue 14's test clock: in test mode an admin moves the daemon's clock on, so that a
    key's expiry is seen without sleeping; a production daemon refuses."""
    d = ctl
    pub, fp = _pub(tmp_path, "h7")
    assert _admin(d, "trust", str(pub), "--host", "h7", "--role", "worker", "--expires", "1h").returncode == 0
    assert _listed(d)[fp]["expired"] is False
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    r = subprocess.run([XCEADMIN, "debug", "clock", "--advance", "2h", "--topdir", str(d.top), "--json"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["offset"] == 7200, r.stderr
    assert _listed(d)[fp]["expired"] is True and "test clock advanced by 7200 s" in d.log.read_text()
    r = subprocess.run([XCEADMIN, "debug", "clock", "--advance", "soon", "--topdir", str(d.top)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "--advance 'soon'" in r.stderr
    d.stop()
    import pwd

    write_config(d.top, mode="production", admins=(pwd.getpwuid(os.geteuid()).pw_name,))
    d.start()
    r = subprocess.run([XCEADMIN, "debug", "clock", "--advance", "1h", "--topdir", str(d.top)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "can be advanced in mode: test only" in r.stderr, r.stderr


# ---------------------------------------------------------------- xceadmin's own key (KEY-3)

REPO = Path(__file__).resolve().parents[2]


def _gen_admin(d: Daemon, home: Path, backend: str, *more: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "XCE_TOPDIR": str(d.top), "XDG_CONFIG_HOME": str(home), "PYTHON_KEYRING_BACKEND": backend,
           "PYTHONPATH": str(REPO)}
    env.pop("XCE_SOCKET", None)
    return subprocess.run([XCEADMIN, "keys", "gen", "--admin", "--topdir", str(d.top), *more], capture_output=True,
                          text=True, env=env, timeout=60)


def test_the_admin_key_goes_to_the_keyring_and_is_trusted_with_the_admin_role(ctl, tmp_path):
    d = ctl
    r = _gen_admin(d, tmp_path / "home", "tests.keyring_memory.Keyring")
    assert r.returncode == 0, r.stderr
    assert "kept in the keyring tests.keyring_memory.Keyring, and trusted with the admin role" in r.stderr
    assert "warning" not in r.stderr and not (tmp_path / "home" / "xce").exists()  # no file fallback
    fp = K.fingerprint(K.parse_public_key(r.stdout))
    assert _listed(d)[fp]["roles"] == ["admin"]


def test_without_a_keyring_the_admin_key_goes_to_a_private_file_with_a_warning(ctl, tmp_path):
    d = ctl
    home = tmp_path / "home"
    r = _gen_admin(d, home, "keyring.backends.fail.Keyring")
    assert r.returncode == 0, r.stderr
    f = home / "xce" / "admin-testcluster.key"
    assert "warning: no working keyring (NoKeyringError" in r.stderr and f"kept in the file {f}" in r.stderr
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert K.fingerprint(K.read_private_key(f).public_key()) == K.fingerprint(K.parse_public_key(r.stdout))
    r = _gen_admin(d, home, "keyring.backends.fail.Keyring")
    assert r.returncode == 1 and "an admin key of cluster testcluster exists already; give --force" in r.stderr
    r = _gen_admin(d, home, "keyring.backends.fail.Keyring", "--force")
    assert r.returncode == 0 and len([k for k in _listed(d).values() if k["roles"] == ["admin"]]) == 2


def test_only_an_admin_makes_the_first_admin_key(topdir, tmp_path):
    write_config(topdir, admins=("someone-else",))
    d = Daemon(topdir).start()
    try:
        r = _gen_admin(d, tmp_path / "home", "keyring.backends.fail.Keyring")
        assert r.returncode == 1 and "is not a cluster admin of testcluster" in r.stderr
        assert not (tmp_path / "home" / "xce").exists()
    finally:
        d.stop()



def test_what_a_fresh_tester_found_in_the_trusted_list(ctl, tmp_path):
    """A hand edit of keys.yaml not applied is never overwritten; a trust of a key trusted
    already says what it replaces; a second revoke says it was revoked already; the API
    answers out-of-range numbers with 422, never 500; a token is for one non-admin role; a
    relative expiry counts on the daemon's clock; and after a trust the daemon's config
    hash is the hash `xceadmin build` gives the files."""
    d = ctl
    pub, fp = _pub(tmp_path, "h1")
    assert _admin(d, "trust", str(pub), "--host", "h1", "--role", "worker", "--expires", "90d").returncode == 0
    info = json.loads(subprocess.run([XCEADMIN.replace("xceadmin", "xcecli"), "api", "GET", "/info"],
                                     capture_output=True, text=True, env={**os.environ, "XCE_TOPDIR": str(d.top)}).stdout)
    b = json.loads(subprocess.run([XCEADMIN, "build", "--topdir", str(d.top), "--json"], capture_output=True,
                                  text=True).stdout)
    assert info["config_hash"] == b["hash"]
    r = _admin(d, "trust", str(pub), "--host", "h1", "--role", "admin")
    assert r.returncode == 0 and f"{fp} was trusted already, for host h1 as worker" in r.stderr and "replaced" in r.stderr
    keys_yaml = d.top / "config" / "keys.yaml"
    edited = keys_yaml.read_text().replace('comment: ""', 'comment: "by hand"')
    keys_yaml.write_text(edited)
    pub2, _ = _pub(tmp_path, "h2")
    r = _admin(d, "trust", str(pub2), "--host", "h2", "--role", "worker")
    assert r.returncode == 1 and "differs from the trusted list in force" in r.stderr
    assert keys_yaml.read_text() == edited  # the hand edit is kept
    assert subprocess.run([XCEADMIN, "build", "--topdir", str(d.top), "--apply"], capture_output=True).returncode == 0
    assert _admin(d, "trust", str(pub2), "--host", "h2", "--role", "worker").returncode == 0
    assert "by hand" in keys_yaml.read_text()
    assert _admin(d, "revoke", fp).returncode == 0
    r = _admin(d, "revoke", fp)
    assert r.returncode == 0 and "was revoked already" in r.stderr
    with Client.connect(topdir=str(d.top)) as c:
        for body in ({"public_key": pub2.read_text(), "host": "h2", "roles": ["worker"], "expires": 1e20},
                     {"public_key": pub2.read_text(), "host": "h2", "roles": ["worker"], "expires_in_s": -5}):
            with pytest.raises(InvalidRequest):
                c.request("POST", "/keys/trust", json=body)
        conn_body = '{"advance_s": NaN}'
        from tests.uds_http import UnixConnection as _UnixConnection

        conn = _UnixConnection(str(d.top / "run" / "xced.sock"), 10)
        conn.request("POST", "/xce/v1/debug/clock", body=conn_body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status in (400, 422), resp.read()
        conn.close()
    r = _admin(d, "token", "--role", "admin")  # a usage error, as every bad option (exit 2)
    assert r.returncode == 2 and "an enrolled host joins as worker, scheduler or apiserver" in r.stderr
    r = _admin(d, "token", "--role", "worker", "--role", "scheduler")
    assert r.returncode == 2 and "a token is for one role" in r.stderr
    # a relative expiry is counted on the daemon's clock, which the test clock moved on
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    assert subprocess.run([XCEADMIN, "debug", "clock", "--advance", "2h", "--topdir", str(d.top)], env=env,
                          capture_output=True).returncode == 0
    pub3, fp3 = _pub(tmp_path, "h3")
    r = _admin(d, "trust", str(pub3), "--host", "h3", "--role", "worker", "--expires", "1h")
    assert r.returncode == 0, r.stderr
    k = _listed(d)[fp3]
    assert k["expires"] - k["added"] == 3600 and k["expired"] is False


def test_a_failing_commit_changes_neither_the_store_nor_keys_yaml(topdir, tmp_path):
    """Injected fault (tests/faults/xced.py): while the store's commits fail, a trust and a
    revoke are refused (exit 3, store_unavailable) and leave keys.yaml and the list as they
    were; once the disk is well again both go through."""
    import pwd

    from tests.conftest import FAULTY_ENV, FAULTY_XCED

    write_config(topdir, admins=(pwd.getpwuid(os.geteuid()).pw_name,))
    d = Daemon(topdir, cmd=FAULTY_XCED, env=FAULTY_ENV).start()
    try:
        pub, fp = _pub(tmp_path, "h1")
        assert _admin(d, "trust", str(pub), "--host", "h1", "--role", "worker").returncode == 0
        keys_yaml = topdir / "config" / "keys.yaml"
        before = keys_yaml.read_bytes()
        pub2, fp2 = _pub(tmp_path, "h2")
        fault = topdir / "state" / "FAULT"
        fault.write_text("io")
        r = _admin(d, "trust", str(pub2), "--host", "h2", "--role", "worker")
        assert r.returncode == 3 and "I/O error" in r.stderr, r.stderr
        assert keys_yaml.read_bytes() == before
        r = _admin(d, "revoke", fp)
        assert r.returncode == 3, r.stderr
        fault.unlink()
        listed = _listed(d)
        assert set(listed) == {fp} and listed[fp]["revoked"] is None
        assert _admin(d, "trust", str(pub2), "--host", "h2", "--role", "worker").returncode == 0
        assert _admin(d, "revoke", fp).returncode == 0
        assert set(_listed(d)) == {fp, fp2} and _listed(d)[fp]["revoked"] is not None
    finally:
        d.stop()

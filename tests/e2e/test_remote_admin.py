"""`xceadmin` from another host (issue 14 "Local or live", KEY-3, KEY-6, CLI-4): the real
xceadmin, with `--controller tcp://... --controller-key ...`, signs with its admin key and
reaches a production controller (a real process) over its pinned TLS port.

The "remote" xceadmin runs with a keyring backend the test pins, never a desktop one:
tests.keyring_memory.SharedKeyring (a test keyring its processes share, as a desktop
session's do), and keyring's `fail` backend for the 0600 file fallback; its config dir (the
file's home) is a temporary XDG_CONFIG_HOME, and it has no TopDir or socket of the
controller in its environment.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import XCEADMIN
from tests.e2e.test_peers import KeyedCluster
from xced.auth import keys as K

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]
SHARED = "tests.keyring_memory.SharedKeyring"
FAIL = "keyring.backends.fail.Keyring"


@pytest.fixture
def keyed():
    with KeyedCluster.running("xce-radm-") as c:
        yield c


class Remote:
    """xceadmin as on another host: its own config dir and keyring, the controller named
    only by URL and pin."""

    def __init__(self, keyed: KeyedCluster, home: Path, backend: str) -> None:
        self.keyed = keyed
        self.home = home
        self.env = {**os.environ, "XDG_CONFIG_HOME": str(home / "config"), "PYTHON_KEYRING_BACKEND": backend,
                    "XCE_TEST_KEYRING": str(home / "keyring.json"), "PYTHONPATH": str(REPO)}
        for name in ("XCE_TOPDIR", "XCE_SOCKET", "XCE_CONTROLLER", "XCE_CONTROLLER_KEY"):
            self.env.pop(name, None)

    def run(self, *args: str, pin: str | None = None, host: str = "remote1", env: dict | None = None,
            target: bool = True) -> subprocess.CompletedProcess:
        pre = ["--controller", self.keyed.url, "--controller-key", pin or str(self.keyed.controller_pub)] \
            if target else []
        if host:
            pre += ["--key-host", host]
        return subprocess.run([XCEADMIN, *pre, *args], capture_output=True, text=True, timeout=60,
                              env={**self.env, **(env or {})})

    def ok(self, *args: str, **kw) -> subprocess.CompletedProcess:
        r = self.run(*args, **kw)
        assert r.returncode == 0, f"xceadmin {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    def gen_and_trust(self) -> str:
        """`keys gen --admin` here, then trust the printed key on the controller (its Unix
        socket) as --role admin --host remote1; the fingerprint."""
        r = self.ok("keys", "gen", "--admin")
        pub = self.home / "admin.pub"
        pub.write_text(r.stdout)
        out = json.loads(self.keyed.admin("keys", "trust", str(pub), "--role", "admin", "--host", "remote1",
                                          "--json").stdout)
        return out["fingerprint"]


def _listed(r: subprocess.CompletedProcess) -> dict:
    return {k["fingerprint"]: k for k in json.loads(r.stdout)["keys"]}


def test_a_remote_xceadmin_signs_with_its_admin_key_from_the_keyring(keyed, tmp_path):
    """KEY-3: an admin key made on the "remote" host (the cluster's name read from the
    pinned controller) is kept in the keyring, refused until trusted, and once trusted as
    admin for host remote1 lists, makes tokens, trusts and revokes keys over TCP."""
    rem = Remote(keyed, tmp_path, SHARED)
    r = rem.run("keys", "list")  # no admin key here yet
    assert r.returncode == 1, r.stderr
    assert "no admin key of cluster testcluster on this host" in r.stderr and "xceadmin keys gen --admin" in r.stderr
    assert "--role admin --host remote1" in r.stderr and SHARED in r.stderr, r.stderr

    r = rem.ok("keys", "gen", "--admin")
    assert f"kept in the keyring {SHARED}; not trusted yet" in r.stderr, r.stderr
    assert "xceadmin keys trust FILE --role admin --host remote1" in r.stderr and "warning" not in r.stderr
    assert not (tmp_path / "config" / "xce").exists()  # the keyring took it: no file
    fp = K.fingerprint(K.parse_public_key(r.stdout))
    r = rem.run("keys", "list")  # made, not trusted: the controller's reason, passed on
    assert r.returncode == 1 and f"refused admin key {fp} of host remote1" in r.stderr, r.stderr
    assert "is not trusted by this controller" in r.stderr and "keys pub --admin" in r.stderr, r.stderr
    printed = rem.ok("keys", "pub", "--admin").stdout  # the cluster as the controller names it
    assert K.fingerprint(K.parse_public_key(printed)) == fp
    assert rem.ok("keys", "pub", "--admin", "--cluster", "testcluster", target=False).stdout == printed

    (tmp_path / "admin.pub").write_text(printed)
    keyed.admin("keys", "trust", str(tmp_path / "admin.pub"), "--role", "admin", "--host", "remote1")
    rows = _listed(rem.ok("keys", "list", "--json"))
    assert rows[fp]["roles"] == ["admin"] and rows[fp]["host"] == "remote1" and rows[fp]["last_seen"] is not None
    assert "remote1" in rem.ok("keys", "list").stdout

    r = rem.ok("keys", "token", "--role", "worker", "--expires", "1h")
    assert r.stdout.startswith("xce1-") and "one-time enrolment token for worker" in r.stderr

    # a worker key trusted from the remote host (the file is read here), then revoked from it
    wpub = keyed.gen_key("w5")
    out = json.loads(rem.ok("keys", "trust", str(wpub), "--host", "w5", "--role", "worker", "--json").stdout)
    wfp = out["fingerprint"]
    out = json.loads(rem.ok("keys", "revoke", wfp[:20], "--reason", "left", "--json").stdout)
    assert out["fingerprint"] == wfp and out["already"] is None
    rows = _listed(keyed.admin("keys", "list", "--json"))  # as the controller's own socket sees it
    assert rows[wfp]["revoked"]["actor"] == "admin:admin-key@remote1" and rows[wfp]["revoked"]["reason"] == "left"

    # the environment's form: XCE_CONTROLLER with XCE_CONTROLLER_KEY (a fingerprint here)
    ctl_fp = K.fingerprint(K.parse_public_key(keyed.controller_pub.read_text()))
    r = rem.ok("keys", "list", "--json", target=False, env={"XCE_CONTROLLER": keyed.url, "XCE_CONTROLLER_KEY": ctl_fp})
    assert fp in _listed(r)

    # signing as a host the key was not trusted for: the controller's reason, and the option to fix it
    r = rem.run("keys", "list", host="elsewhere")
    assert r.returncode == 1 and "is trusted for host remote1, not elsewhere" in r.stderr and "--key-host" in r.stderr

    # revoking the very key it signs with (KEY-4): the controller closes this connection as it
    # revokes it, before any answer; the key's refusal afterwards says it is done
    r = rem.ok("keys", "revoke", fp[:24])
    assert f"revoked {fp} (host remote1), the admin key this xceadmin signs with" in r.stderr, r.stderr
    r = rem.run("keys", "list")
    assert r.returncode == 1 and "is revoked" in r.stderr, r.stderr


def test_the_admin_key_cannot_submit_and_bad_targets_are_clear(keyed, tmp_path):
    """KEY-3: the admin role's allowlist has no submit; a wrong pin, an unreachable
    controller and a missing pin each get one clear line and their exit code."""
    from cryptography.hazmat.primitives import serialization

    from xced.api.errors import PermissionDenied
    from xced.auth.tls import parse_pin
    from xceadmin.signed import AdminClient

    rem = Remote(keyed, tmp_path, SHARED)
    fp = rem.gen_and_trust()
    pem = json.loads((tmp_path / "keyring.json").read_text())["xce\ntestcluster"]
    key = serialization.load_ssh_private_key(pem.encode(), password=None)
    assert K.fingerprint(key.public_key()) == fp
    with AdminClient(keyed.url, parse_pin(str(keyed.controller_pub)), "remote1", key=key) as c:
        assert c.info().is_admin and c.info().user == "admin-key@remote1"
        with pytest.raises(PermissionDenied, match="admin role .*may not use this route .*queue:submit"):
            c.request("POST", "/jobs", json={"argv": ["id"], "cwd": "/"})

    other = keyed.gen_key("w6")  # another key than the controller's
    r = rem.run("keys", "list", pin=str(other))
    assert r.returncode == 1 and "not the pinned" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run([XCEADMIN, "--controller", "tcp://127.0.0.1:1", "--controller-key", str(keyed.controller_pub),
                        "keys", "list"], capture_output=True, text=True, env=rem.env, timeout=60)
    assert r.returncode == 3 and "cannot reach the controller at tcp://127.0.0.1:1" in r.stderr, r.stderr
    r = subprocess.run([XCEADMIN, "--controller", keyed.url, "keys", "list"], capture_output=True, text=True,
                       env=rem.env, timeout=60)
    assert r.returncode == 2 and "give --controller-key FILE|SHA256:... too" in r.stderr, r.stderr
    r = rem.run("keys", "list", pin="SHA256:short")
    assert r.returncode == 2 and "neither a fingerprint" in r.stderr, r.stderr


def test_the_file_fallback_works_end_to_end_and_build_apply_keeps_the_trusted_list(keyed, tmp_path):
    """KEY-3 without a working keyring: the admin key goes to a 0600 file with a warning, and
    signs all the same. `build --apply` of a copy of the config from the remote host applies
    it, keeping the controller's trusted list (the copy's keys.yaml predates the admin key);
    `sim record` goes over TCP too, and `debug clock` gets production's refusal."""
    copy = tmp_path / "copy"
    shutil.copytree(keyed.ctl_top / "config", copy / "config")
    rem = Remote(keyed, tmp_path, FAIL)
    r = rem.ok("keys", "gen", "--admin")
    f = tmp_path / "config" / "xce" / "admin-testcluster.key"
    assert "warning: no working keyring (NoKeyringError" in r.stderr and f"kept in the file {f}" in r.stderr, r.stderr
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    (tmp_path / "admin.pub").write_text(r.stdout)
    keyed.admin("keys", "trust", str(tmp_path / "admin.pub"), "--role", "admin", "--host", "remote1")
    fp = K.fingerprint(K.parse_public_key(r.stdout))
    assert fp in _listed(rem.ok("keys", "list", "--json"))
    r = rem.run("keys", "gen", "--admin")
    assert r.returncode == 1 and "exists already; give --force" in r.stderr

    with open(copy / "config" / "queues.yaml", "a") as q:
        q.write("  - name: remote\n    priority: 10\n")
    r = rem.ok("build", "--apply", "--topdir", str(copy))
    assert "config applied" in r.stdout and "differs from the controller's trusted list" in r.stderr, r.stderr
    assert "1 keys trusted there missing from it" in r.stderr, r.stderr
    assert "applied to the running controller only" in r.stderr and "next restart" in r.stderr, r.stderr
    queues = json.loads(keyed.ctl.cli("queues", "--json", check=True).stdout)
    assert "remote" in {q["name"] for q in queues["queues"]}
    assert fp in _listed(rem.ok("keys", "list", "--json"))  # still trusted: the copy did not drop it
    assert fp in _listed(keyed.admin("keys", "list", "--json"))  # and keys.yaml is still the list in force
    keyed.admin("keys", "token", "--role", "worker")

    r = rem.ok("sim", "record", "--name", "remote-1")
    assert "recording sessions to" in r.stdout and str(keyed.ctl_top) in r.stdout
    assert "stopped" in rem.ok("sim", "record", "--stop").stdout
    r = rem.run("debug", "clock", "--advance", "1h")
    assert r.returncode == 1 and "mode: test only" in r.stderr, r.stderr

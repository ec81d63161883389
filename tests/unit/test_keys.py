"""Host keys without a daemon (KEY-2, KEY-3, KEY-5): key pairs and their files,
fingerprints as OpenSSH writes them, signatures bound to their join, tokens, and
config/keys.yaml compiled with its positions."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from xced.auth import keys as K
from xced.config.keys import format_time, load_keys, parse_time, render_keys, write_keys
from xced.model.keys import KeysConfig, TrustedKey

XCEADMIN = str(Path(sys.executable).parent / "xceadmin")


def test_a_signature_verifies_for_its_own_join_only():
    """KEY-3: the payload binds the cluster, the channel's purpose, the nonce, the host and
    the role; a signature is worth nothing for any other, or from any other key."""
    key = K.generate()
    parts = {"cluster": "prod", "purpose": "worker-channel", "nonce": "n1", "host": "h7", "role": "worker"}
    sig = K.sign(key, K.join_payload(**parts))
    assert K.verify(key.public_key(), sig, K.join_payload(**parts))
    for k, other in (("cluster", "test"), ("purpose", "api"), ("nonce", "n2"), ("host", "h8"), ("role", "admin")):
        assert not K.verify(key.public_key(), sig, K.join_payload(**{**parts, k: other})), k
    assert not K.verify(K.generate().public_key(), sig, K.join_payload(**parts))
    assert not K.verify(key.public_key(), "not base64!", K.join_payload(**parts))
    assert not K.verify(key.public_key(), sig[:-4] + "AAAA", K.join_payload(**parts))


def test_the_private_key_file_is_0600_and_a_loose_one_is_refused(tmp_path):
    key = K.generate()
    p = tmp_path / "keys" / "host.key"
    K.write_private_key(p, key)
    assert stat.S_IMODE(p.stat().st_mode) == 0o600 and stat.S_IMODE(p.parent.stat().st_mode) == 0o700
    assert K.fingerprint(K.read_private_key(p).public_key()) == K.fingerprint(key.public_key())
    with pytest.raises(FileExistsError, match="a host keeps its key"):
        K.write_private_key(p, K.generate())
    os.chmod(p, 0o644)
    with pytest.raises(K.KeyProblem, match="permissions 0644 are too open"):
        K.read_private_key(p)
    with pytest.raises(K.KeyProblem, match="no private key here"):
        K.read_private_key(tmp_path / "none.key")


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="OpenSSH's ssh-keygen is not installed")
def test_fingerprints_and_key_lines_are_openssh_s(tmp_path):
    """KEY-2: `SHA256:<base64>` exactly as ssh-keygen prints it, for our key line and for a
    key ssh-keygen made; our private key file is one ssh-keygen reads."""
    key = K.generate()
    (tmp_path / "a.pub").write_text(K.public_line(key.public_key(), "h7") + "\n")
    out = subprocess.run(["ssh-keygen", "-l", "-f", str(tmp_path / "a.pub")], capture_output=True, text=True).stdout
    assert out.split()[1] == K.fingerprint(key.public_key()) and out.split()[2] == "h7"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "made-by-ssh", "-f", str(tmp_path / "b")],
                   check=True)
    pub = K.parse_public_key((tmp_path / "b.pub").read_text())
    out = subprocess.run(["ssh-keygen", "-l", "-f", str(tmp_path / "b.pub")], capture_output=True, text=True).stdout
    assert out.split()[1] == K.fingerprint(pub)
    K.write_private_key(tmp_path / "c.key", key)
    out = subprocess.run(["ssh-keygen", "-y", "-f", str(tmp_path / "c.key")], capture_output=True, text=True).stdout
    assert out.split()[:2] == K.public_line(key.public_key()).split()[:2]


@pytest.mark.parametrize("text,needle", [
    ("", "is empty; expected an Ed25519 public key"),
    ("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 me", "is an RSA key (ssh-rsa); XCE trusts Ed25519 keys only"),
    ("ecdsa-sha2-nistp256 AAAAE2VjZHNh me", "is an ECDSA key"),
    ("ssh-ed25519 AAAA!!notbase64 me", "the ssh-ed25519 key does not decode"),
    ("hello world", "does not start with ssh-ed25519"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n", "holds a private key"),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB5Fu7OM/EDHDcH29be6e1NCKnHuFf+0Q8ECGyiTqi7J a\n"
     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB5Fu7OM/EDHDcH29be6e1NCKnHuFf+0Q8ECGyiTqi7J b", "holds 2 key lines"),
])
def test_a_public_key_that_is_not_one_ed25519_key_is_refused_naming_why(text, needle):
    with pytest.raises(K.KeyProblem) as e:
        K.parse_public_key(text, "k.pub")
    assert needle in str(e.value) and str(e.value).startswith("k.pub")


def test_an_rsa_pem_key_is_refused_naming_its_type():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    with pytest.raises(K.KeyProblem, match="is a RSA key; XCE trusts Ed25519 keys only"):
        K.parse_public_key(pem, "rsa.pem")


def test_tokens_are_random_and_kept_only_as_a_digest():
    a, b = K.new_token(), K.new_token()
    assert a != b and a.startswith(K.TOKEN_PREFIX) and len(a) > 40
    assert K.token_digest(a).startswith("sha256:") and K.token_digest(a) == K.token_digest(a + "\n")
    assert a not in K.token_digest(a)


# ---------------------------------------------------------------- keys.yaml


def _entry(key, host="h7", roles=("worker",), expires=None) -> TrustedKey:
    return TrustedKey(fingerprint=K.fingerprint(key.public_key()), public_key=K.public_line(key.public_key(), host),
                      host=host, roles=list(roles), expires=expires, added=1_764_600_000.0)


def test_keys_yaml_reads_back_what_it_was_written_from(tmp_path):
    cfg = KeysConfig(keys=[_entry(K.generate()), _entry(K.generate(), "login1", ("apiserver",), 1_900_000_000.0)])
    path = write_keys(tmp_path, cfg)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 and not list(tmp_path.glob(".keys.yaml.*"))
    errors: list = []
    back = load_keys(tmp_path, errors, [])
    assert not errors and back == cfg
    assert render_keys(back) == path.read_text()
    assert format_time(parse_time("2027-03-01T12:00:00Z")) == "2027-03-01T12:00:00Z"
    assert load_keys(tmp_path / "none", [], []) == KeysConfig()  # no file: no key trusted


def test_a_key_is_found_by_its_fingerprint_in_the_list_it_is_asked_of():
    """KEY-3: the trusted list answers by fingerprint (a dict lookup since issue 19, where a
    scan made the controller's key sweep O(hosts^2)); a list built after, or before, answers
    for its own keys only, and indexing leaves the lists' equality alone."""
    a, b = _entry(K.generate(), "h1"), _entry(K.generate(), "h2")
    one, two = KeysConfig(keys=[a]), KeysConfig(keys=[a, b])
    assert one.by_fingerprint(a.fingerprint) == a and one.by_fingerprint(b.fingerprint) is None
    assert two.by_fingerprint(b.fingerprint) == b
    assert one.by_fingerprint(b.fingerprint) is None and one.by_fingerprint("SHA256:nope") is None
    assert KeysConfig(keys=[a]) == one  # the index is kept outside the model


def test_keys_yaml_problems_are_each_at_their_line_and_column(tmp_path):
    good = K.public_line(K.generate().public_key(), "h1")
    (tmp_path / "keys.yaml").write_text(
        "keys:\n"
        f'  - public_key: "{good}"\n    host: h1\n    roles: [worker]\n'
        '  - public_key: "ssh-rsa AAAAB3NzaC1yc2E x"\n    host: h2\n    roles: [worker]\n'
        f'  - public_key: "{K.public_line(K.generate().public_key())}"\n    host: h3\n    roles: [worker, boss]\n'
        f'  - public_key: "{K.public_line(K.generate().public_key())}"\n    host: h4\n    roles: [worker]\n'
        '    expires: soon\n'
        f'  - public_key: "{good}"\n    host: h1b\n    roles: [admin]\n'
        f'  - public_key: "{K.public_line(K.generate().public_key())}"\n    host: h5\n    roles: [worker]\n'
        '    color: red\n')
    errors: list = []
    assert load_keys(tmp_path, errors, []) is None
    f = tmp_path / "keys.yaml"
    shown = [str(e) for e in errors]
    assert shown[0].startswith(f"{f}:5:17: error: key #2: public_key is an RSA key (ssh-rsa)")
    assert shown[1] == f"{f}:10:12: error: key #3: roles: expected a list of worker, scheduler, apiserver, admin; " \
                       f"'boss' is not a role"
    assert shown[2].startswith(f"{f}:14:14: error: key #4: expires: expected a UTC time")
    assert shown[3].startswith(f"{f}:15:5: error: key #5 (SHA256:") and "is key #1 again" in shown[3]
    assert shown[4] == f"{f}:21:5: error: key #6: unknown key 'color'; valid keys: public_key, host, roles, " \
                       f"expires, added, comment"


def test_an_expired_key_is_kept_with_a_warning(tmp_path):
    cfg = KeysConfig(keys=[_entry(K.generate(), expires=1_000_000_000.0)])
    write_keys(tmp_path, cfg)
    warnings: list = []
    assert load_keys(tmp_path, [], warnings) == cfg
    assert "expired 2001-09-09T01:46:40Z; a peer with it is refused at join" in str(warnings[0])
    assert cfg.keys[0].expired(1_000_000_000.0) and not cfg.keys[0].expired(999_999_999.0)


def test_xceadmin_build_compiles_keys_yaml_into_the_config(tmp_path):
    top = tmp_path / "top"
    assert subprocess.run([XCEADMIN, "init", str(top)], capture_output=True).returncode == 0
    cfg = KeysConfig(keys=[_entry(K.generate())])
    write_keys(top / "config", cfg)
    from xced.config import load_cluster_config

    r = load_cluster_config(top)
    assert r.ok and r.config.keys == cfg
    (top / "config" / "keys.yaml").write_text("keys: [1]\n")
    b = subprocess.run([XCEADMIN, "build", "--topdir", str(top)], capture_output=True, text=True)
    assert b.returncode == 1 and f"{top / 'config' / 'keys.yaml'}:1:8: error: key #1: expected a mapping" in b.stderr


def test_keys_gen_makes_a_private_key_pair_and_prints_only_the_public_key(tmp_path):
    top = tmp_path / "top"
    assert subprocess.run([XCEADMIN, "init", str(top)], capture_output=True).returncode == 0
    r = subprocess.run([XCEADMIN, "keys", "gen", "--topdir", str(top)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    priv, pub = top / "keys" / "host.key", top / "keys" / "host.pub"
    assert stat.S_IMODE(priv.stat().st_mode) == 0o600 and stat.S_IMODE((top / "keys").stat().st_mode) == 0o711
    assert r.stdout.strip() == pub.read_text().strip() and r.stdout.startswith("ssh-ed25519 ")
    assert "PRIVATE" not in r.stdout + r.stderr and priv.read_text().split("\n")[1] not in r.stdout + r.stderr
    fp = K.fingerprint(K.parse_public_key(pub.read_text()))
    assert f"fingerprint {fp}" in r.stderr and fp == K.fingerprint(K.read_private_key(priv).public_key())
    before = priv.read_bytes()
    r = subprocess.run([XCEADMIN, "keys", "gen", "--topdir", str(top)], capture_output=True, text=True)
    assert r.returncode == 1 and "exists already; a host keeps its key" in r.stderr and priv.read_bytes() == before
    r = subprocess.run([XCEADMIN, "keys", "gen", "--topdir", str(top), "--force"], capture_output=True, text=True)
    assert r.returncode == 0 and priv.read_bytes() != before
    # a new host's TopDir is made (its xced makes the rest at start); a file is no TopDir
    r = subprocess.run([XCEADMIN, "keys", "gen", "--topdir", str(tmp_path / "new")], capture_output=True, text=True)
    assert r.returncode == 0 and (tmp_path / "new" / "keys" / "host.key").exists(), r.stderr
    (tmp_path / "file").write_text("")
    r = subprocess.run([XCEADMIN, "keys", "gen", "--topdir", str(tmp_path / "file")], capture_output=True, text=True)
    assert r.returncode == 2 and "is not a directory" in r.stderr
    r = subprocess.run([XCEADMIN, "keys", "gen", "--topdir", str(top), "--force"], capture_output=True, text=True)
    assert r.returncode == 0 and "warning: this replaced key SHA256:" in r.stderr, r.stderr


def test_the_admin_key_round_trips_through_the_keyring_and_the_file(tmp_path, monkeypatch):
    """KEY-3 with the keyring pinned in this process: an in-memory backend, then keyring's
    fail backend (the 0600 file); never a desktop keyring."""
    import keyring
    from keyring.backends import fail

    from tests.keyring_memory import Keyring as Memory
    from xced.auth.admin_key import admin_key_file, load_admin_key, store_admin_key

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    before = keyring.get_keyring()
    try:
        keyring.set_keyring(Memory())
        key = K.generate()
        where, why = store_admin_key("c1", key)
        assert where.startswith("keyring tests.keyring_memory") and why is None
        assert K.fingerprint(load_admin_key("c1").public_key()) == K.fingerprint(key.public_key())
        assert load_admin_key("other") is None
        keyring.set_keyring(fail.Keyring())
        key2 = K.generate()
        where, why = store_admin_key("c2", key2)
        assert where == f"file {admin_key_file('c2')}" and why.startswith("NoKeyringError")
        assert stat.S_IMODE(admin_key_file("c2").stat().st_mode) == 0o600
        assert K.fingerprint(load_admin_key("c2").public_key()) == K.fingerprint(key2.public_key())
    finally:
        keyring.set_keyring(before)


def test_a_saved_pin_others_could_change_is_refused(tmp_path):
    """KEY-6 (a fresh tester): keys/controller decides which controller a peer trusts, so a
    file group or others may write, or one holding no fingerprint, is refused naming the
    fix; the pin is saved 0644 and read back."""
    from xced.auth.tls import save_pin, saved_pin

    assert saved_pin(tmp_path) is None
    pin = "SHA256:" + "A" * 43
    save_pin(tmp_path, pin)
    p = tmp_path / "keys" / "controller"
    assert saved_pin(tmp_path) == pin and stat.S_IMODE(p.stat().st_mode) == 0o644
    os.chmod(p, 0o666)
    with pytest.raises(K.KeyProblem, match="others could change it"):
        saved_pin(tmp_path)
    save_pin(tmp_path, pin)  # a pin given explicitly replaces it, tight again
    assert stat.S_IMODE(p.stat().st_mode) == 0o644
    p.write_text("garbage\n")
    with pytest.raises(K.KeyProblem, match="holds no fingerprint"):
        saved_pin(tmp_path)

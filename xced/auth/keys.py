"""Host keys (KEY-2, KEY-3, KEY-5): Ed25519 key pairs, fingerprints, signatures, enrolment
tokens. No CA: each host has its own key pair, and only public keys move.

- A private key is kept in OpenSSH's private-key format (unencrypted), in a 0600 file:
  `<TopDir>/keys/host.key` for an xced process, so several workers on one machine have a
  key each. `read_private_key` refuses a file group or others may read, as ssh does.
- A public key is written as OpenSSH writes one, `ssh-ed25519 AAAAC3Nz... COMMENT`, and
  read from that form or from PEM (SubjectPublicKeyInfo). Only Ed25519 keys are taken: an
  RSA or ECDSA key is refused, naming its type.
- A fingerprint is `SHA256:` and the unpadded base64 of the SHA-256 of the key's SSH wire
  form, exactly as `ssh-keygen -l` prints it.
- A join signature is over `join_payload(...)`: a fixed prefix and the canonical JSON of
  the cluster name, the channel's purpose, a fresh nonce, the host and the role, so a
  signature made for one join is worth nothing for another cluster, channel or role.
- An enrolment token is `xce1-` and 32 random bytes in URL-safe base64, then `.` and the
  controller's fingerprint in URL-safe base64 when it has a key: the new host pins the
  controller's TLS key to it (KEY-6), so the token alone is enough to join safely. The
  controller keeps only `token_digest(token)`.

Errors: KeyProblem (a ValueError) says what is wrong with a key or its file and what would
be valid.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import stat
from pathlib import Path

__all__ = ["KeyProblem", "TOKEN_PREFIX", "fingerprint", "generate", "join_payload", "new_token",
           "parse_public_key", "public_line", "read_private_key", "sign", "token_digest", "token_pin", "verify",
           "write_private_key"]

#: the prefix of an enrolment token, so one is recognised when pasted
TOKEN_PREFIX = "xce1-"
#: what a join signature is over, before its JSON (a version of the format)
_JOIN_PREFIX = b"xce-join-v1\n"
#: the largest public key file read (a key line is under 200 bytes)
MAX_PUBLIC_KEY_BYTES = 16 * 1024


class KeyProblem(ValueError):
    """A key, or a key file, that cannot be used: the message says why and what would do."""


def generate():
    """A new Ed25519 private key (cryptography's Ed25519PrivateKey)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate()


def _private_bytes(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                             serialization.NoEncryption())


def write_private_key(path: Path | str, key, *, overwrite: bool = False) -> None:
    """Write `key` to `path` as a 0600 file (its directory made 0700 if missing), through a
    temporary file fsync'd and renamed, so a crash never leaves half a key. Raises
    FileExistsError rather than replace a key unless `overwrite`, OSError for the disk."""
    from xced.config.atomic import atomic_write

    p = Path(path)
    p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if p.exists() and not overwrite:
        raise FileExistsError(f"{p} exists already; a host keeps its key (give --force to make a new one, and "
                              f"trust the new public key on the controller)")
    atomic_write(p, _private_bytes(key), 0o600)


#: where an xced keeps its key pair, under its TopDir (KEY-2)
KEYS_DIR, PRIVATE_KEY, PUBLIC_KEY = "keys", "host.key", "host.pub"


def write_key_pair(keys_dir: Path, key, comment: str, *, overwrite: bool = False) -> tuple[Path, Path, str]:
    """Write `key` as `keys_dir/host.key` (0600) and its public line as `host.pub` (0644),
    each atomically. Returns (private path, public path, public line). Raises
    FileExistsError when a private key is there and not `overwrite`, OSError for the disk."""
    from xced.config.atomic import atomic_write

    priv, pub = keys_dir / PRIVATE_KEY, keys_dir / PUBLIC_KEY
    write_private_key(priv, key, overwrite=overwrite)
    line = public_line(key.public_key(), comment)
    atomic_write(pub, (line + "\n").encode("ascii"), 0o644)
    return priv, pub, line


def host_key(topdir: Path, comment: str):
    """The host key of the xced of `topdir` (`keys/host.key`), made with its public key
    beside it when there is none yet. Returns (key, made). Raises KeyProblem for a key file
    that cannot be used (too open, not Ed25519), OSError for the disk."""
    kdir = Path(topdir) / KEYS_DIR
    if (kdir / PRIVATE_KEY).exists():
        return read_private_key(kdir / PRIVATE_KEY), False
    key = generate()
    write_key_pair(kdir, key, comment)
    return key, True


def read_private_key(path: Path | str):
    """The Ed25519 private key of `path`. Raises KeyProblem for a missing file, one that
    group or others may read (as ssh: "permissions are too open"), or one that holds no
    Ed25519 private key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    p = Path(path)
    try:
        st = os.stat(p)
        data = p.read_bytes()
    except FileNotFoundError:
        raise KeyProblem(f"{p}: no private key here (`xceadmin keys gen` makes one)") from None
    except OSError as e:
        raise KeyProblem(f"{p}: cannot read the private key: {e.strerror or e}") from None
    if st.st_mode & 0o077:
        raise KeyProblem(f"{p}: permissions {stat.S_IMODE(st.st_mode):04o} are too open: a private key must be "
                         f"readable by its owner alone (chmod 600 {p})")
    try:
        key = serialization.load_ssh_private_key(data, password=None)
    except (ValueError, TypeError):
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as e:
            raise KeyProblem(f"{p}: not a private key XCE can read ({e}); `xceadmin keys gen` makes one") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyProblem(f"{p}: a {_type_name(key)} private key; XCE uses Ed25519 keys only "
                         f"(`xceadmin keys gen` makes one)")
    return key


def _type_name(key) -> str:
    n = type(key).__name__.lower()
    for word, shown in (("rsa", "RSA"), ("ellipticcurve", "ECDSA"), ("dsa", "DSA"), ("ed448", "Ed448"),
                        ("x25519", "X25519")):
        if word in n:
            return shown
    return type(key).__name__


def _wire(pub) -> bytes:
    """The SSH wire form of an Ed25519 public key (string "ssh-ed25519", string key)."""
    from cryptography.hazmat.primitives import serialization

    raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    kind = b"ssh-ed25519"
    return len(kind).to_bytes(4, "big") + kind + len(raw).to_bytes(4, "big") + raw


def public_line(pub, comment: str = "") -> str:
    """`ssh-ed25519 AAAA... COMMENT`, as OpenSSH writes a public key (one line)."""
    text = "ssh-ed25519 " + base64.b64encode(_wire(pub)).decode("ascii")
    comment = " ".join(comment.split())
    return f"{text} {comment}" if comment else text


def fingerprint(pub) -> str:
    """`SHA256:<base64, no padding>` of the key's SSH wire form, as `ssh-keygen -l` prints."""
    digest = hashlib.sha256(_wire(pub)).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


_SSH_TYPES = {"ssh-rsa": "an RSA key", "ssh-dss": "a DSA key", "ecdsa-sha2-nistp256": "an ECDSA key",
              "ecdsa-sha2-nistp384": "an ECDSA key", "ecdsa-sha2-nistp521": "an ECDSA key",
              "sk-ssh-ed25519@openssh.com": "a security-key (FIDO) key", "ssh-ed448": "an Ed448 key"}


def parse_public_key(text: str, source: str = "the key"):
    """An Ed25519 public key from `text`: one OpenSSH line (`ssh-ed25519 AAAA... [comment]`)
    or a PEM public key. `source` names it in messages (a file's path). Raises KeyProblem
    for empty text, a private key given by mistake, a key of another type (naming it), or
    text that is no key at all."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    t = text.strip()
    valid = "an Ed25519 public key: one line `ssh-ed25519 AAAA... [comment]` (a host's keys/host.pub)"
    if not t:
        raise KeyProblem(f"{source} is empty; expected {valid}")
    if "PRIVATE KEY" in t:
        raise KeyProblem(f"{source} holds a private key; give the public key (keys/host.pub), never the private one")
    if t.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_public_key(t.encode("ascii", "replace"))
        except (ValueError, TypeError) as e:
            raise KeyProblem(f"{source}: not a PEM public key ({e}); expected {valid}") from None
    else:
        lines = [ln for ln in t.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if len(lines) != 1:
            raise KeyProblem(f"{source} holds {len(lines)} key lines; expected one, {valid}")
        kind = lines[0].split()[0]
        if kind in _SSH_TYPES:
            raise KeyProblem(f"{source} is {_SSH_TYPES[kind]} ({kind}); XCE trusts Ed25519 keys only (ssh-ed25519), "
                             f"as `xceadmin keys gen` makes them")
        if kind != "ssh-ed25519":
            raise KeyProblem(f"{source} does not start with ssh-ed25519 (it starts {kind[:40]!r}); expected {valid}")
        try:
            key = serialization.load_ssh_public_key(" ".join(lines[0].split()[:2]).encode("ascii"))
        except (ValueError, TypeError, UnicodeEncodeError) as e:
            raise KeyProblem(f"{source}: the ssh-ed25519 key does not decode ({e}); expected {valid}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyProblem(f"{source} is a {_type_name(key)} key; XCE trusts Ed25519 keys only")
    return key


def sign(key, payload: bytes) -> str:
    """The Ed25519 signature of `payload` by private `key`, in base64."""
    return base64.b64encode(key.sign(payload)).decode("ascii")


def verify(pub, signature: str, payload: bytes) -> bool:
    """Whether `signature` (base64) is `pub`'s signature of `payload`; False for a bad one or
    for text that is not base64, never an exception."""
    from cryptography.exceptions import InvalidSignature

    try:
        raw = base64.b64decode(signature, validate=True)
        pub.verify(raw, payload)
        return True
    except (InvalidSignature, ValueError, TypeError):
        return False


def join_payload(*, cluster: str, purpose: str, nonce: str, host: str, role: str) -> bytes:
    """What a peer signs to join (KEY-3): the version prefix and the canonical JSON (keys
    sorted, no spaces) of the controller's cluster name, the channel's purpose (e.g.
    "worker-channel"), the controller's fresh nonce, and the host and role the peer joins
    as. Any other cluster, channel, nonce, host or role gives other bytes."""
    body = {"cluster": cluster, "host": host, "nonce": nonce, "purpose": purpose, "role": role}
    return _JOIN_PREFIX + json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def new_token(controller_fingerprint: str | None = None) -> str:
    """A new enrolment token (KEY-5): TOKEN_PREFIX and 32 random bytes, URL-safe base64;
    then `.` and `controller_fingerprint` (without `SHA256:`, URL-safe) when given."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    if controller_fingerprint:
        token += "." + controller_fingerprint.removeprefix("SHA256:").replace("+", "-").replace("/", "_")
    return token


def token_pin(token: str) -> str | None:
    """The controller fingerprint (`SHA256:...`) an enrolment token carries, or None.
    Raises KeyProblem for text that is not a token."""
    import re

    t = token.strip()
    m = re.fullmatch(re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_-]{43}(?:\.([A-Za-z0-9_-]{43}))?", t)
    if m is None:
        raise KeyProblem(f"{t[:12]}...: not an enrolment token (they start {TOKEN_PREFIX} and come from "
                         f"`xceadmin keys token` on the controller host)")
    if m.group(1) is None:
        return None
    return "SHA256:" + m.group(1).replace("-", "+").replace("_", "/")


def token_digest(token: str) -> str:
    """What the controller keeps of a token: "sha256:<hex>" of its text."""
    return "sha256:" + hashlib.sha256(token.strip().encode("utf-8")).hexdigest()

"""TLS between hosts, pinned to their own keys, with no CA (KEY-6).

The controller serves its TCP port with TLS 1.3 under a self-signed certificate over its
host key (`<TopDir>/keys/host.key`). A peer (a worker, a login host's API server, a remote
`xceadmin`) knows the controller's public key or its fingerprint beforehand (copied by the
admin, or carried in an enrolment token) and pins it:

1. `pinned_client_context(host, port, pin)` opens one TLS connection without verifying,
   and takes the certificate the controller presents. The TLS 1.3 handshake proves that
   the controller holds the private key of that certificate, so a certificate whose key
   is the pinned one comes from the controller (an attacker cannot finish the handshake
   with a certificate over a key it does not hold).
2. That exact certificate becomes the only trust anchor of a client context that verifies
   as TLS normally does (CERT_REQUIRED, no host name check: the pin is the identity). The
   websockets and httpx clients use it, so every later connection is verified by OpenSSL.

The certificate is deterministic (Ed25519 signatures are, and its fields are fixed), so a
restarted controller with the same key presents the same certificate.

The peer's own identity is not a TLS client certificate (Python's ssl module cannot check
a client certificate against a list of public keys without a CA): the peer signs a fresh
challenge of the controller's inside the TLS channel (KEY-3, xced.auth.keys.join_payload).

Errors: PinMismatch (the controller presented another key), KeyProblem (xced.auth.keys)
for an unusable pin; OSError and ssl.SSLError for the network.
"""

from __future__ import annotations

import os
import socket
import ssl
import tempfile
from pathlib import Path

__all__ = ["PinMismatch", "certificate_key", "host_certificate", "parse_pin", "pinned_client_context",
           "server_context"]

#: seconds the probe connection of `pinned_client_context` may take
PROBE_TIMEOUT_S = 10.0


class PinMismatch(ssl.SSLError):
    """The controller presented a key other than the pinned one: the message names both
    fingerprints and what to check."""

    def __str__(self) -> str:  # ssl.SSLError's own shows the args tuple
        return str(self.args[0]) if self.args else "the controller presented another key"


def host_certificate(key) -> bytes:
    """A self-signed X.509 certificate (DER) over Ed25519 private `key`: subject and issuer
    `CN=xce host SHA256:...`, a serial from the key, valid from 2000-01-01 to 9999-12-31
    (RFC 5280's "no well-defined expiration"): the key's trust and expiry are the trusted
    list's, never the certificate's. The same key always gives the same bytes."""
    import datetime
    import hashlib

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import NameOID

    from xced.auth.keys import fingerprint

    pub = key.public_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"xce host {fingerprint(pub)}")])
    raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    serial = int.from_bytes(hashlib.sha256(raw).digest()[:16], "big") >> 1 or 1
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(pub).serial_number(serial)
            .not_valid_before(datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc))
            .not_valid_after(datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.timezone.utc))
            .sign(key, None))
    return cert.public_bytes(serialization.Encoding.DER)


def certificate_key(der: bytes):
    """The public key of a DER certificate (an Ed25519PublicKey, or another type)."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).public_key()


def server_context(key, keys_dir: Path) -> ssl.SSLContext:
    """The controller's TLS context: TLS 1.3 only, the self-signed certificate over `key`,
    no client certificate asked. OpenSSL loads a key only from a file, so the key is written
    as PKCS#8 PEM to a private temporary file in `keys_dir` (0700) and removed at once."""
    from cryptography.hazmat.primitives import serialization

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    cert_pem = ssl.DER_cert_to_PEM_cert(host_certificate(key)).encode("ascii")
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    fd, tmp = tempfile.mkstemp(prefix=".tls-", dir=keys_dir)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, key_pem + cert_pem)
        os.close(fd)
        ctx.load_cert_chain(tmp)
    finally:
        os.unlink(tmp)
    return ctx


def parse_pin(text: str, source: str = "--controller-key") -> str:
    """The fingerprint (`SHA256:...`) a peer pins the controller to, from `text`: a
    fingerprint, or the path of a public key file (`keys/host.pub` of the controller).
    Raises KeyProblem saying what would be valid."""
    import re

    from xced.auth.keys import KeyProblem, MAX_PUBLIC_KEY_BYTES, fingerprint, parse_public_key

    t = text.strip()
    if re.fullmatch(r"SHA256:[A-Za-z0-9+/]{43}", t):
        return t
    p = Path(t).expanduser()
    if t.startswith("SHA256:") or not p.is_file():
        raise KeyProblem(f"{source} {t[:80]!r}: neither a fingerprint (SHA256: and 43 base64 characters, as "
                         f"`xceadmin keys list` prints) nor a public key file (the controller's keys/host.pub)")
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_PUBLIC_KEY_BYTES + 1)
    except OSError as e:
        raise KeyProblem(f"{source} {p}: cannot read it: {e.strerror}") from None
    if len(data) > MAX_PUBLIC_KEY_BYTES:
        raise KeyProblem(f"{source} {p}: larger than {MAX_PUBLIC_KEY_BYTES} bytes; not a public key file")
    return fingerprint(parse_public_key(data.decode("utf-8", "replace"), f"{source} {p}"))


def presented_certificate(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bytes:
    """The DER certificate the TLS server at host:port presents, unverified (the first step
    of pinning). Raises OSError/ssl.SSLError when it cannot be reached over TLS."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    with socket.create_connection((host, port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    if not der:
        raise ssl.SSLError(f"{host}:{port} presented no certificate; is it an XCE controller in production mode?")
    return der


def pinned_client_context(host: str, port: int, pin: str, timeout: float = PROBE_TIMEOUT_S) -> ssl.SSLContext:
    """A client TLS context that trusts the controller at `host:port` only, pinned to
    fingerprint `pin` (see the module's docstring). Raises PinMismatch when the controller
    presents another key, OSError/ssl.SSLError when it cannot be reached over TLS (e.g. a
    test-mode controller, which serves plain TCP)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from xced.auth.keys import fingerprint

    der = presented_certificate(host, port, timeout)
    pub = certificate_key(der)
    got = fingerprint(pub) if isinstance(pub, Ed25519PublicKey) else f"a {type(pub).__name__} key"
    if got != pin:
        raise PinMismatch(f"the controller at {host}:{port} presented key {got}, not the pinned {pin}: either "
                          f"the pin is not this controller's (its keys/host.pub; `xceadmin keys list` on it), or "
                          f"something between is impersonating it")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False  # the pinned certificate is the identity, whatever name the host is reached by
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=der)
    return ctx


#: the file of a peer's TopDir (keys/) that keeps the controller's pin after a join (KEY-6)
PIN_FILE = "controller"


def saved_pin(topdir: Path) -> str | None:
    """The controller fingerprint a peer of `topdir` saved at its last join or enrolment
    (`keys/controller`), or None when there is none. The pin decides whom the peer trusts,
    so a file group or others may write, one of another user, or one that holds no
    fingerprint raises KeyProblem saying how to fix it (as ssh refuses a loose known_hosts
    it relies on)."""
    import re

    from xced.auth.keys import KeyProblem

    p = Path(topdir) / "keys" / PIN_FILE
    try:
        st = os.stat(p, follow_symlinks=False)
        text = p.read_text(errors="replace").strip()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise KeyProblem(f"{p}: cannot read the controller's pin: {e.strerror}") from None
    if not os.path.isfile(p) or os.path.islink(p):
        raise KeyProblem(f"{p} is not a regular file; remove it, and give --controller-key once")
    if st.st_mode & 0o022 or st.st_uid not in (os.geteuid(), 0):
        raise KeyProblem(f"{p}: others could change it (mode {st.st_mode & 0o777:04o}, owner uid {st.st_uid}), and "
                         f"it decides which controller this host trusts; make it this user's and not writable by "
                         f"group or others (chmod 644), or remove it and give --controller-key")
    if not re.fullmatch(r"SHA256:[A-Za-z0-9+/]{43}", text):
        raise KeyProblem(f"{p} holds no fingerprint (SHA256: and 43 base64 characters); remove it, and give "
                         f"--controller-key once")
    return text


def save_pin(topdir: Path, pin: str) -> None:
    """Keep `pin` in `keys/controller` of `topdir` (0644, atomically), so a restart pins the
    same controller without being told again."""
    from xced.config.atomic import atomic_write

    from xced.auth.keys import KeyProblem

    try:
        same = saved_pin(topdir) == pin
    except KeyProblem:
        same = False  # replaced with the pin just used, which the peer was given explicitly
    if not same:
        (Path(topdir) / "keys").mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(Path(topdir) / "keys" / PIN_FILE, (pin + "\n").encode("ascii"), 0o644)

"""xceadmin's own key (KEY-3): the `admin` role's Ed25519 key, kept in the OS keyring.

The private key is stored with keyring under service `xce` and the cluster's name as the
user, as OpenSSH private-key text. Where no keyring backend works (a server without a
desktop session: keyring's `fail` backend, or any backend that raises), it goes to a 0600
file in the user's config directory instead, `<user config dir>/xce/admin-CLUSTER.key`,
and the caller says so. The public key is trusted on the controller with the `admin` role
(`xceadmin keys gen --admin`, run by an admin named in xce.yaml on the Unix socket).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["SERVICE", "admin_key_file", "backend_name", "load_admin_key", "store_admin_key", "where_looked"]

#: the keyring service the admin keys are kept under
SERVICE = "xce"


def admin_key_file(cluster: str) -> Path:
    """The fallback file of cluster `cluster`'s admin key: `<user config dir>/xce/admin-CLUSTER.key`."""
    from platformdirs import user_config_path

    return user_config_path("xce") / f"admin-{cluster}.key"


def backend_name() -> str:
    """The keyring backend in force, as `module.Class` (`keyring.backends.fail.Keyring`
    where none works); PYTHON_KEYRING_BACKEND pins it (the tests do)."""
    import keyring

    kr = keyring.get_keyring()
    return f"{type(kr).__module__}.{type(kr).__name__}"


def where_looked(cluster: str) -> str:
    """Where `load_admin_key(cluster)` looks, for a message saying it found nothing: the
    keyring (service, user, backend) and the fallback file."""
    return (f"the keyring (service {SERVICE}, user {cluster}, backend {backend_name()}) and the file "
            f"{admin_key_file(cluster)}")


def _pem(key) -> str:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                             serialization.NoEncryption()).decode("ascii")


def store_admin_key(cluster: str, key) -> tuple[str, str | None]:
    """Keep the admin key of `cluster`: in the keyring where one works, else in the 0600 file.
    Returns (where, why_not_keyring): "keyring <backend>" and None, or "file <path>" and the
    keyring's error. Raises OSError when the file cannot be written either."""
    import keyring

    try:
        keyring.set_password(SERVICE, cluster, _pem(key))
        return f"keyring {backend_name()}", None
    except Exception as e:  # noqa: BLE001 - any backend failing (NoKeyringError, a D-Bus error) means: the file
        why = f"{type(e).__name__}: {e}"
    from xced.auth.keys import write_private_key

    path = admin_key_file(cluster)
    write_private_key(path, key, overwrite=True)
    return f"file {path}", why


def load_admin_key(cluster: str):
    """The admin key of `cluster` (Ed25519PrivateKey) from the keyring, else from the file,
    else None. Raises xced.auth.keys.KeyProblem for a file that is not a private key or is
    readable by others."""
    import keyring

    from xced.auth.keys import KeyProblem, read_private_key

    try:
        text = keyring.get_password(SERVICE, cluster)
    except Exception:  # noqa: BLE001 - no working keyring: look at the file
        text = None
    if text:
        from cryptography.hazmat.primitives import serialization

        try:
            return serialization.load_ssh_private_key(text.encode("ascii"), password=None)
        except (ValueError, TypeError, UnicodeEncodeError) as e:
            raise KeyProblem(f"the keyring's admin key of cluster {cluster} does not load ({e}); make a new one "
                             f"with `xceadmin keys gen --admin --force`") from None
    path = admin_key_file(cluster)
    if not os.path.exists(path):
        return None
    return read_private_key(path)

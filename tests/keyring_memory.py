"""An in-memory keyring backend for tests (KEY-3): the tests pin keyring's backend to this, or
to keyring's own `fail` backend for the file fallback, and never touch a desktop keyring.
Select it with PYTHON_KEYRING_BACKEND=tests.keyring_memory.Keyring (PYTHONPATH at the repo)."""

from __future__ import annotations

from keyring.backend import KeyringBackend


class Keyring(KeyringBackend):
    """Passwords in a dict of this process."""

    priority = 1
    store: dict[tuple[str, str], str] = {}

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def delete_password(self, service: str, username: str) -> None:
        self.store.pop((service, username), None)

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


class SharedKeyring(KeyringBackend):
    """Passwords in a JSON file named by XCE_TEST_KEYRING, so that the xceadmin processes of
    one test share a keyring, as a desktop session's do (a key made by `keys gen --admin` is
    found by the next command). Select it with
    PYTHON_KEYRING_BACKEND=tests.keyring_memory.SharedKeyring. Raises KeyError when
    XCE_TEST_KEYRING is not set: it never falls back to a real keyring."""

    priority = 1

    def _path(self) -> str:
        import os

        return os.environ["XCE_TEST_KEYRING"]

    def _load(self) -> dict:
        import json

        try:
            with open(self._path()) as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

    def set_password(self, service: str, username: str, password: str) -> None:
        import json

        data = self._load()
        data[f"{service}\n{username}"] = password
        with open(self._path(), "w") as f:
            json.dump(data, f)

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}\n{username}")

    def delete_password(self, service: str, username: str) -> None:
        import json

        data = self._load()
        data.pop(f"{service}\n{username}", None)
        with open(self._path(), "w") as f:
            json.dump(data, f)

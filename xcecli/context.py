"""The CLI's context: global options and the lazily made API client."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Ctx:
    """Global options of `xcecli` (`--topdir`, `--as-user`) and the client made from them."""

    topdir: str | None = None
    as_user: str | None = None
    _client: object = field(default=None, repr=False)

    def client(self):
        """The API client (xced.api.client.Client); imported here to keep start-up light (CLI-6)."""
        if self._client is None:
            from xced.api.client import Client

            self._client = Client.connect(topdir=self.topdir, as_user=self.as_user)
        return self._client

    def client_fresh(self):
        """A new client (its own connection), for requests made from several threads."""
        from xced.api.client import Client

        return Client.connect(topdir=self.topdir, as_user=self.as_user)

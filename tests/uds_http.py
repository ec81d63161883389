"""A raw HTTP/1.1 connection over a Unix socket, for tests that must send what the API
client never would (a chunked body, a body that is not JSON) and read the answer's headers:
the standard library's http.client with its socket replaced by an AF_UNIX one."""

from __future__ import annotations

import http.client


class UnixConnection(http.client.HTTPConnection):
    """http.client over an AF_UNIX stream socket at `path`; `timeout` in seconds."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("xced", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        from xced.api.client import _Connection  # the client's own way onto the socket

        self.sock = _Connection(self._path, self.timeout)._open()

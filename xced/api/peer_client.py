"""The HTTP client of peers (KEY-3, KEY-5, KEY-6): how a login host's API server, a worker
that enrols, and a remote `xceadmin` talk to the controller over TCP, with httpx.

    pc = PeerClient("tcp://ctl:7070", pin="SHA256:...", key=host_key, host="login1", role="apiserver")
    r = await pc.request("GET", "/jobs", headers={...})     # an httpx.Response

- TLS is pinned to the controller's key (`xced.auth.tls.pinned_client_context`), made once
  per client (`ssl_context`), off the event loop.
- `authenticate()` asks `POST /peers/challenge` for a nonce, signs
  `xced.auth.keys.join_payload(cluster, "session", nonce, host, role)` with the host key,
  and trades it at `POST /peers/session` for a session, sent as `Authorization:
  XCE-Session TOKEN` from then on. A 401 (the session is over, the controller restarted)
  authenticates again and resends the request once. The challenge also says the cluster's
  mode (`mode`: "test" or "production"), which a login host needs (KEY-1).
- A GET or HEAD that loses its connection before any answer (a kept-alive connection the
  controller closed meanwhile) is sent once more on a new one; other methods are never
  resent, so a submit is never made twice.
- `enroll(token)` trades a one-time token for trust of the key (the token carries the pin).

Start-up time does not matter here (D-2: the CLI's own Unix-socket client stays on
http.client); errors are the API's typed errors (xced.api.errors), DaemonUnreachable when
the controller cannot be reached, and xced.auth.tls.PinMismatch for the wrong controller.
"""

from __future__ import annotations

import asyncio
import re
import ssl

import httpx

from xced.api import errors
from xced.constants import API_PREFIX

__all__ = ["PeerClient", "parse_controller_url", "signed_answer"]

#: seconds to connect to the controller; reads have no limit (a `wait` answers when a job ends)
CONNECT_TIMEOUT_S = 10.0
SESSION_HEADER = "Authorization"
#: connections open to the controller at once: a login host holds one per long poll of its
#: users (`xcecli wait`, `submit -K`), so httpx's default of 100 would queue the 101st user
MAX_CONNECTIONS = 1024
#: idle connections kept for reuse
MAX_KEEPALIVE = 32
#: methods resent once after a connection lost before the answer (they change nothing)
IDEMPOTENT = frozenset({"GET", "HEAD"})


def parse_controller_url(url: str) -> tuple[str, int]:
    """(host, port) of `tcp://HOST:PORT` (HOST may be `[v6]`). Raises ValueError saying the form."""
    m = re.fullmatch(r"tcp://([^:/\s\[\]]+|\[[0-9a-fA-F:]+\]):([0-9]{1,5})", url.strip())
    if not m or not 1 <= int(m.group(2)) <= 65535:
        raise ValueError(f"--controller {url!r}: expected tcp://HOST:PORT with a port from 1 to 65535 (the "
                         f"controller's run/xced.port)")
    return m.group(1).strip("[]"), int(m.group(2))


def signed_answer(key, challenge: dict, host: str, role: str, purpose: str) -> dict:
    """The fields a peer answers `challenge` (a ChallengeOut as JSON) with: its key's
    fingerprint, host, role, the nonce and the signature of join_payload (KEY-3)."""
    from xced.auth.keys import fingerprint, join_payload, sign

    payload = join_payload(cluster=challenge["cluster"], purpose=purpose, nonce=challenge["nonce"], host=host,
                           role=role)
    return {"fingerprint": fingerprint(key.public_key()), "host": host, "role": role, "nonce": challenge["nonce"],
            "signature": sign(key, payload)}


def _raise_for(r: httpx.Response) -> None:
    if r.status_code >= 400:
        try:
            body = r.json()
        except ValueError:
            body = r.text
        raise errors.from_body(r.status_code, body)


class PeerClient:
    """An authenticated HTTP peer of the controller at `url` (see the module docstring):
    `key` is the host's Ed25519 private key, `host` and `role` what it is trusted as, `pin`
    the controller's key fingerprint. `ssl_context`: a client context to use instead of
    probing the controller for its pinned certificate (`ssl_context()`); unit tests give a
    plain one. Raises ValueError for a `url` that is not tcp://HOST:PORT.

    `mode` is the cluster's mode ("test" or "production") as the last challenge said, None
    before the first one (or from a controller that does not say)."""

    def __init__(self, url: str, pin: str, key, host: str, role: str, *,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.host_port = parse_controller_url(url)
        self.url = url
        self.pin = pin
        self.key = key
        self.host = host
        self.role = role
        self.mode: str | None = None
        self._ctx: ssl.SSLContext | None = ssl_context
        self._client: httpx.AsyncClient | None = None
        self._session: str | None = None
        self._auth_lock = asyncio.Lock()

    async def ssl_context(self) -> ssl.SSLContext:
        """The TLS context pinned to the controller (made once, in a thread: the probe blocks).
        Raises PinMismatch, or DaemonUnreachable when the controller cannot be reached."""
        from xced.auth.tls import PinMismatch, pinned_client_context

        if self._ctx is None:
            host, port = self.host_port
            try:
                self._ctx = await asyncio.to_thread(pinned_client_context, host, port, self.pin)
            except PinMismatch:
                raise
            except OSError as e:
                raise errors.DaemonUnreachable(f"cannot reach the controller at {self.url} over TLS: {e}; is it "
                                               f"running in production mode, and is the port its run/xced.port?")
        return self._ctx

    def _unreachable(self, e: Exception) -> errors.DaemonUnreachable:
        """DaemonUnreachable for a transport error. A certificate that no longer verifies
        (the controller's key changed, or another host answers) drops the pinned context,
        so the next request probes again and fails with PinMismatch saying which key."""
        if "CERTIFICATE_VERIFY_FAILED" in str(e) or isinstance(e.__context__, ssl.SSLCertVerificationError):
            self._ctx = None
            self._client = None  # the old one's connections are not reused
            return errors.DaemonUnreachable(f"the controller at {self.url} presented a certificate that is not the "
                                            f"pinned key's ({e}); the next request checks which key it is")
        return errors.DaemonUnreachable(f"cannot reach the controller at {self.url}: {e or type(e).__name__}")

    async def client(self) -> httpx.AsyncClient:
        """The httpx client of the controller's API (base URL https://HOST:PORT/xce/v1),
        made once: TLS pinned, CONNECT_TIMEOUT_S to connect, no read timeout, at most
        MAX_CONNECTIONS at once. Raises as `ssl_context`."""
        if self._client is None:
            host, port = self.host_port
            netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            self._client = httpx.AsyncClient(base_url=f"https://{netloc}{API_PREFIX}", verify=await self.ssl_context(),
                                             timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_S),
                                             limits=httpx.Limits(max_connections=MAX_CONNECTIONS,
                                                                 max_keepalive_connections=MAX_KEEPALIVE))
        return self._client

    async def _post(self, path: str, body: dict) -> dict:
        c = await self.client()
        try:
            r = await c.post(path, json=body)
        except httpx.TransportError as e:
            raise self._unreachable(e) from None
        _raise_for(r)
        return r.json()

    async def challenge(self, purpose: str) -> dict:
        """A fresh challenge of the controller (POST /peers/challenge, a ChallengeOut as
        JSON); notes the cluster's `mode` it names."""
        ch = await self._post("/peers/challenge", {"purpose": purpose})
        if ch.get("mode") in ("test", "production"):
            self.mode = ch["mode"]
        return ch

    async def authenticate(self) -> str:
        """Sign a fresh `session` challenge and keep the session token; returns it. Raises
        PermissionDenied with the controller's reason when the key is refused (untrusted,
        revoked, expired, another host or role), DaemonUnreachable when the controller
        cannot be reached, PinMismatch for a controller with another key."""
        ch = await self.challenge("session")
        got = await self._post("/peers/session", signed_answer(self.key, ch, self.host, self.role, "session"))
        self._session = got["session"]
        return self._session

    async def session(self) -> str:
        """The session token, authenticating first when there is none (raises as
        `authenticate`)."""
        async with self._auth_lock:
            if self._session is None:
                await self.authenticate()
            assert self._session is not None
            return self._session

    async def enroll(self, token: str, public_line: str) -> dict:
        """Trade enrolment `token` for trust of this client's key as `role` for `host`
        (POST /peers/enroll); the trusted entry (KeyOut as JSON). Raises PermissionDenied
        saying why a token is refused (used, expired, another role or host)."""
        ch = await self.challenge("enroll")
        body = signed_answer(self.key, ch, self.host, self.role, "enroll")
        del body["fingerprint"]
        return await self._post("/peers/enroll", {**body, "token": token, "public_key": public_line})

    async def request(self, method: str, path: str, *, headers: dict | None = None, content: bytes | None = None,
                      params=None, stream: bool = False) -> httpx.Response:
        """Send one request under the session (authenticating first, and again once on a
        401). `path` is under /xce/v1 (a query may follow `?`). With `stream`, the
        response is open for reading (`aiter_raw`) and must be closed. Raises
        DaemonUnreachable when the controller cannot be reached (a GET or HEAD whose
        connection is lost before the answer is sent once more first), and as
        `authenticate` when the key is refused; error answers of the request itself are
        returned as they are, to be passed on."""
        c = await self.client()
        reauthed = resent = False
        while True:
            token = await self.session()
            h = dict(headers or {})
            h[SESSION_HEADER] = f"XCE-Session {token}"
            req = c.build_request(method, path, headers=h, content=content, params=params)
            try:
                r = await c.send(req, stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                raise self._unreachable(e) from None
            except httpx.TransportError as e:
                if method.upper() in IDEMPOTENT and not resent:
                    resent = True
                    continue
                raise self._unreachable(e) from None
            if r.status_code == 401 and not reauthed:
                reauthed = True
                await r.aclose()
                async with self._auth_lock:
                    if self._session == token:
                        self._session = None
                continue
            return r

    async def close(self) -> None:
        """Close the connections; the client makes new ones if it is used again."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

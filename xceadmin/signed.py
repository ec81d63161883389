"""`xceadmin` from another host (issue 14, KEY-3, KEY-6): a client of the controller's TCP
port that signs with xceadmin's admin key.

    with AdminClient("tcp://ctl:7070", "SHA256:...", "adminhost") as c:
        keys = c.request("GET", "/keys").json()

It has the interface of `xced.api.client.Client` (a subclass: `request()` and every API
method built on it, `close()`, a context manager), so a command does not care which path it
goes (`xceadmin.connect.connect` picks). Per connection:

1. TLS pinned to the controller's key (`xced.auth.tls.pinned_client_context`): a
   controller presenting another key is refused before anything is sent.
2. `POST /peers/challenge` (purpose `session`) gives a nonce and the cluster's name; the
   admin key of that cluster is loaded from the keyring or its 0600 file
   (`xced.auth.admin_key.load_admin_key`), and signs the challenge for (host, role
   `admin`) with `xced.api.peer_client.signed_answer`; `POST /peers/session` trades it for
   a session token, sent as `Authorization: XCE-Session TOKEN`. A 401 (the session is over,
   the controller restarted) signs a fresh challenge and resends the request once.

It is synchronous (httpx.Client): xceadmin makes a few requests per run, one after another.

Errors (xced.api.errors; the CLI funnel maps them to exit codes):

- DaemonUnreachable (exit 3): the controller refuses the connection, does not answer, or
  the connection drops.
- XceError (exit 1): the controller presented another key than the pinned one
  (PinMismatch's message), or does not speak TLS (a test-mode controller without
  `listen.tls`).
- PermissionDenied (exit 1): no admin key of the cluster on this host (the message says
  where it looked and how to make and trust one); the controller refused the key (not
  trusted, revoked, expired, trusted for another host or not as admin: its reason, passed
  on); a route the admin role may not use (a submit).
- InvalidRequest (exit 1): an admin key that does not load.
- the typed error of any other error answer.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from xced.api import errors
from xced.api.client import Client, Response
from xced.constants import API_PREFIX

__all__ = ["ADMIN_ROLE", "AdminClient", "no_admin_key_message"]

#: the role xceadmin's key is trusted for and signs as (KEY-3)
ADMIN_ROLE = "admin"
#: seconds to connect to the controller (reads take the request's timeout)
CONNECT_TIMEOUT_S = 10.0


def no_admin_key_message(cluster: str, host: str) -> str:
    """What to say when this host has no admin key of `cluster`: where it was looked for, how
    to make one here, and how to trust it on the controller for `host`."""
    from xced.auth.admin_key import where_looked

    return (f"no admin key of cluster {cluster} on this host (looked in {where_looked(cluster)}): make one with "
            f"`xceadmin keys gen --admin` (with the same --controller and --controller-key, or with --cluster "
            f"{cluster}), then trust its public key on the controller with `xceadmin keys trust FILE --role admin "
            f"--host {host}`")


class AdminClient(Client):
    """A client of the controller at `url` (tcp://HOST:PORT) whose TLS is pinned to
    fingerprint `pin` (SHA256:...), authenticated with the admin key as host `key_host`
    (see the module docstring). `key` (an Ed25519PrivateKey) overrides the stored admin key
    and `transport` (an httpx transport) the TLS connection, for tests. `timeout` is in
    seconds per request."""

    def __init__(self, url: str, pin: str, key_host: str, *, timeout: float = 60.0, key=None,
                 transport=None) -> None:
        from xced.api.peer_client import parse_controller_url

        try:
            self.host_port = parse_controller_url(url)
        except ValueError as e:
            raise errors.InvalidRequest(str(e)) from None
        super().__init__(url, timeout=timeout)
        self.url = url
        self.pin = pin
        self.key_host = key_host
        self.cluster: str | None = None  # the cluster the controller names in its challenges
        self._key = key
        self._transport = transport
        self._http = None
        self._session: str | None = None

    # ------------------------------------------------------------------ transport

    def _client(self):
        """The httpx.Client, made at first use: TLS pinned to the controller's key."""
        if self._http is not None:
            return self._http
        import ssl

        import httpx

        host, port = self.host_port
        netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        timeout = httpx.Timeout(self.timeout, connect=CONNECT_TIMEOUT_S)
        if self._transport is not None:
            self._http = httpx.Client(base_url=f"https://{netloc}", transport=self._transport, timeout=timeout)
            return self._http
        from xced.auth.tls import PinMismatch, pinned_client_context

        try:
            ctx = pinned_client_context(host, port, self.pin, timeout=CONNECT_TIMEOUT_S)
        except PinMismatch as e:
            raise errors.XceError(str(e)) from None
        except ssl.SSLError as e:
            raise errors.XceError(f"the controller at {self.url} did not complete a TLS handshake ({_why(e)}): "
                                  f"is it an XCE controller in production mode (or test mode with listen.tls: "
                                  f"true), and is {port} its TCP port?") from None
        except OSError as e:
            raise errors.DaemonUnreachable(f"cannot reach the controller at {self.url}: {_why(e)}; is it "
                                           f"running, and is {port} its TCP port (its run/xced.port)?") from None
        self._http = httpx.Client(base_url=f"https://{netloc}", verify=ctx, timeout=timeout)
        return self._http

    def _send(self, method: str, path: str, *, json: Any = None, params: Any = None, headers: dict | None = None,
              timeout: float | None = None):
        """One HTTP exchange (no session handling); the httpx.Response. Raises
        DaemonUnreachable for the network."""
        import httpx

        c = self._client()
        url = API_PREFIX + quote(path, safe="/?&=%:@!$'()*+,;~[]")
        tmo = httpx.Timeout(self.timeout if timeout is None else timeout, connect=CONNECT_TIMEOUT_S)
        try:
            return c.request(method, url, json=json, params=params, headers=headers, timeout=tmo)
        except httpx.TimeoutException:
            raise errors.DaemonUnreachable(f"the controller at {self.url} did not answer in "
                                           f"{tmo.read:g} s") from None
        except httpx.TransportError as e:
            raise errors.DaemonUnreachable(f"lost the connection to the controller at {self.url}: {e}") from None

    def _open(self, path: str, body: dict) -> dict:
        """POST to an open route of the handshake; its JSON, or the typed error of its answer."""
        r = self._send("POST", path, json=body)
        if r.status_code >= 400:
            raise errors.from_body(r.status_code, _body(r))
        return r.json()

    # ------------------------------------------------------------------ authentication

    def cluster_name(self) -> str:
        """The cluster's name, as the controller says in a fresh challenge (no key needed:
        the pinned TLS already proved who answers). Raises as `request`."""
        if self.cluster is None:
            self.cluster = str(self._open("/peers/challenge", {"purpose": "session"})["cluster"])
        return self.cluster

    def _admin_key(self, cluster: str):
        if self._key is not None:
            return self._key
        from xced.auth.admin_key import load_admin_key
        from xced.auth.keys import KeyProblem

        try:
            key = load_admin_key(cluster)
        except KeyProblem as e:
            raise errors.InvalidRequest(str(e)) from None
        if key is None:
            raise errors.PermissionDenied(no_admin_key_message(cluster, self.key_host))
        self._key = key
        return key

    def authenticate(self) -> str:
        """Sign a fresh `session` challenge with the admin key and keep the session; returns
        its token. Raises PermissionDenied with the controller's reason when the key is
        refused, or when this host has no admin key of the cluster."""
        from xced.api.peer_client import signed_answer
        from xced.auth.keys import fingerprint

        ch = self._open("/peers/challenge", {"purpose": "session"})
        self.cluster = str(ch["cluster"])
        key = self._admin_key(self.cluster)
        try:
            got = self._open("/peers/session", signed_answer(key, ch, self.key_host, ADMIN_ROLE, "session"))
        except errors.PermissionDenied as e:
            hint = ""
            if "trusted for host" in e.message:
                hint = " (--key-host NAME signs as the host the key was trusted for; the default is this machine's name)"
            elif "not trusted" in e.message:
                hint = f" (`xceadmin keys pub --admin --cluster {self.cluster}` here prints that public key)"
            raise errors.PermissionDenied(f"the controller at {self.url} refused admin key "
                                          f"{fingerprint(key.public_key())} of host {self.key_host}: {e.message}{hint}",
                                          field=e.field) from None
        self._session = str(got["session"])
        return self._session

    def key_fingerprint(self) -> str:
        """The fingerprint of the admin key this client signs with (authenticating first when
        no session is open yet). Raises as `authenticate`."""
        from xced.auth.keys import fingerprint

        if self._key is None:
            self.authenticate()
        return fingerprint(self._key.public_key())

    def confirm_revoked(self) -> bool:
        """Whether the controller now refuses this client's key as revoked: a fresh
        challenge signed with it is answered "is revoked" (the session is dropped first).
        For a revoke of the very key this client signs with, whose connection the controller
        closes before it answers (KEY-4). Raises DaemonUnreachable as `request`."""
        self._session = None
        self.close()
        try:
            self.authenticate()
        except errors.PermissionDenied as e:
            return "is revoked" in e.message
        return False

    # ------------------------------------------------------------------ the Client interface

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None, json: Any = None,
                timeout: float | None = None) -> Response:
        """One request to `API_PREFIX + path` under the admin session (signed first, and
        again once on a 401); the answer as a `xced.api.client.Response`. `params` values
        may be lists (repeated keys); `timeout` in seconds (default: the client's). Raises
        as the module docstring says."""
        for attempt in (0, 1):
            token = self._session or self.authenticate()
            r = self._send(method, path, json=json, params=params, timeout=timeout,
                           headers={"Authorization": f"XCE-Session {token}"})
            if r.status_code == 401 and attempt == 0:
                self._session = None  # refused before it ran: sign again and resend
                continue
            break
        if r.status_code >= 400:
            raise errors.from_body(r.status_code, _body(r))
        return Response(r.status_code, r.content)

    def close(self) -> None:
        """Close the connection (the session ends on the controller when it expires)."""
        if self._http is not None:
            self._http.close()
            self._http = None


def _why(e: OSError) -> str:
    """An ssl or socket error in a few words (its reason, or its strerror, or its text)."""
    return str(getattr(e, "reason", None) or e.strerror or (e.args[-1] if e.args else type(e).__name__))


def _body(r) -> object:
    try:
        return r.json()
    except ValueError:
        return r.text

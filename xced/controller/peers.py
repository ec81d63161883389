"""Peers that prove who they are with their keys (KEY-1, KEY-3, KEY-4, KEY-5): a part of the
Controller.

- `challenge(purpose)` hands out a fresh nonce (one use, CHALLENGE_LIFE_S seconds) with the
  cluster name and the controller's key fingerprint.
- `authenticate(...)` checks a peer's answer: the nonce is this controller's, unused and
  fresh (a replayed signature finds it used); the key is in the trusted list, not revoked,
  not expired on the daemon's clock, trusted for that host and that role; and the
  signature is the key's over `xced.auth.keys.join_payload(cluster, purpose, nonce, host,
  role)`. Each refusal says which check failed. A success is a `joined` key event, what
  `keys list` shows as last seen.
- HTTP peers (a login host's API server, a remote `xceadmin`) then hold a session: a
  bearer token over the pinned TLS channel (xced.auth.tls), SESSION_LIFE_S seconds, kept
  in memory only (a restarted controller asks them to authenticate again: 401).
- Every live channel and session is registered under its key's fingerprint, so revoking
  the key, its expiry, or its removal from keys.yaml closes them (`close_channels`,
  `sweep_peers`, run every PEER_SWEEP_S seconds and at once when the test clock moves).
- `enroll(...)` trades a one-time token (KEY-5) for trust of the peer's key; the token is
  spent in the transaction that trusts the key, so a refused enrolment leaves it unused.

All run on the event loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

from xced.api.errors import PermissionDenied, Unauthenticated

log = logging.getLogger("xced.controller.peers")

#: seconds a challenge may be answered in
CHALLENGE_LIFE_S = 60.0
#: at most this many challenges wait for an answer; the oldest go first
MAX_CHALLENGES = 10_000
#: seconds an HTTP peer's session lasts before it authenticates again
SESSION_LIFE_S = 3600.0
#: at most this many sessions are kept; the oldest go first (a peer whose session went asks again: 401)
MAX_SESSIONS = 10_000
#: seconds between checks of every live channel's key (expiry on the daemon's clock)
PEER_SWEEP_S = 2.0
#: seconds `close_channels` waits for a channel to be gone
CLOSE_WAIT_S = 5.0
#: the purposes a challenge is made for; a signature for one is worth nothing for another
PURPOSES = ("worker-channel", "session", "enroll")


@dataclass(frozen=True)
class PeerIdentity:
    """Who a peer proved to be: its key's fingerprint, its host, the role it acts in."""

    fingerprint: str
    host: str
    role: str


@dataclass(eq=False)
class _Channel:
    ident: PeerIdentity
    close: Callable[[str], Awaitable[None]]


class PeersMixin:
    """Key-authenticated peers (KEY-1, KEY-3, KEY-4): a part of the Controller."""

    def _init_peers(self) -> None:
        #: nonce -> (purpose, monotonic deadline)
        self._challenges: dict[str, tuple[str, float]] = {}
        #: session token -> (identity, monotonic deadline)
        self._sessions: dict[str, tuple[PeerIdentity, float]] = {}
        self._channels: set[_Channel] = set()  # type: ignore[assignment]
        #: fingerprint -> the HTTP transports its sessions came on (closed with the key)
        self._transports: dict[str, set] = {}
        #: fingerprint -> the daemon-clock time its key was last seen
        self._seen: dict[str, float] = {}
        self._revoked: set[str] = set(self.store.revocations())
        self._sweeper: asyncio.Task | None = None
        #: this controller's own key fingerprint (the TLS pin of its peers), set by the daemon
        self.own_fingerprint: str | None = None

    # ------------------------------------------------------------------ challenges

    def challenge(self, purpose: str) -> dict:
        """A fresh challenge for `purpose` (one of PURPOSES): {nonce, cluster, purpose,
        controller (its fingerprint or None), mode ("test" or "production": what a login
        host's API server needs to know to refuse asserted users, KEY-1), expires_in_s}.
        Raises ValueError for an unknown purpose."""
        if purpose not in PURPOSES:
            raise ValueError(f"unknown challenge purpose {purpose!r}")
        now = time.monotonic()
        if len(self._challenges) >= MAX_CHALLENGES:
            for n in list(self._challenges)[: len(self._challenges) - MAX_CHALLENGES + 1]:
                del self._challenges[n]
        nonce = secrets.token_urlsafe(24)
        self._challenges[nonce] = (purpose, now + CHALLENGE_LIFE_S)
        return {"nonce": nonce, "cluster": self.config.settings.cluster_name, "purpose": purpose,
                "controller": self.own_fingerprint, "mode": self.config.settings.mode,
                "expires_in_s": CHALLENGE_LIFE_S}

    def _take_nonce(self, nonce: str, purpose: str) -> None:
        got = self._challenges.pop(nonce, None)
        if got is None:
            raise PermissionDenied("the challenge is unknown or was answered already: each challenge is answered "
                                   "once, so a replayed signature is refused; ask for a new challenge")
        if got[0] != purpose:
            raise PermissionDenied(f"the challenge was made for {got[0]}, not {purpose}; a signature is good for "
                                   f"the purpose it was made for only")
        if time.monotonic() > got[1]:
            raise PermissionDenied(f"the challenge expired (a challenge is answered within {CHALLENGE_LIFE_S:.0f} s); "
                                   f"ask for a new one")

    def _trusted_entry(self, fp: str, host: str, role: str):
        """The trusted-list entry of `fp` if it may act as `role` for `host` now; else
        PermissionDenied saying why (unknown, revoked, expired, other host, other role)."""
        from xced.config.keys import format_time

        entry = self.config.keys.by_fingerprint(fp)
        if fp in self._revoked:
            raise PermissionDenied(f"key {fp} is revoked; trusting it again takes `xceadmin keys trust --unrevoke`")
        if entry is None:
            raise PermissionDenied(f"key {fp} is not trusted by this controller: trust it with `xceadmin keys trust "
                                   f"PUBKEY-FILE --host {host} --role {role}`"
                                   + (", or enrol the host with a token" if role != "admin" else ""))
        now = self.clock()
        if entry.expired(now):
            raise PermissionDenied(f"key {fp} of host {entry.host} expired {format_time(entry.expires)} (now "
                                   f"{format_time(now)}); trust it again with a new --expires")
        if entry.host != host:
            raise PermissionDenied(f"key {fp} is trusted for host {entry.host}, not {host}")
        if role not in entry.roles:
            raise PermissionDenied(f"key {fp} of host {host} is trusted as {', '.join(entry.roles)}, not as {role}")
        return entry

    def authenticate(self, purpose: str, fingerprint: str, host: str, role: str, nonce: str,
                     signature: str) -> PeerIdentity:
        """Check a peer's answer to challenge `nonce` (see the module docstring). Returns its
        PeerIdentity; raises PermissionDenied naming the check that failed."""
        from xced.auth.keys import join_payload, parse_public_key, verify

        try:
            self._take_nonce(nonce, purpose)
            entry = self._trusted_entry(fingerprint, host, role)
            pub = parse_public_key(entry.public_key, f"the trusted key of {host}")
            payload = join_payload(cluster=self.config.settings.cluster_name, purpose=purpose, nonce=nonce,
                                   host=host, role=role)
            if not verify(pub, signature, payload):
                raise PermissionDenied(f"the signature is not key {fingerprint}'s over this challenge (the wrong "
                                       f"private key, or a signature made for another challenge)")
        except PermissionDenied as e:
            log.warning("peer %s (%s as %s) refused: %s", fingerprint[:20], host, role, e.message)
            raise
        ident = PeerIdentity(fingerprint, host, role)
        self._seen_now(ident, purpose)
        log.info("peer %s authenticated as %s for %s (%s)", host, role, purpose, fingerprint)
        return ident

    def _seen_now(self, ident: PeerIdentity, purpose: str) -> None:
        """Record that `ident` authenticated: in memory, and as a `joined` key event (best
        effort: a store that cannot be written loses a last-seen time, nothing else)."""
        now = self.clock()
        self._seen[ident.fingerprint] = now
        try:
            with self.store.tx():
                self.store.add_key_event(now, ident.fingerprint, "joined", f"{ident.role}:{ident.host}", purpose)
        except Exception as e:  # noqa: BLE001 - last seen is informational
            log.warning("could not record that key %s was seen: %s", ident.fingerprint, e)

    def last_seen(self) -> dict[str, float]:
        """Fingerprint -> the daemon-clock time its key last authenticated or was used."""
        seen = dict(self.store.last_seen())
        for fp, t in self._seen.items():
            seen[fp] = max(t, seen.get(fp, t))
        return seen

    # ------------------------------------------------------------------ sessions (HTTP peers)

    def open_session(self, ident: PeerIdentity) -> dict:
        """A session for an authenticated HTTP peer: {session, expires_in_s}."""
        token = secrets.token_urlsafe(32)
        now = time.monotonic()
        if len(self._sessions) >= MAX_SESSIONS:
            for t in [t for t, (_, end) in self._sessions.items() if end < now] or list(self._sessions)[:1]:
                del self._sessions[t]
        self._sessions[token] = (ident, now + SESSION_LIFE_S)
        return {"session": token, "expires_in_s": SESSION_LIFE_S, "host": ident.host, "role": ident.role}

    def session_identity(self, token: str, transport=None) -> PeerIdentity:
        """The identity of session `token`, its key still trusted now; the request's
        `transport` is registered so that the key's revocation closes it. Raises
        Unauthenticated for an unknown or finished session, PermissionDenied for a key no
        longer trusted (the session is dropped)."""
        got = self._sessions.get(token)
        if got is None or time.monotonic() > got[1]:
            self._sessions.pop(token, None)
            raise Unauthenticated("no such session (it expired, or the controller restarted): authenticate again")
        ident = got[0]
        try:
            self._trusted_entry(ident.fingerprint, ident.host, ident.role)
        except PermissionDenied:
            self._sessions.pop(token, None)
            raise
        self._seen[ident.fingerprint] = self.clock()
        if transport is not None:
            held = self._transports.setdefault(ident.fingerprint, set())
            if transport not in held:
                if len(held) >= 64:  # connections closed since: forget them
                    held.difference_update([t for t in held if t.is_closing()])
                held.add(transport)
        return ident

    # ------------------------------------------------------------------ live channels

    def register_channel(self, ident: PeerIdentity, close: Callable[[str], Awaitable[None]]) -> object:
        """Note a live channel of `ident`; `close(reason)` closes it and returns once it is
        closed. Returns the handle for `unregister_channel`."""
        ch = _Channel(ident, close)
        self._channels.add(ch)  # type: ignore[arg-type]
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_loop())
        return ch

    def unregister_channel(self, handle) -> None:
        self._channels.discard(handle)

    async def close_channels(self, fingerprint: str, reason: str) -> int:
        """Close every channel and session authenticated with key `fingerprint` (KEY-4) and
        return once they are closed: how many channels and connections were closed."""
        for tok in [t for t, (i, _) in self._sessions.items() if i.fingerprint == fingerprint]:
            del self._sessions[tok]
        closed = 0
        for tr in self._transports.pop(fingerprint, set()):
            if not tr.is_closing():
                tr.close()
                closed += 1
        chans = [c for c in list(self._channels) if c.ident.fingerprint == fingerprint]
        for c in chans:
            self._channels.discard(c)
        if chans:
            await asyncio.gather(*(asyncio.wait_for(c.close(reason), CLOSE_WAIT_S) for c in chans),
                                 return_exceptions=True)
        if chans or closed:
            log.warning("closed %d channel(s) of key %s: %s", len(chans) + closed, fingerprint, reason)
        return len(chans) + closed

    async def sweep_peers(self) -> int:
        """Close the channels and sessions of every key no longer trusted now (revoked,
        expired on the daemon's clock, removed from keys.yaml, or no longer for that host
        or role); how many were closed."""
        bad: dict[str, str] = {}
        idents = {c.ident for c in self._channels} | {i for i, _ in self._sessions.values()}
        for ident in idents:
            try:
                self._trusted_entry(ident.fingerprint, ident.host, ident.role)
            except PermissionDenied as e:
                bad[ident.fingerprint] = e.message
        n = 0
        for fp, why in bad.items():
            n += await self.close_channels(fp, why)
        return n

    async def _sweep_loop(self) -> None:
        while self._channels or self._sessions:
            await asyncio.sleep(PEER_SWEEP_S)
            try:
                await self.sweep_peers()
            except Exception:  # noqa: BLE001 - the sweep must go on
                log.exception("sweep of peer channels failed")

    def sweep_soon(self) -> None:
        """Run `sweep_peers` on the loop now (after the clock moved, or the trusted list changed)."""
        try:
            asyncio.get_running_loop().create_task(self.sweep_peers())
        except RuntimeError:  # no loop (unit tests of the controller): nothing is live
            pass

    # ------------------------------------------------------------------ enrolment

    def enroll(self, token: str, public_key: str, host: str, role: str, nonce: str, signature: str) -> dict:
        """Trade one-time enrolment `token` (KEY-5) for trust of `public_key` as `role` for
        `host`, proved by the key's signature over challenge `nonce` (purpose "enroll").
        Returns the trusted entry as `keys list` shows it. Raises PermissionDenied for a
        token that is unknown, used (saying when and by whom), expired, for another role
        or another host, for a revoked key, or for a bad signature; InvalidRequest for a bad
        key or host; Conflict when keys.yaml differs from the list in force.

        The token is spent in the transaction that trusts the key (`trust_key(in_tx=...)`):
        a refusal at any step, the last included, leaves it unused. The key that spent it
        asking again for the same host and role (a worker restarted with the same
        --enroll) gets its entry back, while it is still trusted."""
        import re

        from xced.api.errors import InvalidRequest
        from xced.auth.keys import KeyProblem, fingerprint, join_payload, parse_public_key, token_digest, verify
        from xced.config.keys import format_time
        from xced.model.units import HOST_FORM, HOST_PATTERN
        from xced.policy.rbac import Caller

        self._take_nonce(nonce, "enroll")
        digest = token_digest(token)
        row = self.store.token(digest)
        now = self.clock()
        if row is None:
            raise PermissionDenied("the enrolment token is not one this controller made (mistyped, or made by "
                                   "another cluster); ask the admin for a new one (`xceadmin keys token`)")
        t_role, t_host, t_expires, _, _, used, used_by = row
        if not re.fullmatch(HOST_PATTERN, host):
            raise InvalidRequest(f"host {host[:80]!r}: {HOST_FORM}", field="host")
        try:
            pub = parse_public_key(public_key, "the public key")
        except KeyProblem as e:
            raise InvalidRequest(str(e), field="public_key") from None
        payload = join_payload(cluster=self.config.settings.cluster_name, purpose="enroll", nonce=nonce, host=host,
                               role=role)
        if not verify(pub, signature, payload):
            raise PermissionDenied("the signature is not the enrolling key's over this challenge")
        fp = fingerprint(pub)
        by = f"{role}:{host} {fp}"
        revoked = self.store.revocations().get(fp)
        if revoked is not None:
            # before the token's own checks: a revoked key is refused as such, whatever the
            # token (a token never un-revokes a key; only `keys trust --unrevoke` does)
            raise PermissionDenied(f"key {fp} was revoked {format_time(revoked[0])} by {revoked[1]}; an enrolment "
                                   f"token never trusts a revoked key again (only `xceadmin keys trust --unrevoke`)")
        if used is not None:
            entry = self.config.keys.by_fingerprint(fp)
            if used_by == by and entry is not None:
                # the same host asking again (its first answer was lost, or it restarted with
                # --enroll still given): it has what it asked for
                return self._key_row(entry, self.store.revocations(), self.last_seen())
            raise PermissionDenied(f"the enrolment token was used already, {format_time(used)} by {used_by}: a token "
                                   f"is good once; ask the admin for a new one")
        if now >= t_expires:
            raise PermissionDenied(f"the enrolment token expired {format_time(t_expires)}; ask the admin for a new "
                                   f"one (`xceadmin keys token --expires 1h`)")
        if role != t_role:
            raise PermissionDenied(f"the enrolment token is for the {t_role} role, not {role}")
        if t_host is not None and host != t_host:
            raise PermissionDenied(f"the enrolment token is for host {t_host}, not {host}")
        mine = self.config.keys.by_fingerprint(fp)
        if mine is not None:  # a token never moves a trusted key to another host or role
            raise PermissionDenied(f"key {fp} is trusted already, for host {mine.host} as {', '.join(mine.roles)}; "
                                   f"an enrolment token never changes that (`xceadmin keys trust` does)")
        if t_host is None:
            # a token bound to no host may not claim a host that is someone's already: one with
            # a trusted key, a worker joined now, or the controller's own (KEY-5)
            taken = ([k.fingerprint for k in self.config.keys.keys if k.host == host]
                     or (["a worker joined now"] if host in self.workers else []))
            if taken:
                raise PermissionDenied(f"host {host} is taken ({taken[0]}); a token for no host may not claim it: "
                                       f"enrol another key for {host} with a token bound to it "
                                       f"(`xceadmin keys token --host {host}`), or pick this host's own name")

        def spend() -> None:
            # inside the trust's own transaction: the token is spent if and only if the key is
            # trusted, so an enrolment refused halfway (keys.yaml edited and not applied, a
            # store that fails) leaves the token good for another try
            if not self.store.use_token(digest, now, by):
                raise PermissionDenied("the enrolment token was used already (just now, by another host)")

        enroller = Caller("enrolment-token", None, None, False, True)
        row_out = self.trust_key(enroller, public_key, host, [role], None, comment=f"enrolled {format_time(now)}",
                                 unrevoke=False, in_tx=spend)
        log.info("host %s enrolled as %s with a token (%s)", host, role, fp)
        return row_out

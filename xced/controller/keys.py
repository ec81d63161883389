"""The trusted list, changed by `xceadmin keys` through the daemon (KEY-2, KEY-4, KEY-5): a part
of the Controller.

- `trust_key` adds (or updates) an entry of config/keys.yaml: the file is written
  atomically first, then the config in force takes the new list (the CFG-3 swap, with
  the rest of the config as it is in force). A revoked key is trusted again only with
  `unrevoke`, which removes the revocation and records an `unrevoked` key event.
- `revoke_key` records the revocation in the store, durably, before it answers; the
  revocation wins over keys.yaml, so editing or reverting the file never un-revokes a
  key. The route then closes every channel authenticated with the key
  (xced.controller.peers.close_channels) before it answers.
- `keys_report` is `xceadmin keys list`: every key of the list, and every revoked one.
- `make_token` makes a one-time enrolment token, kept only as its digest.

All need a cluster admin (KEY-3: the Unix socket's SO_PEERCRED admin, or later an `admin`
key). Times run on the controller's clock.
"""

from __future__ import annotations

import logging

from xced.api.errors import Conflict, InvalidRequest, NotFound
from xced.model.keys import ROLES, KeysConfig, TrustedKey
from xced.policy.rbac import Caller, require_admin

log = logging.getLogger("xced.controller.keys")

#: the longest an enrolment token may live (seconds): a token is for a host being set up now
MAX_TOKEN_LIFE_S = 7 * 86400
#: the longest a key may be trusted for at once (seconds): 10 years
MAX_KEY_LIFE_S = 10 * 365 * 86400
#: the roles an enrolment token may give (an admin key is never enrolled)
ENROL_ROLES = ("worker", "scheduler", "apiserver")
#: a host name of a trusted key: a letter or digit first (never "." or "-")
from xced.model.units import HOST_FORM, HOST_PATTERN  # noqa: E402 - the one host name rule


def _roles(roles: list[str]) -> list[str]:
    bad = [r for r in roles if r not in ROLES]
    if bad or not roles:
        raise InvalidRequest(f"--role {', '.join(bad) or '(none)'}: a key is trusted for one or more roles of "
                             f"{', '.join(ROLES)}", field="roles")
    return list(dict.fromkeys(roles))


class KeysMixin:
    """The trusted host keys (KEY-2, KEY-4, KEY-5): a part of the Controller."""

    def _find_key(self, prefix: str) -> str:
        """The one fingerprint, trusted or revoked, that starts with `prefix` ("SHA256:" may be
        left out). Raises NotFound for none, InvalidRequest for more than one."""
        p = prefix.strip()
        if not p:
            raise InvalidRequest("a fingerprint is needed, e.g. SHA256:4Pge... (xceadmin keys list)", field="fingerprint")
        if not p.startswith("SHA256:"):
            p = "SHA256:" + p
        known = {k.fingerprint for k in self.config.keys.keys} | set(self.store.revocations())
        hits = sorted(f for f in known if f.startswith(p))
        if not hits:
            raise NotFound(f"no key's fingerprint starts with {prefix!r} (xceadmin keys list shows them)")
        if len(hits) > 1:
            raise InvalidRequest(f"{prefix!r} is the start of {len(hits)} fingerprints ({', '.join(hits[:5])}); give "
                                 f"more of it", field="fingerprint")
        return hits[0]

    def trust_key(self, caller: Caller, public_key: str, host: str, roles: list[str], expires: float | None,
                  comment: str = "", unrevoke: bool = False, expires_in_s: float | None = None,
                  in_tx=None, keep_expiry: bool = False) -> dict:
        """Trust `public_key` (one OpenSSH line or PEM) for `host` and `roles` until `expires`
        (epoch seconds; None: never). Returns the entry as `keys_report` shows it. Raises
        InvalidRequest (a bad key, role, host or expiry), Conflict (a revoked key, without
        `unrevoke`; keys.yaml edited and not applied), PermissionDenied,
        StoreBusy/StoreUnavailable.

        `in_tx()`, when given, runs first inside the transaction that records the trust, and
        may raise to refuse it: enrolment spends its token there (KEY-5), so that the token is
        spent exactly when the key is trusted, never by an enrolment refused halfway."""
        import re

        from xced.auth.keys import KeyProblem, fingerprint, parse_public_key, public_line
        from xced.config.atomic import atomic_write
        from xced.config.keys import KEYS_FILE, format_time, write_keys

        require_admin(caller, "trust a host key")
        try:
            pub = parse_public_key(public_key, "the public key")
        except KeyProblem as e:
            raise InvalidRequest(str(e), field="public_key") from None
        if not re.fullmatch(HOST_PATTERN, host):
            raise InvalidRequest(f"--host {host[:80]!r}: {HOST_FORM}", field="host")
        roles = _roles(roles)
        now = float(int(self.clock()))  # whole seconds, as keys.yaml keeps them: the file and the config agree
        if expires_in_s is not None:
            expires = now + expires_in_s
        if expires is not None:
            expires = float(int(expires))
        if expires is not None and expires - now > MAX_KEY_LIFE_S:
            raise InvalidRequest(f"--expires {format_time(expires)}: a key is trusted for at most "
                                 f"{MAX_KEY_LIFE_S // 86400 // 365} years", field="expires")
        if expires is not None and expires <= now:
            raise InvalidRequest(f"--expires {format_time(expires)} is in the past (now {format_time(now)}); give a "
                                 f"time to come, e.g. --expires 90d", field="expires")
        fp = fingerprint(pub)
        revoked = self.store.revocations().get(fp)
        if revoked is not None and not unrevoke:
            raise Conflict(f"key {fp} was revoked {format_time(revoked[0])} by {revoked[1]}; a revoked key is "
                           f"trusted again only with --unrevoke, which is logged")
        self._check_keys_file()
        previous = self.config.keys.by_fingerprint(fp)
        if keep_expiry and previous is not None:  # no --expires given: a key trusted again keeps its own
            expires = previous.expires
        entry = TrustedKey(fingerprint=fp, public_key=public_line(pub, comment or host), host=host, roles=roles,
                           expires=expires, added=now, comment=comment)
        keys = [entry if k.fingerprint == fp else k for k in self.config.keys.keys] + ([] if previous else [entry])
        new = self.config.model_copy(update={"keys": KeysConfig(keys=keys)})
        actor = f"admin:{caller.user}"
        keys_file = self.topdir / "config" / KEYS_FILE
        before = keys_file.read_bytes() if keys_file.exists() else None
        try:
            with self.store.tx(durable=True):
                if in_tx is not None:
                    in_tx()
                if revoked is not None:
                    self.store.remove_revocation(fp)
                    self.store.add_key_event(now, fp, "unrevoked", actor, "keys trust --unrevoke")
                self.store.add_key_event(now, fp, "trusted", actor, f"host {host}, roles {','.join(roles)}")
                # the file is written inside the transaction: when it cannot be, nothing is recorded
                write_keys(keys_file.parent, new.keys)
        except BaseException:
            # the commit failed after the file was written: put the file back as it was, so
            # that keys.yaml stays the list in force (nothing acknowledged, nothing changed)
            if before is None:
                keys_file.unlink(missing_ok=True)
            else:
                atomic_write(keys_file, before, 0o644, sync_dir=True)
            raise
        if revoked is not None:
            self._revoked.discard(fp)
            log.warning("key %s (host %s) un-revoked by %s", fp, host, caller.user)
        log.info("key %s trusted for host %s as %s by %s", fp, host, ",".join(roles), caller.user)
        self.apply_config(new, caller)
        row = self._key_row(entry, self.store.revocations())
        row["replaced"] = self._key_row(previous, {}) if previous is not None else None
        return row

    def _check_keys_file(self) -> None:
        """keys.yaml on disk must be the trusted list in force before `xceadmin keys` rewrites
        it: a hand edit not applied yet would be lost without a word. Raises Conflict."""
        from xced.config.keys import KEYS_FILE, load_keys

        path = self.topdir / "config" / KEYS_FILE
        errors: list = []
        on_disk = load_keys(path.parent, errors, [])
        if on_disk is None or on_disk != self.config.keys:
            raise Conflict(f"{path} differs from the trusted list in force (edited by hand, and not applied?); "
                           f"apply it first (`xceadmin build --apply`) or undo the edit, so that nothing in it is "
                           f"lost" + (f" (it does not compile: {errors[0]})" if errors else ""))

    def revoke_key(self, caller: Caller, prefix: str, reason: str | None = None) -> dict:
        """Revoke the key whose fingerprint starts with `prefix` (KEY-4): recorded durably in
        the store, where it wins over keys.yaml; from then on no peer authenticates with it,
        and the caller closes its live channels (`close_channels`). Returns {"fingerprint",
        "host", "closed": 0, "already"}. Raises NotFound, InvalidRequest (an ambiguous
        prefix), PermissionDenied, StoreBusy/StoreUnavailable."""
        require_admin(caller, "revoke a host key")
        fp = self._find_key(prefix)
        entry = self.config.keys.by_fingerprint(fp)
        already = self.store.revocations().get(fp)
        if already is not None:  # nothing to record again; its channels are closed all the same
            return {"fingerprint": fp, "host": entry.host if entry else None, "closed": 0,
                    "already": {"time": already[0], "actor": already[1], "reason": already[2]}}
        now = self.clock()
        actor = f"admin:{caller.user}"
        with self.store.tx(durable=True):
            self.store.add_revocation(fp, now, actor, reason)
            self.store.add_key_event(now, fp, "revoked", actor, reason)
        self._revoked.add(fp)
        log.warning("key %s (host %s) revoked by %s", fp, entry.host if entry else "-", caller.user)
        return {"fingerprint": fp, "host": entry.host if entry else None, "closed": 0, "already": None}

    def _key_row(self, k: TrustedKey, revocations: dict, seen: dict | None = None) -> dict:
        r = revocations.get(k.fingerprint)
        return {"fingerprint": k.fingerprint, "host": k.host, "roles": list(k.roles), "expires": k.expires,
                "added": k.added, "comment": k.comment, "public_key": k.public_key,
                "expired": k.expired(self.clock()),
                "revoked": {"time": r[0], "actor": r[1], "reason": r[2]} if r else None,
                "last_seen": (seen or {}).get(k.fingerprint)}

    def keys_report(self, caller: Caller) -> list[dict]:
        """`xceadmin keys list`: each key of keys.yaml in file order, then the keys revoked and
        no longer listed; each {fingerprint, host, roles, expires, added, comment, public_key,
        expired, revoked: {time, actor, reason} or None, last_seen (the daemon-clock time its key last
        authenticated or was used, or None)}."""
        require_admin(caller, "list the host keys")
        revocations = self.store.revocations()
        seen = self.last_seen()
        rows = [self._key_row(k, revocations, seen) for k in self.config.keys.keys]
        listed = {k.fingerprint for k in self.config.keys.keys}
        for fp, (t, actor, reason) in sorted(revocations.items(), key=lambda x: x[1][0]):
            if fp not in listed:
                rows.append({"fingerprint": fp, "host": None, "roles": [], "expires": None, "added": None,
                             "comment": "", "public_key": None, "expired": False,
                             "revoked": {"time": t, "actor": actor, "reason": reason}, "last_seen": seen.get(fp)})
        return rows

    def make_token(self, caller: Caller, role: str, host: str | None, life_s: float) -> dict:
        """A one-time enrolment token (KEY-5) for `role` (and `host`, when given), valid
        `life_s` seconds; the store keeps its digest only. Returns {"token", "expires",
        "role", "host"}: the token is shown this once."""
        import re

        from xced.auth.keys import new_token, token_digest

        require_admin(caller, "make an enrolment token")
        if role not in ENROL_ROLES:
            raise InvalidRequest(f"--role {role[:40]!r}: an enrolled host joins as one of {', '.join(ENROL_ROLES)} "
                                 f"(an admin key is made with `xceadmin keys gen --admin`)", field="role")
        if host is not None and not re.fullmatch(HOST_PATTERN, host):
            raise InvalidRequest(f"--host {host[:80]!r}: {HOST_FORM}", field="host")
        if not 0 < life_s <= MAX_TOKEN_LIFE_S:
            raise InvalidRequest(f"--expires: a token lives more than 0 s and at most {MAX_TOKEN_LIFE_S // 86400} "
                                 f"days, e.g. --expires 1h", field="expires")
        now = self.clock()
        token = new_token(self.own_fingerprint)
        with self.store.tx(durable=True):
            self.store.add_token(token_digest(token), role, host, now + life_s, now, f"admin:{caller.user}")
        log.info("enrolment token for %s%s made by %s, expires in %.0f s", role, f" on {host}" if host else "",
                 caller.user, life_s)
        return {"token": token, "expires": now + life_s, "role": role, "host": host, "controller": self.own_fingerprint}

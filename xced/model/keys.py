"""The trusted host keys (KEY-2, KEY-3): `config/keys.yaml` compiled into the ClusterConfig.

Each entry trusts one Ed25519 public key for a host and one or more roles until an expiry
(or for ever). The fingerprint is the key's own (`SHA256:...`, xced.auth.keys.fingerprint),
computed when the file is compiled, never taken from the file. Revocations live in the
store as well and win over this list (KEY-2, KEY-4): editing or reverting keys.yaml never
un-revokes a key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ROLES", "KeysConfig", "Role", "TrustedKey"]

#: the roles a peer joins as (KEY-3)
ROLES = ("worker", "scheduler", "apiserver", "admin")
Role = Literal["worker", "scheduler", "apiserver", "admin"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TrustedKey(_Strict):
    """One trusted key: `public_key` as one OpenSSH line, its `fingerprint`, the `host` it
    belongs to, its `roles`, `expires` and `added` in epoch seconds (None: never expires;
    unknown), and a free `comment`."""

    fingerprint: str = Field(pattern=r"^SHA256:[A-Za-z0-9+/]{43}$")
    public_key: str
    host: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=255)
    roles: list[Role] = Field(min_length=1)
    expires: float | None = None
    added: float | None = None
    comment: str = ""

    def expired(self, now: float) -> bool:
        """Whether the key has expired at `now` (epoch seconds)."""
        return self.expires is not None and now >= self.expires


class KeysConfig(_Strict):
    """keys.yaml: the trusted keys, in file order."""

    keys: list[TrustedKey] = Field(default_factory=list)

    def matching(self, prefix: str) -> list[TrustedKey]:
        """The keys whose fingerprint starts with `prefix` ("SHA256:" may be left out)."""
        p = prefix if prefix.startswith("SHA256:") else "SHA256:" + prefix
        return [k for k in self.keys if k.fingerprint.startswith(p)]

    def by_fingerprint(self, fp: str) -> TrustedKey | None:
        """The key of fingerprint `fp` exactly (the first listed), or None. A dict lookup:
        the controller checks every live channel's key every PEER_SWEEP_S seconds, which a
        scan of the list made O(hosts^2) (20% of a core idle at 5,000 keyed hosts, issue 19)."""
        got = _INDEX[0]
        if got is None or got[0] is not self.keys:  # the list in force changed: index it once
            got = (self.keys, {k.fingerprint: k for k in reversed(self.keys)})
            _INDEX[0] = got
        return got[1].get(fp)


#: (the `keys` list last looked up, fingerprint -> its key): kept outside the model, since a
#: private attribute would take part in the model's equality (keys.yaml on disk is compared
#: with the list in force); the list is held, so its identity cannot be taken by another
_INDEX: list = [None]

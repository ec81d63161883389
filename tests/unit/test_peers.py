"""The controller's checks of a peer's key (KEY-3, KEY-4, KEY-5), without a daemon: a real
Controller over a real SQLite store, its trusted list built in memory. Each refusal names
the check that failed."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.unit.test_controller import Clock
from xced.api.errors import PermissionDenied, Unauthenticated
from xced.auth import keys as K
from xced.auth.roles import ROLE_MESSAGES, ROLE_ROUTES, message_allowed, route_allowed
from xced.controller import peers as P
from xced.controller.controller import Controller
from xced.model.config import ClusterConfig, ClusterSettings, QueueConfig
from xced.model.keys import KeysConfig, TrustedKey
from xced.store.sqlite import SqliteStore


def _entry(key, host="w1", roles=("worker",), expires=None) -> TrustedKey:
    pub = key.public_key()
    return TrustedKey(fingerprint=K.fingerprint(pub), public_key=K.public_line(pub, host), host=host,
                      roles=list(roles), expires=expires)


@pytest.fixture
def ctl(tmp_path):
    cfg = ClusterConfig(settings=ClusterSettings(mode="production", cluster_name="prod"),
                        queues=[QueueConfig(name="normal")], hosts=[])
    c = Controller(cfg, SqliteStore(tmp_path / "db"), tmp_path, clock=Clock())
    yield c
    c.store.close()


def _trust(ctl, *entries) -> None:
    ctl.config = ctl.config.model_copy(update={"keys": KeysConfig(keys=list(entries))})


def _answer(ctl, key, host="w1", role="worker", purpose="session"):
    ch = ctl.challenge(purpose)
    sig = K.sign(key, K.join_payload(cluster=ch["cluster"], purpose=purpose, nonce=ch["nonce"], host=host, role=role))
    return (purpose, K.fingerprint(key.public_key()), host, role, ch["nonce"], sig)


def test_a_trusted_key_authenticates_and_is_seen(ctl):
    key = K.generate()
    _trust(ctl, _entry(key))
    ident = ctl.authenticate(*_answer(ctl, key))
    assert (ident.host, ident.role) == ("w1", "worker")
    assert K.fingerprint(key.public_key()) in ctl.last_seen()
    assert ctl.store.key_events()[-1][2] == "joined"


@pytest.mark.parametrize("change, needle", [
    ({"host": "w2"}, "trusted for host w1, not w2"),
    ({"role": "admin"}, "trusted as worker, not as admin"),
])
def test_a_key_acts_only_for_its_host_and_roles(ctl, change, needle):
    key = K.generate()
    _trust(ctl, _entry(key))
    args = {"host": "w1", "role": "worker", **change}
    with pytest.raises(PermissionDenied, match=needle):
        ctl.authenticate(*_answer(ctl, key, **args))


def test_an_unknown_key_a_bad_signature_and_a_replay_are_refused(ctl):
    key, other = K.generate(), K.generate()
    _trust(ctl, _entry(key))
    with pytest.raises(PermissionDenied, match="is not trusted by this controller"):
        ctl.authenticate(*_answer(ctl, other))
    purpose, fp, host, role, nonce, _ = _answer(ctl, key)
    forged = K.sign(other, K.join_payload(cluster="prod", purpose=purpose, nonce=nonce, host=host, role=role))
    with pytest.raises(PermissionDenied, match="signature is not key"):
        ctl.authenticate(purpose, fp, host, role, nonce, forged)
    good = _answer(ctl, key)
    ctl.authenticate(*good)
    with pytest.raises(PermissionDenied, match="answered already"):
        ctl.authenticate(*good)


def test_a_challenge_is_for_its_purpose_and_its_minute_only(ctl, monkeypatch):
    key = K.generate()
    _trust(ctl, _entry(key))
    purpose, fp, host, role, nonce, sig = _answer(ctl, key, purpose="session")
    with pytest.raises(PermissionDenied, match="made for session, not worker-channel"):
        ctl.authenticate("worker-channel", fp, host, role, nonce, sig)
    late = _answer(ctl, key)
    real = time.monotonic
    monkeypatch.setattr(P.time, "monotonic", lambda: real() + P.CHALLENGE_LIFE_S + 1)
    with pytest.raises(PermissionDenied, match="challenge expired"):
        ctl.authenticate(*late)


def test_an_expired_key_on_the_daemons_clock_is_refused(ctl):
    """KEY-4: expiry runs on the controller's clock (the test clock moves it)."""
    key = K.generate()
    _trust(ctl, _entry(key, expires=ctl.clock() + 3600))
    ctl.authenticate(*_answer(ctl, key))
    ctl.clock_offset = 7200
    ctl.clock = ctl._shifted_clock
    with pytest.raises(PermissionDenied, match="expired"):
        ctl.authenticate(*_answer(ctl, key))


def test_a_revoked_key_is_refused_and_a_config_revert_does_not_bring_it_back(ctl):
    """KEY-2: the revocation is the store's; the trusted list as it was (a reverted
    keys.yaml) still lists the key, and it is refused all the same."""
    key = K.generate()
    entry = _entry(key)
    _trust(ctl, entry)
    with ctl.store.tx(durable=True):
        ctl.store.add_revocation(entry.fingerprint, ctl.clock(), "admin:root", "stolen")
    ctl._revoked.add(entry.fingerprint)
    _trust(ctl, entry)  # the old file applied again
    with pytest.raises(PermissionDenied, match="is revoked"):
        ctl.authenticate(*_answer(ctl, key))
    c2 = Controller(ctl.config, ctl.store, ctl.topdir, clock=Clock())  # and after a restart
    with pytest.raises(PermissionDenied, match="is revoked"):
        c2.authenticate(*_answer(c2, key))


def test_a_session_ends_with_its_key(ctl):
    """KEY-4: a session is refused once its key is no longer trusted, and an unknown one is
    401 so that the peer authenticates again."""
    key = K.generate()
    _trust(ctl, _entry(key, roles=("apiserver",)))
    s = ctl.open_session(ctl.authenticate(*_answer(ctl, key, role="apiserver")))
    assert ctl.session_identity(s["session"]).role == "apiserver"
    with pytest.raises(Unauthenticated):
        ctl.session_identity("no-such-session")
    _trust(ctl)  # removed from keys.yaml
    with pytest.raises(PermissionDenied, match="not trusted"):
        ctl.session_identity(s["session"])
    with pytest.raises(Unauthenticated):  # and dropped
        ctl.session_identity(s["session"])


def test_the_sweep_closes_the_channel_of_a_key_that_expired(ctl):
    key = K.generate()
    _trust(ctl, _entry(key, expires=ctl.clock() + 60))
    closed: list[str] = []

    async def go():
        ident = ctl.authenticate(*_answer(ctl, key, purpose="worker-channel"))

        async def close(reason):
            closed.append(reason)

        ctl.register_channel(ident, close)
        assert await ctl.sweep_peers() == 0
        ctl.clock_offset = 120
        ctl.clock = ctl._shifted_clock
        assert await ctl.sweep_peers() == 1
        assert await ctl.close_channels(ident.fingerprint, "again") == 0

    asyncio.run(go())
    assert len(closed) == 1 and "expired" in closed[0]


def test_the_role_allowlists():
    """KEY-3: a worker may use the channel only; user routes are the API server's; an admin
    key never submits; the scheduler role has nothing yet."""
    assert route_allowed("worker", "peer") and not route_allowed("worker", "queue:submit")
    assert not any(route_allowed("worker", p) for p in ("cluster:view", "cluster:admin", "job:kill", "none"))
    assert route_allowed("apiserver", "queue:submit") and not route_allowed("apiserver", "peer")
    assert not route_allowed("apiserver", "cluster:admin")  # a login host never changes what the cluster trusts
    assert route_allowed("admin", "cluster:admin") and not route_allowed("admin", "queue:submit")
    assert ROLE_ROUTES["scheduler"] == frozenset() and not route_allowed("nobody", "cluster:view")
    assert message_allowed("worker", "finished") and not any(message_allowed(r, "finished") for r in ROLE_MESSAGES
                                                             if r != "worker")

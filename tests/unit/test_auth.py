"""Who is calling (D-6, D-7): the server's caller check, for a daemon that does not run as
root (CI runs as root, so the daemon's uid is played by patching os.geteuid in the module)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from xced.api.errors import PermissionDenied, Unauthenticated
from xced.model.config import ClusterSettings
from xced.model.project import ProjectsConfig, RbacConfig
from xced.policy.rbac import Policy
from xced.server import auth


def _request(mode: str, peer, headers=None):
    cfg = SimpleNamespace(settings=ClusterSettings(mode=mode, admins=[]), projects=ProjectsConfig(), rbac=RbacConfig())
    ctl = SimpleNamespace(config=cfg, policy=Policy(cfg), daemon_user="alice")
    return SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(controller=ctl)),
                           scope={auth.PEER_KEY: peer}, headers=headers or {})


@pytest.fixture
def as_alice(monkeypatch):
    monkeypatch.setattr(auth.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(auth, "_user_name", lambda uid: {1000: "alice", 1001: "bob", 0: "root"}[uid])


@pytest.mark.parametrize("mode", ["production", "test"])
def test_a_daemon_run_as_a_user_serves_only_that_user_and_root(as_alice, mode):
    """Its jobs run as alice, so bob would get alice's identity: refused, saying why."""
    assert asyncio.run(auth.caller_of(_request(mode, (1, 1000, 1000)))).user == "alice"
    assert asyncio.run(auth.caller_of(_request(mode, (1, 0, 0)))).user == "root"
    with pytest.raises(PermissionDenied, match="runs as alice, not root, so it would run your jobs as alice"):
        asyncio.run(auth.caller_of(_request(mode, (1, 1001, 1001))))


def test_only_the_daemons_user_and_root_may_assert_a_user(as_alice):
    hdr = {auth.AS_USER_HEADER: "carol"}
    assert asyncio.run(auth.caller_of(_request("test", (1, 1000, 1000), hdr))).user == "carol"
    with pytest.raises(PermissionDenied, match="only for alice"):
        asyncio.run(auth.caller_of(_request("test", (1, 1001, 1001), hdr)))


def test_production_tcp_takes_no_user_request():
    """KEY-3: over TCP, a request without a key-authenticated session is 401."""
    with pytest.raises(Unauthenticated, match="over TCP"):
        asyncio.run(auth.caller_of(_request("production", None)))
    with pytest.raises(PermissionDenied, match="over TCP"):
        auth.launch_peer(_request("production", None))
    assert auth.launch_peer(_request("test", None)) is None

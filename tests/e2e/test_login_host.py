"""Login hosts (KEY-3, KEY-1, D-6, SUBMIT-1): users submit from a login host, as LSF's and
Slurm's users do from login nodes. A production controller, a keyed worker and a login
host's API server (`xced --roles apiserver --controller URL`) run as separate processes on
this machine, each in its own TopDir; the login host's key is trusted with `--role
apiserver`. A second real Unix user, xce-alice, runs the real `xcecli` against the login
host's socket, exactly as on the controller host.

Needs root (CI runs as root): the users are made with useradd once per machine and kept,
and the daemons run as root, so that they can run jobs as the users.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import XCEADMIN, XCECLI, XCED, kill_job_processes, short_tmpdir, stop_processes
from tests.e2e.test_peers import KeyedCluster
from tests.e2e.test_users import User, _ensure_user, _user_xcecli, user_entry

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: it makes Unix users and runs root daemons")]


class LoginCluster(KeyedCluster):
    """A KeyedCluster (production controller) with worker w1 joined, and login hosts started
    with `login()`, each with its own TopDir `<top>/NAME` and key. The base directory is
    0755, so that other users reach the login hosts' sockets."""

    def __init__(self, top: Path) -> None:
        os.chmod(top, 0o755)
        super().__init__(top)
        self.logins: dict[str, subprocess.Popen] = {}

    def login_top(self, name: str) -> Path:
        return self.top / name

    def login(self, name: str, *, trust_as: str | None = "apiserver", pin: bool = True) -> subprocess.Popen:
        """Start login host `name` (`--host-name NAME`, TopDir `<top>/NAME`), which makes its
        own key at first start; once its socket serves, trust the key as `trust_as` (None:
        not at all). `pin` False: no --controller-key (it has the one it saved)."""
        top = self.login_top(name)
        top.mkdir(mode=0o755, parents=True, exist_ok=True)
        ready = top / "run" / "xced.ready"
        log = open(top / "login.log", "ab")
        argv = [XCED, "--roles", "apiserver", "--controller", self.url, "--topdir", str(top), "--host-name", name]
        if pin:
            argv += ["--controller-key", str(self.controller_pub)]
        if ready.exists():
            ready.unlink()
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        old = self.logins.get(name)
        if old is not None:  # a restart: the old process is stopped already
            assert old.poll() is not None
            self.logins[f"{name}-{id(old)}"] = old
        self.logins[name] = p
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert p.poll() is None, self.login_log(name)
            assert time.monotonic() < deadline, self.login_log(name)
            time.sleep(0.02)
        if trust_as is not None:
            self.admin("keys", "trust", str(top / "keys" / "host.pub"), "--host", name, "--role", trust_as)
        return p

    def login_log(self, name: str) -> str:
        return (self.login_top(name) / "login.log").read_text()

    def stop(self) -> None:
        stop_processes(self.logins.values())
        super().stop()


@pytest.fixture(scope="module")
def users() -> tuple[User, User]:
    import fcntl

    with open("/tmp/xce-test-useradd.lock", "w") as lock:  # pytest-xdist workers make them one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_user("xce-alice"), _ensure_user("xce-bob")


def _cluster():
    """A production controller, worker w1 (trusted, joined) and login host login1 (trusted
    as apiserver), stopped by PID afterwards, even on failure."""
    import shutil

    c = LoginCluster(short_tmpdir("xce-login-"))
    try:
        c.start()
        c.trust("w1")
        c.worker("w1")
        c.wait_host("w1")
        c.login("login1")
        yield c
    finally:
        c.stop()
        shutil.rmtree(c.top, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    """One cluster for the tests that leave it as it was (each adds its own login hosts)."""
    yield from _cluster()


@pytest.fixture
def own_cluster():
    """A cluster for one test that stops or changes it."""
    yield from _cluster()


def _home(c: LoginCluster, user: User) -> Path:
    h = c.top / f"home-{user.name}"
    h.mkdir(mode=0o700, exist_ok=True)
    os.chown(h, user.uid, user.gid)
    return h


def _cli(c: LoginCluster, user: User, *args: str, login: str = "login1", env: dict | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess:
    """The real `xcecli ARGS` as `user`, in their home, pointed at login host `login`'s
    TopDir (XCE_TOPDIR), as a user on that host runs it."""
    cli = _user_xcecli(user)
    if cli is None:
        pytest.skip("no Python interpreter of this version that the test users may run")
    return user.run([*cli, *args], cwd=str(_home(c, user)), timeout=timeout,
                    env={"XCE_TOPDIR": str(c.login_top(login)), **(env or {})})


def test_a_user_on_the_login_host_submits_and_her_job_runs_as_her(cluster, users):
    """KEY-3: xce-alice submits on the login host with the real `xcecli submit -K`; the
    login host identified her by SO_PEERCRED and the controller ran the job on w1 as her
    (its output is her uid); `jobs`, `show` and `kill` work through it the same way; the
    job is hers, not the login host's (bob cannot kill it)."""
    from xced.auth.tls import parse_pin

    alice, bob = users
    home = _home(cluster, alice)
    r = _cli(cluster, alice, "submit", "-K", "-o", "out.txt", "--", "id", "-u")
    assert r.returncode == 0, r.stdout + r.stderr + cluster.login_log("login1")
    job = int(r.stdout.split("<")[1].split(">")[0])
    assert (home / "out.txt").read_text().split() == [str(alice.uid)]
    assert (cluster.login_top("login1") / "keys" / "controller").read_text().strip() == str(
        parse_pin(str(cluster.controller_pub))), "the pin is kept at the first session"
    shown = json.loads(_cli(cluster, alice, "show", str(job), "--json").stdout)
    assert shown["user"] == alice.name and shown["state"] == "DONE", shown
    listed = json.loads(_cli(cluster, alice, "jobs", "-a", "--json").stdout)["jobs"]
    assert job in [j["job_id"] for j in listed] and {j["user"] for j in listed} == {alice.name}
    # a long poll through the login host: `xcecli wait` answers when the job ends, seconds later
    r = _cli(cluster, alice, "submit", "--parsable", "--", "sleep", "2")
    assert r.returncode == 0, r.stderr
    t0 = time.monotonic()
    r = _cli(cluster, alice, "wait", r.stdout.strip())
    assert r.returncode == 0 and time.monotonic() - t0 >= 1.0, r.stderr
    r = _cli(cluster, alice, "submit", "--parsable", "--", "sleep", "60")
    assert r.returncode == 0, r.stderr
    sleeper = int(r.stdout.strip())
    cluster.ctl.wait_state(sleeper, ("RUN",))
    r = _cli(cluster, bob, "kill", str(sleeper))
    assert r.returncode == 1 and "user xce-bob may not kill it" in r.stderr, r.stderr
    r = _cli(cluster, alice, "kill", str(sleeper))
    assert r.returncode == 0, r.stderr
    assert cluster.ctl.wait_state(sleeper, ("EXIT",))["user"] == alice.name


def test_a_production_login_host_refuses_asserted_users(cluster, users):
    """KEY-1, D-6: `--as-user` (XCE_TEST_USER) is refused by the production login host with
    403 and a message saying why, before anything reaches the controller: no job is made."""
    alice, _ = users
    before = _all_jobs(cluster)
    for argv, env in ((("--as-user", "root", "submit", "--", "true"), None),
                      (("submit", "--", "true"), {"XCE_TEST_USER": "root"})):
        r = _cli(cluster, alice, *argv, env=env)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "--as-user (XCE_TEST_USER) is refused" in r.stderr and "production" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    assert _all_jobs(cluster) == before


def test_root_on_a_login_host_cannot_change_what_the_cluster_trusts(cluster):
    """KEY-3: the apiserver role's allowlist has no cluster admin route: root (an admin of
    this cluster) on a login host can list jobs there, but keys, tokens and the config
    take the admin key from another host; the refusal says so."""
    env = {**{k: v for k, v in os.environ.items() if k != "XCE_SOCKET"}, "XCE_TOPDIR": str(cluster.login_top("login1"))}
    for argv in (["keys", "list"], ["keys", "token", "--role", "worker", "--expires", "1h"]):
        r = subprocess.run([XCEADMIN, *argv], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 1 and "apiserver role" in r.stderr and "admin key" in r.stderr, r.stderr
    r = subprocess.run([XCECLI, "jobs", "-u", "all"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr


def _all_jobs(c: LoginCluster) -> list[int]:
    return [j["job_id"] for j in json.loads(c.ctl.cli("jobs", "-u", "all", "-a", "--json", check=True).stdout)["jobs"]]


def test_a_login_host_whose_key_is_untrusted_or_a_workers_cannot_act_for_users(cluster, users):
    """KEY-3: a login host whose key the controller does not trust, or trusts only as a
    worker, gets no user request through: the user is told why (the controller's reason)
    and what the admin does about it."""
    alice, _ = users
    before = _all_jobs(cluster)
    cluster.login("login2", trust_as=None)
    cluster.login("login3", trust_as="worker")
    for name, why in (("login2", "is not trusted by this controller"), ("login3", "trusted as worker, not as "
                                                                                  "apiserver")):
        r = _cli(cluster, alice, "jobs", login=name)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"this login host ({name}) cannot act for users" in r.stderr and why in r.stderr, r.stderr
        assert "--role apiserver" in r.stderr and "Traceback" not in r.stderr
        r = _cli(cluster, alice, "submit", "--", "true", login=name)
        assert r.returncode == 1 and why in r.stderr, r.stderr
    assert _all_jobs(cluster) == before


def test_after_revoke_the_login_hosts_requests_fail_with_the_reason(cluster, users):
    """KEY-4: once `keys revoke` of the login host's key returns, its session and
    connections are gone; its users' next requests are refused, saying the key is revoked."""
    alice, _ = users
    cluster.login("login4")
    assert _cli(cluster, alice, "jobs", login="login4").returncode == 0
    keys = json.loads(cluster.admin("keys", "list", "--json").stdout)["keys"]
    fp = next(k["fingerprint"] for k in keys if k["host"] == "login4")
    out = json.loads(cluster.admin("keys", "revoke", fp, "--json").stdout)
    assert out["closed"] >= 1, out
    for argv in (("jobs",), ("submit", "--", "true")):
        r = _cli(cluster, alice, *argv, login="login4")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "this login host (login4) cannot act for users" in r.stderr and "is revoked" in r.stderr, r.stderr
    assert _cli(cluster, alice, "jobs").returncode == 0, "login1's own key is still good"


def test_an_unreachable_controller_is_exit_3_and_a_restarted_one_is_used_again(own_cluster, users):
    """While the controller is down the login host answers 503 controller_unreachable:
    `xcecli jobs` exits 3 (try again later), and a `submit -K` waiting meanwhile rides it
    out (as `bsub -K` rides out an mbatchd restart) and ends with its job. Once the
    controller is back (its sessions lost with it) the login host authenticates again on
    the 401. A restarted login host pins the controller it saved, without --controller-key."""
    alice, _ = users
    c = own_cluster
    cli = _user_xcecli(alice)
    if cli is None:
        pytest.skip("no Python interpreter of this version that the test users may run")
    waiting = subprocess.Popen([*cli, "submit", "-K", "--", "sleep", "3"], user=alice.uid, group=alice.gid,
                               extra_groups=[], cwd=str(_home(c, alice)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env={"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C",
                                    "XCE_TOPDIR": str(c.login_top("login1"))})
    try:
        deadline = time.monotonic() + 30
        while not any(j["state"] == "RUN" for j in json.loads(c.ctl.cli("jobs", "-u", "all", "--json").stdout)["jobs"]):
            assert waiting.poll() is None and time.monotonic() < deadline, waiting.communicate()
            time.sleep(0.1)
        c.ctl.stop()
        r = _cli(c, alice, "jobs", env={"XCE_CONNECT_TIMEOUT": "1"})  # retried for 1 s (JOB-10), then exit 3
        assert r.returncode == 3, r.stdout + r.stderr
        assert "cannot reach the controller" in r.stderr and "Traceback" not in r.stderr, r.stderr
        c.ctl.start()
        r = _cli(c, alice, "jobs")
        assert r.returncode == 0, r.stderr + c.login_log("login1")
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait(5)
    assert waiting.returncode == 0, out + err
    assert "cannot reach the controller" in err and "still waiting for job" in err and "<<Job is finished>> DONE" in err
    c.logins["login1"].send_signal(signal.SIGTERM)
    assert c.logins["login1"].wait(15) == 0
    c.login("login1", trust_as=None, pin=False)
    r = _cli(c, alice, "jobs")
    assert r.returncode == 0, r.stderr + c.login_log("login1")


def _user_xced(user: User) -> list[str] | None:
    """`xced` as `user` may run it (test_users.user_entry), or None."""
    return user_entry(user, "xced.daemon", "--controller-key")


def test_a_production_login_host_not_running_as_root_serves_no_one(cluster, users):
    """KEY-7, D-6, D-7: a login host's key lets it name any user, so one run by xce-alice
    would let her act as anyone (root included): in production it refuses every request,
    hers and root's too, saying it must run as root. Bob is refused first by the Unix
    socket's own rule (xced.server.auth.unix_identity)."""
    from xced.auth.tls import parse_pin

    alice, bob = users
    xced = _user_xced(alice)
    if xced is None:
        pytest.skip("no Python interpreter of this version that the test users may run")
    top = cluster.login_top("login5")
    top.mkdir(mode=0o755)
    os.chown(top, alice.uid, alice.gid)
    log = open(cluster.top / "login5.log", "ab")
    argv = [*xced, "--roles", "apiserver", "--controller", cluster.url, "--controller-key",
            parse_pin(str(cluster.controller_pub)), "--topdir", str(top), "--host-name", "login5"]
    cluster.logins["login5"] = subprocess.Popen(
        argv, user=alice.uid, group=alice.gid, extra_groups=[], cwd="/", stdout=log, stderr=subprocess.STDOUT,
        env={"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C"}, start_new_session=True)
    deadline = time.monotonic() + 30
    while not (top / "run" / "xced.ready").exists():
        assert cluster.logins["login5"].poll() is None, (cluster.top / "login5.log").read_text()
        assert time.monotonic() < deadline, (cluster.top / "login5.log").read_text()
        time.sleep(0.02)
    cluster.admin("keys", "trust", str(top / "keys" / "host.pub"), "--host", "login5", "--role", "apiserver")
    r = _cli(cluster, alice, "jobs", login="login5")
    assert r.returncode == 1 and "runs as xce-alice, not root" in r.stderr and "act as anyone" in r.stderr, \
        r.stderr + (cluster.top / "login5.log").read_text()
    r = subprocess.run([XCECLI, "jobs", "-u", "all"], capture_output=True, text=True, timeout=60,
                       env={**{k: v for k, v in os.environ.items() if k != "XCE_SOCKET"}, "XCE_TOPDIR": str(top)})
    assert r.returncode == 1 and "a production login host runs as root" in r.stderr, r.stderr
    r = _cli(cluster, bob, "jobs", login="login5")
    assert r.returncode == 1 and "this xced runs as xce-alice, not root" in r.stderr, r.stderr
    r = _cli(cluster, bob, "submit", "--", "true", login="login5")
    assert r.returncode == 1 and "it serves only xce-alice (and root)" in r.stderr, r.stderr


def test_the_login_host_does_not_serve_the_worker_channel_or_other_paths(cluster, users):
    """D-1: workers connect to the controller directly; the login host answers its channel
    path and paths outside /xce/v1 with 404 in the API's error shape."""
    from tests.e2e.test_users import CURL

    alice, _ = users
    sock = cluster.login_top("login1") / "run" / "xced.sock"
    for path, says in (("/xce/v1/workers/channel", "does not serve the worker channel"),
                       ("/metrics", "under /xce/v1/ only")):
        r = alice.run([CURL, "-s", "-w", "\n%{http_code}", "--unix-socket", str(sock), f"http://x{path}"])
        body, _, code = r.stdout.rpartition("\n")
        assert code == "404", r.stdout
        err = json.loads(body)["error"]
        assert err["code"] == "not_found" and says in err["message"], err


def test_login_host_options_are_checked(tmp_path):
    """Bad options of `xced --roles apiserver` are usage errors (exit 2) saying what would
    be valid; none leaves a process behind."""
    top = short_tmpdir("xce-login-opt-")
    try:
        cases = [
            (["--roles", "apiserver"], "needs --controller tcp://HOST:PORT"),
            (["--roles", "apiserver", "--controller", "ctl:7"], "expected tcp://HOST:PORT"),
            (["--roles", "apiserver", "--controller", "tcp://127.0.0.1:9", "--topdir", str(top)],
             "needs --controller-key"),
            (["--roles", "apiserver", "--controller", "tcp://127.0.0.1:9", "--topdir", str(top), "--controller-key",
              "SHA256:nope"], "neither a fingerprint"),
            (["--roles", "apiserver", "--controller", "tcp://127.0.0.1:9", "--topdir", str(top), "--slots", "2"],
             "a login host (--roles apiserver) runs no jobs"),
            (["--roles", "apiserver,worker", "--controller", "tcp://127.0.0.1:9"], "(a login host)"),
        ]
        env = {k: v for k, v in os.environ.items() if k not in ("XCE_TOPDIR", "XCE_SOCKET")}
        for argv, want in cases:
            r = subprocess.run([XCED, *argv], capture_output=True, text=True, timeout=30, env=env)
            assert r.returncode == 2 and want in r.stderr, (argv, r.returncode, r.stderr)
            assert "Traceback" not in r.stderr
    finally:
        kill_job_processes(top)
        import shutil

        shutil.rmtree(top, ignore_errors=True)


"""A production cluster across hosts on one machine (KEY-1, KEY-3, KEY-4, KEY-6): a
controller whose TCP port serves TLS pinned to its key, and `xced --roles worker` processes
that join with their own keys, each in its own TopDir. Everything is a real process; the
refusals are what a worker's log and `xceadmin keys list` show."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import XCEADMIN, XCED, Daemon, kill_job_processes, short_tmpdir, stop_processes, write_config

pytestmark = pytest.mark.timeout(120)


class KeyedCluster:
    """A controller (`--roles controller,scheduler,apiserver`, no hosts of its own) in
    `mode` (production by default; test with `listen.tls: true` for the test clock), and
    worker processes started with `worker()`, each with its own TopDir and key."""

    def __init__(self, top: Path, mode: str = "production") -> None:
        self.top = top
        self.ctl_top = top / "ctl"
        write_config(self.ctl_top, mode=mode, admins=("root",))
        (self.ctl_top / "config" / "hosts.yaml").write_text("hosts: []\n")
        with open(self.ctl_top / "config" / "xce.yaml", "a") as f:
            f.write("listen:\n  host: 127.0.0.1\n  port: 0\n" + ("  tls: true\n" if mode == "test" else ""))
        self.ctl = Daemon(self.ctl_top, args=["--roles", "controller,scheduler,apiserver"])
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self) -> "KeyedCluster":
        self.ctl.start()
        return self

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{(self.ctl_top / 'run' / 'xced.port').read_text().strip()}"

    @property
    def controller_pub(self) -> Path:
        return self.ctl_top / "keys" / "host.pub"

    def admin(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """`xceadmin ARGS` on the controller host (its Unix socket, as root: an admin)."""
        r = subprocess.run([XCEADMIN, *args], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "XCE_TOPDIR": str(self.ctl_top)})
        if check and r.returncode != 0:
            raise AssertionError(f"xceadmin {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def gen_key(self, name: str) -> Path:
        """`xceadmin keys gen` in worker `name`'s TopDir; the public key file."""
        wtop = self.top / name
        wtop.mkdir(parents=True, exist_ok=True)
        subprocess.run([XCEADMIN, "keys", "gen", "--topdir", str(wtop)], check=True, capture_output=True, timeout=30)
        return wtop / "keys" / "host.pub"

    def trust(self, name: str, *extra: str) -> str:
        """Trust worker `name`'s key as a worker of host `name`; its fingerprint."""
        pub = self.gen_key(name)
        out = json.loads(self.admin("keys", "trust", str(pub), "--host", name, "--role", "worker", *extra,
                                    "--json").stdout)
        return out["fingerprint"]

    def worker(self, name: str, *extra: str, pin: bool = True) -> subprocess.Popen:
        wtop = self.top / name
        wtop.mkdir(parents=True, exist_ok=True)
        log = open(wtop / "worker.log", "ab")
        argv = [XCED, "--roles", "worker", "--controller", self.url, "--host-name", name, "--topdir", str(wtop),
                "--slots", "2", "--memory", "2GB", *extra]
        if pin:
            argv += ["--controller-key", str(self.controller_pub)]
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = p
        return p

    def log(self, name: str) -> str:
        return (self.top / name / "worker.log").read_text()

    def hosts(self) -> dict[str, str]:
        return {h["name"]: h["status"] for h in json.loads(self.ctl.cli("hosts", "--json", check=True).stdout)["hosts"]}

    def wait_host(self, name: str, status: str = "ok", timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.hosts().get(name) != status:
            p = self.procs.get(name)
            assert status != "ok" or p is None or p.poll() is None, self.log(name)
            assert time.monotonic() < deadline, f"host {name} is not {status}: {self.hosts()}\n{self.log(name)}"
            time.sleep(0.1)

    def wait_exit(self, name: str, timeout: float = 30) -> int:
        return self.procs[name].wait(timeout)

    def stop(self) -> None:
        stop_processes(self.procs.values())
        self.ctl.stop()
        for d in [self.ctl_top, *(self.top / n for n in self.procs)]:
            kill_job_processes(d)

    @classmethod
    @contextlib.contextmanager
    def running(cls, prefix: str, **kw):
        """A started KeyedCluster in a new short temp dir, stopped on the way out, even on failure."""
        c = cls(short_tmpdir(prefix), **kw)
        try:
            yield c.start()
        finally:
            c.stop()


@pytest.fixture
def keyed():
    with KeyedCluster.running("xce-keys-") as c:
        yield c


def test_a_trusted_worker_joins_over_pinned_tls_and_runs_a_job(keyed):
    """KEY-3, KEY-6: the worker pins the controller's key, answers its challenge with its
    own, and runs a job; `keys list` shows when its key was last seen."""
    fp = keyed.trust("w1")
    keyed.worker("w1")
    keyed.wait_host("w1")
    job = keyed.ctl.submit("--", "sh", "-c", "echo on $XCE_HOSTNAME")
    assert keyed.ctl.wait_state(job, ("DONE", "EXIT"))["state"] == "DONE"
    rows = {k["fingerprint"]: k for k in json.loads(keyed.admin("keys", "list", "--json").stdout)["keys"]}
    assert rows[fp]["last_seen"] is not None
    assert (keyed.top / "w1" / "keys" / "controller").read_text().strip().startswith("SHA256:")


def test_an_untrusted_key_is_refused_at_join_and_the_worker_says_why(keyed):
    """KEY-1, KEY-3: a key the controller does not trust never joins; the worker ends with
    the controller's reason, which names the fingerprint and how to trust it."""
    keyed.gen_key("w9")
    keyed.worker("w9")
    assert keyed.wait_exit("w9") != 0
    log = keyed.log("w9")
    assert "is not trusted by this controller" in log and "xceadmin keys trust" in log, log
    assert "w9" not in keyed.hosts()


def test_a_worker_without_a_key_is_refused_in_production(keyed):
    """KEY-1: production takes no unauthenticated worker. Without a pin the worker speaks
    plain TCP to the TLS port, never gets in, and ends saying what it needs."""
    keyed.worker("w0", pin=False)
    assert keyed.wait_exit("w0") != 0
    assert "serves TLS" in keyed.log("w0") and "--controller-key" in keyed.log("w0"), keyed.log("w0")
    assert "w0" not in keyed.hosts()


def test_a_controller_whose_key_changed_is_refused_by_its_workers(keyed):
    """KEY-6: a worker pinned to the controller's old key stops at its rejoin with the pin
    mismatch (both fingerprints), never a loop of certificate errors."""
    keyed.trust("w1")
    keyed.worker("w1")
    keyed.wait_host("w1")
    keyed.ctl.stop()
    subprocess.run([XCEADMIN, "keys", "gen", "--topdir", str(keyed.ctl_top), "--force"], check=True,
                   capture_output=True, timeout=30)
    keyed.ctl.start()
    assert keyed.wait_exit("w1", timeout=60) != 0
    assert "not the pinned" in keyed.log("w1"), keyed.log("w1")


def test_a_worker_pinned_to_another_key_refuses_the_controller(keyed):
    """KEY-6: a worker whose pin is not the controller's key stops before it sends anything
    (an impersonated controller looks the same to it)."""
    other = keyed.gen_key("other")
    keyed.trust("w2")
    keyed.worker("w2", "--controller-key", str(other), pin=False)
    assert keyed.wait_exit("w2") != 0
    assert "not the pinned" in keyed.log("w2")


def test_revoke_returns_once_the_channel_is_closed_and_the_reconnect_is_refused(keyed):
    """KEY-4: `keys revoke` answers after the worker's channel is closed (the host is then
    unavail at once), and the worker's rejoin is refused with the reason."""
    fp = keyed.trust("w1")
    keyed.worker("w1")
    keyed.wait_host("w1")
    job = keyed.ctl.submit("--", "sleep", "60")
    keyed.ctl.wait_state(job, ("RUN",))
    out = keyed.admin("keys", "revoke", fp[:20], "--json").stdout
    assert json.loads(out)["closed"] == 1, out
    assert keyed.hosts()["w1"] == "unavail"
    host = [h for h in json.loads(keyed.ctl.cli("hosts", "--json", check=True).stdout)["hosts"] if h["name"] == "w1"]
    assert "key revoked" in host[0]["status_reason"], host
    assert keyed.wait_exit("w1") != 0
    assert "is revoked" in keyed.log("w1")
    # its job stays RUN (its supervisor runs on, JOB-8), saying its host is lost and why
    el = keyed.ctl.show(job)["elements"][0]
    assert el["state"] == "RUN" and "host w1 is unavail: key revoked" in el["host_problem"], el
    assert "key revoked" in keyed.ctl.cli("show", str(job), check=True).stdout


def test_a_replayed_join_signature_is_refused(keyed):
    """KEY-3: a signature answers one challenge once; sent again (to the session route, as
    an eavesdropper on an unpinned link would try), it is refused."""
    import asyncio

    from xced.api.errors import PermissionDenied
    from xced.api.peer_client import PeerClient, signed_answer
    from xced.auth.keys import read_private_key
    from xced.auth.tls import parse_pin

    keyed.trust("w1")
    key = read_private_key(keyed.top / "w1" / "keys" / "host.key")

    async def go():
        pc = PeerClient(keyed.url, parse_pin(str(keyed.controller_pub)), key, "w1", "worker")
        try:
            ch = await pc.challenge("session")
            answer = signed_answer(key, ch, "w1", "worker", "session")
            first = await pc._post("/peers/session", answer)
            with pytest.raises(PermissionDenied, match="answered already"):
                await pc._post("/peers/session", answer)
            return first
        finally:
            await pc.close()

    assert asyncio.run(go())["role"] == "worker"


def test_a_worker_key_cannot_make_user_requests(keyed):
    """KEY-3: a worker's key opens a session, but its role's allowlist has no user route: a
    submit, a listing and a config change are refused, naming the role."""
    import asyncio

    from xced.api.peer_client import PeerClient
    from xced.auth.keys import read_private_key
    from xced.auth.tls import parse_pin

    keyed.trust("w1")
    key = read_private_key(keyed.top / "w1" / "keys" / "host.key")

    async def go():
        pc = PeerClient(keyed.url, parse_pin(str(keyed.controller_pub)), key, "w1", "worker")
        try:
            out = []
            for method, path, body in (("POST", "/jobs", b'{"argv": ["id"], "cwd": "/"}'), ("GET", "/jobs", None),
                                       ("GET", "/keys", None)):
                r = await pc.request(method, path, content=body, headers={"content-type": "application/json"})
                out.append((r.status_code, r.json()["error"]["message"]))
            return out
        finally:
            await pc.close()

    for status, message in asyncio.run(go()):
        assert status == 403 and "worker role" in message, message


def test_keys_enroll_trades_a_token_and_the_worker_then_joins_with_the_saved_pin(keyed):
    """KEY-5: `xceadmin keys enroll TOKEN --controller URL` on the new host makes its key,
    trades the token (which carries the controller's fingerprint) and keeps the pin, so the
    worker starts with neither --enroll nor --controller-key. The token is then spent."""
    token = keyed.admin("keys", "token", "--role", "worker", "--host", "h7", "--expires", "1h").stdout.strip()
    assert "." in token
    wtop = keyed.top / "h7"
    wtop.mkdir()
    r = subprocess.run([XCEADMIN, "keys", "enroll", token, "--controller", keyed.url, "--host", "h7", "--topdir",
                        str(wtop)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "trusted as worker for host h7" in r.stderr and (wtop / "keys" / "controller").exists()
    keyed.worker("h7", pin=False)
    keyed.wait_host("h7")
    other = keyed.top / "h8"
    other.mkdir()
    r = subprocess.run([XCEADMIN, "keys", "enroll", token, "--controller", keyed.url, "--host", "h7", "--topdir",
                        str(other)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "used already" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_job_across_keyed_workers_launches_its_tasks_through_its_worker(keyed, tmp_path):
    """JOB-7 in production: a job's `xcecli launch` and XCE_TASK_STARTER reach the controller
    through its own worker's socket and channel (no TCP for jobs), with the job's token;
    the task's output and exit status come back. A process on that socket without the
    token, or asking anything else, is refused saying what the socket is for."""
    keyed.trust("w1")
    keyed.trust("w2")
    keyed.worker("w1")
    keyed.worker("w2")
    keyed.wait_host("w1")
    keyed.wait_host("w2")
    script = tmp_path / "mpi_like.sh"
    script.write_text(
        "#!/bin/sh\n"
        "echo mcpu=$LSB_MCPU_HOSTS\n"
        "other=$(echo $LSB_MCPU_HOSTS | cut -d' ' -f3)\n"
        "xcecli launch $other -- sh -c 'echo task on $XCE_TASK_HOST; exit 4'\n"
        "echo launch=$?\n"
        "XCE_JOB_TOKEN= xcecli launch $other -- true 2>&1 | tail -1\n"
        "xcecli jobs 2>&1 | tail -1\n"
        "$XCE_TASK_STARTER sh -c 'echo rank@$XCE_TASK_HOST' | sort | uniq -c | awk '{print $2\"x\"$1}' | tr '\\n' ' '\n"
        "echo\n")
    script.chmod(0o755)
    out = tmp_path / "out"
    env_path = f"{Path(XCED).parent}:{os.environ['PATH']}"
    r = subprocess.run([str(Path(XCED).parent / "xcecli"), "submit", "-K", "-n", "4", "-o", str(out), str(script)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=90,
                       env={**os.environ, "XCE_TOPDIR": str(keyed.ctl_top), "PATH": env_path})
    text = out.read_text()
    assert r.returncode == 0, (r.stderr, text, keyed.log("w1"), keyed.log("w2"))
    lines = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert lines["mcpu"] in ("w1 2 w2 2", "w2 2 w1 2") and lines["launch"] == "4", text
    assert "task on " in text and "with its XCE_JOB_TOKEN" in text and "worker host's socket" in text, text
    assert text.strip().splitlines()[-1].split() == ["rank@w1x2", "rank@w2x2"], text


def test_the_worker_socket_answers_every_launch_at_once(keyed):
    """JOB-7: a launch the controller would not take (job 0, a huge ID, a bad index) gets its
    answer from the worker's socket at once, never a hang."""
    keyed.trust("w1")
    keyed.worker("w1")
    keyed.wait_host("w1")
    sock = str(keyed.top / "w1" / "run" / "xced.sock")
    body = json.dumps({"host": "w1", "argv": ["true"], "token": "t", "index": 0})
    for path, status in (("/jobs/0/launch", "404"), ("/jobs/9999999999999999999/launch", "404"),
                         ("/jobs/-1/launch", "404"), ("/jobs", "403")):
        r = subprocess.run(["curl", "-s", "-m", "10", "-w", "\n%{http_code}", "--unix-socket", sock, "-X", "POST",
                            "--data-binary", body, f"http://w/xce/v1{path}"], capture_output=True, text=True,
                           timeout=20)
        assert r.stdout.rsplit("\n", 1)[-1] == status, (path, r.stdout)
    bad = json.dumps({"host": "w1", "argv": ["true"], "token": "t", "index": 2**40})
    r = subprocess.run(["curl", "-s", "-m", "10", "-w", "\n%{http_code}", "--unix-socket", sock, "-X", "POST",
                        "--data-binary", bad, "http://w/xce/v1/jobs/5/launch"], capture_output=True, text=True,
                       timeout=20)
    assert r.stdout.rsplit("\n", 1)[-1] == "422" and "index" in r.stdout, r.stdout


def test_a_token_for_no_host_cannot_claim_a_taken_host_or_move_a_trusted_key(keyed):
    """KEY-5 (a fresh tester): a token bound to no host may not enrol a name that has a
    trusted key already (its jobs would be re-attached by a stranger), and a key trusted
    already is never moved to another host by a token."""
    keyed.trust("h2")
    token = keyed.admin("keys", "token", "--role", "worker", "--expires", "1h").stdout.strip()
    new = keyed.top / "new"
    new.mkdir()

    def enroll(host: str, top: Path) -> subprocess.CompletedProcess:
        return subprocess.run([XCEADMIN, "keys", "enroll", token, "--controller", keyed.url, "--host", host,
                               "--topdir", str(top)], capture_output=True, text=True, timeout=60)

    r = enroll("h2", new)
    assert r.returncode == 1 and "host h2 is taken" in r.stderr and "--host h2" in r.stderr, r.stderr
    r = enroll("h3", keyed.top / "h2")  # h2's own key, trusted already, asking to be h3
    assert r.returncode == 1 and "is trusted already, for host h2" in r.stderr, r.stderr
    assert enroll("h3", new).returncode == 0  # the token was spent by neither refusal

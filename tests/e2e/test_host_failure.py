"""Lost hosts and host control end to end (SCHED-4, CLI-4, PROF-3 on_host_failure; issue
16): a controller and real `xced --roles worker` processes h1, h2 (and h3) on this machine,
each with its own TopDir, or a keyed worker over a TLS channel pinned to the controller's
key. A worker is SIGKILLed (its channel closes) or SIGSTOPped (its heartbeats stop); the
daemon's test clock is moved past host_lost_grace instead of waiting. Jobs across two hosts
check the fencing of a task on a host that is not the job's first.
What is checked is what a user and an admin see: `xcecli hosts --json`, `show`, `hist`, the
job's processes by PID, and `xceadmin hosts`'s exit codes and messages."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import (XCEADMIN, XCECLI, XCED, Daemon, kill_job_processes, short_tmpdir, stop_processes,
                            write_config)
from tests.e2e.test_peers import KeyedCluster
from xced.auth.tls import presented_certificate

pytestmark = pytest.mark.timeout(150)

APPS = """\
applications:
  again:
    on_host_failure: requeue
  once:
    on_host_failure: exit
"""


class Cluster:
    """A controller that runs no jobs itself, and workers h1 and h2 (or the names `start`
    is given) of 2 slots each; heartbeats every `heartbeat_s` seconds (None: the real 10 s)."""

    def __init__(self, top: Path, heartbeat_s: str | None = "0.3") -> None:
        self.top = top
        self.ctl_top = top / "A"
        write_config(self.ctl_top)
        cfg = self.ctl_top / "config"
        (cfg / "hosts.yaml").write_text("hosts: []\n")
        (cfg / "applications.yaml").write_text(APPS)
        with open(cfg / "xce.yaml", "a") as f:
            f.write("listen:\n  host: 127.0.0.1\n  port: 0\nhost_lost_grace: 60\n")
        # heartbeats every 0.3 s: a stopped worker is noticed within a second (SCHED-4);
        # `heartbeat_s` None: the real interval
        self.ctl = Daemon(self.ctl_top, args=["--roles", "controller,scheduler,apiserver"],
                          env={"XCE_TEST_HEARTBEAT_S": heartbeat_s} if heartbeat_s else {})
        self.workers: dict[str, subprocess.Popen] = {}

    def start_worker(self, name: str) -> None:
        port = (self.ctl_top / "run" / "xced.port").read_text().strip()
        wtop = self.top / name
        wtop.mkdir(parents=True, exist_ok=True)
        log = open(wtop / "worker.log", "ab")
        self.workers[name] = subprocess.Popen(
            [XCED, "--roles", "worker", "--controller", f"tcp://127.0.0.1:{port}", "--host-name", name,
             "--topdir", str(wtop), "--slots", "2", "--memory", "4GB"], stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)

    def start(self, names: tuple[str, ...] = ("h1", "h2")) -> "Cluster":
        self.ctl.start()
        for n in names:
            self.start_worker(n)
        self.wait_hosts(**{n: "ok" for n in names})
        return self

    def hosts(self) -> dict[str, dict]:
        return {h["name"]: h for h in json.loads(self.ctl.cli("hosts", "--json", check=True).stdout)["hosts"]}

    def wait_hosts(self, timeout: float = 30, **want: str) -> dict[str, dict]:
        """`xcecli hosts --json` once each host named has the status given (looked at through the API)."""
        _wait_hosts(self.ctl_top, timeout, **want)
        return self.hosts()

    def admin(self, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "XCE_TOPDIR": str(self.ctl_top), "XCE_TEST_USER": "admin"}
        env.pop("XCE_SOCKET", None)
        return subprocess.run([XCEADMIN, *args], capture_output=True, text=True, env=env, timeout=60)

    def pgid(self, host: str, jid: int) -> int:
        job_json = self.top / host / "jobs" / str(jid) / "0" / "job.json"
        deadline = time.monotonic() + 20
        while not job_json.exists():
            assert time.monotonic() < deadline, f"job {jid} never started on {host}"
            time.sleep(0.05)
        return json.loads(job_json.read_text())["pgid"]

    def stop(self) -> None:
        for p in self.workers.values():
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                except ProcessLookupError:
                    pass
        stop_processes(self.workers.values())
        self.ctl.stop()
        for d in [self.ctl_top, *(self.top / n for n in self.workers)]:
            kill_job_processes(d)


@pytest.fixture
def cluster():
    top = short_tmpdir("xce-hf-")
    c = Cluster(top)
    try:
        yield c.start()
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)


def _api(top: Path, path: str):
    """GET `path` of the daemon of TopDir `top` with the API client xcecli itself uses, in
    this process: the looks of a wait loop then cost no CLI start-up each (a third of a
    second of CPU here, which a run on 2 cores feels). What a test asserts is read with
    xcecli once the wait is over."""
    from xced.api.client import Client

    with Client.connect(topdir=str(top)) as c:
        return c.request("GET", path).json()


def _api_hosts(top: Path) -> dict[str, dict]:
    """The hosts by name, as `xcecli hosts --json` lists them (through the API: for wait loops)."""
    return {h["name"]: h for h in _api(top, "/hosts")["hosts"]}


def _wait_hosts(top: Path, timeout: float = 30, **want: str) -> None:
    """Wait until each host named has the status given (`xcecli hosts --json`'s `status`)."""
    deadline = time.monotonic() + timeout
    while True:
        hosts = _api_hosts(top)
        if all(hosts.get(n, {}).get("status") == s for n, s in want.items()):
            return
        assert time.monotonic() < deadline, f"hosts are not {want}: {hosts}"
        time.sleep(0.1)


def _wait_job(d: Daemon, jid: int, ok, timeout: float = 20) -> dict:
    """`xcecli show --json` of job `jid` once `ok(job)` holds (looked at through the API)."""
    deadline = time.monotonic() + timeout
    while not ok(j := _api(d.top, f"/jobs/{jid}")):
        assert time.monotonic() < deadline, j
        time.sleep(0.1)
    return d.show(jid)


def _state(d: Daemon, jid: int, states: tuple[str, ...], timeout: float = 20) -> dict:
    """`xcecli show --json` of job `jid` once it is in one of `states`."""
    return _wait_job(d, jid, lambda j: j["state"] in states, timeout)


def _gone(pgid: int, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _host_of(job: dict) -> str:
    return job["elements"][0]["alloc"][0]["host"]


def _runs_on(d: Daemon, jid: int, host: str, timeout: float = 20) -> dict:
    """The job once it runs on `host` (it may run, or pend, elsewhere first)."""
    return _wait_job(d, jid, lambda j: j["state"] == "RUN" and _host_of(j) == host, timeout)


# ---------------------------------------------------------------------- the real heartbeat interval

def test_an_idle_worker_is_heard_from_every_10_s(tmp_path):
    """SCHED-4: with no test override of the interval, an idle worker's heartbeats reach the
    controller every 10 s: `xcecli hosts --json` gives `last_heard`, set at its join and then
    at each heartbeat (nothing else comes from an idle worker). Two intervals are watched
    (about 20 s: first in this file, so that it overlaps the others when run with -n 2); the
    slack allows a loaded machine, but never 0.3 s nor 30 s."""
    top = short_tmpdir("xce-hb-")
    c = Cluster(top, heartbeat_s=None)
    try:
        c.start(("h1",))
        seen: list[float] = []
        deadline = time.monotonic() + 35
        while len(seen) < 3:  # the join, then two heartbeats
            h = _api_hosts(c.ctl_top)["h1"]
            assert h["status"] == "ok", h
            if h["last_heard"] is not None and (not seen or h["last_heard"] != seen[-1]):
                seen.append(h["last_heard"])
            assert time.monotonic() < deadline, f"h1 was heard from at {seen} only"
            time.sleep(1.0)  # the times are the controller's own: a slow look loses no precision
        assert c.hosts()["h1"]["last_heard"] >= seen[-1]  # as xcecli hosts --json gives it
        gaps = [round(b - a, 2) for a, b in zip(seen, seen[1:])]
        assert all(9.0 <= g <= 16.0 for g in gaps), f"h1 was heard from every {gaps} s, not every 10 s"
        assert "sent nothing for" not in c.ctl.log.read_text()  # never taken for gone meanwhile
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)


# ---------------------------------------------------------------------- lost hosts (SCHED-4)

def test_lost_host_requeues_or_ends_its_jobs_and_fences_the_stale_copies(cluster, tmp_path):
    c, d = cluster, cluster.ctl
    # h2 closed while the two jobs are submitted, so both start on h1 (CLI-4: no dispatch to a closed host)
    r = c.admin("hosts", "close", "h2", "--reason", "disk swap")
    assert r.returncode == 0 and "host h2 closed" in r.stdout, r.stderr
    h2 = c.hosts()["h2"]
    assert (h2["status"], h2["closed_by"], h2["closed_reason"], h2["draining"]) == ("closed_Adm", "admin",
                                                                                   "disk swap", False)
    # a job that shrugs off SIGINT and SIGTERM and ends 0 when told (the file `go`)
    again = d.submit("-a", "again", "--", "sh", "-c", "trap '' INT TERM; while [ ! -f go ]; do sleep 0.1; done",
                     cwd=tmp_path)
    once = d.submit("-a", "once", "--", "sleep", "300", cwd=tmp_path)
    assert _host_of(_state(d, again, ("RUN",))) == "h1" and _host_of(_state(d, once, ("RUN",))) == "h1"
    old_again, old_once = c.pgid("h1", again), c.pgid("h1", once)
    assert c.hosts()["h1"]["jobs"] == [str(again), str(once)]
    r = c.admin("hosts", "open", "h2")
    assert r.returncode == 0 and c.hosts()["h2"]["status"] == "ok"

    w = c.workers["h1"]
    w.send_signal(signal.SIGKILL)
    w.wait(10)
    h1 = c.wait_hosts(h1="unavail")["h1"]
    assert h1["away_since"] is not None and h1["lost_at"] is None
    assert d.show(again)["state"] == "RUN"  # within the grace period nothing happens to its jobs
    r = c.admin("debug", "clock", "--advance", "61s")
    assert r.returncode == 0, r.stderr
    j = _runs_on(d, again, "h2")
    hist = d.cli("hist", str(again), check=True).stdout
    assert "requeued: host h1 lost" in hist, hist
    assert j["submit_time"] is not None and j["app"] == "again"
    e = d.show(once)
    assert e["state"] == "EXIT" and e["elements"][0]["exit_reason"] == "host h1 lost", e
    assert c.hosts()["h1"]["lost_at"] is not None

    # h1 comes back while both old copies still run under their supervisors: both are killed there
    os.killpg(old_again, 0)
    os.killpg(old_once, 0)
    c.start_worker("h1")
    c.wait_hosts(h1="ok")
    assert _gone(old_again) and _gone(old_once), "a stale copy outlived the rejoin of its host"
    time.sleep(0.5)  # their ends reach the controller, which must ignore them
    j = d.show(again)
    assert j["state"] == "RUN" and _host_of(j) == "h2", j
    assert d.show(once)["elements"][0]["exit_reason"] == "host h1 lost"
    (tmp_path / "go").write_text("")
    j = _state(d, again, ("DONE", "EXIT"))
    assert j["state"] == "DONE" and _host_of(j) == "h2", j
    events = d.cli("hist", str(again), "--json", check=True).stdout
    assert events.count('"EXIT"') == 0, events  # the killed stale copy never became the job's result
    assert "stale copy of job" in c.ctl.log.read_text()  # and the fencing is logged
    # the host's history (LSF badmin hhist): the admin's close and open, the loss, the rejoin
    hist = json.loads(c.admin("hosts", "hist", "h1", "--json").stdout)["events"]
    assert [e["kind"] for e in hist] == ["lost", "rejoined"], hist
    assert hist[0]["actor"] == "system" and "host_lost_grace 60 s" in hist[0]["reason"]
    r = c.admin("hosts", "hist")
    rows = [ln.split()[3:5] for ln in r.stdout.splitlines()[1:]]  # TIME is three words: Dec 03 15:47:52
    assert r.returncode == 0 and rows == [["h2", "close"], ["h2", "open"], ["h1", "lost"], ["h1", "rejoined"]], r.stdout
    assert "disk swap" in r.stdout and r.stdout.split()[:5] == ["TIME", "HOST", "EVENT", "ACTOR", "REASON"]


def test_a_stopped_worker_is_noticed_by_its_heartbeats_and_a_kill_asked_meanwhile_ends_the_job_at_the_loss(
        cluster, tmp_path):
    c, d = cluster, cluster.ctl
    c.admin("hosts", "close", "h2")
    victim = d.submit("-a", "again", "--", "sleep", "300", cwd=tmp_path)
    moved = d.submit("--", "sleep", "300", cwd=tmp_path)
    _state(d, victim, ("RUN",))
    _state(d, moved, ("RUN",))
    pg_victim, pg_moved = c.pgid("h1", victim), c.pgid("h1", moved)
    c.admin("hosts", "open", "h2")
    c.workers["h1"].send_signal(signal.SIGSTOP)  # its TCP connection stays open: only the heartbeats stop
    h1 = c.wait_hosts(timeout=15, h1="unavail")["h1"]
    assert "sent nothing for" in h1["status_reason"], h1
    r = d.cli("kill", str(victim))
    assert r.returncode == 0, r.stderr  # acknowledged, though nobody can carry it out yet
    r = d.cli("requeue", str(moved))  # by hand, on a host without its worker: PEND at once, runs elsewhere
    assert r.returncode == 0, r.stderr
    _runs_on(d, moved, "h2")
    assert d.show(victim)["state"] == "RUN"
    c.admin("debug", "clock", "--advance", "61s")
    j = _state(d, victim, ("EXIT",))
    why = j["elements"][0]["exit_reason"]
    assert why.startswith("killed by ") and why.endswith("; host h1 lost"), j
    # the worker resumes: it rejoins, and both its copies are fenced (killed) there
    c.workers["h1"].send_signal(signal.SIGCONT)
    c.wait_hosts(timeout=30, h1="ok")
    assert _gone(pg_victim) and _gone(pg_moved)
    assert d.show(moved)["state"] == "RUN" and _host_of(d.show(moved)) == "h2"


def test_host_control_drain_and_its_errors(cluster, tmp_path):
    c, d = cluster, cluster.ctl
    r = c.admin("hosts", "close", "nope")
    assert r.returncode == 1 and "'nope' is not a host of this cluster" in r.stderr, r.stderr
    r = c.admin("hosts", "close", "a/b")
    assert r.returncode == 2 and "a host name is a letter or digit" in r.stderr, r.stderr
    # a reason is one line that every user reads: no newline, tab or terminal escape, not blank
    for bad, said in (("line1\nline2", "control character"), ("red \x1b[31m", "control character"),
                      ("a\tb", "control character"), ("   ", "blank")):
        r = c.admin("hosts", "close", "h1", "--reason", bad)
        assert r.returncode == 1 and said in r.stderr and "\n" not in r.stderr.rstrip("\n"), r.stderr
    assert c.hosts()["h1"]["status"] == "ok"
    assert c.admin("hosts", "close", "h1", "--reason", "fan").returncode == 0
    r = c.admin("hosts", "close", "h1", "--reason", "fan")
    assert r.returncode == 0 and "already closed" in r.stderr and r.stdout == "", (r.stdout, r.stderr)
    r = d.cli("hosts", check=True)
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("h1"))
    assert "closed_Adm" in line and "closed by admin: fan" in line, r.stdout
    assert c.admin("hosts", "open", "h1").returncode == 0
    r = c.admin("hosts", "open", "h1")
    assert r.returncode == 0 and "already open" in r.stderr
    # drain with --wait: returns once the host's last job has ended
    c.admin("hosts", "close", "h1")
    jid = d.submit("--", "sh", "-c", "while [ ! -f done ]; do sleep 0.1; done", cwd=tmp_path)
    _state(d, jid, ("RUN",))
    assert _host_of(d.show(jid)) == "h2"
    c.admin("hosts", "open", "h1")
    waiter = subprocess.Popen([XCEADMIN, "hosts", "drain", "h2", "--reason", "kernel", "--wait"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "XCE_TOPDIR": str(c.ctl_top), "XCE_TEST_USER": "admin"})
    try:
        deadline = time.monotonic() + 20
        while not _api_hosts(c.ctl_top)["h2"]["draining"]:
            assert time.monotonic() < deadline and waiter.poll() is None
            time.sleep(0.1)
        h2 = c.hosts()["h2"]
        assert (h2["status"], h2["closed_reason"], h2["jobs"]) == ("closed_Adm", "kernel", [str(jid)])
        assert waiter.poll() is None  # still waiting: a job runs there
        (tmp_path / "done").write_text("")
        out, errs = waiter.communicate(timeout=30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    assert waiter.returncode == 0 and "host h2 drained" in out, (out, errs)
    h2 = c.hosts()["h2"]
    assert h2["draining"] is False and h2["status"] == "closed_Adm"
    # a host that is down cannot be drained
    c.workers["h1"].send_signal(signal.SIGKILL)
    c.workers["h1"].wait(10)
    c.wait_hosts(h1="unavail")
    r = c.admin("hosts", "drain", "h1")
    assert r.returncode == 1 and "no worker serves it" in r.stderr, r.stderr
    # kept across a restart of the controller
    d.stop()
    d.start()
    assert c.wait_hosts(h2="closed_Adm")["h2"]["closed_reason"] == "kernel"  # once its worker has rejoined
    hist = json.loads(c.admin("hosts", "hist", "h2", "--json").stdout)["events"]
    assert [(e["kind"], e["actor"], e["reason"]) for e in hist] == [("drain", "admin:admin", "kernel"),
                                                                    ("drained", "system", "its last job has ended")]
    r = c.admin("hosts", "hist", "h9")
    assert r.returncode == 1 and "'h9' is not a host of this cluster" in r.stderr, r.stderr


def test_a_negative_grace_period_is_a_config_error_with_its_place(tmp_path):
    top = tmp_path / "t"
    write_config(top)
    with open(top / "config" / "xce.yaml", "a") as f:
        f.write("host_lost_grace: -5\n")
    r = subprocess.run([XCEADMIN, "build", "--topdir", str(top)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "xce.yaml:7:18: error: host_lost_grace must be a number of seconds from 1 to 86400" in r.stdout + r.stderr, \
        r.stdout + r.stderr


# ---------------------------------------------------------------------- jobs across hosts (SCHED-4 fencing)

@pytest.fixture
def cluster3():
    """The cluster with a third worker, h3 (2 slots), for a two-host job to run on again."""
    top = short_tmpdir("xce-hf3-")
    c = Cluster(top)
    try:
        yield c.start(("h1", "h2", "h3"))
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)


def _two_host_job(c: Cluster, tmp_path: Path) -> tuple[int, Path]:
    """Submit a job of two tasks, one per host (`-n 2 -R span[ptile=1]`): its script, on the
    first host, launches a task on the second (`xcecli launch`, JOB-7) that shrugs off SIGINT
    and SIGTERM (it notes each in `pids/term-HOST`) and writes its PID to `pids/task-HOST`;
    the script then waits for the file `go` and ends 0 (the task is then ended, JOB-7).
    Returns the job's ID and the `pids` directory."""
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "two.sh"
    script.write_text(
        "#!/bin/sh\n"
        "other=$(echo $LSB_HOSTS | cut -d' ' -f2)\n"
        f"{XCECLI} launch $other -- sh -c "
        f"'trap \"echo x >> {pids}/term-$XCE_TASK_HOST\" INT TERM; echo $$ > {pids}/task-$XCE_TASK_HOST.tmp; "
        f"mv {pids}/task-$XCE_TASK_HOST.tmp {pids}/task-$XCE_TASK_HOST; while :; do sleep 0.1; done' &\n"
        f"while [ ! -f {tmp_path}/go ]; do sleep 0.1; done\n")
    script.chmod(0o755)
    return c.ctl.submit("-a", "again", "-n", "2", "-R", "span[ptile=1]", "--", str(script), cwd=tmp_path), pids


def _pid_in(path: Path, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return int(path.read_text())


def _pid_gone(pid: int, timeout: float = 20) -> bool:
    """Whether process `pid` ends (or is a zombie) within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1][0] == "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def _hosts_of(job: dict) -> list[str]:
    return [a["host"] for a in job["elements"][0]["alloc"]]


def test_a_lost_second_host_requeues_the_job_and_its_stale_task_is_killed_at_the_rejoin(cluster3, tmp_path):
    """SCHED-4 fencing of a job's task on its second host: the job runs on h1 (first) and h2;
    a restart of h2's worker keeps that task (the current attempt's); then h2's worker
    dies, and the task runs on. After host_lost_grace the job is
    requeued (its copy on h1 killed first) and runs again on h3 and h1: h3 first, as the
    host never dispatched to (RES-4: ties go to the host dispatched to least recently), so
    its task is on h1. When h2's worker comes back while the old task still runs, that stale
    task is killed there (the kill sequence, SIGKILL for a task that shrugs off SIGTERM), and
    nothing of it is recorded: the job runs on, on h3 and h1, and ends DONE."""
    c, d = cluster3, cluster3.ctl
    assert c.admin("hosts", "close", "h3").returncode == 0  # the first run takes h1 and h2
    jid, pids = _two_host_job(c, tmp_path)
    assert _hosts_of(_runs_on(d, jid, "h1")) == ["h1", "h2"]
    stale = _pid_in(pids / "task-h2")
    old_script = c.pgid("h1", jid)
    # a restart of h2's worker (JOB-8) keeps the task of the current attempt: it is no stale copy
    c.workers["h2"].send_signal(signal.SIGKILL)
    c.workers["h2"].wait(10)
    c.wait_hosts(h2="unavail")
    c.start_worker("h2")
    c.wait_hosts(h2="ok")
    assert not _pid_gone(stale, 1.0), "a worker restart killed the task of the job's current attempt"
    assert c.admin("hosts", "open", "h3").returncode == 0
    w = c.workers["h2"]
    w.send_signal(signal.SIGKILL)
    w.wait(10)
    c.wait_hosts(h2="unavail")
    assert d.show(jid)["state"] == "RUN" and not _pid_gone(stale, 0.2)  # within the grace period: runs on
    assert c.admin("debug", "clock", "--advance", "61s").returncode == 0
    _wait_job(d, jid, lambda j: j["state"] == "RUN" and _hosts_of(j) == ["h3", "h1"], 30)
    assert _gone(old_script), "the job's copy on its first host outlived the loss of its second"
    hist = d.cli("hist", str(jid), check=True).stdout
    assert "requeued: host h2 lost" in hist, hist
    new_task = _pid_in(pids / "task-h1")
    assert not _pid_gone(stale, 0.2), "the old task on h2 ended with no worker there"  # nobody could end it yet
    c.start_worker("h2")
    c.wait_hosts(h2="ok")
    assert _pid_gone(stale), "the stale task on h2 outlived the rejoin of its host"
    assert (pids / "term-h2").exists()  # it was asked to end (the kill sequence), then killed
    j = d.show(jid)
    assert j["state"] == "RUN" and _hosts_of(j) == ["h3", "h1"], j
    assert not _pid_gone(new_task, 0.1), "the current attempt's task on h1 was killed"
    assert "host h2 runs a stale copy of job" in c.ctl.log.read_text()  # the fencing is logged
    _let_it_end_done_on(d, jid, ["h3", "h1"], new_task, tmp_path)


def _let_it_end_done_on(d, jid: int, hosts: list[str], task: int, tmp_path) -> None:
    """Let the two-host job end (its `go` file) and check that it ended DONE on `hosts`, that
    its current task `task` (a PID) is gone with it, and that no EXIT of a stale copy was ever
    recorded in its history."""
    (tmp_path / "go").write_text("")
    j = _state(d, jid, ("DONE", "EXIT"))
    assert j["state"] == "DONE" and _hosts_of(j) == hosts, j
    assert _pid_gone(task)
    events = json.loads(d.cli("hist", str(jid), "--json", check=True).stdout)["events"]
    assert [e["kind"] for e in events].count("EXIT") == 0, events


def test_a_lost_first_host_requeues_the_job_and_its_task_on_the_second_host_is_ended(cluster3, tmp_path):
    """SCHED-4, the other way round: the job's first host h1 stops (its worker SIGSTOPped:
    its heartbeats stop) and is lost; the job's task on h2, which shrugs off SIGTERM, is
    ended there at the loss (the job is handled as a whole), and the job runs again on h3
    and h2 (h3 first, never dispatched to: RES-4, ties go to the host dispatched to least
    recently), its new task on h2. When h1's worker resumes, the old copy there is fenced: killed, and its end,
    which that worker still reports, is not recorded."""
    c, d = cluster3, cluster3.ctl
    assert c.admin("hosts", "close", "h3").returncode == 0
    jid, pids = _two_host_job(c, tmp_path)
    assert _hosts_of(_runs_on(d, jid, "h1")) == ["h1", "h2"]
    task = _pid_in(pids / "task-h2")
    old_script = c.pgid("h1", jid)
    assert c.admin("hosts", "open", "h3").returncode == 0
    c.workers["h1"].send_signal(signal.SIGSTOP)
    c.wait_hosts(timeout=15, h1="unavail")
    assert not _pid_gone(task, 0.2)  # within the grace period: it runs on
    assert c.admin("debug", "clock", "--advance", "61s").returncode == 0
    assert _pid_gone(task), "the job's task on h2 outlived the loss of its first host"
    assert (pids / "term-h2").exists()  # the kill sequence reached it, then SIGKILL
    j = _runs_on(d, jid, "h3")
    assert _hosts_of(j) == ["h3", "h2"], j
    assert "requeued: host h1 lost" in d.cli("hist", str(jid), check=True).stdout
    deadline = time.monotonic() + 20
    while not (pids / "task-h2").exists() or int((pids / "task-h2").read_text()) == task:  # the new run's task
        assert time.monotonic() < deadline, "the job's new run started no task on h2"
        time.sleep(0.1)
    new_task = int((pids / "task-h2").read_text())
    os.killpg(old_script, 0)  # the old copy on h1 runs on, with nobody to end it
    c.workers["h1"].send_signal(signal.SIGCONT)
    c.wait_hosts(timeout=30, h1="ok")
    assert _gone(old_script), "the stale copy on h1 outlived the rejoin of its host"
    deadline = time.monotonic() + 10
    while "reported finished of a stale copy of job" not in c.ctl.log.read_text():  # h1 still watched it
        assert time.monotonic() < deadline, "h1's worker never reported the end of its stale copy"
        time.sleep(0.1)
    j = d.show(jid)
    assert j["state"] == "RUN" and _hosts_of(j) == ["h3", "h2"], j  # that end was not the job's
    assert not _pid_gone(new_task, 0.1)
    _let_it_end_done_on(d, jid, ["h3", "h2"], new_task, tmp_path)


# ---------------------------------------------------------------------- a keyed worker over TLS (KEY-6)

@pytest.fixture
def keyed():
    """A test-mode controller whose TCP port serves TLS pinned to its key (`listen.tls`,
    tests.e2e.test_peers.KeyedCluster), heartbeats every 0.3 s and host_lost_grace 60 s, with
    a keyed worker w1 (trusted, pinned, 2 slots) joined. Every worker is sent SIGCONT before
    the stop (one may be stopped), and every process is stopped by its PID."""
    c = KeyedCluster(short_tmpdir("xce-hftls-"), mode="test")
    with open(c.ctl_top / "config" / "xce.yaml", "a") as f:
        f.write("host_lost_grace: 60\n")
    (c.ctl_top / "config" / "applications.yaml").write_text(APPS)
    c.ctl.env = {"XCE_TEST_HEARTBEAT_S": "0.3"}
    try:
        c.start()
        c.trust("w1")
        c.worker("w1")
        _wait_hosts(c.ctl_top, 30, w1="ok")
        yield c
    finally:
        for p in c.procs.values():
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                except ProcessLookupError:
                    pass
        c.stop()
        shutil.rmtree(c.top, ignore_errors=True)


def test_a_stopped_keyed_worker_on_tls_is_noticed_by_its_heartbeats_then_lost(keyed, tmp_path):
    """SCHED-4 on a pinned TLS channel (KEY-6): the keyed worker w1 is SIGSTOPped, so its TLS
    connection stays open and only its heartbeats stop. The host is `unavail` (no heartbeat)
    while its job runs on; after host_lost_grace (the test clock) it is lost and the job is
    requeued. When the worker resumes it rejoins over TLS with its key, its old copy is
    fenced, and the job runs again there."""
    c, d = keyed, keyed.ctl
    jid = d.submit("-a", "again", "--", "sleep", "300", cwd=tmp_path)
    j = _state(d, jid, ("RUN",))
    assert _host_of(j) == "w1"
    job_json = c.top / "w1" / "jobs" / str(jid) / "0" / "job.json"
    deadline = time.monotonic() + 20
    while not job_json.exists():
        assert time.monotonic() < deadline, "the job never started on w1"
        time.sleep(0.05)
    old = json.loads(job_json.read_text())["pgid"]
    # the channel is TLS pinned to the controller's key, and the worker joined with its own (KEY-3, KEY-6)
    port = int(c.url.rsplit(":", 1)[1])
    assert presented_certificate("127.0.0.1", port)  # the controller's port speaks TLS only
    assert (c.top / "w1" / "keys" / "controller").read_text().startswith("SHA256:")  # saved at a pinned join
    assert all(k["last_seen"] is not None for k in json.loads(c.admin("keys", "list", "--json").stdout)["keys"]
               if k["host"] == "w1")
    heard = _keyed_host(d, "w1")["last_heard"]
    deadline = time.monotonic() + 10
    while _api_hosts(c.ctl_top)["w1"]["last_heard"] == heard:  # its heartbeats come over TLS
        assert time.monotonic() < deadline, "no heartbeat from w1"
        time.sleep(0.1)
    assert _keyed_host(d, "w1")["last_heard"] > heard
    w = c.procs["w1"]
    w.send_signal(signal.SIGSTOP)
    _wait_hosts(c.ctl_top, 15, w1="unavail")
    h = _keyed_host(d, "w1")
    assert "sent nothing for" in h["status_reason"] and h["lost_at"] is None, h
    assert h["away_since"] - h["last_heard"] >= 3 * 0.3, h  # gone after three heartbeats missed in a row
    assert w.poll() is None  # stopped, not gone: its connection is still open
    assert d.show(jid)["state"] == "RUN"  # within the grace period its job runs on
    os.killpg(old, 0)
    r = subprocess.run([XCEADMIN, "debug", "clock", "--advance", "61s"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "XCE_TOPDIR": str(c.ctl_top)})
    assert r.returncode == 0, r.stderr
    j = _state(d, jid, ("PEND",))
    assert "requeued: host w1 lost" in d.cli("hist", str(jid), check=True).stdout
    h = _keyed_host(d, "w1")
    assert h["lost_at"] is not None and h["status"] == "unavail" and h["jobs"] == [], h
    w.send_signal(signal.SIGCONT)
    _wait_hosts(c.ctl_top, 30, w1="ok")
    assert _gone(old), "the stale copy on w1 outlived its rejoin"
    j = _state(d, jid, ("RUN",))
    assert _host_of(j) == "w1" and j["elements"][0]["state"] == "RUN"
    assert "w1 runs a stale copy of job" in d.log.read_text()
    hist = json.loads(c.admin("hosts", "hist", "w1", "--json").stdout)["events"]
    assert [e["kind"] for e in hist] == ["lost", "rejoined"], hist


def _keyed_host(d: Daemon, name: str) -> dict:
    return {h["name"]: h for h in json.loads(d.cli("hosts", "--json", check=True).stdout)["hosts"]}[name]

"""Several hosts on one machine (D-1): a controller and real `xced --roles worker` processes
joined over TCP, each worker with its own TopDir, slots and resources. JOB-3 (host list and
host file), JOB-7 (`xcecli launch`, XCE_TASK_STARTER), kill reaching every host."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import XCED, Daemon, kill_job_processes, short_tmpdir, stop_processes, write_config

pytestmark = pytest.mark.timeout(120)


class Cluster:
    """A controller that runs no jobs itself (`--roles controller,scheduler,apiserver`, no
    hosts in hosts.yaml) and three `xced --roles worker` processes h1, h2, h3 joined over TCP,
    each declaring its own slots, memory and resources."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self.ctl_top = top / "A"
        write_config(self.ctl_top)
        (self.ctl_top / "config" / "hosts.yaml").write_text("hosts: []\n")
        with open(self.ctl_top / "config" / "xce.yaml", "a") as f:
            f.write("listen:\n  host: 127.0.0.1\n  port: 0\n")
        self.ctl = Daemon(self.ctl_top, args=["--roles", "controller,scheduler,apiserver"])
        self.workers: dict[str, subprocess.Popen] = {}

    def start(self, workers: dict[str, list[str]]) -> "Cluster":
        self.ctl.start()
        port = (self.ctl_top / "run" / "xced.port").read_text().strip()
        for name, extra in workers.items():
            wtop = self.top / name
            wtop.mkdir(parents=True, exist_ok=True)
            log = open(wtop / "worker.log", "wb")
            self.workers[name] = subprocess.Popen(
                [XCED, "--roles", "worker", "--controller", f"tcp://127.0.0.1:{port}", "--host-name", name,
                 "--topdir", str(wtop), *extra], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            hosts = {h["name"]: h["status"] for h in json.loads(self.ctl.cli("hosts", "--json", check=True).stdout)["hosts"]}
            if all(hosts.get(n) == "ok" for n in workers):
                return self
            for n, p in self.workers.items():
                assert p.poll() is None, (self.top / n / "worker.log").read_text()
            assert time.monotonic() < deadline, f"workers did not join: {hosts}"
            time.sleep(0.1)

    def stop(self) -> None:
        stop_processes(self.workers.values())
        self.ctl.stop()
        for d in [self.ctl_top, *(self.top / n for n in self.workers)]:
            kill_job_processes(d)


@pytest.fixture
def cluster():
    top = short_tmpdir("xce-mh-")
    c = Cluster(top)
    try:
        yield c.start({"h1": ["--slots", "2", "--memory", "8GB"],
                       "h2": ["--slots", "4", "--memory", "4GB", "--resource", "gpu=2", "--attribute", "type=x86_64"],
                       "h3": ["--slots", "4", "--memory", "4GB", "--attribute", "type=aarch64"]})
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_workers_join_with_their_resources(cluster):
    hosts = {h["name"]: h for h in json.loads(cluster.ctl.cli("hosts", "--json", check=True).stdout)["hosts"]}
    assert hosts["h2"]["slots"] == 4 and hosts["h2"]["memory_mb"] == 4096
    assert hosts["h2"]["resources"] == {"gpu": 2.0} and hosts["h2"]["attributes"] == {"type": "x86_64"}
    assert hosts["h3"]["attributes"] == {"type": "aarch64"} and hosts["h1"]["slots"] == 2
    h2 = [ln for ln in cluster.ctl.cli("hosts", check=True).stdout.splitlines() if ln.split()[:1] == ["h2"]]
    assert h2 and "type=x86_64 gpu=2" in h2[0] and "gpu=2.0" not in h2[0], h2
    # issue 16: a worker stopped cleanly takes its run/xced.pid with it
    w = cluster.workers["h3"]
    assert (cluster.top / "h3" / "run" / "xced.pid").read_text() == f"{w.pid}\n"
    w.send_signal(signal.SIGTERM)
    assert w.wait(15) == 0
    assert not (cluster.top / "h3" / "run" / "xced.pid").exists()


def test_job_across_hosts_host_file_and_launch(cluster, tmp_path):
    """A 9-task job spans h2, h3 and h1; its script runs on the first host, sees LSB_HOSTS,
    LSB_MCPU_HOSTS and the host file; `xcecli launch` runs a task on another host and its
    output and exit status come back; XCE_TASK_STARTER runs a command once per slot."""
    script = tmp_path / "mpi_like.sh"
    script.write_text(
        "#!/bin/sh\n"
        "echo mcpu=$LSB_MCPU_HOSTS\n"
        "echo hosts=$LSB_HOSTS\n"
        "echo file=$(cat $LSB_DJOB_HOSTFILE | tr '\\n' ' ')\n"
        "other=$(echo $LSB_MCPU_HOSTS | cut -d' ' -f3)\n"
        "xcecli launch $other -- sh -c 'echo task on $XCE_TASK_HOST; exit 4'\n"
        "echo launch=$?\n"
        "$XCE_TASK_STARTER sh -c 'echo rank@$XCE_TASK_HOST' | sort | uniq -c | awk '{print $2\"x\"$1}' | tr '\\n' ' '\n"
        "echo\n")
    script.chmod(0o755)
    env_path = f"{Path(XCED).parent}:{os.environ['PATH']}"
    r = subprocess.run([str(Path(XCED).parent / "xcecli"), "submit", "-K", "-n", "9", "-o", str(tmp_path / "out"),
                        str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=90,
                       env={**os.environ, "XCE_TOPDIR": str(cluster.ctl_top), "PATH": env_path})
    assert r.returncode == 0, r.stderr
    lines = dict(line.split("=", 1) for line in (tmp_path / "out").read_text().splitlines() if "=" in line)
    assert lines["mcpu"] == "h2 4 h3 4 h1 1"  # most free slots first (RES-4), ties by name
    assert lines["hosts"] == "h2 h2 h2 h2 h3 h3 h3 h3 h1"
    assert lines["file"].split() == lines["hosts"].split()
    assert "task on h3" in (tmp_path / "out").read_text()
    assert lines["launch"] == "4"
    assert (tmp_path / "out").read_text().strip().splitlines()[-1].split() == ["rank@h1x1", "rank@h2x4", "rank@h3x4"]


def test_kill_of_a_two_host_job_leaves_no_process(cluster, tmp_path):
    """The kill reaches every host: the script on the first host and a task on the other."""
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "two.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"echo $$ > {pids}/script\n"
        f"xcecli launch h3 -- sh -c 'echo $$ > {pids}/task; exec sleep 300' &\n"
        "sleep 300\n")
    script.chmod(0o755)
    d = cluster.ctl
    env = {**os.environ, "XCE_TOPDIR": str(cluster.ctl_top), "PATH": f"{Path(XCED).parent}:{os.environ['PATH']}"}
    r = subprocess.run([str(Path(XCED).parent / "xcecli"), "submit", "--parsable", "-n", "8", str(script)],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    jid = int(r.stdout)
    deadline = time.monotonic() + 30
    while not ((pids / "script").exists() and (pids / "task").exists()):
        assert time.monotonic() < deadline, d.show(jid)
        time.sleep(0.05)
    job = d.show(jid)
    assert [a["host"] for a in job["elements"][0]["alloc"]] == ["h2", "h3"]
    script_pid, task_pid = int((pids / "script").read_text()), int((pids / "task").read_text())
    assert _alive(script_pid) and _alive(task_pid)
    d.cli("kill", str(jid), check=True)
    d.wait_state(jid, ("EXIT",))
    deadline = time.monotonic() + 15
    while _alive(script_pid) or _alive(task_pid):
        assert time.monotonic() < deadline, "a process of the killed job survived"
        time.sleep(0.05)


def test_job_end_ends_tasks_on_other_hosts(cluster, tmp_path):
    """The job ends when its first host's script ends; its tasks elsewhere are then ended."""
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "leave.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"xcecli launch h3 -- sh -c 'echo $$ > {pids}/task; exec sleep 300' &\n"
        f"while [ ! -s {pids}/task ]; do sleep 0.05; done\n"
        "exit 0\n")
    script.chmod(0o755)
    env = {**os.environ, "XCE_TOPDIR": str(cluster.ctl_top), "PATH": f"{Path(XCED).parent}:{os.environ['PATH']}"}
    r = subprocess.run([str(Path(XCED).parent / "xcecli"), "submit", "-K", "-n", "8", str(script)],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    task_pid = int((pids / "task").read_text())
    deadline = time.monotonic() + 15
    while _alive(task_pid):
        assert time.monotonic() < deadline, "the task on h3 outlived its job"
        time.sleep(0.05)


def test_launch_refused_outside_the_job(cluster, tmp_path):
    d = cluster.ctl
    jid = d.submit("-n", "6", "--", "sleep", "30", cwd=tmp_path)
    d.wait_state(jid, ("RUN",))
    r = d.cli("launch", "h2", "--", "true")
    assert r.returncode == 2 and "not inside a job" in r.stderr
    r = d.cli("launch", "--job", str(jid), "h9", "--", "true")
    assert r.returncode == 1 and "not one of job" in r.stderr
    r = d.cli("launch", "--job", str(jid), "h2", "--", "true", user="mallory")
    assert r.returncode == 1 and "belongs to" in r.stderr
    r = d.cli("launch", "--job", str(jid), "h2", "--", "sh", "-c", "echo hi; exit 3")
    assert r.returncode == 3 and r.stdout == "hi\n"
    d.cli("kill", str(jid), check=True)


def test_worker_restart_reattaches(cluster, tmp_path):
    """JOB-8 on a worker host: its xced is SIGKILLed and restarted; the job it runs is found again."""
    d = cluster.ctl
    jid = d.submit("-n", "4", "--", "sh", "-c", "sleep 2; exit 5", cwd=tmp_path)
    j = d.wait_state(jid, ("RUN",))
    first = j["elements"][0]["alloc"][0]["host"]
    assert first in ("h2", "h3")
    w = cluster.workers[first]
    w.send_signal(signal.SIGKILL)
    w.wait(10)
    port = (cluster.ctl_top / "run" / "xced.port").read_text().strip()
    extra = ["--slots", "4", "--memory", "4GB"]
    cluster.workers[first] = subprocess.Popen(
        [XCED, "--roles", "worker", "--controller", f"tcp://127.0.0.1:{port}", "--host-name", first,
         "--topdir", str(cluster.top / first), *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    j = d.wait_state(jid, ("EXIT", "DONE"), timeout=30)
    assert j["state"] == "EXIT" and j["elements"][0]["exit_code"] == 5


def _hosts_of(job: dict) -> list[tuple[str, int]]:
    return [(a["host"], a["slots"]) for a in job["elements"][0]["alloc"]]


def test_task_range_runs_with_what_fits_bug_1931(cluster, tmp_path):
    """RES-3: `-n 2,5` with only 2 free slots runs with 2 (bug-1931: it used to pend)."""
    d = cluster.ctl
    big = d.submit("-n", "8", "--", "sleep", "30", cwd=tmp_path)  # fills h2 and h3
    assert sorted(_hosts_of(d.wait_state(big, ("RUN",)))) == [("h2", 4), ("h3", 4)]
    jid = d.submit("-n", "2,5", "-o", "ntasks.txt", "--", "sh", "-c", "echo $XCE_NTASKS", cwd=tmp_path)
    j = d.wait_state(jid, ("DONE", "EXIT"))
    assert j["state"] == "DONE" and _hosts_of(j) == [("h1", 2)]
    assert (tmp_path / "ntasks.txt").read_text() == "2\n"
    d.cli("kill", str(big), check=True)


def test_ptile_hosts_block_same_and_rusage(cluster, tmp_path):
    """RES-4, RES-5, RES-2 on real hosts: ptile=4 -> 4+4 on two hosts (host file checked from
    inside the job); hosts=1 pends with a clear reason when no host has enough; block=2;
    same[type]; rusage gpu reserved while running and released at the end."""
    d = cluster.ctl
    jid = d.submit("-n", "8", "-R", "span[ptile=4]", "-o", "hf.txt", "--", "sh", "-c",
                   "sort $LSB_DJOB_HOSTFILE | uniq -c | awk '{print $2\":\"$1}' | tr '\\n' ' '", cwd=tmp_path)
    j = d.wait_state(jid, ("DONE",))
    assert sorted(_hosts_of(j)) == [("h2", 4), ("h3", 4)]
    assert (tmp_path / "hf.txt").read_text().split() == ["h2:4", "h3:4"]

    r = d.cli("submit", "-n", "5", "-R", "span[hosts=1]", "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "can never start" in r.stderr  # no host has 5 slots at all (MERGE-2)
    half = d.submit("-n", "4", "-R", "span[ptile=2]", "--", "sleep", "30", cwd=tmp_path)
    assert sorted(_hosts_of(d.wait_state(half, ("RUN",)))) == [("h2", 2), ("h3", 2)]
    one = d.submit("-n", "3", "-R", "span[hosts=1]", "--", "true", cwd=tmp_path)
    deadline = time.monotonic() + 10
    while not (w := json.loads(d.cli("why", str(one), "--json", check=True).stdout))["hosts"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert w["state"] == "PEND" and w["main"] == "span[hosts=1]: no host has 3 free slots"
    assert "h2: slots 2 free of 4, needs 3" in [h["message"] for h in w["hosts"]]
    d.cli("kill", str(half), check=True)
    assert d.wait_state(one, ("DONE",))["state"] == "DONE"  # starts once a host has 3 free

    blk = d.submit("-n", "6", "-R", "span[block=2]", "--", "true", cwd=tmp_path)
    assert all(n % 2 == 0 for _, n in _hosts_of(d.wait_state(blk, ("DONE",))))

    r = d.cli("submit", "-n", "6", "-R", "same[type]", "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "same[type]" in r.stderr  # x86_64 has 4 slots, aarch64 4: never 6
    hold = d.submit("-n", "1", "-R", "select[type==x86_64]", "--", "sleep", "30", cwd=tmp_path)
    d.wait_state(hold, ("RUN",))
    same4 = d.submit("-n", "2,4", "-R", "same[type]", "--", "true", cwd=tmp_path)
    assert _hosts_of(d.wait_state(same4, ("DONE",))) == [("h3", 4)]  # the bigger group, all aarch64
    d.cli("kill", str(hold), check=True)

    gpu = d.submit("-n", "2", "-R", "select[gpu>=1 && type==x86_64] order[-slots] rusage[mem=1GB:gpu=1]",
                   "--", "sleep", "30", cwd=tmp_path)
    j = d.wait_state(gpu, ("RUN",))
    assert _hosts_of(j) == [("h2", 2)]
    hosts = {h["name"]: h for h in json.loads(d.cli("hosts", "--json", check=True).stdout)["hosts"]}
    assert hosts["h2"]["memory_used_mb"] == 2048 and hosts["h2"]["slots_used"] == 2
    more = d.submit("-R", "rusage[gpu=1]", "--", "true", cwd=tmp_path)  # both gpus are held
    deadline = time.monotonic() + 10
    while not (w := json.loads(d.cli("why", str(more), "--json", check=True).stdout))["hosts"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert "h2: gpu 0 free of 2, needs 1" in [h["message"] for h in w["hosts"]]
    d.cli("kill", str(gpu), check=True)
    d.wait_state(gpu, ("EXIT",))
    assert d.wait_state(more, ("DONE",))["state"] == "DONE"  # released at the end
    hosts = {h["name"]: h for h in json.loads(d.cli("hosts", "--json", check=True).stdout)["hosts"]}
    assert hosts["h2"]["memory_used_mb"] == 0 and hosts["h2"]["slots_used"] == 0


def test_dry_run_json_and_bad_resreq(cluster, tmp_path):
    d = cluster.ctl
    r = d.cli("submit", "--dry-run", "--json", "-n", "2", "-R", "select[gpu>=1 && type==x86_64] order[-slots]",
              "-R", "rusage[mem=1GB:gpu=1] span[ptile=2]", "--", "true", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    eff = json.loads(r.stdout)["effective"]
    assert eff["resreq"] == {
        "kind": "simple", "select": "gpu >= 1 && type == x86_64", "order": [{"name": "slots", "desc": True}],
        "rusage": [[{"name": "mem", "value": 1024, "unit": "MB", "per": None, "duration_s": None, "decay": None},
                    {"name": "gpu", "value": 1, "unit": None, "per": None, "duration_s": None, "decay": None}]],
        "span": {"ptile": 2, "hosts": None, "block": None}, "same": [], "parts": []}
    r = d.cli("submit", "--dry-run", "-n", "8", "-R", "rusage[mem=4GB] span[ptile=4]", "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "can never start" in r.stderr  # 4 x 4 GB on a 4 GB host
    jobs = json.loads(d.cli("jobs", "-u", "all", "-a", "--json", check=True).stdout)["jobs"]
    assert jobs == []  # a dry run submits nothing
    r = d.cli("submit", "-R", "rusage=[mem=20MB]", "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "column 7: expected '[' after 'rusage'" in r.stderr
    r = d.cli("submit", "-n", "2", "-R", "span[ptile=4]", "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "can never start" in r.stderr and "ptile" in r.stderr
    r = d.cli("submit", "-R", "2*{select[type==x86_64]} + 1*{span[hosts=1]}", "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "span[hosts=1] is not allowed inside a compound request" in r.stderr
    r = d.cli("submit", "-K", "-o", "c.txt", "-R", "2*{select[type==x86_64]} + 1*{select[type==aarch64]}", "--",
              "sh", "-c", "echo $LSB_MCPU_HOSTS", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "c.txt").read_text().split() == ["h2", "2", "h3", "1"]  # compound: 2 x86_64 + 1 aarch64
    r = d.cli("submit", "-R", "select[type==sparc]", "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "can never start" in r.stderr


def test_duplicate_host_name_is_refused(cluster, tmp_path):
    """A second h1 is refused; it tries again with a back-off (it may be h1's own old channel,
    which the controller drops when its heartbeats stop) and says why once, not at every try
    (issue 16: it wrote two lines a second)."""
    port = (cluster.ctl_top / "run" / "xced.port").read_text().strip()
    log = tmp_path / "imp.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([XCED, "--roles", "worker", "--controller", f"tcp://127.0.0.1:{port}", "--host-name",
                                 "h1", "--topdir", str(tmp_path / "imp"), "--slots", "1"], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while "already joined" not in log.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.1)
        time.sleep(4)  # tries at 0.5, 1, 2 s... meanwhile
        assert proc.poll() is None, log.read_text()  # it keeps trying
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    text = log.read_text()
    assert text.count("already joined") == 1, text
    hosts = {h["name"]: h for h in json.loads(cluster.ctl.cli("hosts", "--json", check=True).stdout)["hosts"]}
    assert hosts["h1"]["status"] == "ok" and hosts["h1"]["slots"] == 2  # the real h1 kept its place


def test_controller_restart_keeps_port_and_counts(cluster, tmp_path):
    """The controller restarts while a two-host job runs and ends: the workers rejoin on the
    same port, the end is recorded, and no host is left with negative use."""
    d = cluster.ctl
    port = (cluster.ctl_top / "run" / "xced.port").read_text().strip()
    gate = tmp_path / "gate"
    jid = d.submit("-n", "4", "-R", "span[ptile=2]", "--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done",
                   cwd=tmp_path)
    first = d.wait_state(jid, ("RUN",))["elements"][0]["alloc"][0]["host"]
    assert d.stop(signal.SIGTERM) == 0
    gate.touch()  # the job ends while the controller is down: wait for its supervisor's record
    status = cluster.top / first / "jobs" / str(jid) / "0" / "status.json"
    deadline = time.monotonic() + 30
    while not status.exists():
        assert time.monotonic() < deadline, "the job did not end while the controller was down"
        time.sleep(0.05)
    d.start()
    assert (cluster.ctl_top / "run" / "xced.port").read_text().strip() == port
    deadline = time.monotonic() + 30
    while True:
        hosts = {h["name"]: h for h in json.loads(d.cli("hosts", "--json", check=True).stdout)["hosts"]}
        if all(hosts.get(n, {}).get("status") == "ok" for n in ("h1", "h2", "h3")):
            break
        assert time.monotonic() < deadline, hosts
        time.sleep(0.1)
    assert d.wait_state(jid, ("DONE",))["state"] == "DONE"
    hosts = {h["name"]: h for h in json.loads(d.cli("hosts", "--json", check=True).stdout)["hosts"]}
    assert all(h["slots_used"] == 0 and h["njobs"] == 0 for h in hosts.values()), hosts
    r = d.cli("submit", "--dry-run", "--json", "-R", "rusage[mem=1GB:duration=5]", "--", "true", cwd=tmp_path)
    assert "holds every reservation for the life of the job" in json.loads(r.stdout)["warnings"][0]


HOST_HOOKS = """\
applications:
  hh:
    pre_host_exec: 'echo "pre_host $XCE_HOST_NTASKS $XCE_HOST_TASK_INDEX $XCE_JOB_HOST_DIR" >> $HOOKLOG'
    pre_job_exec: 'echo "pre_job $XCE_HOST_NTASKS" >> $HOOKLOG'
    post_job_exec: 'echo "post_job $XCE_JOB_EXIT_CODE" >> $HOOKLOG'
    post_host_exec: 'echo "post_host $XCE_JOB_EXIT_CODE $XCE_JOB_HOST_DIR" >> $HOOKLOG'
  hbad:
    pre_host_exec: '[ "$XCE_HOST_TASK_INDEX" = 0 ] || exit 3'
    post_host_exec: 'echo "post_host $XCE_JOB_HOST_DIR" >> $HOOKLOG'
"""


def test_host_hooks_on_every_host_of_the_job(tmp_path):
    """JOB-6: pre_host_exec/post_host_exec once on each host of a job, seeing that host's
    XCE_JOB_HOST_DIR, XCE_HOST_NTASKS and XCE_HOST_TASK_INDEX; pre_job/post_job once on the
    first host. A pre_host_exec failing on another host ends the job EXIT naming hook and
    host, and post_host_exec still runs."""
    top = short_tmpdir("xce-hh-")
    c = Cluster(top)
    (c.ctl_top / "config" / "applications.yaml").write_text(HOST_HOOKS)
    log = tmp_path / "hooks.txt"
    try:
        c.start({"h1": ["--slots", "2"], "h2": ["--slots", "2"]})
        d = c.ctl
        r = d.cli("submit", "-K", "-a", "hh", "-n", "4", "-R", "span[ptile=2]", "--env", f"HOOKLOG={log}",
                  "--", "sh", "-c", f"echo job >> {log}", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        lines = log.read_text().splitlines()
        words = [ln.split()[0] for ln in lines]
        assert words == ["pre_host", "pre_host", "pre_job", "job", "post_job", "post_host", "post_host"], lines
        pre = sorted(ln.split()[1:] for ln in lines[:2])
        assert [p[:2] for p in pre] == [["2", "0"], ["2", "2"]]  # 2 tasks each; first task index 0 and 2
        assert {p[2].split("/jobs/")[0] for p in pre} == {str(top / "h1"), str(top / "h2")}  # each host's own dir
        assert {ln.split()[2].split("/jobs/")[0] for ln in lines[5:]} == {str(top / "h1"), str(top / "h2")}
        assert lines[4] == "post_job 0" and all(ln.split()[1] == "0" for ln in lines[5:])
        log.unlink()
        jid = d.submit("-a", "hbad", "-n", "4", "-R", "span[ptile=2]", "--env", f"HOOKLOG={log}", "--",
                       "sh", "-c", f"echo job >> {log}", cwd=tmp_path)
        j = d.wait_state(jid, ("DONE", "EXIT"), timeout=30)
        assert j["state"] == "EXIT"
        reason = j["elements"][0]["exit_reason"]
        assert reason.startswith("pre_host_exec exited 3 on h"), reason
        other = reason.rsplit(" ", 1)[1]
        assert log.read_text().splitlines() == [f"post_host {top / other}/jobs/{jid}/0"]  # the job never ran
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)


def test_a_kill_asked_while_the_worker_is_away_reaches_it(cluster, tmp_path):
    """D-8: the job's worker is stopped (SIGSTOP) when the kill is asked, so it never carries
    it out, and is then SIGKILLed; the kill is acknowledged, and reaches the job when the
    worker host joins again: the job ends killed and its processes are gone."""
    d = cluster.ctl
    jid = d.submit("-n", "4", "--", "sleep", "60", cwd=tmp_path)
    j = d.wait_state(jid, ("RUN",))
    first = j["elements"][0]["alloc"][0]["host"]
    w = cluster.workers[first]
    job_json = cluster.top / first / "jobs" / str(jid) / "0" / "job.json"
    deadline = time.monotonic() + 20
    while not job_json.exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    pgid = json.loads(job_json.read_text())["pgid"]
    w.send_signal(signal.SIGSTOP)
    r = d.cli("kill", str(jid))
    assert r.returncode == 0, r.stderr  # acknowledged: the kill is asked (its action is stored)
    w.send_signal(signal.SIGKILL)
    w.wait(10)
    os.killpg(pgid, 0)  # the job still runs: nobody carried the kill out
    port = (cluster.ctl_top / "run" / "xced.port").read_text().strip()
    cluster.workers[first] = subprocess.Popen(
        [XCED, "--roles", "worker", "--controller", f"tcp://127.0.0.1:{port}", "--host-name", first,
         "--topdir", str(cluster.top / first), "--slots", "4", "--memory", "4GB"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    j = d.wait_state(jid, ("EXIT", "DONE"), timeout=30)
    assert j["state"] == "EXIT" and "killed" in (j["elements"][0]["exit_reason"] or ""), j
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)

"""Faults the daemon survives (issue 11, D-8, D-3, JOB-8): a store whose commits fail, a store
another process has locked, a disk that is full. Each test injects the fault into a real
xced, shows what users see while it lasts, clears it, and shows that the cluster runs the
waiting jobs with no restart and records every job's real exit code and end time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import (FAULTY_ENV, FAULTY_XCED, Daemon, fill_disk, kill_job_processes, short_tmpdir, tmpfs_at,
                            write_config)


def _faulty(top: Path, **cfg) -> Daemon:
    write_config(top, **cfg)
    return Daemon(top, cmd=FAULTY_XCED, env=FAULTY_ENV)


def _gated(top: Path, code: int) -> list[str]:
    """A job that runs until the test opens its gate (`_open_gate`), then exits `code`: it
    ends when the test says, never after a time."""
    return ["--", "sh", "-c", f"while [ ! -e {top / 'gate'} ]; do sleep 0.02; done; exit {code}"]


def _open_gate(top: Path) -> None:
    (top / "gate").touch()


def _wait_log(d: Daemon, text: str) -> None:
    """Wait until the daemon's log says `text` (a state the daemon reports, not a time)."""
    deadline = time.monotonic() + 20
    while text not in d.log.read_text():
        assert time.monotonic() < deadline, f"the log never said {text!r}:\n{d.log.read_text()}"
        time.sleep(0.05)


def _ended_on_disk(top: Path, job: int) -> dict:
    """The end the job's supervisor recorded (status.json), once it is there."""
    path = top / "jobs" / str(job) / "0" / "status.json"
    deadline = time.monotonic() + 20
    while not path.exists():
        assert time.monotonic() < deadline, f"job {job} did not end"
        time.sleep(0.05)
    return json.loads(path.read_text())


def _keepalive_answers(top: Path, requests: list[tuple[str, str, dict | None]]) -> list[tuple[int, dict]]:
    """Send `requests` one after the other on ONE connection (HTTP keep-alive)."""
    from tests.uds_http import UnixConnection as _UnixConnection

    conn = _UnixConnection(str(top / "run" / "xced.sock"), 10)
    out = []
    try:
        for method, path, body in requests:
            conn.request(method, "/xce/v1" + path, body=json.dumps(body).encode() if body is not None else None,
                         headers={"Content-Type": "application/json", "X-XCE-As-User": "alice"})
            resp = conn.getresponse()
            out.append((resp.status, json.loads(resp.read())))
    finally:
        conn.close()
    return out


@pytest.fixture
def faulty(topdir):
    d = _faulty(topdir)
    try:
        d.start()
        yield d
    finally:
        d.stop()
        kill_job_processes(topdir)


def test_failed_commits_change_nothing_and_the_cluster_resumes_when_they_stop(faulty):
    d, top = faulty, faulty.top
    fault = top / "state" / "FAULT"
    a = d.submit(*_gated(top, 7))
    d.wait_state(a, ("RUN",))
    fault.write_text("full")
    r = d.cli("submit", "--", "true")  # the store refuses it: the user is told, nothing is recorded
    assert r.returncode == 3, r
    assert "the disk holding" in r.stderr and "is full" in r.stderr and "retry" in r.stderr, r.stderr
    r = d.cli("kill", str(a))
    assert r.returncode == 3 and "is full" in r.stderr, r.stderr
    assert d.cli("jobs", "-a").returncode == 0  # reads answer from memory meanwhile
    _open_gate(top)
    ended = _ended_on_disk(top, a)  # the job's end happens while the store refuses every commit
    _wait_log(d, f"the store refused a write (the end of {a})")  # its report is kept and retried
    assert d.show(a)["state"] == "RUN"  # nothing recorded: it still holds its slot
    # an error answer leaves the connection open: the next request on it is answered
    (s1, b1), (s2, b2) = _keepalive_answers(top, [("POST", "/jobs", {"argv": ["true"], "cwd": "/tmp"}),
                                                  ("GET", "/info", None)])
    assert s1 == 503 and b1["error"]["code"] == "store_unavailable" and s2 == 200, (b1, b2)
    fault.unlink()  # the disk has room again: no restart
    j = d.wait_state(a, ("EXIT",))
    e = j["elements"][0]
    assert e["exit_code"] == 7 and e["end_time"] == pytest.approx(ended["end_time"], abs=1e-6)
    hist = json.loads(d.cli("hist", str(a), "--json", check=True).stdout)["events"]
    end_event = [ev for ev in hist if ev["to_state"] == "EXIT"][-1]
    assert end_event["time"] == pytest.approx(ended["end_time"], abs=1e-6)  # the real end time (JOB-8)
    b = d.submit("--", "true")
    assert d.wait_state(b, ("DONE",))["state"] == "DONE"


def test_the_nth_commit_failing_is_retried_and_logged_once(faulty):
    """The next 2 commits fail: a job's end, then its first retry. The end is recorded at the
    third try with its real exit code, the daemon logs the fault once, later jobs run."""
    d, top = faulty, faulty.top
    a = d.submit(*_gated(top, 4))
    d.wait_state(a, ("RUN",))
    (top / "state" / "FAULT").write_text("io 2")  # nothing else commits until the job ends
    _open_gate(top)
    j = d.wait_state(a, ("EXIT",))
    assert j["elements"][0]["exit_code"] == 4
    assert not (top / "state" / "FAULT").exists()  # both failures were spent on that end
    b = d.submit("--", "true")
    assert d.wait_state(b, ("DONE",))["state"] == "DONE"
    log = d.log.read_text()
    assert log.count("the store refused a write") == 1, log
    assert "the store takes writes again: 1 kept write(s) applied" in log, log


def test_a_store_locked_by_another_process_never_freezes_the_daemon(topdir, monkeypatch):
    monkeypatch.setenv("XCE_CONNECT_TIMEOUT", "1")  # the CLI retries store_busy for 1 s (JOB-10), then exit 3
    write_config(topdir)
    (topdir / "config" / "xce.yaml").write_text((topdir / "config" / "xce.yaml").read_text()
                                                + "store_busy_timeout: 0.5\n")
    d = Daemon(topdir).start()
    holder = None
    try:
        a = d.submit(*_gated(topdir, 3))
        d.wait_state(a, ("RUN",))
        holder = subprocess.Popen(
            [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
             "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()",
             str(topdir / "state" / "xce.db")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "locked"
        r = d.cli("submit", "--", "true")
        assert r.returncode == 3 and "store busy (locked by another process), retry" in r.stderr, r.stderr
        # answered from memory while the lock is held (it is held until the test lets go, so a
        # read that waited for it would never come back); the loop's lag is bench/run.py store_busy
        assert d.cli("hosts").returncode == 0 and d.cli("jobs", "-a").returncode == 0
        _open_gate(topdir)
        ended = _ended_on_disk(topdir, a)
        assert d.show(a)["state"] == "RUN"
        holder.stdin.close()  # the other process lets go of the lock
        holder.wait(10)
        j = d.wait_state(a, ("EXIT",))
        assert j["elements"][0]["exit_code"] == 3
        assert j["elements"][0]["end_time"] == pytest.approx(ended["end_time"], abs=1e-6)
        b = d.submit("--", "true")
        assert d.wait_state(b, ("DONE",))["state"] == "DONE"
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
            holder.wait()
        d.stop()


def test_xced_refuses_to_start_when_it_cannot_write_its_store(topdir):
    d = _faulty(topdir)
    d.start().stop()  # the store exists
    (topdir / "state" / "FAULT").write_text("io")
    with pytest.raises(RuntimeError) as err:
        d.start()
    log = str(err.value)
    assert "cannot write the store" in log and "I/O error" in log and "Traceback" not in log, log


@pytest.fixture
def small_disk():
    """A 3 MB tmpfs as the TopDir's state directory; skipped only when the mount is refused."""
    top = short_tmpdir()
    state = top / "state"
    state.mkdir(mode=0o700)
    try:
        with tmpfs_at(state, "3m", "0700"):
            try:
                yield top
            finally:
                kill_job_processes(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_a_full_disk_is_named_and_survived(small_disk):
    top = small_disk
    write_config(top)
    d = Daemon(top).start()
    try:
        a = d.submit(*_gated(top, 5))
        d.wait_state(a, ("RUN",))
        filler = top / "state" / "filler"
        fill_disk(filler)
        r = None
        for _ in range(50):  # SQLite may still have room in pages it holds: submit until it has none
            r = d.cli("submit", "--", "true")
            if r.returncode != 0:
                break
        assert r.returncode == 3 and "is full" in r.stderr and str(top / "state") in r.stderr, r.stderr
        _open_gate(top)
        _ended_on_disk(top, a)
        os.unlink(filler)  # room again: no restart
        j = d.wait_state(a, ("EXIT",))
        assert j["elements"][0]["exit_code"] == 5
        b = d.submit("--", "true")
        assert d.wait_state(b, ("DONE",))["state"] == "DONE"
    finally:
        d.stop()


def test_a_failing_start_backs_off_then_holds_and_logs_once(topdir):
    """DISPATCH-2: a start that fails (the job's directory cannot be made) sends the job back
    to PEND with a reason naming the failure, waits a doubling backoff, and after
    max_dispatch_failures in a row holds it; the log has one line for that failure."""
    write_config(topdir)
    (topdir / "config" / "xce.yaml").write_text((topdir / "config" / "xce.yaml").read_text()
                                                + "max_dispatch_failures: 3\n")
    d = Daemon(topdir).start()
    try:
        a = d.submit("--", "sleep", "30")  # find the next job ID, then block its directory
        d.cli("kill", str(a), check=True)
        b_id = a + 1
        (topdir / "jobs").mkdir(exist_ok=True)
        (topdir / "jobs" / str(b_id)).write_text("not a directory")
        b = d.submit("--", "true")
        assert b == b_id
        j = d.wait_state(b, ("PSUSP",), timeout=30)
        e = j["elements"][0]
        assert e["holds"] == ["system"]
        assert "Held by the system after 3 failed dispatches in a row: cannot launch on h1" in \
            e["pend_reason"]["main"], e
        kinds = [ev["kind"] for ev in json.loads(d.cli("hist", str(b), "--json", check=True).stdout)["events"]]
        assert kinds.count("DISPATCH") == 3 and kinds.count("DISPATCH_FAILED") == 3 and kinds[-1] == "HOLD", kinds
        times = [ev["time"] for ev in json.loads(d.cli("hist", str(b), "--json", check=True).stdout)["events"]
                 if ev["kind"] == "DISPATCH"]
        assert times[1] - times[0] >= 1.0 and times[2] - times[1] >= 2.0  # the backoff: 1 s, then 2 s
        assert d.log.read_text().count("cannot launch on h1") == 1, d.log.read_text()
        (topdir / "jobs" / str(b_id)).unlink()  # the fault is gone: an admin releases the job
        d.cli("release", str(b), user="admin", check=True)
        assert d.wait_state(b, ("DONE",))["state"] == "DONE"
    finally:
        d.stop()


def _launcher_of(d: Daemon):
    """The supervisor launcher the daemon started (its child, found by the daemon's PID)."""
    import psutil

    deadline = time.monotonic() + 10
    while True:
        for child in psutil.Process(d.proc.pid).children():
            if "xced.worker.launcher" in " ".join(child.cmdline()):
                return child
        assert time.monotonic() < deadline, "no launcher"
        time.sleep(0.05)


def _launch_timeout_config(top: Path, seconds: float) -> None:
    write_config(top)
    (top / "config" / "xce.yaml").write_text((top / "config" / "xce.yaml").read_text()
                                             + f"launch_timeout: {seconds}\n")


def test_a_stopped_launcher_is_replaced_and_the_job_dispatched_again(topdir):
    """D-8: with the supervisor launcher SIGSTOPped, the daemon keeps answering; after the
    launch timeout the launcher is replaced and the job runs; it never ends EXIT."""
    import signal as sig

    _launch_timeout_config(topdir, 1.5)
    d = Daemon(topdir).start()
    launcher = None
    try:
        first = d.submit("--", "true")
        d.wait_state(first, ("DONE",))
        launcher = _launcher_of(d)
        launcher.send_signal(sig.SIGSTOP)
        b = d.submit("--", "true")
        assert d.cli("jobs", "-a").returncode == 0  # answered while the launch waits
        j = d.wait_state(b, ("DONE", "EXIT"), timeout=30)
        assert j["state"] == "DONE", j
        hist = json.loads(d.cli("hist", str(b), "--json", check=True).stdout)["events"]
        failed = [ev for ev in hist if ev["kind"] == "DISPATCH_FAILED"]
        assert failed and "the supervisor launcher did not answer in 1.5 s" in failed[0]["reason"], hist
        assert not launcher.is_running() or launcher.status() == "zombie"  # the stopped one was killed
        assert _launcher_of(d).pid != launcher.pid
    finally:
        if launcher is not None and launcher.is_running():
            launcher.kill()
        d.stop()


@pytest.mark.parametrize("launcher_fate", ["killed", "continued"])
def test_a_job_whose_supervisor_never_started_pends_again_after_a_crash_and_runs_once(topdir, tmp_path,
                                                                                       launcher_fate):
    """D-8, JOB-8: the daemon is killed while a launch hangs (its launcher stopped); after the
    restart the job, which never ran, pends again and runs: it is not recorded EXIT
    "supervisor lost". The stopped launcher outlives the daemon in its own session: killed,
    or continued once the restarted daemon has dispatched the job again, when it still holds
    the old launch request. Continued, it forks nothing (its daemon is gone), so the job's
    command runs once, not twice."""
    import signal as sig

    _launch_timeout_config(topdir, 60)
    d = Daemon(topdir).start()
    launcher = None
    try:
        d.wait_state(d.submit("--", "true"), ("DONE",))
        launcher = _launcher_of(d)
        launcher.send_signal(sig.SIGSTOP)
        b = d.submit("--", "sh", "-c", "echo ran >> runs", cwd=tmp_path)
        d.wait_state(b, ("RUN",))  # dispatched; its launch hangs
        assert (topdir / "jobs" / str(b) / "0" / "spec.json").exists()
        d.stop(sig.SIGKILL)
        if launcher_fate == "killed":
            launcher.kill()  # by its PID
        d.start()
        if launcher_fate == "continued":
            deadline = time.monotonic() + 30
            while "DISPATCH_FAILED" not in d.cli("hist", str(b), check=True).stdout:
                assert time.monotonic() < deadline, d.cli("hist", str(b)).stdout
                time.sleep(0.05)
            launcher.send_signal(sig.SIGCONT)
            launcher.wait(10)  # it ends, having forked nothing
        j = d.wait_state(b, ("DONE", "EXIT"), timeout=30)
        assert j["state"] == "DONE" and j["elements"][0]["exit_code"] == 0, j
        kinds = [ev["kind"] for ev in json.loads(d.cli("hist", str(b), "--json", check=True).stdout)["events"]]
        assert "LOST" not in kinds and "DISPATCH_FAILED" in kinds, kinds
        time.sleep(0.5)  # a second copy, had one been forked, would have written by now
        assert (tmp_path / "runs").read_text() == "ran\n"
    finally:
        if launcher is not None and launcher.is_running():
            launcher.kill()
        d.stop()


def test_a_store_failing_in_the_middle_of_a_many_job_kill_ends_it_there_with_exit_3(faulty):
    """D-8, CLI-1, CLI-8: `bkill 0` sends its jobs in one POST /jobs/kill; when the store's
    commit fails after the first job's kill went in (an I/O error), the answer says so for
    that job and every later one, which are not tried: bkill prints the line of the job it
    killed, then the store's error, exit 3 (as a kill the store refuses exits alone); the
    other jobs are as they were. Once the disk is well again, `bkill 0` kills them."""
    d, top = faulty, faulty.top
    jobs = [d.submit("-H", "--", "true") for _ in range(3)]
    (top / "state" / "FAULT").write_text("io 1 1")  # the 1st commit goes in, the 2nd fails
    bkill = str(Path(sys.executable).parent / "bkill")
    env = {**os.environ, "XCE_TOPDIR": str(top)}
    r = subprocess.run([bkill, "0"], capture_output=True, text=True, env=env, timeout=60)
    assert (r.returncode, r.stdout) == (3, f"Job <{jobs[0]}> is being terminated\n"), (r.returncode, r.stdout, r.stderr)
    assert "disk I/O error" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert [d.show(j)["state"] for j in jobs] == ["EXIT", "PSUSP", "PSUSP"]
    assert not (top / "state" / "FAULT").exists()
    r = subprocess.run([bkill, "0"], capture_output=True, text=True, env=env, timeout=60)
    assert (r.returncode, r.stdout) == (0, "".join(f"Job <{j}> is being terminated\n" for j in jobs[1:])), r.stderr
    r = d.cli("kill", str(jobs[0]), str(jobs[1]))  # xcecli kill of several: one request, each answered
    assert r.returncode == 1 and r.stderr.count("has already finished") == 2, r.stderr
    more = [d.submit("-H", "--", "true") for _ in range(3)]
    (top / "state" / "FAULT").write_text("io 1 1")
    r = d.cli("kill", *map(str, more))
    assert (r.returncode, r.stdout) == (3, f"Job <{more[0]}>: kill requested: {more[0]}\n"), (r.stdout, r.stderr)
    assert "disk I/O error" in r.stderr and [d.show(j)["state"] for j in more] == ["EXIT", "PSUSP", "PSUSP"]


def test_a_bsub_script_refused_by_a_failing_commit_leaves_nothing_and_goes_in_after(faulty, tmp_path):
    """D-8, D-3, JOB-12: `bsub < script` while the store's commit fails (an I/O error) is told
    so (LSF's command, so LSF's exit 255 for any submission that failed), and neither the job nor
    its script is recorded; once the fault clears, the same pipe submits it and it runs, its
    #BSUB lines in force. bkill -r and bkill -d, which record at once, are refused alike and
    leave the job as it was."""
    from tests.e2e.test_lsf_bsub import LSF_LINE, bsub

    d, top = faulty, faulty.top
    fault = top / "state" / "FAULT"
    script = "#!/bin/sh\n#BSUB -J faulted\n#BSUB -o out.%J\necho ran\n"
    fault.write_text("io")
    r = bsub(d, input=script, cwd=tmp_path)
    assert r.returncode == 255 and "an I/O error on the store" in r.stderr, (r.stdout, r.stderr)
    assert json.loads(d.cli("jobs", "-a", "-u", "all", "--json", check=True).stdout)["jobs"] == []
    fault.unlink()
    r = bsub(d, input=script, cwd=tmp_path)
    m = LSF_LINE.fullmatch(r.stdout)
    assert r.returncode == 0 and m, (r.stdout, r.stderr)
    job = int(m.group(1))
    j = d.wait_state(job, ("DONE",))
    assert j["name"] == "faulted" and (tmp_path / f"out.{job}").read_text() == "ran\n"
    a = d.submit(*_gated(top, 0))
    d.wait_state(a, ("RUN",))
    fault.write_text("io")
    for opt in ("-r", "-d"):
        r = subprocess.run([str(Path(sys.executable).parent / "bkill"), opt, str(a)], capture_output=True,
                           text=True, env={**os.environ, "XCE_TOPDIR": str(top)}, timeout=60)
        assert r.returncode == 3 and "I/O error" in r.stderr, (opt, r.stdout, r.stderr)
    fault.unlink()
    assert d.show(a)["state"] == "RUN"
    _open_gate(top)
    assert d.wait_state(a, ("DONE",))["state"] == "DONE"

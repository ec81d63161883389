"""End to end, containment (JOB-1, JOB-2; issue 15): a real xced, the real xcecli, real job
processes that try to escape (a `setsid` child, a double-forked daemon). Each test runs once
with the subreaper alone (XCE_CONTAINMENT=subreaper, always) and once with a cgroup per job
(where this host lets root write a cgroup hierarchy; skipped elsewhere, saying why).

What the user sees: after `xcecli kill`, after the job's normal end, and after its
supervisor is SIGKILLed, no process of the job is left; the job ends (and its one slot is
given to the next job) only once they are gone; a memory hog in a `setsid` child ends the
job EXIT "memory limit"; `xcecli show` names the mechanism.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import Daemon, kill_job_processes, short_tmpdir, write_config
from xced.worker import contain

pytestmark = pytest.mark.timeout(90)

#: a job that leaves two processes behind, outside its process group and session: a
#: `setsid` child and a double-forked daemon (its parent exits at once, so it is orphaned);
#: it writes their pids, one a line, to the file named by $1, then does what $2 says
ESCAPES = ("setsid sh -c 'echo $$ >> \"$1\"; exec sleep 300' _ \"$1\" & "
           "sh -c 'setsid sh -c '\\''echo $$ >> \"$1\"; exec sleep 301'\\'' _ \"$1\" &' _ \"$1\"; "
           "eval \"$2\"")
#: (each pid is the one that becomes the sleep: `$!` may name a `setsid` that forks and exits)


def _cgroup_or_skip() -> None:
    if os.geteuid() != 0:
        pytest.skip("the cgroup path needs the daemon to run as root; the subreaper path runs here instead")
    if contain.detect("auto") == contain.MODE_SUBREAPER:
        pytest.skip("no writable cgroup hierarchy with the memory controller here (v2 with memory, or v1 "
                     "memory); the subreaper path runs here instead")


@pytest.fixture(scope="module", params=["subreaper", "cgroup"])
def cd(request):
    """(daemon, mode): one xced per containment mode, one host of one slot."""
    if request.param == "cgroup":
        _cgroup_or_skip()
        mode, env = contain.detect("auto"), {contain.ENV_CONTAINMENT: "auto"}
    else:
        mode, env = contain.MODE_SUBREAPER, {contain.ENV_CONTAINMENT: "subreaper"}
    top = short_tmpdir()
    write_config(top, slots=1)
    d = Daemon(top, env=env)
    try:
        d.start()
        yield d, mode
    finally:
        d.stop()
        for jd in (top / "jobs").glob("*/*"):
            contain.kill_recorded(str(jd), timeout=2.0)  # what a failed test left, by recorded pid
        kill_job_processes(top)
        shutil.rmtree(top, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False


def _pids(path: Path, n: int, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        lines = path.read_text().split() if path.exists() else []
        if len(lines) >= n:
            return [int(x) for x in lines]
        assert time.monotonic() < deadline, f"the job wrote {lines} to {path}, expected {n} pids"
        time.sleep(0.02)


def _escaping_job(d: Daemon, tmp_path: Path, then: str, *opts: str) -> tuple[int, list[int]]:
    pidfile = tmp_path / "pids"
    jid = d.submit(*opts, "--", "sh", "-c", ESCAPES, "job", str(pidfile), then, cwd=tmp_path)
    pids = _pids(pidfile, 2)
    assert all(_alive(p) for p in pids), "the escapes did not start"
    return jid, pids


def _cgroups_gone(d: Daemon, jid: int) -> None:
    rec = contain.read_record(str(d.top / "jobs" / str(jid) / "0")) or {}
    left = [c for c in rec.get("cgroups", []) if os.path.exists(c)]
    assert left == [], f"cgroups left behind: {left}"


def test_escaped_processes_end_with_the_job_and_its_slot_waits_for_them(cd, tmp_path):
    """A normal end: the job's main process exits 0 while its setsid child and its
    double-forked daemon still run. They are ended, the job is DONE only once they are gone,
    and the next job (pending on the one slot) starts only then. `show` names the mechanism."""
    d, mode = cd
    release = tmp_path / "release"
    jid, pids = _escaping_job(d, tmp_path, f"while [ ! -e {release} ]; do sleep 0.05; done")
    nxt = d.submit("--", "true", cwd=tmp_path)
    assert d.show(nxt)["state"] == "PEND"  # the one slot is the first job's
    release.touch()  # the main process ends now, exit 0; its escapes still run
    e = d.wait_state(jid, ("DONE", "EXIT"))["elements"][0]
    assert [p for p in pids if _alive(p)] == [], "escaped processes outlived the job's end"
    assert e["containment"] == mode and (e["state"], e["exit_code"]) == ("DONE", 0), e
    j = d.wait_state(nxt, ("DONE", "EXIT"))
    assert j["state"] == "DONE"
    out = d.cli("show", str(jid), check=True).stdout
    assert f"Containment:  {mode}" in out, out
    _cgroups_gone(d, jid)


def test_escaped_processes_end_with_a_kill(cd, tmp_path):
    """`xcecli kill` ends the escapes too (each signal of INT, TERM, KILL goes to every
    process of the job), and the job is EXIT only once they are gone."""
    d, mode = cd
    jid, pids = _escaping_job(d, tmp_path, "trap '' INT; sleep 300")
    d.wait_state(jid, ("RUN",))
    d.cli("kill", str(jid), check=True)
    e = d.wait_state(jid, ("DONE", "EXIT"))["elements"][0]
    assert [p for p in pids if _alive(p)] == [], "escaped processes outlived the kill"
    assert e["state"] == "EXIT" and e["exit_reason"].startswith("killed by"), e
    assert e["containment"] == mode
    _cgroups_gone(d, jid)


def test_a_memory_hog_in_a_setsid_child_ends_the_job_memory_limit(cd, tmp_path):
    """JOB-2: the memory limit counts every process of the job: 300 MB held by a setsid child
    under -M 100 ends the job EXIT "memory limit" (before, it ran to DONE). With a cgroup the
    kernel enforces the limit itself."""
    d, mode = cd
    hog = "import time; b = b'x' * (300 << 20); time.sleep(60)"
    jid = d.submit("-M", "100MB", "--", "sh", "-c", f"setsid python3 -c \"{hog}\" & sleep 60", cwd=tmp_path)
    j = d.wait_state(jid, ("DONE", "EXIT"), timeout=30)
    e = j["elements"][0]
    assert j["state"] == "EXIT" and e["exit_reason"] == "memory limit", e
    assert e["end_time"] - e["start_time"] < 10
    _cgroups_gone(d, jid)


def test_a_sigkilled_supervisor_leaves_no_process_of_its_job(cd, tmp_path):
    """The supervisor SIGKILLed: the worker ends every process of the job it recorded (and
    what is in the job's cgroup) before the job is EXIT "supervisor lost" and its slot free."""
    d, mode = cd
    # a memory limit makes the supervisor look at the job's processes every 0.5 s (else 2 s)
    jid, pids = _escaping_job(d, tmp_path, "echo $$ >> \"$1\"; sleep 300", "-M", "1GB")
    pids = _pids(tmp_path / "pids", 3)
    d.wait_state(jid, ("RUN",))
    jd = d.top / "jobs" / str(jid) / "0"
    deadline = time.monotonic() + 5
    while True:  # the supervisor has seen all three (its next look at the job's processes)
        rec = contain.read_record(str(jd)) or {}
        if {p for p, _ in rec.get("procs", [])} >= set(pids):
            break
        assert time.monotonic() < deadline, rec
        time.sleep(0.05)
    sup = int((jd / "supervisor.pid").read_text())
    fd = os.open(jd / "lock", os.O_RDWR)
    try:  # only while it holds its lock: the pid is the supervisor's, never a reused one
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.kill(sup, signal.SIGKILL)
    finally:
        os.close(fd)
    e = d.wait_state(jid, ("DONE", "EXIT"))["elements"][0]
    assert e["exit_reason"] == "supervisor lost", e
    assert [p for p in pids if _alive(p)] == [], "the job's processes outlived its supervisor"
    _cgroups_gone(d, jid)
    assert json.loads((jd / "job.json").read_text())["containment"] == mode


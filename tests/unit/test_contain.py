"""xced.worker.contain (JOB-1, JOB-2; issue 15) with real processes: the /proc walk finds a
job's escaped descendants, a signal never reaches a reused pid, the subreaper takes orphans
in, the record in JOBDIR ends what a dead supervisor left, and (where root may write a
hierarchy) a job's cgroup is made, joined, killed and removed, its memory limit enforced by
the kernel."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from xced.worker import contain

pytestmark = pytest.mark.timeout(60)


def _alive(pid: int) -> bool:
    info = contain._stat(pid)
    return info is not None and info.state != "Z"


def _wait_gone(pids, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    return [p for p in pids if _alive(p)]


@pytest.fixture
def tree(tmp_path):
    """A shell with a setsid child (its own session and group): (shell Popen, [child pid])."""
    pidfile = tmp_path / "pid"
    # the pid is the one that becomes the sleep: `$!` may name a setsid that forks and exits,
    # which left the real sleep running after the test (found on the machine by its PID)
    p = subprocess.Popen(["sh", "-c", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' & sleep 300"],
                         start_new_session=True)
    deadline = time.monotonic() + 5
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    child = int(pidfile.read_text())
    try:
        yield p, [child]
    finally:
        try:  # the shell's own `sleep 300` too: its group (start_new_session), found by the shell's PID
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def test_descendants_finds_a_setsid_child_and_its_memory_counts(tree):
    p, (child,) = tree
    found = contain.descendants({p.pid})
    assert child in found and found[child].pgrp != p.pid  # outside the job's process group
    assert found[child].starttime == contain.starttime(child)
    assert contain.rss_kb(found.values()) > 0


def test_signal_procs_skips_a_pid_whose_start_time_differs(tree):
    p, (child,) = tree
    st = contain.starttime(child)
    assert contain.signal_procs([(child, st + 1)], signal.SIGKILL) == 0  # "reused": not signalled
    assert _alive(child)
    assert contain.signal_procs([(child, st), (999999999, 1)], signal.SIGKILL) == 1
    assert _wait_gone([child]) == []


def test_kill_recorded_ends_the_listed_processes_and_their_descendants(tree, tmp_path):
    p, (child,) = tree
    jd = tmp_path / "jd"
    jd.mkdir()
    contain.write_record(str(jd), contain.MODE_SUBREAPER, [], [(p.pid, contain.starttime(p.pid))])
    assert contain.read_record(str(jd))["procs"] == [[p.pid, contain.starttime(p.pid)]]
    n = contain.kill_recorded(str(jd), timeout=5)
    p.wait(5)
    assert _wait_gone([child]) == [] and n == 3  # the shell, its sleep and its setsid child (found by the walk)
    assert contain.kill_recorded(str(jd), timeout=1) == 0  # nothing left: nothing signalled
    assert contain.kill_recorded(str(tmp_path / "none")) == 0  # no record: nothing to do


def test_the_subreaper_takes_in_an_orphaned_double_forked_process(tmp_path):
    """In a child interpreter (the setting is per process): after the intermediate parent
    exits, the grandchild's parent is the subreaper, not init."""
    code = textwrap.dedent("""
        import os, subprocess, sys, time
        from xced.worker import contain
        assert contain.set_child_subreaper()
        out = subprocess.run(["sh", "-c", "setsid sh -c 'echo $$; exec sleep 30 >/dev/null 2>&1' &"],
                             capture_output=True, text=True).stdout
        pid = int(out)
        time.sleep(0.05)
        ppid = contain._stat(pid).ppid
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print(ppid == os.getpid())
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert r.stdout.strip() == "True", r.stderr


def test_detect_setting(monkeypatch):
    assert contain.detect("subreaper") == contain.MODE_SUBREAPER
    assert contain.detect("auto") in contain.MODES
    assert contain.candidates("auto")[-1] == contain.MODE_SUBREAPER
    monkeypatch.setenv(contain.ENV_CONTAINMENT, "subreaper")
    assert contain.detect() == contain.MODE_SUBREAPER
    with pytest.raises(ValueError, match=r"XCE_CONTAINMENT='cgroups' is not valid; valid: auto, subreaper"):
        contain.detect("cgroups")


def _cgroup_mode() -> str:
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root")
    mode = contain.detect("auto")
    if mode == contain.MODE_SUBREAPER:
        pytest.skip("no writable cgroup hierarchy with the memory controller here")
    return mode


def test_a_cgroup_is_made_joined_killed_and_removed(tmp_path):
    mode = _cgroup_mode()
    jd = tmp_path / "jobs" / "5" / "0"
    jd.mkdir(parents=True)
    cg = contain.Cgroup.create(mode, str(jd), 5, 0, 64)
    try:
        assert all(os.path.isdir(d) and d.endswith("/job_5_0") for d in cg.dirs)
        limit = "memory.max" if mode == contain.MODE_V2 else "memory.limit_in_bytes"
        with open(os.path.join(cg.dirs[0], limit)) as f:
            assert int(f.read()) == 64 << 20
        p = subprocess.Popen(["sh", "-c", "read x; setsid sleep 300 & sleep 300"], stdin=subprocess.PIPE)
        try:
            cg.join(p.pid)
            p.stdin.write(b"go\n")  # joined: what it starts from now on is in the cgroup too
            p.stdin.close()
            deadline = time.monotonic() + 5
            while len(cg.pids()) < 3:  # sh, its setsid child, its sleep
                assert time.monotonic() < deadline, cg.pids()
                time.sleep(0.01)
            members = cg.pids()
            cg.kill()
            p.wait(5)
            assert p.returncode == -signal.SIGKILL and _wait_gone(members) == []
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    finally:
        assert cg.remove() is True
    assert not any(os.path.exists(d) for d in cg.dirs)


def test_the_kernel_enforces_a_cgroups_memory_limit_and_it_is_counted(tmp_path):
    mode = _cgroup_mode()
    jd = tmp_path / "jobs" / "6" / "0"
    jd.mkdir(parents=True)
    cg = contain.Cgroup.create(mode, str(jd), 6, 0, 50)
    r, w = os.pipe()
    try:
        p = subprocess.Popen([sys.executable, "-c", "import os; os.read(0, 1); b = b'x' * (200 << 20)"], stdin=r)
        os.close(r)
        cg.join(p.pid)
        os.write(w, b"g")  # joined: now allocate
        p.wait(30)
        assert p.returncode == -signal.SIGKILL and cg.oom_kills() == 1
    finally:
        os.close(w)
        assert cg.remove() is True


def test_cgroup_names_are_one_per_topdir_job_and_task():
    a = contain._leaf_name("/t1/jobs/5/0", 5, 0)
    assert a[1] == "job_5_0" and contain._leaf_name("/t1/jobs/6/2", 6, 2) == (a[0], "job_6_2")
    assert contain._leaf_name("/t2/jobs/5/0", 5, 0)[0] != a[0]  # another TopDir
    # a job's tasks (JOBDIR/tasks/N, each under its own supervisor) share no cgroup with it or each other
    assert contain._leaf_name("/t1/jobs/5/0/tasks/1", 5, 0) == (a[0], "job_5_0_task_1")
    assert contain._leaf_name("/t1/jobs/5/0/tasks/2", 5, 0) == (a[0], "job_5_0_task_2")

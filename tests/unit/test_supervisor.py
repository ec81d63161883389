"""The per-job supervisor and the worker's handle on it (JOB-1, JOB-2, JOB-8).

Real processes in tmp_path. Every test cleans up what it started, even on
failure, by recorded pid/pgid (the `jobs` fixture), never by name.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import fill_disk, tmpfs_at
from xced.worker import procs
from xced.worker.procs import JobStatus, SupervisorHandle

pytestmark = [pytest.mark.timeout(30)]  # Linux with pidfd_open is required (JOB-8): no skip

REPO = Path(__file__).resolve().parents[2]


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _gone(pid: int) -> bool:
    """The process no longer runs: no such pid, or only a zombie nobody reaped yet."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return _proc_state(pid) in (None, "Z")


def _wait_until(cond, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


class Jobs:
    """Launches supervisors in tmp_path and remembers what to clean up."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.dirs: list[Path] = []
        self.handles: list[SupervisorHandle] = []
        self.popens: list[subprocess.Popen] = []
        self.sleep_pids: list[int] = []  # background `sleep 100` of jobs, verified before killing

    def jobdir(self, name: str = "job") -> Path:
        d = self.tmp / name
        d.mkdir()
        self.dirs.append(d)
        return d

    def spec(self, jobdir: Path, argv: list[str], **over) -> dict:
        spec = {
            "job_id": 7,
            "index": 0,
            "argv": argv,
            "cwd": str(jobdir),
            "env": {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(jobdir)},
            "stdout": str(jobdir / "stdout"),
            "stderr": str(jobdir / "stderr"),
            "run_limit_s": None,
            "grace_s": 1.0,
            "kill_interval_s": 1.0,
            "uid": None,
            "gid": None,
            "groups": None,
        }
        spec.update(over)
        return spec

    def launch(self, argv: list[str], name: str = "job", **over) -> tuple[Path, SupervisorHandle]:
        d = self.jobdir(name)
        h = procs.launch(d, self.spec(d, argv, **over))
        self.handles.append(h)
        return d, h

    def sh(self, script: str, name: str = "job", **over) -> tuple[Path, SupervisorHandle]:
        return self.launch(["sh", "-c", script], name, **over)

    def cleanup(self) -> None:
        for p in self.popens:
            if p.poll() is None:
                p.kill()
            p.wait(5)
        for d in self.dirs:
            job = _read_json(d / "job.json")
            if isinstance(job, dict) and not (d / "status.json").exists():
                try:
                    os.killpg(job["pgid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if procs.is_alive(d):
                pid = _read_json(d / "supervisor.pid")
                try:
                    pidfd = os.pidfd_open(pid)
                except (ProcessLookupError, TypeError):
                    continue
                try:
                    if procs.is_alive(d):
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                finally:
                    os.close(pidfd)
        for h in self.handles:
            if h._popen is not None:
                if h._popen.poll() is None:
                    h._popen.kill()
                h._popen.wait(5)
            h.close()
        for pid in self.sleep_pids:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except FileNotFoundError:
                continue
            if cmdline == b"sleep\x00100\x00":
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture
def jobs(tmp_path):
    j = Jobs(tmp_path)
    try:
        yield j
    finally:
        j.cleanup()


def run(coro):
    return asyncio.run(coro)


async def _start_and_wait(h: SupervisorHandle) -> tuple[dict | None, JobStatus]:
    started = await h.started(10)
    return started, await h.wait()


# ---- normal ends (JOB-1) ----------------------------------------------------


def test_exit_0_writes_output_and_status(jobs):
    d, h = jobs.sh("echo hello; echo oops >&2")
    started, st = run(_start_and_wait(h))
    assert st.exit_code == 0 and st.signal is None and st.signal_name is None and st.reason is None
    assert (d / "stdout").read_text() == "hello\n"
    assert (d / "stderr").read_text() == "oops\n"
    job = _read_json(d / "job.json")
    assert started == job and job["pid"] == job["pgid"]
    assert st.start_time == job["start_time"] and st.start_time <= st.end_time <= time.time()
    assert JobStatus.from_file(d / "status.json") == st
    assert _read_json(d / "supervisor.pid") == h.pid
    assert not procs.is_alive(d)


def test_exit_3(jobs):
    _, h = jobs.sh("exit 3")
    assert run(h.wait()).exit_code == 3


def test_stdout_and_stderr_to_one_file_appended(jobs, tmp_path):
    d = jobs.jobdir()
    out = tmp_path / "work" / "logs" / "both.txt"
    out.parent.mkdir(parents=True)
    out.write_text("before\n")
    h = procs.launch(d, jobs.spec(d, ["sh", "-c", "echo a; echo b >&2; echo c"], stdout=str(out), stderr=str(out)))
    jobs.handles.append(h)
    assert run(h.wait()).exit_code == 0
    assert out.read_text() == "before\na\nb\nc\n"


def test_overwrite_truncates_the_named_stream_only_and_a_shared_file_once(jobs, tmp_path):
    """JOB-12, IBM bsub -oo/-eo (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.__oo.1.html:
    "If the specified file already exists, it is overwritten"): spec.json's "overwrite"
    truncates that stream's file and leaves the other appended to; a file both streams share
    is truncated when either asks (-o f -eo f), and stays one open file for both."""
    out, err = tmp_path / "o.txt", tmp_path / "e.txt"
    out.write_text("old out\n")
    err.write_text("old err, longer than what replaces it\n")
    d = jobs.jobdir("job1")
    h = procs.launch(d, jobs.spec(d, ["sh", "-c", "echo a; echo b >&2"], stdout=str(out), stderr=str(err),
                                  overwrite={"stdout": False, "stderr": True}))
    jobs.handles.append(h)
    assert run(h.wait()).exit_code == 0
    assert (out.read_text(), err.read_text()) == ("old out\na\n", "b\n")
    d = jobs.jobdir("job2")
    h = procs.launch(d, jobs.spec(d, ["sh", "-c", "echo c; echo d >&2; echo e"], stdout=str(out), stderr=str(out),
                                  overwrite={"stdout": False, "stderr": True}))
    jobs.handles.append(h)
    assert run(h.wait()).exit_code == 0
    assert out.read_text() == "c\nd\ne\n"


def test_relative_output_paths_and_missing_parent(jobs, tmp_path):
    d = jobs.jobdir()
    work = tmp_path / "work"
    work.mkdir()
    h = procs.launch(d, jobs.spec(d, ["sh", "-c", "echo x; echo y >&2"], cwd=str(work), stdout="o/out",
                                  stderr="o/err"))
    jobs.handles.append(h)
    assert run(h.wait()).exit_code == 0
    assert (work / "o" / "out").read_text() == "x\n" and (work / "o" / "err").read_text() == "y\n"


# ---- run limit (JOB-2) ------------------------------------------------------


def test_run_limit_sends_sigterm(jobs):
    _, h = jobs.launch(["sleep", "30"], run_limit_s=0.5, grace_s=5.0)
    st = run(h.wait())
    assert st.reason == "run limit"
    assert (st.signal, st.signal_name, st.exit_code) == (signal.SIGTERM, "SIGTERM", 128 + signal.SIGTERM)
    assert 0.45 <= st.end_time - st.start_time < 1.5


def test_run_limit_grace_then_sigkill(jobs):
    _, h = jobs.sh('trap "" TERM; sleep 30', run_limit_s=0.3, grace_s=0.3)
    st = run(h.wait())
    assert st.reason == "run limit"
    assert (st.signal, st.signal_name, st.exit_code) == (signal.SIGKILL, "SIGKILL", 137)
    assert 0.55 <= st.end_time - st.start_time < 2.0


# ---- kill requests (bkill) --------------------------------------------------


def test_kill_sequence_ends_with_sigkill(jobs):
    d, h = jobs.sh('trap "" INT TERM; : > ready; sleep 30', kill_interval_s=0.2)

    async def go():
        assert await h.started(10)
        while not (d / "ready").exists():  # sh has installed its traps
            await asyncio.sleep(0.005)
        t0 = time.time()
        assert procs.request_kill(h.jobdir)
        return t0, await h.wait()

    t0, st = run(go())
    assert st.reason == "killed"
    assert (st.signal, st.signal_name, st.exit_code) == (signal.SIGKILL, "SIGKILL", 137)
    assert st.end_time - t0 >= 0.35  # INT, TERM and KILL spaced by kill_interval_s (load only lengthens it)


def test_kill_sequence_stops_at_sigint_when_the_job_dies(jobs):
    d, h = jobs.launch(["sleep", "30"], kill_interval_s=0.2)

    async def go():
        assert await h.started(10)
        t0 = time.time()
        assert procs.request_kill(d)
        return t0, await h.wait()

    t0, st = run(go())
    assert (st.signal, st.signal_name, st.exit_code, st.reason) == (signal.SIGINT, "SIGINT", 130, "killed")
    log = (d / "supervisor.log").read_text()
    assert "SIGINT" in log and "SIGTERM" not in log


def test_kill_requested_right_after_launch_is_not_lost(jobs):
    d, h = jobs.launch(["sleep", "30"], kill_interval_s=0.2)
    assert procs.request_kill(d)
    st = run(h.wait())
    assert st.reason == "killed"
    # Either the job never started, or it got the kill sequence.
    assert st.exit_code == 1 and st.start_time is None or st.signal is not None


def test_supervisor_shrugs_off_int_hup_term(jobs):
    _, h = jobs.launch(["sleep", "0.4"])

    async def go():
        assert await h.started(10)
        for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
            os.kill(h.pid, sig)  # our unreaped child: the pid is its
        return await h.wait()

    st = run(go())
    assert (st.exit_code, st.signal, st.reason) == (0, None, None)


# ---- cannot execute ---------------------------------------------------------


def test_missing_command_is_127(jobs):
    d, h = jobs.launch(["no-such-command-xce"])
    started, st = run(_start_and_wait(h))
    assert started is None and not (d / "job.json").exists()
    assert st.exit_code == 127 and st.start_time is None and st.signal is None
    assert st.reason == "cannot execute: No such file or directory: no-such-command-xce"


def test_not_executable_is_126(jobs, tmp_path):
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    _, h = jobs.launch([str(script)])
    st = run(h.wait())
    assert st.exit_code == 126
    assert st.reason == f"cannot execute: Permission denied: {script}"


def test_missing_cwd_is_reported(jobs, tmp_path):
    _, h = jobs.launch(["true"], cwd=str(tmp_path / "nowhere"))
    st = run(h.wait())
    assert st.exit_code == 1 and st.start_time is None
    assert st.reason == f"cannot change directory: No such file or directory: {tmp_path / 'nowhere'}"


# ---- stop and resume (D-5 USUSP) --------------------------------------------


def test_stop_and_resume(jobs):
    d, h = jobs.launch(["sleep", "0.3"])

    async def go():
        job = await h.started(10)
        assert procs.signal_job(d, signal.SIGSTOP)
        await asyncio.sleep(0.6)  # longer than the job would have run
        assert _proc_state(job["pid"]) == "T"
        assert procs.is_alive(d) and not (d / "status.json").exists()
        assert procs.signal_job(d, signal.SIGCONT)
        return await h.wait()

    st = run(go())
    assert (st.exit_code, st.signal, st.reason) == (0, None, None)
    assert st.end_time - st.start_time >= 0.55
    assert not procs.signal_job(d, signal.SIGCONT)  # ended: nothing to signal
    assert not procs.request_kill(d)


# ---- restarts of the daemon (JOB-8) -----------------------------------------

_LAUNCHER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from xced.worker import procs
    jobdir = Path(sys.argv[1])
    h = procs.launch(jobdir, json.loads(sys.argv[2]))
    while not (jobdir / "job.json").exists() and not (jobdir / "status.json").exists():
        time.sleep(0.005)
    print(h.pid, flush=True)
    time.sleep(60)
    """
)


def _launch_from_doomed_daemon(jobs: Jobs, jobdir: Path, spec: dict) -> int:
    """Launch from a child Python process, then SIGKILL that process; the supervisor's pid."""
    script = jobs.tmp / "daemon.py"
    script.write_text(_LAUNCHER)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen(
        [sys.executable, str(script), str(jobdir), json.dumps(spec)], stdout=subprocess.PIPE, env=env, text=True
    )
    jobs.popens.append(p)
    pid = int(p.stdout.readline())
    p.kill()
    p.wait(5)
    p.stdout.close()
    return pid


def test_attach_after_daemon_death_gets_real_status(jobs):
    d = jobs.jobdir()
    sup_pid = _launch_from_doomed_daemon(jobs, d, jobs.spec(d, ["sh", "-c", "sleep 1; exit 5"]))
    assert procs.is_alive(d)
    t_attach = time.time()
    h = procs.attach(d)
    assert isinstance(h, SupervisorHandle) and h.pid == sup_pid
    jobs.handles.append(h)
    with pytest.raises(ChildProcessError):
        os.waitpid(h.pid, os.WNOHANG)  # not our child: a real re-attach
    st = run(h.wait())
    assert (st.exit_code, st.signal, st.reason) == (5, None, None)
    assert 0.9 <= st.end_time - st.start_time < 2.0
    assert st.end_time > t_attach + 0.2  # the job's end, not the attach
    assert st == JobStatus.from_file(d / "status.json")
    assert not procs.is_alive(d)


def test_attach_after_job_ended_unwatched(jobs):
    d = jobs.jobdir()
    _launch_from_doomed_daemon(jobs, d, jobs.spec(d, ["sh", "-c", "exit 4"]))
    assert _wait_until(lambda: not procs.is_alive(d))
    st = procs.attach(d)
    assert isinstance(st, JobStatus) and st.exit_code == 4 and st.reason is None
    assert st == JobStatus.from_file(d / "status.json")


def test_attach_with_nothing_launched(tmp_path):
    assert procs.attach(tmp_path) is None
    assert not procs.is_alive(tmp_path)
    assert not procs.signal_job(tmp_path, signal.SIGCONT)
    assert not procs.request_kill(tmp_path)


def test_supervisor_lost(jobs):
    d, h = jobs.launch(["sleep", "30"])

    async def go():
        assert await h.started(10)
        h._popen.kill()  # SIGKILL to the supervisor (our child)
        return await h.wait()

    st = run(go())
    assert st.reason == "supervisor lost" and st.exit_code == 137
    assert st.start_time == _read_json(d / "job.json")["start_time"]
    again = procs.attach(d)
    assert isinstance(again, JobStatus) and again.reason == "supervisor lost" and again.exit_code == 1
    # The orphaned job is killed by the fixture (its pgid is in job.json).


# ---- the lock and the process group -----------------------------------------


def test_lock_held_while_alive_and_free_after(jobs, tmp_path):
    gate = tmp_path / "gate"  # the job runs until the test has looked: a state, not a time
    d, h = jobs.launch(["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done"])

    async def go():
        assert await h.started(10)
        assert procs.is_alive(d)
        with pytest.raises(procs.JobDirBusy):
            procs.launch(d, jobs.spec(d, ["true"]))
        second = subprocess.run(
            [sys.executable, "-m", "xced.worker.supervisor", str(d)],
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            capture_output=True,
            timeout=10,
        )
        assert second.returncode == 75
        assert procs.is_alive(d) and not (d / "status.json").exists()
        again = procs.attach(d)
        assert isinstance(again, SupervisorHandle) and again.pid == h.pid
        gate.touch()
        st1, st2 = await asyncio.gather(h.wait(), again.wait())
        return st1, st2

    st1, st2 = run(go())
    assert st1 == st2 and st1.exit_code == 0
    assert not procs.is_alive(d)
    assert isinstance(procs.attach(d), JobStatus)


def test_no_survivors_in_the_process_group(jobs):
    d, h = jobs.sh("sleep 100 & echo $! > bg.pid; exit 0")
    st = run(h.wait())
    assert st.exit_code == 0
    bg = int((d / "bg.pid").read_text())
    jobs.sleep_pids.append(bg)
    assert _wait_until(lambda: _gone(bg), 2.0)


def test_relaunch_in_the_same_jobdir_clears_old_state(jobs):
    d, h = jobs.sh("exit 2")
    assert run(h.wait()).exit_code == 2
    h2 = procs.launch(d, jobs.spec(d, ["sh", "-c", "exit 0"]))
    jobs.handles.append(h2)
    assert run(h2.wait()).exit_code == 0


# ---- identity (root only) ---------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_job_runs_as_the_given_user(jobs):
    d = jobs.jobdir()
    d.chmod(0o755)  # root-owned job directory: the default output created by root, 0600, then chowned
    h = procs.launch(
        d, jobs.spec(d, ["sh", "-c", "id -u; id -g; id -G"], cwd="/", uid=65534, gid=65534, groups=[65534],
                     stdout=str(d / "stdout"), stderr=str(d / "stderr"))
    )
    jobs.handles.append(h)
    st = run(h.wait())
    assert st.exit_code == 0, (d / "supervisor.log").read_text()
    assert (d / "stdout").read_text().split() == ["65534", "65534", "65534"]
    for name in ("stdout", "stderr"):
        stat = (d / name).stat()
        assert (stat.st_uid, stat.st_gid, stat.st_mode & 0o777) == (65534, 65534, 0o600)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.parametrize("where", ["tasks/1/out", "spec.json.123.tmp", "out.txt"])
def test_output_into_the_job_directory_is_refused(jobs, where):
    """D-7: the job's user may not make the supervisor (root) create anything in JOBDIR but
    its default stdout and stderr: not a directory it could then fill (tasks/), not a file
    named like a protocol file's temporary copy."""
    d = jobs.jobdir()
    d.chmod(0o755)
    h = procs.launch(d, jobs.spec(d, ["true"], cwd="/", uid=65534, gid=65534, groups=[], stdout=str(d / where)))
    jobs.handles.append(h)
    st = run(h.wait())
    assert st.exit_code == 1 and st.reason.startswith("cannot open output: output may not go into the job's own "
                                                      "directory"), st.reason
    assert not (d / where).exists() and not (d / "tasks").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_output_through_a_users_symlink_is_opened_as_the_user(jobs, tmp_path):
    """A -o path through a symlink of the user's to a root file: opened as the user (refused),
    never by root, so the file stays root's (the race the root fallback allowed)."""
    victim_dir = tmp_path / "vdir"
    victim_dir.mkdir(mode=0o755)
    victim = victim_dir / "victim"
    victim.write_text("root's\n")
    link = tmp_path / "l"
    link.symlink_to(victim_dir)
    d = jobs.jobdir()
    d.chmod(0o755)
    h = procs.launch(d, jobs.spec(d, ["true"], cwd="/", uid=65534, gid=65534, groups=[], stdout=str(link / "victim")))
    jobs.handles.append(h)
    st = run(h.wait())
    assert st.exit_code == 1 and "Permission denied" in st.reason
    assert victim.stat().st_uid == 0 and victim.read_text() == "root's\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_output_outside_jobdir_is_opened_as_the_user(jobs, tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)  # root only
    d, h = jobs.launch(["true"], cwd="/", uid=65534, gid=65534, groups=[], stdout=str(private / "o"))
    st = run(h.wait())
    assert st.exit_code == 1 and st.start_time is None
    assert st.reason == f"cannot open output: Permission denied: {private / 'o'}"
    assert not (private / "o").exists()


# ---- data shapes ------------------------------------------------------------


def test_bad_spec_names_the_field(tmp_path):
    with pytest.raises(ValueError, match="'argv'"):
        procs.launch(tmp_path, {"job_id": 1, "index": 0, "cwd": "/", "env": {}, "stdout": "o", "stderr": "e"})
    with pytest.raises(ValueError, match="rerunable"):
        procs.launch(
            tmp_path,
            {"job_id": 1, "index": 0, "argv": ["true"], "cwd": "/", "env": {}, "stdout": "o", "stderr": "e",
             "rerunable": True},
        )
    with pytest.raises(ValueError, match="'run_limit_s'"):
        procs.launch(
            tmp_path,
            {"job_id": 1, "index": 0, "argv": ["true"], "cwd": "/", "env": {}, "stdout": "o", "stderr": "e",
             "run_limit_s": "1h"},
        )
    assert not (tmp_path / "spec.json").exists()


def test_status_from_file_rejects_garbage(tmp_path):
    p = tmp_path / "status.json"
    p.write_text("{not json")
    with pytest.raises(ValueError):
        JobStatus.from_file(p)
    p.write_text('{"signal": null}')
    with pytest.raises(ValueError, match="exit_code"):
        JobStatus.from_file(p)


def test_attach_to_a_supervisor_that_never_started_the_job_finds_nothing(tmp_path):
    """D-8: spec.json written, but no job.json (the supervisor was never forked, or died before
    it started the job): the job never ran, so attach finds nothing and it pends again."""
    (tmp_path / "spec.json").write_text("{}")
    assert procs.attach(tmp_path, settle_s=0.05) is None
    (tmp_path / "supervisor.pid").write_text("999999")
    assert procs.attach(tmp_path, settle_s=0.05) is None


def test_a_status_the_full_disk_refuses_is_kept_and_written_later(jobs, tmp_path):
    """D-8, JOB-8: the job ends while its directory's disk is full. The supervisor keeps the
    status and its lock (the worker sees it alive, not lost) and writes status.json, with the
    real exit code, once the disk has room. Needs a tmpfs: skipped only when mount is refused."""
    d = tmp_path / "job"
    d.mkdir()
    with tmpfs_at(d, "1m"):
        gate = tmp_path / "gate"
        h = procs.launch(d, jobs.spec(d, ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done; exit 3"]))
        jobs.handles.append(h)

        async def go():
            assert await h.started(10)
            fill_disk(d / "filler")
            pid = _read_json(d / "job.json")["pid"]
            gate.touch()  # the job ends now, on a full disk
            # wait until it has ended (a zombie its supervisor has not reaped: a state, not a time)
            while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                await asyncio.sleep(0.02)
            assert procs.is_alive(d) and not (d / "status.json").exists()  # alive, with its status in memory
            os.unlink(d / "filler")
            return await h.wait()

        st = run(go())
        assert st.exit_code == 3 and st.reason is None  # the real end, not "supervisor lost"
        assert json.loads((d / "status.json").read_text())["exit_code"] == 3


def test_a_supervisor_whose_job_directory_is_removed_ends_with_its_job(jobs, tmp_path):
    """D-8, JOB-8: the TopDir of a running job is removed (rm -r); when the job ends, its
    status cannot be written and there is no one to tell: the supervisor ends, and reaps its
    job, rather than try for ever holding a zombie (seen left behind by removed test TopDirs)."""
    import shutil

    d = tmp_path / "job"
    gate = tmp_path / "gate"
    h = procs.launch(d, jobs.spec(d, ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done; exit 3"]))
    jobs.handles.append(h)

    async def go():
        assert await h.started(10)
        shutil.rmtree(d)
        gate.touch()  # the job ends now, its directory gone
        return await asyncio.wait_for(h.wait(), 20)

    st = run(go())
    assert st.exit_code == 1 and st.reason == "supervisor lost"  # no status.json: lost, but it ended
    assert not procs.is_alive(d)


def test_a_supervisor_watched_through_a_descriptor_numbered_past_1024(jobs):
    """D-8: a daemon with a thousand open connections watches supervisors through pidfds
    numbered 1024 and more, which select() refuses; a job's end must still be seen."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2100:
        pytest.skip(f"the hard limit of open files here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2100), hard))
    try:
        d, h = jobs.launch(["sh", "-c", "exit 6"])
        high = os.dup2(h._pidfd, 2000)
        os.close(h._pidfd)
        h._pidfd = high
        st = run(_start_and_wait(h))[1]  # started() looks whether it has exited, then wait()
        assert st.exit_code == 6
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_kill_ends_a_start_stuck_in_the_kernel(tmp_path):
    """JOB-1, JOB-12 (issue 18 follow-up: a job stuck in its start could not be killed): within
    the supervisor's killable() phase of the start (its NSS look-up, chdir and output opens) a
    kill request (SIGUSR1, what procs.request_kill sends) abandons a call blocked in the kernel
    (here a blocking open of a FIFO with no reader) with the reason "killed", as bkill asks."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    script = textwrap.dedent(f"""
        import os, sys
        from xced.worker.supervisor import Supervisor, _Setup
        sup = Supervisor({str(tmp_path)!r})
        sup.setup_signals()
        print("ready", flush=True)
        try:
            with sup.killable():
                os.open({str(fifo)!r}, os.O_WRONLY)  # no reader: blocks in the kernel
            print("opened")
        except _Setup as e:
            print("abandoned:", e.exit_code, e.reason)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert p.stdout.readline() == "ready\n"
        time.sleep(0.3)
        assert _proc_state(p.pid) == "S"  # blocked in open(2)
        os.kill(p.pid, signal.SIGUSR1)
        out, _ = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(5)
    assert out == "abandoned: 1 killed\n"

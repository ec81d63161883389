"""Shared fixtures: a real `xced` on a Unix socket in a temp TopDir, and the real CLIs.

Every daemon a test starts is stopped by its fixture, even on failure, by its PID; every
job process is found through its supervisor's files (job.json pgid, supervisor.pid) and
killed by PID, never by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
XCED = str(BIN / "xced")
XCECLI = str(BIN / "xcecli")
XCEADMIN = str(BIN / "xceadmin")
DATA = Path(__file__).resolve().parent / "data"  # traces and LSF examples; sources in tests/data/README.md
#: xced whose store fails while <TopDir>/state/FAULT exists (tests/faults/xced.py), and its environment
FAULTY_XCED = [sys.executable, "-m", "tests.faults.xced"]
FAULTY_ENV = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}


def write_config(top: Path, *, mode: str = "test", slots: int = 4, admins: tuple[str, ...] = ("admin",),
                 extra_queues: str = "", host: str = "h1", kill_interval: float = 0.3) -> None:
    """A small cluster: one host of `slots` slots, queue `normal` (default) plus extras."""
    cfg = top / "config"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "xce.yaml").write_text(textwrap.dedent(f"""\
        cluster_name: testcluster
        mode: {mode}
        admins: [{", ".join(admins)}]
        kill_interval: {kill_interval}
        limit_grace: 0.3
        sched_delay: 0.002
        """))
    (cfg / "queues.yaml").write_text("queues:\n  - name: normal\n    priority: 30\n" + extra_queues)
    (cfg / "hosts.yaml").write_text(f"hosts:\n  - name: {host}\n    slots: {slots}\n    memory: 8GB\n")


@dataclass
class Daemon:
    """A running xced on `top`; `cli()` runs the real xcecli against it."""

    top: Path
    proc: subprocess.Popen | None = None
    log: Path | None = None
    env: dict = field(default_factory=dict)
    args: list = field(default_factory=list)
    #: the daemon's command instead of the installed `xced` (FAULTY_XCED: its store fails on demand)
    cmd: list | None = None

    def start(self, timeout: float = 30.0) -> "Daemon":
        self.log = self.top / f"xced-{int(time.time() * 1000)}.log"
        ready = self.top / "run" / "xced.ready"
        if ready.exists():
            ready.unlink()
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([*(self.cmd or [XCED]), "--topdir", str(self.top), *self.args], stdout=out,
                                         stderr=subprocess.STDOUT, env={**os.environ, **self.env},
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"xced exited {self.proc.returncode}:\n{self.log.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"xced not ready in {timeout}s:\n{self.log.read_text()}")
            time.sleep(0.02)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        rc = self.proc.returncode
        self.proc = None
        return rc

    def cli(self, *args: str, user: str | None = None, check: bool = False, timeout: float = 60,
            cwd: str | Path | None = None, input: str | None = None) -> subprocess.CompletedProcess:
        env = {**os.environ, "XCE_TOPDIR": str(self.top)}
        env.pop("XCE_SOCKET", None)
        if user:
            env["XCE_TEST_USER"] = user
        else:
            env.pop("XCE_TEST_USER", None)
        r = subprocess.run([XCECLI, *args], capture_output=True, text=True, env=env, timeout=timeout,
                           cwd=str(cwd or self.top), input=input)
        if check and r.returncode != 0:
            raise AssertionError(f"xcecli {' '.join(args)} -> {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}")
        return r

    def submit(self, *args: str, user: str | None = None, cwd: str | Path | None = None) -> int:
        r = self.cli("submit", "--parsable", *args, user=user, check=True, cwd=cwd)
        return int(r.stdout.strip())

    def show(self, job: int | str, user: str | None = None) -> dict:
        return json.loads(self.cli("show", str(job), "--json", user=user, check=True).stdout)

    def wait_state(self, job: int, states: tuple[str, ...], timeout: float = 20.0, user: str | None = None) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            j = self.show(job, user=user)
            if j["state"] in states:
                return j
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job} is {j['state']}, expected one of {states}: {j}")
            time.sleep(0.05)


def stop_processes(procs) -> None:
    """SIGTERM every still-running Popen of `procs`, then wait up to 15 s for each and
    SIGKILL one that stays (processes are found by their Popen, never by name)."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def kill_job_processes(top: Path) -> None:
    """Kill every job process group and supervisor recorded under `top/jobs`, by PID, then
    what each job's JOBDIR/contain.json still records (its escaped processes, by PID and
    start time, and its cgroups, which are removed: none is left on the machine)."""
    from xced.worker import contain

    jobdirs = [*(top / "jobs").glob("*/*"), *(top / "jobs").glob("*/*/tasks/*")]
    for jd in jobdirs:
        try:
            pgid = json.loads((jd / "job.json").read_text())["pgid"]
            os.killpg(pgid, signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass
        try:
            pid = int((jd / "supervisor.pid").read_text())
            # only if the supervisor still holds its lock (so the PID is not reused)
            import fcntl

            fd = os.open(jd / "lock", os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.kill(pid, signal.SIGKILL)
            finally:
                os.close(fd)
        except (OSError, ValueError):
            pass
    for jd in jobdirs:
        contain.kill_recorded(str(jd), timeout=2.0)


def fill_disk(path: Path) -> None:
    """Write `path` until its file system has no block left (a full disk, for fault tests)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def tmpfs_at(path: Path, size: str, mode: str | None = None):
    """A tmpfs of `size` ("1m") mounted on the directory `path` for the block, unmounted
    after, even on failure: a small disk to fill (fault tests). Skips the test only when the
    mount is refused (it needs root)."""
    opts = f"size={size}" + (f",mode={mode}" if mode else "")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs mount rights): {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def short_tmpdir(prefix: str = "xce-") -> Path:
    """A short temp dir (Unix socket paths must stay under 107 bytes)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


@pytest.fixture
def topdir():
    top = short_tmpdir()
    try:
        yield top
    finally:
        kill_job_processes(top)
        shutil.rmtree(top, ignore_errors=True)


def _daemon_fixture(top: Path, args: tuple[str, ...] = (), cmd: list | None = None, env: dict | None = None,
                    **cfg):
    """Yield a started xced on `top` (config: write_config's `cfg`; `args` for xced; `cmd`
    instead of the installed xced, e.g. FAULTY_XCED, with `env` added to its environment),
    stopped and its job processes killed afterwards, even on failure."""
    write_config(top, **cfg)
    d = Daemon(top, args=list(args), cmd=cmd, env=dict(env or {}))
    try:
        d.start()
        yield d
    finally:
        d.stop()
        kill_job_processes(top)


@pytest.fixture
def daemon(topdir):
    """A fresh xced (test mode, one host h1 with 4 slots) for one test."""
    yield from _daemon_fixture(topdir)


@pytest.fixture(scope="module")
def shared_daemon():
    """One xced shared by a module's tests (test mode, 4 slots)."""
    top = short_tmpdir()
    try:
        yield from _daemon_fixture(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)

"""Helpers shared by the benchmark scripts: a private `xced` in a throw-away TopDir, and
small statistics.

A `PrivateXced` always cleans up after itself: the daemon is stopped by its Popen PID
(SIGTERM, then SIGKILL), every job process group and supervisor recorded under
TopDir/jobs is killed by PID (never by name), and the TopDir is removed.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
XCED = str(BIN / "xced")
XCECLI = str(BIN / "xcecli")

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run as a script from anywhere: import the project's xced

#: Put on the daemon's PYTHONPATH: logs every generation-2 garbage collection (and any
#: collection over 5 ms) of the process to $XB_GC_LOG as "PID GEN MS". Measurement only;
#: the daemon's code is untouched.
GC_PROBE = """\
import gc, os, time
_path = os.environ.get("XB_GC_LOG")
if _path:
    _t = [0.0]
    def _xb_gc(phase, info, _pid=os.getpid()):
        if phase == "start":
            _t[0] = time.perf_counter()
            return
        ms = (time.perf_counter() - _t[0]) * 1000
        if info["generation"] == 2 or ms > 5:
            with open(_path, "a") as f:
                f.write(f"{os.getpid()} {info['generation']} {ms:.2f}\\n")
    gc.callbacks.append(_xb_gc)
"""

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


# --------------------------------------------------------------------------- daemon


class PrivateXced:
    """A private xced on one host of `slots` slots, in a fresh short TopDir under /tmp.

        with PrivateXced(slots=64) as d:
            d.client.submit(...)

    `profile`: run the daemon under cProfile; `profile_stats` holds the pstats file
    path after exit (the file is copied out of the TopDir before it is removed).
    """

    def __init__(self, *, slots: int, host: str = "bench", kill_interval: float = 0.3,
                 sched_delay: float = 0.005, mode: str = "production", profile_to: Path | None = None,
                 extra: str = "") -> None:
        self.slots = slots
        #: more xce.yaml lines ("clean_period: 0\nmax_array_size: 1000000\n"); a later key wins
        self.extra = extra
        self.host = host
        self.kill_interval = kill_interval
        self.sched_delay = sched_delay
        self.mode = mode
        self.profile_to = profile_to
        self.top: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.client = None
        self.log: Path | None = None

    # -- lifecycle

    def write_config(self) -> None:
        cfg = self.top / "config"
        cfg.mkdir(parents=True, exist_ok=True)
        (cfg / "xce.yaml").write_text(textwrap.dedent(f"""\
            cluster_name: bench
            mode: {self.mode}
            admins: [root]
            kill_interval: {self.kill_interval}
            limit_grace: 0.3
            sched_delay: {self.sched_delay}
            """) + (self.extra if "max_array_size" in self.extra else "max_array_size: 10000\n" + self.extra))
        (cfg / "queues.yaml").write_text("queues:\n  - name: normal\n    priority: 30\n")
        (cfg / "hosts.yaml").write_text(f"hosts:\n  - name: {self.host}\n    slots: {self.slots}\n    memory: 64GB\n")

    def start(self) -> PrivateXced:
        self.top = Path(tempfile.mkdtemp(prefix="xb-", dir="/tmp"))
        self.write_config()
        self._spawn()
        return self

    def restart(self) -> float:
        """Stop the daemon (SIGTERM) and start it again on the same TopDir; the seconds from
        the new process's start to its first answered request (GET /info), measured from
        outside as a client sees it (issue 15: a restart answers within 0.5 s)."""
        from xced.api.client import Client

        if self.client is not None:
            self.client.close()
            self.client = None
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(STOP_TIMEOUT_S)
        sock = self.socket
        t0 = time.perf_counter()
        self._spawn(wait_ready=False)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                with Client(sock, timeout=5.0) as c:
                    c.request("GET", "/info")
                break
            except Exception:  # noqa: BLE001 - not listening yet
                if self.proc.poll() is not None:
                    raise RuntimeError(f"xced exited {self.proc.returncode}:\n{self.log.read_text()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"xced did not answer in {READY_TIMEOUT_S}s:\n{self.log.read_text()}")
                time.sleep(0.002)
        took = time.perf_counter() - t0
        self.client = Client(sock, timeout=120.0)
        return took

    def _spawn(self, wait_ready: bool = True) -> None:
        from xced.api.client import Client
        from xced.constants import socket_path

        self.log = self.top / "xced.log"
        ready = self.top / "run" / "xced.ready"
        if self.profile_to is not None:
            cmd = [sys.executable, "-m", "cProfile", "-o", str(self.top / "xced.prof"), "-m", "xced.daemon",
                   "--topdir", str(self.top)]
        else:
            cmd = [XCED, "--topdir", str(self.top)]
        # XCE_CONTAINMENT=subreaper passes through, to compare with the cgroups a root daemon uses
        env = {k: v for k, v in os.environ.items() if not k.startswith("XCE_") or k == "XCE_CONTAINMENT"}
        env["XCE_LOG_LEVEL"] = "WARNING"
        probe = self.top / "gcprobe"
        probe.mkdir(exist_ok=True)
        (probe / "sitecustomize.py").write_text(GC_PROBE)
        self.gc_log = self.top / "gc.log"
        env["XB_GC_LOG"] = str(self.gc_log)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(probe), env.get("PYTHONPATH")) if p)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=str(self.top), start_new_session=True)
        self.socket = socket_path(self.top)
        if not wait_ready:
            return
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"xced exited {self.proc.returncode}:\n{self.log.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"xced not ready in {READY_TIMEOUT_S}s:\n{self.log.read_text()}")
            time.sleep(0.01)
        self.client = Client(self.socket, timeout=120.0)

    def stop(self) -> None:
        if self.client is not None:
            try:
                self.client.close()
            except Exception:
                pass
            self.client = None
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    self.proc.send_signal(signal.SIGTERM)
                    self.proc.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
            self.proc = None
        if self.top is not None:
            kill_job_processes(self.top)
            prof = self.top / "xced.prof"
            if self.profile_to is not None and prof.exists():
                self.profile_to.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(prof, self.profile_to)
            shutil.rmtree(self.top, ignore_errors=True)
            self.top = None

    def __enter__(self) -> PrivateXced:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers

    @property
    def pid(self) -> int:
        return self.proc.pid

    def status_kb(self, key: str = "VmRSS") -> int:
        """A field of /proc/PID/status of the daemon, in kB (VmRSS, VmHWM...)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        raise KeyError(key)

    def _stat(self) -> list[str]:
        return Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()

    def cpu_s(self) -> float:
        """User+system CPU seconds the daemon has used so far (/proc/PID/stat)."""
        f = self._stat()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def children_cpu_s(self) -> float:
        """CPU seconds of everything the daemon started, the daemon itself excluded: its
        reaped children (cutime + cstime, which include their own reaped descendants) plus
        every live descendant's own and reaped-children time. With a supervisor launcher
        or without one, this is the supervisors' and the jobs' CPU."""
        tck = os.sysconf("SC_CLK_TCK")
        f = self._stat()
        total = int(f[13]) + int(f[14])
        for pid in _descendants(self.proc.pid):
            try:
                g = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(g[11]) + int(g[12]) + int(g[13]) + int(g[14])
        return total / tck

    def gc_pauses(self) -> list[float]:
        """Durations (ms) of the daemon's generation-2 collections so far (see GC_PROBE)."""
        try:
            lines = self.gc_log.read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            pid, gen, ms = line.split()
            if int(pid) == self.proc.pid and gen == "2":
                out.append(float(ms))
        return out

    def cli_env(self) -> dict[str, str]:
        # XCE_CONTAINMENT=subreaper passes through, to compare with the cgroups a root daemon uses
        env = {k: v for k, v in os.environ.items() if not k.startswith("XCE_") or k == "XCE_CONTAINMENT"}
        env["XCE_TOPDIR"] = str(self.top)
        return env

    def hold_host(self, request) -> int:
        """Submit a `sleep 600` that takes every slot of the host; return its ID once it runs."""
        r = self.client.submit(request(["sleep", "600"], ntasks=self.slots))
        deadline = time.monotonic() + 30
        while self.client.job(r.job_id).state != "RUN":
            if time.monotonic() > deadline:
                raise RuntimeError(f"hold job {r.job_id} did not start in 30 s")
            time.sleep(0.01)
        return r.job_id


def _descendants(pid: int) -> list[int]:
    """Live descendants of `pid` (from /proc/PID/task/*/children)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(x) for x in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def kill_job_processes(top: Path) -> None:
    """Kill every job still running under `top/jobs` and its supervisor, by recorded PID, then
    what JOBDIR/contain.json still records (escaped processes, and the cgroups, removed).

    Only where the supervisor still holds JOBDIR/lock: then (and while there is no
    status.json) the pgid in job.json and the pid in supervisor.pid are still the job's
    and the supervisor's, never reused ones (see xced.worker.procs.signal_job)."""
    for jd in (top / "jobs").glob("*/*"):
        try:
            fd = os.open(jd / "lock", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                continue  # free: that supervisor is gone
            except BlockingIOError:
                pass
            try:
                if not (jd / "status.json").exists():
                    pgid = json.loads((jd / "job.json").read_text())["pgid"]
                    if isinstance(pgid, int) and pgid > 1:
                        os.killpg(pgid, signal.SIGKILL)
            except (OSError, ValueError, KeyError, TypeError):
                pass
            try:
                pid = json.loads((jd / "supervisor.pid").read_text())
                if isinstance(pid, int) and pid > 1:
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError, TypeError):
                pass
        finally:
            os.close(fd)
    from xced.worker import contain

    for jd in (top / "jobs").glob("*/*"):  # what a killed supervisor leaves: its processes and cgroups
        contain.kill_recorded(str(jd), timeout=2.0)


# --------------------------------------------------------------------------- stats


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def p95(xs: list[float]) -> float:
    """95th percentile, nearest-rank."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, round(0.95 * len(s) + 0.5) - 1))
    return s[k]


def write_block(results: Path, begin: str, end: str, block: list[str]) -> None:
    """Put `block` (lines, from the `begin` marker to the `end` marker) into the file
    `results` (bench/RESULTS.md) in place of the block between those markers there, or at
    its end when it has none; the rest of the file is kept as it is."""
    text = results.read_text() if results.exists() else ""
    if begin in text and end in text:
        text = text[:text.index(begin)] + "\n".join(block) + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(block) + "\n"
    results.write_text(text)
    print(f"wrote {results}")

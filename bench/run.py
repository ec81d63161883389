"""`make bench`: XCE performance against a private `xced`, next to Slurm 22.05 numbers.

    .venv/bin/python bench/run.py [--only NAME[,NAME...]] [--quick] [--no-write] [--profile]

Benchmarks (each starts its own xced in a fresh TopDir under /tmp and always stops it):

  cli_submit   median wall time of `xcecli submit --parsable true` (30 calls), plus the
               Python start-up and import costs behind it
  cli          issue 17's figures of the CLI (CLI-7), each beside `python -c pass` measured in
               the same run, alternated call by call: `xcecli submit --parsable -- true`, `xcecli
               --help` and `xcecli show ID` (30 each), 100 submits in a shell loop (median of 3),
               `xcecli submit --pack FILE` of 10,000 lines, and `xcecli jobs -u all` (plain and
               --json) over those 10,000 pending jobs (11 each); and LSF's `bsub true` (30)
               and `bjobs -u all` (11) beside them on the same aims (issue 18 part 7, CLI-8)
  preset       what `submit --preset` adds to `xcecli submit` (PRE-1 aim: at most 10 ms):
               the two commands alternated (30 pairs), and the expansion in-process
  api_submit   API submits per second over one connection (1,000 jobs kept pending)
  api_with_cli API submits per second while another thread runs `xcecli submit --parsable --
               true` in a loop (issue 17 part 5: aim > 1,000/s): 10 s over 2 connections (the
               daemon kept busy), then 10 s over one; and that loop's median wall time
  pack         API pack submit (POST /jobs/pack, `xcecli submit --pack`, CLI-7): 10,000 single
               jobs with the submitter's environment once, acknowledged in one call (median of 3)
  array        time of one API submit of a 10,000-element array (median of 3), and the
               `xcecli submit -J 'a[1-10000]'` wall time
  latency      submit-to-start on an idle cluster (20 jobs one at a time, median), split
               into dispatch latency (SUBMIT -> DISPATCH event) and process start-up
  drain        2,000 `true` jobs on a host declared with 64 slots, submitted one by one
  drain_array  the same 2,000 jobs as one array
  pending      10,000 pending jobs: `xcecli jobs -u all` (plain and --json) and the
               daemon's RSS
  store_busy   GET /info probed back to back while another process holds the store's
               write lock and submits wait it out (D-8: the loop never blocks)

`--quick` shrinks every size (for development); `--profile` runs each daemon under
cProfile and prints where its time went (slower); `--no-write` leaves bench/RESULTS.md
alone. Only a full run (no --only, --quick or --profile) rewrites bench/RESULTS.md.

RESULTS.md is rewritten except for the hand-written part after the ANALYSIS marker,
which is kept as it is.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import pstats
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BIN, ROOT, XCECLI, PrivateXced, median, p95

RESULTS = ROOT / "bench" / "RESULTS.md"
ANALYSIS_MARKER = "<!-- ANALYSIS: hand-written below; bench/run.py keeps this part as it is -->"
#: api_with_cli's connections for its aim: the fewest that keep the daemon busy (one request is
#: handled while another's client works or its commit's fsync waits); 3 gave 3% more than 2
API_WITH_CLI_CONNECTIONS = 2


# --------------------------------------------------------------------------- results


@dataclass
class Metric:
    """One row of the results table. `lower` says whether a lower value is better."""

    key: str
    label: str
    value: float | None
    unit: str
    lower: bool
    p95: float | None = None
    slurm: float | None = None
    aim: float | None = None
    extra: str = ""

    def fmt(self, v: float | None) -> str:
        if v is None:
            return "-"
        if v == int(v):
            return f"{int(v)} {self.unit}"
        if self.unit == "ms":
            return f"{v:.1f} ms" if v < 100 else f"{v:.0f} ms"
        if self.unit == "MB":
            return f"{v:.1f} MB"
        return f"{v:.0f} {self.unit}" if v >= 100 else f"{v:.1f} {self.unit}"

    def factor(self, ref: float | None) -> float | None:
        """How many times better than `ref` (>1 better, <1 worse)."""
        if ref is None or self.value is None or self.value == 0:
            return None
        return ref / self.value if self.lower else self.value / ref

    def met(self) -> str:
        if self.aim is None or self.value is None:
            return "-"
        ok = self.value < self.aim if self.lower else self.value > self.aim
        return "yes" if ok else "NO"


def fmt_factor(f: float | None) -> str:
    if f is None:
        return "-"
    if f >= 1:
        return f"{f:.2g}x better" if f < 10 else f"{f:.0f}x better"
    inv = 1 / f
    return f"{inv:.2g}x worse" if inv < 10 else f"{inv:.0f}x worse"


@dataclass
class BenchResult:
    name: str
    metrics: list[Metric] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    profile: str = ""
    error: str | None = None
    seconds: float = 0.0
    load: float = 0.0  # 1-minute load average when it started


# --------------------------------------------------------------------------- helpers


def request(argv: list[str], *, ntasks: int = 1, name: str | None = None, cwd: str = "/tmp"):
    """A SubmitRequest as `xcecli submit` makes it: the submitter's whole environment."""
    from xced.api.models import SubmitRequest

    return SubmitRequest(argv=argv, cwd=cwd, env=dict(os.environ), ntasks_min=ntasks, name=name)


def run_blocking(cmd: list[str], *, timeout: float = 120.0, **kw) -> subprocess.CompletedProcess:
    """subprocess.run without its `timeout` polling (Popen.wait(timeout) sleeps in doubling
    steps up to 50 ms, which would be measured): a blocking wait, and a timer that kills
    the child by its PID if it overruns."""
    import threading

    with subprocess.Popen(cmd, **kw) as p:
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            out, err = p.communicate()
        finally:
            timer.cancel()
        return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def run_timed(cmd: list[str], env: dict[str, str], cwd: str, timeout: float = 120.0) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    r = run_blocking(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                     timeout=timeout)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} -> exit {r.returncode}: {r.stderr.strip()[-500:]}")
    return dt, r


def run_on_terminal(cmd: list[str], env: dict[str, str], cwd: str, columns: int = 100) -> float:
    """Seconds `cmd` takes with its stdout on a pseudo-terminal `columns` wide (TERM
    xterm-256color), from its start until the terminal has read everything and it exited:
    what a user at a terminal waits for."""
    import fcntl
    import pty
    import struct
    import termios

    env = {**{k: v for k, v in env.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR")},
           "TERM": "xterm-256color"}
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=child, stdin=child, stderr=subprocess.DEVNULL, env=env, cwd=cwd, close_fds=True)
    os.close(child)
    try:
        while os.read(main, 65536):
            pass
    except OSError:  # the terminal's other end closed: everything is read
        pass
    finally:
        os.close(main)
    if p.wait(60) != 0:
        raise RuntimeError(f"{shlex.join(cmd)} on a terminal -> exit {p.returncode}")
    return time.perf_counter() - t


def cpu_busy() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine from /proc/stat."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = f[3] + f[4]
    return sum(f) - idle, sum(f)


def machine_cpu_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    busy = after[0] - before[0]
    total = after[1] - before[1]
    return busy / total if total else 0.0


def wait_all_finished(d: PrivateXced, job_ids: list[int], timeout: float) -> list:
    """Block until every job in `job_ids` has finished; return their JobOut (with elements).

    Waits on the last one, then lists once and waits on whatever is still unfinished, so
    the daemon is not polled while it drains."""
    c = d.client
    deadline = time.monotonic() + timeout
    want = set(job_ids)
    c.wait(job_ids[-1], timeout=max(1.0, deadline - time.monotonic()))
    while True:
        jobs = [j for j in c.jobs(all=True).jobs if j.job_id in want]
        todo = [j.job_id for j in jobs if j.state not in ("DONE", "EXIT")]
        if not todo and len(jobs) == len(want):
            return jobs
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(todo)} jobs still unfinished after {timeout:.0f} s")
        c.wait(todo[0] if todo else job_ids[-1], timeout=max(1.0, deadline - time.monotonic()))


def gc_detail(d: PrivateXced, since: int, what: str) -> str:
    """One line on the daemon's generation-2 GC pauses after the first `since` of them."""
    p = d.gc_pauses()[since:]
    if not p:
        return f"daemon gen-2 GC pauses {what}: none"
    return (f"daemon gen-2 GC pauses {what}: {len(p)}, total {sum(p):.0f} ms, longest {max(p):.0f} ms "
            f"(the event loop stands still meanwhile)")


def peak_concurrency(intervals: list[tuple[float, float]]) -> int:
    ev = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    cur = best = 0
    for _, k in ev:
        cur += k
        best = max(best, cur)
    return best


def parse_importtime(stderr: str) -> list[tuple[str, float]]:
    """Top-level modules and their cumulative import time (ms) from `-X importtime` output."""
    out = []
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( +)(\S+)", line)
        if m and len(m.group(3)) == 1:
            out.append((m.group(4), int(m.group(2)) / 1000))
    return out


def profile_summary(path: Path, n: int = 18) -> str:
    if not path.exists():
        return "(no profile written)"
    buf = io.StringIO()
    st = pstats.Stats(str(path), stream=buf)
    st.strip_dirs().sort_stats("tottime").print_stats(n)
    text = buf.getvalue()
    # drop the header lines up to the table
    i = text.find("   ncalls")
    return text[i:] if i >= 0 else text


# --------------------------------------------------------------------------- benchmarks


class Bench:
    def __init__(self, quick: bool, profile_dir: Path | None) -> None:
        self.quick = quick
        self.profile_dir = profile_dir

    def daemon(self, name: str, **kw) -> PrivateXced:
        prof = self.profile_dir / f"{name}.prof" if self.profile_dir else None
        return PrivateXced(profile_to=prof, **kw)

    # ---------------------------------------------------------------- cli_submit

    def cli_submit(self, res: BenchResult) -> None:
        n = 10 if self.quick else 30
        with self.daemon("cli_submit", slots=4) as d:
            env = d.cli_env()
            cwd = str(d.top)
            cmd = [XCECLI, "submit", "--parsable", "true"]
            run_timed(cmd, env, cwd)  # warm the page cache; not counted
            times = []
            for _ in range(n):
                dt, r = run_timed(cmd, env, cwd)
                int(r.stdout.strip())
                times.append(dt * 1000)
                time.sleep(0.05)  # let the job run and the cluster settle between calls
            # the same request made in-process: the daemon's share of the wall time
            api = []
            for _ in range(n):
                t = time.perf_counter()
                d.client.submit(request(["true"], cwd=cwd))
                api.append((time.perf_counter() - t) * 1000)
                time.sleep(0.05)
            # what the submit command imports, measured on the real command
            r = run_blocking([sys.executable, "-X", "importtime", XCECLI, "submit", "--parsable", "true"], env=env,
                             cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            imports = parse_importtime(r.stderr)
        py = [run_timed([sys.executable, "-c", "pass"], os.environ.copy(), str(ROOT))[0] * 1000 for _ in range(10)]
        py_s = [run_timed([sys.executable, "-S", "-c", "pass"], os.environ.copy(), str(ROOT))[0] * 1000
                for _ in range(10)]
        helpt = [run_timed([XCECLI, "--help"], os.environ.copy(), str(ROOT))[0] * 1000 for _ in range(5)]
        total_imp = sum(ms for _, ms in imports)
        res.metrics.append(Metric("cli_submit", "`xcecli submit --parsable true` wall time", median(times), "ms",
                                  True, p95=p95(times), slurm=5, aim=100, extra=f"{n} calls"))
        res.details += [
            f"`xcecli submit` wall: median {median(times):.0f} ms, p95 {p95(times):.0f} ms, min {min(times):.0f} ms ({n} calls)",
            f"the same submit through the API in-process: median {median(api):.2f} ms (the daemon's share)",
            f"`python -c pass` (venv, with site): {median(py):.0f} ms; with `-S` (no site): {median(py_s):.0f} ms",
            f"`xcecli --help`: {median(helpt):.0f} ms",
            f"imports of one `xcecli submit` (`python -X importtime`): {total_imp:.0f} ms in all; largest top-level: "
            + ", ".join(f"{m} {ms:.0f} ms" for m, ms in sorted(imports, key=lambda x: -x[1])[:8]),
        ]

    # ---------------------------------------------------------------- cli

    def cli(self, res: BenchResult) -> None:
        """Issue 17 (CLI-7): what pipelines pay per CLI call. Every figure is measured beside
        `python -c pass` in the same venv, the two alternated call by call so that load
        drifts hit both alike; RESULTS gives both and their ratio (the ratio is what carries
        over to other machines; the aims are this machine's milliseconds)."""
        n = 10 if self.quick else 30
        npack = 2000 if self.quick else 10_000
        with self.daemon("cli", slots=1) as d:
            env, cwd = d.cli_env(), str(d.top)
            hold = d.hold_host(request)
            py = [sys.executable, "-c", "pass"]

            def alternated(cmd: list[str], k: int, check=None) -> tuple[list[float], list[float]]:
                a, b = [], []
                run_timed(cmd, env, cwd)  # warm the page cache; not counted
                for _ in range(k):
                    a.append(run_timed(py, env, cwd)[0] * 1000)
                    dt, r = run_timed(cmd, env, cwd)
                    assert r.returncode == 0, (cmd, r.stderr[-500:])
                    if check:
                        check(r)
                    b.append(dt * 1000)
                return a, b

            def ids(r) -> None:
                int(r.stdout.strip())

            # a pack of `npack` lines: the pending jobs of the listings below
            pack = d.top / "bench.pack"
            pack.write_text("".join(f"-J p{i} true\n" for i in range(npack)))
            pack_py, pack_t = [], []
            pack_py.append(run_timed(py, env, cwd)[0] * 1000)
            dt, r = run_timed([XCECLI, "submit", "--parsable", "--pack", str(pack)], env, cwd)
            assert r.returncode == 0 and len(r.stdout.split()) == npack, r.stderr[-500:]
            pack_t.append(dt * 1000)
            jobs_py, jobs_t = alternated([XCECLI, "jobs", "-u", "all"], 11)
            json_py, json_t = alternated([XCECLI, "jobs", "-u", "all", "--json"], 11)
            sub_py, sub_t = alternated([XCECLI, "submit", "--parsable", "--", "true"], n, ids)

            def lsf_id(r) -> None:
                assert re.match(r"Job <\d+> is submitted to queue <\w+>\.$", r.stdout.strip()), r.stdout

            # issue 18 part 7: LSF's own commands on the same aims as xcecli's (CLI-7, CLI-8)
            bsub_py, bsub_t = alternated([str(BIN / "bsub"), "true"], n, lsf_id)
            bjobs_py, bjobs_t = alternated([str(BIN / "bjobs"), "-u", "all"], 11)
            help_py, help_t = alternated([XCECLI, "--help"], n)
            tty_py, tty_t = [], []  # on a terminal: the stored colour help (CLI-7), no Typer
            run_on_terminal([XCECLI, "--help"], env, cwd)  # warm the page cache; not counted
            for _ in range(n):
                tty_py.append(run_timed(py, env, cwd)[0] * 1000)
                tty_t.append(run_on_terminal([XCECLI, "--help"], env, cwd) * 1000)
            show_py, show_t = alternated([XCECLI, "show", str(hold)], n)
            loop = f"for i in $(seq 100); do {shlex.quote(XCECLI)} submit --parsable -- true >/dev/null || exit 1; done"
            loop_t = []
            for _ in range(3):
                dt, r = run_timed(["sh", "-c", loop], env, cwd, timeout=300)
                assert r.returncode == 0, r.stderr[-500:]
                loop_t.append(dt)
            imports = parse_importtime(run_blocking([sys.executable, "-X", "importtime", XCECLI, "submit", "--parsable",
                                                     "--", "true"], env=env, cwd=cwd, stdout=subprocess.PIPE,
                                                    stderr=subprocess.PIPE, text=True).stderr)

        def row(key: str, label: str, t: list[float], p: list[float], aim: float, slurm: float | None = None,
                what: str = "") -> None:
            pm = median(p)
            res.metrics.append(Metric(key, label, median(t), "ms", True, p95=p95(t), slurm=slurm, aim=aim,
                                      extra=f"{what}; python -c pass {pm:.1f} ms alongside: {median(t) / pm:.1f}x"))

        row("cli17_submit", "`xcecli submit --parsable -- true`", sub_t, sub_py, 50, 5, f"{n} calls")
        row("cli17_help", "`xcecli --help` (stdout a pipe)", help_t, help_py, 60, None, f"{n} calls")
        row("cli17_help_tty", "`xcecli --help` (a 100-column terminal)", tty_t, tty_py, 60, None, f"{n} calls")
        row("cli17_show", "`xcecli show ID`", show_t, show_py, 60, None, f"{n} calls")
        row("cli17_jobs", f"`xcecli jobs -u all`, {npack:,} pending", jobs_t, jobs_py, 150, 113, "11 calls")
        row("cli17_jobs_json", f"`xcecli jobs -u all --json`, {npack:,} pending", json_t, json_py, 150, None,
            "11 calls")
        row("cli18_bsub", "`bsub true`", bsub_t, bsub_py, 50, 5, f"{n} calls")
        row("cli18_bjobs", f"`bjobs -u all`, {npack:,} pending", bjobs_t, bjobs_py, 150, 113, "11 calls")
        res.metrics.append(Metric("cli17_loop", "100 sequential `xcecli submit` in a shell loop", median(loop_t), "s",
                                  True, p95=max(loop_t), slurm=0.5, aim=5, extra="median of 3; p95 column = max"))
        rate = npack / (pack_t[0] / 1000)
        res.metrics.append(Metric("cli17_pack", f"`xcecli submit --pack FILE`, {npack:,} lines", rate, "jobs/s", False,
                                  aim=1000, extra=f"{pack_t[0] / 1000:.2f} s from start to the last ID printed"))
        total_imp = sum(ms for _, ms in imports)
        res.details += [
            "medians in ms, each beside `python -c pass` in the same run (command / pass): "
            + "; ".join(f"{name} {median(t):.1f} / {median(p):.1f}" for name, t, p in (
                ("submit", sub_t, sub_py), ("--help", help_t, help_py), ("--help on a terminal", tty_t, tty_py),
                ("show", show_t, show_py),
                ("jobs", jobs_t, jobs_py), ("jobs --json", json_t, json_py), ("bsub", bsub_t, bsub_py),
                ("bjobs", bjobs_t, bjobs_py))),
            f"100 submits in a shell loop: {', '.join(f'{t:.2f}' for t in loop_t)} s",
            f"imports of one `xcecli submit` (`python -X importtime`): {total_imp:.0f} ms in all; largest top-level: "
            + ", ".join(f"{m} {ms:.1f} ms" for m, ms in sorted(imports, key=lambda x: -x[1])[:8]),
        ]

    # ---------------------------------------------------------------- version

    def version(self, res: BenchResult) -> None:
        """Issue 16 part 5: `PROG --version` for the three tools against `python -c pass` in
        the same venv, alternated call by call so that load drifts hit both alike. Aim: no
        more than the interpreter's start plus 20 ms."""
        n = 10 if self.quick else 30
        env, cwd = os.environ.copy(), str(ROOT)
        tools = {p: str(BIN / p) for p in ("xcecli", "xceadmin", "xced")}
        times: dict[str, list[float]] = {p: [] for p in ["python -c pass", *tools]}
        for _ in range(n):
            times["python -c pass"].append(run_timed([sys.executable, "-c", "pass"], env, cwd)[0] * 1000)
            for p, exe in tools.items():
                dt, r = run_timed([exe, "--version"], env, cwd)
                assert r.returncode == 0 and r.stdout.startswith(f"{p} "), (p, r.stdout, r.stderr)
                times[p].append(dt * 1000)
        py = median(times["python -c pass"])
        for p in tools:
            res.metrics.append(Metric(f"version_{p}", f"`{p} --version` wall time", median(times[p]), "ms", True,
                                      p95=p95(times[p]), aim=py + 20, extra=f"{n} calls; aim = python -c pass + 20"))
        res.details.append("median wall time (ms) of " + ", ".join(f"`{p}{'' if p.startswith('python') else ' --version'}`"
                                                                   f" {median(v):.1f}" for p, v in times.items())
                           + f"; {n} calls each, alternated")

    # ---------------------------------------------------------------- preset

    def preset(self, res: BenchResult) -> None:
        """PRE-1: `xcecli submit --preset P` against the same submit with the same options
        given on the command line, alternated so that load drifts hit both alike; and the
        expansion itself (reading the preset's JSON copy, merging, checking) in a fresh
        interpreter, imports included."""
        import tempfile

        n = 10 if self.quick else 30
        opts = ["-q", "normal", "-n", "1", "-W", "30", "-R", "rusage[mem=10]", "--env", "A=1", "-J", "p"]
        with self.daemon("preset", slots=4) as d, tempfile.TemporaryDirectory(prefix="xce-bench-cfg-") as cfg:
            env = {**d.cli_env(), "XDG_CONFIG_HOME": cfg}
            cwd = str(d.top)
            r = run_blocking([XCECLI, "presets", "create", "bench", *opts], env=env, cwd=cwd,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert r.returncode == 0, r.stderr
            plain_cmd = [XCECLI, "submit", "--parsable", *opts, "--", "true"]
            preset_cmd = [XCECLI, "submit", "--parsable", "--preset", "bench", "--", "true"]
            run_timed(plain_cmd, env, cwd)
            run_timed(preset_cmd, env, cwd)  # warm both; not counted
            plain, with_preset = [], []
            for _ in range(n):
                for cmd, out in ((plain_cmd, plain), (preset_cmd, with_preset)):
                    dt, r = run_timed(cmd, env, cwd)
                    int(r.stdout.strip())
                    out.append(dt * 1000)
                    time.sleep(0.05)
            code = ("import time, xced.api.client, xced.api.submit_options, xced.model.jobs, xced.model.units; "
                    "t = time.perf_counter(); from xcecli.presets import load_fast; "
                    "from xced.api.submit_options import merge_values, check_values; "
                    "p = load_fast('bench'); v, _ = merge_values(p.values, {'queue': 'short'}); check_values(v); "
                    "print((time.perf_counter() - t) * 1000)")
            inproc = [float(run_blocking([sys.executable, "-c", code], env=env, cwd=cwd, stdout=subprocess.PIPE,
                                         text=True).stdout) for _ in range(n)]
        diffs = [b - a for a, b in zip(plain, with_preset)]
        res.metrics.append(Metric("preset", "what `submit --preset` adds to `xcecli submit`", median(diffs), "ms", True,
                                  aim=10, extra=f"{n} alternated pairs"))
        res.details += [
            f"`xcecli submit --preset bench` wall: median {median(with_preset):.0f} ms; the same options on the "
            f"command line: median {median(plain):.0f} ms; difference per pair: median {median(diffs):.1f} ms, "
            f"p95 {p95(diffs):.1f} ms ({n} pairs, alternated)",
            f"the expansion alone, in a fresh interpreter that has imported what a plain submit imports "
            f"(importing xcecli.presets and platformdirs, reading the JSON copy, merging over a command-line -q, "
            f"checking): median {median(inproc):.1f} ms",
        ]

    # ---------------------------------------------------------------- api_submit

    def api_submit(self, res: BenchResult) -> None:
        n = 200 if self.quick else 1000
        with self.daemon("api_submit", slots=1) as d:
            c = d.client
            d.hold_host(request)  # every job stays pending: this measures the submit path alone
            c.info()
            reqs = [request(["true"]) for _ in range(n)]
            lat = []
            gc0 = len(d.gc_pauses())
            cpu0 = d.cpu_s()
            t0 = time.perf_counter()
            for r in reqs:
                t = time.perf_counter()
                c.submit(r)
                lat.append((time.perf_counter() - t) * 1000)
            total = time.perf_counter() - t0
            dcpu = d.cpu_s() - cpu0
            gcline = gc_detail(d, gc0, f"during the {n} submits")
            # client-side share: the same requests' body building + response parsing, no I/O
            from xced.api.models import SubmitResponse

            t = time.perf_counter()
            for r in reqs[:200]:
                r.model_dump(exclude_none=True)
                SubmitResponse.model_validate_json(b'{"job_id":1,"name":null,"queue":"normal","array_size":0}')
            client_model_ms = (time.perf_counter() - t) / 200 * 1000
            first = lat[: n // 10]
            last = lat[-(n // 10):]
        rate = n / total
        res.metrics.append(Metric("api_submit", f"API submits/s, one connection ({n} jobs)", rate, "jobs/s", False,
                                  slurm=200, aim=500, extra=f"per call median {median(lat):.2f} ms, p95 {p95(lat):.2f} ms"))
        res.details += [
            (f"{n} submits in {total:.2f} s: {rate:.0f}/s; per call median {median(lat):.2f} ms, p95 {p95(lat):.2f} ms, "
            f"max {max(lat):.1f} ms"),
            (f"first {len(first)} calls median {median(first):.2f} ms, last {len(last)} median {median(last):.2f} ms "
            f"(queue depth grows from 0 to {n} pending)"),
            (f"daemon CPU during the loop: {dcpu:.2f} s = {dcpu / n * 1000:.2f} ms per submit "
            f"({dcpu / total:.0%} of one core)"),
            f"client-side pydantic work per submit (dump request + parse response): {client_model_ms:.3f} ms",
            f"request body: the submitter's environment ({len(os.environ)} variables), as `xcecli submit` sends it",
            gcline,
        ]

    # ---------------------------------------------------------------- api_with_cli

    def api_with_cli(self, res: BenchResult) -> None:
        """Issue 17 part 5: API submits while another thread runs `xcecli submit --parsable --
        true` in a loop against the same daemon (every job kept pending, as in api_submit:
        the submit path alone). Two phases of `secs` each, the CLI loop running through both:
        API_WITH_CLI_CONNECTIONS connections submitting back to back, each from its own
        thread (the aim: the daemon's throughput, as a server's is measured, with clients
        enough to keep it busy), then one connection (latency-bound: the client's CPU, the
        daemon's and the commit's fsync follow one another, nothing overlaps)."""
        import threading

        from xced.api.client import Client

        secs = 3.0 if self.quick else 10.0
        with self.daemon("api_with_cli", slots=1) as d:
            c = d.client
            d.hold_host(request)
            c.info()
            env, cwd = d.cli_env(), str(d.top)
            cmd = [XCECLI, "submit", "--parsable", "--", "true"]
            run_timed(cmd, env, cwd)  # warm the page cache; not counted
            r = request(["true"])
            clients = [c] + [Client(d.socket, timeout=120.0) for _ in range(API_WITH_CLI_CONNECTIONS - 1)]
            for k in clients:
                for _ in range(20):  # warm the daemon's submit path and each connection; not counted
                    k.submit(r)
            cli: list[float] = []
            errors: list[BaseException] = []
            stop = threading.Event()

            def cli_loop() -> None:
                try:
                    while not stop.is_set():
                        dt, out = run_timed(cmd, env, cwd)
                        int(out.stdout.strip())
                        cli.append(dt * 1000)
                except BaseException as e:  # noqa: BLE001 - reported below
                    errors.append(e)

            def api_loop(k, end: float, lat: list[float]) -> None:
                try:
                    while (t := time.perf_counter()) < end:
                        k.submit(r)
                        lat.append((time.perf_counter() - t) * 1000)
                except BaseException as e:  # noqa: BLE001 - reported below
                    errors.append(e)

            def phase(conns: list) -> tuple[int, float, list[float], float, float, int]:
                """(submits, seconds, latencies ms, daemon CPU s, machine CPU share, CLI calls)"""
                lats: list[list[float]] = [[] for _ in conns]
                n_cli = len(cli)
                cpu0, busy0 = d.cpu_s(), cpu_busy()
                t0 = time.perf_counter()
                ths = [threading.Thread(target=api_loop, args=(k, t0 + secs, lat)) for k, lat in zip(conns, lats)]
                for th in ths:
                    th.start()
                for th in ths:
                    th.join(secs + 60)
                total = time.perf_counter() - t0
                if errors:
                    raise errors[0]
                lat = [x for one in lats for x in one]
                return len(lat), total, lat, d.cpu_s() - cpu0, machine_cpu_share(busy0, cpu_busy()), len(cli) - n_cli

            th = threading.Thread(target=cli_loop)
            th.start()
            try:
                time.sleep(0.3)  # the CLI loop under way before the API counts
                many = phase(clients)
                one = phase(clients[:1])
            finally:
                stop.set()
                th.join(60)
                for k in clients[1:]:
                    k.close()
            if errors:
                raise errors[0]
        rows = []
        for label, (n, total, lat, dcpu, share, n_cli) in (
                (f"{API_WITH_CLI_CONNECTIONS} connections", many), ("one connection", one)):
            rows.append((label, n / total))
            res.details += [
                (f"{label}: {n} API submits in {total:.2f} s: {n / total:.0f}/s; per call median {median(lat):.2f} ms, "
                 f"p95 {p95(lat):.2f} ms, max {max(lat):.1f} ms; {n_cli} `xcecli submit` meanwhile"),
                (f"{label}: daemon CPU {dcpu:.2f} s = {dcpu / (n + n_cli) * 1000:.2f} ms per submit ({dcpu / total:.0%} "
                 f"of one core); the machine's CPU {share:.0%} busy (2 cores: the loops, the daemon, the CLI processes "
                 f"and anything else running)"),
            ]
        res.metrics.append(Metric("api_with_cli", f"API submits/s while a CLI submit loop runs "
                                                  f"({API_WITH_CLI_CONNECTIONS} connections)", rows[0][1], "jobs/s",
                                  False, aim=1000, extra=f"{secs:g} s; {many[5]} CLI submits meanwhile"))
        res.metrics.append(Metric("api_with_cli_one", "API submits/s while a CLI submit loop runs (one connection)",
                                  rows[1][1], "jobs/s", False, extra=f"{secs:g} s; {one[5]} CLI submits meanwhile"))
        res.metrics.append(Metric("api_with_cli_cli", "`xcecli submit` wall time while the API loops run", median(cli),
                                  "ms", True, p95=p95(cli), extra=f"{len(cli)} calls during both phases"))

    # ---------------------------------------------------------------- pack

    def pack(self, res: BenchResult) -> None:
        """CLI-7 (issue 17 part 2): one POST /jobs/pack of 10,000 single jobs, each with its
        own name and command and every tenth with an --env of its own, the submitter's
        environment sent once; from the client's call to its answer (in-process, one
        connection, as api_submit). Aim: at least 1,000 jobs/s (10,000 in under 10 s)."""
        n = 1000 if self.quick else 10_000
        reps = 3
        jobs = [{"argv": ["sh", "-c", f"echo {i}"], "cwd": "/tmp", "name": f"p{i}", "umask": 0o022,
                 **({"env": {"STEP": str(i)}} if i % 10 == 0 else {})} for i in range(n)]
        env = dict(os.environ)
        with self.daemon("pack", slots=1) as d:
            c = d.client
            d.hold_host(request)  # the jobs stay pending: only the pack's submit is measured
            c.info()
            times, cpu = [], []
            for _ in range(reps):
                cpu0 = d.cpu_s()
                t = time.perf_counter()
                r = c.submit_pack(env, jobs)
                times.append(time.perf_counter() - t)
                cpu.append(d.cpu_s() - cpu0)
                assert len(r["jobs"]) == n and len({j["job_id"] for j in r["jobs"]}) == n, len(r["jobs"])
                time.sleep(0.3)  # the session the pack asked for runs between two packs
            listed = len(c.jobs_raw(user="all").json()["jobs"])
            import json as _json

            body = len(_json.dumps({"env": env, "jobs": jobs}, separators=(",", ":")))
        rate = n / median(times)
        res.metrics.append(Metric("pack", f"API pack submit, {n:,} jobs", rate, "jobs/s", False, aim=1000,
                                  extra=f"median of {reps}; {median(times):.2f} s per pack"))
        res.details += [
            f"{reps} packs of {n:,} jobs: " + ", ".join(f"{t:.2f}" for t in times) + f" s ({rate:.0f} jobs/s at the "
            f"median); daemon CPU per pack " + ", ".join(f"{c:.2f}" for c in cpu) + " s",
            f"request body {body / 2**20:.1f} MiB (the environment of {len(env)} variables once, every tenth job "
            f"with an --env of its own); {listed:,} jobs listed after ({reps * n:,} packed + the host's hold job)",
        ]

    def bkill(self, res: BenchResult) -> None:
        """CLI-8: `bkill 0` over 10,000 pending jobs of the caller (LSF's "Kill multiple jobs":
        bkill 0 over more than about 1,000 jobs "can take a long time"). bkill sends them
        2,000 to a POST /jobs/kill (and so does `xcecli kill ID ...`); beside it, the same
        kills a request per job (POST /jobs/ID/kill over one connection from this process,
        what bkill sent before POST /jobs/kill). Each run kills a fresh pack."""
        n = 1000 if self.quick else 10_000
        reps = 3
        jobs = [{"argv": ["true"], "cwd": "/tmp", "hold": True} for _ in range(n)]
        bkill = str(Path(sys.executable).with_name("bkill"))
        xcecli = str(Path(sys.executable).with_name("xcecli"))
        with self.daemon("bkill", slots=1) as d:
            env, cwd = d.cli_env(), str(d.top)
            bulk, one = [], []
            for _ in range(reps):
                ids = [j["job_id"] for j in d.client.submit_pack(dict(os.environ), jobs)["jobs"]]
                dt, r = run_timed([bkill, "0"], env, cwd, timeout=300)
                assert r.returncode == 0 and r.stdout.count("\n") == n, r.stderr[-500:]
                bulk.append(dt)
                ids = [j["job_id"] for j in d.client.submit_pack(dict(os.environ), jobs)["jobs"]]
                t = time.perf_counter()
                for jid in ids:
                    d.client.request("POST", f"/jobs/{jid}/kill", json={})
                one.append(time.perf_counter() - t)
            ids = [j["job_id"] for j in d.client.submit_pack(dict(os.environ), jobs[:1000])["jobs"]]
            dt, r = run_timed([xcecli, "kill", *map(str, ids)], env, cwd, timeout=300)
            assert r.returncode == 0 and r.stdout.count("\n") == len(ids), r.stderr[-500:]
        res.metrics.append(Metric("bkill0", f"`bkill 0`, {n:,} pending jobs", median(bulk), "s", True,
                                  extra=f"median of {reps}; a request per job {median(one):.1f} s: "
                                        f"{median(one) / median(bulk):.1f}x"))
        res.details.append(f"bkill 0 over {n:,} pending jobs: " + ", ".join(f"{t:.2f}" for t in bulk) + " s; the same "
                           f"kills a POST /jobs/ID/kill each, one connection: " + ", ".join(f"{t:.2f}" for t in one)
                           + f" s; xcecli kill of 1,000 IDs: {dt:.2f} s")

    # ---------------------------------------------------------------- array

    def array(self, res: BenchResult) -> None:
        size = 1000 if self.quick else 10_000
        reps = 3
        with self.daemon("array", slots=1) as d:
            c = d.client
            d.hold_host(request)  # the elements stay pending: only the submit is measured
            times, info_after = [], []
            gc0 = len(d.gc_pauses())
            for i in range(reps):
                t = time.perf_counter()
                r = c.submit(request(["true"], name=f"a{i}[1-{size}]"))
                times.append((time.perf_counter() - t) * 1000)
                assert r.array_size == size, r
                # requests sent meanwhile wait for the scheduler session the submit triggered
                info_after.append(max(probe_info(c, 0.3)))
                time.sleep(0.3)
            info_idle = median(probe_info(c, 0.1))
            gcline = gc_detail(d, gc0, f"during the {reps} array submits and the probes")
            cli_t, _ = run_timed([XCECLI, "submit", "--parsable", "-J", f"cli[1-{size}]", "true"], d.cli_env(),
                                 str(d.top))
        res.metrics.append(Metric("array", f"submit a {size:,}-element array (API call)", median(times), "ms", True,
                                  p95=max(times), slurm=5, aim=100, extra=f"median of {reps}; p95 column = max"))
        res.details += [
            f"API submit of a {size:,}-element array: " + ", ".join(f"{t:.0f}" for t in times)
            + f" ms (arrays 1..{reps}, {size:,} more pending elements each time)",
            f"`xcecli submit -J 'cli[1-{size}]' true` wall time: {cli_t * 1000:.0f} ms (with {reps * size:,} pending)",
            "GET /info sent back to back for 0.3 s after each array submit: slowest answer "
            + ", ".join(f"{t:.0f}" for t in info_after)
            + f" ms (idle median {info_idle:.1f} ms): the scheduler session after the submit blocks the daemon",
            gcline,
        ]

    # ---------------------------------------------------------------- latency

    def latency(self, res: BenchResult) -> None:
        n = 8 if self.quick else 20
        with self.daemon("latency", slots=4) as d:
            c = d.client
            s2s, disp, startup, e2e = [], [], [], []
            for i in range(n + 1):
                time.sleep(0.1)  # idle: no session pending from the previous job's end
                t0 = time.time()
                r = c.submit(request(["true"]))
                c.wait(r.job_id, timeout=30)
                t_back = time.time()
                el = c.job(r.job_id).elements[0]
                ev = {e.kind: e.time for e in c.events(r.job_id).events}
                if i == 0:
                    continue  # warm-up: first dispatch in a fresh daemon, not counted
                s2s.append((el.start_time - t0) * 1000)
                disp.append((ev["DISPATCH"] - ev["SUBMIT"]) * 1000)
                startup.append((el.start_time - ev["DISPATCH"]) * 1000)
                e2e.append((t_back - t0) * 1000)
        res.metrics.append(Metric("latency", "submit-to-start latency, idle cluster", median(s2s), "ms", True,
                                  p95=p95(s2s), slurm=1520, aim=50, extra=f"{n} jobs one at a time"))
        res.metrics.append(Metric("dispatch", "  of which SUBMIT -> DISPATCH event", median(disp), "ms", True,
                                  p95=p95(disp)))
        res.metrics.append(Metric("startup", "  of which DISPATCH -> job process start", median(startup), "ms", True,
                                  p95=p95(startup)))
        res.details += [
            f"submit-to-start: median {median(s2s):.1f} ms, p95 {p95(s2s):.1f} ms, min {min(s2s):.1f}, max {max(s2s):.1f}",
            f"SUBMIT -> DISPATCH event: median {median(disp):.1f} ms (includes the {5} ms sched_delay)",
            f"DISPATCH -> job start (supervisor launch + start-up + fork/exec): median {median(startup):.1f} ms",
            f"submit -> `wait` returns (job end seen by the client): median {median(e2e):.1f} ms",
        ]

    # ---------------------------------------------------------------- drain

    def _drain(self, res: BenchResult, as_array: bool) -> None:
        n = 300 if self.quick else 2000
        slots = 64
        key = "drain_array" if as_array else "drain"
        with self.daemon(key, slots=slots) as d:
            c = d.client
            c.info()
            cpu0, ccpu0, busy0, gc0 = d.cpu_s(), d.children_cpu_s(), cpu_busy(), len(d.gc_pauses())
            t_first = time.time()
            t0 = time.perf_counter()
            if as_array:
                ids = [c.submit(request(["true"], name=f"drain[1-{n}]")).job_id]
            else:
                ids = [c.submit(request(["true"])).job_id for _ in range(n)]
            t_sub = time.perf_counter() - t0
            if as_array:
                c.wait(ids[0], timeout=600)
                jobs = [c.job(ids[0])]
            else:
                jobs = wait_all_finished(d, ids, timeout=600)
            t_seen = time.time()
            time.sleep(0.2)  # the last supervisors are reaped
            dcpu, busy = d.cpu_s() - cpu0, machine_cpu_share(busy0, cpu_busy())
            ccpu = d.children_cpu_s() - ccpu0
            gcline = gc_detail(d, gc0, "during the drain")
            els = [e for j in jobs for e in j.elements]
        assert len(els) == n, f"{len(els)} elements, expected {n}"
        bad = [e for e in els if e.state != "DONE"]
        last_end = max(e.end_time for e in els)
        first_start = min(e.start_time for e in els)
        wall = last_end - t_first
        rate = n / wall
        peak = peak_concurrency([(e.start_time, e.end_time) for e in els])
        run_ms = [(e.end_time - e.start_time) * 1000 for e in els]
        label = f"drain {n:,} `true` jobs, 64 slots" + (" (one array)" if as_array else "")
        res.metrics.append(Metric(key, label, rate, "jobs/s", False, slurm=22, aim=100 if not as_array else None,
                                  extra=f"{wall:.1f} s first submit to last end"))
        res.details += [
            (f"{'one array' if as_array else 'individual API submits'}: submitted in {t_sub:.2f} s; first start "
            f"{(first_start - t_first) * 1000:.0f} ms after the first submit; last end {wall:.2f} s after it "
            f"-> {rate:.1f} jobs/s; {len(bad)} not DONE"),
            f"peak concurrency {peak} of {slots} slots; job run time (start to end) median {median(run_ms):.1f} ms",
            (f"daemon CPU {dcpu:.1f} s ({dcpu / (t_seen - t_first):.0%} of one core, "
            f"{dcpu / n * 1000:.1f} ms per job); the processes it started (supervisors, jobs, any launcher) "
            f"{ccpu:.1f} s = {ccpu / n * 1000:.1f} ms per job; whole machine busy {busy:.0%} of {os.cpu_count()} CPUs "
            f"(this benchmark's client included)"),
            gcline,
        ]

    def drain(self, res: BenchResult) -> None:
        self._drain(res, as_array=False)

    def drain_array(self, res: BenchResult) -> None:
        self._drain(res, as_array=True)

    # ---------------------------------------------------------------- pending

    def pending(self, res: BenchResult) -> None:
        n = 2000 if self.quick else 10_000
        conns = 8
        with self.daemon("pending", slots=1) as d:
            c = d.client
            rss_idle = d.status_kb() / 1024
            hold = d.hold_host(request)
            gc0 = len(d.gc_pauses())
            # Setup, not a metric: individual API submits over `conns` connections at once, so
            # that one scheduler session serves several submits (over one connection each
            # submit pays a session over every pending job: see `single` below).
            t0 = time.perf_counter()
            submit_parallel(d, [request(["true"]) for _ in range(n)], conns)
            t_sub = time.perf_counter() - t0
            time.sleep(1.0)  # let the last scheduler session finish
            rss_1s = d.status_kb() / 1024
            time.sleep(10.5)  # the daemon trims its heap every 10 s after scheduler work
            rss = d.status_kb() / 1024
            hwm = d.status_kb("VmHWM") / 1024
            gc_setup = gc_detail(d, gc0, f"during the {n:,} submits")
            gc1 = len(d.gc_pauses())
            env, cwd = d.cli_env(), str(d.top)
            listing, listing_json, api_list = [], [], []
            out_bytes = json_bytes = nlines = 0
            for _ in range(5):
                dt, r = run_timed([XCECLI, "jobs", "-u", "all"], env, cwd)
                listing.append(dt * 1000)
                out_bytes = len(r.stdout)
                nlines = r.stdout.count("\n")
            for _ in range(5):
                dt, r = run_timed([XCECLI, "jobs", "-u", "all", "--json"], env, cwd)
                listing_json.append(dt * 1000)
                json_bytes = len(r.stdout)
            for _ in range(3):
                t = time.perf_counter()
                resp = c.request("GET", "/jobs", params={"user": "all"})
                api_list.append((time.perf_counter() - t) * 1000)
            raw = resp.body if hasattr(resp, "body") else resp.content  # http.client or httpx client
            from xced.api.models import JobList

            t = time.perf_counter()
            JobList.model_validate_json(raw)
            parse_ms = (time.perf_counter() - t) * 1000
            rss_after = d.status_kb() / 1024
            hwm_after = d.status_kb("VmHWM") / 1024
            db = sum(f.stat().st_size for f in (d.top / "state").glob("*"))
            # what one connection gets at this depth (one session per submit)
            gc_list = gc_detail(d, gc1, "during the 13 listings")
            gc2 = len(d.gc_pauses())
            m = 50 if self.quick else 100
            t = time.perf_counter()
            for _ in range(m):
                c.submit(request(["true"]))
            single = m / (time.perf_counter() - t)
            info_ms = max(probe_info(c, 0.3))
            gc_single = gc_detail(d, gc2, f"during those {m} submits and the probe")
            assert c.job(hold).state == "RUN"
            rss_before_restart = d.status_kb() / 1024
            restarts = []
            for _ in range(3):
                restarts.append(d.restart() * 1000)
            time.sleep(1.0)
            rss_restart = d.status_kb() / 1024
            assert d.client.job(hold).state == "RUN"
        assert nlines == n + 2, f"xcecli jobs printed {nlines} lines, expected {n + 2}"
        res.metrics.append(Metric("jobs_cli", f"`xcecli jobs -u all`, {n:,} pending", median(listing), "ms", True,
                                  p95=max(listing), slurm=113, aim=300, extra="median of 5; p95 column = max"))
        res.metrics.append(Metric("jobs_json", f"`xcecli jobs -u all --json`, {n:,} pending", median(listing_json),
                                  "ms", True, p95=max(listing_json), extra="median of 5; p95 column = max"))
        res.metrics.append(Metric("rss", f"daemon RSS, {n:,} pending", rss, "MB", True, slurm=59, aim=80,
                                  extra=f"VmRSS 11 s after the submits ({rss_1s:.0f} MB after 1 s); {rss_after:.0f} MB "
                                        f"after the listings "
                                        f"(peak {hwm_after:.0f} MB)"))
        res.metrics.append(Metric("rss_restart", f"daemon RSS after a restart, {n + m:,} pending", rss_restart, "MB",
                                  True, slurm=34, aim=80, extra="1 s after the third restart"))
        res.metrics.append(Metric("restart", f"restart with {n + m:,} pending: first answer", median(restarts), "ms",
                                  True, p95=max(restarts), slurm=170, aim=500,
                                  extra="SIGTERM, start, first GET /info answered; median of 3; p95 column = max"))
        res.metrics.append(Metric("submit_deep", f"API submits/s, one connection, {n:,} pending", single, "jobs/s",
                                  False, extra=f"{m} submits; compare the 1,000-job row"))
        res.details += [
            f"setup: {n:,} individual API submits over {conns} connections in {t_sub:.1f} s ({n / t_sub:.0f}/s)",
            (f"then over one connection: {single:.0f} submits/s ({m} submits with {n:,} pending; each submit "
            f"triggers a scheduler session over every pending job); a GET /info probed every ~1 ms for 0.3 s "
            f"after them waited up to {info_ms:.0f} ms"),
            (f"GET /jobs?user=all alone (server + transfer, no parsing): median {median(api_list):.0f} ms, "
            f"{len(raw) / 1e6:.1f} MB of JSON; client-side JobList parse {parse_ms:.0f} ms"),
            (f"`xcecli jobs -u all` (plain columns, stdout a pipe): {', '.join(f'{t:.0f}' for t in listing)} ms, "
            f"{out_bytes / 1e6:.2f} MB out; --json: {', '.join(f'{t:.0f}' for t in listing_json)} ms, "
            f"{json_bytes / 1e6:.1f} MB out"),
            (f"RSS: idle {rss_idle:.0f} MB; after {n:,} submits {rss:.0f} MB (peak {hwm:.0f}), "
            f"{(rss - rss_idle) * 1024 / n:.1f} kB per pending job; after the listings {rss_after:.0f} MB "
            f"(peak {hwm_after:.0f}); store on disk {db / 1e6:.1f} MB"),
            gc_setup, gc_list, gc_single,
            (f"restart with {n + m:,} pending (RSS {rss_before_restart:.0f} MB before): first answer after "
             f"{', '.join(f'{t:.0f}' for t in restarts)} ms; RSS {rss_restart:.0f} MB after"),
        ]

    # ---------------------------------------------------------------- retention

    def retention(self, res: BenchResult) -> None:
        """Issue 15: a killed array of a million elements leaves memory once its clean period
        has passed (clean_period: 0 here), and a restart with 10,000 pending and that million
        finished in the store loads only what is pending."""
        size = 100_000 if self.quick else 1_000_000
        n = 2000 if self.quick else 10_000
        with self.daemon("retention", slots=1, extra="max_array_size: 1000000\nclean_period: 0\n") as d:
            c = d.client
            time.sleep(0.5)
            rss_idle = d.status_kb() / 1024
            hold = d.hold_host(request)
            t = time.perf_counter()
            arr = c.submit(request(["true"], name=f"big[1-{size}]")).job_id
            t_submit = time.perf_counter() - t
            rss_full = d.status_kb() / 1024
            t = time.perf_counter()
            c.action("kill", arr)
            t_kill = time.perf_counter() - t
            deadline = time.monotonic() + 120
            while any(j.job_id == arr for j in c.jobs(user="all").jobs):  # the purge takes it out
                if time.monotonic() > deadline:
                    raise RuntimeError("the killed array was not purged in 120 s")
                time.sleep(0.5)
            time.sleep(1.0)
            rss_purged = d.status_kb() / 1024
            submit_parallel(d, [request(["true"]) for _ in range(n)], 8)
            time.sleep(1.0)
            restarts = [d.restart() * 1000 for _ in range(3)]
            time.sleep(1.0)
            rss_restart = d.status_kb() / 1024
            assert d.client.job(arr).state == "EXIT" and d.client.job(hold).state == "RUN"
        res.metrics.append(Metric("purged_rss", f"daemon RSS after a killed {size:,}-element array is purged",
                                  rss_purged, "MB", True, aim=round(rss_idle * 1.2, 1),
                                  extra=f"idle {rss_idle:.0f} MB (aim: within 20%); {rss_full:.0f} MB with the "
                                        f"array pending"))
        res.metrics.append(Metric("restart_big", f"restart with {n:,} pending and {size:,} finished: first answer",
                                  median(restarts), "ms", True, p95=max(restarts), aim=2000,
                                  extra="median of 3; p95 column = max"))
        res.details += [
            (f"{size:,}-element array: submit {t_submit:.1f} s, kill (every element EXIT while pending) "
             f"{t_kill:.1f} s; RSS idle {rss_idle:.0f} MB, with the array {rss_full:.0f} MB, after its purge "
             f"{rss_purged:.0f} MB"),
            (f"then {n:,} pending submitted; restarts answered after {', '.join(f'{t:.0f}' for t in restarts)} ms; "
             f"RSS {rss_restart:.0f} MB after"),
        ]


    # ---------------------------------------------------------------- store_busy

    def store_busy(self, res: BenchResult) -> None:
        """D-8: another process holds the store's write lock for a while; submits that need a
        write wait it out (and answer store_busy after store_busy_timeout); meanwhile GET /info
        is probed back to back: its latency is the event loop's lag."""
        import threading

        from xced.api.client import Client
        from xced.api.errors import StoreBusy

        hold_s = 1.5 if self.quick else 4.0
        with self.daemon("store_busy", slots=4) as d:
            c = d.client
            c.info()
            idle = probe_info(c, 0.3)
            holder = subprocess.Popen(
                [sys.executable, "-c", "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None);"
                 " c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(float(sys.argv[2]))",
                 str(d.top / "state" / "xce.db"), str(hold_s)], stdout=subprocess.PIPE, text=True)
            assert holder.stdout.readline().strip() == "locked"
            outcomes: list[str] = []

            def submitter() -> None:
                sub = Client(d.socket, timeout=60.0)
                t = time.perf_counter()
                try:
                    sub.submit(request(["true"]))
                    outcomes.append(f"submitted after {(time.perf_counter() - t) * 1000:.0f} ms")
                except StoreBusy:
                    outcomes.append(f"store_busy after {(time.perf_counter() - t) * 1000:.0f} ms")

            threads = [threading.Thread(target=submitter) for _ in range(3)]
            for th in threads:
                th.start()
            lag = probe_info(c, hold_s - 0.2)
            holder.wait(30)
            for th in threads:
                th.join(60)
        lag.sort()
        p99 = lag[min(len(lag) - 1, int(len(lag) * 0.99))]
        res.metrics.append(Metric("store_busy", "GET /info while another process holds the store's lock, p99",
                                  p99, "ms", True, p95=p95(lag), aim=50, extra=f"{len(lag)} probes over {hold_s - 0.2:g} s"))
        res.details += [
            f"idle GET /info median {median(idle):.2f} ms; with the lock held: median {median(lag):.2f} ms, "
            f"p99 {p99:.1f} ms, max {max(lag):.1f} ms ({len(lag)} probes)",
            f"3 submits sent while the lock was held ({hold_s:g} s; store_busy_timeout 5 s): " + "; ".join(outcomes),
        ]


def submit_parallel(d: PrivateXced, reqs: list, conns: int) -> list[int]:
    """Submit `reqs` over `conns` connections at once (threads); the job IDs."""
    import threading

    from xced.api.client import Client

    ids: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    parts = [reqs[i::conns] for i in range(conns)]

    def work(part: list) -> None:
        try:
            with Client(d.socket, timeout=120.0) as cl:
                got = [cl.submit(r).job_id for r in part]
            with lock:
                ids.extend(got)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(p,)) for p in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sorted(ids)


def probe_info(c, seconds: float) -> list[float]:
    """Latencies (ms) of GET /info sent back to back for `seconds`: shows how long the
    daemon's event loop is blocked (e.g. by a scheduler session)."""
    out = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        c.info()
        out.append((time.perf_counter() - t) * 1000)
    return out


BENCHES = ["cli_submit", "cli", "version", "preset", "api_submit", "api_with_cli", "pack", "bkill", "array", "latency", "drain", "drain_array", "pending", "retention",
           "store_busy"]


# --------------------------------------------------------------------------- output


def print_table(results: list[BenchResult]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="XCE benchmark", header_style="bold")
    for h in ("Metric", "Result", "p95", "Slurm 22.05", "vs Slurm", "Aim", "Met?"):
        t.add_column(h)
    for r in results:
        if r.error:
            t.add_row(r.name, f"[red]failed: {r.error[:80]}[/red]", "", "", "", "", "")
            continue
        for m in r.metrics:
            aim = "-" if m.aim is None else ("< " if m.lower else "> ") + m.fmt(m.aim)
            met = m.met()
            t.add_row(m.label, m.fmt(m.value), m.fmt(m.p95), m.fmt(m.slurm), fmt_factor(m.factor(m.slurm)), aim,
                      f"[green]{met}[/green]" if met == "yes" else (f"[red]{met}[/red]" if met == "NO" else met))
    Console(width=None if sys.stdout.isatty() else 150).print(t)


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"nproc {os.cpu_count()} ({cpu}), {mem_gb:.0f} GB RAM, Python {platform.python_version()}, "
            f"Linux {platform.release()}")


def write_results(results: list[BenchResult], argv: list[str], total_s: float, load0: float) -> None:
    old = RESULTS.read_text() if RESULTS.exists() else ""
    analysis = old.split(ANALYSIS_MARKER, 1)[1].lstrip("\n") if ANALYSIS_MARKER in old else "(none yet)\n"
    lines = [
        "# XCE benchmark results",
        "",
        "Written by `bench/run.py` (`make bench`); do not edit above the analysis marker, it is",
        "rewritten on every run.",
        "",
        f"- Date: {datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}",
        f"- Machine: {machine()}",
        (f"- Command: `{shlex.join(['.venv/bin/python', 'bench/run.py', *argv])}` (from the project root; "
        f"{total_s:.0f} s in all); 1-minute load average {load0:.2f} before the run, {os.getloadavg()[0]:.2f} after"),
        "- Each benchmark runs its own `xced` (production mode, sched_delay 5 ms) in a fresh TopDir under",
        "  /tmp, one host; jobs are submitted with the submitter's whole environment, as `xcecli` does.",
        "- Slurm 22.05 reference: measured on the same kind of 2-core machine (from the issue).",
        "",
        "| Metric | Result | p95 | Slurm 22.05 | vs Slurm | Aim | Met? | Notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.error:
            lines.append(f"| {r.name} | failed: {r.error.splitlines()[0][:120]} | | | | | | |")
            continue
        for m in r.metrics:
            aim = "-" if m.aim is None else ("< " if m.lower else "> ") + m.fmt(m.aim)
            label = m.label.replace("  of which", "&nbsp;&nbsp;of which")
            met = {"yes": "yes", "NO": "**no**"}.get(m.met(), "-")
            lines.append(f"| {label} | {m.fmt(m.value)} | {m.fmt(m.p95)} | {m.fmt(m.slurm)} | "
                         f"{fmt_factor(m.factor(m.slurm))} | {aim} | {met} | {m.extra} |")
    lines += ["", "## Measured breakdown (automatic)", ""]
    for r in results:
        if r.error or not r.details:
            continue
        lines.append(f"**{r.name}** ({r.seconds:.0f} s; load average {r.load:.2f} when it started)")
        lines.append("")
        lines += [f"- {d}" for d in r.details]
        lines.append("")
    lines += [ANALYSIS_MARKER, "", analysis.rstrip("\n"), ""]
    RESULTS.write_text("\n".join(lines))


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help=f"comma-separated benchmarks: {', '.join(BENCHES)} (implies --no-write)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for development (implies --no-write)")
    ap.add_argument("--no-write", action="store_true", help="do not rewrite bench/RESULTS.md")
    ap.add_argument("--profile", action="store_true",
                    help="run each daemon under cProfile and print its top functions (implies --no-write)")
    args = ap.parse_args(argv)
    names = BENCHES
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        bad = [n for n in names if n not in BENCHES]
        if bad:
            ap.error(f"--only: unknown benchmark(s) {', '.join(bad)}; valid: {', '.join(BENCHES)}")
    # RESULTS.md holds one whole run: a partial, smaller or profiled run never rewrites it
    write = not (args.no_write or args.quick or args.profile or args.only)

    def on_term(signum, frame):
        raise SystemExit(128 + signum)  # run every `finally`: daemons stopped, TopDirs removed

    signal.signal(signal.SIGTERM, on_term)
    prof_dir = Path(tempfile.mkdtemp(prefix="xb-prof-", dir="/tmp")) if args.profile else None
    bench = Bench(args.quick, prof_dir)
    results: list[BenchResult] = []
    load0 = os.getloadavg()[0]
    if load0 > 0.5:
        print(f"[bench] warning: load average {load0:.2f} before the run: other work on this machine will "
              f"skew the numbers", file=sys.stderr)
    t_all = time.perf_counter()
    try:
        for name in names:
            res = BenchResult(name, load=os.getloadavg()[0])
            print(f"[bench] {name} ...", file=sys.stderr, flush=True)
            t = time.perf_counter()
            try:
                getattr(bench, name)(res)
            except KeyboardInterrupt:
                raise
            except Exception as e:  # one failure must not lose the other numbers
                import traceback

                traceback.print_exc()
                res.error = f"{type(e).__name__}: {e}"
            res.seconds = time.perf_counter() - t
            print(f"[bench] {name}: {res.seconds:.1f} s", file=sys.stderr, flush=True)
            for dline in res.details:
                print(f"    {dline}", file=sys.stderr)
            if prof_dir is not None:
                for p in sorted(prof_dir.glob(f"{name}*.prof")):
                    res.profile = profile_summary(p)
                    print(f"\n--- xced profile ({p.stem}), by own time ---\n{res.profile}", file=sys.stderr)
            results.append(res)
    finally:
        if prof_dir is not None:
            import shutil

            shutil.rmtree(prof_dir, ignore_errors=True)
    total = time.perf_counter() - t_all
    print_table(results)
    if write:
        write_results(results, argv, total, load0)
        print(f"wrote {RESULTS.relative_to(ROOT)}", file=sys.stderr)
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())

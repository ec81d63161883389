"""`make demo`: replay the start of a real workload trace through a live, private `xced`.

    .venv/bin/python bench/demo.py [--trace PATH] [--jobs N] [--scale S] [--keep]

Starts `xced` in a temporary TopDir with one host of 100 slots (the KTH IBM SP2), then
submits the first N jobs of the KTH-SP2 trace (Parallel Workloads Archive, SWF) at their
trace arrival times, compressed by --scale (trace seconds per real second; the default
14400 turns one trace hour into 0.25 s). Each job is a real process (`sleep`) holding its
requested slots (`-n`); jobs the trace marks failed exit 1; every 20th job is killed
mid-run with `xcecli kill`. At the end it reads the job history back from the daemon
(not from this driver) and checks:

  outcomes  DONE/EXIT counts match what the trace and the kills imply
  slots     slots in use (start..end intervals of every job) never exceeded the host's 100
  fcfs      jobs were dispatched in submit order (v1 scheduling is strict FCFS)

Exit status 0 only if every check holds; 1 otherwise; 130 on Ctrl-C. The daemon is always
stopped, and the TopDir removed unless --keep.

A kill victim's compressed run time is at least --kill-min-run seconds (default 4): the
trace's every-20th jobs are all short (under 0.11 s compressed), shorter than it takes
`xcecli` to start, so without this floor no kill could ever land mid-run.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import gzip
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT / "tests" / "data" / "KTH-SP2-1996-2.1-cln.swf.gz"  # sources: tests/data/README.md
BIN = Path(sys.executable).parent
HOST_SLOTS = 100
HOST_NAME = "kth-sp2"
KILL_EVERY = 20
UNFINISHED = ["PEND", "PSUSP", "RUN", "USUSP"]
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0

sys.path.insert(0, str(ROOT))  # run as a script from anywhere: import the project's xced


# --------------------------------------------------------------------------- trace


@dataclass
class TraceJob:
    number: int        # field 1
    submit: float      # field 2, seconds
    run: float         # field 4, seconds
    procs: int         # field 8 (requested), else field 5 (allocated)
    completed: bool    # field 11 == 1


def read_swf(path: Path, limit: int | None = None) -> list[TraceJob]:
    """The jobs of a Standard Workload Format file, plain or gzip-compressed (`.gz`), in file
    order (minimal reader: header `;` lines skipped, unknown run time taken as 0, unknown
    processors as 1)."""
    jobs: list[TraceJob] = []
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith(";"):
                continue
            fields = line.split()
            if len(fields) != 18:
                raise ValueError(f"{path}:{lineno}: {len(fields)} fields, SWF has 18")
            procs = int(fields[7])
            if procs <= 0:
                procs = int(fields[4])
            jobs.append(TraceJob(number=int(fields[0]), submit=float(fields[1]), run=max(0.0, float(fields[3])),
                                 procs=max(1, procs), completed=int(fields[10]) == 1))
            if limit is not None and len(jobs) >= limit:
                break
    return jobs


# --------------------------------------------------------------------------- daemon


def write_config(top: Path) -> None:
    cfg = top / "config"
    cfg.mkdir(parents=True)
    (cfg / "xce.yaml").write_text(
        "cluster_name: kth-demo\n"
        "mode: production\n"
        f"admins:\n  - {getpass.getuser()}\n"
        "default_queue: normal\n"
        "kill_interval: 0.5\n"
        "limit_grace: 1\n")
    (cfg / "queues.yaml").write_text(
        "queues:\n"
        "  - name: normal\n"
        "    priority: 30\n"
        "    description: KTH-SP2 replay, strict FCFS\n"
        "    backfill: false\n")
    (cfg / "hosts.yaml").write_text(
        "hosts:\n"
        f"  - name: {HOST_NAME}\n"
        f"    slots: {HOST_SLOTS}\n"
        "    memory: 262144\n")


def start_daemon(top: Path) -> subprocess.Popen:
    """Start xced for `top` in its own session (so a terminal's Ctrl-C reaches only the
    driver, which then stops it in order) and wait for run/xced.ready."""
    with open(top / "xced.log", "wb") as log:
        proc = subprocess.Popen([str(BIN / "xced"), "--topdir", str(top)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    ready = top / "run" / "xced.ready"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"xced exited with status {proc.returncode} before it was ready")
        if time.monotonic() > deadline:
            raise RuntimeError(f"xced was not ready after {READY_TIMEOUT_S:.0f} s")
        time.sleep(0.05)
    return proc


def stop_daemon(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def print_log(console, top: Path) -> None:
    try:
        text = (top / "xced.log").read_text(errors="replace")
    except OSError:
        return
    console.print(f"[bold]--- {top / 'xced.log'} ---[/]")
    console.print(text.rstrip(), markup=False, highlight=False)


# --------------------------------------------------------------------------- replay


@dataclass
class Replayed:
    trace: TraceJob
    offset: float                 # real seconds after the start of the replay
    duration: float               # real seconds the job sleeps
    kill_target: bool
    job_id: int | None = None
    kill_at: float | None = None  # epoch seconds
    kill_sent: bool = False
    kill_resolved: bool = False   # killed, or ended before the kill came
    next_poll: float = 0.0


@dataclass
class ReplayStats:
    wall: float = 0.0
    max_submit_lag: float = 0.0
    kills_sent: int = 0
    kill_errors: list[str] = field(default_factory=list)
    late_kills: list[int] = field(default_factory=list)  # job IDs that ended before their kill
    kill_latency: list[float] = field(default_factory=list)  # seconds each `xcecli kill` took


def replay(client, top: Path, jobs: list[TraceJob], scale: float, kill_min_run: float, console) -> tuple[list[Replayed], ReplayStats]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from xced.api.models import SubmitRequest

    first = jobs[0].submit
    items = []
    for pos, tj in enumerate(jobs, 1):
        target = pos % KILL_EVERY == 0
        d = tj.run / scale
        if target:
            d = max(d, kill_min_run)
        items.append(Replayed(tj, (tj.submit - first) / scale, d, target))
    outdir = top / "out"
    outdir.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    xcecli = [str(BIN / "xcecli"), "--topdir", str(top), "kill"]
    stats = ReplayStats()
    kill_procs: list[tuple[Replayed, subprocess.Popen, float]] = []
    n = len(items)
    nxt = 0
    finished = 0
    next_count = 0.0

    progress = Progress(TextColumn("[bold]{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console,
                        refresh_per_second=4, transient=False)
    t0 = time.monotonic()
    with progress:
        t_sub = progress.add_task("submitted", total=n, note="")
        t_fin = progress.add_task("finished", total=n, note="")
        while finished < n or kill_procs:
            now = time.monotonic() - t0
            # 1. submissions that are due, in trace order
            while nxt < n and items[nxt].offset <= now:
                it = items[nxt]
                code = 0 if it.trace.completed else 1
                req = SubmitRequest(argv=["/bin/sh", "-c", f"sleep {it.duration:.3f}; exit {code}"],
                                    cwd=str(top), env=env, name=f"kth-{it.trace.number}", queue="normal",
                                    ntasks_min=it.trace.procs, stdout=str(outdir / "%J.out"))
                it.job_id = client.submit(req).job_id
                stats.max_submit_lag = max(stats.max_submit_lag, time.monotonic() - t0 - it.offset)
                nxt += 1
                now = time.monotonic() - t0
            # 2. kill victims: watch until RUN, kill at half their run time
            for it in items[:nxt]:
                if not it.kill_target or it.kill_resolved or it.kill_sent:
                    continue
                mono = time.monotonic()
                if it.kill_at is None:
                    if mono < it.next_poll:
                        continue
                    it.next_poll = mono + 0.2  # kill_at comes from the daemon's start time, so this may lag
                    job = client.job(it.job_id)
                    e = job.elements[0]
                    if e.state in ("DONE", "EXIT"):
                        it.kill_resolved = True
                        continue
                    if e.state == "RUN" and e.start_time is not None:
                        it.kill_at = e.start_time + it.duration / 2
                if it.kill_at is not None and time.time() >= it.kill_at:
                    p = subprocess.Popen(xcecli + [str(it.job_id)], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                    kill_procs.append((it, p, time.monotonic()))
                    it.kill_sent = True
                    stats.kills_sent += 1
            # 3. reap finished `xcecli kill` processes
            for pair in list(kill_procs):
                it, p, sent = pair
                if p.poll() is None:
                    continue
                kill_procs.remove(pair)
                stats.kill_latency.append(time.monotonic() - sent)
                it.kill_resolved = True
                out = (p.stdout.read() if p.stdout else b"").decode(errors="replace").strip()
                if p.returncode != 0:
                    if "already finished" in out:
                        stats.late_kills.append(it.job_id)  # it ended before the kill came: fine
                    else:
                        stats.kill_errors.append(f"xcecli kill {it.job_id} exited {p.returncode}: {out}")
            # 4. progress: the daemon's unfinished jobs (every job there is ours)
            if time.monotonic() >= next_count:
                next_count = time.monotonic() + 0.5
                active = len(client.jobs(user="all", states=UNFINISHED).jobs)
                finished = nxt - active
                progress.update(t_sub, completed=nxt, note=f"trace h {now * scale / 3600:6.1f}")
                progress.update(t_fin, completed=finished,
                                note=f"killed {sum(1 for i in items if i.kill_sent)}, running/pending {active}")
            if finished >= n and not kill_procs:
                break
            wake = 0.02
            if nxt < n:
                wake = min(wake, max(0.0, items[nxt].offset - (time.monotonic() - t0)))
            time.sleep(wake)
    stats.wall = time.monotonic() - t0
    return items, stats


# --------------------------------------------------------------------------- checks


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def analyse(client, items: list[Replayed], scale: float) -> dict:
    """Everything below comes from the daemon's job records and event history."""
    jobs = {it.job_id: client.job(it.job_id) for it in items}
    events = {it.job_id: client.events(it.job_id).events for it in items}
    r: dict = {"n": len(items)}

    # outcomes
    killed = {jid for jid, j in jobs.items() if (j.elements[0].exit_reason or "").startswith("killed by")}
    failed = {it.job_id for it in items if not it.trace.completed}
    exp_exit = failed | killed
    got_done = sum(1 for j in jobs.values() if j.state == "DONE")
    got_exit = sum(1 for j in jobs.values() if j.state == "EXIT")
    problems = []
    for jid in killed:
        if jobs[jid].state != "EXIT":
            problems.append(f"job {jid} was killed but is {jobs[jid].state}")
    for jid in failed - killed:
        e = jobs[jid].elements[0]
        if e.exit_code != 1:
            problems.append(f"job {jid} failed in the trace but has exit code {e.exit_code} ({e.exit_reason})")
    for it in items:
        e = jobs[it.job_id].elements[0]
        if it.job_id not in exp_exit and (jobs[it.job_id].state != "DONE" or e.exit_code != 0):
            problems.append(f"job {it.job_id} should be DONE but is {jobs[it.job_id].state} ({e.exit_reason})")
        if it.kill_target and it.job_id not in killed and jobs[it.job_id].state != ("DONE" if it.trace.completed else "EXIT"):
            problems.append(f"kill victim {it.job_id} not killed yet {jobs[it.job_id].state}")
    r.update(killed=len(killed), kill_targets=sum(1 for it in items if it.kill_target),
             done=(got_done, len(items) - len(exp_exit)), exit=(got_exit, len(exp_exit)),
             outcome_problems=problems,
             outcomes_ok=not problems and got_done == len(items) - len(exp_exit) and got_exit == len(exp_exit))

    # slots in use: sweep over [start, end) weighted by allocated slots; ends before starts
    points: list[tuple[float, int, int]] = []
    busy = 0.0
    missing = 0
    for j in jobs.values():
        for e in j.elements:
            slots = sum(a.slots for a in e.alloc)
            if e.start_time is None or e.end_time is None:
                if slots:
                    missing += 1
                continue
            points.append((e.start_time, 1, slots))
            points.append((e.end_time, 0, -slots))
            busy += slots * (e.end_time - e.start_time)
    points.sort()
    cur = peak = 0
    for _, _, delta in points:
        cur += delta
        peak = max(peak, cur)
    r.update(max_slots=peak, slots_ok=peak <= HOST_SLOTS and missing == 0, slots_missing=missing)

    # FCFS: in submit (job ID) order, first DISPATCH times never decrease
    dispatch: dict[int, float] = {}
    for jid, evs in events.items():
        ts = [ev.time for ev in evs if ev.kind == "DISPATCH"]
        if ts:
            dispatch[jid] = min(ts)
    violations = 0
    last = float("-inf")
    order = sorted(jobs)
    for jid in order:
        if jid not in dispatch:
            continue  # killed while pending: never dispatched
        if dispatch[jid] < last:
            violations += 1
        last = max(last, dispatch[jid])
    undispatched = sum(1 for jid in order if jid not in dispatch and jid not in killed)
    r.update(fcfs_violations=violations, fcfs_ok=violations == 0 and undispatched == 0, undispatched=undispatched)

    # waits and utilisation (real seconds; trace seconds = real * scale)
    waits = [dispatch[jid] - jobs[jid].submit_time for jid in order if jid in dispatch]
    r.update(wait_p50=percentile(waits, 0.5), wait_p95=percentile(waits, 0.95),
             wait_mean=statistics.fmean(waits) if waits else float("nan"))
    t_first = min(j.submit_time for j in jobs.values())
    t_last = max((e.end_time for j in jobs.values() for e in j.elements if e.end_time is not None), default=t_first)
    makespan = t_last - t_first
    r.update(makespan=makespan, util=busy / (HOST_SLOTS * makespan) if makespan > 0 else 0.0)
    return r


def report(console, r: dict, stats: ReplayStats, scale: float, total_wall: float) -> bool:
    from rich.table import Table

    def ok(flag: bool) -> str:
        return "[bold green]PASS[/]" if flag else "[bold red]FAIL[/]"

    def hours(real_s: float) -> str:
        return f"{real_s * scale / 3600:.1f} h"

    t = Table(title=f"KTH-SP2 replay: {r['n']} jobs on {HOST_SLOTS} slots, 1 trace hour = {3600 / scale:.3f} s")
    t.add_column("measure")
    t.add_column("value", justify="right")
    t.add_column("expected", justify="right")
    t.add_column("check", justify="center")
    t.add_row("jobs", str(r["n"]), "", "")
    t.add_row("DONE", str(r["done"][0]), str(r["done"][1]), ok(r["outcomes_ok"]))
    t.add_row("EXIT", str(r["exit"][0]), str(r["exit"][1]), ok(r["outcomes_ok"]))
    t.add_row("killed mid-run", str(r["killed"]), f"{r['kill_targets']} targeted", "")
    t.add_row("wait p50", f"{r['wait_p50'] * scale:,.0f} s trace / {r['wait_p50']:.3f} s real", "", "")
    t.add_row("wait p95", f"{r['wait_p95'] * scale:,.0f} s trace / {r['wait_p95']:.3f} s real", "", "")
    t.add_row("utilisation", f"{r['util']:.1%}", "", "")
    t.add_row("makespan", f"{hours(r['makespan'])} trace / {r['makespan']:.1f} s real", "", "")
    t.add_row("max slots in use", str(r["max_slots"]), f"<= {HOST_SLOTS}", ok(r["slots_ok"]))
    t.add_row("FCFS violations", str(r["fcfs_violations"]), "0", ok(r["fcfs_ok"]))
    if stats.kill_latency:
        t.add_row("xcecli kill time", f"p50 {percentile(stats.kill_latency, 0.5):.2f} s, max {max(stats.kill_latency):.2f} s", "", "")
    t.add_row("max submit lag", f"{stats.max_submit_lag:.3f} s", "", "")
    t.add_row("wall time", f"{total_wall:.1f} s (replay {stats.wall:.1f} s)", "< 120 s", "")
    console.print(t)
    failed = []
    if not r["outcomes_ok"]:
        failed.append("outcomes")
        for p in r["outcome_problems"][:20]:
            console.print(f"  outcomes: {p}", markup=False)
    if not r["slots_ok"]:
        failed.append("slots")
        if r["slots_missing"]:
            console.print(f"  slots: {r['slots_missing']} element(s) with slots but no start or end time")
    if not r["fcfs_ok"]:
        failed.append("fcfs")
        if r["undispatched"]:
            console.print(f"  fcfs: {r['undispatched']} job(s) never dispatched and not killed")
    if stats.late_kills:
        console.print(f"  note: job(s) {', '.join(map(str, stats.late_kills))} ended before their `xcecli kill` "
                      f"arrived (not counted as killed; see --kill-min-run)", markup=False)
    if stats.kill_errors:
        failed.append("kill")
        for e in stats.kill_errors:
            console.print(f"  kill: {e}", markup=False)
    if failed:
        console.print(f"[bold red]FAILED[/]: {', '.join(failed)}")
        return False
    console.print("[bold green]all checks passed[/]")
    return True


# --------------------------------------------------------------------------- main


def kill_leftovers(client) -> None:
    """On an abort: kill the jobs still pending or running, so no sleeps outlive the demo."""
    from xced.api.errors import DaemonUnreachable, XceError

    try:
        for j in client.jobs(user="all", states=UNFINISHED).jobs:
            with contextlib.suppress(XceError):  # it may have just ended
                client.action("kill", j.job_id)
        deadline = time.monotonic() + 5
        while client.jobs(user="all", states=UNFINISHED).jobs and time.monotonic() < deadline:
            time.sleep(0.1)
    except DaemonUnreachable:
        pass  # the daemon is gone: nothing more to do from here


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="SWF trace, plain or .gz (default: %(default)s)")
    ap.add_argument("--jobs", type=int, default=300, help="replay the first N jobs (default: %(default)s)")
    ap.add_argument("--scale", type=float, default=14400.0,
                    help="trace seconds per real second (default: %(default)s, 1 trace hour = 0.25 s)")
    ap.add_argument("--kill-min-run", type=float, default=4.0,
                    help="least real run time of a kill victim, in seconds (default: %(default)s)")
    ap.add_argument("--keep", action="store_true", help="keep the TopDir (config, state, xced.log, job output)")
    args = ap.parse_args(argv)

    from rich.console import Console

    from xced.api.client import Client

    console = Console()
    t_start = time.monotonic()
    jobs = read_swf(args.trace, args.jobs)
    if not jobs:
        console.print(f"no jobs in {args.trace}")
        return 1
    too_big = [j.number for j in jobs if j.procs > HOST_SLOTS]
    if too_big:
        console.print(f"trace jobs ask for more than {HOST_SLOTS} slots: {too_big[:10]}")
        return 1
    top = Path(tempfile.mkdtemp(prefix="xce-demo-"))
    write_config(top)
    proc = None
    client = None
    finished_cleanly = False
    try:
        try:
            proc = start_daemon(top)
        except RuntimeError as e:
            console.print(f"[bold red]demo: {e}[/]")
            print_log(console, top)
            return 1
        client = Client(top / "run" / "xced.sock")
        console.print(f"xced pid {proc.pid}, TopDir {top}; replaying {len(jobs)} jobs of {args.trace.name} "
                      f"(1 trace hour = {3600 / args.scale:.3f} s)")
        items, stats = replay(client, top, jobs, args.scale, args.kill_min_run, console)
        results = analyse(client, items, args.scale)
        finished_cleanly = True
        passed = report(console, results, stats, args.scale, time.monotonic() - t_start)
        return 0 if passed else 1
    except KeyboardInterrupt:
        console.print("[bold]demo: interrupted; stopping xced[/]")
        return 130
    except Exception as e:  # noqa: BLE001 -- any failure mid-run: show it with the daemon's log
        console.print(f"[bold red]demo: {type(e).__name__}: {e}[/]")
        print_log(console, top)
        return 1
    finally:
        if client is not None and not finished_cleanly:
            kill_leftovers(client)
        if client is not None:
            client.close()
        if proc is not None:
            stop_daemon(proc)
        if args.keep:
            console.print(f"kept TopDir {top}")
        else:
            shutil.rmtree(top, ignore_errors=True)


def _sigterm(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _sigterm)  # stop the daemon on SIGTERM as on Ctrl-C
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)

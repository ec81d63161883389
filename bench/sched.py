"""Scheduler and simulator speed (issue 5, SCHED-1, SCHED-2, SIM-1), run by hand:

    .venv/bin/python bench/sched.py [--quick] [--no-write]

- sim_kth / sim_sdsc: `xceadmin sim run`'s engine replaying KTH-SP2 and SDSC-SP2 with
  EASY (jobs per second, median of 3; reference: pyss replays KTH-SP2 in 3.74 s under
  PyPy, about 7,600 jobs/s);
- session_*: one `schedule()` call over a synthetic busy cluster (hosts mostly full,
  every host running jobs with run limits) with N pending jobs drawn from 12 distinct
  requests, in a backfilling queue and in a strict FCFS one (median of 5).

A full run rewrites the block between the SCHED markers in bench/RESULTS.md (in its
hand-written part, which bench/run.py keeps).
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from xced.resreq import parse  # noqa: E402
from xced.scheduler.session import schedule  # noqa: E402
from xced.scheduler.snapshot import HostSupply, JobSnap, QueueSnap, RunSnap, Snapshot  # noqa: E402
from xced.sim.engine import simulate  # noqa: E402
from xced.sim.metrics import compute_metrics  # noqa: E402
from xced.sim.swf import read_swf  # noqa: E402

DATA = ROOT / "tests" / "data"  # traces; sources in tests/data/README.md
RESULTS = ROOT / "bench" / "RESULTS.md"
BEGIN, END = "<!-- SCHED:BEGIN (bench/sched.py rewrites this block) -->", "<!-- SCHED:END -->"

REQUESTS = [(1, ""), (2, ""), (4, ""), (8, ""), (16, ""), (32, ""), (64, ""),
            (1, "rusage[mem=2GB]"), (4, "select[type == X86_64] rusage[mem=1GB]"), (8, "span[ptile=4]"),
            (2, "rusage[gpu=1]"), (16, "span[hosts=1]")]


def sim_rate(path: Path, runs: int) -> tuple[float, float, dict]:
    trace = read_swf(path)
    times = []
    m = None
    for _ in range(runs):
        t = time.perf_counter()
        r = simulate(trace.jobs, trace.machine_procs, "easy")
        times.append(time.perf_counter() - t)
        m = compute_metrics(r.outcomes, trace.machine_procs)
    med = statistics.median(times)
    return med, len(trace.jobs) / med, m.to_json()


def busy_snapshot(npending: int, nhosts: int, backfill: bool, seed: int = 7) -> Snapshot:
    rnd = random.Random(seed)
    hosts, running = [], []
    for i in range(nhosts):
        name = f"h{i:05d}"
        free = rnd.choice((0, 0, 0, 0, 1, 2))
        gpu = 2 if i % 10 == 0 else 0
        hosts.append(HostSupply(name, 32, free, 256_000, 64_000, {"gpu": gpu} if gpu else {},
                              {"gpu": 0} if gpu else {}, {"type": "X86_64" if i % 3 else "aarch64"}))
        left = 32 - free
        while left > 0:
            n = min(left, rnd.choice((1, 4, 8, 16)))
            running.append(RunSnap(len(running) + 1_000_000, 0, 1000.0 + rnd.randint(60, 86_400),
                                   {name: {"slots": n}}))
            left -= n
    reqs = [(n, parse(r)) for n, r in REQUESTS]
    pending = []
    for k in range(npending):
        n, rr = reqs[rnd.randrange(len(reqs))]
        pending.append(JobSnap(k + 1, 0, "normal", float(k), n, n, rr, run_limit_s=rnd.choice((600, 3600, 86_400))))
    return Snapshot(hosts, [QueueSnap("normal", 30, 0, None, backfill)], pending, {}, running)


def session_time(npending: int, nhosts: int, backfill: bool, runs: int) -> tuple[float, int, int]:
    snap = busy_snapshot(npending, nhosts, backfill)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        out = schedule(snap, 1000.0)
        times.append(time.perf_counter() - t)
    return statistics.median(times), len(out.dispatches), len(out.pend_reasons)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes, one run each")
    ap.add_argument("--no-write", action="store_true", help="leave bench/RESULTS.md alone")
    a = ap.parse_args(argv)
    runs_sim, runs_s = (1, 1) if a.quick else (3, 5)
    rows = []
    for name, path in (("KTH-SP2", DATA / "KTH-SP2-1996-2.1-cln.swf.gz"),
                       ("SDSC-SP2", DATA / "SDSC-SP2-1998-4.2-cln.swf.gz")):
        med, rate, m = sim_rate(path, runs_sim)
        rows.append((f"sim {name}, EASY", f"{med:.2f} s ({rate:,.0f} jobs/s)",
                     f"bounded slowdown {m['avg_bounded_slowdown']:.2f}, flow {m['avg_flow_s']:,.0f} s, "
                     f"utilisation {m['utilisation']:.1%}"))
        print(rows[-1], flush=True)
    sizes = [(10_000, 1_000), (100_000, 5_000)] if not a.quick else [(10_000, 1_000)]
    for npend, nhosts in sizes:
        for bf in (True, False):
            med, nd, nr = session_time(npend, nhosts, bf, runs_s)
            rows.append((f"session, {npend:,} pending, {nhosts:,} hosts, {'EASY' if bf else 'FCFS'}",
                         f"{med * 1000:,.0f} ms", f"{nd} dispatches, {nr:,} pend reasons"))
            print(rows[-1], flush=True)
    if a.quick or a.no_write:
        return 0
    block = [BEGIN, "", f"### Scheduler and simulator ({datetime.now():%Y-%m-%d %H:%M}, "
             f"{platform.python_implementation()} {platform.python_version()})", "",
             "Command: `.venv/bin/python bench/sched.py` (medians: 3 replays, 5 sessions).", "",
             "| measure | median | notes |", "|---|---|---|"]
    block += [f"| {k} | {v} | {n} |" for k, v, n in rows]
    block += ["", "Aims (issue 5): replay KTH-SP2 faster than pyss (3.74 s under PyPy, ~7,600 jobs/s); "
              "a 100,000-job session under 1 s. Published KTH-SP2 EASY result: bounded slowdown 92.58, "
              "flow 15,697 s.", "", END]
    text = RESULTS.read_text() if RESULTS.exists() else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + "\n".join(block) + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(block) + "\n"
    RESULTS.write_text(text)
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

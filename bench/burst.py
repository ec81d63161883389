"""Simulator cost of a burst (issue 11 item 10, SIM-1, SCHED-1, SCHED-2), run by hand:

    .venv/bin/python bench/burst.py [--jobs N] [--procs P] [--runs R] [--reference N]

A burst is N jobs (default 10,000) all submitted at t=0 to a machine of P processors
(default 64): processors drawn from 1, 1, 2, 4, 8, 16, requested time from 600 s, 1 h and
4 h, run time uniform in 1 s .. the requested time (seeded, the same jobs every run).
"spread" replays the same jobs submitted one after another at the mean inter-arrival time
that loads the machine to 80%, the cost a burst should come near. Each figure is the median
of R runs (default 5) of `xced.sim.engine.simulate` for both policies, with the sessions it
ran; the aim is a 10,000-job burst under 5 s.

`--reference N` also replays a burst of N jobs once with `full_queue=True` (each session
shown the whole pending queue, as before issue 11 item 10), in both session modes. It is
quadratic: about 150-300 s for 10,000 jobs on a 2-core machine.

Prints a Markdown table on stdout for bench/RESULTS.md (this script writes no file).
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from xced.sim.engine import simulate  # noqa: E402
from xced.sim.metrics import compute_metrics  # noqa: E402
from xced.sim.swf import SimJob  # noqa: E402


def burst(n: int, seed: int = 11) -> list[SimJob]:
    """N jobs submitted at t=0 (the mix in the module docstring)."""
    rnd = random.Random(seed)
    jobs = []
    for i in range(n):
        est = rnd.choice((600, 3600, 14_400))
        jobs.append(SimJob(i + 1, 0, rnd.choice((1, 1, 2, 4, 8, 16)), est, rnd.randint(1, est), -1, -1))
    return jobs


def spread(jobs: list[SimJob], procs: int, load: float = 0.8) -> list[SimJob]:
    """The same jobs, one submitted every (total work / procs / N / load) seconds."""
    gap = sum(j.procs * j.duration_s for j in jobs) / procs / len(jobs) / load
    return [SimJob(j.job_id, int(i * gap), j.procs, j.estimate_s, j.duration_s, -1, -1) for i, j in enumerate(jobs)]


def timed(jobs: list[SimJob], procs: int, policy: str, runs: int, **kw) -> tuple[float, int, float]:
    """(median seconds, sessions, average wait s) of `runs` replays."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        r = simulate(jobs, procs, policy, **kw)  # type: ignore[arg-type]
        times.append(time.perf_counter() - t)
    return statistics.median(times), r.sessions, compute_metrics(r.outcomes, procs).avg_wait_s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--procs", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--reference", type=int, default=0, metavar="N",
                    help="also replay an N-job burst once with full_queue=True (slow)")
    a = ap.parse_args(argv)
    jobs = burst(a.jobs)
    rows = []
    for policy in ("easy", "fcfs"):
        for name, js, kw in ((f"burst of {a.jobs:,} at t=0", jobs, {}),
                             (f"burst of {a.jobs:,} at t=0, per event (pyss order)", jobs, {"per_event": True}),
                             (f"the same {a.jobs:,} spread out (80% load)", spread(jobs, a.procs), {})):
            med, sessions, wait = timed(js, a.procs, policy, a.runs, **kw)
            rows.append((f"{name}, {policy.upper()}", f"{med:.2f} s", f"{sessions:,} sessions, "
                         f"{a.jobs / med:,.0f} jobs/s, average wait {wait:,.0f} s"))
            print(rows[-1], file=sys.stderr, flush=True)
    if a.reference:
        ref = burst(a.reference)
        for policy in ("easy", "fcfs"):
            for mode, kw in (("per time", {}), ("per event", {"per_event": True})):
                med, sessions, wait = timed(ref, a.procs, policy, 1, full_queue=True, **kw)
                rows.append((f"burst of {a.reference:,}, whole queue shown ({mode}), {policy.upper()}",
                             f"{med:.2f} s (1 run)", f"{sessions:,} sessions, average wait {wait:,.0f} s"))
                print(rows[-1], file=sys.stderr, flush=True)
    print(f"Command: `.venv/bin/python bench/burst.py --jobs {a.jobs} --procs {a.procs} --runs {a.runs}"
          + (f" --reference {a.reference}" if a.reference else "") + f"` ({platform.python_implementation()} "
          f"{platform.python_version()}; medians of {a.runs} runs)\n")
    print(f"| measure ({a.procs} processors) | median | notes |\n|---|---|---|")
    for k, v, n in rows:
        print(f"| {k} | {v} | {n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`xcecli kill` of a large pending array: wall time and bytes printed (issue 17 part 4, CLI-3, CLI-7).

    .venv/bin/python bench/array_kill.py [--size N] [--runs R] [--show]

Starts a private xced (max_array_size N), keeps one job running (`sleep 3600`) and submits
an N-element array with `-w done(THAT)`, so every element pends on its dependency; then
times `xcecli kill ARRAY` from outside (wall time of the process) and counts the bytes it
printed, with the CPU seconds of the xcecli process and of the daemon during the kill
(steadier than wall time on a shared machine). Each run submits a fresh array. `--show` also times `xcecli show ARRAY` before the
kill. The daemon is always stopped and its TopDir removed (bench/_common.PrivateXced).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import XCECLI, PrivateXced, median


def _cli(top: Path, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    """Run xcecli; (wall seconds, the process); `_cli.cpu` holds its CPU seconds (user + sys)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XCE_")}
    env["XCE_TOPDIR"] = str(top)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([XCECLI, *args], capture_output=True, env=env, timeout=600)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    _cli.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode != 0:
        raise RuntimeError(f"xcecli {' '.join(args)} -> {r.returncode}: {r.stderr.decode()[-2000:]}")
    return took, r


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + sys) of process `pid` so far, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--show", action="store_true", help="also time `xcecli show ARRAY` (before the kill)")
    ap.add_argument("--kill-args", default="", help="more arguments of the kill, e.g. '-v' or '--json'")
    args = ap.parse_args()
    with PrivateXced(slots=1, extra=f"max_array_size: {args.size}\n") as d:
        _, r = _cli(d.top, "submit", "--parsable", "--", "sleep", "3600")
        blocker = int(r.stdout)
        kills, shows = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            _, r = _cli(d.top, "submit", "--parsable", "-w", f"done({blocker})", "-J", f"a[1-{args.size}]",
                        "--", "true")
            arr = int(r.stdout)
            print(f"submitted array {arr} of {args.size:,} elements in {time.perf_counter() - t0:.2f} s", flush=True)
            if args.show:
                took, r = _cli(d.top, "show", str(arr))
                shows.append(took)
                nl = r.stdout.count(b"\n")
                print(f"  xcecli show {arr}: {took:.2f} s, {len(r.stdout):,} bytes, {nl:,} lines", flush=True)
            daemon_cpu = _cpu_s(d.pid)
            took, r = _cli(d.top, "kill", *args.kill_args.split(), str(arr))
            daemon_cpu = _cpu_s(d.pid) - daemon_cpu
            kills.append(took)
            print(f"  xcecli kill {args.kill_args} {arr}: {took:.2f} s wall, xcecli CPU {_cli.cpu:.2f} s, "
                  f"xced CPU {daemon_cpu:.2f} s, {len(r.stdout):,} bytes printed: "
                  f"{r.stdout[:100].decode(errors='replace')!r}", flush=True)
        print(f"xcecli kill of a {args.size:,}-element pending array: median {median(kills):.2f} s "
              f"over {len(kills)} run(s)")
        if shows:
            print(f"xcecli show of it: median {median(shows):.2f} s")


if __name__ == "__main__":
    main()

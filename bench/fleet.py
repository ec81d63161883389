"""A controller with thousands of hosts joined (issue 19 part 6; D-1, SCHED-4, KEY-3), run by hand:

    .venv/bin/python bench/fleet.py [--quick] [--no-write] [--hosts 1000,5000] [--keyed 1000]

A real controller (`xced --roles controller,scheduler,apiserver`, test mode, no hosts of
its own, peers on TCP 127.0.0.1) in a fresh TopDir, and a fleet of simulated hosts in this
process (tests/fleet.py: one event loop, one worker channel per host, 4 slots each). For
each size it reports:

- join: seconds from the first connection until every host's `joined` came back (64 joins
  in flight at once);
- RSS per host: the controller's resident memory once all joined, less its RSS before the
  first join, divided by the hosts;
- idle CPU: the controller's CPU time (user + system, /proc/PID/stat) over a window of
  `--idle` seconds (default 30: three heartbeat periods) with every host joined and no job,
  as a share of one core; the fleet's own CPU beside it;
- drain (hosts without keys, `--drain`, default 5 jobs per host): a
  pack of that many single-slot `true` jobs submitted with `xcecli submit --pack` onto the
  idle cluster, timed from the submit until every job ended (4 slots a host: a first wave
  fills the cluster, the rest follow as the immediate exits free slots); meanwhile a probe
  asks the controller `GET /info` on its Unix socket every 50 ms and the slowest answer is
  reported: how long the controller stops answering while it fills an idle cluster (issue
  19 part 3's aim: at most 50 ms);
- keyed sizes (`--keyed`): the same with `listen.tls: true`, each host with its own key
  trusted in keys.yaml (KEY-3), joined over TLS pinned to the controller's key.

The open-file limit of this process is raised to its hard limit first (the controller,
started from it, inherits it): each host takes one descriptor in each process. A full run
rewrites the block between the FLEET markers in bench/RESULTS.md; `--quick` (200 hosts, a
5 s window) never writes.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.conftest import Daemon, kill_job_processes, short_tmpdir, write_config  # noqa: E402
from bench._common import write_block  # noqa: E402
from tests.fleet import FD_MARGIN, FleetKeys, FleetThread, raise_nofile  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS.md"
BEGIN, END = "<!-- FLEET:BEGIN (bench/fleet.py rewrites this block) -->", "<!-- FLEET:END -->"
SLOTS = 4
TICK = os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15 of stat)


def drain(d: Daemon, ft: FleetThread, jobs: int, timeout: float) -> dict:
    """Submit `jobs` single-slot `true` jobs in one pack and wait until all ended; returns
    {jobs, submit_s (the CLI's answer), drain_s, probe_max_ms, probes, failed (None, or why
    the drain could not finish: the controller dropped channels of the fleet, which does not
    rejoin, or the time ran out)}."""
    import threading

    from xced.api.client import Client

    pack = d.top / "pack"
    pack.write_text("true\n" * jobs)
    stop = threading.Event()
    lat: list[float] = []
    sock = d.top / "run" / "xced.sock"

    def probe() -> None:
        with Client(sock, as_user="admin", timeout=timeout) as c:
            while not stop.is_set():
                t = time.monotonic()
                try:
                    c.request("GET", "/info")
                except Exception:  # noqa: BLE001 - counted as the time it took
                    pass
                lat.append(time.monotonic() - t)
                stop.wait(0.05)

    def dropped() -> str | None:
        errs = ft.call(lambda: list(ft.fleet.errors))
        return f"{len(errs)} channels dropped by the controller after {time.monotonic() - t0:.0f} s" if errs else None

    th = threading.Thread(target=probe, daemon=True)
    t0 = time.monotonic()
    th.start()
    submit_s = drain_s = None
    failed = None
    old = os.environ.get("XCE_CONNECT_TIMEOUT")
    os.environ["XCE_CONNECT_TIMEOUT"] = str(int(timeout))  # the CLI waits out a controller that is busy
    try:
        r = d.cli("submit", "--pack", str(pack), user="alice", timeout=timeout)
        submit_s = time.monotonic() - t0
        if r.returncode != 0:
            failed = f"the pack's submit failed after {submit_s:.0f} s: {r.stderr.strip()[-300:]}"
        total = lambda: sum(len(h.runs) for h in ft.fleet.hosts)  # noqa: E731
        while failed is None and ft.call(total) < jobs:
            failed = dropped() or (f"{ft.call(total)} of {jobs} jobs dispatched in {timeout:.0f} s"
                                   if time.monotonic() - t0 > timeout else None)
            time.sleep(0.2)
        with Client(sock, as_user="admin", timeout=timeout) as c:
            while failed is None and c.jobs_raw(user="all", states=["PEND", "RUN"]).json()["jobs"]:
                failed = dropped() or (f"jobs still active after {timeout:.0f} s"
                                       if time.monotonic() - t0 > timeout else None)
                time.sleep(0.2)
        if failed is None:
            drain_s = time.monotonic() - t0
    finally:
        stop.set()
        th.join(timeout)
        if old is None:
            os.environ.pop("XCE_CONNECT_TIMEOUT", None)
        else:
            os.environ["XCE_CONNECT_TIMEOUT"] = old
    return {"jobs": jobs, "submit_s": submit_s, "drain_s": drain_s, "probe_max_ms": 1000 * max(lat or [0.0]),
            "probes": len(lat), "failed": failed}


def measure(hosts: int, idle_s: float, keyed: bool, drain_per_host: int = 0) -> dict:
    """Join `hosts` simulated hosts to a fresh controller; returns {hosts, keyed, join_s,
    rss0_mb, rss_mb, rss_per_host_kb, idle_cpu_pct, fleet_cpu_pct, drain (drain()'s, or
    None)}."""
    top = short_tmpdir("xce-bfl-")
    write_config(top)
    (top / "config" / "hosts.yaml").write_text("hosts: []\n")
    with open(top / "config" / "xce.yaml", "a") as f:
        f.write("listen:\n  host: 127.0.0.1\n  port: 0\n" + ("  tls: true\n" if keyed else ""))
    names = [f"sim{i + 1}" for i in range(hosts)]
    kw: dict = {"slots": SLOTS}
    if keyed:
        kw["keys"] = FleetKeys.make(names)
        kw["keys"].trust_in(top / "config")
    d = Daemon(top, args=["--roles", "controller,scheduler,apiserver"])
    ft = None
    try:
        d.start(timeout=60)
        pid = d.proc.pid
        time.sleep(1.0)
        rss0 = _rss_mb(pid)
        if keyed:
            from xced.auth.keys import fingerprint, parse_public_key

            kw["pin"] = fingerprint(parse_public_key((top / "keys" / "host.pub").read_text()))
        url = f"tcp://127.0.0.1:{(top / 'run' / 'xced.port').read_text().strip()}"
        ft = FleetThread(url, names, **kw)
        join_s = ft.start(timeout=600)
        time.sleep(2.0)  # the joins' own work settles
        rss = _rss_mb(pid)
        c0, f0, t0 = _cpu_s(pid), time.process_time(), time.monotonic()
        time.sleep(idle_s)
        c1, f1, t1 = _cpu_s(pid), time.process_time(), time.monotonic()
        errors = ft.call(lambda: list(ft.fleet.errors))
        if errors:
            raise RuntimeError(f"channels failed while idle: {errors[:5]}")
        dr = drain(d, ft, drain_per_host * hosts, timeout=900) if drain_per_host else None
        return {"drain": dr, "hosts": hosts, "keyed": keyed, "join_s": join_s, "rss0_mb": rss0, "rss_mb": rss,
                "rss_per_host_kb": (rss - rss0) * 1024 / hosts, "idle_cpu_pct": 100 * (c1 - c0) / (t1 - t0),
                "fleet_cpu_pct": 100 * (f1 - f0) / (t1 - t0)}
    finally:
        if ft is not None:
            ft.stop()
        d.stop()
        kill_job_processes(top)
        shutil.rmtree(top, ignore_errors=True)


def _row(r: dict) -> str:
    mode = "keyed, TLS" if r["keyed"] else "no key, plain TCP"
    return (f"| {r['hosts']:,} | {mode} | {r['join_s']:.1f} s ({r['hosts'] / r['join_s']:,.0f}/s) | "
            f"{r['rss0_mb']:.0f} → {r['rss_mb']:.0f} MB | {r['rss_per_host_kb']:.0f} kB | "
            f"{r['idle_cpu_pct']:.1f}% | {r['fleet_cpu_pct']:.1f}% | {_drain_cell(r['drain'])} |")


def _drain_cell(dr: dict | None) -> str:
    if dr is None:
        return "-"
    if dr["failed"]:
        return (f"{dr['jobs']:,} jobs: not drained: {dr['failed']}; slowest GET /info "
                f"{dr['probe_max_ms']:,.0f} ms")
    return (f"{dr['jobs']:,} jobs: {dr['drain_s']:.1f} s ({dr['jobs'] / dr['drain_s']:,.0f}/s; submit answered in "
            f"{dr['submit_s']:.1f} s); slowest GET /info {dr['probe_max_ms']:,.0f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="200 hosts, a 5 s idle window; never writes RESULTS.md")
    ap.add_argument("--no-write", action="store_true", help="leave bench/RESULTS.md alone")
    ap.add_argument("--hosts", default="1000,5000", help="sizes without keys, comma-separated (default 1000,5000)")
    ap.add_argument("--keyed", default="1000", help="sizes with a key per host over TLS ('' for none; default 1000)")
    ap.add_argument("--drain", type=int, default=5, help="jobs per host drained on the sizes without keys "
                    "(default 5; 0: none)")
    ap.add_argument("--idle", type=float, default=30.0, help="seconds of the idle CPU window (default 30)")
    a = ap.parse_args(argv)

    def sizes(s: str) -> list[int]:
        try:
            out = [int(x) for x in s.split(",") if x.strip()]
        except ValueError:
            ap.error(f"sizes {s!r}: expected whole numbers separated by commas, e.g. 1000,5000")
        if any(n < 1 for n in out):
            ap.error(f"sizes {s!r}: each size is at least 1 host")
        return out

    plain, keyed, idle = sizes(a.hosts), sizes(a.keyed), a.idle
    if a.quick:
        plain, keyed, idle = [200], [200], 5.0
    need = 2 * max(plain + keyed) + 2 * FD_MARGIN
    soft, hard = raise_nofile(need)
    print(f"open-file limit: {soft} (hard {hard}); {need} needed", flush=True)
    results = []
    for n, k in [(n, False) for n in plain] + [(n, True) for n in keyed]:
        r = measure(n, idle, k, 0 if k else max(a.drain, 0))
        print(_row(r), flush=True)
        results.append(r)
    if a.quick or a.no_write:
        return 0
    block = [BEGIN, "", f"### A controller with thousands of hosts joined ({datetime.now():%Y-%m-%d %H:%M}, "
             f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores)", "",
             f"Command: `.venv/bin/python bench/fleet.py` (simulated hosts of tests/fleet.py, {SLOTS} slots each, "
             f"in one process beside the controller; idle window {idle:.0f} s; open-file limit {soft}).", "",
             "| hosts | join | join time | controller RSS before → after | RSS per host | idle controller CPU "
             "(one core) | fleet CPU | drain (every host 4 slots, jobs end at once) |", "|---|---|---|---|---|---|---|---|",
             *(_row(r) for r in results), "",
             "Issue 19's figures with real `xced --roles worker` processes: RSS 68-98 MB and ~1% idle CPU at 500 "
             "hosts.", "", END]
    write_block(RESULTS, BEGIN, END, block)
    return 0


if __name__ == "__main__":
    sys.exit(main())

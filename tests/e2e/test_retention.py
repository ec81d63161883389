"""Retention through a real xced (issue 15; LSF CLEAN_PERIOD): a killed 100,000-element array
leaves the daemon's memory once its clean period has passed on the test clock, and the user
still finds it in the store with `show`, `hist` and `jobs -a`, also after a restart; the
daemon's resident memory comes back down."""

from __future__ import annotations

import json
import os
import subprocess

from tests.conftest import XCEADMIN, Daemon, write_config


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _advance(d: Daemon, step: str) -> None:
    """`xceadmin debug clock --advance STEP` as the cluster admin `admin` (test mode only)."""
    env = {**os.environ, "XCE_TEST_USER": "admin"}
    r = subprocess.run([XCEADMIN, "debug", "clock", "--advance", step], capture_output=True, text=True, timeout=60,
                       env={**env, "XCE_TOPDIR": str(d.top)})
    assert r.returncode == 0, r.stderr


def _ids(d: Daemon, *args: str) -> list[int]:
    out = json.loads(d.cli("jobs", "-u", "all", "--json", *args, check=True).stdout)
    return [j["job_id"] for j in out["jobs"]]


def test_a_killed_100000_element_array_is_purged_after_the_clean_period_and_read_back(topdir, tmp_path):
    write_config(topdir)
    with open(topdir / "config" / "xce.yaml", "a") as f:
        f.write("max_array_size: 100000\nclean_period: 1h\n")
    d = Daemon(topdir).start()
    try:
        idle = _rss_mb(d.proc.pid)
        blocker = int(d.cli("submit", "--parsable", "--", "sleep", "300", cwd=tmp_path, check=True).stdout)
        arr = int(d.cli("submit", "--parsable", "-J", "big[1-100000]", "-w", f"done({blocker})", "--", "true",
                        cwd=tmp_path, check=True).stdout)
        r = d.cli("kill", str(arr), check=True, timeout=120)
        # folded, not 1 MB of refs; past 100 elements one line per state (issue 17 part 4)
        assert r.stdout.strip() == f"Job <{arr}[1-100000]>: kill requested (100000 elements, now EXIT)"
        d.cli("kill", str(blocker), check=True)
        d.cli("wait", str(blocker), check=False, timeout=60)
        full = _rss_mb(d.proc.pid)
        assert _ids(d) == [blocker, arr]  # within the clean period: listed as LSF's bjobs does
        _advance(d, "59m")
        assert _ids(d) == [blocker, arr]
        _advance(d, "2m")  # past the hour: both leave memory
        assert _ids(d) == []
        after = _rss_mb(d.proc.pid)
        # the array's elements are freed and the heap trimmed: most of what it took comes back
        assert after - idle < 0.25 * (full - idle), (idle, full, after)
        listed = json.loads(d.cli("jobs", "-u", "all", "-a", "--json", check=True).stdout)["jobs"]  # bjobs -a
        assert [(j["job_id"], j["state"], j["counts"]) for j in listed] == [
            (blocker, "EXIT", {"EXIT": 1}), (arr, "EXIT", {"EXIT": 100000})]  # read from the store
        shown = json.loads(d.cli("show", str(blocker), "--json", check=True).stdout)
        assert shown["elements"][0]["exit_reason"].startswith("killed")
        hist = d.cli("hist", str(blocker), check=True).stdout
        assert "SUBMIT" in hist and "DISPATCH" in hist
        # -w naming a purged job is worked out from its record (JOB-5), at once
        after = d.submit("-w", f"ended({blocker})", "--", "true", cwd=tmp_path)
        assert d.wait_state(after, ("DONE", "EXIT"))["state"] == "DONE"
        d.stop()
        # the test clock does not outlive the daemon: a clean period of 0 makes the restart
        # leave both out of memory by the machine's clock
        write_config(topdir)
        with open(topdir / "config" / "xce.yaml", "a") as f:
            f.write("max_array_size: 100000\nclean_period: 0\n")
        d.start()  # a restart loads neither, and still finds both
        assert _ids(d) == [] and _ids(d, "-a") == [blocker, arr, after]
        assert json.loads(d.cli("show", str(blocker), "--json", check=True).stdout)["state"] == "EXIT"
    finally:
        d.stop()

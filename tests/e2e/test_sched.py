"""EASY backfilling in a live daemon (SCHED-1), the decision trace in `xcecli why` (D-4),
and a recording of the live sessions that replays with no difference (SIM-2)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from tests.conftest import XCEADMIN, Daemon, write_config

pytestmark = pytest.mark.timeout(120)


def xceadmin(topdir, *args: str, user: str = "admin") -> subprocess.CompletedProcess:
    env = {**os.environ, "XCE_TEST_USER": user, "XCE_TOPDIR": str(topdir)}
    env.pop("XCE_SOCKET", None)
    return subprocess.run([XCEADMIN, *args], capture_output=True, text=True, env=env, timeout=60)


def test_backfill_live_and_recording_verifies(topdir, tmp_path):
    write_config(topdir, slots=4)
    (topdir / "config" / "queues.yaml").write_text("queues:\n  - name: normal\n    backfill: true\n")
    d = Daemon(topdir).start()
    rec = topdir / "recordings" / "sessions.jsonl"  # the daemon writes only under its TopDir
    try:
        r = xceadmin(topdir, "sim", "record", "--name", "sessions", user="someone")
        assert r.returncode == 1 and "not a cluster admin" in r.stderr
        r = xceadmin(topdir, "sim", "record", "--name", "../../etc/evil")
        assert r.returncode == 1 and "recording name '../../etc/evil'" in r.stderr
        r = xceadmin(topdir, "sim", "record", "--name", "sessions")
        assert r.returncode == 0 and f"recording sessions to {rec}" in r.stdout, r.stderr
        assert rec.stat().st_mode & 0o777 == 0o600
        a = d.submit("-n", "3", "-W", "10", "--", "sleep", "60")
        d.wait_state(a, ("RUN",))
        b = d.submit("-n", "4", "-W", "1", "--", "true")      # the head: reserved when a's limit ends
        c = d.submit("-n", "1", "-W", "20", "--", "sleep", "60")  # ends after that: would delay b
        e = d.submit("-n", "1", "-W", "1", "--", "sleep", "60")   # ends before that: backfills
        d.wait_state(e, ("RUN",))
        assert d.show(b)["state"] == "PEND" and d.show(c)["state"] == "PEND"
        why_c = json.loads(d.cli("why", str(c), "--json", check=True).stdout)
        assert why_c["main"].startswith(f"Would delay job {b}, which has resources reserved from 20")
        why_b = json.loads(d.cli("why", str(b), "--json", check=True).stdout)
        assert any(f"{b}: reserved from 20" in t and "(backfill)" in t for t in why_b["trace"]), why_b
        assert why_b["reservation"]["text"].startswith("reserved from 20") and why_b["reservation"]["start"] > 0
        text = d.cli("why", str(b), check=True).stdout.splitlines()
        assert text[-1].startswith("scheduler: reserved from 20") and text[-1].endswith("(backfill)"), text
        d.cli("kill", str(a), str(e), check=True)
        assert d.wait_state(b, ("DONE",))["state"] == "DONE"
        d.wait_state(c, ("RUN",))
        d.cli("kill", str(c), check=True)
        d.wait_state(c, ("EXIT",))
        r = xceadmin(topdir, "sim", "record", "--stop")
        assert r.returncode == 0 and r.stdout.startswith("stopped: ") and str(rec) in r.stdout, r.stderr
        sessions = int(r.stdout.split()[1])
        assert sessions >= 3
        r = xceadmin(topdir, "sim", "verify", str(rec))
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.strip() == f"{sessions} sessions replayed, 0 decisions differ"
        # the recording's first line is the config in force, profiles included
        head = json.loads(rec.read_text().splitlines()[0])
        assert head["kind"] == "header" and "default" in head["config"]["applications"]
        r = xceadmin(topdir, "sim", "record", "--stop")
        assert r.returncode == 1 and "no recording is running" in r.stderr
        r = xceadmin(topdir, "sim", "record", "--name", "sessions.jsonl")
        assert r.returncode == 1 and "exists already" in r.stderr
    finally:
        d.stop()


def test_a_reason_a_later_backfill_made_stale_is_made_again_without_an_event(topdir):
    """SCHED-3, pend_reason_update: head b pends on "1 free"; in the next session it is
    decided before e, which backfills into that slot. With no event after, b's reason would
    keep counting the slot e took. A session pend_reason_update (1 s) later tells b "0
    free", and then the daemon stays quiet: the refresh finds nothing stale and asks for no
    other (sessions counted from a recording of them)."""
    write_config(topdir, slots=4)
    (topdir / "config" / "queues.yaml").write_text("queues:\n  - name: normal\n    backfill: true\n")
    with open(topdir / "config" / "xce.yaml", "a") as f:
        f.write("pend_reason_update: 1\n")
    d = Daemon(topdir).start()
    rec = topdir / "recordings" / "refresh.jsonl"

    def main(job: int) -> str:
        return json.loads(d.cli("why", str(job), "--json", check=True).stdout)["main"]

    def sessions() -> int:
        return sum(1 for line in rec.read_text().splitlines() if '"kind":"session"' in line)

    try:
        assert xceadmin(topdir, "sim", "record", "--name", "refresh").returncode == 0
        a = d.submit("-n", "3", "-W", "10", "--", "sleep", "60")
        d.wait_state(a, ("RUN",))
        b = d.submit("-n", "4", "-W", "1", "--", "true")  # the head: 1 free of the 4 it needs
        deadline = time.monotonic() + 10
        while main(b) != "Not enough free slots: 1 free on matching hosts, the job needs 4":
            assert time.monotonic() < deadline, main(b)
            time.sleep(0.05)
        e = d.submit("-n", "1", "-W", "1", "--", "sleep", "60")  # ends before b's reservation: backfills
        d.wait_state(e, ("RUN",))
        deadline = time.monotonic() + 10
        while main(b) != "Not enough free slots: 0 free on matching hosts, the job needs 4":
            assert time.monotonic() < deadline, main(b)
            time.sleep(0.1)
        quiet = sessions()
        time.sleep(2.5)  # two more refresh intervals: no session without an event
        assert sessions() == quiet
        assert d.show(b)["state"] == "PEND"
        d.cli("kill", str(a), str(e), check=True)
        assert d.wait_state(b, ("DONE",))["state"] == "DONE"
    finally:
        d.stop()

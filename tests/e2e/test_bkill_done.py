"""End to end: `bkill -d` and `xcecli kill --record-done` on a real xced (CLI-8, CLI-3, D-5,
JOB-5; issue 18): kill the job as usual, but record it DONE, not EXIT.

IBM's bkill page (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bkill.1.html,
docs/lsf-behaviour.md sections 5 and 6, [44]): "-d: Kills the jobs, and records the jobs as
DONE after the jobs exit." So a job waiting on its done() starts, and one waiting on its
exit() never does (the dependency conditions, docs/lsf-behaviour.md section 5 [41]).

Each command runs as a user runs it (`python -m xcecli.lsf.bkill`, the real `xcecli`)
against a real daemon with real job processes; the daemons and the jobs' processes are
stopped by the fixtures (tests/conftest.py).
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import Daemon, _daemon_fixture
from tests.e2e.test_lsf_commands import lsf, running

pytestmark = pytest.mark.timeout(120)

DONE_RUNNING = "killed by {user}; recorded DONE (bkill -d)"
DONE_PENDING = "killed by {user} while pending; recorded DONE (bkill -d)"


def _element(d: Daemon, jid: int) -> dict:
    return d.show(jid)["elements"][0]


def _hist(d: Daemon, jid: int, user: str) -> str:
    """`xcecli hist ID` as the user reads it (the job's events)."""
    return d.cli("hist", str(jid), user=user, check=True).stdout


def test_bkill_d_of_a_running_job_ends_it_done_with_the_reason(shared_daemon):
    """CLI-8, D-5: `bkill -d ID` of a running `sleep` prints LSF's "Job <N> is being
    terminated", kills its processes with the usual sequence and records it DONE, with the
    exit reason "killed by USER; recorded DONE (bkill -d)" in `show`, `bjobs -o` and its
    events (KILL_REQUEST, then DONE). Source: bkill.1 -d (IBM's bkill page, module docstring)."""
    d = shared_daemon
    jid = running(d, "sleep", "60", user="alice")
    r = lsf(d, "bkill", "-d", str(jid), user="alice")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{jid}> is being terminated\n", "")
    j = d.wait_state(jid, ("DONE", "EXIT"), user="alice")
    why = DONE_RUNNING.format(user="alice")
    assert j["state"] == "DONE" and j["elements"][0]["exit_reason"] == why
    r = lsf(d, "bjobs", "-o", "jobid stat exit_reason", "-noheader", str(jid), user="alice")
    assert r.stdout.split(None, 2) == [str(jid), "DONE", why + "\n"], r
    hist = _hist(d, jid, "alice")
    assert "KILL_REQUEST" in hist and "recorded DONE when it ends (bkill -d)" in hist
    assert any(line.split()[4:7] == ["DONE", "RUN", "DONE"] and line.endswith(why) for line in hist.splitlines()), hist
    # finished now: a second bkill -d is LSF's "Job has already finished", 255
    r = lsf(d, "bkill", "-d", str(jid), user="alice")
    assert (r.returncode, r.stderr) == (255, f"Job <{jid}>: Job has already finished\n")


def test_bkill_d_of_a_pending_job_ends_it_done_at_once(shared_daemon):
    """CLI-8, D-5: a pending job (waiting on a dependency) killed with `bkill -d` ends DONE at
    once, "killed by USER while pending; recorded DONE (bkill -d)", recorded in a KILL event
    PEND -> DONE; it never runs. Source: bkill.1 -d; a pending job is killed at once
    (docs/lsf-behaviour.md section 5)."""
    d = shared_daemon
    blocker = running(d, "sleep", "60", user="alice")
    waiting = d.submit("-w", f"done({blocker})", "--", "true", user="alice")
    assert d.show(waiting, user="alice")["state"] == "PEND"
    r = lsf(d, "bkill", "-d", str(waiting), user="alice")
    assert (r.returncode, r.stdout) == (0, f"Job <{waiting}> is being terminated\n"), r.stderr
    j = d.show(waiting, user="alice")
    why = DONE_PENDING.format(user="alice")
    assert j["state"] == "DONE" and j["elements"][0]["exit_reason"] == why and j["elements"][0]["start_time"] is None
    assert any(line.split()[4:7] == ["KILL", "PEND", "DONE"] and line.endswith(why)
               for line in _hist(d, waiting, "alice").splitlines())
    # a plain bkill still records EXIT
    assert lsf(d, "bkill", str(blocker), user="alice").returncode == 0
    assert d.wait_state(blocker, ("EXIT", "DONE"), user="alice")["state"] == "EXIT"


def test_a_job_killed_with_d_meets_done_and_never_exit(shared_daemon):
    """JOB-5, CLI-8: after `bkill -d A`, a job submitted with `-w 'done(A)'` starts and ends
    DONE, and one with `-w 'exit(A)'` never starts: its pend reason says the condition can
    never be met because A ended DONE (LSF's record: a DONE job satisfies done(), not exit();
    docs/lsf-behaviour.md section 5 [41], bkill.1 -d)."""
    d = shared_daemon
    a = running(d, "sleep", "60", user="alice")
    on_done = d.submit("-w", f"done({a})", "--", "true", user="alice")
    on_exit = d.submit("-w", f"exit({a})", "--", "true", user="alice")
    assert lsf(d, "bkill", "-d", str(a), user="alice").returncode == 0
    assert d.wait_state(a, ("DONE", "EXIT"), user="alice")["state"] == "DONE"
    assert d.wait_state(on_done, ("DONE", "EXIT"), user="alice")["state"] == "DONE"
    deadline = time.monotonic() + 10
    while True:  # the scheduler tells the pend reason at its next session
        e = _element(d, on_exit)
        reason = (e.get("pend_reason") or {}).get("main") or ""
        if "never" in reason or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert e["state"] == "PEND" and e["start_time"] is None
    assert reason == f"Dependency can never be met: exit({a}) (job {a} ended DONE)"
    assert lsf(d, "bkill", str(on_exit), user="alice").returncode == 0


def test_xcecli_kill_record_done_and_the_route_refuse_it_with_a_signal(shared_daemon):
    """CLI-3, D-2: `xcecli kill --record-done ID` is bkill -d (the answer says the job is
    recorded DONE); with `-s SIG` it is a usage error (exit 2) and POST /jobs/ID/kill with
    `record_done` and `signal` a 422 naming both, since LSF's synopsis makes -s and -d
    exclusive (bkill.1: [-r | -s signal | -d]); `bkill -d -s TERM` is refused (255) and kills
    nothing."""
    from xced.api.client import Client
    from xced.api.errors import InvalidRequest

    d = shared_daemon
    jid = running(d, "sleep", "60")
    r = d.cli("kill", "--record-done", "-s", "TERM", str(jid))
    assert r.returncode == 2 and "--record-done goes with the kill sequence" in r.stderr
    r = lsf(d, "bkill", "-d", "-s", "TERM", str(jid))
    assert r.returncode == 255 and "exclude each other" in r.stderr and r.stdout == ""
    with Client.connect(topdir=str(d.top)) as c:
        with pytest.raises(InvalidRequest) as e:
            c.request("POST", f"/jobs/{jid}/kill", json={"signal": "TERM", "record_done": True})
        assert "record_done" in e.value.message and "signal" in e.value.message
    assert d.show(jid)["state"] == "RUN"
    r = d.cli("kill", "--record-done", str(jid))
    assert (r.returncode, r.stdout) == (0, f"Job <{jid}>: kill requested: {jid}; recorded DONE when killed "
                                           f"(bkill -d)\n"), r.stderr
    j = d.wait_state(jid, ("DONE", "EXIT"))
    assert j["state"] == "DONE" and j["elements"][0]["exit_reason"] == DONE_RUNNING.format(user=j["user"])


@pytest.fixture
def slow_kill(topdir):
    """A fresh xced whose kill sequence takes 2 x 1.5 s (kill_interval), so a daemon can be
    stopped while a kill is under way."""
    yield from _daemon_fixture(topdir, kill_interval=1.5)


def test_the_done_record_survives_a_daemon_restart_during_the_kill(slow_kill):
    """D-5, D-3, JOB-8: the wish to record DONE is stored with the kill: a job that ignores
    INT and TERM is killed with `bkill -d`, the daemon is stopped before the sequence's KILL
    ends it, and the daemon started again finds the job's end and records it DONE with the
    reason; a pending job killed with -d is still DONE after the restart. Source: bkill.1
    -d; JOB_TERMINATE_INTERVAL sequence (docs/lsf-behaviour.md section 5 [44, 45])."""
    d = slow_kill
    ready = d.top / "stubborn.ready"
    stubborn = running(d, "sh", "-c", f"trap '' INT TERM; touch {ready}; sleep 30", user="alice")
    deadline = time.monotonic() + 10
    while not ready.exists() and time.monotonic() < deadline:  # its traps are set
        time.sleep(0.02)
    blocker = running(d, "sleep", "60", user="alice")
    waiting = d.submit("-w", f"done({blocker})", "--", "true", user="alice")
    assert lsf(d, "bkill", "-d", str(waiting), user="alice").returncode == 0
    assert lsf(d, "bkill", "-d", str(stubborn), user="alice").returncode == 0
    assert d.show(stubborn, user="alice")["state"] == "RUN"  # INT and TERM are ignored; KILL comes after 3 s
    d.stop()
    time.sleep(3.5)  # the supervisor ends it with SIGKILL while no daemon runs
    d.start()
    j = d.wait_state(stubborn, ("DONE", "EXIT"), user="alice")
    assert j["state"] == "DONE" and j["elements"][0]["exit_signal"] == "SIGKILL"
    assert j["elements"][0]["exit_reason"] == DONE_RUNNING.format(user="alice")
    j = d.show(waiting, user="alice")
    assert j["state"] == "DONE" and j["elements"][0]["exit_reason"] == DONE_PENDING.format(user="alice")
    assert lsf(d, "bkill", str(blocker), user="alice").returncode == 0

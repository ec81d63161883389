"""End to end: `bkill -r` and `xcecli kill --force` on a real xced (CLI-8, CLI-3, D-5, RES-2;
issue 18): remove the job at once, kill its processes after.

IBM's bkill page (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bkill.1.html,
docs/lsf-behaviour.md section 6, [44]): "-r: Removes a job from the LSF system without
waiting for the job to terminate in the operating system. Sends the same series of signals
as bkill without -r, except that the job is removed from the system immediately ... job
resources that LSF monitors are released as soon as LSF receives the first signal."

Each command runs as a user runs it (`python -m xcecli.lsf.bkill`, the real `xcecli`)
against a real daemon (one host of 1 slot, so a freed slot is seen at once) with real job
processes that ignore INT and TERM; the daemons and the jobs' processes are stopped by the
fixtures (tests/conftest.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import Daemon, _daemon_fixture
from tests.e2e.test_lsf_commands import lsf, running

pytestmark = pytest.mark.timeout(120)

#: the kill sequence's spacing in these daemons (xce.yaml kill_interval, LSF's JOB_TERMINATE_INTERVAL)
INTERVAL = 2.0
REMOVED = "removed by {user} (bkill -r); its processes are being killed"


@pytest.fixture
def one_slot(topdir):
    """A fresh xced with one host of 1 slot and a kill sequence of 2 x INTERVAL seconds."""
    yield from _daemon_fixture(topdir, slots=1, kill_interval=INTERVAL)


def _alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (its supervisor reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _stubborn(d: Daemon, user: str) -> tuple[int, int]:
    """A running job whose process ignores INT and TERM (`trap '' TERM INT; sleep 300`, the
    sleep inheriting the ignored signals): (job ID, the sleep's PID) once its traps are set."""
    pidfile = d.top / f"stubborn-{time.monotonic_ns()}.pid"
    jid = running(d, "sh", "-c", f"trap '' TERM INT; echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; "
                                 f"exec sleep 300", user=user)
    deadline = time.monotonic() + 10
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return jid, int(pidfile.read_text())


def _hist(d: Daemon, jid: int, user: str) -> str:
    return d.cli("hist", str(jid), user=user, check=True).stdout


def test_bkill_r_removes_a_running_job_at_once_and_its_slot_goes_to_a_pending_job(one_slot):
    """CLI-8, D-5, RES-2: `bkill -r ID` of a running job that ignores TERM prints LSF's "Job
    <N> is being terminated" and the job is EXIT at once, "removed by USER (bkill -r); its
    processes are being killed", in `show` and `bjobs`; its one slot goes to a pending job
    while its processes still run; they are gone within the kill sequence (INT, TERM, KILL
    spaced by kill_interval); their end is then noted in its events and it stays EXIT.
    Source: bkill.1 -r (IBM's bkill page, module docstring)."""
    d = one_slot
    jid, pid = _stubborn(d, "alice")
    waiting = d.submit("--", "sleep", "60", user="alice")
    assert d.show(waiting, user="alice")["state"] == "PEND"
    t0 = time.monotonic()
    r = lsf(d, "bkill", "-r", str(jid), user="alice")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{jid}> is being terminated\n", "")
    j = d.show(jid, user="alice")  # no wait: removed at once
    why = REMOVED.format(user="alice")
    assert j["state"] == "EXIT" and j["elements"][0]["exit_reason"] == why
    assert d.wait_state(waiting, ("RUN",), timeout=INTERVAL, user="alice")["state"] == "RUN"
    assert _alive(pid), "the removed job's process ignores INT and TERM: it lives until the sequence's KILL"
    r = lsf(d, "bjobs", "-o", "jobid stat exit_reason", "-noheader", str(jid), user="alice")
    assert r.stdout.split(None, 2) == [str(jid), "EXIT", why + "\n"], r
    while _alive(pid) and time.monotonic() - t0 < 2 * INTERVAL + 5:
        time.sleep(0.05)
    assert not _alive(pid), "the kill sequence still reaches the removed job's processes"
    deadline = time.monotonic() + 10
    while "ENDED_AFTER_REMOVE" not in (hist := _hist(d, jid, "alice")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "its processes were killed by signal SIGKILL after alice removed it (bkill -r)" in hist, hist
    j = d.show(jid, user="alice")
    assert j["state"] == "EXIT" and j["elements"][0]["exit_reason"] == why
    assert d.show(waiting, user="alice")["state"] == "RUN"
    # finished now: a second bkill -r is LSF's "Job has already finished", 255
    r = lsf(d, "bkill", "-r", str(jid), user="alice")
    assert (r.returncode, r.stderr) == (255, f"Job <{jid}>: Job has already finished\n")
    assert lsf(d, "bkill", str(waiting), user="alice").returncode == 0


def test_bkill_r_of_a_pending_job_and_xcecli_kill_force(one_slot):
    """CLI-8, CLI-3: a pending job removed with `bkill -r` is EXIT at once, "removed by USER
    while pending (bkill -r)", and never runs; `xcecli kill --force` removes a running job
    the same way, its answer saying so. Source: bkill.1 -r; a pending job is killed at once
    (docs/lsf-behaviour.md section 5)."""
    d = one_slot
    blocker = running(d, "sleep", "60", user="alice")
    waiting = d.submit("--", "true", user="alice")
    assert d.show(waiting, user="alice")["state"] == "PEND"
    r = lsf(d, "bkill", "-r", str(waiting), user="alice")
    assert (r.returncode, r.stdout) == (0, f"Job <{waiting}> is being terminated\n"), r.stderr
    j = d.show(waiting, user="alice")
    assert j["state"] == "EXIT" and j["elements"][0]["start_time"] is None
    assert j["elements"][0]["exit_reason"] == "removed by alice while pending (bkill -r)"
    r = d.cli("kill", "--force", str(blocker), user="alice")
    assert (r.returncode, r.stdout) == (0, f"Job <{blocker}>: kill requested: {blocker}; removed at once (bkill -r): "
                                           f"EXIT now, its processes are being killed\n"), r.stderr
    j = d.show(blocker, user="alice")
    assert j["state"] == "EXIT" and j["elements"][0]["exit_reason"] == REMOVED.format(user="alice")


def test_bkill_r_with_s_or_d_is_refused_and_so_is_the_route(one_slot):
    """CLI-8, CLI-3, D-2: LSF's synopsis makes -r, -s and -d exclusive (bkill.1: [-r | -s
    signal | -d]): `bkill -r -s TERM` and `bkill -r -d` are refused (255) and kill nothing;
    `xcecli kill --force` with -s or --record-done is a usage error (2); POST /jobs/ID/kill
    with `force` and `signal` or `record_done` is a 422 naming both."""
    from xced.api.client import Client
    from xced.api.errors import InvalidRequest

    d = one_slot
    jid = running(d, "sleep", "60")
    for other in (["-s", "TERM"], ["-d"]):
        r = lsf(d, "bkill", "-r", *other, str(jid))
        assert r.returncode == 255 and "exclude each other" in r.stderr and r.stdout == ""
    for other, said in ((["-s", "TERM"], "--force sends the kill sequence"),
                        (["--record-done"], "--force records the job EXIT at once")):
        r = d.cli("kill", "--force", *other, str(jid))
        assert r.returncode == 2 and said in r.stderr, r.stderr
    with Client.connect(topdir=str(d.top)) as c:
        for other, name in (({"signal": "TERM"}, "signal"), ({"record_done": True}, "record_done")):
            with pytest.raises(InvalidRequest) as e:
                c.request("POST", f"/jobs/{jid}/kill", json={"force": True, **other})
            assert "force" in e.value.message and name in e.value.message
    assert d.show(jid)["state"] == "RUN"
    assert lsf(d, "bkill", str(jid)).returncode == 0


def test_a_removed_job_stays_exit_through_a_daemon_restart(one_slot):
    """D-5, D-3, JOB-8: a job removed with `bkill -r` whose processes ignore TERM is EXIT at
    once; the daemon is stopped before the sequence's KILL ends them, the supervisor ends
    them meanwhile, and the daemon started again keeps the job EXIT with its reason and its
    slot free: a job of that slot runs. Source: bkill.1 -r; JOB_TERMINATE_INTERVAL sequence
    (docs/lsf-behaviour.md section 5 [44, 45])."""
    d = one_slot
    jid, pid = _stubborn(d, "alice")
    assert lsf(d, "bkill", "-r", str(jid), user="alice").returncode == 0
    assert d.show(jid, user="alice")["state"] == "EXIT"
    d.stop()
    assert _alive(pid), "INT and TERM are ignored; KILL comes after 2 x kill_interval"
    deadline = time.monotonic() + 2 * INTERVAL + 5
    while _alive(pid) and time.monotonic() < deadline:  # the supervisor ends it while no daemon runs
        time.sleep(0.05)
    assert not _alive(pid)
    d.start()
    j = d.show(jid, user="alice")
    assert j["state"] == "EXIT" and j["elements"][0]["exit_reason"] == REMOVED.format(user="alice")
    after = d.submit("--", "true", user="alice")
    assert d.wait_state(after, ("DONE", "EXIT"), user="alice")["state"] == "DONE"
    assert d.show(jid, user="alice")["state"] == "EXIT"

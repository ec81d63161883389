"""End to end: LSF's job control and information commands on a real xced (CLI-8, CLI-3, D-5):
bkill, bstop, bresume, brequeue, bpeek, bhist, bwait, bqueues, bhosts, lsid, bparams,
badmin showconf mbd, and xcecli's own `kill -s` and `peek -f`.

Each command runs as a user runs it, `python -m xcecli.lsf.NAME` (the console script
`NAME` is the same `main()`), against a real daemon with real job processes. The LSF
behaviour they follow is docs/lsf-behaviour.md section 5 and the IBM pages cited in each
test (the LSF 10.1 command reference: bkill.1, bstop.1, bresume.1, brequeue.1, bpeek.1,
bhist.1, bwait.1, bqueues.1, bhosts.1, lsid.1, bparams.1, badmin.1).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.conftest import XCEADMIN, Daemon

pytestmark = pytest.mark.timeout(120)

#: modules the LSF commands must not import (CLI-7; as tests/cli/test_fast.py)
HEAVY = ("typer", "click", "pydantic", "pydantic_core", "rich", "orjson", "http.client", "email", "httpx", "fastapi")


def lsf(d: Daemon, name: str, *args: str, user: str | None = None, timeout: float = 60,
        importtime: bool = False) -> subprocess.CompletedProcess:
    """Run LSF command `name` (xcecli.lsf.NAME) with `args` against daemon `d`, as `user`."""
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_SOCKET", None)
    env.pop("XCE_TEST_USER", None)
    if user:
        env["XCE_TEST_USER"] = user
    pre = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *pre, "-m", f"xcecli.lsf.{name}", *args], capture_output=True, text=True,
                          env=env, cwd=str(d.top), timeout=timeout)


def running(d: Daemon, *argv: str, user: str | None = None, cwd=None) -> int:
    """A job of `argv` once it runs."""
    jid = d.submit("--", *argv, user=user, cwd=cwd or d.top)
    d.wait_state(jid, ("RUN",), user=user)
    return jid


def test_bkill_terminates_a_running_job_and_names_an_unknown_one(shared_daemon):
    """CLI-8, JOB-1: `bkill ID` prints LSF's "Job <N> is being terminated" and the job ends
    EXIT; an ID the cluster does not know is LSF's "Job <N>: No matching job found", exit
    255; a finished one "Job has already finished"; a malformed one a usage error, 255.
    Source: bkill.1 (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bkill.1.html),
    docs/lsf-behaviour.md section 5."""
    d = shared_daemon
    jid = running(d, "sleep", "60")
    r = lsf(d, "bkill", str(jid))
    assert (r.returncode, r.stdout) == (0, f"Job <{jid}> is being terminated\n"), r.stderr
    j = d.wait_state(jid, ("EXIT",))
    assert j["elements"][0]["exit_reason"].startswith("killed by")
    r = lsf(d, "bkill", "987654")
    assert (r.returncode, r.stdout, r.stderr) == (255, "", "Job <987654>: No matching job found\n")
    r = lsf(d, "bkill", str(jid))
    assert (r.returncode, r.stderr) == (255, f"Job <{jid}>: Job has already finished\n")
    r = lsf(d, "bkill", "12x")
    assert r.returncode == 255 and "12x: Illegal job ID" in r.stderr and r.stdout == ""


def test_bkill_of_an_array_element_kills_that_element_only(shared_daemon):
    """CLI-8, JOB-4: `bkill "ID[INDEX]"` kills one element of an array (bkill.1's synopsis:
    "job_ID[index]"), printing `Job <ID[INDEX]> is being terminated`; the other elements
    go on; an index the array does not have is refused (255)."""
    d = shared_daemon
    jid = d.submit("-J", "arr[1-2]", "--", "sleep", "60")
    deadline = time.monotonic() + 20
    while d.show(jid)["counts"].get("RUN", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    r = lsf(d, "bkill", f"{jid}[2]")
    assert (r.returncode, r.stdout) == (0, f"Job <{jid}[2]> is being terminated\n"), r.stderr
    deadline = time.monotonic() + 20
    while d.show(jid)["elements"][1]["state"] != "EXIT" and time.monotonic() < deadline:
        time.sleep(0.05)
    els = d.show(jid)["elements"]
    assert [(e["index"], e["state"]) for e in els] == [(1, "RUN"), (2, "EXIT")]
    r = lsf(d, "bkill", f"{jid}[7]")
    assert r.returncode == 255 and r.stderr.startswith(f"Job <{jid}[7]>: No matching job found")
    assert lsf(d, "bkill", str(jid)).stdout == f"Job <{jid}> is being terminated\n"
    d.wait_state(jid, ("EXIT",))


def test_bkill_s_usr1_reaches_the_job_which_goes_on(shared_daemon, tmp_path):
    """CLI-8, CLI-3: `bkill -s USR1 ID` sends that one signal: a job that traps it sees it
    and goes on running, then ends DONE; `bkill -s 10` is the same signal by number; an
    unknown signal is refused listing the valid ones, and nothing is sent. bhist -l then
    shows "Signal <USR1> requested by user or administrator <USER>". Sources: bkill.1 (-s),
    "Send a signal to a job" (https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=execution-send-signal-job),
    LSF 6.2 Administration Guide p. 598 (bhist's "Signal <KILL> requested by user")."""
    d = shared_daemon
    got = tmp_path / "usr1.txt"
    jid = running(d, "bash", "-c", f"trap 'echo got >> {got}' USR1; echo ready > {tmp_path}/ready; "
                                   f"for i in $(seq 60); do sleep 0.1; done")
    deadline = time.monotonic() + 10
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    r = lsf(d, "bkill", "-s", "FOO", str(jid))
    assert r.returncode == 255 and "signal 'FOO': not a signal" in r.stderr and "USR1 (10)" in r.stderr
    r = lsf(d, "bkill", "-s", "USR1", str(jid))
    assert (r.returncode, r.stdout) == (0, f"Job <{jid}> is being signaled\n"), r.stderr
    deadline = time.monotonic() + 10
    while not got.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert got.read_text() == "got\n"
    assert lsf(d, "bkill", "-s", "10", str(jid)).returncode == 0
    deadline = time.monotonic() + 10
    while got.read_text() != "got\ngot\n" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert got.read_text() == "got\ngot\n"
    assert d.show(jid)["state"] == "RUN"  # a trapped signal does not end the job
    j = d.wait_state(jid, ("DONE", "EXIT"), timeout=30)
    assert j["state"] == "DONE"
    hist = lsf(d, "bhist", "-l", str(jid)).stdout
    assert "Signal <USR1> requested by user or administrator <" in hist


def test_bkill_0_kills_every_unfinished_job_of_the_caller_only(shared_daemon):
    """CLI-8: `bkill 0` kills all of the caller's unfinished jobs and no one else's (bkill.1:
    "Specify job ID 0 to kill multiple jobs"; LSF kills only the caller's jobs without -u);
    with none left it says LSF's "No unfinished job found", exit 255."""
    d = shared_daemon
    a1 = d.submit("--", "sleep", "60", user="alice0")
    a2 = d.submit("--", "sleep", "60", user="alice0")
    b = d.submit("--", "sleep", "60", user="bob0")
    r = lsf(d, "bkill", "0", user="alice0")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted([f"Job <{a1}> is being terminated", f"Job <{a2}> is being terminated"])
    for j in (a1, a2):
        assert d.wait_state(j, ("EXIT",))["state"] == "EXIT"
    assert d.show(b)["state"] in ("PEND", "RUN")
    r = lsf(d, "bkill", "0", user="alice0")
    assert (r.returncode, r.stdout) == (255, "") and "No unfinished job found" in r.stderr
    assert lsf(d, "bkill", "-J", "nosuchname", user="bob0").returncode == 255
    named = d.submit("-J", "named0", "--", "sleep", "60", user="bob0")
    r = lsf(d, "bkill", "-J", "named*", user="bob0")  # bkill.1: -J without an ID, the last job of that name
    assert (r.returncode, r.stdout) == (0, f"Job <{named}> is being terminated\n"), r.stderr
    assert d.wait_state(named, ("EXIT",), user="bob0")["state"] == "EXIT"
    assert d.show(b)["state"] in ("PEND", "RUN")
    assert lsf(d, "bkill", str(b), user="bob0").returncode == 0
    d.wait_state(b, ("EXIT",))


def test_bkill_r_removes_at_once_and_excludes_s_and_d(shared_daemon):
    """CLI-8, D-5: `bkill -r` (LSF: "the job is removed from the system immediately")
    records the job EXIT at once, with no warning; `-r` with `-s` or `-d` is a usage error
    that kills nothing (bkill.1's synopsis: [-r | -s signal | -d]). `bkill -r` in full:
    tests/e2e/test_bkill_remove.py; `bkill -d`: tests/e2e/test_bkill_done.py."""
    d = shared_daemon
    jid = running(d, "sleep", "60")
    for other in (["-s", "TERM"], ["-d"]):
        r = lsf(d, "bkill", "-r", *other, str(jid))
        assert r.returncode == 255 and "exclude each other" in r.stderr and r.stdout == ""
    assert d.show(jid)["state"] == "RUN"
    r = lsf(d, "bkill", "-r", str(jid))
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{jid}> is being terminated\n", "")
    assert d.show(jid)["state"] == "EXIT"


def test_bstop_bresume_move_a_running_job_through_ususp(shared_daemon):
    """D-5, CLI-8: `bstop` stops a running job (USUSP) with LSF's "Job <N> is being
    stopped"; `bresume` runs it again ("is being resumed"); a pending job stopped is PSUSP.
    Sources: bstop.1, bresume.1; docs/lsf-behaviour.md section 5 (a stopped pending job is
    PSUSP, a stopped running one USUSP)."""
    d = shared_daemon
    jid = running(d, "sleep", "60")
    r = lsf(d, "bstop", str(jid))
    assert (r.returncode, r.stdout) == (0, f"Job <{jid}> is being stopped\n"), r.stderr
    assert d.show(jid)["state"] == "USUSP"
    r = lsf(d, "bresume", str(jid))
    assert (r.returncode, r.stdout) == (0, f"Job <{jid}> is being resumed\n"), r.stderr
    assert d.show(jid)["state"] == "RUN"
    waiting = d.submit("-w", f"done({jid})", "--", "true")  # pends until jid is DONE
    assert lsf(d, "bstop", str(waiting)).stdout == f"Job <{waiting}> is being stopped\n"
    assert d.show(waiting)["state"] == "PSUSP"
    assert lsf(d, "bstop", "987655").stderr == "Job <987655>: No matching job found\n"
    assert lsf(d, "bkill", str(jid), str(waiting)).returncode == 0
    d.wait_state(jid, ("EXIT",))


def test_brequeue_puts_a_running_job_back_to_pend_and_it_runs_again(shared_daemon, tmp_path):
    """D-5, CLI-8: `brequeue ID` kills a running job and pends it again with the same ID
    ("Job <N> is being requeued"); it then runs a second time. Source: brequeue.1
    (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/brequeue.1.html),
    docs/lsf-behaviour.md section 5 [46]."""
    d = shared_daemon
    runs = tmp_path / "runs"
    jid = running(d, "sh", "-c", f"echo run >> {runs}; sleep 60")
    r = lsf(d, "brequeue", str(jid))
    assert (r.returncode, r.stdout) == (0, f"Job <{jid}> is being requeued\n"), r.stderr
    deadline = time.monotonic() + 20
    while (not runs.exists() or runs.read_text().count("run") < 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert runs.read_text() == "run\nrun\n"
    assert "REQUEUE" in d.cli("hist", str(jid)).stdout
    assert "Pending: Requeued job is waiting for rescheduling" in lsf(d, "bhist", "-l", str(jid)).stdout
    lsf(d, "bkill", str(jid))
    d.wait_state(jid, ("EXIT",))


def test_bpeek_shows_the_output_so_far_and_f_follows_it(shared_daemon, tmp_path):
    """CLI-8, CLI-3: `bpeek ID` prints LSF's "<< output from stdout >>" then the output so
    far; `bpeek -f` goes on until the job ends; a pending job is "Not yet started." (255).
    Source: bpeek.1 (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bpeek.1.html)."""
    d = shared_daemon
    go = tmp_path / "go"
    jid = running(d, "sh", "-c", f"echo one; while [ ! -e {go} ]; do sleep 0.05; done; echo two")
    deadline = time.monotonic() + 10
    while True:
        r = lsf(d, "bpeek", str(jid))
        if r.stdout == "<< output from stdout >>\none\n" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert (r.returncode, r.stdout) == (0, "<< output from stdout >>\none\n"), r.stderr
    waiting = d.submit("-w", f"done({jid})", "--", "echo", "later")
    r = lsf(d, "bpeek", str(waiting))
    assert (r.returncode, r.stderr) == (255, f"Job <{waiting}> : Not yet started.\n")
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_TEST_USER", None)
    p = subprocess.Popen([sys.executable, "-m", "xcecli.lsf.bpeek", "-f", str(jid)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        time.sleep(0.5)
        assert p.poll() is None  # still following: the job runs
        go.write_text("")
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert (p.returncode, out) == (0, "<< output from stdout >>\none\ntwo\n"), err
    assert d.wait_state(waiting, ("DONE",))["state"] == "DONE"


def test_bhist_l_tells_a_jobs_history_in_lsfs_phrases(shared_daemon, tmp_path):
    """CLI-8, D-5: `bhist -l` gives LSF's phrases for a job's events: "Submitted from host
    <H>, to Queue <normal>", "Dispatched to <h1>", "Starting", "Done successfully." or
    "Exited with exit code 3.", then the summary of seconds per state; `bhist` alone the
    summary table, a bsub job named by its command line. Sources: docs/lsf-behaviour.md
    section 5 and the shared reference's bhist -l example ("Dispatched to <intel4>"); LSF 6.2 Administration Guide p. 598; bhist.1."""
    d = shared_daemon
    ok = d.submit("--", "true", cwd=tmp_path)
    bad = d.submit("--", "sh", "-c", "exit 3", cwd=tmp_path)
    d.wait_state(ok, ("DONE",))
    d.wait_state(bad, ("EXIT",))
    r = lsf(d, "bhist", "-l", str(ok), str(bad))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert f"Job <{ok}>, User <" in out and "Command <true>" in out
    named = d.submit("-J", "job6", "--", "true", cwd=tmp_path)  # bsub -J: "Job <6>, Job Name <job6>, User <..."
    arr = d.submit("-J", "fam[1-2]", "--", "true", cwd=tmp_path)
    d.wait_state(named, ("DONE",))
    d.wait_state(arr, ("DONE",))
    long = lsf(d, "bhist", "-l", str(named), f"{arr}[2]").stdout
    assert f"Job <{named}>, Job Name <job6>, User <" in long and f"Job <{arr}[2]>, Job Name <fam[2]>, User <" in long
    assert "Submitted from host <" in out and f"to Queue <normal>, CWD <{tmp_path}>;" in out
    assert "Dispatched to <h1>;" in out and "Starting;" in out
    assert "Done successfully." in out and "Exited with exit code 3." in out
    assert "Summary of time in seconds spent in various states by" in out
    assert out.count("  PEND     PSUSP    RUN      USUSP    SSUSP    UNKWN    TOTAL") == 2
    r = lsf(d, "bhist", str(ok))
    lines = r.stdout.splitlines()
    assert lines[0] == "Summary of time in seconds spent in various states:"
    assert lines[1].split() == ["JOBID", "USER", "JOB_NAME", "PEND", "PSUSP", "RUN", "USUSP", "SSUSP", "UNKWN", "TOTAL"]
    assert lines[2].split()[0] == str(ok)
    # a bsub job's JOB_NAME is its command line as typed (LSF's default job name), not the
    # /bin/sh that runs it
    sub = lsf(d, "bsub", "true")
    assert sub.returncode == 0, sub.stderr
    bj = int(sub.stdout.split("<")[1].split(">")[0])
    d.wait_state(bj, ("DONE",))
    row = lsf(d, "bhist", str(bj)).stdout.splitlines()[2].split()
    assert row[0] == str(bj) and row[2] == "true", row
    r = lsf(d, "bhist", "987656")
    assert (r.returncode, r.stderr) == (255, "Job <987656>: No matching job found\n")


def test_bwait_returns_when_the_condition_holds_and_fails_when_it_never_can(shared_daemon, tmp_path):
    """CLI-8, JOB-5: `bwait -w 'done(ID)'` returns 0 once the job is DONE (not before);
    `bwait -w 'done(ID)'` on a job that ended EXIT can never hold: 255 saying why; a
    malformed condition is a usage error naming the column. Sources: bwait.1
    (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bwait.1.html), the -w grammar
    of docs/lsf-behaviour.md section 5 [41, 42]."""
    d = shared_daemon
    go = tmp_path / "go"
    jid = running(d, "sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done")
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_TEST_USER", None)
    p = subprocess.Popen([sys.executable, "-m", "xcecli.lsf.bwait", "-w", f"done({jid})"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        time.sleep(1.0)
        assert p.poll() is None  # the job still runs: bwait still waits
        go.write_text("")
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert d.show(jid)["state"] == "DONE"
    bad = d.submit("--", "sh", "-c", "exit 2")
    d.wait_state(bad, ("EXIT",))
    r = lsf(d, "bwait", "-w", f"done({bad})")
    assert r.returncode == 255 and "can never be satisfied" in r.stderr and f"job {bad}" in r.stderr
    assert lsf(d, "bwait", "-w", f"exit({bad}, 2)").returncode == 0
    r = lsf(d, "bwait", "-w", "done(1")
    assert r.returncode == 255 and "column 7" in r.stderr
    r = lsf(d, "bwait", "-w", f"done({jid}) &&", "-t", "x")
    assert r.returncode == 255


def test_bqueues_bhosts_lsid_bparams_and_badmin_showconf(daemon):
    """CLI-8: bqueues (QUEUE_NAME PRIO STATUS ... NJOBS PEND RUN SUSP), bhosts (HOST_NAME
    STATUS JL/U MAX NJOBS RUN SSUSP USUSP RSV; statuses ok, closed, unavail), lsid ("My
    cluster name is X", "My master name is Y"), bparams and badmin showconf mbd (the
    settings in force under LSF's names: CLEAN_PERIOD, JOB_TERMINATE_INTERVAL ...). Sources:
    bqueues.1, bhosts.1, the host status page (docs/lsf-behaviour.md section 5 [S73]),
    lsid.1, bparams.1, badmin.1, lsb.params."""
    import socket

    d = daemon
    jid = running(d, "sleep", "60")
    lines = lsf(d, "bqueues").stdout.splitlines()
    assert lines[0].split() == ["QUEUE_NAME", "PRIO", "STATUS", "MAX", "JL/U", "JL/P", "JL/H", "NJOBS", "PEND", "RUN",
                                "SUSP"]
    assert lines[1].split() == ["normal", "30", "Open:Active", "-", "-", "-", "-", "1", "0", "1", "0"]
    r = lsf(d, "bqueues", "nosuch")
    assert (r.returncode, r.stderr) == (255, "nosuch: No such queue\n")
    lsf(d, "bstop", str(jid))
    lines = lsf(d, "bhosts").stdout.splitlines()
    assert lines[0].split() == ["HOST_NAME", "STATUS", "JL/U", "MAX", "NJOBS", "RUN", "SSUSP", "USUSP", "RSV"]
    assert lines[1].split() == ["h1", "ok", "-", "4", "1", "0", "0", "1", "0"]
    env = {**os.environ, "XCE_TOPDIR": str(d.top), "XCE_TEST_USER": "admin"}
    subprocess.run([XCEADMIN, "hosts", "close", "h1", "--reason", "test"], env=env, check=True, capture_output=True)
    assert lsf(d, "bhosts").stdout.splitlines()[1].split()[:2] == ["h1", "closed"]
    assert lsf(d, "bhosts", "-w").stdout.splitlines()[1].split()[:2] == ["h1", "closed_Adm"]
    lines = lsf(d, "lsid").stdout.splitlines()
    assert lines[-2:] == ["My cluster name is testcluster", f"My master name is {socket.gethostname()}"]
    assert lines[0].startswith("XCE ")
    out = lsf(d, "bparams").stdout.splitlines()
    assert out == ["Default Queues:  normal", "Job Terminate Interval:  0.3 seconds", "Clean Period:  3600 seconds",
                   "Max Job Array Size:  1000"]
    out = lsf(d, "bparams", "-a").stdout
    assert "    CLEAN_PERIOD = 3600\n" in out and "    kill_interval_s = 0.3\n" in out
    assert "    PEND_REASON_UPDATE_INTERVAL = 5\n" in out and "    pend_reason_update_s = 5\n" in out
    out = lsf(d, "badmin", "showconf", "mbd").stdout.splitlines()
    assert out[0].startswith("MBD configuration at ")
    assert "    JOB_TERMINATE_INTERVAL=0.3" in out and "    clean_period_s=3600" in out
    r = lsf(d, "badmin", "reconfig")
    assert r.returncode == 255 and "xceadmin build --apply" in r.stderr


def test_xcecli_kill_s_and_peek_f(shared_daemon, tmp_path):
    """CLI-3: `xcecli kill -s SIG` sends that one signal (the job traps it and goes on;
    an unknown signal is a usage error, exit 2, listing the valid ones); `xcecli peek -f`
    follows the output until the job ends (LSF bkill -s, bpeek -f)."""
    d = shared_daemon
    got, go = tmp_path / "usr2.txt", tmp_path / "go"
    jid = running(d, "bash", "-c", f"trap 'echo got >> {got}' USR2; echo ready; "
                                   f"while [ ! -e {go} ]; do sleep 0.05; done; echo end")
    deadline = time.monotonic() + 10
    while d.cli("peek", str(jid)).stdout != "ready\n" and time.monotonic() < deadline:
        time.sleep(0.05)
    r = d.cli("kill", "-s", "NOPE", str(jid))
    assert r.returncode == 2 and "not a signal" in r.stderr and "USR2 (12)" in r.stderr
    r = d.cli("kill", "-s", "SIGUSR2", str(jid))
    assert (r.returncode, r.stdout) == (0, f"Job <{jid}>: SIGUSR2 sent: {jid}\n"), r.stderr
    deadline = time.monotonic() + 10
    while not got.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert got.read_text() == "got\n" and d.show(jid)["state"] == "RUN"
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_TEST_USER", None)
    p = subprocess.Popen([str(os.path.join(os.path.dirname(sys.executable), "xcecli")), "peek", "-f", str(jid)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        time.sleep(0.5)
        assert p.poll() is None
        go.write_text("")
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert (p.returncode, out) == (0, "ready\nend\n"), err


def test_nextflows_kill_is_bkill_of_several_ids_and_its_exit_code(shared_daemon):
    """CLI-8 (issue 18's pipeline tools): Nextflow's LSF executor kills its tasks with
    `bkill ID [ID...]` (nextflow-io/nextflow LsfExecutor.getKillCommand() = ['bkill'];
    AbstractGridExecutor.killTaskCommand adds the IDs, reads stdout and stderr merged and
    looks only at the exit code, logging a non-zero one; it never uses -d). Both jobs end
    EXIT with exit 0; a batch holding a job that is gone exits non-zero, as LSF's."""
    d = shared_daemon
    a = running(d, "sleep", "60")
    b = d.submit("--", "sleep", "60")
    r = lsf(d, "bkill", str(a), str(b))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"Job <{a}> is being terminated", f"Job <{b}> is being terminated"]
    for j in (a, b):
        assert d.wait_state(j, ("EXIT",))["state"] == "EXIT"
    r = lsf(d, "bkill", str(a), "987657")
    assert r.returncode == 255 and "Job <987657>: No matching job found" in r.stderr


def test_the_kill_route_takes_a_signal_and_refuses_an_unknown_one(shared_daemon):
    """D-2, CLI-3: POST /jobs/ID/kill takes `signal` (xced.api.models.KillRequest): an unknown
    one is a 422 naming the field and the valid signals; a pending job takes only the
    signals that kill, stop or resume it, others are a 409 saying so (LSF: "You cannot send
    arbitrary signals to a pending job", docs/lsf-behaviour.md section 5 [59])."""
    from xced.api.client import Client
    from xced.api.errors import Conflict, InvalidRequest

    d = shared_daemon
    blocker = running(d, "sleep", "60")
    waiting = d.submit("-w", f"done({blocker})", "--", "true")
    with Client.connect(topdir=str(d.top)) as c:
        with pytest.raises(InvalidRequest) as e:
            c.request("POST", f"/jobs/{blocker}/kill", json={"signal": "SIGFOO"})
        assert e.value.field is not None and "signal" in e.value.field and "USR1 (10)" in e.value.message
        with pytest.raises(Conflict) as e:
            c.request("POST", f"/jobs/{waiting}/kill", json={"signal": "USR1"})
        assert "pending" in e.value.message and "SIGUSR1 goes to running jobs" in e.value.message
        r = c.request("POST", f"/jobs/{waiting}/kill", json={"signal": "TERM"}).json()
        assert r["affected"] == [str(waiting)] and r["message"] == f"SIGTERM sent: {waiting}"
        assert d.show(waiting)["state"] == "EXIT"
        r = c.request("POST", f"/jobs/{blocker}/kill", json={"signal": "STOP"}).json()
        assert r["message"].startswith("stopped") and d.show(blocker)["state"] == "USUSP"
        c.request("POST", f"/jobs/{blocker}/kill", json={})
    d.wait_state(blocker, ("EXIT",))


@pytest.mark.parametrize("cmd", [("bkill", "987658"), ("bstop", "987662"), ("bhosts",), ("bqueues",), ("lsid",),
                                 ("bparams",), ("bhist", "987660"), ("bpeek", "987661"),
                                 ("bwait", "-w", "ended(987659)")])
def test_lsf_commands_import_no_pydantic_rich_or_typer(shared_daemon, cmd):
    """CLI-7: the LSF commands start within the CLI's budget: neither pydantic, rich, typer
    nor click (nor orjson, http.client, httpx) is imported on their path (the same check as
    tests/cli/test_fast.py)."""
    r = lsf(shared_daemon, *cmd, importtime=True)
    mods = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "xcecli.lsf.common" in mods, r.stderr[-2000:]
    assert sorted(m for m in mods if m.split(".")[0] in HEAVY) == []

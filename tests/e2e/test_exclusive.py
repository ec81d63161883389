"""Exclusive jobs end to end (issue 18 part 4, CLI-8, RES-6): `bsub -x`, `#BSUB -x` and
`xcecli submit -x` against a real xced with one host (h1, 4 slots), real processes.

LSF's rule (IBM bsub -x, https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.__x.1.html,
and "Exclusive scheduling"; docs/lsf-behaviour.md section 6): an exclusive job is dispatched
only to hosts where no other job is running, and while it runs no other job is dispatched to
those hosts. XCE allows it in every queue (LSF needs the queue's EXCLUSIVE=Y).
"""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e.test_lsf_bsub import LSF_LINE, bsub

pytestmark = pytest.mark.timeout(120)


def _waiter(flag) -> list[str]:
    """A job command that runs until `flag` exists (a test ends it when it chooses)."""
    return ["/bin/sh", "-c", f"while [ ! -e {flag} ]; do sleep 0.05; done"]


def _pend_reason(d, job: int, expect: str, timeout: float = 20.0) -> dict:
    """The job's pend reason once its main line is `expect` (the scheduler sets it)."""
    deadline = time.monotonic() + timeout
    while True:
        j = d.show(job)
        pr = j["elements"][0].get("pend_reason") or {}
        if j["state"] == "PEND" and pr.get("main") == expect:
            return pr
        assert time.monotonic() < deadline, f"job {job}: {j['state']}, reason {pr}, expected {expect!r}"
        time.sleep(0.05)


def test_bsub_x_runs_alone_and_others_wait_for_it(daemon, tmp_path):
    """`bsub -x` starts on the idle host and holds it whole: a plain job that would fit the
    3 free slots pends with "host h1 runs an exclusive job" (`xcecli why` shows it) and starts
    when the exclusive job ends."""
    d = daemon
    stop_x = tmp_path / "stop-x"
    r = bsub(d, "-x", *_waiter(stop_x), cwd=tmp_path)
    assert r.returncode == 0 and LSF_LINE.fullmatch(r.stdout), (r.stdout, r.stderr)
    x = int(LSF_LINE.fullmatch(r.stdout).group(1))
    jx = d.wait_state(x, ("RUN",))
    assert jx["exclusive"] is True and jx["elements"][0]["alloc"] == [{"host": "h1", "slots": 1}]
    shown = d.cli("show", str(x), check=True).stdout
    assert "Exclusive" in shown and "yes: only on hosts where no other job runs" in shown, shown
    hosts = json.loads(d.cli("hosts", "--json", check=True).stdout)["hosts"]
    assert [(h["name"], h["slots_used"], h["slots"]) for h in hosts] == [("h1", 4, 4)]

    r = bsub(d, "-n", "2", "echo", "after", "-o", str(tmp_path / "after.out"), cwd=tmp_path)
    other = int(LSF_LINE.fullmatch(r.stdout).group(1))
    pr = _pend_reason(d, other, "host h1 runs an exclusive job")
    assert [h["message"] for h in pr["hosts"]] == ["host h1 runs an exclusive job"]
    assert d.show(other)["exclusive"] is False
    why = d.cli("why", str(other), check=True).stdout
    assert "host h1 runs an exclusive job" in why, why

    stop_x.touch()
    assert d.wait_state(x, ("DONE", "EXIT"))["state"] == "DONE"
    assert d.wait_state(other, ("DONE", "EXIT"))["state"] == "DONE"


def test_an_exclusive_job_waits_for_the_running_job_with_its_reason(daemon, tmp_path):
    """An exclusive job submitted while another job runs pends with "exclusive job: host h1
    has 1 job running" though 3 slots are free, and starts once that job ends; `#BSUB -x` in
    a script on stdin and `xcecli submit -x` ask for the same (JOB-12: a directive is the
    option)."""
    d = daemon
    stop = tmp_path / "stop"
    plain = d.submit("--", *_waiter(stop), cwd=tmp_path)
    d.wait_state(plain, ("RUN",))

    r = bsub(d, input=f"#!/bin/sh\n#BSUB -x\n#BSUB -o {tmp_path}/x.out\necho alone\n", cwd=tmp_path)
    assert r.returncode == 0 and LSF_LINE.fullmatch(r.stdout), (r.stdout, r.stderr)
    x = int(LSF_LINE.fullmatch(r.stdout).group(1))
    pr = _pend_reason(d, x, "exclusive job: host h1 has 1 job running")
    assert pr["hint"] == "waits for a host where no job runs"
    assert d.show(x)["exclusive"] is True

    y = d.submit("-x", "--", "true", cwd=tmp_path)
    assert d.show(y)["exclusive"] is True
    assert d.show(y)["state"] == "PEND"

    stop.touch()
    assert d.wait_state(plain, ("DONE", "EXIT"))["state"] == "DONE"
    assert d.wait_state(x, ("DONE", "EXIT"))["state"] == "DONE"
    assert (tmp_path / "x.out").read_text() == "alone\n"
    assert d.wait_state(y, ("DONE", "EXIT"))["state"] == "DONE"
    jx, jy = d.show(x), d.show(y)
    # one after the other on the one host, never together
    assert jx["elements"][0]["end_time"] <= jy["elements"][0]["start_time"] or \
        jy["elements"][0]["end_time"] <= jx["elements"][0]["start_time"]


def test_submit_x_dry_run_says_where_it_came_from(daemon, tmp_path):
    """`xcecli submit --dry-run -x` names the exclusive placement and its source (CLI-2)."""
    r = daemon.cli("submit", "--dry-run", "-x", "--", "true", cwd=tmp_path, check=True)
    assert "exclusive:       only on hosts where no other job runs  (command line)" in r.stdout, r.stdout


@pytest.fixture
def two_hosts():
    """A controller and two real `xced --roles worker` processes, h1 and h2, 2 slots each
    (tests/e2e/test_multihost.py's Cluster), queues normal and other; stopped by PID afterwards."""
    import shutil

    from tests.conftest import short_tmpdir
    from tests.e2e.test_multihost import Cluster

    top = short_tmpdir("xce-ex-")
    c = Cluster(top)
    with open(c.ctl_top / "config" / "queues.yaml", "a") as f:  # a second queue, not behind normal's head
        f.write("  - name: other\n    priority: 20\n")
    try:
        yield c.start({"h1": ["--slots", "2", "--memory", "2GB"], "h2": ["--slots", "2", "--memory", "2GB"]})
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)


def test_bsub_x_takes_the_idle_host_of_two_and_the_next_one_waits(two_hosts, tmp_path):
    """With h1 running a job (1 of 2 slots), `bsub -x` goes to the idle h2, not beside it;
    a second exclusive job then pends naming both hosts; a plain job of another queue (not
    behind that head, SCHED-1) still gets h1's free slot (IBM "Exclusive scheduling": only
    hosts with no job running; no job joins one)."""
    d = two_hosts.ctl
    stop = tmp_path / "stop"
    busy = d.submit("-R", "select[hname==h1]", "--", *_waiter(stop), cwd=tmp_path)
    assert [a["host"] for a in d.wait_state(busy, ("RUN",))["elements"][0]["alloc"]] == ["h1"]
    r = bsub(d, "-x", *_waiter(stop), cwd=tmp_path)
    x = int(LSF_LINE.fullmatch(r.stdout).group(1))
    assert d.wait_state(x, ("RUN",))["elements"][0]["alloc"] == [{"host": "h2", "slots": 1}]
    r = bsub(d, "-x", "true", cwd=tmp_path)
    x2 = int(LSF_LINE.fullmatch(r.stdout).group(1))
    pr = _pend_reason(d, x2, "exclusive job: host h1 has 1 job running; host h2 runs an exclusive job")
    assert [h["message"] for h in pr["hosts"]] == ["exclusive job: host h1 has 1 job running",
                                                   "host h2 runs an exclusive job"]
    plain = d.submit("-q", "other", "--", "true", cwd=tmp_path)
    j = d.wait_state(plain, ("DONE", "EXIT"))
    assert j["state"] == "DONE" and j["elements"][0]["alloc"] == [{"host": "h1", "slots": 1}]
    stop.touch()
    assert d.wait_state(x2, ("DONE", "EXIT"))["state"] == "DONE"

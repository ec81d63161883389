"""End to end: submits that can be retried, and waits that ride out a restart (JOB-10, D-3,
CLI-1; issue 15 "Retries").

A real xced on a Unix socket in a temp TopDir, the real `xcecli`, real jobs. The moment
between a submit's commit and its answer is made exact by the daemon's test fault
XCE_TEST_FAULT=exit-after-commit:submit (it ends the daemon right after the commit), which
a production-mode xced refuses. One daemon serves the module; the tests that restart it
leave it running for the next.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from tests.conftest import XCECLI, XCED, Daemon, _daemon_fixture, short_tmpdir, stop_processes, write_config
from xced.api.client import Client
from xced.api.errors import Conflict, InvalidRequest

pytestmark = pytest.mark.timeout(120)

FAULT = {"XCE_TEST_FAULT": "exit-after-commit:submit"}


@pytest.fixture(scope="module")
def d():
    """One xced for the module (test mode, 4 slots), stopped with its jobs at the end."""
    top = short_tmpdir()
    try:
        yield from _daemon_fixture(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _env(d: Daemon, **extra: str) -> dict:
    env = {**os.environ, "XCE_TOPDIR": str(d.top), **extra}
    env.pop("XCE_SOCKET", None)
    env.pop("XCE_TEST_USER", None)
    return env


def _all_jobs(d: Daemon) -> list[dict]:
    return json.loads(d.cli("jobs", "-a", "-u", "all", "--json", check=True).stdout)["jobs"]


def _restart(d: Daemon, sig: int = signal.SIGTERM, env: dict | None = None) -> None:
    d.stop(sig)
    d.env = env or {}
    d.start()


def test_a_submit_whose_answer_was_lost_is_retried_into_one_job_and_keys_outlive_the_restart(d, tmp_path):
    """xced dies right after committing a submit, before answering it; `xcecli submit` keeps
    sending it with the same key until xced is back, and gets the first job's ID: one job.
    A key used before the crash still gives its job after it, and still refuses another body."""
    sock = d.top / "run" / "xced.sock"
    key, body = "retry-e2e-" + os.urandom(8).hex(), {"argv": ["true"], "cwd": "/tmp"}
    with Client(sock, as_user="alice", timeout=10) as alice:
        first = alice.submit(body, key=key)
    before = {j["job_id"] for j in _all_jobs(d)}
    _restart(d, env=FAULT)
    sub = subprocess.Popen([XCECLI, "submit", "--parsable", "--", "true"], env=_env(d, XCE_CONNECT_TIMEOUT="60"),
                           cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert d.proc.wait(30) == 86  # the fault: ended after the commit, before the answer
        d.proc = None
        assert sub.poll() is None  # still trying
        d.env = {}
        d.start()
        out, err = sub.communicate(timeout=60)
    finally:
        stop_processes([sub])
    assert sub.returncode == 0, err
    assert "trying again for up to 60 s (XCE_CONNECT_TIMEOUT)" in err, err
    new = [j for j in _all_jobs(d) if j["job_id"] not in before]
    assert [j["job_id"] for j in new] == [int(out)], new
    with Client(sock, as_user="alice", timeout=10) as alice:
        assert alice.submit(body, key=key).model_dump() == first.model_dump()  # the first answer, kept
        with pytest.raises(Conflict, match=f"for job {first.job_id}, with a different request"):
            alice.submit({**body, "cwd": "/"}, key=key)
    assert len(_all_jobs(d)) == len(before) + 1  # the retries created nothing


def test_the_same_key_gives_the_same_job_another_body_is_409_a_bad_key_422_and_keys_last_a_day(d):
    """Through the API: the key is the user's (another user's same key is another key); a
    retry with the same key and body returns the first job; the same key with another body
    is 409 naming the job; a malformed key is 422. A day later the key is free again."""
    sock = d.top / "run" / "xced.sock"
    key = "retry-e2e-" + os.urandom(8).hex()
    body = {"argv": ["true"], "cwd": "/tmp"}
    with Client(sock, as_user="alice", timeout=10) as alice, Client(sock, as_user="bob", timeout=10) as bob:
        count = len(_all_jobs(d))
        first = alice.submit(body, key=key)
        assert alice.submit(body, key=key).job_id == first.job_id
        assert len(_all_jobs(d)) == count + 1
        assert bob.submit(body, key=key).job_id != first.job_id  # bob's key, not alice's
        with pytest.raises(Conflict) as ei:
            alice.submit({**body, "name": "other"}, key=key)
        assert ei.value.status == 409 and f"for job {first.job_id}, with a different request" in ei.value.message
        for bad in ("short", "has space!", "x" * 129):
            with pytest.raises(InvalidRequest) as ei:
                alice.request("POST", "/jobs", json=body, headers={"Idempotency-Key": bad})
            assert ei.value.status == 422 and ei.value.field == "Idempotency-Key", ei.value.message
            assert "is malformed: a key is 8 to 128 characters of letters, digits" in ei.value.message
    # kept 24 hours, not for ever: a day later (the test clock) the key is free again
    with Client(sock, as_user="admin", timeout=10) as admin:
        admin.request("POST", "/debug/clock", json={"advance_s": 25 * 3600})
    with Client(sock, as_user="alice", timeout=10) as alice:
        alice.submit(body)  # a submit with a key of its own deletes the keys over a day old
        assert alice.submit({**body, "name": "other"}, key=key).job_id != first.job_id


def test_submit_K_wait_and_jobs_ride_out_a_restart_and_K_returns_the_jobs_code(d, tmp_path):
    """xced is SIGKILLed while `submit -K` and `wait` wait for a job and `jobs` asks: they
    reconnect once it is back and go on; -K exits with the job's own code, 7. Only a daemon
    that stays away past XCE_CONNECT_TIMEOUT ends a wait with exit 3."""
    env = _env(d, XCE_CONNECT_TIMEOUT="30")
    k = subprocess.Popen([XCECLI, "submit", "-K", "--", "sh", "-c", "sleep 1; exit 7"], env=env, cwd=str(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs = [k]
    try:
        deadline = time.monotonic() + 20
        while True:
            jobs = [j for j in _all_jobs(d) if j["argv"][-1] == "sleep 1; exit 7"]
            if jobs and jobs[0]["state"] == "RUN":
                break
            assert time.monotonic() < deadline and k.poll() is None, "the -K job never ran"
            time.sleep(0.05)
        jid = jobs[0]["job_id"]
        w = subprocess.Popen([XCECLI, "wait", str(jid)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        procs.append(w)
        d.stop(signal.SIGKILL)
        ls = subprocess.Popen([XCECLI, "jobs", "-a", "--json"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        procs.append(ls)
        gone = subprocess.run([XCECLI, "wait", str(jid)], env=_env(d, XCE_CONNECT_TIMEOUT="1"), capture_output=True,
                              text=True, timeout=30)
        assert gone.returncode == 3, gone
        assert f"has not answered for 1 s (XCE_CONNECT_TIMEOUT), so the wait for job {jid} ends" in gone.stderr
        assert k.poll() is None and w.poll() is None and ls.poll() is None  # still waiting, still asking
        d.start()
        try:
            out, err = k.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # what the daemon knows of the job, to learn from a failure
            pytest.fail(f"submit -K still waits 60 s after the restart\n{d.cli('hist', str(jid)).stdout}\n"
                        f"{d.log.read_text()[-4000:]}")
        assert k.returncode == 7, (k.returncode, err)
        assert "still waiting for job" in err, err
        _, werr = w.communicate(timeout=60)
        assert w.returncode == 1 and f"job {jid} ended EXIT (exit code 7)" in werr, (w.returncode, werr)
        lout, lerr = ls.communicate(timeout=60)
        assert ls.returncode == 0 and jid in [j["job_id"] for j in json.loads(lout)["jobs"]], lerr
        assert "trying again for up to 30 s (XCE_CONNECT_TIMEOUT)" in lerr, lerr
    finally:
        stop_processes(procs)


def test_K_exits_non_zero_for_every_EXIT_even_with_exit_code_0(d, tmp_path):
    """A job whose command exits 0 but whose own -Ep post-exec fails ends EXIT: -K exits 1
    (there is no non-zero code to pass on), and so does `wait`."""
    r = d.cli("submit", "-K", "-Ep", "exit 4", "--", "true", cwd=tmp_path)
    assert "<<Job is finished>> EXIT" in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stderr)
    jid = max(j["job_id"] for j in _all_jobs(d))
    e = d.show(jid)["elements"][0]
    assert e["state"] == "EXIT" and not e["exit_code"], e
    w = d.cli("wait", str(jid))
    assert w.returncode == 1 and f"job {jid} ended EXIT" in w.stderr, w.stderr


def test_the_test_fault_is_refused_in_production_and_must_be_known(tmp_path):
    """XCE_TEST_FAULT is a test hook: a production xced refuses to start with it (one clear
    line, before it opens its store), and an unknown fault is refused listing the valid."""
    for mode, value, says in (
            ("production", "exit-after-commit:submit",
             "XCE_TEST_FAULT='exit-after-commit:submit' is set, and it is a test hook: a production-mode xced "
             "refuses to start with it; unset XCE_TEST_FAULT"),
            ("test", "explode", "XCE_TEST_FAULT='explode': unknown fault; valid: exit-after-commit:submit")):
        top = short_tmpdir()
        try:
            write_config(top, mode=mode)
            r = subprocess.run([XCED, "--topdir", str(top)], capture_output=True, text=True, timeout=60,
                               env={**os.environ, "XCE_TEST_FAULT": value})
            assert r.returncode == 1 and f"xced: error: {says}" in r.stderr, r.stderr
            assert "Traceback" not in r.stderr and not (top / "state" / "xce.db").exists()
        finally:
            shutil.rmtree(top, ignore_errors=True)

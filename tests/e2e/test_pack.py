"""End to end: pack submits, POST /jobs/pack (CLI-7, issue 17 part 2; LSF `bsub -pack FILE`).

A real xced on a Unix socket in a temp TopDir, the API client the CLI uses
(`Client.submit_pack`), real jobs. A pack sends the environment once and its jobs' own
options; every job is checked as a single submit is, all are recorded in one transaction or
none, with one Idempotency-Key for the whole pack (JOB-10). One daemon serves the module;
the tests that restart it leave it running for the next. The failing commit runs on the
xced of tests/faults, whose store fails on demand.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading

import pytest

from tests.conftest import FAULTY_ENV, FAULTY_XCED, Daemon, _daemon_fixture, short_tmpdir
from xced.api.client import Client
from xced.api.errors import Conflict, DaemonUnreachable, InvalidRequest, StoreUnavailable
from xced.model.units import MAX_ENV_VARS, MAX_PACK_JOBS, MAX_PACK_REQUEST_BYTES, MAX_REQUEST_BYTES

pytestmark = pytest.mark.timeout(120)

QUEUES = "  - name: short\n    priority: 40\n"


@pytest.fixture(scope="module")
def d():
    """One xced for the module (test mode, 4 slots, queues normal and short), whose store
    fails its commits while <TopDir>/state/FAULT exists (tests/faults/xced.py); stopped with
    its jobs at the end."""
    top = short_tmpdir()
    try:
        yield from _daemon_fixture(top, cmd=FAULTY_XCED, env=FAULTY_ENV, extra_queues=QUEUES)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _client(d: Daemon, user: str = "alice") -> Client:
    return Client(d.top / "run" / "xced.sock", as_user=user, timeout=10)


def _all_ids(d: Daemon) -> set[int]:
    with _client(d, "admin") as c:
        return {j["job_id"] for j in c.request("GET", "/jobs", params={"user": "all", "all": "true"}).json()["jobs"]}


def _job(d: Daemon, job_id: int) -> dict:
    with _client(d) as c:
        return c.request("GET", f"/jobs/{job_id}").json()


def _gated(d: Daemon) -> list[str]:
    """A command that runs until the test opens the gate (it ends when the test says)."""
    return ["sh", "-c", f"while [ ! -e {d.top / 'gate'} ]; do sleep 0.05; done"]


def _job_req(**kw) -> dict:
    return {"argv": ["true"], "cwd": "/tmp", **kw}


def test_a_pack_records_each_job_with_its_own_options_and_the_shared_environment(d):
    """Three jobs of different queues, task counts and an array, the third overriding one
    variable of the pack's environment with its own --env, and a fourth waiting on a -w
    dependency: one answer with each job's ID in request order; each job shows its own
    options and its environment (the pack's, with its own --env laid over it)."""
    with _client(d) as alice:
        gate_job = alice.submit(_job_req(argv=_gated(d))).job_id
        before = _all_ids(d)
        env = {"SHARED": "from-the-pack", "MODE": "pack"}
        r = alice.submit_pack(env, [_job_req(queue="short"),
                                    _job_req(ntasks_min=2, name="two"),
                                    _job_req(name="arr[1-3]", env={"MODE": "own", "EXTRA": "x"}),
                                    _job_req(dependency=f"done({gate_job})")])
    answers = r["jobs"]
    assert [a["queue"] for a in answers] == ["short", "normal", "normal", "normal"]
    assert [a["array_size"] for a in answers] == [0, 0, 3, 0] and answers[2]["name"] == "arr"
    ids = [a["job_id"] for a in answers]
    assert len(set(ids)) == 4 and ids == sorted(ids)
    assert _all_ids(d) - before == set(ids)  # those four, no other
    first, two, arr, waiting = (_job(d, i) for i in ids)
    assert first["queue"] == "short" and first["env"] == env
    assert two["ntasks_min"] == 2 and two["name"] == "two"
    assert arr["array_spec"] == "arr[1-3]" and len(arr["elements"]) == 3
    assert arr["env"] == {"SHARED": "from-the-pack", "MODE": "own", "EXTRA": "x"}
    assert waiting["dependency"] == f"done({gate_job})"
    assert waiting["state"] == "PEND" and "Dependency" in waiting["elements"][0]["pend_reason"]["main"]
    with _client(d) as alice:
        events = alice.request("GET", f"/jobs/{ids[1]}/events").json()["events"]
    assert events[0]["kind"] == "SUBMIT" and events[0]["reason"] == "job 2 of a pack of 4"
    (d.top / "gate").touch()
    assert d.wait_state(ids[3], ("DONE",), user="alice")["state"] == "DONE"  # its dependency met, it ran


def test_a_pack_with_a_job_refused_is_refused_whole_and_names_the_job(d):
    """Job 2 of 3 names an unknown queue: the pack is refused with that submit's error,
    "job 2 of the pack: unknown queue ...", field jobs.1.queue, and no job of it exists.
    Likewise a job field the API does not know, a job that is no object, an empty pack, a
    pack over MAX_PACK_JOBS, a job whose --env takes its environment over MAX_ENV_VARS, and a
    bad name in the pack's own environment."""
    before = _all_ids(d)
    with _client(d) as alice:
        with pytest.raises(InvalidRequest) as ei:
            alice.submit_pack({"A": "1"}, [_job_req(), _job_req(queue="nosuch"), _job_req()])
        assert ei.value.status == 422 and ei.value.field == "jobs.1.queue", ei.value
        assert ei.value.message.startswith("job 2 of the pack: unknown queue 'nosuch'; queues: normal, short")
        with pytest.raises(InvalidRequest) as ei:  # the checks after the merge alike: -n over the cluster
            alice.submit_pack({}, [_job_req(), _job_req(), _job_req(ntasks_min=5)])
        assert ei.value.field == "jobs.2.ntasks_min"
        assert ei.value.message == "job 3 of the pack: -n 5 can never be satisfied: the cluster has 4 slots in all"
        with pytest.raises(InvalidRequest) as ei:
            alice.submit_pack({}, [_job_req(), _job_req(dependency="done(999999)")])
        assert ei.value.field == "jobs.1.dependency" and ei.value.message.startswith(
            "job 2 of the pack: dependency: job 999999 does not exist")
        with pytest.raises(InvalidRequest) as ei:  # pydantic's checks, reworded the same way
            alice.submit_pack({}, [_job_req(), _job_req(), _job_req(qeueu="short")])
        assert ei.value.field == "jobs.2.qeueu"
        assert ei.value.message.startswith("job 3 of the pack: unknown field 'qeueu' in the request")
        with pytest.raises(InvalidRequest) as ei:
            alice.submit_pack({}, [_job_req(), "true"])
        assert ei.value.field == "jobs.1" and ei.value.message.startswith("job 2 of the pack: a job must be a JSON "
                                                                          "object")
        with pytest.raises(InvalidRequest) as ei:
            alice.submit_pack({}, [])
        assert ei.value.field == "jobs" and "the pack holds no job; give at least one" in ei.value.message
        with pytest.raises(InvalidRequest) as ei:
            alice.submit_pack({}, [{}] * (MAX_PACK_JOBS + 1))
        assert ei.value.field == "jobs" and (f"the pack holds {MAX_PACK_JOBS + 1} jobs, more than the {MAX_PACK_JOBS}"
                                             f" a pack may hold (MAX_PACK_JOBS" in ei.value.message)
        full = {f"V{i}": "x" for i in range(MAX_ENV_VARS)}  # a job's environment holds MAX_ENV_VARS at most
        with pytest.raises(InvalidRequest) as ei:
            alice.submit_pack(full, [_job_req(env={"V1": "own"}), _job_req(env={"ONE_MORE": "y"})])
        assert ei.value.field == "jobs.1.env" and ei.value.message.startswith(
            f"job 2 of the pack: env: the pack's environment with this job's --env holds {MAX_ENV_VARS + 1} variables")
        with pytest.raises(InvalidRequest) as ei:
            alice.submit_pack({"BAD=NAME": "1"}, [_job_req()])
        assert ei.value.field == "env" and ei.value.message.startswith("--env 'BAD=NAME': names must be")
    assert _all_ids(d) == before  # nothing of any of them was recorded


def test_a_pack_body_may_pass_the_single_request_cap_up_to_its_own(d):
    """D-8: POST /jobs/pack reads bodies up to MAX_PACK_REQUEST_BYTES, above the MAX_REQUEST_BYTES
    of any other request: a 2 MiB pack is taken, a body declared over 64 MiB is refused 413
    naming MAX_PACK_REQUEST_BYTES before any of it is read. (The jobs wait on a job that
    never ends here, so they never run.)"""
    with _client(d) as alice:
        holder = alice.submit(_job_req(argv=["sh", "-c", f"while [ ! -e {d.top / 'never'} ]; do sleep 1; done"])).job_id
        jobs = [_job_req(name=f"{i}-{'x' * 3000}", dependency=f"done({holder})") for i in range(700)]
        assert len(json.dumps({"env": {}, "jobs": jobs})) > 2 * MAX_REQUEST_BYTES
        r = alice.submit_pack({}, jobs)
    assert len(r["jobs"]) == 700
    with socket.socket(socket.AF_UNIX) as s:  # headers only: the daemon answers from Content-Length
        s.settimeout(10)
        s.connect(str(d.top / "run" / "xced.sock"))
        s.sendall(f"POST /xce/v1/jobs/pack HTTP/1.1\r\nHost: xced\r\nContent-Type: application/json\r\n"
                  f"X-XCE-As-User: alice\r\nContent-Length: {MAX_PACK_REQUEST_BYTES + 1}\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    err = json.loads(body)["error"]
    assert err["code"] == "too_large" and "at most 64 MiB (MAX_PACK_REQUEST_BYTES" in err["message"], err


def test_one_key_for_the_pack_a_retry_gets_the_same_ids_even_after_a_restart(d):
    """JOB-10 for a pack: the same key and body give the first answer (the same IDs) and
    make no job, also when xced died right after the pack's commit, before its answer
    (XCE_TEST_FAULT=exit-after-commit:submit); the same key with another body is 409; a
    malformed key 422; another user's same key is another key."""
    key = "pack-e2e-" + os.urandom(8).hex()
    env, jobs = {"P": "1"}, [_job_req(name="k1"), _job_req(name="k2", queue="short")]
    before = _all_ids(d)
    d.stop()
    d.env = {**FAULTY_ENV, "XCE_TEST_FAULT": "exit-after-commit:submit"}
    d.start()
    with _client(d) as alice:
        with pytest.raises(DaemonUnreachable):  # committed, never answered
            alice.request("POST", "/jobs/pack", json={"env": env, "jobs": jobs}, headers={"Idempotency-Key": key})
    assert d.proc.wait(30) == 86
    d.proc = None
    d.env = dict(FAULTY_ENV)
    d.start()
    made = _all_ids(d) - before
    assert len(made) == 2  # the pack was committed whole before the daemon died
    with _client(d) as alice, _client(d, "bob") as bob:
        first = alice.submit_pack(env, jobs, key)
        assert sorted(a["job_id"] for a in first["jobs"]) == sorted(made)
        assert [a["name"] for a in first["jobs"]] == ["k1", "k2"]
        assert alice.submit_pack(env, jobs, key) == first
        assert _all_ids(d) - before == made  # the retries made nothing
        with pytest.raises(Conflict) as ei:
            alice.submit_pack(env, [*jobs, _job_req()], key)
        assert ei.value.status == 409 and ei.value.field == "Idempotency-Key"
        assert f"was used already, for the request that made job {min(made)}, with a different request" \
            in ei.value.message
        with pytest.raises(Conflict):  # a single submit with the pack's key is another request
            alice.submit(_job_req(), key=key)
        with pytest.raises(InvalidRequest) as ei:
            alice.request("POST", "/jobs/pack", json={"env": env, "jobs": jobs}, headers={"Idempotency-Key": "bad key"})
        assert ei.value.status == 422 and ei.value.field == "Idempotency-Key"
        other = bob.submit_pack(env, jobs, key)  # bob's key, not alice's
        assert not {a["job_id"] for a in other["jobs"]} & made


def test_the_same_pack_sent_twice_at_once_with_one_key_makes_one_set_of_jobs(d):
    """Two clients send the same pack with the same key at the same time (a client's retry
    racing its first try): the daemon checks a large pack in steps, answering others between
    them, yet both get the same answer and the jobs exist once (JOB-10). (The jobs wait on a
    job that never ends here, so they never run.)"""
    key = "pack-twin-" + os.urandom(8).hex()
    with _client(d) as alice:
        holder = alice.submit(_job_req(argv=["sh", "-c", f"while [ ! -e {d.top / 'never'} ]; do sleep 1; done"])).job_id
    jobs = [_job_req(name=f"t{i}", dependency=f"done({holder})") for i in range(3000)]
    before = _all_ids(d)
    answers: list = [None, None]

    def send(slot: int) -> None:
        with _client(d) as c:
            answers[slot] = c.submit_pack({"T": "1"}, jobs, key)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert answers[0] is not None and answers[0] == answers[1]
    assert _all_ids(d) - before == {a["job_id"] for a in answers[0]["jobs"]}
    assert len(answers[0]["jobs"]) == 3000


def test_a_pack_whose_commit_fails_leaves_nothing_and_the_daemon_goes_on(d):
    """The store refuses the commit (a full disk): the client gets the store's error (503
    store_unavailable, naming the cause), no job of the pack exists, and once the disk has
    room the same pack with the same key is recorded whole; the daemon never stopped."""
    fault = d.top / "state" / "FAULT"
    key = "pack-fault-" + os.urandom(8).hex()
    jobs = [_job_req(name=f"f{i}") for i in range(5)]
    before = _all_ids(d)
    fault.write_text("full")
    try:
        with _client(d) as alice:
            with pytest.raises(StoreUnavailable) as ei:
                alice.submit_pack({"F": "1"}, jobs, key)
        assert ei.value.status == 503 and "is full" in ei.value.message, ei.value.message
    finally:
        fault.unlink(missing_ok=True)
    assert _all_ids(d) == before
    with _client(d) as alice:
        r = alice.submit_pack({"F": "1"}, jobs, key)
    ids = {a["job_id"] for a in r["jobs"]}
    assert len(ids) == 5 and _all_ids(d) - before == ids
    assert d.proc.poll() is None
    assert _job(d, min(ids))["env"] == {"F": "1"}

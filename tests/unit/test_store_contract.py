"""The store contract (xced/store/base.py), run against every backend: what the controller
relies on. A PostgreSQL backend (HA-1) joins BACKENDS and must pass the same tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xced.api.errors import StoreUnavailable
from xced.store.base import Store
from xced.store.sqlite import ID_BLOCK, SqliteStore, _migrations


def _sqlite(path: Path) -> Store:
    return SqliteStore(path / "xce.db")


#: name -> a function that opens (or reopens) that backend's store in a directory
BACKENDS = {"sqlite": _sqlite}
#: for each backend, the code a child process runs to open the store in sys.argv[1] and
#: allocate one job ID, then die (os._exit) before any job with it is committed
CRASH_CHILD = {"sqlite": "from xced.store.sqlite import SqliteStore; s = SqliteStore(__import__('pathlib').Path("
                         "sys.argv[1]) / 'xce.db'); print(s.allocate_job_id(), flush=True); os._exit(9)"}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request, tmp_path):
    open_ = BACKENDS[request.param]
    stores: list = []

    def opener():
        s = open_(tmp_path)
        stores.append(s)
        return s

    opener.name = request.param
    opener.dir = tmp_path
    yield opener
    for s in stores:
        try:
            s.close()
        except Exception:  # noqa: BLE001 - closed already
            pass


def _submit(s: Store, jid: int, name: str = "j", n: int = 1) -> None:
    with s.tx(durable=True):
        s.insert_job(jid, name, "alice", "normal", 1.0, {"argv": ["true"], "env": {"K": "v"}}, range(n), "PEND")
        s.add_event(1.0, jid, None, "SUBMIT", None, "PEND", "user:alice", None, "submit-1")


def test_a_committed_submit_survives_a_reopen(backend):
    s = backend()
    jid = s.allocate_job_id()
    _submit(s, jid, n=2)
    with s.tx():
        s.update_element(jid, 1, state="RUN", alloc=[["h1", 2]], token_hash="ab", holds="")
    s.close()
    s = backend()
    assert [(r[0], r[1], r[2]) for r in s.load_jobs()] == [(jid, "j", "alice")]
    els = {r[1]: r for r in s.load_elements()}
    assert els[0][2] == "PEND" and els[1][2] == "RUN" and els[1][11] == "ab"
    assert [(r[3], r[8]) for r in s.events(jid)] == [("SUBMIT", "submit-1")]


def test_jobs_and_events_inserted_in_a_batch_are_those_inserted_one_by_one(backend):
    """insert_jobs and add_events (a pack's jobs, CLI-7) store what insert_job and add_event
    would, and roll back together with the rest of their transaction."""
    s = backend()
    a, b = s.allocate_job_ids(2)
    with s.tx(durable=True):
        s.insert_jobs([(a, "one", "alice", "normal", 1.0, {"argv": ["true"]}, [0]),
                       (b, "arr", "alice", "short", 1.0, '{"argv":["x"]}', range(1, 4))], "PEND")  # JSON already
        s.add_events([(1.0, a, None, "SUBMIT", None, "PEND", "user:alice", "job 1 of a pack of 2", "submit-1"),
                      (1.0, b, None, "SUBMIT", None, "PEND", "user:alice", "job 2 of a pack of 2", "submit-1")])
    c = s.allocate_job_id()
    with pytest.raises(RuntimeError):
        with s.tx(durable=True):
            s.insert_jobs([(c, "gone", "alice", "normal", 1.0, {}, [0])], "PEND")
            s.add_events([(1.0, c, None, "SUBMIT", None, "PEND", "user:alice", None, "submit-2")])
            raise RuntimeError("the pack's commit failed")
    s.close()
    s = backend()
    assert [(r[0], r[1], r[3]) for r in s.load_jobs()] == [(a, "one", "normal"), (b, "arr", "short")]
    assert [(r[0], r[1], r[2]) for r in s.load_elements()] == [(a, 0, "PEND"), (b, 1, "PEND"), (b, 2, "PEND"),
                                                              (b, 3, "PEND")]
    assert [json.loads(r[5]) for r in s.load_jobs()] == [{"argv": ["true"]}, {"argv": ["x"]}]
    assert [(r[3], r[7], r[8]) for r in s.events(b)] == [("SUBMIT", "job 2 of a pack of 2", "submit-1")]
    assert s.events(c) == []


def test_a_rolled_back_transaction_leaves_nothing(backend):
    s = backend()
    jid = s.allocate_job_id()
    with pytest.raises(RuntimeError):
        with s.tx(durable=True):
            s.insert_job(jid, "x", "alice", "normal", 1.0, {}, [0], "PEND")
            s.add_event(1.0, jid, None, "SUBMIT", None, "PEND", "user:alice", None)
            raise RuntimeError("the submit failed after its first writes")
    assert list(s.load_jobs()) == [] and list(s.load_elements()) == [] and s.events(jid) == []
    s.close()
    s = backend()
    assert list(s.load_jobs()) == []


def test_job_ids_are_never_reused_after_a_failed_commit(backend):
    s = backend()
    a = s.allocate_job_id()
    with pytest.raises(RuntimeError):
        with s.tx():
            s.insert_job(a, "x", "alice", "normal", 1.0, {}, [0], "PEND")
            raise RuntimeError("boom")
    b = s.allocate_job_id()
    assert b > a
    _submit(s, b)
    s.close()
    s = backend()
    assert s.allocate_job_id() > b  # nor after a reopen


def test_job_ids_are_never_reused_after_a_crash_between_allocating_and_committing(backend):
    """The process dies after allocating an ID (so nothing with it was committed): the next
    store never gives that ID again."""
    code = "import os, sys\n" + CRASH_CHILD[backend.name]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    given = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", code, str(backend.dir)], capture_output=True, text=True, env=env,
                           timeout=60)
        assert r.returncode == 9, r.stderr
        given.append(int(r.stdout))
    s = backend()
    later = [s.allocate_job_id() for _ in range(3)]
    assert given[0] < given[1] < later[0] < later[1] < later[2]
    assert not set(given) & set(later)


def test_ids_are_given_in_increasing_order_across_blocks(backend):
    s = backend()
    ids = [s.allocate_job_id() for _ in range(ID_BLOCK * 2 + 3)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_a_run_of_ids_is_consecutive_never_given_again_and_outlives_a_reopen(backend):
    """allocate_job_ids (a pack's jobs, CLI-7): n consecutive IDs above every ID given before,
    whether the current block holds n or not; single IDs and a reopen never give them again."""
    s = backend()
    a = s.allocate_job_id()
    small = s.allocate_job_ids(3)  # fits in the block
    big = s.allocate_job_ids(ID_BLOCK * 3)  # does not
    b = s.allocate_job_id()
    assert small == list(range(small[0], small[0] + 3)) and small[0] > a
    assert big == list(range(big[0], big[0] + ID_BLOCK * 3)) and big[0] > small[-1] and b > big[-1]
    with pytest.raises(ValueError):
        s.allocate_job_ids(0)
    s.close()
    s = backend()
    assert s.allocate_job_ids(2)[0] > b


def test_migrations_apply_once_each_in_order(backend):
    s = backend()
    names = [n for _, n, _ in _migrations()]
    last = max(v for v, _, _ in _migrations())
    assert names == sorted(names) and s.schema_version() == last
    s.close()
    s = backend()
    assert s.schema_version() == last


def test_an_environment_is_kept_once_under_its_digest_and_read_back(backend):
    """Issue 15: put_env inside a transaction keeps an environment once per digest (a second
    put of the same digest changes nothing); env() reads it after a reopen, None when unknown;
    a rolled-back put leaves nothing."""
    s = backend()
    with s.tx(durable=True):
        s.put_env("d1", '{"A":"1"}')
        s.put_env("d1", '{"A":"1"}')
    with pytest.raises(RuntimeError):
        with s.tx():
            s.put_env("d2", '{"B":"2"}')
            raise RuntimeError("the submit failed")
    s.close()
    s = backend()
    assert s.env("d1") == '{"A":"1"}' and s.env("d2") is None


def test_a_revocation_survives_a_reopen_and_only_an_explicit_removal_undoes_it(backend):
    """KEY-2, KEY-4: a revoked key stays revoked across restarts, whatever keys.yaml says;
    a second revocation keeps the first's time; un-revoking is its own call, with history."""
    s = backend()
    fp = "SHA256:" + "A" * 43
    with s.tx(durable=True):
        s.add_revocation(fp, 10.0, "admin:root", "host stolen")
        s.add_key_event(10.0, fp, "revoked", "admin:root", "host stolen")
    with s.tx():
        s.add_revocation(fp, 20.0, "admin:root", "again")
    s.close()
    s = backend()
    assert s.revocations() == {fp: (10.0, "admin:root", "host stolen")}
    with pytest.raises(RuntimeError):
        with s.tx():
            s.remove_revocation(fp)
            raise RuntimeError("a failed commit")
    assert fp in s.revocations()  # rolled back: still revoked
    with s.tx():
        assert s.remove_revocation(fp) and not s.remove_revocation(fp)
        s.add_key_event(30.0, fp, "unrevoked", "admin:root", "--unrevoke")
    assert s.revocations() == {}
    assert [e[2] for e in s.key_events(fp)] == ["revoked", "unrevoked"] and s.key_events("SHA256:none") == []


def test_an_enrolment_token_is_kept_as_its_digest_and_used_once(backend):
    """KEY-5: one-time; the second use is refused, even after a reopen."""
    s = backend()
    with s.tx(durable=True):
        s.add_token("sha256:ab", "worker", "h7", 100.0, 10.0, "admin:root")
    assert s.token("sha256:ab") == ("worker", "h7", 100.0, 10.0, "admin:root", None, None)
    assert s.token("sha256:other") is None
    with s.tx():
        assert s.use_token("sha256:ab", 20.0, "h7")
    s.close()
    s = backend()
    with s.tx():
        assert not s.use_token("sha256:ab", 30.0, "h8")
    assert s.token("sha256:ab")[5:] == (20.0, "h7")


def test_an_idempotency_key_commits_with_its_job_per_user_and_goes_by_age(backend):
    """JOB-10: a key is written in its job's transaction (a failed one leaves neither), is found
    after a reopen, is another key for another user, cannot be recorded twice for one user
    (nor can the job that came with the second), and goes when purged past its time."""
    s = backend()
    answer = {"job_id": 1, "name": None, "queue": "normal", "project": None, "array_size": 0, "app": None,
              "warnings": []}
    with pytest.raises(RuntimeError):
        with s.tx(durable=True):
            s.insert_job(5, "j", "alice", "normal", 1.0, {"argv": ["true"]}, range(1), "PEND")
            s.add_idempotency_key("alice", "k" * 32, 5, "h5", 1.0, {**answer, "job_id": 5})
            raise RuntimeError("a failed commit")
    assert s.idempotency_key("alice", "k" * 32) is None and not [r for r in s.load_jobs() if r[0] == 5]
    with s.tx(durable=True):
        s.insert_job(1, "j", "alice", "normal", 100.0, {"argv": ["true"]}, range(1), "PEND")
        s.add_idempotency_key("alice", "k" * 32, 1, "h1", 100.0, answer)
    s.close()
    s = backend()
    assert s.idempotency_key("alice", "k" * 32) == (1, "h1", 100.0, answer)
    assert s.idempotency_key("bob", "k" * 32) is None  # another user's same key is another key
    with s.tx():
        s.insert_job(2, "j", "bob", "normal", 200.0, {"argv": ["true"]}, range(1), "PEND")
        s.add_idempotency_key("bob", "k" * 32, 2, "h2", 200.0, {**answer, "job_id": 2})
    with pytest.raises(StoreUnavailable):  # the same user's key twice: the transaction fails whole
        with s.tx():
            s.insert_job(3, "j", "alice", "normal", 300.0, {"argv": ["true"]}, range(1), "PEND")
            s.add_idempotency_key("alice", "k" * 32, 3, "h3", 300.0, {**answer, "job_id": 3})
    assert [r[0] for r in s.load_jobs()] == [1, 2] and s.idempotency_key("alice", "k" * 32)[0] == 1
    with s.tx():
        assert s.purge_idempotency_keys(150.0) == 1  # alice's, recorded at 100
    assert s.idempotency_key("alice", "k" * 32) is None and s.idempotency_key("bob", "k" * 32)[0] == 2

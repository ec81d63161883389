"""The SQLite store's own parts (D-3, D-7): WAL mode, its migrations, its file modes, old plain
tokens hashed. What every backend must do is in test_store_contract.py."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat

import pytest

from xced.store.sqlite import SqliteStore, _migrations, token_hash


def test_wal_and_migrations(tmp_path):
    s = SqliteStore(tmp_path / "x.db")
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    numbers = [v for v, _, _ in _migrations()]
    assert s.schema_version() == max(numbers) >= 10
    s.close()
    s = SqliteStore(tmp_path / "x.db")  # reopening applies nothing twice
    assert s.db.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == len(numbers)
    assert s.db.execute("SELECT COUNT(*) FROM envs").fetchone()[0] == 0  # 0010
    cols = [r[1] for r in s.db.execute("PRAGMA table_info(elements)")]
    assert "token" in cols and "reserve" in cols and "token_hash" in cols  # 0002, 0003, 0004
    assert "containment" in cols  # 0009
    assert "stimulus" in [r[1] for r in s.db.execute("PRAGMA table_info(events)")]  # 0005


def test_store_file_is_the_daemons_alone(tmp_path):
    """D-7: the store holds every job's environment: made 0600 whatever the umask, its WAL too."""
    old = os.umask(0o022)
    try:
        s = SqliteStore(tmp_path / "state" / "x.db")
        with s.tx():
            s.insert_job(1, None, "u", "q", 1.0, {"env": {"SECRET": "s3"}}, [0], "PEND")
    finally:
        os.umask(old)
    for name in ("x.db", "x.db-wal", "x.db-shm"):
        assert stat.S_IMODE((tmp_path / "state" / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    s.close()


def test_plain_tokens_of_an_older_store_become_hashes(tmp_path):
    """D-7: a store written before launch tokens were hashed keeps no token in the clear after
    the next open; the hash is what a launch is checked against."""
    path = tmp_path / "x.db"
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied REAL);")
    for version, name, sql in _migrations()[:3]:
        db.executescript(sql)
        db.execute("INSERT INTO schema_migrations VALUES (?,?,0)", (version, name))
    db.execute("INSERT INTO jobs VALUES (1, NULL, 'u', 'q', 1.0, '{}')")
    db.execute("INSERT INTO elements (job_id, idx, state, token) VALUES (1, 0, 'RUN', 'cafe0123')")
    db.commit()
    db.close()
    s = SqliteStore(path)
    (row,) = s.db.execute("SELECT token, token_hash FROM elements").fetchall()
    assert row == (None, token_hash("cafe0123"))
    assert row[1] == hashlib.sha256(b"cafe0123").hexdigest()
    assert b"cafe0123" not in path.read_bytes() + (tmp_path / "x.db-wal").read_bytes()
    s.close()


def test_a_listing_with_text_utf8_cannot_encode_is_still_answered():
    """D-8: a job an older version stored with a lone surrogate must not fail every listing."""
    import json as _json

    from xced.server.convert import json_response

    body = json_response({"jobs": [{"argv": ["echo", "caf\udce9"]}, {"argv": ["true"]}]}).body
    assert _json.loads(body)["jobs"][1]["argv"] == ["true"]


def test_an_inline_environment_of_an_older_version_moves_to_the_envs_table(tmp_path):
    """Issue 15: a job an older version stored with its environment inline (in its spec and
    again in its exdata) keeps it once, in envs, under the digest its spec now names; two
    jobs with the same environment share the row."""
    import json

    from xced.model.spec import env_record

    s = SqliteStore(tmp_path / "x.db")
    env = {"HOME": "/home/a", "SECRET": "s3"}
    for jid in (1, 2):
        spec = {"argv": ["true"], "env": env, "run_as": "a", "ntasks_min": 1, "umask": 18,
                "exdata": {"env": {"job": env, "profile": {}}, "meta": {"k": 1}}}
        with s.tx():
            s.insert_job(jid, None, "a", "normal", 1.0, spec, [0], "PEND")
    with s.tx():  # a store of the older version had never moved them
        s.db.execute("DELETE FROM counters WHERE name='envs_moved'")
    s.close()
    s = SqliteStore(tmp_path / "x.db")
    digest, text = env_record(env)
    specs = [json.loads(r[0]) for r in s.db.execute("SELECT spec FROM jobs ORDER BY id")]
    assert all("env" not in sp and sp["env_digest"] == digest for sp in specs)
    assert all(sp["exdata"] == {"env": {"profile": {}}, "meta": {"k": 1}} for sp in specs)
    assert s.db.execute("SELECT COUNT(*) FROM envs").fetchone()[0] == 1
    assert json.loads(s.env(digest)) == env and s.env("0" * 32) is None
    s.close()


def test_a_read_of_a_broken_store_off_the_loop_is_a_typed_error(tmp_path):
    """D-8: the reads a purged job's show/hist make in a thread (read_job, read_jobs) raise
    StoreBusy/StoreUnavailable like every store operation, never a bare sqlite3 error (the
    API answers 503 naming the cause, never 500)."""
    from xced.api.errors import StoreBusy, StoreUnavailable

    s = SqliteStore(tmp_path / "x.db")
    with s.tx():
        s.insert_job(1, None, "a", "normal", 1.0, {"argv": ["true"], "run_as": "a", "ntasks_min": 1}, [0], "DONE")
    assert s.read_job(1)[0][0] == 1 and s.read_job(2) is None
    s.close()
    s = SqliteStore(tmp_path / "x.db")
    with open(tmp_path / "x.db", "r+b") as f:  # the disk garbles the file under the daemon
        f.write(b"garbage!" * 512)
    for read in (lambda: s.read_job(1), lambda: list(s.read_jobs(None, None))):
        with pytest.raises((StoreBusy, StoreUnavailable)):
            read()


def test_a_spec_and_a_keys_answer_read_back_as_they_were_written(tmp_path):
    """The submit path writes its records with orjson (record_text, issue 17 part 5): what
    the json module reads back is the record as given, a float written 1e-7 rather than
    1e-07 and non-ASCII text included; an integer over 64 bits, which orjson refuses, is
    written by the json module (a submit's exdata may hold one)."""
    import json

    s = SqliteStore(tmp_path / "x.db")
    spec = {"argv": ["echo", "café ☃"], "exdata": {"meta": {"f": 1e16, "small": 1e-7, "z": -0.0}},
            "env_digest": "d", "run_limit_s": None, "warnings": ["a\nb"]}
    big = {**spec, "exdata": {"meta": {"big": 2**70}}}
    answer = {"job_id": 7, "name": "ü", "queue": "normal", "array_size": 0}
    with s.tx(durable=True):
        s.insert_job(7, "ü", "alice", "normal", 1.5, spec, [0], "PEND")
        s.insert_job(8, None, "alice", "normal", 1.5, big, [0], "PEND")
        s.add_idempotency_key("alice", "k" * 16, 7, "h", 1.5, answer)
    rows = list(s.load_jobs())
    assert [json.loads(r[5]) for r in rows] == [spec, big]
    assert "café ☃" in rows[0][5] and "1e-7" in rows[0][5]  # orjson's text (json writes 1e-07)
    assert s.idempotency_key("alice", "k" * 16) == (7, "h", 1.5, answer)
    s.close()

"""SQLite store (D-3): WAL mode, numbered migrations applied once, rollback on error."""

from __future__ import annotations

import pytest

from xced.store.sqlite import SqliteStore


def test_wal_and_migrations(tmp_path):
    s = SqliteStore(tmp_path / "x.db")
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert s.schema_version() == 3
    s.close()
    s = SqliteStore(tmp_path / "x.db")  # reopening applies nothing twice
    assert s.db.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == 3
    cols = [r[1] for r in s.db.execute("PRAGMA table_info(elements)")]
    assert "token" in cols and "reserve" in cols  # 0002, 0003


def test_job_ids_and_rollback(tmp_path):
    s = SqliteStore(tmp_path / "x.db")
    with s.tx():
        a = s.next_job_id()
        s.insert_job(a, "n", "u", "q", 1.0, {"argv": ["true"]}, [1, 2, 3], "PEND")
    with pytest.raises(RuntimeError):
        with s.tx():
            b = s.next_job_id()
            s.insert_job(b, "m", "u", "q", 2.0, {}, [0], "PEND")
            raise RuntimeError("boom")
    with s.tx():
        c = s.next_job_id()
    assert (a, c) == (1, 2)  # the rolled-back ID is reused, nothing half-written
    assert [r[0] for r in s.load_jobs()] == [1]
    assert [(r[0], r[1], r[2]) for r in s.load_elements()] == [(1, 1, "PEND"), (1, 2, "PEND"), (1, 3, "PEND")]

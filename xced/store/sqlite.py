"""SQLite store (D-3): the Store protocol of xced.store.base, WAL mode, numbered migrations,
one writer (the controller).

The controller calls these methods from the event loop thread. Its writes go inside
`tx()`, one transaction (`BEGIN IMMEDIATE` ... `COMMIT`) per stimulus, so a submit is
acknowledged only after its commit and a failed transaction leaves nothing.

Durability: every commit survives a crash of xced (WAL). Transactions that acknowledge
something to a user (a submit) are `durable=True`: committed with `synchronous=FULL`, so
they survive a power loss too, together with everything committed before them. Other
transitions (dispatch, job end) commit with `synchronous=NORMAL`: after a power loss
they are rebuilt from the jobs' own records (the supervisor fsyncs status.json, JOB-8).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Iterable, Iterator

from xced.api.errors import StoreBusy, StoreUnavailable
from xced.store.base import record_text, store_failure, token_hash

_JOB_COLUMNS = "id, name, user, queue, submit_time, spec"
_ELEMENT_COLUMNS = ("job_id, idx, state, holds, start_time, end_time, exit_code, exit_signal, exit_reason, alloc, "
                    "action, token_hash, reserve, failures, containment, attempt")
#: the jobs a restart keeps (one parameter, the clean horizon): an element not finished, or
#: one that ended at or after the horizon (the indexes elements_state and elements_end)
_KEPT = ("SELECT job_id FROM elements WHERE state IN ('PEND','PSUSP','RUN','USUSP') "
         "UNION SELECT job_id FROM elements WHERE end_time >= ?")

#: job IDs made durable at a time (the contract in xced.store.base): a crash skips the rest of a block
ID_BLOCK = 64


class StoreError(RuntimeError):
    """The store could not be opened or migrated; the message says which file and why."""


def _migrations() -> list[tuple[int, str, str]]:
    out = []
    for entry in resources.files("xced.store").joinpath("migrations").iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            out.append((int(name[:4]), name[:-4], entry.read_text()))
    return sorted(out)


class SqliteStore:
    """The durable store of one TopDir, `<TopDir>/state/xce.db`: the Store protocol of
    xced.store.base over SQLite in WAL mode."""

    def __init__(self, path: Path, *, synchronous: str = "NORMAL") -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            # D-7: the store holds every job's environment; made 0600 before SQLite opens it,
            # and SQLite gives its -wal and -shm files the database file's mode
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        except FileExistsError:
            pass
        except OSError as e:
            raise StoreError(f"cannot create the store {path}: {e.strerror}") from e
        self.path = path
        try:
            # timeout 0: a lock held by another process fails at once (StoreBusy) rather than
            # blocking the event loop for sqlite3's default 5 s (D-8); callers retry
            self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=0)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(f"PRAGMA synchronous={synchronous}")
            self._sync = synchronous
            #: the level in force on the connection now: `tx` sets the one it needs only when
            #: it differs (a submit loop's durable transactions in a row set none)
            self._sync_now: str | None = synchronous
            self.db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
            self._hash_plain_tokens()
            self._move_envs()
        except sqlite3.Error as e:
            raise StoreError(f"cannot open the store {path}: {e}") from e
        except (StoreBusy, StoreUnavailable) as e:
            raise StoreError(f"cannot open the store {path}: {e.message}") from e
        self._ids = [0, 0]  # the block of job IDs being given: [next, end)
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []

    def _migrate(self) -> None:
        self.db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied REAL)")
        done = {r[0] for r in self.db.execute("SELECT version FROM schema_migrations")}
        for version, name, sql in _migrations():
            if version in done:
                continue
            with self.tx():
                for stmt in sql.split(";\n"):
                    if stmt.strip():
                        self.db.execute(stmt)
                self.db.execute("INSERT INTO schema_migrations VALUES (?,?,?)", (version, name, time.time()))

    def _hash_plain_tokens(self) -> None:
        """D-7: launch tokens an older version stored in the clear become their SHA-256; the
        plain column is cleared with secure_delete, so the old pages hold no copy."""
        rows = self.db.execute("SELECT job_id, idx, token FROM elements WHERE token IS NOT NULL").fetchall()
        if not rows:
            return
        self.db.execute("PRAGMA secure_delete=ON")
        with self.tx():
            self.db.executemany("UPDATE elements SET token_hash=?, token=NULL WHERE job_id=? AND idx=?",
                                ((token_hash(t) if t else None, j, i) for j, i, t in rows))
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the new pages overwrite the old ones now
        self.db.execute("PRAGMA secure_delete=OFF")

    def _move_envs(self) -> None:
        """Jobs an older version stored with their environment inline get it moved to the envs
        table (one row per distinct environment) and their spec names its digest instead."""
        from xced.model.spec import env_record

        if self.db.execute("SELECT 1 FROM counters WHERE name='envs_moved'").fetchone():
            return  # done once: a restart does not scan every job's spec again
        rows = self.db.execute("""SELECT id, spec FROM jobs WHERE instr(spec, '"env":') > 0""").fetchall()
        with self.tx():
            self.db.execute("INSERT OR IGNORE INTO counters (name, value) VALUES ('envs_moved', 1)")
            for jid, text in rows:
                spec = json.loads(text)
                if "env" not in spec:
                    continue
                digest, env_text = env_record(spec.pop("env") or {})
                spec["env_digest"] = digest
                exdata = spec.get("exdata")
                if isinstance(exdata, dict) and isinstance(exdata.get("env"), dict):
                    exdata["env"].pop("job", None)
                self.db.execute("INSERT OR IGNORE INTO envs VALUES (?,?)", (digest, env_text))
                self.db.execute("UPDATE jobs SET spec=? WHERE id=?", (json.dumps(spec, separators=(",", ":")), jid))

    def schema_version(self) -> int:
        return self.db.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] or 0

    @contextmanager
    def tx(self, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """One write transaction; commits on success, rolls back on any exception.
        `durable`: fsync at commit (synchronous=FULL) so it survives a power loss.

        Never waits for a lock: raises StoreBusy at once when another process holds it,
        StoreUnavailable (naming the cause) when SQLite refuses a write; in both cases the
        transaction is rolled back and nothing was written (D-8)."""
        try:
            self._set_sync("FULL" if durable else self._sync)
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise store_failure(e, self.path) from e
        try:
            yield self.db
        except BaseException as e:
            self._rollback()
            if isinstance(e, sqlite3.Error):
                raise store_failure(e, self.path) from e
            raise
        try:
            self.db.execute("COMMIT")
        except sqlite3.Error as e:
            self._rollback()
            raise store_failure(e, self.path) from e

    def _rollback(self) -> None:
        """Roll back the open transaction; SQLite may have rolled it back itself already
        (after SQLITE_FULL or an I/O error), which is not an error here."""
        try:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def _set_sync(self, level: str) -> None:
        """Put `level` ("FULL", "NORMAL") in force for the next transaction, unless it is: the
        level is set before each transaction as it needs it and left there, rather than set
        and restored around each durable one (two statements a submit fewer, issue 17 part
        5). A level that could not be set is unknown, so set again next time. Raises
        sqlite3.Error."""
        if self._sync_now != level:
            self._sync_now = None
            self.db.execute(f"PRAGMA synchronous={level}")
            self._sync_now = level

    def close(self) -> None:
        for conn in self._readers:
            try:
                conn.close()
            except sqlite3.Error:
                pass
        self.db.close()

    def check_writable(self) -> None:
        """Commit one small write (the count of daemon starts), as xced does before it serves
        anything (D-8): a store it could open but not write would otherwise fail the first
        submit. Raises StoreBusy or StoreUnavailable naming the cause."""
        with self.tx(durable=True):
            self.db.execute("INSERT INTO counters (name, value) VALUES ('daemon_starts', 1) "
                            "ON CONFLICT(name) DO UPDATE SET value = value + 1")

    # -------------------------------------------------------------- writes (inside tx)

    def allocate_job_id(self) -> int:
        """A job ID never given before nor again (called outside a transaction): from a block of
        ID_BLOCK IDs whose end is committed durably before the first is given, so a crash or a
        failed submit skips IDs rather than reusing them."""
        if self._ids[0] >= self._ids[1]:
            with self.tx(durable=True):
                (v,) = self.db.execute("SELECT value FROM counters WHERE name='next_job_id'").fetchone()
                self.db.execute("UPDATE counters SET value=? WHERE name='next_job_id'", (v + ID_BLOCK,))
            self._ids = [v, v + ID_BLOCK]
        jid = self._ids[0]
        self._ids[0] += 1
        return jid

    def allocate_job_ids(self, n: int) -> list[int]:
        """`n` job IDs (n >= 1, called outside a transaction), consecutive and increasing, never
        given before nor again (CLI-7: a pack's jobs): from the current block when it holds
        `n`, else from a new block of `n` + ID_BLOCK made durable at once (one commit for a
        pack of any size); the rest of the old block is skipped."""
        if n < 1:
            raise ValueError(f"allocate_job_ids({n}): n must be at least 1")
        if self._ids[1] - self._ids[0] < n:
            with self.tx(durable=True):
                (v,) = self.db.execute("SELECT value FROM counters WHERE name='next_job_id'").fetchone()
                self.db.execute("UPDATE counters SET value=? WHERE name='next_job_id'", (v + n + ID_BLOCK,))
            self._ids = [v, v + n + ID_BLOCK]
        first = self._ids[0]
        self._ids[0] += n
        return list(range(first, first + n))

    def insert_job(self, job_id: int, name: str | None, user: str, queue: str, submit_time: float, spec: dict,
                   indices: Iterable[int], state: str) -> None:
        """Inside a transaction: a new job's row, its spec (a record of xced.model.spec.to_record)
        as `record_text`, and one element row per index in `state`."""
        self.db.execute("INSERT INTO jobs VALUES (?,?,?,?,?,?)",
                        (job_id, name, user, queue, submit_time, record_text(spec)))
        self.db.executemany("INSERT INTO elements (job_id, idx, state) VALUES (?,?,?)",
                            ((job_id, i, state) for i in indices))

    def insert_jobs(self, jobs: Iterable[tuple[int, str | None, str, str, float, dict | str, Iterable[int]]],
                    state: str) -> None:
        """`insert_job` for many jobs at once (a pack's, CLI-7): rows (job_id, name, user, queue,
        submit_time, spec, indices), each element inserted in `state`; batched statements.
        A spec may come as its JSON text already (made before the transaction)."""
        rows, elements = [], []
        for jid, name, user, queue, t, spec, indices in jobs:
            rows.append((jid, name, user, queue, t, spec if isinstance(spec, str) else record_text(spec)))
            elements.extend((jid, i, state) for i in indices)
        self.db.executemany("INSERT INTO jobs VALUES (?,?,?,?,?,?)", rows)
        self.db.executemany("INSERT INTO elements (job_id, idx, state) VALUES (?,?,?)", elements)

    def add_events(self, events: Iterable[tuple]) -> None:
        """`add_event` for many rows at once: (time, job_id, idx, kind, from_state, to_state,
        actor, reason, stimulus)."""
        self.db.executemany("INSERT INTO events (time, job_id, idx, kind, from_state, to_state, actor, reason, "
                            "stimulus) VALUES (?,?,?,?,?,?,?,?,?)", events)

    def put_env(self, digest: str, env_json: str) -> None:
        """Keep an environment (canonical JSON) under its digest, once: a second job with the
        same environment shares the row."""
        self.db.execute("INSERT OR IGNORE INTO envs VALUES (?,?)", (digest, env_json))

    def update_spec(self, job_id: int, spec: dict) -> None:
        """Replace a job's stored spec (CFG-3: a pending job re-merged under a new config)."""
        self.db.execute("UPDATE jobs SET spec=? WHERE id=?", (json.dumps(spec, separators=(",", ":")), job_id))

    def update_element(self, job_id: int, idx: int, **fields: object) -> None:
        cols = []
        vals = []
        for k, v in fields.items():
            if k in ("alloc", "reserve"):
                v = json.dumps(v) if v is not None else None
            cols.append(f"{k}=?")
            vals.append(v)
        vals += [job_id, idx]
        self.db.execute(f"UPDATE elements SET {', '.join(cols)} WHERE job_id=? AND idx=?", vals)

    def add_event(self, t: float, job_id: int, idx: int | None, kind: str, from_state: str | None,
                  to_state: str | None, actor: str, reason: str | None, stimulus: str | None = None) -> None:
        """One history row (D-5); `stimulus` is the ID of what caused it."""
        self.db.execute("INSERT INTO events (time, job_id, idx, kind, from_state, to_state, actor, reason, stimulus) "
                        "VALUES (?,?,?,?,?,?,?,?,?)", (t, job_id, idx, kind, from_state, to_state, actor, reason, stimulus))

    # -------------------------------------------------------------- idempotency keys (JOB-10)

    def add_idempotency_key(self, user: str, key: str, job_id: int, body_hash: str, t: float, answer: dict) -> None:
        """Inside the submit's transaction: `user`'s `key` made job `job_id` at `t` (epoch s)
        from a body whose canonical hash is `body_hash`; `answer` is the SubmitResponse given.
        A key `user` has used already raises sqlite3.IntegrityError (the transaction rolls back)."""
        self.db.execute("INSERT INTO idempotency_keys (user, key, job_id, body_hash, time, answer) VALUES (?,?,?,?,?,?)",
                        (user, key, job_id, body_hash, t, record_text(answer)))

    def idempotency_key(self, user: str, key: str) -> tuple[int, str, float, dict] | None:
        """(job_id, body_hash, time, answer) of `user`'s `key`, or None: one indexed read, no
        keys held in memory. Raises StoreUnavailable when the file fails."""
        try:
            row = self.db.execute("SELECT job_id, body_hash, time, answer FROM idempotency_keys WHERE user=? AND key=?",
                                  (user, key)).fetchone()
        except sqlite3.Error as e:
            raise store_failure(e, self.path) from e
        return None if row is None else (row[0], row[1], row[2], json.loads(row[3]))

    def purge_idempotency_keys(self, before: float) -> int:
        """Inside a transaction: delete the keys recorded before `before` (epoch s), by the
        time index; how many went."""
        return self.db.execute("DELETE FROM idempotency_keys WHERE time < ?", (before,)).rowcount

    # -------------------------------------------------------------- host keys (inside tx)

    def add_revocation(self, fingerprint: str, t: float, actor: str, reason: str | None) -> None:
        """Record that key `fingerprint` is revoked (KEY-2, KEY-4); a second revocation keeps
        the first's time."""
        self.db.execute("INSERT OR IGNORE INTO revocations VALUES (?,?,?,?)", (fingerprint, t, actor, reason))

    def remove_revocation(self, fingerprint: str) -> bool:
        """Un-revoke key `fingerprint` (only `keys trust --unrevoke` does); whether it was revoked."""
        return self.db.execute("DELETE FROM revocations WHERE fingerprint=?", (fingerprint,)).rowcount > 0

    def add_key_event(self, t: float, fingerprint: str, kind: str, actor: str, reason: str | None) -> None:
        """One row of the keys' history: "trusted", "revoked", "unrevoked", "enrolled"."""
        self.db.execute("INSERT INTO key_events (time, fingerprint, kind, actor, reason) VALUES (?,?,?,?,?)",
                        (t, fingerprint, kind, actor, reason))

    def add_token(self, digest: str, role: str, host: str | None, expires: float, created: float, actor: str) -> None:
        """Keep an enrolment token's digest (KEY-5), never the token."""
        self.db.execute("INSERT INTO enrolment_tokens (digest, role, host, expires, created, actor) "
                        "VALUES (?,?,?,?,?,?)", (digest, role, host, expires, created, actor))

    def use_token(self, digest: str, t: float, by: str) -> bool:
        """Mark a token used by `by` at `t`: True the first time only (one-time, KEY-5)."""
        return self.db.execute("UPDATE enrolment_tokens SET used=?, used_by=? WHERE digest=? AND used IS NULL",
                               (t, by, digest)).rowcount == 1

    # -------------------------------------------------------------- reads

    def load_jobs(self, horizon: float | None = None) -> Iterator[tuple]:
        """Rows (id, name, user, queue, submit_time, spec_json) by ID: of every job, or with
        `horizon` (epoch seconds) of those with an unfinished element or one that ended at or
        after it (what a restart keeps in memory, LSF CLEAN_PERIOD)."""
        if horizon is None:
            return self.db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs ORDER BY id")
        return self.db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id IN ({_KEPT}) ORDER BY id",
                               (horizon,))

    def load_elements(self, horizon: float | None = None) -> Iterator[tuple]:
        """Rows (job_id, idx, state, holds, start, end, exit_code, exit_signal, exit_reason, alloc, action,
        token_hash, reserve, failures, containment, attempt) by job and index, of the jobs load_jobs(horizon) gives."""
        if horizon is None:
            return self.db.execute(f"SELECT {_ELEMENT_COLUMNS} FROM elements ORDER BY job_id, idx")
        return self.db.execute(f"SELECT {_ELEMENT_COLUMNS} FROM elements WHERE job_id IN ({_KEPT}) "
                               f"ORDER BY job_id, idx", (horizon,))

    # -------------------------------------------------------------- reads in a thread

    def _reader(self) -> sqlite3.Connection:
        """This thread's own read-only connection (reads run off the event loop, D-8; a
        connection is never shared with the loop's transactions)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False, timeout=0)
            self._local.conn = conn
            self._readers.append(conn)
        return conn

    def read_job(self, job_id: int) -> tuple[tuple, list[tuple]] | None:
        """(job row, element rows) of one job as load_jobs/load_elements give them, or None;
        safe from any thread. Raises StoreBusy or StoreUnavailable."""
        try:
            db = self._reader()
            row = db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id=?", (job_id,)).fetchone()
            if row is None:
                return None
            return row, db.execute(f"SELECT {_ELEMENT_COLUMNS} FROM elements WHERE job_id=? ORDER BY idx",
                                   (job_id,)).fetchall()
        except sqlite3.Error as e:
            raise store_failure(e, self.path) from e

    def read_jobs(self, user: str | None, queue: str | None) -> Iterator[tuple[tuple, list[tuple]]]:
        """(job row, element rows) of every job of `user` in `queue` (None: any), by ID; safe
        from any thread (consume it there). Raises StoreBusy or StoreUnavailable."""
        where, args = [], []
        if user is not None:
            where.append("user=?")
            args.append(user)
        if queue is not None:
            where.append("queue=?")
            args.append(queue)
        cond = f" WHERE {' AND '.join(where)}" if where else ""
        try:
            db = self._reader()
            for row in db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs{cond} ORDER BY id", args).fetchall():
                yield row, db.execute(f"SELECT {_ELEMENT_COLUMNS} FROM elements WHERE job_id=? ORDER BY idx",
                                      (row[0],)).fetchall()
        except sqlite3.Error as e:
            raise store_failure(e, self.path) from e

    def events(self, job_id: int) -> list[tuple]:
        """Rows (time, job_id, idx, kind, from_state, to_state, actor, reason, stimulus) of a job, in order."""
        try:
            return self.db.execute("SELECT time, job_id, idx, kind, from_state, to_state, actor, reason, stimulus "
                                   "FROM events WHERE job_id=? ORDER BY seq", (job_id,)).fetchall()
        except sqlite3.Error as e:  # a read fails only when the file does (I/O error): typed, never a 500
            raise store_failure(e, self.path) from e

    def env(self, digest: str) -> str | None:
        """The environment (canonical JSON) kept under `digest`, or None. One read by primary
        key; in WAL mode a read never waits for a writer's lock."""
        try:
            row = self.db.execute("SELECT env FROM envs WHERE digest=?", (digest,)).fetchone()
        except sqlite3.Error as e:
            raise store_failure(e, self.path) from e
        return row[0] if row else None

    def revocations(self) -> dict[str, tuple[float, str, str | None]]:
        """Every revoked fingerprint -> (time, actor, reason)."""
        return {r[0]: (r[1], r[2], r[3]) for r in self.db.execute("SELECT fingerprint, time, actor, reason FROM "
                                                                  "revocations")}

    def token(self, digest: str) -> tuple | None:
        """(role, host, expires, created, actor, used, used_by) of a token's digest, or None."""
        return self.db.execute("SELECT role, host, expires, created, actor, used, used_by FROM enrolment_tokens "
                               "WHERE digest=?", (digest,)).fetchone()

    def last_seen(self) -> dict[str, float]:
        """Fingerprint -> the time of its key's last `joined` event (last seen, KEY-4)."""
        return {r[0]: r[1] for r in self.db.execute("SELECT fingerprint, MAX(time) FROM key_events WHERE kind='joined' "
                                                    "GROUP BY fingerprint")}

    def add_host_event(self, t: float, host: str, kind: str, actor: str, reason: str | None) -> None:
        """One row of a host's history (CLI-4, SCHED-4): "open", "close", "drain" (an admin's),
        "drained", "lost", "rejoined" (the system's)."""
        self.db.execute("INSERT INTO host_events (time, host, kind, actor, reason) VALUES (?,?,?,?,?)",
                        (t, host, kind, actor, reason))

    def host_events(self, host: str | None = None) -> list[tuple]:
        """Rows (time, host, kind, actor, reason) of the hosts' history, in order."""
        if host is None:
            return self.db.execute("SELECT time, host, kind, actor, reason FROM host_events ORDER BY seq").fetchall()
        return self.db.execute("SELECT time, host, kind, actor, reason FROM host_events WHERE host=? ORDER BY seq",
                               (host,)).fetchall()

    def host_admin(self) -> dict[str, tuple]:
        """Host -> (time, kind, actor, reason, drained) of its latest admin event: kind
        "open", "close" or "drain"; `drained`: a `drained` event came after that drain (its
        last job ended; the host stays closed)."""
        rows = self.db.execute(
            "SELECT a.host, a.time, a.kind, a.actor, a.reason, EXISTS (SELECT 1 FROM host_events d WHERE "
            "d.host = a.host AND d.kind = 'drained' AND d.seq > a.seq) FROM host_events a WHERE a.seq IN "
            "(SELECT MAX(seq) FROM host_events WHERE kind IN ('open','close','drain') GROUP BY host)")
        return {r[0]: (r[1], r[2], r[3], r[4], bool(r[5])) for r in rows}

    def key_events(self, fingerprint: str | None = None) -> list[tuple]:
        """Rows (time, fingerprint, kind, actor, reason) of the keys' history, in order."""
        if fingerprint is None:
            return self.db.execute("SELECT time, fingerprint, kind, actor, reason FROM key_events ORDER BY seq").fetchall()
        return self.db.execute("SELECT time, fingerprint, kind, actor, reason FROM key_events WHERE fingerprint=? "
                               "ORDER BY seq", (fingerprint,)).fetchall()

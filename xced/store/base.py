"""The store the controller writes through (D-3, DESIGN rule 2): the protocol every backend
implements, and `token_hash`, the one stored form of a launch token (D-7).

SQLite (`xced.store.sqlite`) implements it today; a PostgreSQL backend for controller
failover (HA-1) comes later. `tests/unit/test_store_contract.py` is the contract suite that
every backend passes: what the controller relies on, stated as tests.

The contract:

- Writes happen inside `tx()`: one transaction that commits when the block ends and rolls
  back, leaving nothing, when it raises. `tx(durable=True)` survives a power loss (a submit
  is acknowledged only after such a commit).
- A store never waits for a lock (D-8: the controller runs on the event loop, which must
  not block): when another process holds it, `tx()` raises StoreBusy at once, and a write
  the backend refuses (disk full, read-only, I/O error) raises StoreUnavailable naming the
  cause (`store_failure`). Either way nothing was written, and the caller may retry.
- `allocate_job_id()` (outside a transaction) gives an ID that is never given again, even
  when the process dies before the job using it is committed, or that commit fails: IDs
  are allocated in blocks made durable first, so a crash skips the rest of a block rather
  than reusing it (LSF's job IDs likewise only grow). `allocate_job_ids(n)` gives `n`
  consecutive ones alike, with at most one durable commit (a pack's jobs, CLI-7).
- What a committed transaction wrote is there after the store is opened again.
- Migrations (`migrations/NNNN_name.sql`) apply once each, in order of their numbers.
- An idempotency key is unique per (user, key): recording one a user has used already fails
  the transaction (so the job with it is not inserted either); another user's same key is
  another key. A recorded key is found after a reopen until `purge_idempotency_keys` passes
  its time.

Rows: jobs (id, name, user, queue, submit_time, spec JSON naming its environment's digest);
envs (digest, env JSON), one per distinct environment; elements (job_id, idx, state,
holds, start, end, exit_code, exit_signal, exit_reason, alloc JSON, action, token_hash,
reserve JSON, failures, containment); events (time, job_id, idx, kind, from_state, to_state, actor, reason,
stimulus); host keys (KEY-2, KEY-5): revocations (fingerprint, time, actor, reason), which win
over keys.yaml, enrolment tokens kept as their digest (one-time: `use_token` is true once),
and key_events (time, fingerprint, kind, actor, reason); idempotency keys of submits (JOB-10):
(user, key) -> (job_id, body_hash, time, answer JSON), written in the transaction that inserts
the job, read one at a time (never all loaded), deleted by age. Times are epoch seconds.
"""

from __future__ import annotations

import hashlib
import os
from contextlib import AbstractContextManager
from typing import Iterable, Iterator, Protocol

from xced.api.errors import StoreBusy, StoreUnavailable

#: what a busy store answers (D-8); the request changed nothing
BUSY_MESSAGE = "store busy (locked by another process), retry"


def store_failure(exc: BaseException, path: str | os.PathLike[str]) -> StoreBusy | StoreUnavailable:
    """The typed error (D-8) for a failed store operation on `path`: StoreBusy when another
    process holds the lock; StoreUnavailable naming the cause otherwise ("the disk holding
    DIR is full", "the store PATH is read-only", "an I/O error on the store PATH"). `exc`
    is the backend's exception (sqlite3.Error's `sqlite_errorname`, or an OSError's errno)."""
    import errno as _errno

    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    where = os.path.dirname(os.fspath(path)) or "."
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in text:
        return StoreBusy(BUSY_MESSAGE)
    if name == "SQLITE_FULL" or getattr(exc, "errno", None) == _errno.ENOSPC or "disk is full" in text:
        return StoreUnavailable(f"the disk holding {where} is full: the store cannot record anything; free space "
                                f"there, then retry")
    if name.startswith("SQLITE_READONLY") or getattr(exc, "errno", None) in (_errno.EROFS, _errno.EACCES):
        return StoreUnavailable(f"the store {os.fspath(path)} is read-only ({text}); make it and {where} writable "
                                f"by the daemon's user, then retry")
    if name.startswith("SQLITE_IOERR") or "disk I/O error" in text:
        return StoreUnavailable(f"an I/O error on the store {os.fspath(path)} ({text}); check the disk holding "
                                f"{where}, then retry")
    return StoreUnavailable(f"the store {os.fspath(path)} failed: {text}")


def token_hash(token: str) -> str:
    """The stored form of a launch token (D-7): hex SHA-256. Tokens are 128 random bits, so a
    fast hash is enough; a store never holds a token itself."""
    return hashlib.sha256(token.encode()).hexdigest()


class Store(Protocol):
    """What the controller needs of a store; see the module docstring for the contract."""

    def tx(self, durable: bool = False) -> AbstractContextManager: ...
    def allocate_job_id(self) -> int: ...
    def allocate_job_ids(self, n: int) -> list[int]: ...
    def insert_job(self, job_id: int, name: str | None, user: str, queue: str, submit_time: float, spec: dict,
                   indices: Iterable[int], state: str) -> None: ...
    def insert_jobs(self, jobs: Iterable[tuple[int, str | None, str, str, float, dict | str, Iterable[int]]],
                    state: str) -> None: ...
    def update_spec(self, job_id: int, spec: dict) -> None: ...
    def put_env(self, digest: str, env_json: str) -> None: ...
    def env(self, digest: str) -> str | None: ...
    def update_element(self, job_id: int, idx: int, **fields: object) -> None: ...
    def add_event(self, t: float, job_id: int, idx: int | None, kind: str, from_state: str | None,
                  to_state: str | None, actor: str, reason: str | None, stimulus: str | None = None) -> None: ...
    def add_events(self, events: Iterable[tuple]) -> None: ...
    def load_jobs(self, horizon: float | None = None) -> Iterator[tuple]: ...
    def load_elements(self, horizon: float | None = None) -> Iterator[tuple]: ...
    def read_job(self, job_id: int) -> tuple[tuple, list[tuple]] | None: ...
    def read_jobs(self, user: str | None, queue: str | None) -> Iterator[tuple[tuple, list[tuple]]]: ...
    def events(self, job_id: int) -> list[tuple]: ...
    def add_idempotency_key(self, user: str, key: str, job_id: int, body_hash: str, t: float,
                            answer: dict) -> None: ...
    def idempotency_key(self, user: str, key: str) -> tuple[int, str, float, dict] | None: ...
    def purge_idempotency_keys(self, before: float) -> int: ...
    def add_revocation(self, fingerprint: str, t: float, actor: str, reason: str | None) -> None: ...
    def remove_revocation(self, fingerprint: str) -> bool: ...
    def add_key_event(self, t: float, fingerprint: str, kind: str, actor: str, reason: str | None) -> None: ...
    def add_token(self, digest: str, role: str, host: str | None, expires: float, created: float,
                  actor: str) -> None: ...
    def use_token(self, digest: str, t: float, by: str) -> bool: ...
    def revocations(self) -> dict[str, tuple[float, str, str | None]]: ...
    def token(self, digest: str) -> tuple | None: ...
    def key_events(self, fingerprint: str | None = None) -> list[tuple]: ...
    def add_host_event(self, t: float, host: str, kind: str, actor: str, reason: str | None) -> None: ...
    def host_events(self, host: str | None = None) -> list[tuple]: ...
    def host_admin(self) -> dict[str, tuple]: ...
    def last_seen(self) -> dict[str, float]: ...
    def schema_version(self) -> int: ...
    def check_writable(self) -> None: ...
    def close(self) -> None: ...


def record_text(record: dict) -> str:
    """A record the submit path stores (a job's spec, an idempotency key's answer) as compact
    JSON text, made by orjson: about ten times the json module's speed on a spec (issue 17
    part 5), and read back by `json.loads` to the same values. Floats are the one place the
    two write differently (1e-7 for 1e-07), and both read either form; a spec cannot hold
    an infinity or NaN, which orjson would write as null (the submit refuses them in exdata,
    the only free-form part: xced.api.models.SubmitRequest). What orjson refuses (an integer
    over 64 bits in exdata) is written by the json module, as before."""
    import orjson

    try:
        return orjson.dumps(record).decode()
    except TypeError:  # orjson.JSONEncodeError
        import json

        return json.dumps(record, separators=(",", ":"))

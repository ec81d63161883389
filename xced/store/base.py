"""The store the controller writes through (D-3, DESIGN rule 2): the protocol every backend
implements, and `token_hash`, the one stored form of a launch token (D-7).

SQLite (`xced.store.sqlite`) implements it today; a PostgreSQL backend for controller
failover (HA-1) comes later. `tests/unit/test_store_contract.py` is the contract suite that
every backend passes: what the controller relies on, stated as tests.

The contract:

- Writes happen inside `tx()`: one transaction that commits when the block ends and rolls
  back, leaving nothing, when it raises. `tx(durable=True)` survives a power loss (a submit
  is acknowledged only after such a commit).
- `allocate_job_id()` (outside a transaction) gives an ID that is never given again, even
  when the process dies before the job using it is committed, or that commit fails: IDs
  are allocated in blocks made durable first, so a crash skips the rest of a block rather
  than reusing it (LSF's job IDs likewise only grow).
- What a committed transaction wrote is there after the store is opened again.
- Migrations (`migrations/NNNN_name.sql`) apply once each, in order of their numbers.

Rows: jobs (id, name, user, queue, submit_time, spec JSON); elements (job_id, idx, state,
holds, start, end, exit_code, exit_signal, exit_reason, alloc JSON, action, token_hash,
reserve JSON); events (time, job_id, idx, kind, from_state, to_state, actor, reason,
stimulus). Times are epoch seconds.
"""

from __future__ import annotations

import hashlib
from contextlib import AbstractContextManager
from typing import Iterable, Iterator, Protocol


def token_hash(token: str) -> str:
    """The stored form of a launch token (D-7): hex SHA-256. Tokens are 128 random bits, so a
    fast hash is enough; a store never holds a token itself."""
    return hashlib.sha256(token.encode()).hexdigest()


class Store(Protocol):
    """What the controller needs of a store; see the module docstring for the contract."""

    def tx(self, durable: bool = False) -> AbstractContextManager: ...
    def allocate_job_id(self) -> int: ...
    def insert_job(self, job_id: int, name: str | None, user: str, queue: str, submit_time: float, spec: dict,
                   indices: Iterable[int], state: str) -> None: ...
    def update_spec(self, job_id: int, spec: dict) -> None: ...
    def update_element(self, job_id: int, idx: int, **fields: object) -> None: ...
    def add_event(self, t: float, job_id: int, idx: int | None, kind: str, from_state: str | None,
                  to_state: str | None, actor: str, reason: str | None, stimulus: str | None = None) -> None: ...
    def load_jobs(self) -> Iterator[tuple]: ...
    def load_elements(self) -> Iterator[tuple]: ...
    def events(self, job_id: int) -> list[tuple]: ...
    def schema_version(self) -> int: ...
    def close(self) -> None: ...

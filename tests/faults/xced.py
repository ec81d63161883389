"""`python -m tests.faults.xced ARGS...`: the real xced, whose store fails on demand (issue 11
tests, D-8). Only the store's connection is wrapped; everything else is the daemon as
shipped.

While the file `<TopDir>/state/FAULT` exists, SQLite's COMMIT fails the way a sick disk makes
it fail; the file holds `KIND [COUNT]`:

- KIND `full`: "database or disk is full" (SQLITE_FULL), `io`: "disk I/O error" (SQLITE_IOERR);
- COUNT: fail only the next COUNT commits (the file counts down, and goes at 0); without it,
  every commit fails until the test removes the file;
- AFTER (after COUNT): let AFTER commits succeed first (counted down too), so that a request
  of many commits fails in its middle.

The transaction is then rolled back by the store itself, as after a real failed commit.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from xced.store import sqlite as xsqlite

MESSAGES = {"full": "database or disk is full", "io": "disk I/O error"}


class FaultyConnection:
    """A sqlite3.Connection whose COMMIT fails while the fault file says so."""

    def __init__(self, real: sqlite3.Connection, fault: Path) -> None:
        self._real = real
        self._fault = fault

    def execute(self, sql: str, *args):
        if sql == "COMMIT" and self._fault.exists():
            words = self._fault.read_text().split()
            kind = words[0] if words else "io"
            if len(words) > 2 and int(words[2]) > 0:  # AFTER: this commit goes through
                self._fault.write_text(f"{kind} {words[1]} {int(words[2]) - 1}")
                return self._real.execute(sql, *args)
            if len(words) > 1:
                left = int(words[1]) - 1
                if left <= 0:
                    self._fault.unlink()
                else:
                    self._fault.write_text(f"{kind} {left}")
            raise sqlite3.OperationalError(MESSAGES.get(kind, kind))
        return self._real.execute(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._real, name)


_real_init = xsqlite.SqliteStore.__init__


def _init(self, path: Path, **kw) -> None:
    _real_init(self, path, **kw)
    self.db = FaultyConnection(self.db, Path(path).parent / "FAULT")


xsqlite.SqliteStore.__init__ = _init

if __name__ == "__main__":
    from xced.daemon import main

    sys.argv[0] = "xced"
    sys.exit(main())

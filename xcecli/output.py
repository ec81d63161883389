"""Output helpers (DESIGN rule 6): data to stdout, messages to stderr; `--json` prints the
API model's JSON; tables are Rich tables on a terminal and plain aligned columns in a pipe."""

from __future__ import annotations

import functools
import sys
import time
from typing import Sequence


def err(msg: str) -> None:
    """A message for the user on stderr."""
    print(msg, file=sys.stderr, flush=True)


def print_json(model) -> None:
    """Print a pydantic model (or a list of them) as JSON on stdout."""
    if isinstance(model, list):
        import json

        print(json.dumps([m.model_dump(mode="json") for m in model], indent=2))
    else:
        print(model.model_dump_json(indent=2))


#: Above this many rows a terminal gets plain columns too (Rich takes seconds for 10,000).
RICH_MAX_ROWS = 500


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A table on stdout: Rich on a terminal; in a pipe (or past RICH_MAX_ROWS rows),
    space-aligned columns with a header line, never truncated, so `awk` and `cut` can read it.
    A cell's characters that are not printable are shown escaped (xced.api.listing.one_line:
    a job's name or command never moves the cursor or starts a row of its own), and on a
    terminal its text is never read as Rich markup."""
    from xced.api.listing import one_line

    cells = [["-" if c is None else one_line(str(c)) for c in r] for r in rows]
    if sys.stdout.isatty() and len(cells) <= RICH_MAX_ROWS:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        t = Table(box=None, header_style="bold", pad_edge=False)
        for h in headers:
            t.add_column(h, overflow="fold")
        for r in cells:
            t.add_row(*map(escape, r))
        Console().print(t)
        return
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    out = [" ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    out += [" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    sys.stdout.write("\n".join(out) + "\n")


def fmt_time(t: float | None) -> str:
    """Epoch seconds -> 'Nov 29 16:02:03' (local time), '-' for None."""
    if t is None:
        return "-"
    return _fmt_second(int(t))


@functools.lru_cache(maxsize=4096)
def _fmt_second(t: int) -> str:
    return time.strftime("%b %d %H:%M:%S", time.localtime(t))


def fmt_duration(s: float | None) -> str:
    if s is None:
        return "-"
    s = int(s)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}"

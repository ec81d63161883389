"""LSF's built-in load indices (RES-7): their names, units and the direction that is better.

Pure: names and rules only. Workers measure them (xced.worker.load), the controller keeps
the latest report of each host (HostState.load), the scheduler's select and order read them
(xced.scheduler.placement), and `xcecli hosts --load` shows them.

The indices and their meaning follow LSF's "Load indices" table (IBM Spectrum LSF 10.1,
https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=resources-load-indices ; the same
table in the LSF 6.2 Administration Guide p. 209 and LSF 7.3 Administering Platform LSF
p. 239, http://38.142.81.21:8001/manual/hp/hp-xc-system-4-x-software/lsf-version-73-administering-platform-lsf/page-239.html):

    index  measures                                  units            direction  averaged over
    r15s   run queue length                          processes        increasing 15 s
    r1m    run queue length                          processes        increasing 1 min
    r15m   run queue length                          processes        increasing 15 min
    ut     CPU utilisation                           fraction 0..1    increasing 1 min
    pg     paging activity (pages in + out)          pages/s          increasing 1 min
    io     disk I/O                                  KB/s             increasing 1 min
    ls     logins (users, each counted once)         users            increasing
    it     idle time of the interactive users        minutes          decreasing
    tmp    free space in /tmp                        MB               decreasing
    swp    free swap space                           MB               decreasing

and the static resources ncpus (CPUs), maxmem (physical memory, MB), maxswp (swap, MB) and
maxtmp (the size of /tmp, MB). "Increasing" means the index grows with load, so lower is
better; the order string sorts each index best first by that direction and `-` reverses it
(LSF 6.2 Administration Guide p. 268, order string; docs/lsf-behaviour.md section 1).

Two differences from LSF's own LIM, both stated in docs/lsf-behaviour.md section 6: `ut` is
kept as a fraction (0..1, as LIM keeps it) but a select reads it in percent (0..100), as
LSF's select string page says ("For ut, specify the percentage CPU utilization as an integer
between 0-100", LSF 6.2 Administration Guide p. 265); and `mem`/`maxmem` in select and order
stay XCE's own memory accounting (free and declared MB, RES-2), not the operating system's
free memory: the worker's `maxmem` is shown, not used for placement.
"""

from __future__ import annotations

import math

__all__ = ["DYNAMIC", "INCREASING", "LOAD_INDICES", "NOT_PLACED", "STATIC", "check_load", "select_value"]

#: the dynamic load indices, in lsload's column order
DYNAMIC: tuple[str, ...] = ("r15s", "r1m", "r15m", "ut", "pg", "ls", "it", "tmp", "swp", "io")
#: the static resources a worker measures with them
STATIC: tuple[str, ...] = ("ncpus", "maxmem", "maxswp", "maxtmp")
#: every name a load report may carry
LOAD_INDICES: tuple[str, ...] = DYNAMIC + STATIC
#: indices that grow with load: lower is better (LSF's "increasing" direction)
INCREASING: frozenset[str] = frozenset({"r15s", "r1m", "r15m", "ut", "pg", "io", "ls"})
#: names a report carries that select and order do not take from it (XCE's own accounting wins)
NOT_PLACED: frozenset[str] = frozenset({"maxmem"})
#: the largest value a report may give for any index (a sanity bound, D-8)
MAX_VALUE = 1e15


def check_load(values: object) -> dict[str, float]:
    """A load report as a worker sent it, checked: {index: value} with names from
    LOAD_INDICES and finite values in [0, MAX_VALUE] (ut in [0, 1]).

    Raises:
        ValueError: naming the first bad name or value and what would be valid.
    """
    if not isinstance(values, dict):
        raise ValueError(f"a load report is a mapping of index to number, not {type(values).__name__}")
    out: dict[str, float] = {}
    for k, v in values.items():
        if k not in LOAD_INDICES:
            raise ValueError(f"unknown load index {k!r}; expected one of {', '.join(LOAD_INDICES)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= MAX_VALUE:
            raise ValueError(f"load index {k}: {v!r} is not a number from 0 to {MAX_VALUE:g}")
        if k == "ut" and v > 1:
            raise ValueError(f"load index ut: {v!r} is not a fraction from 0 to 1")
        out[k] = float(v)
    return out


def select_value(name: str, value: float) -> float:
    """The value a select or an order reads for load index `name`: `ut` in percent (LSF's
    select string page: "specify the percentage CPU utilization as an integer between
    0-100"), every other index as reported."""
    return value * 100.0 if name == "ut" else value

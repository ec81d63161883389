"""`bqueues` (CLI-8): LSF's bqueues on XCE: the queues, in LSF's default columns.

    bqueues [-w] [QUEUE ...]

    QUEUE_NAME      PRIO STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN  SUSP
    normal           30  Open:Active       -    -    -    -     3     1     2     0

From GET /queues (plain JSON). XCE's queues are always Open:Active (no dispatch windows
or queue closing yet); MAX is the queue's slot limit per job (max_tasks) as XCE has no
queue-wide slot limit, `-` when none; JL/U, JL/P, JL/H are `-` (no such limits in XCE).
NJOBS, PEND, RUN and SUSP count slots, as LSF's do ("NJOBS: The total number of slots for
jobs in the queue"): a running or suspended job the slots it holds, a pending one the
fewest it asks for (PSUSP counts as PEND, USUSP as SUSP). Queues are shown "in order of
priority", highest first (IBM bqueues.1), those of one priority in the config's order. `-w` is taken
(LSF's wide format) and changes nothing: no column is cut. A queue name XCE does not know:
`QUEUE: No such queue` on stderr (LSF's words), exit 255. Exit codes: 0, 255 (LSF_FAILED)
unknown queue or usage error, 3 daemon unreachable. Source:
https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bqueues.1.html (docs/lsf-behaviour.md
section 5). Start-up (CLI-7): no pydantic, rich or typer on this path.

`bqueues -l [QUEUE ...]` prints each queue in LSF's long form (long_form), as OpenLava's
bqueues.c, LSF's ancestor, lays it out: `QUEUE: NAME`, `  -- DESCRIPTION` (with "This is
the default queue."), `PARAMETERS/STATISTICS` with PRIO NICE STATUS MAX JL/U JL/P JL/H
NJOBS PEND RUN SSUSP USUSP RSV, then the queue's limits (RUNLIMIT in minutes, TASKLIMIT,
MEMLIMIT in MB, HOSTLIMIT_PER_JOB; `unlimited` where XCE's queue sets none), SCHEDULING
PARAMETERS (loadSched/loadStop: `-`, XCE queues have no load thresholds), SCHEDULING
POLICIES (BACKFILL when the queue backfills), USERS and HOSTS (`all`: XCE queues restrict
neither). NICE is 0 (XCE does not renice jobs), SSUSP and RSV 0 (XCE neither suspends a
job itself nor holds slots for a pending one; docs/lsf-behaviour.md section 5 [93]).
"""

from __future__ import annotations

import sys

from xced.api.listing import one_line
from xcecli.lsf.common import LsfUsage, named, read_options, run

SPEC = {"-w": ("wide", "flag"), "-l": ("long", "flag")}
#: LSF's load indices as bqueues -l's SCHEDULING PARAMETERS name them
LOAD_INDICES = ("r15s", "r1m", "r15m", "ut", "pg", "io", "ls", "it", "tmp", "swp", "mem")
HEADER = ("QUEUE_NAME", "PRIO", "STATUS", "MAX", "JL/U", "JL/P", "JL/H", "NJOBS", "PEND", "RUN", "SUSP")


def bqueues(argv: list[str]) -> int:
    """Run `bqueues ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xcecli.lsf.jobctl import client

    opts, names = read_options(argv, SPEC, interspersed=True)
    if opts.get("long") and opts.get("wide"):
        raise LsfUsage("-l and -w cannot be used together (bqueues [-w | -l]): -l prints every value in full")
    queues = client().request_retried("GET", "/queues").json()["queues"]
    shown, rc = named(queues, names, "queue")
    shown.sort(key=lambda q: -int(q["priority"]))  # LSF: "in order of priority", highest first (stable)
    if not shown:
        return rc
    if opts.get("long"):
        sys.stdout.write(long_form(shown))
        return rc
    rows = [[q["name"], str(q["priority"]), "Open:Active", str(q["max_tasks"]) if q.get("max_tasks") else "-",
             "-", "-", "-", str(q["njobs"]), str(q["pend"]), str(q["run"]), str(q["susp"])] for q in shown]
    w0 = max(15, *(len(r[0]) for r in rows))
    print(f"{HEADER[0]:<{w0}} {HEADER[1]:>4} {HEADER[2]:<15} {HEADER[3]:>4} {HEADER[4]:>4} {HEADER[5]:>4} "
          f"{HEADER[6]:>4} {HEADER[7]:>5} {HEADER[8]:>5} {HEADER[9]:>5} {HEADER[10]:>5}")
    for r in rows:
        print(f"{r[0]:<{w0}} {r[1]:>4} {r[2]:<15} {r[3]:>4} {r[4]:>4} {r[5]:>4} {r[6]:>4} {r[7]:>5} {r[8]:>5} "
              f"{r[9]:>5} {r[10]:>5}")
    return rc


def _limit(title: str, value: object) -> list[str]:
    return [f" {title}", f" {value}", ""]


def long_form(queues: list[dict]) -> str:
    """`bqueues -l`'s text for `queues` (GET /queues' dicts), one block per queue, blocks
    separated by a line of dashes (module docstring; OpenLava bqueues.c prtQueuesLong)."""
    defaults = sum(1 for q in queues if q.get("default"))
    blocks = []
    for q in queues:
        lines = [f"QUEUE: {q['name']}"]
        desc = f"  -- {one_line(q.get('description') or '') or 'No description provided.'}"
        if q.get("default"):
            desc += "  This is the default queue." if defaults == 1 else "  This is one of the default queues."
        lines += [desc, "", "PARAMETERS/STATISTICS",
                  "PRIO NICE STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN SSUSP USUSP  RSV",
                  f"{q['priority']:>4} {0:>4} {'Open:Active':<15} {q['max_tasks'] or '-':>4} {'-':>4} {'-':>4} "
                  f"{'-':>4} {q['njobs']:>5} {q['pend']:>5} {q['run']:>5} {0:>5} {q['susp']:>5} {0:>4}", ""]
        run_s = q.get("max_run_limit_s")
        lines += _limit("RUNLIMIT", f"{run_s / 60:.1f} min" if run_s else "unlimited")
        lines += _limit("TASKLIMIT", q.get("max_tasks") or "unlimited")
        lines += _limit("MEMLIMIT", f"{q['max_memory_mb']} M" if q.get("max_memory_mb") else "unlimited")
        lines += _limit("HOSTLIMIT_PER_JOB", q.get("host_limit") or "unlimited")
        lines += ["SCHEDULING PARAMETERS", "           " + "".join(f"{i:>6}" for i in LOAD_INDICES),
                  " loadSched " + "".join(f"{'-':>6}" for _ in LOAD_INDICES),
                  " loadStop  " + "".join(f"{'-':>6}" for _ in LOAD_INDICES), ""]
        if q.get("backfill"):
            lines += ["SCHEDULING POLICIES:  BACKFILL", ""]
        lines += ["USERS: all", "HOSTS:  all", ""]
        blocks.append("\n".join(lines))
    return "\n" + ("-" * 79 + "\n\n").join(b + "\n" for b in blocks)


def main() -> None:
    """The `bqueues` console script."""
    run("bqueues", lambda: bqueues(sys.argv[1:]))


if __name__ == "__main__":
    main()

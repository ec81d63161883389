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
"""

from __future__ import annotations

import sys

from xcecli.lsf.common import named, read_options, run

SPEC = {"-w": ("wide", "flag")}
HEADER = ("QUEUE_NAME", "PRIO", "STATUS", "MAX", "JL/U", "JL/P", "JL/H", "NJOBS", "PEND", "RUN", "SUSP")


def bqueues(argv: list[str]) -> int:
    """Run `bqueues ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xcecli.lsf.jobctl import client

    _, names = read_options(argv, SPEC, interspersed=True)
    queues = client().request_retried("GET", "/queues").json()["queues"]
    shown, rc = named(queues, names, "queue")
    shown.sort(key=lambda q: -int(q["priority"]))  # LSF: "in order of priority", highest first (stable)
    if not shown:
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


def main() -> None:
    """The `bqueues` console script."""
    run("bqueues", lambda: bqueues(sys.argv[1:]))


if __name__ == "__main__":
    main()

"""`bhosts` (CLI-8): LSF's bhosts on XCE: the hosts, in LSF's default columns.

    bhosts [-w | -l] [HOST ...]

    HOST_NAME          STATUS       JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV
    h1                 ok              -      4      2      2      0      0      0

From GET /hosts (plain JSON). STATUS is LSF's short word: `ok` (served and open), `closed`
(closed or drained by an admin, LSF's closed_Adm; `-w` and `-l` print closed_Adm), `unavail`
(no worker serves it). MAX is the host's slots; NJOBS the slots its jobs hold; USUSP the
slots its stopped elements hold (every element in USUSP, array elements too, from GET
/jobs/table), RUN the rest. SSUSP counts the slots of elements the system suspended, and
XCE never suspends a running job itself (no load thresholds, no preemption), so it is 0.
RSV counts slots held idle for a pending job (LSF's slot reservation); XCE's backfill
reservation (SCHED-1, EASY) reserves a start time for the blocked head of a queue, not
slots, so no slot is ever held and RSV is 0 (docs/lsf-behaviour.md section 5 [94]). JL/U
is `-` (no per-user host limit). An unknown host: `HOST: No such host` on stderr, exit 255.

`bhosts -l` prints each host in LSF's long form (long_form), as OpenLava's bhosts.c, LSF's
ancestor, lays it out: `HOST  NAME`, the columns STATUS CPUF JL/U MAX NJOBS RUN SSUSP USUSP
RSV DISPATCH_WINDOW (CPUF 1.00: XCE has no CPU factors; DISPATCH_WINDOW `-`: no windows),
` CURRENT LOAD USED FOR SCHEDULING:` with the Total and Reserved rows of the load indices
its worker last reported (mem: Total the memory left to schedule, Reserved what jobs
reserved; the other indices reserve nothing), ` LOAD THRESHOLD USED FOR SCHEDULING:` (`-`:
XCE hosts have no load thresholds) and, for a closed host, ` ADMIN ACTION COMMENT: "..."`.

Exit codes: 0, 255 (LSF_FAILED) unknown host or usage error, 3 daemon unreachable.
Sources: the statuses and columns of LSF's host status page,
https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/host_status_lsf.html, and
https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bhosts.1.html (docs/lsf-behaviour.md
section 5). Start-up (CLI-7): no pydantic, rich or typer on this path.
"""

from __future__ import annotations

import sys

from xcecli.lsf.common import LsfUsage, named, read_options, run

SPEC = {"-w": ("wide", "flag"), "-l": ("long", "flag")}
HEADER = ("HOST_NAME", "STATUS", "JL/U", "MAX", "NJOBS", "RUN", "SSUSP", "USUSP", "RSV")
#: LSF's load indices, in bhosts -l's order
LOAD_INDICES = ("r15s", "r1m", "r15m", "ut", "pg", "io", "ls", "it", "tmp", "swp", "mem")


def status(h: dict, wide: bool) -> str:
    """LSF's bhosts STATUS of a host of GET /hosts: ok, closed (closed_Adm with -w), unavail."""
    if h["status"] == "closed_Adm":
        return "closed_Adm" if wide else "closed"
    return h["status"]


def stopped_slots(c) -> dict[str, int]:
    """Slots held by stopped (USUSP) elements, per host: every user's, array elements
    included (GET /jobs/table, one row per element)."""
    from xcecli.lsf.bjobs import alloc

    body = c.request_retried("GET", "/jobs/table", params={
        "user": "all", "state": ["USUSP"], "elements": "true", "fields": "hosts state"}).json()
    names = body["fields"]
    out: dict[str, int] = {}
    for row in body["rows"]:
        r = dict(zip(names, row))
        if r["state"] == "USUSP":
            for host, n in alloc(r["hosts"]):
                out[host] = out.get(host, 0) + n
    return out


def _mb(v: float) -> str:
    """A load index in MB as lsload prints it: `512M`, `7.5G`, `1.2T`."""
    if v >= 1024 * 1024:
        return f"{v / 1024 / 1024:.1f}T"
    if v >= 1024:
        return f"{v / 1024:.1f}G"
    return f"{v:.0f}M"


def _index(name: str, v: float | None) -> str:
    """One load index's cell: `-` when not reported; ut in percent; tmp, swp, mem in MB."""
    if v is None:
        return "-"
    if name == "ut":
        return f"{v * 100:.0f}%"
    if name in ("tmp", "swp", "mem"):
        return _mb(v)
    if name in ("io", "ls", "it"):
        return f"{v:.0f}"
    return f"{v:.1f}"


def long_form(hosts: list[dict], stopped: dict[str, int]) -> str:
    """`bhosts -l`'s text for `hosts` (GET /hosts' dicts; `stopped`: stopped_slots())."""
    blocks = []
    for h in hosts:
        susp = stopped.get(h["name"], 0)
        used = h["slots_used"]
        load = h.get("load") or {}
        up = h["status"] != "unavail"
        total = {i: load.get(i) for i in LOAD_INDICES}
        total["mem"] = max(0, h["memory_mb"] - h["memory_used_mb"])
        reserved = {i: (0.0 if up and load.get(i) is not None else None) for i in LOAD_INDICES}
        reserved["mem"] = h["memory_used_mb"]
        lines = [f"HOST  {h['name']}",
                 "STATUS           CPUF  JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV DISPATCH_WINDOW",
                 f"{status(h, True):<15} {1.0:>5.2f} {'-':>5} {h['slots']:>6} {used:>6} {max(0, used - susp):>6} "
                 f"{0:>6} {susp:>6} {0:>6}      -", ""]
        if up:
            lines += [" CURRENT LOAD USED FOR SCHEDULING:",
                      "           " + "".join(f"{i:>7}" for i in LOAD_INDICES),
                      " Total     " + "".join(f"{_index(i, total[i]):>7}" for i in LOAD_INDICES),
                      " Reserved  " + "".join(f"{_index(i, reserved[i]):>7}" for i in LOAD_INDICES), ""]
        lines += [" LOAD THRESHOLD USED FOR SCHEDULING:",
                  "           " + "".join(f"{i:>7}" for i in LOAD_INDICES),
                  " loadSched " + "".join(f"{'-':>7}" for _ in LOAD_INDICES),
                  " loadStop  " + "".join(f"{'-':>7}" for _ in LOAD_INDICES), ""]
        if h.get("closed_reason") or h.get("closed_by"):
            lines += [f' ADMIN ACTION COMMENT: "{h.get("closed_reason") or ""}"'
                      + (f" (by {h['closed_by']})" if h.get("closed_by") else ""), ""]
        blocks.append("\n".join(lines))
    return "\n".join(b + "\n" for b in blocks)


def bhosts(argv: list[str]) -> int:
    """Run `bhosts ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xcecli.lsf.jobctl import client

    opts, names = read_options(argv, SPEC, interspersed=True)
    if opts.get("long") and opts.get("wide"):
        raise LsfUsage("-l and -w cannot be used together (bhosts [-w | -l]): -l prints every value in full")
    c = client()
    hosts = c.request_retried("GET", "/hosts").json()["hosts"]
    shown, rc = named(hosts, names, "host")
    if not shown:
        return rc
    stopped = stopped_slots(c)
    if opts.get("long"):
        sys.stdout.write(long_form(shown, stopped))
        return rc
    w0 = max(18, *(len(h["name"]) for h in shown))
    print(f"{HEADER[0]:<{w0}} {HEADER[1]:<11} " + " ".join(f"{x:>6}" for x in HEADER[2:]))
    for h in shown:
        susp = stopped.get(h["name"], 0)
        used = h["slots_used"]
        cells = ["-", h["slots"], used, max(0, used - susp), 0, susp, 0]
        print(f"{h['name']:<{w0}} {status(h, bool(opts.get('wide'))):<11} " + " ".join(f"{x:>6}" for x in cells))
    return rc


def main() -> None:
    """The `bhosts` console script."""
    run("bhosts", lambda: bhosts(sys.argv[1:]))


if __name__ == "__main__":
    main()

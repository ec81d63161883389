"""`bhosts` (CLI-8): LSF's bhosts on XCE: the hosts, in LSF's default columns.

    bhosts [-w] [HOST ...]

    HOST_NAME          STATUS       JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV
    h1                 ok              -      4      2      2      0      0      0

From GET /hosts (plain JSON). STATUS is LSF's short word: `ok` (served and open), `closed`
(closed or drained by an admin, LSF's closed_Adm; `-w` prints closed_Adm), `unavail` (no
worker serves it). MAX is the host's slots; NJOBS the slots its jobs hold; USUSP the slots
of its stopped jobs (from GET /jobs?state=USUSP), RUN the rest; SSUSP and RSV are 0 (XCE
never suspends a job itself, and reserves no slots ahead); JL/U is `-` (no per-user host
limit). An unknown host: `HOST: No such host` on stderr, exit 255.
Exit codes: 0, 255 (LSF_FAILED) unknown host or usage error, 3 daemon unreachable.
Sources: the statuses and columns of LSF's host status page,
https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/host_status_lsf.html, and
https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bhosts.1.html (docs/lsf-behaviour.md
section 5). Start-up (CLI-7): no pydantic, rich or typer on this path.
"""

from __future__ import annotations

import sys

from xcecli.lsf.common import named, read_options, run

SPEC = {"-w": ("wide", "flag")}
HEADER = ("HOST_NAME", "STATUS", "JL/U", "MAX", "NJOBS", "RUN", "SSUSP", "USUSP", "RSV")


def status(h: dict, wide: bool) -> str:
    """LSF's bhosts STATUS of a host of GET /hosts: ok, closed (closed_Adm with -w), unavail."""
    if h["status"] == "closed_Adm":
        return "closed_Adm" if wide else "closed"
    return h["status"]


def bhosts(argv: list[str]) -> int:
    """Run `bhosts ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xcecli.lsf.jobctl import client

    opts, names = read_options(argv, SPEC, interspersed=True)
    c = client()
    hosts = c.request_retried("GET", "/hosts").json()["hosts"]
    shown, rc = named(hosts, names, "host")
    if not shown:
        return rc
    stopped: dict[str, int] = {}
    for j in c.request_retried("GET", "/jobs", params={"user": "all", "state": "USUSP"}).json()["jobs"]:
        for e in j["elements"]:
            if e["state"] == "USUSP":
                for a in e.get("alloc") or []:
                    stopped[a["host"]] = stopped.get(a["host"], 0) + a["slots"]
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

"""`bstop` (CLI-8): LSF's bstop on XCE. Stops (suspends) jobs: a running job gets SIGSTOP and
is USUSP; a pending one is held, PSUSP (xcecli stop; D-5).

    bstop [-u USER | -u all] [-q QUEUE] [-m HOST] [-app PROFILE] [-J NAME]
          [ID ... | "ID[INDEX_LIST]" ... | 0]

`0` is every unfinished job of the caller; with the filters `-u`, `-q`, `-m`, `-app`, `-J`
every unfinished job they match, and without an ID the most recently submitted one, as
bkill chooses (xcecli.lsf.jobctl.targets; OpenLava's bstop and bresume share bkill's
reading of them, lsbatch/cmd/cmd.sig.c, docs/lsf-behaviour.md [80]). Neither an ID nor a
filter is a usage error. Prints LSF's
`Job <N> is being stopped` per job, and `Job <N>: REASON` on stderr for a job refused
(`No matching job found` for one the cluster does not know). Exit codes: 0 all acted on,
255 (LSF_FAILED) any refused or a usage error, 3 daemon unreachable. Source: IBM's LSF 10.1
command reference, https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bstop.1.html
(docs/lsf-behaviour.md section 5). Start-up (CLI-7): no pydantic, rich or typer on this path.
"""

from __future__ import annotations

import sys

from xcecli.lsf.common import read_options, run

SPEC = {"-J": ("name", "one"), "-u": ("user", "one"), "-q": ("queue", "one"), "-m": ("host", "one"),
        "-app": ("app", "one")}


def bstop(argv: list[str]) -> int:
    """Run `bstop ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xcecli.lsf.jobctl import act, client, targets

    opts, args = read_options(argv, SPEC, interspersed=True)
    c = client()
    return act("bstop", "stop", targets(c, args, opts.get("name"), user=opts.get("user"),  # type: ignore[arg-type]
                                           queue=opts.get("queue"), host=opts.get("host"),  # type: ignore[arg-type]
                                           app=opts.get("app")), c)  # type: ignore[arg-type]


def main() -> None:
    """The `bstop` console script."""
    run("bstop", lambda: bstop(sys.argv[1:]))


if __name__ == "__main__":
    main()

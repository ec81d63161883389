"""`badmin` (CLI-8): of LSF's badmin, the one subcommand any user may run and pipeline tools
read, `badmin showconf mbd`: the batch daemon's parameters in force.

    badmin showconf mbd

    MBD configuration at Fri Dec  4 21:13:53 2026
        CLEAN_PERIOD=3600
        JOB_TERMINATE_INTERVAL=10
        ...
        clean_period_s=3600
        ...

LSF's form: a first line "MBD configuration at DATE", then each parameter indented,
`NAME=VALUE` (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/badmin.1.html,
showconf; docs/lsf-behaviour.md section 5). First the parameters LSF names
(xcecli.lsf.params), then XCE's own settings by their config/xce.yaml names. Any other
subcommand (`badmin reconfig`, `hclose` ...) is refused, naming XCE's command for it
(`xceadmin build --apply`, `xceadmin hosts close`). Exit codes: 0, 255 (LSF_FAILED) usage
error or another subcommand, 3 daemon unreachable. Start-up (CLI-7): no pydantic, rich or
typer on this path.
"""

from __future__ import annotations

import sys
import time

from xcecli.lsf.common import LsfUsage, read_options, run

#: what XCE has for LSF's other badmin subcommands
INSTEAD = {"reconfig": "xceadmin build --apply", "mbdrestart": "xceadmin build --apply",
           "hclose": "xceadmin hosts close HOST", "hopen": "xceadmin hosts open HOST",
           "hhist": "xceadmin hosts hist HOST"}


def badmin(argv: list[str]) -> int:
    """Run `badmin ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xcecli.lsf.jobctl import client
    from xcecli.lsf.params import fetch, lsf_settings, xce_settings

    _, args = read_options(argv, {}, interspersed=True)
    if args[:1] != ["showconf"]:
        sub = args[0] if args else ""
        how = f"; XCE's is `{INSTEAD[sub]}`" if sub in INSTEAD else ""
        raise LsfUsage(f"{sub or '(none)'}: XCE's badmin has only `showconf mbd`{how}")
    if args[1:] != ["mbd"]:
        raise LsfUsage(f"showconf {' '.join(args[1:]) or '(none)'}: XCE's badmin shows `showconf mbd` only "
                       f"(the batch daemon's parameters)")
    p, queues = fetch(client())
    print(f"MBD configuration at {time.strftime('%a %b %d %H:%M:%S %Y')}")
    for k, v in [*lsf_settings(p, queues), *xce_settings(p)]:
        print(f"    {k}={v}")
    return 0


def main() -> None:
    """The `badmin` console script."""
    run("badmin", lambda: badmin(sys.argv[1:]))


if __name__ == "__main__":
    main()

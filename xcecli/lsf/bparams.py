"""`bparams` (CLI-8): LSF's bparams on XCE: the scheduling parameters in force.

    bparams          LSF's short form: the parameters a user looks for, one a line
    bparams -a|-l    every parameter: LSF's names (`CLEAN_PERIOD = 3600`) for the settings
                     LSF has, then every XCE setting of config/xce.yaml by its own name

Short form (LSF prints lines such as "Default Queues:  normal" and "Job Checking Interval:
15 seconds"):

    Default Queues:  normal
    Job Terminate Interval:  10 seconds
    Clean Period:  3600 seconds
    Max Job Array Size:  1000

From GET /params (the settings in force; xcecli.lsf.params has the table of LSF names).
Exit codes: 0, 255 (LSF_FAILED) usage error, 3 daemon unreachable. Source:
https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bparams.1.html and lsb.params
(docs/lsf-behaviour.md section 5). Start-up (CLI-7): no pydantic, rich or typer on this path.
"""

from __future__ import annotations

import sys

from xcecli.lsf.common import LsfUsage, read_options, run

SPEC = {"-a": ("all", "flag"), "-l": ("long", "flag")}


def bparams(argv: list[str]) -> int:
    """Run `bparams ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xcecli.lsf.jobctl import client
    from xcecli.lsf.params import fetch, lsf_settings, xce_settings

    opts, args = read_options(argv, SPEC, interspersed=True)
    if args:
        raise LsfUsage(f"{args[0]}: bparams takes no arguments")
    p, queues = fetch(client())
    lsf = dict(lsf_settings(p, queues))
    if opts.get("all") or opts.get("long"):
        print("System default parameters:")
        for k, v in lsf.items():
            print(f"    {k} = {v}")
        print("XCE settings (config/xce.yaml):")
        for k, v in xce_settings(p):
            print(f"    {k} = {v}")
        return 0
    print(f"Default Queues:  {lsf['DEFAULT_QUEUE']}")
    print(f"Job Terminate Interval:  {lsf['JOB_TERMINATE_INTERVAL']} seconds")
    print(f"Clean Period:  {lsf['CLEAN_PERIOD']} seconds")
    print(f"Max Job Array Size:  {lsf['MAX_JOB_ARRAY_SIZE']}")
    return 0


def main() -> None:
    """The `bparams` console script."""
    run("bparams", lambda: bparams(sys.argv[1:]))


if __name__ == "__main__":
    main()

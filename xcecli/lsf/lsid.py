"""`lsid` (CLI-8): LSF's lsid on XCE: the product and version, the cluster's name and its
master host (the machine the XCE controller runs on).

    XCE 0.1.0, LSF-compatible commands (CLI-8)

    My cluster name is testcluster
    My master name is node01

LSF prints its version and copyright, a blank line, then "My cluster name is X" and "My
master name is Y" (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/lsid.1.html;
docs/lsf-behaviour.md section 5). `-h` and `-V` are LSF's help and version, printed to stderr (xcecli.lsf.common). Exit codes: 0,
255 (LSF_FAILED) usage error, 3 daemon unreachable. Start-up (CLI-7): no pydantic, rich or
typer on this path.
"""

from __future__ import annotations

import sys

from xcecli.lsf.common import LsfUsage, read_options, run

SPEC: dict = {}  # -h and -V: xcecli.lsf.common.read_options


def lsid(argv: list[str]) -> int:
    """Run `lsid ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xcecli.lsf.jobctl import client

    _, args = read_options(argv, SPEC, interspersed=True)
    if args:
        raise LsfUsage(f"{args[0]}: lsid takes no arguments")
    p = client().request_retried("GET", "/params").json()
    print(f"XCE {p['version']}, LSF-compatible commands (CLI-8)")
    print()
    print(f"My cluster name is {p['cluster_name']}")
    print(f"My master name is {p['master_host']}")
    return 0


def main() -> None:
    """The `lsid` console script."""
    run("lsid", lambda: lsid(sys.argv[1:]))


if __name__ == "__main__":
    main()

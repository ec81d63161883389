"""What the LSF commands (xcecli.lsf) share: reading a command line with LSF's spellings,
LSF's usage errors, and the error funnel (CLI-8, CLI-1).

LSF's commands print a usage error and exit 255 (LSF's exit code for a failed command, as
`bjobs` exits 255 for a job it does not know: docs/lsf-behaviour.md section 5); XCE's own
exit codes (1 refused, 3 daemon unreachable) are kept for errors the daemon gives, through
the same funnel as xcecli (xced.api.funnel).
"""

from __future__ import annotations

import sys

from xcecli.fast import Decline, Spec, read

#: LSF's exit code for a command that failed (a usage error, a job it does not know)
LSF_FAILED = 255


class LsfUsage(Exception):
    """A command line an LSF command refuses: its message names what was wrong and what
    would be valid. Exit code LSF_FAILED (255)."""

    exit_code = LSF_FAILED


def read_options(argv: list[str], spec: Spec, *, interspersed: bool) -> tuple[dict[str, object], list[str]]:
    """xcecli.fast.read for an LSF command: (values by name, positional arguments). An
    option `spec` does not have, or one missing its value, raises LsfUsage naming it and
    listing the options the command takes. The word after an option that takes a value is
    its value even when it starts with '-' (`bsub -n -1`, `bkill -s -9`), as LSF reads it:
    the option's own check then says what is wrong with the value."""
    try:
        return read(argv, spec, interspersed=interspersed, dash_values=True)
    except Decline as e:
        bad = str(e)
        known = " ".join(sorted(spec))
        raise LsfUsage(f"{bad}: not an option this command takes, or its value is missing; "
                       f"the options are: {known}") from None


def run(prog: str, fn) -> None:
    """Run `fn()` (returns an exit code or None) as LSF command `prog` and exit: LsfUsage is
    `PROG: MESSAGE` on stderr and exit 255; every other error goes through xcecli's funnel
    (xced.api.funnel.exit_code_of). Never returns."""
    from xced.api.funnel import run_fast

    def guarded():
        try:
            return fn()
        except LsfUsage as e:
            print(f"{prog}: {e}", file=sys.stderr)
            return e.exit_code

    run_fast(guarded, prog)

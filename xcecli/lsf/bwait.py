"""`bwait` (CLI-8): LSF's bwait on XCE: wait until a dependency expression holds.

    bwait -w "EXPR" [-t MINUTES]

EXPR is XCE's `-w` dependency grammar, LSF's (xced.model.deps: `done(ID)`, `ended(ID)`,
`exit(ID[,[op] code])`, `started(ID)`, a bare ID meaning done, `&&`, `||`, `!`,
parentheses, `ID[INDEX]` for an element, a whole array meeting a condition when every
element does; docs/lsf-behaviour.md section 5 [41, 42]). bwait asks the daemon for the
jobs EXPR names (GET /jobs/ID, plain JSON) every 0.5 s to 2 s and evaluates EXPR with the
very code the scheduler uses for `bsub -w`.

Exit codes: 0 once EXPR holds; 255 (LSF_FAILED) when EXPR can never hold any more (a job
it needs ended the other way, or does not exist; the line on stderr says which, as `xcecli
why` does), when `-t MINUTES` passes first, or for a malformed EXPR (the error points at
the column); 3 daemon unreachable for longer than XCE_CONNECT_TIMEOUT. Source:
https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bwait.1.html (docs/lsf-behaviour.md
section 5). Start-up (CLI-7): no pydantic, rich or typer on this path.
"""

from __future__ import annotations

import sys
import time

from xcecli.lsf.common import LSF_FAILED, LsfUsage, read_options, run

SPEC = {"-w": ("expr", "one"), "-t": ("timeout", "one")}
#: the first and the longest pause between two evaluations, seconds
POLL_FIRST_S, POLL_MAX_S = 0.5, 2.0


def lookup_of(c):
    """A xced.model.deps Lookup over the daemon's answers: (job, index) -> RefState (a plain
    job or an element), the elements' RefStates (a whole array), or None (no such job).
    Each job is asked for once per evaluation (`fresh()` forgets what was read)."""
    from xced.api.errors import NotFound
    from xced.model.deps import RefState

    seen: dict[int, dict | None] = {}

    def job(jid: int) -> dict | None:
        if jid not in seen:
            try:
                seen[jid] = c.request_retried("GET", f"/jobs/{jid}").json()
            except NotFound:
                seen[jid] = None
        return seen[jid]

    def lookup(jid: int, index: int | None):
        j = job(jid)
        if j is None:
            return None
        els = [RefState(e["state"], e.get("exit_code"), e["index"]) for e in j["elements"]]
        if index is None:
            return els if j.get("array_spec") else (els[0] if els else None)
        return next((r for r in els if r.index == index), None)

    lookup.fresh = seen.clear  # type: ignore[attr-defined]
    return lookup


def bwait(argv: list[str]) -> int:
    """Run `bwait ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xced.model.deps import DependencyError, Verdict, evaluate, explain, parse_dependency
    from xcecli.lsf.jobctl import client

    opts, args = read_options(argv, SPEC, interspersed=True)
    if args:
        raise LsfUsage(f"{args[0]}: bwait takes no arguments; give the condition with -w \"done(ID)\"")
    text = opts.get("expr")
    if not isinstance(text, str) or not text.strip():
        raise LsfUsage("-w \"EXPR\" is required: the condition to wait for, e.g. -w \"done(12)\"")
    try:
        expr = parse_dependency(text)
    except DependencyError as e:
        raise LsfUsage(f"-w {text!r}: {e}") from None
    deadline = None
    if opts.get("timeout") is not None:
        try:
            minutes = float(str(opts["timeout"]))
            if not 0 < minutes <= 525600:
                raise ValueError
        except ValueError:
            raise LsfUsage(f"-t {opts['timeout']}: expected the minutes to wait, a number above 0 and at most "
                           f"525600 (a year)") from None
        deadline = time.monotonic() + minutes * 60
    c = client()
    lookup = lookup_of(c)
    pause = POLL_FIRST_S
    while True:
        lookup.fresh()  # type: ignore[attr-defined]
        v = evaluate(expr, lookup)
        if v is Verdict.MET:
            return 0
        if v is Verdict.NEVER:
            print(f"bwait: the wait condition can never be satisfied: {explain(expr, lookup)}", file=sys.stderr)
            return LSF_FAILED
        if deadline is not None and time.monotonic() >= deadline:
            print(f"bwait: wait condition timed out after {opts['timeout']} minutes: {explain(expr, lookup)}",
                  file=sys.stderr)
            return LSF_FAILED
        step = pause if deadline is None else max(0.0, min(pause, deadline - time.monotonic()))
        time.sleep(step)
        pause = min(pause * 1.5, POLL_MAX_S)


def main() -> None:
    """The `bwait` console script."""
    run("bwait", lambda: bwait(sys.argv[1:]))


if __name__ == "__main__":
    main()

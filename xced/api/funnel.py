"""The CLIs' one error funnel (DESIGN rule 6, CLI-1): typed errors and usage errors become
one line on stderr and the documented exit code; a traceback only with XCE_DEBUG=1.

Exit codes: 0 ok, 1 refused (XceError other than unreachable, unexpected errors),
2 usage error (click/Typer), 3 daemon unreachable, 130 interrupted.
"""

from __future__ import annotations

import os
import sys

from xced.constants import ENV_DEBUG


def _one_line(msg: str) -> str:
    """An error message on one line, its other control characters escaped (a refusal that
    quotes the input, `-R $'select[type==\\e[2J]'`, never drives the terminal)."""
    from xced.api.listing import one_line

    return one_line(" ".join(msg.split("\n")).strip())


def run_app(app, prog: str) -> None:
    """Run a Typer `app` under the funnel and exit with its code. Never returns. A stdout
    that is not UTF-8 escapes what it cannot encode, as in `run_fast`."""
    _escape_what_stdout_cannot_encode()
    try:  # Typer >= 0.20 vendors click as typer._click
        from typer._click import exceptions as cx
    except ImportError:  # pragma: no cover - older Typer uses click itself
        from click import exceptions as cx

    import typer

    debug = _debug()
    try:
        rv = app(standalone_mode=False, prog_name=prog)
        sys.stdout.flush()  # here, where a closed pipe is the funnel's (silent, 0), not at exit
        sys.exit(rv if isinstance(rv, int) else 0)
    except cx.UsageError as e:
        msg = e.format_message().strip()
        if not msg:  # no arguments: the help was printed already
            sys.exit(e.exit_code)
        hint = ""
        if e.ctx is not None:
            hint = f" (see '{e.ctx.command_path} -h')"
        print(f"{prog}: error: {_one_line(msg)}{hint}", file=sys.stderr)
        sys.exit(e.exit_code)
    except cx.ClickException as e:
        print(f"{prog}: error: {e.format_message()}", file=sys.stderr)
        sys.exit(e.exit_code)
    except typer.Abort:
        print(f"{prog}: aborted", file=sys.stderr)
        sys.exit(1)
    except SystemExit as e:
        # click ends a command whose reader went away (EPIPE) with exit 1, having wrapped
        # stdout in its PacifyFlushWrapper: the funnel's rule for a closed pipe is 0, silent
        if e.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
            sys.exit(0)
        raise
    except BaseException as e:
        if debug and isinstance(e, Exception) and not isinstance(e, (BrokenPipeError, EOFError)):
            raise
        sys.exit(exit_code_of(e, prog))


def _debug() -> bool:
    return os.environ.get(ENV_DEBUG, "") not in ("", "0")


def exit_code_of(e: BaseException, prog: str) -> int:
    """The one mapping of an error that ended a command to what the user sees (DESIGN rule
    6): a typed API error (xced.api.errors.XceError) is one line `PROG: error: MESSAGE` on
    stderr and its exit code (1 refused, 3 unreachable); ^C or EOF is "interrupted", 130; a
    closed stdout (BrokenPipeError) is silent, 0, as `head` expects; anything else is a bug,
    one line naming it and exit 1. Returns the exit code; prints the line."""
    from xced.api.errors import XceError

    if isinstance(e, XceError):
        print(f"{prog}: error: {_one_line(e.message)}", file=sys.stderr)
        return e.exit_code
    if isinstance(e, (KeyboardInterrupt, EOFError)):
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    if isinstance(e, BrokenPipeError):
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    print(f"{prog}: error: {type(e).__name__}: {_one_line(str(e))} (XCE_DEBUG=1 shows the traceback)",
          file=sys.stderr)
    return 1


def stdout_is_utf8() -> bool:
    """Whether stdout's encoding is UTF-8 (`utf-8`, `UTF8`, `utf_8` alike)."""
    return (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "").replace("_", "") == "utf8"


def _escape_what_stdout_cannot_encode() -> None:
    """Make stdout write characters its encoding cannot hold as backslash escapes (errors
    "backslashreplace"), when that encoding is not UTF-8; a no-op otherwise."""
    if not stdout_is_utf8() and hasattr(sys.stdout, "reconfigure"):
        try:
            sys.stdout.reconfigure(errors="backslashreplace")
        except (ValueError, OSError):  # a stream that cannot be reconfigured is left as it is
            pass


def run_fast(fn, prog: str, passthrough: tuple[type[BaseException], ...] = ()):
    """Run `fn()` (a command of the start-up fast path, xcecli.fast; CLI-7) under the same
    mapping as `run_app` (`exit_code_of`), then flush stdout and stderr and end the process
    with `os._exit`: interpreter shutdown is skipped, which nothing here needs (no atexit
    handler, no open file but the two streams). `fn` returns None (exit 0) or an int exit
    code, or raises SystemExit. Exceptions of the `passthrough` types are raised to the caller
    as they are (the fast path declining); otherwise never returns.

    A stdout whose encoding is not UTF-8 (PYTHONIOENCODING=ascii, a Latin-1 locale) writes
    what it cannot encode as a backslash escape, as Python's stderr does, rather than
    failing the listing: one user's job named with an emoji must not break `bjobs` for
    another whose locale is not UTF-8."""
    _escape_what_stdout_cannot_encode()
    try:
        rv = fn()
        code = rv if isinstance(rv, int) else 0
    except passthrough:
        raise
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
    except BaseException as e:
        if _debug() and isinstance(e, Exception) and not isinstance(e, (BrokenPipeError, EOFError)):
            raise
        code = exit_code_of(e, prog)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
    os._exit(code)

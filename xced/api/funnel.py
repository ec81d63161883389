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
    return " ".join(msg.split("\n")).strip()


def run_app(app, prog: str) -> None:
    """Run a Typer `app` under the funnel and exit with its code. Never returns."""
    try:  # Typer >= 0.20 vendors click as typer._click
        from typer._click import exceptions as cx
    except ImportError:  # pragma: no cover - older Typer uses click itself
        from click import exceptions as cx

    import typer

    from xced.api.errors import XceError

    debug = os.environ.get(ENV_DEBUG, "") not in ("", "0")
    try:
        rv = app(standalone_mode=False, prog_name=prog)
        sys.exit(rv if isinstance(rv, int) else 0)
    except XceError as e:
        if debug:
            raise
        print(f"{prog}: error: {_one_line(e.message)}", file=sys.stderr)
        sys.exit(e.exit_code)
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
    except (KeyboardInterrupt, EOFError):
        print(f"{prog}: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        sys.exit(0)
    except SystemExit:
        raise
    except Exception as e:  # a bug: still one line unless debugging
        if debug:
            raise
        print(f"{prog}: error: {type(e).__name__}: {_one_line(str(e))} (XCE_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        sys.exit(1)

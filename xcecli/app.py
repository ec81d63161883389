"""`xcecli`: the user's command line (CLI-1 to CLI-3, CLI-6).

Exit codes (CLI-1): 0 ok; 1 the request was refused (bad input, permission, unknown
job); 2 usage error; 3 the daemon could not be reached. `submit -K` passes the job's
own exit code through, as `bsub -K` does (126 when the job was killed while pending).

Every error passes through one funnel (`main`) that prints one line on stderr and exits
with the error's code; a traceback only with XCE_DEBUG=1 (DESIGN rule 6).
"""

from __future__ import annotations

import typer

from xced.version import print_version_and_exit
from xcecli.context import Ctx

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Submit and manage XCE jobs.\n\n"
                       "xcecli talks to the xced of a TopDir (--topdir, else XCE_TOPDIR, else the personal cluster in "
                       "your data directory, which `xced` makes on its first start) over its Unix socket. The "
                       "commands follow LSF's: submit is bsub, jobs is bjobs, show is bjobs -l, kill is bkill. Data "
                       "goes to stdout and messages to stderr; --json prints the API's own models.")


@app.callback()
def _root(
    ctx: typer.Context,
    topdir: str = typer.Option(None, "--topdir", metavar="DIR", help="TopDir of the cluster (default: XCE_TOPDIR, else the personal cluster)"),
    as_user: str = typer.Option(None, "--as-user", metavar="USER", help="act as this user (test mode only; env XCE_TEST_USER)"),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=print_version_and_exit("xcecli"),
                                 help="print the version (the package's) and exit"),
) -> None:
    ctx.obj = Ctx(topdir=topdir, as_user=as_user)


from xcecli.commands import cluster, control, jobs, launch, presets, projects, submit  # noqa: E402

submit.register(app)
jobs.register(app)
control.register(app)
cluster.register(app)
cluster.register_api(app)
cluster.register_apps(app)
launch.register(app)
projects.register(app)
presets.register(app)


def main() -> None:
    """Entry point: run the app through the one error funnel (xced.api.funnel)."""
    import os

    import sys

    from xced.api.funnel import run_app

    if sys.stdout is None:  # started with stdout closed (`xcecli show 1 >&-`): say so, as cat does
        print("xcecli: error: standard output is closed (write error: Bad file descriptor)", file=sys.stderr)
        raise SystemExit(1)
    # Typer builds pydantic adapters for its parameters; pydantic's plugin discovery scans
    # every installed distribution's entry points (~17 ms of each call here, CLI-6).
    if "PYDANTIC_DISABLE_PLUGINS" not in os.environ:
        os.environ["PYDANTIC_DISABLE_PLUGINS"] = "1"
        os.environ["XCE_CLI_SET_PYDANTIC"] = "1"  # ours, not the user's: submit leaves both out of the job

    run_app(app, "xcecli")

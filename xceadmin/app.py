"""xceadmin: the admin's CLI (CLI-1, CLI-4). One module per command in
`xceadmin/commands/`; this module only wires them to the root Typer app and
holds the error funnel.

Start-up stays light (DESIGN rule 7): nothing here, nor at the top of a
command module, imports pydantic, ruamel or httpx; commands import them inside
the function that runs.

Exit codes (CLI-1): 0 ok, 1 refused or invalid (a config with errors, a
TopDir that does not exist), 2 usage error, 3 the daemon could not be reached.

Global options (issue 14, KEY-3): `--controller tcp://HOST:PORT` with `--controller-key
FILE|SHA256:...` (or XCE_CONTROLLER with XCE_CONTROLLER_KEY) send the commands that read or
change the cluster to the controller's TCP port from another host, signed with the admin
key as host `--key-host` (default: this machine's name); without them they use the
controller's Unix socket as before (xceadmin.connect says which path a command takes).
"""

from __future__ import annotations

from typing import Optional

import typer

from xced.version import print_version_and_exit
from xceadmin.commands import build as _build
from xceadmin.commands import debug as _debug
from xceadmin.commands import hosts as _hosts
from xceadmin.commands import init as _init
from xceadmin.commands import keys as _keys
from xceadmin.commands import sim as _sim

app = typer.Typer(
    name="xceadmin",
    add_completion=False,  # the static scripts of completions/ (CLI-5), not Typer's own installer
    help="XCE administration: make, check and compile the cluster config of a TopDir; replay workloads.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    controller: Optional[str] = typer.Option(
        None, "--controller", metavar="tcp://HOST:PORT",
        help="reach the controller over TCP from another host, signed with the admin key (default: its Unix socket; "
             "env XCE_CONTROLLER with XCE_CONTROLLER_KEY)"),
    controller_key: Optional[str] = typer.Option(
        None, "--controller-key", metavar="FILE|SHA256:...",
        help="the controller's key that TLS is pinned to: its keys/host.pub, or its fingerprint (env "
             "XCE_CONTROLLER_KEY)"),
    key_host: Optional[str] = typer.Option(
        None, "--key-host", metavar="NAME",
        help="the host the admin key was trusted for, which it signs as (default: this machine's short name)"),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=print_version_and_exit("xceadmin"),
                                 help="print the version (the package's) and exit"),
) -> None:
    """XCE administration: make, check and compile the cluster config of a TopDir."""
    from xceadmin.connect import set_options

    set_options(controller, controller_key, key_host)


app.command("init", help=_init.HELP, no_args_is_help=True)(_init.init)
app.command("build", help=_build.HELP)(_build.build)
app.add_typer(_sim.app, name="sim")
app.add_typer(_keys.app, name="keys")
app.add_typer(_debug.app, name="debug")
app.add_typer(_hosts.app, name="hosts")


def main() -> None:
    """Console script entry point: the one error funnel (xced.api.funnel, DESIGN rule 6)."""
    from xced.api.funnel import run_app

    run_app(app, "xceadmin")


if __name__ == "__main__":  # pragma: no cover
    main()

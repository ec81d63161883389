"""`xceadmin build`: validate and compile the config of a TopDir (CLI-4, CFG-2)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

HELP = (
    "Check and compile config/xce.yaml, queues.yaml and hosts.yaml of the TopDir.\n\n"
    "Prints every error as FILE:LINE:COL: error: MESSAGE, then the warnings, on stderr, "
    "and on success 'config OK: N queues, M hosts, hash SHA256' on stdout. "
    "Exit 0 when there is no error, 1 otherwise.\n\n"
    "--json prints {ok, hash, errors, warnings} on stdout instead, each diagnostic "
    "being {severity, file, line, col, message}."
)


def build(
    topdir: Annotated[
        Optional[str],  # noqa: UP007 (Typer reads the annotation at run time)
        typer.Option(
            "--topdir",
            metavar="DIR",
            help="TopDir to compile; default $XCE_TOPDIR, else the user's data dir.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the result as one JSON object on stdout."),
    ] = False,
) -> None:
    import json
    import sys

    from xced.config import load_cluster_config
    from xced.constants import resolve_topdir

    result = load_cluster_config(resolve_topdir(topdir))
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        _print_diagnostics(result.errors + result.warnings)
        if result.ok and result.config is not None:
            nq, nh = len(result.config.queues), len(result.config.hosts)
            typer.echo(
                f"config OK: {nq} queue{'s' if nq != 1 else ''}, {nh} host{'s' if nh != 1 else ''}, "
                f"hash {result.hash}"
            )
        else:
            n = len(result.errors)
            if n > 1:
                typer.echo(f"config has {n} errors; nothing compiled", err=True)
    raise typer.Exit(0 if result.ok else 1)


def _print_diagnostics(diagnostics: list) -> None:
    """One line per diagnostic on stderr, `error`/`warning` coloured on a terminal."""
    if not diagnostics:
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    for d in diagnostics:
        style = "bold red" if d.severity == "error" else "yellow"
        line = Text(f"{d.location}: ")
        line.append(d.severity, style=style)
        line.append(f": {d.message}")
        console.print(line)

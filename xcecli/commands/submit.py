"""`xcecli submit` (CLI-2): LSF spellings (`-n`, `-q`, `-J`, `-o`, `-e`, `-W`, `-M`, `-K`, `-w`).

The command's options come from the one submit table (xced.api.submit_options.OPTIONS) and
what it does is xcecli.submitting's, which the start-up fast path (xcecli.fast) runs too."""

from __future__ import annotations

import inspect
from typing import List, Optional

import typer


def option_parameters(options) -> list[inspect.Parameter]:
    """Typer parameters (keyword-only, named by each option's long name) for rows of the
    submit option table (xced.api.submit_options.OPTIONS): a string for a "one" option,
    a list of strings for a repeatable one, a bool for a flag. So `xcecli submit` and
    `xcecli presets create` take exactly the table's options (PRE-1)."""
    params = []
    for o in options:
        if o.kind == "flag":
            default, ann = typer.Option(False, *o.flags, help=o.help), bool
        elif o.kind == "one":
            default, ann = typer.Option(None, *o.flags, metavar=o.metavar, help=o.help), Optional[str]
        else:
            default, ann = typer.Option([], *o.flags, metavar=o.metavar, help=o.help), List[str]
        params.append(inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann))
    return params


def with_parameters(*leading: inspect.Parameter, options=()):
    """Give a command function `def f(ctx, ..., **opts)` the signature Typer reads: `ctx`,
    then `leading` (arguments), then `options` made by `option_parameters`."""

    def deco(fn):
        ctx = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
        params = [ctx, *leading, *option_parameters(options)]
        fn.__signature__ = inspect.Signature(params)
        fn.__annotations__ = {p.name: p.annotation for p in params}
        return fn

    return deco


def register(app: typer.Typer) -> None:
    from xced.api.submit_options import OPTIONS

    command_arg = inspect.Parameter(
        "command", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=List[str],
        default=typer.Argument(None, show_default=False, metavar="[COMMAND [ARGS]...]",
                               help="command and arguments, or a script path (put -- before a command with options); "
                                    "none with --pack, or with a script on standard input; a script's #BSUB and "
                                    "#XCE lines are read"))

    @app.command(context_settings={"allow_interspersed_args": False})
    @with_parameters(command_arg, options=OPTIONS)
    def submit(ctx: typer.Context, command: Optional[List[str]], **opts) -> None:
        """Submit a job: xcecli submit [OPTIONS] -- COMMAND [ARGS...], a script (a path, or on standard input: xcecli submit < job.lsf), or one job per line: xcecli submit --pack FILE"""
        from xcecli.submitting import run
        from xcecli.usage import Usage

        try:
            run(opts, list(command or ()), ctx.obj.client)
        except Usage as e:
            raise typer.BadParameter(e.message) from None

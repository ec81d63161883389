"""`xceadmin debug` (test mode only): tools for tests and harnesses.

`debug clock --advance DURATION` moves the daemon's clock on, so that key expiry and grace
periods are tested without sleeping; a production daemon refuses it. Like the other commands
that ask the daemon, it goes to its Unix socket, or signed with the admin key to the
controller of `xceadmin --controller` (xceadmin.connect).
"""

from __future__ import annotations

from typing import Optional

import typer

from xceadmin.connect import nonblank_topdir

app = typer.Typer(no_args_is_help=True, help="Tools for tests (a daemon in mode: test only).")


@app.command("clock")
def clock(
    advance: str = typer.Option(..., "--advance", metavar="DURATION", help="how far to move the daemon's clock on: "
                                                                          "90s, 30m, 2h, 1d"),
    topdir: Optional[str] = typer.Option(None, "--topdir", metavar="DIR", callback=nonblank_topdir,
                                         help="the daemon's TopDir"),
    as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)"),
) -> None:
    """Advance the daemon's clock (test mode only): expiry and grace periods without sleeping."""
    import json

    from xceadmin.commands.keys import parse_duration
    from xceadmin.connect import connect

    seconds = parse_duration(advance, "--advance")
    with connect(topdir) as c:
        out = c.request("POST", "/debug/clock", json={"advance_s": seconds}).json()
    if as_json:
        print(json.dumps(out, indent=2))
        return
    from xced.config.keys import format_time

    typer.echo(f"the daemon's clock is now {format_time(out['now'])}, {out['offset']:.0f} s ahead of this machine's",
               err=True)

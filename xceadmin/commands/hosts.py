"""`xceadmin hosts open|close|drain HOST --reason TEXT` and `xceadmin hosts hist [HOST]` (CLI-4): an admin's host control, as
LSF's `badmin hopen` / `badmin hclose` and Slurm's `scontrol update nodename=H state=drain`.

- `close` stops new dispatches to the host (`xcecli hosts` shows it `closed_Adm`, with who
  closed it and why); what runs there runs on.
- `drain` closes it and reports when its last job has ended (`draining: true` until then);
  `--wait` blocks until then, with a progress display on a terminal (silent in a pipe).
- `open` reverses either.

Each is a host event with the admin's name and reason, kept across restarts; `hist` lists
them with the system's own (drained, lost, rejoined), as LSF's `badmin hhist` does. Doing what is
done already (closing a closed host) exits 0 and says so on stderr ("already closed"). An
unknown host exits 1; draining a host that no worker serves exits 1 (close it instead).
Through the controller's Unix socket, or its TCP port signed with the admin key
(xceadmin.connect), as the other admin commands.
"""

from __future__ import annotations

from typing import Optional

import typer

from xceadmin.connect import nonblank_topdir

app = typer.Typer(no_args_is_help=True, help="Open, close or drain hosts (LSF badmin hopen/hclose).")

_TOPDIR = typer.Option(None, "--topdir", metavar="DIR", callback=nonblank_topdir, help="the controller's TopDir (default: XCE_TOPDIR, else the "
                                                             "personal cluster's)")
_REASON = typer.Option(None, "--reason", metavar="TEXT", help="why (shown by `xcecli hosts`; at most 1,000 characters)")
_JSON = typer.Option(False, "--json", help="print the result as JSON: {host, changed, message}")
#: seconds between two looks at a draining host (`drain --wait`)
POLL_S = 0.5


def _control(topdir: str | None, host: str, op: str, reason: str | None, as_json: bool) -> dict:
    """POST /hosts/HOST/OP; print the message (stdout when something changed, stderr when it
    was so already) or the JSON. Returns the result body."""
    import json
    import re

    from xced.model.units import HOST_FORM, HOST_PATTERN
    from xceadmin.connect import connect

    if not re.fullmatch(HOST_PATTERN, host):
        raise typer.BadParameter(f"host {host[:80]!r}: {HOST_FORM}", param_hint="HOST")
    with connect(topdir) as c:
        body = c.request("POST", f"/hosts/{host}/{op}", json={"reason": reason}).json()
    if as_json:
        print(json.dumps(body, indent=2))
    elif body["changed"]:
        print(body["message"])
    else:
        typer.echo(f"xceadmin: {body['message']}", err=True)
    return body


@app.command("close")
def close(host: str = typer.Argument(..., metavar="HOST", help="the host's name (xcecli hosts lists them)"), reason: Optional[str] = _REASON,
          topdir: Optional[str] = _TOPDIR, as_json: bool = _JSON) -> None:
    """Close HOST: no new job starts there; its running jobs run on (LSF badmin hclose)."""
    _control(topdir, host, "close", reason, as_json)


@app.command("open")
def open_(host: str = typer.Argument(..., metavar="HOST", help="the host's name (xcecli hosts lists them)"), reason: Optional[str] = _REASON,
          topdir: Optional[str] = _TOPDIR, as_json: bool = _JSON) -> None:
    """Open HOST again after a close or a drain (LSF badmin hopen)."""
    _control(topdir, host, "open", reason, as_json)


@app.command("drain")
def drain(host: str = typer.Argument(..., metavar="HOST", help="the host's name (xcecli hosts lists them)"), reason: Optional[str] = _REASON,
          wait: bool = typer.Option(False, "--wait", help="block until the host's last job has ended"),
          topdir: Optional[str] = _TOPDIR, as_json: bool = _JSON) -> None:
    """Close HOST and report when its last job has ended; --wait blocks until then."""
    body = _control(topdir, host, "drain", reason, as_json and not wait)
    if not wait:
        return
    h = _wait_drained(topdir, host, body["host"])
    if as_json:
        import json

        print(json.dumps({"host": h, "changed": body["changed"], "message": f"host {host} drained"}, indent=2))
    elif body["host"]["draining"]:
        print(f"host {host} drained: its last job has ended")


@app.command("hist")
def hist(host: Optional[str] = typer.Argument(None, metavar="[HOST]", help="one host (default: every host)"),
         topdir: Optional[str] = _TOPDIR,
         as_json: bool = typer.Option(False, "--json", help="print the API's JSON: {events: [{time, host, kind, actor, "
                                                             "reason}]}")) -> None:
    """A host's history, oldest first (LSF badmin hhist): opens, closes and drains with the
    admin and reason; drained, lost and rejoined."""
    import json
    import re

    from xced.model.units import HOST_FORM, HOST_PATTERN
    from xceadmin.connect import connect
    from xcecli.output import fmt_time, table

    if host is not None and not re.fullmatch(HOST_PATTERN, host):
        raise typer.BadParameter(f"host {host[:80]!r}: {HOST_FORM}", param_hint="HOST")
    with connect(topdir) as c:
        body = c.request("GET", "/hosts/events", params={"host": host} if host else None).json()
    if as_json:
        print(json.dumps(body, indent=2))
        return
    table(["TIME", "HOST", "EVENT", "ACTOR", "REASON"],
          [[fmt_time(e["time"]), e["host"], e["kind"], e["actor"], e["reason"]] for e in body["events"]])


def _wait_drained(topdir: str | None, host: str, h: dict) -> dict:
    """Poll GET /hosts until `host` drains (no longer `draining`); a progress line on a
    terminal. Returns the host as last seen. Raises NotFound if the host goes, Conflict if it
    is opened meanwhile (the drain was called off)."""
    import sys
    import time

    from xced.api.errors import Conflict, NotFound
    from xceadmin.connect import connect

    status = None
    if sys.stderr.isatty():
        from rich.console import Console

        status = Console(stderr=True).status(f"draining {host}")
        status.start()
    try:
        with connect(topdir) as c:
            while h["draining"]:
                if status is not None:
                    jobs = h["jobs"]
                    status.update(f"draining {host}: {h['njobs']} job(s) running there"
                                  + (f" ({', '.join(jobs[:5])}{' ...' if len(jobs) > 5 else ''})" if jobs else ""))
                time.sleep(POLL_S)
                hosts = {x["name"]: x for x in c.request("GET", "/hosts").json()["hosts"]}
                if host not in hosts:
                    raise NotFound(f"host {host} is no longer a host of this cluster")
                h = hosts[host]
                if h["closed_by"] is None:
                    raise Conflict(f"host {host} was opened again while it drained: the drain is off")
    finally:
        if status is not None:
            status.stop()
    return h

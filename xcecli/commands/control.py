"""`xcecli kill`, `stop`, `resume`, `requeue`, `release` (CLI-3; LSF bkill, bstop, bresume, brequeue;
Slurm scontrol release)."""

from __future__ import annotations

from typing import List

import typer

_HELP = {
    "kill": "Kill jobs (LSF bkill): SIGINT, SIGTERM, then SIGKILL, spaced by the cluster's kill interval; pending jobs end at once.",
    "stop": "Stop jobs (LSF bstop): running jobs get SIGSTOP (USUSP); pending jobs are held (PSUSP).",
    "resume": "Resume stopped or held jobs (LSF bresume).",
    "requeue": "Requeue jobs (LSF brequeue): running jobs are killed and pend again with the same ID.",
    "release": "Release the system hold of held jobs (Slurm scontrol release; admins only): holds set after "
               "declined dispatches or by a config that refused the job, which must accept it now.",
}


def _make(name: str):
    def command(ctx: typer.Context, jobs: List[str] = typer.Argument(..., metavar="JOB...", help="job IDs, 123 or 123[4]"),
                as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)")) -> None:
        from xced.api.errors import XceError
        from xcecli.commands.jobs import _job_ref
        from xcecli.output import err, print_json

        refs = [_job_ref(j) for j in jobs]
        client = ctx.obj.client()
        results, failed = [], None
        for jid, idx in refs:
            try:
                results.append(client.action(name, jid, idx))
            except XceError as e:
                if e.exit_code == 3:
                    raise
                err(f"xcecli: error: {e.message}")
                failed = e
        if as_json:
            print_json(results)
        else:
            for r in results:
                print(f"Job <{r.job_id}>: {r.message}")
        if failed is not None:
            raise typer.Exit(failed.exit_code)

    command.__doc__ = _HELP[name]
    return command


def register(app: typer.Typer) -> None:
    for name in _HELP:
        app.command(name=name)(_make(name))

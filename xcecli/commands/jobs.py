"""`xcecli jobs`, `show`, `hist`, `peek`, `wait` (CLI-3)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import List, Optional

import typer

from xced.api.listing import FIELDS


def _job_ref(text: str) -> tuple[int, int | None]:
    """A job ID argument (xcecli.views.job_ref); a malformed one is a usage error (exit 2)."""
    from xcecli.views import job_ref

    with _usage():
        return job_ref(text)


@contextmanager
def _usage():
    """Turn xcecli.usage.Usage, raised by the code the fast path shares, into Typer's usage error."""
    from xcecli.usage import Usage

    try:
        yield
    except Usage as e:
        raise typer.BadParameter(e.message) from None


def register(app: typer.Typer) -> None:
    @app.command()
    def jobs(
        ctx: typer.Context,
        ids: List[str] = typer.Argument(None, metavar="[JOB]...", show_default=False,
                                        help="only these jobs, 123 or 123[4], of any user, state and age (LSF bjobs ID)"),
        user: Optional[str] = typer.Option(None, "-u", "--user", help="whose jobs: a user name or 'all' (default: yours)"),
        queue: Optional[str] = typer.Option(None, "-q", "--queue", metavar="QUEUE", help="only the jobs of this queue"),
        project: Optional[str] = typer.Option(None, "-P", "--project", help="jobs of that very project, e.g. /physics/hep"),
        state: List[str] = typer.Option([], "-s", "--state", help="PEND, PSUSP, RUN, USUSP, DONE or EXIT (repeatable)"),
        all_: bool = typer.Option(False, "-a", "--all", help="include finished jobs of any age (default: the last hour)"),
        fields: Optional[str] = typer.Option(None, "-o", metavar="FIELDS", help=f"fields, space or comma separated: {' '.join(FIELDS)}"),
        as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)"),
    ) -> None:
        """List jobs (LSF bjobs): your unfinished jobs and those that finished in the last hour, or the JOBs named."""
        from xcecli import views

        with _usage():
            views.jobs(ctx.obj.client, user=user, queue=queue, project=project, state=state, all_=all_,
                       fields=fields, as_json=as_json, ids=ids or [])

    @app.command()
    def show(ctx: typer.Context, job: str = typer.Argument(..., metavar="JOB", help="job ID"), as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)"),
             verbose: bool = typer.Option(False, "-v", "--verbose", help="one row per element, however many (past 100 "
                                          "an array's elements are grouped by state and index range)")) -> None:
        """Show a job in full (LSF bjobs -l): its request, who it runs as, its elements (past 100, grouped)."""
        from xcecli import views

        with _usage():
            views.show(ctx.obj.client, job, as_json, verbose=verbose)

    @app.command()
    def why(ctx: typer.Context, job: str = typer.Argument(..., metavar="JOB", help="job ID, 123 or 123[4]"),
            as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)")) -> None:
        """Why a job pends (RES-6): the main reason, each host's shortfall, what would start it."""
        import json
        import sys

        jid, idx = _job_ref(job)
        params = {"index": idx} if idx is not None else None
        res = ctx.obj.client().request("GET", f"/jobs/{jid}/why", params=params)
        if as_json:
            sys.stdout.buffer.write(res.body + b"\n")
            return
        w = json.loads(res.body)
        print(f"{w['id']} {w['state']}: {w['main']}")
        for line in w.get("caps", [])[1:]:  # every other project cap in the way (PRJ-6, PRJ-7)
            print(f"  also {line}")
        for h in w["hosts"]:
            print(f"  {h['message']}")
        if w.get("hint"):
            print(w["hint"])
        if w.get("reservation"):  # the scheduler's word on a backfill reservation (SCHED-1, D-4)
            print(f"scheduler: {w['reservation']['text']}")

    @app.command()
    def hist(ctx: typer.Context, job: str = typer.Argument(..., metavar="JOB", help="job ID, 123 or 123[4]"), as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)")) -> None:
        """A job's history (LSF bhist -l): every transition with time, actor and reason."""
        from xcecli.output import fmt_time, print_json, table

        jid, idx = _job_ref(job)
        client = ctx.obj.client()
        ev = client.events(jid)
        if idx is not None:
            if not any(e.index == idx for e in client.job(jid).elements):
                from xced.api.errors import NotFound

                raise NotFound(f"job {jid} has no element {idx}")
            ev.events = [e for e in ev.events if e.id in (str(jid), f"{jid}[{idx}]")]
        if as_json:
            print_json(ev)
            return
        table(["TIME", "ID", "EVENT", "FROM", "TO", "ACTOR", "REASON"],
              [[fmt_time(e.time), e.id, e.kind, e.from_state.value if e.from_state else None,
                e.to_state.value if e.to_state else None, e.actor, e.reason] for e in ev.events])

    @app.command()
    def peek(ctx: typer.Context, job: str = typer.Argument(..., metavar="JOB", help="job ID, 123 or 123[4]"),
             stderr: bool = typer.Option(False, "-e", "--stderr", help="show stderr instead of stdout"),
             max_bytes: int = typer.Option(65536, "--bytes", metavar="N", min=1, max=16 * 2**20,
                                           help="at most the last N bytes (1 to 16 MiB)"),
             follow: bool = typer.Option(False, "-f", "--follow", help="go on printing what the job writes until "
                                         "it ends, as tail -f (LSF bpeek -f); waits for a pending job to start")) -> None:
        """Output of a job so far (LSF bpeek); -f follows it until the job ends."""
        import sys

        jid, idx = _job_ref(job)
        if follow:
            from xcecli.follow import follow as follow_output

            raise typer.Exit(follow_output(ctx.obj.client(), jid, idx, "stderr" if stderr else "stdout"))
        text = ctx.obj.client().output(jid, idx, "stderr" if stderr else "stdout", max_bytes)
        sys.stdout.write(text)

    @app.command()
    def wait(ctx: typer.Context, jobs_: List[str] = typer.Argument(..., metavar="JOB...", help="job IDs, 123 or 123[4]"),
             timeout: Optional[float] = typer.Option(None, "--timeout", metavar="SECONDS", help="give up after this many seconds (exit 1)")) -> None:
        """Wait until the jobs end. Exit 0 when all are DONE, 1 otherwise; a progress display on a terminal."""
        import sys
        import time

        from xcecli.output import err

        import math

        if timeout is not None and (math.isnan(timeout) or timeout < 0):
            raise typer.BadParameter(f"--timeout {timeout}: expected a number of seconds >= 0")
        refs = [_job_ref(j) for j in jobs_]
        client = ctx.obj.client()
        deadline = None if timeout is None else time.monotonic() + timeout
        results = {}
        status = None
        if sys.stderr.isatty():
            from rich.console import Console

            status = Console(stderr=True).status(f"waiting for {len(refs)} job(s)")
            status.start()
        try:
            for i, (jid, idx) in enumerate(refs):
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if status:
                    status.update(f"waiting for job {jid} ({i}/{len(refs)} ended)")
                results[(jid, idx)] = client.wait(jid, timeout=left, index=idx, on_lost=err)
        finally:
            if status:
                status.stop()
        bad = 0
        for (jid, idx), j in results.items():
            els = j.elements if idx is None else [e for e in j.elements if e.index == idx]
            if idx is not None and not els:
                from xced.api.errors import NotFound

                raise NotFound(f"job {jid} has no element {idx}")
            states = {e.state.value for e in els}
            ref = str(jid) if idx is None else f"{jid}[{idx}]"
            if states == {"DONE"}:
                continue
            bad += 1
            if states <= {"DONE", "EXIT"}:
                codes = sorted({e.exit_code for e in els if e.exit_code is not None})
                err(f"job {ref} ended EXIT" + (f" (exit code {', '.join(map(str, codes))})" if codes else ""))
            else:
                err(f"job {ref} is still {'/'.join(sorted(states))} (timed out)")
        raise typer.Exit(1 if bad else 0)

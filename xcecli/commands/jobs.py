"""`xcecli jobs`, `show`, `hist`, `peek`, `wait` (CLI-3)."""

from __future__ import annotations

from typing import List, Optional

import typer

from xced.api.listing import FIELDS

def _job_ref(text: str) -> tuple[int, int | None]:
    from xced.model.jobs import parse_job_ref

    try:
        return parse_job_ref(text)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


def register(app: typer.Typer) -> None:
    @app.command()
    def jobs(
        ctx: typer.Context,
        user: Optional[str] = typer.Option(None, "-u", "--user", help="whose jobs: a user name or 'all' (default: yours)"),
        queue: Optional[str] = typer.Option(None, "-q", "--queue", metavar="QUEUE", help="only the jobs of this queue"),
        project: Optional[str] = typer.Option(None, "-P", "--project", help="jobs of that very project, e.g. /physics/hep"),
        state: List[str] = typer.Option([], "-s", "--state", help="PEND, PSUSP, RUN, USUSP, DONE or EXIT (repeatable)"),
        all_: bool = typer.Option(False, "-a", "--all", help="include finished jobs of any age (default: the last hour)"),
        fields: Optional[str] = typer.Option(None, "-o", metavar="FIELDS", help=f"fields, space or comma separated: {' '.join(FIELDS)}"),
        as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)"),
    ) -> None:
        """List jobs (LSF bjobs): your unfinished jobs and those that finished in the last hour."""
        from xced.model.jobs import JobState
        from xcecli.output import err, table

        for opt, val in (("-u", user), ("-q", queue), ("-P", project), ("-o", fields)):
            if val is not None and not val.strip():
                raise typer.BadParameter(f"{opt} '': the value is empty")
        states = []
        for s in state:
            for part in s.replace(",", " ").split():
                if part.upper() not in JobState.__members__:
                    raise typer.BadParameter(f"-s {part!r}: valid states are {', '.join(JobState.__members__)}")
                states.append(part.upper())
        from xced.api.listing import TIME_FIELDS, parse_fields

        try:
            cols = parse_fields(fields)
        except ValueError as e:
            raise typer.BadParameter(f"-o: {e}") from None
        # plain JSON, no model parsing; rides out a daemon restart (JOB-10): retried up to
        # XCE_CONNECT_TIMEOUT, saying so once
        client = ctx.obj.client()
        if as_json:
            import sys

            res = client.jobs_raw(user=user, queue=queue, states=states or None, all=all_, project=project,
                                  on_lost=err)
            sys.stdout.buffer.write(res.body + b"\n")
            return
        # the daemon sends only these columns (GET /jobs/table, issue 17): a tenth of the bytes
        params = {"fields": " ".join(cols), "user": user, "queue": queue, "project": project,
                  "state": states or None, "all": "true" if all_ else None}
        res = client.request_retried("GET", "/jobs/table", params={k: v for k, v in params.items() if v},
                                     on_lost=err)
        rows = res.json()["rows"]
        timed = [i for i, c in enumerate(cols) if c in TIME_FIELDS]
        if timed:
            from xcecli.output import fmt_time

            for r in rows:
                for i in timed:
                    r[i] = fmt_time(r[i])
        table([FIELDS[f] for f in cols], rows)

    @app.command()
    def show(ctx: typer.Context, job: str = typer.Argument(..., metavar="JOB", help="job ID"), as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)")) -> None:
        """Show a job in full (LSF bjobs -l): its request, who it runs as, every element."""
        import shlex

        from xcecli.output import fmt_duration, fmt_time, print_json, table

        jid, idx = _job_ref(job)
        j = ctx.obj.client().job(jid)
        if idx is not None:
            j.elements = [e for e in j.elements if e.index == idx]
            if not j.elements:
                from xced.api.errors import NotFound

                raise NotFound(f"job {jid} has no element {idx}")
        if as_json:
            print_json(j)
            return
        lines = [
            ("Job", f"{j.job_id}" + (f" ({j.name})" if j.name else "")),
            ("User", j.user + (" (asserted in test mode)" if j.asserted_user else "")),
            ("Runs as", j.run_as),
            ("Queue", j.queue),
            ("Project", f"{j.project or 'none'} (let in as: {j.auth_basis})"),
            ("Application", (j.app or "none") + (" " + " ".join(f"{k}={v}" for k, v in j.app_params.items())
                                                 if j.app_params else "")),
            *([("Preset", f"{pr.get('name')} ({pr.get('hash')})")] if isinstance(j.meta, dict) and
              isinstance(pr := j.meta.get("preset"), dict) else []),
            ("State", j.state.value),
            ("Command", shlex.join(j.argv)),  # quoted: where each argument ends shows
            ("CWD", j.cwd),
            ("Tasks", (str(j.ntasks_min) if j.ntasks_min == j.ntasks_max else f"{j.ntasks_min},{j.ntasks_max}")
             + (f" (running with {sum(a.slots for a in j.elements[0].alloc)})"
                if len(j.elements) == 1 and j.elements[0].alloc and j.ntasks_min != j.ntasks_max else "")),
            ("Run limit", fmt_duration(j.run_limit_s) if j.run_limit_s else "none"),
            ("Memory limit", f"{j.memory_limit_mb} MB" if j.memory_limit_mb else "none"),
            ("Submitted", fmt_time(j.submit_time)),
        ]
        if j.resreq_requested or j.resreq:  # LSF bjobs -l: "Requested Resources" / "Effective RESREQ"
            lines.append(("Requested", " ".join(j.resreq_requested) or "-"))
            lines.append(("Effective", j.resreq or "-"))
        if j.reserve:  # each rusage term with its method and the job's total (RES-2, issue 15)
            from xced.resreq import reserve_line

            lines += [("Reserves" if i == 0 else "", reserve_line(r.model_dump(), j.ntasks_max))
                      for i, r in enumerate(j.reserve)]
        if j.dependency:  # LSF bjobs -l: "Dependency Condition"
            lines.append(("Dependency", j.dependency))
        kept = sorted({e.containment for e in j.elements if e.containment})
        if kept:  # JOB-1: how the job's processes are kept together and ended with it
            lines.append(("Containment", ", ".join(kept)))
        if j.array_spec:
            lines.append(("Array", j.array_spec + ("" if j.array_limit is None else f" (at most {j.array_limit} running)")))
            lines.append(("Elements", ", ".join(f"{n} {s}" for s, n in sorted(j.counts.items()))))
        for k, v in lines:
            print(f"{k + ':' if k else '':<14}{v}")
        rows = []
        for e in j.elements:
            why = e.exit_reason or (e.pend_reason.main if e.pend_reason else None) or e.host_problem
            hosts = " ".join(f"{a.host}:{a.slots}" for a in e.alloc) or None
            rows.append([e.id, e.state.value, hosts, fmt_time(e.start_time), fmt_time(e.end_time),
                         e.exit_code, e.exit_signal, why])
        print()
        table(["ID", "STAT", "HOSTS", "START", "END", "EXIT", "SIGNAL", "REASON"], rows)
        for e in j.elements:
            if e.pend_reason and e.pend_reason.hosts:
                print(f"\n{e.id} pending: {e.pend_reason.main}")
                for h in e.pend_reason.hosts:
                    print(f"  {h.message}")

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
                                           help="at most the last N bytes (1 to 16 MiB)")) -> None:
        """Output of a job so far (LSF bpeek)."""
        import sys

        jid, idx = _job_ref(job)
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

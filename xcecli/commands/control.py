"""`xcecli kill`, `stop`, `resume`, `requeue`, `release` (CLI-3; LSF bkill, bstop, bresume, brequeue;
Slurm scontrol release)."""

from __future__ import annotations

from typing import List, Optional

import typer

_HELP = {
    "kill": "Kill jobs (LSF bkill): SIGINT, SIGTERM, then SIGKILL, spaced by the cluster's kill interval; pending jobs end at once. With -s SIG, send that one signal instead.",
    "stop": "Stop jobs (LSF bstop): running jobs get SIGSTOP (USUSP); pending jobs are held (PSUSP).",
    "resume": "Resume stopped or held jobs (LSF bresume).",
    "requeue": "Requeue jobs (LSF brequeue): running jobs are killed and pend again with the same ID.",
    "release": "Release the system hold of held jobs (Slurm scontrol release; admins only): holds set after "
               "declined dispatches or by a config that refused the job, which must accept it now.",
}


def _refused(jid: int, text: str, e) -> dict:
    """The --json entry of a JOB argument the daemon refused whole (an ActionResult with
    `refused` set; xced.api.models.ActionRefusal): kept in the list, never dropped."""
    return {"job_id": jid, "affected": [], "message": e.message, "count": 0, "complete": True, "states": [],
            "skipped": [], "note": None, "refused": {"id": text.strip(), "code": e.code, "reason": e.message}}


def _run(ctx: typer.Context, name: str, jobs: List[str], as_json: bool, verbose: bool, sig: str | None = None,
         record_done: bool = False, force: bool = False, comment: str | None = None) -> None:
    """Ask for action `name` on each JOB and print one line per job (or --json); `sig`
    (kill -s) turns the kill into that one signal, `record_done` (kill --record-done, LSF
    bkill -d) records the jobs it kills DONE, `force` (kill --force, LSF bkill -r) removes
    them at once, EXIT, their processes killed after, and `comment` (kill -C, LSF bkill -C)
    is recorded with each kill (xced.api.models.KillRequest). A kill of several JOBs goes
    KILL_BATCH to a request (POST /jobs/kill), each answered in its place as if asked
    alone. Raises typer.BadParameter when -s, --record-done and --force are combined, or
    -s with -C."""
    from xced.api.errors import XceError
    from xcecli.commands.jobs import _job_ref
    from xcecli.lsf.jobctl import action_body
    from xcecli.output import err

    if sig is not None:
        from xced.model.signals import parse_signal

        try:
            parse_signal(sig)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="'-s' / '--signal'") from None
        if record_done:
            raise typer.BadParameter("--record-done goes with the kill sequence, not with one signal (LSF's bkill "
                                     "-s and -d exclude each other); give one of them", param_hint="'-s' / '--signal'")
        if force:
            raise typer.BadParameter("--force sends the kill sequence, not one signal (LSF's bkill -s and -r "
                                     "exclude each other); give one of them", param_hint="'-s' / '--signal'")
        if comment is not None:
            raise typer.BadParameter("a kill reason (-C) goes with a kill, not with one signal; give one of them",
                                     param_hint="'-C' / '--comment'")
    if comment is not None:
        from xced.model.states import kill_comment_error

        bad = kill_comment_error(comment)
        if bad is not None:
            raise typer.BadParameter(bad, param_hint="'-C' / '--comment'")
    if force and record_done:
        raise typer.BadParameter("--force records the job EXIT at once, so it cannot go with --record-done "
                                 "(LSF's bkill -r and -d exclude each other); give one of them", param_hint="'--force'")
    refs = [_job_ref(j) for j in jobs]
    client = ctx.obj.client()
    full = as_json or verbose
    results, failed = [], None
    if name == "kill" and len(refs) > 1:
        # many jobs: KILL_BATCH to a request (POST /jobs/kill), each answered in its place
        from xcecli.lsf.jobctl import KILL_BATCH, kill_many, refusal_error

        base = action_body(None, sig, record_done, force, comment)
        for k in range(0, len(refs), KILL_BATCH):
            part = list(zip(jobs[k:k + KILL_BATCH], refs[k:k + KILL_BATCH]))
            answer = kill_many(client, [ref for _, ref in part], base, full)
            for (text, (jid, _)), res in zip(part, answer):
                if res.get("refused") is None:
                    results.append(res)
                    continue
                e = refusal_error(res["refused"])
                if e.exit_code == 3:  # the store failed: what was done is printed, then exit 3
                    _print(results, name, as_json)
                    raise e
                err(f"xcecli: error: {e.message}")
                if as_json:
                    results.append(_refused(jid, text, e))
                failed = e
        refs = []
    for text, (jid, idx) in zip(jobs, refs):
        body = action_body(idx, sig, record_done, force, comment)
        try:
            # plain JSON (no model parsing); past 100 elements the daemon answers counts and
            # index runs unless asked for the full list (issue 17 part 4, CLI-7)
            res = client.request("POST", f"/jobs/{jid}/{name}", json=body, params={"full": "true"} if full else None)
            results.append(res.json())
        except XceError as e:
            if e.exit_code == 3:
                raise
            err(f"xcecli: error: {e.message}")
            if as_json:
                results.append(_refused(jid, text, e))
            failed = e
    _print(results, name, as_json)
    if failed is not None:
        raise typer.Exit(failed.exit_code)


def _print(results: list[dict], name: str, as_json: bool) -> None:
    """The answers of `xcecli kill` (stop, ...) on stdout: a JSON list with --json, else one
    line per job, or past 100 elements one per state of its elements (issue 17 part 4)."""
    if as_json:
        import json

        print(json.dumps(results, indent=2))
        return
    for r in results:
        if r.get("complete", True):
            print(f"Job <{r['job_id']}>: {r['message']}")
        else:
            from xced.api.arrays import action_lines

            print("\n".join(action_lines(r["job_id"], name, [(g["state"], g["count"], g["indices"]) for g in r["states"]],
                                         [(g["state"], g["count"], g["indices"]) for g in r["skipped"]], r["note"])))


_JOBS = typer.Argument(..., metavar="JOB...", help="job IDs, 123 or 123[4]")
_JSON_HELP = ("print the answer as JSON (the API's model, a list: every element acted on, and each JOB refused "
              "with the reason)")
_VERBOSE_HELP = "name every element acted on, however many (past 100 elements an array is summarised by state and index range)"


def _make(name: str):
    if name == "kill":
        def command(ctx: typer.Context, jobs: List[str] = _JOBS,
                    sig: Optional[str] = typer.Option(None, "-s", "--signal", metavar="SIG",
                                                      help="send this one signal instead of the kill sequence (LSF "
                                                           "bkill -s): a name (TERM, USR1, SIGUSR1) or a number; a "
                                                           "pending job takes only KILL, TERM, INT (it is killed), "
                                                           "STOP or CONT"),
                    record_done: bool = typer.Option(False, "--record-done",
                                                     help="kill as usual but record each job killed DONE, not EXIT "
                                                          "(LSF bkill -d), so jobs waiting on its done() start; not "
                                                          "with -s"),
                    force: bool = typer.Option(False, "--force",
                                               help="remove the jobs at once (LSF bkill -r): EXIT now, their slots "
                                                    "free for other jobs, the kill sequence still sent to their "
                                                    "processes; not with -s or --record-done"),
                    comment: Optional[str] = typer.Option(None, "-C", "--comment", metavar="TEXT",
                                                          help="why the jobs are killed (LSF bkill -C): recorded "
                                                               "with each kill in the job's history (xcecli hist), "
                                                               "one line; not with -s"),
                    as_json: bool = typer.Option(False, "--json", help=_JSON_HELP),
                    verbose: bool = typer.Option(False, "-v", "--verbose", help=_VERBOSE_HELP)) -> None:
            _run(ctx, name, jobs, as_json, verbose, sig, record_done, force, comment)
    else:
        def command(ctx: typer.Context, jobs: List[str] = _JOBS,
                    as_json: bool = typer.Option(False, "--json", help=_JSON_HELP),
                    verbose: bool = typer.Option(False, "-v", "--verbose", help=_VERBOSE_HELP)) -> None:
            _run(ctx, name, jobs, as_json, verbose)

    command.__doc__ = _HELP[name] + (" Past 100 elements, an array prints one line per state of its elements "
                                     "(`Job <12[1-500]>: ...`); -v or --json name every element.")
    return command


def register(app: typer.Typer) -> None:
    for name in _HELP:
        app.command(name=name)(_make(name))

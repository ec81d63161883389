"""`xcecli launch HOST -- CMD` (CLI-3, JOB-7): LSF's blaunch. From inside a running parallel
job, start a task on one of the job's hosts through that host's worker; its output and
exit status come back. `--all` starts the command once per slot of the job, on every host
(what XCE_TASK_STARTER runs, mpirun style), each task with its rank (XCE_TASK_ID): its
slot's place in XCE_HOSTS / LSB_HOSTS, from 0, so ranks follow the host list and are the
same from run to run; the outputs are printed in rank order."""

from __future__ import annotations

from typing import List, Optional

import typer

#: a launched task may run as long as the job; the request waits for its end (seconds)
LAUNCH_TIMEOUT_S = 30 * 24 * 3600.0
#: tasks `--all` starts at once (one thread and one request each, held until the task ends):
#: a job of more slots starts its later ranks as earlier ones end
MAX_AT_ONCE = 4096


def register(app: typer.Typer) -> None:
    @app.command(context_settings={"allow_interspersed_args": False})
    def launch(
        ctx: typer.Context,
        args: List[str] = typer.Argument(..., metavar="HOST -- CMD...", help="a host of the job, then the command"),
        all_: bool = typer.Option(False, "--all", help="run CMD once per slot on every host of the job (no HOST)"),
        job: Optional[str] = typer.Option(None, "--job", metavar="ID", help="job ID (default: XCE_JOBID[XCE_JOBINDEX] of this job)"),
    ) -> None:
        """Start a task on a host of the running job (LSF blaunch); exit with its exit code."""
        import os
        import sys
        from concurrent.futures import ThreadPoolExecutor

        from xced.model.jobs import parse_job_ref

        if job is not None:
            try:
                jid, idx = parse_job_ref(job)
            except ValueError as e:
                raise typer.BadParameter(str(e)) from None
            idx = idx or 0
        elif os.environ.get("XCE_JOBID", "").isdigit():
            jid, idx = int(os.environ["XCE_JOBID"]), int(os.environ.get("XCE_JOBINDEX") or 0)
        elif os.environ.get("XCE_JOBID"):
            raise typer.BadParameter(f"XCE_JOBID={os.environ['XCE_JOBID']!r} is not a job ID; give --job ID")
        else:
            raise typer.BadParameter("not inside a job (XCE_JOBID is not set); give --job ID")
        token = os.environ.get("XCE_JOB_TOKEN") if job is None else None
        if all_:
            argv = list(args[1:]) if args[:1] == ["--"] else list(args)
            hosts = os.environ.get("XCE_HOSTS", "").split()
            if not hosts:
                raise typer.BadParameter("--all needs XCE_HOSTS (run it inside the job)")
        else:
            if len(args) < 2:
                raise typer.BadParameter("expected HOST -- CMD [ARGS...]")
            hosts, argv = [args[0]], list(args[2:] if args[1] == "--" else args[1:])
            if not argv:
                raise typer.BadParameter("expected HOST -- CMD [ARGS...]: the command is missing")

        def one(host: str, rank: int | None) -> dict:
            body = {"index": idx, "host": host, "argv": argv}
            if token:
                body["token"] = token
            if rank is not None:
                body["rank"] = rank
            return ctx.obj.client_fresh().request("POST", f"/jobs/{jid}/launch", json=body, timeout=LAUNCH_TIMEOUT_S).json()

        ranks = list(range(len(hosts))) if all_ else [None]
        if len(hosts) == 1:
            results = [one(hosts[0], ranks[0])]
        else:
            # every task at once: MPI-style ranks wait for each other, so none may queue behind
            # another's end (each request is answered when its task ends)
            with ThreadPoolExecutor(max_workers=min(MAX_AT_ONCE, len(hosts))) as pool:
                results = list(pool.map(one, hosts, ranks))
        code = 0
        for r in results:
            sys.stdout.write(r.get("output") or "")
            if r.get("reason") and r["exit_code"] != 0:
                print(f"xcecli launch: task {r['task_id']} on {r['host']}: {r['reason']}", file=sys.stderr)
            code = max(code, r["exit_code"])
        sys.stdout.flush()
        raise typer.Exit(code)

"""`xcecli submit` (CLI-2): LSF spellings (`-n`, `-q`, `-J`, `-o`, `-e`, `-W`, `-M`, `-K`, `-w`)."""

from __future__ import annotations

import re
from typing import List, Optional

import typer


def _usage(msg: str) -> None:
    raise typer.BadParameter(msg)


def parse_ntasks(text: str) -> tuple[int, int | None]:
    """`-n MIN[,MAX]` -> (MIN, MAX or None). Raises typer.BadParameter."""
    parts = text.split(",")
    if len(parts) > 2 or not all(re.fullmatch(r"-?[0-9]{1,9}", p.strip()) for p in parts):
        _usage(f"-n {text!r}: expected MIN or MIN,MAX with integers, e.g. -n 4 or -n 2,8")
    nmin = int(parts[0])
    nmax = int(parts[1]) if len(parts) == 2 else None
    if nmin < 1:
        _usage(f"-n {text}: the task count must be at least 1")
    if nmax is not None and nmax < nmin:
        _usage(f"-n {text}: MAX is below MIN; write -n MIN,MAX")
    return nmin, nmax


def resolve_command(argv: list[str], env: dict[str, str], cwd: str) -> list[str]:
    """The command as the job will run it. A path to an existing script is made absolute
    (and run with /bin/sh when it is not executable); a missing script or a program not
    on PATH is refused here, before anything is submitted."""
    import os
    import shutil

    prog = argv[0]
    if not prog:
        _usage("the command is empty")
    if "/" in prog:
        path = prog if os.path.isabs(prog) else os.path.normpath(os.path.join(cwd, prog))
        if os.path.isdir(path):
            _usage(f"{prog!r} is a directory, not a script or program")
        if os.path.exists(path) and not os.path.isfile(path):
            _usage(f"{prog!r} is not a regular file (a device or socket?), so it cannot be a script")
        if not os.path.isfile(path):
            _usage(f"script {prog!r} not found (looked for {path})")
        if not os.access(path, os.X_OK):
            return ["/bin/sh", path] + argv[1:]
        return [path] + argv[1:]
    if os.path.isfile(os.path.join(cwd, prog)) and shutil.which(prog, path=env.get("PATH", "")) is None:
        path = os.path.join(cwd, prog)
        return ([path] if os.access(path, os.X_OK) else ["/bin/sh", path]) + argv[1:]
    if shutil.which(prog, path=env.get("PATH", os.defpath)) is None:
        _usage(f"command {prog!r} not found on PATH and no file of that name in {cwd}")
    return argv


def _post(client, path: str, body: dict):
    """POST a submit body. When the daemon refuses the -w expression as unparsable, print its
    one-line error and then the expression with a caret under the column (the parser is the
    same pure module the daemon runs, xced.model.deps) and exit 1 (CLI-1: refused)."""
    from xced.api.errors import InvalidRequest

    try:
        return client.request("POST", path, json=body)
    except InvalidRequest as e:
        if e.field != "dependency" or "dependency" not in body or "column" not in e.message:
            raise
        from xced.model.deps import DependencyError, parse_dependency

        try:
            parse_dependency(body["dependency"])
        except DependencyError as de:
            from xcecli.output import err

            err(f"xcecli: error: {' '.join(e.message.split())}")
            err("\n".join(de.pretty().splitlines()[1:]))
            raise typer.Exit(e.exit_code) from None
        raise


def register(app: typer.Typer) -> None:
    @app.command(context_settings={"allow_interspersed_args": False})
    def submit(
        ctx: typer.Context,
        command: List[str] = typer.Argument(..., help="command and arguments, or a script path (put -- before a command with options)"),
        ntasks: Optional[str] = typer.Option(None, "-n", help="tasks: N, or MIN,MAX to take as many as fit now"),
        queue: Optional[str] = typer.Option(None, "-q", "--queue", help="queue (default: the cluster's default queue)"),
        project: Optional[str] = typer.Option(None, "-P", "--project", help="project path, e.g. /physics/hep (default: your group's default project)"),
        name: Optional[str] = typer.Option(None, "-J", "--name", help="job name; NAME[1-100:2]%10 makes an array"),
        stdout: Optional[str] = typer.Option(None, "-o", help="stdout file; %J = job ID, %I = array index"),
        stderr: Optional[str] = typer.Option(None, "-e", help="stderr file (default: with stdout)"),
        run_limit: Optional[str] = typer.Option(None, "-W", help="run limit, [hours:]minutes"),
        memory: Optional[str] = typer.Option(None, "-M", help="memory limit, e.g. 4GB (MB if no unit)"),
        resreq: List[str] = typer.Option([], "-R", help="resource requirement, LSF syntax (repeatable; merged as LSF does)"),
        app: Optional[str] = typer.Option(None, "-a", "--app", help="application profile (default: the cluster's default_application; '' for none)"),
        app_param: List[str] = typer.Option([], "--app-param", help="NAME=VALUE for a parameter the profile declares (repeatable)"),
        pre_exec: Optional[str] = typer.Option(None, "-E", help="the job's own pre-exec command (runs inside the profile's)"),
        post_exec: Optional[str] = typer.Option(None, "-Ep", help="the job's own post-exec command"),
        dependency: Optional[str] = typer.Option(None, "-w", "--dependency", metavar="EXPR",
                                                 help="start only when EXPR is met, e.g. 'done(12) && ended(13[2])': "
                                                      "done/ended/exit/started(ID or ID[INDEX]), exit(ID, >2), "
                                                      "&&, ||, !, ( ); a bare ID means done(ID)"),
        env: List[str] = typer.Option([], "--env", help="NAME=VALUE added to the job's environment (repeatable)"),
        wait: bool = typer.Option(False, "-K", "--wait", help="wait for the job to end and exit with its exit code"),
        parsable: bool = typer.Option(False, "--parsable", help="print only the job ID"),
        as_json: bool = typer.Option(False, "--json", help="print the submit result as JSON"),
        dry_run: bool = typer.Option(False, "--dry-run", help="print the effective job (the daemon parses and merges it) without submitting"),
    ) -> None:
        """Submit a job: xcecli submit [OPTIONS] -- COMMAND [ARGS...]"""
        import json
        import os

        from xced.model.jobs import ArraySpecError, parse_job_name
        from xced.model.units import MAX_ARRAY_SIZE_SETTING, parse_memory_mb, parse_run_limit_s
        from xcecli.output import err

        try:
            cwd = os.getcwd()
        except FileNotFoundError:
            _usage("the current directory no longer exists; cd to a directory the job can run in")
        for opt, val in (("-o", stdout), ("-e", stderr), ("-q", queue), ("-P", project), ("-J", name), ("-E", pre_exec),
                         ("-Ep", post_exec), ("-w", dependency)):
            if val is not None and not val.strip():
                _usage(f"{opt} '': the value is empty")
        job_env = dict(os.environ)
        if job_env.pop("XCE_CLI_SET_PYDANTIC", None):  # set by xcecli itself for its start-up, not the user's
            job_env.pop("PYDANTIC_DISABLE_PLUGINS", None)
        for item in env:
            k, sep, v = item.partition("=")
            if not sep or not k or not (k[0].isalpha() or k[0] == "_") or not all(c.isalnum() or c == "_" for c in k):
                _usage(f"--env {item!r}: expected NAME=VALUE with NAME made of letters, digits and _")
            job_env[k] = v
        argv = resolve_command(list(command), job_env, cwd)
        params: dict[str, str] = {}
        for item in app_param:
            k, sep, v = item.partition("=")
            if not sep or not k.strip():
                _usage(f"--app-param {item!r}: expected NAME=VALUE")
            params[k.strip()] = v
        nmin, nmax = parse_ntasks(ntasks) if ntasks is not None else (None, None)
        if name is not None:
            try:
                parse_job_name(name, MAX_ARRAY_SIZE_SETTING)  # the daemon holds it to max_array_size
            except ArraySpecError as e:
                _usage(str(e))
        rl = None
        if run_limit is not None:
            try:
                rl = parse_run_limit_s(run_limit)
            except ValueError as e:
                _usage(f"-W {run_limit!r}: {e}")
        mem = None
        if memory is not None:
            try:
                mem = parse_memory_mb(memory)
            except ValueError as e:
                _usage(f"-M {memory!r}: {e}")
        # the body of SubmitRequest, built without importing pydantic (CLI-6); the server
        # validates it strictly (D-2)
        body = {"argv": argv, "cwd": cwd, "env": job_env, "name": name, "queue": queue, "project": project,
                "ntasks_min": nmin,
                "ntasks_max": nmax, "stdout": stdout, "stderr": stderr, "run_limit_s": rl, "memory_limit_mb": mem,
                "resreq": list(resreq) or None, "app": app, "app_params": params or None,
                "pre_exec": pre_exec, "post_exec": post_exec, "dependency": dependency}
        body = {k: v for k, v in body.items() if v is not None}
        umask = os.umask(0o022)  # D-7: the job makes its files with the submitter's umask, as in LSF and Slurm
        os.umask(umask)
        body["umask"] = umask
        client = ctx.obj.client()
        if dry_run:
            res = _post(client, "/jobs/dry-run", body).json()
            if as_json:
                print(json.dumps(res, indent=2))
            else:
                eff = res["effective"]
                for k in ("queue", "project", "auth_basis", "ntasks_min", "ntasks_max", "run_limit_s", "memory_limit_mb", "name",
                          "array_size", "run_as", "resreq_text", "dependency"):
                    print(f"{k + ':':<17}{'-' if eff.get(k) is None else eff[k]}")
                for w in res.get("warnings", []):
                    err(f"warning: {w}")
            return
        res = _post(client, "/jobs", body)
        out = res.json()
        for w in out.get("warnings") or []:
            err(f"warning: {w}")
        if as_json and not wait:
            print(json.dumps(out, indent=2))
        elif as_json:
            pass
        elif parsable:
            print(out["job_id"], flush=True)
        else:
            n = out.get("array_size") or 0
            what = f"Job array <{out['job_id']}> ({n} elements)" if n else f"Job <{out['job_id']}>"
            print(f"{what} is submitted to queue <{out['queue']}>.", flush=True)
        if wait:
            if not as_json:
                err("<<Waiting for dispatch ...>>")
            job = client.wait(out["job_id"], on_lost=err)
            if as_json:  # the finished job, exit codes included (CLI-1: tell code 3 from a lost daemon)
                print(job.model_dump_json(indent=2))
            codes = [e.exit_code for e in job.elements if e.exit_code is not None]
            killed_pending = any(e.start_time is None and e.state == "EXIT" for e in job.elements)
            if not as_json:
                err(f"<<Job is finished>> {job.state}")
            if killed_pending and not codes:
                raise typer.Exit(126)
            raise typer.Exit(max(codes) if codes else (0 if job.state == "DONE" else 1))

"""`xcecli hosts`, `queues` (CLI-3; LSF bhosts, bqueues)."""

from __future__ import annotations

import typer


def _num(v):
    """2.0 -> 2 (a resource count shown as the admin wrote it); strings unchanged."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _jobs(jobs: list[str]) -> str | None:
    """The jobs of a host as one cell: "12,13[4]", the first 10 then "+N"."""
    if not jobs:
        return None
    return ",".join(jobs[:10]) + (f",+{len(jobs) - 10}" if len(jobs) > 10 else "")


def _comment(h) -> str | None:
    """Why a host is closed or unavailable: "closed by root: disk swap (draining)", "its
    worker's channel closed" (CLI-4, SCHED-4)."""
    parts = []
    if h.closed_by is not None:
        parts.append(f"closed by {h.closed_by}"
                     + (f": {h.closed_reason}" if h.closed_reason else "") + (" (draining)" if h.draining else ""))
    if h.status == "unavail" and h.status_reason:
        parts.append(h.status_reason)
    return "; ".join(parts) or None


def _load_row(h) -> list:
    """One host's row of `xcecli hosts --load` (RES-7), as LSF's lsload shows it: run queue
    lengths with one decimal, ut in percent, pg and io per second, ls users, it minutes,
    tmp, swp and XCE's free memory in MB; "-" for what the worker has not reported."""
    load = h.load or {}

    def f(name: str, fmt: str):
        v = load.get(name)
        return None if v is None else fmt.format(v * 100 if name == "ut" else v)

    mem = f"{max(h.memory_mb - h.memory_used_mb, 0)}M"
    return [h.name, h.status, f("r15s", "{:.1f}"), f("r1m", "{:.1f}"), f("r15m", "{:.1f}"), f("ut", "{:.0f}%"),
            f("pg", "{:.1f}"), f("io", "{:.0f}"), f("ls", "{:.0f}"), f("it", "{:.0f}"), f("tmp", "{:.0f}M"),
            f("swp", "{:.0f}M"), mem]


def register(app: typer.Typer) -> None:
    @app.command()
    def hosts(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)"),
              load: bool = typer.Option(False, "--load", help="show LSF's load indices instead (lsload): r15s r1m r15m ut pg io ls it tmp swp mem")) -> None:
        """List hosts (LSF bhosts): status (ok, closed_Adm, unavail), slots (MAX total, RUN used),
        jobs, memory, and why a host is closed or unavailable (COMMENT, last). With --load, the
        load indices each host's worker last reported (LSF lsload; RES-7), which select[] and
        order[] read."""
        from xcecli.output import print_json, table

        res = ctx.obj.client().hosts()
        if as_json:
            print_json(res)
            return
        if load:
            table(["HOST_NAME", "STATUS", "r15s", "r1m", "r15m", "ut", "pg", "io", "ls", "it", "tmp", "swp", "mem"],
                  [_load_row(h) for h in res.hosts])
            return
        table(["HOST_NAME", "STATUS", "MAX", "NJOBS", "RUN", "MEM_MB", "MEM_USED_MB", "ATTRIBUTES", "JOBS", "COMMENT"],
              [[h.name, h.status, h.slots, h.njobs, h.slots_used, h.memory_mb, h.memory_used_mb,
                " ".join(f"{k}={_num(v)}" for k, v in {**h.attributes, **h.resources}.items()) or None,
                _jobs(h.jobs), _comment(h)] for h in res.hosts])

    @app.command()
    def queues(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)")) -> None:
        """List queues (LSF bqueues): priority, ceilings and job counts."""
        from xcecli.output import fmt_duration, print_json, table

        res = ctx.obj.client().queues()
        if as_json:
            print_json(res)
            return
        table(["QUEUE_NAME", "PRIO", "MAX_TASKS", "RUNLIMIT", "NJOBS", "PEND", "RUN", "SUSP"],
              [[q.name + (" (default)" if q.default else ""), q.priority, q.max_tasks,
                fmt_duration(q.max_run_limit_s) if q.max_run_limit_s else None, q.njobs, q.pend, q.run, q.susp]
               for q in res.queues])


def register_apps(app: typer.Typer) -> None:
    apps_app = typer.Typer(help="Application profiles (LSF bapp): list them, or show one.", invoke_without_command=True,
                           no_args_is_help=False)

    @apps_app.callback()
    def apps(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)")) -> None:
        """List the application profiles (`xcecli apps show NAME` for one)."""
        if ctx.invoked_subcommand is not None:
            return
        import sys

        from xcecli.output import table

        res = ctx.obj.client().request("GET", "/apps")
        if as_json:
            sys.stdout.buffer.write(res.body + b"\n")
            return
        table(["APP_NAME", "KIND", "DEFAULT", "HASH", "DESCRIPTION"],
              [[a["name"], a["kind"], "yes" if a["default"] else "-", a["content_hash"][:12], a["description"] or None]
               for a in res.json()["apps"]])

    @apps_app.command("show")
    def show(ctx: typer.Context, name: str = typer.Argument(..., metavar="PROFILE", help="the profile's name (xcecli apps lists them)"), as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)")) -> None:
        """One profile in full (LSF bapp -l): every value it binds."""
        import json
        import sys

        from urllib.parse import quote

        if not name.strip():
            raise typer.BadParameter("the profile name is empty")
        res = ctx.obj.client().request("GET", "/apps/" + quote(name, safe=""))
        if as_json:
            sys.stdout.buffer.write(res.body + b"\n")
            return
        a = res.json()
        w = 26
        print(f"{'application:':<{w}}{a['name']}" + (" (the default)" if a["default"] else ""))
        print(f"{'kind:':<{w}}{a['kind']}")
        print(f"{'hash:':<{w}}{a['content_hash']}")
        if a["description"]:
            print(f"{'description:':<{w}}{a['description']}")
        for k, v in a["profile"].items():
            if isinstance(v, dict):
                v = {kk: vv for kk, vv in v.items() if vv is not None}
            if k in ("name", "description", "kind") or v in (None, {}, [], ""):
                continue
            print(f"{k + ':':<{w}}{json.dumps(v) if not isinstance(v, str) else v}")

    app.add_typer(apps_app, name="apps")


def register_api(app: typer.Typer) -> None:
    @app.command("api")
    def api(ctx: typer.Context,
            method: str = typer.Argument(..., help="GET, POST or PUT"),
            path: str = typer.Argument(..., help="path under /xce/v1, e.g. /jobs/12 (or the whole path, "
                                                 "/xce/v1/jobs/12)"),
            data: str = typer.Option(None, "--data", "-d", metavar="JSON", help="JSON request body")) -> None:
        """Send one raw request to the daemon's API and print the JSON answer (for scripts and debugging)."""
        import json
        import sys

        method = method.upper()
        if method not in ("GET", "POST", "PUT"):
            raise typer.BadParameter(f"method {method!r}: use GET, POST or PUT")
        body = None
        if data is not None:
            try:
                body = json.loads(data)
            except ValueError as e:
                raise typer.BadParameter(f"--data is not valid JSON: {e}") from None
        from xced.constants import API_PREFIX

        path = "/" + path.lstrip("/")
        if path == API_PREFIX or path.startswith(API_PREFIX + "/"):  # the full path, as the README writes it
            path = path[len(API_PREFIX):] or "/"
        r = ctx.obj.client().request(method, path, json=body)
        sys.stdout.write(r.text if r.text.endswith("\n") else r.text + "\n")

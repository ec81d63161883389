"""`xceadmin sim run`: replay a workload trace through the daemon's scheduler (SIM-1).

Output: a Rich table on stdout (or `--json`: one object), a progress bar on stderr when
it is a terminal, and with `--plot FILE.png` a figure of queue length and utilisation
over time and the wait-time distribution. Exit codes (CLI-1): 0 done, 1 bad input (an
SWF line that does not parse, no machine size, an unknown policy), 2 usage.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from xceadmin.connect import nonblank_topdir

HELP = "Replay workloads through the scheduler xced runs, on a virtual clock (SIM-1)."

RUN_HELP = (
    "Replay an SWF trace (plain or .gz) on a machine of --procs processors (default: the "
    "trace's MaxProcs header) with --policy easy (first come first served with EASY "
    "backfilling, requested times as estimates) or fcfs, and print average wait, flow time "
    "and bounded slowdown (tau = 10 s), utilisation and makespan.\n\n"
    "Jobs are converted as published simulators do: processors = requested (or allocated "
    "when not given), estimate = requested time, duration = run time clamped to the "
    "estimate; jobs asking for more processors than the machine, or with no run time or "
    "requested time, are dropped and counted.\n\n"
    "--projects FILE replays under a projects file (projects.yaml's form: shares and quotas, "
    "PRJ-6, PRJ-7): SWF group G runs in project /g<G> and user U as u<U>; jobs no cap could "
    "ever hold are refused as at submit, and waits are shown per project too."
)

app = typer.Typer(name="sim", help=HELP, no_args_is_help=True,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command("run", help=RUN_HELP)
def run(
    swf: Annotated[str, typer.Option("--swf", metavar="FILE", help="SWF trace to replay (.swf or .swf.gz).",
                                     show_default=False)],
    policy: Annotated[str, typer.Option("--policy", metavar="easy|fcfs",
                                        help="easy: FCFS with EASY backfilling; fcfs: no backfill.")] = "easy",
    procs: Annotated[Optional[int], typer.Option("--procs", metavar="N", min=1,  # noqa: UP007
                                                 help="Processors of the machine (default: the trace's MaxProcs).",
                                                 show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
    plot: Annotated[Optional[str], typer.Option("--plot", metavar="FILE.png",  # noqa: UP007
                                                help="Also draw queue length, utilisation and waits to FILE.",
                                                show_default=False)] = None,
    per_time: Annotated[bool, typer.Option("--per-time/--per-event",
                                           help="One session per distinct time at which something can change "
                                                "(as the daemon coalesces events), or one per event (as pyss).")
                        ] = True,
    no_estimate: Annotated[str, typer.Option("--no-estimate", metavar="drop|run-time",
                                             help="Jobs with no requested time: drop them (the published rule), "
                                                  "or use their run time as their estimate (e.g. lublin_256.swf, "
                                                  "whose synthetic jobs have none).")] = "drop",
    projects_file: Annotated[Optional[str], typer.Option("--projects", metavar="FILE",  # noqa: UP007
                                                         help="Replay under this projects file's shares and "
                                                              "quotas: SWF group G is project /g<G>, user U is u<U>.",
                                                         show_default=False)] = None,
) -> None:
    import json
    import os
    import sys
    import time

    from xced.api.errors import InvalidRequest

    policy = policy.lower()
    if policy not in ("easy", "fcfs"):
        raise typer.BadParameter(f"{policy!r}: valid policies are easy (FCFS with EASY backfilling) and fcfs",
                                 param_hint="--policy")
    if no_estimate not in ("drop", "run-time"):
        raise typer.BadParameter(f"{no_estimate!r}: give drop or run-time", param_hint="--no-estimate")
    if plot is not None:
        if not plot.lower().endswith((".png", ".svg", ".pdf")):
            raise typer.BadParameter(f"{plot!r}: give a file name ending in .png, .svg or .pdf", param_hint="--plot")
        where = os.path.dirname(os.path.abspath(plot))
        if not os.path.isdir(where) or not os.access(where, os.W_OK):
            raise InvalidRequest(f"--plot {plot}: cannot write there ({where} is not a writable directory); "
                                 f"checked before the replay so no time is lost")
    from xced.sim.engine import simulate
    from xced.sim.metrics import compute_metrics
    from xced.sim.swf import SwfError, read_swf

    projects = None
    if projects_file is not None:  # read first: a bad file costs no replay time
        from xced.sim.projects_file import ProjectsFileError, load_projects

        try:
            projects = load_projects(projects_file)
        except ProjectsFileError as e:
            raise InvalidRequest(f"--projects: {e}") from None
    try:
        trace = read_swf(swf, procs, missing_estimate="run_time" if no_estimate == "run-time" else "drop")
    except SwfError as e:
        raise InvalidRequest(str(e)) from None
    if not trace.jobs:
        raise InvalidRequest(f"{swf}: no job is left to replay after the drop rule ({trace.dropped})")
    t0 = time.perf_counter()
    if sys.stderr.isatty() and not as_json:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), transient=True, console=_console(stderr=True)) as bar:
            task = bar.add_task(f"replaying {len(trace.jobs)} jobs", total=len(trace.jobs))
            result = simulate(trace.jobs, trace.machine_procs, policy, per_event=not per_time,  # type: ignore[arg-type]
                              progress=lambda n: bar.update(task, completed=n), projects=projects)
    else:
        result = simulate(trace.jobs, trace.machine_procs, policy, per_event=not per_time,  # type: ignore[arg-type]
                          projects=projects)
    elapsed = time.perf_counter() - t0
    if not result.outcomes:
        raise InvalidRequest(f"{swf}: every job was refused under --projects {projects_file} "
                             f"({result.refused_example})")
    m = compute_metrics(result.outcomes, trace.machine_procs)
    if plot is not None:
        _plot(plot, result.outcomes, trace.machine_procs, f"{swf.rsplit('/', 1)[-1]}, {policy}")
    out = {
        "trace": swf, "policy": policy, "procs": trace.machine_procs, "procs_from": trace.machine_procs_source,
        "records": trace.total_records, "jobs": len(trace.jobs), "dropped": trace.dropped,
        "clamped": trace.clamped, "sessions": result.sessions, "elapsed_s": round(elapsed, 3),
        "jobs_per_s": round(len(trace.jobs) / elapsed, 1) if elapsed > 0 else None,
        "metrics": m.to_json(), "plot": plot,
    }
    if projects is not None:
        # the same jobs (those let in) without the caps: what the share policy does to waits
        refused = set(result.refused)
        kept = [j for j in trace.jobs if j.job_id not in refused]
        uncapped = simulate(kept, trace.machine_procs, policy, per_event=not per_time)  # type: ignore[arg-type]
        out["projects"] = {"file": projects_file, "refused": len(result.refused),
                           "refused_example": result.refused_example,
                           "uncapped_metrics": compute_metrics(uncapped.outcomes, trace.machine_procs).to_json(),
                           "by_project": _by_project(projects, trace.jobs, result.outcomes, uncapped.outcomes)}
    if as_json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    from rich.table import Table

    t = Table(title=f"{swf} ({policy}, {trace.machine_procs} processors)", show_header=True)
    t.add_column("measure")
    t.add_column("value", justify="right")
    dropped = ", ".join(f"{n} {why}" for why, n in trace.dropped.items()) or "none"
    rows = [
        ("jobs replayed", f"{len(result.outcomes):,} of {trace.total_records:,} (dropped: {dropped}"
                          + (f"; refused under the projects' caps: {len(result.refused):,})" if projects else ")")),
        ("average wait", f"{m.avg_wait_s:,.0f} s"),
        ("median wait", f"{m.median_wait_s:,.0f} s"),
        ("maximum wait", f"{m.max_wait_s:,.0f} s"),
        ("average flow time (wait + run)", f"{m.avg_flow_s:,.0f} s"),
        ("average bounded slowdown (tau 10 s)", f"{m.avg_bounded_slowdown:.2f}"),
        ("utilisation", f"{m.utilisation:.1%}"),
        ("makespan", f"{m.makespan_s:,.0f} s ({m.makespan_s / 86400:.1f} days)"),
        ("scheduling sessions", f"{result.sessions:,}"),
        ("replay time", f"{elapsed:.2f} s ({out['jobs_per_s']:,} jobs/s)"),
    ]
    for k, v in rows:
        t.add_row(k, v)
    _console().print(t)
    if projects is not None:
        pr = out["projects"]
        t = Table(title=f"waits by project under {projects_file} (in brackets: the same jobs without its caps)",
                  show_header=True)
        for col in ("project", "share", "jobs", "average wait", "median wait", "bounded slowdown"):
            t.add_column(col, justify="left" if col in ("project", "share") else "right")
        um = pr["uncapped_metrics"]
        rows_p = pr["by_project"] + [{"project": "all", "share": "", "jobs": m.jobs, "avg_wait_s": m.avg_wait_s,
                                      "median_wait_s": m.median_wait_s,
                                      "avg_bounded_slowdown": m.avg_bounded_slowdown, "uncapped": um}]
        for row in rows_p:
            u = row["uncapped"]
            t.add_row(row["project"], row["share"], f"{row['jobs']:,}",
                      f"{row['avg_wait_s']:,.0f} s ({u['avg_wait_s']:,.0f} s)",
                      f"{row['median_wait_s']:,.0f} s ({u['median_wait_s']:,.0f} s)",
                      f"{row['avg_bounded_slowdown']:.2f} ({u['avg_bounded_slowdown']:.2f})")
        _console().print(t)
        if pr["refused_example"]:
            typer.echo(f"first refusal: {pr['refused_example']}", err=True)
    if plot is not None:
        typer.echo(f"plot written to {plot}")


def _by_project(projects, jobs, outcomes, uncapped) -> list[dict]:
    """Waits per project of the file (in its order), then "(other groups)" (the groups the
    file does not name: share-less projects drawing from the cluster's unassigned part) and
    "(no group)" (group -1: no project, never capped), each beside the same jobs' waits in a
    replay without the caps (`uncapped`)."""
    from xced.sim.engine import sim_project
    from xced.sim.metrics import compute_metrics

    where = {j.job_id: sim_project(j)[0] for j in jobs}
    known = {p.path for p in projects.projects}

    def split(got) -> dict[str, list]:
        out: dict[str, list] = {}
        for o in got:
            p = where.get(o.job_id)
            out.setdefault("(no group)" if p is None else p if p in known else "(other groups)", []).append(o)
        return out

    capped, free = split(outcomes), split(uncapped)
    rows = []
    for name in [p.path for p in projects.projects] + ["(other groups)", "(no group)"]:
        if not capped.get(name):
            continue
        m = compute_metrics(capped[name], 1)  # waits and slowdowns: utilisation means nothing per project
        u = compute_metrics(free[name], 1)
        p = projects.get(name)
        share = "-"
        if p is not None:
            share = (f"{p.share_percent:g}%" if p.share_percent is not None else
                     ", ".join(f"{r} {t.percent:g}%" if t.percent is not None else f"{r} {t.amount:g}"
                               for r, t in p.share.items()) or "none")
            if p.quota:
                share += "; quota " + ", ".join(f"{r} {v:g}" for r, v in p.quota.items())
        rows.append({"project": name, "share": share, "jobs": m.jobs, "avg_wait_s": m.avg_wait_s,
                     "median_wait_s": m.median_wait_s, "avg_bounded_slowdown": m.avg_bounded_slowdown,
                     "uncapped": {"avg_wait_s": u.avg_wait_s, "median_wait_s": u.median_wait_s,
                                  "avg_bounded_slowdown": u.avg_bounded_slowdown}})
    return rows


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def _plot(path: str, outcomes, procs: int, title: str) -> None:
    """Queue length and daily utilisation over time, and the wait-time distribution, in one
    figure (matplotlib, Agg backend: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from xced.api.errors import InvalidRequest
    from xced.sim.metrics import queue_length_series

    q = queue_length_series(outcomes)
    t0 = min(o.submit for o in outcomes)
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(10, 10))
    ax1.step([(t - t0) / 86400 for t, _ in q], [v for _, v in q], where="post", linewidth=0.6)
    ax1.set_ylabel("jobs waiting")
    ax1.set_xlabel("days since the first submit")
    ax1.set_title(title)
    # utilisation as a daily mean: the raw step curve of a year is a solid block
    days = int((max(o.end for o in outcomes) - t0) // 86400) + 1
    busy = [0.0] * days
    for o in outcomes:
        a, b = o.start - t0, o.end - t0
        d = int(a // 86400)
        while a < b:
            cut = min(b, (d + 1) * 86400.0)
            busy[d] += (cut - a) * o.procs
            a, d = cut, d + 1
    ax2.plot(range(days), [100.0 * x / (procs * 86400.0) for x in busy], linewidth=0.8)
    ax2.set_ylim(0, 100)
    ax2.set_ylabel("utilisation, % (daily mean)")
    ax2.set_xlabel("days since the first submit")
    waits = sorted(o.start - o.submit for o in outcomes)
    ax3.hist([w / 3600 for w in waits], bins=100, log=True)
    ax3.set_xlabel("wait, hours")
    ax3.set_ylabel("jobs (log)")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise InvalidRequest(f"--plot {path}: cannot write it: {e.strerror}") from None
    finally:
        plt.close(fig)


VERIFY_HELP = (
    "Replay a recording made by `xceadmin sim record` through this scheduler and list every "
    "decision that differs (a dispatch, an allocation, a reservation, a pend reason), one per "
    "line. Exit 0 when none differs, 1 when some do (or the recording cannot be read)."
)


@app.command("verify", help=VERIFY_HELP)
def verify(
    recording: Annotated[str, typer.Argument(metavar="REC", help="A recording (JSON Lines).", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print {sessions, differences: [...]} on stdout.")] = False,
) -> None:
    import json
    import sys

    from xced.api.errors import InvalidRequest
    from xced.sim.recording import RecordingError
    from xced.sim.recording import verify as replay

    try:
        n, diffs = replay(recording)
    except RecordingError as e:
        raise InvalidRequest(str(e)) from None
    if as_json:
        sys.stdout.write(json.dumps({"sessions": n, "differences": [
            {"session": d.seq, "line": d.line, "element": d.element, "what": d.what, "recorded": d.recorded,
             "replayed": d.replayed} for d in diffs]}, indent=2) + "\n")
    else:
        for d in diffs:
            typer.echo(str(d))
        typer.echo(f"{n} session{'s' if n != 1 else ''} replayed, {len(diffs)} "
                   f"{'decision differs' if len(diffs) == 1 else 'decisions differ'}", err=bool(diffs))
    raise typer.Exit(1 if diffs else 0)


RECORD_HELP = (
    "Make the TopDir's running xced record every scheduling session (its snapshot, with the "
    "config and profiles in force, and its decisions) to <TopDir>/recordings/NAME.jsonl, as "
    "JSON Lines; `--stop` ends the recording (so does a daemon restart). Replay it with "
    "`xceadmin sim verify FILE`. Admins only; from another host, `xceadmin --controller URL "
    "--controller-key KEY sim record ...` signs with the admin key (the file is on the controller). "
    "Exit 0 done, 1 refused, 2 usage, 3 no daemon."
)


@app.command("record", help=RECORD_HELP)
def record(
    name: Annotated[Optional[str], typer.Option("--name", metavar="NAME",  # noqa: UP007
                                                help="Recording name: <TopDir>/recordings/NAME.jsonl (a new file).",
                                                show_default=False)] = None,
    stop: Annotated[bool, typer.Option("--stop", help="Stop the recording.")] = False,
    topdir: Annotated[Optional[str], typer.Option("--topdir", metavar="DIR", callback=nonblank_topdir,  # noqa: UP007
                                                  help="TopDir of the daemon; default $XCE_TOPDIR, else the "
                                                       "user's data dir.", show_default=False)] = None,
) -> None:
    from xceadmin.connect import connect

    if stop == (name is not None):
        raise typer.BadParameter("give either --name NAME (start recording) or --stop")
    if name is not None and not name.strip():
        raise typer.BadParameter("--name is empty; give a file name such as night-1")
    body = {"stop": True} if stop else {"name": name}
    with connect(topdir) as c:
        got = c.request("POST", "/sim/record", json=body).json()
    if stop:
        typer.echo(f"stopped: {got['sessions']} session{'s' if got['sessions'] != 1 else ''} recorded to "
                   f"{got['path']}")
    else:
        typer.echo(f"recording sessions to {got['path']}; stop with `xceadmin sim record --stop`")

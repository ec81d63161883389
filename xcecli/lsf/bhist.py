"""`bhist` (CLI-8): LSF's bhist on XCE: a job's history, from the events XCE records for each
of its transitions (D-5; GET /jobs/ID/events).

    bhist [-l] [-a] [-n N | -n MIN,MAX] [ID | "ID[INDEX]" ...]

Without `-l`, LSF's summary of the seconds each job spent in each state:

    Summary of time in seconds spent in various states:
    JOBID   USER    JOB_NAME  PEND    PSUSP   RUN     USUSP   SSUSP   UNKWN   TOTAL
    12      alice   sleep     1       0       30      0       0       0       31

With `-l`, LSF's long form: a header `Job <12>, User <alice>, Project <default>, Command
<sleep 30>`, then one dated line per event in LSF's phrases ("Submitted from host <H>, to
Queue <Q>, CWD <DIR>;", "Dispatched to <h1>;", "Starting;", "Suspended by the job owner or
the LSF administrator;", "Running;", "Signal <USR1> requested by user or administrator
<alice>;", "Done successfully.", "Exited with exit code N.", "Exited by signal N."), then
the same summary as a table. Times are LSF's (`Thu Mar 13 17:32:05`), local time. For an
array, one block per element. Without an ID: the caller's unfinished jobs and those
finished lately (with `-a`: all the caller's jobs the daemon knows, of any age).

`-n N` (LSF: how many event log files to search, `0` all of them; `-n MIN,MAX` a range) is
checked and taken (logfiles), and changes nothing: LSF rotates its event log
(lsb.events, lsb.events.1, ...) and by default searches only the current file, while XCE
keeps every job's events in one store that is never rotated, and every search reads all
of it, what LSF would find with `-n 0`. A job ID is found whatever its age.

Exit codes: 0 shown; 255 (LSF_FAILED) when a job was not found (`Job <N>: No matching job
found` on stderr, LSF's words) or for a usage error; 3 daemon unreachable. Sources: LSF's
bhist pages and examples, docs/lsf-behaviour.md section 5 [53] and the shared reference's
bhist -l example (`Dispatched to <intel4>`); the termination phrases of LSF 6.2's
Administration Guide p. 598 ("Exited by signal 2.",
http://38.142.81.21:8001/manual/hp/hp-xc-system-3-x-software/platform-lsf-administration-guide-version-62/page-598.html).
Start-up (CLI-7): no pydantic, rich or typer on this path.
"""

from __future__ import annotations

import sys
import time

from xced.api.listing import one_line
from xcecli.lsf.common import LSF_FAILED, LsfUsage, read_options, run

SPEC = {"-l": ("long", "flag"), "-a": ("all", "flag"), "-n": ("logfiles", "one")}
#: LSF's most event log files bhist -n searches
MAX_LOGFILES = 100


def logfiles(text: str) -> tuple[int, int]:
    """`-n N` or `-n MIN,MAX` -> (MIN, MAX) of the event log files LSF's bhist would search
    (`-n N`: the current file and the N-1 before it, (0, N-1); `-n 0`: all of them, (0,
    100)). LSF searches at most 100 files. XCE keeps every job's events in one store that
    is never rotated (the current file and every older one at once), so each of these reads
    all of it: the value is checked, then changes nothing. Raises LsfUsage for anything
    else, saying what is valid. Source: bhist.1's synopsis `-n number_logfiles | -n
    min_logfile, max_logfile | -n 0` and lsb.events.5 ("The bhist command searches the most
    current lsb.events file"; older ones are lsb.events.1, .2, ...), docs/lsf-behaviour.md
    section 5 [95]."""
    t = text.replace(" ", "")
    lo, comma, hi = t.partition(",")
    ok = lo.isdigit() and (not comma or hi.isdigit())
    if ok:
        a = int(lo)
        b = int(hi) if comma else (MAX_LOGFILES if a == 0 else a - 1)
        if comma and a <= b <= MAX_LOGFILES or not comma and a <= MAX_LOGFILES:
            return a, b
    raise LsfUsage(f"-n {text[:40]!r}: give the number of event log files to search, 0 to {MAX_LOGFILES} (0: all), "
                   f"or MIN,MAX with 0 <= MIN <= MAX <= {MAX_LOGFILES}; XCE keeps one event store and always "
                   f"searches all of it")
#: the states of LSF's summary, in its order (UNKWN: XCE has no such state, always 0)
STATES = ("PEND", "PSUSP", "RUN", "USUSP", "SSUSP", "UNKWN")


def lsf_time(t: float) -> str:
    """LSF's date of an event: `Thu Mar 13 17:32:05` (local time)."""
    return time.strftime("%a %b %d %H:%M:%S", time.localtime(t))


def durations(events: list[dict], now: float) -> dict[str, int]:
    """Seconds spent in each of STATES from `events` (one element's, in time order: each
    transition's `to_state` holds from its time to the next transition), up to the end
    (`now` for an element still going); TOTAL their sum. Rounded to whole seconds, as LSF's."""
    spent = {s: 0.0 for s in STATES}
    state, since = None, None
    for ev in events:
        to = ev.get("to_state")
        if not to:
            continue
        if state in spent and since is not None:
            spent[state] += max(0.0, ev["time"] - since)
        state, since = to, ev["time"]
    if state in spent and since is not None:
        spent[state] += max(0.0, now - since)
    out = {s: int(round(v)) for s, v in spent.items()}
    out["TOTAL"] = sum(out.values())
    return out


def _phrase(ev: dict, el: dict, master: str, job: dict) -> str | None:
    """LSF's bhist -l words for one event (module docstring), or None for an event LSF
    does not show."""
    kind, reason = ev["kind"], one_line(ev.get("reason") or "")  # one line, bidi and zero-width escaped
    if kind == "SUBMIT":
        return (f"Submitted from host <{job.get('from_host') or master}>, to Queue <{job['queue']}>, "
                f"CWD <{one_line(job['cwd'])}>;")
    if kind == "DISPATCH":
        hosts = " ".join(f"{a['slots']}*{a['host']}" if a["slots"] > 1 else a["host"] for a in el.get("alloc") or [])
        return f"Dispatched to <{hosts or reason.removeprefix('dispatched to ')}>;\nStarting;"
    if kind in ("STOP",):
        return "Suspended by the job owner or the LSF administrator;"
    if kind == "HOLD":
        if "by user" in reason:  # xced.controller.machine: "The job was suspended by user while pending"
            return "Suspended by the job owner or the LSF administrator while pending;"
        return f"Suspended by the system: {reason};"
    if kind == "RESUME":
        return "Running;"
    if kind in ("RELEASE", "RELEASE_ONE"):
        return "Waiting; released;"
    if kind == "KILL_REQUEST":  # with the kill's reason (bkill -C), as the event records it
        why = reason.partition("kill reason: ")[2]
        return (f"Signal <KILL> requested by user or administrator <{ev['actor'].partition(':')[2] or ev['actor']}>"
                + (f"; kill reason: {why};" if why else ";"))
    if kind == "SIGNAL":
        sig = reason.split()[1].removeprefix("SIG") if reason.startswith("signal ") else "?"
        return f"Signal <{sig}> requested by user or administrator <{ev['actor'].partition(':')[2] or ev['actor']}>;"
    if kind == "REQUEUE":
        return f"Pending: Requeued job is waiting for rescheduling; ({reason})"
    if kind == "DONE":
        return "Done successfully."
    if kind in ("EXIT", "KILL", "LOST"):
        code = el.get("exit_code")
        sig = el.get("exit_signal")
        if sig:
            import signal as _signal

            try:
                num = int(_signal.Signals[sig])
                return f"Exited by signal {num}. ({reason})" if code is None else \
                    f"Exited with exit code {code}. ({reason})"
            except KeyError:
                pass
        if code is not None:
            return f"Exited with exit code {code}. ({reason})"
        return f"Exited; {reason.rstrip('.')}."
    return None


def _long(job: dict, events: list[dict], master: str, now: float, command: str) -> list[str]:
    """The bhist -l blocks of one job: one per element (a plain job has one). `command`: the
    job's command as LSF shows it, the line as typed (`_command`)."""
    blocks = []
    for el in job["elements"]:
        ref = el["id"]
        mine = [ev for ev in events if ev["id"] in (ref, str(job["job_id"]))]
        name = job.get("name")  # bsub -J's: LSF's bhist -l names it after the job ID ("Job Name <NAME>")
        if name and job.get("array_spec"):
            name = f"{name}[{el['index']}]"
        lines = [f"Job <{ref}>, " + (f"Job Name <{one_line(name)}>, " if name else "")
                 + f"User <{job['user']}>, Project <{job.get('project') or 'default'}>, Command <{one_line(command)}>"]
        for ev in mine:
            p = _phrase(ev, el, master, job)
            for line in (p.split("\n") if p is not None else ()):  # a dispatch is two lines: and Starting
                lines.append(f"{lsf_time(ev['time'])}: {line}")
        end = el.get("end_time") if el["state"] in ("DONE", "EXIT") else None
        d = durations(mine, end if end is not None else now)
        lines.append("")
        lines.append(f"Summary of time in seconds spent in various states by  {lsf_time(end or now)}")
        lines.append("  " + "".join(f"{s:<9}" for s in (*STATES, "TOTAL")).rstrip())
        lines.append("  " + "".join(f"{d[s]:<9}" for s in (*STATES, "TOTAL")).rstrip())
        blocks.append("\n".join(lines))
    return blocks


def _command(c, jid: int, job: dict) -> str:
    """Job `jid`'s command as LSF's bhist -l shows it, `Command <LINE>`: the command line as
    the user typed it (bsub's, run as /bin/sh -c LINE), which the daemon's listing gives as
    its COMMAND cell (JobSpec.shown_command); a job without one shows its argv quoted."""
    import shlex

    rows = c.request_retried("GET", "/jobs/table", params={"fields": "id command", "id": [str(jid)]}).json()["rows"]
    return rows[0][1] if rows and rows[0][1] is not None else shlex.join(job["argv"])


def _ids(c, all_: bool) -> list[int]:
    """The caller's jobs a bare bhist shows: unfinished and lately finished (all with -a)."""
    params = {"fields": "id"}
    if all_:
        params["all"] = "true"
    rows = c.request_retried("GET", "/jobs/table", params=params).json()["rows"]
    out: list[int] = []
    for r in rows:
        j = int(str(r[0]).partition("[")[0])
        if j not in out:
            out.append(j)
    return out


def bhist(argv: list[str]) -> int:
    """Run `bhist ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xced.api.errors import NotFound
    from xcecli.lsf.jobctl import client, job_id

    opts, args = read_options(argv, SPEC, interspersed=True)
    if opts.get("logfiles") is not None:
        logfiles(str(opts["logfiles"]))  # checked; one store, always searched whole
    refs = [job_id(a) for a in args]
    c = client()
    if not refs:
        refs = [(j, None) for j in _ids(c, bool(opts.get("all")))]
        if not refs:
            print("No matching job found", file=sys.stderr)
            return LSF_FAILED
    master = c.request_retried("GET", "/params").json()["master_host"] if opts.get("long") else ""
    now = time.time()
    rc, blocks, rows = 0, [], []
    for jid, idx in refs:
        try:
            job = c.request_retried("GET", f"/jobs/{jid}").json()
            events = c.request_retried("GET", f"/jobs/{jid}/events").json()["events"]
        except NotFound:
            print(f"Job <{jid}>: No matching job found", file=sys.stderr)
            rc = LSF_FAILED
            continue
        if idx is not None:
            job["elements"] = [e for e in job["elements"] if e["index"] == idx]
            if not job["elements"]:
                print(f"Job <{jid}[{idx}]>: No matching job found", file=sys.stderr)
                rc = LSF_FAILED
                continue
        if opts.get("long"):
            blocks += _long(job, events, master, now, _command(c, jid, job))
            continue
        # JOB_NAME: bsub -J, else the command line as typed (LSF's default job name), not the
        # /bin/sh that runs a bsub line
        name = one_line(job.get("name") or "") or _command(c, jid, job) or "-"  # a -J name's bidi escaped
        for el in job["elements"]:
            mine = [ev for ev in events if ev["id"] in (el["id"], str(jid))]
            end = el.get("end_time") if el["state"] in ("DONE", "EXIT") else None
            d = durations(mine, end if end is not None else now)
            rows.append([el["id"], job["user"], name] + [str(d[s]) for s in (*STATES, "TOTAL")])
    if opts.get("long"):
        sep = "\n" + "-" * 78 + "\n\n"
        if blocks:
            print(sep.join(blocks))
    elif rows:
        head = ["JOBID", "USER", "JOB_NAME", *STATES, "TOTAL"]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        print("Summary of time in seconds spent in various states:")
        for r in [head, *rows]:
            print("  ".join(f"{v:<{w}}" for v, w in zip(r, widths)).rstrip())
    return rc


def main() -> None:
    """The `bhist` console script."""
    run("bhist", lambda: bhist(sys.argv[1:]))


if __name__ == "__main__":
    main()

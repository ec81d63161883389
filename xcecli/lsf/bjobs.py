"""`bjobs`: LSF's job listing on XCE, with LSF's options and output formats (CLI-8, CLI-3).

What it prints, and the sources (docs/lsf-behaviour.md section 5 has the URLs):

- The default table has LSF's columns and fixed widths, JOBID 7, USER 7, STAT 5, QUEUE 10,
  FROM_HOST 11, EXEC_HOST 11, JOB_NAME 10, SUBMIT_TIME 12, each followed by one blank,
  as the real output kept in tests/data/lsf_output_samples/ shows. A longer value is cut:
  a job name to its last 9 characters behind a `*` (`*l_cmd_bd)`), any other text at the
  end (`1*launch_ho`); a job ID is never cut, it pushes the row right instead. A parallel
  job's EXEC_HOST is `N*host`, one host a line, the later hosts on continuation lines that
  start at the EXEC_HOST column (pysqa's sample); a one-slot job's is the bare host. A
  pending job's EXEC_HOST is blank. SUBMIT_TIME is `Oct 31 13:00` (local time, the day
  padded to two places).
- `-w` cuts nothing (a value longer than its column pushes the rest of the row right, one
  blank after it) and gives EXEC_HOST one host name per slot joined by `:` on one line
  (Nextflow's `bjobs -w` sample).
- `-p` lists pending (PEND) jobs with each job's pending reason under its row (LSF drops
  the EXEC_HOST column there); `-r` running, `-s` suspended (PSUSP, USUSP; `-ps` both),
  `-d` finished ones, `-a` all (unfinished ones and those finished within the clean
  period); by default the unfinished jobs. `-u USER|all`, `-q QUEUE`, `-P PROJECT` and
  `-J NAME` (`*` matches any text) filter.
- Job IDs as arguments (`123`, `123[4]`, `"123[1-3,5]"`) show those jobs in any state and of
  any age: a job that left the daemon's memory after the clean period is read back from
  the store with its final state (JOB-11). An array is shown as a row per element, JOBID
  the array's ID and JOB_NAME `name[index]`. A job ID the cluster does not know is
  `Job <ID> is not found` on stderr and exit code 255.
- `-o "field[:[-][width]] ... [delimiter='c']"` chooses the columns by LSF's field names
  (FIELDS); a bare field is as wide as its widest value, `field:N` at most N characters
  (a job name cut with a leading `*`, other values at the end), `field:-N` right-aligned,
  `field:` the field's usual width; with a delimiter the values are joined by it, uncut.
  An empty value is `-`. An unknown field is an error listing the valid ones.
- `-json` prints the `-o` columns (or, where LSF requires -o, the default columns) as LSF
  does: `{"COMMAND":"bjobs","JOBS":N,"RECORDS":[{"JOBID":"1",...}]}`, upper-case keys,
  every value a string, an empty value "".
- `-l` prints each job (each array element) in LSF's long form with the phrases tools
  parse: `Job <ID>, Job Name <NAME>, User <U>, ... Status <STAT>, Queue <Q>, Command <C>`,
  `DATE: Submitted from host <H>, CWD <DIR>;`, `DATE: Started on <HOST>, ...;` (`Started on
  N Hosts/Processors <N*host> ...` for a parallel job), `DATE: Done successfully.`,
  `DATE: Exited with exit code N.`, and ` PENDING REASONS:` with the reasons under it. Lines
  are not wrapped at 80 columns (LSF's -UF), so a phrase is never split.
- With no job to show: `No unfinished job found` (`No job found` with -a, `No pending job
  found` ...) on stderr, exit 0; with LSB_BJOBS_CONSISTENT_EXIT_CODE=Y (LSF's lsf.conf
  setting, read here from the environment) exit 255, as LSF documents for that setting.
- States are D-5's, spelled as LSF spells them: PEND, PSUSP, RUN, USUSP, DONE, EXIT.

It reads its command line with the fast path's reader (xcecli.lsf.common.read_options) and
imports no pydantic, rich or typer (CLI-7). The rows come from the daemon's GET /jobs/table,
one per element, with only the columns asked for (issue 17).
"""

from __future__ import annotations

import os
import sys
import time

from xced.api.listing import one_line
from xcecli.lsf.common import LSF_FAILED, LsfUsage, read_options, run
from xcecli.lsf.jobctl import job_args  # noqa: F401 - the ID parser bjobs shares with bkill & co.

SPEC = {
    "-w": ("wide", "flag"), "-a": ("all", "flag"), "-u": ("user", "one"), "-q": ("queue", "one"),
    "-J": ("name", "one"), "-P": ("project", "one"), "-p": ("pending", "flag"), "-p0": ("pending", "flag"),
    "-p1": ("pending", "flag"), "-p2": ("pending", "flag"), "-p3": ("pending", "flag"), "-r": ("running", "flag"),
    "-s": ("suspended", "flag"), "-d": ("done", "flag"), "-noheader": ("noheader", "flag"), "-o": ("format", "one"),
    "-json": ("json", "flag"), "-l": ("long", "flag"), "-UF": ("long", "flag"), "-h": ("help", "flag"),
}
#: the one-letter flags LSF lets a user bunch (`-aw`, `-lp`)
_BUNCHED = "warpsdl"

USAGE = ("Usage: bjobs [-a] [-d] [-p] [-r] [-s] [-w] [-l] [-noheader] [-json] [-u user_name|all] [-q queue_name]\n"
         "             [-J job_name] [-P project] [-o \"field[:[-][width]] ... [delimiter='c']\"]\n"
         "             [job_ID | \"job_ID[index_list]\" ...]\n")

#: LSF's -o field names (and the aliases LSF takes for some) -> (header, the daemon's fields it needs)
FIELDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "jobid": ("JOBID", ("id",)), "jobindex": ("JOBINDEX", ("index",)), "stat": ("STAT", ("state",)),
    "user": ("USER", ("user",)), "queue": ("QUEUE", ("queue",)), "job_name": ("JOB_NAME", ("job_name",)),
    "command": ("COMMAND", ("command",)), "proj_name": ("PROJ_NAME", ("project",)),
    "from_host": ("FROM_HOST", ("from_host",)), "exec_host": ("EXEC_HOST", ("hosts",)),
    "nexec_host": ("NEXEC_HOST", ("hosts",)), "slots": ("SLOTS", ("hosts", "ntasks")),
    "submit_time": ("SUBMIT_TIME", ("submit_time",)), "start_time": ("START_TIME", ("start_time",)),
    "finish_time": ("FINISH_TIME", ("end_time",)), "exit_code": ("EXIT_CODE", ("exit_code", "exit_signal", "state")),
    "exit_reason": ("EXIT_REASON", ("exit_reason",)), "pend_reason": ("PEND_REASON", ("reason", "state")),
}
ALIASES = {"id": "jobid", "name": "job_name", "cmd": "command", "proj": "proj_name", "project": "proj_name"}
#: the usual width of each field (`-o "field:"`, and the default table's columns)
WIDTHS = {"jobid": 7, "jobindex": 8, "stat": 5, "user": 7, "queue": 10, "job_name": 10, "command": 15,
          "proj_name": 11, "from_host": 11, "exec_host": 11, "nexec_host": 10, "slots": 5, "submit_time": 12,
          "start_time": 12, "finish_time": 12, "exit_code": 9, "exit_reason": 20, "pend_reason": 20}
DEFAULT = ["jobid", "user", "stat", "queue", "from_host", "exec_host", "job_name", "submit_time"]

UNFINISHED = ("PEND", "PSUSP", "RUN", "USUSP")


def main() -> None:
    """The `bjobs` console script: run `bjobs ARGV` and exit with its code (see the module's
    docstring; usage errors are `bjobs: MESSAGE` and exit 255, xcecli.lsf.common.run)."""
    run("bjobs", lambda: bjobs(sys.argv[1:]))


def _unbunch(argv: list[str]) -> list[str]:
    """`-aw` -> `-a -w`: LSF reads one-letter flags bunched as getopt does."""
    out = []
    for a in argv:
        if a == "--":
            out += argv[len(out):]
            break
        if a[:1] == "-" and a[1:2] != "-" and len(a) > 2 and a not in SPEC and all(c in _BUNCHED for c in a[1:]):
            out += [f"-{c}" for c in a[1:]]
        else:
            out.append(a)
    return out


def parse_format(text: str) -> tuple[list[tuple[str, int | None, bool]], str | None]:
    """`-o` text -> ([(field, width or None for unlimited, right-aligned)], delimiter or None).
    `field:` takes the field's usual width (WIDTHS); a second `:unit` is accepted and ignored
    (XCE's memory fields are not offered). Raises LsfUsage for an unknown field (listing the
    valid ones), a bad width, a malformed delimiter, or no field."""
    import re

    delim = None
    m = re.search(r"""\s*delimiter=(['"])(.*?)\1\s*$""", text)
    if m:
        delim = m.group(2)
        if len(delim) != 1:
            raise LsfUsage(f"-o: delimiter={m.group(1)}{delim}{m.group(1)}: the delimiter is one character, "
                           f"e.g. delimiter=','")
        text = text[:m.start()]
    elif "delimiter" in text:
        raise LsfUsage("-o: the delimiter is written last, quoted: delimiter='c'")
    out = []
    bad = []
    for word in text.split():
        name, colon, spec = word.partition(":")
        name = ALIASES.get(name.lower(), name.lower())
        if name not in FIELDS:
            bad.append(word.partition(":")[0])
            continue
        width, right = None, False
        if colon:
            spec = spec.partition(":")[0]
            right = spec.startswith("-")
            digits = spec[1:] if right else spec
            if digits and not (digits.isdigit() and 0 < int(digits) <= 4096):
                raise LsfUsage(f"-o: {word}: a width is a number from 1 to 4096, e.g. {name}:10 or {name}:-10")
            width = int(digits) if digits else WIDTHS[name]
        out.append((name, width, right))
    if bad:
        raise LsfUsage(f"-o: unknown field(s) {', '.join(bad)}; valid fields: {' '.join(FIELDS)} "
                       f"(aliases: {' '.join(f'{a}={f}' for a, f in ALIASES.items())})")
    if not out:
        raise LsfUsage(f"-o: no field named; valid fields: {' '.join(FIELDS)}")
    return out, delim


# ---------------------------------------------------------------- the cells

_TIMES: dict[int, str] = {}


def lsf_time(t: float | None) -> str | None:
    """Epoch seconds -> LSF's `Oct 31 13:00` (local time; the day padded to two places, as
    `Jan  7 09:59`), None for None."""
    if t is None:
        return None
    m = int(t) // 60
    s = _TIMES.get(m)
    if s is None:
        lt = time.localtime(m * 60)
        s = _TIMES[m] = f"{time.strftime('%b', lt)} {lt.tm_mday:2d} {lt.tm_hour:02d}:{lt.tm_min:02d}"
    return s


def alloc(hosts: str | None) -> list[tuple[str, int]]:
    """The daemon's EXEC_HOST cell (`h1:2*h2`, xced.api.listing) -> [(host, slots)]."""
    if not hosts:
        return []
    out = []
    for part in hosts.split(":"):
        n, star, h = part.partition("*")
        out.append((h, int(n)) if star else (part, 1))
    return out


def per_slot(pairs: list[tuple[str, int]]) -> str | None:
    """EXEC_HOST of `-w`, `-o` and `-json`: one host name per slot joined by `:` (LSF 10, as
    Nextflow's `bjobs -w` sample and LSF's -json output show it)."""
    return ":".join(":".join([h] * n) for h, n in pairs) or None


def host_lines(pairs: list[tuple[str, int]]) -> list[str]:
    """EXEC_HOST of the default table: `N*host` per host (pysqa's sample), the bare host for
    a one-slot job."""
    if sum(n for _, n in pairs) == 1:
        return [pairs[0][0]]
    return [f"{n}*{h}" for h, n in pairs]


def _exit_code(r: dict) -> object:
    """EXIT_CODE as LSF gives it: only for an EXIT job; a job ended by a signal has 128 plus
    the signal's number, as its shell would report it."""
    if r.get("state") != "EXIT":
        return None
    if r.get("exit_code") is not None:
        return r["exit_code"]
    sig = r.get("exit_signal")
    if sig:
        import signal

        try:
            return 128 + int(getattr(signal, sig if sig.startswith("SIG") else "SIG" + sig))
        except (AttributeError, TypeError, ValueError):
            return None
    return None


def cell(field: str, r: dict) -> object:
    """The value of LSF field `field` of row `r` (the daemon's cells by name), None for none."""
    if field == "jobid":
        return r["id"]
    if field == "jobindex":
        return r["index"]
    if field == "stat":
        return r["state"]
    if field in ("user", "queue", "job_name", "command", "from_host", "exit_reason"):
        return r[field]
    if field == "proj_name":
        return r["project"]
    if field == "exec_host":
        return per_slot(alloc(r["hosts"]))
    if field == "nexec_host":
        return len(alloc(r["hosts"])) or None
    if field == "slots":
        pairs = alloc(r["hosts"])
        return sum(n for _, n in pairs) if pairs else r["ntasks"]
    if field == "submit_time":
        return lsf_time(r["submit_time"])
    if field == "start_time":
        return lsf_time(r["start_time"])
    if field == "finish_time":
        return lsf_time(r["end_time"])
    if field == "exit_code":
        return _exit_code(r)
    if field == "pend_reason":
        return r["reason"] if r["state"] in ("PEND", "PSUSP") else None
    raise KeyError(field)


def cut(value: str, width: int, name: str) -> str:
    """`value` cut to `width` characters as LSF cuts: a job name keeps its end behind a `*`
    (`*l_cmd_bd)`), anything else keeps its start."""
    if len(value) <= width:
        return value
    if name in ("job_name", "command"):
        return "*" + value[len(value) - width + 1:] if width > 1 else "*"
    return value[:width]


# ---------------------------------------------------------------- the outputs

def _table(rows: list[dict], wide: bool, noheader: bool, pending: bool) -> list[str]:
    """The default table (module docstring); written for speed: 10,000 rows within the
    start-up aim of CLI-7 (issue 18 part 7)."""
    cols = [c for c in DEFAULT if not (pending and c == "exec_host")]
    widths = [WIDTHS[c] for c in cols]
    lines = [] if noheader else [_line([(FIELDS[c][0], WIDTHS[c]) for c in cols])]
    at_exec = cols.index("exec_host") if "exec_host" in cols else None
    form = " ".join(f"{{:<{w}}}" for w in widths).format  # a longer value pushes the row right
    for r in rows:
        hosts = r["hosts"]
        extra: list[str] = []
        if hosts is None:
            ex = ""
        elif wide:
            ex = per_slot(alloc(hosts)) or ""
        elif ":" not in hosts and "*" not in hosts:
            ex = hosts
        else:
            hl = host_lines(alloc(hosts))
            ex, extra = hl[0], hl[1:]
        name = r["job_name"] or ""
        vals = [str(r["id"]), r["user"], r["state"], r["queue"], r["from_host"] or "", ex, name,
                lsf_time(r["submit_time"]) or ""]
        if at_exec is None:
            del vals[5]
        if not wide:
            for i in range(1, len(vals)):
                if len(vals[i]) > widths[i]:
                    vals[i] = cut(vals[i], widths[i], cols[i])
        lines.append(form(*vals).rstrip())
        if extra:  # continuation lines start where this row's EXEC_HOST did
            at = sum(max(len(v), w) + 1 for v, w in zip(vals[:at_exec], widths))
            lines += [" " * at + h for h in extra]
        if pending and r["state"] in ("PEND", "PSUSP"):
            reason = r.get("reason") or ("The job was suspended by user while pending" if r["state"] == "PSUSP"
                                         else "New job is waiting for scheduling")
            lines.append(" " + reason + ("" if reason.endswith(";") else ";"))
    return lines


def _line(cells: list[tuple[str, int]]) -> str:
    return "".join(v.ljust(w) + " " for v, w in cells).rstrip()


def _custom(rows: list[dict], fmt: list[tuple[str, int | None, bool]], delim: str | None, noheader: bool) -> list[str]:
    heads = [FIELDS[f][0] for f, _, _ in fmt]
    values = []
    for r in rows:
        vals = []
        for f, _, _ in fmt:
            v = cell(f, r)
            vals.append("-" if v is None or v == "" else str(v))
        values.append(vals)
    if delim is not None:
        out = [] if noheader else [delim.join(heads)]
        return out + [delim.join(v) for v in values]
    widths = []
    for i, (f, w, _) in enumerate(fmt):
        widths.append(w if w is not None else max([len(heads[i])] + [len(v[i]) for v in values]))
    out = []
    for vals in ([] if noheader else [heads]) + values:
        parts = []
        for i, (f, w, right) in enumerate(fmt):
            v = cut(vals[i], widths[i], f)
            parts.append(v.rjust(widths[i]) if right else v.ljust(widths[i]))
        out.append(" ".join(parts).rstrip())
    return out


def _json(rows: list[dict], fields: list[str]) -> str:
    """LSF's -json text: two-space indents, `"KEY":"value"` without a blank, every value a
    string ("" for none), JOBS the number of records."""
    import json

    recs = []
    for r in rows:
        items = []
        for f in fields:
            v = cell(f, r)
            items.append(f'      "{FIELDS[f][0]}":{json.dumps("" if v is None else str(v), ensure_ascii=False)}')
        recs.append("    {\n" + ",\n".join(items) + "\n    }")
    return ('{\n  "COMMAND":"bjobs",\n  "JOBS":%d,\n  "RECORDS":[\n' % len(rows)
            + ",\n".join(recs) + ("\n" if recs else "") + "  ]\n}\n")


def _long(client, rows: list[dict]) -> list[str]:
    """LSF's `bjobs -l` blocks, one per row (job or array element), from GET /jobs/ID."""
    import pwd

    jobs: dict[int, dict] = {}
    out: list[str] = []
    for r in rows:
        jid = r["id"]
        if jid not in jobs:
            jobs[jid] = client.request("GET", f"/jobs/{jid}").json()
        j = jobs[jid]
        e = next((x for x in j["elements"] if x["index"] == r["index"] or not j["array_spec"]), None)
        if e is None:
            continue
        ref = str(jid) if not j["array_spec"] else f"{jid}[{e['index']}]"
        name = r["job_name"]
        head = [f"Job <{ref}>", f"Job Name <{name}>", f"User <{j['user']}>"]
        if j.get("project"):
            head.append(f"Project <{j['project']}>")
        head += [f"Status <{e['state']}>", f"Queue <{j['queue']}>", f"Command <{one_line(r['command'])}>"]
        if out:
            out.append("-" * 78)
        out.append("")
        out.append(", ".join(head))
        out.append(f"{_long_time(j['submit_time'])}: Submitted from host <{r['from_host']}>, CWD <{j['cwd']}>;")
        pairs = [(a["host"], a["slots"]) for a in e.get("alloc") or []]
        if e.get("start_time") is not None and pairs:
            try:
                home = pwd.getpwnam(j["run_as"]).pw_dir
            except (KeyError, ValueError):
                home = None
            slots = sum(n for _, n in pairs)
            where = f"<{pairs[0][0]}>" if slots == 1 else \
                f"{slots} Hosts/Processors " + " ".join(f"<{n}*{h}>" for h, n in pairs)
            out.append(f"{_long_time(e['start_time'])}: Started on {where}"
                       + (f", Execution Home <{home}>" if home else "") + f", Execution CWD <{j['cwd']}>;")
        if e["state"] == "DONE":
            out.append(f"{_long_time(e.get('end_time'))}: Done successfully.")
        elif e["state"] == "EXIT":
            code = _exit_code({"state": "EXIT", "exit_code": e.get("exit_code"), "exit_signal": e.get("exit_signal")})
            when = _long_time(e.get("end_time"))
            if code is not None:
                out.append(f"{when}: Exited with exit code {code}.")
            else:
                out.append(f"{when}: Exited.")
            if e.get("exit_reason") and not e["exit_reason"].startswith("exited with code"):
                out.append(f"{when}: Exit reason: {e['exit_reason']}.")
        pend = e.get("pend_reason")
        if e["state"] in ("PEND", "PSUSP"):
            out.append("")
            out.append(" PENDING REASONS:")
            if pend:
                out.append(f" {pend['main'].rstrip(';')};")
                out += [f" {h['message'].rstrip(';')};" for h in pend.get("hosts") or []]
            elif e["state"] == "PSUSP":
                out.append(" The job was suspended by user while pending;")
        elif e["state"] == "USUSP":
            out.append("")
            out.append(" SUSPENDING REASONS:")
            out.append(" The job was suspended by user;")
    return out


def _long_time(t: float | None) -> str:
    """LSF -l's `Fri Dec  4 21:00:00` (local time)."""
    if t is None:
        return "-"
    lt = time.localtime(t)
    return f"{time.strftime('%a %b', lt)} {lt.tm_mday:2d} {time.strftime('%H:%M:%S', lt)}"


# ---------------------------------------------------------------- the command

def _name_match(pattern: str):
    """LSF's -J NAME: the job's name, `*` matching any text; a pattern with `[` is matched
    against an element's `name[index]`, else against the name without its index."""
    import re

    rx = re.compile("".join(".*" if c == "*" else re.escape(c) for c in pattern) + r"\Z", re.S)
    whole = "[" in pattern

    def match(r: dict) -> bool:
        name = r["job_name"] or ""
        if not whole and r["index"] and name.endswith("]"):
            name = name[:name.rfind("[")]
        return rx.match(name) is not None

    return match


def bjobs(argv: list[str]) -> int:
    """`bjobs ARGV`: print the listing and return the exit code (module docstring). Raises
    LsfUsage for a bad command line; the daemon's typed errors otherwise."""
    from xced.api.client import Client
    from xced.api.errors import InvalidRequest

    opts, args = read_options(_unbunch(argv), SPEC, interspersed=True)
    if opts.get("help"):
        sys.stderr.write(USAGE)
        return 0
    for opt in ("user", "queue", "name", "project", "format"):
        v = opts.get(opt)
        if v is not None and (not v.strip() or len(v) > 1000):
            flag = next(f for f, (n, _) in SPEC.items() if n == opt)
            raise LsfUsage(f"{flag} {v[:40]!r}: the value is empty or longer than 1000 characters")
    if opts.get("json") and opts.get("noheader"):
        raise LsfUsage("-json and -noheader cannot be used together (-json has no header to leave out)")
    if opts.get("long") and (opts.get("format") or opts.get("json")):
        raise LsfUsage("-l cannot be used with -o or -json")
    project = opts.get("project")
    if isinstance(project, str) and not project.startswith("/"):
        opts["project"] = "/" + project  # LSF's flat project NAME is XCE's top-level /NAME, as bsub -P reads it
    refs = job_args(args)
    fmt, delim = parse_format(opts["format"]) if opts.get("format") else (None, None)
    states: set[str] | None = set()
    if opts.get("pending"):  # PEND only: a held job is suspended (-s); `-ps` gives both (IBM bjobs -s)
        states |= {"PEND"}
    if opts.get("running"):
        states |= {"RUN"}
    if opts.get("suspended"):
        states |= {"PSUSP", "USUSP"}
    if opts.get("done"):
        states |= {"DONE", "EXIT"}
    if not states:
        states = None if opts.get("all") or refs else set(UNFINISHED)
    fields = {"id", "index", "state", "job_name", "hosts", "user", "queue", "from_host", "submit_time"}
    if opts.get("pending"):
        fields.add("reason")
    if opts.get("long"):  # -l's `Command <...>`: the line as typed (LSF), not the argv that ran
        fields.add("command")
    for f, _, _ in fmt or []:
        fields.update(FIELDS[f][1])
    if opts.get("json") and not fmt:
        fmt = [(f, None, False) for f in DEFAULT]
    params: dict[str, object] = {"fields": " ".join(sorted(fields)), "elements": "true"}
    for k in ("user", "queue", "project"):
        if opts.get(k):
            params[k] = opts[k]
    if states is not None:
        params["state"] = sorted(states)
    if refs:
        params["id"] = [str(j) for j in dict.fromkeys(j for j, _, _ in refs)]
    client = Client.connect()  # XCE_SOCKET, XCE_TOPDIR or the default TopDir, as xcecli
    try:
        res = client.request_retried("GET", "/jobs/table", params=params)
    except InvalidRequest as e:
        if e.field in ("user", "queue", "project"):
            raise LsfUsage(e.message) from None
        raise
    body = res.json()
    names = body["fields"]
    rows = [dict(zip(names, r)) for r in body["rows"]]
    if states is not None:
        rows = [r for r in rows if r["state"] in states]
    if opts.get("name"):
        match = _name_match(opts["name"])
        rows = [r for r in rows if match(r)]
    missing = [f"Job <{jid}> is not found" for jid in body.get("missing") or []]
    if refs:
        gone = set(body.get("missing") or [])
        by_job: dict[int, list[dict]] = {}
        for r in rows:
            by_job.setdefault(r["id"], []).append(r)
        picked = []
        for jid, idx, text in refs:
            if jid in gone:
                continue
            have = by_job.get(jid, [])
            if idx is None:
                picked += have
                continue
            at = {r["index"]: r for r in have}
            for i in idx:
                if i in at:
                    picked.append(at[i])
                elif states is None and not opts.get("name"):
                    missing.append(f"Job <{jid}[{i}]> is not found")
        seen: set = set()
        rows = [r for r in picked if not ((r["id"], r["index"]) in seen or seen.add((r["id"], r["index"])))]
    lines: list[str] = []
    text = None
    if opts.get("json"):
        text = _json(rows, [f for f, _, _ in fmt])  # type: ignore[union-attr]
    elif rows:
        if opts.get("long"):
            lines = _long(client, rows)
        elif fmt:
            lines = _custom(rows, fmt, delim, bool(opts.get("noheader")))
        else:
            lines = _table(rows, bool(opts.get("wide")), bool(opts.get("noheader")), bool(opts.get("pending")))
        text = "\n".join(lines) + "\n"
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()
    for m in missing:
        print(m, file=sys.stderr)
    if missing:
        return LSF_FAILED
    if not rows:
        if opts.get("name"):
            print(f"Job <{opts['name']}> is not found", file=sys.stderr)
        elif not refs:
            print(_none_found(opts), file=sys.stderr)
        if os.environ.get("LSB_BJOBS_CONSISTENT_EXIT_CODE", "").strip().upper() == "Y":
            return LSF_FAILED
    return 0


def _none_found(opts: dict) -> str:
    """LSF's words when no job matches: `No unfinished job found` by default."""
    kinds = [k for k, word in (("pending", "pending"), ("running", "running"), ("suspended", "suspended"),
                               ("done", "done")) if opts.get(k)]
    if len(kinds) == 1:
        return f"No {kinds[0]} job found"
    if opts.get("all") or kinds:
        return "No job found"
    return "No unfinished job found"


if __name__ == "__main__":
    main()

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
- `-p` lists pending (PEND) jobs with each job's pending reasons under its row (LSF drops
  the EXEC_HOST column there), at a level (IBM bjobs -p): `-p0` the main reason and every
  host reason with its number of hosts (`Not enough free job slots: 1 host;`, LSF before
  10.1), `-p1` the main reason alone, `-p2` the main reason and the candidate hosts'
  reasons counted under `Candidate host pending reasons (K of N hosts):`, `-p3` also the
  non-candidate hosts' (down or closed, select false, a resource missing); a bare `-p`
  takes LSB_BJOBS_PENDREASON_LEVEL from the environment, 0 when unset (_reason_lines).
- `-A` one line per job array with its element counts by state (_arrays); `-sum` the
  slots of the unfinished jobs by state (_summary). `-r` running, `-s` suspended (PSUSP, USUSP; `-ps` both),
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
    "-J": ("name", "one"), "-P": ("project", "one"), "-p": ("pending", "flag"), "-p0": ("p0", "flag"),
    "-p1": ("p1", "flag"), "-p2": ("p2", "flag"), "-p3": ("p3", "flag"), "-r": ("running", "flag"),
    "-s": ("suspended", "flag"), "-d": ("done", "flag"), "-noheader": ("noheader", "flag"), "-o": ("format", "one"),
    "-json": ("json", "flag"), "-l": ("long", "flag"), "-UF": ("long", "flag"), "-h": ("help", "flag"),
    "-A": ("arrays", "flag"), "-sum": ("sum", "flag"),
}
#: the one-letter flags LSF lets a user bunch (`-aw`, `-lp`)
_BUNCHED = "warpsdl"

USAGE = ("Usage: bjobs [-a] [-d] [-p | -p0 | -p1 | -p2 | -p3] [-r] [-s] [-w] [-l] [-A] [-sum] [-noheader] [-json]\n"
         "             [-u user_name|all] [-q queue_name] [-J job_name] [-P project]\n"
         "             [-o \"field[:[-][width]] ... [delimiter='c']\"] [job_ID | \"job_ID[index_list]\" ...]\n"
         "  -p   pending jobs and why they pend, at the level LSB_BJOBS_PENDREASON_LEVEL gives (0 if unset):\n"
         "       -p0 every reason with its number of hosts; -p1 the main reason only; -p2 the main reason and\n"
         "       the candidate hosts' reasons; -p3 those of the non-candidate hosts too\n"
         "  -A   one line per job array: NJOBS and the elements in each state\n"
         "  -sum the slots of your unfinished jobs by state (RUN SSUSP USUSP UNKNOWN PEND FWD_PEND PSUSP)\n")

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

def _table(rows: list[dict], wide: bool, noheader: bool, pending: bool, reasons=None) -> list[str]:
    """The default table (module docstring); written for speed: 10,000 rows within the
    start-up aim of CLI-7 (issue 18 part 7). `reasons(row, main)`, when given, gives a
    pending row's reason lines (the -p levels, _reason_lines); else the main reason alone."""
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
            if reasons is None:
                lines.append(" " + reason + ("" if reason.endswith(";") else ";"))
            else:
                lines += reasons(r, reason)
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
        out.append(f"{_long_time(j['submit_time'])}: Submitted from host <{r['from_host']}>, CWD <{one_line(j['cwd'])}>;")
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
                       + (f", Execution Home <{home}>" if home else "") + f", Execution CWD <{one_line(j['cwd'])}>;")
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
                out.append(f"{when}: Exit reason: {one_line(e['exit_reason']).rstrip('.')}.")
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
            raise LsfUsage(f"{flag} {v[:40]!r}: " + ("the value is longer than 1000 characters" if len(v) > 1000 else
                                                     "the value is empty or blank (spaces, tabs or line separators)"))
    if opts.get("json") and opts.get("noheader"):
        raise LsfUsage("-json and -noheader cannot be used together (-json has no header to leave out)")
    if opts.get("long") and (opts.get("format") or opts.get("json")):
        raise LsfUsage("-l cannot be used with -o or -json")
    level = _pend_level(opts)
    for mode, flag in (("arrays", "-A"), ("sum", "-sum")):
        if opts.get(mode):
            for other, oflag in (("long", "-l"), ("format", "-o"), ("json", "-json"), ("arrays", "-A")):
                if other != mode and opts.get(other):
                    raise LsfUsage(f"{flag} cannot be used with {oflag}: {flag} prints its own summary table")
            if level is not None:
                raise LsfUsage(f"{flag} cannot be used with -p or -p0..-p3: {flag} prints counts, not pending reasons")
    if opts.get("sum"):
        given = [f for f, n in (("-a", "all"), ("-d", "done"), ("-r", "running"), ("-s", "suspended")) if opts.get(n)]
        if given:
            raise LsfUsage(f"-sum counts every unfinished job's slots by state; it takes no state option "
                           f"({' '.join(given)} given); filter with -u, -q, -P, -J or job IDs instead")
    project = opts.get("project")
    if isinstance(project, str) and not project.startswith("/"):
        opts["project"] = "/" + project  # LSF's flat project NAME is XCE's top-level /NAME, as bsub -P reads it
    refs = job_args(args)
    if opts.get("arrays") and any(idx is not None for _, idx, _ in refs):
        bad = next(text for _, idx, text in refs if idx is not None)
        raise LsfUsage(f"{bad}: with -A give the job array's ID without an index list (IBM bjobs -A)")
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
    if opts.get("arrays"):
        return _arrays(opts, refs, states)
    fields = {"id", "index", "state", "job_name", "hosts", "user", "queue", "from_host", "submit_time"}
    if opts.get("sum"):
        fields.add("ntasks")
    if opts.get("pending"):
        fields.add("reason")
    if opts.get("long"):  # -l's `Command <...>`: the line as typed (LSF), not the argv that ran
        fields.add("command")
    for f, _, _ in fmt or []:
        fields.update(FIELDS[f][1])
    if opts.get("json") and not fmt:
        fmt = [(f, None, False) for f in DEFAULT]
    if opts.get("json"):  # JSON escapes a newline itself: COMMAND and JOB_NAME as typed (LSF)
        fields.update(f"{f}_text" for f in ("command", "job_name") if f in fields)
    params: dict[str, object] = {"fields": " ".join(sorted(fields)), "elements": "true"}
    for k in ("user", "queue", "project"):
        if opts.get(k):
            params[k] = opts[k]
    if states is not None:
        params["state"] = sorted(states)
    ids = list(dict.fromkeys(j for j, _, _ in refs)) if refs else None
    client = Client.connect()  # XCE_SOCKET, XCE_TOPDIR or the default TopDir, as xcecli
    try:
        body = client.table(params, ids)  # the IDs in parts: any number of them (issue 18)
    except InvalidRequest as e:
        if e.field in ("user", "queue", "project"):
            raise LsfUsage(e.message) from None
        raise
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
    if opts.get("sum"):
        for m in missing:
            print(m, file=sys.stderr)
        sys.stdout.write(_summary(rows, bool(opts.get("noheader"))))
        return LSF_FAILED if missing else 0
    lines: list[str] = []
    text = None
    if opts.get("json"):
        for r in rows:
            for f in ("command", "job_name"):
                if f"{f}_text" in r:
                    r[f] = r[f"{f}_text"]
        text = _json(rows, [f for f, _, _ in fmt])  # type: ignore[union-attr]
    elif rows:
        if opts.get("long"):
            lines = _long(client, rows)
        elif fmt:
            for r in rows:  # a kill's reason (bkill -C) is the user's text: one line, escaped (CLI-3)
                if r.get("exit_reason"):
                    r["exit_reason"] = one_line(r["exit_reason"])
            lines = _custom(rows, fmt, delim, bool(opts.get("noheader")))
        else:
            reasons = None
            if opts.get("pending") and level != 1:
                filters = None if refs else {k: params[k] for k in ("user", "queue", "project") if k in params}
                reasons = _reasons_of(client, rows, level, filters)
            lines = _table(rows, bool(opts.get("wide")), bool(opts.get("noheader")), bool(opts.get("pending")),
                           reasons)
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
            print(f"Job <{one_line(opts['name'])}> is not found", file=sys.stderr)
        elif not refs:
            print(_none_found(opts), file=sys.stderr)
        if os.environ.get("LSB_BJOBS_CONSISTENT_EXIT_CODE", "").strip().upper() == "Y":
            return LSF_FAILED
    return 0


# ---------------------------------------------------------------- -p levels, -A, -sum

#: the shortfall resources of a host that cannot take the job whatever the load (LSF's
#: non-candidate hosts: down or closed, its select string false, a resource it does not
#: have); every other shortfall (slots, memory, a consumable, an exclusive job there) is a
#: candidate host's (xced.scheduler.placement's HostShortfall.resource)
_NON_CANDIDATE = ("status", "select")


def _pend_level(opts: dict) -> int | None:
    """The -p level asked for (None: no -p): `-p0`..`-p3`, or for a bare `-p` the level
    LSB_BJOBS_PENDREASON_LEVEL gives (LSF's lsf.conf setting, read here from the
    environment; 0 when unset, as LSF's default). `-pN` also selects pending jobs. Raises
    LsfUsage for two levels or a bad LSB_BJOBS_PENDREASON_LEVEL. Source: IBM bjobs -p
    and LSB_BJOBS_PENDREASON_LEVEL (docs/lsf-behaviour.md section 4 [33, 90])."""
    levels = [n for n in range(4) if opts.get(f"p{n}")]
    if len(levels) > 1:
        raise LsfUsage(f"{' '.join(f'-p{n}' for n in levels)}: give one pending-reason level, -p0, -p1, -p2 or -p3")
    if levels:
        opts["pending"] = True
        return levels[0]
    if not opts.get("pending"):
        return None
    env = os.environ.get("LSB_BJOBS_PENDREASON_LEVEL", "").strip()
    if not env:
        return 0
    if env not in ("0", "1", "2", "3"):
        raise LsfUsage(f"LSB_BJOBS_PENDREASON_LEVEL={env[:20]!r}: the level is 0, 1, 2 or 3")
    return int(env)


def _category(h: dict) -> tuple[bool, str]:
    """(candidate host?, the reason as LSF groups it: the same words for every host) of
    one host shortfall of a pend reason (GET /jobs/ID's pend_reason.hosts[])."""
    res, msg = h["resource"], h["message"]
    text = msg[len(h["host"]) + 2:] if msg.startswith(h["host"] + ": ") else msg
    if res == "status":
        return False, f"Host {text}"  # "Host status closed_Adm", "Host status unavail"
    if res == "select":
        return False, "Job's resource requirements not satisfied"  # LSF's words for a select no host meets
    if text.startswith("no resource "):
        return False, f"Host has {text}"
    if text.startswith("same["):
        return False, text
    if res == "slots":
        return True, "Not enough free job slots"
    if res == "exclusive":
        return True, text
    return True, f"Not enough free {res}"


def _counted(items: list[str]) -> list[str]:
    """`REASON: N host(s);` for each distinct reason, the most common first (LSF -p2/-p3:
    "The actual pending reason messages appear from most to least common")."""
    seen: dict[str, int] = {}
    for t in items:
        seen[t] = seen.get(t, 0) + 1
    ordered = sorted(seen.items(), key=lambda kv: -kv[1])
    return [f"{t}: {n} host{'s' if n != 1 else ''};" for t, n in ordered]


def _reason_lines(level: int, main: str, pend: dict | None, nhosts: int) -> list[str]:
    """A pending job's reason lines under its row at -p level `level` (IBM bjobs -p):
    0, as LSF before 10.1: the main reason, then every host reason with how many hosts
    give it; 1: the main reason alone; 2: the main reason, then `Candidate host pending
    reasons (K of N hosts):` with the candidate hosts' reasons counted; 3: also
    `Non-candidate host pending reasons (M of N hosts):` with theirs. A reason about the
    job rather than the hosts (waiting behind another job, a dependency) has no host lines
    and stands alone at every level, as LSF's main reasons do. `pend`: the element's
    pend_reason (main, hosts[]) or None; `nhosts`: the hosts in the cluster."""
    out = [f" {main.rstrip(';')};"]
    if level == 1 or not pend or not pend.get("hosts"):  # a reason about the job, not the hosts, stands alone
        return out
    cand: list[str] = []
    non: list[str] = []
    non_hosts: set[str] = set()
    more = 0
    for h in pend.get("hosts") or []:
        if h["resource"] == "more":
            more += int(h["free"])
            continue
        is_cand, text = _category(h)
        (cand if is_cand else non).append(text)
        if not is_cand:
            non_hosts.add(h["host"])
    tail = [f"and {more} more host(s) with shortfalls;"] if more else []
    if level == 0:
        return out + [f" {t}" for t in _counted(cand + non) + tail]
    n_cand = max(0, nhosts - len(non_hosts))
    lines = _counted(cand) + tail
    out.append(f" Candidate host pending reasons ({n_cand} of {nhosts} hosts){':' if lines else '.'}")
    out += [f"   {t}" for t in lines]
    if level == 3:
        lines = _counted(non)
        out.append(f" Non-candidate host pending reasons ({len(non_hosts)} of {nhosts} hosts)"
                   f"{':' if lines else '.'}")
        out += [f"   {t}" for t in lines]
    return out


def _reasons_of(client, rows: list[dict], level: int, params: dict | None):
    """The `reasons(row, main)` of _table for -p level `level`: each pending element's
    structured pend reason, read with one GET /jobs?state=PEND with the listing's filters
    `params` (user, queue, project; None when job IDs were named: then GET /jobs/ID for
    each) and GET /jobs/ID for an array, whose elements a listing leaves out; the cluster's
    host count from GET /hosts (levels 2 and 3)."""
    from xced.api.errors import NotFound

    want = {r["id"] for r in rows if r["state"] == "PEND"}
    pend: dict[tuple[int, int], dict | None] = {}
    if want and params is not None:
        listed = client.request_retried("GET", "/jobs", params={**params, "state": ["PEND"]}).json()["jobs"]
        for j in listed:
            if j["job_id"] in want and j["elements"]:
                for e in j["elements"]:
                    pend[(j["job_id"], e["index"])] = e.get("pend_reason")
                want.discard(j["job_id"])
    for jid in sorted(want):
        try:
            j = client.request_retried("GET", f"/jobs/{jid}").json()
        except NotFound:  # gone between the two requests: the main reason alone
            continue
        for e in j["elements"]:
            pend[(jid, e["index"])] = e.get("pend_reason")
    nhosts = len(client.request_retried("GET", "/hosts").json()["hosts"]) if level >= 2 else 0

    def reasons(r: dict, main: str) -> list[str]:
        pr = pend.get((r["id"], r["index"]))
        return _reason_lines(level, pr["main"] if pr else main, pr, nhosts)

    return reasons


#: bjobs -sum's columns and their widths, as IBM's bjobs -sum example prints them
SUM_COLS = (("RUN", 11), ("SSUSP", 12), ("USUSP", 11), ("UNKNOWN", 11), ("PEND", 11), ("FWD_PEND", 10), ("PSUSP", 0))


def _summary(rows: list[dict], noheader: bool) -> str:
    """`bjobs -sum`: the slots of the rows (unfinished elements) by state, in IBM's columns
    RUN SSUSP USUSP UNKNOWN PEND FWD_PEND PSUSP ("displays the count of job slots";
    https://www.ibm.com/support/knowledgecenter/SSWRJV_10.1.0/lsf_command_ref/bjobs.sum.1.html).
    A running or stopped element counts the slots it holds, a pending one those it asks
    for (its -n min), as bqueues counts. SSUSP, UNKNOWN and FWD_PEND are 0: XCE never
    suspends a job itself, never loses track of one, and forwards none to another cluster."""
    n = {c: 0 for c, _ in SUM_COLS}
    for r in rows:
        st = r["state"]
        if st in n:
            slots = cell("slots", r) or 0  # a pending `-n MIN,MAX` job's is "MIN,MAX": it asks for MIN
            n[st] += int(str(slots).partition(",")[0])
    head = "".join(c.ljust(w) for c, w in SUM_COLS).rstrip()
    vals = "".join(str(n[c]).ljust(w) for c, w in SUM_COLS).rstrip()
    return ("" if noheader else head + "\n") + vals + "\n"


def _arrays(opts: dict, refs: list, states: set[str] | None) -> int:
    """`bjobs -A`: one line per job array, as LSF (OpenLava's bjobs.c, LSF's ancestor,
    prints it so): `JOBID    ARRAY_SPEC  OWNER   NJOBS PEND DONE  RUN EXIT SSUSP USUSP PSUSP`,
    ARRAY_SPEC the array's name with its index list (`fam[1-3]`, cut to 8 characters and
    OWNER to 8 unless -w), then how many elements there are and in each state. By default
    the arrays with an unfinished element; -a all, -p/-r/-s/-d those with an element in
    those states; IDs those arrays. A job that is not an array is not shown. Source:
    https://www.ibm.com/support/knowledgecenter/SSWRJV_10.1.0/lsf_command_ref/bjobs.__a.1.html
    (docs/lsf-behaviour.md section 5 [91, 92]). Returns the exit code."""
    from xced.api.client import Client
    from xced.api.errors import InvalidRequest, NotFound

    client = Client.connect()
    jobs: list[dict] = []
    missing: list[str] = []
    if refs:
        for jid in dict.fromkeys(j for j, _, _ in refs):
            try:
                jobs.append(client.request_retried("GET", f"/jobs/{jid}").json())
            except NotFound:
                missing.append(f"Job <{jid}> is not found")
    else:
        params: dict[str, object] = {}
        for k in ("user", "queue", "project"):
            if opts.get(k):
                params[k] = opts[k]
        if states is None or states & {"DONE", "EXIT"}:
            params["all"] = "true"
        try:
            jobs = client.request_retried("GET", "/jobs", params=params).json()["jobs"]
        except InvalidRequest as e:
            if e.field in ("user", "queue", "project"):
                raise LsfUsage(e.message) from None
            raise
    match = _name_match(opts["name"]) if opts.get("name") else None
    shown = []
    for j in jobs:
        if not j.get("array_spec"):
            continue
        c = j.get("counts") or {}
        if states is not None and not any(c.get(s) for s in states):
            continue
        if match is not None and not match({"job_name": j.get("name") or "", "index": 0}):
            continue
        shown.append(j)
    wide = bool(opts.get("wide"))
    lines = [] if opts.get("noheader") or not shown else \
        ["JOBID    ARRAY_SPEC  OWNER   NJOBS PEND DONE  RUN EXIT SSUSP USUSP PSUSP"]
    for j in shown:
        c = j.get("counts") or {}
        spec = one_line(j["array_spec"])  # as submitted: `name[1-3]`, a bidi character of its name escaped
        if j.get("array_limit") and "%" not in spec:
            spec += f"%{j['array_limit']}"
        user = j["user"]
        if not wide:
            spec, user = spec[:8], user[:8]
        lines.append(f"{j['job_id']:<7}  {spec:<8} {user:>8}   {sum(c.values()):>5} "
                     + f"{c.get('PEND', 0):>4} {c.get('DONE', 0):>4} {c.get('RUN', 0):>4} {c.get('EXIT', 0):>4} "
                     + f"{0:>5} {c.get('USUSP', 0):>5} {c.get('PSUSP', 0):>5}")
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")
    for m in missing:
        print(m, file=sys.stderr)
    if missing:
        return LSF_FAILED
    if not shown and not refs:
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

"""The columns of a job listing (`xcecli jobs -o`, as LSF's `bjobs -o "field ..."`), computed
where the jobs are: the daemon's `GET /jobs/table` sends only the rows and columns asked for,
so that a listing of 10,000 jobs moves about a tenth of the bytes of the full `GET /jobs`
and the CLI builds no model from it (issue 17, listings; CLI-3).

A cell is the raw value: a job ID, a string, a count, or epoch seconds for the *_time
fields (the CLI shows those in local time); None where a job has no such value (a pending
job's start time), which the CLI prints as "-". A plain job's cells come from its one
element; an array's from the job (ELEMENTS counts its elements by state). The cells are
computed from the daemon's job objects (xced.server.convert.table_rows), where each field
costs only itself: EXEC_HOST is `[N*]HOST` joined by ':' as bjobs writes it, JOB_NAME an
array's name with its index spec, NTASKS the slots a started job holds else its task range
(`2,8`), ELEMENTS `N STATE` per state of an array, PEND_REASON the main pend reason, or why
a running job's host is not ok.
"""

from __future__ import annotations


def one_line(text: str) -> str:
    """`text` with each character that is not printable (a newline or a tab in a command
    line, an escape sequence) shown as its Python escape (`\\n`, `\\x1b`): a cell of a
    listing never starts a line of its own, so a command such as `bsub $'true\\n99 alice
    RUN ...'` cannot forge a row in the output that tools split by lines (`bjobs -w`, read
    by Nextflow). Printable text is returned as it is."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)

#: The fields, in their default order of mention, each with its column header (bjobs -o names).
FIELDS: dict[str, str] = {
    "id": "JOBID", "user": "USER", "state": "STAT", "queue": "QUEUE", "project": "PROJ_NAME", "hosts": "EXEC_HOST",
    "name": "JOB_NAME", "submit_time": "SUBMIT_TIME", "start_time": "START_TIME", "end_time": "END_TIME",
    "exit_code": "EXIT_CODE", "ntasks": "NTASKS", "elements": "ELEMENTS", "run_as": "RUN_AS", "app": "APP",
    "reason": "PEND_REASON",
}
#: what `xcecli jobs` shows without -o (LSF bjobs' default columns)
DEFAULT_FIELDS: list[str] = ["id", "user", "state", "queue", "hosts", "name", "submit_time"]
#: the column headers (bjobs -o names) are accepted as field names too
ALIASES: dict[str, str] = {h.lower(): f for f, h in FIELDS.items()} | {"stat": "state", "jobid": "id",
                                                                       "exec_host": "hosts"}
#: the fields whose cells are epoch seconds
TIME_FIELDS = frozenset({"submit_time", "start_time", "end_time"})

#: Fields GET /jobs/table also gives, for LSF's `bjobs` (CLI-8, xcecli.lsf.bjobs), beside
#: FIELDS; `xcecli jobs -o` does not offer them. FROM_HOST: the host of the API server that
#: answers (XCE does not record a job's submission host); JOB_NAME: LSF's job name, the
#: name (an array element's with its `[index]`) or else the command line, as bsub names a
#: job that has no -J; COMMAND: the command line, quoted as a shell would need it;
#: JOBINDEX: an array element's index, 0 for a plain job (LSF's jobindex field);
#: EXIT_REASON and EXIT_SIGNAL: why an element ended and the signal that ended it.
LSF_FIELDS: dict[str, str] = {
    "from_host": "FROM_HOST", "job_name": "JOB_NAME", "command": "COMMAND", "index": "JOBINDEX",
    "exit_reason": "EXIT_REASON", "exit_signal": "EXIT_SIGNAL",
    # as typed, not made one line (`one_line`): for output that escapes by itself (bjobs -json)
    "command_text": "COMMAND", "job_name_text": "JOB_NAME",
}


def parse_fields(text: str | None, *, lsf: bool = False) -> list[str]:
    """The fields of `-o TEXT` (names or headers, any case, space or comma separated), in
    order; DEFAULT_FIELDS for None. With `lsf`, the LSF_FIELDS too (by name only). Raises
    ValueError naming the unknown ones and listing the valid fields, or for a TEXT that
    names none."""
    if text is None:
        return list(DEFAULT_FIELDS)
    known = {**FIELDS, **LSF_FIELDS} if lsf else FIELDS
    cols = [f if lsf and f in LSF_FIELDS else ALIASES.get(f, f) for f in text.lower().replace(",", " ").split()]
    bad = [f for f in cols if f not in known]
    shown = " ".join(f for f in known if not f.endswith("_text"))  # the raw twins of bjobs -json are not offered
    if bad:
        raise ValueError(f"unknown field(s) {', '.join(bad)}; valid fields: {shown}")
    if not cols:
        raise ValueError(f"no field named; valid fields: {shown}")
    return cols

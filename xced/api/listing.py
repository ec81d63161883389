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


def parse_fields(text: str | None) -> list[str]:
    """The fields of `-o TEXT` (names or headers, any case, space or comma separated), in
    order; DEFAULT_FIELDS for None. Raises ValueError naming the unknown ones and listing the
    valid fields, or for a TEXT that names none."""
    if text is None:
        return list(DEFAULT_FIELDS)
    cols = [ALIASES.get(f.lower(), f.lower()) for f in text.replace(",", " ").split()]
    bad = [f for f in cols if f not in FIELDS]
    if bad:
        raise ValueError(f"unknown field(s) {', '.join(bad)}; valid fields: {' '.join(FIELDS)}")
    if not cols:
        raise ValueError(f"no field named; valid fields: {' '.join(FIELDS)}")
    return cols

"""The columns of a job listing (`xcecli jobs -o`, as LSF's `bjobs -o "field ..."`), computed
where the jobs are: the daemon's `GET /jobs/table` sends only the rows and columns asked for,
so that a listing of 10,000 jobs moves about a tenth of the bytes of the full `GET /jobs`
and the CLI builds no model from it (issue 17, listings; CLI-3).

A cell is the raw value: a job ID, a string, a count, or epoch seconds for the *_time
fields (the CLI shows those in local time); None where a job has no such value (a pending
job's start time), which the CLI prints as "-". A plain job's cells come from its one
element; an array's from the job (ELEMENTS counts its elements by state).
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


def _hosts(el: dict | None) -> str | None:
    if el is None or not el["alloc"]:
        return None
    return ":".join(f"{a['slots']}*{a['host']}" if a["slots"] > 1 else a["host"] for a in el["alloc"])


def _name(job: dict) -> str | None:
    spec = job["array_spec"]
    return (job["name"] or "") + (spec[spec.index("["):] if spec else "") or None


def _ntasks(job: dict, el: dict | None) -> object:
    if el and el["alloc"]:
        return sum(a["slots"] for a in el["alloc"])
    lo, hi = job["ntasks_min"], job["ntasks_max"]
    return lo if lo == hi else f"{lo},{hi}"


_GET = {
    "id": lambda j, e: j["job_id"], "user": lambda j, e: j["user"], "state": lambda j, e: j["state"],
    "queue": lambda j, e: j["queue"], "project": lambda j, e: j.get("project"), "run_as": lambda j, e: j["run_as"],
    "hosts": lambda j, e: _hosts(e), "app": lambda j, e: j.get("app"), "name": lambda j, e: _name(j),
    "submit_time": lambda j, e: j["submit_time"],
    "start_time": lambda j, e: e["start_time"] if e else None,
    "end_time": lambda j, e: e["end_time"] if e else None,
    "exit_code": lambda j, e: e["exit_code"] if e else None, "ntasks": _ntasks,
    "elements": lambda j, e: ",".join(f"{n} {s}" for s, n in sorted(j["counts"].items())) if j["array_spec"] else None,
    "reason": lambda j, e: (e["pend_reason"]["main"] if e["pend_reason"] else e.get("host_problem")) if e else None,
}


#: what each field reads of the JobOut dict: (job fields, element fields); rows_of reads
#: `elements` and `array_spec` for every row
_NEEDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "id": (("job_id",), ()), "user": (("user",), ()), "state": (("state",), ()), "queue": (("queue",), ()),
    "project": (("project",), ()), "run_as": (("run_as",), ()), "hosts": ((), ("alloc",)), "app": (("app",), ()),
    "name": (("name",), ()), "submit_time": (("submit_time",), ()), "start_time": ((), ("start_time",)),
    "end_time": ((), ("end_time",)), "exit_code": ((), ("exit_code",)),
    "ntasks": (("ntasks_min", "ntasks_max"), ("alloc",)), "elements": (("counts",), ()),
    "reason": ((), ("pend_reason", "host_problem")),
}


def needs(cols: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the JobOut fields, the ElementOut fields) that `rows_of` reads for `cols`: all a
    listing projected to those columns has to build of each job (GET /jobs/table)."""
    job = {"elements", "array_spec"}
    el: set[str] = set()
    for c in cols:
        j, e = _NEEDS[c]
        job.update(j)
        el.update(e)
    return tuple(sorted(job)), tuple(sorted(el))


def rows_of(jobs: list[dict], cols: list[str]) -> list[list[object]]:
    """The cells of `cols` (fields of FIELDS) for each job, given as the API's JobOut dicts
    (`elements` included for plain jobs); raises KeyError for an unknown field."""
    fns = [_GET[c] for c in cols]
    out = []
    for j in jobs:
        els = j["elements"]
        el = els[0] if len(els) == 1 and j["array_spec"] is None else None
        out.append([f(j, el) for f in fns])
    return out

"""Issue 17, listings (CLI-3): the daemon projects a listing to the columns asked for
(GET /jobs/table, xced.api.listing), and `xcecli jobs` prints it as before, from a tenth of
the bytes of the full GET /jobs."""

from __future__ import annotations

import json

import pytest

from xced.api.client import Client
from xced.api.errors import InvalidRequest
from xced.api.listing import FIELDS

pytestmark = pytest.mark.timeout(90)


# ------------------------------------------------------------ the listing's rules, on JobOut dicts

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
    """The cells of `cols` by the listing's rules (xced.api.listing's docstring), read from the
    JobOut dicts of GET /jobs: the oracle the daemon's own rows are held to."""
    fns = [_GET[c] for c in cols]
    out = []
    for j in jobs:
        els = j["elements"]
        el = els[0] if len(els) == 1 and j["array_spec"] is None else None
        out.append([f(j, el) for f in fns])
    return out


def test_every_column_is_the_full_listings_cell(shared_daemon):
    """GET /jobs/table computes its cells from the jobs themselves (issue 17: what the columns
    cost, not 10,000 JobOuts); each must equal what the listing's rules give from the full
    JobOut of GET /jobs, for jobs of every kind: running on two slots, pending with a reason,
    an array, done, and ended with an exit code."""
    d = shared_daemon
    run = d.submit("-n", "2", "-J", "two", "--", "sleep", "30")
    d.submit("-J", "arr[1-3]", "-w", f"done({run})", "--", "true")
    d.submit("-n", "1,3", "-w", f"done({run})", "--", "true")
    bad = d.submit("-J", "bad", "--", "sh", "-c", "exit 3")
    d.wait_state(run, ("RUN",))
    d.wait_state(bad, ("EXIT",))
    with Client.connect(topdir=str(d.top)) as c:
        t = c.request("GET", "/jobs/table", params={"fields": " ".join(FIELDS), "user": "all"}).json()
        full = c.request("GET", "/jobs", params={"user": "all"}).json()["jobs"]
    assert t["fields"] == list(FIELDS)
    assert t["rows"] == rows_of(full, list(FIELDS))
    kinds = {r[2] for r in t["rows"]}
    assert {"RUN", "PEND", "EXIT"} <= kinds and any(r[12] == "3 PEND" for r in t["rows"])


def test_the_table_carries_only_the_columns_asked_for(shared_daemon):
    d = shared_daemon
    run = d.submit("-J", "listed", "--", "sleep", "30")
    arr = d.submit("-J", "arr[1-3]", "-n", "2", "-w", f"done({run})", "--", "true")  # pends behind `run`
    d.wait_state(run, ("RUN",))
    with Client.connect(topdir=str(d.top)) as c:
        t = c.request("GET", "/jobs/table", params={"fields": "id,stat name start_time ntasks elements"}).json()
        full = c.request("GET", "/jobs").body
        small = c.request("GET", "/jobs/table").body
        with pytest.raises(InvalidRequest) as e:
            c.request("GET", "/jobs/table", params={"fields": "id walltime"})
        with pytest.raises(InvalidRequest) as none:
            c.request("GET", "/jobs/table", params={"fields": " , "})
    assert t["fields"] == ["id", "state", "name", "start_time", "ntasks", "elements"]
    rows = {r[0]: r for r in t["rows"]}
    assert rows[run][1:3] == ["RUN", "listed"] and isinstance(rows[run][3], float) and rows[run][4:] == [1, None]
    assert rows[arr][1:] == ["PEND", "arr[1-3]", None, 2, "3 PEND"]
    assert len(small) * 3 < len(full)  # the default columns only
    assert "unknown field(s) walltime; valid fields: id user state" in e.value.message
    assert "no field named; valid fields: id user state" in none.value.message


def test_jobs_prints_the_same_columns_from_the_table(shared_daemon):
    """What the user sees is made from the projected rows: the same cells as the full
    listing's, times in local time, '-' for none."""
    d = shared_daemon
    jid = d.submit("-J", "same", "--", "true")
    d.wait_state(jid, ("DONE",))
    out = d.cli("jobs", "-o", "id state name start_time exit_code reason", check=True).stdout.splitlines()
    assert out[0].split() == ["JOBID", "STAT", "JOB_NAME", "START_TIME", "EXIT_CODE", "PEND_REASON"]
    line = next(ln for ln in out[1:] if ln.split()[0] == str(jid))
    full = json.loads(d.cli("jobs", "--json", check=True).stdout)["jobs"]
    assert next(j for j in full if j["job_id"] == jid)["elements"][0]["exit_code"] == 0
    cells = line.split()
    assert cells[:3] == [str(jid), "DONE", "same"] and cells[-2:] == ["0", "-"]
    assert len(cells) == 3 + 3 + 2  # 'Dec 04 05:20:01' is three words
    r = d.cli("jobs", "-o", "id walltime")
    assert r.returncode == 2 and "-o: unknown field(s) walltime; valid fields:" in r.stderr, r.stderr

"""Issue 17, listings (CLI-3): the daemon projects a listing to the columns asked for
(GET /jobs/table, xced.api.listing), and `xcecli jobs` prints it as before, from a tenth of
the bytes of the full GET /jobs."""

from __future__ import annotations

import json

import pytest

from xced.api.client import Client
from xced.api.errors import InvalidRequest

pytestmark = pytest.mark.timeout(90)


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

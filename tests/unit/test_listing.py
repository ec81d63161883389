"""The listing's columns (xced.api.listing; `xcecli jobs -o`, LSF bjobs -o; issue 17 part 3):
a listing projected to its columns builds only the fields `needs` names, so a column must
never read a field `needs` leaves out. Every column and pair of columns is read from dicts
cut down to `needs`, and must give what the whole JobOut dict gives."""

from __future__ import annotations

import itertools

import pytest

from xced.api.listing import FIELDS, needs, parse_fields, rows_of


def _element(index: int, state: str, **kw) -> dict:
    return {"id": f"7[{index}]" if index else "7", "job_id": 7, "index": index, "state": state, "holds": [],
            "start_time": kw.get("start"), "end_time": kw.get("end"), "exit_code": kw.get("code"),
            "exit_signal": None, "exit_reason": kw.get("reason"), "containment": None, "alloc": kw.get("alloc", []),
            "pend_reason": kw.get("pend"), "host_problem": kw.get("problem"), "stdout": None, "stderr": None}


def _job(job_id: int, elements: list[dict], array_spec: str | None = None) -> dict:
    counts: dict[str, int] = {}
    for e in elements:
        counts[e["state"]] = counts.get(e["state"], 0) + 1
    return {"job_id": job_id, "name": "n", "user": "ann", "run_as": "ann", "asserted_user": False, "queue": "normal",
            "project": "/p", "auth_basis": "open", "app": None, "app_params": {}, "state": elements[0]["state"],
            "submit_time": 1.5e9, "argv": ["true"], "cwd": "/", "ntasks_min": 2, "ntasks_max": 4,
            "run_limit_s": None, "memory_limit_mb": None, "array_spec": array_spec, "array_limit": None,
            "resreq_requested": [], "resreq": "", "reserve": None, "dependency": None, "counts": counts,
            "elements": [] if array_spec else elements, "env": None, "umask": 18, "meta": None}


JOBS = [
    _job(1, [_element(0, "RUN", start=1.6e9, alloc=[{"host": "h1", "slots": 2}, {"host": "h2", "slots": 1}],
                      problem="host h2 is unavail")]),
    _job(2, [_element(0, "PEND", pend={"main": "no free slot", "hint": None, "hosts": []})]),
    _job(3, [_element(0, "EXIT", start=1.6e9, end=1.7e9, code=3, reason="exit code 3", alloc=[{"host": "h1",
                                                                                            "slots": 4}])]),
    _job(4, [_element(1, "DONE"), _element(2, "PEND")], array_spec="a[1-2]"),
]


def _cut(job: dict, fields: tuple[tuple[str, ...], tuple[str, ...]]) -> dict:
    jf, ef = fields
    out = {k: job[k] for k in jf}
    out["elements"] = [{k: e[k] for k in ef} for e in job["elements"]]
    return out


@pytest.mark.parametrize("cols", [[c] for c in FIELDS] + [list(p) for p in itertools.combinations(FIELDS, 2)]
                         + [parse_fields(None)])
def test_a_projected_listing_reads_only_what_needs_names(cols):
    want = rows_of(JOBS, cols)
    assert rows_of([_cut(j, needs(cols)) for j in JOBS], cols) == want
    assert len(want) == len(JOBS) and all(len(r) == len(cols) for r in want)


def test_the_default_columns_need_a_few_fields_of_each_job():
    job_fields, element_fields = needs(parse_fields(None))
    assert set(job_fields) == {"job_id", "user", "state", "queue", "name", "array_spec", "submit_time", "elements"}
    assert element_fields == ("alloc",)

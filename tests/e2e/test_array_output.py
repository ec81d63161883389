"""End to end: output that scales with an array's size (issue 17 part 4; CLI-1, CLI-3, CLI-7).

Past 100 elements, `xcecli kill` (stop, resume, ...) prints one line per state of the
elements acted on and `xcecli show` one row per group of elements alike, their indices
folded into runs; `--json` and `-v` still name every element; arrays of at most 100 elements
print as before. `kill --json` keeps the IDs it was refused, with the reason.
A real xced on a Unix socket, the real xcecli.
"""

from __future__ import annotations

import json

import pytest

from xced.api.arrays import parse_runs

pytestmark = pytest.mark.timeout(120)


def _blocker(d, tmp_path) -> int:
    """A running job that the arrays below depend on, so that their elements pend."""
    jid = d.submit("--", "sleep", "600", cwd=tmp_path)
    d.wait_state(jid, ("RUN",))
    return jid


def _array(d, tmp_path, n: int, blocker: int) -> int:
    return d.submit("-w", f"done({blocker})", "-J", f"a[1-{n}]", "--", "true", cwd=tmp_path)


def test_kill_of_a_1000_element_array_prints_one_line_and_json_and_v_name_every_element(shared_daemon, tmp_path):
    d = shared_daemon
    b = _blocker(d, tmp_path)
    a1, a2, a3 = (_array(d, tmp_path, 1000, b) for _ in range(3))
    r = d.cli("kill", str(a1), check=True)
    assert r.stdout == f"Job <{a1}[1-1000]>: kill requested (1000 elements, now EXIT)\n"
    # awk reads it: the second field is the reference, the counts are whole numbers
    assert r.stdout.split()[1] == f"<{a1}[1-1000]>:"

    r = d.cli("kill", str(a2), "--json", check=True)
    [res] = json.loads(r.stdout)
    assert res["affected"] == [f"{a2}[{i}]" for i in range(1, 1001)]
    assert res["complete"] is True and res["count"] == 1000 and res["refused"] is None
    assert res["states"] == [{"state": "EXIT", "count": 1000, "indices": "1-1000"}] and res["skipped"] == []

    r = d.cli("kill", "-v", str(a3), check=True)  # -v: today's line, every element named (folded)
    assert r.stdout == f"Job <{a3}>: kill requested: {a3}[1-1000]\n"
    d.cli("kill", str(b), check=True)


def test_show_of_a_150_element_array_with_mixed_states_groups_rows_by_state_and_range(shared_daemon, tmp_path):
    d = shared_daemon
    b = _blocker(d, tmp_path)
    a = _array(d, tmp_path, 150, b)
    d.cli("kill", *[f"{a}[{i}]" for i in (*range(1, 11), 20, 149)], check=True)
    r = d.cli("show", str(a), check=True)
    assert "Elements:     12 EXIT, 138 PEND" in r.stdout
    table = r.stdout.split("\n\n")[1].splitlines()
    assert table[0].split() == ["ID", "STAT", "COUNT", "EXIT", "SIGNAL", "REASON"]
    rows = [line.split(None, 5) for line in table[1:]]
    assert [row[:3] for row in rows] == [[f"{a}[1-10,20,149]", "EXIT", "12"],
                                         [f"{a}[11-19,21-148,150]", "PEND", "138"]]
    assert rows[0][5].startswith("killed by ") and rows[0][5].endswith(" while pending") and rows[1][5].startswith("Dependency condition not satisfied")
    # the ranges read back to the very indices of each state
    j = d.show(a)
    for row in rows:
        want = sorted(e["index"] for e in j["elements"] if e["state"] == row[1])
        assert parse_runs(row[0][len(str(a)) + 1:-1]) == want
    # -v: one row per element, as before
    r = d.cli("show", "-v", str(a), check=True)
    listed = [line.split()[0] for line in r.stdout.split("\n\n")[1].splitlines()[1:]]
    assert listed == [f"{a}[{i}]" for i in range(1, 151)]

    # an action on the whole array: the elements acted on and those left alone, by state
    r = d.cli("stop", str(a), check=True)
    assert r.stdout == (f"Job <{a}[11-19,21-148,150]>: stopped (138 elements, now PSUSP)\n"
                        f"Job <{a}[1-10,20,149]>: not stopped (12 elements, EXIT)\n")
    r = d.cli("resume", str(a), check=True)
    assert r.stdout == (f"Job <{a}[11-19,21-148,150]>: resumed (138 elements, now PEND)\n"
                        f"Job <{a}[1-10,20,149]>: not resumed (12 elements, EXIT)\n")
    # one element of a large array: one line as before
    r = d.cli("kill", f"{a}[11]", check=True)
    assert r.stdout == f"Job <{a}>: kill requested: {a}[11]\n"
    d.cli("kill", str(b), check=True)


def test_fragmented_runs_are_bounded_and_say_how_many(shared_daemon, tmp_path):
    """Every other element killed: 500 runs of one index; the line names the first and last
    few runs and says how many there are, and stays short."""
    d = shared_daemon
    b = _blocker(d, tmp_path)
    a = _array(d, tmp_path, 1000, b)
    for chunk in range(0, 1000, 200):
        d.cli("kill", *[f"{a}[{i}]" for i in range(chunk + 2, chunk + 201, 2)], check=True)
    r = d.cli("show", str(a), check=True)
    rows = [line.split()[:3] for line in r.stdout.split("\n\n")[1].splitlines()[1:]]
    assert rows == [[f"{a}[1,3,5,7,9,11,...,995,997,999]", "PEND", "500"],
                    [f"{a}[2,4,6,8,10,12,...,996,998,1000]", "EXIT", "500"]]
    r = d.cli("kill", str(a), check=True)
    lines = r.stdout.splitlines()
    assert lines == [f"Job <{a}[1,3,5,7,9,11,...,995,997,999]>: kill requested (500 elements in 500 runs, now EXIT)",
                     f"Job <{a}[2,4,6,8,10,12,...,996,998,1000]>: not killed (500 elements in 500 runs, EXIT)"]
    d.cli("kill", str(b), check=True)


def test_kill_json_lists_the_refused_ids_with_their_reasons(shared_daemon, tmp_path):
    d = shared_daemon
    done = d.submit("--", "true", cwd=tmp_path)
    d.wait_state(done, ("DONE",))
    live = d.submit("--", "sleep", "600", cwd=tmp_path)
    r = d.cli("kill", "--json", str(live), str(done), "999999", f"{live}[3]")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert [(o["job_id"], o["affected"], o["count"]) for o in out] == [(live, [str(live)], 1), (done, [], 0),
                                                                       (999999, [], 0), (live, [], 0)]
    assert out[0]["refused"] is None and out[0]["message"] == f"kill requested: {live}"
    assert [o["refused"]["id"] for o in out[1:]] == [str(done), "999999", f"{live}[3]"]
    assert [o["refused"]["code"] for o in out[1:]] == ["conflict", "not_found", "not_found"]
    assert out[1]["refused"]["reason"] == f"job {done} has already finished (DONE); nothing to kill"
    assert out[2]["refused"]["reason"] == "job 999999 not found; `xcecli jobs -a -u all` lists the jobs the cluster knows"
    assert out[3]["refused"]["reason"] == f"job {live} is not an array; refer to it as {live}"
    assert all(o["message"] == o["refused"]["reason"] for o in out[1:])
    # the errors still go to stderr, one line each, as without --json
    assert r.stderr.count("xcecli: error: ") == 3


def test_arrays_of_at_most_100_elements_print_as_before(shared_daemon, tmp_path):
    d = shared_daemon
    b = _blocker(d, tmp_path)
    a = _array(d, tmp_path, 100, b)
    d.cli("kill", f"{a}[7]", check=True)
    r = d.cli("show", str(a), check=True)
    table = r.stdout.split("\n\n")[1].splitlines()
    assert table[0].split() == ["ID", "STAT", "HOSTS", "START", "END", "EXIT", "SIGNAL", "REASON"]
    assert [line.split()[0] for line in table[1:]] == [f"{a}[{i}]" for i in range(1, 101)]
    r = d.cli("stop", str(a), check=True)
    assert r.stdout == f"Job <{a}>: stopped: {a}[1-6,8-100]\n"
    r = d.cli("kill", str(a), check=True)
    assert r.stdout == f"Job <{a}>: kill requested: {a}[1-6,8-100]\n"
    d.cli("kill", str(b), check=True)

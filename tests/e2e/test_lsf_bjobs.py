"""LSF's `bjobs` on XCE (CLI-8, CLI-3, JOB-11; issue 18 part 4), against a real xced.

Each format is checked against the real `bjobs` output kept in
tests/data/lsf_output_samples/ (Nextflow's and pysqa's test data, sources in
tests/data/README.md) and against LSF's documented behaviour as docs/lsf-behaviour.md
section 5 records it (IBM's bjobs pages: -o https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bjobs.o.1.html,
-json https://www.ibm.com/support/knowledgecenter/SSWRJV_10.1.0/lsf_command_ref/bjobs.json.1.html,
exit codes https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=lsfconf-lsb-bjobs-consistent-exit-code).
Output is read the way the tools that poll LSF read it: Nextflow's LsfExecutor splits each
line on blanks and takes the JOBID and STAT columns at their place in the header.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, XCEADMIN, XCECLI, Daemon, kill_job_processes, short_tmpdir, write_config

pytestmark = pytest.mark.timeout(120)

SAMPLES = DATA / "lsf_output_samples"
#: LSF's SUBMIT_TIME, as the samples have it: `Oct 31 13:00`, `Jan  7 09:59`
LSF_TIME = r"[A-Z][a-z]{2} [ 123]\d \d\d:\d\d"


def _bjobs_cmd() -> list[str]:
    """The `bjobs` console script beside the interpreter, else `python -m xcecli.lsf.bjobs`."""
    script = Path(sys.executable).parent / "bjobs"
    if script.exists() and os.environ.get("PYTHONPATH") is None:
        return [str(script)]
    return [sys.executable, "-m", "xcecli.lsf.bjobs"]


def bjobs(d: Daemon, *args: str, user: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "XCE_TOPDIR": str(d.top), **(env or {})}
    e.pop("XCE_SOCKET", None)
    e.pop("LSB_BJOBS_CONSISTENT_EXIT_CODE", None)
    e.update(env or {})
    if user:
        e["XCE_TEST_USER"] = user
    else:
        e.pop("XCE_TEST_USER", None)
    return subprocess.run([*_bjobs_cmd(), *args], capture_output=True, text=True, env=e, cwd=str(d.top), timeout=60)


def nextflow_parse(text: str) -> dict[str, str]:
    """Nextflow's LsfExecutor.parseQueueStatus: the first non-empty line is the header; every
    other line split on blanks, the JOBID and STAT columns taken at the header's places."""
    result: dict[str, str] = {}
    col1 = col2 = -1
    for line in text.splitlines():
        if not line:
            continue
        if col1 == -1 and col2 == -1:
            words = line.split()
            col1, col2 = words.index("JOBID"), words.index("STAT")
            continue
        words = line.split()
        if len(words) > max(col1, col2):
            result[words[col1]] = words[col2]
    return result


def starts(header: str) -> list[int]:
    """Where each column's name starts in a header line."""
    return [m.start() for m in re.finditer(r"\S+", header)]


LONG_NAME = "nf-trinityInchwormChrysalis"  # a job name of Nextflow's sample


@pytest.fixture(scope="module")
def jobs():
    """One xced (4 slots) with jobs of every kind: a long-named one and a 2-slot one running,
    one DONE, one EXIT 3, a 3-element array DONE, and a 4-slot one pending behind the
    running ones."""
    top = short_tmpdir()
    write_config(top)
    d = Daemon(top)
    try:
        d.start()
        ids = {"long": d.submit("-J", LONG_NAME, "--", "sleep", "300"),
               "two": d.submit("-n", "2", "-J", "two", "--", "sleep", "300"),
               "ok": d.submit("-J", "ok", "--", "true"),
               "bad": d.submit("-J", "bad", "--", "sh", "-c", "exit 3"),
               "arr": d.submit("-J", "fam[1-3]", "--", "true")}
        for k, st in (("long", "RUN"), ("two", "RUN"), ("ok", "DONE"), ("bad", "EXIT"), ("arr", "DONE")):
            d.wait_state(ids[k], (st,))
        ids["pend"] = d.submit("-n", "4", "-J", "waiting", "--", "true")
        d.wait_state(ids["pend"], ("PEND",))
        yield d, ids
    finally:
        d.stop()
        kill_job_processes(top)
        import shutil

        shutil.rmtree(top, ignore_errors=True)


def test_the_default_table_has_lsfs_header_and_column_starts(jobs):
    """CLI-8: the default columns laid out as LSF lays them (Nextflow's sample: the same header
    line, so the same column starts); a job name longer than 10 characters is its last 9
    behind a `*` in the JOB_NAME column (Nextflow's nextflow_bjobs_with_extra_headers.txt);
    a 2-slot job's EXEC_HOST is `2*h1` (pysqa's sample); a pending job's is blank; only
    unfinished jobs by default (IBM bjobs: "By default, displays information about your own
    pending, running, and suspended jobs"). Nextflow's parser reads every job's state."""
    d, ids = jobs
    r = bjobs(d)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    sample = (SAMPLES / "nextflow_bjobs_w_output.txt").read_text().splitlines()
    assert lines[0] == sample[0]
    assert starts(lines[0]) == starts(sample[0])
    assert nextflow_parse(r.stdout) == {str(ids["long"]): "RUN", str(ids["two"]): "RUN", str(ids["pend"]): "PEND"}
    name_at, exec_at, time_at = (sample[0].index(c) for c in ("JOB_NAME", "EXEC_HOST", "SUBMIT_TIME"))
    truncated = (SAMPLES / "nextflow_bjobs_with_extra_headers.txt").read_text().splitlines()[3]
    assert re.fullmatch(r"\*\S{9}", truncated[name_at:name_at + 10])  # the sample's own cut name
    rows = {ln.split()[0]: ln for ln in lines[1:]}
    long = rows[str(ids["long"])]
    assert long[name_at:time_at] == "*" + LONG_NAME[-9:] + " " and re.fullmatch(LSF_TIME, long[time_at:])
    assert rows[str(ids["two"])][exec_at:name_at] == "2*h1".ljust(12)
    assert rows[str(ids["pend"])][exec_at:name_at] == " " * 12
    assert rows[str(ids["long"])][exec_at:name_at] == "h1".ljust(12)


def test_wide_cuts_nothing_and_noheader_drops_the_header(jobs):
    """CLI-8: `-w` ("Wide format. Displays job information without truncating fields", IBM
    bjobs -w) gives the whole name and, as Nextflow's `bjobs -w` sample, a parallel job's
    hosts one per slot joined by `:`; `-noheader` ("Removes the column headings") leaves
    the rows as they were. Nextflow polls with `bjobs -w` and reads every state."""
    d, ids = jobs
    wide = bjobs(d, "-w")
    assert wide.returncode == 0
    lines = wide.stdout.splitlines()
    assert lines[0] == (SAMPLES / "nextflow_bjobs_w_output.txt").read_text().splitlines()[0]
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    assert rows[str(ids["long"])][6] == LONG_NAME and rows[str(ids["two"])][5] == "h1:h1"
    assert nextflow_parse(wide.stdout)[str(ids["two"])] == "RUN"
    bare = bjobs(d, "-w", "-noheader")
    assert bare.returncode == 0 and bare.stdout.splitlines() == lines[1:]
    both = bjobs(d, "-aw")  # bunched flags, as getopt reads them: all states, wide
    assert {ln.split()[2] for ln in both.stdout.splitlines()[1:]} == {"RUN", "PEND", "DONE", "EXIT"}


def test_state_filters_and_job_names(jobs):
    """CLI-8: -p pending only, each with its pending reason under it (and no EXEC_HOST
    column); -r running; -d finished; -a all; -J NAME with `*` wildcards (IBM bjobs
    options; docs/lsf-behaviour.md section 5)."""
    d, ids = jobs
    p = bjobs(d, "-p")
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["JOBID", "USER", "STAT", "QUEUE", "FROM_HOST", "JOB_NAME", "SUBMIT_TIME"]
    assert lines[1].split()[:3] == [str(ids["pend"]), d.show(ids["pend"])["user"], "PEND"]
    assert lines[2].startswith(" ") and "slot" in lines[2] and lines[2].endswith(";")
    assert set(nextflow_parse(bjobs(d, "-r").stdout).values()) == {"RUN"}
    done = nextflow_parse(bjobs(d, "-d").stdout)
    assert done[str(ids["ok"])] == "DONE" and done[str(ids["bad"])] == "EXIT" and str(ids["long"]) not in done
    fam = bjobs(d, "-a", "-J", "fa*").stdout.splitlines()[1:]
    assert [ln.split()[6] for ln in fam] == ["fam[1]", "fam[2]", "fam[3]"]
    none = bjobs(d, "-J", "nomatch*")
    assert none.returncode == 0 and none.stdout == "" and "Job <nomatch*> is not found" in none.stderr


def test_job_ids_and_array_elements(jobs):
    """CLI-8: job IDs as arguments show those jobs in any state; an array is a row per
    element, JOBID the array's ID and JOB_NAME `name[index]`; `ID[INDEX]` one element (IBM
    bjobs: `bjobs [job_ID | "job_ID[index_list]"]`)."""
    d, ids = jobs
    arr = ids["arr"]
    r = bjobs(d, str(arr), str(ids["ok"]))
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines()[1:]]
    assert [(w[0], w[2], w[6]) for w in rows] == [(str(arr), "DONE", f"fam[{i}]") for i in (1, 2, 3)] + \
        [(str(ids["ok"]), "DONE", "ok")]
    one = bjobs(d, f"{arr}[2]", "-noheader").stdout.split()
    assert one[0] == str(arr) and one[6] == "fam[2]"
    some = bjobs(d, f"{arr}[1-3:2]", "-noheader").stdout.splitlines()
    assert [ln.split()[6] for ln in some] == ["fam[1]", "fam[3]"]


def test_an_unknown_job_is_not_found_exit_255(jobs):
    """LSF: `Job <ID> is not found` on stderr and exit code 255 for a job ID it does not
    know, the others still shown (docs/lsf-behaviour.md section 5; IBM
    LSB_BJOBS_CONSISTENT_EXIT_CODE: 255 for a nonexistent job ID); a malformed ID is an
    error saying what a job ID is."""
    d, ids = jobs
    r = bjobs(d, "999999")
    assert r.returncode == 255 and r.stdout == "" and r.stderr.strip() == "Job <999999> is not found"
    r = bjobs(d, str(ids["ok"]), "999998", f"{ids['arr']}[9]")
    assert r.returncode == 255 and nextflow_parse(r.stdout) == {str(ids["ok"]): "DONE"}
    assert r.stderr.splitlines() == ["Job <999998> is not found", f"Job <{ids['arr']}[9]> is not found"]
    bad = bjobs(d, "12x")
    assert bad.returncode == 255 and "12x: Illegal job ID" in bad.stderr


def test_twelve_thousand_job_ids_are_taken(jobs):
    """`bjobs $(seq ...)`, `xcecli jobs ID...` and `brequeue -r ID...` with 12,000 job IDs: the
    client asks for them in parts (a request line of them all is more than the daemon's HTTP
    server takes: it answered 400), the known job shown in place, each unknown one named
    (CLI-8, docs/lsf-behaviour.md section 5)."""
    d, ids = jobs
    many = [str(n) for n in range(900_000, 912_000)]
    r = bjobs(d, *many[:6000], str(ids["ok"]), *many[6000:])
    assert r.returncode == 255, r.stderr[-300:]
    assert nextflow_parse(r.stdout) == {str(ids["ok"]): "DONE"}
    err = r.stderr.splitlines()
    assert len(err) == 12_000 and err[0] == "Job <900000> is not found" and err[-1] == "Job <911999> is not found"
    r = d.cli("jobs", str(ids["ok"]), *many)
    assert r.returncode == 1 and str(ids["ok"]) in r.stdout and "job(s) not found: 900000" in r.stderr, r.stderr[-300:]
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_SOCKET", None)
    env.pop("XCE_TEST_USER", None)
    r = subprocess.run([sys.executable, "-m", "xcecli.lsf.brequeue", "-r", str(ids["ok"]), *many], capture_output=True,
                       text=True, env=env, timeout=120)
    assert "HTTP 400" not in r.stderr and f"Job <{ids['ok']}>" in r.stderr + r.stdout, r.stderr[-300:]


def test_no_job_found(jobs):
    """LSF prints `No unfinished job found` when the user has none (`No job found` with -a)
    and exits 0, or 255 with LSB_BJOBS_CONSISTENT_EXIT_CODE=Y (IBM lsf.conf
    LSB_BJOBS_CONSISTENT_EXIT_CODE; docs/lsf-behaviour.md section 5)."""
    d, _ = jobs
    r = bjobs(d, user="nobody")
    assert (r.returncode, r.stdout, r.stderr.strip()) == (0, "", "No unfinished job found")
    r = bjobs(d, "-a", user="nobody", env={"LSB_BJOBS_CONSISTENT_EXIT_CODE": "Y"})
    assert (r.returncode, r.stdout, r.stderr.strip()) == (255, "", "No job found")
    # a test-mode user (D-6) naming itself is no unknown user, account or not
    r = bjobs(d, "-u", "ghost-xce", user="ghost-xce")
    assert (r.returncode, r.stdout, r.stderr.strip()) == (0, "", "No unfinished job found")


def test_custom_columns_with_a_delimiter_and_widths(jobs):
    """CLI-8: `-o "field ... delimiter='c'"` (IBM bjobs -o): the columns named, joined by the
    delimiter; an empty value is `-` (EXIT_CODE is given for EXIT jobs only); `field:N`
    cuts a job name to N characters with a leading `*`, `field:-N` aligns right."""
    d, ids = jobs
    r = bjobs(d, "-a", "-o", "jobid stat exit_code job_name slots exec_host delimiter=','")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "JOBID,STAT,EXIT_CODE,JOB_NAME,SLOTS,EXEC_HOST"
    assert f"{ids['bad']},EXIT,3,bad,1,h1" in lines and f"{ids['ok']},DONE,-,ok,1,h1" in lines
    assert f"{ids['two']},RUN,-,two,2,h1:h1" in lines and f"{ids['pend']},PEND,-,waiting,4,-" in lines
    r = bjobs(d, "-o", "id job_name:8 slots:-5", str(ids["long"]))
    cut_name = "*" + LONG_NAME[-7:]  # 8 characters: the end of the name behind a `*`
    assert r.stdout.splitlines() == ["JOBID JOB_NAME SLOTS", f"{ids['long']:<5} {cut_name} {'1':>5}"]


def test_an_unknown_field_lists_the_valid_ones(jobs):
    """Issue 18, bad input: `bjobs -o` with an unknown field is an error listing the valid
    fields (exit 255, LSF's code for a failed command)."""
    d, _ = jobs
    r = bjobs(d, "-o", "jobid walltime")
    assert r.returncode == 255 and r.stdout == ""
    assert "unknown field(s) walltime; valid fields: jobid jobindex stat user queue job_name" in r.stderr


def test_json_has_lsfs_shape(jobs):
    """CLI-8: `-json` prints the -o columns as LSF does (IBM bjobs -json; the shape tools parse,
    e.g. `{"COMMAND":"bjobs","JOBS":1,"RECORDS":[{"JOBID":"22005",...}]}`): upper-case keys,
    every value a string, "" for none, JOBS the number of records; with -noheader it is
    refused (the IBM page: "Do not use with the -noheader option")."""
    d, ids = jobs
    r = bjobs(d, "-a", "-json", "-o", "jobid stat exit_code exec_host submit_time", str(ids["bad"]), str(ids["ok"]))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert list(doc) == ["COMMAND", "JOBS", "RECORDS"] and doc["COMMAND"] == "bjobs" and doc["JOBS"] == 2
    assert r.stdout.startswith('{\n  "COMMAND":"bjobs",\n  "JOBS":2,\n  "RECORDS":[\n    {\n      "JOBID":')
    bad, ok = doc["RECORDS"]
    assert list(bad) == ["JOBID", "STAT", "EXIT_CODE", "EXEC_HOST", "SUBMIT_TIME"]
    assert {k: bad[k] for k in ("JOBID", "STAT", "EXIT_CODE", "EXEC_HOST")} == \
        {"JOBID": str(ids["bad"]), "STAT": "EXIT", "EXIT_CODE": "3", "EXEC_HOST": "h1"}
    assert ok["STAT"] == "DONE" and ok["EXIT_CODE"] == "" and re.fullmatch(LSF_TIME, ok["SUBMIT_TIME"])
    refused = bjobs(d, "-json", "-noheader", "-o", "jobid")
    assert refused.returncode == 255 and "-noheader" in refused.stderr


def test_json_gives_a_command_as_typed_and_the_table_one_line(shared_daemon):
    """CLI-8 (a second fresh tester's find): the table shows a command's newline as `\\n` so
    that a row stays one line, and -json gave that escaped text too, so a real backslash-n
    and a newline could not be told apart. JSON escapes by itself: -json gives COMMAND and
    the JOB_NAME made from it as typed."""
    d = shared_daemon
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_SOCKET", None)
    env.pop("XCE_TEST_USER", None)
    ids = []
    for line in ("echo line1\necho line2", "printf 'a\\nb'"):
        r = subprocess.run([str(Path(sys.executable).parent / "bsub"), line], capture_output=True, text=True,
                           env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        ids.append(int(re.search(r"Job <(\d+)>", r.stdout).group(1)))
    r = bjobs(d, "-a", "-json", "-o", "jobid job_name command", *map(str, ids))
    newline, backslash = json.loads(r.stdout)["RECORDS"]
    assert newline["COMMAND"] == newline["JOB_NAME"] == "echo line1\necho line2"
    assert backslash["COMMAND"] == "printf 'a\\nb'"
    table = bjobs(d, "-a", "-o", "jobid command", "-noheader", *map(str, ids)).stdout.splitlines()
    assert [line.split(None, 1)[1] for line in table] == ["echo line1\\necho line2", "printf 'a\\nb'"]


def test_long_form_has_the_phrases_tools_parse(jobs):
    """CLI-8: `bjobs -l` with LSF's phrases: "Started on", "Done successfully", "Exited with
    exit code N.", "PENDING REASONS:" (docs/lsf-behaviour.md section 5)."""
    d, ids = jobs
    r = bjobs(d, "-l", str(ids["ok"]), str(ids["bad"]), str(ids["pend"]))
    assert r.returncode == 0, r.stderr
    blocks = r.stdout.split("-" * 78 + "\n")
    assert len(blocks) == 3
    ok, bad, pend = blocks
    assert f"Job <{ids['ok']}>, Job Name <ok>," in ok and "Status <DONE>" in ok
    assert re.search(r"\d\d:\d\d:\d\d: Started on <h1>, ", ok) and re.search(r": Done successfully\.", ok)
    assert "Status <EXIT>" in bad and re.search(r": Exited with exit code 3\.", bad)
    assert "Status <PEND>" in pend and "Started on" not in pend
    after = pend.split(" PENDING REASONS:\n", 1)[1].splitlines()
    assert after and after[0].startswith(" ") and after[0].endswith(";")


def test_bjobs_imports_no_parser_library_model_or_rich(jobs):
    """CLI-7: bjobs is on the start-up budget, as `xcecli jobs` (tests/cli/test_fast.py):
    no typer, click, pydantic, rich or httpx among the modules it imports."""
    d, _ = jobs
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_SOCKET", None)
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "xcecli.lsf.bjobs", "-u", "all", "-w"],
                       capture_output=True, text=True, env=env, timeout=60)
    mods = {ln.split("|")[-1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time:")}
    assert r.returncode == 0 and "JOBID" in r.stdout and "xcecli.lsf.common" in mods  # run as __main__ (-m)
    heavy = {"typer", "click", "pydantic", "pydantic_core", "rich", "httpx", "fastapi", "orjson"}
    assert sorted(m for m in mods if m.split(".")[0] in heavy) == []


def test_xcecli_jobs_takes_job_ids_and_refuses_unknown_queues_and_users(jobs):
    """Issue 18 part 4 (CLI-3): `xcecli jobs ID...` as `bjobs ID...`: those jobs in the order
    given, of any state, an element `ID[INDEX]` as its own row; an unknown ID names it
    (exit 1); an unknown queue or user given to -q/-u is an error naming it and what is
    valid, never an empty table (on both paths: tests/cli/test_fast.py holds them equal)."""
    d, ids = jobs
    r = d.cli("jobs", str(ids["ok"]), f"{ids['arr']}[2]", str(ids["long"]), check=True)
    rows = [ln.split() for ln in r.stdout.splitlines()[1:]]
    assert [(w[0], w[2]) for w in rows] == [(str(ids["ok"]), "DONE"), (f"{ids['arr']}[2]", "DONE"),
                                            (str(ids["long"]), "RUN")]
    r = d.cli("jobs", str(ids["ok"]), "999997")
    assert r.returncode == 1 and str(ids["ok"]) in r.stdout and "job(s) not found: 999997" in r.stderr
    r = d.cli("jobs", "-q", "nosuch")
    assert r.returncode == 1 and "queue 'nosuch': no such queue" in r.stderr and "the queues are: normal" in r.stderr
    r = d.cli("jobs", "-u", "no-such-user-xce")
    assert r.returncode == 1 and "user 'no-such-user-xce': no such user" in r.stderr and r.stdout == ""
    r = bjobs(d, "-u", "no-such-user-xce")
    assert r.returncode == 255 and "no such user" in r.stderr


def test_a_killed_job_exits_with_128_plus_its_signal(jobs):
    """A job ended by a signal (`xcecli kill`: INT, then TERM, then KILL, as LSF's bkill
    sends them, docs/lsf-behaviour.md section 5) is EXIT with EXIT_CODE 128 plus the
    signal's number, as its shell reports it (docs/lsf-behaviour.md section 6). Runs last
    in this module: it ends the 2-slot job the other tests see running."""
    import signal

    d, ids = jobs
    d.cli("kill", str(ids["two"]), check=True)
    el = d.wait_state(ids["two"], ("EXIT",))["elements"][0]
    assert el["exit_signal"], el
    code = 128 + int(getattr(signal, el["exit_signal"]))
    r = bjobs(d, "-o", "jobid stat exit_code delimiter=' '", "-noheader", str(ids["two"]))
    assert r.stdout == f"{ids['two']} EXIT {code}\n"
    assert re.search(rf": Exited with exit code {code}\.", bjobs(d, "-l", str(ids["two"])).stdout)


def test_a_job_past_the_clean_period_is_still_reported_by_id(topdir):
    """JOB-11 (LSF CLEAN_PERIOD): a finished job that left the daemon's memory is no longer
    listed, but `bjobs ID`, `bjobs -l ID` and `xcecli jobs ID` still report it, read back
    from the store with its final state."""
    write_config(topdir)
    with open(topdir / "config" / "xce.yaml", "a") as f:
        f.write("clean_period: 1h\n")
    d = Daemon(topdir).start()
    try:
        jid = d.submit("-J", "old", "--", "sh", "-c", "exit 5")
        d.wait_state(jid, ("EXIT",))
        r = subprocess.run([XCEADMIN, "debug", "clock", "--advance", "2h"], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "XCE_TEST_USER": "admin", "XCE_TOPDIR": str(d.top)})
        assert r.returncode == 0, r.stderr
        assert str(jid) not in bjobs(d, "-a").stdout  # out of memory: no longer listed
        r = bjobs(d, str(jid))
        assert r.returncode == 0 and nextflow_parse(r.stdout) == {str(jid): "EXIT"}
        assert re.search(r": Exited with exit code 5\.", bjobs(d, "-l", str(jid)).stdout)
        assert d.cli("jobs", str(jid), check=True).stdout.splitlines()[1].split()[:3] == [
            str(jid), d.show(jid)["user"], "EXIT"]
    finally:
        d.stop()


def test_a_name_a_non_utf8_stdout_cannot_hold_is_escaped_not_fatal(shared_daemon):
    """CLI-3, CLI-8 (a second fresh tester's find): a job named with an emoji made `bjobs`,
    `xcecli jobs` and `xcecli show` fail (UnicodeEncodeError, exit 1) for anyone whose
    stdout is not UTF-8; what it cannot encode is written as a backslash escape now, as
    Python writes stderr, and the listing exits 0."""
    d = shared_daemon
    job = d.submit("-J", "\U0001f600job", "--", "true")
    d.wait_state(job, ("DONE",))
    ascii_out = {"PYTHONIOENCODING": "ascii"}
    r = bjobs(d, "-a", str(job), env=ascii_out)
    assert r.returncode == 0 and "\\U0001f600job" in r.stdout, (r.returncode, r.stderr)
    env = {**os.environ, "XCE_TOPDIR": str(d.top), "PYTHONIOENCODING": "latin-1"}
    env.pop("XCE_SOCKET", None)
    for args in (["jobs", "-a", str(job)], ["show", str(job)]):
        r = subprocess.run([XCECLI, *args], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0 and "\\U0001f600job" in r.stdout, (args, r.returncode, r.stderr)


def test_a_bidi_override_or_zero_width_character_in_a_name_is_shown_escaped(shared_daemon):
    """CLI-8, CLI-3: a -J name may hold a right-to-left override (U+202E) or a zero-width
    space (U+200B); bjobs shows them escaped, in its columns and in -l, as xcecli jobs
    does, so that a name cannot reorder or hide what the terminal shows of its row; so do
    bhist's JOB_NAME, bjobs -A's ARRAY_SPEC and a kill reason (bkill -C) in bjobs -o and -l.
    `bjobs -json` gives the name as it was typed (JSON escapes by itself)."""
    from tests.e2e.test_lsf_commands import lsf

    d = shared_daemon
    name = "ab\u202ecd\u200bef"
    job = d.submit("-J", name, "--", "true")
    d.wait_state(job, ("DONE",))
    shown = "ab\\u202ecd\\u200bef"
    for args in (("-a", "-w", str(job)), ("-l", str(job)), ("-a", "-o", "name", str(job))):
        r = bjobs(d, *args)
        assert r.returncode == 0 and shown in r.stdout and "\u202e" not in r.stdout, (args, r.stdout)
    r = d.cli("jobs", "-a", str(job))
    assert shown in r.stdout and "\u202e" not in r.stdout, r.stdout
    r = bjobs(d, "-a", "-json", "-o", "job_name", str(job))
    assert json.loads(r.stdout)["RECORDS"][0]["JOB_NAME"] == name, r.stdout
    r = lsf(d, "bhist", "-a", str(job))  # the short form's JOB_NAME column
    assert r.returncode == 0 and shown[:8] in r.stdout and "\u202e" not in r.stdout, r.stdout
    arr = d.submit("-J", "q\u202ez[1-2]", "-H", "--", "true")
    r = bjobs(d, "-A", "-w", str(arr))  # ARRAY_SPEC
    assert r.returncode == 0 and "q\\u202ez[1-2]" in r.stdout and "\u202e" not in r.stdout, r.stdout
    assert lsf(d, "bkill", "-C", "evil\u202egnp.exe.", str(arr)).returncode == 0
    d.wait_state(arr, ("EXIT",))
    r = bjobs(d, "-a", "-o", "jobid exit_reason", str(arr))  # the kill's reason, the user's text
    assert r.returncode == 0 and "kill reason: evil\\u202egnp.exe." in r.stdout and "\u202e" not in r.stdout, r.stdout
    r = bjobs(d, "-l", f"{arr}[1]")
    assert "kill reason: evil\\u202egnp.exe.\n" in r.stdout, r.stdout  # one final stop, not two

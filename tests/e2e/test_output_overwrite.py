"""End to end: `-oo` / `-eo` overwrite the output file where `-o` / `-e` append (issue 18
part 4; JOB-12, CLI-8, CLI-2).

LSF's rule, IBM bsub -oo (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.__oo.1.html)
and -eo (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.__eo.1.html): as -o /
-e, "If the specified file already exists, it is overwritten"; -o / -e append to an existing
file (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.o.1.html). XCE truncates
the file when each run starts, so a requeued run overwrites its earlier run's output, and each
element of an array its own file (docs/lsf-behaviour.md section 6). A real xced on a Unix
socket, real jobs, the real bsub and xcecli.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.e2e.test_lsf_bsub import LSF_LINE, bsub

pytestmark = pytest.mark.timeout(120)


def _submitted(r) -> int:
    m = LSF_LINE.fullmatch(r.stdout)
    assert r.returncode == 0 and m, (r.stdout, r.stderr)
    return int(m.group(1))


def _done(d, jid: int) -> dict:
    j = d.wait_state(jid, ("DONE", "EXIT"))
    assert j["state"] == "DONE", j
    return j


def test_bsub_oo_twice_leaves_only_the_second_jobs_output_and_o_twice_appends(shared_daemon, tmp_path):
    """CLI-8, JOB-12, IBM bsub -oo: two jobs with `-oo f` leave only the second's output
    (the first wrote more lines than the second, so a file written over in place would show
    them); `-o g` twice appends both (IBM bsub -o). No warning for -oo any more."""
    d = shared_daemon
    f, g = tmp_path / "f.out", tmp_path / "g.out"
    r1 = bsub(d, "-oo", str(f), "echo first-1; echo first-2; echo first-3", cwd=tmp_path)
    _done(d, _submitted(r1))
    assert f.read_text() == "first-1\nfirst-2\nfirst-3\n"
    r2 = bsub(d, "-oo", str(f), "echo", "second", cwd=tmp_path)
    assert r2.stderr == "", r2.stderr
    _done(d, _submitted(r2))
    assert f.read_text() == "second\n"
    for word in ("one", "two"):
        _done(d, _submitted(bsub(d, "-o", str(g), "echo", word, cwd=tmp_path)))
    assert g.read_text() == "one\ntwo\n"


def test_eo_overwrites_stderr_only_and_xcecli_takes_both_spellings(shared_daemon, tmp_path):
    """CLI-2, IBM bsub -eo: `-eo FILE` truncates the stderr file while `-o` still appends to
    stdout's; xcecli submit takes `--eo` (and `-oo`) as bsub does; `-o` with `-oo` is refused,
    naming both."""
    d = shared_daemon
    out, err = tmp_path / "o.txt", tmp_path / "e.txt"
    out.write_text("kept\n")
    err.write_text("old error 1\nold error 2\n")
    r = bsub(d, "-o", str(out), "-eo", str(err), "echo o; echo e >&2", cwd=tmp_path)
    _done(d, _submitted(r))
    assert (out.read_text(), err.read_text()) == ("kept\no\n", "e\n")
    jid = d.submit("--eo", "e.txt", "-oo", "o.txt", "--", "sh", "-c", "echo O; echo E >&2", cwd=tmp_path)
    _done(d, jid)
    assert (out.read_text(), err.read_text()) == ("O\n", "E\n")
    bad = bsub(d, "-o", "a", "-oo", "b", "true", cwd=tmp_path)
    assert bad.returncode == 255 and "give -o or -oo, not both" in bad.stderr, bad.stderr
    bad = d.cli("submit", "-e", "a", "--eo", "b", "--", "true", cwd=tmp_path)
    assert bad.returncode == 2 and "give -e or -eo, not both" in bad.stderr, bad.stderr


def test_an_array_with_oo_percent_i_overwrites_each_elements_own_file(shared_daemon, tmp_path):
    """JOB-4, JOB-12, IBM bsub -oo with %I ("the index of the job in the array"): each element
    truncates its own out.INDEX, leaving its own line only; `-oo logs/` (a directory, as -o
    DIR/) overwrites logs/ID_INDEX.out."""
    d = shared_daemon
    for i in (1, 2, 3):
        (tmp_path / f"out.{i}").write_text(f"stale output of an earlier array, element {i}\n" * 3)
    r = bsub(d, "-J", "ov[1-3]", "-oo", "out.%I", 'echo "element $LSB_JOBINDEX"', cwd=tmp_path)
    _done(d, _submitted(r))
    assert [(tmp_path / f"out.{i}").read_text() for i in (1, 2, 3)] == ["element 1\n", "element 2\n", "element 3\n"]
    first = _submitted(bsub(d, "-oo", "logs/", "echo", "a", cwd=tmp_path))
    _done(d, first)
    j = _done(d, _submitted(bsub(d, "-J", "od[1]", "-oo", "logs/", "echo", "b", cwd=tmp_path)))
    [e] = j["elements"]
    assert Path(e["stdout"]).read_text() == "b\n" and Path(e["stdout"]).parent == tmp_path / "logs"
    assert (tmp_path / "logs" / f"{first}.out").read_text() == "a\n"


def test_bsub_oo_directive_in_a_script_and_the_command_line_o_wins_over_it(shared_daemon, tmp_path):
    """JOB-12, IBM bsub `command` ("#BSUB ... the command line option overrides"): `#BSUB -oo
    FILE` in a script on stdin overwrites FILE; `-o` on the command line replaces the
    script's `-oo` (same file option), so the file is appended to; --dry-run says which."""
    d = shared_daemon
    f = tmp_path / "s.out"
    f.write_text("before\n")
    script = f"#!/bin/sh\n#BSUB -oo {f}\n#BSUB -J ovs\necho from-script\n"
    r = bsub(d, input=script, cwd=tmp_path)
    assert r.stderr == "", r.stderr
    _done(d, _submitted(r))
    assert f.read_text() == "from-script\n"
    _done(d, _submitted(bsub(d, "-o", str(f), input=script, cwd=tmp_path)))
    assert f.read_text() == "from-script\nfrom-script\n"
    (tmp_path / "job.sh").write_text(script)
    dry = d.cli("submit", "--dry-run", "job.sh", cwd=tmp_path, check=True).stdout
    assert f"stdout:          {f} (overwritten at each run's start)  (from script line 2)\n" in dry, dry
    dry = d.cli("submit", "--dry-run", "-o", "x.out", "job.sh", cwd=tmp_path, check=True).stdout
    assert "stdout:          x.out  (command line)\n" in dry, dry


def test_a_requeued_job_overwrites_its_first_runs_output(shared_daemon, tmp_path):
    """D-5, JOB-12, IBM bsub -oo: the file is overwritten at each run's start, so a job
    requeued while running (brequeue) leaves only its second run's output."""
    d = shared_daemon
    f = tmp_path / "rq.out"
    body = "if [ -e ran ]; then echo second-run; else touch ran; echo first-run; echo more; sleep 60; fi"
    jid = d.submit("-oo", "rq.out", "--", "sh", "-c", body, cwd=tmp_path)
    deadline = time.monotonic() + 20
    while not f.exists() or "more" not in f.read_text():
        assert time.monotonic() < deadline, "the first run never wrote its output"
        time.sleep(0.05)  # waits for the job's output, never for a time
    d.cli("requeue", str(jid), check=True)
    _done(d, jid)
    ev = json.loads(d.cli("hist", str(jid), "--json", check=True).stdout)["events"]
    assert [e["kind"] for e in ev].count("DISPATCH") == 2
    assert f.read_text() == "second-run\n"

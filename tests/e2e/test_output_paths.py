"""End to end: where `-o` and `-e` write (issue 18 part 3; JOB-12, JOB-1, CLI-3).

LSF's rules (docs/lsf-behaviour.md, IBM bsub -o: https://www.ibm.com/docs/en/SSWRJV_10.1.0/
lsf_command_ref/bsub.o.1.html; "Specifying a directory for job output":
https://www.ibm.com/support/knowledgecenter/SSWRJV_10.1.0/lsf_admin/job_output_directory_specify.html):
a path ending in `/` names a directory, created if missing, and the files are
`DIR/JOBID.out` / `DIR/JOBID.err`; `%J` is the job ID and `%I` the array index (0 for a plain
job). XCE also takes an existing directory named without the slash (issue 18), gives an
array element `JOBID_INDEX.out` (LSF's per-element form, LSB_JOB_TMPDIR "arrayID_arrayIndex"),
and reads `%%` as a literal `%`. `xcecli show` and `--json` give each element's paths.
A real xced on a Unix socket, real jobs, the real xcecli.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from xced.api.models import JobOut

pytestmark = pytest.mark.timeout(120)

SCRIPT = 'echo "out $LSB_JOBID[$LSB_JOBINDEX]"; echo "err $LSB_JOBID" >&2; echo "file=$LSB_OUTPUTFILE"'


def _done(d, jid: int) -> dict:
    j = d.wait_state(jid, ("DONE", "EXIT"))
    assert j["state"] == "DONE", j
    JobOut.model_validate(j)  # the daemon's answer is the API model's shape
    return j


def _wait_file(p: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while not p.exists():
        assert time.monotonic() < deadline, f"{p} was never written"
        time.sleep(0.05)
    return p.read_text()


def test_o_dir_slash_writes_dir_jobid_out_creating_dir_and_show_gives_the_path(shared_daemon, tmp_path):
    """JOB-12, LSF "Specifying a directory for job output": `-o logs/` (a directory not yet
    there) makes logs/ and writes logs/JOBID.out, stderr with it (no -e, IBM bsub -o); show
    --json and the human show give that path for stdout and stderr."""
    d = shared_daemon
    jid = d.submit("-o", "logs/", "--", "sh", "-c", SCRIPT, cwd=tmp_path)
    j = _done(d, jid)
    out = tmp_path / "logs" / f"{jid}.out"
    text = out.read_text()
    assert f"out {jid}[0]\n" in text and f"err {jid}\n" in text and f"file={out}\n" in text
    [e] = j["elements"]
    assert e["stdout"] == e["stderr"] == str(out)
    human = d.cli("show", str(jid), check=True).stdout
    assert f"Output:       {out}\n" in human and f"Errors:       {out}\n" in human


def test_existing_dir_without_slash_and_e_dir_slash_each_get_their_file(shared_daemon, tmp_path):
    """JOB-12 (issue 18): `-o DIR` naming a directory that exists, without the slash, writes
    DIR/JOBID.out as `-o DIR/` does (decided on the execution host); `-e ERRDIR/` writes
    ERRDIR/JOBID.err (LSF: error_directory/job_ID.err). LSB_OUTPUTFILE and LSB_ERRORFILE (IBM
    "Environment variables set for job execution") name the files written; show --json
    gives them once the job has started."""
    d = shared_daemon
    (tmp_path / "outs").mkdir()
    jid = d.submit("-o", "outs", "-e", "errs/", "--", "sh", "-c", SCRIPT + '; echo "efile=$LSB_ERRORFILE"',
                   cwd=tmp_path)
    j = _done(d, jid)
    out, err = tmp_path / "outs" / f"{jid}.out", tmp_path / "errs" / f"{jid}.err"
    assert out.read_text() == f"out {jid}[0]\nfile={out}\nefile={err}\n"
    assert err.read_text() == f"err {jid}\n"
    assert not (tmp_path / "outs.out").exists()
    [e] = j["elements"]
    assert (e["stdout"], e["stderr"]) == (str(out), str(err))


def test_percent_patterns_in_directory_names_for_an_array_and_a_literal_percent(shared_daemon, tmp_path):
    """JOB-12, IBM bsub -o ("%J is replaced by the job ID ... %I by the index of the job in the
    array"): the patterns work in directory names; with a trailing slash each element writes
    DIR/JOBID_INDEX.out; `%%` is a single `%` (so `%%J` stays the text `%J`). show --json
    gives each element its own path, and the human show lists them."""
    d = shared_daemon
    jid = d.submit("-J", "sweep[1-2]", "-o", "run_%J/el%I/", "-e", "pct%%/%%J-%J.err", "--", "sh", "-c", SCRIPT,
                   cwd=tmp_path)
    j = _done(d, jid)
    paths = {}
    for i in (1, 2):
        out = tmp_path / f"run_{jid}" / f"el{i}" / f"{jid}_{i}.out"
        assert out.read_text() == f"out {jid}[{i}]\nfile={out}\n"
        paths[i] = str(out)
    err = tmp_path / "pct%" / f"%J-{jid}.err"
    assert err.read_text() == f"err {jid}\nerr {jid}\n"
    assert {e["index"]: (e["stdout"], e["stderr"]) for e in j["elements"]} == {
        1: (paths[1], str(err)), 2: (paths[2], str(err))}
    human = d.cli("show", str(jid), check=True).stdout
    table = human.split("\n\n")[-1].splitlines()
    assert table[0].split() == ["ID", "OUTPUT", "ERRORS"]
    assert [r.split() for r in table[1:]] == [[f"{jid}[1]", paths[1], str(err)], [f"{jid}[2]", paths[2], str(err)]]


def test_a_pending_job_shows_the_paths_its_options_give(shared_daemon, tmp_path):
    """JOB-12, CLI-3: before it runs, show --json gives the path the -o text names (%J
    expanded, relative to the job's directory; a job without -o: null until it starts)."""
    d = shared_daemon
    blocker = d.submit("--", "sleep", "60", cwd=tmp_path)
    d.wait_state(blocker, ("RUN",))
    jid = d.submit("-w", f"done({blocker})", "-o", "o.%J.txt", "--", "true", cwd=tmp_path)
    plain = d.submit("-w", f"done({blocker})", "--", "true", cwd=tmp_path)
    [e] = d.show(jid)["elements"]
    assert e["state"] == "PEND" and e["stdout"] == e["stderr"] == str(tmp_path / f"o.{jid}.txt")
    [e] = d.show(plain)["elements"]
    assert e["stdout"] is None and e["stderr"] is None
    d.cli("kill", str(blocker), str(jid), str(plain), check=True)


def test_peek_reads_the_file_in_the_directory_an_o_dir_resolved_to(shared_daemon, tmp_path):
    """JOB-12, CLI-3 (LSF bpeek shows a running job's output): for `-o DIR` resolved on the
    execution host to DIR/JOBID.out, `xcecli peek` reads that file."""
    d = shared_daemon
    (tmp_path / "logs").mkdir()
    jid = d.submit("-o", "logs", "--", "sh", "-c", "echo peeked-$LSB_JOBID; sleep 60", cwd=tmp_path)
    d.wait_state(jid, ("RUN",))
    _wait_file(tmp_path / "logs" / f"{jid}.out")
    deadline = time.monotonic() + 10
    while True:
        r = d.cli("peek", str(jid))
        if f"peeked-{jid}" in r.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    d.cli("kill", str(jid), check=True)
    assert r.returncode == 0 and f"peeked-{jid}\n" in r.stdout, (r.stdout, r.stderr)

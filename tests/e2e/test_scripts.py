"""Job scripts with `xcecli submit` (JOB-12, CLI-2, CLI-8; issue 18 parts 1 and 2), end to end
with a real xced: `#BSUB` and `#XCE` directives at the top of a script, given as a path or
on standard input; the command line over the script; a bad directive named by its line; a
script on stdin kept in the job's directory, readable by its user only; a script without
its execute bit run with the interpreter its `#!` line names.

LSF sources: IBM's bsub `command` argument ("bsub options can also be specified in the
standard input if the line begins with #BSUB ... the command line option overrides the
option in the standard input"):
https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.command.1.html ;
bsub `job_script` (a script given as a path, which "does not have to be an executable
file", with #BSUB lines): https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.job_script.1.html
"""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from tests.conftest import XCECLI

pytestmark = pytest.mark.timeout(120)


def _cli(d, *args: str, input: str | None = None, cwd=None) -> subprocess.CompletedProcess:
    """The real xcecli against daemon `d`, with `input` on its standard input (an empty
    stdin when None, as in a pipeline)."""
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_SOCKET", None)
    env.pop("XCE_TEST_USER", None)
    return subprocess.run([XCECLI, *args], capture_output=True, text=True, env=env, input=input or "",
                          timeout=60, cwd=str(cwd or d.top))


def _ids(d) -> set[int]:
    r = d.cli("jobs", "-a", "-u", "all", "-o", "id", check=True)
    return {int(x) for x in r.stdout.split()[1:]}


SCRIPT = """#!/bin/bash
# a job script as LSF users write it
#BSUB -J from_script
#BSUB -n 2
#BSUB -W 5
#BSUB -o {out}

#XCE --env SCRIPT_VAR=from-xce-line
declare -a words=(bash only)          # bash syntax: /bin/sh (dash) would fail here
echo "job=$LSB_JOBID n=$LSB_DJOB_NUMPROC var=$SCRIPT_VAR ${{words[1]}} self=$0"
"""


def test_a_script_on_stdin_is_read_stored_and_run(shared_daemon, tmp_path):
    """JOB-12: `xcecli submit < job.lsf` (refused before issue 18): its #BSUB and #XCE lines set
    the job's name, tasks, run limit, output and environment; the script is kept in the
    job's directory, mode 0700 (its user's only, D-7), and run from there with the
    interpreter its #! names (bash syntax works)."""
    d = shared_daemon
    out = tmp_path / "out.txt"
    r = _cli(d, "submit", "--parsable", input=SCRIPT.format(out=out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    job = int(r.stdout)
    j = d.wait_state(job, ("DONE", "EXIT"))
    assert j["state"] == "DONE", j
    assert (j["name"], j["ntasks_min"], j["run_limit_s"]) == ("from_script", 2, 300)
    text = out.read_text()
    kept = d.top / "jobs" / str(job) / "0" / "script"
    assert f"job={job} n=2 var=from-xce-line only self={kept}\n" == text
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700 and kept.read_text() == SCRIPT.format(out=out)
    assert j["argv"] == ["/bin/bash"]  # the interpreter of its #! line; the worker appends the kept copy


def test_a_script_path_with_the_command_line_winning(shared_daemon, tmp_path):
    """JOB-12, as LSF: options on the command line override the script's (-J, -W), the others
    still come from it (-n); a script without its execute bit runs with its #! interpreter."""
    d = shared_daemon
    script = tmp_path / "job.lsf"
    script.write_text("#!/bin/bash\n#BSUB -J script_name\n#BSUB -n 2\n#BSUB -W 5\n[[ -n x ]] && echo ok\n")
    script.chmod(0o644)
    job = d.submit("-J", "cli_name", "-W", "7", "-o", str(tmp_path / "o"), str(script), cwd=tmp_path)
    j = d.wait_state(job, ("DONE", "EXIT"))
    assert (j["state"], j["name"], j["ntasks_min"], j["run_limit_s"]) == ("DONE", "cli_name", 2, 420), j
    assert (tmp_path / "o").read_text() == "ok\n"
    assert j["argv"] == ["/bin/bash", str(script)]


def test_dry_run_says_which_values_came_from_the_script(shared_daemon, tmp_path):
    """CLI-2 --dry-run (MERGE-1 origins): a value from a directive says its script line; one
    the command line gave says so."""
    d = shared_daemon
    script = tmp_path / "job.lsf"
    script.write_text("#!/bin/sh\n\n#BSUB -n 2\n# a comment\n#BSUB -J s_name\n#XCE -W 3\ntrue\n")
    r = _cli(d, "submit", "--dry-run", "-J", "c_name", str(script), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = {ln.split(":")[0]: ln for ln in r.stdout.splitlines()}
    assert lines["ntasks_min"].split() == ["ntasks_min:", "2", "(from", "script", "line", "3)"]
    assert lines["run_limit_s"].split() == ["run_limit_s:", "180", "(from", "script", "line", "6)"]
    assert lines["name"].split() == ["name:", "c_name", "(command", "line)"]


@pytest.mark.parametrize("line, says", [
    ("#BSUB -n x", "-n 'x': expected MIN or MIN,MAX"),
    ("#BSUB -Z 3", "-Z: not an option this command takes"),
    ("#BSUB -m h1", "-m (host selection) is not supported by XCE"),
    ("#XCE --bogus 1", "--bogus: not an option of xcecli submit"),
    ("#BSUB -q short extra", "'extra' is not an option: a directive gives options only"),
])
def test_a_bad_directive_is_an_error_naming_its_line(shared_daemon, tmp_path, line, says):
    """JOB-12: an unknown or malformed directive is a usage error (exit 2) naming the script
    and its line, never silently ignored; nothing is submitted. Through a path and stdin."""
    d = shared_daemon
    script = tmp_path / "job.lsf"
    text = f"#!/bin/sh\n#BSUB -J ok\n\n{line}\necho never\n"
    script.write_text(text)
    before = _ids(d)
    r = _cli(d, "submit", str(script), cwd=tmp_path)
    assert r.returncode == 2 and f"{script}:4: {line}: " in r.stderr and says in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    r = _cli(d, "submit", input=text, cwd=tmp_path)
    assert r.returncode == 2 and f"standard input:4: {line}: " in r.stderr and says in r.stderr, r.stderr
    assert _ids(d) == before


def test_a_directive_below_the_first_command_is_not_read_and_said(shared_daemon, tmp_path):
    """JOB-12: directives are read up to the first command line, as LSF reads them; one below
    it is not read, and a warning names its line (never silently)."""
    d = shared_daemon
    r = _cli(d, "submit", "--parsable", input="#!/bin/sh\n#BSUB -J top\necho hi\n#BSUB -n 3\n", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "standard input:4: #BSUB -n 3: not read: directives end at the script's first command line" in r.stderr
    j = d.show(int(r.stdout))
    assert (j["name"], j["ntasks_min"]) == ("top", 1)


@pytest.mark.parametrize("text, want", [
    ("#!/usr/bin/env python3\nimport sys\nprint('py', sys.version_info[0], sys.argv[1])\n", "py 3 arg1\n"),
    ("#!/bin/bash\nset -- \"$@\"; a=(x y); echo \"bash ${a[1]} $1\"\n", "bash y arg1\n"),
    ("echo \"sh $1\"\n", "sh arg1\n"),
])
def test_a_script_without_its_execute_bit_runs_with_its_interpreter(shared_daemon, tmp_path, text, want):
    """JOB-12: a script that is not executable runs with the interpreter its #! names (a
    python script, a bash one with bash-only syntax); only one without #! runs with /bin/sh."""
    d = shared_daemon
    script = tmp_path / "job"
    script.write_text(text)
    script.chmod(0o600)
    job = d.submit("-o", str(tmp_path / "out"), str(script), "arg1", cwd=tmp_path)
    j = d.wait_state(job, ("DONE", "EXIT"))
    assert j["state"] == "DONE", (j, (tmp_path / "out").read_text())
    assert (tmp_path / "out").read_text() == want


def test_submit_with_no_command_and_an_empty_stdin_says_so(shared_daemon, tmp_path):
    """CLI-1: no command and nothing on standard input is a usage error, exit 2."""
    r = _cli(shared_daemon, "submit", "-q", "normal", input="", cwd=tmp_path)
    assert r.returncode == 2 and "no command" in r.stderr and "standard input is empty" in r.stderr, r.stderr


def test_the_typer_path_takes_a_script_on_stdin_as_the_fast_path_does(shared_daemon, tmp_path):
    """CLI-7: the Typer command (what runs when the fast path declines) reads a script on
    standard input too, and refuses a bad directive with the same message and exit code."""
    import sys

    d = shared_daemon
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_SOCKET", None)
    env.pop("XCE_TEST_USER", None)
    code = "import sys; sys.argv[0] = 'xcecli'; from xcecli.app import main; main()"

    def typer(text: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code, "submit", "--parsable"], input=text, capture_output=True,
                              text=True, env=env, timeout=60, cwd=str(tmp_path))

    r = typer("#BSUB -J typer_path\ntrue\n")
    assert r.returncode == 0, r.stderr
    assert d.show(int(r.stdout))["name"] == "typer_path"
    bad = "#BSUB -n x\ntrue\n"
    slow, fast = typer(bad), _cli(d, "submit", "--parsable", input=bad, cwd=tmp_path)
    assert (slow.returncode, slow.stderr) == (fast.returncode, fast.stderr) and slow.returncode == 2, slow.stderr
    assert "standard input:1: #BSUB -n x: -n 'x'" in slow.stderr


def test_a_pack_line_naming_a_script_reads_its_directives(shared_daemon, tmp_path):
    """JOB-12 with CLI-7's packs: a pack line whose command is a script gets its directives, and
    a warning of that script is said with the pack's line (never dropped)."""
    d = shared_daemon
    script = tmp_path / "job.lsf"
    script.write_text("#!/bin/sh\n#BSUB -J from_pack_script\n#BSUB -G grp\ntrue\n")
    pack = tmp_path / "jobs.pack"
    pack.write_text(f"-W 2 {script}\n")
    r = _cli(d, "submit", "--parsable", "--pack", str(pack), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"warning: {pack}, line 1: {script}:3: -G (user group) is not supported by XCE and was ignored" in r.stderr
    j = d.show(int(r.stdout))
    assert (j["name"], j["run_limit_s"]) == ("from_pack_script", 120)


def test_a_hold_from_the_script_is_shown_by_the_dry_run_and_kept(shared_daemon, tmp_path):
    """D-5 with JOB-12: `#BSUB -H` (LSF bsub -H) holds the job at submit; --dry-run names the
    line it came from; `xcecli submit -H` holds a job too."""
    d = shared_daemon
    text = "#!/bin/sh\n#BSUB -J held\n#BSUB -H\ntrue\n"
    r = _cli(d, "submit", "--dry-run", input=text, cwd=tmp_path)
    assert r.returncode == 0 and "hold:            PSUSP until xcecli resume  (from script line 3)" in r.stdout, r
    r = _cli(d, "submit", "--parsable", input=text, cwd=tmp_path)
    assert d.show(int(r.stdout))["state"] == "PSUSP"
    job = d.submit("-H", "--", "true")
    assert d.show(job)["elements"][0]["holds"] == ["user"]
    d.cli("kill", str(job), check=True)


@pytest.fixture
def two_daemons():
    """A controller that runs no jobs and one `xced --roles worker` host w1 joined over TCP
    (tests/e2e/test_multihost.Cluster), each with its own TopDir."""
    import shutil

    from tests.conftest import short_tmpdir
    from tests.e2e.test_multihost import Cluster

    top = short_tmpdir("xce-sc-")
    c = Cluster(top)
    try:
        yield c.start({"w1": ["--slots", "2"]})
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)


def test_a_script_on_stdin_runs_on_a_worker_of_another_topdir(two_daemons, tmp_path):
    """JOB-12 across hosts (D-1): the script travels with the start to the worker host, which
    keeps it in its own job directory and runs it there."""
    c = two_daemons
    out = tmp_path / "out"
    r = c.ctl.cli("submit", "--parsable", "-o", str(out), input="#!/bin/bash\n#BSUB -J remote\necho \"$0\"\n",
                  cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    job = int(r.stdout)
    j = c.ctl.wait_state(job, ("DONE", "EXIT"))
    assert (j["state"], j["name"]) == ("DONE", "remote"), j
    assert out.read_text() == f"{c.top / 'w1' / 'jobs' / str(job) / '0' / 'script'}\n"

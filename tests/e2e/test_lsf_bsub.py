"""`bsub` on XCE (CLI-8, CLI-2, CLI-7, JOB-12; issue 18 part 4), end to end with a real xced:
LSF's spellings, LSF's answer line, a script on stdin with #BSUB lines, -K's exit code,
warnings for options XCE ignores and errors for those it cannot ignore.

LSF sources: IBM's bsub reference, https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.man_top.1.html
(options), its `command` argument (stdin and #BSUB):
https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.command.1.html ; -K:
docs/lsf-behaviour.md section 5 ([43], https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.__k.1.html);
-env: https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.__env.1.html ; -app:
http://www.cisl.ucar.edu/docs/LSF/7.0.3/command_reference/bsub.cmdref.html (option list).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)

#: LSF's answer to a submit (what dask-jobqueue, Nextflow and others parse)
LSF_LINE = re.compile(r"Job <(\d+)> is submitted to queue <([^>]+)>\.\n")


def _bsub_argv() -> list[str]:
    """The installed `bsub` beside the interpreter, else `python -m xcecli.lsf.bsub`."""
    exe = os.path.join(os.path.dirname(sys.executable), "bsub")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "xcecli.lsf.bsub"]


def bsub(d, *args: str, input: str = "", cwd=None, env: dict | None = None,
         python_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    e = {**os.environ, "XCE_TOPDIR": str(d.top), **(env or {})}
    e.pop("XCE_SOCKET", None)
    e.pop("XCE_TEST_USER", None)
    argv = [sys.executable, *python_args, "-c", "import sys; sys.argv[0] = 'bsub'; from xcecli.lsf.bsub import main; "
            "main()"] if python_args else _bsub_argv()
    return subprocess.run([*argv, *args], capture_output=True, text=True, env=e, input=input, timeout=60,
                          cwd=str(cwd or d.top))


def _ids(d) -> set[int]:
    r = d.cli("jobs", "-a", "-u", "all", "-o", "id", check=True)
    return {int(x) for x in r.stdout.split()[1:]}


def test_bsub_prints_lsfs_line_for_a_job_and_an_array(shared_daemon, tmp_path):
    """CLI-8: exactly `Job <N> is submitted to queue <Q>.` on stdout, for an array too (LSF
    prints the same line; `xcecli submit` says "Job array"); LSF's spellings reach the job."""
    d = shared_daemon
    r = bsub(d, "-n", "2", "-R", "span[hosts=1]", "-R", "rusage[mem=10]", "-q", "normal", "-W", "1:30",
             "-M", "100", "-J", "lsfjob", "-o", str(tmp_path / "out.%J"), "echo", "hello", cwd=tmp_path)
    m = LSF_LINE.fullmatch(r.stdout)
    assert r.returncode == 0 and m and m.group(2) == "normal" and r.stderr == "", (r.stdout, r.stderr)
    job = int(m.group(1))
    j = d.wait_state(job, ("DONE", "EXIT"))
    assert (j["state"], j["name"], j["ntasks_min"], j["run_limit_s"], j["memory_limit_mb"]) == \
        ("DONE", "lsfjob", 2, 5400, 100), j
    assert (tmp_path / f"out.{job}").read_text() == "hello\n"
    r = bsub(d, "-J", "arr[1-3]", "true", cwd=tmp_path)
    assert LSF_LINE.fullmatch(r.stdout) and r.returncode == 0, r.stdout


def test_bsub_reads_a_script_on_stdin_with_its_directives(shared_daemon, tmp_path):
    """JOB-12, CLI-8: `bsub < job.lsf` (how Nextflow's LSF executor submits): its #BSUB lines
    set the job; the command line wins over them; the script runs with its #! interpreter."""
    d = shared_daemon
    out = tmp_path / "o.txt"
    script = f"#!/bin/bash\n#BSUB -J nf_task\n#BSUB -n 2\n#BSUB -o {out}\n#BSUB -W 10\n" \
             "arr=(a b); echo \"${arr[1]} $LSB_JOBNAME\"\n"
    r = bsub(d, "-W", "20", input=script, cwd=tmp_path)
    m = LSF_LINE.fullmatch(r.stdout)
    assert r.returncode == 0 and m, (r.stdout, r.stderr)
    j = d.wait_state(int(m.group(1)), ("DONE", "EXIT"))
    assert (j["state"], j["name"], j["ntasks_min"], j["run_limit_s"]) == ("DONE", "nf_task", 2, 1200), j
    assert out.read_text() == "b nf_task\n"


def test_bsub_warns_about_an_option_xce_ignores(shared_daemon, tmp_path):
    """CLI-8: an LSF option XCE does not honour and whose absence does not change what the job
    does is accepted with a warning naming it, never dropped silently; -oo, which XCE honours
    (tests/e2e/test_output_overwrite.py), gets none."""
    d = shared_daemon
    r = bsub(d, "-G", "grp", "-N", "-oo", str(tmp_path / "o"), "echo", "x", cwd=tmp_path)
    assert r.returncode == 0 and LSF_LINE.fullmatch(r.stdout), r.stderr
    assert r.stderr == ("bsub: warning: -N (mail at the job's end) is not supported by XCE and was ignored\n"
                        "bsub: warning: -G (user group) is not supported by XCE and was ignored\n"), r.stderr
    d.wait_state(int(LSF_LINE.fullmatch(r.stdout).group(1)), ("DONE",))
    assert (tmp_path / "o").read_text() == "x\n"


@pytest.mark.parametrize("args, says", [
    (("-m", "h1", "true"), "-m (host selection) is not supported by XCE"),
    (("-a", "myesub", "true"), "-a (esub application (XCE's application profile is -app)) is not supported"),
    (("-Is", "bash"), "-Is (interactive job) is not supported by XCE"),
    (("-Z", "true"), "-Z: not an option this command takes"),
    (("-q", "normal short", "true"), "-q 'normal short': XCE takes one queue per job"),
])
def test_bsub_refuses_an_option_whose_ignoring_would_change_the_job(shared_daemon, tmp_path, args, says):
    """CLI-8: an LSF option XCE cannot honour and that changes what the job does (host
    selection, esub, interactive jobs) is an error, LSF's exit code 255,
    and nothing is submitted; an unknown option too."""
    d = shared_daemon
    before = _ids(d)
    r = bsub(d, *args, cwd=tmp_path)
    assert r.returncode == 255 and r.stderr.startswith("bsub: ") and says in r.stderr, r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    assert _ids(d) == before


def test_bsub_app_is_one_token(shared_daemon, tmp_path):
    """issue 18: LSF's `-app NAME` is read whole (xcecli's -a would read `-a pp` and a command
    NAME): the daemon is asked for profile NAME, and its refusal is LSF's exit 255."""
    r = bsub(shared_daemon, "-app", "no_such_profile", "true", cwd=tmp_path)
    assert r.returncode == 255 and "unknown application profile 'no_such_profile'" in r.stderr, r.stderr


def test_bsub_K_exits_with_the_jobs_exit_code(shared_daemon, tmp_path):
    """CLI-1, LSF bsub -K (docs/lsf-behaviour.md section 5): wait for the job, then exit with
    its own exit code."""
    r = bsub(shared_daemon, "-K", "exit 3", cwd=tmp_path)  # LSF: the command line runs with /bin/sh
    assert r.returncode == 3 and LSF_LINE.fullmatch(r.stdout), (r.stdout, r.stderr)
    assert "<<Waiting for dispatch ...>>" in r.stderr and "<<Job is finished>>" in r.stderr
    r = bsub(shared_daemon, "-K", "true", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_bsub_env_and_cwd(shared_daemon, tmp_path):
    """LSF -env: "none" starts the job from no submission environment, "all, VAR=val" from
    all of it with VAR set; -cwd sets the job's working directory."""
    d = shared_daemon
    work = tmp_path / "work"
    work.mkdir()
    env = {"BSUB_TEST_SEEN": "yes"}
    r = bsub(d, "-K", "-cwd", str(work), "-env", "all, EXTRA=1", "-o", str(tmp_path / "a"),
             'echo "$BSUB_TEST_SEEN $EXTRA $(pwd)"', cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a").read_text() == f"yes 1 {work}\n"
    r = bsub(d, "-K", "-env", "none", "-o", str(tmp_path / "b"), 'echo "[$BSUB_TEST_SEEN]"',
             cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "b").read_text() == "[]\n"
    r = bsub(d, "-env", "all, 1BAD", "true", cwd=tmp_path)
    assert r.returncode == 255 and "is not VAR or VAR=value" in r.stderr, r.stderr


def test_bsub_imports_no_parser_library_model_or_rich(shared_daemon, tmp_path):
    """CLI-7: bsub stays on the start-up budget: no typer, click, pydantic, rich, httpx
    (python -X importtime lists every module it imported), as tests/cli/test_fast.py holds
    `xcecli submit` to."""
    from tests.cli.test_fast import HEAVY

    r = bsub(shared_daemon, "-n", "1", "-R", "rusage[mem=10]", "true", cwd=tmp_path, python_args=("-X", "importtime"))
    assert r.returncode == 0 and LSF_LINE.search(r.stdout), r.stderr[-2000:]
    mods = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "xcecli.lsf.bsub" in mods and "xcecli.submitting" in mods
    assert sorted(m for m in mods if m.split(".")[0] in HEAVY or m in HEAVY) == []


def test_bsub_names_a_bad_directive_of_a_script_on_stdin(shared_daemon, tmp_path):
    """JOB-12 with bsub: a bad #BSUB line of a script on stdin names its line; bsub exits with
    LSF's 255 and nothing is submitted."""
    d = shared_daemon
    before = _ids(d)
    r = bsub(d, input="#!/bin/sh\n#BSUB -J ok\n#BSUB -n 0\ntrue\n", cwd=tmp_path)
    assert r.returncode == 255 and r.stdout == "", r.stderr
    assert r.stderr == "bsub: standard input:3: #BSUB -n 0: -n 0: the task count must be at least 1\n"
    assert _ids(d) == before


def test_bsub_H_holds_the_job_until_it_is_resumed(shared_daemon, tmp_path):
    """LSF bsub -H (https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.__h.1.html: "Holds
    the job in the PSUSP state when the job is submitted"), D-5: the job is PSUSP with a user
    hold from its submit on, never dispatched, until `xcecli resume` (bresume) releases it;
    a #BSUB -H line of a script on stdin does the same."""
    import time

    d = shared_daemon
    r = bsub(d, "-H", "echo", "held", cwd=tmp_path)
    job = int(LSF_LINE.fullmatch(r.stdout).group(1))
    time.sleep(0.5)  # a session would have started a PEND job on the idle host by now
    j = d.show(job)
    assert (j["state"], j["elements"][0]["holds"], j["elements"][0]["start_time"]) == ("PSUSP", ["user"], None), j
    d.cli("resume", str(job), check=True)
    assert d.wait_state(job, ("DONE", "EXIT"))["state"] == "DONE"
    r = bsub(d, input="#!/bin/sh\n#BSUB -H\ntrue\n", cwd=tmp_path)
    assert d.show(int(LSF_LINE.fullmatch(r.stdout).group(1)))["state"] == "PSUSP"


def test_a_bsub_cwd_line_sets_the_jobs_directory_unless_the_command_line_does(shared_daemon, tmp_path):
    """LSF bsub -cwd in a script's #BSUB line (relative to the submission directory); the
    command line's -cwd wins over it, as every command-line option does."""
    d = shared_daemon
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    script = "#!/bin/sh\n#BSUB -cwd a\npwd\n"
    r = bsub(d, "-K", "-o", str(tmp_path / "o1"), input=script, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "o1").read_text() == f"{tmp_path / 'a'}\n"
    r = bsub(d, "-K", "-cwd", str(tmp_path / "b"), "-o", str(tmp_path / "o2"), input=script, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "o2").read_text() == f"{tmp_path / 'b'}\n"
    r = bsub(d, input="#BSUB -cwd nowhere\ntrue\n", cwd=tmp_path)
    assert r.returncode == 255 and "standard input:1: #BSUB -cwd 'nowhere': no such directory" in r.stderr, r.stderr

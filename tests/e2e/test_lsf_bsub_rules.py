"""`bsub` as LSF behaves in the cases a fresh tester found different (CLI-8, CLI-1, JOB-12,
JOB-4; issue 18's remaining gaps), end to end with a real xced: a script named as the first
word runs through the Bourne shell with its arguments, builtins and unknown commands are the
job's shell's to run or report (127), -H on a -pack line holds that job, every failure exits
255, -K's lines, odd -J values, and the typed line in bjobs -l and bhist -l.

LSF sources (docs/lsf-behaviour.md section 5 and sources [74], [75]): IBM's bsub `command`
argument, https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.command.1.html
("The command can be anything that is provided to a UNIX Bourne shell"); openlava's
lsbatch/cmd/cmd.sub.c (CopyCommand joins the words; do_sub returns -1, bsub exits with it:
255) and lsf/lib/nios.c (`<<Starting on HOST>>`, `<<Job is finished>>`, `<<Terminated while
pending>>`); IBM bsub -pack, https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.pack.1.html
(every bsub option but -I*, -XF, -K, -jsdl, -h, -V and -pack); IBM bsub -J,
https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.__j.1.html ("up to 4094
characters") and the job array page ("unique positive integers").
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.e2e.test_lsf_bsub import LSF_LINE, _bsub_argv, _ids, bsub
from tests.e2e.test_lsf_commands import lsf

pytestmark = pytest.mark.timeout(120)


def _job(r: subprocess.CompletedProcess) -> int:
    m = LSF_LINE.fullmatch(r.stdout)
    assert m, (r.returncode, r.stdout, r.stderr)
    return int(m.group(1))


def test_a_script_as_the_first_word_runs_through_the_shell_with_its_directives(shared_daemon, tmp_path):
    """CLI-8, JOB-12 (LSF: the command line, a script's too, runs with /bin/sh; [74]):
    `bsub ./job.sh a '>' f` redirects the script's output to f, as the shell reads the `>`
    the user quoted, while the script's #BSUB lines still apply; an argument holding a blank
    stays one argument and a quote in one reaches the script as typed (LSF's CopyCommand),
    for a non-executable script run by its #! interpreter too; the job's command is the
    line as typed."""
    d = shared_daemon
    job_sh = tmp_path / "job.sh"
    job_sh.write_text('#!/bin/sh\n#BSUB -J scripted\n#BSUB -n 2\necho "n=$# 1=$1"\n')
    job_sh.chmod(0o755)
    job = _job(bsub(d, "-K", "./job.sh", "a", ">", "f", cwd=tmp_path))
    assert (tmp_path / "f").read_text() == "n=1 1=a\n"
    j = d.show(job)
    assert (j["state"], j["name"], j["ntasks_min"]) == ("DONE", "scripted", 2), j
    r = subprocess.run([*_lsf_cmd("bjobs"), "-a", "-noheader", "-o", "command", str(job)], capture_output=True,
                       text=True, env=_env(d), timeout=60)
    assert r.stdout == "./job.sh a > f\n", (r.stdout, r.stderr)

    bash_sh = tmp_path / "args.sh"  # not executable: its #! interpreter runs it
    bash_sh.write_text('#!/bin/bash\narr=("$@"); printf "%s|" "${#arr[@]}" "${arr[@]}"; echo\n')
    job = _job(bsub(d, "-K", "-o", str(tmp_path / "o"), "./args.sh", "x y", "it's", "(p)", cwd=tmp_path))
    assert (tmp_path / "o").read_text() == "3|x y|it's|(p)|\n"
    assert d.show(job)["state"] == "DONE"


def test_builtins_and_unknown_commands_are_the_jobs_shells_to_run_or_report(shared_daemon, tmp_path):
    """CLI-8 (LSF looks nothing up at submit; the job's /bin/sh runs the line): a builtin
    (`cd /tmp`, `type ls`) is taken and runs; an unknown command (`nosuchcmd`, with or
    without arguments) and a missing script path are taken, and the job ends EXIT with the
    shell's 127. `xcecli submit` keeps its own rule (CLI-2: an argv exec'd as given, so a
    program not on PATH is refused at submit)."""
    d = shared_daemon
    for words in (("cd", "/tmp"), ("type", "ls"), ("getopts",)):
        r = bsub(d, "-K", *words, cwd=tmp_path)
        job = _job(r)
        want = 0 if words[0] != "getopts" else 2  # getopts without arguments: the shell's usage error
        assert r.returncode == want and d.show(job)["state"] == ("DONE" if want == 0 else "EXIT"), (words, r.stderr)
    for words in (("nosuchcmd_xyz",), ("nosuchcmd_xyz", "arg"), ("./missing.sh",)):
        r = bsub(d, "-K", *words, cwd=tmp_path)
        job = _job(r)
        j = d.show(job)
        assert (r.returncode, j["state"], j["elements"][0]["exit_code"]) == (127, "EXIT", 127), (words, j, r.stderr)
    r = d.cli("submit", "nosuchcmd_xyz", cwd=tmp_path)
    assert r.returncode == 2 and "'nosuchcmd_xyz' not found on PATH" in r.stderr, r.stderr


def test_h_on_a_pack_line_holds_that_job(shared_daemon, tmp_path):
    """CLI-8, D-5 (IBM bsub -pack: a pack line takes every bsub option but -I*, -XF, -K, -jsdl,
    -h, -V and -pack, so -H too): the held line's job is PSUSP until resumed, the other
    line's runs; resumed, the held one runs too."""
    d = shared_daemon
    pack = tmp_path / "jobs.pack"
    pack.write_text(f"-H -o {tmp_path}/held echo held\n-o {tmp_path}/free echo free\n")
    r = bsub(d, "-pack", str(pack), cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    held, free = (int(LSF_LINE.fullmatch(x).group(1)) for x in r.stdout.splitlines(keepends=True))
    assert d.wait_state(free, ("DONE", "EXIT"))["state"] == "DONE"
    time.sleep(0.5)
    assert d.show(held)["state"] == "PSUSP"
    assert not (tmp_path / "held").exists()
    d.cli("resume", str(held), check=True)
    assert d.wait_state(held, ("DONE", "EXIT"))["state"] == "DONE"
    assert (tmp_path / "held").read_text() == "held\n"
    pack.write_text("-H -- true\n")  # xcecli submit --pack takes the same line (CLI-7)
    r = d.cli("submit", "--parsable", "--pack", str(pack), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert d.wait_state(int(r.stdout), ("PSUSP",))["state"] == "PSUSP"
    d.cli("kill", r.stdout.strip(), check=True)


def test_every_failure_to_submit_exits_255_with_the_message_on_stderr(shared_daemon, tmp_path):
    """CLI-8 (LSF's bsub exits with do_sub's -1, 255, whatever kept the job from being
    submitted; [74]): the daemon's refusal (an unknown queue), a -w the daemon cannot parse
    (shown with its caret), and a daemon that cannot be reached are all 255, the message on
    stderr and nothing on stdout; nothing is submitted."""
    d = shared_daemon
    before = _ids(d)
    r = bsub(d, "-q", "no_such_queue", "true", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (255, "") and "unknown queue 'no_such_queue'" in r.stderr, r.stderr
    r = bsub(d, "-w", "done(1) &&", "true", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (255, "") and "^" in r.stderr, r.stderr
    assert r.stderr.startswith("bsub: error: dependency: "), r.stderr  # bsub's name, not xcecli's
    assert _ids(d) == before
    empty = tmp_path / "no_cluster"
    empty.mkdir()
    env = {**os.environ, "XCE_TOPDIR": str(empty), "XCE_CONNECT_TIMEOUT": "0.5"}
    env.pop("XCE_SOCKET", None)
    r = subprocess.run([*_bsub_argv(), "true"], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                       timeout=60)
    assert (r.returncode, r.stdout) == (255, "") and "bsub: error: cannot reach xced" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_bsub_K_prints_lsfs_lines(shared_daemon, tmp_path):
    """CLI-1, CLI-8 (LSF's -K: openlava lsf/lib/nios.c, [75]): stderr is exactly
    `<<Waiting for dispatch ...>>`, `<<Starting on HOST>>` with the job's host, and
    `<<Job is finished>>`; a job killed while it pends says `<<Terminated while pending>>`
    instead (no Starting line) and bsub exits 126 (docs/lsf-behaviour.md section 5)."""
    d = shared_daemon
    r = bsub(d, "-K", "-o", str(tmp_path / "o"), "exit 5", cwd=tmp_path)
    job = _job(r)
    host = d.show(job)["elements"][0]["alloc"][0]["host"]
    assert (r.returncode, r.stderr) == (5, f"<<Waiting for dispatch ...>>\n<<Starting on {host}>>\n"
                                           f"<<Job is finished>>\n"), r.stderr

    p = subprocess.Popen([*_bsub_argv(), "-K", "-H", "true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=_env(d), cwd=str(tmp_path))
    try:
        line = p.stdout.readline()
        held = int(LSF_LINE.fullmatch(line).group(1))
        assert d.wait_state(held, ("PSUSP",))["state"] == "PSUSP"
        k = lsf(d, "bkill", str(held))
        assert k.returncode == 0, k.stderr
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(5)
    assert (p.returncode, err) == (126, "<<Waiting for dispatch ...>>\n<<Terminated while pending>>\n"), err


@pytest.mark.parametrize("name, said", [
    ("   ", "the job name is empty or blank"),
    ("a\nb", "the job name holds a control character ('\\n')"),
    ("tab\there", "the job name holds a control character ('\\t')"),
    ("a\u009b31mRED", "the job name holds a control character ('\\x9b')"),
    ("a\u2028b", "the job name holds a control character ('\\u2028')"),
    ("x" * 4095, "the job name has 4095 characters, more than the 4094 LSF takes"),
    ("name[1-", "is not a valid array: expected NAME[START-END:STEP,...]%LIMIT"),
    ("[1-3]", "the job array has no name; write the name before its index list, e.g. -J 'myarray[1-3]'"),
    ("b[1,1,1]", "the index list names 2 indices more than once"),
])
def test_an_odd_job_name_is_refused_saying_what_is_valid(shared_daemon, tmp_path, name, said):
    """JOB-4, CLI-8 (IBM bsub -J: "up to 4094 characters", `job_name[index_list]`; the job array
    page: an array name, index values "unique positive integers"): bsub refuses the value
    with exit 255, naming what was wrong and what a -J value may be; nothing is submitted.
    A #BSUB -J line is held to the same rule, naming its line."""
    d = shared_daemon
    before = _ids(d)
    r = bsub(d, "-J", name, "true", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (255, ""), r
    assert r.stderr.startswith("bsub: -J") and said in r.stderr and "e.g." in r.stderr, r.stderr
    if "\n" not in name:
        r = bsub(d, input=f"#!/bin/sh\n#BSUB -J '{name}'\ntrue\n", cwd=tmp_path)
        assert r.returncode == 255 and "standard input:2:" in r.stderr and said in r.stderr, r.stderr
    assert _ids(d) == before


def test_a_job_name_of_4094_characters_is_taken(shared_daemon, tmp_path):
    """JOB-4 (IBM bsub -J: "up to 4094 characters"): the longest name LSF takes is taken."""
    job = _job(bsub(shared_daemon, "-J", "n" * 4094, "true", cwd=tmp_path))
    assert shared_daemon.show(job)["name"] == "n" * 4094


def test_bjobs_l_and_bhist_l_show_the_command_as_typed(shared_daemon, tmp_path):
    """CLI-8 (LSF's bjobs -l and bhist -l: `Command <...>` is the command as submitted, [65],
    [53]): the line the user typed, not the `/bin/sh -c` argv XCE runs it with."""
    d = shared_daemon
    job = _job(bsub(d, "-K", "echo hi; true", cwd=tmp_path))
    for cmd in ("bjobs", "bhist"):
        r = lsf(d, cmd, "-l", str(job))
        assert r.returncode == 0, r.stderr
        assert "Command <echo hi; true>" in r.stdout and "/bin/sh" not in r.stdout, (cmd, r.stdout)


def _env(d) -> dict[str, str]:
    e = {**os.environ, "XCE_TOPDIR": str(d.top)}
    e.pop("XCE_SOCKET", None)
    e.pop("XCE_TEST_USER", None)
    return e


def _lsf_cmd(name: str) -> list[str]:
    return [sys.executable, "-m", f"xcecli.lsf.{name}"]

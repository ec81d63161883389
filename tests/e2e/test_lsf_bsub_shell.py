"""`bsub` as LSF runs a job (CLI-8, JOB-12, PRJ-1; issue 18), end to end with a real xced: the
command and its arguments are one shell command line run with /bin/sh, the line as typed is
the job's command and default name, LSF's flat project names, `bsub -pack FILE`, a script on
stdin with a byte order mark, and option values that start with '-'.

LSF sources: IBM's bsub `command` argument, https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.command.1.html
("The command can be anything that is provided to a UNIX Bourne shell (see sh(1))"; "If no
job name is specified with -J, bjobs, bhist and bacct displays the command as the job
name"); bsub -pack, https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.pack.1.html
("define one job request per line, using normal bsub syntax but omitting the word bsub";
"Do not use with any other bsub option in the command line"; -K is not taken in the file);
bsub -P, https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.man_top.1.html (a
project name; dask-jobqueue writes `#BSUB -P "DaskonLSF"` for LSFCluster(project='DaskonLSF')).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import Daemon, write_config
from tests.e2e.test_lsf_bjobs import bjobs
from tests.e2e.test_lsf_bsub import LSF_LINE, _ids, bsub
from tests.e2e.test_lsf_commands import lsf
from tests.e2e.test_projects import PROJECTS, build

pytestmark = pytest.mark.timeout(120)


def _job(r: subprocess.CompletedProcess) -> int:
    m = LSF_LINE.fullmatch(r.stdout)
    assert r.returncode == 0 and m, (r.returncode, r.stdout, r.stderr)
    return int(m.group(1))


def _name_and_command(d, job: int) -> str:
    r = bjobs(d, "-a", "-noheader", "-o", "job_name command delimiter='|'", str(job))
    assert r.returncode == 0, r.stderr
    return r.stdout.rstrip("\n")


def test_bsub_runs_its_command_line_with_the_bourne_shell(shared_daemon, tmp_path):
    """CLI-8 (IBM bsub `command`: a Bourne shell command line): `bsub 'sleep 0; echo hi'`,
    `bsub echo '$VAR'` (the job's shell expands it), `bsub "cat < in > out"` all run as in
    LSF; the line as typed is bjobs' JOB_NAME and COMMAND and the job's LSB_JOBNAME, while
    `xcecli show` gives the argv that ran (/bin/sh -c LINE)."""
    d = shared_daemon
    job = _job(bsub(d, "-K", "-o", str(tmp_path / "a"), "sleep 0; echo hi", cwd=tmp_path))
    assert (tmp_path / "a").read_text() == "hi\n"
    assert _name_and_command(d, job) == "sleep 0; echo hi|sleep 0; echo hi"
    assert d.show(job)["argv"] == ["/bin/sh", "-c", "sleep 0; echo hi"]

    _job(bsub(d, "-K", "-o", str(tmp_path / "b"), "echo", "$BSUB_SHELL_SEEN", cwd=tmp_path,
              env={"BSUB_SHELL_SEEN": "expanded"}))
    assert (tmp_path / "b").read_text() == "expanded\n"

    (tmp_path / "in").write_text("from a file\n")
    _job(bsub(d, "-K", "cat < in > out", cwd=tmp_path))
    assert (tmp_path / "out").read_text() == "from a file\n"

    job = _job(bsub(d, "-K", "-o", str(tmp_path / "c"), 'echo "$LSB_JOBNAME"', cwd=tmp_path))
    assert (tmp_path / "c").read_text() == 'echo "$LSB_JOBNAME"\n'
    assert _name_and_command(d, job) == 'echo "$LSB_JOBNAME"|echo "$LSB_JOBNAME"'

    r = bsub(d, "-K", "exit 4", cwd=tmp_path)  # -K: the shell's exit code is the job's
    assert r.returncode == 4, r.stderr


def test_bsub_of_a_script_path_keeps_its_directives_and_interpreter_and_is_named_as_typed(shared_daemon, tmp_path):
    """JOB-12 with LSF's naming: `bsub ./job.sh a1` reads the script's #BSUB lines and runs it
    with its #! interpreter (not executable: bash runs it), through the Bourne shell as LSF
    runs every command line (docs/lsf-behaviour.md section 5), and the job is named
    `./job.sh a1` as typed (LSF's JOB_NAME is the command), not the resolved path."""
    d = shared_daemon
    (tmp_path / "job.sh").write_text('#!/bin/bash\n#BSUB -n 2\narr=(x "$1"); echo "${arr[1]} $LSB_JOBNAME"\n')
    job = _job(bsub(d, "-K", "-o", str(tmp_path / "o"), "./job.sh", "a1", cwd=tmp_path))
    assert (tmp_path / "o").read_text() == "a1 ./job.sh a1\n"
    j = d.show(job)
    assert (j["ntasks_min"], j["argv"]) == (2, ["/bin/sh", "-c", f"/bin/bash {tmp_path / 'job.sh'} a1"]), j
    assert _name_and_command(d, job) == "./job.sh a1|./job.sh a1"


def test_xcecli_submit_keeps_its_argv(shared_daemon, tmp_path):
    """CLI-2: `xcecli submit` execs its argv as given (only bsub takes LSF's shell command line):
    '$HOME' reaches echo unexpanded."""
    d = shared_daemon
    job = d.submit("-o", str(tmp_path / "s"), "echo", "$HOME", cwd=tmp_path)
    assert d.wait_state(job, ("DONE", "EXIT"))["state"] == "DONE"
    assert (tmp_path / "s").read_text() == "$HOME\n"
    assert d.show(job)["argv"] == ["echo", "$HOME"]


def test_bsub_takes_lsfs_flat_project_name_as_a_top_level_project(shared_daemon, tmp_path):
    """PRJ-1, LSF bsub -P: LSF's project names are flat; bsub reads NAME as XCE's top-level
    /NAME, on the command line and in dask-jobqueue's `#BSUB -P "DaskonLSF"` on stdin. A
    cluster with no project tree (open mode) takes any project."""
    d = shared_daemon
    job = _job(bsub(d, "-P", "myproj", "true", cwd=tmp_path))
    assert d.show(job)["project"] == "/myproj"
    script = '#!/usr/bin/env bash\n#BSUB -J dask-worker\n#BSUB -P "DaskonLSF"\n#BSUB -n 1\necho "$LSB_PROJECT_NAME"\n'
    job = _job(bsub(d, "-o", str(tmp_path / "p"), input=script, cwd=tmp_path))
    j = d.wait_state(job, ("DONE", "EXIT"))
    assert (j["state"], j["project"]) == ("DONE", "/DaskonLSF"), j
    assert (tmp_path / "p").read_text() == "/DaskonLSF\n"


def test_bsub_refuses_a_flat_project_not_in_the_tree_saying_how_it_was_read(topdir, tmp_path):
    """PRJ-1, SUBMIT-1: a cluster with a project tree refuses a project it does not have (by
    design); bsub's refusal names the projects and says the flat LSF name was read as /NAME."""
    write_config(topdir, slots=4)
    (topdir / "config" / "projects.yaml").write_text(PROJECTS)
    assert build(topdir).returncode == 0
    d = Daemon(topdir).start()
    e = {**os.environ, "XCE_TOPDIR": str(topdir), "XCE_TEST_USER": "gina"}  # gina: a member of /bio
    e.pop("XCE_SOCKET", None)

    def gina_bsub(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "xcecli.lsf.bsub", *args], capture_output=True, text=True,
                              env=e, cwd=str(tmp_path), timeout=60)

    try:
        r = gina_bsub("-P", "DaskonLSF", "true")
        assert r.returncode == 255 and r.stdout == "", r.stderr
        assert "-P /DaskonLSF: no such project; projects: /physics, /physics/hep, /physics/astro, /bio" in r.stderr
        assert "bsub reads an LSF project name without a leading '/' (-P NAME) as the top-level project /NAME" \
            in r.stderr
        r = gina_bsub("-K", "-P", "bio", "true")
        assert r.returncode == 0 and LSF_LINE.fullmatch(r.stdout), r.stderr
    finally:
        d.stop()


def test_bsub_pack_submits_one_job_per_line_of_bsub_options(shared_daemon, tmp_path):
    """LSF bsub -pack FILE: each line is bsub's options and a command (a shell command line),
    `Job <N> is submitted to queue <Q>.` per job, in order; -pack is given alone; a bad line
    (LSF takes no -K in the file) names its line and nothing is submitted."""
    d = shared_daemon
    pack = tmp_path / "jobs.pack"
    pack.write_text(f"# two jobs\n-J packed1 -o {tmp_path}/o1 echo one; echo two\n\n"
                    f"-n 2 -P packproj -o {tmp_path}/o2 'echo \"$LSB_JOBNAME\"'\n")
    r = bsub(d, "-pack", str(pack), cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    lines = r.stdout.splitlines(keepends=True)
    assert len(lines) == 2 and all(LSF_LINE.fullmatch(x) for x in lines), r.stdout
    first, second = (int(LSF_LINE.fullmatch(x).group(1)) for x in lines)
    j1, j2 = d.wait_state(first, ("DONE", "EXIT")), d.wait_state(second, ("DONE", "EXIT"))
    assert (j1["state"], j1["name"], j2["state"], j2["ntasks_min"], j2["project"]) == \
        ("DONE", "packed1", "DONE", 2, "/packproj")
    assert (tmp_path / "o1").read_text() == "one\ntwo\n"
    assert (tmp_path / "o2").read_text() == 'echo "$LSB_JOBNAME"\n'

    before = _ids(d)
    pack.write_text("-J ok true\n-K true\n")
    r = bsub(d, "-pack", str(pack), cwd=tmp_path)
    assert r.returncode == 255 and r.stdout == "", r.stderr
    assert r.stderr == f"bsub: {pack}, line 2: -K is not taken on a -pack line (give it to a bsub of its own); " \
                       f"nothing was submitted\n"
    r = bsub(d, "-q", "normal", "-pack", str(pack), cwd=tmp_path)
    assert r.returncode == 255 and "-pack FILE is given alone" in r.stderr and "-q" in r.stderr, r.stderr
    r = bsub(d, "-pack", "missing.pack", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (255, "bsub: -pack 'missing.pack': cannot read it (No such file or directory)\n")
    assert _ids(d) == before


def test_a_script_on_stdin_runs_without_its_byte_order_mark(shared_daemon, tmp_path):
    """JOB-12: a script on stdin that starts with a UTF-8 byte order mark has its #BSUB lines
    read and runs with its #! interpreter (bash here, whose arrays /bin/sh lacks), and
    without an error about the mark's line."""
    d = shared_daemon
    script = '\ufeff#!/bin/bash\n#BSUB -J bom\narr=(x y); echo "${arr[1]}"\n'
    job = _job(bsub(d, "-K", "-o", str(tmp_path / "o"), "-e", str(tmp_path / "e"), input=script, cwd=tmp_path))
    assert d.show(job)["name"] == "bom"
    assert (tmp_path / "o").read_text() == "y\n"
    assert (tmp_path / "e").read_text() == ""


@pytest.mark.parametrize("args, said", [
    (("-n", "-1"), "bsub: -n -1: the task count must be at least 1\n"),
    (("-M", "-5"), "bsub: -M '-5': memory must be greater than 0, got \"-5\"\n"),
    (("-n", "99999999999999999999"), "bsub: -n 99999999999999999999: too large a task count; at most 1000000 "
                                     "tasks\n"),
])
def test_bsub_checks_an_option_value_that_starts_with_a_dash(shared_daemon, tmp_path, args, said):
    """CLI-8: as LSF reads its options, the word after an option that takes a value is its
    value even when it starts with '-'; the option's own check says what is wrong (exit 255,
    LSF's), never "not an option"."""
    r = bsub(shared_daemon, *args, "true", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (255, "", said)


def test_bkill_s_takes_a_value_that_starts_with_a_dash(shared_daemon):
    """CLI-8: `bkill -s -9 JOB` reads -9 as the signal and says it is not one (LSF's -s takes a
    signal name or number), rather than "not an option"."""
    e = {**os.environ, "XCE_TOPDIR": str(shared_daemon.top)}
    e.pop("XCE_SOCKET", None)
    r = subprocess.run([sys.executable, "-m", "xcecli.lsf.bkill", "-s", "-9", "1"], capture_output=True, text=True,
                       env=e, timeout=60)
    assert r.returncode == 255 and r.stderr.startswith("bkill: signal '-9': not a signal; give a name or a number: "), \
        r.stderr


def test_a_newline_in_a_command_line_cannot_forge_a_row_of_bjobs(shared_daemon, tmp_path):
    """CLI-8 (a fresh tester's finding): bjobs -w is read line by line (Nextflow's
    LsfExecutor.parseQueueStatus splits its output into lines and tokens), so a command line
    holding a newline must not start a row of its own: its control characters are shown as
    escapes in every listing cell (xced.api.listing.one_line)."""
    d = shared_daemon
    forged = "true\n99999   alice   RUN   normal     vm          vm          fake      Dec  4 22:51"
    job = _job(bsub(d, forged, cwd=tmp_path))  # its second line fails (127): the row is what counts
    r = bjobs(d, "-a", "-w", "-u", "all")
    assert r.returncode == 0, r.stderr
    assert not any(line.startswith("99999") for line in r.stdout.splitlines()), r.stdout
    row = next(line for line in r.stdout.splitlines() if line.startswith(f"{job} "))
    assert "true\\n99999" in row, row
    assert "true\\n99999" in _name_and_command(d, job)


def test_xcecli_show_and_jobs_never_print_a_commands_control_characters(shared_daemon, tmp_path):
    """A fresh tester's finding (D-7: one user's job must not drive another's terminal): a
    command holding escape sequences (clear the screen, set the window title) is shown by
    `xcecli show` and `xcecli jobs` with them escaped (`\\x1b`), never raw."""
    d = shared_daemon
    nasty = "echo \x1b[2J\x1b]0;owned\x07"
    job = _job(bsub(d, "-H", "-J", "plain", nasty, cwd=tmp_path))
    shown = d.cli("show", str(job), check=True).stdout
    assert "\x1b" not in shown and "\x07" not in shown, repr(shown)
    assert "\\x1b[2J\\x1b]0;owned\\x07" in shown, shown
    listed = d.cli("jobs", "-o", "id name", str(job), check=True).stdout
    assert "\x1b" not in listed
    # its working directory too, in bjobs -l and bhist -l (a second tester's finding)
    odd = tmp_path / "d\x1b[2J"
    odd.mkdir()
    job2 = _job(bsub(d, "-H", "true", cwd=odd))
    for cmd in (("bjobs", "-l", str(job2)), ("bhist", "-l", str(job2))):
        out = lsf(d, *cmd).stdout
        assert "\x1b" not in out and "d\\x1b[2J" in out, (cmd, out)


def test_bjobs_reads_a_flat_project_name_as_bsub_does(shared_daemon, tmp_path):
    """LSF bsub -P / bjobs -P: the flat name bsub took as /NAME lists that project's jobs."""
    d = shared_daemon
    job = _job(bsub(d, "-P", "flatlisted", "true", cwd=tmp_path))
    r = bjobs(d, "-a", "-noheader", "-o", "jobid", "-P", "flatlisted")
    assert r.returncode == 0 and r.stdout.split() == [str(job)], (r.stdout, r.stderr)


def test_a_pack_too_large_is_refused_before_it_is_read_whole(shared_daemon, tmp_path):
    """CLI-7 (MAX_PACK_REQUEST_BYTES, MAX_PACK_JOBS): the client refuses a pack over 64 MiB
    once that much is read (an endless /dev/zero no longer grows it without bound), and one
    of more than 100,000 jobs before it reads a line; nothing is submitted."""
    d = shared_daemon
    r = bsub(d, "-pack", "/dev/zero", cwd=tmp_path)
    assert r.returncode == 255 and "is over 64 MiB" in r.stderr, r.stderr
    many = tmp_path / "many.pack"
    many.write_text("true\n" * 100_001)
    r = bsub(d, "-pack", str(many), cwd=tmp_path)
    assert r.returncode == 255 and "holds 100,001 jobs; a pack takes at most 100,000" in r.stderr, r.stderr


def test_a_command_line_that_is_not_utf8_is_refused_plainly(shared_daemon, tmp_path):
    """D-8: `bsub echo $'caf\\xe9'` is refused naming the byte, as an argv's is, not with the
    request model's text."""
    r = bsub(shared_daemon, "echo", os.fsdecode(b"caf\xe9"), cwd=tmp_path)
    assert r.returncode == 255 and "the command line holds \\xe9, which is not UTF-8" in r.stderr, r.stderr


@pytest.mark.parametrize("args", [("-h",), ("-n", "2", "-h", "true"), ("-q", "normal", "-h"), ("--help",)])
def test_bsub_h_among_its_options_prints_the_usage_and_submits_nothing(shared_daemon, tmp_path, args):
    """CLI-8 (IBM bsub -h: "Prints command usage to stderr and exits"; a second tester's
    finding): `-h` anywhere among bsub's options, as every other LSF command takes it, prints
    the usage on stderr, exits 0 and submits nothing; after the command it is the command's."""
    d = shared_daemon
    before = _ids(d)
    r = bsub(d, *args, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "") and r.stderr.startswith("Usage: bsub [options] command"), r
    assert _ids(d) == before


def test_bsub_v_prints_the_version_line_of_every_lsf_command(shared_daemon, tmp_path):
    """CLI-8 (IBM bsub -V: the release version on stderr): the line lsid and the others print."""
    for args in (("-V",), ("-V", "-n", "2")):
        r = bsub(shared_daemon, *args, cwd=tmp_path)
        assert (r.returncode, r.stdout) == (0, "") and r.stderr.endswith(", LSF-compatible commands (CLI-8)\n"), r

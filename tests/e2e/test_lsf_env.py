"""End to end: the LSF environment of a job and the TopDir's lsf.conf (issue 18 part 5; JOB-3,
JOB-12, CLI-8).

Sources: IBM "Environment variables set for job execution"
(https://www.ibm.com/support/knowledgecenter/en/SSWRJV_10.1.0/lsf_config_ref/lsf_envars_job_exec.html,
docs/lsf-behaviour.md section 3 [25]); lsf.conf LSB_JOB_MEMLIMIT
(https://www.ibm.com/support/knowledgecenter/SSWRJV_10.1.0/lsf_config_ref/lsf.conf.lsb_job_memlimit.5.html),
bsub -M on LSF_UNIT_FOR_LIMITS (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.__m.1.html),
docs/lsf-behaviour.md section 6 (rusage per task). A real xced on a Unix socket, real jobs.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

XCEADMIN = str(Path(sys.executable).parent / "xceadmin")
NAMES = ("LSB_JOBNAME", "LSB_SUBCWD", "LSB_OUTPUTFILE", "LSB_ERRORFILE", "LSB_DJOB_NUMPROC",
         "LSB_MAX_NUM_PROCESSORS", "LSB_PROJECT_NAME", "LSB_EXIT_PRE_ABORT")
#: prints each name as NAME=<value>, or NAME unset
DUMP = "; ".join(f'if [ -n "${{{n}+x}}" ]; then echo "{n}=${n}"; else echo "{n} unset"; fi' for n in NAMES)


def _env_of(d, jid: int, path: Path) -> dict[str, str | None]:
    j = d.wait_state(jid, ("DONE", "EXIT"))
    assert j["state"] == "DONE", j
    out: dict[str, str | None] = {}
    for line in path.read_text().splitlines():
        if line.endswith(" unset"):
            out[line[:-6]] = None
        else:
            k, _, v = line.partition("=")
            out[k] = v
    return out


def test_a_job_sees_lsfs_variables_with_their_documented_meanings(shared_daemon, tmp_path):
    """JOB-3 (IBM "Environment variables set for job execution"): LSB_JOBNAME is the -J name,
    LSB_SUBCWD where it was submitted, LSB_OUTPUTFILE/LSB_ERRORFILE the -o/-e files,
    LSB_DJOB_NUMPROC the slots it got, LSB_MAX_NUM_PROCESSORS the most it asked for (-n 1,4
    while 2 of the 4 slots are busy: 2 and 4), LSB_PROJECT_NAME its project (-P),
    LSB_EXIT_PRE_ABORT 99."""
    d = shared_daemon
    busy = d.submit("-n", "2", "--", "sleep", "60", cwd=tmp_path)
    d.wait_state(busy, ("RUN",))
    jid = d.submit("-J", "envcheck", "-n", "1,4", "-P", "/default", "-o", "o.%J", "-e", "e.%J", "--",
                   "sh", "-c", DUMP, cwd=tmp_path)
    env = _env_of(d, jid, tmp_path / f"o.{jid}")
    d.cli("kill", str(busy), check=True)
    assert env == {
        "LSB_JOBNAME": "envcheck", "LSB_SUBCWD": str(tmp_path), "LSB_OUTPUTFILE": str(tmp_path / f"o.{jid}"),
        "LSB_ERRORFILE": str(tmp_path / f"e.{jid}"), "LSB_DJOB_NUMPROC": "2", "LSB_MAX_NUM_PROCESSORS": "4",
        "LSB_PROJECT_NAME": "/default", "LSB_EXIT_PRE_ABORT": "99"}


def test_without_j_the_name_is_the_command_and_without_o_e_no_file_variables(shared_daemon, tmp_path):
    """JOB-3, IBM (LSB_JOBNAME: "If this argument was not given, the job name is the actual
    batch command"; LSB_OUTPUTFILE / LSB_ERRORFILE: the files of bsub -o / -e): a job
    without -J is named by its command; one without -o/-e has neither file variable, even
    when it was submitted from inside a job that had them; a single-slot job has 1 and 1."""
    d = shared_daemon
    env = {**os.environ, "XCE_TOPDIR": str(d.top), "LSB_OUTPUTFILE": "/elsewhere/x.out"}
    env.pop("XCE_TEST_USER", None)
    cmd = ["sh", "-c", "{ " + DUMP + "; } > dump.txt"]
    r = subprocess.run([str(Path(sys.executable).parent / "xcecli"), "submit", "--parsable", "--", *cmd],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    jid = int(r.stdout)
    got = _env_of(d, jid, tmp_path / "dump.txt")
    # the command line as a shell would read it back (quoted where an argument has spaces)
    assert got["LSB_JOBNAME"] == shlex.join(cmd)
    assert got["LSB_OUTPUTFILE"] is None and got["LSB_ERRORFILE"] is None
    assert (got["LSB_DJOB_NUMPROC"], got["LSB_MAX_NUM_PROCESSORS"]) == ("1", "1")


def _parse_conf(path: Path) -> dict[str, str]:
    """lsf.conf as the LSF tools read it: KEY=VALUE lines, '#' comments and blank lines skipped."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            k, sep, v = line.partition("=")
            assert sep, f"not KEY=VALUE: {line!r}"
            out[k.strip()] = v.strip()
    return out


def _dask_units(envdir: Path) -> str:
    """The unit dask-jobqueue's lsf_detect_units takes from $LSF_ENVDIR/lsf.conf: the first
    line that starts with LSF_UNIT_FOR_LIMITS, the first letter of its value, lower case
    ("kb" when there is none)."""
    for line in (envdir / "lsf.conf").read_text().splitlines():
        if line.startswith("LSF_UNIT_FOR_LIMITS"):
            return line.split("=")[1].lower()[0]
    return "kb"


def test_the_topdir_holds_an_lsf_conf_readable_by_all_with_xces_semantics(shared_daemon):
    """Issue 18 part 5, CLI-8: xced writes <TopDir>/lsf.conf at start, mode 0644, stating
    LSF_UNIT_FOR_LIMITS=MB (memory values are MB, bsub -M), LSB_JOB_MEMLIMIT=Y (-M is the
    job's limit over all its processes, IBM LSB_JOB_MEMLIMIT), RESOURCE_RESERVE_PER_TASK=Y
    (rusage per task, docs/lsf-behaviour.md section 6), LSB_STDOUT_DIRECT=Y; a KEY=VALUE
    reader and dask-jobqueue's way of reading it both find MB."""
    conf = shared_daemon.top / "lsf.conf"
    st = conf.stat()
    assert stat.S_IMODE(st.st_mode) == 0o644 and stat.S_ISREG(st.st_mode)
    assert _parse_conf(conf) == {"LSF_UNIT_FOR_LIMITS": "MB", "LSB_JOB_MEMLIMIT": "Y",
                                 "RESOURCE_RESERVE_PER_TASK": "Y", "LSB_STDOUT_DIRECT": "Y"}
    assert _dask_units(shared_daemon.top) == "m"


def test_xceadmin_build_writes_lsf_conf_and_a_stale_one_is_replaced(tmp_path):
    """Issue 18 part 5: `xceadmin build` writes lsf.conf too (no daemon needed), replacing an
    edited copy whole (written atomically: a temp file renamed over it) with mode 0644."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XCE_")}
    assert subprocess.run([XCEADMIN, "init", "top"], cwd=tmp_path, env=env, capture_output=True,
                          timeout=60).returncode == 0
    conf = tmp_path / "top" / "lsf.conf"
    conf.write_text("LSF_UNIT_FOR_LIMITS=KB\n")
    os.chmod(conf, 0o600)
    r = subprocess.run([XCEADMIN, "build", "--topdir", "top"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(conf.stat().st_mode) == 0o644
    assert _parse_conf(conf)["LSF_UNIT_FOR_LIMITS"] == "MB" and _dask_units(tmp_path / "top") == "m"
    assert [p.name for p in (tmp_path / "top").iterdir() if p.name.startswith(".lsf.conf")] == []


def test_a_launch_rank_that_is_not_a_slot_of_the_host_is_refused_naming_the_valid_ranks(shared_daemon, tmp_path):
    """JOB-7 (issue 18): a launch's rank is its slot's place in LSB_HOSTS, so a rank past the
    job's slots is a conflict (exit 1) naming LSB_HOSTS and the valid ranks; a valid one runs
    with XCE_TASK_ID = that rank and XCE_HOST_TASK_INDEX = 0 (the job's only host, IBM
    LSB_HOSTS: one name per slot)."""
    d = shared_daemon
    jid = d.submit("-n", "2", "--", "sleep", "60", cwd=tmp_path)
    j = d.wait_state(jid, ("RUN",))
    host = j["elements"][0]["alloc"][0]["host"]
    bad = json.dumps({"host": host, "argv": ["true"], "rank": 2})
    r = d.cli("api", "POST", f"/jobs/{jid}/launch", "-d", bad)
    assert r.returncode == 1 and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    assert f"rank 2 is not a slot of {host} in job {jid}'s LSB_HOSTS ({host} {host}); ranks go from 0 to 1" \
        in r.stdout + r.stderr, (r.stdout, r.stderr)
    good = json.dumps({"host": host, "argv": ["sh", "-c", "echo $XCE_TASK_ID/$XCE_HOST_TASK_INDEX"], "rank": 1})
    r = d.cli("api", "POST", f"/jobs/{jid}/launch", "-d", good, check=True)
    assert json.loads(r.stdout)["output"] == "1/0\n"
    d.cli("kill", str(jid), check=True)

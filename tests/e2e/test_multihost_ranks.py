"""Several hosts on one machine: the ranks and names of a parallel job's tasks, and the
profile's job starter around them (issue 18 part 4, last bullet; JOB-7, JOB-6, JOB-3).

A controller and two real `xced --roles worker` processes (tests/e2e/test_multihost.py's
Cluster); one single-host xced of 34 slots for a job wider than 32 ranks. LSF: LSB_HOSTS lists one host name per slot, the job's first host first (IBM
"Environment variables set for job execution", docs/lsf-behaviour.md section 3 [25, 26]);
MPI launchers number their ranks in that order. LSF's JOB_STARTER wraps the job's command
(lsb.queues/lsb.applications JOB_STARTER, docs/lsf-behaviour.md section 3 [21]); XCE's
JOB-7 carries it to every task started through XCE_TASK_STARTER or `xcecli launch`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import XCED, _daemon_fixture, short_tmpdir
from tests.e2e.test_multihost import Cluster

pytestmark = pytest.mark.timeout(150)

APPS = """\
applications:
  wrapped:
    job_starter: 'echo "starter ${XCE_TASK_ID:-job} ${XCE_TASK_HOST:-first}" >> $MARK; %USRCMD'
"""


@pytest.fixture(scope="module")
def two_hosts():
    top = short_tmpdir("xce-rk-")
    c = Cluster(top)
    (c.ctl_top / "config" / "applications.yaml").write_text(APPS)
    try:
        yield c.start({"h1": ["--slots", "2"], "h2": ["--slots", "2"]})
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)


def _run(c: Cluster, tmp_path: Path, script: str, *opts: str) -> tuple[str, list[str]]:
    """Submit `script` with -K as a 4-task job over both hosts; its output and its LSB_HOSTS."""
    p = tmp_path / "job.sh"
    p.write_text("#!/bin/sh\necho hosts=$LSB_HOSTS\n" + script)
    p.chmod(0o755)
    out = tmp_path / "out"
    if out.exists():
        out.unlink()
    env = {**os.environ, "XCE_TOPDIR": str(c.ctl_top), "PATH": f"{Path(XCED).parent}:{os.environ['PATH']}"}
    env.pop("XCE_SOCKET", None)
    r = subprocess.run([str(Path(XCED).parent / "xcecli"), "submit", "-K", "-n", "4", "-R", "span[ptile=2]",
                        "-o", str(out), *opts, str(p)], capture_output=True, text=True, cwd=tmp_path, timeout=90,
                       env=env)
    assert r.returncode == 0, r.stderr + out.read_text() if out.exists() else r.stderr
    text = out.read_text()
    hosts = next(ln for ln in text.splitlines() if ln.startswith("hosts=")).split("=", 1)[1].split()
    return text, hosts


def test_task_ids_follow_lsb_hosts_the_same_in_every_run(two_hosts, tmp_path):
    """JOB-7 (issue 18): each task XCE_TASK_STARTER starts has XCE_TASK_ID = its slot's place
    in LSB_HOSTS (0 first), on that slot's host, with XCE_HOST_TASK_INDEX = the place of
    that host's first slot (JOB-6's meaning); two runs in one job and two jobs give the
    same ranks (the tasks' arrival order at the controller does not count)."""
    script = ("for run in 1 2; do\n"
              "  $XCE_TASK_STARTER sh -c 'sleep 0.0$$; echo rank=$XCE_TASK_ID@$XCE_TASK_HOST/$XCE_HOST_TASK_INDEX'\n"
              "done\n")
    for _ in range(2):
        text, hosts = _run(two_hosts, tmp_path, script)
        assert sorted(hosts) == ["h1", "h1", "h2", "h2"] and hosts[0] == hosts[1], hosts
        first = {h: hosts.index(h) for h in hosts}
        want = [f"rank={i}@{h}/{first[h]}" for i, h in enumerate(hosts)]
        got = [ln for ln in text.splitlines() if ln.startswith("rank=")]
        assert got == want + want, text


def test_a_launched_task_sees_its_hosts_first_task_index(two_hosts, tmp_path):
    """JOB-6/JOB-7 (issue 18: XCE_HOST_TASK_INDEX was empty in launched tasks): `xcecli launch
    HOST -- CMD` on the job's second host sees XCE_HOST_TASK_INDEX = 2 (that host's first slot
    in LSB_HOSTS, as its host hooks see it) and XCE_HOST_NTASKS = 2; on the first host 0."""
    script = ('second=$(echo $LSB_HOSTS | cut -d" " -f3)\n'
              'xcecli launch $second -- sh -c \'echo second=$XCE_HOST_TASK_INDEX/$XCE_HOST_NTASKS\'\n'
              'xcecli launch $(echo $LSB_HOSTS | cut -d" " -f1) -- '
              'sh -c \'echo first=$XCE_HOST_TASK_INDEX/$XCE_HOST_NTASKS\'\n')
    text, hosts = _run(two_hosts, tmp_path, script)
    assert "second=2/2\n" in text and "first=0/2\n" in text, text


def test_a_remote_workers_start_report_carries_the_output_path_it_resolved(two_hosts, tmp_path):
    """JOB-12 across the channel: `-o DIR` naming an existing directory is resolved by the
    worker host to DIR/JOBID.out (LSF's job_ID.out, "Specifying a directory for job
    output"), and show --json on the controller gives that path."""
    d = two_hosts.ctl
    (tmp_path / "outs").mkdir()
    jid = d.submit("-o", str(tmp_path / "outs"), "--", "sh", "-c", "echo hi", cwd=tmp_path)
    j = d.wait_state(jid, ("DONE", "EXIT"), timeout=30)
    assert j["state"] == "DONE", j
    out = tmp_path / "outs" / f"{jid}.out"
    assert out.read_text() == "hi\n"
    assert (j["elements"][0]["stdout"], j["elements"][0]["stderr"]) == (str(out), str(out))


def test_the_profiles_job_starter_wraps_launched_tasks_too(two_hosts, tmp_path):
    """JOB-7 (LSF JOB_STARTER; issue 18: tasks ran bare): with a profile whose job starter
    writes a marker, the marker has a line for the job itself, one per task that
    XCE_TASK_STARTER starts (with its rank and host) and one for a single `xcecli launch`."""
    mark = tmp_path / "mark"
    script = ("$XCE_TASK_STARTER true\n"
              'xcecli launch $(echo $LSB_HOSTS | cut -d" " -f3) -- true\n'
              "echo done\n")
    text, hosts = _run(two_hosts, tmp_path, script, "-a", "wrapped", "--env", f"MARK={mark}")
    assert text.splitlines()[-1] == "done"
    lines = mark.read_text().splitlines()
    assert lines[0] == "starter job first"
    assert sorted(lines[1:5]) == sorted(f"starter {i} {h}" for i, h in enumerate(hosts))
    assert len(lines) == 6 and lines[5].startswith("starter ") and lines[5].endswith(f" {hosts[2]}"), lines


@pytest.fixture
def wide_host(topdir):
    """One xced with a 34-slot host: more ranks than the 32 threads `launch --all` once used."""
    yield from _daemon_fixture(topdir, slots=34)


def test_every_rank_of_a_wide_job_runs_at_once(wide_host, tmp_path):
    """JOB-7 (issue 18, MPI-style ranks): XCE_TASK_STARTER starts all 34 ranks at once, so
    ranks that wait for each other (a barrier: each waits until all 34 have arrived) all
    finish; each rank is its slot's place in LSB_HOSTS (0 to 33)."""
    d = wide_host
    bar = tmp_path / "barrier"
    bar.mkdir()
    rank = (f'touch {bar}/$XCE_TASK_ID; n=0; while [ $(ls {bar} | wc -l) -lt 34 ]; do '
            f'n=$((n+1)); [ $n -gt 600 ] && exit 9; sleep 0.05; done; echo rank=$XCE_TASK_ID')
    script = tmp_path / "wide.sh"
    script.write_text(f"#!/bin/sh\n$XCE_TASK_STARTER sh -c '{rank}'\necho starter=$?\n")
    script.chmod(0o755)
    jid = d.submit("-n", "34", "-o", str(tmp_path / "out"), str(script), cwd=tmp_path)
    j = d.wait_state(jid, ("DONE", "EXIT"), timeout=60)
    text = (tmp_path / "out").read_text()
    assert j["state"] == "DONE" and "starter=0\n" in text, text
    assert [ln for ln in text.splitlines() if ln.startswith("rank=")] == [f"rank={i}" for i in range(34)]

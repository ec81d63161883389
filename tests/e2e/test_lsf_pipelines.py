"""Pipeline tools written for LSF, run unchanged against a real xced (issue 18, CLI-8, JOB-12):
dask-jobqueue's LSFCluster, and the command sequence of Nextflow's LSF executor.

Sources: dask-jobqueue 0.9 `dask_jobqueue/lsf.py` (submits `bsub < script` with `#BSUB -J/-n/-R
span[hosts=1]/-M/-W/-o/-e` lines, reads the memory unit from `$LSF_ENVDIR/lsf.conf`'s
LSF_UNIT_FOR_LIMITS, finds the job ID as the first number of bsub's answer, cancels with
`bkill`); Nextflow's LsfExecutor (nextflow-io/nextflow, `LsfExecutor.groovy`: pipes the task's
script into `bsub`, `#BSUB` directives -o/-q/-n/-R/-W/-M/-J, parses `Job <N> is submitted`,
polls `bjobs -w [-q QUEUE]` reading the JOBID and STAT columns by the header's tokens, kills
with `bkill`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from tests.conftest import BIN

pytestmark = pytest.mark.timeout(180)


def _lsf_env(d) -> dict[str, str]:
    """The environment an LSF user's tool runs in: the LSF commands on PATH, the cluster's
    TopDir, and LSF_ENVDIR at the TopDir, where xced writes its lsf.conf."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XCE_")}
    env.update(XCE_TOPDIR=str(d.top), LSF_ENVDIR=str(d.top), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    return env


def test_dask_jobqueue_lsfcluster_scales_to_two_workers_computes_and_closes(daemon, tmp_path, monkeypatch):
    """dask-jobqueue's LSFCluster (use_stdin: `bsub < script`, LSF's way for clusters that
    need it) against xced: the memory unit comes from XCE's lsf.conf (MB), two worker jobs
    start and join, a computation runs on them, and closing the cluster kills both jobs."""
    import dask_jobqueue  # a test extra (pyproject.toml): `make test` installs it
    from distributed import Client

    for k, v in _lsf_env(daemon).items():
        monkeypatch.setenv(k, v)
    for k in [k for k in os.environ if k.startswith("XCE_") and k != "XCE_TOPDIR"]:
        monkeypatch.delenv(k)
    with dask_jobqueue.LSFCluster(cores=1, memory="1GB", walltime="00:10", use_stdin=True,
                                  log_directory=str(tmp_path), python=sys.executable,
                                  scheduler_options={"host": "127.0.0.1"},
                                  worker_extra_args=["--host", "127.0.0.1"]) as cluster:
        script = cluster.job_script()
        assert "#BSUB -M 1000" in script, script  # MB, from lsf.conf's LSF_UNIT_FOR_LIMITS
        cluster.scale(2)
        with Client(cluster) as client:
            client.wait_for_workers(2, timeout=90)
            assert client.submit(sum, [1, 2, 3]).result(timeout=30) == 6
            assert sorted(client.gather(client.map(lambda x: x * x, range(10)))) == [x * x for x in range(10)]
            jobs = [int(w.job_id) for w in cluster.workers.values()]  # the job IDs bsub printed
            assert len(jobs) == 2
            for j in jobs:
                assert daemon.show(j)["state"] == "RUN"
    for j in jobs:  # closed: the workers' jobs were killed with bkill
        assert daemon.wait_state(j, ("EXIT", "DONE"), timeout=30)


def test_nextflow_lsf_executor_sequence(daemon, tmp_path):
    """The commands Nextflow's LSF executor runs, as it runs them: the task script piped into
    `bsub` with its #BSUB directives (values with spaces or brackets quoted, as its
    wrapHeader does), the job ID read from `Job <N> is submitted`, `bjobs -w` polled and
    parsed by the JOBID and STAT tokens of its header, and `bkill` for a task it gives up
    (and `bkill -d`, which the issue names, recorded DONE).
    The memory directives are those Nextflow derives from XCE's lsf.conf, so the job is
    consistent by XCE's rules (the limit covers the reservation)."""
    env = _lsf_env(daemon)
    work = tmp_path / "work"
    work.mkdir()

    def bsub(script: str) -> int:
        r = subprocess.run(["bsub"], input=script, capture_output=True, text=True, env=env, cwd=work, timeout=60)
        assert r.returncode == 0, r.stderr
        m = re.search(r"Job <(\d+)> is submitted", r.stdout)
        assert m, r.stdout
        return int(m.group(1))

    def poll() -> dict[str, str]:
        r = subprocess.run(["bjobs", "-w"], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode in (0, 255), r.stderr
        states: dict[str, str] = {}
        col1 = col2 = -1
        for line in r.stdout.splitlines():
            if not line:
                continue
            if col1 == -1:
                words = line.split()
                col1, col2 = words.index("JOBID"), words.index("STAT")
                continue
            words = line.split()
            states[words[col1]] = words[col2]
        return states

    # Nextflow reads $LSF_ENVDIR/lsf.conf: LSB_JOB_MEMLIMIT=Y makes -M the whole job's memory,
    # RESOURCE_RESERVE_PER_TASK=Y makes rusage[mem] the memory divided by the CPUs
    # (LsfExecutor's perJobMemLimit and perTaskReserve); a task of 2 CPUs and 100 MB then asks
    conf = dict(line.split("=", 1) for line in (daemon.top / "lsf.conf").read_text().splitlines()
                if "=" in line and not line.startswith("#"))
    cpus, mem = 2, 100
    limit = mem if conf["LSB_JOB_MEMLIMIT"].upper() == "Y" else mem // cpus
    reserve = mem // cpus if conf["RESOURCE_RESERVE_PER_TASK"].upper() == "Y" else mem
    header = (f"#!/bin/bash\n#BSUB -o {work}/.command.log\n#BSUB -n {cpus}\n#BSUB -R \"span[hosts=1]\"\n"
              f"#BSUB -W 00:05\n#BSUB -M {limit}\n#BSUB -R \"select[mem>={mem}] rusage[mem={reserve}]\"\n")
    quick = bsub(header + "#BSUB -J nf-quick_1\necho done-$LSB_JOBID\n")
    slow = bsub(header + "#BSUB -J nf-slow_1\nsleep 300\n")
    deadline = time.monotonic() + 30
    while True:
        states = poll()
        # a finished task leaves plain `bjobs -w` (it lists unfinished jobs; `-a` adds the
        # rest): Nextflow then reads the task's own exit-code file, as it does on LSF
        if states.get(str(quick)) in (None, "DONE") and states.get(str(slow)) == "RUN":
            break
        assert time.monotonic() < deadline, states
        time.sleep(0.2)
    assert f"done-{quick}" in (work / ".command.log").read_text()
    r = subprocess.run(["bkill", str(slow)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and f"Job <{slow}> is being terminated" in r.stdout, (r.stdout, r.stderr)
    assert daemon.wait_state(slow, ("EXIT",), timeout=30)["state"] == "EXIT"
    # the sequence ends with `bkill -d`: the task given up is recorded DONE (LSF bkill -d,
    # docs/lsf-behaviour.md section 6), so a tool that reads DONE as "finished" moves on
    other = bsub(header + "#BSUB -J nf-other_1\nsleep 300\n")
    deadline = time.monotonic() + 30
    while poll().get(str(other)) != "RUN":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    r = subprocess.run(["bkill", "-d", str(other)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and f"Job <{other}> is being terminated" in r.stdout, (r.stdout, r.stderr)
    assert daemon.wait_state(other, ("DONE",), timeout=30)["state"] == "DONE"

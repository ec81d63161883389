"""The job's environment (JOB-3): XCE_* names and the LSF names existing scripts read.

Pure; used by the worker when it starts an element.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping


def hosts_per_slot(alloc: list[tuple[str, int]]) -> list[str]:
    """[("hA", 2), ("hB", 1)] -> ["hA", "hA", "hB"] (LSB_HOSTS: one name per slot)."""
    return [h for h, n in alloc for _ in range(n)]


def job_environment(base: Mapping[str, str], *, job_id: int, index: int, name: str | None, queue: str,
                    project: str | None, alloc: list[tuple[str, int]], hostfile: Path,
                    user: str | None = None, home: str | None = None) -> dict[str, str]:
    """The element's environment: the submitted `base` environment plus (JOB-3):

    XCE_JOBID, XCE_JOBINDEX, XCE_JOBNAME, XCE_QUEUE, XCE_PROJECT, XCE_HOSTS, XCE_HOSTFILE,
    XCE_NTASKS, and LSB_JOBID, LSB_JOBINDEX, LSB_JOBNAME, LSB_QUEUE, LSB_HOSTS,
    LSB_MCPU_HOSTS ("hA 2 hB 1"), LSB_DJOB_HOSTFILE, LSB_DJOB_NUMPROC.
    XCE_JOBINDEX/LSB_JOBINDEX are 0 for a job that is not an array, as in LSF.
    `user`/`home` set USER, LOGNAME and HOME when the job runs as another user (D-6).
    """
    env = dict(base)
    per_slot = " ".join(hosts_per_slot(alloc))
    mcpu = " ".join(f"{h} {n}" for h, n in alloc)
    ntasks = str(sum(n for _, n in alloc))
    jid = str(job_id)
    jname = name or ""
    env.update({
        "XCE_JOBID": jid, "XCE_JOBINDEX": str(index), "XCE_JOBNAME": jname, "XCE_QUEUE": queue,
        "XCE_PROJECT": project or "", "XCE_HOSTS": per_slot, "XCE_HOSTFILE": str(hostfile),
        "XCE_NTASKS": ntasks,
        "LSB_JOBID": jid, "LSB_JOBINDEX": str(index), "LSB_JOBNAME": jname, "LSB_QUEUE": queue,
        "LSB_HOSTS": per_slot, "LSB_MCPU_HOSTS": mcpu, "LSB_DJOB_HOSTFILE": str(hostfile),
        "LSB_DJOB_NUMPROC": ntasks,
    })
    if user:
        env["USER"] = user
        env["LOGNAME"] = user
    if home:
        env["HOME"] = home
    return env


def expand_output_path(template: str, job_id: int, index: int, cwd: str) -> str:
    """`-o/-e` path with `%J` (job ID) and `%I` (array index, 0 for a plain job) replaced;
    relative paths are relative to the job's working directory (LSF bsub -o)."""
    p = template.replace("%J", str(job_id)).replace("%I", str(index))
    return p if p.startswith("/") else str(Path(cwd) / p)

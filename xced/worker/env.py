"""Every environment a job, a task or a hook sees, built here and nowhere else (JOB-3, JOB-6,
JOB-7, PROF-10): the XCE_* names and the LSF names existing scripts and MPI launchers read.

Pure and stdlib only: the worker builds the element's and its tasks' environments, the
supervisor a hook's (it must start fast and import nothing heavy).

Layers, later ones winning: the job's own environment as submitted (less the submitter's
daemon address), the JOB-3 names, USER/LOGNAME/HOME of the user it runs as, the profile's
env (PROF-10: the profile's names win over the job's), its XCE_APP_PARAM_*/XCE_APP_ANN_*
exports, then how to reach this host's daemon and start tasks (XCE_SOCKET or
XCE_CONTROLLER, XCE_JOB_TOKEN for the element itself only, XCE_TASK_STARTER).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from xced.constants import ENV_CONTROLLER, ENV_CONTROLLER_KEY, ENV_SOCKET, ENV_TOPDIR

#: the submitter's way to its daemon, never the job's: the job talks to its own host's daemon
DAEMON_ADDRESS = (ENV_SOCKET, ENV_CONTROLLER, ENV_CONTROLLER_KEY, ENV_TOPDIR)


def hosts_per_slot(alloc: list[tuple[str, int]]) -> list[str]:
    """[("hA", 2), ("hB", 1)] -> ["hA", "hA", "hB"] (LSB_HOSTS: one name per slot)."""
    return [h for h, n in alloc for _ in range(n)]


def job_environment(base: Mapping[str, str], *, job_id: int, index: int, name: str | None, queue: str,
                    project: str | None, alloc: list[tuple[str, int]], hostfile: Path,
                    user: str | None = None, home: str | None = None) -> dict[str, str]:
    """The element's environment: the submitted `base` environment plus (JOB-3):

    XCE_JOBID, XCE_JOBINDEX, XCE_JOBNAME, XCE_QUEUE, XCE_PROJECT, XCE_HOSTS, XCE_HOSTFILE,
    XCE_NTASKS, and LSB_JOBID, LSB_JOBINDEX, LSB_JOBNAME, LSB_QUEUE, LSB_PROJECT_NAME, LSB_HOSTS,
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
        "XCE_PROJECT": project or "", "LSB_PROJECT_NAME": project or "", "XCE_HOSTS": per_slot, "XCE_HOSTFILE": str(hostfile),
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


def _home(uid: int | None) -> str | None:
    if uid is None:
        return None
    import pwd

    try:
        return pwd.getpwuid(uid).pw_dir
    except KeyError:
        return None


def _layers(base: Mapping[str, str], *, job_id: int, index: int, name: str | None, queue: str,
            project: str | None, alloc: list[tuple[str, int]], hostfile: Path, run_as: str, run_uid: int | None,
            profile_env: Mapping[str, str], export_env: Mapping[str, str], app: str | None,
            client_env: Mapping[str, str], task_starter: str) -> dict[str, str]:
    env = job_environment(base, job_id=job_id, index=index, name=name, queue=queue, project=project, alloc=alloc,
                          hostfile=hostfile, user=run_as if run_uid is not None else None, home=_home(run_uid))
    for k in DAEMON_ADDRESS:
        env.pop(k, None)
    env.update(profile_env)
    env.update(export_env)
    if app:
        env["XCE_APP"] = app
    env.update(client_env)
    env["XCE_TASK_STARTER"] = task_starter
    return env


def element_environment(info, hostfile: Path, client_env: Mapping[str, str], task_starter: str) -> dict[str, str]:
    """The environment of element `info` (a StartInfo) on its first host: the layers above,
    with its launch token (XCE_JOB_TOKEN), by which its own tasks prove they run inside it."""
    env = _layers(info.env, job_id=info.job_id, index=info.index, name=info.name, queue=info.queue,
                  project=info.project, alloc=list(info.alloc), hostfile=hostfile, run_as=info.run_as, run_uid=info.run_uid,
                  profile_env=info.profile_env, export_env=info.export_env, app=info.app, client_env=client_env,
                  task_starter=task_starter)
    env["XCE_JOB_TOKEN"] = info.token
    return env


def task_environment(task, host: str, jobdir: Path, client_env: Mapping[str, str],
                     task_starter: str) -> dict[str, str]:
    """The environment of task `task` (a TaskSpec: `xcecli launch`, or a host hook run on
    the job's other hosts) on `host`: the layers above without the launch token, plus
    XCE_HOST_NTASKS (the job's slots on this host), XCE_JOB_HOST_DIR (JOB-6) and the task's
    own names (XCE_TASK_ID, XCE_TASK_HOST; XCE_HOOK, XCE_HOST_TASK_INDEX for a hook)."""
    env = _layers(task.env, job_id=task.job_id, index=task.index, name=task.name, queue=task.queue,
                  project=task.project, alloc=list(task.alloc), hostfile=jobdir / "hostfile", run_as=task.run_as, run_uid=task.run_uid,
                  profile_env=task.profile_env, export_env=task.export_env, app=task.app, client_env=client_env,
                  task_starter=task_starter)
    env["XCE_HOST_NTASKS"] = str(sum(k for h, k in task.alloc if h == host))
    env["XCE_JOB_HOST_DIR"] = str(jobdir)
    env.update(task.extra)
    return env


def hook_environment(env: Mapping[str, str], jobdir: str, host_ntasks: int | None, hook: str,
                     extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A profile or job hook's environment in the supervisor (JOB-6): the element's, plus
    XCE_JOB_HOST_DIR, XCE_HOST_NTASKS, XCE_HOST_TASK_INDEX (0 on the first host) and XCE_HOOK,
    then `extra` (XCE_JOB_EXIT_CODE for post hooks)."""
    out = {str(k): str(v) for k, v in env.items()}
    out.update({"XCE_JOB_HOST_DIR": jobdir, "XCE_HOST_NTASKS": str(host_ntasks or 1), "XCE_HOST_TASK_INDEX": "0",
                "XCE_HOOK": hook})
    out.update(extra or {})
    return out


def task_starter_line() -> str:
    """XCE_TASK_STARTER (JOB-7): an mpirun-style prefix that runs a command once per slot of
    the job through `xcecli launch`, with this installation's xcecli."""
    import shutil
    import sys

    cli = shutil.which("xcecli", path=os.path.dirname(sys.executable)) or "xcecli"
    return f"{cli} launch --all --"

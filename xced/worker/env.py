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


#: LSB_EXIT_PRE_ABORT: the exit code by which a pre-execution command says "do not run the job
#: and do not requeue it" (LSF sets 99; IBM "Environment variables set for job execution").
#: In XCE every failing pre hook ends the job EXIT (docs/lsf-behaviour.md section 6), so 99
#: does what LSF's 99 does.
EXIT_PRE_ABORT = "99"


def job_environment(base: Mapping[str, str], *, job_id: int, index: int, name: str | None, queue: str,
                    project: str | None, alloc: list[tuple[str, int]], hostfile: Path,
                    user: str | None = None, home: str | None = None, cwd: str | None = None,
                    ntasks_max: int | None = None, command: str | None = None,
                    stdout: str | None = None, stderr: str | None = None) -> dict[str, str]:
    """The element's environment: the submitted `base` environment plus (JOB-3):

    XCE_JOBID, XCE_JOBINDEX, XCE_JOBNAME, XCE_QUEUE, XCE_PROJECT, XCE_HOSTS, XCE_HOSTFILE,
    XCE_NTASKS, and LSF's names with the meanings IBM gives them ("Environment variables set
    for job execution", docs/lsf-behaviour.md section 3 [25]):

    - LSB_JOBID: the job ID; LSB_JOBINDEX: the array index (0 for a job that is not an
      array, as in LSF; XCE_JOBINDEX too);
    - LSB_JOBNAME: the job's name (-J, without its array part); a job without one has its
      command line as its name, as in LSF ("If this argument was not given, the job name is
      the actual batch command"), from `command`; XCE_JOBNAME stays empty then;
    - LSB_QUEUE: the queue; LSB_PROJECT_NAME: the project (-P, PRJ-1), empty without one;
    - LSB_HOSTS: one host name per slot ("hA hA hB"); LSB_MCPU_HOSTS: each host and its
      slots ("hA 2 hB 1"); LSB_DJOB_HOSTFILE: the host file (one line per slot);
    - LSB_DJOB_NUMPROC: the slots allocated to the job (all its hosts);
    - LSB_MAX_NUM_PROCESSORS: the most slots the job asked for (`-n MIN,MAX`: MAX;
      `ntasks_max`, or the slots it got when None);
    - LSB_SUBCWD: the job's working directory `cwd`, where it was submitted from (or its
      -cwd: XCE keeps one directory per job);
    - LSB_OUTPUTFILE / LSB_ERRORFILE: the job's -o / -e file (`stdout`, `stderr`: the paths
      it writes, with %J/%I expanded and a directory resolved to DIR/ID.out, JOB-12); set
      only when the job names one, as LSF sets them only for bsub -o / -e;
    - LSB_EXIT_PRE_ABORT: 99 (EXIT_PRE_ABORT), the exit code of a pre-exec that removes the
      job instead of retrying it.

    `user`/`home` set USER, LOGNAME and HOME when the job runs as another user (D-6).
    """
    env = dict(base)
    per_slot = " ".join(hosts_per_slot(alloc))
    mcpu = " ".join(f"{h} {n}" for h, n in alloc)
    nslots = sum(n for _, n in alloc)
    ntasks = str(nslots)
    jid = str(job_id)
    jname = name or ""
    env.update({
        "XCE_JOBID": jid, "XCE_JOBINDEX": str(index), "XCE_JOBNAME": jname, "XCE_QUEUE": queue,
        "XCE_PROJECT": project or "", "LSB_PROJECT_NAME": project or "", "XCE_HOSTS": per_slot, "XCE_HOSTFILE": str(hostfile),
        "XCE_NTASKS": ntasks,
        "LSB_JOBID": jid, "LSB_JOBINDEX": str(index), "LSB_JOBNAME": jname or (command or ""), "LSB_QUEUE": queue,
        "LSB_HOSTS": per_slot, "LSB_MCPU_HOSTS": mcpu, "LSB_DJOB_HOSTFILE": str(hostfile),
        "LSB_DJOB_NUMPROC": ntasks, "LSB_MAX_NUM_PROCESSORS": str(max(ntasks_max or 0, nslots)),
        "LSB_EXIT_PRE_ABORT": EXIT_PRE_ABORT,
    })
    if cwd is not None:
        env["LSB_SUBCWD"] = cwd
    for k, v in (("LSB_OUTPUTFILE", stdout), ("LSB_ERRORFILE", stderr)):
        if v:
            env[k] = v
        else:
            env.pop(k, None)  # a submitter's own value (a bsub from inside a job) is not this job's
    if user:
        env["USER"] = user
        env["LOGNAME"] = user
    if home:
        env["HOME"] = home
    return env


def expand_output_path(template: str, job_id: int, index: int, cwd: str, stream: str = "stdout") -> str:
    """`-o/-e` path as the element writes it (JOB-12): %J, %I and %% expanded, a trailing
    `/` resolved to DIR/ID.out (DIR/ID.err for "stderr"), relative to `cwd`
    (xced.model.jobs.resolve_output_path, where the LSF rules are cited)."""
    from xced.model.jobs import resolve_output_path

    return resolve_output_path(template, job_id, index, cwd, stream)


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
            client_env: Mapping[str, str], task_starter: str, cwd: str | None = None,
            ntasks_max: int | None = None, command: str | None = None, stdout: str | None = None,
            stderr: str | None = None) -> dict[str, str]:
    env = job_environment(base, job_id=job_id, index=index, name=name, queue=queue, project=project, alloc=alloc,
                          hostfile=hostfile, user=run_as if run_uid is not None else None, home=_home(run_uid),
                          cwd=cwd, ntasks_max=ntasks_max, command=command, stdout=stdout, stderr=stderr)
    for k in DAEMON_ADDRESS:
        env.pop(k, None)
    env.update(profile_env)
    env.update(export_env)
    if app:
        env["XCE_APP"] = app
    env.update(client_env)
    env["XCE_TASK_STARTER"] = task_starter
    return env


def element_environment(info, hostfile: Path, client_env: Mapping[str, str], task_starter: str,
                        stdout: str | None = None, stderr: str | None = None) -> dict[str, str]:
    """The environment of element `info` (a StartInfo) on its first host: the layers above,
    with its launch token (XCE_JOB_TOKEN), by which its own tasks prove they run inside it.
    `stdout`/`stderr`: the -o/-e paths it writes (LSB_OUTPUTFILE, LSB_ERRORFILE), None when
    it names none."""
    env = _layers(info.env, job_id=info.job_id, index=info.index, name=info.name, queue=info.queue,
                  project=info.project, alloc=list(info.alloc), hostfile=hostfile, run_as=info.run_as, run_uid=info.run_uid,
                  profile_env=info.profile_env, export_env=info.export_env, app=info.app, client_env=client_env,
                  task_starter=task_starter, cwd=info.cwd, ntasks_max=getattr(info, "ntasks_max", None),
                  command=getattr(info, "command", None), stdout=stdout, stderr=stderr)
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
                  task_starter=task_starter, cwd=task.cwd, ntasks_max=getattr(task, "ntasks_max", None),
                  command=getattr(task, "command", None))
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
    the job through `xcecli launch --all`, with this installation's xcecli; each task's
    XCE_TASK_ID is its slot's place in LSB_HOSTS (xced.controller.actions launch)."""
    import shutil
    import sys

    cli = shutil.which("xcecli", path=os.path.dirname(sys.executable)) or "xcecli"
    return f"{cli} launch --all --"

"""Hooks across a job's hosts (JOB-6, JOB-7): pre_host_exec/post_host_exec run as tasks on the
job's other hosts, and the tasks those hosts start.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread and changes state only through the shell (`_commit`).
"""

from __future__ import annotations

import asyncio

from xced.controller.machine import killed_by
from xced.model.spec import JobSpec
from xced.model.jobs import ACTIVE, EndReason
from xced.model.state import EndStatus, Element, Job, StartInfo, TaskSpec


#: the profile's hooks (JOB-6), outer layer, in the order they run
HOOK_NAMES = ("pre_host_exec", "pre_job_exec", "post_job_exec", "post_host_exec")


class HooksMixin:
    """Hooks across a job's hosts (JOB-6, JOB-7): a part of the Controller."""

    def _profile_of(self, job: Job):
        app = job.spec.app
        return self.config.applications.get(app) if app else None

    async def _start_after_host_hooks(self, e: Element, info: StartInfo, hook: dict, hosts: list[str]) -> None:
        why = await self._host_hooks(e, "pre_host_exec", hook, hosts)
        if e.state not in ACTIVE:
            return
        if killed_by(e.action):  # killed while the hooks ran: the job never starts
            self.on_finished(e.job.id, e.index, EndStatus(130, None, None, self.clock(), EndReason.KILLED.value))
            return
        if why is None:
            w = self.workers.get(e.alloc[0][0])
            if w is not None:
                w.start(info)
                return
            why = f"host {e.alloc[0][0]} left while pre_host_exec ran on the job's other hosts"
        self.on_finished(e.job.id, e.index, EndStatus(1, None, None, self.clock(), why))

    async def _host_hooks(self, e: Element, name: str, hook: dict, hosts: list[str],
                          extra: dict | None = None) -> str | None:
        """Run hook `name` on each of `hosts` at once (as a task of the element, with the
        job's environment, XCE_JOB_HOST_DIR, XCE_HOST_NTASKS, XCE_HOST_TASK_INDEX, XCE_HOOK)
        and return the first failure's reason ("pre_host_exec exited 2 on h2",
        "post_host_exec timed out after 300 s on h2"), or None."""
        job = e.job
        first_index: dict[str, int] = {}
        n = 0
        for h, k in e.alloc:
            first_index.setdefault(h, n)
            n += k

        async def one(host: str) -> str | None:
            w = self.workers.get(host)
            if w is None:
                return f"{name} could not run on {host}: its worker is not joined"
            self._task_ids[(job.id, e.index)] = tid = self._task_ids.get((job.id, e.index), 0) + 1
            task = self._task_spec(e, tid, ["/bin/sh", "-c", hook["command"]],
                                   {"XCE_HOOK": name, "XCE_HOST_TASK_INDEX": str(first_index[host]), **(extra or {})},
                                   float(hook.get("timeout_s", 300.0)))
            self.store_event_only(job.id, e.index, "HOOK", "system", f"{name} on {host} (task {tid})")
            try:
                r = await w.launch_task(task)
            except Exception as exc:  # noqa: BLE001 (a worker that vanished mid-hook)
                return f"{name} could not run on {host}: {exc}"
            if not isinstance(r, dict):
                return f"{name} could not run on {host}: its worker did not answer"
            if r.get("reason") == EndReason.RUN_LIMIT:
                return f"{name} timed out after {float(hook.get('timeout_s', 300.0)):g} s on {host}"
            if r.get("signal"):
                return f"{name} was killed by {r['signal']} on {host}"
            if r.get("exit_code"):
                return f"{name} exited {r['exit_code']} on {host}"
            return None

        results = await asyncio.gather(*(one(h) for h in hosts))
        return next((r for r in results if r), None)

    def _task_spec(self, e: Element, task_id: int, argv: list[str], extra: dict[str, str],
                   run_limit_s: float | None = None) -> TaskSpec:
        """A task of element `e` for a host of the job (JOB-6 host hooks, JOB-7 `xcecli launch`):
        the pieces its worker builds the environment from (PROF-10: remote tasks get the
        job's and the profile's environments), run as the job's user with its umask, marked
        with the element's attempt (SCHED-4 fencing)."""
        sp, eff = e.job.spec, e.job.effective
        return TaskSpec(e.job.id, e.index, task_id, list(argv), sp.cwd, self.job_env(e.job), sp.run_uid,
                        sp.run_gid, sp.run_as, self.config.settings.kill_interval_s, run_limit_s,
                        sp.umask, e.job.name, e.job.queue, list(e.alloc),
                        dict(eff.profile_env), dict(eff.export_env), sp.app or None,
                        dict(extra), sp.project, e.attempt, eff.ntasks_max, sp.shown_command())

    @staticmethod
    def _hooks(profile, sp: JobSpec) -> dict[str, dict]:
        """The hooks to run (JOB-6, JOB-7): the profile's (outer layer) and the job's own -E/-Ep
        (inner layer; the job's own run with the profile's default timeout)."""
        hooks = {n: h.model_dump() for n in HOOK_NAMES if profile is not None and (h := getattr(profile, n)) is not None}
        own = sp.own_hooks
        if own.get("pre_exec"):
            hooks["job_pre_exec"] = {"command": own["pre_exec"], "timeout_s": 300.0}
        if own.get("post_exec"):
            hooks["job_post_exec"] = {"command": own["post_exec"], "timeout_s": 300.0}
        return hooks

    async def _finish_after_host_hooks(self, e: Element, st: EndStatus, hook: dict) -> None:
        hosts = [h for h, _ in e.alloc[1:]]
        self._end_tasks(e.job.id, e.index, hosts)
        why = await self._host_hooks(e, "post_host_exec", hook, hosts, {"XCE_JOB_EXIT_CODE": str(st.exit_code)})
        if e.state not in ACTIVE:
            return
        if why is not None and st.exit_code == 0 and not st.signal_name and not st.reason:
            st = EndStatus(1, None, st.start_time, st.end_time, why)
        self._finish(e, st)

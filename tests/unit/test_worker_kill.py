"""A kill that reaches the worker while an element's supervisor is still being launched
(its spec not written yet) is not lost (JOB-1, LSF bkill): the job never runs its command,
and ends killed. Real supervisor processes, a stub controller that records what it is told."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from xced.model.state import StartInfo
from xced.worker.local import LocalWorker

pytestmark = pytest.mark.timeout(60)


class Recorder:
    config = None

    def __init__(self):
        self.started, self.finished, self.failed = [], [], []

    def on_started(self, job_id, index, start_time, containment=None, attempt=None, outputs=None):
        self.started.append((job_id, index))

    def on_finished(self, job_id, index, status, attempt=None):
        self.finished.append((job_id, index, status))

    def on_start_failed(self, job_id, index, why, attempt=None):
        self.failed.append((job_id, index, why))


def _act_during_the_launch(tmp_path, act) -> None:
    """Start element 7[0] (a command that leaves a marker) on a LocalWorker, call `act(worker)`
    before its launch task has run (no spec.json yet), and check that the element ended
    killed without its command having run."""
    marker = tmp_path / "ran"
    rec = Recorder()

    async def run():
        w = LocalWorker("h1", tmp_path, rec)
        try:
            info = StartInfo(7, 0, None, "normal", "alice", ["/bin/sh", "-c", f"touch {marker}; sleep 30"],
                             str(tmp_path), {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, None, None, None, None,
                             [("h1", 1)], "alice", None, None, 0.2, 0.2)
            w.start(info)
            act(w)
            deadline = time.monotonic() + 30
            while not rec.finished and not rec.failed:
                assert time.monotonic() < deadline, "the element never ended"
                await asyncio.sleep(0.05)
        finally:
            await w.close()

    asyncio.run(run())
    assert rec.failed == [] and len(rec.finished) == 1
    assert rec.finished[0][2].reason == "killed", rec.finished
    assert not marker.exists(), "the command ran although it was killed first"


def test_a_kill_during_the_launch_is_delivered_and_the_command_never_runs(tmp_path):
    def act(w):
        assert w.kill(7, 0) is True

    _act_during_the_launch(tmp_path, act)


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_an_ending_signal_during_the_launch_ends_the_job_and_another_is_not_sent(tmp_path, sig):
    """LSF bkill -s KILL (a fresh tester's find): `xcecli kill -s KILL` of many jobs frees
    slots, a session dispatches later jobs of the same list, and their signal reached the
    worker before the job had a process: it was dropped and the job ran on. A KILL, TERM or
    INT that reaches an element still being launched now ends it as a kill does (the command
    never runs); a USR1 then is not sent (False), as a job that has not started takes none."""
    import signal

    def act(w):
        assert w.signal(7, 0, signal.SIGUSR1) is False  # no process yet: not sent
        assert w.signal(7, 0, getattr(signal, sig)) is True

    _act_during_the_launch(tmp_path, act)


def test_fencing_by_attempt_ends_only_the_stale_copy_and_leaves_the_current_one(tmp_path):
    """SCHED-4: a host runs element 7[0] of attempt 2 and, beside it, a task of attempt 1
    (a stale copy, e.g. whose end never reached the host). The rejoin lists both
    (xced.worker.remote.running_elements); a kill and an end of tasks for attempt 1 end the
    task alone, and the element of attempt 2 runs on. Real supervisor processes."""
    from tests.conftest import kill_job_processes
    from xced.model.state import TaskSpec
    from xced.worker import procs
    from xced.worker.remote import running_elements

    rec = Recorder()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    async def run():
        w = LocalWorker("h2", tmp_path, rec)
        try:
            w.start(StartInfo(7, 0, None, "normal", "alice", ["sleep", "30"], str(tmp_path), env, None, None, None,
                              None, [("h2", 1), ("h3", 1)], "alice", None, None, 0.2, 0.2, attempt=2))
            task = asyncio.ensure_future(w.launch_task(TaskSpec(7, 0, 1, ["sleep", "30"], str(tmp_path), env, None,
                                                                None, "alice", 0.2, attempt=1)))
            jd, td = tmp_path / "jobs" / "7" / "0", tmp_path / "jobs" / "7" / "0" / "tasks" / "1"
            deadline = time.monotonic() + 30
            while not (rec.started and (td / "job.json").exists()):
                assert time.monotonic() < deadline, "the element or its task never started"
                await asyncio.sleep(0.05)
            assert running_elements(tmp_path / "jobs") == [(7, 0, 1), (7, 0, 2)]
            assert w.kill(7, 0, attempt=1) is False  # the element here is attempt 2's
            w.end_tasks(7, 0, attempt=2)  # no task of attempt 2: nothing ends
            await asyncio.sleep(0.5)
            assert procs.is_alive(td) and procs.is_alive(jd)
            w.end_tasks(7, 0, attempt=1)
            result = await asyncio.wait_for(task, 20)
            assert result["reason"] == "killed", result
            assert procs.is_alive(jd) and rec.finished == []
            assert running_elements(tmp_path / "jobs") == [(7, 0, 2)]
            assert w.kill(7, 0, attempt=2) is True
            deadline = time.monotonic() + 20
            while not rec.finished:
                assert time.monotonic() < deadline, "the element never ended"
                await asyncio.sleep(0.05)
        finally:
            await w.close()

    try:
        asyncio.run(run())
    finally:
        kill_job_processes(tmp_path)  # by the PIDs the supervisors recorded, even on failure
    assert rec.finished[0][2].reason == "killed", rec.finished

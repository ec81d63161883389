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

    def on_started(self, job_id, index, start_time, containment=None, attempt=None):
        self.started.append((job_id, index))

    def on_finished(self, job_id, index, status, attempt=None):
        self.finished.append((job_id, index, status))

    def on_start_failed(self, job_id, index, why, attempt=None):
        self.failed.append((job_id, index, why))


def test_a_kill_during_the_launch_is_delivered_and_the_command_never_runs(tmp_path):
    marker = tmp_path / "ran"
    rec = Recorder()

    async def run():
        w = LocalWorker("h1", tmp_path, rec)
        try:
            info = StartInfo(7, 0, None, "normal", "alice", ["/bin/sh", "-c", f"touch {marker}; sleep 30"],
                             str(tmp_path), {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, None, None, None, None,
                             [("h1", 1)], "alice", None, None, 0.2, 0.2)
            w.start(info)
            assert w.kill(7, 0) is True  # before the launch task has run: no spec.json yet
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

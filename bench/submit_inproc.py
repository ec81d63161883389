"""The controller's submit path without HTTP: 1,000 `Controller.submit` calls in-process
with this process's environment (as `xcecli submit` sends it), no worker joined; prints
the median per-submit time in ms over 5 runs. Run by hand, from the project root:

    .venv/bin/python bench/submit_inproc.py
    PYTHONPATH=<an older worktree> .venv/bin/python bench/submit_inproc.py    # to compare
"""
import os
import statistics
import tempfile
import time
from pathlib import Path
from xced.controller.controller import Controller
from xced.model.config import ClusterConfig, ClusterSettings, HostConfig, QueueConfig
from xced.policy.rbac import Caller
from xced.store.sqlite import SqliteStore
ALICE = Caller("alice", None, None, True, False)
def run():
    d = Path(tempfile.mkdtemp())
    cfg = ClusterConfig(settings=ClusterSettings(mode="test"), queues=[QueueConfig(name="normal")],
                        hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)])
    store = SqliteStore(d / "db")
    c = Controller(cfg, store, d)
    env = dict(os.environ)
    req = {"argv": ["true"], "cwd": "/tmp", "ntasks_min": 1, "env": env}
    t = time.perf_counter()
    for i in range(1000):
        c.submit(dict(req), ALICE)
    return (time.perf_counter() - t) * 1000 / 1000
if __name__ == "__main__":
    print(f"{statistics.median(run() for _ in range(5)):.3f} ms per submit")

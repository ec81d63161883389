"""The GET /jobs answer kept between listings (issue 17 part 3, CLI-7): whatever happens to
the jobs between two listings, the kept answer is byte for byte the one built afresh from
the jobs (xced.server.convert.job_dict), so `xcecli jobs --json` never shows a stale job."""

from __future__ import annotations

from hypothesis import example, given, settings, strategies as st

from xced.api.errors import XceError
from xced.controller.controller import Controller
from xced.model.config import ClusterConfig, ClusterSettings, HostConfig, QueueConfig
from xced.model.state import EndStatus
from xced.server.convert import ListingCache, json_response, job_dict
from tests.unit.test_controller import ADMIN, ALICE, Clock, FakeWorker

OPS = st.lists(st.tuples(st.sampled_from(["submit", "submit4", "array", "session", "end", "exit", "kill", "stop",
                                          "resume", "requeue", "started", "host_close", "host_open",
                                          "worker_left", "worker_back", "reconfig"]),
                         st.integers(0, 30)), min_size=1, max_size=40)


def _fresh(ctl) -> bytes:
    jobs = list(ctl.jobs.values())
    return json_response({"jobs": [job_dict(j, elements=not j.is_array, hosts=ctl.hosts) for j in jobs]}).body


def _apply(ctl, op: str, n: int, tmp_path) -> None:
    jobs = list(ctl.jobs.values())
    job = jobs[n % len(jobs)] if jobs else None
    try:
        if op == "submit":
            ctl.submit({"argv": ["true"], "cwd": "/tmp", "ntasks_min": 1, "name": f"j{n}"}, ALICE)
        elif op == "submit4":
            ctl.submit({"argv": ["true"], "cwd": "/tmp", "ntasks_min": 4, "stdout": "/tmp/o.%J"}, ALICE)
        elif op == "array":
            ctl.submit({"argv": ["true"], "cwd": "/tmp", "ntasks_min": 1, "name": f"a[1-{n % 4 + 1}]"}, ALICE)
        elif op == "session":
            ctl.run_session()
        elif job is None:
            return
        elif op in ("end", "exit"):
            for e in job.elements.values():
                if e.state == "RUN":
                    ctl.on_finished(job.id, e.index, EndStatus(0 if op == "end" else 3, None, 1000.0, 1001.0, None))
        elif op == "started":
            for e in job.elements.values():
                if e.state == "RUN":
                    ctl.on_started(job.id, e.index, 1000.5, "subreaper")
        elif op == "kill":
            ctl.kill(job.id, None, ALICE)
        elif op == "stop":
            ctl.stop(job.id, None, ALICE)
        elif op == "resume":
            ctl.resume(job.id, None, ALICE)
        elif op == "requeue":
            ctl.requeue(job.id, None, ALICE)
        elif op == "host_close":
            ctl.host_control(ADMIN, "h1", "close", "maintenance")
        elif op == "host_open":
            ctl.host_control(ADMIN, "h1", "open", None)
        elif op == "worker_left":
            if ctl.is_joined("h1"):
                ctl.worker_left(ctl.fake)
        elif op == "worker_back":
            if not ctl.is_joined("h1"):
                ctl.attach_worker(ctl.fake)
        elif op == "reconfig":
            ctl.apply_config(_config(3600 + n), ADMIN)
    except XceError:
        pass  # refused as a user would be refused: the listing must still be right


def _config(limit: int) -> ClusterConfig:
    return ClusterConfig(settings=ClusterSettings(mode="test"),
                         queues=[QueueConfig(name="normal", max_run_limit_s=limit)],
                         hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)])


@settings(max_examples=150, deadline=None)
@given(OPS)
@example([("submit", 0), ("session", 0), ("worker_left", 0), ("worker_back", 0)])  # the host's problem
@example([("submit", 0), ("stop", 0), ("resume", 0)])  # holds
@example([("submit", 0), ("reconfig", 5)])  # the effective values
@example([("submit", 0), ("session", 0), ("started", 0), ("end", 0), ("requeue", 0), ("session", 0)])
@example([("submit4", 0), ("submit", 0), ("session", 0), ("kill", 1), ("session", 0)])  # pend reasons
def test_the_kept_listing_is_the_fresh_one_after_any_sequence(tmp_path_factory, ops):
    """After each step of a random sequence of submits, sessions, starts, ends, kills,
    stops, resumes, requeues, host closes and worker departures, the listing the cache gives
    equals, byte for byte, the one built anew (issue 17 part 3; D-5 for the transitions)."""
    tmp_path = tmp_path_factory.mktemp("lc")
    from xced.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "db")
    ctl = Controller(_config(3600), store, tmp_path, clock=Clock())
    ctl.fake = FakeWorker()
    ctl.attach_worker(ctl.fake)
    cache = ListingCache()
    try:
        for op, n in ops:
            _apply(ctl, op, n, tmp_path)
            assert cache.listing(list(ctl.jobs.values()), ctl.hosts).body == _fresh(ctl), (op, n)
    finally:
        store.close()


def test_a_listing_of_more_jobs_than_kept_is_still_whole(tmp_path):
    """Beyond ListingCache.MAX jobs the cache starts again; the answer is still every job."""
    from xced.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "db")
    ctl = Controller(_config(3600), store, tmp_path, clock=Clock())
    cache = ListingCache()
    cache.MAX = 5
    try:
        for i in range(12):
            ctl.submit({"argv": ["true"], "cwd": "/tmp", "ntasks_min": 1, "name": f"j{i}"}, ALICE)
        for _ in range(2):
            assert cache.listing(list(ctl.jobs.values()), ctl.hosts).body == _fresh(ctl)
        assert len(cache._entries) <= 5
    finally:
        store.close()


def test_a_kept_entry_costs_about_its_json(tmp_path):
    """The cache keeps each job's JSON at its own size (about 1 KB for a plain job), not the
    working buffer orjson made it in (about 8 KB): 10,000 pending jobs' listing kept adds
    about 10 MB to the daemon, not 160 MB (issue 17; bench/RESULTS.md, RSS after listings)."""
    import tracemalloc

    from xced.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "db")
    ctl = Controller(_config(3600), store, tmp_path, clock=Clock())
    try:
        for i in range(300):
            ctl.submit({"argv": ["true"], "cwd": "/tmp", "ntasks_min": 1, "name": f"j{i}"}, ALICE)
        jobs = list(ctl.jobs.values())
        tracemalloc.start()
        try:
            cache = ListingCache()
            body = cache.listing(jobs, ctl.hosts).body
            kept = tracemalloc.get_traced_memory()[0] - len(body)
        finally:
            tracemalloc.stop()
        per_job = kept / len(jobs)
        assert per_job < 2 * len(body) / len(jobs), (per_job, len(body) / len(jobs))
    finally:
        store.close()

"""The worker channel's controller end (D-1, D-7): a worker's reports count only for the
elements dispatched to that worker's host."""

from __future__ import annotations

import logging

from tests.unit.test_controller import ALICE, FakeWorker, Clock, req, session
from xced.controller.controller import Controller
from xced.model.config import ClusterConfig, ClusterSettings, HostConfig, QueueConfig
from xced.store.sqlite import SqliteStore
from xced.controller.channel import RemoteWorkerLink, handle_worker_message


def _two_hosts(tmp_path):
    cfg = ClusterConfig(settings=ClusterSettings(mode="test"), queues=[QueueConfig(name="normal")],
                        hosts=[HostConfig(name="h1", slots=1, memory_mb=1000),
                               HostConfig(name="h2", slots=1, memory_mb=1000)])
    c = Controller(cfg, SqliteStore(tmp_path / "db"), tmp_path, clock=Clock())
    for h in ("h1", "h2"):
        w = FakeWorker()
        w.host = h
        c.attach_worker(w)
    return c


def _finished(job_id: int, code: int = 0) -> dict:
    return {"op": "finished", "job_id": job_id, "index": 0,
            "status": {"exit_code": code, "start_time": 1000.0, "end_time": 1001.0}}


def test_a_worker_cannot_end_a_job_of_another_host(tmp_path, caplog):
    c = _two_hosts(tmp_path)
    job = c.submit(req(), ALICE)
    session(c)
    e = job.elements[0]
    assert e.state == "RUN"
    host = e.alloc[0][0]
    other = RemoteWorkerLink("h2" if host == "h1" else "h1", lambda m: None)
    own = RemoteWorkerLink(host, lambda m: None)
    with caplog.at_level(logging.WARNING, "xced.controller.channel"):
        assert handle_worker_message(c, other, _finished(job.id)) is False
        assert handle_worker_message(c, other, {"op": "started", "job_id": job.id, "index": 0,
                                                "start_time": 5.0}) is False
        assert handle_worker_message(c, other, {"op": "start_failed", "job_id": job.id, "index": 0,
                                                "reason": "x"}) is False
    assert e.state == "RUN" and e.start_time != 5.0
    assert f"runs on {host}, not on {other.host}; refused" in caplog.text
    assert handle_worker_message(c, own, _finished(job.id)) is True
    assert e.state == "DONE"
    # after its end, even its own host's reports about it are refused
    assert handle_worker_message(c, own, _finished(job.id, 3)) is False
    assert e.state == "DONE" and e.exit_code == 0


def test_reports_about_unknown_jobs_and_unknown_messages_are_refused(tmp_path, caplog):
    c = _two_hosts(tmp_path)
    link = RemoteWorkerLink("h1", lambda m: None)
    with caplog.at_level(logging.WARNING, "xced.controller.channel"):
        assert handle_worker_message(c, link, _finished(99)) is False
        assert handle_worker_message(c, link, {"op": "submit", "argv": ["id"]}) is False
        assert handle_worker_message(c, link, {"op": "finished", "job_id": "x", "index": 0, "status": {}}) is False
        assert handle_worker_message(c, link, {"op": "started", "job_id": 1, "index": 0, "start_time": 1.0,
                                               "extra": True}) is False
    assert "is not running; refused" in caplog.text
    assert caplog.text.count("is not part of the channel") == 3


def test_a_host_declared_by_its_worker_takes_what_it_offers_at_each_join(tmp_path):
    """RES-2 (a fresh tester): a host not in hosts.yaml is declared by its worker's offer at
    every join, so a worker restarted with other slots or resources is seen with those; a
    host of hosts.yaml keeps its declared values whatever its worker offers."""
    from xced.api.peer import Join

    cfg = ClusterConfig(settings=ClusterSettings(mode="test"), queues=[QueueConfig(name="normal")],
                        hosts=[HostConfig(name="h1", slots=1, memory_mb=1000)])
    c = Controller(cfg, SqliteStore(tmp_path / "db"), tmp_path, clock=Clock())
    for slots, gpus in ((2, 2.0), (3, 0.0)):
        link = RemoteWorkerLink("w2", lambda m: None)
        c.worker_joined(link, Join(host="w2", slots=slots, memory_mb=2048, resources={"gpu": gpus} if gpus else {}))
        assert (c.hosts["w2"].slots, c.hosts["w2"].resources) == (slots, {"gpu": gpus} if gpus else {})
        c.worker_left(link)
    link = RemoteWorkerLink("h1", lambda m: None)
    c.worker_joined(link, Join(host="h1", slots=64, memory_mb=99999))
    assert (c.hosts["h1"].slots, c.hosts["h1"].memory_mb) == (1, 1000)


def test_what_belongs_to_a_lost_channel_is_dropped_and_reports_stay_in_order():
    """The worker's queue outlives a lost channel: its reports go out on the next one, but a
    reply (its rid names a request of the old channel: on the new one it could answer another
    request, SCHED-4), a relayed launch (answered `unreachable` already) and a heartbeat do not."""
    from xced.worker.remote import ChannelReporter

    r = ChannelReporter()
    r.queue.put_nowait({"op": "started", "job_id": 1, "index": 0})
    r.queue.put_nowait({"op": "reply", "rid": 1, "result": {"exit_code": 0}})
    r.queue.put_nowait({"op": "launch", "lid": 1})
    r.queue.put_nowait({"op": "heartbeat"})
    r.queue.put_nowait({"op": "finished", "job_id": 1, "index": 0})
    assert r.channel_lost() == 3
    assert [r.queue.get_nowait()["op"] for _ in range(r.queue.qsize())] == ["started", "finished"]


def test_a_join_with_control_characters_or_empty_names_is_refused():
    """D-8, a fresh tester's finding: a worker's attribute holding an escape sequence was
    taken, and pend reasons (`xcecli why`, `bjobs -l`) printed it raw on admins' terminals.
    A join naming a resource, attribute or tag with a control character (C0, DEL or C1), or
    an empty one, is refused naming the field; printable values, and an empty attribute
    value, are taken."""
    import pytest
    from pydantic import ValidationError

    from xced.api.peer import Join

    for bad, field in (({"attributes": {"type": "a\x1b[2J"}}, "attributes.type"),
                       ({"attributes": {"rk": "\x9b31m"}}, "attributes.rk"),
                       ({"attributes": {"a\x07": "x"}}, "attributes"),
                       ({"tags": ["t\x1b[5m"]}, "tags.0"), ({"tags": [""]}, "tags.0"),
                       ({"resources": {"": 1.0}}, "resources")):
        with pytest.raises(ValidationError) as e:
            Join(host="h1", slots=1, memory_mb=1, **bad)
        assert field in str(e.value), (bad, str(e.value))
    ok = Join(host="h1", slots=1, memory_mb=1, attributes={"type": "X86_64", "note": "", "model": "PC 6000"},
              tags=["fast"], resources={"gpu": 2})
    assert ok.attributes["note"] == "" and ok.tags == ["fast"]

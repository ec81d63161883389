"""Recordings (SIM-2): a session's snapshot and decisions survive JSON, and verify() finds
exactly the decisions that differ."""

from __future__ import annotations

import json

import pytest

from xced.model.config import ClusterConfig
from xced.resreq import parse
from xced.scheduler.session import schedule
from xced.scheduler.snapshot import HostSupply, JobSnap, QueueSnap, RunSnap, Snapshot
from xced.sim.recording import (RecordingError, header_line, session_line, snapshot_from_json,
                                snapshot_to_json, verify)

CFG = ClusterConfig.model_validate({"settings": {"cluster_name": "c"}, "queues": [{"name": "normal"}],
                                    "hosts": []})


def snap() -> Snapshot:
    hosts = [HostSupply("h1", 8, 2, 8192, 4096, {"gpu": 2}, {"gpu": 1}, {"type": "X86_64"}, frozenset({"fast"})),
             HostSupply("h2", 4, 4, 4096, 4096)]
    pending = [JobSnap(1, 0, "normal", 10.0, 8, 8, parse("span[hosts=1]"), run_limit_s=600),
               JobSnap(2, 3, "normal", 11.0, 2, 4, parse("select[type == X86_64] rusage[gpu=1]"), 10, False, "ab",
                       60),
               JobSnap(3, 0, "normal", 12.0, 1, 1, parse(""), run_limit_s=None)]
    running = [RunSnap(9, 0, 1500.0, {"h1": {"slots": 6, "gpu": 1}})]
    return Snapshot(hosts, [QueueSnap("normal", 30, 0, None, True)], pending, {2: 1}, running)


def test_snapshot_round_trip():
    s = snap()
    assert snapshot_from_json(json.loads(json.dumps(snapshot_to_json(s)))) == s


def test_a_hosts_last_dispatch_round_trips_and_an_older_row_reads_as_never():
    """SIM-2, issue 19 part 2: the last dispatch, which breaks ties between equal hosts, is in
    the recording, so a replay decides as the live session did; a row recorded before it
    was ([njobs, exclusive]) reads as never dispatched to."""
    s = snap()
    s.hosts[1] = HostSupply("h2", 4, 4, 4096, 4096, last_dispatch=1234.5)
    d = json.loads(json.dumps(snapshot_to_json(s)))
    assert d["hosts"][1][-1] == [0, False, 1234.5]
    assert snapshot_from_json(d) == s
    d["hosts"][1][-1] = [0, False]
    assert snapshot_from_json(d).hosts[1].last_dispatch == 0.0
    d["hosts"][1][-1] = [0, False, "soon"]
    with pytest.raises(ValueError, match="last dispatch"):
        snapshot_from_json(d)


def test_snapshot_with_projects_round_trips_and_replays_its_caps(tmp_path):
    """PRJ-6, PRJ-7: the projects config, each pending job's project and user and the running
    use are inputs of schedule(): a recording carries them, and a replay pends the same job
    on the same caps. A recording made before projects (rows of 11 fields, no "projects")
    still reads, every job without a project."""
    from xced.model.project import ProjectConfig, ProjectsConfig

    s = snap()
    s.projects = ProjectsConfig(projects=[ProjectConfig(path="/a", quota={"slots": 4})])
    s.pending = [JobSnap(j.job_id, j.index, j.queue, j.submit_time, j.ntasks_min, j.ntasks_max, j.resreq,
                         j.array_limit, j.held, j.profile_hash, j.run_limit_s, project="/a", user="bob")
                 for j in s.pending]
    s.usage = [("/a", "bob", {"slots": 2.0})]
    d = json.loads(json.dumps(snapshot_to_json(s)))
    assert snapshot_from_json(d) == s
    r = schedule(s, 1000.0)
    assert r.pend_reasons[(1, 0)].caps == ("project /a at quota: 2/4 slots, 8 needed",)
    assert "2[3]: task range 2,4 cut to 2,2 by the project caps" in [str(t) for t in r.trace]
    rec = tmp_path / "rec.jsonl"
    rec.write_text(header_line(CFG) + "\n" + session_line(1, 1000.0, CFG.content_hash(), s, r) + "\n")
    assert verify(rec) == (1, [])
    old = snapshot_to_json(snap())
    assert "projects" not in old and all(len(row) == 11 for row in old["pending"])
    got = snapshot_from_json(old)
    assert got.projects is None and got.usage == [] and {j.project for j in got.pending} == {None}


def test_verify_same_decisions_and_a_tampered_one(tmp_path):
    s = snap()
    rec = tmp_path / "rec.jsonl"
    r = schedule(s, 1000.0)
    assert r.dispatches  # something to compare
    rec.write_text(header_line(CFG) + "\n" + session_line(1, 1000.0, CFG.content_hash(), s, r) + "\n")
    assert verify(rec) == (1, [])
    lines = rec.read_text().splitlines()
    obj = json.loads(lines[1])
    obj["decisions"]["dispatches"][0][2] = [["h9", 1]]
    obj["decisions"]["reasons"][0][2]["main"] = "made up"
    rec.write_text(lines[0] + "\n" + json.dumps(obj) + "\n")
    n, diffs = verify(rec)
    assert n == 1 and [(d.element, d.what) for d in diffs] == [("3", "allocation"), ("1", "pend reason")]
    assert str(diffs[1]).startswith("session 1 (line 2): 1: pend reason: recorded 'made up', replay ")


@pytest.mark.parametrize("text,msg", [
    ("", "empty; no header line"),
    ("not json\n", ":1: not a JSON line"),
    ('{"kind": "session"}\n', ":1: a session before the header line"),
    ('{"kind": "header", "version": 7}\n', "recording version 7"),
    ('{"kind": "header", "version": 1, "config": "xyz"}\n', ":1: the header's config is not a valid cluster config"),
    ("\x95\x00binary", "not text (not UTF-8)"),
])
def test_bad_recordings(tmp_path, text, msg):
    rec = tmp_path / "rec.jsonl"
    rec.write_bytes(text.encode("latin-1"))
    with pytest.raises(RecordingError, match=None) as info:
        verify(rec)
    assert msg in str(info.value)


def test_verify_checks_the_config_hashes_and_malformed_sessions(tmp_path):
    s = snap()
    rec = tmp_path / "rec.jsonl"
    good = header_line(CFG) + "\n" + session_line(1, 1000.0, CFG.content_hash(), s, schedule(s, 1000.0)) + "\n"
    rec.write_text(good.replace(CFG.content_hash(), "0" * 64))
    n, diffs = verify(rec)
    assert [d.what for d in diffs] == ["header config hash"]  # said once, not again for every session
    head, sess = good.splitlines()
    rec.write_text(head + "\n" + sess.replace(CFG.content_hash(), "1" * 64) + "\n")
    n, diffs = verify(rec)
    assert [d.what for d in diffs] == ["config hash (not the config of the header before it)"]
    rec.write_text(header_line(CFG) + '\n{"kind": "session", "seq": 4, "now": 1}\n')
    with pytest.raises(RecordingError) as info:
        verify(rec)
    assert ":2: session 4 is malformed (missing 'snapshot')" in str(info.value)


def test_verify_finds_missing_repeated_and_moved_sessions(tmp_path):
    s = snap()
    r = schedule(s, 1000.0)
    lines = [header_line(CFG)] + [session_line(k, 1000.0, CFG.content_hash(), s, r) for k in (1, 2, 3)]
    rec = tmp_path / "rec.jsonl"
    rec.write_text("\n".join(lines) + "\n")
    assert verify(rec) == (3, [])
    for body in ([lines[0], lines[1], lines[3]], [lines[0], lines[2], lines[1], lines[3]],
                 [lines[0], lines[1], lines[1], lines[2], lines[3]]):
        rec.write_text("\n".join(body) + "\n")
        n, diffs = verify(rec)
        assert any(d.what.startswith("session number") for d in diffs), body
    bad = json.loads(lines[1])
    bad["snapshot"]["hosts"][0][1] = -3
    rec.write_text("\n".join([lines[0], json.dumps(bad)]) + "\n")
    with pytest.raises(RecordingError, match="session 1 is malformed"):
        verify(rec)

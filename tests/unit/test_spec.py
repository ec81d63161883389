"""A job's typed record (D-5, MERGE-1, CFG-3): what the user submitted (JobSpec) and what the
merge made of it (EffectiveJob), kept by the store as one flat JSON object."""

from __future__ import annotations

import dataclasses
import json

import pytest

from xced.constants import DEFAULT_UMASK
from xced.controller.controller import Controller
from xced.model.config import ClusterConfig, ClusterSettings, HostConfig, QueueConfig
from xced.model.spec import EffectiveJob, JobSpec, from_record, to_record
from xced.store.sqlite import SqliteStore
from tests.unit.test_controller import ALICE, Clock, FakeWorker, req


def _cfg(limit=3600):
    return ClusterConfig(settings=ClusterSettings(mode="test"),
                         queues=[QueueConfig(name="normal", max_run_limit_s=limit)],
                         hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)])


def _open(tmp_path, cfg):
    store = SqliteStore(tmp_path / "db")
    c = Controller(cfg, store, tmp_path, clock=Clock())
    c.attach_worker(FakeWorker())
    return c, store


def test_submit_makes_typed_spec_and_effective_values(tmp_path):
    cfg = _cfg()
    c, store = _open(tmp_path, cfg)
    j = c.submit(req(argv=["echo", "hi"], name="a[1-4]%2", resreq=["rusage[mem=100]"], env={"K": "v"},
                     dependency=None, umask=0o027), ALICE)
    assert isinstance(j.spec, JobSpec) and isinstance(j.effective, EffectiveJob)
    assert j.spec.argv == ("echo", "hi") and j.spec.array_spec == "a[1-4]%2" and j.spec.array_limit == 2
    assert j.spec.resreq == ("rusage[mem=100]",) and j.spec.umask == 0o027 and c.job_env(j) == {"K": "v"}
    assert j.spec.job_values.run_limit_s is None  # what the user gave, kept for a re-merge
    assert j.effective.run_limit_s == 3600  # the queue's ceiling, the merge's result (JOB-2)
    assert j.effective.resreq == "rusage[mem=100]" and j.effective.config_hash == cfg.content_hash()
    with pytest.raises(dataclasses.FrozenInstanceError):
        j.spec.argv = ("rm",)
    store.close()


def test_spec_survives_a_reopen_unchanged(tmp_path):
    c, store = _open(tmp_path, _cfg())
    j = c.submit(req(argv=["true"], name="x", env={"A": "1"}, resreq=["select[mem>10]"]), ALICE)
    spec, eff = j.spec, j.effective
    store.close()
    c2, store2 = _open(tmp_path, _cfg())
    k = c2.jobs[j.id]
    assert k.spec == spec and k.effective == eff
    store2.close()


def test_a_new_config_replaces_only_the_effective_values(tmp_path):
    c, store = _open(tmp_path, _cfg(3600))
    j = c.submit(req(), ALICE)
    spec = j.spec
    store.close()
    c2, store2 = _open(tmp_path, _cfg(60))  # the queue's ceiling changed while the daemon was down
    k = c2.jobs[j.id]
    assert k.spec == spec and k.effective.run_limit_s == 60
    row = json.loads(next(iter(store2.load_jobs()))[5])
    assert row["run_limit_s"] == 60 and row["job_values"]["run_limit_s"] is None
    store2.close()


def test_record_round_trip_and_an_old_record_gets_defaults():
    old = {"argv": ["true"], "cwd": "/tmp", "env": {}, "run_as": "alice", "ntasks_min": 2}
    spec, eff = from_record(old)
    assert spec.umask == DEFAULT_UMASK and spec.job_values is None and spec.app == "" and spec.resreq == ()
    assert eff.ntasks_max == 2 and eff.resreq == "" and not eff.config_refused
    assert from_record(to_record(spec, eff)) == (spec, eff)
    refused = eff.refused_by("abc")
    rec = to_record(spec, refused)
    assert rec["config_refused"] is True and rec["config_hash"] == "abc"
    assert from_record(rec)[1] == refused and refused.accepted().config_refused is False
    assert "config_refused" not in to_record(spec, refused.accepted())


def test_overwrite_outputs_are_kept_across_a_reopen_and_reach_the_worker(tmp_path):
    """JOB-12, CLI-8, IBM bsub -oo/-eo (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.__oo.1.html):
    the submit's stdout_overwrite/stderr_overwrite are kept on the job's spec and its record
    (a record without them reads as append), survive a restart, and travel to the worker with
    the element it starts; overwrite without a file to overwrite is refused, naming the option."""
    from xced.api.errors import InvalidRequest
    from tests.unit.test_controller import session

    c, store = _open(tmp_path, _cfg())
    j = c.submit(req(stdout="o.%J", stdout_overwrite=True, stderr="e.%J"), ALICE)
    assert (j.spec.stdout_overwrite, j.spec.stderr_overwrite) == (True, False)
    rec = to_record(j.spec, j.effective)
    assert rec["stdout_overwrite"] is True and "stderr_overwrite" not in rec
    with pytest.raises(InvalidRequest, match=r"stderr_overwrite \(-eo\) needs stderr, the file to overwrite; give -eo"):
        c.submit(req(stderr_overwrite=True), ALICE)
    store.close()
    c2, store2 = _open(tmp_path, _cfg())
    assert c2.jobs[j.id].spec == j.spec
    worker = FakeWorker()
    c2.attach_worker(worker)
    session(c2)
    [info] = [i for i in worker.infos if i.job_id == j.id]
    assert (info.stdout, info.stdout_overwrite, info.stderr, info.stderr_overwrite) == ("o.%J", True, "e.%J", False)
    store2.close()


def test_a_command_line_is_kept_and_named_the_jobs_command(tmp_path):
    """CLI-8, IBM bsub `command` (https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.command.1.html:
    "If no job name is specified with -J, bjobs, bhist and bacct displays the command as the
    job name"): the submit's command_line (bsub's line as typed, run as /bin/sh -c LINE) is
    kept on the spec and its record, survives a restart and is the command the worker gets
    (LSB_JOBNAME of a job without -J); a job without one shows its argv, quoted."""
    from tests.unit.test_controller import session

    c, store = _open(tmp_path, _cfg())
    j = c.submit(req(argv=["/bin/sh", "-c", "sleep 0; echo hi"], command_line="sleep 0; echo hi"), ALICE)
    plain = c.submit(req(argv=["echo", "a b"]), ALICE)
    assert (j.spec.shown_command(), plain.spec.shown_command()) == ("sleep 0; echo hi", "echo 'a b'")
    assert to_record(j.spec, j.effective)["command_line"] == "sleep 0; echo hi"
    assert "command_line" not in to_record(plain.spec, plain.effective)
    store.close()
    c2, store2 = _open(tmp_path, _cfg())
    assert c2.jobs[j.id].spec == j.spec
    worker = FakeWorker()
    c2.attach_worker(worker)
    session(c2)
    commands = {i.job_id: i.command for i in worker.infos}
    assert commands == {j.id: "sleep 0; echo hi", plain.id: "echo 'a b'"}
    store2.close()

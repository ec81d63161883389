"""The job-config merge, xced/merge.py (MERGE-1..MERGE-4, PROF-3..PROF-7, PROF-9, PROF-10).

Table-driven: each row cites the rule it checks.
"""

from __future__ import annotations

import json

import pytest

from xced.merge import JobValues, MergeError, merge_job
from xced.model.config import QueueConfig
from xced.model.profile import Profile
from xced.resreq import parse, render

PROFILES = {
    "pytorch": Profile(
        name="pytorch",
        env={"OMP_NUM_THREADS": "4", "PYTHONUNBUFFERED": "1"},
        params={"EPOCHS": "10", "data.dir": "/data"},
        annotations={"team.owner": "ml"},
    ),
    "fluent": Profile(
        name="fluent",
        rusage=[{"name": "fluent_lic", "value": 1, "per": "job", "default": True}],
    ),
    "mpi": Profile(
        name="mpi",
        span={"ptile": 8},
        limits={"task_min": 2, "task_max": 64, "run_limit_s": 3600, "memory_limit_mb": 8192},
    ),
    "gpu": Profile(
        name="gpu",
        select="gpu>=1",
        rusage=[
            {"name": "mem", "value": 4096, "unit": "MB", "default": True},
            {"name": "gpu", "value": 1, "default": True},
        ],
    ),
    "sel": Profile(name="sel", select="type==X86_64"),
    "fixed": Profile(name="fixed", rusage=[{"name": "lic", "value": 2, "per": "job"}]),
    "ordered": Profile(name="ordered", order=[{"name": "slots", "desc": True}], same=["type"]),
    "svc": Profile(name="svc", kind="service", service={}),
}

QUEUE = QueueConfig(name="normal")
SMALL = QueueConfig(name="small", max_tasks=4, max_run_limit_s=600, max_memory_mb=1000)


def job(r: str = "", n: int | None = None, nmax: int | None = None, W: int | None = None,
        M: int | None = None, env: dict | None = None, params: dict | None = None,
        exdata: object = None) -> JobValues:
    return JobValues(parse(r), n, nmax, W, M, env or {}, params or {}, exdata)


def run(j: JobValues, prof: str | None, queue: QueueConfig = QUEUE):
    return merge_job(j, PROFILES[prof] if prof else None, queue)


# (rule, job, profile, expected canonical resreq, expected origins subset, warning substring or None)
RESREQ_ROWS = [
    ("PROF-4 select ANDed", job("select[mem>100]"), "gpu",
     "select[gpu >= 1 && mem > 100] rusage[mem=4096/task:gpu=1/task]",
     {"select": "profile+job", "rusage.mem": "profile", "rusage.gpu": "profile"}, None),
    ("PROF-4 rusage default applied", job(""), "fluent",
     "rusage[fluent_lic=1/job]", {"rusage.fluent_lic": "profile"}, None),
    ("PROF-4 rusage overridden up, per not inherited", job("rusage[fluent_lic=2]"), "fluent",
     "rusage[fluent_lic=2]", {"rusage.fluent_lic": "job"}, None),
    ("PROF-4/MERGE-1 rusage lowered: warning", job("rusage[mem=1024]"), "gpu",
     "select[gpu >= 1] rusage[mem=1024, gpu=1/task]", {"rusage.mem": "job", "rusage.gpu": "profile"},
     "rusage mem: the job's 1024 MB is below the profile's default 4096 MB"),
    ("MERGE-3 gpu=0 dropped", job("rusage[gpu=0]"), "gpu",
     "select[gpu >= 1] rusage[mem=4096/task]", {"rusage.mem": "profile"}, None),
    ("MERGE-3 all dropped", job("rusage[gpu=0:mem=0]"), "gpu", "select[gpu >= 1]", {}, None),
    ("PROF-4 job duration kept, defaults in own group", job("rusage[mem=8192:duration=10]"), "gpu",
     "select[gpu >= 1] rusage[mem=8192:duration=10, gpu=1/task]", {"rusage.mem": "job"}, None),
    ("PROF-4 defaults into each || alternative", job("rusage[mem=100 || gpu=2]"), "gpu",
     "select[gpu >= 1] rusage[mem=100, gpu=1/task || gpu=2, mem=4096/task]", {}, "below"),
    ("PROF-4 redundant span: warning", job("span[ptile=8]"), "mpi", "span[ptile=8]", {"span": "profile"},
     "span: the job's span[ptile=8] is what the profile already requires"),
    ("PROF-4 span from profile", job(""), "mpi", "span[ptile=8]", {"span": "profile"}, None),
    ("PROF-4 same: union", job("same[model]"), "ordered", "order[-slots] same[type:model]",
     {"same": "profile+job", "order": "profile"}, None),
    ("PROF-4 order: job order when profile has none", job("order[r15s]"), "sel",
     "select[type == X86_64] order[r15s]", {"order": "job"}, None),
    ("PROF-5 compound with select-only profile", job("2*{select[a>1]} + 4*{mem>2}"), "sel",
     "2*{select[type == X86_64 && a > 1]} + 4*{select[type == X86_64 && mem > 2]}", {}, None),
    ("PROF-5 alternative holding compound", job("{2*{a>1} + 1*{b>1}} || {c>1}"), "sel",
     ("{2*{select[type == X86_64 && a > 1]} + 1*{select[type == X86_64 && b > 1]}} || "
     "{select[type == X86_64 && c > 1]}"), {}, None),
    ("PROF-3 rusage entry without default binds: always reserved", job("rusage[mem=10]"), "fixed",
     "rusage[mem=10, lic=2/job]", {"rusage.lic": "profile", "rusage.mem": "job"}, None),
    ("PROF-3 binding rusage repeated: warning", job("rusage[lic=2/job]"), "fixed",
     "rusage[lic=2/job]", {"rusage.lic": "profile"}, "rusage lic: the job's term repeats the profile's 2"),
    ("no profile: job values as they are", job("select[a>1] rusage[x=0:y=2]"), None,
     "select[a > 1] rusage[y=2]", {"select": "job", "rusage.y": "job"}, None),
]


@pytest.mark.parametrize("rule,j,prof,want,origins,warning", RESREQ_ROWS, ids=[r[0] for r in RESREQ_ROWS])
def test_resreq_rows(rule, j, prof, want, origins, warning):
    eff = run(j, prof)
    assert render(eff.resreq) == want
    assert eff.resreq == parse(want)
    for k, v in origins.items():
        assert eff.origins[k] == v
    if warning is None:
        assert not [w for w in eff.warnings if "rusage" in w or "span" in w]
    else:
        assert any(warning in w for w in eff.warnings), eff.warnings


# (rule, job, profile, queue, substrings of the message)
ERROR_ROWS = [
    ("PROF-4 unit mismatch", job("rusage[scratch=10]"), Profile(
        name="scr", rusage=[{"name": "scratch", "value": 100, "unit": "MB", "default": True}]), QUEUE,
     ["scratch", "10", "100 MB", "scr"]),
    ("PROF-3 binding rusage changed", job("rusage[lic=1/job]"), "fixed", QUEUE,
     ["rusage lic: profile fixed fixes 2 per job", "may not change or remove", "`default: true`"]),
    ("PROF-3 binding rusage removed with 0", job("rusage[lic=0]"), "fixed", QUEUE,
     ["rusage lic: profile fixed fixes 2 per job", "the job asked 0 per task"]),
    ("PROF-4 unit mismatch other way", job("rusage[fluent_lic=1MB]"), "fluent", QUEUE,
     ["fluent_lic", "1 MB", "fluent"]),
    ("PROF-4 span conflict", job("span[ptile=4]"), "mpi", QUEUE,
     ["span: the job asks span[ptile=4] but profile mpi requires span[ptile=8]"]),
    ("PROF-4 order conflict", job("order[r15s]"), "ordered", QUEUE, ["order[r15s]", "order[-slots]"]),
    ("PROF-5 compound with rusage profile", job("2*{a>1} + 4*{b>1}"), "gpu", QUEUE,
     ["profile gpu has rusage defaults", "compound and alternative -R are not supported"]),
    ("PROF-5 alternative with span profile", job("{a>1} || {b>1}"), "mpi", QUEUE, ["profile mpi has span"]),
    ("PROF-3 run limit looser", job(n=8, W=7200), "mpi", QUEUE, ["7200", "3600", "mpi"]),
    ("PROF-3 memory limit looser", job(n=8, M=9000), "mpi", QUEUE, ["9000", "8192"]),
    ("PROF-3 -n below range", job(n=1), "mpi", QUEUE, ["-n 1", "2..64"]),
    ("PROF-3 -n above range", job(n=8, nmax=128), "mpi", QUEUE, ["-n 8,128", "2..64"]),
    ("MERGE-2 tasks over ceiling", job(n=8), None, SMALL, ["8", "max_tasks 4"]),
    ("MERGE-2 profile tasks over ceiling", job(), "mpi", QueueConfig(name="q", max_tasks=1),
     ["2 (profile)", "max_tasks 1"]),
    ("MERGE-2 run limit over ceiling", job(W=601), None, SMALL, ["601", "600"]),
    ("MERGE-2 memory over ceiling", job(M=2000), None, SMALL, ["2000", "1000"]),
    ("PROF-6 undeclared param", job(params={"LR": "1"}), "pytorch", QUEUE,
     ["LR", "EPOCHS", "data.dir"]),
    ("PROF-6 param without profile", job(params={"LR": "1"}), None, QUEUE, ["LR", "no profile"]),
    ("PROF-6 param too long", job(params={"EPOCHS": "x" * 5000}), "pytorch", QUEUE, ["EPOCHS", "4096"]),
    ("PROF-9 service profile", job(), "svc", QUEUE, ["svc", "service"]),
    ("MERGE-4 exdata not an object", job(exdata="[1]"), None, QUEUE, ["exdata"]),
]


@pytest.mark.parametrize("rule,j,prof,queue,parts", ERROR_ROWS, ids=[r[0] for r in ERROR_ROWS])
def test_error_rows(rule, j, prof, queue, parts):
    p = PROFILES[prof] if isinstance(prof, str) else prof
    with pytest.raises(MergeError) as ei:
        merge_job(j, p, queue)
    for part in parts:
        assert part in str(ei.value), str(ei.value)


# (rule, job, profile, queue, expected (nmin, nmax, run, mem), origins subset)
LIMIT_ROWS = [
    ("PROF-3 run limit tighter ok", job(n=8, W=1800, M=4096), "mpi", QUEUE, (8, 8, 1800, 4096),
     {"run_limit": "job", "memory_limit": "job", "ntasks": "job"}),
    ("PROF-3 no -n: profile range", job(), "mpi", QUEUE, (2, 64, 3600, 8192),
     {"ntasks": "profile", "run_limit": "profile", "memory_limit": "profile"}),
    ("PROF-3 -n range inside", job(n=4, nmax=16), "mpi", QUEUE, (4, 16, 3600, 8192), {"ntasks": "job"}),
    ("PROF-3 task_min only -> min..min", job(), Profile(name="t", limits={"task_min": 3}), QUEUE,
     (3, 3, None, None), {"ntasks": "profile", "run_limit": "default"}),
    ("JOB-2 queue run limit and memory for a job without them", job(), None, SMALL, (1, 1, 600, 1000),
     {"run_limit": "queue", "ntasks": "default", "memory_limit": "queue"}),
    ("JOB-2 the job's own -M under the queue's", job(M=500), None, SMALL, (1, 1, 600, 500),
     {"memory_limit": "job"}),
    ("MERGE-2 max clamped to queue", job(n=2, nmax=8), None, SMALL, (2, 4, 600, 1000), {}),
    ("no profile", job(n=3, W=100, M=50), None, QUEUE, (3, 3, 100, 50),
     {"ntasks": "job", "run_limit": "job", "memory_limit": "job"}),
]


@pytest.mark.parametrize("rule,j,prof,queue,want,origins", LIMIT_ROWS, ids=[r[0] for r in LIMIT_ROWS])
def test_limit_rows(rule, j, prof, queue, want, origins):
    p = PROFILES[prof] if isinstance(prof, str) else prof
    eff = merge_job(j, p, queue)
    assert (eff.ntasks_min, eff.ntasks_max, eff.run_limit_s, eff.memory_limit_mb) == want
    for k, v in origins.items():
        assert eff.origins[k] == v


def test_params_and_annotations_exported():
    """PROF-6, PROF-7: defaults with the job's overrides; XCE_APP_PARAM_/XCE_APP_ANN_ names."""
    eff = run(job(params={"EPOCHS": "3"}), "pytorch")
    assert eff.app_params == {"EPOCHS": "3", "data.dir": "/data"}
    assert eff.origins["param.EPOCHS"] == "job"
    assert eff.origins["param.data.dir"] == "profile"
    assert eff.export_env == {
        "XCE_APP_PARAM_EPOCHS": "3",
        "XCE_APP_PARAM_DATA_DIR": "/data",
        "XCE_APP_ANN_TEAM_OWNER": "ml",
    }
    assert eff.exdata["app_params"] == {"EPOCHS": "3", "data.dir": "/data"}


def test_env_kept_apart_with_warning():
    """PROF-10: two envs; a job name the profile also sets is warned about."""
    eff = run(job(env={"OMP_NUM_THREADS": "16", "MINE": "x"}), "pytorch")
    assert eff.job_env == {"OMP_NUM_THREADS": "16", "MINE": "x"}
    assert eff.profile_env == {"OMP_NUM_THREADS": "4", "PYTHONUNBUFFERED": "1"}
    assert [w for w in eff.warnings if w.startswith("env ")] == [
        ("env OMP_NUM_THREADS: the job's value '16' is overridden by profile pytorch's '4' "
        "(the profile env wins)")
    ]


def test_exdata_meta_kept_and_rewritten():
    """MERGE-4: meta is the very same object; env/limits/app_params rewritten; unknown keys out."""
    meta = {"z": [1, {"b": 2, "a": 1}], "a": "é"}
    before = json.dumps(meta)
    given = {"meta": meta, "limits": {"run_limit_s": 99999}, "junk": 1}
    eff = run(job(n=4, W=100, env={"A": "1"}, exdata=given), "mpi")
    assert eff.exdata["meta"] is meta
    assert json.dumps(eff.exdata["meta"]) == before
    assert eff.exdata["limits"] == {"ntasks_min": 4, "ntasks_max": 4, "run_limit_s": 100, "memory_limit_mb": 8192}
    assert eff.exdata["env"] == {"job": {"A": "1"}, "profile": {}}
    assert "junk" not in eff.exdata
    assert any("junk" in w for w in eff.warnings)
    assert given == {"meta": meta, "limits": {"run_limit_s": 99999}, "junk": 1}  # input untouched


def test_exdata_limits_env_or_app_params_a_client_gave_are_replaced_saying_so():
    """MERGE-4 (a fresh tester's find: they were dropped silently): exdata's env, limits and
    app_params are the merge's record; where a client's own says otherwise the job gets a
    warning naming the keys and the fields that set them. An echo of the record passes."""
    eff = run(job(n=4, W=100, env={"A": "1"}, exdata={"limits": {"run_limit_s": 120}, "env": {"ZZ": "1"}}), "mpi")
    (w,) = [w for w in eff.warnings if w.startswith("exdata")]
    assert w == ("exdata: 'env', 'limits' replaced by the merge's record of the job's effective values (MERGE-4): "
                 "set them with the submit's own fields (--env, -n, -W, -M, --app-param), not in exdata; only "
                 "'meta' is kept as given")
    echo = {k: eff.exdata[k] for k in ("env", "limits", "app_params")}
    part = {"limits": {"run_limit_s": 100}, "env": {"job": {"A": "1"}}, "app_params": {}}  # a part that agrees
    for agreeing in (echo, part):
        again = run(job(n=4, W=100, env={"A": "1"}, exdata=agreeing), "mpi")
        assert not [w for w in again.warnings if w.startswith("exdata")], agreeing
    other = run(job(n=4, W=100, env={"A": "1"}, exdata={"limits": {"run_limit_s": 100, "nodes": 2}}), "mpi")
    assert [w for w in other.warnings if w.startswith("exdata: 'limits' replaced")]  # a key the record lacks


def test_many_unknown_exdata_keys_make_one_short_warning():
    """D-8: the warnings are stored with the job and shown by --dry-run: thousands of unknown
    exdata keys give one warning naming the first five and counting the rest."""
    eff = run(job(exdata={f"k{i}": i for i in range(2000)}), None)
    (w,) = [w for w in eff.warnings if w.startswith("exdata")]
    assert w == ("exdata: unknown keys 'k0', 'k1', 'k2', 'k3', 'k4' and 1995 more left out "
                 "(known: env, limits, app_params, meta)")


def test_exdata_none_and_json_text():
    assert "meta" not in run(job(), None).exdata
    eff = run(job(exdata='{"meta": {"k": [1, 2]}}'), None)
    assert eff.exdata["meta"] == {"k": [1, 2]}


def test_no_profile_defaults_and_to_json():
    """MERGE-1: no profile -> the job's values; to_json is plain JSON with origins."""
    eff = run(job("rusage[mem=100]", env={"A": "1"}), None)
    assert eff.warnings == []
    assert (eff.ntasks_min, eff.ntasks_max, eff.run_limit_s, eff.memory_limit_mb) == (1, 1, None, None)
    out = eff.to_json()
    json.dumps(out)
    assert out["resreq"]["rusage"][0][0]["name"] == "mem"
    assert out["origins"]["rusage.mem"] == "job"
    assert set(out) >= {"resreq", "ntasks_min", "ntasks_max", "run_limit_s", "memory_limit_mb",
                        "origins", "warnings", "app_params", "profile_env", "exdata"}


def test_job_values_not_changed():
    """MERGE-1: the job keeps its own values."""
    j = job("rusage[gpu=0]", params={"EPOCHS": "3"})
    before = (j.resreq, dict(j.app_params))
    run(j, "pytorch")
    j = job("span[ptile=8] rusage[gpu=0]")
    before = (j.resreq, dict(j.app_params))
    run(j, "gpu")
    assert (j.resreq, dict(j.app_params)) == before


# --------------------------------------------------------------------------- rusage[mem] and the memory limit
# MERGE-2 (issue 15): a reservation whose job total is over the job's memory limit is refused,
# naming both; -M is the whole job's limit (LSB_JOB_MEMLIMIT=y), rusage per task by default
# (RESOURCE_RESERVE_PER_TASK=y), per host at least once, per job once.

# (rule, job, profile, queue, the whole message or its parts)
RUSAGE_OVER_LIMIT_ROWS = [
    ("one task", job("rusage[mem=8000]", M=4096), None, QUEUE,
     ["rusage[mem=8000] reserves 8000 MB per task, more than the job's memory limit -M 4096 MB: ",
      "lower one or raise the other"]),
    ("per task times the tasks", job("rusage[mem=1000]", n=4, M=3000), None, QUEUE,
     ["rusage[mem=1000] reserves 1000 MB per task x 4 tasks = 4000 MB, more than the job's memory limit "
      "-M 3000 MB"]),
    ("per host counted once at least", job("rusage[mem=5000/host]", n=4, M=4096), None, QUEUE,
     ["rusage[mem=5000/host] reserves 5000 MB per host, more than the job's memory limit -M 4096 MB"]),
    ("per host times the hosts a ptile gives", job("rusage[mem=1500/host] span[ptile=2]", n=6, M=4096), None, QUEUE,
     ["rusage[mem=1500/host] reserves 1500 MB per host x 3 hosts = 4500 MB"]),
    ("the queue's max_memory as the limit", job("rusage[mem=2000]"), None, SMALL,
     ["reserves 2000 MB per task, more than the job's memory limit 1000 MB (queue small's max_memory, "
      "the limit of a job that gives no -M)"]),
    ("the profile's limit", job("rusage[mem=3000]", n=4), "mpi", QUEUE,
     ["3000 MB per task x 4 tasks = 12000 MB", "memory limit 8192 MB (profile mpi's memory limit)"]),
    ("the profile's default rusage", job(M=2048), "gpu", QUEUE,
     ["profile gpu's rusage[mem=4096] reserves 4096 MB per task, more than the job's memory limit -M 2048 MB"]),
    ("every || alternative over it", job("rusage[mem=5000 || mem=9000]", M=4096), None, QUEUE,
     ["rusage[mem=5000] (rusage alternative 1 of 2) reserves 5000 MB per task"]),
    ("a compound request's parts together", job("2*{rusage[mem=1000]} + 3*{rusage[mem=1000]}", M=4096), None,
     QUEUE, ["the compound request's rusage[mem] terms reserve 1000 MB per task x 2 tasks + 1000 MB per task x 3 tasks = 5000 MB"]),
]


@pytest.mark.parametrize("rule,j,prof,queue,parts", RUSAGE_OVER_LIMIT_ROWS, ids=[r[0] for r in RUSAGE_OVER_LIMIT_ROWS])
def test_rusage_mem_over_the_memory_limit_is_refused(rule, j, prof, queue, parts):
    test_error_rows(rule, j, prof, queue, parts)  # the same check as every refused merge


# (rule, job, profile, queue)
RUSAGE_WITHIN_LIMIT_ROWS = [
    ("equal is fine", job("rusage[mem=4096]", M=4096), None, QUEUE),
    ("per job once, not per task", job("rusage[mem=3000/job]", n=8, M=3000), None, QUEUE),
    ("per task within", job("rusage[mem=1000]", n=4, M=4000), None, QUEUE),
    ("no limit: nothing to compare", job("rusage[mem=99999]", n=4), None, QUEUE),
    ("mem=0 reserves nothing (MERGE-3)", job("rusage[mem=0]", M=1), None, QUEUE),
    ("another resource is not memory", job("rusage[gpu=8]", M=1), None, QUEUE),
    ("the job lowers the profile default", job("rusage[mem=2048]", M=2048), "gpu", QUEUE),
]


@pytest.mark.parametrize("rule,j,prof,queue", RUSAGE_WITHIN_LIMIT_ROWS, ids=[r[0] for r in RUSAGE_WITHIN_LIMIT_ROWS])
def test_rusage_mem_within_the_memory_limit_is_taken(rule, j, prof, queue):
    p = PROFILES[prof] if isinstance(prof, str) else prof
    eff = merge_job(j, p, queue)
    assert not any(w.startswith("rusage mem: placed with") for w in eff.warnings)


def test_a_task_range_over_the_limit_only_at_its_max_is_a_warning():
    """Refused only when the fewest tasks already reserve more than the limit; a MAX that
    would is a warning naming the range that keeps within it."""
    eff = run(job("rusage[mem=1000]", n=2, nmax=8, M=3000), None)
    assert (eff.ntasks_min, eff.ntasks_max) == (2, 8)
    assert ("rusage mem: placed with 8 tasks (-n 2,8) the job would reserve 8000 MB, more than its memory "
            "limit -M 3000 MB; at most 3 tasks keep within it (-n 2,3)") in eff.warnings
    with pytest.raises(MergeError, match="x 4 tasks = 4000 MB"):
        run(job("rusage[mem=1000]", n=4, nmax=8, M=3000), None)


def test_a_job_own_memory_limit_over_the_largest_host_is_refused():
    """MERGE-2 (issue 15; Slurm refuses a --mem no node has): the job's own -M over the
    largest host's memory names the limit, the host and its memory."""
    from xced.merge import memory_over_hosts

    hosts = [("small", 4096), ("big", 16384), ("mid", 8192)]
    assert memory_over_hosts(40960, "job", hosts) == (
        "memory limit -M 40960 MB is more than any host could ever give: the largest host, big, has 16384 MB; "
        "give -M 16384 MB or less")
    assert memory_over_hosts(16384, "job", hosts) is None
    assert memory_over_hosts(None, "default", hosts) is None
    # a limit the job did not give is the admin's: never refused for the hosts
    assert memory_over_hosts(40960, "queue", hosts) is None
    assert memory_over_hosts(40960, "profile", hosts) is None
    assert memory_over_hosts(40960, "job", []) is None  # no host known: the slots check speaks


def test_an_rusage_alternative_over_the_limit_is_a_warning_when_another_fits():
    """Of `||` alternatives one that keeps within -M lets the job run (LSF tries them in order);
    the other is named in a warning, never refused (the tester's `mem=3000 || mem=1000`)."""
    eff = merge_job(job("rusage[mem=100 || mem=9000]", M=4096), None, QUEUE)
    assert any("rusage[mem=9000] (rusage alternative 2 of 2) reserves 9000 MB per task, more than the job's memory "
               "limit -M 4096 MB: that alternative can never be used" in w for w in eff.warnings), eff.warnings

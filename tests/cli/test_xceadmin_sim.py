"""`xceadmin sim run` through the real console script (SIM-1, CLI-1 exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_xceadmin import run
from tests.conftest import DATA

pytestmark = pytest.mark.timeout(120)

KTH = DATA / "KTH-SP2-1996-2.1-cln.swf.gz"

SMALL = """\
; MaxProcs: 10
; a hand-made trace: job 1 fills 8 of 10 processors; job 3 backfills beside it
    1    0  -1  100  8  -1 -1  8  100  -1 1 1 1 -1 -1 -1 -1 -1
    2    1  -1  100 10  -1 -1 10  100  -1 1 1 1 -1 -1 -1 -1 -1
    3    1  -1   50  2  -1 -1  2   50  -1 1 1 1 -1 -1 -1 -1 -1
    4    2  -1   10  2  -1 -1 -1  500  -1 1 1 1 -1 -1 -1 -1 -1
    5    3  -1   -1  2  -1 -1  2  500  -1 1 1 1 -1 -1 -1 -1 -1
"""


def test_sim_run_table_json_and_plot(tmp_path: Path) -> None:
    swf = tmp_path / "small.swf"
    swf.write_text(SMALL)
    r = run("sim", "run", "--swf", str(swf), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "average bounded slowdown (tau 10 s)" in r.stdout
    assert "4 of 5 (dropped: 1 no run time)" in r.stdout
    r = run("sim", "run", "--swf", str(swf), "--json", "--plot", str(tmp_path / "s.png"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["jobs"], out["procs"], out["dropped"]) == (4, 10, {"no run time": 1})
    # by hand: waits 0, 99 (job 2 starts at 100), 0 (job 3 backfills at 1), 198 (job 4 at 200)
    assert out["metrics"]["avg_wait_s"] == pytest.approx((0 + 99 + 0 + 198) / 4)
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fcfs = json.loads(run("sim", "run", "--swf", str(swf), "--json", "--policy", "fcfs", cwd=tmp_path).stdout)
    assert fcfs["metrics"]["avg_wait_s"] == pytest.approx((0 + 99 + 199 + 198) / 4)


def test_sim_run_on_a_real_trace_reports_what_the_simulator_computes(tmp_path: Path) -> None:
    """The console script on the first 3,000 jobs of KTH-SP2 gives the in-process simulator's
    figures (the published whole-trace result is checked once, in tests/unit/test_sim.py)."""
    import gzip

    from xced.sim.engine import simulate
    from xced.sim.metrics import compute_metrics
    from xced.sim.swf import read_swf

    lines = gzip.open(KTH, "rt").read().splitlines()
    header = [ln for ln in lines if ln.startswith(";")]
    records = [ln for ln in lines if ln.strip() and not ln.startswith(";")][:3000]
    part = tmp_path / "kth-3000.swf"
    part.write_text("\n".join(header + records) + "\n")
    out = json.loads(run("sim", "run", "--swf", str(part), "--json", cwd=tmp_path).stdout)
    trace = read_swf(part)
    want = compute_metrics(simulate(trace.jobs, trace.machine_procs, "easy").outcomes, trace.machine_procs)
    assert out["jobs"] == want.jobs == len(trace.jobs) and out["procs"] == 100
    assert out["metrics"]["avg_bounded_slowdown"] == pytest.approx(want.avg_bounded_slowdown)
    assert out["metrics"]["avg_flow_s"] == pytest.approx(want.avg_flow_s)


@pytest.mark.parametrize("text,args,expect", [
    ("; MaxProcs: 10\n1 0 -1 100 8 -1 -1 8 100 -1 1 1\n", [], "small.swf:2: "),
    ("; MaxProcs: 10\n1 0 -1 1x0 8 -1 -1 8 100 -1 1 1 1 -1 -1 -1 -1 -1\n", [], "small.swf:2"),
    ("1 0 -1 100 8 -1 -1 8 100 -1 1 1 1 -1 -1 -1 -1 -1\n", [], "give --procs N"),
    ("; MaxProcs: 10\n", [], "small.swf"),
    (SMALL, ["--plot", "/nonexistent/x.png"], "is not a writable directory"),
])
def test_sim_run_bad_input_is_one_clear_line(tmp_path: Path, text: str, args: list[str], expect: str) -> None:
    swf = tmp_path / "small.swf"
    swf.write_text(text)
    r = run("sim", "run", "--swf", str(swf), *args, cwd=tmp_path)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert expect in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_sim_run_lublin_needs_run_time_estimates(tmp_path: Path) -> None:
    lublin = DATA / "lublin_256.swf.gz"
    r = run("sim", "run", "--swf", str(lublin), cwd=tmp_path)
    assert r.returncode == 1 and "--no-estimate run-time" in r.stderr
    r = run("sim", "run", "--swf", str(lublin), "--no-estimate", "run-time", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jobs"] == 10_000


def test_sim_run_missing_file_and_usage(tmp_path: Path) -> None:
    r = run("sim", "run", "--swf", str(tmp_path / "nope.swf"), cwd=tmp_path)
    assert r.returncode == 1 and "nope.swf" in r.stderr and "Traceback" not in r.stderr
    r = run("sim", "run", cwd=tmp_path)
    assert r.returncode == 2 and "--swf" in r.stderr
    r = run("sim", "run", "--swf", "x", "--procs", "0", cwd=tmp_path)
    assert r.returncode == 2
    for bad in (["--policy", "sjf"], ["--plot", "out.txt"], ["--no-estimate", "guess"]):
        r = run("sim", "run", "--swf", "x", *bad, cwd=tmp_path)
        assert r.returncode == 2 and bad[0] in r.stderr, (bad, r.stderr)
    r = run("sim", "run", "--swf", str(tmp_path / "nope.swf"), "--policy", "EASY", cwd=tmp_path)
    assert r.returncode == 1 and "nope.swf" in r.stderr  # EASY is easy: the policy passed
    r = run("sim", "record", cwd=tmp_path)
    assert r.returncode == 2 and "--name NAME" in r.stderr


def test_sim_run_with_a_projects_file_shows_waits_by_project(tmp_path: Path) -> None:
    """PRJ-6, PRJ-7: SWF group G is project /g<G>. SMALL has one group (1); with a share of 80%
    its 10-processor job 2 could never start (refused, as at submit) and the rest replay under
    the 8 processors; the table and the JSON give the waits per project beside the same jobs'
    waits without the caps."""
    swf = tmp_path / "small.swf"
    swf.write_text(SMALL)
    proj = tmp_path / "projects.yaml"
    proj.write_text("projects:\n  /g1:\n    share: 80%\n")
    r = run("sim", "run", "--swf", str(swf), "--projects", str(proj), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)["projects"]
    assert out["refused"] == 1 and out["refused_example"] == (
        "job 2: The job needs 10 slots and can never start in project /g1: project /g1's share of the whole "
        "cluster is 8 slots")
    (row,) = out["by_project"]
    assert (row["project"], row["share"], row["jobs"]) == ("/g1", "80%", 3)
    # under a share of 8, jobs 3 and 4 (2 processors each) wait for job 1 (8) to end at 100;
    # without it job 3 starts beside it at 1 and job 4 when job 3 ends at 51
    assert row["avg_wait_s"] == pytest.approx((0 + 99 + 98) / 3)
    assert row["uncapped"]["avg_wait_s"] == pytest.approx((0 + 0 + 49) / 3)
    r = run("sim", "run", "--swf", str(swf), "--projects", str(proj), cwd=tmp_path)
    assert r.returncode == 0 and "waits by project" in r.stdout and "/g1" in r.stdout


@pytest.mark.parametrize("text,expect", [  # the daemon's compiler's messages (xced.config.projects)
    ("projects:\n  /g1:\n    share: 120%\n", "my-projects.yaml:3:12: error: project /g1: share"),
    ("projects:\n  /g1:\n    shares: 10%\n", 'my-projects.yaml:3:5: error: unknown key "shares" in project /g1'),
    ("projects:\n  g1:\n    share: 10%\n", "my-projects.yaml:2:3: error: a project path must start with '/'"),
    ("projects:\n  /g1:\n    quota: {slots: -4}\n", "my-projects.yaml:3:20: error: project /g1: quota.slots"),
    ("project:\n  /g1: {}\n", 'my-projects.yaml:1:1: error: unknown key "project"'),
    ("projects: [\n", "my-projects.yaml:2:1: error: invalid YAML"),
])
def test_sim_run_bad_projects_file_is_one_clear_line(tmp_path: Path, text: str, expect: str) -> None:
    swf = tmp_path / "small.swf"
    swf.write_text(SMALL)
    (tmp_path / "my-projects.yaml").write_text(text)
    r = run("sim", "run", "--swf", str(swf), "--projects", str(tmp_path / "my-projects.yaml"), cwd=tmp_path)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert expect in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr

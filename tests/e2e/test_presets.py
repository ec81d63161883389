"""Presets end to end with a real xced (PRE-1 to PRE-5, MERGE-1, MERGE-4, RBAC-4).

The daemon serves the server presets of its TopDir's config/presets/; each test's user
has its own config dir (XDG_CONFIG_HOME), so local presets never mix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import XCEADMIN, Daemon, write_config
from xced.api.client import Client
from xced.api.errors import NotFound
from xced.api.models import JobOut, PresetList, PresetOut
from xced.api.submit_options import preset_hash

pytestmark = pytest.mark.timeout(120)

APPS = textwrap.dedent("""\
    applications:
      pytorch:
        run_limit: "2:00"
        params: {EPOCHS: "10"}
        env: {OMP_NUM_THREADS: "4"}
    """)


@pytest.fixture
def cluster(topdir, tmp_path):
    """A test-mode xced with a profile `pytorch`, a queue `short` and a server preset
    `site-default`; yields (daemon, run) where run(*args, home=...) runs xcecli with that
    user's own config dir."""
    write_config(topdir, extra_queues="  - name: short\n    priority: 40\n")
    (topdir / "config" / "applications.yaml").write_text(APPS)
    pdir = topdir / "config" / "presets"
    pdir.mkdir()
    (pdir / "site-default.yaml").write_text('queue: "short"\nrun_limit: "30"\n')
    d = Daemon(topdir).start()

    def run(*args: str, home: Path = tmp_path / "home", input: str | None = None, user: str | None = None):
        env = {**os.environ, "XCE_TOPDIR": str(topdir), "XDG_CONFIG_HOME": str(home)}
        env.pop("XCE_SOCKET", None)
        if user:
            env["XCE_TEST_USER"] = user
        return subprocess.run([str(Path(sys.executable).parent / "xcecli"), *args], capture_output=True, text=True,
                              env=env, timeout=60, cwd=str(tmp_path), input=input)

    try:
        yield d, run
    finally:
        d.stop()


def _ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, f"rc {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r


def test_a_preset_submitted_job_carries_its_meta_untouched(cluster):
    """PRE-2, MERGE-4: the client writes {"preset": {name, hash}} under exdata's meta; show
    --json and jobs --json return it as sent; `show` prints it. A meta of any shape sent
    through the API comes back the same, and is no business of the worker."""
    d, run = cluster
    _ok(run("presets", "create", "quick", "-q", "short", "-W", "5", "-J", "from-preset"))
    h = json.loads(_ok(run("presets", "show", "quick", "--json")).stdout)["hash"]
    jid = int(_ok(run("submit", "--parsable", "--preset", "quick", "--", "true")).stdout)
    shown = json.loads(_ok(run("show", str(jid), "--json")).stdout)
    assert shown["meta"] == {"preset": {"name": "quick", "hash": h}}
    assert shown["queue"] == "short" and shown["run_limit_s"] == 300 and shown["name"] == "from-preset"
    listed = json.loads(_ok(run("jobs", "--json", "-a")).stdout)["jobs"]
    assert [j["meta"] for j in listed if j["job_id"] == jid] == [{"preset": {"name": "quick", "hash": h}}]
    assert f"Preset:       quick ({h})" in _ok(run("show", str(jid))).stdout
    meta = {"preset": {"name": "x", "hash": "sha256:1"}, "pipeline": {"step": [1, 2, {"k": None}]}, "n": 1.5}
    with Client.connect(topdir=str(d.top)) as c:
        other = c.request("POST", "/jobs", json={"argv": ["true"], "cwd": "/tmp", "exdata": {"meta": meta}}).json()
        j = JobOut.model_validate(c.request("GET", f"/jobs/{other['job_id']}").json())
        assert j.meta == meta
    assert d.wait_state(other["job_id"], ("DONE", "EXIT"))["state"] == "DONE"  # the worker ignores meta
    assert d.wait_state(jid, ("DONE", "EXIT"))["state"] == "DONE"


def test_the_command_line_wins_over_the_preset_and_dry_run_says_where_each_value_came_from(cluster):
    """PRE-1: -q on the command line beats the preset's; -R terms add; --env merges by name.
    MERGE-1: the dry run shows which values came from the preset, and a preset value equal to
    the profile's is a "redundant value" warning."""
    d, run = cluster
    _ok(run("presets", "create", "gpu", "-q", "short", "-n", "2", "-R", "rusage[mem=10]", "-W", "2:00", "-a", "pytorch",
            "--app-param", "EPOCHS=10", "--env", "A=1", "--env", "B=2"))
    r = _ok(run("submit", "--dry-run", "--preset", "gpu", "-q", "normal", "-R", "span[hosts=1]", "--env", "B=3",
                "--", "true"))
    lines = {line.split(":")[0]: line for line in r.stdout.splitlines()}
    assert lines["queue"].split()[1:] == ["normal", "(command", "line)"]
    assert lines["ntasks_min"].split()[1:] == ["2", "(preset", "gpu)"]
    assert lines["run_limit_s"].split()[1:] == ["7200", "(preset", "gpu)"]
    assert "(preset gpu + command line" in lines["resreq_text"] and "rusage[mem=10]" in lines["resreq_text"] \
        and "span[hosts=1]" in lines["resreq_text"]
    assert lines["app"].split()[1:] == ["pytorch", "(preset", "gpu)"]
    assert "redundant value: preset gpu sets run_limit to 7200 s, which profile pytorch already sets" in r.stderr
    assert "redundant value: preset gpu sets app_params to EPOCHS=10, which profile pytorch already sets" in r.stderr
    out = json.loads(_ok(run("submit", "--dry-run", "--json", "--preset", "gpu", "-q", "normal", "--", "true")).stdout)
    assert out["sources"]["queue"] == "command line" and out["sources"]["ntasks"] == "preset"
    assert out["effective"]["profile"]["run_limit_s"] == 7200
    assert any(w.startswith("redundant value: preset gpu sets run_limit") for w in out["warnings"])
    jid = int(_ok(run("submit", "--parsable", "--preset", "gpu", "-q", "normal", "--env", "B=3", "--",
                      "sh", "-c", "echo $A$B")).stdout)
    j = d.wait_state(jid, ("DONE", "EXIT"))
    assert j["queue"] == "normal" and j["ntasks_min"] == 2 and j["resreq_requested"] == ["rusage[mem=10]"]
    assert d.cli("peek", str(jid), check=True).stdout.strip() == "13"


def test_server_presets_are_served_and_an_edit_is_seen_without_a_restart(cluster):
    """PRE-3: GET /presets and /presets/{name} need no permission (any test-mode user); a
    file edited on disk is served changed at once; an invalid file is left out with a
    warning in the daemon's log, and `xceadmin build` reports it with file:line:col."""
    d, run = cluster
    pdir = d.top / "config" / "presets"
    with Client.connect(topdir=str(d.top), as_user="nobody-in-particular") as c:
        got = PresetList.model_validate(c.request("GET", "/presets").json())
        assert [(p.name, p.values) for p in got.presets] == [("site-default", {"queue": "short", "run_limit": "30"})]
        assert got.presets[0].hash == preset_hash({"queue": "short", "run_limit": "30"})
        (pdir / "site-default.yaml").write_text('queue: "normal"\nrun_limit: "30"\nenv: {X: "1"}\n')
        one = PresetOut.model_validate(c.request("GET", "/presets/site-default").json())
        assert one.values == {"queue": "normal", "run_limit": "30", "env": {"X": "1"}}
        (pdir / "broken.yaml").write_text('queue: normal\nntasks: "0"\n')
        (pdir / "aaa.yaml").write_text("queue: [1\n")
        names = [p["name"] for p in c.request("GET", "/presets").json()["presets"]]
        assert names == ["site-default"]
        with pytest.raises(NotFound, match="no server preset 'broken'"):
            c.request("GET", "/presets/broken")
    r = run("presets", "show", "--server", "broken")
    assert r.returncode == 1 and "no server preset 'broken'; the server's presets: site-default" in r.stderr
    deadline = time.monotonic() + 10
    while "broken.yaml:2:9: error: preset broken: ntasks: -n 0" not in d.log.read_text():
        assert time.monotonic() < deadline, d.log.read_text()[-2000:]
        time.sleep(0.05)
    b = subprocess.run([XCEADMIN, "build", "--topdir", str(d.top)], capture_output=True, text=True, timeout=60)
    # warnings, not errors: a bad preset is left out by the daemon and stops no config
    assert b.returncode == 0 and "config OK" in b.stdout and "1 server preset," in b.stdout
    assert f"{pdir / 'aaa.yaml'}:2:1: warning: not served: invalid YAML" in b.stderr
    assert f"{pdir / 'broken.yaml'}:2:9: warning: not served: preset broken: ntasks: -n 0" in b.stderr
    (pdir / "broken.yaml").unlink()
    (pdir / "aaa.yaml").unlink()
    b = subprocess.run([XCEADMIN, "build", "--topdir", str(d.top)], capture_output=True, text=True, timeout=60)
    assert b.returncode == 0 and "1 server preset" in b.stdout, b.stderr


def test_a_pulled_preset_hashes_as_its_server_original_and_report_flags_a_change(cluster, tmp_path):
    """PRE-4: the pulled copy's hash is the server's; PRE-5: report groups the user's jobs by
    preset and marks changed the jobs whose preset has changed since they were submitted."""
    d, run = cluster
    server = json.loads(_ok(run("presets", "show", "--server", "site-default", "--json")).stdout)
    _ok(run("presets", "pull", "site-default"))
    local = json.loads(_ok(run("presets", "show", "site-default", "--json")).stdout)
    assert local["hash"] == server["hash"] and local["origin"] == {"server": "testcluster", "name": "site-default",
                                                                   "hash": server["hash"]}
    first = int(_ok(run("submit", "--parsable", "--preset", "site-default", "--", "true")).stdout)
    _ok(run("presets", "create", "other", "-q", "normal"))
    third = int(_ok(run("submit", "--parsable", "--preset", "other", "--", "true")).stdout)
    (d.top / "config" / "presets" / "site-default.yaml").write_text('queue: "short"\nrun_limit: "20"\n')
    r = _ok(run("presets", "pull", "site-default"))
    assert "updated from server preset site-default of testcluster" in r.stderr
    second = int(_ok(run("submit", "--parsable", "--preset", "site-default", "--", "true")).stdout)
    plain = int(_ok(run("submit", "--parsable", "--", "true")).stdout)
    for j in (first, second, third, plain):
        d.wait_state(j, ("DONE", "EXIT"))
    rep = json.loads(_ok(run("presets", "report", "--json")).stdout)["presets"]
    by = {g["name"]: g for g in rep}
    assert set(by) == {"site-default", "other"}  # the job without a preset is in no group
    assert by["site-default"]["counts"] == {"DONE": 2} and by["site-default"]["changed"] == 1
    assert [(x["job_id"], x["changed"]) for x in by["site-default"]["jobs"]] in (
        [(first, True), (second, False)], [(second, False), (first, True)])
    assert by["other"]["changed"] == 0
    text = _ok(run("presets", "report")).stdout
    assert f"changed: {first}" in text and "site-default" in text
    # a deleted preset: its jobs are still grouped, and say so
    _ok(run("presets", "rm", "other"))
    assert "preset deleted" in _ok(run("presets", "report")).stdout
    # another user's jobs are not in my report
    other_home = tmp_path / "other-home"
    _ok(run("presets", "create", "theirs", "-q", "normal", home=other_home, user="someone-else"))
    _ok(run("submit", "--preset", "theirs", "--", "true", home=other_home, user="someone-else"))
    assert "theirs" not in _ok(run("presets", "report")).stdout


def test_a_refusal_of_a_preset_value_names_the_preset_and_odd_names_get_a_clean_404(cluster, tmp_path):
    """The user never typed a value the preset gave: a refusal of it says where it came from.
    A name no preset could have, even one that is not ASCII, is a plain 404 (D-2)."""
    d, run = cluster
    _ok(run("presets", "create", "wrong", "-q", "nosuch"))
    r = run("submit", "--preset", "wrong", "--", "true")
    assert r.returncode == 1 and "nosuch" in r.stderr and "(the queue value came from preset wrong)" in r.stderr
    r = run("submit", "--preset", "wrong", "-q", "normal", "--dry-run", "--", "true")
    assert r.returncode == 0, r.stderr  # the command line's -q wins
    r = run("api", "GET", "/xce/v1/presets/ü")
    assert r.returncode == 1 and "no server preset 'ü'" in r.stderr and "Traceback" not in r.stderr
    # report: a preset made invalid by hand is said to be, not "deleted"
    jid = int(_ok(run("submit", "--parsable", "--preset", "wrong", "-q", "normal", "--", "true")).stdout)
    d.wait_state(jid, ("DONE", "EXIT"))
    (tmp_path / "home" / "xce" / "presets" / "wrong.yaml").write_text('ntasks: "0"\n')
    assert "(the local preset is not valid now)" in _ok(run("presets", "report")).stdout
    assert json.loads(_ok(run("presets", "report", "--json")).stdout)["presets"][0]["preset"] == "not valid"


def test_build_warns_of_a_server_preset_naming_what_the_config_lacks(cluster):
    d, _ = cluster
    (d.top / "config" / "presets" / "gpu.yaml").write_text('queue: "gpu"\napp: "nosuchapp"\n')
    b = subprocess.run([XCEADMIN, "build", "--topdir", str(d.top)], capture_output=True, text=True, timeout=60)
    assert b.returncode == 0, b.stderr
    assert "preset gpu: queue 'gpu' is no queue of this config, so a job submitted with it would be refused" in b.stderr
    assert "preset gpu: app 'nosuchapp' is no application profile of this config" in b.stderr


def test_the_daemon_serves_no_symlinked_preset_and_nothing_from_a_directory_others_may_write(cluster, tmp_path):
    """D-7, against a real daemon: a symlink in the presets directory (to a private file) is
    never followed; a presets directory others may write serves nothing, with a log line."""
    d, run = cluster
    pdir = d.top / "config" / "presets"
    secret = tmp_path / "private.yaml"
    secret.write_text('env: {TOKEN: "s3cr3t-preset"}\n')
    secret.chmod(0o600)
    (pdir / "steal.yaml").symlink_to(secret)
    with Client.connect(topdir=str(d.top)) as c:
        names = [p["name"] for p in c.request("GET", "/presets").json()["presets"]]
        assert names == ["site-default"]
        with pytest.raises(NotFound):
            c.request("GET", "/presets/steal")
        os.chmod(pdir, 0o777)
        try:
            assert c.request("GET", "/presets").json()["presets"] == []
        finally:
            os.chmod(pdir, 0o755)
        assert [p["name"] for p in c.request("GET", "/presets").json()["presets"]] == ["site-default"]
    log = d.log.read_text()
    assert "is a symlink" in log and "is writable by group or others" in log and "s3cr3t-preset" not in log


def test_server_presets_are_not_served_over_tcp(topdir):
    """D-2, D-7: the preset routes need no permission, but like every user request they are
    taken on the Unix socket, and over TCP only from a peer that authenticated with its key
    (KEY-3): an anonymous TCP request is 401, and learns nothing."""
    import http.client

    write_config(topdir)
    with open(topdir / "config" / "xce.yaml", "a") as f:
        f.write("listen: {host: 127.0.0.1, port: 0}\n")
    (topdir / "config" / "presets").mkdir()
    (topdir / "config" / "presets" / "gpu.yaml").write_text('env: {TOKEN: "site-secret"}\n')
    d = Daemon(topdir).start()
    try:
        port = int((topdir / "run" / "xced.port").read_text())
        for path in ("/xce/v1/presets", "/xce/v1/presets/gpu"):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read().decode()
            conn.close()
            assert resp.status == 401 and "site-secret" not in body and "over TCP" in body, (path, body)
        with Client.connect(topdir=str(topdir)) as c:  # the Unix socket serves them
            assert [p["name"] for p in c.request("GET", "/presets").json()["presets"]] == ["gpu"]
    finally:
        d.stop()


def test_show_of_a_name_only_the_server_has_points_at_the_server_preset(cluster):
    d, run = cluster
    r = run("presets", "show", "site-default")
    assert r.returncode == 1 and "no local preset 'site-default'" in r.stderr
    assert "a server preset site-default exists: `xcecli presets show --server site-default`" in r.stderr
    r = run("presets", "show", "nowhere")
    assert r.returncode == 1 and "a server preset nowhere exists" not in r.stderr

"""CFG-3: `xceadmin build --apply` swaps the running daemon's config whole or refuses it
whole, and pending jobs run with the new profiles; a restart re-merges them too."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from tests.conftest import XCEADMIN, Daemon, write_config

pytestmark = pytest.mark.timeout(120)

APPS = textwrap.dedent("""\
    applications:
      pytorch:
        env: {OMP_NUM_THREADS: "%s"}
    """)


def admin(topdir, *args: str, user: str = "admin") -> subprocess.CompletedProcess:
    env = {**os.environ, "XCE_TEST_USER": user}
    env.pop("XCE_SOCKET", None)
    return subprocess.run([XCEADMIN, "build", "--topdir", str(topdir), *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_apply_changed_profile_reaches_pending_job(topdir, tmp_path):
    write_config(topdir, slots=2)
    apps = topdir / "config" / "applications.yaml"
    apps.write_text(APPS % "4")
    d = Daemon(topdir).start()
    try:
        filler = d.submit("-n", "2", "--", "sleep", "60")
        d.wait_state(filler, ("RUN",))
        jid = d.submit("-a", "pytorch", "-o", "omp.txt", "--", "sh", "-c", "echo $OMP_NUM_THREADS", cwd=tmp_path)
        held = d.submit("-a", "pytorch", "-R", "rusage[mem=100]", "--", "true", cwd=tmp_path)
        apps.write_text(APPS % "16" + "      # a binding rusage entry the second job's own term contradicts\n"
                        "    resreq: {rusage: [{mem: 200MB}]}\n")
        r = admin(topdir, "--apply", user="someone")
        assert r.returncode == 1 and "someone is not a cluster admin" in r.stderr, r.stderr
        r = admin(topdir, "--apply")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("config applied: hash ") and "1 pending job re-merged" in r.stdout
        assert f"held: job {held}: rusage mem: profile pytorch fixes 200 MB per task" in r.stderr
        j = d.show(held)
        assert j["state"] == "PSUSP"
        assert "the config" in j["elements"][0]["pend_reason"]["main"]
        assert "refuses it: rusage mem" in j["elements"][0]["pend_reason"]["main"]
        d.cli("kill", str(filler), check=True)
        d.wait_state(jid, ("DONE",))
        assert (tmp_path / "omp.txt").read_text() == "16\n"  # the job ran with the new profile
        assert d.show(held)["state"] == "PSUSP"
        # the system hold: not a user's to resume; an admin's release is refused while the config
        # still refuses the job; a config that takes it again lifts the hold by itself
        r = d.cli("resume", str(held))
        assert r.returncode == 1 and "held by the system, not by its user" in r.stderr
        assert f"`xcecli release {held}`" in d.cli("why", str(held), check=True).stdout
        d.cli("stop", str(held), check=True)  # a user hold on top keeps the system hold's reason
        w = d.cli("why", str(held), check=True).stdout
        assert "refuses it: rusage mem" in w and "Also held by its user" in w, w
        d.cli("resume", str(held), check=True)
        w = d.cli("why", str(held), check=True).stdout
        assert "refuses it: rusage mem" in w and "Also held by its user" not in w, w
        r = d.cli("release", str(held))
        assert r.returncode == 1 and "not a cluster admin" in r.stderr
        r = d.cli("release", str(held), user="admin")
        assert r.returncode == 1 and "the config in force still refuses it: rusage mem" in r.stderr
        apps.write_text(APPS % "16")
        r = admin(topdir, "--apply")
        assert r.returncode == 0 and "held:" not in r.stderr, r.stderr
        assert d.wait_state(held, ("DONE",))["state"] == "DONE"
        assert any(ev["reason"] == "the new config takes it: system hold released"
                   for ev in json.loads(d.cli("hist", str(held), "--json", check=True).stdout)["events"])
        # a profile whose new select no host matches: its pending jobs are held, not left silently
        filler = d.submit("-n", "2", "--", "sleep", "60")
        d.wait_state(filler, ("RUN",))
        stuck = d.submit("-a", "pytorch", "--", "true", cwd=tmp_path)
        apps.write_text(APPS % "16" + "    resreq: {select: \"gpu > 0\"}\n")
        r = admin(topdir, "--apply")
        assert r.returncode == 0 and f"held: job {stuck}: the job can never start" in r.stderr, r.stderr
        d.cli("kill", str(filler), check=True)

        # refused whole: a setting only a restart can change, and nothing changes
        info_hash = json.loads(d.cli("api", "GET", "/info", check=True).stdout)["config_hash"]
        xce = topdir / "config" / "xce.yaml"
        xce.write_text(xce.read_text().replace("cluster_name: testcluster", "cluster_name: other"))
        r = admin(topdir, "--apply")
        assert r.returncode == 1
        assert "refused the config, nothing was applied" in r.stderr
        assert "cluster_name changed from 'testcluster' to 'other': restart xced to apply it" in r.stderr
        assert json.loads(d.cli("api", "GET", "/info", check=True).stdout)["config_hash"] == info_hash
        # an invalid config never leaves the admin's machine: file:line:col, exit 1
        xce.write_text(xce.read_text().replace("cluster_name: other", "cluster_name: testcluster")
                       + "default_application: nosuch\n")
        r = admin(topdir, "--apply")
        assert r.returncode == 1 and "xce.yaml:" in r.stderr and 'default_application "nosuch"' in r.stderr
        # a config body that did not come from the compiler is checked again by the daemon
        body = json.dumps({"config": {"settings": {}, "queues": [], "hosts": [], "bogus": 1}, "hash": "0" * 64})
        r = d.cli("api", "PUT", "/config", "--data", body, user="admin")
        assert r.returncode == 1 and "nothing was applied" in r.stderr and "bogus" in r.stderr
    finally:
        d.stop()


def test_restart_remerges_pending_jobs(topdir, tmp_path):
    """A pending job keeps the job's own values; at the next start it is merged with the
    config then in force (the profile it names, as it is now)."""
    write_config(topdir, slots=1)
    apps = topdir / "config" / "applications.yaml"
    apps.write_text(APPS % "4")
    d = Daemon(topdir).start()
    try:
        filler = d.submit("--", "sleep", "60")
        d.wait_state(filler, ("RUN",))
        jid = d.submit("-a", "pytorch", "-o", "omp.txt", "--", "sh", "-c", "echo $OMP_NUM_THREADS", cwd=tmp_path)
        d.stop()
        apps.write_text(APPS % "32")
        d.start()
        d.cli("kill", str(filler), check=True)
        d.wait_state(jid, ("DONE",))
        assert (tmp_path / "omp.txt").read_text() == "32\n"
    finally:
        d.stop()


def test_a_compiled_config_out_of_bounds_is_refused_as_the_yaml_would_be(daemon):
    """The bounds exist once (xced.model): a queue with max_tasks -3 handed to PUT /config is
    refused, as `xceadmin build` refuses it in queues.yaml, and nothing changes."""
    from xced.api.client import Client
    from xced.config import load_cluster_config

    cfg = load_cluster_config(daemon.top).config.model_dump(mode="json")
    cfg["queues"][0]["max_tasks"] = -3
    cfg["hosts"][0]["slots"] = 0
    with Client(daemon.top / "run" / "xced.sock", as_user="admin") as c:
        before = c.info().config_hash
        r = daemon.cli("api", "PUT", "/config", "--data", json.dumps({"config": cfg, "hash": "0" * 64}),
                       user="admin")
        assert r.returncode == 1 and "queues.0.max_tasks" in r.stderr and "greater than or equal to 1" in r.stderr
        assert "hosts.0.slots" in r.stderr and "nothing was applied" in r.stderr, r.stderr
        assert c.info().config_hash == before
    (daemon.top / "config" / "queues.yaml").write_text("queues:\n  - name: normal\n    max_tasks: -3\n")
    r = admin(daemon.top)
    assert r.returncode == 1 and "max_tasks must be an integer from 1 to" in r.stderr, r.stderr

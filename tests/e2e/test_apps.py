"""Application profiles as far as they are built (issue 4, first slice): applications.yaml
compiled with the cluster config, `xcecli apps` / `apps show` (PROF-9: listing needs only
cluster view), default_application checked at daemon start (PROF-2, CFG-4)."""

from __future__ import annotations

import json
import subprocess
import textwrap
import time

import pytest

from tests.conftest import XCED, Daemon, write_config

pytestmark = pytest.mark.timeout(90)

APPS = textwrap.dedent("""\
    applications:
      pytorch:
        description: PyTorch training
        env: {OMP_NUM_THREADS: "4"}
        params: {EPOCHS: "10"}
      fluent:
        resreq:
          rusage:
            - {name: fluent_lic, value: 1, per: job, default: true}
      mpi:
        tasks: "2,64"
        resreq:
          span: ptile=8
      wrapped:
        job_starter: "echo started by the job starter; exec %USRCMD"
    """)


def test_apps_listed_and_shown(topdir):
    write_config(topdir)
    (topdir / "config" / "applications.yaml").write_text(APPS)
    with open(topdir / "config" / "xce.yaml", "a") as f:
        f.write("default_application: pytorch\n")
    d = Daemon(topdir).start()
    try:
        listing = json.loads(d.cli("apps", "--json", user="anyone", check=True).stdout)["apps"]
        assert [a["name"] for a in listing] == ["default", "fluent", "mpi", "pytorch", "wrapped"]
        assert [a["name"] for a in listing if a["default"]] == ["pytorch"]
        shown = json.loads(d.cli("apps", "show", "mpi", "--json", check=True).stdout)
        assert shown["profile"]["span"] == {"ptile": 8, "hosts": None, "block": None}
        assert shown["profile"]["limits"]["task_min"] == 2 and shown["profile"]["limits"]["task_max"] == 64
        assert len(shown["content_hash"]) == 64
        text = d.cli("apps", "show", "pytorch", check=True).stdout
        assert "PyTorch training" in text and "EPOCHS" in text
        r = d.cli("apps", "show", "nope")
        assert r.returncode == 1 and "no application profile 'nope'" in r.stderr
    finally:
        d.stop()


def test_undefined_default_application_refused_at_start(topdir):
    write_config(topdir)
    with open(topdir / "config" / "xce.yaml", "a") as f:
        f.write("default_application: nosuch\n")
    r = subprocess.run([XCED, "--topdir", str(topdir)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "nosuch" in r.stderr and "xce.yaml:" in r.stderr
    assert "Traceback" not in r.stderr


def test_submit_with_profile_merge_and_params(topdir, tmp_path):
    """-a pytorch --app-param EPOCHS=3: the profile env and the param reach the job
    (PROF-6, PROF-10); --dry-run -a fluent -R 'rusage[fluent_lic=2]' shows each effective
    value's origin (MERGE-1); conflicts and undeclared params are refused naming them."""
    write_config(topdir)
    (topdir / "config" / "applications.yaml").write_text(APPS.replace(
        "    fluent:\n", "    fluent:\n") + "  licensed:\n    resreq:\n      rusage:\n        - {name: mem, value: 512, unit: MB, default: true}\n"
        "  fixed:\n    resreq:\n      rusage:\n        - {name: mem, value: 512, unit: MB}\n")
    d = Daemon(topdir).start()
    try:
        r = d.cli("submit", "-K", "-a", "pytorch", "--app-param", "EPOCHS=3", "-o", "p.txt", "--", "sh", "-c",
                  "echo $XCE_APP $XCE_APP_PARAM_EPOCHS $OMP_NUM_THREADS", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "p.txt").read_text() == "pytorch 3 4\n"
        r = d.cli("submit", "--dry-run", "--json", "-a", "licensed", "-R", "rusage[mem=256]", "--", "true",
                  cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        eff = out["effective"]
        assert eff["app"] == "licensed" and eff["origins"]["rusage.mem"] == "job"
        assert [t["value"] for t in eff["resreq"]["rusage"][0] if t["name"] == "mem"] == [256]
        assert any("below the profile" in w for w in out["warnings"]), out["warnings"]
        # an entry without `default: true` binds (PROF-3): the job may not change it
        r = d.cli("submit", "--dry-run", "-a", "fixed", "-R", "rusage[mem=256]", "--", "true", cwd=tmp_path)
        assert r.returncode == 1
        assert "profile fixed fixes 512 MB per task" in r.stderr and "256 MB" in r.stderr, r.stderr
        r = d.cli("submit", "-a", "pytorch", "--app-param", "LR=0.1", "--", "true", cwd=tmp_path)
        assert r.returncode == 1 and "LR" in r.stderr and "EPOCHS" in r.stderr
        r = d.cli("submit", "-a", "mpi", "-n", "8", "-R", "span[ptile=4]", "--", "true", cwd=tmp_path)
        assert r.returncode == 1 and "ptile=4" in r.stderr and "ptile=8" in r.stderr
        r = d.cli("submit", "-K", "-a", "wrapped", "-o", "w.txt", "--", "echo", "the job", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "w.txt").read_text() == "started by the job starter\nthe job\n"  # JOB-7
        r = d.cli("submit", "-a", "nope", "--", "true", cwd=tmp_path)
        assert r.returncode == 1 and "unknown application profile 'nope'" in r.stderr
    finally:
        d.stop()


def test_profile_bad_input(topdir, tmp_path):
    """Fixes from a break-it pass: reserved env names and non-finite values refused at build;
    merge warnings shown at submit; the profile shown on the job; NUL bytes refused; profile
    names quoted in the URL."""
    from tests.conftest import XCEADMIN

    write_config(topdir)
    cfg = topdir / "config" / "applications.yaml"
    cfg.write_text("applications:\n  bad:\n    env: {XCE_JOBID: '9', LSB_HOSTS: x}\n"
                   "    resreq:\n      rusage:\n        - {gpu: .inf}\n")
    r = subprocess.run([XCEADMIN, "build", "--topdir", str(topdir)], capture_output=True, text=True)
    assert r.returncode == 1
    errors = [ln for ln in r.stderr.splitlines() if ": error: " in ln]
    assert len(errors) == 3 and sum("is reserved" in ln for ln in errors) == 2
    assert any("applications.yaml:6:" in ln and "gpu" in ln for ln in errors)
    cfg.write_text(APPS)
    d = Daemon(topdir).start()
    try:
        r = d.cli("submit", "-a", "pytorch", "--env", "OMP_NUM_THREADS=1", "--", "true", cwd=tmp_path)
        assert r.returncode == 0 and "warning: " in r.stderr and "OMP_NUM_THREADS" in r.stderr
        jid = int(r.stdout.split("<")[1].split(">")[0])
        assert "Application:  pytorch EPOCHS=10" in d.cli("show", str(jid), check=True).stdout
        assert d.cli("jobs", "-o", "id app", check=True).stdout.splitlines()[1].split() == [str(jid), "pytorch"]
        body = json.dumps({"argv": ["true"], "cwd": "/tmp", "app": "pytorch", "app_params": {"EPOCHS": "a\u0000b"}})
        r = d.cli("api", "POST", "/jobs", "--data", body)
        assert r.returncode == 1 and "NUL" in r.stderr
        r = d.cli("apps", "show", "pytorch?x=1")
        assert r.returncode == 1 and "no application profile 'pytorch?x=1'" in r.stderr
        assert d.cli("apps", "show", "").returncode == 2
    finally:
        d.stop()


HOOKS = textwrap.dedent("""\
    applications:
      hooked:
        pre_host_exec: "echo host-pre $XCE_HOST_NTASKS >> $HOOKLOG"
        pre_job_exec: "echo job-pre $XCE_JOB_HOST_DIR >> $HOOKLOG"
        post_job_exec: "echo job-post $XCE_JOB_EXIT_CODE >> $HOOKLOG"
        post_host_exec: "echo host-post >> $HOOKLOG"
      badpre:
        pre_job_exec: "exit 2"
        post_job_exec: "echo post-after-failed-pre >> $HOOKLOG"
      slowpost:
        post_job_exec: {command: "sleep 30", timeout: 1s}
      strict:
        allow_job_pre_post_exec: false
      slowpre:
        pre_job_exec: {command: "sleep 1234 & sleep 100000", timeout: 600}
        post_job_exec: "echo post-after-kill >> $HOOKLOG"
      limited:
        run_limit: 2s
        post_job_exec: "echo post-job $XCE_JOB_EXIT_CODE >> $HOOKLOG"
        post_host_exec: "echo post-host >> $HOOKLOG"
      chatty:
        pre_job_exec: "head -c 3000000 /dev/zero | tr '\\\\0' x; echo done-pre >> $HOOKLOG"
    """)


def test_profile_hooks(topdir, tmp_path):
    """JOB-6: pre/post hooks run around the job on its first host; post hooks run however the
    job ends (a kill included); a failing or timed-out hook ends the job EXIT naming it."""
    write_config(topdir)
    (topdir / "config" / "applications.yaml").write_text(HOOKS)
    d = Daemon(topdir).start()
    log = tmp_path / "hooks.txt"
    try:
        r = d.cli("submit", "-K", "-a", "hooked", "-n", "2", "--env", f"HOOKLOG={log}", "--", "sh", "-c",
                  f"echo job >> {log}", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        lines = log.read_text().splitlines()
        assert [ln.split()[0] for ln in lines] == ["host-pre", "job-pre", "job", "job-post", "host-post"]
        assert lines[0] == "host-pre 2" and lines[3] == "job-post 0" and "/jobs/" in lines[1]
        log.unlink()
        jid = d.submit("-a", "hooked", "--env", f"HOOKLOG={log}", "--", "sleep", "60", cwd=tmp_path)
        d.wait_state(jid, ("RUN",))
        d.cli("kill", str(jid), check=True)
        d.wait_state(jid, ("EXIT",))
        assert log.read_text().splitlines()[-2:] == ["job-post 130", "host-post"]  # killed by SIGINT: 128+2
        log.unlink()
        jid = d.submit("-a", "badpre", "--env", f"HOOKLOG={log}", "--", "true", cwd=tmp_path)
        j = d.wait_state(jid, ("DONE", "EXIT"))
        assert j["state"] == "EXIT" and j["elements"][0]["exit_reason"] == "pre_job_exec exited 2"
        assert log.read_text() == "post-after-failed-pre\n"  # post hooks still run
        log.unlink()
        r = d.cli("submit", "-K", "-a", "hooked", "--env", f"HOOKLOG={log}", "-E", f"echo own-pre >> {log}",
                  "-Ep", f"echo own-post >> {log}", "--", "sh", "-c", f"echo job >> {log}", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert [ln.split()[0] for ln in log.read_text().splitlines()] == [
            "host-pre", "job-pre", "own-pre", "job", "own-post", "job-post", "host-post"]  # JOB-7 layers
        r = d.cli("submit", "-a", "strict", "-E", "true", "--", "true", cwd=tmp_path)
        assert r.returncode == 1 and "does not allow a job's own pre/post-exec" in r.stderr
        log.unlink()
        jid = d.submit("-a", "slowpre", "--env", f"HOOKLOG={log}", "--", "sh", "-c", f"echo job >> {log}",
                       cwd=tmp_path)
        d.wait_state(jid, ("RUN",))
        hooks_log = d.top / "jobs" / str(jid) / "0" / "hooks.log"
        deadline = time.monotonic() + 20
        while not hooks_log.exists() or "--- pre_job_exec" not in hooks_log.read_text():
            assert time.monotonic() < deadline, "the pre hook never started"
            time.sleep(0.05)  # the pre hook runs: a state, not a time
        d.cli("kill", str(jid), check=True)  # a kill during a pre hook ends it; the job never starts
        j = d.wait_state(jid, ("EXIT",), timeout=15)
        assert j["elements"][0]["exit_reason"].startswith("killed by")
        assert log.read_text() == "post-after-kill\n"
        jid = d.submit("-a", "slowpost", "--", "true", cwd=tmp_path)
        j = d.wait_state(jid, ("DONE", "EXIT"), timeout=20)
        assert j["state"] == "EXIT" and j["elements"][0]["exit_reason"].startswith("post_job_exec timed out after 1 s")
        # post hooks run however the job ends: at the run limit and at the memory limit (JOB-6)
        log.unlink()
        jid = d.submit("-a", "limited", "--env", f"HOOKLOG={log}", "--", "sleep", "60", cwd=tmp_path)
        j = d.wait_state(jid, ("DONE", "EXIT"), timeout=30)
        assert j["state"] == "EXIT" and j["elements"][0]["exit_reason"] == "run limit"
        assert log.read_text().splitlines() == ["post-job 143", "post-host"]  # SIGTERM: 128+15
        log.unlink()
        jid = d.submit("-a", "limited", "-M", "50MB", "--env", f"HOOKLOG={log}", "--", "python3", "-c",
                       "import time; a = bytearray(300 * 2**20); time.sleep(30)", cwd=tmp_path)
        j = d.wait_state(jid, ("DONE", "EXIT"), timeout=30)
        assert j["state"] == "EXIT" and j["elements"][0]["exit_reason"] == "memory limit"
        assert [ln.split()[0] for ln in log.read_text().splitlines()] == ["post-job", "post-host"]
        log.unlink()
        r = d.cli("submit", "-K", "-a", "chatty", "--env", f"HOOKLOG={log}", "--", "true", cwd=tmp_path)
        assert r.returncode == 0, r.stderr  # a hook that writes 3 MB still succeeds ...
        assert log.read_text() == "done-pre\n"
        jid = int(json.loads(d.cli("jobs", "-a", "--json", check=True).stdout)["jobs"][-1]["job_id"])
        hooks_log = topdir / "jobs" / str(jid) / "0" / "hooks.log"
        text = hooks_log.read_text()  # ... and hooks.log keeps 1 MiB of it
        assert (1 << 20) < len(text) < (1 << 20) + 500
        assert "1951424 more bytes of this hook's output dropped" in text
    finally:
        d.stop()


def test_show_tells_the_requested_and_effective_resreq(topdir, tmp_path):
    """bjobs -l shows the requested and the effective resource requirement; so does show."""
    write_config(topdir, slots=8)
    (topdir / "config" / "applications.yaml").write_text(APPS)
    d = Daemon(topdir).start()
    try:
        jid = d.submit("-a", "mpi", "-n", "8", "-R", "select[mem>100]", "--", "true", cwd=tmp_path)
        j = d.show(jid)
        assert j["resreq_requested"] == ["select[mem>100]"]
        assert j["resreq"] == "select[mem > 100] span[ptile=8]"
        text = d.cli("show", str(jid), check=True).stdout
        assert "Requested:    select[mem>100]\n" in text
        assert "Effective:    select[mem > 100] span[ptile=8]\n" in text
    finally:
        d.stop()

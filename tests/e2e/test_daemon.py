"""End to end: daemon lifecycle (D-1..D-6, JOB-8, CFG-4), identity and bad input (CLI-1)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import XCEADMIN, XCECLI, XCED, Daemon, write_config

pytestmark = pytest.mark.timeout(120)


def test_restart_while_jobs_run_loses_nothing(daemon, tmp_path):
    """JOB-8: xced is SIGKILLed with two jobs running; one ends while it is down; after the
    restart the ended job has its real exit code and end time, the other is re-attached and
    can be killed."""
    d = daemon
    gate = tmp_path / "gate"  # the short job ends when the test opens its gate, never after a time
    began = tmp_path / "began"  # ... and says when its process runs: RUN is shown from the dispatch on,
    # and under load the supervisor's start time (what a restart adopts) can come after it
    short = d.submit("--", "sh", "-c", f"touch {began}; while [ ! -e {gate} ]; do sleep 0.02; done; exit 7",
                     cwd=tmp_path)
    long = d.submit("--", "sleep", "60", cwd=tmp_path)
    d.wait_state(short, ("RUN",))
    d.wait_state(long, ("RUN",))
    deadline = time.time() + 20
    while not began.exists():
        assert time.time() < deadline
        time.sleep(0.02)
    assert d.stop(signal.SIGKILL) == -signal.SIGKILL
    opened = time.time()
    gate.touch()
    status = d.top / "jobs" / str(short) / "0" / "status.json"
    deadline = time.time() + 20
    while not status.exists():  # the short job ends while no daemon runs
        assert time.time() < deadline
        time.sleep(0.05)
    down_until = time.time()
    d.start()
    j = d.wait_state(short, ("EXIT", "DONE"))
    e = j["elements"][0]
    assert j["state"] == "EXIT" and e["exit_code"] == 7
    assert e["end_time"] < down_until, "the end time must be the supervisor's, not the restart's"
    assert e["start_time"] < opened <= e["end_time"] < down_until
    assert d.show(long)["state"] == "RUN"
    d.cli("kill", str(long), check=True)
    j = d.wait_state(long, ("EXIT",))
    assert j["elements"][0]["exit_reason"].startswith("killed by")


def test_sigterm_stops_cleanly_and_jobs_survive(daemon, tmp_path):
    d = daemon
    jid = d.submit("--", "sleep", "1.5", cwd=tmp_path)
    d.wait_state(jid, ("RUN",))
    assert (d.top / "run" / "xced.pid").read_text() == f"{d.proc.pid}\n"
    assert d.stop(signal.SIGTERM) == 0
    assert not (d.top / "run" / "xced.sock").exists()
    assert not (d.top / "run" / "xced.pid").exists()  # issue 16: the pid file goes with a clean stop
    d.start()
    assert d.wait_state(jid, ("DONE",))["state"] == "DONE"


def test_unknown_fields_are_refused_naming_them(shared_daemon):
    """D-2, bug-1970: rerunable, chkpnt_dir, tags on submit are a 422 naming the field."""
    d = shared_daemon
    for fld, val in (("rerunable", True), ("chkpnt_dir", "/tmp/ck"), ("tags", ["a"])):
        body = json.dumps({"argv": ["true"], "cwd": "/tmp", fld: val})
        r = d.cli("api", "POST", "/jobs", "--data", body)
        assert r.returncode == 1, r
        assert f"unknown field '{fld}'" in r.stderr and "Traceback" not in r.stderr
        assert r.stderr.startswith("xcecli: error: ")
    # nothing was submitted by those requests
    jobs = json.loads(d.cli("api", "GET", "/jobs?user=all&all=true", check=True).stdout)["jobs"]
    assert not any(j["argv"] == ["true"] and j["cwd"] == "/tmp" for j in jobs)
    # (`force` is bkill -r's field now: an unknown one is refused before the job is looked up)
    r = d.cli("api", "POST", "/jobs/1/kill", "--data", '{"index": null, "forcibly": true}')
    assert r.returncode == 1 and "unknown field 'forcibly'" in r.stderr


@pytest.mark.parametrize("umask,needle", [("022", "valid integer"), (True, "valid integer"), (-1, "greater than"),
                                          (999, "less than or equal to 511"), (1.5, "valid integer")])
def test_a_umask_must_be_an_integer_from_0_to_0o777(shared_daemon, umask, needle):
    """D-7: the umask is a JSON integer (18 for 022); "022" is not silently read as decimal 22."""
    body = json.dumps({"argv": ["true"], "cwd": "/tmp", "umask": umask})
    r = shared_daemon.cli("api", "POST", "/jobs", "--data", body)
    assert r.returncode == 1 and "umask" in r.stderr and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_nul_in_an_output_path_and_a_body_that_is_not_json_are_refused(shared_daemon):
    r = shared_daemon.cli("api", "POST", "/jobs", "--data", json.dumps({"argv": ["true"], "cwd": "/tmp",
                                                                         "stdout": "o\u0000x"}))
    assert r.returncode == 1 and "-o 'o\\x00x': a file name cannot contain a NUL byte" in r.stderr, r.stderr
    from tests.uds_http import UnixConnection as _UnixConnection

    conn = _UnixConnection(str(shared_daemon.top / "run" / "xced.sock"), 10)
    conn.request("POST", "/xce/v1/jobs", body=b"{not json", headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    msg = json.loads(resp.read())["error"]["message"]
    conn.close()
    assert resp.status == 400 and msg.startswith("the request body is not valid JSON"), msg


def test_openapi_served_under_prefix(shared_daemon):
    doc = json.loads(shared_daemon.cli("api", "GET", "/openapi.json", check=True).stdout)
    assert "/xce/v1/jobs" in doc["paths"]
    assert doc["components"]["schemas"]["SubmitRequest"]["additionalProperties"] is False


def test_asserted_users_see_their_own_jobs(shared_daemon, tmp_path):
    """D-6: in test mode two asserted users each see their own jobs; neither may kill the other's."""
    d = shared_daemon
    a = d.submit("--", "sleep", "30", user="alice", cwd=tmp_path)
    b = d.submit("--", "sleep", "30", user="bob", cwd=tmp_path)
    ids_a = [j["job_id"] for j in json.loads(d.cli("jobs", "--json", user="alice", check=True).stdout)["jobs"]]
    ids_b = [j["job_id"] for j in json.loads(d.cli("jobs", "--json", user="bob", check=True).stdout)["jobs"]]
    assert a in ids_a and b not in ids_a
    assert b in ids_b and a not in ids_b
    assert d.show(a, user="bob")["user"] == "alice"  # viewing is open (cluster:view)
    j = d.show(a, user="alice")
    assert j["asserted_user"] is True and j["run_as"] == d.show(a)["run_as"]
    r = d.cli("kill", str(a), user="bob")
    assert r.returncode == 1 and "belongs to alice" in r.stderr
    r = d.cli("kill", str(a), user="admin")  # admins named in xce.yaml may
    assert r.returncode == 0, r.stderr
    d.cli("kill", str(b), user="bob", check=True)
    d.wait_state(a, ("EXIT",))
    d.wait_state(b, ("EXIT",))


def test_production_mode_refuses_as_user(topdir):
    write_config(topdir, mode="production")
    d = Daemon(topdir).start()
    try:
        r = d.cli("jobs", user="mallory")
        assert r.returncode == 1 and "production mode" in r.stderr
        r = d.cli("--as-user", "mallory", "jobs")
        assert r.returncode == 1 and "production mode" in r.stderr
        info = json.loads(d.cli("api", "GET", "/info", check=True).stdout)
        assert info["mode"] == "production" and info["asserted_user"] is False
        assert info["is_admin"] is False  # root is not implicitly an admin (D-6)
    finally:
        d.stop()


@pytest.mark.parametrize("args,needle,code", [
    (["-q", "nosuch", "--", "true"], "unknown queue 'nosuch'; queues: normal", 1),
    (["-n", "0", "--", "true"], "-n 0: the task count must be at least 1", 2),
    (["-n", "5", "--", "true"], "can never be satisfied: the cluster has 4 slots", 1),
    (["-W", "-5", "--", "true"], "-W '-5':", 2),
    (["-J", "x[5-1]", "--", "true"], "ends before it starts", 2),
    (["--", "./no-such-script.sh"], "script './no-such-script.sh' not found", 2),
    (["--", "no-such-program-xyz"], "not found on PATH", 2),
    (["-M", "lots", "--", "true"], "-M 'lots'", 2),
    (["--env", "1X=2", "--", "true"], "--env '1X=2'", 2),
    (["-W", "99999999999999999999", "--", "true"], "at most 10 years", 2),
    (["-M", "99999999999999999999TB", "--", "true"], "more than the largest accepted", 2),
    (["-n", "99999999999999999999", "--", "true"], "-n 99999999999999999999: too large a task count; at most 1000000 tasks", 2),
    (["-J", "a[1-3]%99999999999999999999", "--", "true"], "limit", 2),
    (["-J", "a[99999999999999999999]", "--", "true"], "indices go up to 2147483646", 2),
    (["-J", "evil\nJOBID USER", "--", "true"], "control characters", 2),
    (["-J", "a\u0085b", "--", "true"], "control characters", 2),  # C1 NEL: a line break to splitlines
    (["-J", "a\u009b31mRED", "--", "true"], "control characters", 2),  # C1 CSI: a terminal escape
    (["-J", "a\u2028b", "--", "true"], "control characters", 2),  # LINE SEPARATOR
    (["--", "/tmp"], "is a directory", 2),
    (["-q", "", "--", "true"], "-q '': the value is empty", 2),
    (["-o", "", "--", "true"], "-o '': the value is empty", 2),
    (["-n", "\u0661", "--", "true"], "expected MIN or MIN,MAX", 2),
])
def test_bad_submit_input(shared_daemon, args, needle, code):
    r = shared_daemon.cli("submit", *args)
    assert r.returncode == code, (r.returncode, r.stderr)
    assert needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_bad_job_refs(shared_daemon):
    d = shared_daemon
    r = d.cli("show", "99999")
    assert r.returncode == 1 and "job 99999 not found" in r.stderr
    r = d.cli("kill", "abc")
    assert r.returncode == 2 and "not a job ID" in r.stderr
    r = d.cli("hist", "1[")
    assert r.returncode == 2


def test_daemon_not_running_exit_3(topdir):
    """Exit 3 when no daemon answers; `jobs` and `submit` try for XCE_CONNECT_TIMEOUT first
    (JOB-10: they ride out a restart) and say how long they tried."""
    write_config(topdir)
    env = {**os.environ, "XCE_TOPDIR": str(topdir), "XCE_CONNECT_TIMEOUT": "0.5"}
    for args in (["jobs"], ["submit", "--", "true"], ["hosts"]):
        r = subprocess.run([XCECLI, *args], capture_output=True, text=True, env=env, cwd=str(topdir))
        assert r.returncode == 3, r
        assert "cannot reach xced" in r.stderr and "start it with `xced`" in r.stderr
        assert ("tried for 0.5 s, XCE_CONNECT_TIMEOUT" in r.stderr) == (args[0] != "hosts"), r.stderr
        assert "Traceback" not in r.stderr


def test_missing_topdir_is_one_clear_line(tmp_path):
    missing = tmp_path / "nope"
    r = subprocess.run([XCED, "--topdir", str(missing)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and f"TopDir {missing} does not exist" in r.stderr
    assert "Traceback" not in r.stderr
    r = subprocess.run([XCECLI, "--topdir", str(missing), "jobs"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 3 and f"TopDir {missing} does not exist" in r.stderr


@pytest.mark.parametrize("queues,where", [
    ("queues:\n  - name: normal\n    priority: high\n    prio: 3\n", ["queues.yaml:3:15:", "queues.yaml:4:5:"]),
    # issue 11 item 8: these gave xced a raw traceback and xceadmin build an internal error line
    ("queues: " + "[" * 5000 + "]" * 5000 + "\n", ["queues.yaml:1:72:"]),
    ("queues:\n  - name: normal\n    priority: " + "7" * 5000 + "\n", ["queues.yaml:3:15:"]),
    ("queues:\n  - name: normal\n    priority: 1\n    priority: 2\n    prio: 3\n",
     ["queues.yaml:4:5:", "queues.yaml:5:5:"]),
], ids=["values", "nested-5000-deep", "5000-digits", "duplicate-key"])
def test_invalid_config_refused_with_build_messages(topdir, queues, where):
    """CFG-4: xced refuses an invalid config with the same messages as xceadmin build, each
    FILE:LINE:COL, all at once (CFG-2)."""
    write_config(topdir)
    (topdir / "config" / "queues.yaml").write_text(queues)
    build = subprocess.run([XCEADMIN, "build", "--topdir", str(topdir)], capture_output=True, text=True)
    assert build.returncode == 1 and "Traceback" not in build.stderr and "xceadmin: error:" not in build.stderr
    errors = [ln for ln in build.stderr.splitlines() if ": error: " in ln]
    assert [ln.split("/config/")[1].split(" ")[0] for ln in errors] == where, build.stderr
    r = subprocess.run([XCED, "--topdir", str(topdir)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    for ln in errors:
        assert ln in r.stderr
    assert "Traceback" not in r.stderr


def test_second_daemon_on_same_topdir_refused(daemon):
    r = subprocess.run([XCED, "--topdir", str(daemon.top)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "already runs" in r.stderr
    assert daemon.proc.poll() is None


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("curl"),
                    reason="needs root (a root daemon runs jobs as their submitting user, D-6) and curl")
def test_root_daemon_runs_job_as_submitting_user(shared_daemon, request):
    """D-6: with xced running as root, a job submitted by a process running as `nobody`
    runs as nobody, and `show` says so; the caller's identity comes from SO_PEERCRED.
    (The client is curl on the Unix socket: nobody cannot read root's Python here.)"""
    import pwd
    import tempfile

    nobody = pwd.getpwnam("nobody")
    work = tempfile.mkdtemp(prefix="xce-nobody-", dir="/tmp")
    request.addfinalizer(lambda: shutil.rmtree(work, ignore_errors=True))
    os.chmod(work, 0o777)
    for p in (shared_daemon.top, shared_daemon.top / "run"):
        os.chmod(p, 0o755)
    sock = shared_daemon.top / "run" / "xced.sock"
    body = json.dumps({"argv": ["id", "-un"], "cwd": work, "env": {"PATH": "/usr/bin:/bin"},
                       "stdout": "who.txt"})
    r = subprocess.run(["curl", "-sS", "--unix-socket", str(sock), "-H", "Content-Type: application/json",
                        "-d", body, "http://xced/xce/v1/jobs"], capture_output=True, text=True,
                       user=nobody.pw_uid, group=nobody.pw_gid, cwd=work, timeout=60)
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job_id"]
    j = shared_daemon.wait_state(jid, ("DONE", "EXIT"))
    assert j["user"] == "nobody" and j["run_as"] == "nobody" and j["asserted_user"] is False
    assert j["state"] == "DONE", j
    assert (Path(work) / "who.txt").read_text().strip() == "nobody"
    assert os.stat(Path(work) / "who.txt").st_uid == nobody.pw_uid
    assert "Runs as:      nobody" in shared_daemon.cli("show", str(jid), check=True).stdout
    # root, calling as itself, runs as root and is not an admin unless named (D-6)
    info = json.loads(shared_daemon.cli("api", "GET", "/info", check=True).stdout)
    assert info["user"] == "root" and info["is_admin"] is False


def test_personal_cluster_on_first_start(tmp_path):
    """`xced` with no --topdir and no XCE_TOPDIR makes a personal single-host cluster in the
    user's data dir: this machine, its usable CPUs as slots, production mode."""
    data = Path(tempfile.mkdtemp(prefix="xce-home-", dir="/tmp"))
    env = {**os.environ, "XDG_DATA_HOME": str(data)}
    for k in ("XCE_TOPDIR", "XCE_SOCKET", "XCE_TEST_USER"):
        env.pop(k, None)
    top = data / "xce"
    proc = subprocess.Popen([XCED], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not (top / "run" / "xced.ready").exists():
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        r = subprocess.run([XCECLI, "hosts", "--json"], env=env, capture_output=True, text=True, timeout=30)
        hosts = json.loads(r.stdout)["hosts"]
        assert len(hosts) == 1 and hosts[0]["slots"] == len(os.sched_getaffinity(0))
        assert hosts[0]["status"] == "ok"
        r = subprocess.run([XCECLI, "submit", "-K", "--", "true"], env=env, capture_output=True, text=True,
                           timeout=60, cwd=str(tmp_path))
        assert r.returncode == 0, r.stderr
        info = json.loads(subprocess.run([XCECLI, "api", "GET", "/info"], env=env, capture_output=True,
                                         text=True, timeout=30).stdout)
        assert info["mode"] == "production" and info["topdir"] == str(top)
        # D-7: the personal cluster's TopDir keeps the store and the jobs' files private
        modes = {rel: stat.S_IMODE((top / rel).stat().st_mode) for rel in ("", "run", "state", "jobs")}
        assert modes == {"": 0o755, "run": 0o755, "state": 0o700, "jobs": 0o711}
        assert stat.S_IMODE((top / "state" / "xce.db").stat().st_mode) == 0o600
        stdout = next((top / "jobs").glob("*/0/stdout"))
        assert stat.S_IMODE(stdout.stat().st_mode) == 0o600
        assert stat.S_IMODE(stdout.parent.stat().st_mode) == 0o700  # jobs run as the daemon's user
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        from tests.conftest import kill_job_processes

        kill_job_processes(top)
        shutil.rmtree(data, ignore_errors=True)


def test_huge_values_never_reach_the_store(shared_daemon):
    """Bad input is refused before it can break listings for everyone (64-bit bounds)."""
    d = shared_daemon
    for body in ({"argv": ["true"], "cwd": "/tmp", "run_limit_s": 99999999999999999999},
                 {"argv": ["true"], "cwd": "/tmp", "ntasks_min": 10**12}):
        r = d.cli("api", "POST", "/jobs", "--data", json.dumps(body))
        assert r.returncode == 1 and "Traceback" not in r.stderr
    assert d.cli("jobs", "-u", "all", "-a").returncode == 0


def test_user_names_are_checked_before_sending(shared_daemon):
    for bad in ("\u30e6\u30fc\u30b6", "a\nb", ""):
        r = shared_daemon.cli("--as-user", bad, "jobs")
        assert r.returncode in (1, 2) and "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1, r


def test_peek_is_for_the_owner(shared_daemon, tmp_path):
    d = shared_daemon
    jid = d.submit("-o", "p.txt", "--", "echo", "secret", user="alice", cwd=tmp_path)
    d.wait_state(jid, ("DONE",))
    assert d.cli("peek", str(jid), user="alice", check=True).stdout == "secret\n"
    r = d.cli("peek", str(jid), user="bob")
    assert r.returncode == 1 and "belongs to alice" in r.stderr


def test_broken_store_is_one_line(topdir):
    write_config(topdir)
    (topdir / "state").mkdir()
    (topdir / "state" / "xce.db").write_bytes(b"this is not a database" * 100)
    r = subprocess.run([XCED, "--topdir", str(topdir)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "cannot open the store" in r.stderr and "move" in r.stderr
    f = topdir / "afile"
    f.write_text("x")
    r = subprocess.run([XCED, "--topdir", str(f)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "is not a directory" in r.stderr


def test_the_clis_own_variables_stay_out_of_the_job(shared_daemon):
    """xcecli sets PYDANTIC_DISABLE_PLUGINS for its own start-up; the job gets the submitter's
    environment, not that (a user's own setting of it is kept)."""
    jid = shared_daemon.submit("--", "true")
    env = shared_daemon.show(jid)["env"]
    assert "PYDANTIC_DISABLE_PLUGINS" not in env and "XCE_CLI_SET_PYDANTIC" not in env
    assert env["XCE_TOPDIR"] == str(shared_daemon.top)  # the submitter's environment, as given
    r = subprocess.run([XCECLI, "submit", "--parsable", "--", "true"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "XCE_TOPDIR": str(shared_daemon.top), "PYDANTIC_DISABLE_PLUGINS": "0"},
                       cwd=str(shared_daemon.top))
    assert shared_daemon.show(int(r.stdout))["env"]["PYDANTIC_DISABLE_PLUGINS"] == "0"


def test_a_wait_rides_out_a_daemon_restart(topdir):
    """`xcecli wait` and `submit -K` blocked in the daemon when xced gets SIGTERM keep waiting
    (as `bsub -K` rides out an mbatchd restart: the job keeps running under its supervisor),
    say once on stderr that xced is not answering, never an HTTP 500, and end with the job's
    real end once xced is back. With --timeout and no daemon to ask, wait exits 3."""
    write_config(topdir)
    d = Daemon(topdir).start()
    try:
        gate = topdir / "gate"
        env = {**os.environ, "XCE_TOPDIR": str(topdir)}
        env.pop("XCE_SOCKET", None)
        k = subprocess.Popen([XCECLI, "submit", "-K", "--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done;"
                              " exit 5"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while not d.cli("jobs", "-a").stdout.count("RUN"):
            assert time.monotonic() < deadline and k.poll() is None, "the -K job never ran"
            time.sleep(0.05)
        jid = int(json.loads(d.cli("jobs", "-a", "--json", check=True).stdout)["jobs"][0]["job_id"])
        w = subprocess.Popen([XCECLI, "wait", str(jid)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        def link(fd: str) -> str:  # a descriptor may close between the listing and the look (its start-up)
            try:
                return os.readlink(f"/proc/{w.pid}/fd/{fd}")
            except FileNotFoundError:
                return ""

        while not any(link(fd).startswith("socket:") for fd in os.listdir(f"/proc/{w.pid}/fd")):
            assert time.monotonic() < deadline and w.poll() is None, "xcecli wait never connected"
            time.sleep(0.02)
        d.stop()
        short = d.cli("wait", "--timeout", "0.5", str(jid))  # no daemon for the whole timeout: exit 3
        assert short.returncode == 3 and "cannot reach xced" in short.stderr, short.stderr
        assert w.poll() is None and k.poll() is None  # both still wait
        d.start()
        gate.touch()
        out, err = w.communicate(timeout=30)
        assert w.returncode == 1 and f"job {jid} ended EXIT (exit code 5)" in err, (w.returncode, err)
        assert "still waiting for job" in err and "HTTP 500" not in err, err
        kout, kerr = k.communicate(timeout=30)
        assert k.returncode == 5, (k.returncode, kerr)  # -K exits with the job's own code
    finally:
        d.stop()


@pytest.mark.parametrize("field,value,needle", [
    ("name", "", "-J '': the value is empty"), ("queue", "", "-q '': the value is empty"),
    ("stdout", "", "-o '': the value is empty"), ("argv", [""], "the command is empty"),
    ("pre_exec", "echo a\u0000b", "-E: the value contains a NUL byte"),
    # issue 11 item 8: each was refused already, or accepted and then failed the job at start
    ("stdout", "o\u0000x", "-o 'o\\x00x': a file name cannot contain a NUL byte"),
    ("stderr", "e\u0000x", "-e 'e\\x00x': a file name cannot contain a NUL byte"),
    ("post_exec", "echo a\u0000b", "-Ep: the value contains a NUL byte"),
    ("cwd", "/nonexistent/xce-dir", "cwd '/nonexistent/xce-dir' is not a directory on this host"),
    ("exdata", {"limits": {"run_limit_s": -5}}, "exdata.limits.run_limit_s -5: must be an integer from 1 to"),
    ("exdata", {"limits": {"memory_limit_mb": 4.5}}, "exdata.limits.memory_limit_mb 4.5: must be an integer"),
    ("exdata", {"limits": {"ntasks_min": True}}, "exdata.limits.ntasks_min True: must be an integer"),
    ("exdata", {"limits": {"cpus": 2}}, "exdata.limits: unknown key 'cpus'; valid keys: ntasks_min, ntasks_max"),
    ("exdata", {"limits": [1]}, "exdata.limits must be an object of ntasks_min"),
    ("exdata", {"meta": json.loads("[" * 40 + "]" * 40)}, "exdata nests more than 32 levels deep"),
    # issue 11 item 9: strict types, no coercion
    ("ntasks_min", True, "field 'ntasks_min': Input should be a valid integer"),
    ("ntasks_min", "2", "field 'ntasks_min': Input should be a valid integer"),
    ("run_limit_s", 60.0, "field 'run_limit_s': Input should be a valid integer"),
    ("env", {"A": 1}, "field 'env.A': Input should be a valid string"),
    # a byte that is not UTF-8 (a lone surrogate): it broke every listing once stored (D-8)
    ("argv", ["echo", "caf\udce9"], "argv[1]: the text holds \\xe9, which is not UTF-8"),
    ("env", {"X": "\ud800"}, "env.X: the text holds \\ud800, which is not UTF-8"),
    ("stdout", "/tmp/o\udce9", "stdout: the text holds \\xe9"),
    ("resreq", ['select[hname=="\udce9"]'], "resreq[0]: the text holds \\xe9"),
    ("exdata", {"meta": {"k": "\udce9"}}, "exdata.meta.k: the text holds \\xe9"),
])
def test_the_api_refuses_what_the_cli_refuses(shared_daemon, field, value, needle):
    """CLI-1, D-2: what the API refuses is one line naming it, and nothing is submitted."""
    body = {"argv": ["true"], "cwd": "/tmp", "name": "refused-by-api", field: value}
    r = shared_daemon.cli("api", "POST", "/jobs", "--data", json.dumps(body))
    assert r.returncode == 1 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    jobs = json.loads(shared_daemon.cli("api", "GET", "/jobs?user=all&all=true", check=True).stdout)["jobs"]
    assert not any(j["name"] == "refused-by-api" for j in jobs)


def _raw(d: Daemon, method: str, path: str, body: bytes | None = None,
         user: str | None = None) -> tuple[int, dict, dict]:
    """One request on the daemon's socket as any HTTP client sends it (as asserted `user`):
    (status, headers, JSON body)."""
    from tests.uds_http import UnixConnection as _UnixConnection

    conn = _UnixConnection(str(d.top / "run" / "xced.sock"), 10)
    try:
        headers = {"Content-Type": "application/json", **({"X-XCE-As-User": user} if user else {})}
        conn.request(method, "/xce/v1" + path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, json.loads(resp.read())
    finally:
        conn.close()


@pytest.mark.parametrize("method,path,body,status,code,needle", [
    ("POST", "/jobs/999999/kill", b'{"index": false}', 422, "invalid", "field 'index': Input should be a valid integer"),
    ("POST", "/jobs/999999/stop", b'{"index": "0"}', 422, "invalid", "field 'index': Input should be a valid integer"),
    ("POST", "/sim/record", b'{"stop": 0}', 422, "invalid", "field 'stop': Input should be a valid boolean"),
    ("POST", "/jobs/999999/launch", b'{"host": "h1", "argv": ["true"], "index": 0.0}', 422, "invalid",
     "field 'index': Input should be a valid integer"),
    ("PUT", "/config", b'{"config": {}, "hash": 7}', 422, "invalid", "field 'hash': Input should be a valid string"),
    ("POST", "/jobs", b"{not json", 400, "malformed", "the request body is not valid JSON"),
    ("POST", "/jobs", b'{"argv": ["true"], "cwd": "/tmp", "exdata": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400,
     "malformed", "the request body could not be read as JSON (it nests deeper than the parser goes)"),
    ("POST", "/jobs", b"[1, 2]", 422, "invalid", "the request body must be a JSON object"),
    ("GET", "/nosuch", None, 404, "not_found", "GET /xce/v1/nosuch: no such route in the XCE API"),
    ("GET", "/jobs/abc", None, 404, "not_found", "a job ID is a positive integer"),
    ("GET", "/jobs/dry-run", None, 405, "method_not_allowed", "this path does not take GET; it takes POST"),
    ("DELETE", "/jobs", None, 405, "method_not_allowed", "it takes GET, POST"),
])
def test_every_error_has_the_apis_shape(shared_daemon, method, path, body, status, code, needle):
    """Issue 11 item 9, D-2: strict bodies ({"index": false} is not index 0, {"stop": 0} not
    false); one error shape for every error, FastAPI's and Starlette's own included (they
    answered {"detail": ...}); GET /jobs/dry-run is 405 with Allow, not a 422 about job_id."""
    from xced.api.models import ErrorBody

    admin = "admin" if path in ("/sim/record", "/config") else None  # RBAC-1: only an admin's body is read there
    got, headers, answer = _raw(shared_daemon, method, path, body, admin)
    err = ErrorBody.model_validate(answer).error
    assert (got, err.code) == (status, code) and needle in err.message, (got, answer)
    if status == 405:
        assert headers["allow"] == err.message.rsplit("it takes ", 1)[1]


def _post(d: Daemon, path: str, body: bytes, content_type: str | None) -> tuple[int, dict]:
    """POST `body` with that Content-Type (None: no such header): (status, JSON answer)."""
    from tests.uds_http import UnixConnection as _UnixConnection

    conn = _UnixConnection(str(d.top / "run" / "xced.sock"), 10)
    try:
        conn.request("POST", "/xce/v1" + path, body=body, headers={} if content_type is None else
                     {"Content-Type": content_type})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


_JSON = "application/json"
_OK_BODY = b'{"argv": ["true"], "cwd": "/tmp"'


@pytest.mark.parametrize("body,content_type", [
    (b"{not json", _JSON), (b"", _JSON), (b"[1, 2]", _JSON), (b'"a string"', _JSON), (b"null", _JSON),
    (_OK_BODY + b', "exdata": ' + b"[" * 5000 + b"]" * 5000 + b"}", _JSON),
    (b'{"argv": "true", "cwd": "/tmp"}', _JSON), (_OK_BODY + b', "bogus": 1, "other": 2}', _JSON),
    (_OK_BODY + b', "umask": "18"}', _JSON), (_OK_BODY + b', "ntasks_min": 99999999}', _JSON),
    (b'{"cwd": "/tmp"}', _JSON), (_OK_BODY + b"}", "text/plain"), (_OK_BODY + b', "bogus": 1}', None),
    (_OK_BODY + b', "bogus": 1}', "Application/vnd.xce+JSON; charset=utf-8"), (_OK_BODY + b', "bogus": 1}', "json"),
])
def test_a_submit_refuses_a_bad_body_as_every_other_body_route_does(shared_daemon, body, content_type):
    """issue 17 part 5, D-2: POST /jobs reads its body with a lean handler of its own
    (xced.server.lean); each refusal is exactly the one FastAPI's handler gives POST
    /jobs/dry-run, which takes the same body: status, code, message and field."""
    got = _post(shared_daemon, "/jobs", body, content_type)
    assert got == _post(shared_daemon, "/jobs/dry-run", body, content_type) and got[0] in (400, 422), got


def test_openapi_documents_every_status_with_the_error_shape(shared_daemon):
    """Issue 11 item 9: 400, 403, 404, 409 and 503 were missing from the OpenAPI document,
    and 422 was documented as FastAPI's {"detail": [...]}, which the API never sends."""
    doc = json.loads(shared_daemon.cli("api", "GET", "/openapi.json", check=True).stdout)
    ops = {(m.upper(), p.removeprefix("/xce/v1")): op for p, item in doc["paths"].items() for m, op in item.items()}
    # a route that takes a body answers 413 too over the body limit (issue 11 item 7, D-8)
    want = {("POST", "/jobs"): {400, 413, 409}, ("GET", "/jobs/{job_id}"): {404},  # 409: a reused key (JOB-10)
            ("POST", "/jobs/{job_id}/kill"): {400, 413, 404, 409},
            ("POST", "/jobs/{job_id}/launch"): {400, 413, 404, 409}, ("POST", "/sim/record"): {400, 413, 409},
            ("GET", "/apps/{name}"): {404}, ("GET", "/hosts"): set()}
    for key, extra in want.items():
        assert set(ops[key]["responses"]) == {"200", *map(str, {401, 403, 422, 500, 503} | extra)}, key
    for key, op in ops.items():
        for status, resp in op["responses"].items():
            if status != "200":
                assert resp["content"] == {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}, \
                    (key, status)
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    assert doc["components"]["schemas"]["SubmitRequest"]["additionalProperties"] is False


def test_a_command_with_a_byte_that_is_not_utf8_is_refused_by_the_cli_too(shared_daemon):
    """D-8: `xcecli submit -- echo $'caf\\xe9'` once ran, then broke `xcecli jobs` for every user."""
    r = subprocess.run([XCECLI, "submit", "--", "echo", os.fsdecode(b"caf\xe9")], capture_output=True, text=True,
                       env={**os.environ, "XCE_TOPDIR": str(shared_daemon.top)})
    assert r.returncode == 1 and "which is not UTF-8" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert shared_daemon.cli("jobs", "-a").returncode == 0


def test_a_variable_that_is_not_utf8_is_left_out_of_the_job_with_a_warning(shared_daemon, tmp_path):
    """D-8, JOB-3: one Latin-1 variable in the submitter's shell (BADENV=caf\\xe9) once refused
    every submit from it; the submit now goes ahead without it, and the warning names it."""
    out = tmp_path / "env.out"
    env = {**os.environ, "XCE_TOPDIR": str(shared_daemon.top), "BADENV": os.fsdecode(b"caf\xe9"), "GOODENV": "caf\u00e9"}
    r = subprocess.run([XCECLI, "submit", "--parsable", "-o", str(out), "--", "env"], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stderr
    assert "warning: left out of the job's environment, not UTF-8 text: BADENV" in r.stderr, r.stderr
    shared_daemon.wait_state(int(r.stdout), ("DONE",))
    lines = out.read_text().splitlines()
    assert "GOODENV=caf\u00e9" in lines and not any(x.startswith("BADENV=") for x in lines), lines


def test_a_job_id_of_thousands_of_digits_is_an_unknown_route_not_a_500(shared_daemon):
    """D-8: Python refuses to convert a number of more than 4300 digits; that was a 500."""
    r = shared_daemon.cli("api", "GET", "/jobs/" + "9" * 5000)
    assert r.returncode == 1 and "no such route in the XCE API; a job ID is a positive integer of at most 18 " \
        "digits" in r.stderr and "(5013 characters)" in r.stderr and "internal error" not in r.stderr, r.stderr


def test_worker_options_are_refused_with_the_default_roles(topdir):
    """`--slots`, `--memory`, `--resource`, `--attribute` and `--tag` describe a worker that
    joins a controller; with the default roles the host is hosts.yaml's, so they are a usage
    error (exit 2) naming them, never silently ignored (issue 16, bad input). Nothing starts."""
    write_config(topdir)
    env = {k: v for k, v in os.environ.items() if k not in ("XCE_TOPDIR", "XCE_SOCKET")}
    for extra in (["--slots", "1"], ["--slots", "0"], ["--memory", "lots"], ["--tag", "ssd", "--slots", "-3"]):
        r = subprocess.run([XCED, "--topdir", str(topdir), *extra], capture_output=True, text=True, timeout=60,
                           env=env)
        assert r.returncode == 2 and "options of a worker joining a controller" in r.stderr, (extra, r.stderr)
        assert extra[0] in r.stderr and "Traceback" not in r.stderr
    assert not (topdir / "run" / "xced.pid").exists()

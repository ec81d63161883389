"""Users kept apart on one machine (D-7, D-6, JOB-1, JOB-3, JOB-7, RBAC-1, KEY-3), tried as a
second local user would try it: a real production xced running as root, real Unix users made
with useradd, and nothing but the documented API and the filesystem.

The second users cannot be assumed to read this project's .venv (it may live under a 0700
/root), so they talk to the daemon with curl over its Unix socket and look at files with cat,
ls and find. Needs root (CI runs as root): the users are made once per machine and kept.
"""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import XCED, Daemon, kill_job_processes, short_tmpdir, write_config
from xced.api.client import Client

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: it makes Unix users and runs a root xced")

SECRET = "s3cr3t-AKIA-7f1e2d"
CURL = shutil.which("curl") or "/usr/bin/curl"


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int

    def run(self, argv: list[str], *, umask: int = 0o022, cwd: str = "/", env: dict | None = None,
            timeout: float = 30) -> subprocess.CompletedProcess:
        """Run `argv` as this user (no other groups), with `umask`."""
        return subprocess.run(argv, user=self.uid, group=self.gid, extra_groups=[], umask=umask, cwd=cwd,
                              env={"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C", **(env or {})},
                              capture_output=True, text=True, timeout=timeout)

    def api(self, sock: Path | str, method: str, path: str, body: dict | None = None,
            tcp: str | None = None) -> tuple[int, dict | str]:
        """One request with curl as this user, over the Unix socket `sock` (or TCP `tcp`,
        "127.0.0.1:PORT", or "https://127.0.0.1:PORT" for TLS without checking the
        certificate, as an attacker would); (HTTP status, JSON body or text)."""
        url = (tcp if tcp and tcp.startswith("https://") else f"http://{tcp or 'xced'}") + f"/xce/v1{path}"
        argv = [CURL, "-s", "-k", "-X", method, "-w", "\n%{http_code}", "-H", "Content-Type: application/json"]
        if tcp is None:
            argv += ["--unix-socket", str(sock)]
        if body is not None:
            argv += ["--data-binary", json.dumps(body)]
        r = self.run(argv + [url])
        text, _, code = r.stdout.rpartition("\n")
        assert code.isdigit(), f"curl failed ({r.returncode}): {r.stderr}"
        try:
            return int(code), json.loads(text)
        except ValueError:
            return int(code), text


def _ensure_user(name: str) -> User:
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/bin/sh", name], check=True, capture_output=True)
        pw = pwd.getpwnam(name)
    return User(name, pw.pw_uid, pw.pw_gid)


@pytest.fixture(scope="session")
def users() -> tuple[User, User]:
    """alice and bob: two real Unix users, each with a private group (useradd's default)."""
    with open("/tmp/xce-test-useradd.lock", "w") as lock:  # pytest-xdist workers make them one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_user("xce-alice"), _ensure_user("xce-bob")


@pytest.fixture
def base():
    """A 0755 temp dir for TopDirs and the users' working directories."""
    d = short_tmpdir("xceu-")
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        kill_job_processes(d / "top")
        shutil.rmtree(d, ignore_errors=True)


def _home(base: Path, user: User) -> Path:
    h = base / user.name
    h.mkdir(mode=0o700, exist_ok=True)
    os.chown(h, user.uid, user.gid)
    return h


def _production(base: Path, top: Path | None = None, **env) -> Daemon:
    top = top or base / "top"
    top.mkdir(mode=0o755, parents=True, exist_ok=True)
    write_config(top, mode="production", admins=("nobody-admin",))
    with open(top / "config" / "xce.yaml", "a") as f:
        f.write("listen: {host: 127.0.0.1, port: 0}\n")
    return Daemon(top, env=env).start()


@pytest.fixture
def prod(base):
    """A production xced running as root on `base/top`, with TCP on a free port."""
    d = _production(base)
    try:
        yield d
    finally:
        d.stop()


def _sock(d: Daemon) -> Path:
    return d.top / "run" / "xced.sock"


def _submit(d: Daemon, user: User, home: Path, argv: list[str], **extra) -> int:
    body = {"argv": argv, "cwd": str(home), "env": {"PATH": "/usr/bin:/bin", "MY_SECRET": SECRET}, **extra}
    code, out = user.api(_sock(d), "POST", "/jobs", body)
    assert code == 200, out
    return out["job_id"]


def _wait(d: Daemon, job: int, states: tuple[str, ...], timeout: float = 30) -> dict:
    c = Client(_sock(d))
    deadline = time.monotonic() + timeout
    while True:
        j = c.request("GET", f"/jobs/{job}").json()
        if j["state"] in states:
            return j
        assert time.monotonic() < deadline, f"job {job} is {j['state']}, expected {states}"
        time.sleep(0.05)


def _running(d: Daemon, user: User, home: Path, argv: list[str], **extra) -> int:
    """Submit as `user` and wait until the job's process runs (its supervisor wrote job.json)."""
    job = _submit(d, user, home, argv, **extra)
    _wait(d, job, ("RUN",))
    _wait_file(d.top / "jobs" / str(job) / "0" / "job.json")
    return job


def _wait_file(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.stat().st_size):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    time.sleep(0.05)
    return path.read_text()


def _job_token(d: Daemon, job: int) -> str:
    """The running job's XCE_JOB_TOKEN, read as root from its process's environment."""
    pid = json.loads((d.top / "jobs" / str(job) / "0" / "job.json").read_text())["pid"]
    env = dict(v.split("=", 1) for v in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in v)
    return env["XCE_JOB_TOKEN"]


def _launch_body(token: str | None, argv: list[str]) -> dict:
    body: dict = {"host": "h1", "argv": argv}
    if token is not None:
        body["token"] = token
    return body


def test_no_file_another_user_can_read_holds_a_secret_or_a_token(prod, users, base):
    """Bob, looking at every file of the TopDir he can read, finds neither alice's
    environment nor her job's launch token; the store and the job's spec are closed to him."""
    alice, bob = users
    home = _home(base, alice)
    job = _running(prod, alice, home, ["sleep", "60"])
    token = _job_token(prod, job)
    for path in ("state/xce.db", f"jobs/{job}/0/spec.json", f"jobs/{job}/0/status.json", "state"):
        r = bob.run(["cat", str(prod.top / path)])
        assert r.returncode != 0 and ("Permission denied" in r.stderr or "No such file" in r.stderr), (path, r)
    r = bob.run(["ls", str(prod.top / "jobs" / str(job) / "0")])
    assert r.returncode != 0 and "Permission denied" in r.stderr
    readable = bob.run(["find", str(prod.top), "-readable", "-type", "f"]).stdout.split()
    assert str(prod.top / "config" / "xce.yaml") in readable  # the config is public
    for needle in (SECRET, token):
        hits = bob.run(["grep", "-l", "-r", "-F", needle, *readable]).stdout.split() if readable else []
        assert hits == [], f"{needle[:6]}... readable by bob in {hits}"
    # the daemon's own copies: the token never in the clear, the store its user's alone
    db = (prod.top / "state" / "xce.db").read_bytes() + (prod.top / "state" / "xce.db-wal").read_bytes()
    assert token.encode() not in db
    assert stat.S_IMODE((prod.top / "state").stat().st_mode) == 0o700
    for name in ("xce.db", "xce.db-wal", "xce.db-shm"):
        assert stat.S_IMODE((prod.top / "state" / name).stat().st_mode) == 0o600, name
    spec = prod.top / "jobs" / str(job) / "0" / "spec.json"
    assert stat.S_IMODE(spec.stat().st_mode) == 0o600 and spec.stat().st_uid == 0


def test_a_stolen_token_is_refused_and_the_jobs_own_launch_runs_as_its_user(prod, users, base):
    """The job's own tasks launch with its token and run as alice; bob, holding a copy of that
    token, is refused on the Unix socket (wrong user) and over TCP (production); bob
    without a token, a wrong token and another job's token are refused too (403, one line)."""
    alice, bob = users
    home = _home(base, alice)
    # the job launches a task with its own token, as `xcecli launch` does, then keeps running
    script = ('curl -s --unix-socket "$XCE_SOCKET" -H "Content-Type: application/json" '
              '--data-binary "{\\"host\\":\\"h1\\",\\"argv\\":[\\"id\\",\\"-u\\"],\\"token\\":\\"$XCE_JOB_TOKEN\\"}" '
              'http://xced/xce/v1/jobs/$XCE_JOBID/launch > launched.json; sleep 60')
    job = _submit(prod, alice, home, ["/bin/sh", "-c", script])
    other = _submit(prod, alice, home, ["sleep", "60"])
    _wait(prod, other, ("RUN",))
    launched = json.loads(_wait_file(home / "launched.json"))
    assert launched["exit_code"] == 0 and launched["output"].strip() == str(alice.uid), launched
    token = _job_token(prod, job)
    sock = _sock(prod)
    code, out = bob.api(sock, "POST", f"/jobs/{job}/launch", _launch_body(token, ["id"]))
    assert code == 403 and "runs as xce-alice" in out["error"]["message"] and "\n" not in out["error"]["message"], out
    code, out = bob.api(sock, "POST", f"/jobs/{job}/launch", _launch_body(None, ["id"]))
    assert code == 403 and "belongs to xce-alice" in out["error"]["message"], out
    for bad in ("0" * 32, _job_token(prod, other)):
        code, out = alice.api(sock, "POST", f"/jobs/{job}/launch", _launch_body(bad, ["id"]))
        assert code == 403 and "not this job's" in out["error"]["message"] and "\n" not in out["error"]["message"], out
    port = (prod.top / "run" / "xced.port").read_text().strip()
    # production TCP is TLS (KEY-6): a launch with the stolen token there is refused, and an
    # anonymous user request is 401 (no key-authenticated session)
    tcp = f"https://127.0.0.1:{port}"
    code, out = bob.api(sock, "POST", f"/jobs/{job}/launch", _launch_body(token, ["id"]), tcp=tcp)
    assert code == 403 and "over TCP" in out["error"]["message"], out
    code, out = bob.api(sock, "GET", "/jobs", tcp=tcp)
    assert code == 401 and "over TCP" in out["error"]["message"], out
    # alice herself, outside the job, launches as its owner; the task runs as her
    code, out = alice.api(sock, "POST", f"/jobs/{job}/launch", _launch_body(None, ["id", "-u"]))
    assert code == 200 and out["output"].strip() == str(alice.uid), out


def test_a_requeued_jobs_old_token_is_refused(prod, users, base):
    alice, _ = users
    home = _home(base, alice)
    job = _running(prod, alice, home, ["sleep", "60"])
    old = _job_token(prod, job)
    code, out = alice.api(_sock(prod), "POST", f"/jobs/{job}/requeue", {})
    assert code == 200, out
    deadline = time.monotonic() + 30
    while True:  # running again, under a new supervisor with a new token
        try:
            new = _job_token(prod, job)
        except (OSError, KeyError, ValueError):
            new = old
        if new != old:
            break
        assert time.monotonic() < deadline, "the requeued job did not run again"
        time.sleep(0.1)
    code, out = alice.api(_sock(prod), "POST", f"/jobs/{job}/launch", _launch_body(old, ["true"]))
    assert code == 403 and "earlier run" in out["error"]["message"], out


def test_the_environment_is_shown_only_to_its_owner(prod, users, base):
    alice, bob = users
    job = _submit(prod, alice, _home(base, alice), ["true"])
    _wait(prod, job, ("DONE", "EXIT"))
    code, mine = alice.api(_sock(prod), "GET", f"/jobs/{job}")
    assert code == 200 and mine["env"]["MY_SECRET"] == SECRET
    code, theirs = bob.api(_sock(prod), "GET", f"/jobs/{job}")
    assert code == 200 and theirs["env"] is None and SECRET not in json.dumps(theirs)
    code, listing = bob.api(_sock(prod), "GET", "/jobs?user=all")
    assert code == 200 and SECRET not in json.dumps(listing)


def test_output_follows_the_submitters_umask_and_the_job_directory_is_closed(prod, users, base):
    """Submitted under umask 077: the -o file is 0600, the job runs with umask 0077, the
    default stdout in the job directory is alice's 0600, and bob can neither list the job
    directory nor read the output. Under umask 022 the -o file is 0644, as LSF makes it."""
    alice, bob = users
    home = _home(base, alice)
    private = _submit(prod, alice, home, ["/bin/sh", "-c", "umask > umask.txt; echo private"], stdout="out-%J.txt",
                      umask=0o077)
    default = _submit(prod, alice, home, ["/bin/sh", "-c", "echo default-out"], umask=0o077)
    shared = _submit(prod, alice, home, ["/bin/sh", "-c", "echo shared"], stdout="shared.txt", umask=0o022)
    for j in (private, default, shared):
        assert _wait(prod, j, ("DONE", "EXIT"))["state"] == "DONE"
    out = home / f"out-{private}.txt"
    assert out.read_text() == "private\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.stat().st_uid == alice.uid
    assert (home / "umask.txt").read_text().strip() == "0077"
    assert stat.S_IMODE((home / "umask.txt").stat().st_mode) == 0o600
    assert stat.S_IMODE((home / "shared.txt").stat().st_mode) == 0o644
    jd = prod.top / "jobs" / str(default) / "0"
    stdout = jd / "stdout"
    assert stdout.read_text() == "default-out\n"
    assert stat.S_IMODE(stdout.stat().st_mode) == 0o600 and stdout.stat().st_uid == alice.uid
    for d in (jd, jd.parent):
        st = d.stat()
        assert st.st_uid == 0 and st.st_gid == alice.gid and stat.S_IMODE(st.st_mode) == 0o750, d
    assert stat.S_IMODE((prod.top / "jobs").stat().st_mode) == 0o711
    hostfile = jd / "hostfile"
    assert hostfile.stat().st_uid == alice.uid and stat.S_IMODE(hostfile.stat().st_mode) == 0o600
    assert alice.run(["cat", str(stdout)]).stdout == "default-out\n"  # hers to read
    assert alice.run(["ls", str(jd)]).returncode == 0
    for argv in (["cat", str(stdout)], ["ls", str(jd)], ["cat", str(hostfile)]):
        r = bob.run(argv)
        assert r.returncode != 0 and "Permission denied" in r.stderr, (argv, r)
    # bpeek: the owner reads her output through the daemon, bob may not
    code, text = alice.api(_sock(prod), "GET", f"/jobs/{default}/output")
    assert code == 200 and text == "default-out\n"
    code, _ = bob.api(_sock(prod), "GET", f"/jobs/{default}/output")
    assert code == 403


def _long_topdir(base: Path) -> Path:
    top = base / ("t" * 60) / ("o" * 60)
    assert len(str(top / "run" / "xced.sock")) > 107
    return top


def _tmpdir(base: Path) -> Path:
    """A sticky, world-writable TMPDIR like /tmp, private to this test."""
    t = base / "tmp"
    t.mkdir()
    os.chmod(t, 0o1777)
    return t


@pytest.mark.parametrize("squat", ["directory", "symlink"])
def test_a_squatted_socket_directory_is_refused(base, users, squat):
    """Bob makes the fallback socket directory before the root daemon does (a 0777 directory
    of his, or a symlink to one): xced refuses to start and says whose it is."""
    _, bob = users
    tmp = _tmpdir(base)
    target = tmp / "xce-0"
    if squat == "directory":
        assert bob.run(["mkdir", "-m", "0777", str(target)]).returncode == 0
    else:
        assert bob.run(["mkdir", str(tmp / "bobs")]).returncode == 0
        assert bob.run(["ln", "-s", str(tmp / "bobs"), str(target)]).returncode == 0
    top = _long_topdir(base)
    try:
        started = _production(base, top, TMPDIR=str(tmp))
    except RuntimeError as exc:
        msg = str(exc)
    else:
        started.stop()  # it should have refused: stop it, by its PID, before failing
        pytest.fail("xced started on a squatted socket directory")
    assert "refusing the socket directory" in msg or "symbolic link" in msg, msg
    if squat == "directory":
        assert "belongs to xce-bob" in msg, msg
    assert not (tmp / "bobs").exists() or not any((tmp / "bobs").iterdir())


def test_clients_of_every_user_find_a_socket_moved_for_a_long_topdir(base, users):
    """A TopDir too long for run/xced.sock: the socket goes to the root daemon's own 0711
    directory under TMPDIR, run/xced.sock.path says where, and bob (whose uid differs) finds
    it there and is known as himself."""
    _, bob = users
    tmp = _tmpdir(base)
    top = _long_topdir(base)
    d = _production(base, top, TMPDIR=str(tmp))
    try:
        recorded = (top / "run" / "xced.sock.path").read_text()
        sock = Path(recorded.strip())
        assert recorded.endswith("\n") and sock.parent == tmp / "xce-0" and sock.is_socket()
        st = sock.parent.lstat()
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o711
        assert stat.S_IMODE(sock.stat().st_mode) == 0o666
        found = bob.run(["cat", str(top / "run" / "xced.sock.path")]).stdout.strip()
        code, info = bob.api(found, "GET", "/info")
        assert code == 200 and info["user"] == "xce-bob"
        assert bob.run(["ls", str(sock.parent)]).returncode != 0  # others may not list it
    finally:
        d.stop()
    assert not (top / "run" / "xced.sock.path").exists() and not sock.exists()


@pytest.mark.parametrize("path,mode", [("state/xce.db", 0o666), ("state", 0o777), ("jobs", 0o777),
                                       ("run", 0o777), ("config", 0o777), ("", 0o777),
                                       ("config/xce.yaml", 0o666), ("config/hosts.yaml", 0o664)])
def test_xced_refuses_a_topdir_others_may_write(base, path, mode):
    top = base / "top"
    d = _production(base)
    d.stop()
    os.chmod(top / path if path else top, mode)
    r = subprocess.run([XCED, "--topdir", str(top)], capture_output=True, text=True, timeout=30)
    where = top / path if path else top
    need = {"state/xce.db": "0600", "state": "0700", "jobs": "0711", "config/xce.yaml": "0644",
            "config/hosts.yaml": "0644"}.get(path, "0755")
    assert r.returncode == 1 and f"{where}: mode {mode:04o}" in r.stderr and f"needs mode {need}" in r.stderr, r.stderr
    assert f"chmod {need} {where}" in r.stderr, r.stderr


@pytest.mark.parametrize("path", ["state/xce.db", "config/hosts.yaml"])
def test_xced_refuses_a_store_or_config_file_of_another_user(base, users, path):
    _, bob = users
    top = base / "top"
    _production(base).stop()
    os.chown(top / path, bob.uid, bob.gid)
    r = subprocess.run([XCED, "--topdir", str(top)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and f"{top / path}: mode" in r.stderr and "owned by xce-bob" in r.stderr, r.stderr
    assert "chown root" in r.stderr, r.stderr


def test_an_older_topdirs_readable_store_is_tightened(base):
    top = base / "top"
    _production(base).stop()
    os.chmod(top / "state", 0o755)
    os.chmod(top / "state" / "xce.db", 0o644)
    os.chmod(top / "jobs", 0o755)
    d = Daemon(top).start()
    try:
        assert stat.S_IMODE((top / "state").stat().st_mode) == 0o700
        assert stat.S_IMODE((top / "state" / "xce.db").stat().st_mode) == 0o600
        assert stat.S_IMODE((top / "jobs").stat().st_mode) == 0o711
    finally:
        d.stop()


def test_only_the_daemons_own_user_may_assert_users_in_test_mode(base, users):
    """A root daemon in test mode runs an asserted user's job as root: bob may not assert
    anyone (403); unasserted, he is himself and his job runs as him."""
    alice, bob = users
    top = base / "top"
    top.mkdir(mode=0o755)
    write_config(top, mode="test")
    d = Daemon(top).start()
    try:
        home = _home(base, bob)
        argv = [CURL, "-s", "-w", "\n%{http_code}", "--unix-socket", str(_sock(d)), "-H", "X-XCE-As-User: root",
                "http://xced/xce/v1/info"]
        r = bob.run(argv)
        assert r.stdout.endswith("\n403") and "only for root" in r.stdout, r.stdout
        code, info = bob.api(_sock(d), "GET", "/info")
        assert code == 200 and info["user"] == "xce-bob" and info["asserted_user"] is False
        job = _submit(d, bob, home, ["/bin/sh", "-c", "id -u > me.txt"])
        assert _wait(d, job, ("DONE", "EXIT"))["run_as"] == "xce-bob"
        assert (home / "me.txt").read_text().strip() == str(bob.uid)
    finally:
        d.stop()


def test_peek_reads_only_a_regular_file_of_the_jobs_user(prod, users, base):
    """xcecli peek reads the -o file as root: alice swapping it for a symlink to a root-only
    file gets nothing of it, and a FIFO in its place neither blocks the daemon nor anyone."""
    alice, bob = users
    home = _home(base, alice)
    secret = base / "root-only"
    secret.write_text("root:$6$hash\n")
    os.chmod(secret, 0o600)
    job = _running(prod, alice, home, ["sleep", "60"], stdout="o.txt")
    assert alice.run(["sh", "-c", f"rm o.txt && ln -s {secret} o.txt"], cwd=str(home)).returncode == 0
    code, out = alice.api(_sock(prod), "GET", f"/jobs/{job}/output")
    assert code == 422 and "root:$6$hash" not in json.dumps(out), out
    assert alice.run(["sh", "-c", "rm o.txt && mkfifo o.txt"], cwd=str(home)).returncode == 0
    code, out = alice.api(_sock(prod), "GET", f"/jobs/{job}/output")
    assert code == 422, out
    code, hosts = bob.api(_sock(prod), "GET", "/hosts")  # the daemon still answers everyone
    assert code == 200 and hosts["hosts"][0]["name"] == "h1"


def test_tcp_takes_no_user_request_in_test_mode_either(base, users):
    """Over TCP only key-authenticated peers are taken (KEY-3), so even a test-mode daemon
    takes no asserted user there: bob may not submit as root over TCP (401, no session)."""
    _, bob = users
    top = base / "top"
    top.mkdir(mode=0o755)
    write_config(top, mode="test")
    with open(top / "config" / "xce.yaml", "a") as f:
        f.write("listen: {host: 127.0.0.1, port: 0}\n")
    d = Daemon(top).start()
    try:
        port = (top / "run" / "xced.port").read_text().strip()
        r = bob.run([CURL, "-s", "-w", "\n%{http_code}", "-H", "X-XCE-As-User: root", "-H",
                     "Content-Type: application/json", "--data-binary", '{"argv": ["id"], "cwd": "/"}',
                     f"http://127.0.0.1:{port}/xce/v1/jobs"])
        assert r.stdout.endswith("\n401") and "over TCP" in r.stdout, r.stdout
        assert Client(_sock(d)).request("GET", "/jobs", params={"user": "all"}).json()["jobs"] == []
    finally:
        d.stop()


# ---------------------------------------------------------------- presets between two users (PRE-1, PRE-5)

REPO = Path(__file__).resolve().parents[2]


def user_entry(user: User, module: str, marker: str) -> list[str] | None:
    """The argv prefix that runs `module`'s `main()` (e.g. "xcecli.app") as `user`: this
    interpreter if the user can reach it, else the system's interpreter of the same version
    with this venv's packages on its path (the venv's own interpreter may live under root's
    0700 home). Checked by `--help` printing `marker`; None when the user can run neither."""
    import sys
    import sysconfig

    site = sysconfig.get_paths()["purelib"]
    boot = (f"import site, sys; site.addsitedir({site!r}); sys.path.insert(0, {str(REPO)!r}); "
            f"from {module} import main; main()")
    for py in (sys.executable, f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"):
        try:
            r = user.run([py, "-c", boot, "--help"])
        except OSError:  # the user may not execute it
            continue
        if r.returncode == 0 and marker in r.stdout:
            return [py, "-c", boot]
    return None


def _user_xcecli(user: User) -> list[str] | None:
    """The real xcecli as `user` may run it (`user_entry`), or None."""
    return user_entry(user, "xcecli.app", "presets")


def test_presets_are_private_and_move_between_two_users_through_export_and_import(users, base):
    """PRE-1: xce-alice's presets (which may carry --env values) are hers alone: the
    directory is 0700, each file 0600, and xce-bob can neither read them nor list them.
    PRE-5: `xcecli presets export` as alice piped into `xcecli presets import -` as bob gives
    bob the same preset (the same hash), in a file of his own."""
    alice, bob = users
    cli_a, cli_b = _user_xcecli(alice), _user_xcecli(bob)
    if cli_a is None or cli_b is None:
        pytest.skip("no Python interpreter of this version that the test users may run")
    ha, hb = _home(base, alice), _home(base, bob)
    env_a = {"XDG_CONFIG_HOME": str(ha / ".config"), "XCE_SOCKET": str(base / "no-daemon.sock")}
    env_b = {"XDG_CONFIG_HOME": str(hb / ".config"), "XCE_SOCKET": str(base / "no-daemon.sock")}
    r = alice.run([*cli_a, "presets", "create", "train", "-q", "normal", "-n", "2", "--env", f"TOKEN={SECRET}"],
                  env=env_a)
    assert r.returncode == 0, r.stderr
    d = ha / ".config" / "xce" / "presets"
    for p, mode in ((d, 0o700), (d / "train.yaml", 0o600), (d / ".train.json", 0o600)):
        st = p.stat()
        assert (stat.S_IMODE(st.st_mode), st.st_uid) == (mode, alice.uid), p
    # bob, even pointed at alice's config dir, reads nothing of it
    os.chmod(ha, 0o755)  # her home searchable: only the presets directory itself keeps bob out
    r = bob.run(["cat", str(d / "train.yaml")])
    assert r.returncode != 0 and SECRET not in r.stdout
    r = bob.run([*cli_b, "presets", "show", "train"], env={**env_b, "XDG_CONFIG_HOME": str(ha / ".config")})
    assert r.returncode == 1 and "Permission denied" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert SECRET not in r.stdout + r.stderr
    r = bob.run([*cli_b, "presets", "list", "--local"], env={**env_b, "XDG_CONFIG_HOME": str(ha / ".config")})
    assert r.returncode == 1 and "cannot list the presets" in r.stderr and SECRET not in r.stdout
    # alice | bob through a real pipe, each process as its own user
    export = subprocess.Popen([*cli_a, "presets", "export", "train"], user=alice.uid, group=alice.gid, extra_groups=[],
                              env={"PATH": "/usr/bin:/bin", "HOME": "/", **env_a}, cwd="/", stdout=subprocess.PIPE)
    imp = subprocess.run([*cli_b, "presets", "import", "-"], user=bob.uid, group=bob.gid, extra_groups=[],
                         env={"PATH": "/usr/bin:/bin", "HOME": "/", **env_b}, cwd="/", stdin=export.stdout,
                         capture_output=True, text=True, timeout=60)
    export.stdout.close()
    assert export.wait(30) == 0 and imp.returncode == 0, imp.stderr
    assert "preset train imported" in imp.stderr
    shown_a = json.loads(alice.run([*cli_a, "presets", "show", "train", "--json"], env=env_a).stdout)
    shown_b = json.loads(bob.run([*cli_b, "presets", "show", "train", "--json"], env=env_b).stdout)
    assert shown_b["values"] == shown_a["values"] and shown_b["hash"] == shown_a["hash"]
    fb = hb / ".config" / "xce" / "presets" / "train.yaml"
    assert (stat.S_IMODE(fb.stat().st_mode), fb.stat().st_uid) == (0o600, bob.uid)


def test_a_host_key_is_readable_by_its_owner_alone(users, base):
    """KEY-2 as a second real user sees it: xce-bob can read a TopDir's public key but neither
    its private key nor the keys directory's listing; and a TopDir whose key file someone
    loosened is refused by read_private_key until it is 0600 again."""
    import sys

    from xced.auth.keys import KeyProblem, read_private_key

    _, bob = users
    top = base / "top"
    assert subprocess.run([str(Path(sys.executable).parent / "xceadmin"), "init", str(top)],
                          capture_output=True).returncode == 0
    r = subprocess.run([str(Path(sys.executable).parent / "xceadmin"), "keys", "gen", "--topdir", str(top)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    key = top / "keys" / "host.key"
    assert bob.run(["cat", str(key)]).returncode != 0
    assert bob.run(["ls", str(top / "keys")]).returncode != 0
    os.chmod(top / "keys", 0o755)  # even with the directory opened up, the file stays his alone
    r = bob.run(["cat", str(key)])
    assert r.returncode != 0 and "PRIVATE KEY" not in r.stdout
    assert bob.run(["cat", str(top / "keys" / "host.pub")]).stdout.startswith("ssh-ed25519 ")
    os.chmod(key, 0o644)
    with pytest.raises(KeyProblem, match="permissions 0644 are too open"):
        read_private_key(key)


# ---------------------------------------------------------------- a pack as a second real user (CLI-7, D-7)

def test_a_pack_submitted_by_a_real_user_runs_as_her_and_keeps_her_environment_hers(prod, users, base):
    """xce-alice runs the real xcecli (its start-up fast path: xcecli.__main__) with
    `submit --pack -` against a root production xced: each job of the pack is hers and runs
    as her, her environment (sent once for the pack) reaches every job, and xce-bob sees
    neither it nor her output."""
    alice, bob = users
    cli_a = user_entry(alice, "xcecli.__main__", "presets")
    if cli_a is None:
        pytest.skip("no Python interpreter of this version that the test users may run")
    home = _home(base, alice)
    env = {"XCE_TOPDIR": str(prod.top), "MY_SECRET": SECRET}
    pack = "# two jobs\n-o who.%J -- id -un\n-o env.%J -- sh -c 'echo $MY_SECRET'\n"
    r = subprocess.run([*cli_a, "submit", "--parsable", "--pack", "-"], user=alice.uid, group=alice.gid,
                       extra_groups=[], umask=0o077, cwd=str(home), input=pack, capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C", **env}, timeout=60)
    assert r.returncode == 0, r.stderr
    who, shown = (int(x) for x in r.stdout.split())
    for job in (who, shown):
        j = _wait(prod, job, ("DONE", "EXIT"))
        assert (j["state"], j["user"], j["run_as"]) == ("DONE", "xce-alice", "xce-alice"), j
    out = home / f"who.{who}"
    assert out.read_text() == "xce-alice\n" and out.stat().st_uid == alice.uid
    assert stat.S_IMODE(out.stat().st_mode) == 0o600  # her umask, sent with the pack
    assert (home / f"env.{shown}").read_text() == SECRET + "\n"
    code, mine = alice.api(_sock(prod), "GET", f"/jobs/{shown}")
    assert code == 200 and mine["env"]["MY_SECRET"] == SECRET
    code, theirs = bob.api(_sock(prod), "GET", f"/jobs/{shown}")
    assert code == 200 and theirs["env"] is None and SECRET not in json.dumps(theirs)
    assert bob.run(["cat", str(home / f"env.{shown}")]).returncode != 0


# ------------------------------------- a #BSUB script on stdin as a second real user (CLI-8, JOB-12, D-7)

def test_a_bsub_script_on_stdin_is_kept_and_run_as_its_user_only(prod, users, base):
    """xce-alice pipes a #BSUB script into the real `bsub` (LSF's `bsub < job.lsf`) against a
    root production xced: the job is hers and runs as her, its #BSUB -oo file is hers with
    her umask, and the script the store kept is written into the job's directory 0700 and
    owned by her (JOB-12), where xce-bob can read neither it nor her output. The TopDir's
    lsf.conf (LSF_ENVDIR for pipeline tools) is readable by bob too, and bob's bkill of her
    job is refused with LSF's exit code."""
    alice, bob = users
    cli = user_entry(alice, "xcecli.__main__", "presets")
    if cli is None:
        pytest.skip("no Python interpreter of this version that the test users may run")
    bsub = [cli[0], "-c", cli[2].replace("from xcecli.__main__ import main", "from xcecli.lsf.bsub import main")]
    home = _home(base, alice)
    script = "#!/bin/sh\n#BSUB -J mine\n#BSUB -oo out.%J\nid -un\necho \"$MY_SECRET\"\n"
    env = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C", "XCE_TOPDIR": str(prod.top), "MY_SECRET": SECRET}
    r = subprocess.run(bsub, user=alice.uid, group=alice.gid, extra_groups=[], umask=0o077, cwd=str(home),
                       input=script, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("Job <"), (r.stdout, r.stderr)
    job = int(r.stdout.split("<", 1)[1].split(">", 1)[0])
    j = _wait(prod, job, ("DONE", "EXIT"))
    assert (j["state"], j["user"], j["run_as"], j["name"]) == ("DONE", "xce-alice", "xce-alice", "mine"), j
    out = home / f"out.{job}"
    assert out.read_text() == f"xce-alice\n{SECRET}\n" and out.stat().st_uid == alice.uid
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    kept = prod.top / "jobs" / str(job) / "0" / "script"
    assert kept.read_text() == script and kept.stat().st_uid == alice.uid
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700
    for path in (kept, out):
        assert bob.run(["cat", str(path)]).returncode != 0, path
    conf = bob.run(["cat", str(prod.top / "lsf.conf")])
    assert conf.returncode == 0 and "LSF_UNIT_FOR_LIMITS=MB" in conf.stdout, conf.stderr
    bkill = [cli[0], "-c", cli[2].replace("from xcecli.__main__ import main", "from xcecli.lsf.bkill import main")]
    r = subprocess.run([*bkill, str(job)], user=bob.uid, group=bob.gid, extra_groups=[], cwd="/",
                       capture_output=True, text=True, env={**env, "MY_SECRET": ""}, timeout=60)
    assert r.returncode == 255 and "user xce-bob may not kill it" in r.stderr, (r.stdout, r.stderr)


def test_one_user_cannot_hold_every_connection_of_the_socket(prod, users, base):
    """D-8 (a second fresh tester's finding): a local user who opens many idle connections
    to the Unix socket holds at most MAX_CONNECTIONS_PER_USER of them; the others are closed
    as they are made (logged once), and meanwhile another user's request and root's are
    answered. Once they close, that user is served again."""
    from xced.server.auth import MAX_CONNECTIONS_PER_USER

    import socket

    alice, bob = users
    n = MAX_CONNECTIONS_PER_USER + 16
    said_r, said_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # alice's process: n idle connections, then how many the daemon closed
        try:
            os.close(said_r)
            os.close(go_w)  # else its own copy keeps the pipe open and it waits forever
            os.setgroups([])
            os.setgid(alice.gid)
            os.setuid(alice.uid)
            socks = []
            for _ in range(n):
                s = socket.socket(socket.AF_UNIX)
                s.connect(str(_sock(prod)))
                socks.append(s)
            time.sleep(1.5)
            closed = 0
            for s in socks:
                s.setblocking(False)
                try:
                    closed += s.recv(1) == b""
                except BlockingIOError:
                    pass
            os.write(said_w, f"{closed}\n".encode())
            os.read(go_r, 1)  # hold them until the test is done
        finally:
            os._exit(0)
    os.close(said_w)
    os.close(go_r)
    try:
        with os.fdopen(said_r) as said:
            assert int(said.readline()) == 16  # the ones past the cap were closed by the daemon
        code, out = bob.api(_sock(prod), "GET", "/info")
        assert code == 200, out
        assert prod.cli("jobs", "-u", "all").returncode == 0
        code, out = alice.api(_sock(prod), "GET", "/info")
        assert code != 200  # alice is at her cap: her next connection is closed
    finally:
        os.close(go_w)
        os.waitpid(pid, 0)
    code, out = alice.api(_sock(prod), "GET", "/info")
    assert code == 200, out  # her connections closed: served again
    log = prod.log.read_text()
    assert log.count("connections to the Unix socket, the most one user may") == 1, log[-2000:]

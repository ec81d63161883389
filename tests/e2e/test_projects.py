"""Projects end to end (PRJ-1..PRJ-8, SUBMIT-1): a real xced in test mode whose projects.yaml
and rbac.yaml are compiled by `xceadmin build`, several asserted users driving the real
xcecli: the project and basis of each job, refusals naming the projects a user may use, the
environment, listings by project, quotas that hold jobs back without blocking others, the
tree of `xcecli projects`, and system holds when a config change removes a membership."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from tests.conftest import XCEADMIN, Daemon, write_config

pytestmark = pytest.mark.timeout(180)

PROJECTS = textwrap.dedent("""\
    groups:
      hep: [erin, frank]
    projects:
      /physics:
        share: 75%
        admins: [alice]
      /physics/hep:
        quota: {slots: 2}
        member_quota: {slots: 1}
        members: [bob, erin, "@hep"]
      /physics/astro:
        members: [dave]
      /bio:
        share: 25%
        members: [gina]
    default_projects:
      hep: /physics/hep
    """)
RBAC = textwrap.dedent("""\
    roles:
      operator: [job:view, job:kill, job:requeue]
    bindings:
      - {role: operator, users: [oscar], groups: [], scope: /physics}
    """)


def build(top, *args: str, user: str = "admin") -> subprocess.CompletedProcess:
    env = {**os.environ, "XCE_TEST_USER": user}
    env.pop("XCE_SOCKET", None)
    return subprocess.run([XCEADMIN, "build", "--topdir", str(top), *args], capture_output=True, text=True,
                          env=env, timeout=60)


def fill(d: Daemon) -> list[int]:
    """Fill the host's 4 slots: 3 for /physics (75%), which /physics/astro draws from, and 1 for
    /bio (25%); the IDs of dave's and gina's running jobs."""
    fillers = [d.submit("-n", "3", "-P", "/physics/astro", "--", "sleep", "60", user="dave"),
               d.submit("-P", "/bio", "--", "sleep", "60", user="gina")]
    for f, who in zip(fillers, ("dave", "gina")):
        d.wait_state(f, ("RUN",), user=who)
    return fillers


@pytest.fixture
def cluster(topdir):
    write_config(topdir, slots=4)
    (topdir / "config" / "projects.yaml").write_text(PROJECTS)
    (topdir / "config" / "rbac.yaml").write_text(RBAC)
    r = build(topdir)
    assert r.returncode == 0 and "4 projects" in r.stdout, r.stderr
    d = Daemon(topdir).start()
    try:
        yield d
    finally:
        d.stop()


def test_submits_record_their_project_and_basis_and_the_job_sees_it(cluster, tmp_path):
    d = cluster
    jid = d.submit("-o", "env.txt", "--", "sh", "-c", "echo $XCE_PROJECT $LSB_PROJECT_NAME", user="erin",
                   cwd=tmp_path)
    j = d.wait_state(jid, ("DONE",), user="erin")
    assert (j["project"], j["auth_basis"]) == ("/physics/hep", "member")  # erin's group's default (PRJ-3)
    assert (tmp_path / "env.txt").read_text() == "/physics/hep /physics/hep\n"
    r = d.cli("show", str(jid), user="erin", check=True)
    assert "/physics/hep (let in as: member)" in r.stdout
    r = d.cli("submit", "-P", "/physics", "--", "true", user="dave")
    assert r.returncode == 1
    assert r.stderr.strip() == ("xcecli: error: user dave is not a member of project /physics; projects you may "
                                "use: /physics/astro (submit with -P PATH)")
    r = d.cli("submit", "-P", "physics", "--", "true", user="dave")
    assert r.returncode == 1 and "a project is named by its path" in r.stderr
    r = d.cli("submit", "--", "true", user="nobody")
    assert r.returncode == 1 and "no project given (-P) and user nobody has no default project" in r.stderr
    r = d.cli("jobs", "-u", "all", "-P", "bad path", user="gina")  # refused as at submit, never an empty list
    assert r.returncode == 1 and "-P 'bad path': a project is named by its path" in r.stderr, r.stderr
    r = d.cli("submit", "-P", "/" + "a" * 300, "--", "true", user="gina")
    assert r.returncode == 1 and "has 301 characters, more than the 255 a project path may have" in r.stderr
    g = d.submit("-P", "/bio", "--", "true", user="gina")
    out = d.cli("jobs", "-u", "all", "-a", "-P", "/bio", "-o", "id user project", user="gina", check=True).stdout
    assert [line.split() for line in out.splitlines()[1:]] == [[str(g), "gina", "/bio"]], out


def test_a_quota_holds_jobs_back_without_blocking_other_projects(cluster, tmp_path):
    """PRJ-7: /physics/hep may hold 2 slots, each member 1; once bob holds his, his next job
    pends naming the cap, while erin and a /bio job behind it in the same queue start."""
    d = cluster
    b1 = d.submit("-P", "/physics/hep", "--", "sleep", "60", user="bob")
    d.wait_state(b1, ("RUN",), user="bob")
    b2 = d.submit("-P", "/physics/hep", "--", "sleep", "60", user="bob")
    e1 = d.submit("--", "sleep", "60", user="erin")
    g1 = d.submit("-P", "/bio", "--", "sleep", "60", user="gina")
    d.wait_state(e1, ("RUN",), user="erin")
    d.wait_state(g1, ("RUN",), user="gina")
    j = d.show(b2, user="bob")
    assert j["state"] == "PEND"
    why = d.cli("why", str(b2), user="bob", check=True).stdout
    assert "user bob at member_quota of /physics/hep: 1/1 slots" in why, why
    assert "project /physics/hep at quota: 2/2 slots" in why, why
    tree = json.loads(d.cli("projects", "--json", user="alice", check=True).stdout)
    by = {p["path"]: p for p in tree["projects"]}
    assert set(by) == {"/physics", "/physics/hep", "/physics/astro"}  # alice administers /physics, not /bio
    assert by["/physics/hep"]["use"]["slots"] == 2 and by["/physics/hep"]["pending"] == 1
    assert by["/physics"]["use"]["slots"] == 2
    assert by["/physics"]["share"]["slots"] == 3  # 75% of 4 slots, rounded down
    shown = d.cli("projects", user="alice", check=True).stdout
    assert "hep" in shown and "quota 2 slots" in shown and "pending 1" in shown, shown
    # the project admin of /physics kills bob's job; oscar's role (job:kill over /physics) may too,
    # but not gina's job in /bio
    r = d.cli("kill", str(g1), user="oscar")
    assert r.returncode == 1 and "may not kill it" in r.stderr, r.stderr
    d.cli("kill", str(b1), user="alice", check=True)
    d.wait_state(b2, ("RUN",), user="bob")  # bob's slot is free again: his next job starts
    for jid, who in ((b2, "oscar"), (e1, "erin"), (g1, "gina")):
        d.cli("kill", str(jid), user=who, check=True)


def test_a_removed_membership_holds_pending_jobs_until_restored(cluster, tmp_path):
    """PRJ-5: a config that drops bob from /physics/hep holds his pending jobs (system hold,
    never run, never killed); restoring it releases that hold, and a user hold stays."""
    d = cluster
    fillers = fill(d)
    a = d.submit("-P", "/physics/hep", "--", "true", user="bob")
    b = d.submit("-P", "/physics/hep", "--", "true", user="bob")
    d.cli("stop", str(b), user="bob", check=True)
    (d.top / "config" / "projects.yaml").write_text(PROJECTS.replace("members: [bob, erin,", "members: [erin,"))
    r = build(d.top, "--apply")
    assert r.returncode == 0, r.stderr
    assert f"job {a}: user bob is no longer a member of project /physics/hep" in r.stderr
    ja = d.show(a, user="bob")
    assert ja["state"] == "PSUSP" and ja["elements"][0]["holds"] == ["system"]
    assert "no longer a member of project /physics/hep" in d.cli("why", str(a), user="bob", check=True).stdout
    assert d.show(b, user="bob")["elements"][0]["holds"] == ["system", "user"]
    (d.top / "config" / "projects.yaml").write_text(PROJECTS)
    assert build(d.top, "--apply").returncode == 0
    assert d.show(a, user="bob")["state"] == "PEND"
    jb = d.show(b, user="bob")
    assert jb["state"] == "PSUSP" and jb["elements"][0]["holds"] == ["user"]
    d.cli("kill", str(fillers[0]), user="dave", check=True)
    d.wait_state(a, ("DONE",), user="bob")
    d.cli("kill", str(fillers[1]), user="gina", check=True)


# ---------------------------------------------------------------- real Unix users and system groups

from tests.e2e.test_users import _home, _sock, base, users  # noqa: E402,F401 (fixtures of test_users)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: it makes Unix users and groups and runs a root xced")
def test_real_users_are_let_in_by_their_system_groups(users, base):  # noqa: F811
    """PRJ-2, PRJ-3, SUBMIT-1 with real users against a production xced running as root: the
    project's members are a system group (`@xce-lab`), which xce-bob belongs to and xce-alice
    does not; xce-bob's submit without -P gets that group's default project, as a member;
    xce-alice is refused naming the project, and sees no project in `GET /projects`."""
    import fcntl
    import grp

    alice, bob = users
    with open("/tmp/xce-test-useradd.lock", "w") as lock:  # pytest-xdist workers change groups one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            grp.getgrnam("xce-lab")
        except KeyError:
            subprocess.run(["groupadd", "xce-lab"], check=True, capture_output=True)
        if bob.name not in grp.getgrnam("xce-lab").gr_mem:
            subprocess.run(["usermod", "-aG", "xce-lab", bob.name], check=True, capture_output=True)
    top = base / "top"
    top.mkdir(mode=0o755)
    write_config(top, mode="production", admins=("root",))
    (top / "config" / "projects.yaml").write_text(textwrap.dedent("""\
        projects:
          /lab:
            members: ["@xce-lab"]
        default_projects:
          xce-lab: /lab
        """))
    d = Daemon(top).start()
    try:
        sock = _sock(d)
        body = {"argv": ["/bin/true"], "cwd": str(_home(base, bob)), "env": {"PATH": "/usr/bin:/bin"}}
        code, out = bob.api(sock, "POST", "/jobs", body)
        assert code == 200 and out["project"] == "/lab", out
        code, shown = bob.api(sock, "GET", f"/jobs/{out['job_id']}")
        assert (shown["project"], shown["auth_basis"], shown["user"]) == ("/lab", "member", "xce-bob")
        code, listed = bob.api(sock, "GET", "/projects")
        assert [p["path"] for p in listed["projects"]] == ["/lab"]
        body["cwd"] = str(_home(base, alice))
        code, out = alice.api(sock, "POST", "/jobs", {**body, "project": "/lab"})
        assert code == 403 and out["error"]["message"].startswith("user xce-alice is not a member of project /lab;")
        code, listed = alice.api(sock, "GET", "/projects")
        assert code == 200 and listed["projects"] == []
    finally:
        d.stop()


def test_resume_of_a_job_the_system_holds_too_says_it_stays_held(cluster):
    """D-5: a user's resume releases the user hold only; the answer says the system hold stays."""
    d = cluster
    fillers = fill(d)
    b = d.submit("-P", "/physics/hep", "--", "true", user="bob")
    d.cli("stop", str(b), user="bob", check=True)
    (d.top / "config" / "projects.yaml").write_text(PROJECTS.replace("members: [bob, erin,", "members: [erin,"))
    assert build(d.top, "--apply").returncode == 0
    r = d.cli("resume", str(b), user="bob", check=True)
    assert r.stdout.strip() == (f"Job <{b}>: user hold released: {b}; still held by the system (an admin releases "
                                f"it with `xcecli release {b}`)"), r.stdout
    assert d.show(b, user="bob")["state"] == "PSUSP"
    d.cli("kill", str(fillers[0]), user="dave", check=True)
    d.cli("kill", str(fillers[1]), user="gina", check=True)

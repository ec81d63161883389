"""Permissions end to end (RBAC-1..RBAC-4, PRJ-2, PRJ-8, D-6, D-7): a real xced in test mode
with a projects and rbac config, every route of the API asked by each of these callers, and
what each of them sees: the status, and for a refusal (403) the one-line message naming who may.

    owner        frank, member of /physics/hep by the group @hep, owner of the hep job
    member       bob, member of /physics/hep (not the job's owner)
    non-member   nora
    parent admin alice, admin of /physics
    role holder  oscar, role operator (job:view, job:kill, job:requeue) bound at /physics
    admins       admin (xce.yaml) and carol (a role with cluster:admin bound at /)
    root         the test process itself over SO_PEERCRED, not asserted and not named an admin

The config goes in through PUT /config (CFG-3) built in Python, as `xceadmin build --apply`
sends it: the compiler of projects.yaml and rbac.yaml is another change's.

One more test plays a real second Unix user against a production xced running as root
(needs root, as CI runs; the users are those of tests/e2e/test_users.py).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import Daemon, _daemon_fixture, short_tmpdir, write_config
from tests.e2e.test_users import SECRET, _home, _running, _sock, _wait, base, users  # noqa: F401 (fixtures)
from tests.unit.test_rbac import PROJECTS, RBAC, ROUTES
from xced.api.client import Client
from xced.api.errors import XceError
from xced.api.models import JobOut, ProjectList
from xced.config.loader import load_cluster_config

pytestmark = pytest.mark.timeout(180)

ME = pwd.getpwuid(os.geteuid()).pw_name  # root in CI: the caller nobody named an admin
HEP_SECRET, BIO_SECRET = "hep-s3cret-41", "bio-s3cret-42"
CALLERS = ("frank", "bob", "nora", "alice", "oscar", "admin", "carol", ME)
ADMINS = {"admin", "carol"}
OPERATOR = {"job:view", "job:kill", "job:requeue"}
ALL = {"job:view", "job:kill", "job:modify", "job:requeue"}
#: (caller, job) -> the job permissions it holds there; the jobs: frank's in /physics/hep, gina's in /bio
HOLDS = {("frank", "hep"): ALL, ("alice", "hep"): ALL, ("oscar", "hep"): OPERATOR,
         **{(a, j): ALL for a in ADMINS for j in ("hep", "bio")}}
#: who may submit to /physics/hep (PRJ-2: members; RBAC-3: not its parent's admin)
SUBMITTERS = {"frank", "bob", *ADMINS}
#: who sees which projects (PRJ-8)
VISIBLE = {"frank": ["/physics/hep"], "bob": ["/physics/hep"], "nora": [], "oscar": [], ME: [],
           "alice": ["/physics", "/physics/hep", "/physics/astro"],
           **{a: ["/physics", "/physics/hep", "/physics/astro", "/bio"] for a in ADMINS}}


def client(d: Daemon, who: str) -> Client:
    """A client of `who`: an asserted test user, or the test process itself (ME)."""
    return Client(d.top / "run" / "xced.sock", as_user=None if who == ME else who)


def ask(c: Client, method: str, path: str, body=None, params=None) -> tuple[int, object]:
    """(status, JSON answer or text; for an error its message)."""
    try:
        r = c.request(method, path, json=body, params=params)
    except XceError as e:
        return e.status, e.message
    try:
        return r.status, json.loads(r.body)
    except ValueError:
        return r.status, r.text


def apply(d: Daemon, projects=PROJECTS, rbac=RBAC) -> None:
    """Apply the daemon's own config plus `projects` and `rbac` through PUT /config, as admin."""
    cfg = load_cluster_config(d.top).config.model_copy(update={"projects": projects, "rbac": rbac})
    with client(d, "admin") as c:
        c.request("PUT", "/config", json={"config": cfg.model_dump(mode="json"), "hash": cfg.content_hash()})


def submit(d: Daemon, who: str, project: str, argv: list[str], cwd: Path, env: dict | None = None) -> int:
    with client(d, who) as c:
        return c.request("POST", "/jobs", json={"argv": argv, "cwd": str(cwd), "project": project,
                                                "env": env or {}}).json()["job_id"]


@pytest.fixture(scope="module")
def cluster():
    """A test-mode xced (8 slots) with the projects and roles of tests/unit/test_rbac.py."""
    top = short_tmpdir()
    try:
        for d in _daemon_fixture(top, slots=8):
            apply(d)
            yield d
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def done_jobs(cluster, tmp_path_factory):
    """frank's finished job in /physics/hep and gina's in /bio, each with a secret in its
    environment and a line of output."""
    cwd = tmp_path_factory.mktemp("jobs")
    hep = submit(cluster, "frank", "/physics/hep", ["sh", "-c", "echo out-hep"], cwd, {"MY_SECRET": HEP_SECRET})
    bio = submit(cluster, "gina", "/bio", ["sh", "-c", "echo out-bio"], cwd, {"MY_SECRET": BIO_SECRET})
    for j in (hep, bio):
        assert _wait(cluster, j, ("DONE", "EXIT"))["state"] == "DONE"
    return {"hep": hep, "bio": bio}


def _route_cases(jobs: dict[str, int], cwd: str):
    """(route key of tests/unit/test_rbac.ROUTES, method, path, body, params, which job or
    None, the permission asked, the statuses an allowed caller may get). The routes that
    change a job come after those that read it, and requeue (which runs it again) last; a
    finished job makes kill, stop, resume and release answer 409 once let through."""
    view = "cluster:view"
    for job in ("hep", "bio"):
        jid = jobs[job]
        jp = "/xce/v1/jobs/{job_id:jobid}"
        yield (("GET", jp), "GET", f"/jobs/{jid}", None, None, job, view, {200})
        yield (("GET", jp + "/events"), "GET", f"/jobs/{jid}/events", None, None, job, view, {200})
        yield (("GET", jp + "/why"), "GET", f"/jobs/{jid}/why", None, None, job, view, {200})
        yield (("GET", jp + "/wait"), "GET", f"/jobs/{jid}/wait", None, {"timeout": 0}, job, view, {200})
        yield (("GET", jp + "/output"), "GET", f"/jobs/{jid}/output", None, None, job, "job:view", {200})
        for act, perm in (("kill", "job:kill"), ("stop", "job:modify"), ("resume", "job:modify"),
                          ("release", "cluster:admin")):
            yield (("POST", f"{jp}/{act}"), "POST", f"/jobs/{jid}/{act}", {}, None, job, perm, {409})
        yield (("POST", jp + "/launch"), "POST", f"/jobs/{jid}/launch", {"host": "h1", "argv": ["true"]}, None, job,
               "token-or-owner", {409})
        yield (("POST", jp + "/requeue"), "POST", f"/jobs/{jid}/requeue", {}, None, job, "job:requeue", {200, 409})
    for path in ("/info", "/hosts", "/hosts/events", "/queues", "/apps", "/apps/default", "/jobs", "/jobs/table",
                 "/projects", "/params"):
        key = ("GET", "/xce/v1/apps/{name}" if path == "/apps/default" else "/xce/v1" + path)
        yield (key, "GET", path, None, {"user": "all"} if path.startswith("/jobs") else None, None, view, {200})
    # RBAC-4: preset routes need no permission (the cluster has no server preset: 404 for a name)
    yield (("GET", "/xce/v1/presets"), "GET", "/presets", None, None, None, "none", {200})
    yield (("GET", "/xce/v1/presets/{name}"), "GET", "/presets/site-default", None, None, None, "none", {404})
    # KEY-2: the trusted list, admins only; an admin's request is refused for its body, so
    # that the matrix changes nothing (a key that is no key, an unknown fingerprint, a role)
    yield (("GET", "/xce/v1/keys"), "GET", "/keys", None, None, None, "cluster:admin", {200})
    yield (("POST", "/xce/v1/keys/trust"), "POST", "/keys/trust", {"public_key": "not a key", "host": "h1",
                                                                   "roles": ["worker"]}, None, None,
           "cluster:admin", {422})
    yield (("POST", "/xce/v1/keys/revoke"), "POST", "/keys/revoke", {"fingerprint": "SHA256:none"}, None, None,
           "cluster:admin", {404})
    yield (("POST", "/xce/v1/keys/token"), "POST", "/keys/token", {"role": "nope", "expires_s": 60}, None, None,
           "cluster:admin", {422})
    yield (("POST", "/xce/v1/debug/clock"), "POST", "/debug/clock", {"advance_s": -1}, None, None, "cluster:admin",
           {422, 403})
    sub = {"argv": ["true"], "cwd": cwd, "project": "/physics/hep"}
    # many jobs at once: open to all (cluster:view); job:kill is checked per target, in the answer
    # (test_a_many_job_kill_refuses_each_job_as_the_one_job_route_would)
    yield (("POST", "/xce/v1/jobs/kill"), "POST", "/jobs/kill", {"targets": [{"job_id": jobs["hep"]}]}, None, None,
           view, {200})
    yield (("POST", "/xce/v1/jobs/dry-run"), "POST", "/jobs/dry-run", sub, None, None, "project:submit", {200})
    yield (("POST", "/xce/v1/jobs"), "POST", "/jobs", sub, None, None, "project:submit", {200})
    yield (("POST", "/xce/v1/jobs/pack"), "POST", "/jobs/pack", {"env": {}, "jobs": [sub, sub]}, None, None,
           "project:submit", {200})
    yield (("PUT", "/xce/v1/config"), "PUT", "/config", {"config": {}, "hash": "0" * 64}, None, None, "cluster:admin",
           {422})
    yield (("POST", "/xce/v1/sim/record"), "POST", "/sim/record", {"stop": True}, None, None, "cluster:admin", {409})
    yield (("POST", "/xce/v1/hosts/{name}/{op}"), "POST", "/hosts/nope/close", {"reason": None}, None, None,
           "cluster:admin", {404})


def _allowed(who: str, perm: str, job: str | None) -> bool:
    if perm in ("cluster:view", "queue:submit", "none"):
        return True
    if perm == "cluster:admin":
        return who in ADMINS
    if perm == "project:submit":
        return who in SUBMITTERS
    if perm == "token-or-owner":  # D-7: the job's owner (or its own tasks), not even an admin
        return who == {"hep": "frank", "bio": "gina"}[job]
    return perm in HOLDS.get((who, job), set())


def test_every_route_for_every_caller(cluster, done_jobs, tmp_path):
    """Each route, asked by each caller: let through (the route's own answer: 200, or 409 for
    a finished job, 422 for the empty config) or refused with 403 and a line naming who may.
    Every route of the API is asked (the table of tests/unit/test_rbac.py), but the peer
    routes: the worker channel and the key handshake (open to anyone, the body carries the
    proof; tests/e2e/test_peers.py)."""
    cases = list(_route_cases(done_jobs, str(tmp_path)))
    peer_routes = {k for k, v in ROUTES.items() if v in ("peer", "open")}
    assert {c[0] for c in cases} == set(ROUTES) - peer_routes
    problems = []
    for key, method, path, body, params, job, perm, ok in cases:
        for who in CALLERS:
            with client(cluster, who) as c:
                status, answer = ask(c, method, path, body, params)
            allowed = _allowed(who, perm, job)
            if allowed and status not in ok:
                problems.append(f"{who} {method} {path}: {status} {str(answer)[:300]}, expected one of {ok}")
            elif not allowed:
                msg = answer if isinstance(answer, str) else ""
                who_may = ("only the cluster admins may" if perm == "cluster:admin" else
                           "only its owner and its own tasks may launch" if perm == "token-or-owner" else
                           "is not a member of project /physics/hep; you may submit to no project"
                           if perm == "project:submit" else "only these may: its owner")
                if status != 403 or who_may not in msg or "\n" in msg:
                    problems.append(f"{who} {method} {path}: {status} {str(answer)[:300]}, expected 403 saying "
                                    f"{who_may!r}")
    assert not problems, "\n".join(problems)


def test_a_many_job_kill_refuses_each_job_as_the_one_job_route_would(cluster, done_jobs):
    """RBAC-3, CLI-8: POST /jobs/kill, which every user may ask, kills a job only for who holds
    job:kill over it (its owner, its project's admins, the operator role, the cluster
    admins): for each caller and job the answer's entry is refused `forbidden`, naming who
    may, exactly when POST /jobs/ID/kill is 403, else the job's own answer (`conflict`: it
    has finished)."""
    problems = []
    for who in CALLERS:
        with client(cluster, who) as c:
            res = c.request("POST", "/jobs/kill", json={"targets": [{"job_id": done_jobs[j]} for j in ("hep", "bio")]}
                            ).json()["results"]
        for job, r in zip(("hep", "bio"), res):
            code = (r["refused"] or {}).get("code")
            want = "conflict" if "job:kill" in HOLDS.get((who, job), set()) else "forbidden"
            if code != want or (want == "forbidden" and "only these may: its owner" not in r["refused"]["reason"]):
                problems.append(f"{who} kill {job}: {r}")
    assert not problems, "\n".join(problems)


def test_the_environment_is_shown_only_to_who_holds_job_view(cluster, done_jobs):
    """D-7: anyone sees a job's summary; its environment only its owner, the holders of
    job:view over its project (the parent's admin, the operator role) and the cluster admins."""
    for who in CALLERS:
        for job, secret in (("hep", HEP_SECRET), ("bio", BIO_SECRET)):
            with client(cluster, who) as c:
                j = JobOut.model_validate(c.request("GET", f"/jobs/{done_jobs[job]}").json())
                listing = c.request("GET", "/jobs", params={"user": "all"}).text
            sees = "job:view" in HOLDS.get((who, job), set()) or (who, job) == ("frank", "hep")
            assert (j.env is not None and j.env.get("MY_SECRET") == secret) == sees, (who, job, j.env)
            assert j.user == {"hep": "frank", "bio": "gina"}[job] and j.project == {"hep": "/physics/hep",
                                                                                     "bio": "/bio"}[job]
            assert secret not in listing  # summaries never carry the environment


def test_each_caller_sees_its_projects(cluster, done_jobs):
    """PRJ-8: GET /projects lists the projects the caller belongs to, the subtrees where it
    holds project:view, every one for a cluster admin; with the configured share and quotas,
    and (after the requeue of the matrix) whatever runs and pends."""
    for who in CALLERS:
        with client(cluster, who) as c:
            got = ProjectList.model_validate(c.request("GET", "/projects").json())
        assert [p.path for p in got.projects] == VISIBLE[who], who
    with client(cluster, "admin") as c:
        by_path = {p["path"]: p for p in c.request("GET", "/projects").json()["projects"]}
    hep = by_path["/physics/hep"]
    assert (hep["share_configured"], hep["quota"], hep["member_quota"]) == ({"slots": 40}, {"slots": 32},
                                                                           {"slots": 8})
    # resolved against the 8 slots present: /physics 60% -> 4 (rounded down), and /physics/hep's
    # 40 slots capped at its parent's share, and flagged so (PRJ-6)
    assert (by_path["/physics"]["share"]["slots"], hep["share"], hep["capped"]) == (4, {"slots": 4}, ["slots"])
    assert hep["members"] == ["bob", "@hep"] and by_path["/physics"]["admins"] == ["alice"]
    assert by_path["/physics"]["share_configured"] == {"percent": 60} and set(hep["use"]) >= {"slots"}


def test_what_each_caller_sees_at_the_command_line(cluster, tmp_path):
    """The project admin of /physics kills and requeues a job under /physics but not under
    /bio, and cannot change the config; the operator kills and requeues, but may not stop;
    a non-member reads no output; root, not named an admin, may do none of it."""
    d = cluster
    hep = [submit(d, "frank", "/physics/hep", ["sleep", "60"], tmp_path) for _ in range(3)]
    bio = submit(d, "gina", "/bio", ["sleep", "60"], tmp_path)
    for j in (*hep, bio):
        _wait(d, j, ("RUN",))
    r = d.cli("kill", str(bio), user="alice")
    assert r.returncode == 1 and (f"job {bio} belongs to gina in project /bio; user alice may not kill it (job:kill "
                                  f"over /bio); only these may: its owner (gina); the admins of /bio or a project "
                                  f"above it: none; holders of a role with job:kill bound at /bio or above "
                                  f"(rbac.yaml): @ops (operator@/bio); the cluster admins: admin, carol, @wheel"
                                  ) in r.stderr, r.stderr
    r = d.cli("kill", str(hep[0]), user="alice")
    assert r.returncode == 0, r.stderr
    assert _wait(d, hep[0], ("EXIT",))["elements"][0]["exit_reason"] == "killed by alice"
    assert d.cli("requeue", str(hep[1]), user="oscar").returncode == 0
    r = d.cli("stop", str(hep[2]), user="oscar")
    assert r.returncode == 1 and "user oscar may not stop it (job:modify over /physics/hep)" in r.stderr, r.stderr
    assert "holders of a role with job:modify bound at /physics/hep or above (rbac.yaml): none" in r.stderr
    r = d.cli("peek", str(hep[2]), user="nora")
    assert r.returncode == 1 and "user nora may not read its output (job:view over /physics/hep)" in r.stderr
    assert "alice (/physics)" in r.stderr and "oscar (operator@/physics)" in r.stderr, r.stderr
    assert d.show(hep[2], user="nora")["env"] is None
    r = d.cli("kill", str(bio))  # root, by SO_PEERCRED
    assert r.returncode == 1 and f"user {ME} may not kill it" in r.stderr, r.stderr
    r = d.cli("submit", "-P", "/bio", "--", "true")
    assert r.returncode == 1 and f"user {ME} is not a member of project /bio" in r.stderr, r.stderr
    with client(d, ME) as c:
        status, msg = ask(c, "PUT", "/config", {"config": {}, "hash": "0" * 64})
    assert status == 403 and f"user {ME} is not a cluster admin; only the cluster admins may apply a config" in msg
    with client(d, "alice") as c:  # RBAC-3: a project admin cannot edit a project: only the cluster admin, by config
        status, msg = ask(c, "PUT", "/config", {"config": {}, "hash": "0" * 64})
    assert status == 403 and "user alice is not a cluster admin" in msg
    info = json.loads(d.cli("api", "GET", "/info", user="carol", check=True).stdout)
    assert info["is_admin"] is True  # a role with cluster:admin at / makes a cluster admin
    assert d.cli("kill", str(bio), user="carol").returncode == 0
    for j in (*hep[1:], bio):
        d.cli("kill", str(j), user="admin")


# ---------------------------------------------------------------- a real second Unix user

@pytest.fixture
def prod_root_admin(base):  # noqa: F811 (the fixture of test_users)
    """A production xced running as root, with root named its admin (D-6: only by name)."""
    top = base / "top"
    top.mkdir(mode=0o755)
    write_config(top, mode="production", admins=("root",))
    with open(top / "config" / "xce.yaml", "a") as f:
        f.write("clean_period: 0\n")  # a finished job leaves memory at once: read back from the store
    d = Daemon(top).start()
    try:
        yield d
    finally:
        d.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: it makes Unix users and runs a root xced")
def test_another_unix_user_may_not_see_or_kill_a_job_and_a_cluster_admin_may(prod_root_admin, users, base):  # noqa: F811
    """xce-bob, a real second user, reads neither xce-alice's job environment nor its output
    and cannot kill it (403, naming who may); root, named an admin, does all three."""
    d = prod_root_admin
    alice, bob = users
    job = _running(d, alice, _home(base, alice), ["/bin/sh", "-c", "echo alice-out; sleep 60"])
    sock = _sock(d)
    code, shown = bob.api(sock, "GET", f"/jobs/{job}")
    assert code == 200 and shown["env"] is None and SECRET not in json.dumps(shown)
    code, out = bob.api(sock, "GET", f"/jobs/{job}/output")
    msg = out["error"]["message"]
    assert code == 403 and f"job {job} belongs to xce-alice in project /default; user xce-bob may not read its " \
                           f"output (job:view over /default); only these may: its owner (xce-alice)" in msg, out
    assert "the cluster admins: root" in msg and "alice-out" not in json.dumps(out)
    code, out = bob.api(sock, "POST", f"/jobs/{job}/kill", {})
    assert code == 403 and "user xce-bob may not kill it (job:kill over /default)" in out["error"]["message"], out
    assert _wait(d, job, ("RUN", "EXIT", "DONE"))["state"] == "RUN"  # still running
    with Client(sock) as c:  # root, by SO_PEERCRED, named in admins
        assert c.request("GET", f"/jobs/{job}").json()["env"]["MY_SECRET"] == SECRET
        deadline = time.monotonic() + 30
        while "alice-out" not in (text := c.request("GET", f"/jobs/{job}/output").text):
            assert time.monotonic() < deadline, text
            time.sleep(0.1)
        assert c.request("POST", f"/jobs/{job}/kill", json={}).json()["affected"] == [str(job)]
    j = _wait(d, job, ("EXIT",))
    assert j["elements"][0]["exit_reason"] == "killed by root"
    # issue 15: once purged from memory (clean_period 0), the job and its environment are read
    # back from the store, and its environment is still its owner's and the admins' alone
    deadline = time.monotonic() + 30
    while str(job) in [str(x["job_id"]) for x in json.loads(d.cli("jobs", "-u", "all", "--json").stdout)["jobs"]]:
        assert time.monotonic() < deadline, "the finished job was not purged"
        time.sleep(0.2)
    code, shown = bob.api(sock, "GET", f"/jobs/{job}")
    assert code == 200 and shown["state"] == "EXIT" and shown["env"] is None and SECRET not in json.dumps(shown)
    with Client(sock) as c:
        assert c.request("GET", f"/jobs/{job}").json()["env"]["MY_SECRET"] == SECRET



@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: it makes Unix users and runs a root xced")
def test_only_an_admin_controls_a_host_and_every_user_sees_who_closed_it(prod_root_admin, users):  # noqa: F811
    """CLI-4 as a real second user: xce-bob (by SO_PEERCRED) may neither close nor open a
    host, nor drain it (403, naming the admins); root, named an admin, may. Every user then
    sees the host closed_Adm, by whom and why, in `GET /hosts` and in its history."""
    d = prod_root_admin
    _, bob = users
    sock = _sock(d)
    for op in ("close", "open", "drain"):
        code, out = bob.api(sock, "POST", f"/hosts/h1/{op}", {"reason": "mine now"})
        assert code == 403 and "only the cluster admins may" in out["error"]["message"], (op, out)
    code, out = bob.api(sock, "GET", "/hosts/events")
    assert (code, out) == (200, {"events": []})
    with Client(sock) as c:  # root
        assert c.request("POST", "/hosts/h1/close", json={"reason": "disk swap"}).json()["changed"]
    code, out = bob.api(sock, "GET", "/hosts")
    h1 = next(h for h in out["hosts"] if h["name"] == "h1")
    assert (h1["status"], h1["closed_by"], h1["closed_reason"]) == ("closed_Adm", "root", "disk swap"), h1
    code, out = bob.api(sock, "GET", "/hosts/events?host=h1")
    assert code == 200 and [(e["kind"], e["reason"]) for e in out["events"]] == [("close", "disk swap")], out
    code, out = bob.api(sock, "POST", "/hosts/h1/open", {})
    assert code == 403
    assert bob.api(sock, "GET", "/hosts")[1]["hosts"][0]["status"] == "closed_Adm"  # still closed

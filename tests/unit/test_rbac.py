"""Permissions (RBAC-1..RBAC-4, PRJ-2, PRJ-8, D-6, D-7), table by table over the one Policy, and
the routes' declarations: every route of the API says what it needs, and the walk of all the
routes of `create_app` fails for one that says nothing.

The callers of issue 12: a member, a non-member, a project admin of the parent, a role
holder, a cluster admin (named in xce.yaml, or by a role with cluster:admin bound at `/`),
and root, which gets nothing it is not granted.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fastapi import APIRouter, Depends, FastAPI

from xced.api.errors import InvalidRequest, PermissionDenied
from xced.model.config import ClusterConfig, ClusterSettings, HostConfig, QueueConfig
from xced.model.project import JOB_PERMISSIONS, PERMISSIONS, Binding, ProjectConfig, ProjectsConfig, RbacConfig, ShareTerm
from xced.policy.rbac import ADMIN_BASIS, Policy
from xced.server import auth
from xced.server.app import create_app, public_routes

PROJECTS = ProjectsConfig(
    groups={"hep": ["erin", "frank"], "ops": ["olga"], "wheel": ["greta"]},
    projects=[ProjectConfig(path="/physics", share_percent=60, admins=["alice"]),
              ProjectConfig(path="/physics/hep", share={"slots": ShareTerm(amount=40)}, quota={"slots": 32},
                            member_quota={"slots": 8}, members=["bob", "@hep"]),
              ProjectConfig(path="/physics/astro", members=["dave"]),
              ProjectConfig(path="/bio", share_percent=30, members=["gina"])],
    default_projects={"hep": "/physics/hep"})
RBAC = RbacConfig(
    roles={"operator": ["job:view", "job:kill", "job:requeue"], "submitter": ["project:submit"],
           "viewer": ["project:view"], "superuser": ["cluster:admin"]},
    bindings=[Binding(role="operator", users=["oscar"], scope="/physics"),
              Binding(role="operator", groups=["ops"], scope="/bio"),
              Binding(role="submitter", users=["sam"], scope="/physics"),
              Binding(role="viewer", users=["vic"], scope="/physics/hep"),
              Binding(role="superuser", users=["carol"], scope="/"),
              Binding(role="superuser", groups=["wheel"], scope="/")])


def config(projects: ProjectsConfig = PROJECTS, rbac: RbacConfig = RBAC) -> ClusterConfig:
    return ClusterConfig(settings=ClusterSettings(mode="test", admins=["admin"]), queues=[QueueConfig(name="normal")],
                         hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)], projects=projects, rbac=rbac)


POLICY = Policy(config())


def who(name: str):
    """The Caller the API server makes: root comes over SO_PEERCRED as uid 0, the others are
    asserted test users."""
    if name == "root":
        return POLICY.caller("root", 0, 0, False)
    return POLICY.caller(name, None, None, True)


#: the callers, by what they are
MEMBER, NON_MEMBER, PARENT_ADMIN, ROLE_HOLDER, ADMIN, ROOT = "bob", "nora", "alice", "oscar", "admin", "root"

HEP_JOB = ("frank", "/physics/hep")  # frank's job, let in as a member by group @hep
BIO_JOB = ("gina", "/bio")
BARE_JOB = ("frank", None)  # a job with no project (a direct submit)
ALL = frozenset(JOB_PERMISSIONS)
OPERATOR = frozenset({"job:view", "job:kill", "job:requeue"})
NONE: frozenset[str] = frozenset()

#: (caller, job) -> the job permissions it holds on that job
JOB_TABLE = [
    (MEMBER, HEP_JOB, NONE),             # a member of the job's project is not its owner
    ("erin", HEP_JOB, NONE),             # nor is a member by group
    ("frank", HEP_JOB, ALL),             # the owner holds every job permission on its job
    ("frank", BIO_JOB, NONE),
    (NON_MEMBER, HEP_JOB, NONE),
    (PARENT_ADMIN, HEP_JOB, ALL),        # RBAC-3: the admin of /physics, over its subtree
    (PARENT_ADMIN, ("dave", "/physics/astro"), ALL),
    (PARENT_ADMIN, BIO_JOB, NONE),       # ... but not under /bio
    (PARENT_ADMIN, BARE_JOB, NONE),
    (ROLE_HOLDER, HEP_JOB, OPERATOR),    # what the role says, over the subtree: not job:modify
    (ROLE_HOLDER, BIO_JOB, NONE),
    ("olga", BIO_JOB, OPERATOR),         # a role bound to a group of projects.yaml
    ("olga", HEP_JOB, NONE),
    ("vic", HEP_JOB, NONE),              # project:view is no job permission
    ("sam", HEP_JOB, NONE),              # nor is project:submit
    (ADMIN, HEP_JOB, ALL), (ADMIN, BIO_JOB, ALL), (ADMIN, BARE_JOB, ALL),
    ("carol", BIO_JOB, ALL),             # a role with cluster:admin at /
    ("greta", BIO_JOB, ALL),             # ... bound to her group
    (ROOT, HEP_JOB, NONE), (ROOT, BIO_JOB, NONE), (ROOT, BARE_JOB, NONE),  # D-6: root is not an admin
    (ROOT, ("root", "/bio"), ALL),       # ... but owns its own jobs
]


@pytest.mark.parametrize("name, job, held", JOB_TABLE, ids=[f"{n}-{j[0]}@{j[1]}" for n, j, _ in JOB_TABLE])
def test_job_permissions(name, job, held):
    owner, project = job
    caller = who(name)
    for perm in JOB_PERMISSIONS:
        assert POLICY.may_job(caller, perm, owner, project) == (perm in held), perm
        if perm in held:
            POLICY.authorize_job(caller, perm, owner, project, "job 12")
        else:
            with pytest.raises(PermissionDenied, match=f"job 12 belongs to {owner}.*user {name} may not"):
                POLICY.authorize_job(caller, perm, owner, project, "job 12")


#: caller -> the projects it may submit to (PRJ-2, RBAC-2, RBAC-3)
SUBMIT_TABLE = [
    (MEMBER, {"/physics/hep"}),
    ("erin", {"/physics/hep"}),          # by a group of projects.yaml
    (NON_MEMBER, set()),
    (PARENT_ADMIN, set()),               # RBAC-3: project admins submit as members, like everyone
    (ROLE_HOLDER, set()),                # operator holds no project:submit
    ("sam", {"/physics", "/physics/hep", "/physics/astro"}),  # a role covers the subtree
    ("gina", {"/bio"}),
    (ADMIN, {"/physics", "/physics/hep", "/physics/astro", "/bio"}),
    ("carol", {"/physics", "/physics/hep", "/physics/astro", "/bio"}),
    (ROOT, set()),
]


@pytest.mark.parametrize("name, allowed", SUBMIT_TABLE, ids=[n for n, _ in SUBMIT_TABLE])
def test_project_submit(name, allowed):
    caller = who(name)
    for path in PROJECTS.paths():
        assert (POLICY.grants(caller, "project:submit", path) is not None) == (path in allowed), path
        if path in allowed:
            got, basis = POLICY.submit_project(caller, path)
            assert got == path and basis in ("member", "role:submitter@/physics", ADMIN_BASIS)
        else:
            with pytest.raises(PermissionDenied, match=f"user {name} is not a member of project {path}; "):
                POLICY.submit_project(caller, path)


@pytest.mark.parametrize("name, basis", [(MEMBER, "member"), ("erin", "member"), ("sam", "role:submitter@/physics"),
                                         (ADMIN, ADMIN_BASIS)])
def test_the_basis_a_submit_is_let_in_on(name, basis):
    assert POLICY.submit_project(who(name), "/physics/hep") == ("/physics/hep", basis)


def test_refusals_of_a_submit_name_the_projects_one_may_use():
    with pytest.raises(PermissionDenied) as e:
        POLICY.submit_project(who(ROOT), "/physics/hep")
    assert str(e.value) == ("user root is not a member of project /physics/hep; you may submit to no project: ask a "
                            "cluster admin to add you to one (projects.yaml)")
    with pytest.raises(PermissionDenied, match="projects you may use: /physics/hep"):
        POLICY.submit_project(who(MEMBER), "/bio")
    with pytest.raises(InvalidRequest, match="no such project"):
        POLICY.submit_project(who(ADMIN), "/chemistry")


#: caller -> the projects it sees (PRJ-8)
VISIBLE_TABLE = [
    (MEMBER, ["/physics/hep"]),                                   # its memberships
    (NON_MEMBER, []),
    (PARENT_ADMIN, ["/physics", "/physics/hep", "/physics/astro"]),  # project:view over its subtree
    (ROLE_HOLDER, []),                                            # operator holds no project:view
    ("vic", ["/physics/hep"]),                                    # a role with project:view
    ("gina", ["/bio"]),
    (ADMIN, ["/physics", "/physics/hep", "/physics/astro", "/bio"]),
    ("greta", ["/physics", "/physics/hep", "/physics/astro", "/bio"]),
    (ROOT, []),
]


@pytest.mark.parametrize("name, visible", VISIBLE_TABLE, ids=[n for n, _ in VISIBLE_TABLE])
def test_visible_projects(name, visible):
    assert POLICY.visible_projects(who(name)) == visible


#: caller -> the cluster permissions it holds (RBAC-1: everyone holds queue:submit, cluster:view)
CLUSTER_TABLE = [(n, {"queue:submit", "cluster:view"}) for n in (MEMBER, NON_MEMBER, PARENT_ADMIN, ROLE_HOLDER,
                                                                 ROOT)] + \
                [(n, {"queue:submit", "cluster:view", "cluster:admin"}) for n in (ADMIN, "carol", "greta")]


@pytest.mark.parametrize("name, held", CLUSTER_TABLE, ids=[n for n, _ in CLUSTER_TABLE])
def test_cluster_permissions(name, held):
    caller = who(name)
    assert caller.is_admin == ("cluster:admin" in held)
    for perm in ("queue:submit", "cluster:view", "cluster:admin"):
        if perm in held:
            assert POLICY.authorize(caller, perm) in ("everyone", "admin")
        else:
            with pytest.raises(PermissionDenied, match=f"user {name} is not a cluster admin; only the cluster admins "
                                                       f"may apply a config: admin, carol, @wheel"):
                POLICY.authorize(caller, perm, None, "apply a config")


def test_every_permission_for_every_caller_at_every_scope_is_decided_without_error():
    """No caller, permission and scope makes the policy raise anything but PermissionDenied."""
    for name in (MEMBER, NON_MEMBER, PARENT_ADMIN, ROLE_HOLDER, ADMIN, ROOT, "carol", "greta", "olga"):
        caller = who(name)
        for perm in PERMISSIONS:
            for scope in (None, "/", *PROJECTS.paths(), "/nowhere"):
                basis = POLICY.grants(caller, perm, scope)
                try:
                    assert POLICY.authorize(caller, perm, scope) == basis
                except PermissionDenied as e:
                    assert basis is None and "\n" not in e.message and f"user {name}" in e.message


def test_a_refusal_names_who_may_by_name():
    with pytest.raises(PermissionDenied) as e:
        POLICY.authorize_job(who(NON_MEMBER), "job:kill", "frank", "/physics/hep", "job 12", "kill it")
    assert str(e.value) == (
        "job 12 belongs to frank in project /physics/hep; user nora may not kill it (job:kill over /physics/hep); "
        "only these may: its owner (frank); the admins of /physics/hep or a project above it: alice (/physics); "
        "holders of a role with job:kill bound at /physics/hep or above (rbac.yaml): oscar (operator@/physics); "
        "the cluster admins: admin, carol, @wheel (admins in xce.yaml, or a role with cluster:admin bound at / in "
        "rbac.yaml; root is not one unless named)")
    with pytest.raises(PermissionDenied) as e:
        POLICY.authorize_job(who(ROLE_HOLDER), "job:modify", "frank", "/physics/hep", "job 12")
    assert "user oscar may not stop or resume it (job:modify over /physics/hep)" in str(e.value)
    assert "holders of a role with job:modify bound at /physics/hep or above (rbac.yaml): none" in str(e.value)
    with pytest.raises(PermissionDenied) as e:
        POLICY.authorize(who(PARENT_ADMIN), "project:view", "/bio", "list /bio")
    assert str(e.value).startswith("user alice does not hold project:view over project /bio, so may not list /bio; "
                                   "only these do: the admins of /bio or a project above it: none; holders of a role "
                                   "with project:view bound at /bio or above (rbac.yaml): none; the cluster admins: ")


def test_root_gets_nothing_it_is_not_granted_and_everything_once_named():
    """D-6: root is not an implicit admin; named in xce.yaml's admins it is one."""
    root = who(ROOT)
    assert not root.is_admin and POLICY.grants(root, "cluster:admin", None) is None
    named = Policy(config().model_copy(update={"settings": ClusterSettings(mode="test", admins=["root"])}))
    root = named.caller("root", 0, 0, False)
    assert root.is_admin and named.authorize(root, "cluster:admin") == "admin"
    assert named.may_job(root, "job:kill", "gina", "/bio")


def test_open_mode_checks_no_submit_and_shows_no_project():
    """PRJ-4: no project defined: any submit is let in `open`; job permissions are the owner's
    and the cluster admins' (roles bound at / still count)."""
    p = Policy(config(ProjectsConfig(), RbacConfig()))
    bob = p.caller("bob", None, None, True)
    assert p.submit_project(bob, None) == ("/default", "open")
    assert p.submit_project(bob, "/anything") == ("/anything", "open")
    assert p.visible_projects(bob) == [] and p.visible_projects(p.caller("admin", None, None, True)) == []
    assert not p.may_job(bob, "job:kill", "gina", "/default")
    assert p.may_job(p.caller("admin", None, None, True), "job:kill", "gina", "/default")


def test_a_job_permission_is_asked_only_as_one():
    with pytest.raises(ValueError, match="not a job permission"):
        POLICY.may_job(who(MEMBER), "cluster:admin", "bob", None)
    with pytest.raises(ValueError, match="unknown permission"):
        POLICY.grants(who(MEMBER), "job:delete", None)


# ---------------------------------------------------------------- the routes' declarations

#: what every route of the API needs (RBAC-1, D-7): a route added without a row here fails
ROUTES = {
    ("POST", "/xce/v1/jobs"): "queue:submit",
    ("POST", "/xce/v1/jobs/pack"): "queue:submit",  # CLI-7: each job as a submit
    ("POST", "/xce/v1/jobs/dry-run"): "queue:submit",
    ("GET", "/xce/v1/jobs"): "cluster:view",
    ("GET", "/xce/v1/jobs/table"): "cluster:view",
    ("GET", "/xce/v1/jobs/{job_id:jobid}"): "cluster:view",
    ("GET", "/xce/v1/jobs/{job_id:jobid}/events"): "cluster:view",
    ("GET", "/xce/v1/jobs/{job_id:jobid}/why"): "cluster:view",
    ("GET", "/xce/v1/jobs/{job_id:jobid}/wait"): "cluster:view",
    ("GET", "/xce/v1/jobs/{job_id:jobid}/output"): "job:view",
    ("POST", "/xce/v1/jobs/{job_id:jobid}/kill"): "job:kill",
    ("POST", "/xce/v1/jobs/kill"): "cluster:view",  # many jobs: job:kill is checked on each (RBAC-3)
    ("POST", "/xce/v1/jobs/{job_id:jobid}/stop"): "job:modify",
    ("POST", "/xce/v1/jobs/{job_id:jobid}/resume"): "job:modify",
    ("POST", "/xce/v1/jobs/{job_id:jobid}/requeue"): "job:requeue",
    ("POST", "/xce/v1/jobs/{job_id:jobid}/release"): "cluster:admin",
    ("POST", "/xce/v1/jobs/{job_id:jobid}/launch"): auth.TOKEN_OR_OWNER,
    ("GET", "/xce/v1/info"): "cluster:view",
    ("GET", "/xce/v1/params"): "cluster:view",  # CLI-8: lsid, bparams
    ("GET", "/xce/v1/hosts"): "cluster:view",
    ("GET", "/xce/v1/hosts/events"): "cluster:view",
    ("GET", "/xce/v1/queues"): "cluster:view",
    ("GET", "/xce/v1/apps"): "cluster:view",
    ("GET", "/xce/v1/apps/{name}"): "cluster:view",
    ("GET", "/xce/v1/projects"): "cluster:view",
    ("GET", "/xce/v1/presets"): auth.NO_PERMISSION,  # RBAC-4: preset routes need no permission
    ("GET", "/xce/v1/presets/{name}"): auth.NO_PERMISSION,
    ("GET", "/xce/v1/keys"): "cluster:admin",  # KEY-2: the trusted list
    ("POST", "/xce/v1/keys/trust"): "cluster:admin",
    ("POST", "/xce/v1/keys/revoke"): "cluster:admin",
    ("POST", "/xce/v1/keys/token"): "cluster:admin",
    ("POST", "/xce/v1/debug/clock"): "cluster:admin",  # and test mode only
    ("PUT", "/xce/v1/config"): "cluster:admin",
    ("POST", "/xce/v1/sim/record"): "cluster:admin",
    ("POST", "/xce/v1/hosts/{name}/{op}"): "cluster:admin",
    ("WEBSOCKET", "/xce/v1/workers/channel"): auth.PEER,
    ("POST", "/xce/v1/peers/challenge"): auth.OPEN,
    ("POST", "/xce/v1/peers/session"): auth.OPEN,
    ("POST", "/xce/v1/peers/enroll"): auth.OPEN,
}


def _app() -> FastAPI:
    return create_app(SimpleNamespace())


def test_every_route_of_the_app_declares_exactly_one_permission():
    """Walks every route create_app serves, the websocket included: each API route declares
    one permission or marker; the others are FastAPI's public documentation routes."""
    app = _app()
    routes = auth.all_routes(app)
    assert ("WEBSOCKET", "/xce/v1/workers/channel") in {(m, p) for p, m, _ in routes}
    declared = {}
    for path, methods, route in routes:
        if getattr(route, "dependant", None) is None:
            assert path in public_routes(app), f"{methods} {path} is neither an API route nor public documentation"
            continue
        got = auth.route_permissions(route)
        assert len(got) == 1, f"{methods} {path} declares {got or 'nothing'}: declare it with auth.requires"
        for m in methods.split(","):
            declared[(m, path)] = got[0]
    assert declared == ROUTES


def test_the_openapi_document_says_what_each_operation_needs():
    doc = _app().openapi()
    seen = {(m.upper(), p): op["x-xce-permission"] for p, item in doc["paths"].items() for m, op in item.items()}
    want = {(m, p.replace(":jobid", "")): perm for (m, p), perm in ROUTES.items() if m != "WEBSOCKET"}
    assert seen == want


def test_a_route_without_a_declaration_is_caught():
    """A route added later without `requires` is named, and create_app would refuse to start."""
    router = APIRouter()

    @router.get("/guarded", dependencies=[Depends(auth.requires("cluster:view"))])
    async def guarded() -> dict:
        return {}

    @router.get("/forgotten")
    async def forgotten() -> dict:
        return {}

    @router.get("/twice", dependencies=[Depends(auth.requires("cluster:view")), Depends(auth.requires(auth.PEER))])
    async def twice() -> dict:
        return {}

    @router.websocket("/socket")
    async def socket(ws) -> None:
        pass

    app = FastAPI(openapi_url="/openapi.json", docs_url=None, redoc_url=None)
    app.include_router(router, prefix="/p")
    bad = auth.undeclared(auth.all_routes(app), public_routes(app))
    assert bad == ["GET /p/forgotten (declares nothing; declare one with xced.server.auth.requires)",
                   "GET /p/twice (declares cluster:view, peer; declare one with xced.server.auth.requires)",
                   "WEBSOCKET /p/socket (declares nothing; declare one with xced.server.auth.requires)"]


@pytest.mark.parametrize("name, why", [("project:submit", "decided with its project"),
                                       ("project:view", "decided with its project"),
                                       ("job:delete", "neither a permission"), ("", "neither a permission")])
def test_requires_takes_only_what_a_route_can_need(name, why):
    with pytest.raises(ValueError, match=why):
        auth.requires(name)


# ---------------------------------------------------------------- GET /projects' numbers

def test_the_projects_report_rolls_running_elements_up_the_tree_and_counts_pending_per_project(tmp_path):
    """PRJ-7, PRJ-8: `use` sums what the running elements of the whole subtree hold; `pending`
    counts the pending elements of that very project."""
    from tests.unit.test_controller import controller_on, req, session
    from xced.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "db")
    try:
        c = controller_on(store, config(), tmp_path)

        def submit(name: str, project: str, **kw):
            caller = c.policy.caller(name, None, None, True)
            path, basis = c.policy.submit_project(caller, project)
            return c.submit(req(project=project, **kw), caller, project=path, basis=basis)

        submit("bob", "/physics/hep", ntasks_min=2, resreq=["rusage[mem=100]"])
        submit("gina", "/bio")
        session(c)
        submit("erin", "/physics/hep", ntasks_min=2)  # /physics (60% of 4 slots) is full: it pends
        session(c)
        from xced.policy.projects import report, supply_totals

        rep = report(c.config.projects, supply_totals(c.host_supplies()), c.project_usage())
        use = {p["path"]: p["use"] for p in rep["projects"]}
        assert use["/physics/hep"]["slots"] == 2 and use["/physics"]["slots"] == 2
        assert use["/physics/hep"]["mem_mb"] == use["/physics"]["mem_mb"] == 200  # 100 MB a task
        assert use["/bio"]["slots"] == 1 and use["/physics/astro"].get("slots", 0) == 0
        assert c.project_pending() == {"/physics/hep": 1}
    finally:
        store.close()

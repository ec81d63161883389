"""Jobs in projects, through the controller with a fake worker (no daemon): the project and the
basis a submit is let in on (SUBMIT-1, PRJ-2..PRJ-4), and system holds when the config changes
under pending jobs (PRJ-5, D-5: a user hold on the same job stays)."""

from __future__ import annotations

import pytest

from xced.api.errors import InvalidRequest, PermissionDenied
from xced.model.config import ClusterConfig, ClusterSettings, HostConfig, QueueConfig
from xced.model.project import Binding, ProjectConfig, ProjectsConfig, RbacConfig
from xced.policy.rbac import Caller

from tests.unit.test_controller import ADMIN, controller_on, req, session
from xced.store.sqlite import SqliteStore

PROJECTS = ProjectsConfig(
    groups={"hep": ["erin", "frank"]},
    projects=[ProjectConfig(path="/physics", share_percent=60, admins=["alice"]),
              ProjectConfig(path="/physics/hep", members=["bob", "@hep"]),
              ProjectConfig(path="/physics/astro", members=["dave"]),
              ProjectConfig(path="/bio", share_percent=30, members=["gina"])],
    default_projects={"hep": "/physics/hep"})
RBAC = RbacConfig(roles={"operator": ["job:view", "job:kill", "job:requeue"], "submitter": ["project:submit"]},
                  bindings=[Binding(role="operator", users=["oscar"], scope="/physics"),
                            Binding(role="submitter", users=["sam"], scope="/physics")])


def config(projects=PROJECTS, **settings) -> ClusterConfig:
    return ClusterConfig(settings=ClusterSettings(mode="test", admins=["admin"], **settings),
                         queues=[QueueConfig(name="normal")], hosts=[HostConfig(name="h1", slots=4, memory_mb=1000)],
                         projects=projects, rbac=RBAC)


@pytest.fixture
def ctl(tmp_path):
    store = SqliteStore(tmp_path / "db")
    yield controller_on(store, config(), tmp_path)
    store.close()


def user(name: str) -> Caller:
    return Caller(name, None, None, True, name == "admin")


def submit_as(ctl, who: str, project: str | None = None, **kw):
    """A submit as the API server makes it: the policy resolves the project and the basis."""
    caller = user(who)
    path, basis = ctl.policy.submit_project(caller, project)
    return ctl.submit(req(project=project, **kw), caller, project=path, basis=basis)


@pytest.mark.parametrize("who, asked, project, basis", [
    ("bob", "/physics/hep", "/physics/hep", "member"),          # by name
    ("erin", "/physics/hep", "/physics/hep", "member"),         # by a group of projects.yaml
    ("erin", None, "/physics/hep", "member"),                   # the group's default project (PRJ-3)
    ("sam", "/physics/astro", "/physics/astro", "role:submitter@/physics"),  # a role covers the subtree
    ("admin", "/bio", "/bio", "role:cluster-admin@/"),          # a cluster admin holds everything
])
def test_a_submit_records_its_project_and_basis(ctl, who, asked, project, basis):
    job = submit_as(ctl, who, asked)
    assert (job.spec.project, job.spec.auth_basis) == (project, basis)
    from xced.server.convert import job_dict

    shown = job_dict(job)
    assert (shown["project"], shown["auth_basis"]) == (project, basis)


@pytest.mark.parametrize("who, asked, message", [
    ("bob", "/bio", "user bob is not a member of project /bio; projects you may use: /physics/hep"),
    ("bob", None, "no project given (-P) and user bob has no default project; projects you may use: /physics/hep"),
    ("alice", "/physics/hep", "user alice is not a member of project /physics/hep; you may submit to no project"),
    ("dave", "/physics", "user dave is not a member of project /physics; projects you may use: /physics/astro"),
    ("root", "/bio", "user root is not a member of project /bio"),  # root gets nothing it is not granted
])
def test_a_non_member_is_refused_with_the_projects_it_may_use(ctl, who, asked, message):
    """PRJ-2: membership of that very project, no inheritance: the project admin of /physics
    submits nowhere it is not a member, and a member of /physics/astro not to /physics."""
    with pytest.raises(PermissionDenied) as e:
        submit_as(ctl, who, asked)
    assert message in str(e.value)


def test_an_unknown_project_is_refused_naming_the_projects(ctl):
    with pytest.raises(InvalidRequest, match=r"-P /physics/hepp: no such project; projects: /physics, "
                                             r"/physics/hep, /physics/astro, /bio"):
        submit_as(ctl, "bob", "/physics/hepp")


def test_open_mode_takes_any_project_and_the_default(tmp_path):
    """PRJ-4: until any project is defined, submits are not checked; without -P a job gets
    xce.yaml's default_project, else LSF's `default`."""
    store = SqliteStore(tmp_path / "db")
    c = controller_on(store, config(ProjectsConfig()), tmp_path)
    assert (submit_as(c, "bob", "/anything").spec.project, submit_as(c, "bob").spec.project) == ("/anything",
                                                                                                 "/default")
    assert submit_as(c, "bob").spec.auth_basis == "open"
    c2 = controller_on(SqliteStore(tmp_path / "db2"), config(ProjectsConfig(), default_project="/lab"), tmp_path)
    assert submit_as(c2, "bob").spec.project == "/lab"
    store.close()


def test_a_direct_submit_is_a_test_tool_refused_in_production(tmp_path):
    """SUBMIT-1: through the controller's client library the basis is `direct`, accepted only in
    test mode."""
    store = SqliteStore(tmp_path / "db")
    c = controller_on(store, config(), tmp_path)
    job = c.submit(req(project="/physics/hep"), user("bob"))
    assert (job.spec.project, job.spec.auth_basis) == ("/physics/hep", "direct")
    prod = config().model_copy(update={"settings": ClusterSettings(mode="production", admins=["admin"])})
    c2 = controller_on(SqliteStore(tmp_path / "db2"), prod, tmp_path)
    with pytest.raises(PermissionDenied, match="basis direct.*is a test tool"):
        c2.submit(req(), user("bob"))
    store.close()


def test_the_job_environment_names_its_project(ctl):
    """XCE_PROJECT and LSB_PROJECT_NAME (LSF sets the latter to the job's project)."""
    from pathlib import Path

    from xced.worker.env import element_environment

    job = submit_as(ctl, "bob", "/physics/hep")
    session(ctl)
    env = element_environment(ctl.start_info(job.elements[0]), Path("/tmp/hostfile"), {}, "")
    assert env["XCE_PROJECT"] == env["LSB_PROJECT_NAME"] == "/physics/hep"


def test_jobs_are_listed_by_project(ctl):
    a = submit_as(ctl, "bob", "/physics/hep")
    submit_as(ctl, "gina", "/bio")
    assert [j.id for j in ctl.find_jobs(None, None, None, False, "/physics/hep")] == [a.id]


def without_member(name: str) -> ProjectsConfig:
    return PROJECTS.model_copy(update={"projects": [
        p.model_copy(update={"members": [m for m in p.members if m != name]}) for p in PROJECTS.projects]})


def test_a_removed_membership_holds_pending_jobs_and_restoring_it_releases_them(ctl):
    """PRJ-5: after a config removes bob from /physics/hep, his pending job gets a system hold
    (PSUSP) naming why: never run, never killed. Restoring the membership releases that hold;
    a user hold (xcecli stop) on another job stays (D-5: one kind never releases the other)."""
    ctl.hosts["h1"].status = "closed"  # nothing starts: the jobs stay pending throughout
    a = submit_as(ctl, "bob", "/physics/hep")
    b = submit_as(ctl, "bob", "/physics/hep")
    ctl.stop(b.id, None, user("bob"))
    assert b.elements[0].holds == {"user"}
    out = ctl.apply_config(config(without_member("bob")), ADMIN)
    why = "user bob is no longer a member of project /physics/hep"
    assert out["held"] == [f"job {a.id}: {why}", f"job {b.id}: {why}"]
    assert (a.elements[0].state, a.elements[0].holds) == ("PSUSP", {"system"})
    assert b.elements[0].holds == {"user", "system"}
    assert why in ctl.why(a.id, None)["main"]
    session(ctl)
    assert a.elements[0].state == "PSUSP"
    out = ctl.apply_config(config(), ADMIN)
    assert out["held"] == []
    assert (a.elements[0].state, a.elements[0].holds) == ("PEND", set())
    assert (b.elements[0].state, b.elements[0].holds) == ("PSUSP", {"user"})


def test_a_removed_project_holds_its_pending_jobs(ctl):
    ctl.hosts["h1"].status = "closed"
    a = submit_as(ctl, "gina", "/bio")
    gone = PROJECTS.model_copy(update={"projects": [p for p in PROJECTS.projects if p.path != "/bio"]})
    out = ctl.apply_config(config(gone), ADMIN)
    assert out["held"] == [f"job {a.id}: project /bio removed"]
    assert a.elements[0].state == "PSUSP"
    ctl.apply_config(config(), ADMIN)
    assert a.elements[0].state == "PEND"


def test_a_request_no_cap_could_ever_hold_is_refused_at_submit(ctl):
    """PRJ-7 (MERGE-2's rule for caps): /bio's share of the whole cluster (30% of 4 slots, rounded
    down) is 1 slot, so -n 2 there could never start; -n 2 in /physics/hep (60%: 2) may pend."""
    with pytest.raises(InvalidRequest, match=r"The job needs 2 slots and can never start in project /bio: "
                                             r"project /bio's share of the whole cluster is 1 slot"):
        submit_as(ctl, "gina", "/bio", ntasks_min=2)
    assert submit_as(ctl, "bob", "/physics/hep", ntasks_min=2).spec.project == "/physics/hep"


def test_a_user_named_like_a_group_is_not_that_group(ctl):
    """`@hep` in members is the group hep only: a user called "@hep" (asserted, or a system
    account so named) is no member by it (PRJ-2)."""
    with pytest.raises(PermissionDenied, match="user @hep is not a member of project /physics/hep"):
        submit_as(ctl, "@hep", "/physics/hep")


def test_a_config_groups_default_goes_by_the_order_of_default_projects(tmp_path):
    """PRJ-3: a user the system does not know has no primary group; among its groups of
    projects.yaml, the first that `default_projects` lists decides, not the order of `groups:`."""
    projects = PROJECTS.model_copy(update={"groups": {"biogrp": ["multi"], "g1": ["multi"]},
                                           "default_projects": {"g1": "/physics/hep", "biogrp": "/bio"}})
    projects = projects.model_copy(update={"projects": [
        p.model_copy(update={"members": [*p.members, "multi"]}) for p in projects.projects]})
    store = SqliteStore(tmp_path / "db")
    c = controller_on(store, config(projects), tmp_path)
    assert submit_as(c, "multi").spec.project == "/physics/hep"
    store.close()


def test_a_running_job_of_a_removed_project_is_not_reported_held(ctl):
    """PRJ-5 holds pending jobs only: a running one goes on, and `--apply` does not list it as held."""
    running = submit_as(ctl, "gina", "/bio")
    session(ctl)
    assert running.elements[0].state == "RUN"
    gone = PROJECTS.model_copy(update={"projects": [p for p in PROJECTS.projects if p.path != "/bio"]})
    assert ctl.apply_config(config(gone), ADMIN)["held"] == []
    assert running.elements[0].state == "RUN"


def test_memory_and_resources_no_cap_could_ever_hold_are_refused_at_submit(tmp_path):
    """PRJ-7: the submit check covers the job's rusage too, per task (LSF's default): 2 tasks
    of gpu=1 in a project whose quota is 1 gpu, and more memory than the project's share of
    the whole cluster, can never start."""
    projects = PROJECTS.model_copy(update={"projects": [
        p.model_copy(update={"quota": {"gpu": 1}}) if p.path == "/bio" else p for p in PROJECTS.projects]})
    cfg = config(projects).model_copy(update={"hosts": [HostConfig(name="h1", slots=4, memory_mb=1000,
                                                                   resources={"gpu": 4})]})
    store = SqliteStore(tmp_path / "db")
    c = controller_on(store, cfg, tmp_path)
    with pytest.raises(InvalidRequest, match=r"needs 2 gpu and can never start in project /bio: project /bio "
                                             r"has a quota of 1 gpu"):
        submit_as(c, "gina", "/bio", resreq=["rusage[gpu=2]"])
    with pytest.raises(InvalidRequest, match=r"needs 2 slots, 2 gpu and can never start in project /bio: project "
                                             r"/bio's share of the whole cluster is 1 slot;"):
        submit_as(c, "gina", "/bio", ntasks_min=2, resreq=["rusage[gpu=1]"])
    with pytest.raises(InvalidRequest, match=r"can never start in project /bio: project /bio's share of the whole "
                                             r"cluster is 300 MB"):
        submit_as(c, "gina", "/bio", resreq=["rusage[mem=400]"])
    assert submit_as(c, "gina", "/bio", resreq=["rusage[gpu=1:mem=200]"]).spec.project == "/bio"
    store.close()


def test_hold_reasons_say_how_the_job_was_let_in(ctl):
    """PRJ-5: a job let in by a role is held for the role it lost, not for a membership it never
    had; a job of open mode's /default is held as such, not as a "removed" project."""
    ctl.hosts["h1"].status = "closed"
    by_role = submit_as(ctl, "sam", "/physics/astro")
    assert by_role.spec.auth_basis == "role:submitter@/physics"
    out = ctl.apply_config(config().model_copy(update={"rbac": RbacConfig()}), ADMIN)
    assert out["held"] == [f"job {by_role.id}: user sam no longer holds project:submit on /physics/astro (it was "
                           f"let in as role:submitter@/physics)"]
    store = SqliteStore(ctl.topdir / "db2")
    c = controller_on(store, config(ProjectsConfig()), ctl.topdir)
    c.hosts["h1"].status = "closed"
    opened = submit_as(c, "bob")
    assert c.apply_config(config(), ADMIN)["held"] == [
        f"job {opened.id}: project /default is not a project of projects.yaml (the job was submitted in open mode)"]
    store.close()

"""projects.yaml and rbac.yaml: compiling, build errors with positions, warnings, the live
checks of a compiled config (PRJ-1, PRJ-3, PRJ-6, PRJ-7, RBAC-1, RBAC-4, CFG-2, CFG-3)."""

from __future__ import annotations

import grp
import os
import re
import textwrap
from pathlib import Path

import pytest

from xced.config import BuildResult, load_cluster_config
from xced.config.live import check_compiled
from xced.model.config import ClusterConfig
from xced.model.project import PERMISSIONS, ShareTerm
from tests.unit.test_applications import QUEUES, SETTINGS
HOSTS = """\
hosts:
  - name: node1
    slots: 64
    memory: 512GB
    resources: {gpu: 8}
  - name: node2
    slots: 64
    memory: 512GB
    resources: {gpu: 8}
"""
PROJECTS = """\
groups:                      # groups defined in config, beside the system's
  hep: [erin, frank]
projects:
  /physics:
    description: Physics
    share: 60%
    admins: [alice]
  /physics/hep:
    share: {slots: 40, gpu: 50%, mem: 256GB}
    quota: {slots: 32, mem: 1TB, gpu: 4}
    member_quota: {slots: 8}
    members: [bob, "@hep"]
  /physics/astro:
    members: [dave]
  /bio:
    share: 30%
    members: [gina]
default_projects:
  hep: /physics/hep
"""
RBAC = """\
roles:
  operator: [job:view, job:kill, job:requeue]
  boss: [cluster:admin]
bindings:
  - {role: operator, users: [oscar], groups: [], scope: /physics}
  - {role: boss, users: [carol]}
"""


def make_topdir(tmp_path: Path, projects: str | None = PROJECTS, rbac: str | None = RBAC, *,
                settings: str = SETTINGS, hosts: str = HOSTS, **files: str) -> Path:
    config = tmp_path / "top" / "config"
    config.mkdir(parents=True)
    texts = {"xce.yaml": settings, "queues.yaml": QUEUES, "hosts.yaml": hosts, "projects.yaml": projects,
             "rbac.yaml": rbac, **files}
    for name, text in texts.items():
        if text is not None:
            (config / name).write_text(textwrap.dedent(text))
    return tmp_path / "top"


def build(tmp_path: Path, projects: str | None = PROJECTS, rbac: str | None = RBAC, **kw) -> BuildResult:
    return load_cluster_config(make_topdir(tmp_path, projects, rbac, **kw))


def where(diags) -> list[tuple[str, int | None, int | None]]:
    return [(Path(d.file).name, d.line, d.col) for d in diags]


def one_error(r: BuildResult):
    assert len(r.errors) == 1, [str(d) for d in r.errors]
    d = r.errors[0]
    return (Path(d.file).name, d.line, d.col), d.message


# --------------------------------------------------------------------------- good files


def test_the_issues_example_compiles_onto_the_model(tmp_path: Path) -> None:
    r = build(tmp_path)
    assert r.errors == [] and r.warnings == [], [str(d) for d in r.errors + r.warnings]
    cfg = r.config
    assert cfg is not None and not cfg.projects.open_mode
    assert cfg.projects.paths() == ["/physics", "/physics/hep", "/physics/astro", "/bio"]
    physics, hep = cfg.projects.get("/physics"), cfg.projects.get("/physics/hep")
    assert physics.share_percent == 60 and physics.share == {} and physics.admins == ["alice"]
    assert physics.description == "Physics"
    assert hep.share_percent is None
    assert hep.share == {"slots": ShareTerm(amount=40), "gpu": ShareTerm(percent=50),
                         "mem_mb": ShareTerm(amount=256 * 1024)}
    assert hep.quota == {"slots": 32, "mem_mb": 1024 * 1024, "gpu": 4}
    assert hep.member_quota == {"slots": 8} and hep.members == ["bob", "@hep"]
    assert cfg.projects.get("/physics/astro").has_share is False
    assert cfg.projects.groups == {"hep": ["erin", "frank"]}
    assert cfg.projects.default_projects == {"hep": "/physics/hep"}
    assert cfg.rbac.roles == {"operator": ["job:view", "job:kill", "job:requeue"], "boss": ["cluster:admin"]}
    (op, boss) = cfg.rbac.bindings
    assert (op.role, op.users, op.groups, op.scope) == ("operator", ["oscar"], [], "/physics")
    assert (boss.scope, boss.users) == ("/", ["carol"])


def test_the_compiled_config_round_trips_as_put_config_parses_it(tmp_path: Path) -> None:
    """CFG-3: `xceadmin build --apply` sends model_dump(mode="json"); the daemon parses it
    with strict=True and checks it again: the same config, the same hash, no problem."""
    r = build(tmp_path, settings=SETTINGS + "default_project: /bio\n")
    assert r.ok and r.config is not None
    again = ClusterConfig.model_validate(r.config.model_dump(mode="json"), strict=True)
    assert again == r.config and again.content_hash() == r.hash
    assert check_compiled(again) == []


def test_parents_come_before_children_in_file_order_otherwise(tmp_path: Path) -> None:
    projects = """\
    projects:
      /b/y: {}
      /a/x/deep: {}
      /c: {}
      /a: {}
      /a/x: {}
      /b: {}
      /b/z: {}
    """
    r = build(tmp_path, projects, None)
    assert r.ok, [str(d) for d in r.errors]
    assert r.config.projects.paths() == ["/c", "/a", "/a/x", "/a/x/deep", "/b", "/b/y", "/b/z"]


@pytest.mark.parametrize(("text", "rbac"), [(None, None), ("", ""), ("# only comments\n", "# nothing\n"),
                                           ("projects:\n", "roles:\n"), ("projects: {}\ngroups:\n", "bindings: []\n")])
def test_no_project_is_open_mode(tmp_path: Path, text: str | None, rbac: str | None) -> None:
    """PRJ-4: a missing, empty or all-comment projects.yaml is open mode, with no warning."""
    r = build(tmp_path, text, rbac)
    assert r.errors == [] and r.warnings == [] and r.config is not None
    assert r.config.projects.open_mode and r.config.rbac.roles == {} and r.config.rbac.bindings == []


def test_open_mode_keeps_a_default_project_of_valid_form(tmp_path: Path) -> None:
    r = build(tmp_path, None, None, settings=SETTINGS + "default_project: /anything\n")
    assert r.ok and r.config.settings.default_project == "/anything"
    r = build(tmp_path / "b", None, None, settings=SETTINGS + "default_project: anything\n")
    (at, msg) = one_error(r)
    assert at == ("xce.yaml", 4, 18)
    assert msg.startswith("default_project must start with '/'") and 'did you mean "/anything"' in msg


def test_system_groups_and_config_groups_need_no_warning(tmp_path: Path) -> None:
    system = grp.getgrgid(os.getgid()).gr_name
    projects = f"""\
    groups:
      hep: [erin]
    projects:
      /p:
        members: ["@hep", "@{system}"]
    default_projects:
      {system}: /p
    """
    r = build(tmp_path, projects, None)
    assert r.errors == [] and r.warnings == [], [str(d) for d in r.warnings]


def test_a_resource_is_only_checked_against_hosts_that_are_declared(tmp_path: Path) -> None:
    projects = "projects:\n  /p:\n    quota: {lic: 3}\n"
    r = build(tmp_path, projects, None)
    assert where(r.warnings) == [("projects.yaml", 3, 13)]
    assert r.warnings[0].message.startswith('project /p: quota: no host of hosts.yaml declares resource "lic"')
    assert "declared: slots, mem, gpu" in r.warnings[0].message
    r = build(tmp_path / "b", projects, None, hosts="hosts: []\n")
    assert r.errors == [] and all("lic" not in w.message for w in r.warnings)


def test_a_quota_may_be_zero_and_a_description_is_text(tmp_path: Path) -> None:
    projects = "projects:\n  /p:\n    description: null\n    quota: {slots: 0, mem: 0, gpu: 0}\n"
    r = build(tmp_path, projects, None)
    assert r.ok and r.config.projects.get("/p").quota == {"slots": 0, "mem_mb": 0, "gpu": 0}


# --------------------------------------------------------------------------- build errors


@pytest.mark.parametrize(("projects", "at", "needle"), [
    # unknown project paths
    ("projects:\n  /physics/hep: {}\n", (2, 3),
     "project /physics/hep: its parent /physics is not a project; declare /physics in projects.yaml too"),
    ("projects:\n  /p: {}\ndefault_projects:\n  hep: /q\n", (4, 8),
     "default_projects: the default project of group hep, /q is not a project of projects.yaml; projects: /p"),
    # malformed paths
    ("projects:\n  physics: {}\n", (2, 3), "a project path must start with '/'"),
    ("projects:\n  /physics/: {}\n", (2, 3), 'got "/physics/" (did you mean "/physics"?)'),
    ("projects:\n  /phy sics: {}\n", (2, 3), "a project path must be '/' followed by names of letters"),
    ("projects:\n  " + "/a" * 17 + ": {}\n", (2, 3), "is 17 levels deep; a project tree has at most 16 levels"),
    ("projects:\n  /" + "a" * 300 + ": {}\n", (2, 3), "is 301 characters long; a project path has at most 255"),
    ("projects:\n  5: {}\n", (2, 3), "a project path must be '/' followed by names"),
    ("projects:\n  /p: {}\ndefault_projects:\n  hep: p\n", (4, 8), "default_projects.hep must start with '/'"),
    # shares
    ("projects:\n  /p:\n    share: 120%\n", (3, 12),
     'project /p: share must be a percentage of the parent\'s greater than 0% and at most 100% (e.g. "60%"), '
     'got "120%"'),
    ("projects:\n  /p:\n    share: 0%\n", (3, 12), 'at most 100% (e.g. "60%"), got "0%"'),
    ("projects:\n  /p:\n    share: -5%\n", (3, 12), 'got "-5%"'),
    ("projects:\n  /p:\n    share: lots%\n", (3, 12), 'got "lots%"'),
    ("projects:\n  /p:\n    share: {slots: 120%}\n", (3, 20), 'share.slots must be a percentage'),
    ("projects:\n  /p:\n    share: 40\n", (3, 12),
     "project /p: share 40 is a bare number: a percentage of the parent's is written with % (share: 40%), "
     "and an absolute share names its resource: share: {slots: 40}"),
    ("projects:\n  /p:\n    share: lots\n", (3, 12), "share must be a percentage of every resource"),
    ("projects:\n  /p:\n    share: [slots]\n", (3, 12), "got a list"),
    ("projects:\n  /p:\n    share: {slots: 1.5}\n", (3, 20),
     'share.slots must be a whole number of slots from 1 to 1000000, or a percentage of the parent\'s like "50%"'),
    ("projects:\n  /p:\n    share: {slots: 0}\n", (3, 20), "from 1 to 1000000"),
    ("projects:\n  /p:\n    share: {mem: 4XB}\n", (3, 18), "share.mem: expected an integer number of MB"),
    ("projects:\n  /p:\n    share: {gpu: two}\n", (3, 18), "share.gpu must be a number greater than 0"),
    ("projects:\n  /p:\n    share: {mem_mb: 1024}\n", (3, 13), "memory is written mem"),
    ("projects:\n  /p:\n    share: {2: 1}\n", (3, 13), "a resource is slots, mem or a consumable resource"),
    # quotas
    ("projects:\n  /p:\n    quota: {slots: -1}\n", (3, 20), "quota.slots must be a whole number of slots from 0"),
    ("projects:\n  /p:\n    quota: {gpu: -2}\n", (3, 18), "quota.gpu must be a number 0 or more"),
    ("projects:\n  /p:\n    member_quota: {slots: many}\n", (3, 27), "member_quota.slots must be a whole number"),
    ("projects:\n  /p:\n    quota: {slots: 50%}\n", (3, 20), "a quota is an absolute cap"),
    ("projects:\n  /p:\n    quota: 32\n", (3, 12), "quota must be a mapping of resource to amount"),
    ("projects:\n  /p:\n    quota: {gpu: 1e400}\n", (3, 18), "got inf"),
    ("projects:\n  /p:\n    quota: {slots: 100000000000000000000000}\n", (3, 20), "from 0 to 1000000"),
    # members
    ("projects:\n  /p: {}\n  /q:\n    members: [bob, /p]\n", (4, 20),
     'project /q: members[2] "/p" names a project; members and admins are users and groups written @name, '
     "never projects (PRJ-2)"),
    ("projects:\n  /p:\n    admins: [/p]\n", (3, 14), "names a project"),
    ("projects:\n  /p:\n    members: [bad name]\n", (3, 15), "members[1] must be a user name"),
    ("projects:\n  /p:\n    members: [\"@\"]\n", (3, 15), "members[1] must be a user name or @group"),
    ("projects:\n  /p:\n    members: [7]\n", (3, 15), "got 7"),
    ("projects:\n  /p:\n    members: bob\n", (3, 14), 'members must be a list, e.g. [bob, "@hep"], got "bob"'),
    ("projects:\n  /p:\n    members: [bob, @hep]\n", (3, 20),
     'invalid YAML: found character \'@\' that cannot start any token (a value that starts with @ must be quoted'),
    # groups
    ("groups:\n  \"@hep\": [a]\n", (2, 3), 'a group\'s name is written without @ here'),
    ("groups:\n  hep: [\"@x\"]\n", (2, 9), 'is a group; list groups under groups: (without @)'),
    ("groups:\n  hep: erin\n", (2, 8), "group hep must be a list, e.g. [erin, frank]"),
    ("groups: [hep]\n", (1, 9), "groups must be a mapping of group name to its users"),
    # shapes and misspelt keys
    ("project:\n  /p: {}\n", (1, 1),
     'unknown key "project" in projects.yaml; valid keys: groups, projects, default_projects '
     '(did you mean "projects"?)'),
    ("projects:\n  /p:\n    membres: [bob]\n", (3, 5),
     'unknown key "membres" in project /p; valid keys: description, share, quota, member_quota, members, admins '
     '(did you mean "members"?)'),
    ("projects:\n  /p:\n    shares: 10%\n", (3, 5), '(did you mean "share"?)'),
    ("projects:\n  - /p\n", (2, 3), "projects must be a mapping of project path to project (a list is not accepted"),
    ("projects:\n  /p: 60%\n", (2, 7), "project /p must be a mapping of keys (description, share"),
    ("- a\n", (1, 1), "projects.yaml must be a mapping of keys (groups, projects, default_projects), got a list"),
    ("42\n", (1, 1), "projects.yaml must be a mapping of keys"),
    ("projects:\n  /p: {}\n  /p: {}\n", (3, 3),
     'duplicate key "/p" (first given at line 2); a key may appear once in a mapping: keep one'),
    ("projects:\n  /p:\n    description: [x]\n", (3, 18), "project /p: description must be a string, got a list"),
    ("default_projects: [/p]\n", (1, 19), "default_projects must be a mapping of group name to project path"),
])
def test_projects_yaml_errors_name_their_place(tmp_path: Path, projects: str, at, needle: str) -> None:
    r = build(tmp_path, projects, None)
    assert r.config is None and not r.ok
    (got_at, msg) = one_error(r)
    assert got_at == ("projects.yaml", *at), (got_at, msg)
    assert needle in msg, msg
    assert "Traceback" not in msg


@pytest.mark.parametrize(("rbac", "at", "needle"), [
    ("roles:\n  op: [job:view]\nbindings:\n  - {role: oper, users: [a]}\n", (4, 12),
     'the binding of role oper at /: role "oper" is not a role of rbac.yaml (did you mean "op"?); roles: op'),
    ("roles:\n  op: [job:view, job:kil]\n", (2, 18),
     'role "op": unknown permission "job:kil" (did you mean "job:kill"?); permissions: ' + ", ".join(PERMISSIONS)),
    ("roles:\n  op: [5]\n", (2, 8), 'role "op": unknown permission 5; permissions: queue:submit'),
    ("roles:\n  op: job:view\n", (2, 7), 'role "op" must be a list of permissions'),
    ("roles:\n  op: [cluster:admin]\nbindings:\n  - {role: op, users: [a], scope: /physics}\n", (4, 35),
     'the binding of role op at /physics: role "op" holds cluster:admin, which covers the whole cluster, so it is bound at scope / only, '
     "got scope /physics"),
    ("roles:\n  op: [cluster:view, cluster:admin]\nbindings:\n  - {role: op, users: [a], scope: /physics/hep}\n",
     (4, 35), "holds cluster:admin and cluster:view, which cover the whole cluster"),
    ("roles:\n  op: [job:view]\nbindings:\n  - {role: op, users: [a], scope: /nope}\n", (4, 35),
     "the binding of role op at /nope: scope /nope is not a project; valid: / (the whole cluster) or a project path; projects: "
     "/physics, /physics/hep, /physics/astro, /bio"),
    ("roles:\n  op: [job:view]\nbindings:\n  - {role: op, users: [a], scope: /physics/hepp}\n", (4, 35),
     'scope /physics/hepp is not a project (did you mean "/physics/hep"?)'),
    ("roles:\n  op: [job:view]\nbindings:\n  - {role: op, users: [a], scope: physics}\n", (4, 35),
     "binding #1: scope must start with '/'"),
    ("roles:\n  op: [job:view]\nbindings:\n  - {role: op, users: [\"@hep\"]}\n", (4, 24), "is a group"),
    ("roles:\n  op: [job:view]\nbindings:\n  - {role: op, groups: [\"@hep\"]}\n", (4, 25),
     "a group's name is written without @ here"),
    ("roles:\n  op: [job:view]\nbindings:\n  - {role: op, users: [a], scop: /physics}\n", (4, 28),
     'unknown key "scop" in binding #1; valid keys: role, users, groups, scope (did you mean "scope"?)'),
    ("role:\n  op: [job:view]\n", (1, 1), 'unknown key "role" in rbac.yaml; valid keys: roles, bindings '
                                          '(did you mean "roles"?)'),
    ("bindings:\n  - {users: [a]}\n", (2, 5), 'binding #1: missing required key "role"'),
    ("bindings: {role: op}\n", (1, 11), "bindings must be a list of {role, users, groups, scope}"),
    ("roles: [op]\n", (1, 8), "roles must be a mapping of role name to a list of permissions"),
    ("roles:\n  op: [job:view]\n  op: [job:kill]\n", (3, 3),
     'duplicate key "op" (first given at line 2); a key may appear once in a mapping: keep one'),
    ("roles:\n  \"a b\": [job:view]\n", (2, 3), 'a role name must consist of letters, digits'),
    ("[1, 2]\n", (1, 1), "rbac.yaml must be a mapping of keys (roles, bindings), got a list"),
    ("roles: {op: [job:view]}\nbindings: [{role: op, users: [a], scope: /}]\nroles: {}\n", (3, 1),
     'duplicate key "roles"'),
])
def test_rbac_yaml_errors_name_their_place(tmp_path: Path, rbac: str, at, needle: str) -> None:
    r = build(tmp_path, PROJECTS, rbac)
    assert r.config is None
    (got_at, msg) = one_error(r)
    assert got_at == ("rbac.yaml", *at), (got_at, msg)
    assert needle in msg, msg


def test_a_path_given_twice_quoted_once_is_a_duplicate(tmp_path: Path) -> None:
    r = build(tmp_path, 'projects:\n  /p: {}\n  "/p": {share: 5%}\n', None)
    (at, msg) = one_error(r)
    assert at == ("projects.yaml", 3, 3) and msg.startswith('duplicate key "/p" (first given at line 2)')


def test_a_binding_scope_needs_a_project_even_in_open_mode(tmp_path: Path) -> None:
    r = build(tmp_path, None, "roles: {op: [job:view]}\nbindings: [{role: op, users: [a], scope: /x}]\n")
    (at, msg) = one_error(r)
    assert at == ("rbac.yaml", 2, 42)
    assert "scope /x is not a project" in msg and "no project is defined in projects.yaml (open mode)" in msg


def test_xce_yaml_default_project_must_name_a_project_once_there_are_projects(tmp_path: Path) -> None:
    r = build(tmp_path, settings=SETTINGS + "default_project: /physics/hepp\n")
    (at, msg) = one_error(r)
    assert at == ("xce.yaml", 4, 18)
    assert msg == ('default_project /physics/hepp is not a project of projects.yaml (did you mean "/physics/hep"?); '
                   "projects: /physics, /physics/hep, /physics/astro, /bio")


# --------------------------------------------------------------------------- carving (PRJ-6)


def test_percent_shares_of_siblings_over_100_percent(tmp_path: Path) -> None:
    projects = """\
    projects:
      /physics:
        share: 60%
      /physics/hep:
        share: {slots: 50%}
      /physics/astro:
        share: 40%
      /physics/nuc:
        share: {slots: 20%, gpu: 10%}
    """
    (at, msg) = one_error(build(tmp_path, projects, None))
    assert at == ("projects.yaml", 9, 20)  # /physics/nuc tips slots over, at its slots term
    assert msg == "shares of the children of /physics add up to 110% of slots, more than /physics's share (100%)"


def test_percent_of_every_resource_and_top_level(tmp_path: Path) -> None:
    projects = "projects:\n  /a:\n    share: 60%\n  /b:\n    share: 50%\n  /c:\n    share: 10%\n"
    (at, msg) = one_error(build(tmp_path, projects, None))
    assert at == ("projects.yaml", 5, 12)
    assert msg == "shares of the top-level projects add up to 120% of every resource, more than the whole cluster (100%)"


def test_percent_shares_that_add_up_to_100_percent_are_fine(tmp_path: Path) -> None:
    projects = ("projects:\n  /a:\n    share: 33.3%\n  /b:\n    share: 33.3%\n  /c:\n    share: {slots: 33.4%}\n"
                "  /c/x:\n    share: 100%\n")
    r = build(tmp_path, projects, None)
    assert r.ok, [str(d) for d in r.errors]


def test_absolute_shares_over_an_absolute_parent(tmp_path: Path) -> None:
    projects = """\
    projects:
      /physics:
        share: {slots: 100, mem: 1TB}
      /physics/hep:
        share: {slots: 60, mem: 512GB}
      /physics/astro:
        share: {slots: 30%, mem: 50%}
      /physics/bio:
        share: {slots: 20}
    """
    (at, msg) = one_error(build(tmp_path, projects, None))
    assert at == ("projects.yaml", 9, 20)
    assert msg == ("shares of the children of /physics add up to 110 slots (80 slots, plus 30% of 100 slots), more "
                   "than /physics's share (100 slots)")
    projects = projects.replace("mem: 50%", "mem: 60%")
    r = build(tmp_path / "b", projects, None)
    assert [(d.line, d.col, d.message) for d in r.errors][0] == (7, 30, (
        "shares of the children of /physics add up to 1.1TB of mem (512GB of mem, plus 60% of 1TB of mem), more "
        "than /physics's share (1TB of mem)"))
    assert len(r.errors) == 2


def test_absolute_children_of_a_percentage_are_not_checked_at_build(tmp_path: Path) -> None:
    """The parent's share resolves against the hosts present at each session (PRJ-6)."""
    projects = "projects:\n  /a:\n    share: 10%\n  /a/x:\n    share: {slots: 5000}\n"
    r = build(tmp_path, projects, None)
    assert r.ok and r.warnings == []


def test_top_level_absolute_shares_over_hosts_yaml_are_a_warning(tmp_path: Path) -> None:
    projects = "projects:\n  /a:\n    share: {slots: 100, gpu: 4}\n  /b:\n    share: {slots: 50, gpu: 50%}\n"
    r = build(tmp_path, projects, None)
    assert r.ok
    assert where(r.warnings) == [("projects.yaml", 5, 20)]
    assert r.warnings[0].message.startswith(
        "shares of the top-level projects add up to 150 slots, more than the hosts of hosts.yaml hold (128 slots)")
    r = build(tmp_path / "b", projects, None, hosts="hosts: []\n")
    assert r.ok and all("top-level" not in w.message for w in r.warnings)


# --------------------------------------------------------------------------- warnings


def test_warnings_of_projects_and_rbac(tmp_path: Path) -> None:
    projects = """\
    groups:
      hep: [erin, erin]
    projects:
      /p:
        quota: {slots: 8, gpu: 1}
        member_quota: {slots: 16, gpux: 1}
        members: [bob, bob, "@nosuchgroup-xce"]
    default_projects:
      nosuch-xce: /p
    """
    rbac = """\
    roles:
      op: [job:view, job:view]
      idle: []
    bindings:
      - {role: op, scope: /p}
      - {role: idle, groups: [nogroup-xce]}
    """
    r = build(tmp_path, projects, rbac)
    assert r.errors == [], [str(d) for d in r.errors]
    got = [(Path(w.file).name, w.line, w.message) for w in r.warnings]
    assert got == [
        ("projects.yaml", 2, "group hep: erin is listed twice"),
        ("projects.yaml", 6, "project /p: member_quota of slots (16 slots) is larger than its quota (8 slots): no "
                             "member can use more than the quota"),
        ("projects.yaml", 6, 'project /p: member_quota: no host of hosts.yaml declares resource "gpux" (did you mean '
                             '"gpu"?); declared: slots, mem, gpu (a worker that joins may offer it)'),
        ("projects.yaml", 7, "project /p: members: bob is listed twice"),
        ("projects.yaml", 7, "project /p: members[3]: group nosuchgroup-xce is neither in groups: of projects.yaml "
                             "nor a system group of this host; nobody is in it unless the daemon's host knows it"),
        ("projects.yaml", 9, "default_projects: group nosuch-xce is neither in groups: of projects.yaml nor a "
                             "system group of this host; nobody is in it unless the daemon's host knows it"),
        ("rbac.yaml", 2, 'role "op": job:view is listed twice'),
        ("rbac.yaml", 3, 'role "idle" grants no permission; give it a list of permissions: '
                         + ", ".join(PERMISSIONS)),
        ("rbac.yaml", 5, 'binding #1: role "op" is bound to nobody; give users or groups'),
        ("rbac.yaml", 6, "binding #2: groups[1]: group nogroup-xce is neither in groups: of projects.yaml nor a "
                         "system group of this host; nobody is in it unless the daemon's host knows it"),
    ]


def test_unknown_config_file_names_get_a_warning(tmp_path: Path) -> None:
    top = make_topdir(tmp_path, **{"project.yaml": "x: 1\n", "queue.yml": "", "monitoring.yaml": "",
                                   "keys.yaml": "keys: []\n", "README": "", ".hosts.yaml.tmp": "",
                                   ".swp.yaml": ""})
    (top / "config" / "presets").mkdir()
    (top / "config" / "presets" / "mine.yaml").write_text("x: 1\n")
    r = load_cluster_config(top)
    assert r.ok  # keys.yaml is read (KEY-2): no warning for it
    got = {Path(w.file).name: (w.line, w.message) for w in r.warnings}
    assert set(got) == {"project.yaml", "queue.yml", "monitoring.yaml"}
    reads = ("config/ holds xce.yaml, queues.yaml, hosts.yaml, applications.yaml, projects.yaml, rbac.yaml, "
             "keys.yaml and the directory presets/")
    assert got["project.yaml"] == (None, f'not a file XCE reads, so it is ignored (did you mean "projects.yaml"?); '
                                         f"{reads}")
    assert got["queue.yml"][1].startswith('not a file XCE reads, so it is ignored (did you mean "queues.yaml"?)')
    assert got["monitoring.yaml"][1] == f"not a file XCE reads, so it is ignored; {reads}"
    assert str(r.warnings[-1]).startswith(str(top / "config") + "/")


# --------------------------------------------------------------------------- no traceback


@pytest.mark.parametrize("text", [
    "projects: {/p: {share: {slots: null}}}\n",
    "projects: {/p: {share: null, quota: null, member_quota: null, members: null, admins: null}}\n",
    "projects: {/p: {share: {slots: [1]}, quota: {slots: {a: 1}}, members: [[bob]], admins: [{a: 1}]}}\n",
    "projects: {/p: {share: true, quota: {slots: true, mem: true, gpu: false}}}\n",
    "projects: {/p: {share: {slots: 1e400, mem: 99999999999999999999TB, gpu: .nan}}}\n",
    "projects: {null: {}, true: {}, 1.5: {}, [a]: {}}\n",
    "projects: {? [a, b] : {}}\n",
    "groups: {null: [a], 5: [b], hep: [null, 5, true]}\n",
    "groups: null\nprojects: null\ndefault_projects: null\n",
    "default_projects: {hep: null, 5: /p, null: 7}\n",
    "projects: {/p: {share: '%'}}\n",
    "projects: {/p: {share: '1e999%'}}\n",
    "projects: {/p: {share: {slots: '100%', mem: '1%', gpu: '0.0001%'}}}\n",
    "projects: {/p: {description: " + "x" * 5000 + "}}\n",
    "projects:\n  /p: &a {share: 10%}\n  /q: *a\n  /r:\n    <<: *a\n    members: [x]\n",
    "projects: !!str abc\n",
    "projects: {/p: {members: [\"@" + "g" * 300 + "\"]}}\n",
])
def test_odd_projects_files_never_raise(tmp_path: Path, text: str) -> None:
    r = build(tmp_path, text, None)
    for d in r.errors + r.warnings:
        assert Path(d.file).name == "projects.yaml" and d.line is not None, str(d)
    if r.ok:
        assert ClusterConfig.model_validate(r.config.model_dump(mode="json"), strict=True) == r.config


@pytest.mark.parametrize("text", [
    "roles: null\nbindings: null\n",
    "roles: {op: null}\nbindings: [null, 5, [a], {role: null}, {role: op, users: null, groups: null, scope: null}]\n",
    "roles: {null: [job:view], 5: [a]}\nbindings: [{role: 5, users: [5, null], groups: [true], scope: 5}]\n",
    "roles: {op: [[job:view], {a: 1}, null]}\n",
    "bindings: [{role: op, scope: /}]\n",
    "bindings: [{role: op, users: [a], scope: '/" + "a" * 400 + "'}]\n",
])
def test_odd_rbac_files_never_raise(tmp_path: Path, text: str) -> None:
    r = build(tmp_path, PROJECTS, text)
    for d in r.errors + r.warnings:
        assert d.line is not None, str(d)


# --------------------------------------------------------------------------- live checks (CFG-3)


def test_live_checks_cover_projects_and_rbac() -> None:
    """A compiled config sent to PUT /config that skipped `xceadmin build` is held to the same rules."""
    base = {"settings": {"cluster_name": "c", "default_project": "/nope"}, "queues": [{"name": "normal"}],
            "hosts": [{"name": "h1", "slots": 2, "memory_mb": 100}]}
    projects = {
        "projects": [
            {"path": "/a", "share_percent": 60},
            {"path": "/b", "share": {"slots": {"percent": 50}}},
            {"path": "/x/y"},
            {"path": "/a/k", "share": {"slots": {"amount": 5}}},
            {"path": "/c", "share": {"slots": {"amount": 10}}},
            {"path": "/c/d", "share": {"slots": {"amount": 11}}},
            {"path": "/a"},
        ],
        "default_projects": {"hep": "/gone"},
    }
    rbac = {"roles": {"op": ["job:view"], "root": ["cluster:admin"]},
            "bindings": [{"role": "nope", "users": ["a"]}, {"role": "op", "users": ["a"], "scope": "/zz"},
                         {"role": "root", "users": ["a"], "scope": "/a"}]}
    cfg = ClusterConfig.model_validate({**base, "projects": projects, "rbac": rbac}, strict=True)
    assert check_compiled(cfg) == [
        "project /x/y: its parent /x is not a project; declare /x in projects.yaml too (every ancestor of a project "
        "is a project, PRJ-1)",
        "project /a is defined twice; paths must be unique",
        "default_projects: the default project of group hep, /gone is not a project of projects.yaml; projects: "
        "/a, /b, /x/y, /a/k, /c, /c/d, /a",
        'default_project /nope is not a project of projects.yaml; projects: /a, /b, /x/y, /a/k, /c, /c/d, /a',
        'the binding of role nope at /: role "nope" is not a role of rbac.yaml (did you mean "op"?); roles: op, root',
        "the binding of role op at /zz: scope /zz is not a project; valid: / (the whole cluster) or a project path; projects: /a, /b, "
        "/x/y, /a/k, /c, /c/d, /a",
        'the binding of role root at /a: role "root" holds cluster:admin, which covers the whole cluster, so it is bound at scope / '
        "only, got scope /a; bind it at /, or bind a role without cluster:admin here",
        "shares of the top-level projects add up to 110% of slots, more than the whole cluster (100%)",
        "shares of the children of /c add up to 11 slots, more than /c's share (10 slots)",
    ]
    child_first = ClusterConfig.model_validate({**base, "settings": {}, "projects": {
        "projects": [{"path": "/a/b"}, {"path": "/a"}]}}, strict=True)
    assert check_compiled(child_first) == [
        "project /a/b is listed before its parent /a; the compiled list holds parents before children"]
    deep = ClusterConfig.model_validate({**base, "settings": {}, "projects": {
        "projects": [{"path": "/a" * i} for i in range(1, 18)]}}, strict=True)
    assert check_compiled(deep) == ["project " + "/a" * 17 + " is 17 levels deep; a project tree has at most 16 "
                                    "levels"]


# --------------------------------------------------------------------------- xceadmin init


def _uncommented(text: str) -> str:
    """The example of a skeleton with its leading "# " taken off: from the first line that
    is a commented top-level key on."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"# [a-z_]+:\s*", line))
    return "\n".join(re.sub(r"^# ?", "", line) for line in lines[start:]) + "\n"


def test_init_writes_commented_skeletons_that_stay_in_open_mode(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from xceadmin.app import app

    top = tmp_path / "top"
    res = CliRunner().invoke(app, ["init", str(top)])
    assert res.exit_code == 0, res.output
    config = top / "config"
    r = load_cluster_config(top)
    assert r.errors == [] and r.warnings == [] and r.config.projects.open_mode and r.config.rbac.bindings == []
    projects, rbac = (config / "projects.yaml").read_text(), (config / "rbac.yaml").read_text()
    assert (config / "projects.yaml").stat().st_mode & 0o777 == 0o644
    for key in ("groups:", "projects:", "default_projects:", "description:", "share:", "quota:", "member_quota:",
                "members:", "admins:"):
        assert f"# {key}" in projects or f"#     {key}" in projects, key
    for word in ("roles:", "bindings:", "role:", "users:", "groups:", "scope:", *PERMISSIONS):
        assert word in rbac, word
    assert all(line.startswith("#") or not line.strip() for line in projects.splitlines() + rbac.splitlines())

    # the example, uncommented, builds: every key shown is a valid one
    (config / "projects.yaml").write_text(_uncommented(projects))
    (config / "rbac.yaml").write_text(_uncommented(rbac))
    r = load_cluster_config(top)
    assert r.errors == [] and r.warnings == [], [str(d) for d in r.errors + r.warnings]
    assert r.config.projects.paths() == ["/physics", "/physics/hep", "/physics/astro", "/bio"]
    assert [b.role for b in r.config.rbac.bindings] == ["operator", "submitter"]

    again = CliRunner().invoke(app, ["init", str(top)])
    assert again.exit_code == 1


def test_init_refuses_when_only_projects_yaml_exists(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from xceadmin.app import app

    (tmp_path / "top" / "config").mkdir(parents=True)
    (tmp_path / "top" / "config" / "projects.yaml").write_text("projects: {/a: {}}\n")
    res = CliRunner().invoke(app, ["init", str(tmp_path / "top")])
    assert res.exit_code == 1 and "projects.yaml exists already" in res.output
    assert not (tmp_path / "top" / "config" / "xce.yaml").exists()

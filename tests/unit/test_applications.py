"""applications.yaml: schema, loading and build checks (PROF-1..PROF-9, CFG-2, DISPATCH-1)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from xced.config import BuildResult, load_cluster_config
from xced.config.applications import looks_secret_name, looks_secret_value
from xced.model.profile import Profile, export_name

SETTINGS = """\
cluster_name: demo
admins: [alice]
default_queue: normal
"""
QUEUES = """\
queues:
  - name: normal
"""
HOSTS = """\
hosts:
  - name: node1
    slots: 8
    memory: 16GB
    resources: {gpu: 2, fluent_lic: 4}
    type: X86_64
    attributes: {rack: r1}
    tags: [fast]
  - name: node2
    slots: 8
    memory: 16GB
    type: X86_64
    attributes: {rack: r2}
"""
APPS = """\
applications:
  pytorch:
    description: PyTorch training
    env: {OMP_NUM_THREADS: 8, PYTHONUNBUFFERED: "1"}
    pre_job_exec: /opt/hooks/stage-data.sh
    post_job_exec: {command: /opt/hooks/cleanup.sh, timeout: 60}
    resreq:
      select: "gpu > 0 && type=X86_64"
      rusage:
        - mem: 4GB
        - gpu: 1
    run_limit: "2h"
    memory_limit: 8GB
    params: {EPOCHS: "10", batch.size: 32}
    annotations: {team.owner: ml-platform}
  fluent:
    resreq:
      rusage:
        - fluent_lic: 1
          per: job
          default: true
    on_host_failure: exit
    allow_job_pre_post_exec: false
  mpi:
    job_starter: /usr/bin/mpirun-wrapper
    resreq:
      span: {ptile: 8}
      same: rack
      order: "-slots"
    tasks: "2,64"
    pre_host_exec: /opt/hooks/mpi-prep.sh
  web:
    kind: service
    description: model server
    service:
      restart_policy: always
      replicas: {min: 1, max: 3}
      ports: [{name: http, port: 8080}]
      probes:
        - {name: readiness, type: http, port: 8080, path: /health}
        - {name: liveness, type: exec, command: /bin/true, interval: 30s}
"""


def topdir(tmp_path: Path, apps: str | None = APPS, settings: str = SETTINGS, hosts: str = HOSTS) -> Path:
    config = tmp_path / "top" / "config"
    config.mkdir(parents=True)
    files = {"xce.yaml": settings, "queues.yaml": QUEUES, "hosts.yaml": hosts, "applications.yaml": apps}
    for name, text in files.items():
        if text is not None:
            (config / name).write_text(textwrap.dedent(text))
    return tmp_path / "top"


def errors_at(r: BuildResult) -> list[tuple[str, int | None, int | None]]:
    return [(Path(d.file).name, d.line, d.col) for d in r.errors]


def app_warnings(r: BuildResult) -> list[str]:
    return [str(d) for d in r.warnings if Path(d.file).name == "applications.yaml"]


# --------------------------------------------------------------------------- good files


def test_realistic_file_loads(tmp_path: Path) -> None:
    r = load_cluster_config(topdir(tmp_path))
    assert r.ok, [str(d) for d in r.errors]
    apps = r.config.applications
    assert list(apps) == ["default", "pytorch", "fluent", "mpi", "web"]

    pt = apps["pytorch"]
    assert pt.env == {"OMP_NUM_THREADS": "8", "PYTHONUNBUFFERED": "1"}
    assert pt.pre_job_exec.command == "/opt/hooks/stage-data.sh" and pt.pre_job_exec.timeout_s == 300
    assert pt.post_job_exec.timeout_s == 60
    assert pt.select == "gpu > 0 && type == X86_64"  # canonical
    assert [(e.name, e.value, e.unit, e.per) for e in pt.rusage] == [("mem", 4096, "MB", "task"),
                                                                      ("gpu", 1, None, "task")]
    assert pt.limits.run_limit_s == 7200 and pt.limits.memory_limit_mb == 8192
    assert pt.params == {"EPOCHS": "10", "batch.size": "32"}
    assert pt.annotations == {"team.owner": "ml-platform"}
    assert pt.kind == "batch" and pt.mode == "direct" and pt.on_host_failure == "requeue"

    fl = apps["fluent"]
    assert [(e.name, e.value, e.per, e.default) for e in fl.rusage] == [("fluent_lic", 1, "job", True)]
    assert fl.on_host_failure == "exit" and fl.allow_job_pre_post_exec is False

    mpi = apps["mpi"]
    assert mpi.span.ptile == 8 and mpi.span.hosts is None
    assert (mpi.limits.task_min, mpi.limits.task_max) == (2, 64)
    assert mpi.same == ["rack"] and [(o.name, o.desc) for o in mpi.order] == [("slots", True)]
    assert mpi.job_starter == "/usr/bin/mpirun-wrapper" and mpi.pre_host_exec.command == "/opt/hooks/mpi-prep.sh"

    web = apps["web"]
    assert web.kind == "service" and web.service.restart_policy == "always"
    assert (web.service.replicas.min, web.service.replicas.max) == (1, 3)
    assert web.service.ports[0].port == 8080 and web.service.probes[1].interval_s == 30
    assert app_warnings(r) == []


def test_missing_file_gives_the_builtin_default(tmp_path: Path) -> None:
    r = load_cluster_config(topdir(tmp_path, apps=None))
    assert r.ok and list(r.config.applications) == ["default"]
    d = r.config.applications["default"]
    assert d.select is None and d.rusage == [] and d.env == {} and d.params == {}


def test_empty_file_and_empty_mapping(tmp_path: Path) -> None:
    r = load_cluster_config(topdir(tmp_path / "a", apps=""))
    assert r.ok and list(r.config.applications) == ["default"]
    r = load_cluster_config(topdir(tmp_path / "b", apps="applications: {}\n"))
    assert r.ok and list(r.config.applications) == ["default"]


def test_file_default_replaces_builtin(tmp_path: Path) -> None:
    r = load_cluster_config(topdir(tmp_path, apps="applications:\n  default:\n    run_limit: 30\n"))
    assert r.ok
    assert list(r.config.applications) == ["default"]
    assert r.config.applications["default"].limits.run_limit_s == 1800


def test_content_hash_stable_and_excludes_description(tmp_path: Path) -> None:
    r1 = load_cluster_config(topdir(tmp_path / "a"))
    r2 = load_cluster_config(topdir(tmp_path / "b", apps=APPS.replace("PyTorch training", "another text")))
    r3 = load_cluster_config(topdir(tmp_path / "c", apps=APPS.replace('EPOCHS: "10"', 'EPOCHS: "11"')))
    h = r1.config.applications["pytorch"].content_hash()
    assert len(h) == 64
    assert h == load_cluster_config(topdir(tmp_path / "d")).config.applications["pytorch"].content_hash()
    assert r2.config.applications["pytorch"].content_hash() == h  # DISPATCH-1: description excluded
    assert r3.config.applications["pytorch"].content_hash() != h
    assert r1.hash != r3.hash  # the cluster hash follows profiles
    p = Profile(name="x", description="a")
    assert p.content_hash() == Profile(name="x", description="b").content_hash()


def test_default_application(tmp_path: Path) -> None:
    ok = load_cluster_config(topdir(tmp_path / "a", settings=SETTINGS + "default_application: pytorch\n"))
    assert ok.ok and ok.config.settings.default_application == "pytorch"
    builtin = load_cluster_config(topdir(tmp_path / "b", apps=None, settings=SETTINGS + "default_application: default\n"))
    assert builtin.ok
    empty = load_cluster_config(topdir(tmp_path / "c", settings=SETTINGS + 'default_application: ""\n'))
    assert empty.ok and empty.config.settings.default_application == ""  # explicitly no profile
    bad = load_cluster_config(topdir(tmp_path / "d", settings=SETTINGS + "default_application: nosuch\n"))
    assert errors_at(bad) == [("xce.yaml", 4, 22)]
    msg = bad.errors[0].message
    assert '"nosuch"' in msg and "pytorch" in msg and "default" in msg and 'or ""' in msg


# --------------------------------------------------------------------------- errors

BROKEN = """\
applications:
  pytorch:
    kindd: batch
    resreq:
      select: "mem > 4GB &&"
      rusage:
        - mem: lots
    tasks: "8,2"
    pre_job_exec: {command: /bin/true, timeout: 0}
  bad name!:
    run_limit: 10
  svc:
    kind: service
  mpi:
    resreq:
      span: {ptile: 0}
      order: [1]
    env: {"1BAD": x}
"""


def test_all_errors_at_once_with_positions(tmp_path: Path) -> None:
    r = load_cluster_config(topdir(tmp_path, apps=BROKEN))
    assert not r.ok
    by_line = {(d.line, d.col): d.message for d in r.errors}
    assert errors_at(r) == [
        ("applications.yaml", 3, 5),    # unknown key kindd
        ("applications.yaml", 5, 28),   # select: the end of input, at the closing quote
        ("applications.yaml", 7, 16),   # rusage mem value
        ("applications.yaml", 8, 12),   # tasks 8,2
        ("applications.yaml", 9, 49),   # hook timeout 0
        ("applications.yaml", 10, 3),   # bad profile name
        ("applications.yaml", 13, 11),  # service kind without a service section
        ("applications.yaml", 16, 21),  # ptile 0
        ("applications.yaml", 17, 15),  # order [1]
        ("applications.yaml", 18, 11),  # env name
    ]
    assert "valid keys:" in by_line[(3, 5)] and '"kind"' in by_line[(3, 5)]
    assert "select" in by_line[(5, 28)]
    assert "min 8 is more than max 2" in by_line[(8, 12)]
    assert "greater than 0" in by_line[(9, 49)]
    assert "needs a service section" in by_line[(13, 11)]
    assert "from 1" in by_line[(16, 21)]


def test_list_layout_is_refused_with_a_hint(tmp_path: Path) -> None:
    r = load_cluster_config(topdir(tmp_path, apps="applications:\n  - name: x\n"))
    assert errors_at(r) == [("applications.yaml", 2, 3)]
    assert "NAME:" in r.errors[0].message


def test_yaml_syntax_error_and_unknown_top_key(tmp_path: Path) -> None:
    r = load_cluster_config(topdir(tmp_path / "a", apps="anything: [at all\n"))
    assert [f for f, _, _ in errors_at(r)] == ["applications.yaml"]
    r = load_cluster_config(topdir(tmp_path / "b", apps="profiles: {}\n"))
    assert errors_at(r) == [("applications.yaml", 1, 1)] and "valid keys: applications" in r.errors[0].message


def test_annotation_collision_and_limits(tmp_path: Path) -> None:
    apps = (
        "applications:\n"
        "  a:\n"
        "    annotations:\n"
        "      team.owner: x\n"
        "      team-owner: y\n"
        "    params:\n"
        "      EPOCHS: '1'\n"
        "      epochs: '2'\n"
        f"      BIG: {'x' * 5000}\n"
    )
    r = load_cluster_config(topdir(tmp_path / "a", apps=apps))
    assert errors_at(r) == [("applications.yaml", 5, 7), ("applications.yaml", 8, 7), ("applications.yaml", 9, 12)]
    assert "XCE_APP_ANN_TEAM_OWNER" in r.errors[0].message and "team.owner" in r.errors[0].message
    assert "XCE_APP_PARAM_EPOCHS" in r.errors[1].message
    assert "4096 bytes" in r.errors[2].message
    many = "applications:\n  a:\n    annotations:\n" + "".join(f"      k{i}: v\n" for i in range(65))
    r = load_cluster_config(topdir(tmp_path / "b", apps=many))
    assert errors_at(r) == [("applications.yaml", 4, 7)] and "at most 64" in r.errors[0].message


# --------------------------------------------------------------------------- warnings


def test_secret_warnings(tmp_path: Path) -> None:
    apps = """\
    applications:
      a:
        env: {DB_PASSWORD: x, API_KEY: y, PATH: /bin}
        params: {auth.token: ""}
        annotations:
          owner: "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
          commit: 3f2a9c1e5b7d8f0a1b2c3d4e5f60718293a4b5c6
    """
    r = load_cluster_config(topdir(tmp_path, apps=apps))
    assert r.ok
    w = app_warnings(r)
    assert len(w) == 4, w
    assert any(":3:11:" in x and "DB_PASSWORD" in x for x in w)
    assert any(":3:27:" in x and "API_KEY" in x for x in w)
    assert any(":4:14:" in x and "auth.token" in x for x in w)
    assert any(":6:14:" in x and "annotations.owner" in x for x in w)


def test_select_matching_no_host_is_a_warning(tmp_path: Path) -> None:
    apps = """\
    applications:
      big: {resreq: {select: "maxmem > 64GB"}}
      gpu: {resreq: {select: "gpu > 0 && fast"}}
      rack: {resreq: {select: "rack == r9"}}
    """
    r = load_cluster_config(topdir(tmp_path, apps=apps))
    assert r.ok
    w = app_warnings(r)
    assert len(w) == 2, w
    assert '"big"' in w[0] and "maxmem > 65536" in w[0] and "node1, node2" in w[0]
    assert '"rack"' in w[1]
    # no hosts in hosts.yaml (workers join): nothing to compare with
    r = load_cluster_config(topdir(tmp_path / "b", apps=apps, hosts="hosts: []\n"))
    assert r.ok and app_warnings(r) == []


def test_rusage_no_host_offers_is_a_warning(tmp_path: Path) -> None:
    """Issue 11 item 8: a profile reserving a resource no host of hosts.yaml declares built as
    "config OK", and then every job of it was refused at submit (MERGE-2). A warning (a
    worker may offer it when it joins), naming the resource and what the hosts have."""
    apps = """\
    applications:
      lic: {resreq: {rusage: [{mem: 1GB}, {ansys_lic: 1, per: job}, {gpu: 1}]}}
    """
    r = load_cluster_config(topdir(tmp_path, apps=apps))
    assert r.ok
    (w,) = app_warnings(r)
    assert ":2:39: warning: " in w, w
    assert ('application "lic": resreq.rusage[2]: resource "ansys_lic" is offered by no host of hosts.yaml '
            "(their resources: fluent_lic, gpu; mem is every host's memory)") in w
    assert "refused at submit until a host offers it" in w and "--resource ansys_lic=N" in w
    # no hosts in hosts.yaml (workers join): nothing to compare with
    r = load_cluster_config(topdir(tmp_path / "b", apps=apps, hosts="hosts: []\n"))
    assert r.ok and app_warnings(r) == []


def _readme_yaml(heading: str) -> list[str]:
    """The ```yaml blocks of README.md's section `heading`."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```yaml\n(.*?)```", section, re.S)


def test_the_readmes_profiles_build_without_warnings(tmp_path: Path) -> None:
    """Issue 11 item 8: the README's applications.yaml example reserved fluent_lic, which no
    host offered; with the README's hosts.yaml beside it, it builds with no warning."""
    apps, hosts = _readme_yaml("Application profiles")
    assert apps.startswith("applications:") and "fluent_lic" in apps and "hosts:" in hosts
    r = load_cluster_config(topdir(tmp_path, apps=apps, hosts=hosts))
    assert r.ok, [str(d) for d in r.errors]
    assert app_warnings(r) == [] and list(r.config.applications) == ["default", "pytorch", "mpi"]
    # without a host offering it, the same profiles get the warning
    r = load_cluster_config(topdir(tmp_path / "b", apps=apps, hosts="hosts:\n  - {name: n, slots: 8, memory: 8GB}\n"))
    (w,) = app_warnings(r)
    assert ':10:11: warning: application "pytorch": resreq.rusage[2]: resource "fluent_lic"' in w
    assert "(their resources: none; mem is every host's memory)" in w


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize("name,conv", [("team.owner", "TEAM_OWNER"), ("EPOCHS", "EPOCHS"), ("a-b.c", "A_B_C")])
def test_export_name(name: str, conv: str) -> None:
    assert export_name(name) == conv


def test_secret_heuristics() -> None:
    for name in ("PASSWORD", "db_passwd", "GITHUB_TOKEN", "aws.secret", "SSH_KEY", "MY_CREDENTIALS"):
        assert looks_secret_name(name), name
    for name in ("EPOCHS", "MONKEY", "KEYBOARD_LAYOUT", "team.owner", "PATH"):
        assert not looks_secret_name(name), name
    assert looks_secret_value("-----BEGIN RSA PRIVATE KEY-----")
    assert looks_secret_value("password=hunter2")
    assert looks_secret_value("https://bob:pw@example.org/x")
    assert not looks_secret_value("ml-platform")
    assert not looks_secret_value("3f2a9c1e5b7d8f0a1b2c3d4e5f60718293a4b5c6")  # a commit id


def test_model_refuses_bad_values() -> None:
    with pytest.raises(ValueError):
        Profile(name="x", select="mem >")
    with pytest.raises(ValueError):
        Profile(name="x", kind="service")
    with pytest.raises(ValueError):
        Profile(name="x", unknown=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        Profile(name="x", annotations={"a.b": "1", "A_B": "2"})

"""The config compiler (CFG-1, CFG-2) and the unit parsers."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from xced.config import (
    BuildResult,
    Diagnostic,
    load_cluster_config,
    write_personal_config,
    write_skeleton,
)
from xced.model.units import (
    format_duration,
    format_memory,
    parse_memory_mb,
    parse_run_limit_s,
    parse_seconds,
)

GOOD_SETTINGS = """\
cluster_name: demo
mode: production
admins: [alice]
default_queue: normal
"""
GOOD_QUEUES = """\
queues:
  - name: normal
    priority: 30
  - name: short
    priority: 40
    max_run_limit: "1:30"
    max_memory: 4GB
"""
GOOD_HOSTS = """\
hosts:
  - name: node1
    slots: 8
    memory: 16GB
    resources: {gpu: 2}
    type: X86_64
    attributes: {rack: r1}
    tags: [fast]
"""


def make_topdir(tmp_path: Path, settings: str = GOOD_SETTINGS, queues: str = GOOD_QUEUES,
                hosts: str = GOOD_HOSTS) -> Path:
    config = tmp_path / "top" / "config"
    config.mkdir(parents=True)
    for name, text in (("xce.yaml", settings), ("queues.yaml", queues), ("hosts.yaml", hosts)):
        if text is not None:
            (config / name).write_text(textwrap.dedent(text))
    return tmp_path / "top"


def where(result: BuildResult) -> list[tuple[str, int | None, int | None]]:
    return [(Path(d.file).name, d.line, d.col) for d in result.errors]


# --------------------------------------------------------------------------- good configs


def test_good_config_maps_onto_the_model(tmp_path: Path) -> None:
    r = load_cluster_config(make_topdir(tmp_path))
    assert r.errors == [] and r.warnings == [] and r.ok
    cfg = r.config
    assert cfg is not None and r.hash == cfg.content_hash() and len(r.hash) == 64
    assert cfg.settings.cluster_name == "demo" and cfg.settings.admins == ["alice"]
    assert cfg.default_queue == "normal"
    short = cfg.queue("short")
    assert short is not None and short.max_run_limit_s == 5400 and short.max_memory_mb == 4096
    (host,) = cfg.hosts
    assert host.memory_mb == 16384 and host.resources == {"gpu": 2.0}
    assert host.attributes == {"rack": "r1", "type": "X86_64"} and host.tags == ["fast"]


def test_personal_config_loads(tmp_path: Path) -> None:
    write_personal_config(tmp_path)
    r = load_cluster_config(tmp_path)
    assert r.errors == [] and r.warnings == []
    cfg = r.config
    assert cfg is not None
    assert cfg.settings.mode == "production" and cfg.settings.cluster_name == "personal"
    assert len(cfg.settings.admins) == 1
    assert [q.name for q in cfg.queues] == ["normal"]
    (host,) = cfg.hosts
    assert host.slots == len(os.sched_getaffinity(0)) and host.memory_mb > 0


def test_personal_config_does_not_overwrite(tmp_path: Path) -> None:
    write_personal_config(tmp_path)
    with pytest.raises(FileExistsError):
        write_personal_config(tmp_path)


def test_skeleton_loads_and_is_commented(tmp_path: Path) -> None:
    written = write_skeleton(tmp_path / "new" / "top")
    assert {p.name for p in written} == {"xce.yaml", "queues.yaml", "hosts.yaml"}
    r = load_cluster_config(tmp_path / "new" / "top")
    assert r.errors == [] and r.warnings == []
    assert r.config is not None and r.config.settings.mode == "production"
    assert len(r.config.queues) >= 2 and len(r.config.hosts) == 1
    text = (tmp_path / "new" / "top" / "config" / "xce.yaml").read_text()
    for key in ("cluster_name", "mode", "admins", "default_queue", "listen", "kill_interval",
                "limit_grace", "sched_delay", "presets_dir"):
        assert f"\n{key}:" in text
    assert text.count("#") > 10


def test_garbage_in_optional_files_is_refused_with_positions(tmp_path: Path) -> None:
    """CFG-2: applications.yaml (PROF-1), projects.yaml and rbac.yaml (PRJ-1, RBAC-4) are
    compiled: garbage in them is an error at its place, and the files are listed in the
    order the loader reads them; keys.yaml (KEY-2) too, last."""
    top = make_topdir(tmp_path)
    for name in ("keys.yaml", "rbac.yaml", "projects.yaml", "applications.yaml"):
        (top / "config" / name).write_text("anything: [at all\n")
    res = load_cluster_config(top)
    assert not res.ok and res.config is None
    assert where(res) == [("applications.yaml", 2, 1), ("projects.yaml", 2, 1), ("rbac.yaml", 2, 1),
                          ("keys.yaml", 2, 1)]
    assert all(d.message.startswith("invalid YAML:") for d in res.errors)
    (top / "config" / "keys.yaml").unlink()
    (top / "config" / "applications.yaml").unlink()
    (top / "config" / "projects.yaml").write_text("projects:\n  /p:\n    shares: 50%\n")
    (top / "config" / "rbac.yaml").write_text("roles:\n  op: [job:view]\nbinding: []\n")
    res = load_cluster_config(top)
    assert where(res) == [("projects.yaml", 3, 5), ("rbac.yaml", 3, 1)]
    assert 'unknown key "shares" in project /p' in res.errors[0].message and 'did you mean "share"' in \
        res.errors[0].message
    assert 'unknown key "binding" in rbac.yaml' in res.errors[1].message and 'did you mean "bindings"' in \
        res.errors[1].message


def test_diagnostics_are_sorted_by_file_in_reading_order(tmp_path: Path) -> None:
    from xced.config.loader import _order

    names = ["unknown.yaml", "rbac.yaml", "keys.yaml", "projects.yaml", "applications.yaml", "hosts.yaml",
             "queues.yaml", "xce.yaml"]
    diags = [Diagnostic("error", f"/t/config/{n}", 1, 1, "m") for n in names]
    assert [Path(d.file).name for d in sorted(diags, key=_order)] == [
        "xce.yaml", "queues.yaml", "hosts.yaml", "applications.yaml", "projects.yaml", "rbac.yaml", "keys.yaml",
        "unknown.yaml"]


def test_names_with_a_final_newline_are_refused_at_their_place(tmp_path: Path) -> None:
    """`$` of a pattern lets a final newline through with re.match; the compiled model then
    refused the name with no position. fullmatch reports it at its place."""
    r = load_cluster_config(make_topdir(tmp_path, hosts='hosts:\n  - {name: "n1\\n", slots: 1, memory: 1, '
                                                       'resources: {"gpu\\n": 1}}\n'))
    assert where(r) == [("hosts.yaml", 2, 12), ("hosts.yaml", 2, 53)]
    assert "must consist of a letter or digit, then letters" in r.errors[0].message and "resource name must be" in r.errors[1].message


def test_hash_is_stable_and_follows_content(tmp_path: Path) -> None:
    top = make_topdir(tmp_path)
    h1, h2 = load_cluster_config(top).hash, load_cluster_config(top).hash
    assert h1 is not None and h1 == h2
    queues = top / "config" / "queues.yaml"
    queues.write_text(queues.read_text() + "    # a comment changes nothing\n")
    assert load_cluster_config(top).hash == h1
    queues.write_text(queues.read_text().replace("priority: 40", "priority: 41"))
    h3 = load_cluster_config(top).hash
    assert h3 is not None and h3 != h1


# --------------------------------------------------------------------------- errors

BROKEN_SETTINGS = """\
cluster_name: demo
mode: prod
admins: [alice]
sched_delay: 0.5
"""
BROKEN_QUEUES = """\
queues:
  - name: normal
    priority: high
  - name: long
    prio: 3
  - name: other
    priority: 1.5
    max_memory: 4XB
"""
BROKEN_HOSTS = """\
hosts:
  - name: node1
    slots: 4
    memory: 8GB
    colour: red
  - name: node2
    memory: 8GB
"""


def test_all_errors_of_all_files_at_once(tmp_path: Path) -> None:
    r = load_cluster_config(make_topdir(tmp_path, BROKEN_SETTINGS, BROKEN_QUEUES, BROKEN_HOSTS))
    assert r.config is None and r.hash is None and not r.ok
    assert where(r) == [
        ("xce.yaml", 2, 7),      # mode: prod
        ("xce.yaml", 4, 14),     # sched_delay above 0.010 (D-4)
        ("queues.yaml", 3, 15),  # priority: high
        ("queues.yaml", 5, 5),   # unknown key prio
        ("queues.yaml", 7, 15),  # priority: 1.5
        ("queues.yaml", 8, 17),  # max_memory: 4XB
        ("hosts.yaml", 5, 5),    # unknown key colour
        ("hosts.yaml", 6, 5),    # node2 has no slots
    ]
    messages = [d.message for d in r.errors]
    assert messages[0] == 'mode must be production or test, got "prod"'
    assert "0.010" in messages[1] and "0.5" in messages[1]
    assert messages[2] == 'queue "normal": priority must be an integer from -2147483648 to 2147483647, got "high"'
    assert messages[4] == 'queue "other": priority must be an integer from -2147483648 to 2147483647, got 1.5'
    assert "KB, MB, GB or TB" in messages[5]
    assert messages[7] == 'host "node2": missing required key "slots"'
    assert str(r.errors[2]).endswith(
        'config/queues.yaml:3:15: error: queue "normal": priority must be an integer from -2147483648 to 2147483647, got "high"'
    )


def test_unknown_key_lists_valid_keys(tmp_path: Path) -> None:
    r = load_cluster_config(make_topdir(tmp_path, queues="queues:\n  - name: normal\n    prio: 3\n"))
    (d,) = r.errors
    assert (Path(d.file).name, d.line, d.col) == ("queues.yaml", 3, 5)
    assert d.message.startswith(
        'unknown key "prio" in queue "normal"; valid keys: name, priority, description, '
        "max_tasks, max_run_limit, max_memory, host_limit, backfill"
    )
    assert 'did you mean "priority"' in d.message


def test_an_empty_value_is_reported_at_its_own_key_not_the_next(tmp_path: Path) -> None:
    """`kill_interval:` with nothing after it is an error at the place its value belongs (the
    line of the key, just past its colon), saying no value was given; ruamel.yaml itself puts
    an empty value at the next key."""
    settings = GOOD_SETTINGS + "kill_interval:\nsched_delay: 0.01\n"
    queues = "queues:\n  - name: normal\n    priority:\n  - name: short\n"
    r = load_cluster_config(make_topdir(tmp_path, settings=settings, queues=queues))
    got = {(Path(d.file).name, d.line, d.col): d.message for d in r.errors}
    assert set(got) == {("xce.yaml", 5, 15), ("queues.yaml", 3, 14)}, got
    assert got[("xce.yaml", 5, 15)].startswith("kill_interval must be a number of seconds") \
        and got[("xce.yaml", 5, 15)].endswith("got no value (null)")
    assert got[("queues.yaml", 3, 14)].endswith("got no value (null)")


def test_a_flow_mapping_key_without_a_value_and_a_key_that_is_no_name_are_told_plainly(tmp_path: Path) -> None:
    """CFG-2: `{name: normal, priority:}` makes YAML read "priority:" as the key: the error
    says the value is missing and how to write it, not that the key is unknown; a complex
    key (`? [a, b]`) is told as a key that is a list, not by the parser's type name."""
    queues = "queues:\n  - {name: normal, priority:}\n  - ? [a, b]\n    : 1\n    name: b\n"
    r = load_cluster_config(make_topdir(tmp_path, queues=queues))
    got = {(d.line, d.col): d.message for d in r.errors}
    assert got[(2, 20)].startswith('key "priority" in queue "normal" has no value: `priority:` with nothing after '
                                   'the colon in {...} is read as the key "priority:"; write "priority: VALUE"'), got
    assert got[(3, 7)].startswith('a key that is a list in queue "b": keys are names; valid keys: name,'), got
    assert "Commented" not in " ".join(got.values())


def test_text_quoted_from_a_file_is_shown_escaped_and_a_tag_is_named(tmp_path: Path) -> None:
    """CFG-2, CLI-3 (a second fresh tester's find): a queue name holding a right-to-left
    override is quoted in the error escaped (`\\u202e`), as the listings show it, so it
    cannot reorder the line on a terminal; a tagged value (`!!python/object`) is named by its
    tag, never built, not by the parser's type name."""
    queues = 'queues:\n  - name: "nor\u202emal"\n  - name: b\n    priority: !!python/object:os.system "echo"\n'
    r = load_cluster_config(make_topdir(tmp_path, queues=queues))
    shown = [str(d) for d in r.errors]
    assert any('queue "nor\\u202emal": name must consist of' in line for line in shown), shown
    assert all("\u202e" not in line for line in shown)
    assert any("got a value tagged tag:yaml.org,2002:python/object:os.system (tags are not taken)" in line
               for line in shown), shown


def test_duplicate_queue_points_at_the_second(tmp_path: Path) -> None:
    queues = "queues:\n  - name: normal\n  - name: short\n  - name: normal\n"
    r = load_cluster_config(make_topdir(tmp_path, queues=queues))
    (d,) = r.errors
    assert (d.line, d.col) == (4, 11)
    assert 'duplicate queue name "normal"' in d.message and "line 2" in d.message


def test_duplicate_host(tmp_path: Path) -> None:
    hosts = "hosts:\n  - {name: a, slots: 1, memory: 100}\n  - {name: a, slots: 1, memory: 100}\n"
    r = load_cluster_config(make_topdir(tmp_path, hosts=hosts))
    assert [(d.line, d.message.split(" (")[0]) for d in r.errors] == [(3, 'duplicate host name "a"')]


@pytest.mark.parametrize("name", ["..", "-x", ".hidden"])
def test_a_host_name_starts_with_a_letter_or_digit(tmp_path: Path, name: str) -> None:
    """A host name of hosts.yaml follows the same rule as a worker's join and a trusted key
    (xced.model.units.HOST_PATTERN): ".." or "-x" would read as a path or an option."""
    hosts = f"hosts:\n  - {{name: '{name}', slots: 1, memory: 100}}\n"
    r = load_cluster_config(make_topdir(tmp_path, hosts=hosts))
    (d,) = r.errors
    assert d.line == 2 and "a letter or digit" in d.message and repr(name)[1:-1] in d.message


def test_default_queue_must_exist(tmp_path: Path) -> None:
    settings = GOOD_SETTINGS.replace("default_queue: normal", "default_queue: nosuch")
    r = load_cluster_config(make_topdir(tmp_path, settings=settings))
    (d,) = r.errors
    assert (Path(d.file).name, d.line, d.col) == ("xce.yaml", 4, 16)
    assert '"nosuch"' in d.message and "normal, short" in d.message


def test_yaml_syntax_error_is_one_error_with_position(tmp_path: Path) -> None:
    queues = "queues:\n  - name: normal\n    priority: [1, 2\n"
    r = load_cluster_config(make_topdir(tmp_path, queues=queues))
    (d,) = r.errors
    assert Path(d.file).name == "queues.yaml" and d.line == 4 and d.col is not None
    assert d.message.startswith("invalid YAML:")


def test_yaml_duplicate_key(tmp_path: Path) -> None:
    r = load_cluster_config(make_topdir(tmp_path, settings=GOOD_SETTINGS + "mode: test\n"))
    (d,) = r.errors
    assert (d.line, d.col) == (5, 1) and 'duplicate key "mode" (first given at line 2)' in d.message


def test_a_duplicate_key_does_not_hide_the_files_other_errors(tmp_path: Path) -> None:
    """CFG-2: every error at once. ruamel stops a file at its first duplicate key; the scan
    reports each duplicate (at the second key) and the file is still checked."""
    queues = """\
queues:
  - name: normal
    priority: 3
    priority: 4
    max_tasks: -1
  - {name: short, nme: x, name: short2}
"""
    r = load_cluster_config(make_topdir(tmp_path, queues=queues))
    assert where(r) == [("queues.yaml", 4, 5), ("queues.yaml", 5, 16), ("queues.yaml", 6, 19),
                        ("queues.yaml", 6, 27)]
    msgs = [d.message for d in r.errors]
    assert msgs[0].startswith('duplicate key "priority" (first given at line 3)')
    assert "max_tasks must be an integer from 1" in msgs[1]
    assert msgs[2].startswith('unknown key "nme"') and msgs[3].startswith('duplicate key "name"')


def _nest_block(depth: int) -> str:
    return "".join("  " * i + "a:\n" for i in range(depth)) + "  " * depth + "1\n"


@pytest.mark.parametrize(("queues", "line", "col", "needle"), [
    ("queues: " + "[" * 5000 + "]" * 5000 + "\n", 1, 72, "nest more than 64 levels deep"),
    (_nest_block(5000), 65, 129, "nest more than 64 levels deep"),
    ("queues:\n  - name: normal\n    priority: " + "9" * 5000 + "\n", 3, 15,
     "an integer of 5000 digits is too long: integers here have at most 100 digits"),
    ("queues:\n  - name: normal\n    max_tasks: 0x" + "f" * 5000 + "\n", 3, 16, "an integer of 5000 digits"),
    ("queues:\n  - name: normal\n    priority: !!int abc\n", 3, 15,
     'the value "abc" is tagged !!int but is not an integer'),
    ("queues:\n  - name: normal\n    backfill: !!bool maybe\n", 3, 15,
     'the value "maybe" is tagged !!bool but is not true or false'),
])
def test_yaml_the_loader_cannot_build_is_an_error_with_its_position(tmp_path: Path, queues, line, col,
                                                                    needle) -> None:
    """Issue 11 item 8, CFG-2: nesting 5,000 deep or a 5,000-digit integer made ruamel raise
    (RecursionError, ValueError) and the build end on a traceback; each is one error with its
    FILE:LINE:COL, and the other files are still checked."""
    r = load_cluster_config(make_topdir(tmp_path, queues=queues, hosts="hosts:\n  - {name: a, slots: 0, memory: 1}\n"))
    assert where(r) == [("queues.yaml", line, col), ("hosts.yaml", 2, 22)], [str(d) for d in r.errors]
    assert needle in r.errors[0].message


def test_nesting_up_to_the_limit_is_read(tmp_path: Path) -> None:
    """64 levels are read and then judged by the schema; the 65th is the scan's error."""
    def queues(lists: int) -> str:  # a mapping, a list, a mapping, then `lists` lists
        return "queues:\n  - name: normal\n    description: " + "[" * lists + "]" * lists + "\n"

    (d,) = load_cluster_config(make_topdir(tmp_path / "a", queues=queues(61))).errors
    assert d.line == 3 and "description must be a string, got a list" in d.message
    (d,) = load_cluster_config(make_topdir(tmp_path / "b", queues=queues(62))).errors
    assert (d.line, d.col) == (3, 79) and "nest more than 64 levels" in d.message


def test_missing_file_and_missing_topdir(tmp_path: Path) -> None:
    top = make_topdir(tmp_path)
    (top / "config" / "hosts.yaml").unlink()
    (d,) = load_cluster_config(top).errors
    assert d.file.endswith("config/hosts.yaml") and d.line is None
    assert "xceadmin init DIR" in d.message
    assert str(d) == f"{d.file}: error: {d.message}"

    (d,) = load_cluster_config(tmp_path / "nope").errors
    assert "does not exist" in d.message


def test_empty_lists_and_wrong_shapes(tmp_path: Path) -> None:
    r = load_cluster_config(make_topdir(tmp_path, queues="queues: []\n", hosts="- name: a\n"))
    assert where(r) == [("queues.yaml", 1, 9), ("hosts.yaml", 1, 1)]
    assert "at least one" in r.errors[0].message
    assert 'key "hosts"' in r.errors[1].message


def test_value_checks(tmp_path: Path) -> None:
    settings = """\
listen: {host: 0.0.0.0, port: 70000}
kill_interval: 0
limit_grace: 5s
admins: []
"""
    hosts = """\
hosts:
  - name: n1
    slots: 2
    memory: 1GB
    resources: {gpu: two}
    tags: [a, 3]
"""
    r = load_cluster_config(make_topdir(tmp_path, settings=settings, hosts=hosts))
    assert where(r) == [("xce.yaml", 1, 31), ("xce.yaml", 2, 16), ("hosts.yaml", 5, 22), ("hosts.yaml", 6, 15)]
    assert "65535" in r.errors[0].message and "greater than 0" in r.errors[1].message
    assert [w.message.split(":")[0] for w in r.warnings] == ["no admins named"]


def test_warnings_are_separate(tmp_path: Path) -> None:
    settings = GOOD_SETTINGS.replace("mode: production", "mode: test")
    queues = "queues:\n  - name: normal\n    max_tasks: 100\n"
    r = load_cluster_config(make_topdir(tmp_path, settings=settings, queues=queues))
    assert r.ok and r.errors == []
    assert [(Path(w.file).name, w.line) for w in r.warnings] == [("xce.yaml", 2), ("queues.yaml", 3)]
    assert all(w.severity == "warning" for w in r.warnings)


def test_diagnostic_format() -> None:
    d = Diagnostic("error", "config/queues.yaml", 7, 5, "bad")
    assert str(d) == "config/queues.yaml:7:5: error: bad"
    assert d.to_dict() == {"severity": "error", "file": "config/queues.yaml", "line": 7, "col": 5,
                           "message": "bad"}


# --------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("text", "mb"),
    [("512", 512), (512, 512), ("4GB", 4096), ("4gb", 4096), ("4 G", 4096), ("1.5GB", 1536),
     ("2048KB", 2), ("512KB", 1), ("1TB", 1048576), ("100MB", 100), ("1GiB", 1024)],
)
def test_parse_memory_mb(text: str | int, mb: int) -> None:
    assert parse_memory_mb(text) == mb


@pytest.mark.parametrize("text", ["", "0", "-5", "4XB", "GB", "1.5", "10B", "lots", 0, -1])
def test_parse_memory_mb_rejects(text: str | int) -> None:
    with pytest.raises(ValueError) as e:
        parse_memory_mb(text)
    assert "got" in str(e.value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10", 600), (10, 600), ("1:30", 5400), ("0:45", 2700), ("90s", 90), ("30m", 1800),
     ("2h", 7200), ("1d", 86400), ("1h30m", 5400), ("1.5h", 5400), (" 5 ", 300)],
)
def test_parse_run_limit_s(text: str | int, seconds: int) -> None:
    assert parse_run_limit_s(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "-5", "0:00", "1:75", "abc", "1:2:3", "0s", "1.5", "5ms"])
def test_parse_run_limit_s_rejects(text: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_run_limit_s(text)
    assert "got" in str(e.value)


def test_parse_seconds_and_formatters() -> None:
    assert parse_seconds("500ms") == 0.5 and parse_seconds("2m") == 120 and parse_seconds(0.005) == 0.005
    with pytest.raises(ValueError):
        parse_seconds("-1")
    assert [format_duration(s) for s in (0, 45, 90, 5400, 90061, 0.25, 2.5)] == [
        "0s", "45s", "1m30s", "1h30m", "1d1h1m1s", "250ms", "2.5s"]
    for s in (45, 90, 5400, 90061):
        assert parse_run_limit_s(format_duration(s)) == s
        assert parse_seconds(format_duration(s)) == s  # "1h30m" reads back as clean_period too
    assert [format_memory(m) for m in (512, 4096, 1536)] == ["512MB", "4GB", "1.5GB"]


def test_live_checks_of_a_compiled_config():
    """CFG-3: the daemon checks a compiled config again before it swaps it in."""
    from xced.config.live import check_compiled, restart_only_changes
    from xced.model.config import ClusterConfig

    base = {"settings": {"cluster_name": "c"}, "queues": [{"name": "normal"}],
            "hosts": [{"name": "h1", "slots": 2, "memory_mb": 100}]}
    ok = ClusterConfig.model_validate(base)
    assert check_compiled(ok) == []
    bad = ClusterConfig.model_validate({**base, "settings": {"default_queue": "nope", "default_application": "x"},
                                        "queues": [{"name": "normal"}, {"name": "normal"}]})
    problems = check_compiled(bad)
    assert "queue 'normal' is defined twice; names must be unique" in problems
    assert "default_queue 'nope' is not a queue; valid: normal, normal" in problems
    assert any(p.startswith("default_application 'x' is not a profile; valid: default") for p in problems)
    with_projects = ClusterConfig.model_validate({**base, "projects": {"projects": [{"path": "/a/b"}]},
                                                  "rbac": {"bindings": [{"role": "op", "users": ["u"]}]}})
    assert check_compiled(with_projects) == [
        "project /a/b: its parent /a is not a project; declare /a in projects.yaml too (every ancestor of a "
        "project is a project, PRJ-1)",
        'the binding of role op at /: role "op" is not a role of rbac.yaml; roles: (none)']
    moved = ClusterConfig.model_validate({**base, "settings": {"cluster_name": "c", "mode": "test"},
                                          "hosts": []})
    assert restart_only_changes(ok, moved) == [
        "mode changed from 'production' to 'test'",
        "hosts.yaml changed (hosts are read at start; workers that join are not affected)"]


def test_max_array_size_is_an_admin_setting_with_lsfs_default(tmp_path: Path) -> None:
    """JOB-4, D-8: xce.yaml's max_array_size caps job arrays, as LSF's MAX_JOB_ARRAY_SIZE
    (default 1000); a value outside 1..MAX_ARRAY_SIZE_SETTING is an error at its place."""
    from xced.model.units import MAX_ARRAY_SIZE_SETTING

    r = load_cluster_config(make_topdir(tmp_path / "a"))
    assert r.config is not None and r.config.settings.max_array_size == 1000
    r = load_cluster_config(make_topdir(tmp_path / "b", settings=GOOD_SETTINGS + "max_array_size: 20000\n"))
    assert r.config is not None and r.config.settings.max_array_size == 20000
    for bad in ("0", str(MAX_ARRAY_SIZE_SETTING + 1), "lots"):
        r = load_cluster_config(make_topdir(tmp_path / bad, settings=GOOD_SETTINGS + f"max_array_size: {bad}\n"))
        assert where(r) == [("xce.yaml", 5, 17)], r.errors
        assert f"max_array_size must be an integer from 1 to {MAX_ARRAY_SIZE_SETTING}" in r.errors[0].message


def test_pend_reason_update_is_a_duration_of_at_least_a_second(tmp_path: Path) -> None:
    """SCHED-3: xce.yaml's pend_reason_update (LSF's PEND_REASON_UPDATE_INTERVAL), default
    5 s, seconds or a duration; under 1 s (each refresh is a whole session) is an error at
    its place."""
    r = load_cluster_config(make_topdir(tmp_path / "a"))
    assert r.config is not None and r.config.settings.pend_reason_update_s == 5.0
    r = load_cluster_config(make_topdir(tmp_path / "b", settings=GOOD_SETTINGS + "pend_reason_update: 2m\n"))
    assert r.config is not None and r.config.settings.pend_reason_update_s == 120.0
    for bad in ("0.5", "2d", "soon"):
        r = load_cluster_config(make_topdir(tmp_path / bad, settings=GOOD_SETTINGS + f"pend_reason_update: {bad}\n"))
        assert where(r) == [("xce.yaml", 5, 21)], r.errors
        assert "pend_reason_update must be a number of seconds from 1 to 86400 (a day)" in r.errors[0].message


def test_a_config_file_that_is_not_a_regular_file_or_too_big_is_refused_not_read(tmp_path: Path) -> None:
    """D-8: a FIFO would block the build for ever and /dev/zero never end; a file over
    MAX_CONFIG_BYTES is refused by its size, before anything reads it."""
    from xced.model.units import MAX_CONFIG_BYTES

    top = make_topdir(tmp_path)
    os.mkfifo(top / "config" / "projects.yaml")
    (top / "config" / "rbac.yaml").symlink_to("/dev/zero")
    with open(top / "config" / "applications.yaml", "wb") as f:
        f.truncate(MAX_CONFIG_BYTES + 1)  # sparse: nothing is written
    r = load_cluster_config(top)
    got = {Path(d.file).name: d.message for d in r.errors}
    assert got["projects.yaml"] == got["rbac.yaml"] == ("is not a regular file (a FIFO, a device or a socket?); "
                                                        "expected a YAML file")
    assert got["applications.yaml"] == (f"is {MAX_CONFIG_BYTES + 1} bytes, more than the {MAX_CONFIG_BYTES} a "
                                        f"config file may be (D-8)")

"""Presets without a daemon (PRE-1, PRE-2, PRE-3, PRE-5): the one table of submit options,
values and their hash, preset files read with their positions, the local store."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from xced.api import submit_options as so
from xced.config.presets import load_export_text, load_preset_file, load_presets_dir

REPO = Path(__file__).resolve().parents[2]
XCECLI = str(Path(sys.executable).parent / "xcecli")


# ---------------------------------------------------------------- the one table (PRE-1)


def _submit_params():
    import typer.main

    from xcecli.app import app

    group = typer.main.get_command(app)
    return group.commands["submit"].params, group.commands["presets"].commands["create"].params


def test_submit_and_presets_create_take_exactly_the_tables_options():
    """Walks the table: every row is a parameter of `xcecli submit` with the row's flags, and
    every job option (a preset field) is one of `presets create`; nothing else is, but the
    command itself (and create's NAME and --force). So an option added to the table is a
    submit option and a preset field at once."""
    submit, create = _submit_params()
    by_name = {p.name: p for p in submit}
    assert set(by_name) == {o.name for o in so.OPTIONS} | {"command"}
    for o in so.OPTIONS:
        p = by_name[o.name]
        assert set(p.opts) | set(getattr(p, "secondary_opts", [])) == set(o.flags), o.name
        assert p.multiple == (o.kind in ("list", "map")), o.name
        assert p.is_flag == (o.kind == "flag"), o.name
    assert {p.name for p in create} == {o.name for o in so.JOB_OPTIONS} | {"preset", "force"}
    # the preset keys the issue names are all preset fields, and the controls are not
    assert {o.name for o in so.JOB_OPTIONS} >= {"queue", "ntasks", "name", "stdout", "stderr", "run_limit", "memory",
                                                "resreq", "app", "app_params", "pre_exec", "post_exec",
                                                "dependency", "env"}
    # hold (-H, LSF bsub -H) is given per submit, never by a preset: a preset that held every job would surprise;
    # so is exclusive (-x, LSF bsub -x), which, like -H, a script's #BSUB line may give
    assert {o.name for o in so.CONTROLS} == {"preset", "wait", "parsable", "json", "dry_run", "pack", "hold",
                                             "exclusive"}


def test_each_job_option_is_a_preset_key_that_reads_back():
    """A value of every job option, written to a preset file and read back, is the same
    canonical value and gives the same submit fields."""
    sample = {"ntasks": "2,8", "queue": "normal", "project": "/physics", "name": "train[1-4]", "stdout": "%J.out",
              "stderr": "%J.err", "run_limit": "2:00", "memory": "4GB", "resreq": ["rusage[mem=100]", "span[hosts=1]"],
              "app": "pytorch", "app_params": {"LR": "0.1"}, "pre_exec": "true", "post_exec": "true",
              "dependency": "done(1)", "env": {"OMP_NUM_THREADS": "4"},
              "stdout_overwrite": "%J.o", "stderr_overwrite": "%J.e"}
    assert set(sample) == {o.name for o in so.JOB_OPTIONS}  # a new option needs a sample here
    fields = so.check_values({k: v for k, v in sample.items() if k not in so.OVERWRITES})
    assert fields["ntasks_min"] == 2 and fields["ntasks_max"] == 8 and fields["run_limit_s"] == 7200
    assert fields["memory_limit_mb"] == 4096 and fields["env"] == {"OMP_NUM_THREADS": "4"}
    over = so.check_values({k: v for k, v in sample.items() if k not in ("stdout", "stderr")})
    assert {k: over[k] for k in ("stdout", "stderr", "stdout_overwrite", "stderr_overwrite")} == \
        {"stdout": "%J.o", "stderr": "%J.e", "stdout_overwrite": True, "stderr_overwrite": True}
    for k in sample:
        assert so.normalize(k, sample[k]) == sample[k]


def test_oo_replaces_a_presets_o_and_one_layer_may_not_give_both():
    """PRE-1, CLI-8, IBM bsub -oo (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.__oo.1.html):
    -o and -oo name the same file, so the command line's -oo replaces a preset's -o (and -e a
    preset's -eo), as a -o would; one layer giving both is refused, naming both."""
    values, sources = so.merge_values({"stdout": "p.out", "stderr_overwrite": "p.err", "queue": "q"},
                                      {"stdout_overwrite": "c.out", "stderr": "c.err"})
    assert values == {"queue": "q", "stdout_overwrite": "c.out", "stderr": "c.err"}
    assert sources == {"queue": "preset", "stdout_overwrite": "command line", "stderr": "command line"}
    assert so.check_values(values) == {"queue": "q", "stdout": "c.out", "stdout_overwrite": True, "stderr": "c.err"}
    with pytest.raises(so.OptionError, match=r"give -o or -oo, not both: -o appends to the file, -oo overwrites it"):
        so.check_values({"stdout": "a", "stdout_overwrite": "b"})


def test_values_are_normalized_to_command_line_strings():
    import datetime

    assert so.normalize("ntasks", 4) == "4"
    assert so.normalize("resreq", ["rusage[gpu=1]"]) == ["rusage[gpu=1]"]
    assert so.normalize("env", {"A": 1, "B": "x=y"}) == {"A": "1", "B": "x=y"}
    for name, bad, needle in (("ntasks", True, "got true"), ("queue", None, "got null"), ("memory", 1.5, "got 1.5"),
                              ("queue", ["a"], "got a list"), ("env", "A=1", "expected a mapping of NAME: VALUE"),
                              ("env", ["A=1"], "expected a mapping of NAME: VALUE"),
                              ("resreq", "rusage[gpu=1]", r'expected a list of strings, one per -R \(e.g. resreq: '
                                                          r'\["rusage\[mem=1000\]"\]\)'),
                              ("queue", datetime.date(2001, 1, 1), "got the date 2001-01-01 \\(quote it"),
                              ("queue", object(), "got a tagged value"), ("env", {True: "x"}, "the name true is not")):
        with pytest.raises(so.OptionError, match=needle):
            so.normalize(name, bad)
    with pytest.raises(so.OptionError, match=r"'run_limt' is not an option of xcecli submit \(did you mean "
                                             r"run_limit\?\); a preset sets ntasks, queue"):
        so.normalize("run_limt", "1")
    with pytest.raises(so.OptionError, match="says how the command runs"):
        so.normalize("wait", "true")


@pytest.mark.parametrize("name,value,needle", [
    ("queue", "q" * 257, "-q: 257 characters, more than the 256 a submit may give"),
    ("env", {f"V{i}": "1" for i in range(4097)}, "--env: 4097 NAME=VALUE entries, more than the 4096"),
    ("resreq", ["a"] * 65, "-R: 65 values, more than the 64"),
    ("ntasks", "0", "-n 0: the task count must be at least 1"),
    ("ntasks", "8,2", "MAX is below MIN"),
    ("run_limit", "soon", "-W 'soon'"),
    ("memory", "-1GB", "-M '-1GB'"),
    ("queue", "", "-q '': the value is empty"),
    ("name", "a[3-1]", "a[3-1]"),
    ("env", {"1X": "y"}, "--env '1X=y'"),
    ("resreq", [" "], "-R ' ': the resource requirement is empty"),
])
def test_a_value_submit_refuses_is_refused(name, value, needle):
    with pytest.raises(so.OptionError) as e:
        so.check(name, value)
    assert needle in e.value.message and e.value.option == name


@pytest.mark.parametrize("name,value,needle", [
    ("resreq", ["rusage=[mem=20MB]"], "-R: rusage=[mem=20MB]: column 7: expected '[' after 'rusage'"),
    ("dependency", "done((", "-w 'done(('"),
    ("project", "nopath", "-P 'nopath': a project is named by its path"),
    ("queue", "bad queue!", "-q 'bad queue!': a queue name is letters"),
    ("app", "a/b", "-a 'a/b': a profile name is letters"),
])
def test_a_preset_is_held_to_what_the_daemon_would_parse(name, value, needle):
    """A preset is checked deeply (what the daemon would refuse in the text itself); a plain
    submit leaves that to the daemon, which says the column itself."""
    so.check(name, value)  # not deep: passes
    with pytest.raises(so.OptionError) as e:
        so.check(name, value, deep=True)
    assert needle in e.value.message, e.value.message


def test_another_profile_on_the_command_line_drops_the_presets_params():
    values, _ = so.merge_values({"app": "pytorch", "app_params": {"LR": "1"}, "queue": "gpu"}, {"app": ""})
    assert values == {"queue": "gpu", "app": ""}
    values, _ = so.merge_values({"app": "pytorch", "app_params": {"LR": "1"}}, {"app": "pytorch"})
    assert values["app_params"] == {"LR": "1"}


def test_the_command_line_goes_over_the_preset():
    """PRE-1: a "one" option replaces, -R adds terms after the preset's (as several -R merge
    in LSF), --env and --app-param merge by name with the command line winning."""
    preset = {"queue": "gpu", "ntasks": "4", "resreq": ["rusage[gpu=1]"], "env": {"A": "1", "B": "2"}}
    given = {"ntasks": "2", "resreq": ["span[hosts=1]"], "env": {"B": "3"}}
    values, sources = so.merge_values(preset, given)
    assert values == {"ntasks": "2", "queue": "gpu", "resreq": ["rusage[gpu=1]", "span[hosts=1]"],
                      "env": {"A": "1", "B": "3"}}
    assert sources == {"ntasks": "command line", "queue": "preset", "resreq": "preset+command line",
                       "env": "preset+command line"}


def test_the_hash_is_sha256_of_the_canonical_json():
    """PRE-2: keys sorted, separators , and :, UTF-8; key order and provenance do not count."""
    import hashlib

    v = {"queue": "gpu", "env": {"Z": "é", "A": "1"}}
    text = '{"env":{"A":"1","Z":"é"},"queue":"gpu"}'
    assert so.preset_hash(v) == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    assert so.preset_hash({"env": {"A": "1", "Z": "é"}, "queue": "gpu"}) == so.preset_hash(v)


@pytest.mark.parametrize("name", ["", "a/b", "..", "a..b", ".hidden", "-x", "x" * 65, "p.yaml", "sp ace"])
def test_a_bad_preset_name_is_refused(name):
    with pytest.raises(so.OptionError, match="a preset name is needed|is not valid: a letter or digit"):
        so.check_preset_name(name)


# ---------------------------------------------------------------- preset files (PRE-3)


def test_the_example_site_presets_are_valid_presets():
    """The repository's presets/ folder, against the current submit options."""
    files = sorted((REPO / "presets").glob("*.yaml"))
    assert len(files) >= 3
    errors: list = []
    found = load_presets_dir(REPO / "presets", errors, [])
    assert not errors, "\n".join(map(str, errors))
    assert [p.name for p in found] == [f.stem for f in files]


def test_a_preset_file_with_problems_gets_each_at_its_line_and_column(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text('queue: gpu\nntasks: "0"\nwait: true\nbogus: 1\nenv: [X]\nrun_limit: {a: 1}\n'
                 'true: x\nqueue2: 2001-01-01\n')
    errors: list = []
    assert load_preset_file(f, errors, []) is None
    shown = [str(e) for e in errors]
    assert shown[0] == f"{f}:2:9: error: preset bad: ntasks: -n 0: the task count must be at least 1"
    assert shown[1].startswith(f"{f}:3:1: error: preset bad: 'wait' says how the command runs")
    assert shown[2].startswith(f"{f}:4:1: error: preset bad: 'bogus' is not an option of xcecli submit")
    assert shown[3].startswith(f"{f}:5:6: error: preset bad: env: expected a mapping of NAME: VALUE")
    assert shown[4].startswith(f"{f}:6:12: error: preset bad: run_limit: expected a string")  # said once
    assert shown[5].startswith(f"{f}:7:1: error: preset bad: the key true is not an option name")
    assert shown[6].startswith(f"{f}:8:1: error: preset bad: 'queue2' is not an option of xcecli submit (did "
                               f"you mean queue?)")


@pytest.mark.parametrize("text,needle", [
    ("- a\n", "expected a mapping of submit options"),
    ("just text\n", "expected a mapping of submit options"),
    ("{}\n", "the file sets no option"),
    ("queue: [1\n", "invalid YAML"),
    ("queue: a\nqueue: b\n", "duplicate"),
    ("origin: {server: x}\nqueue: a\n", "origin: missing name, hash"),
])
def test_a_file_that_is_not_a_preset_is_refused(tmp_path, text, needle):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    errors: list = []
    assert load_preset_file(f, errors, []) is None
    assert any(needle in str(e) for e in errors), [str(e) for e in errors]
    assert all(str(e).startswith(f"{f}:") for e in errors)


def test_a_server_preset_may_not_carry_an_origin(tmp_path):
    (tmp_path / "a.yaml").write_text('queue: a\norigin: {server: s, name: a, hash: "sha256:0"}\n')
    (tmp_path / "b.yaml").write_text("queue: b\n")
    (tmp_path / "c.yml").write_text("queue: c\n")
    errors: list = []
    warnings: list = []
    found = load_presets_dir(tmp_path, errors, warnings)
    assert [p.name for p in found] == ["b"]
    assert "origin is written by `xcecli presets pull`" in str(errors[0]) and str(errors[0]).startswith(
        f"{tmp_path / 'a.yaml'}:2:1:")
    assert "a preset file is NAME.yaml" in str(warnings[0])


def test_an_export_holds_several_presets_and_is_refused_whole():
    errors: list = []
    got = load_export_text("a: {queue: x}\nb: {ntasks: 2}\n", "<stdin>", errors, [])
    assert [(p.name, p.values) for p in got] == [("a", {"queue": "x"}), ("b", {"ntasks": "2"})] and not errors
    got = load_export_text("a: {queue: x}\n../b: {queue: y}\nc: {ntasks: '0'}\n", "<stdin>", errors, [])
    assert got == []
    assert str(errors[0]).startswith("<stdin>:2:1: error: preset name '../b' is not valid")
    assert str(errors[1]).startswith("<stdin>:3:13: error: preset c: ntasks: -n 0")
    errors.clear()
    assert load_export_text("[a, b]\n", "p.yaml", errors, []) == [] and "an export is a mapping" in str(errors[0])


# ---------------------------------------------------------------- the local store (PRE-1)


def _cli(home: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "XCE_SOCKET": str(home / "no-daemon.sock")}
    return subprocess.run([XCECLI, *args], capture_output=True, text=True, env=env, input=input, timeout=60)


def test_create_writes_one_private_yaml_file_per_preset_in_the_xdg_config_dir(tmp_path):
    r = _cli(tmp_path, "presets", "create", "gpu-train", "-q", "gpu", "-n", "4", "-R", "rusage[gpu=1]", "-W", "2:00",
             "-a", "pytorch", "--env", "A=1", "--env", "B=2")
    assert r.returncode == 0, r.stderr
    d = tmp_path / "xce" / "presets"
    f = d / "gpu-train.yaml"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700 and stat.S_IMODE(f.stat().st_mode) == 0o600
    errors: list = []
    p = load_preset_file(f, errors, [])
    assert p is not None and p.values == {"ntasks": "4", "queue": "gpu", "run_limit": "2:00",
                                          "resreq": ["rusage[gpu=1]"], "app": "pytorch",
                                          "env": {"A": "1", "B": "2"}}
    assert 'run_limit: "2:00"' in f.read_text()
    # the JSON copy the hot path reads holds the same values and hash
    c = json.loads((d / ".gpu-train.json").read_text())
    assert c["values"] == p.values and c["hash"] == p.hash == so.preset_hash(p.values)
    r = _cli(tmp_path, "presets", "show", "gpu-train", "--json")
    assert json.loads(r.stdout)["hash"] == p.hash
    # a second create is refused and changes nothing; --force replaces and keeps a .bak
    before = f.read_bytes()
    r = _cli(tmp_path, "presets", "create", "gpu-train", "-q", "other")
    assert r.returncode == 1 and "exists; give --force" in r.stderr and f.read_bytes() == before
    r = _cli(tmp_path, "presets", "create", "gpu-train", "-q", "other", "--force")
    assert r.returncode == 0 and (d / "gpu-train.yaml.bak").read_bytes() == before
    assert 'queue: "other"' in f.read_text()


@pytest.mark.parametrize("args,needle", [
    (["presets", "create", "p", "-n", "0"], "-n 0: the task count must be at least 1"),
    (["presets", "create", "a/b", "-q", "x"], "preset name 'a/b' is not valid"),
    (["presets", "create", "..", "-q", "x"], "preset name '..' is not valid"),
    (["presets", "create", "x.yaml", "-q", "x"], "not ending in .yaml, .json or .bak"),
    (["presets", "create", "", "-q", "x"], "a preset name is needed"),
    (["presets", "create", "p"], "give at least one submit option"),
    (["presets", "create", "p", "--env", "1X=2"], "--env '1X=2'"),
    (["presets", "create", "p", "-R", "rusage=[mem=20MB]"], "column 7"),
    (["presets", "create", "p", "-q", "q" * 5000], "-q: 5000 characters, more than the 256"),
    (["presets", "create", "p", "--wait"], "No such option"),
])
def test_a_refused_create_writes_nothing(tmp_path, args, needle):
    """Exit 2, a usage error, as `xcecli submit` gives for the same values."""
    r = _cli(tmp_path, *args)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "xce" / "presets").exists() or not any((tmp_path / "xce" / "presets").iterdir())


def test_submit_with_a_missing_preset_names_the_local_ones(tmp_path):
    assert _cli(tmp_path, "presets", "create", "one", "-q", "a").returncode == 0
    assert _cli(tmp_path, "presets", "create", "two", "-q", "b").returncode == 0
    r = _cli(tmp_path, "submit", "--preset", "three", "--", "true")
    assert r.returncode == 2 and "no local preset 'three'" in r.stderr and "local presets: one, two" in r.stderr
    r = _cli(tmp_path, "submit", "--preset", "../x", "--", "true")
    assert r.returncode == 2 and "preset name '../x' is not valid" in r.stderr


def test_a_yaml_file_edited_by_hand_is_read_again(tmp_path):
    """The JSON copy is used only while it matches the YAML file; a hand edit is read (and
    checked) again, and an invalid edit is refused at submit with its line and column."""
    assert _cli(tmp_path, "presets", "create", "p", "-q", "a").returncode == 0
    f = tmp_path / "xce" / "presets" / "p.yaml"
    f.write_text('queue: "b"\nrun_limit: "1:00"\n')
    r = _cli(tmp_path, "presets", "show", "p", "--json")
    assert json.loads(r.stdout)["values"] == {"queue": "b", "run_limit": "1:00"}
    f.write_text('queue: "b"\nntasks: "0"\n')
    r = _cli(tmp_path, "submit", "--preset", "p", "--", "true")
    assert r.returncode == 2 and f"{f}:2:9: error: preset p: ntasks: -n 0" in r.stderr, r.stderr


def test_edit_replaces_the_file_only_when_the_result_is_valid(tmp_path):
    assert _cli(tmp_path, "presets", "create", "p", "-q", "a").returncode == 0
    f = tmp_path / "xce" / "presets" / "p.yaml"
    before = f.read_bytes()
    bad = tmp_path / "bad-editor"
    bad.write_text("#!/bin/sh\nprintf 'ntasks: \"0\"\\n' > \"$1\"\n")
    good = tmp_path / "good-editor"
    good.write_text("#!/bin/sh\nprintf 'queue: \"z\"\\n' > \"$1\"\n")
    for e in (bad, good):
        e.chmod(0o755)
    env_bad = {"EDITOR": str(bad), "VISUAL": ""}
    r = subprocess.run([XCECLI, "presets", "edit", "p"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path), **env_bad})
    assert r.returncode == 1 and "preset p is unchanged" in r.stderr and "-n 0" in r.stderr
    assert f.read_bytes() == before
    r = subprocess.run([XCECLI, "presets", "edit", "p"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "EDITOR": str(good), "VISUAL": ""})
    assert r.returncode == 0, r.stderr
    assert json.loads(_cli(tmp_path, "presets", "show", "p", "--json").stdout)["values"] == {"queue": "z"}


def test_rm_removes_the_file_and_its_copy_and_refuses_a_missing_one(tmp_path):
    assert _cli(tmp_path, "presets", "create", "p", "-q", "a").returncode == 0
    r = _cli(tmp_path, "presets", "rm", "p", "q")
    assert r.returncode == 1 and "no local preset 'q'" in r.stderr
    assert (tmp_path / "xce" / "presets" / "p.yaml").exists()  # all or nothing
    assert _cli(tmp_path, "presets", "rm", "p").returncode == 0
    assert sorted(os.listdir(tmp_path / "xce" / "presets")) == []


def test_list_without_a_daemon_shows_local_presets_and_says_why_not_the_servers(tmp_path):
    assert _cli(tmp_path, "presets", "create", "p", "-q", "a", "-W", "10").returncode == 0
    r = _cli(tmp_path, "presets", "list")
    assert r.returncode == 0 and r.stdout.splitlines()[1].split()[:2] == ["p", "local"]
    assert "-q a -W 10" in r.stdout and "server presets not listed" in r.stderr
    out = json.loads(_cli(tmp_path, "presets", "list", "--json").stdout)
    assert out["server"] is None and [p["name"] for p in out["local"]] == ["p"]


def test_export_and_import_through_a_pipe(tmp_path):
    """PRE-5 between two config dirs: an export of two presets imports as the same values
    and hashes; a second import of other values under a name is refused whole unless
    --force (which keeps a .bak); --as renames a file of one preset."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert _cli(a, "presets", "create", "p1", "-q", "x", "-n", "2").returncode == 0
    assert _cli(a, "presets", "create", "p2", "-R", "span[hosts=1]", "--env", "K=v").returncode == 0
    exported = _cli(a, "presets", "export", "p1", "p2").stdout
    r = _cli(b, "presets", "import", "-", input=exported)
    assert r.returncode == 0, r.stderr
    ha = {p["name"]: p["hash"] for p in json.loads(_cli(a, "presets", "list", "--json", "--local").stdout)["local"]}
    hb = {p["name"]: p["hash"] for p in json.loads(_cli(b, "presets", "list", "--json", "--local").stdout)["local"]}
    assert ha == hb and len(ha) == 2
    assert _cli(a, "presets", "create", "p1", "-q", "y", "--force").returncode == 0
    changed = _cli(a, "presets", "export", "p1", "p2").stdout
    before = (b / "xce" / "presets" / "p1.yaml").read_bytes()
    r = _cli(b, "presets", "import", "-", input=changed)
    assert r.returncode == 1 and "a local preset p1 exists and holds other values" in r.stderr
    assert (b / "xce" / "presets" / "p1.yaml").read_bytes() == before
    r = _cli(b, "presets", "import", "-", "--force", input=changed)
    assert r.returncode == 0 and (b / "xce" / "presets" / "p1.yaml.bak").read_bytes() == before
    r = _cli(b, "presets", "import", "-", "--as", "p3", input=changed)
    assert r.returncode == 2 and "--as renames one preset" in r.stderr
    one = _cli(a, "presets", "export", "p1").stdout
    assert _cli(b, "presets", "import", "-", "--as", "p3", input=one).returncode == 0
    assert json.loads(_cli(b, "presets", "show", "p3", "--json").stdout)["values"] == {"queue": "y"}
    r = _cli(b, "presets", "import", "-", input="- not a mapping\n")
    assert r.returncode == 1 and "<stdin>:1:1: error: an export is a mapping" in r.stderr


def test_a_full_disk_leaves_every_preset_as_it_was(tmp_path):
    """Injected fault: the config dir's file system is full. `create --force` and a new
    `create` are refused in one line naming the cause; the old preset file is untouched
    (no .bak, no temporary file left), a new one does not appear half-written, and the old
    preset still reads. Needs a tmpfs: skipped only when mount is refused."""
    from tests.conftest import fill_disk, tmpfs_at

    home = tmp_path / "cfg"
    home.mkdir()
    with tmpfs_at(home, "1m"):
        assert _cli(home, "presets", "create", "p", "-q", "a", "--env", "K=v").returncode == 0
        d = home / "xce" / "presets"
        before = {n: (d / n).read_bytes() for n in os.listdir(d)}
        fill_disk(home / "filler")
        r = _cli(home, "presets", "create", "p", "-q", "b", "--force")
        assert r.returncode == 1 and "cannot write preset p" in r.stderr and "No space left on device" in r.stderr
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
        r = _cli(home, "presets", "create", "q", "-q", "c")
        assert r.returncode == 1 and "No space left on device" in r.stderr
        assert {n: (d / n).read_bytes() for n in os.listdir(d)} == before  # nothing new, nothing changed
        assert json.loads(_cli(home, "presets", "show", "p", "--json").stdout)["values"] == {"queue": "a",
                                                                                              "env": {"K": "v"}}
        (home / "filler").unlink()
        assert _cli(home, "presets", "create", "p", "-q", "b", "--force").returncode == 0  # room again
        assert (d / "p.yaml.bak").read_bytes() == before["p.yaml"]


def test_a_preset_file_over_its_size_limit_is_refused_unread(tmp_path):
    """D-8: the daemon reads server presets on a request; a preset is a few lines, and a
    file over MAX_PRESET_BYTES is refused naming both sizes."""
    from xced.config.presets import MAX_PRESET_BYTES

    f = tmp_path / "big.yaml"
    f.write_text("queue: a\n" + "# padding\n" * (MAX_PRESET_BYTES // 10 + 1))
    errors: list = []
    assert load_preset_file(f, errors, []) is None
    assert str(errors[0]) == (f"{f}: error: is {f.stat().st_size} bytes, more than the {MAX_PRESET_BYTES} a "
                              f"preset file may be")


def test_an_import_that_is_not_utf8_is_refused_whole(tmp_path):
    r = subprocess.run([XCECLI, "presets", "import", "-"], input=b"a: {queue: \xff}\n", capture_output=True,
                       env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}, timeout=60)
    assert r.returncode == 1 and b"not UTF-8 text (at byte 11)" in r.stderr and b"nothing imported" in r.stderr
    assert not (tmp_path / "xce").exists()


# ---------------------------------------------------------------- what a fresh tester found


def test_a_server_presets_dir_others_may_write_serves_nothing_and_a_symlink_is_never_followed(tmp_path):
    """D-7: a presets directory writable by group or others serves no preset (another user
    could make the presets everyone is served); a preset file that is a symlink is left out
    (else whoever made it could have the daemon serve any file it may read)."""
    d = tmp_path / "presets"
    d.mkdir()
    (d / "ok.yaml").write_text("queue: a\n")
    secret = tmp_path / "secret.yaml"
    secret.write_text('env: {TOKEN: "s3cr3t"}\n')
    (d / "steal.yaml").symlink_to(secret)
    errors: list = []
    found = load_presets_dir(d, errors, [])
    assert [p.name for p in found] == ["ok"]
    assert [str(e) for e in errors] == [f"{d / 'steal.yaml'}: error: is a symlink; a server preset is a regular "
                                        f"file in the presets directory, never a link"]
    os.chmod(d, 0o777)
    errors.clear()
    assert load_presets_dir(d, errors, []) == []
    assert f"server presets not read: {d} is writable by group or others (mode 0777); chmod go-w it" in str(errors[0])
    assert "s3cr3t" not in "".join(map(str, errors))


def test_more_server_presets_than_the_daemon_serves_is_an_error(tmp_path):
    from xced.config.presets import MAX_SERVER_PRESETS

    for i in range(MAX_SERVER_PRESETS + 1):
        (tmp_path / f"p{i:04d}.yaml").write_text("queue: a\n")
    errors: list = []
    found = load_presets_dir(tmp_path, errors, [])
    assert len(found) == MAX_SERVER_PRESETS
    assert f"{MAX_SERVER_PRESETS + 1} preset files, more than the {MAX_SERVER_PRESETS} the daemon serves" in str(
        errors[0])


def test_rm_of_one_name_twice_removes_it_once_and_succeeds(tmp_path):
    assert _cli(tmp_path, "presets", "create", "c1", "-q", "a").returncode == 0
    r = _cli(tmp_path, "presets", "rm", "c1", "c1")
    assert r.returncode == 0 and r.stderr.count("removed") == 1


def test_export_to_a_file_is_private(tmp_path):
    assert _cli(tmp_path, "presets", "create", "p", "--env", "TOKEN=x").returncode == 0
    out = tmp_path / "p.yaml"
    assert _cli(tmp_path, "presets", "export", "p", "-o", str(out)).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and "TOKEN" in out.read_text()
    r = _cli(tmp_path, "presets", "export", "p", "-o", str(out))
    assert r.returncode == 1 and "exists; give --force" in r.stderr


def test_a_same_size_edit_with_its_mtime_put_back_is_still_seen(tmp_path):
    """The JSON copy is matched on ctime too, which no one can set back."""
    assert _cli(tmp_path, "presets", "create", "p", "-W", "2").returncode == 0
    f = tmp_path / "xce" / "presets" / "p.yaml"
    st = f.stat()
    f.write_text(f.read_text().replace('"2"', '"3"'))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
    r = _cli(tmp_path, "submit", "--preset", "p", "--dry-run", "--", "true")  # no daemon: expanded, then exit 3
    assert r.returncode == 3
    assert json.loads(_cli(tmp_path, "presets", "show", "p", "--json").stdout)["values"] == {"run_limit": "3"}
    c = json.loads((tmp_path / "xce" / "presets" / ".p.json").read_text())
    assert c["values"] == {"run_limit": "3"}


def test_edit_of_a_broken_preset_opens_it_and_a_refused_edit_is_kept_for_the_next(tmp_path):
    """A preset a hand edit broke can be mended with `edit`; an edit that is refused is not
    lost: it stays beside the preset (in the private directory) and the next edit opens it."""
    assert _cli(tmp_path, "presets", "create", "p", "-q", "a").returncode == 0
    f = tmp_path / "xce" / "presets" / "p.yaml"
    f.write_text('ntasks: "0"\n')
    bad = tmp_path / "bad-editor"
    bad.write_text("#!/bin/sh\nprintf 'queue: \"b\"\\nntasks: \"-1\"\\n' > \"$1\"\n")
    fix = tmp_path / "fix-editor"
    fix.write_text("#!/bin/sh\ngrep -q 'queue: \"b\"' \"$1\" || exit 9\nprintf 'queue: \"b\"\\n' > \"$1\"\n")
    gone = tmp_path / "rm-editor"
    gone.write_text("#!/bin/sh\nrm \"$1\"\n")
    for e in (bad, fix, gone):
        e.chmod(0o755)

    def edit(editor):
        return subprocess.run([XCECLI, "presets", "edit", "p"], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "EDITOR": str(editor), "VISUAL": ""})

    r = edit(bad)
    (draft,) = (tmp_path / "xce" / "presets").glob(".p.edit.*.yaml")
    assert r.returncode == 1 and f"the edit is kept in {draft}" in r.stderr and "-n -1" in r.stderr
    assert stat.S_IMODE(draft.stat().st_mode) == 0o600 and f.read_text() == 'ntasks: "0"\n'
    r = edit(fix)  # opens the kept draft (the editor exits 9 if it is not there)
    assert r.returncode == 0 and "from the draft kept by the last edit" in r.stderr, r.stderr
    assert not draft.exists()
    assert json.loads(_cli(tmp_path, "presets", "show", "p", "--json").stdout)["values"] == {"queue": "b"}
    r = edit(gone)
    assert r.returncode == 1 and "the editor left no file; preset p is unchanged" in r.stderr
    r = edit(tmp_path / "no-such-editor")
    assert r.returncode == 1 and "cannot run the editor" in r.stderr and "Traceback" not in r.stderr
    r = edit("false")  # fails without editing: no draft is left behind
    assert r.returncode == 1 and "exited with 1" in r.stderr and "draft" not in r.stderr
    assert not list((tmp_path / "xce" / "presets").glob(".p.edit.*.yaml"))
    # a draft is an edit of the preset as it was: once the preset is removed or replaced, the
    # next edit opens the preset itself, never the old draft
    assert edit(bad).returncode == 1 and list((tmp_path / "xce" / "presets").glob(".p.edit.*.yaml"))
    assert _cli(tmp_path, "presets", "rm", "p").returncode == 0
    assert not list((tmp_path / "xce" / "presets").glob(".p.edit.*.yaml"))
    assert _cli(tmp_path, "presets", "create", "p", "-q", "new").returncode == 0
    assert edit(bad).returncode == 1
    assert _cli(tmp_path, "presets", "create", "p", "-q", "newer", "--force").returncode == 0
    r = edit(fix)  # the draft of the replaced preset is gone: fix-editor finds no queue "b" and exits 9
    assert r.returncode == 1 and "exited with 9" in r.stderr
    assert json.loads(_cli(tmp_path, "presets", "show", "p", "--json").stdout)["values"] == {"queue": "newer"}


def test_a_presets_directory_that_is_a_file_is_named(tmp_path):
    (tmp_path / "xce").mkdir()
    (tmp_path / "xce" / "presets").write_text("not a dir\n")
    for args in (["presets", "create", "a", "-q", "x"], ["presets", "show", "a"], ["presets", "list", "--local"]):
        r = _cli(tmp_path, *args)
        assert r.returncode == 1 and f"the presets directory {tmp_path / 'xce' / 'presets'} is not a directory" in \
            r.stderr, (args, r.stderr)


def test_list_writes_values_as_a_shell_would_take_them_back(tmp_path):
    assert _cli(tmp_path, "presets", "create", "p", "-R", "select[mem>100]", "--env", "A=x\ny").returncode == 0
    line = _cli(tmp_path, "presets", "list", "--local").stdout.splitlines()[1]
    assert "-R 'select[mem>100]'" in line and "--env 'A=x\\ny'" in line


# ---------------------------------------------------------------- what a second fresh tester found


def test_export_writes_only_a_regular_file(tmp_path):
    assert _cli(tmp_path, "presets", "create", "p", "-q", "a").returncode == 0
    target = tmp_path / "target.txt"
    target.write_text("keep me\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (link, fifo, tmp_path):
        r = _cli(tmp_path, "presets", "export", "p", "-o", str(path), "--force")
        assert r.returncode == 1 and "is not a regular file" in r.stderr, r.stderr
    assert target.read_text() == "keep me\n" and link.is_symlink() and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_what_create_writes_reads_back_the_same(tmp_path):
    """Values with DEL, NEL (which YAML would fold into a space), U+FFFE and non-ASCII text
    are written escaped and read back unchanged from the YAML file itself; one that would
    make the file larger than a preset may be is refused; a byte that is not UTF-8 is a
    usage error naming the option."""
    weird = {"A": "x\x7fy", "B": "x\x85y", "C": "x\ufffey", "D": "é ü ✓", "E": "tab\there"}
    args = [x for k, v in weird.items() for x in ("--env", f"{k}={v}")]
    assert _cli(tmp_path, "presets", "create", "p", *args).returncode == 0
    (tmp_path / "xce" / "presets" / ".p.json").unlink()  # read the YAML file, not the copy
    assert json.loads(_cli(tmp_path, "presets", "show", "p", "--json").stdout)["values"] == {"env": weird}
    r = _cli(tmp_path, "presets", "create", "big", "--env", "A=" + "x" * 20000)
    assert r.returncode == 1 and "more than the 16384 a preset file may be" in r.stderr
    assert not (tmp_path / "xce" / "presets" / "big.yaml").exists()
    r = subprocess.run([XCECLI.encode(), b"presets", b"create", b"u", b"-o", b"/tmp/\xff"], capture_output=True,
                       env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}, timeout=60)
    assert r.returncode == 2 and b"-o: a byte that is not UTF-8" in r.stderr and b"Traceback" not in r.stderr
    r = _cli(tmp_path, "presets", "create", "n", "-n", "2000000")
    assert r.returncode == 2 and "-n 2000000: at most 1000000 tasks" in r.stderr


def test_a_json_copy_that_is_not_right_is_not_trusted(tmp_path):
    assert _cli(tmp_path, "presets", "create", "p", "-q", "a").returncode == 0
    c = tmp_path / "xce" / "presets" / ".p.json"
    for bad in ({"queue": 5}, ["x"], {"bogus": "x"}, {"queue": ["a"]}):  # values of the wrong shape
        doc = json.loads(c.read_text())
        doc["values"] = bad
        c.write_text(json.dumps(doc))
        r = _cli(tmp_path, "presets", "show", "p", "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["values"] == {"queue": "a"}, r.stderr
        r = _cli(tmp_path, "presets", "list", "--local", "--json")
        assert json.loads(r.stdout)["local"][0]["values"] == {"queue": "a"}


def test_presets_made_by_hand_or_under_umask_0_are_private(tmp_path):
    home = tmp_path / "cfg"
    r = subprocess.run([XCECLI, "presets", "create", "p", "-q", "a"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "XDG_CONFIG_HOME": str(home)}, umask=0)
    assert r.returncode == 0, r.stderr
    for d in (home, home / "xce", home / "xce" / "presets"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    hand = tmp_path / "hand"
    d = hand / "xce" / "presets"
    d.mkdir(parents=True)
    os.chmod(d, 0o755)
    (d / "h.yaml").write_text('queue: "a"\n')
    os.chmod(d / "h.yaml", 0o644)
    assert _cli(hand, "presets", "show", "h").returncode == 0
    assert stat.S_IMODE(d.stat().st_mode) == 0o700 and stat.S_IMODE((d / "h.yaml").stat().st_mode) == 0o600


def test_edit_keeps_the_comments_the_user_wrote(tmp_path):
    assert _cli(tmp_path, "presets", "create", "p", "-q", "a").returncode == 0
    ed = tmp_path / "ed"
    ed.write_text("#!/bin/sh\nprintf '# for the nightly runs\\nqueue: short  # the quick queue\\n' > \"$1\"\n")
    ed.chmod(0o755)
    r = subprocess.run([XCECLI, "presets", "edit", "p"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "EDITOR": str(ed), "VISUAL": ""})
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "xce" / "presets" / "p.yaml").read_text()
    assert text == "# for the nightly runs\nqueue: short  # the quick queue\n"
    assert json.loads(_cli(tmp_path, "presets", "show", "p", "--json").stdout)["values"] == {"queue": "short"}


def test_yaml_integers_in_another_base_are_refused(tmp_path):
    for text, needle in (("ntasks: 0x10\n", "written in another base or with '_'"),
                         ("run_limit: 1_000\n", "written in another base or with '_'")):
        f = tmp_path / "p.yaml"
        f.write_text(text)
        errors: list = []
        assert load_preset_file(f, errors, []) is None
        assert needle in str(errors[0]) and str(errors[0]).startswith(f"{f}:1:")


def test_importing_a_preset_file_instead_of_an_export_says_so(tmp_path):
    r = _cli(tmp_path, "presets", "import", "-", input='queue: "a"\nrun_limit: "10"\n')
    assert r.returncode == 1 and "this is a preset file (its keys are submit options), not an export" in r.stderr


# ---------------------------------------------------------------- what a third fresh tester found


def test_a_symlinked_local_preset_is_refused_and_what_it_points_at_is_left_alone(tmp_path):
    """A link in the presets directory is never followed: not read, not quoted, and never
    chmod'ed (xcecli makes hand-made presets private, but only regular files of its own)."""
    assert _cli(tmp_path, "presets", "create", "p", "-q", "a").returncode == 0
    target = tmp_path / "not-a-preset.txt"
    target.write_text("root:x:0:0:secret-line\n")
    os.chmod(target, 0o644)
    link = tmp_path / "xce" / "presets" / "link.yaml"
    link.symlink_to(target)
    for args in (["submit", "--preset", "link", "--dry-run", "--", "true"], ["presets", "show", "link"]):
        r = _cli(tmp_path, *args)
        assert r.returncode in (1, 2) and "is a symlink" in r.stderr and "secret-line" not in r.stderr, r.stderr
    r = _cli(tmp_path, "presets", "list", "--local", "--json")
    assert [p["problem"] is not None for p in json.loads(r.stdout)["local"]] == [True, False]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_server_preset_file_others_may_write_is_not_served(tmp_path):
    d = tmp_path / "presets"
    d.mkdir()
    (d / "ok.yaml").write_text('queue: "a"\n')
    (d / "open.yaml").write_text('queue: "b"\n')
    os.chmod(d / "open.yaml", 0o666)
    errors: list = []
    assert [p.name for p in load_presets_dir(d, errors, [])] == ["ok"]
    assert "is writable by group or others (mode 0666)" in str(errors[0])

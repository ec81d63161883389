"""`xcecli submit --pack FILE|-` (CLI-7, LSF `bsub -pack`; issue 17 part 2), end to end with a
real xced: one job per line, each line a submit's options and command split as a shell
would, all sent in one request and committed together; the IDs in line order; a bad line
refuses the whole pack, naming the line, and nothing is submitted.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import XCECLI

pytestmark = pytest.mark.timeout(120)


def _cli(d, *args: str, input: str | None = None, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    e = {**os.environ, "XCE_TOPDIR": str(d.top), **(env or {})}
    e.pop("XCE_SOCKET", None)
    e.pop("XCE_TEST_USER", None)
    return subprocess.run([XCECLI, *args], capture_output=True, text=True, env=e, input=input, timeout=60,
                          cwd=str(cwd or d.top))


def _all_ids(d) -> set[int]:
    r = d.cli("jobs", "-a", "-u", "all", "-o", "id", check=True)
    return {int(x) for x in r.stdout.split()[1:]}


def test_a_pack_of_three_jobs_with_their_own_options(shared_daemon, tmp_path):
    d = shared_daemon
    pack = tmp_path / "jobs.pack"
    pack.write_text("# three jobs, as bsub -pack takes them\n"
                    "-q normal -n 2 -J first -- sleep 0\n"
                    "\n"
                    "   # an indented comment\n"
                    "-J 'fam[1-3]' --env PACK_VAR='with space' -W 10 echo \"two words\"\n"
                    "-M 100 -R 'rusage[mem=10]' -o out.%J true\n")
    r = _cli(d, "submit", "--parsable", "--pack", str(pack), env={"PACK_BASE": "base"}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ids = [int(x) for x in r.stdout.split("\n") if x]
    assert len(ids) == 3 and ids == sorted(ids) and r.stdout.endswith("\n")
    first, fam, third = (d.show(i) for i in ids)
    assert (first["name"], first["ntasks_min"], first["queue"], first["argv"]) == ("first", 2, "normal",
                                                                                      ["sleep", "0"])
    assert fam["array_spec"] == "fam[1-3]" and fam["run_limit_s"] == 600 and fam["argv"] == ["echo", "two words"]
    assert fam["env"]["PACK_VAR"] == "with space" and fam["env"]["PACK_BASE"] == "base"  # the pack's env, once
    assert "PACK_VAR" not in first["env"] and first["env"]["PACK_BASE"] == "base"
    assert third["memory_limit_mb"] == 100 and third["resreq_requested"] == ["rusage[mem=10]"]
    assert all(j["cwd"] == str(tmp_path) for j in (first, fam, third))


def test_a_line_is_split_as_a_shell_splits_it_comments_included(shared_daemon, tmp_path):
    """CLI-7 ("split as a shell would"; a fresh tester's find: a trailing comment became the
    command's arguments): an unquoted `#` starting a word begins a comment, as in sh; a `#`
    inside a word or in quotes stays."""
    d = shared_daemon
    pack = tmp_path / "comments.pack"
    pack.write_text("-J run#1 -- echo a#b 'c # d'   # the first job\n"
                    "-J second -- true\t# a tab before the comment\n")
    r = _cli(d, "submit", "--parsable", "--pack", str(pack), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    first, second = (d.show(int(x)) for x in r.stdout.split())
    assert (first["name"], first["argv"]) == ("run#1", ["echo", "a#b", "c # d"])
    assert (second["name"], second["argv"]) == ("second", ["true"])


def test_the_plain_answer_says_each_job_in_line_order(shared_daemon):
    d = shared_daemon
    r = _cli(d, "submit", "--pack", "-", input="-J one true\n-J 'many[1-2]' true\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    a, b = (int(x.split("<")[1].split(">")[0]) for x in lines)
    assert lines == [f"Job <{a}> is submitted to queue <normal>.",
                     f"Job array <{b}> (2 elements) is submitted to queue <normal>."] and b > a
    r = _cli(d, "submit", "--json", "--pack", "-", input="true\n")
    out = json.loads(r.stdout)
    assert r.returncode == 0 and [j["queue"] for j in out["jobs"]] == ["normal"]


def test_a_pack_read_from_stdin(shared_daemon):
    d = shared_daemon
    r = _cli(d, "submit", "--parsable", "--pack", "-", input="-J s1 true\n-J s2 true\n")
    assert r.returncode == 0, r.stderr
    names = [d.show(int(i))["name"] for i in r.stdout.split()]
    assert names == ["s1", "s2"]


def test_a_bad_line_in_the_middle_refuses_the_whole_pack(shared_daemon, tmp_path):
    d = shared_daemon
    before = _all_ids(d)
    pack = tmp_path / "bad.pack"
    pack.write_text("-J ok1 true\n\n-n 0 -J bad true\n-J ok2 true\n")
    r = _cli(d, "submit", "--parsable", "--pack", str(pack))
    assert r.returncode == 2 and r.stdout == ""
    assert f"{pack}, line 3: -n 0: the task count must be at least 1; nothing was submitted" in r.stderr
    # a line the daemon refuses (it alone knows the queues): exit 1, its line named
    r = _cli(d, "submit", "--pack", "-", input="true\ntrue\n-q nope true\n")
    assert r.returncode == 1 and r.stdout == ""
    assert "standard input, line 3: " in r.stderr and "unknown queue 'nope'" in r.stderr, r.stderr
    assert "nothing was submitted" in r.stderr
    assert _all_ids(d) == before


@pytest.mark.parametrize("text, says", [
    ("", "holds no job"),
    ("# only a comment\n\n   \n", "holds no job"),
    ("-K true\n", "line 1: -K is not taken on a pack line"),
    ("--pack other true\n", "line 1: --pack is not taken on a pack line"),
    ("-q normal\n", "line 1: no command"),
    ("echo 'unclosed\n", "line 1: a quote opened on the line is not closed; close it"),
    ("echo trailing \\\n", "line 1: the line ends with a backslash, which escapes nothing"),
    ("echo a\0b\n", "line 1: a NUL character"),
    ("true\n--bogus true\n", "line 2: No such option: --bogus"),
    # old Mac line ends: two jobs would run together as one (a second fresh tester's find)
    ("-J cr1 -- true\r-J cr2 -- true\r", "line 1: a carriage return inside the line: lines end at newlines"),
    ("true\n-n 1 -h true\n", "line 2: No such option: -h"),
    ("true\n-n\n", "line 2: Option '-n' requires an argument; nothing was submitted"),
    ("-J a -- true\n\f\n-n 0 -- true\n", "line 3: -n 0: the task count must be at least 1"),
    ("no-such-program-xce 1\n", "line 1: command 'no-such-program-xce' not found on PATH"),
    ("--preset missing-one true\n", "line 1: "),
])
def test_bad_packs_are_refused_whole_naming_the_line(shared_daemon, text, says):
    d = shared_daemon
    before = _all_ids(d)
    r = _cli(d, "submit", "--pack", "-", input=text)
    assert r.returncode == 2 and r.stdout == "" and says in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("xcecli: error: ")  # one line, no traceback
    assert _all_ids(d) == before


def test_what_cannot_go_beside_pack(shared_daemon, tmp_path):
    d = shared_daemon
    r = _cli(d, "submit", "--pack", "-", "true", input="true\n")
    assert r.returncode == 2 and "give no command beside it" in r.stderr
    r = _cli(d, "submit", "-q", "normal", "--pack", "-", input="true\n")
    assert r.returncode == 2 and "-q cannot be given beside it" in r.stderr
    r = _cli(d, "submit", "--pack", str(tmp_path / "missing.pack"))
    assert r.returncode == 2 and "cannot read it" in r.stderr


def test_lines_end_at_newlines_only_and_a_byte_order_mark_is_skipped(shared_daemon):
    """A form feed or U+2028 inside a quoted argument is part of it (str.splitlines would end
    the line there); CRLF ends a line; a leading BOM is not part of line 1."""
    d = shared_daemon
    text = "\ufeff# made by an editor that writes a BOM\r\n-J f -- echo 'f\fx' \"a\u2028b\"\r\n-J -h -- true\r\n"
    r = _cli(d, "submit", "--parsable", "--pack", "-", input=text)
    assert r.returncode == 0, r.stderr
    first, second = (d.show(int(i)) for i in r.stdout.split())
    assert first["name"] == "f" and first["argv"] == ["echo", "f\fx", "a\u2028b"]
    assert second["name"] == "-h"  # as `xcecli submit -J -h -- true` takes it


def test_a_line_only_typer_reads_and_a_preset_on_a_line(shared_daemon, tmp_path):
    """`-J -x` (a value that looks like an option) is beyond the fast reader: the line goes
    through Typer's parser of `xcecli submit`, which takes it; `--preset` works on a line
    (PRE-1)."""
    d = shared_daemon
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    r = _cli(d, "presets", "create", "packed", "-W", "7", "-q", "normal", env=env)
    assert r.returncode == 0, r.stderr
    r = _cli(d, "submit", "--parsable", "--pack", "-", input="-J -dash true\n--preset packed -J p true\n", env=env)
    assert r.returncode == 0, r.stderr
    dash, pre = (d.show(int(i)) for i in r.stdout.split())
    assert dash["name"] == "-dash"
    assert pre["run_limit_s"] == 420 and pre["meta"]["preset"]["name"] == "packed"

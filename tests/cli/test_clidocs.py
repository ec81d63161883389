"""Issue 16 part 3 (CLI-5): the completion scripts of completions/ and the man pages of man/
are generated from the command definitions, are current, and work in the real shells: bash
always; zsh and fish where they are installed (`make test` installs them as root where apt
can). Values the cluster knows (job IDs, queues, profiles, hosts) are asked of the daemon
with a 200 ms timeout, and nothing at all is offered when it is down or stopped.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import XCECLI, Daemon, kill_job_processes, short_tmpdir, write_config

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
COMP = ROOT / "completions"
MAN = ROOT / "man"
sys.path.insert(0, str(ROOT / "tools"))
import clidocs  # noqa: E402

pytestmark = pytest.mark.timeout(120)

needs_zsh = pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed on this machine")
needs_fish = pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed on this machine")


def shell_env(top: Path | None = None) -> dict[str, str]:
    """The environment of a user's shell: the venv's tools first on PATH, no XCE_ settings
    but the TopDir (a missing one when `top` is None: no daemon there)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XCE_")}
    env["PATH"] = f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}"
    env["XCE_TOPDIR"] = str(top) if top else "/nonexistent/xce-topdir"
    return env


def bash_complete(prog: str, line: str, top: Path | None = None) -> list[str]:
    """What bash offers at the end of `line` (a trailing space: a new word), through the
    real script and the real `complete` function it registers."""
    words = line.split(" ")
    script = textwrap.dedent(f"""\
        source {COMP / (prog + '.bash')}
        COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})
        COMP_CWORD={len(words) - 1}
        $(complete -p {prog} | sed -E 's/.*-F ([^ ]+) .*/\\1/')
        printf '%s\\n' "${{COMPREPLY[@]}}"
        """)
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True, text=True,
                       env=shell_env(top), timeout=30)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr  # nothing written into the user's terminal
    return [x for x in r.stdout.split("\n") if x]


def fish_complete(prog: str, line: str, top: Path | None = None) -> list[str]:
    """What fish offers for `line`, by `complete -C` with the real script loaded."""
    r = subprocess.run(["fish", "--no-config", "-c",
                        f"source {COMP / (prog + '.fish')}; complete -C {shlex.quote(line)}"],
                       capture_output=True, text=True, env=shell_env(top), timeout=30)
    assert r.returncode == 0, r.stderr
    return [x.split("\t")[0] for x in r.stdout.split("\n") if x]


def zsh_complete(prog: str, line: str, top: Path | None = None) -> list[str]:
    """What the zsh script hands to zsh's completion system for `line`: real zsh runs the
    script, with `_describe`, `compadd`, `_files` and `_command_names` (compsys, which needs a
    terminal) replaced by functions that print what they were given. Files come back as
    "<files>", directories as "<dirs>", program names as "<commands>"."""
    words = line.split(" ")
    script = textwrap.dedent(f"""\
        _describe() {{ local n=${{@[-1]}}; local x; for x in ${{(P)n}}; do print -r -- "${{x%%:*}}"; done }}
        compadd() {{ local a; [[ $1 == -a ]] && {{ print -rl -- ${{(P)2}}; return }}; shift; print -rl -- "$@" }}
        _files() {{ [[ $1 == -/ ]] && print -r -- '<dirs>' || print -r -- '<files>' }}
        _command_names() {{ print -r -- '<commands>' }}
        compdef() {{ : }}
        source {COMP / ('_' + prog)}
        words=({' '.join(shlex.quote(w) for w in words)})
        CURRENT={len(words)}
        PREFIX={shlex.quote(words[-1])}
        _{prog} | while read -r x; do [[ $x == "$PREFIX"* || $x == '<'* ]] && print -r -- $x; done
        true
        """)
    r = subprocess.run(["zsh", "-f", "-c", script], capture_output=True, text=True, env=shell_env(top), timeout=30)
    assert r.returncode == 0, r.stderr
    return [x for x in r.stdout.split("\n") if x]


# ---------------------------------------------------------------- generated and current

def test_the_generated_files_are_current():
    """`make completions man` output is what the repository holds, byte for byte; the
    check names a stale file (so this test fails when a command changes and they are not
    regenerated)."""
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "clidocs.py"), "check"], capture_output=True,
                       text=True, timeout=120)
    assert (r.returncode, r.stderr) == (0, ""), "run `make completions man`:\n" + r.stderr
    assert sorted(p.name for p in COMP.iterdir()) == ["_xceadmin", "_xcecli", "xceadmin.bash", "xceadmin.fish",
                                                      "xcecli.bash", "xcecli.fish"]
    assert sorted(p.name for p in MAN.iterdir()) == ["xceadmin.1", "xcecli.1", "xced.8"]


def test_the_check_finds_a_stale_or_stray_file(tmp_path, monkeypatch):
    for d in ("completions", "man"):
        shutil.copytree(ROOT / d, tmp_path / d)
    monkeypatch.setattr(clidocs, "ROOT", tmp_path)
    monkeypatch.setattr(clidocs, "COMPLETIONS_DIR", tmp_path / "completions")
    monkeypatch.setattr(clidocs, "MAN_DIR", tmp_path / "man")
    assert clidocs.stale() == []
    page = tmp_path / "man" / "xcecli.1"
    page.write_text(page.read_text().replace("run limit", "walltime"))
    (tmp_path / "completions" / "old.bash").write_text("")
    (tmp_path / "completions" / "_xceadmin").unlink()
    assert clidocs.stale() == ["completions/_xceadmin", "completions/old.bash", "man/xcecli.1"]


def test_the_output_holds_nothing_of_this_machine():
    """Deterministic: no date, no home directory, no host name, no TopDir of this machine."""
    import socket

    text = "".join(p.read_text() for d in (COMP, MAN) for p in d.iterdir())
    for local in (str(Path.home()), socket.gethostname(), str(ROOT)):
        assert local not in text


def test_every_command_and_option_is_in_the_scripts_and_the_page():
    for prog in clidocs.PROGS:
        root = clidocs.cli_tree(prog)
        page = (MAN / f"{prog}.{clidocs.PROGS[prog][2]}").read_text().replace("\\-", "-")
        scripts = [(COMP / n).read_text() for n in (f"{prog}.bash", f"_{prog}", f"{prog}.fish")] \
            if prog in clidocs.COMPLETED else []
        for node in root.walk():
            if node is not root:
                assert f'.SS "{node.path}' in page, node.path
            for o in node.options:
                for flag in o.names:
                    assert flag in page, (node.path, flag)
                    for s in scripts:
                        assert flag.lstrip("-") in s, (node.path, flag)


# ---------------------------------------------------------------- bash

def test_bash_completes_commands_options_and_files(tmp_path):
    assert bash_complete("xcecli", "xcecli ki") == ["kill"]
    assert bash_complete("xcecli", "xcecli pre") == ["presets"]
    assert bash_complete("xcecli", "xcecli presets r") == ["rm", "report"]
    assert bash_complete("xcecli", "xcecli apps ") == ["show"]
    assert bash_complete("xcecli", "xcecli submit --de") == ["--dependency"]
    assert bash_complete("xcecli", "xcecli submit -E") == ["-E", "-Ep"]
    assert bash_complete("xcecli", "xcecli --topdir /tmp jobs --js") == ["--json"]
    assert bash_complete("xceadmin", "xceadmin keys t") == ["trust", "token"]
    assert bash_complete("xceadmin", "xceadmin hosts ") == ["close", "open", "drain", "hist"]
    assert bash_complete("xceadmin", "xceadmin sim run --policy ") == ["easy", "fcfs"]
    # after `--` the job's command: a program first (anything on PATH), then nothing of ours
    assert "sleep" in bash_complete("xcecli", "xcecli submit -n 2 -- slee")
    assert bash_complete("xcecli", "xcecli submit -n 2 sleep --js") == []
    # a directory value: directories only, one candidate each even with a space in it
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("")
    (tmp_path / "my dir").mkdir()
    assert bash_complete("xcecli", f"xcecli --topdir {tmp_path}/a") == [f"{tmp_path}/adir"]
    assert bash_complete("xcecli", f"xcecli --topdir {tmp_path}/m") == [f"{tmp_path}/my dir"]
    # bash splits --opt=VALUE at the = (COMP_WORDBREAKS): the value and what follows still complete
    assert bash_complete("xcecli", f"xcecli --topdir = {tmp_path}/a") == [f"{tmp_path}/adir"]
    assert bash_complete("xcecli", f"xcecli --topdir = {tmp_path} ki") == ["kill"]
    # a command that takes no argument, or past its last one: nothing, and no error on the terminal
    for line in ("xcecli jobs ", "xcecli hosts x ", "xcecli queues "):
        assert bash_complete("xcecli", line) == [], line
    for line in ("xceadmin build ", "xceadmin keys list ", "xceadmin build --topdir /tmp --apply "):
        assert bash_complete("xceadmin", line) == [], line
    assert bash_complete("xceadmin", "xceadmin keys token --role w") == ["worker"]


def test_no_daemon_means_no_values_and_no_noise():
    for line in ("xcecli kill ", "xcecli submit -q ", "xcecli apps show ", "xcecli show 1"):
        assert bash_complete("xcecli", line) == [], line
    assert bash_complete("xceadmin", "xceadmin hosts close ") == []
    for argv in (["jobs"], ["queues", "n"], ["nosuchkind"], [], ["jobs", "1", "extra"], ["jobs", "--topdir"]):
        r = subprocess.run([XCECLI, "__complete", *argv], capture_output=True, text=True, env=shell_env(),
                           timeout=30)
        assert (r.returncode, r.stdout, r.stderr) == (0, "", ""), argv


APPS = "applications:\n  pytorch:\n    description: PyTorch training\n  mpi:\n    tasks: \"2,64\"\n"


@pytest.fixture(scope="module")
def cluster():
    """One xced (queues normal and short, profiles pytorch and mpi, host h1) with two jobs of
    the test user: a running `train` and a pending `big`."""
    top = short_tmpdir()
    write_config(top, extra_queues="  - name: short\n    priority: 40\n    description: quick jobs\n")
    (top / "config" / "applications.yaml").write_text(APPS)
    d = Daemon(top)
    try:
        d.start()
        run = d.submit("-J", "train", "--", "sleep", "300")
        big = d.submit("-J", "big", "-n", "4", "--", "true")  # 3 of the 4 slots are free: it pends
        d.wait_state(run, ("RUN",))
        yield d, run, big
    finally:
        d.stop()
        kill_job_processes(top)
        shutil.rmtree(top, ignore_errors=True)


def test_values_come_from_the_running_daemon(cluster):
    d, run, big = cluster
    assert bash_complete("xcecli", "xcecli kill ", d.top) == [str(run), str(big)]
    assert bash_complete("xcecli", f"xcecli show {str(big)[:-1]}", d.top) == \
        [j for j in (str(run), str(big)) if j.startswith(str(big)[:-1])]
    assert bash_complete("xcecli", "xcecli submit -n 2 -q ", d.top) == ["normal", "short"]
    assert bash_complete("xcecli", "xcecli jobs --queue s", d.top) == ["short"]
    assert bash_complete("xcecli", "xcecli submit -a py", d.top) == ["pytorch"]
    assert bash_complete("xcecli", "xcecli apps show ", d.top) == ["default", "mpi", "pytorch"]
    assert bash_complete("xceadmin", "xceadmin hosts drain ", d.top) == ["h1"]
    # --topdir on the line wins over the environment's TopDir, in either spelling
    assert bash_complete("xcecli", f"xcecli --topdir {d.top} wait ") == [str(run), str(big)]
    assert bash_complete("xcecli", f"xcecli --topdir = {d.top} wait ") == [str(run), str(big)]
    # each value with its description, as fish shows them
    r = subprocess.run([XCECLI, "__complete", "jobs"], capture_output=True, text=True, env=shell_env(d.top),
                       timeout=30)
    assert r.stdout == f"{run}\tRUN train\n{big}\tPEND big\n"
    r = subprocess.run([XCECLI, "__complete", "queues", "sh"], capture_output=True, text=True,
                       env=shell_env(d.top), timeout=30)
    assert r.stdout == "short\tquick jobs\n"


def test_a_stopped_daemon_gives_nothing_after_the_timeout(cluster):
    """SIGSTOP: the socket accepts, nothing answers. The TAB comes back, empty and silent,
    as soon as the 200 ms timeout passes (bounded here by the subprocess timeout only)."""
    d, _, _ = cluster
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        r = subprocess.run([XCECLI, "__complete", "jobs"], capture_output=True, text=True,
                           env=shell_env(d.top), timeout=10)
        assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
        assert bash_complete("xcecli", "xcecli kill ", d.top) == []
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
    assert json.loads(d.cli("jobs", "--json", check=True).stdout)["jobs"]  # and it serves again


def test_a_daemon_that_answers_a_byte_at_a_time_is_cut_off(tmp_path):
    """The 200 ms bound is on the whole question, not on each read."""
    import socket
    import threading

    path = str(short_tmpdir("xce-drip-") / "s.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen()
    stop = threading.Event()

    def drip():
        conn, _ = srv.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        while not stop.is_set():
            try:
                conn.sendall(b"x")
            except OSError:
                break
            time.sleep(0.05)
        conn.close()

    t = threading.Thread(target=drip, daemon=True)
    t.start()
    try:
        env = {**shell_env(), "XCE_SOCKET": path}
        env.pop("XCE_TOPDIR")
        r = subprocess.run([XCECLI, "__complete", "jobs", ""], capture_output=True, text=True, env=env, timeout=10)
        assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    finally:
        stop.set()
        srv.close()
        shutil.rmtree(Path(path).parent, ignore_errors=True)


@needs_fish
def test_fish_completes_with_the_real_fish(cluster):
    d, run, big = cluster
    assert fish_complete("xcecli", "xcecli ki") == ["kill"]
    assert fish_complete("xcecli", "xcecli apps ") == ["show"]
    assert fish_complete("xcecli", "xcecli submit --qu") == ["--queue"]
    assert fish_complete("xcecli", "xcecli submit -q ", d.top) == ["normal", "short"]
    assert fish_complete("xcecli", "xcecli kill ", d.top) == [str(run), str(big)]
    assert fish_complete("xcecli", "xcecli kill ") == []  # no daemon: nothing, not file names
    assert fish_complete("xcecli", f"xcecli --topdir {d.top} kill ") == [str(run), str(big)]
    assert fish_complete("xcecli", f"xcecli --topdir={d.top} kill ") == [str(run), str(big)]
    assert fish_complete("xceadmin", f"xceadmin hosts close --topdir {d.top} h1 ") == []  # past HOST: nothing
    assert fish_complete("xceadmin", "xceadmin hosts close ", d.top) == ["h1"]
    assert "sleep" in fish_complete("xcecli", "xcecli submit -n 2 -- slee")


@needs_zsh
def test_zsh_completes_with_the_real_zsh(cluster):
    d, run, big = cluster
    assert zsh_complete("xcecli", "xcecli ki") == ["kill"]
    assert zsh_complete("xcecli", "xcecli presets r") == ["rm", "report"]
    assert zsh_complete("xcecli", "xcecli submit --dr") == ["--dry-run"]
    assert zsh_complete("xcecli", "xcecli submit -o ") == ["<files>"]
    assert zsh_complete("xcecli", "xcecli --topdir ") == ["<dirs>"]
    assert zsh_complete("xcecli", "xcecli submit -n 2 -- ") == ["<commands>"]
    assert zsh_complete("xcecli", "xcecli submit -q ", d.top) == ["normal", "short"]
    assert zsh_complete("xcecli", "xcecli requeue ", d.top) == [str(run), str(big)]
    assert zsh_complete("xcecli", "xcecli requeue ") == []
    assert zsh_complete("xcecli", f"xcecli --topdir {d.top} requeue ") == [str(run), str(big)]
    assert zsh_complete("xcecli", f"xcecli --topdir={d.top} requeue ") == [str(run), str(big)]
    assert zsh_complete("xcecli", "xcecli jobs ") == []
    assert zsh_complete("xceadmin", "xceadmin sim run --policy ") == ["easy", "fcfs"]


# ---------------------------------------------------------------- man pages

@pytest.mark.parametrize("page", ["xcecli.1", "xceadmin.1", "xced.8"])
def test_man_pages_render_without_a_warning(page):
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed on this machine")
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(MAN / page)], capture_output=True, text=True,
                       timeout=60)
    assert (r.returncode, r.stderr) == (0, "")
    out = subprocess.run(["groff", "-man", "-Tascii", "-P-cbou", str(MAN / page)], capture_output=True,
                         text=True, timeout=60).stdout
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT", "FILES"):
        assert f"\n{section}\n" in out, section
    assert "XCE_TOPDIR" in out and "TOPDIR/run/xced.sock" in out


def test_man_pages_say_defaults_exit_codes_and_environment():
    cli = (MAN / "xcecli.1").read_text()
    assert "XCE_CONNECT_TIMEOUT" in cli and "\\fB3\\fR" in cli and "bsub \\-K" in cli
    admin = (MAN / "xceadmin.1").read_text()
    assert "[default: easy]" in admin and "XCE_CONTROLLER_KEY" in admin
    daemon = (MAN / "xced.8").read_text()
    assert "[default: controller,scheduler,worker,apiserver]" in daemon and "XCE_LOG_LEVEL" in daemon
    assert "XCE_CONTROLLER_KEY" not in daemon  # each page names what its tool reads
    assert "XCE_CONTAINMENT" in daemon and "xced.sock.path" in daemon and "XCE_JOB_TOKEN" in cli
    for page in (cli, admin, daemon):  # the help's `code` is set in bold, not shown as backticks
        assert "`" not in page

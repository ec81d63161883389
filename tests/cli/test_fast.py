"""The start-up fast path of `xcecli submit`, `jobs` and `show` (CLI-7, CLI-6; issue 17 part 1).

- Its reader takes a command line exactly as the Typer app's click parser does, or declines:
  for every option of the submit table and of `jobs`, in every spelling click accepts
  (hypothesis builds the command lines), the values it reads equal the values Typer gives
  the command.
- What really runs, in a subprocess against a real xced (`python -X importtime` lists
  every module a command imports, whatever way the process ends): submit, jobs and show
  import no Typer, click, pydantic, rich, orjson or http.client.
- Both paths print the same bytes and exit with the same codes: each command is run
  through the fast path (`xcecli`) and through the Typer app alone (`xcecli.app.main`).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import XCECLI
from xced.api.submit_options import OPTIONS
from xcecli.fast import JOBS, ROOT, Decline, read, submit_spec

pytestmark = pytest.mark.timeout(300)


def _typer_params(command: str, argv: list[str]) -> dict | None:
    """The parameters Typer's command gets for `argv`, lists as lists; None for a usage error."""
    import typer.main

    from xcecli.app import app

    try:
        from typer._click.exceptions import UsageError
    except ImportError:  # pragma: no cover - older Typer uses click itself
        from click.exceptions import UsageError

    cmd = typer.main.get_command(app).get_command(None, command)
    try:
        ctx = cmd.make_context(command, list(argv))
    except UsageError:
        return None
    return {k: list(v) if isinstance(v, tuple) else v for k, v in ctx.params.items()}


def _fast_params(argv: list[str], spec, defaults: dict, interspersed: bool, positional: str) -> dict | None:
    try:
        values, args = read(list(argv), spec, interspersed=interspersed)
    except Decline:
        return None
    return {**defaults, **values, positional: args}


_SUBMIT_DEFAULTS = {o.name: False if o.kind == "flag" else [] if o.kind in ("list", "map") else None for o in OPTIONS}
# values as users write them, and ones that look like options, hold '=' or are empty
_VALUE = st.one_of(st.sampled_from(["4", "2,8", "normal", "rusage[mem=100]", "A=1", "x=y=z", "", "=", "-", "-x",
                                    "--", "a b", "done(1)", "%J.out", "é"]),
                   st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=5))


@st.composite
def _option_words(draw, spec, allow_bunched: bool = True):
    """One option as the command line may spell it: `-n 4`, `-n4`, `--queue=x`, `-Ep=x`, a flag."""
    flag = draw(st.sampled_from(sorted(spec)))
    kind = spec[flag][1]
    if kind == "flag":
        return [flag] if draw(st.integers(0, 9)) else [flag + "=" + draw(_VALUE)]
    value = draw(_VALUE)
    form = draw(st.integers(0, 2))
    if form == 0:
        return [flag, value]
    if form == 1 and flag[:2] != "--" and len(flag) == 2:
        return [flag + value]
    return [flag + "=" + value]


_COMMANDS = st.lists(st.sampled_from(["true", "echo", "-n", "--queue", "x", "--", "-K", "a=b"]), max_size=3)


@st.composite
def _submit_argv(draw):
    words: list[str] = []
    for opt in draw(st.lists(_option_words(submit_spec()), max_size=6)):
        words += opt
    if draw(st.booleans()):
        words.append("--")
    return words + draw(_COMMANDS)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_submit_argv())
def test_the_fast_reader_reads_submit_as_typer_does(argv):
    fast = _fast_params(argv, submit_spec(), _SUBMIT_DEFAULTS, False, "command")
    if fast is None:
        return  # declined: Typer runs it, so nothing can differ
    if not fast["command"]:  # the fast path declines a submit without a command before it runs
        return
    assert _typer_params("submit", argv) == fast, argv


@st.composite
def _jobs_argv(draw):
    words: list[str] = []
    for opt in draw(st.lists(_option_words(JOBS), max_size=5)):
        words += opt
        if draw(st.integers(0, 3)) == 0:  # job IDs among the options (issue 18: `xcecli jobs ID...`)
            words.append(draw(st.sampled_from(["12", "12[3]", "x", "-", "1"])))
    if draw(st.booleans()):
        words += ["--", *draw(st.lists(st.sampled_from(["7", "-u", "8[1]"]), max_size=2))]
    return words


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_jobs_argv())
def test_the_fast_reader_reads_jobs_as_typer_does(argv):
    """The options and the job IDs (issue 18) alike."""
    defaults = {"user": None, "queue": None, "project": None, "state": [], "all_": False, "fields": None,
                "as_json": False}
    fast = _fast_params(argv, JOBS, defaults, True, "ids")
    if fast is None:
        return
    typer_params = _typer_params("jobs", argv)
    if typer_params is not None and typer_params["ids"] is None:
        typer_params["ids"] = []
    assert typer_params == fast, argv


@pytest.mark.parametrize("argv", [
    ["-n4", "-Ep=echo x", "--queue=normal", "-R=b", "-R", "a", "-K", "--", "ls", "-l"],
    ["-E", "true", "-Ep", "x", "-J", "a[1-2]", "-q", "a", "-q", "b", "--env", "A=1", "--env=B=2", "cmd", "--", "-x"],
    ["-o=", "-e", "", "-w", "done(1)", "--parsable", "--json", "--dry-run", "-", "x"],
])
def test_what_the_fast_reader_takes_it_reads_as_typer_does(argv):
    fast = _fast_params(argv, submit_spec(), _SUBMIT_DEFAULTS, False, "command")
    assert fast is not None and fast == _typer_params("submit", argv)


@pytest.mark.parametrize("argv", [
    ["-h", "true"], ["--help"], ["-Kn4", "true"], ["-q"], ["--bogus", "true"], ["-J", "-x", "true"],
    ["--json=1", "true"], ["-n", "--", "true"], ["--que", "normal", "true"],
])
def test_the_fast_reader_declines_what_it_is_not_sure_of(argv):
    with pytest.raises(Decline):
        read(argv, submit_spec(), interspersed=False)


def test_the_root_options_are_read_before_the_command():
    assert read(["--topdir", "/t", "--as-user=bob", "submit", "-q", "x"], ROOT, interspersed=False) == \
        ({"topdir": "/t", "as_user": "bob"}, ["submit", "-q", "x"])
    with pytest.raises(Decline):
        read(["--version", "submit"], ROOT, interspersed=False)


# ---------------------------------------------------------------- what really runs

#: modules the fast path must not import (CLI-7: each costs 25 ms or more to import here)
HEAVY = ("typer", "click", "pydantic", "pydantic_core", "rich", "orjson", "http.client", "email", "httpx", "fastapi")


def _imported(d, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_SOCKET", None)
    env.pop("XCE_TEST_USER", None)
    r = subprocess.run([sys.executable, "-X", "importtime", XCECLI, *args], capture_output=True, text=True,
                       env=env, cwd=str(d.top), timeout=60)
    mods = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    return r, mods


def _heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in HEAVY or m in HEAVY)


def test_submit_jobs_and_show_import_no_parser_library_model_or_rich(shared_daemon):
    d = shared_daemon
    r, mods = _imported(d, "submit", "--parsable", "-q", "normal", "-n", "1", "-R", "rusage[mem=10]", "--", "true")
    assert r.returncode == 0 and r.stdout.strip().isdigit(), r.stderr[-2000:]
    assert "xcecli.fast" in mods and _heavy(mods) == []
    job = r.stdout.strip()
    for args in (("jobs",), ("jobs", "-u", "all", "-o", "id state name"), ("jobs", job), ("show", job),
                 ("show", job, "--json")):
        r, mods = _imported(d, *args)
        assert r.returncode == 0 and job in r.stdout, (args, r.stderr[-2000:])
        assert _heavy(mods) == [], args


@pytest.mark.parametrize("args", [("-h",), ("--help",), ("submit", "-h"), ("jobs", "--help"), ("show", "-h")])
def test_help_into_a_pipe_is_typers_own_text_without_typer(shared_daemon, args):
    """The stored help (xcecli/help/, `make help`; tests/cli/test_clidocs.py fails when it is
    stale) is printed byte for byte as the Typer app prints it into a pipe."""
    r, mods = _imported(shared_daemon, *args)
    slow = _typer_cli(shared_daemon, *args)
    assert r.returncode == slow.returncode == 0 and r.stdout == slow.stdout and "Usage: xcecli" in r.stdout
    assert _heavy(mods) == []


def _with_terminal(argv: list[str], columns: int, *, stdout_on_it: bool, term: str | None = "xterm-256color",
                   extra_env: dict | None = None) -> tuple[bytes, set[str]]:
    """Run `argv` (`python -X importtime ARGV`) with stdin on a pseudo-terminal `columns` wide,
    and stdout on it too (`stdout_on_it`) or a pipe (as `... | less` runs it); stderr a pipe:
    (the bytes stdout got, the modules imported). `term`: TERM (None: TERM as it is)."""
    import fcntl
    import pty
    import struct
    import termios

    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "COLORTERM", "TERMINAL_WIDTH")}
    if term is not None:
        env["TERM"] = term
    env.update(extra_env or {})
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    p = subprocess.Popen([sys.executable, "-X", "importtime", *argv], stdin=child,
                         stdout=child if stdout_on_it else subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         close_fds=True)
    os.close(child)
    out = b""
    try:
        if stdout_on_it:
            import threading

            errs: list[bytes] = []  # stderr drained meanwhile: a full pipe would stop the child's writes
            drain = threading.Thread(target=lambda: errs.append(p.stderr.read()))
            drain.start()
            try:
                while chunk := os.read(main, 65536):
                    out += chunk
            except OSError:  # the child end closed: all is read
                pass
            p.wait(60)
            drain.join(60)
            out_pipe, err = b"", errs[0]
        else:
            out_pipe, err = p.communicate(timeout=60)
    finally:
        os.close(main)
    err = err.decode()
    assert p.returncode == 0, err[-2000:]
    return (out if stdout_on_it else out_pipe), {line.split("|")[-1].strip() for line in err.splitlines()
                                                 if line.startswith("import time:")}


def _on_terminal(argv: list[str], columns: int, term: str = "xterm-256color") -> tuple[bytes, set[str]]:
    """`argv` with stdout on a terminal `columns` wide (`_with_terminal`)."""
    return _with_terminal(argv, columns, stdout_on_it=True, term=term)


def _piped_from_terminal(argv: list[str], columns: int, extra_env: dict | None = None) -> tuple[str, set[str]]:
    """`argv` as `... | less` runs it on a terminal `columns` wide (`_with_terminal`): stdout's text."""
    out, mods = _with_terminal(argv, columns, stdout_on_it=False, term=None, extra_env=extra_env)
    return out.decode(), mods


_TYPER_APP = ["-c", "import sys; sys.argv[0] = 'xcecli'; from xcecli.app import main; main()"]


@pytest.mark.parametrize("args", [("--help",), ("submit", "-h"), ("jobs", "--help")])
def test_help_on_a_terminal_is_typers_coloured_text_without_typer(args):
    """CLI-7 (issue 17: --help at most 60 ms): on a terminal at least 80 columns wide the
    stored colour help (xcecli/help/*.ansi) is printed without Typer, and on an 80-column
    terminal it is byte for byte what the Typer app itself prints there; a wider terminal
    gets the same 80 columns; a narrower one, or TERM=dumb, Typer's own rendering."""
    fast, mods = _on_terminal([XCECLI, *args], 80)
    assert _heavy(mods) == [] and b"\x1b[1;33mUsage: \x1b[0m" in fast
    typer_out, typer_mods = _on_terminal([*_TYPER_APP, *args], 80)
    assert "typer" in typer_mods and fast == typer_out
    wide, mods = _on_terminal([XCECLI, *args], 132)
    assert wide == fast and _heavy(mods) == []
    narrow, mods = _on_terminal([XCECLI, *args], 60)
    assert "typer" in mods and narrow != fast
    plain, mods = _on_terminal([XCECLI, *args], 100, term="dumb")
    assert "typer" in mods and b"\x1b[" not in plain


def test_help_piped_from_a_narrow_terminal_or_with_rich_settings_is_typers():
    """A second fresh tester's finds: Rich draws help as wide as the first of stdin, stdout and
    stderr that is a terminal, so `xcecli submit --help | less` on 60 columns is Typer's
    60-column text, not the stored 80; PY_COLORS, TERMINAL_WIDTH, an empty FORCE_COLOR and an
    encoding that is not UTF-8 (Rich then draws ASCII boxes) get Typer's rendering too."""
    narrow, mods = _piped_from_terminal([XCECLI, "submit", "--help"], 60)
    typer_narrow, _ = _piped_from_terminal([*_TYPER_APP, "submit", "--help"], 60)
    assert "typer" in mods and narrow == typer_narrow and max(len(x) for x in narrow.splitlines()) <= 60
    wide, mods = _piped_from_terminal([XCECLI, "submit", "--help"], 100)
    assert _heavy(mods) == [] and max(len(x) for x in wide.splitlines()) == 80
    for extra in ({"PY_COLORS": "1"}, {"TERMINAL_WIDTH": "70"}, {"PYTHONIOENCODING": "ascii"}, {"FORCE_COLOR": ""}):
        out, mods = _piped_from_terminal([XCECLI, "submit", "--help"], 100, extra)
        typer_out, _ = _piped_from_terminal([*_TYPER_APP, "submit", "--help"], 100, extra)
        assert "typer" in mods and out == typer_out, extra


def test_a_declined_command_line_runs_the_typer_app(shared_daemon):
    """`-h` after an option is Typer's: the fast path declined, and Typer (which the budget
    test forbids on the fast path) printed the help."""
    r, mods = _imported(shared_daemon, "submit", "-q", "normal", "-h")
    assert r.returncode == 0 and "--parsable" in r.stdout
    assert "typer" in mods


# ---------------------------------------------------------------- both paths, same bytes

def _typer_cli(d, *args: str) -> subprocess.CompletedProcess:
    """The same command through the Typer app alone (no fast path)."""
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_SOCKET", None)
    env.pop("XCE_TEST_USER", None)
    code = "import sys; sys.argv[0] = 'xcecli'; from xcecli.app import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=str(d.top), timeout=60)


def test_both_paths_print_the_same_bytes_and_exit_codes(shared_daemon):
    d = shared_daemon
    plain = d.submit("-J", "same", "--", "true")
    arr = d.submit("-J", "fam[1-4]", "-R", "rusage[mem=10]", "-M", "100", "--env", "X=é", "--", "true")
    held = d.submit("-n", "2,3", "-w", f"done({plain}) && exit({arr}, >2)", "--", "sleep", "1")
    d.wait_state(plain, ("DONE",))
    cases = [("jobs",), ("jobs", "-a", "-o", "id,stat,name,ntasks,elements,submit_time"), ("jobs", "-s", "done run"),
             ("show", str(plain)), ("show", str(arr)), ("show", f"{arr}[2]"), ("show", str(held)),
             ("show", "--json", str(arr)), ("show", f"{arr}[3]", "--json"), ("show", str(held), "--json"),
             ("show", "-v", str(arr)), ("show", str(arr), "--verbose"),
             # refusals: the same message and exit code
             ("show", "999999"), ("show", f"{arr}[9]"), ("show", "x1"), ("jobs", "-q", "nope"), ("jobs", "-s", "FOO"),
             # issue 18: job IDs, an element's row, unknown IDs and users
             ("jobs", str(plain), f"{arr}[2]", str(held)), ("jobs", "--json", f"{arr}[3]"), ("jobs", "999999", str(plain)),
             ("jobs", "x1"), ("jobs", "-u", "no-such-user-xce"),
             ("jobs", "-o", "bogus"), ("submit", "-q", "nope", "--", "true"), ("submit", "-n", "0", "--", "true"),
             ("submit", "--", "no-such-program-xce"), ("submit", "-w", "done(", "--", "true"),
             ("submit", "-M", "100000TB", "--", "true"), ("--topdir", "/nonexistent", "jobs")]
    for args in cases:
        fast, slow = d.cli(*args), _typer_cli(d, *args)
        assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr), args
    assert d.cli("show", str(arr)).returncode == 0  # the cases above did not all fail


def test_a_submit_through_the_fast_path_is_the_job_typer_would_make(shared_daemon, tmp_path):
    d = shared_daemon
    script = tmp_path / "s.sh"
    script.write_text("echo hi\n")  # not executable: run with /bin/sh, as the Typer path does
    fast = d.show(d.submit("-q", "normal", "-n", "2", "-J", "a[1-3]%2", "-W", "2:00", "-M", "1GB",
                           "--env", "A=1", "--env", "A=2", "-Ep=echo done", "--", str(script), "x"))
    r = _typer_cli(d, "submit", "--parsable", "-q", "normal", "-n", "2", "-J", "a[1-3]%2", "-W", "2:00", "-M",
                   "1GB", "--env", "A=1", "--env", "A=2", "-Ep=echo done", "--", str(script), "x")
    slow = d.show(int(r.stdout))
    keys = ("queue", "ntasks_min", "ntasks_max", "name", "array_spec", "array_limit", "run_limit_s",
            "memory_limit_mb", "argv", "cwd", "umask")
    assert {k: fast[k] for k in keys} == {k: slow[k] for k in keys}
    assert fast["argv"] == ["/bin/sh", str(script), "x"] and fast["queue"] == "normal"
    assert fast["env"]["A"] == "2" == slow["env"]["A"]


def test_an_unreachable_daemon_is_exit_3_on_both_paths(tmp_path):
    env = {**os.environ, "XCE_SOCKET": str(tmp_path / "none.sock"), "XCE_CONNECT_TIMEOUT": "0.3"}
    env.pop("XCE_TOPDIR", None)
    fast = subprocess.run([XCECLI, "submit", "--parsable", "--", "true"], capture_output=True, text=True, env=env)
    code = "import sys; sys.argv[0] = 'xcecli'; from xcecli.app import main; main()"
    slow = subprocess.run([sys.executable, "-c", code, "submit", "--parsable", "--", "true"], capture_output=True,
                          text=True, env=env)
    assert fast.returncode == slow.returncode == 3
    assert fast.stderr == slow.stderr and "cannot reach xced" in fast.stderr and fast.stdout == ""


def test_a_reader_gone_is_silent_and_0_on_both_paths(shared_daemon):
    """`xcecli jobs | head -0`: stdout is a pipe nobody reads (EPIPE at the first write): both
    paths say nothing and exit 0, as the funnel documents for a closed pipe; help exits 1 on
    both, as Typer's Rich help does (rich ends a broken pipe with 1)."""
    d = shared_daemon
    job = str(d.submit("--", "true"))
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    code = "import sys; sys.argv[0] = 'xcecli'; from xcecli.app import main; main()"
    for args in (("jobs", "-a"), ("show", job), ("--help",), ("submit", "-h")):
        got = []
        for argv in ([XCECLI, *args], [sys.executable, "-c", code, *args]):
            r_fd, w_fd = os.pipe()
            os.close(r_fd)
            try:
                p = subprocess.run(argv, stdout=w_fd, stderr=subprocess.PIPE, text=True, env=env, timeout=60)
            finally:
                os.close(w_fd)
            got.append((p.returncode, p.stderr))
        assert got[0] == got[1] == (1 if "-h" in args or "--help" in args else 0, ""), (args, got)


def test_bad_listing_filters_are_usage_errors(shared_daemon):
    d = shared_daemon
    for args, says in ((("jobs", "-u", "x" * 1001), "-u: 1001 characters, more than the 1000"),
                       (("jobs", "-o", "id " * 400), "-o: 1200 characters, more than the 1000")):
        r = d.cli(*args)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    r = subprocess.run([os.fsencode(XCECLI), b"jobs", b"-u", b"\xff"], capture_output=True, env=env)
    assert r.returncode == 2 and b"-u: a byte that is not UTF-8 at character 1" in r.stderr, r.stderr


def test_a_submit_whose_answer_cannot_be_written_names_the_job(shared_daemon):
    """`xcecli submit ... > /dev/full`: the job is made, and the error says which, on both paths
    (a script must not submit it again blindly: JOB-10)."""
    d = shared_daemon
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    code = "import sys; sys.argv[0] = 'xcecli'; from xcecli.app import main; main()"
    for argv in ([XCECLI], [sys.executable, "-c", code]):
        with open("/dev/full", "w") as full:
            r = subprocess.run([*argv, "submit", "--parsable", "-J", "full", "--", "true"], stdout=full,
                               stderr=subprocess.PIPE, text=True, env=env, timeout=60)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        job = int(r.stderr.split("job ")[1].split(" ")[0])
        assert "was submitted, but its answer could not be written to standard output (No space left on device)" \
            in r.stderr
        assert d.show(job)["name"] == "full"


def test_a_closed_stdout_is_said_once(shared_daemon):
    env = {**os.environ, "XCE_TOPDIR": str(shared_daemon.top)}
    r = subprocess.run(f"{XCECLI} jobs >&-", shell=True, capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "standard output is closed" in r.stderr

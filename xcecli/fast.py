"""The start-up fast path of `xcecli submit`, `jobs` and `show` (CLI-7, CLI-6; issue 17).

Pipelines call `xcecli submit` once per job and poll `xcecli jobs` in a loop, so these
commands must cost little more than the interpreter's own start. Typer (and click, which
it is built on) cannot be imported within that budget on this machine: Typer 0.28 alone is
about 70 ms over `python -c pass`, click about 45 ms, and the aim for a whole submit is 50 ms
(bench/NOTES-issue17.md has the measurements). So `xcecli/__main__.py` first hands these
three commands to this module, which reads the command line with a small table-driven
reader and runs the very code the Typer commands run (xcecli.submitting, xcecli.views)
under the same error funnel (xced.api.funnel.run_fast).

The Typer app stays the one definition of the commands: their help, completions, man
pages and usage errors all come from it. The reader here takes only what it is sure of,
with click's own rules for what it takes (see `read`); for anything else it *declines*,
before anything is sent or printed, and `__main__` runs the Typer app on the same argv:
`-h`/`--help` (but for the stored help texts of the root and these three commands, which
it prints into a pipe: `HELP`), an option it does not know, a missing value, a value that starts with `-`,
flags bunched together (`-Kn4`), an argument the shared code refuses
(xcecli.usage.Usage, e.g. `-n 0` or a script that does not exist), a closed stdout, or a
shell completion request. Tests hold the two readers to the same result for every option
of the submit table (tests/cli/test_fast.py).
"""

from __future__ import annotations

import os
import sys

#: an option's kind: "one" (a value; the last given wins, as click does), "list" (a value,
#: repeatable, kept in order), "flag" (no value)
Spec = dict[str, tuple[str, str]]

#: the root's own options (xcecli.app's callback)
ROOT: Spec = {"--topdir": ("topdir", "one"), "--as-user": ("as_user", "one")}

#: `xcecli jobs`' options (xcecli.commands.jobs), by flag: (the parameter's name, its kind)
JOBS: Spec = {"-u": ("user", "one"), "--user": ("user", "one"), "-q": ("queue", "one"),
              "--queue": ("queue", "one"), "-P": ("project", "one"), "--project": ("project", "one"),
              "-s": ("state", "list"), "--state": ("state", "list"), "-a": ("all_", "flag"),
              "--all": ("all_", "flag"), "-o": ("fields", "one"), "--json": ("as_json", "flag")}


class Decline(Exception):
    """The fast path does not take this command line; the Typer app will."""


def submit_spec() -> Spec:
    """`xcecli submit`'s options from the one submit table (xced.api.submit_options.OPTIONS):
    flag -> (long name, kind), "map" options read as "list" (their NAME=VALUE items)."""
    from xced.api.submit_options import OPTIONS

    return {f: (o.name, "list" if o.kind == "map" else o.kind) for o in OPTIONS for f in o.flags}


def read(argv: list[str], spec: Spec, *, interspersed: bool,
         dash_values: bool = False) -> tuple[dict[str, object], list[str]]:
    """Read `argv` as click reads a command's options, for the options of `spec`; returns
    (values by name: a string for "one", a list for "list", True for a given "flag"; the
    positional arguments). click's rules kept here: `--opt=VALUE` and `--opt VALUE`; a
    one-letter option takes the rest of its word as its value (`-n4`, `-E=x` is "=x"); a
    multi-letter single-dash option (`-Ep`) is matched whole, also as `-Ep=VALUE`; `--` ends
    the options; a lone `-` is an argument. With `interspersed` False (submit) the first
    argument ends the options and everything after it is the command, as click's
    allow_interspersed_args=False. With `dash_values` (LSF's commands) the word after an
    option that takes a value is its value even when it starts with '-' (`-n -1`,
    `-s -9`), as LSF's getopt-style reader takes it, and the option's own check then says
    what was wrong with it. Raises Decline for anything else (see the module's docstring)."""
    values: dict[str, object] = {}
    args: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a == "--":
            args += argv[i:]
            break
        if a[:1] != "-" or a == "-":
            if not interspersed:
                args += argv[i - 1:]
                break
            args.append(a)
            continue
        head, eq, tail = a.partition("=")
        if a in spec:
            flag, value = a, None
        elif eq and head in spec and (a[:2] == "--" or len(head) > 2):
            flag, value = head, tail
        elif a[:2] != "--" and a[:2] in spec:
            flag, value = a[:2], a[2:]
        else:
            raise Decline(a)
        name, kind = spec[flag]
        if kind == "flag":
            if value is not None:
                raise Decline(a)
            values[name] = True
            continue
        if value is None:
            if i >= len(argv) or (argv[i][:1] == "-" and len(argv[i]) > 1 and not dash_values):
                raise Decline(a)
            value = argv[i]
            i += 1
        if kind == "list":
            values.setdefault(name, []).append(value)  # type: ignore[union-attr]
        else:
            values[name] = value
    return values, args


def _client_of(root: dict[str, object]):
    """The API client of the root options, made when first asked for (xcecli.context.Ctx)."""
    made: list = []

    def client():
        if not made:
            from xced.api.client import Client

            made.append(Client.connect(topdir=root.get("topdir"), as_user=root.get("as_user")))  # type: ignore[arg-type]
        return made[0]

    return client


def _submit(argv: list[str], client_of):
    from xced.api.submit_options import OPTIONS
    from xcecli.submitting import run

    given, command = read(argv, submit_spec(), interspersed=False)
    if not command and (given.get("pack") is not None or sys.stdin is None or not _piped(sys.stdin)):
        raise Decline("no command")  # Typer says so; with a script on stdin, run reads it (JOB-12)
    opts: dict[str, object] = {o.name: False if o.kind == "flag" else [] if o.kind in ("list", "map") else None
                               for o in OPTIONS}
    opts.update(given)
    return lambda: run(opts, command, client_of)


def _piped(stdin) -> bool:
    """Whether standard input may hold a job script: open and not a terminal."""
    try:
        return not stdin.isatty()
    except (OSError, ValueError):
        return False


def _jobs(argv: list[str], client_of):
    from xcecli.views import jobs

    given, args = read(argv, JOBS, interspersed=True)
    return lambda: jobs(client_of, **given, ids=args)  # type: ignore[arg-type]


def _show(argv: list[str], client_of):
    from xcecli.views import show

    given, args = read(argv, {"--json": ("as_json", "flag"), "-v": ("verbose", "flag"), "--verbose": ("verbose", "flag")},
                       interspersed=True)
    if len(args) != 1:
        raise Decline("show takes one job")
    return lambda: show(client_of, args[0], **given)  # type: ignore[arg-type]


COMMANDS = {"submit": _submit, "jobs": _jobs, "show": _show}

#: the command lines whose help is served from xcecli/help/NAME (made by `make help` from the
#: Typer app's own output: NAME.txt into a pipe, NAME.ansi on an 80-column terminal;
#: tools/clidocs.py; a test fails when one is stale)
HELP: dict[tuple[str, ...], str] = {("--help",): "xcecli.txt"}
for _cmd in COMMANDS:
    HELP[(_cmd, "--help")] = f"{_cmd}.txt"

#: the narrowest terminal the stored help (80 columns) is printed for
HELP_COLUMNS = 80
#: environment variables by which Rich or Typer would render the help otherwise than the stored
#: texts (set at all: Rich reads an empty FORCE_COLOR as "no colour"); Typer renders it then
_RENDER_ENV = ("FORCE_COLOR", "PY_COLORS", "GITHUB_ACTIONS", "TERMINAL_WIDTH", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
               "_TYPER_FORCE_DISABLE_TERMINAL", "TYPER_USE_RICH", "JUPYTER_COLUMNS")


def _print_help(text: str) -> int:
    """Print a stored help text; 1 when stdout's reader is gone, silently, as Typer's Rich
    help does (rich's Console.on_broken_pipe), so both paths end alike."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")
        return 1
    return 0


def _help(argv: list[str]) -> str | None:
    """The stored help text of `xcecli ARGV` (`--help`/`-h` of the root, submit, jobs or show),
    or None, and Typer renders it. Rich draws Typer's help as wide as the first of stdin,
    stdout and stderr that is a terminal (80 columns when none is, or COLUMNS), in colour
    when stdout is a terminal. The stored texts are its 80-column renderings: NAME.txt (no
    colour) when stdout is not a terminal, NAME.ansi (Rich's standard colours, the same on 8,
    256 and true-colour terminals) when it is one whose TERM takes colour (not `dumb`) and
    NO_COLOR is not set. They are printed when that width is at least HELP_COLUMNS (drawn 80
    wide where Typer would fill a wider terminal) and stdout's encoding is UTF-8, and no
    variable of _RENDER_ENV is set: 20 ms instead of Typer's 180 (issue 17). A narrower
    terminal (`xcecli submit --help | less` on 60 columns too) gets Typer's own rendering."""
    words = tuple("--help" if w == "-h" else w for w in argv)
    name = HELP.get(words)
    if name is None:
        return None
    from xced.api.funnel import stdout_is_utf8  # run_fast's module: imported on this path anyway

    env = os.environ
    if any(k in env for k in _RENDER_ENV) or env.get("COLUMNS", "80") != "80" or not stdout_is_utf8():
        return None
    width = 80
    if "COLUMNS" not in env:
        for fd in (0, 1, 2):  # Rich's order
            try:
                width = os.get_terminal_size(fd).columns or 80
                break
            except OSError:
                continue
    if width < HELP_COLUMNS:
        return None
    if sys.stdout.isatty():
        if "NO_COLOR" in env or env.get("TERM", "").strip().lower() in ("dumb", "unknown"):
            return None
        name = name[:-len(".txt")] + ".ansi"
    try:
        with open(os.path.join(os.path.dirname(__file__), "help", name), encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


def main(argv: list[str]) -> None:
    """Run `xcecli ARGV` here when the fast path takes it, and end the process (the funnel's
    exit code); return when it declines, having printed and sent nothing."""
    from xcecli.usage import Usage

    if sys.stdout is None or "_XCECLI_COMPLETE" in os.environ:
        return
    text = _help(argv)
    if text is not None:
        from xced.api.funnel import run_fast

        run_fast(lambda: _print_help(text), "xcecli")
    try:
        root, rest = read(argv, ROOT, interspersed=False)
        if not rest or rest[0] not in COMMANDS:
            return
        command = COMMANDS[rest[0]](rest[1:], _client_of(root))
    except Decline:
        return

    def checked():
        try:
            return command()
        except Usage:  # raised before any request: Typer reports it, as it would have
            raise Decline from None

    from xced.api.funnel import run_fast

    try:
        run_fast(checked, "xcecli", passthrough=(Decline,))
    except Decline:
        return

"""Job scripts: `#BSUB` and `#XCE` directives at the top of a script, and the interpreter a
script that is not executable runs with (JOB-12, CLI-8, CLI-2).

The rules, as LSF's bsub has them:

- Directives are lines that start with `#BSUB` (LSF's bsub spellings: `#BSUB -n 4`,
  `#BSUB -R "span[hosts=1]"`, `#BSUB -app NAME`) or `#XCE` (`xcecli submit`'s own
  spellings from its option table, xced.api.submit_options.OPTIONS: `#XCE --env A=1`,
  `#XCE -a pytorch`), followed by a blank. "bsub options can also be specified in the
  standard input if the line begins with #BSUB; for example, #BSUB -x. If an option is
  given on both the bsub command line, and in the standard input, the command line option
  overrides the option in the standard input" (IBM, bsub `command` argument:
  https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.command.1.html);
  the same for a script given as a path, which "does not have to be an executable file"
  (IBM, bsub `job_script`: https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.job_script.1.html).
- They are read from the top of the script up to its first command line: the `#!` line,
  blank lines and other comments are skipped; the first line that is not a comment ends
  them. A directive below that line, or an indented one (LSF reads `#BSUB` "at the
  beginning of each line"), is not read, and `warnings` says so (never silently).
- A line's words are split as a shell splits them (quotes; a word starting with `#`
  begins a trailing comment). A directive gives options only; an unknown option, a
  missing or malformed value, or a word that is not an option is an error naming the
  script and the line: `job.lsf:4: #BSUB -n x: ...` (ScriptError).
- Several directives of a one-value option: the last wins, as on a command line; a
  repeatable one (`-R`, `--env`) collects them in order.

`interpreter(first_line)` reads a `#!` line as Linux's execve does: the interpreter path
and at most one argument, the rest of the line (`#!/usr/bin/env python3` ->
["/usr/bin/env", "python3"]). A script without one runs with /bin/sh.

Pure and light: no pydantic, rich or typer (CLI-7); shlex is imported only for a script
that has directives.
"""

from __future__ import annotations

#: the directive prefixes: LSF's and xcecli's own
BSUB, XCE = "#BSUB", "#XCE"
#: the most of a script read from a file or standard input (characters): the submit
#: body's bound on a script (xced.model.units.MAX_SCRIPT_TEXT)
MAX_SCRIPT_CHARS = 512 * 1024


class ScriptError(ValueError):
    """A directive `xcecli submit` or `bsub` refuses: `message` names the script, the line
    number (1-based), the directive as written and what was wrong and what would be valid,
    e.g. `job.lsf:4: #BSUB -n x: -n 'x': expected MIN or MIN,MAX ...`."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Directive:
    """One directive line: `line` (1-based), `prefix` ("#BSUB" or "#XCE"), `text` (the line
    as written, stripped) and `words` (its words after the prefix, split as a shell
    splits them). Treat as read-only."""

    __slots__ = ("line", "prefix", "text", "words")

    def __init__(self, line: int, prefix: str, text: str, words: list[str]) -> None:
        self.line, self.prefix, self.text, self.words = line, prefix, text, words

    def __repr__(self) -> str:
        return f"Directive({self.line}, {self.prefix!r}, {self.words!r})"


def shell_words(line: str) -> list[str]:
    """`line` split into words as a POSIX shell splits a simple command: quotes and
    backslashes as `shlex.split` reads them, and a comment from an unquoted `#` that starts
    a word to the end of the line (`-n 4  # four tasks`), while a `#` inside a word stays
    (`-J run#1`, as sh keeps it; shlex's own `comments=True` would cut there). Used for pack
    lines (CLI-7, LSF bsub -pack) and #BSUB/#XCE directives (JOB-12). Raises ValueError
    saying what is wrong and what would do: an unclosed quote, a backslash that ends the
    line, a NUL character."""
    import shlex

    if "\0" in line:
        raise ValueError("a NUL character (\\0) is in the line; a word cannot hold one, so remove it")

    quote, start, i = "", True, 0
    while i < len(line):
        c = line[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif quote == '"':
            if c == "\\":
                i += 1  # the next character is escaped inside double quotes
            elif c == '"':
                quote = ""
        elif c == "#" and start:
            line = line[:i]
            break
        elif c == "\\":
            i += 1  # an escaped character is part of a word
            start = False
        elif c in "'\"":
            quote, start = c, False
        else:
            start = c in " \t"
        i += 1
    try:
        return shlex.split(line)
    except ValueError as e:
        why = {"No closing quotation": "a quote opened on the line is not closed; close it with the same quote "
                                       "(' or \"), or escape it with a backslash to mean the character itself",
               "No escaped character": "the line ends with a backslash, which escapes nothing; remove it, or "
                                       "write \\\\ for a backslash itself"}.get(str(e))
        raise ValueError(why or str(e)) from None


def _prefix(line: str) -> str | None:
    """The directive prefix `line` starts with (followed by a blank or the line's end)."""
    for p in (BSUB, XCE):
        if line.startswith(p) and (len(line) == len(p) or line[len(p)] in " \t"):
            return p
    return None


def directives(text: str, where: str) -> tuple[list[Directive], list[str]]:
    """The directives at the top of script `text` (named `where` in messages) and the
    warnings about directives below its first command line (not read, as LSF does not read
    them). Lines end at "\\n" (a "\\r" before it is dropped); a leading byte order mark is
    skipped. Raises ScriptError for a line whose quotes do not close."""
    if text.startswith("\ufeff"):
        text = text[1:]
    found: list[Directive] = []
    warnings: list[str] = []
    in_header = True
    for n, line in enumerate(text.split("\n"), 1):
        line = line[:-1] if line.endswith("\r") else line
        stripped = line.strip()
        if in_header:
            if not stripped or (n == 1 and stripped.startswith("#!")):
                continue
            if not stripped.startswith("#"):
                in_header = False
                continue
            p = _prefix(line)
            if p is None:
                if _prefix(stripped) is not None:  # "  #BSUB ...": LSF reads #BSUB at a line's start only
                    warnings.append(f"{where}:{n}: {stripped[:80]}: not read: a directive starts at the "
                                    f"beginning of its line; remove the blanks before it")
                continue
            try:
                words = shell_words(line[len(p):])
            except ValueError as e:
                raise ScriptError(f"{where}:{n}: {stripped}: {e} (quote a value as a shell would)") from None
            found.append(Directive(n, p, stripped, words))
        elif _prefix(line) is not None and "\0" not in text:  # not in a binary's bytes
            warnings.append(f"{where}:{n}: {stripped[:80]}: not read: directives end at the script's first command "
                            f"line; move it above that line if it is meant for this job")
    return found, warnings


def interpreter(first_line: str) -> list[str] | None:
    """The interpreter a script's first line names, as Linux's execve reads `#!`: the path
    (up to the first blank) and at most one argument (the rest of the line, stripped), e.g.
    "#!/usr/bin/env python3" -> ["/usr/bin/env", "python3"], "#!/bin/bash -e" -> ["/bin/bash",
    "-e"]. None when the line is not a `#!` line. Raises ScriptError for a `#!` that names no
    interpreter."""
    if not first_line.startswith("#!"):
        return None
    rest = first_line[2:].strip()
    if not rest:
        raise ScriptError("line 1: '#!' names no interpreter; write e.g. #!/bin/bash, or remove the line to run "
                          "the script with /bin/sh")
    parts = rest.split(None, 1)
    return parts if len(parts) == 1 else [parts[0], parts[1].strip()]


def run_with(text: str) -> list[str]:
    """The interpreter argv a script of `text` runs with when it is not executable (JOB-12):
    its `#!` line's (`interpreter`), else ["/bin/sh"]. Raises ScriptError."""
    if text.startswith("\ufeff"):
        text = text[1:]
    first = text.split("\n", 1)[0].rstrip("\r")
    return interpreter(first) or ["/bin/sh"]


def read_script_file(path: str, shown: str) -> str:
    """The text of script `path` (named `shown` in messages), at most MAX_SCRIPT_CHARS
    characters of it, bytes that are not UTF-8 replaced (a directive is ASCII). Raises
    ScriptError when it cannot be read."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SCRIPT_CHARS)
    except OSError as e:
        raise ScriptError(f"{shown}: cannot read the script ({e.strerror or e})") from None
    return data.decode("utf-8", "replace")


def options_of(found: list[Directive], where: str, xce_spec, bsub_read) -> tuple[dict, dict[str, list[int]], list[str]]:
    """The submit options the directives give, as `xcecli submit`'s option values by long
    name (xcecli.submitting.run's `opts` form: a string for "one", a list for "list" and
    "map"), the line numbers that gave each, and warnings (an LSF option XCE ignores).

    `xce_spec`: the fast reader's table of `#XCE` lines (xcecli.fast.submit_spec()).
    `bsub_read(words) -> (opts, arguments, warnings)`: reads a `#BSUB` line's words with bsub's table
    (xcecli.lsf.bsub.directive_options) and raises ValueError for what it refuses.
    A directive may give job options only, and -H (no `--dry-run`, `-K`, `--preset`,
    `--pack` ...: they say how the command runs). Raises ScriptError naming the script and the line."""
    from xced.api.submit_options import OptionError, by_name, check, from_cli, spelling
    from xcecli.fast import Decline, read

    opts: dict = {}
    lines: dict[str, list[int]] = {}
    warnings: list[str] = []
    for d in found:
        head = f"{where}:{d.line}: {d.text[:120]}"
        if not d.words:
            raise ScriptError(f"{head}: the directive gives no option; write e.g. {d.prefix} -n 4")
        try:
            if d.prefix == XCE:
                try:
                    given, args = read(d.words, xce_spec, interspersed=True)
                except Decline as e:
                    raise ValueError(f"{e}: not an option of xcecli submit, or its value is missing or starts "
                                     f"with '-' (write --opt=VALUE); the options are those of xcecli submit --help")
                extra: list[str] = []
            else:
                given, args, extra = bsub_read(d.words)
            if args:
                raise ValueError(f"{args[0]!r} is not an option: a directive gives options only (the command is "
                                 f"the script itself)")
            for name, value in given.items():
                if name == "_cwd":  # #BSUB -cwd: the job's working directory (xcecli.lsf.bsub)
                    opts[name] = value
                    lines[name] = [d.line]
                    continue
                opt = by_name(name)
                if not opt.preset_field and name not in ("hold", "exclusive"):  # -H, -x: what the job is
                    raise ValueError(f"{spelling(name)} says how the command runs, not what the job is; give it on "
                                     f"the command line")
                values = value if isinstance(value, list) else [value]
                canon = from_cli(name, values if opt.kind in ("list", "map") else value)
                if canon is not None:
                    check(name, canon)
                if opt.kind in ("list", "map"):
                    opts.setdefault(name, []).extend(values)
                else:
                    opts[name] = value
                    _replace_counterpart(name, d.line, opts, lines)
                if lines.get(name, [0])[-1] != d.line:
                    lines.setdefault(name, []).append(d.line)
            warnings += [f"{where}:{d.line}: {w}" for w in extra]
        except OptionError as e:
            raise ScriptError(f"{head}: {e.message}") from None
        except ValueError as e:
            raise ScriptError(f"{head}: {e}") from None
    return opts, lines, warnings


def _replace_counterpart(name: str, line: int, opts: dict, lines: dict[str, list[int]]) -> None:
    """-o and -oo (-e and -eo) name the same file: a later directive giving one drops an
    earlier line's other, as a later -o replaces an earlier -o. Raises ValueError when one
    line gives both."""
    from xced.api.submit_options import OVERWRITES, spelling

    pairs = {**OVERWRITES, **{v: k for k, v in OVERWRITES.items()}}
    other = pairs.get(name)
    if other is None or other not in opts:
        return
    if lines.get(other, [0])[-1] == line:
        plain, over = (other, name) if name in OVERWRITES else (name, other)
        raise ValueError(f"give {spelling(plain)} or {spelling(over)}, not both: {spelling(plain)} appends to the "
                         f"file, {spelling(over)} overwrites it")
    del opts[other]
    lines.pop(other, None)


def origin(lines: list[int]) -> str:
    """How a dry run names where a value came from: "from script line 3", "from script
    lines 3, 5"."""
    return f"from script line {lines[0]}" if len(lines) == 1 else \
        "from script lines " + ", ".join(str(n) for n in lines)

"""What `xcecli submit` does once its command line is parsed (CLI-2, JOB-10, PRE-1, MERGE-1),
with no parser library in it, so that the Typer command (xcecli.commands.submit) and the
start-up fast path (xcecli.fast, CLI-7) run the very same code.

A usage error (a malformed option value, a missing script, an empty command) raises
`Usage` before anything is sent to the daemon: the Typer command turns it into its usage
error (exit 2); the fast path declines and lets Typer run the same argv, which reports it
the same way. Errors after a request was sent are the API's typed errors (the funnel,
xced.api.funnel) or SystemExit with the code to exit with.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

from xced.api.errors import InvalidRequest
from xcecli.usage import Usage


def given_values(opts: dict) -> dict:
    """The canonical values (xced.api.submit_options.from_cli) of the job options the command
    line gave, by long name; options not given are left out. Raises Usage for a malformed
    NAME=VALUE."""
    from xced.api.submit_options import JOB_OPTIONS, OptionError, from_cli

    out = {}
    for o in JOB_OPTIONS:
        try:
            v = from_cli(o.name, opts.get(o.name))
        except OptionError as e:
            raise Usage(e.message) from None
        if v is not None:
            out[o.name] = v
    return out


def _which(prog: str, path: str) -> str | None:
    """The first file named `prog` that the user may execute in a directory of `path` (a
    PATH value; an empty entry is the current directory), as a shell's command search finds
    it; None when there is none or `path` is empty. What shutil.which does for a name without a slash, without
    importing shutil, which brings bz2 and lzma and costs about 4 ms of a submit's 50 (CLI-7)."""
    if not path:
        return None
    for d in path.split(os.pathsep):
        p = os.path.join(d or os.curdir, prog)
        if os.access(p, os.F_OK | os.X_OK) and not os.path.isdir(p):
            return p
    return None


def script_path(argv: list[str], env: dict[str, str], cwd: str) -> str | None:
    """The absolute path of the script `argv` names, when its first word is a script file:
    a path (it holds a slash), or a file of that name in `cwd` that is not a program on
    PATH; None for a program found on PATH. Raises Usage for a missing script, a
    directory or a file that is not regular, an empty command, or a program not on PATH."""
    prog = argv[0]
    if not prog:
        raise Usage("the command is empty")
    if "/" in prog:
        path = prog if os.path.isabs(prog) else os.path.normpath(os.path.join(cwd, prog))
        if os.path.isdir(path):
            raise Usage(f"{prog!r} is a directory, not a script or program")
        if os.path.exists(path) and not os.path.isfile(path):
            raise Usage(f"{prog!r} is not a regular file (a device or socket?), so it cannot be a script")
        if not os.path.isfile(path):
            raise Usage(f"script {prog!r} not found (looked for {path})")
        return path
    if os.path.isfile(os.path.join(cwd, prog)) and _which(prog, env.get("PATH", "")) is None:
        return os.path.join(cwd, prog)
    if _which(prog, env.get("PATH", os.defpath)) is None:
        raise Usage(f"command {prog!r} not found on PATH and no file of that name in {cwd}")
    return None


#: words a shell takes as its own (keywords and builtins), never looked up on PATH
_SHELL_WORDS = frozenset(". : ! [[ { break case cd command continue eval exec exit export for function if readonly "
                         "return set shift source time times trap ulimit umask unset until wait while".split())
#: characters that make a word more than a program's name to a shell
_SHELL_CHARS = frozenset(" \t\n;&|<>()$`\\\"'*?[]{}=~#")


def shell_script_path(command: list[str], env: dict[str, str], cwd: str) -> str | None:
    """For a command line run by a shell (bsub's, `shell_line`): the absolute path of the
    script file its first word names, whose `#BSUB`/`#XCE` directives and `#!` are then read
    as `xcecli submit` reads them: a path (it holds a slash) to a regular file, or a file in
    `cwd` that is not a program on PATH. None for anything else, which the shell alone
    makes sense of when the job runs: a program on PATH, a shell keyword or builtin (`cd`,
    `type`, ...), a word holding characters the shell reads (`sleep 1; echo hi`, `FOO=1
    prog`), or a name found nowhere, which the job's shell then reports, exiting 127 (LSF
    looks nothing up at submit: the command runs on the execution host, and "can be
    anything that is provided to a UNIX Bourne shell",
    https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.command.1.html).
    Raises Usage for an empty command line."""
    first = command[0] if command else ""
    if not " ".join(command).strip():
        raise Usage("the command is empty")
    if not first or first in _SHELL_WORDS or any(c in _SHELL_CHARS for c in first):
        return None
    if "/" in first:
        path = first if os.path.isabs(first) else os.path.normpath(os.path.join(cwd, first))
        return path if os.path.isfile(path) else None
    here = os.path.join(cwd, first)
    if os.path.isfile(here) and _which(first, env.get("PATH", "")) is None:
        return here
    return None


#: characters a word may hold and still be given to a shell bare (shlex.quote's safe set)
_SAFE_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-")


def shell_word(word: str) -> str:
    """`word` as a shell reads it back as one word: bare when it holds only safe characters,
    else in single quotes (shlex.quote's rule, without importing shlex on the CLI-7 path)."""
    if word and all(c in _SAFE_WORD for c in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def shell_line(command: list[str]) -> str:
    """The command line LSF runs for `bsub [options] command [arguments]`, which the execution
    host runs with /bin/sh (IBM: "The command can be anything that is provided to a UNIX
    Bourne shell (see sh(1))",
    https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.command.1.html):
    the command and its arguments joined by spaces, as LSF's bsub builds it
    (CopyCommand in openlava's lsbatch/cmd/cmd.sub.c, docs/lsf-behaviour.md [74]): the first
    word as given; an argument holding a blank in double quotes (single quotes when it holds
    `"` or `$`), so that it stays one argument; in any other argument a `"`, `'`, `\\`, `(`
    or `)` behind a backslash, so that it reaches the command as typed. Everything else
    (`>`, `;`, `|`, `*`, `$VAR`) is the shell's: `bsub ./job.sh a '>' f` redirects."""
    out = [command[0]] if command else []
    for w in command[1:]:
        if any(c.isspace() for c in w):
            q = "'" if '"' in w or "$" in w else '"'
            out.append(q + w + q)
        else:
            out.append("".join("\\" + c if c in "\"'\\()" else c for c in w))
    return " ".join(out)


def resolve_command(argv: list[str], env: dict[str, str], cwd: str, text: str | None = None) -> list[str]:
    """The command as the job will run it (JOB-12). A script file (`script_path`) is made
    absolute; one that is not executable runs with the interpreter its `#!` line names
    (`#!/usr/bin/env python3` -> ["/usr/bin/env", "python3", PATH, ARGS...]), or with
    /bin/sh when it has no `#!` line, as LSF runs a job script that "does not have to be an
    executable file" (https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.job_script.1.html).
    The interpreter is read here, at submit, from the script's text (`text`, or read from
    the file): the worker execs the argv as given. A missing script or a program not on
    PATH is refused here, before anything is submitted. Raises Usage."""
    path = script_path(argv, env, cwd)
    if path is None:
        return argv
    if os.access(path, os.X_OK):
        return [path] + argv[1:]
    if text is None:
        text = _script_text(path, argv[0])
    from xcecli.scripts import ScriptError, run_with

    try:
        return run_with(text) + [path] + argv[1:]
    except ScriptError as e:
        raise Usage(f"{argv[0]}: {e.message}") from None


def _script_text(path: str, shown: str) -> str:
    """The text of script `path` (xcecli.scripts.read_script_file). Raises Usage."""
    from xcecli.scripts import ScriptError, read_script_file

    try:
        return read_script_file(path, shown)
    except ScriptError as e:
        raise Usage(e.message) from None


def script_values(text: str, where: str) -> tuple[dict, dict[str, list[int]], list[str]]:
    """The job options the `#BSUB`/`#XCE` directives at the top of script `text` give
    (xcecli.scripts), as canonical values by long name (`given_values`' form), the line
    numbers of each, and warnings (a directive below the first command, an LSF option XCE
    ignores). Raises Usage naming the script and the line (`job.lsf:4: #BSUB -n x: ...`)."""
    from xcecli.scripts import ScriptError, directives, options_of

    try:
        found, late = directives(text, where)
        if not found:
            return {}, {}, late
        from xcecli.fast import submit_spec

        def bsub_read(words):
            from xcecli.lsf.bsub import directive_options

            return directive_options(words)

        opts, lines, warnings = options_of(found, where, submit_spec(), bsub_read)
    except ScriptError as e:
        raise Usage(e.message) from None
    values = given_values(opts)
    if opts.get("hold"):  # -H: not a preset's option, but a script's (LSF bsub -H)
        values["hold"] = True
    if opts.get("exclusive"):  # -x: the same (LSF bsub -x, docs/lsf-behaviour.md section 6)
        values["exclusive"] = True
    if opts.get("_cwd"):  # #BSUB -cwd DIR
        values["_cwd"] = opts["_cwd"]
    return values, lines, late + warnings


def _over(script: dict, given: dict) -> dict:
    """The command line's values over the script's (JOB-12, as LSF: "the command line
    option overrides the option in the standard input"): a given option replaces the
    script's, but for NAME=VALUE options (--env, --app-param), merged by NAME."""
    from xced.api.submit_options import by_name, over_layer

    out = dict(over_layer(script, given))  # -o on the command line replaces the script's -oo
    for k, v in given.items():
        out[k] = {**out[k], **v} if k in out and by_name(k).kind == "map" else v
    return out


class RefusalShown(SystemExit):
    """The daemon's refusal, already printed (with the caret under a -w expression's column):
    the command exits with the code it carries, xcecli's 1 (CLI-1); bsub makes it LSF's 255."""


def _post(client, path: str, body: dict, key: str | None = None, prog: str = "xcecli"):
    """POST a submit body; with Idempotency-Key `key` (the submit itself, JOB-10), sent again
    with the same key while its answer is lost, up to XCE_CONNECT_TIMEOUT (the client's
    `request_retried`), so a lost answer never makes a second job. When the daemon refuses
    the -w expression as unparsable, print its one-line error and then the expression with a
    caret under the column (the parser is the same pure module the daemon runs,
    xced.model.deps) and exit 1 (CLI-1: refused); `prog` names the command in that line."""

    try:
        if key is None:
            return client.request("POST", path, json=body)
        from xced.api.idempotency import HEADER
        from xcecli.output import err

        return client.request_retried("POST", path, json=body, headers={HEADER: key}, on_lost=err)
    except InvalidRequest as e:
        if e.field != "dependency" or "dependency" not in body or "column" not in e.message:
            raise
        from xced.model.deps import DependencyError, parse_dependency

        try:
            parse_dependency(body["dependency"])
        except DependencyError as de:
            from xcecli.output import err

            from xced.api.listing import one_line

            err(f"{prog}: error: {one_line(' '.join(e.message.split()))}")
            err("\n".join(one_line(ln) for ln in de.pretty().splitlines()[1:]))
            raise RefusalShown(e.exit_code) from None
        raise


#: the dry run's lines: (the effective value's key, the option that sets it, the key of its
#: origin in the merge's `origins`)
_DRY_LINES = (("queue", "queue", None), ("project", "project", None), ("auth_basis", None, None),
              ("app", "app", None), ("ntasks_min", "ntasks", "ntasks"), ("ntasks_max", "ntasks", "ntasks"),
              ("run_limit_s", "run_limit", "run_limit"), ("memory_limit_mb", "memory", "memory_limit"),
              ("name", "name", None), ("array_size", None, None), ("run_as", None, None),
              ("resreq_text", "resreq", "resreq"), ("dependency", "dependency", None))


def _origin_of(eff: dict, opt: str | None, okey: str | None, sources: dict, preset: str | None) -> str:
    """Where a dry run's value came from (MERGE-1): the preset or the command line for what
    the client sent (PRE-1: the server never learns of presets), else the merge's origin
    ("profile", "queue", "default"); "" for a value no option sets."""
    origins = eff.get("origins") or {}
    if okey == "resreq":  # the merge gives an origin per part: select, rusage.NAME, span, same, order
        theirs = "profile" if any("profile" in v for k, v in origins.items()
                                  if k.split(".")[0] in ("select", "rusage", "span", "same", "order")) else None
    else:
        theirs = origins.get(okey) if okey else None
    own = sources.get(opt) if opt else None
    if own:
        label = own.replace("preset", f"preset {preset}").replace("+", " + ")
        return label + (" + profile" if okey == "resreq" and theirs else "")
    if theirs and theirs != "job":
        return theirs
    return "default" if opt else ""


def redundant_preset_values(preset: str, values: dict, sources: dict, profile: dict | None) -> list[str]:
    """MERGE-1's "redundant value" side effect, found on the client from the dry run's answer:
    each value the preset gives (not the command line) that equals the value the job's
    profile already sets. `profile` is the dry run's `profile` ({"name", "run_limit_s",
    "memory_limit_mb", "task_min", "task_max", "params", "env"}); returns one line each."""
    from xced.api.submit_options import check

    if not profile:
        return []
    out = []
    pname = profile.get("name")
    for opt, src in sources.items():
        if src not in ("preset", "preset+command line"):
            continue
        v = values[opt]
        f = check(opt, v)
        same = None
        if opt == "run_limit" and f["run_limit_s"] == profile.get("run_limit_s"):
            same = f"{f['run_limit_s']} s"
        elif opt == "memory" and f["memory_limit_mb"] == profile.get("memory_limit_mb"):
            same = f"{f['memory_limit_mb']} MB"
        elif opt == "ntasks" and profile.get("task_min") is not None and \
                (f["ntasks_min"], f["ntasks_max"] or f["ntasks_min"]) == \
                (profile["task_min"], profile.get("task_max") or profile["task_min"]):
            same = f"{v} tasks"
        elif opt in ("app_params", "env"):
            theirs = profile.get("params" if opt == "app_params" else "env") or {}
            dup = [k for k in v if k in theirs and theirs[k] == v[k]]
            if dup:
                same = ", ".join(f"{k}={v[k]}" for k in dup)
        if same is not None:
            out.append(f"redundant value: preset {preset} sets {opt} to {same}, which profile {pname} already "
                       f"sets; the preset need not (MERGE-1)")
    return out


#: the submit body's fields -> the option that gives each (xced.api.submit_options)
_FIELD_OPTION = {"ntasks_min": "ntasks", "ntasks_max": "ntasks", "run_limit_s": "run_limit",
                 "memory_limit_mb": "memory"}


def _post_preset(client, path: str, body: dict, sources: dict, preset: str, key: str | None = None):
    """`_post`, for a submit made from a preset: a refusal of a value the preset gave says
    so, since the user never typed it (PRE-1)."""
    try:
        return _post(client, path, body, key)
    except InvalidRequest as e:
        opt = _FIELD_OPTION.get(e.field or "", e.field)
        if sources.get(opt) in ("preset", "preset+command line"):
            raise type(e)(f"{e.message} (the {opt} value came from preset {preset})", field=e.field) from None
        raise


def wait_exit_code(elements) -> int:
    """`submit -K`'s exit code (CLI-1, as LSF's `bsub -K`) from the finished job's elements
    (JobOut elements: `state`, `exit_code`, `start_time`): 0 when every element is DONE;
    otherwise the largest non-zero exit code of an element that ended EXIT, else 126 when an
    element was killed while pending (never started, no code: `bsub -K`'s 126), else 1. So a
    job that ended EXIT never exits 0, even when its own command exited 0 and its `-Ep`
    post-exec failed (issue 15)."""
    failed = [e for e in elements if e.state == "EXIT"]
    if not failed:
        return 0
    codes = [e.exit_code for e in failed if e.exit_code]
    if codes:
        return max(codes)
    if any(e.start_time is None and e.exit_code is None for e in failed):
        return 126
    return 1


def wait_for_start(client, job_id: int, on_lost, first_pause: float = 0.1, most_pause: float = 2.0) -> str | None:
    """For `bsub -K` (CLI-1, as LSF's -K prints `<<Starting on HOST>>`): poll job `job_id`
    (GET /jobs/ID, sent again while the daemon is away, `request_retried`) until an element
    has started; returns the first host it runs on, or None when the job ended without
    any element starting (killed while pending). The pause between polls grows from
    `first_pause` to `most_pause` seconds. Raises the API's typed errors."""
    import time

    pause = first_pause
    while True:
        job = client.request_retried("GET", f"/jobs/{job_id}", on_lost=on_lost).json()
        els = job.get("elements") or []
        for e in els:
            if e.get("start_time") is not None:
                alloc = e.get("alloc") or []
                return alloc[0]["host"] if alloc else (e.get("exec_host") or "-")
        if els and all(e.get("state") in ("DONE", "EXIT") for e in els):
            return None
        time.sleep(pause)
        pause = min(pause * 1.5, most_pause)


def client_env() -> dict[str, str]:
    """The submitter's environment, which a job gets (JOB-3): os.environ, less what xcecli set
    for its own start-up (XCE_CLI_SET_PYDANTIC and the PYDANTIC_DISABLE_PLUGINS it set), and
    less any variable whose name or value is not UTF-8 text (a byte such as `\xe9` left by
    a Latin-1 locale): XCE keeps environments as UTF-8 (D-8), so such a variable cannot
    reach the job; it is left out with a warning on stderr naming it, rather than refusing
    every submit from that shell (LSF would pass the bytes on; a job that needs them can be
    given them re-encoded with --env)."""
    env = dict(os.environ)
    if env.pop("XCE_CLI_SET_PYDANTIC", None):  # set by xcecli itself for its start-up, not the user's
        env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    bad = []
    for name, value in env.items():
        try:
            name.encode("utf-8")
            value.encode("utf-8")
        except UnicodeEncodeError:
            bad.append(name)
    if bad:
        prog = os.path.basename(sys.argv[0]) or "xcecli"
        shown = ", ".join(n.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace") for n in bad)
        print(f"{prog}: warning: left out of the job's environment, not UTF-8 text: {shown}", file=sys.stderr)
        for name in bad:
            del env[name]
    return env


def current_dir() -> str:
    """The directory the job runs in: the submitter's. Raises Usage when it was removed."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise Usage("the current directory no longer exists; cd to a directory the job can run in") from None


def current_umask() -> int:
    """The submitter's umask (D-7: the job makes its files with it, as in LSF and Slurm)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def prepare(opts: dict, command: list[str], base_env: dict[str, str], cwd: str, umask: int,
            script: str | None = None, cwd_given: bool = False, shell: bool = False):
    """The submit body of one job from its options (`opts`, as `run` takes them) and command,
    built without importing pydantic (CLI-6); the daemon validates it strictly (D-2).
    `base_env`: the environment the job starts from (`client_env()`), which the body does
    NOT carry: its "env" holds only the `--env` (and preset) additions, so that a pack sends
    the base once; the command is looked up on the PATH of the two together.

    `script`: the text of a script read from standard input (JOB-12), or None. A script on
    stdin, or a script file the command names (`script_path`), has its `#BSUB`/`#XCE`
    directives read (`script_values`); their values lie between a preset's and the command
    line's (the command line wins, as in LSF). A stdin script is sent in the body's
    `script` field; its argv is the interpreter its `#!` line names, or /bin/sh, and the
    worker appends the path of the copy it keeps in the job's directory. A `#BSUB -cwd DIR`
    sets the job's working directory (relative to `cwd`) unless `cwd_given` (bsub's own
    -cwd on the command line).

    `shell` (bsub, as LSF): the command and its arguments are a shell command line
    (`shell_line`) that the job runs as `/bin/sh -c LINE`, so `bsub ./job.sh a '>' f`
    redirects as in LSF. When its first word is a script file (`shell_script_path`), the
    script's directives are read as `xcecli submit` reads them, and in the line that runs
    that word is the script's absolute path, behind the interpreter its `#!` names when it
    is not executable. A first word found nowhere (or a shell builtin) is left to the
    job's shell, which exits 127 for a command it cannot find, as in LSF. The body's
    `command_line` is the line as typed, the job's command and default name (bjobs
    JOB_NAME and COMMAND, bjobs -l and bhist -l, LSB_JOBNAME). Without it (`xcecli
    submit`) the command is an argv, exec'd as given; a program not on PATH is refused.

    Returns (body, values, sources, preset, given, warnings, from_script): the canonical
    option values after the preset and the script, where each came from
    (submit_options.merge_values; "from script line N" for a directive's), the LocalPreset
    or None, the values the command line gave, warnings about the script, and the values
    the script gave (with "_lines": the line numbers of each option's directives). Raises
    Usage for a malformed value, a bad directive, an unknown preset, a missing script or
    program."""
    from xced.api.submit_options import OptionError, check_values, merge_values

    given = given_values(opts)
    preset_name = opts.get("preset")
    preset = None
    if preset_name is not None:
        from xcecli.presets import PresetMissing, load_fast

        try:
            preset = load_fast(preset_name)
        except (PresetMissing, InvalidRequest) as e:  # a bad option value: a usage error, as any other
            raise Usage(e.message) from None
    text = script
    path = None
    line = None
    if script is None:
        if shell:
            line = shell_line(list(command))
            typed_first = len(command[0]) if command else 0  # the line's first word, as typed
            path = shell_script_path(list(command), {**base_env, **(given.get("env") or {})}, cwd)
        else:
            path = script_path(list(command), {**base_env, **(given.get("env") or {})}, cwd)
        if path is not None:
            text = _script_text(path, command[0])
    from_script, lines, warnings = script_values(text, "standard input" if script is not None else command[0]) \
        if text is not None else ({}, {}, [])
    values, sources = merge_values(preset.values if preset else {}, _over(from_script, given))
    if from_script.get("_cwd") and not cwd_given:  # #BSUB -cwd DIR; the script path stays as found
        where = "standard input" if script is not None else command[0]
        job_cwd = os.path.normpath(os.path.join(cwd, os.path.expanduser(from_script["_cwd"])))
        if not os.path.isdir(job_cwd):
            raise Usage(f"{where}:{lines['_cwd'][0]}: #BSUB -cwd {from_script['_cwd']!r}: no such directory "
                        f"({job_cwd})")
        if path is not None:
            command = [path] + list(command[1:])
        cwd = job_cwd
    if lines:
        from xcecli.scripts import origin

        for k, ls in lines.items():
            if k in given and (not isinstance(given[k], dict) or set(given[k]) >= set(from_script.get(k) or {})):
                continue  # the command line's value replaced the script's
            label = origin(ls) + ("+command line" if k in given else "")
            sources[k] = label if sources.get(k) == "command line" else f"preset+{label}"
    try:
        fields = check_values(values)
    except OptionError as e:
        raise Usage(e.message + (f" (from preset {preset_name})" if sources.get(e.option) == "preset" else "")) \
            from None
    added = fields.pop("env", None) or {}
    if script is not None:
        from xcecli.scripts import ScriptError, run_with

        try:
            argv = run_with(script)
        except ScriptError as e:
            raise Usage(f"standard input: {e.message}") from None
    elif line is not None:  # LSF: the line runs with the Bourne shell, a script's too
        run_line = line
        if path is not None:  # the script's first word: its absolute path, behind its #! interpreter if not executable
            first = resolve_command([path], {**base_env, **added} if added else base_env, cwd, text)
            run_line = " ".join(shell_word(w) for w in first) + line[typed_first:]
        argv = ["/bin/sh", "-c", run_line]
    else:
        argv = resolve_command(list(command), {**base_env, **added} if added else base_env, cwd, text)
    body = {"argv": argv, "cwd": cwd, **fields}
    if line is not None:
        try:
            line.encode("utf-8")
        except UnicodeEncodeError as e:  # a byte a shell passed that is not UTF-8 (D-8): said as argv's is
            bad = ord(line[e.start])
            shown = f"\\x{bad - 0xDC00:02x}" if 0xDC80 <= bad <= 0xDCFF else f"\\u{bad:04x}"
            raise Usage(f"the command line holds {shown}, which is not UTF-8 (at character {e.start + 1}); XCE "
                        f"keeps commands as UTF-8 text: re-encode or rename it") from None
        body["command_line"] = line
    body = {k: v for k, v in body.items() if v is not None and v != []}
    if added:
        body["env"] = added
    if script is not None:
        body["script"] = script
    if opts.get("hold") or from_script.get("hold"):  # LSF bsub -H: PSUSP until resumed (D-5)
        body["hold"] = True
    if opts.get("exclusive") or from_script.get("exclusive"):  # LSF bsub -x: hosts where no other job runs
        body["exclusive"] = True
    if preset is not None:  # PRE-2: the server keeps meta untouched and never reads it
        body["exdata"] = {"meta": {"preset": {"name": preset.name, "hash": preset.hash}}}
    body["umask"] = umask
    return body, values, sources, preset, given, warnings, {**from_script, "_lines": lines}


def read_stdin_script() -> str | None:
    """The job script on standard input (`xcecli submit < job.lsf`, `bsub < job.lsf`, as
    LSF's bsub reads "the job commands from standard input" when no command is given:
    https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.command.1.html),
    or None when standard input is a terminal or closed (then there is no script). Raises
    ScriptRefused (exit 2; standard input is read, so the fast path must not decline) for
    an empty script, one over MAX_SCRIPT_CHARS characters, or one that is not UTF-8 text.
    A leading UTF-8 byte order mark is dropped from the text (the kernel would not see the
    script's `#!` behind it)."""
    import sys

    from xcecli.scripts import MAX_SCRIPT_CHARS

    stdin = sys.stdin
    if stdin is None:
        return None
    try:
        if stdin.isatty():
            return None
        data = stdin.buffer.read(MAX_SCRIPT_CHARS * 4 + 1)
    except (OSError, ValueError):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScriptRefused(f"standard input: the script is not UTF-8 text (byte {e.start + 1})") from None
    if text.startswith("\ufeff"):  # a byte order mark some editors write: the script runs without it, so its #! holds
        text = text[1:]
    if len(text) > MAX_SCRIPT_CHARS:
        raise ScriptRefused(f"standard input: the script has more than {MAX_SCRIPT_CHARS} characters, the most a "
                            f"submit carries; keep it in a file and submit its path")
    if not text.strip():
        raise ScriptRefused("no command: none was given and standard input is empty; give the command and its "
                            "arguments, a script path, or a script on standard input")
    return text


class ScriptRefused(InvalidRequest):
    """A submit of a script read from standard input, refused before it was sent (a bad
    directive, a malformed option): a usage error, exit 2 (CLI-1), printed by the funnel
    as one line. Not xcecli.usage.Usage: the fast path must not decline once it has read
    standard input, which Typer could not read again."""

    exit_code = 2


def submitted_line(answer: dict) -> str:
    """What `xcecli submit` prints for a submit's answer (a SubmitResponse dict), as LSF's
    bsub: `Job <N> is submitted to queue <Q>.`, or `Job array <N> (K elements) ...`."""
    n = answer.get("array_size") or 0
    what = f"Job array <{answer['job_id']}> ({n} elements)" if n else f"Job <{answer['job_id']}>"
    return f"{what} is submitted to queue <{answer['queue']}>."


class AnswerNotWritten(InvalidRequest):
    """A submit the daemon took whose answer could not be written to stdout (a full disk,
    an I/O error): exit 1 with a message that names the job(s), so that nobody submits
    again blindly (JOB-10: nothing acknowledged is lost, and nothing is made twice)."""


@contextmanager
def _told(done: str):
    """Write a submit's answer; an OSError (but a reader gone: the funnel's silent 0) becomes
    AnswerNotWritten saying `done` and why the answer is missing."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as e:
        import sys

        try:
            sys.stdout = open(os.devnull, "w")  # the interpreter's own flush at exit must not fail again
        except OSError:
            pass
        raise AnswerNotWritten(f"{done}, but its answer could not be written to standard output "
                               f"({e.strerror or e}); `xcecli jobs` lists it") from None


def run(opts: dict, command: list[str], client_of, *, base_env: dict[str, str] | None = None, cwd: str | None = None,
        say=None, prog: str = "xcecli", shell: bool = False) -> None:
    """Submit one job (or dry-run it) and print the answer as `xcecli submit` does.

    `opts`: every option of the submit table (xced.api.submit_options.OPTIONS) by long
    name: None (or [] or False) when not given, a string for "one", a list of strings for
    "list" and "map" (NAME=VALUE items), True for a given flag. `command`: the command and its
    arguments, or a script path; empty: the script on standard input (`read_stdin_script`,
    JOB-12). `client_of()`: the API client (xced.api.client.Client), made only once the
    request is ready. `base_env` (default `client_env()`), `cwd` (default the current
    directory), `say(answer) -> line` (default `submitted_line`) and `prog` (the name
    warnings carry) are what `bsub` (xcecli.lsf.bsub) sets: its -env, -cwd and LSF's answer
    line; `shell` (bsub) runs the command as a shell command line (`prepare`). Raises Usage before sending (ScriptRefused, exit 2, once standard input was read);
    SystemExit with `-K`'s code (`wait_exit_code`) or 1 after an unparsable -w was shown;
    the API's typed errors otherwise."""
    import json

    from xcecli.output import err

    if opts.get("pack") is not None:
        return run_pack(opts, command, client_of)
    script = None
    if not command:
        given_values(opts)  # a malformed option is said as such, before standard input is read
        script = read_stdin_script()
        if script is None:
            raise Usage("no command: give the command and its arguments, or a script path, after the options (put -- "
                        "before a command that has options of its own), a script on standard input, or --pack FILE "
                        "for one job per line")
    base_env = client_env() if base_env is None else base_env
    try:
        body, values, sources, preset, given, notes, from_script = prepare(
            opts, command, base_env, cwd or current_dir(), current_umask(), script, cwd_given=cwd is not None,
            shell=shell)
    except Usage as e:
        if script is None:
            raise
        raise ScriptRefused(e.message) from None
    warn = "warning:" if prog == "xcecli" else f"{prog}: warning:"
    for w in notes:
        err(f"{warn} {w}")
    body["env"] = {**base_env, **body.get("env", {})}
    preset_name = opts.get("preset")
    client = client_of()
    post = (lambda c, p, b, k=None: _post(c, p, b, k, prog)) if preset is None else \
        (lambda c, p, b, k=None: _post_preset(c, p, b, sources, preset.name, k))
    if opts["dry_run"]:
        res = post(client, "/jobs/dry-run", body).json()
        extra = redundant_preset_values(preset.name, values, sources, res["effective"].get("profile")) \
            if preset is not None else []
        if opts["json"]:
            res["sources"] = sources
            res["warnings"] = list(res.get("warnings", [])) + extra
            print(json.dumps(res, indent=2))
        else:
            eff = res["effective"]
            for k, opt, okey in _DRY_LINES:
                shown = "-" if eff.get(k) in (None, "") else str(eff[k])
                origin = _origin_of(eff, opt, okey, sources, preset_name) if shown != "-" else ""
                print(f"{k + ':':<17}{shown}" + (f"  ({origin})" if origin else ""))
            if eff.get("reserve"):  # each rusage term with its method and the job's total (issue 15)
                from xced.resreq import reserve_line

                for i, r in enumerate(eff["reserve"]):
                    print(f"{'reserve:' if i == 0 else '':<17}{reserve_line(r, eff.get('ntasks_max'))}")
            # what the daemon passes through as given: from the values sent
            for k in ("stdout", "stderr", "pre_exec", "post_exec"):
                over = k + "_overwrite"  # -oo/-eo: the same file, overwritten (LSF bsub -oo)
                src = over if values.get(over) is not None else k
                origin = _origin_of(eff, src, None, sources, preset_name) if src in values else ""
                shown = f"{values[src]} (overwritten at each run's start)" if src == over else values.get(k, "-")
                print(f"{k + ':':<17}{shown}" + (f"  ({origin})" if origin else ""))
            if body.get("hold"):  # -H (LSF bsub -H): where it came from, as the values above
                held_by = "command line" if opts.get("hold") else None
                if held_by is None:
                    from xcecli.scripts import origin as script_origin

                    held_by = script_origin(from_script["_lines"].get("hold") or [0])
                print(f"{'hold:':<17}PSUSP until xcecli resume  ({held_by})")
            if body.get("exclusive"):  # -x (LSF bsub -x): where it came from, as -H above
                excl_by = "command line" if opts.get("exclusive") else None
                if excl_by is None:
                    from xcecli.scripts import origin as script_origin

                    excl_by = script_origin(from_script["_lines"].get("exclusive") or [0])
                print(f"{'exclusive:':<17}only on hosts where no other job runs  ({excl_by})")
            params = eff.get("app_params") or {}
            origins = eff.get("origins") or {}
            def own(opt: str, n: str) -> str:  # per NAME: the command line's wins over the script's, the preset's
                if n in (given.get(opt) or {}):
                    return "command line"
                if n in (from_script.get(opt) or {}):
                    from xcecli.scripts import origin

                    return origin(from_script["_lines"].get(opt) or [0])
                return f"preset {preset_name}"

            for n, v in params.items():
                src = origins.get(f"param.{n}", "")
                print(f"{'app_param ' + n + ':':<16} {v}  ({own('app_params', n) if src == 'job' else src})")
            for n, v in (values.get("env") or {}).items():
                print(f"{'env ' + n + ':':<16} {v}  ({own('env', n)})")
            # a preset's redundant value is said once, by the line that names the preset
            said = {w.split(" sets ")[1].split(" to ")[0] for w in extra}
            dup = tuple(p for o, p in (("run_limit", "run limit: the job's"),
                                       ("memory", "memory limit: the job's")) if o in said)
            for w in [w for w in res.get("warnings", []) if not (dup and w.startswith(dup))] + extra:
                err(f"warning: {w}")
        return
    from xced.api.idempotency import new_key

    res = post(client, "/jobs", body, new_key())  # one key per invocation, every retry sends it (JOB-10)
    out = res.json()
    for w in out.get("warnings") or []:
        err(f"{warn} {w}")
    as_json, wait = opts["json"], opts["wait"]
    with _told(f"job {out['job_id']} was submitted"):
        if as_json and not wait:
            print(json.dumps(out, indent=2), flush=True)
        elif as_json:
            pass
        elif opts["parsable"]:
            print(out["job_id"], flush=True)
        else:
            print((say or submitted_line)(out), flush=True)
    if wait:
        if not as_json:
            err("<<Waiting for dispatch ...>>")
        lsf = prog == "bsub" and not as_json
        if lsf:  # LSF's -K says where the job starts: `<<Starting on HOST>>`
            host = wait_for_start(client, out["job_id"], err)
            if host is not None:
                err(f"<<Starting on {host}>>")
        job = client.wait(out["job_id"], on_lost=err)
        if as_json:  # the finished job, exit codes included (CLI-1: tell code 3 from a lost daemon)
            print(job.model_dump_json(indent=2))
        if lsf:  # LSF's own last line (openlava lsf/lib/nios.c, docs/lsf-behaviour.md section 5)
            started = any(e.start_time is not None for e in job.elements)
            err("<<Job is finished>>" if started else "<<Terminated while pending>>")
        elif not as_json:
            err(f"<<Job is finished>> {job.state}")
        raise SystemExit(wait_exit_code(job.elements))


#: the options of the submit table a pack line may not give: they say how the command runs
_NOT_ON_A_LINE = ("wait", "parsable", "json", "dry_run", "pack")


def _line_options(words: list[str]) -> tuple[dict, list[str]]:
    """A pack line's words read through submit's option table: the fast path's reader
    (xcecli.fast.read), or where it declines, Typer's own parser of `xcecli submit`, so a
    line takes exactly what the command line takes. Returns (opts as `run` takes them, the
    command); raises ValueError with the parser's message."""
    from xced.api.submit_options import OPTIONS
    from xcecli.fast import Decline, read, submit_spec

    opts: dict = {o.name: False if o.kind == "flag" else [] if o.kind in ("list", "map") else None for o in OPTIONS}
    try:
        given, command = read(words, submit_spec(), interspersed=False)
        opts.update(given)
        return opts, command
    except Decline:
        pass
    import typer.main

    from xcecli.app import app

    try:
        from typer._click import exceptions as cx
    except ImportError:  # pragma: no cover - older Typer uses click itself
        from click import exceptions as cx
    cmd = typer.main.get_command(app).get_command(None, "submit")
    try:  # no help option here: a line is a job, and -h is then an unknown option like any other
        params = cmd.make_context("submit", list(words), help_option_names=[]).params
    except (cx.UsageError, cx.BadParameter) as e:
        raise ValueError(" ".join(e.format_message().split()).rstrip(".")) from None
    except cx.Exit:  # an eager option that prints and exits
        raise ValueError("this line asks for something other than a job") from None
    params = {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}
    command = params.pop("command")
    opts.update(params)
    return opts, command


def _pack_text(path: str) -> tuple[str, str]:
    """(the text of the pack file `path`, or of standard input for '-'; how messages name it).
    At most MAX_PACK_REQUEST_BYTES (64 MiB, the daemon's cap on a pack request) is read:
    a larger file (or an endless one, /dev/zero) is refused once that much has been read,
    never loaded whole. Raises Usage for a file that cannot be read, is too large or is not
    UTF-8."""
    from xced.model.units import MAX_PACK_REQUEST_BYTES

    where = "standard input" if path == "-" else path
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_PACK_REQUEST_BYTES + 1) if sys.stdin is not None else b""
        else:
            with open(path, "rb") as f:
                data = f.read(MAX_PACK_REQUEST_BYTES + 1)
    except OSError as e:
        raise Usage(f"--pack {path!r}: cannot read it ({e.strerror or e})") from None
    if len(data) > MAX_PACK_REQUEST_BYTES:
        raise Usage(f"--pack: {where} is over {MAX_PACK_REQUEST_BYTES >> 20} MiB, the largest pack a request may "
                    f"carry; split it into several packs")
    try:
        return data.decode("utf-8"), where
    except UnicodeDecodeError as e:
        raise Usage(f"--pack: {where} is not UTF-8 text (byte {e.start + 1})") from None


def pack_bodies(text: str, where: str, base_env: dict[str, str], cwd: str, umask: int,
                notes: list[str] | None = None, read_line=None, shell: bool = False) -> tuple[list[dict], list[int]]:
    """The submit bodies of a pack's lines (LSF bsub -pack: one job per line, each line the
    options and command of one `bsub`), in order, and the line number of each. A line is
    split as a shell would (shlex), read through submit's option table (`_line_options`)
    and prepared as a single submit is (`prepare`: presets, checks, the command's look-up);
    blank lines and lines whose first word starts with # are skipped; `notes` (when given)
    gets the warnings of a line's script (xcecli.scripts), its line named. Raises PackRefused
    naming the first bad line (its number and what was wrong), or saying that no line holds a
    job; nothing is sent then. `read_line(words) -> (opts, command)` (default: submit's
    table, `_line_options`; bsub gives its own, LSF's "normal bsub syntax but omitting the
    word bsub") raises ValueError for a bad line; `shell`: each command is a shell command
    line (`prepare`, bsub)."""
    from xcecli.scripts import shell_words

    from xced.api.submit_options import spelling

    bodies: list[dict] = []
    numbers: list[int] = []
    if text.startswith("\ufeff"):  # a byte order mark some editors write: not part of line 1
        text = text[1:]
    # lines end at \n (a \r before it is dropped), never at the other characters str.splitlines
    # takes for line ends (form feed, U+2028, ...), which may sit inside a quoted argument
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    from xced.model.units import MAX_PACK_JOBS

    jobs = sum(1 for line in lines if line.strip() and not line.strip().startswith("#"))
    if jobs > MAX_PACK_JOBS:  # said before any line is read (a line costs a shlex split and a check)
        raise PackRefused(f"--pack: {where} holds {jobs:,} jobs; a pack takes at most {MAX_PACK_JOBS:,}: split it "
                          f"into several packs; nothing was submitted")
    for n, line in enumerate(lines, 1):
        line = line[:-1] if line.endswith("\r") else line
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            if "\r" in line:  # not a CRLF line end (taken off above): lines that run together
                raise ValueError("a carriage return inside the line: lines end at newlines; a file whose lines end "
                                 "in carriage returns alone needs them changed first, e.g. tr '\\r' '\\n'")
            words = shell_words(line)
            opts, command = (read_line or _line_options)(words)
            bad = [spelling(c) for c in _NOT_ON_A_LINE if opts.get(c)]
            if bad:
                raise ValueError(f"{', '.join(bad)} is not taken on a pack line (it says how the command runs; give it "
                                 f"beside --pack)")
            if not command:
                raise ValueError("no command: a line is a submit's options, then the command and its arguments")
            prepared = prepare(opts, command, base_env, cwd, umask, shell=shell)
            body = prepared[0]
            if notes is not None:  # a line's script's warnings (JOB-12), said with the line
                notes += [f"{where}, line {n}: {w}" for w in prepared[5]]
        except (ValueError, Usage) as e:
            raise PackRefused(f"{where}, line {n}: {e.message if isinstance(e, Usage) else e}; nothing was submitted")
        bodies.append(body)
        numbers.append(n)
    if not bodies:
        raise PackRefused(f"--pack: {where} holds no job (every line is blank or a # comment); give one job per line, "
                          f"e.g. -q normal -- ./run.sh 1")
    return bodies, numbers


class PackRefused(InvalidRequest):
    """A pack refused before it was sent (a bad line, no job): a usage error, exit 2 (CLI-1),
    printed by the funnel as one line. Not xcecli.usage.Usage: the fast path must not
    decline once it has read standard input, which Typer could not read again."""

    exit_code = 2


def run_pack(opts: dict, command: list[str], client_of, *, read_line=None, shell: bool = False,
             prog: str = "xcecli", say=None) -> None:
    """`xcecli submit --pack FILE` (LSF bsub -pack, CLI-7): every job of FILE's lines
    (`pack_bodies`) in one request, POST /jobs/pack, with the submitter's environment sent
    once and one Idempotency-Key for the whole pack, sent again with it while the answer is
    lost (JOB-10). The daemon commits all the jobs in one transaction or none. Prints each
    job's ID in line order, one per line with --parsable; `Job <N> is submitted to queue
    <Q>.` per job otherwise; the answer with --json. Raises Usage for a command or job option
    given beside --pack or a file that cannot be read; PackRefused (exit 2) for a bad line;
    the daemon's refusal of a job as its typed error, naming that job's line. `read_line`,
    `shell`: how a line is read and its command run (`pack_bodies`; bsub -pack's); `prog`:
    the name warnings carry; `say(answer) -> line` each job's line (default `submitted_line`)."""
    import json

    from xced.api.errors import XceError
    from xced.api.submit_options import OPTIONS, spelling
    from xcecli.output import err

    if command:
        raise Usage(f"--pack takes every job from its file, one per line; give no command beside it (got "
                    f"{command[0]!r})")
    beside = [spelling(o.name) for o in OPTIONS if o.name not in ("pack", "parsable", "json") and opts.get(o.name)]
    if beside:
        raise Usage(f"--pack takes each job's options from its line; {', '.join(beside)} cannot be given beside it")
    text, where = _pack_text(opts["pack"])
    base_env = client_env()
    notes: list[str] = []
    bodies, numbers = pack_bodies(text, where, base_env, current_dir(), current_umask(), notes, read_line, shell)
    warn = "warning:" if prog == "xcecli" else f"{prog}: warning:"
    for w in notes:
        err(f"{warn} {w}")
    from xced.api.idempotency import new_key

    try:
        out = client_of().submit_pack(base_env, bodies, new_key(), on_lost=err)
    except XceError as e:
        import re

        m = re.match(r"jobs\.(\d+)", e.field or "")
        if m is None or not int(m.group(1)) < len(numbers):
            raise
        i = int(m.group(1))
        msg = re.sub(r"^job \d+ of the pack: ", "", e.message)
        refused = type(e)(f"{where}, line {numbers[i]}: {msg}; nothing was submitted", field=e.field)
        if isinstance(e, InvalidRequest):
            refused.exit_code = e.exit_code
        raise refused from None
    jobs = out["jobs"]
    for n, j in zip(numbers, jobs):
        for w in j.get("warnings") or []:
            err(f"{warn} line {n}: {w}")
    ids = [j["job_id"] for j in jobs]
    with _told(f"the pack's {len(ids)} jobs were submitted (jobs {ids[0]} to {ids[-1]})"):
        if opts["json"]:
            print(json.dumps(out, indent=2), flush=True)
        elif opts["parsable"]:
            print("\n".join(str(i) for i in ids), flush=True)
        else:
            print("\n".join((say or submitted_line)(j) for j in jobs), flush=True)

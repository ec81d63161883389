"""The options of `xcecli submit`, declared once (PRE-1, CLI-2).

`OPTIONS` is the one table of them: each `SubmitOption` gives its long name, its flags
(LSF's spelling where LSF has one, as `bsub` writes them), the form of its value, whether
it repeats, and its help. Everything that takes submit options reads this table:

- `xcecli submit` and `xcecli presets create` build their parameters from it;
- a preset (a YAML file, local or on the server) is a mapping from the long names of the
  job options (`preset_field`) to values written as they would be on the command line;
- the daemon checks server preset files against it (PRE-3);
- later, the pack files of `submit --pack` and `#BSUB` directives (CLI-7, CLI-8).

So an option added here is a submit option and a preset field at once, whatever parses
the command line.

Values, in their canonical form (what `normalize` returns, what a preset file holds, what
is hashed): a `one` option is a string (`run_limit: "2:00"`, `ntasks: "2,8"`,
`memory: 4GB`); a `list` option (`-R`, repeatable, merged as LSF merges several `-R`) is
a list of strings; a `map` option (`--env`, `--app-param`, each `NAME=VALUE` and
repeatable) is a mapping of NAME to VALUE. `check` holds a value to what `xcecli submit`
accepts before it asks the daemon; what only the daemon knows (that a queue exists) is
checked at submit.

A preset's content hash (PRE-2) is `preset_hash(values)`: "sha256:" and the hex SHA-256
of the values' canonical JSON (keys sorted, separators "," and ":", UTF-8, no
provenance), so a pulled copy hashes the same as its server original.

Pure: no I/O, no pydantic; imported by the CLI on its hot path (CLI-6).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from xced.model.units import (
    MAX_APP_PARAMS,
    MAX_DEPENDENCY_LENGTH,
    MAX_ENV_VARS,
    MAX_HOOK_TEXT,
    MAX_NAME_TEXT,
    MAX_QUEUE_TEXT,
    MAX_RESREQ_STRINGS,
)

__all__ = ["CONTROLS", "JOB_OPTIONS", "OPTIONS", "OVERWRITES", "OptionError", "PRESET_NAME_FORM", "SubmitOption", "body_fields",
           "by_name", "check", "check_preset_name", "check_values", "from_cli", "merge_values", "normalize", "over_layer",
           "preset_hash", "shown_value", "spelling"]

Kind = Literal["one", "list", "map", "flag"]


class OptionError(ValueError):
    """A submit option's value that `xcecli submit` would refuse: `option` is its long
    name, the message says what was wrong and what would be valid, naming the flag."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option
        self.message = message


class SubmitOption:
    """One option of `xcecli submit`.

    `name` is the long name: the preset key and the command's parameter. `flags` are the
    spellings on the command line, the first being the one messages use. `metavar` is the
    value's form as help shows it. `kind`: "one" (a string), "list" (repeatable, kept in
    order), "map" (repeatable NAME=VALUE, the last for a NAME wins), "flag" (no value).
    `preset_field`: a job option, which a preset may set; False for how the command
    behaves (`--parsable`, `-K`, `--dry-run`, `--preset` itself). `limit`: the most
    characters of a "one" value, or items of a "list" or "map" one: the submit body's own
    bound (xced.api.models.SubmitRequest), so a preset is held to it too.

    A plain class with __slots__, not a dataclass: `dataclasses` imports `inspect`, about
    15 ms of the 50 ms a submit may cost (CLI-6, issue 17). Treat instances as read-only."""

    __slots__ = ("name", "flags", "metavar", "kind", "help", "preset_field", "limit")

    def __init__(self, name: str, flags: tuple[str, ...], metavar: str, kind: Kind, help: str,
                 preset_field: bool = True, limit: int | None = None) -> None:
        self.name, self.flags, self.metavar, self.kind = name, flags, metavar, kind
        self.help, self.preset_field, self.limit = help, preset_field, limit

    def __repr__(self) -> str:
        return f"SubmitOption({self.name!r}, {self.flags!r}, kind={self.kind!r})"


OPTIONS: tuple[SubmitOption, ...] = (
    SubmitOption("ntasks", ("-n",), "MIN[,MAX]", "one", "tasks: N, or MIN,MAX to take as many as fit now"),
    SubmitOption("queue", ("-q", "--queue"), "QUEUE", "one", "queue (default: the cluster's default queue)",
                 limit=MAX_QUEUE_TEXT),
    SubmitOption("project", ("-P", "--project"), "PATH", "one",
                 "project path, e.g. /physics/hep (default: your group's default project)", limit=MAX_NAME_TEXT),
    SubmitOption("name", ("-J", "--name"), "NAME", "one", "job name; NAME[1-100:2]%10 makes an array",
                 limit=MAX_NAME_TEXT),
    SubmitOption("stdout", ("-o",), "FILE", "one", "stdout file; %J = job ID, %I = array index",
                 limit=MAX_NAME_TEXT),
    SubmitOption("stderr", ("-e",), "FILE", "one", "stderr file (default: with stdout)", limit=MAX_NAME_TEXT),
    SubmitOption("stdout_overwrite", ("-oo", "--oo"), "FILE", "one",
                 "as -o, but the file is overwritten at each run's start, not appended to (LSF bsub -oo)",
                 limit=MAX_NAME_TEXT),
    SubmitOption("stderr_overwrite", ("-eo", "--eo"), "FILE", "one",
                 "as -e, but the file is overwritten at each run's start, not appended to (LSF bsub -eo)",
                 limit=MAX_NAME_TEXT),
    SubmitOption("run_limit", ("-W",), "[H:]M", "one",
                 "run limit in minutes, or hours:minutes (2:30), or with a unit (90s, 2h)"),
    SubmitOption("memory", ("-M",), "SIZE", "one", "memory limit, e.g. 4GB (MB if no unit)"),
    SubmitOption("resreq", ("-R",), "RESREQ", "list",
                 "resource requirement, LSF syntax (repeatable; merged as LSF does)", limit=MAX_RESREQ_STRINGS),
    SubmitOption("app", ("-a", "--app"), "PROFILE", "one",
                 "application profile (default: the cluster's default_application; '' for none)",
                 limit=MAX_QUEUE_TEXT),
    SubmitOption("app_params", ("--app-param",), "NAME=VALUE", "map",
                 "a parameter the profile declares (repeatable)", limit=MAX_APP_PARAMS),
    SubmitOption("pre_exec", ("-E",), "COMMAND", "one", "the job's own pre-exec command (runs inside the profile's)",
                 limit=MAX_HOOK_TEXT),
    SubmitOption("post_exec", ("-Ep",), "COMMAND", "one", "the job's own post-exec command", limit=MAX_HOOK_TEXT),
    SubmitOption("dependency", ("-w", "--dependency"), "EXPR", "one",
                 "start only when EXPR is met, e.g. 'done(12) && ended(13[2])': done/ended/exit/started(ID or "
                 "ID[INDEX]), exit(ID, >2), &&, ||, !, ( ); a bare ID means done(ID)", limit=MAX_DEPENDENCY_LENGTH),
    SubmitOption("env", ("--env",), "NAME=VALUE", "map", "added to the job's environment (repeatable)",
                 limit=MAX_ENV_VARS),
    SubmitOption("preset", ("--preset",), "PRESET", "one",
                 "start from this local preset's values (xcecli presets list); options given here win",
                 preset_field=False),
    SubmitOption("hold", ("-H", "--hold"), "", "flag",
                 "hold the job at submit (PSUSP, as LSF's bsub -H): it starts only after xcecli resume",
                 preset_field=False),
    SubmitOption("exclusive", ("-x", "--exclusive"), "", "flag",
                 "exclusive job (as LSF's bsub -x): it starts only on hosts where no other job runs, and while it "
                 "runs they take no other job", preset_field=False),
    SubmitOption("wait", ("-K", "--wait"), "", "flag", "wait for the job to end and exit with its exit code",
                 preset_field=False),
    SubmitOption("parsable", ("--parsable",), "", "flag", "print only the job ID", preset_field=False),
    SubmitOption("json", ("--json",), "", "flag", "print the submit result as JSON", preset_field=False),
    SubmitOption("dry_run", ("--dry-run",), "", "flag",
                 "print the effective job (the daemon parses and merges it) without submitting", preset_field=False),
    SubmitOption("pack", ("--pack",), "FILE", "one",
                 "submit one job per line of FILE ('-': standard input), each line the options and command of "
                 "one submit, all in one request (LSF bsub -pack); blank lines and # comments are skipped",
                 preset_field=False),
)

#: the job options: what a preset may set, in the table's order
JOB_OPTIONS: tuple[SubmitOption, ...] = tuple(o for o in OPTIONS if o.preset_field)
#: how the command behaves, never a preset field
CONTROLS: tuple[SubmitOption, ...] = tuple(o for o in OPTIONS if not o.preset_field)
_BY_NAME = {o.name: o for o in OPTIONS}

#: the overwrite forms of the output options (LSF bsub -oo/-eo: "If the specified file already
#: exists, it is overwritten", where -o/-e append) -> the option whose path they give
OVERWRITES = {"stdout_overwrite": "stdout", "stderr_overwrite": "stderr"}

#: options whose value may not be empty ('' means nothing for them); `-a ''` is "no profile"
_NOT_EMPTY = ("queue", "project", "name", "stdout", "stderr", "stdout_overwrite", "stderr_overwrite", "pre_exec", "post_exec", "dependency", "run_limit",
              "memory", "ntasks")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PRESET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
PRESET_NAME_FORM = ("a letter or digit, then letters, digits, '_', '-' and '.', at most 64 in all, with no "
                    "'..' and not ending in .yaml, .json or .bak (the preset's files use those), e.g. gpu-train")


def by_name(name: str) -> SubmitOption:
    """The option of that long name. Raises KeyError."""
    return _BY_NAME[name]


def spelling(name: str) -> str:
    """How messages name an option: its first flag (`-W`)."""
    return _BY_NAME[name].flags[0]


def _valid_keys() -> str:
    return ", ".join(o.name for o in JOB_OPTIONS)


def check_preset_name(name: object) -> str:
    """A preset's name, which is also its file's stem (`NAME.yaml`): `PRESET_NAME_FORM`.
    Raises OptionError (option "preset") for an empty name, a `/`, a `..` or any other form."""
    if not isinstance(name, str) or not name:
        raise OptionError("preset", f"a preset name is needed: {PRESET_NAME_FORM}")
    if "/" in name or ".." in name or not _PRESET_NAME.fullmatch(name) or name.endswith((".yaml", ".json", ".bak")):
        raise OptionError("preset", f"preset name {name!r} is not valid: {PRESET_NAME_FORM}")
    return name


def shown_value(v: object) -> str:
    """How a YAML value is named in a message: its YAML spelling for null and booleans,
    "a list" or "a mapping", a date or a tagged value by kind, else its repr (at most 60
    characters), never a Python type name."""
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "a list"
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, (int, float, str)):
        r = repr(v)
        return r if len(r) <= 60 else r[:57] + "..."
    import datetime

    if isinstance(v, (datetime.date, datetime.datetime)):
        return f"the date {v.isoformat()} (quote it to make it a string)"
    return "a tagged value (YAML tags such as !!python/... are not read)"


def _text(opt: SubmitOption, v: object, what: str) -> str:
    """A scalar as its command-line string: strings as they are, plain decimal integers
    written out; anything else (true, 1.5, null, a date, a list, 0x10, 1_000) refused."""
    example = (f"{opt.name}: {{{_MAP_EXAMPLES[opt.name]}}}" if opt.kind == "map" else
               f"{opt.name}: [\"{_EXAMPLES.get(opt.name, 'VALUE')}\"]" if opt.kind == "list" else
               f"{opt.name}: \"{_EXAMPLES.get(opt.name, 'VALUE')}\"")
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise OptionError(opt.name, f"{what}: expected a string as on the command line (e.g. {example}), "
                                    f"got {shown_value(v)}")
    if isinstance(v, int) and (type(v).__name__ in ("HexInt", "HexCapsInt", "OctalInt", "BinaryInt")
                               or getattr(v, "_underscore", None)):
        raise OptionError(opt.name, f"{what}: {v} written in another base or with '_' is not how the command line "
                                    f"takes it; write it as a string (e.g. {example})")
    return v if isinstance(v, str) else str(v)


_EXAMPLES = {"ntasks": "4", "run_limit": "2:00", "memory": "4GB", "queue": "normal", "resreq": "rusage[mem=1000]",
             "name": "train", "stdout": "%J.out", "stderr": "%J.err",
             "stdout_overwrite": "%J.out", "stderr_overwrite": "%J.err", "project": "/physics", "app": "pytorch",
             "dependency": "done(12)", "pre_exec": "test -d /scratch", "post_exec": "echo done"}


def _pair(opt: SubmitOption, item: str) -> tuple[str, str]:
    k, sep, v = item.partition("=")
    if not sep or not k.strip():
        raise OptionError(opt.name, f"{opt.flags[0]} {item!r}: expected NAME=VALUE")
    return (k.strip() if opt.name == "app_params" else k), v


def from_cli(name: str, value: Any) -> Any:
    """The canonical value of an option as the command line gave it: a string for "one", a
    list of strings for "list", a NAME -> VALUE mapping for "map" (from its NAME=VALUE
    items, the last for a NAME winning). None and [] are "not given" and return None.
    Raises OptionError for a malformed NAME=VALUE."""
    opt = _BY_NAME[name]
    if value is None or (opt.kind in ("list", "map") and not value):
        return None
    if opt.kind == "map":
        out: dict[str, str] = {}
        for item in value:
            k, v = _pair(opt, item)
            out[k] = v
        return out
    if opt.kind == "list":
        return [str(v) for v in value]
    return value


def normalize(name: str, value: Any) -> Any:
    """The canonical value of a preset's `name: value` (PRE-1): a string for "one" options
    (an integer is written out: `ntasks: 4` is "4"); for "list" options a list of strings;
    for "map" options a mapping of NAME to string. Raises OptionError for an unknown name
    (listing the valid ones), a control (`wait`, `dry_run`, ...), or a value of the wrong
    shape."""
    opt = _BY_NAME.get(name)
    if opt is None or not opt.preset_field:
        if opt is not None:
            why = "says how the command runs, not what the job is, so a preset cannot set it"
        else:
            import difflib

            close = difflib.get_close_matches(str(name)[:100], [o.name for o in JOB_OPTIONS], n=1, cutoff=0.6)
            why = "is not an option of xcecli submit" + (f" (did you mean {close[0]}?)" if close else "")
        raise OptionError(name, f"{shown_value(name)} {why}; a preset sets {_valid_keys()}")
    what = name
    if opt.kind == "one":
        return _text(opt, value, what)
    if opt.kind == "list":
        if not isinstance(value, (list, tuple)):
            raise OptionError(name, f"{what}: expected a list of strings, one per {opt.flags[0]} (e.g. {name}: "
                                    f"[\"{_EXAMPLES.get(name, 'VALUE')}\"]), got {shown_value(value)}")
        return [_text(opt, v, f"{what}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, dict):
        raise OptionError(name, f"{what}: expected a mapping of NAME: VALUE, one per {opt.flags[0]} NAME=VALUE "
                                f"(e.g. {name}: {{{_MAP_EXAMPLES[name]}}}), got {shown_value(value)}")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise OptionError(name, f"{what}: the name {shown_value(k)} is not a string; write NAME: VALUE")
        out[k] = _text(opt, v, f"{what}.{k}")
    return out


_MAP_EXAMPLES = {"env": 'OMP_NUM_THREADS: "4"', "app_params": 'EPOCHS: "20"'}


def parse_ntasks(text: str) -> tuple[int, int | None]:
    """`-n MIN[,MAX]` -> (MIN, MAX or None), each at most MAX_SLOTS. Raises OptionError."""
    from xced.model.units import MAX_SLOTS

    parts = text.split(",")
    if len(parts) <= 2 and any(re.fullmatch(r"[0-9]{10,}", p.strip()) for p in parts):  # too many digits for a count
        raise OptionError("ntasks", f"-n {text}: too large a task count; at most {MAX_SLOTS} tasks")
    if len(parts) > 2 or not all(re.fullmatch(r"-?[0-9]{1,9}", p.strip()) for p in parts):
        raise OptionError("ntasks", f"-n {text!r}: expected MIN or MIN,MAX with integers, e.g. -n 4 or -n 2,8")
    nmin = int(parts[0])
    nmax = int(parts[1]) if len(parts) == 2 else None
    if nmin < 1:
        raise OptionError("ntasks", f"-n {text}: the task count must be at least 1")
    if nmax is not None and nmax < nmin:
        raise OptionError("ntasks", f"-n {text}: MAX is below MIN; write -n MIN,MAX")
    if max(nmin, nmax or 0) > MAX_SLOTS:
        raise OptionError("ntasks", f"-n {text}: at most {MAX_SLOTS} tasks")
    return nmin, nmax


def _check_limit(opt: SubmitOption, value: Any) -> None:
    if opt.limit is None:
        return
    n = len(value)
    if n > opt.limit:
        what = "characters" if opt.kind == "one" else ("values" if opt.kind == "list" else "NAME=VALUE entries")
        whole = " (the submitter's own environment counts too)" if opt.name == "env" else ""
        raise OptionError(opt.name, f"{opt.flags[0]}: {n} {what}, more than the {opt.limit} a submit may give{whole}")


def _check_utf8(opt: SubmitOption, value: Any) -> None:
    """Text is UTF-8: a byte that is not (a surrogate from the command line's decoding) is
    refused here, naming the option, rather than failing when the body is encoded."""
    items = value.items() if isinstance(value, dict) else [(None, v) for v in value] if isinstance(value, list) \
        else [(None, value)]
    for k, v in items:
        for text in (k, v):
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as e:
                    raise OptionError(opt.name, f"{opt.flags[0]}: a byte that is not UTF-8 at character {e.start + 1} "
                                                f"of {text.encode('utf-8', 'backslashreplace').decode()[:60]!r}; "
                                                f"XCE takes UTF-8 text only") from None


def _check_deep(name: str, value: Any) -> None:
    """What the daemon would refuse in the text itself, found without it: a -R or -w that
    does not parse (with the column), a -P that is not a project path, a -q or -a that is
    not a name. Raises OptionError."""
    if name == "resreq":
        from xced.resreq import ResReqError, parse_job

        try:
            parse_job(list(value))
        except ResReqError as e:
            raise OptionError(name, f"-R: {e}") from None
    elif name == "dependency":
        from xced.model.deps import DependencyError, parse_dependency

        try:
            parse_dependency(value)
        except DependencyError as e:
            raise OptionError(name, f"-w {value!r}: {' '.join(str(e).split())}") from None
    elif name == "project":
        from xced.model.project import MAX_PROJECT_PATH, PROJECT_PATH_FORM, PROJECT_PATH_PATTERN

        if len(value) > MAX_PROJECT_PATH or not re.fullmatch(PROJECT_PATH_PATTERN, value):
            raise OptionError(name, f"-P {value!r}: a project is named by its path, {PROJECT_PATH_FORM}, in at most "
                                    f"{MAX_PROJECT_PATH} characters")
    elif name in ("queue", "app") and value:
        from xced.model.units import NAME_PATTERN

        if not re.fullmatch(NAME_PATTERN, value):
            raise OptionError(name, f"{spelling(name)} {value!r}: a {name if name == 'queue' else 'profile'} name "
                                    f"is letters, digits, '_', '.' and '-'")


def check(name: str, value: Any, *, deep: bool = False) -> dict[str, Any]:
    """Hold one option's canonical value to what `xcecli submit` accepts, and return the
    SubmitRequest fields it gives (`-W 2:00` -> {"run_limit_s": 7200}). `env` gives
    {"env": {...}}, the variables added to the submitter's environment. The bounds of the
    submit body (characters, values) always hold; `deep` also parses what the daemon would
    parse itself (-R, -w, -P, -q and -a names): a preset is held to that when it is made
    or read, while a plain submit leaves it to the daemon, which says the column. Raises
    OptionError naming the flag, what was wrong and what would be valid."""
    from xced.model.jobs import ArraySpecError, parse_job_name
    from xced.model.units import MAX_ARRAY_SIZE_SETTING, parse_memory_mb, parse_run_limit_s

    opt = _BY_NAME[name]
    flag = opt.flags[0]
    if name in _NOT_EMPTY and not str(value).strip():
        raise OptionError(name, f"{flag} {value!r}: the value is empty" if value else f"{flag} '': the value is empty")
    _check_limit(opt, value)
    _check_utf8(opt, value)
    if deep:
        _check_deep(name, value)
    if name == "ntasks":
        nmin, nmax = parse_ntasks(value)
        return {"ntasks_min": nmin, "ntasks_max": nmax}
    if name == "run_limit":
        try:
            return {"run_limit_s": parse_run_limit_s(value)}
        except ValueError as e:
            raise OptionError(name, f"-W {value!r}: {e}") from None
    if name == "memory":
        try:
            return {"memory_limit_mb": parse_memory_mb(value)}
        except ValueError as e:
            raise OptionError(name, f"-M {value!r}: {e}") from None
    if name == "name":
        try:
            parse_job_name(value, MAX_ARRAY_SIZE_SETTING)  # the daemon holds it to max_array_size
        except ArraySpecError as e:
            raise OptionError(name, str(e)) from None
        return {"name": value}
    if name == "env":
        for k in value:
            if not _ENV_NAME.fullmatch(k):
                raise OptionError(name, f"--env {k + '=' + value[k]!r}: expected NAME=VALUE with NAME made of "
                                        f"letters, digits and _ (not starting with a digit)")
        return {"env": dict(value)}
    if name == "app_params":
        return {"app_params": dict(value)}
    if name == "resreq":
        blank = next((t for t in value if not t.strip()), None)
        if blank is not None:  # quoted as given: a blank of spaces is not the same as ''
            raise OptionError(name, f"-R {blank!r}: the resource requirement is empty; give sections such as "
                                    f"'select[...] rusage[...]', or leave -R out")
        return {"resreq": list(value)}
    if name in OVERWRITES:  # -oo FILE: the -o path, opened with truncation (LSF bsub -oo/-eo)
        path = OVERWRITES[name]
        return {path: value, name: True}
    return {name: value}


def check_values(values: dict[str, Any], *, deep: bool = False) -> dict[str, Any]:
    """`check` for every option of `values` (canonical values by long name), in the table's
    order; returns the SubmitRequest fields they give together. Raises the first
    OptionError."""
    for over, path in OVERWRITES.items():
        if values.get(over) is not None and values.get(path) is not None:
            raise OptionError(over, f"give {spelling(path)} or {spelling(over)}, not both: {spelling(path)} appends "
                                    f"to the file, {spelling(over)} overwrites it")
    out: dict[str, Any] = {}
    for opt in JOB_OPTIONS:
        if opt.name in values and values[opt.name] is not None:
            out.update(check(opt.name, values[opt.name], deep=deep))
    return out


def over_layer(lower: dict[str, Any], upper: dict[str, Any]) -> dict[str, Any]:
    """`lower` without the output options an upper layer replaces: -o and -oo (-e and -eo)
    name the same file, so an upper layer (the command line over a script or a preset, a
    script over a preset) giving either one drops the lower layer's other one, as it would
    drop its own (`-o g` on the command line wins over `#BSUB -oo f`)."""
    drop = {other for over, path in OVERWRITES.items() for given, other in ((over, path), (path, over))
            if upper.get(given) is not None and lower.get(other) is not None}
    return {k: v for k, v in lower.items() if k not in drop} if drop else lower


def body_fields(values: dict[str, Any]) -> dict[str, Any]:
    """The SubmitRequest fields of checked canonical values, None fields left out."""
    return {k: v for k, v in check_values(values).items() if v is not None}


def merge_values(preset: dict[str, Any], given: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Expand a preset at the option level (PRE-1): the preset's values first, the command
    line's over them. A "one" option given on the command line replaces the preset's; a
    "list" option adds its terms after the preset's (several `-R` merge as in LSF); a "map"
    option merges by NAME, the command line's value winning. A `-a` on the command line
    that names another profile than the preset's drops the preset's `--app-param` values,
    which were the preset profile's. Returns (values, sources), sources naming for each
    option "preset", "command line" or "preset+command line"."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    preset = over_layer(preset, given)
    if given.get("app") is not None and given["app"] != preset.get("app"):
        preset = {k: v for k, v in preset.items() if k != "app_params"}  # they were for the preset's profile
    for opt in JOB_OPTIONS:
        p, g = preset.get(opt.name), given.get(opt.name)
        if p is None and g is None:
            continue
        if g is None:
            values[opt.name], sources[opt.name] = p, "preset"
        elif p is None or opt.kind == "one":
            values[opt.name], sources[opt.name] = g, "command line"
        elif opt.kind == "list":
            values[opt.name], sources[opt.name] = list(p) + list(g), "preset+command line"
        else:
            merged = {**p, **g}
            values[opt.name] = merged
            sources[opt.name] = "command line" if set(g) >= set(p) else "preset+command line"
    return values, sources


def preset_hash(values: dict[str, Any]) -> str:
    """PRE-2: "sha256:<hex>" of the values' canonical JSON (keys sorted, separators "," and
    ":", UTF-8); `values` holds canonical values only, never provenance (`origin`)."""
    import hashlib
    import json

    text = json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

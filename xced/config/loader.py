"""The config compiler (CFG-1, CFG-2): the YAML files of a TopDir -> ClusterConfig.

`load_cluster_config(topdir)` reads `config/xce.yaml`, `config/queues.yaml` and
`config/hosts.yaml` with ruamel's round-trip loader, so every mapping and
sequence keeps its line and column, checks every key and value against the
schema below, and collects *all* errors and warnings instead of stopping at
the first. Only when there is no error is the ClusterConfig built and hashed.

`config/applications.yaml` (optional) is compiled by `xced.config.applications`
into `ClusterConfig.applications`; `default_application` of xce.yaml must name
one of its profiles or the built-in `default` (PROF-2; "" means no profile).
`config/projects.yaml` and `config/rbac.yaml` (both optional; without a project
the cluster is in open mode, PRJ-4) are compiled by `xced.config.projects` into
`ClusterConfig.projects` and `ClusterConfig.rbac`; `default_project` of xce.yaml
is a project path, and once projects are defined it must name one of them (PRJ-3).
`keys.yaml` (KEY-*) is read by its own issue, and `presets/` is not compiled
(PRE-3). Any other `*.yaml` / `*.yml` file in `config/` gets a warning naming the
files XCE reads (a misspelt `project.yaml` would otherwise be silently ignored).

Schema (memory in MB or with a unit KB/MB/GB/TB; times in seconds unless said):

xce.yaml
    cluster_name, mode (production|test), admins (list of user names),
    default_application, default_project (a project path, /a/b), default_queue
    (a queue of queues.yaml), listen {host, port (0..65535 or null)}, kill_interval (> 0),
    limit_grace (> 0), sched_delay (0..0.010), store_busy_timeout (> 0), clean_period (0..1 year),
    host_lost_grace (1 s..1 day, default 120 s),
    max_dispatch_failures (1..1000), launch_timeout (> 0), max_array_size
    (1..1000000, default 1000),
    presets_dir
queues.yaml
    queues: list of {name (required), priority, description, max_tasks (>= 1),
    max_run_limit ([hours:]minutes or 90s/30m/2h), max_memory, host_limit
    (>= 1), backfill (true|false)}
hosts.yaml
    hosts: list of {name (required), slots (required, >= 1), memory (required),
    resources {name: number}, type, model, attributes {name: string},
    tags [string]}
projects.yaml, rbac.yaml
    see xced.config.projects
"""

from __future__ import annotations

import difflib
import stat
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xced.config.diagnostics import Diagnostic
from xced.model.project import MAX_PROJECT_DEPTH, MAX_PROJECT_PATH, PROJECT_PATH_FORM, PROJECT_PATH_PATTERN
from xced.model.config import (
    ClusterConfig,
    ClusterSettings,
    HostConfig,
    QueueConfig,
)
from xced.model.units import (
    HOST_FORM,
    HOST_PATTERN,
    MAX_ARRAY_SIZE_SETTING,
    MAX_CLEAN_PERIOD_S,
    MAX_CONFIG_BYTES,
    MAX_DISPATCH_FAILURES,
    MAX_INTERVAL_S,
    MAX_RESOURCE,
    MAX_SCHED_DELAY_S,
    MAX_STORE_BUSY_TIMEOUT_S,
    MAX_SLOTS,
    NAME_FORM,
    NAME_PATTERN,
    RESOURCE_FORM,
    RESOURCE_PATTERN,
    parse_memory_mb,
    parse_run_limit_s,
    parse_seconds,
)

__all__ = [
    "CONFIG_DIR",
    "HOSTS_FILE",
    "KNOWN_FILES",
    "QUEUES_FILE",
    "REQUIRED_FILES",
    "SETTINGS_FILE",
    "BuildResult",
    "load_cluster_config",
]

CONFIG_DIR = "config"
SETTINGS_FILE = "xce.yaml"
QUEUES_FILE = "queues.yaml"
HOSTS_FILE = "hosts.yaml"
REQUIRED_FILES = (SETTINGS_FILE, QUEUES_FILE, HOSTS_FILE)
#: every file of config/ that XCE reads (CFG-1), in the order diagnostics are listed;
#: keys.yaml holds the trusted host keys (`xceadmin keys`, KEY-*)
KNOWN_FILES = (SETTINGS_FILE, QUEUES_FILE, HOSTS_FILE, "applications.yaml", "projects.yaml", "rbac.yaml",
               "keys.yaml")
#: the directories of config/ that XCE reads: server presets (PRE-3, not compiled)
KNOWN_DIRS = ("presets",)

# the bounds live with the model (xced.model.units): the compiled config checks them again
NAME_RE = re.compile(NAME_PATTERN)
RESOURCE_RE = re.compile(RESOURCE_PATTERN)
PROJECT_PATH_RE = re.compile(PROJECT_PATH_PATTERN)


@dataclass
class BuildResult:
    """What `load_cluster_config` returns. `config` and `hash` are set only when
    `errors` is empty."""

    config: ClusterConfig | None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    hash: str | None = None

    @property
    def ok(self) -> bool:
        return not self.errors and self.config is not None

    def to_dict(self) -> dict[str, Any]:
        """The `xceadmin build --json` object: {ok, hash, errors, warnings}."""
        return {
            "ok": self.ok,
            "hash": self.hash,
            "errors": [d.to_dict() for d in self.errors],
            "warnings": [d.to_dict() for d in self.warnings],
        }


# --------------------------------------------------------------------------- helpers

Pos = tuple[int, int] | None  # 0-based (line, col) as ruamel keeps them


class _Invalid(Exception):
    """A value check failed; the message is complete (what, got, what is valid)."""


def _is_bool(v: object) -> bool:
    # ruamel's ScalarBoolean (an anchored boolean) is an int subclass, not a bool.
    return isinstance(v, bool) or type(v).__name__ == "ScalarBoolean"


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not _is_bool(v)


def _is_number(v: object) -> bool:
    return (isinstance(v, (int, float))) and not _is_bool(v)


def _is_map(v: object) -> bool:
    return isinstance(v, dict)


def _is_seq(v: object) -> bool:
    return isinstance(v, list)


def _got(v: object) -> str:
    """How a found value is shown in a message."""
    if v is None:
        return "no value (null)"
    if _is_bool(v):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if _is_number(v):
        return repr(int(v)) if isinstance(v, int) else repr(float(v))
    if _is_map(v):
        return "a mapping"
    if _is_seq(v) or isinstance(v, tuple):  # a complex key (`? [a, b]`) is a tuple
        return "a list"
    tag = getattr(getattr(v, "tag", None), "value", None) or getattr(v, "tag", None)
    if isinstance(tag, str):  # `!!python/object ...`: a tagged value, never built
        return f"a value tagged {tag} (tags are not taken)"
    return type(v).__name__


def _node_pos(node: object) -> Pos:
    lc = getattr(node, "lc", None)
    if lc is None:
        return None
    try:
        return (lc.line, lc.col)
    except AttributeError:
        return None


def _key_pos(mapping: Any, key: object) -> Pos:
    try:
        line, col = mapping.lc.key(key)
        return (line, col)
    except Exception:  # keys merged in with `<<:` have no position of their own
        return _node_pos(mapping)


def _value_pos(mapping: Any, key: object) -> Pos:
    """Where `key`'s value is, (line, col) from 0. An empty value (`kill_interval:` with
    nothing after it) is placed just past the key's colon: ruamel.yaml gives it the position
    of the next token, which is the next key's line."""
    value = mapping.get(key)
    if (_is_map(value) or _is_seq(value)) and value:
        pos = _node_pos(value)
        if pos is not None:
            return pos
    try:
        line, col = mapping.lc.value(key)
    except Exception:
        return _key_pos(mapping, key)
    if value is None and isinstance(key, str):
        kpos = _key_pos(mapping, key)
        if kpos is not None and kpos[0] != line:
            return (kpos[0], kpos[1] + len(key) + 1)
    return (line, col)


def _item_pos(seq: Any, index: int) -> Pos:
    try:
        line, col = seq.lc.item(index)
        return (line, col)
    except Exception:
        return _node_pos(seq)


def _one_of(words: list[str]) -> str:
    return ", ".join(words)


class _Source:
    """One YAML file being compiled: its path and where diagnostics go."""

    def __init__(self, path: Path, errors: list[Diagnostic], warnings: list[Diagnostic]):
        self.path = path
        self.name = str(path)
        self.errors = errors
        self.warnings = warnings
        self.failed = False  # any error in this file

    def _diag(self, severity: str, pos: Pos | str, message: str) -> Diagnostic:
        """`pos` is a 0-based (line, col), "file" for the file as a whole, or None
        when the position is unknown (then the start of the file)."""
        line: int | None
        col: int | None
        if pos == "file":
            line = col = None
        elif pos is None:
            line, col = 1, 1
        else:
            line, col = pos[0] + 1, pos[1] + 1  # type: ignore[index]
        return Diagnostic(severity, self.name, line, col, message)  # type: ignore[arg-type]

    def error(self, pos: Pos | str, message: str) -> None:
        self.failed = True
        self.errors.append(self._diag("error", pos, message))

    def warn(self, pos: Pos | str, message: str) -> None:
        self.warnings.append(self._diag("warning", pos, message))


def _read_yaml(src: _Source) -> tuple[bool, Any]:
    """(loaded, document). Reports a missing file, an unreadable file or a YAML
    syntax error as one error; what only a first pass over the YAML events can place
    (nesting too deep, an integer too long, a duplicate key: `xced.config.scan`) with
    its position, each one. A file with duplicate keys is still loaded (the first value
    of a key is kept, ruamel's rule), so its other errors are reported too (CFG-2)."""
    try:
        st = src.path.stat()
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the build, /dev/zero never end
            src.error("file", "is not a regular file (a FIFO, a device or a socket?); expected a YAML file")
            return False, None
        if st.st_size > MAX_CONFIG_BYTES:
            src.error("file", f"is {st.st_size} bytes, more than the {MAX_CONFIG_BYTES} a config file may be (D-8)")
            return False, None
        text = src.path.read_text(encoding="utf-8")
    except FileNotFoundError:
        src.error(
            "file",
            f"{src.path.name} not found; every TopDir needs {CONFIG_DIR}/{SETTINGS_FILE}, "
            f"{CONFIG_DIR}/{QUEUES_FILE} and {CONFIG_DIR}/{HOSTS_FILE} "
            f"(`xceadmin init DIR` makes a commented skeleton)",
        )
        return False, None
    except IsADirectoryError:
        src.error("file", "is a directory; expected a YAML file")
        return False, None
    except UnicodeDecodeError as e:
        raw = e.object[: e.start]
        line = raw.count(b"\n")
        col = len(raw) - (raw.rfind(b"\n") + 1)
        src.error((line, col), f"not valid UTF-8 text ({e.reason} at byte {e.start}); YAML files must be UTF-8")
        return False, None
    except OSError as e:
        src.error("file", f"cannot read: {e.strerror or e}")
        return False, None
    return load_yaml_text(src, text)


def load_yaml_text(src: _Source, text: str) -> tuple[bool, Any]:
    """(loaded, document) of YAML `text` read from `src`: the scan's findings (nesting too
    deep, an integer too long, a duplicate key) and a syntax error reported with their
    positions, as `_read_yaml` does for a file (CFG-2)."""
    from ruamel.yaml.error import YAMLError

    from xced.config.scan import scan

    try:
        findings = scan(text)
    except YAMLError:
        findings = []  # a syntax error: the load below reports it with its position
    for f in findings:
        src.error((f.line, f.col), f.message)
    if any(f.fatal for f in findings):
        return False, None

    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError

    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = True  # the scan reported each; the rest of the file is checked too (CFG-2)
    try:
        return True, yaml.load(text)
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        pos: Pos | str = (mark.line, mark.column) if mark is not None else "file"
        problem = (e.problem or e.context or "syntax error").strip()
        message = f"invalid YAML: {problem}"
        if "character '@'" in problem:
            message += ' (a value that starts with @ must be quoted, e.g. "@hep")'
        if e.context and e.problem and e.context_mark is not None:
            message += (
                f" ({e.context} at line {e.context_mark.line + 1},"
                f" column {e.context_mark.column + 1})"
            )
        src.error(pos, message)
    except YAMLError as e:
        src.error("file", f"invalid YAML: {str(e).strip().splitlines()[0] if str(e).strip() else e!r}")
    except (RecursionError, ValueError, KeyError, TypeError) as e:  # the scan should make this unreachable
        src.error("file", f"invalid YAML: a value could not be read ({type(e).__name__}: {str(e)[:200]})")
    return False, None


# --------------------------------------------------------------------------- value checks
# A check takes (value, what) and returns the converted value or raises _Invalid
# with the whole message, `what` being the subject ('queue "normal": priority').

Check = Callable[[Any, str], Any]


def _nullable(check: Check) -> Check:
    def run(v: Any, what: str) -> Any:
        return None if v is None else check(v, what)

    return run


def _str(pattern: re.Pattern[str] | None = None, form: str = "") -> Check:
    def run(v: Any, what: str) -> str:
        if not isinstance(v, str):
            raise _Invalid(f"{what} must be a string, got {_got(v)}")
        if not v.strip():
            raise _Invalid(f"{what} must not be empty")
        if pattern is not None and not pattern.fullmatch(v):  # fullmatch: `$` lets a final newline through
            raise _Invalid(f"{what} must consist of {form}, got {_got(v)}")
        return str(v)

    return run


def _text(v: Any, what: str) -> str:
    """Free text: a string; null means empty."""
    if v is None:
        return ""
    if not isinstance(v, str):
        raise _Invalid(f"{what} must be a string, got {_got(v)}")
    return str(v)


def _choice(*choices: str) -> Check:
    if len(choices) == 2:
        expected = f"{choices[0]} or {choices[1]}"
    else:
        expected = f"one of {_one_of(list(choices))}"

    def run(v: Any, what: str) -> str:
        if not isinstance(v, str) or v not in choices:
            raise _Invalid(f"{what} must be {expected}, got {_got(v)}")
        return str(v)

    return run


def _int(low: int | None = None, high: int | None = None) -> Check:
    if low is not None and high is not None:
        expected = f"an integer from {low} to {high}"
    elif low is not None:
        expected = f"an integer >= {low}"
    else:
        expected = "an integer"

    def run(v: Any, what: str) -> int:
        if not _is_int(v):
            raise _Invalid(f"{what} must be {expected}, got {_got(v)}")
        if (low is not None and v < low) or (high is not None and v > high):
            raise _Invalid(f"{what} must be {expected}, got {_got(v)}")
        return int(v)

    return run


def _bool(v: Any, what: str) -> bool:
    if not _is_bool(v):
        raise _Invalid(f"{what} must be true or false, got {_got(v)}")
    return bool(v)


def _seconds(low_exclusive: float | None = 0.0, high: float | None = None) -> Check:
    if high is not None and high < 1:
        expected = f"a number of seconds from 0 to {high:.3f} (e.g. 0.005 or 5ms)"
    elif high is not None:
        expected = f"a number of seconds greater than 0 and at most {high:g} (e.g. 10, 0.5, 500ms, 2m)"
    else:
        expected = "a number of seconds greater than 0 (e.g. 10, 0.5, 500ms, 2m)"

    def run(v: Any, what: str) -> float:
        try:
            s = parse_seconds(v)
        except ValueError:
            raise _Invalid(f"{what} must be {expected}, got {_got(v)}") from None
        if (low_exclusive is not None and s <= low_exclusive) or (high is not None and s > high):
            raise _Invalid(f"{what} must be {expected}, got {_got(v)}")
        return s

    return run


def _duration(low: float, high: float, shown: str):
    """A checker of a duration: seconds or a duration ("1h", "90m"), from `low` to `high`
    seconds inclusive; `shown` names the range in the error ("from 0 to 31536000 (a year)")."""
    expected = f'a number of seconds {shown}, or a duration such as "1h", "1h30m" or "90m"'

    def check(v: Any, what: str) -> float:
        try:
            s = parse_seconds(v)
        except ValueError:
            raise _Invalid(f"{what} must be {expected}, got {_got(v)}") from None
        if not low <= s <= high:
            raise _Invalid(f"{what} must be {expected}, got {_got(v)}")
        return s

    return check


#: clean_period: from 0 to a year (LSF CLEAN_PERIOD)
_clean_period = _duration(0.0, MAX_CLEAN_PERIOD_S, f"from 0 to {MAX_CLEAN_PERIOD_S:.0f} (a year)")
#: host_lost_grace: from 1 s to a day (SCHED-4)
_host_lost_grace = _duration(1.0, MAX_INTERVAL_S, f"from 1 to {MAX_INTERVAL_S:.0f} (a day)")
#: pend_reason_update: from 1 s (each refresh is a whole session) to a day (SCHED-3)
_pend_reason_update = _duration(1.0, MAX_INTERVAL_S, f"from 1 to {MAX_INTERVAL_S:.0f} (a day)")


def _memory(v: Any, what: str) -> int:
    if _is_bool(v) or not isinstance(v, (str, int)):
        raise _Invalid(f"{what} must be an integer number of MB or a string like \"4GB\", got {_got(v)}")
    try:
        return parse_memory_mb(v if isinstance(v, str) else int(v))
    except ValueError as e:
        raise _Invalid(f"{what}: {e}") from None


def _run_limit(v: Any, what: str) -> int:
    if _is_bool(v) or not isinstance(v, (str, int)):
        raise _Invalid(
            f'{what} must be minutes, "[hours:]minutes" or a string like "90s", "30m", "2h", got {_got(v)}'
        )
    try:
        return parse_run_limit_s(v if isinstance(v, str) else int(v))
    except ValueError as e:
        raise _Invalid(f"{what}: {e}") from None


def _shown_path(v: str) -> str:
    """A path as a message shows it: quoted, a long one cut short."""
    return _got(v) if len(v) <= 80 else f'"{v[:60]}..." ({len(v)} characters)'


def _project_path(v: Any, what: str) -> str:
    """A project path (PRJ-1): PROJECT_PATH_FORM, at most MAX_PROJECT_DEPTH names deep and
    MAX_PROJECT_PATH characters long. `/` alone is the whole cluster, not a project."""
    if not isinstance(v, str):
        raise _Invalid(f"{what} must be {PROJECT_PATH_FORM}, got {_got(v)}")
    if len(v) > MAX_PROJECT_PATH:
        raise _Invalid(f"{what} is {len(v)} characters long; a project path has at most {MAX_PROJECT_PATH}, "
                       f"got {_shown_path(v)}")
    if not v.startswith("/"):
        hint = f' (did you mean "/{v}"?)' if PROJECT_PATH_RE.fullmatch("/" + v) else ""
        raise _Invalid(f"{what} must start with '/': a project path is {PROJECT_PATH_FORM}, "
                       f"got {_shown_path(v)}{hint}")
    if v == "/":
        raise _Invalid(f"{what} must name a project, {PROJECT_PATH_FORM}; \"/\" is the whole cluster")
    if not PROJECT_PATH_RE.fullmatch(v):
        trimmed = v.rstrip("/")
        hint = f' (did you mean "{trimmed}"?)' if trimmed != v and PROJECT_PATH_RE.fullmatch(trimmed) else ""
        raise _Invalid(f"{what} must be {PROJECT_PATH_FORM}, got {_shown_path(v)}{hint}")
    depth = v.count("/")
    if depth > MAX_PROJECT_DEPTH:
        raise _Invalid(f"{what} is {depth} levels deep; a project tree has at most {MAX_PROJECT_DEPTH} levels, "
                       f"got {_shown_path(v)}")
    return str(v)


# --------------------------------------------------------------------------- mappings


@dataclass
class _Field:
    check: Check
    required: bool = False


def _check_mapping(
    src: _Source,
    node: Any,
    pos: Pos,
    fields: dict[str, _Field],
    *,
    where: str,
    prefix: str,
    null_ok: bool = False,
) -> dict[str, Any] | None:
    """Check a mapping against `fields`; report unknown keys, missing required
    keys and bad values. Returns {key: converted value} of the good keys, or None
    when `node` is not a mapping at all."""
    if node is None and null_ok:
        return {}
    if not _is_map(node):
        src.error(pos, f"{where} must be a mapping of keys ({_one_of(list(fields))}), got {_got(node)}")
        return None
    out: dict[str, Any] = {}
    valid = list(fields)
    for key in node:
        if key in fields:
            continue
        message = f"unknown key {_got(key)} in {where}; valid keys: {_one_of(valid)}"
        if not isinstance(key, str):  # `? [a, b]`, `1:`, `true:`
            message = f"a key that is {_got(key)} in {where}: keys are names; valid keys: {_one_of(valid)}"
        elif key.endswith(":") and key[:-1] in fields:
            # `{timeout:}`: in a flow mapping YAML reads a colon with no space after it as
            # part of the key, so the value is missing, not the key unknown
            message = (f'key "{key[:-1]}" in {where} has no value: `{key[:-1]}:` with nothing after the colon in '
                       f'{{...}} is read as the key "{key}"; write "{key[:-1]}: VALUE", with a space after the colon')
        elif isinstance(key, str):
            close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
            if close:
                message += f' (did you mean "{close[0]}"?)'
        src.error(_key_pos(node, key), message)
    for key, spec in fields.items():
        if key not in node:
            if spec.required:
                src.error(_node_pos(node) or pos, f'{where}: missing required key "{key}"')
            continue
        try:
            out[key] = spec.check(node[key], f"{prefix}{key}")
        except _Invalid as e:
            src.error(_value_pos(node, key), str(e))
    return out


def _top_list(src: _Source, doc: Any, key: str, what: str, example: str,
              may_be_empty: bool = False) -> list[tuple[Any, Pos]] | None:
    """The list under `key` of a queues.yaml / hosts.yaml document, as
    (item, position) pairs; None after reporting when the shape is wrong."""
    if doc is None:
        src.error((0, 0), f'file is empty; expected a mapping with key "{key}": a list of {what}, e.g. {example}')
        return None
    if not _is_map(doc):
        src.error(_node_pos(doc) or (0, 0), f'expected a mapping with key "{key}": a list of {what}, got {_got(doc)}')
        return None
    for k in doc:
        if k != key:
            src.error(_key_pos(doc, k), f"unknown key {_got(k)} at the top of {src.path.name}; valid keys: {key}")
    if key not in doc:
        src.error(_node_pos(doc) or (0, 0), f'missing required key "{key}": a list of {what}, e.g. {example}')
        return None
    items = doc[key]
    if not _is_seq(items):
        src.error(_value_pos(doc, key), f"{key} must be a list of {what}, got {_got(items)}")
        return None
    if not items and may_be_empty:
        src.warn(_value_pos(doc, key), f"no {what} declared: every host must join as a worker "
                                       f"(xced --roles worker --controller tcp://HOST:PORT)")
        return []
    if not items:
        src.error(_value_pos(doc, key), f"{key} must name at least one of the {what}, got an empty list")
        return None
    return [(item, _item_pos(items, i)) for i, item in enumerate(items)]


def _label(kind: str, item: Any, index: int) -> str:
    name = item.get("name") if _is_map(item) else None
    if isinstance(name, str) and name.strip():
        return f'{kind} "{name}"'
    return f"{kind} #{index + 1}"


# --------------------------------------------------------------------------- files

_SETTINGS_FIELDS = {
    "cluster_name": _Field(_str(NAME_RE, NAME_FORM)),
    "mode": _Field(_choice("production", "test")),
    "admins": _Field(_nullable(lambda v, w: v)),  # checked item by item below
    "default_application": _Field(_nullable(_text)),  # "" = no profile (PROF-2)
    "default_project": _Field(_nullable(_project_path)),  # PRJ-3; a project once any is defined
    "default_queue": _Field(_nullable(_str(NAME_RE, NAME_FORM))),
    "listen": _Field(lambda v, w: v),  # checked below
    "kill_interval": _Field(_seconds(high=MAX_INTERVAL_S)),
    "limit_grace": _Field(_seconds(high=MAX_INTERVAL_S)),
    "sched_delay": _Field(_seconds(low_exclusive=None, high=MAX_SCHED_DELAY_S)),
    "store_busy_timeout": _Field(_seconds(high=MAX_STORE_BUSY_TIMEOUT_S)),
    "max_dispatch_failures": _Field(_int(1, MAX_DISPATCH_FAILURES)),
    "launch_timeout": _Field(_seconds(high=MAX_INTERVAL_S)),
    "max_array_size": _Field(_int(1, MAX_ARRAY_SIZE_SETTING)),
    "presets_dir": _Field(_nullable(_str())),
    "clean_period": _Field(_clean_period),
    "host_lost_grace": _Field(_host_lost_grace),
    "pend_reason_update": _Field(_pend_reason_update),
}
_SETTINGS_MODEL_NAMES = {
    "kill_interval": "kill_interval_s",
    "limit_grace": "limit_grace_s",
    "sched_delay": "sched_delay_s",
    "store_busy_timeout": "store_busy_timeout_s",
    "launch_timeout": "launch_timeout_s",
    "clean_period": "clean_period_s",
    "host_lost_grace": "host_lost_grace_s",
    "pend_reason_update": "pend_reason_update_s",
}

_LISTEN_FIELDS = {
    "host": _Field(_str()),
    "port": _Field(_nullable(_int(0, 65535))),
    "tls": _Field(_nullable(_bool)),
}

_QUEUE_FIELDS = {
    "name": _Field(_str(NAME_RE, NAME_FORM), required=True),
    "priority": _Field(_int(-(2**31), 2**31 - 1)),
    "description": _Field(_text),
    "max_tasks": _Field(_nullable(_int(1, MAX_SLOTS))),
    "max_run_limit": _Field(_nullable(_run_limit)),
    "max_memory": _Field(_nullable(_memory)),
    "host_limit": _Field(_nullable(_int(1, MAX_SLOTS))),
    "backfill": _Field(_bool),  # EASY backfilling in this queue (SCHED-1)
}
_QUEUE_MODEL_NAMES = {"max_run_limit": "max_run_limit_s", "max_memory": "max_memory_mb"}

_HOST_FIELDS = {
    "name": _Field(_str(re.compile(HOST_PATTERN), HOST_FORM.removeprefix("a host name is ")), required=True),
    "slots": _Field(_int(1, MAX_SLOTS), required=True),
    "memory": _Field(_memory, required=True),
    "resources": _Field(lambda v, w: v),  # checked below
    "type": _Field(_str()),
    "model": _Field(_str()),
    "attributes": _Field(lambda v, w: v),  # checked below
    "tags": _Field(lambda v, w: v),  # checked below
}


def _check_settings(src: _Source, doc: Any) -> tuple[dict[str, Any], Any]:
    """xce.yaml -> ClusterSettings keyword arguments; also the document (for positions)."""
    if doc is None:
        doc = {}
    if not _is_map(doc):
        src.error(_node_pos(doc) or (0, 0), f"{SETTINGS_FILE} must be a mapping of keys ({_one_of(list(_SETTINGS_FIELDS))}), got {_got(doc)}")
        return {}, None
    values = _check_mapping(src, doc, _node_pos(doc), _SETTINGS_FIELDS, where=SETTINGS_FILE, prefix="") or {}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key in ("admins", "listen"):
            continue
        kwargs[_SETTINGS_MODEL_NAMES.get(key, key)] = value

    if "admins" in doc:
        admins = doc["admins"]
        if admins is None:
            kwargs["admins"] = []
        elif not _is_seq(admins):
            src.error(_value_pos(doc, "admins"), f"admins must be a list of user names, got {_got(admins)}")
        else:
            names: list[str] = []
            bad = False
            for i, a in enumerate(admins):
                if not isinstance(a, str) or not a.strip():
                    src.error(_item_pos(admins, i), f"admins[{i + 1}] must be a user name (a string), got {_got(a)}")
                    bad = True
                elif a in names:
                    src.warn(_item_pos(admins, i), f'admin "{a}" is named twice')
                else:
                    names.append(str(a))
            if not bad:
                kwargs["admins"] = names

    if "listen" in doc:
        listen = doc["listen"]
        lv = _check_mapping(
            src, listen, _value_pos(doc, "listen"), _LISTEN_FIELDS, where="listen", prefix="listen.", null_ok=True
        )
        if lv is not None:
            kwargs["listen"] = lv

    mode = kwargs.get("mode")
    lv = kwargs.get("listen")
    if mode != "test" and isinstance(lv, dict) and lv.get("tls") is False:
        src.error(_value_pos(listen, "tls"), "listen.tls: false is for mode: test only: a production controller "
                                             "always serves its TCP port with TLS pinned to its key (KEY-6)")
    if mode == "test":
        src.warn(
            _value_pos(doc, "mode"),
            "mode is test: clients may assert any user (--as-user, XCE_TEST_USER); "
            "use mode: production on a shared machine (D-6)",
        )
    if kwargs.get("admins") == [] or "admins" not in doc:
        src.warn(
            _key_pos(doc, "admins") if "admins" in doc else "file",
            "no admins named: admin requests will be refused for everyone, root included "
            "(D-6); add admins: [USER, ...]",
        )
    return kwargs, doc


def _check_unique(src: _Source, seen: dict[str, Pos], item: Any, name: Any, kind: str) -> None:
    """Report a second queue/host of the same name at its own position, naming the first."""
    if name is None:
        return
    if name in seen:
        first = seen[name]
        src.error(
            _value_pos(item, "name"),
            f'duplicate {kind} name "{name}" (first defined at line {first[0] + 1 if first else "?"}); '
            f"{kind} names must be unique",
        )
    else:
        seen[name] = _value_pos(item, "name")


def _check_queues(src: _Source, doc: Any) -> list[dict[str, Any]] | None:
    items = _top_list(src, doc, "queues", "queues", '"queues: [{name: normal}]"')
    if items is None:
        return None
    seen: dict[str, Pos] = {}
    queues: list[dict[str, Any]] = []
    for index, (item, pos) in enumerate(items):
        label = _label("queue", item, index)
        values = _check_mapping(src, item, pos, _QUEUE_FIELDS, where=label, prefix=f"{label}: ")
        if values is None:
            continue
        _check_unique(src, seen, item, values.get("name"), "queue")
        queues.append({_QUEUE_MODEL_NAMES.get(k, k): v for k, v in values.items()} | {"_node": item})
    return queues


def _check_hosts(src: _Source, doc: Any) -> list[dict[str, Any]] | None:
    items = _top_list(src, doc, "hosts", "hosts", '"hosts: [{name: node1, slots: 8, memory: 16GB}]"',
                      may_be_empty=True)
    if items is None:
        return None
    seen: dict[str, Pos] = {}
    hosts: list[dict[str, Any]] = []
    for index, (item, pos) in enumerate(items):
        label = _label("host", item, index)
        values = _check_mapping(src, item, pos, _HOST_FIELDS, where=label, prefix=f"{label}: ")
        if values is None:
            continue
        _check_unique(src, seen, item, values.get("name"), "host")

        host: dict[str, Any] = {k: values[k] for k in ("name", "slots") if k in values}
        if "memory" in values:
            host["memory_mb"] = values["memory"]

        # resources: {name: number >= 0}
        resources: dict[str, float] = {}
        if "resources" in item and item["resources"] is not None:
            res = item["resources"]
            if not _is_map(res):
                src.error(
                    _value_pos(item, "resources"),
                    f"{label}: resources must be a mapping of resource name to number (e.g. gpu: 2), got {_got(res)}",
                )
            else:
                for rname, rvalue in res.items():
                    if not isinstance(rname, str) or not RESOURCE_RE.fullmatch(rname):
                        src.error(
                            _key_pos(res, rname),
                            f"{label}: resource name must be {RESOURCE_FORM}, got {_got(rname)}",
                        )
                    elif not _is_number(rvalue) or not math.isfinite(float(rvalue)) or not 0 <= rvalue <= MAX_RESOURCE:
                        src.error(
                            _value_pos(res, rname),
                            f"{label}: resources.{rname} must be a number from 0 to {MAX_RESOURCE:g}, got {_got(rvalue)}",
                        )
                    else:
                        resources[rname] = float(rvalue)
        host["resources"] = resources

        # attributes: {name: string}, plus type and model
        attributes: dict[str, str] = {}
        if "attributes" in item and item["attributes"] is not None:
            attrs = item["attributes"]
            if not _is_map(attrs):
                src.error(
                    _value_pos(item, "attributes"),
                    f"{label}: attributes must be a mapping of name to string (e.g. rack: r12), got {_got(attrs)}",
                )
            else:
                for aname, avalue in attrs.items():
                    if not isinstance(aname, str) or not aname.strip():
                        src.error(_key_pos(attrs, aname), f"{label}: attribute name must be a string, got {_got(aname)}")
                    elif isinstance(avalue, str) or _is_number(avalue):
                        attributes[aname] = str(avalue)
                    else:
                        src.error(
                            _value_pos(attrs, aname),
                            f"{label}: attributes.{aname} must be a string, got {_got(avalue)}",
                        )
        for key in ("type", "model"):
            if key in values:
                if key in attributes:
                    src.error(
                        _key_pos(item["attributes"], key),
                        f'{label}: "{key}" is given both as a key of the host and in attributes; keep one',
                    )
                attributes[key] = values[key]
        host["attributes"] = attributes

        # tags: [string]
        tags: list[str] = []
        if "tags" in item and item["tags"] is not None:
            raw = item["tags"]
            if not _is_seq(raw):
                src.error(_value_pos(item, "tags"), f"{label}: tags must be a list of strings, got {_got(raw)}")
            else:
                for i, t in enumerate(raw):
                    if not isinstance(t, str) or not t.strip():
                        src.error(_item_pos(raw, i), f"{label}: tags[{i + 1}] must be a non-empty string, got {_got(t)}")
                    elif t in tags:
                        src.warn(_item_pos(raw, i), f'{label}: tag "{t}" is listed twice')
                    else:
                        tags.append(str(t))
        host["tags"] = tags
        host["_node"] = item
        hosts.append(host)
    return hosts


def _cross_checks(
    settings_src: _Source,
    settings_doc: Any,
    settings: dict[str, Any],
    queues_src: _Source,
    queues: list[dict[str, Any]] | None,
    hosts_src: _Source,
    hosts: list[dict[str, Any]] | None,
) -> None:
    """Checks that span files: default_queue names a queue; queue ceilings that
    no host could ever meet are warnings."""
    default_queue = settings.get("default_queue")
    if default_queue and queues is not None and _is_map(settings_doc):
        names = list(dict.fromkeys(q["name"] for q in queues if "name" in q))
        if default_queue not in names:
            settings_src.error(
                _value_pos(settings_doc, "default_queue"),
                f'default_queue "{default_queue}" is not a queue of {QUEUES_FILE}; '
                f"valid: {_one_of(names) if names else '(no queues)'}",
            )

    if queues is None or hosts is None or hosts_src.failed or queues_src.failed:
        return
    total_slots = sum(h["slots"] for h in hosts)
    biggest_mb = max((h["memory_mb"] for h in hosts), default=0)
    for q in queues:
        node = q["_node"]
        label = f'queue "{q["name"]}"'
        if not hosts:
            continue  # hosts come from workers that join: nothing to compare with
        if q.get("max_tasks") is not None and q["max_tasks"] > total_slots:
            queues_src.warn(
                _value_pos(node, "max_tasks"),
                f"{label}: max_tasks {q['max_tasks']} is more than all slots of {HOSTS_FILE} ({total_slots})",
            )
        if q.get("max_memory_mb") is not None and q["max_memory_mb"] > biggest_mb:
            queues_src.warn(
                _value_pos(node, "max_memory"),
                f"{label}: max_memory {q['max_memory_mb']}MB is more than the memory of the largest host ({biggest_mb}MB)",
            )
        if q.get("host_limit") is not None and q["host_limit"] > len(hosts):
            queues_src.warn(
                _value_pos(node, "host_limit"),
                f"{label}: host_limit {q['host_limit']} is more than the number of hosts ({len(hosts)})",
            )


# --------------------------------------------------------------------------- entry point


def load_cluster_config(topdir: Path | str) -> BuildResult:
    """Compile the config of TopDir `topdir` (CFG-2). Never raises for bad input:
    every problem is a Diagnostic in the result; `config` and `hash` are set only
    when there are no errors. Diagnostic file names are `<topdir>/config/<file>`
    with `topdir` as given."""
    topdir = Path(topdir)
    errors: list[Diagnostic] = []
    warnings: list[Diagnostic] = []

    def fail(path: Path, message: str) -> BuildResult:
        errors.append(Diagnostic("error", str(path), None, None, message))
        return BuildResult(config=None, errors=errors, warnings=warnings, hash=None)

    if not topdir.exists():
        return fail(topdir, f"TopDir {topdir} does not exist (`xceadmin init {topdir}` makes one)")
    if not topdir.is_dir():
        return fail(topdir, f"TopDir {topdir} is not a directory")
    config_dir = topdir / CONFIG_DIR
    if not config_dir.is_dir():
        return fail(
            config_dir,
            f"TopDir {topdir} has no {CONFIG_DIR}/ directory with {_one_of(list(REQUIRED_FILES))} "
            f"(`xceadmin init DIR` makes a commented skeleton)",
        )

    settings_src = _Source(config_dir / SETTINGS_FILE, errors, warnings)
    queues_src = _Source(config_dir / QUEUES_FILE, errors, warnings)
    hosts_src = _Source(config_dir / HOSTS_FILE, errors, warnings)

    settings: dict[str, Any] = {}
    settings_doc: Any = None
    loaded, doc = _read_yaml(settings_src)
    if loaded:
        settings, settings_doc = _check_settings(settings_src, doc)

    queues = None
    loaded, doc = _read_yaml(queues_src)
    if loaded:
        queues = _check_queues(queues_src, doc)

    hosts = None
    loaded, doc = _read_yaml(hosts_src)
    if loaded:
        hosts = _check_hosts(hosts_src, doc)

    _cross_checks(settings_src, settings_doc, settings, queues_src, queues, hosts_src, hosts)

    from xced.config.applications import APPLICATIONS_FILE, load_applications

    apps = load_applications(config_dir / APPLICATIONS_FILE, errors, warnings,
                             hosts=None if hosts_src.failed else hosts)
    default_app = settings.get("default_application")
    if default_app and _is_map(settings_doc) and default_app not in apps.names:
        settings_src.error(
            _value_pos(settings_doc, "default_application"),
            f'default_application "{default_app}" is not a profile of {APPLICATIONS_FILE} nor built in; '
            f'valid: {_one_of(apps.names)}, or "" for no profile',
        )

    from xced.config.projects import load_projects

    prj = load_projects(config_dir, errors, warnings, hosts=None if hosts_src.failed else hosts,
                        default_project=settings.get("default_project"))
    for p in prj.elsewhere:  # xce.yaml's default_project names no project (PRJ-3)
        settings_src.error(_value_pos(settings_doc, "default_project") if _is_map(settings_doc) else "file",
                           p.message)
    from xced.config.keys import load_keys

    keys = load_keys(config_dir, errors, warnings)
    _check_file_names(config_dir, warnings)

    errors.sort(key=_order)
    warnings.sort(key=_order)
    if errors:
        return BuildResult(config=None, errors=errors, warnings=warnings, hash=None)

    from pydantic import ValidationError

    assert queues is not None and hosts is not None and apps.profiles is not None
    assert prj.projects is not None and prj.rbac is not None and keys is not None
    try:
        config = ClusterConfig(
            settings=ClusterSettings(**settings),
            queues=[QueueConfig(**{k: v for k, v in q.items() if k != "_node"}) for q in queues],
            hosts=[HostConfig(**{k: v for k, v in h.items() if k != "_node"}) for h in hosts],
            applications=apps.profiles if apps.profiles is not None else {},
            projects=prj.projects,
            rbac=prj.rbac,
            keys=keys,
        )
    except ValidationError as e:  # the checks above should make this unreachable
        for err in e.errors():
            where = ".".join(str(p) for p in err.get("loc", ()))
            errors.append(Diagnostic("error", str(config_dir), None, None, f"{where}: {err.get('msg')}"))
        return BuildResult(config=None, errors=errors, warnings=warnings, hash=None)
    return BuildResult(config=config, errors=errors, warnings=warnings, hash=config.content_hash())


_FILE_ORDER = {name: i for i, name in enumerate(KNOWN_FILES)}


def _check_file_names(config_dir: Path, warnings: list[Diagnostic]) -> None:
    """A `*.yaml` / `*.yml` file of config/ that XCE does not read gets a warning naming the
    files it reads, with a "did you mean" where one is close (a misspelt `project.yaml`
    would be ignored without a word). Hidden files (editors' and our own `.NAME.tmp`) and
    other names (README, backups) are left alone."""
    try:
        names = sorted(e.name for e in config_dir.iterdir())
    except OSError:
        return
    reads = f"{_one_of(list(KNOWN_FILES))} and the directory {KNOWN_DIRS[0]}/"
    for name in names:
        if name.startswith(".") or name in KNOWN_FILES or not name.lower().endswith((".yaml", ".yml")):
            continue
        stems = {known.split(".")[0]: known for known in KNOWN_FILES} | {d: f"{d}/" for d in KNOWN_DIRS}
        close = difflib.get_close_matches(name.rsplit(".", 1)[0].lower(), list(stems), n=1, cutoff=0.6)
        hint = f' (did you mean "{stems[close[0]]}"?)' if close else ""
        warnings.append(Diagnostic("warning", str(config_dir / name), None, None,
                                   f"not a file XCE reads, so it is ignored{hint}; config/ holds {reads}"))


def _order(d: Diagnostic) -> tuple[int, str, int, int]:
    name = Path(d.file).name
    return (_FILE_ORDER.get(name, 9), d.file, d.line or 0, d.col or 0)

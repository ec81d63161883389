"""Preset files (PRE-1, PRE-3, PRE-5): read and checked with their positions.

A preset file, `NAME.yaml`, local (the user's config directory) or on the server
(`<TopDir>/config/presets/`, or xce.yaml's `presets_dir`), is a YAML mapping from the long
names of `xcecli submit`'s job options to their values, written as on the command line::

    # a preset for training jobs
    queue: gpu
    ntasks: "4"
    run_limit: "2:00"
    resreq: ["rusage[gpu=1]"]       # a list where the option repeats
    env: {OMP_NUM_THREADS: "8"}     # a mapping for NAME=VALUE options
    app: pytorch

A local copy pulled from a server records where it came from under
`origin: {server: CLUSTER, name: NAME, hash: sha256:...}`; the hash leaves it out (PRE-4).

An export file (`xcecli presets export`) is a mapping from preset name to such a mapping,
so one file may carry several presets (PRE-5).

The keys and values are those of `xced.api.submit_options`; every problem is a
Diagnostic with FILE:LINE:COL and what would be valid (CFG-2). Whatever `xcecli submit`
itself would refuse (`ntasks: "0"`) is refused here too, so a preset that loads is one
submit accepts as far as the client can tell; what only the daemon knows (that a queue
exists) is checked when a job is submitted with it.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xced.api.submit_options import (
    JOB_OPTIONS,
    OptionError,
    shown_value,
    check,
    check_preset_name,
    normalize,
    preset_hash,
)
from xced.config.diagnostics import Diagnostic
from xced.config.loader import _is_map, _key_pos, _read_yaml, _Source, _value_pos, load_yaml_text

__all__ = ["MAX_EXPORT_BYTES", "MAX_PRESET_BYTES", "MAX_SERVER_PRESETS", "ORIGIN_KEYS", "PRESET_SUFFIX", "Preset", "load_export_text", "load_preset_file", "load_presets_dir",
           "preset_paths", "presets_directory", "server_preset_problem", "unsafe_presets_dir"]

#: a preset file is NAME + this
PRESET_SUFFIX = ".yaml"
#: what a pulled copy's `origin:` records (PRE-4)
ORIGIN_KEYS = ("server", "name", "hash")
#: the largest preset file read (a preset is a few lines; D-8: the daemon reads them on a
#: request) and the largest export an import reads
MAX_PRESET_BYTES = 16 * 1024
MAX_EXPORT_BYTES = 16 * 1024 * 1024


@dataclass(slots=True)
class Preset:
    """A preset as read: `name`, its canonical `values` (long name -> value), `hash` over
    the values (PRE-2), `origin` ({server, name, hash} of a pulled copy, else None) and the
    file it came from."""

    name: str
    values: dict[str, Any]
    hash: str
    origin: dict[str, str] | None = None
    path: str = ""
    warnings: list[Diagnostic] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The form `GET /xce/v1/presets` serves: {"name", "hash", "values"}."""
        return {"name": self.name, "hash": self.hash, "values": self.values}


def _check_origin(src: _Source, doc: Any) -> dict[str, str] | None:
    raw = doc.get("origin")
    if raw is None:
        return None
    pos = _value_pos(doc, "origin")
    if not _is_map(raw):
        src.error(pos, "origin: expected a mapping {server: CLUSTER, name: NAME, hash: sha256:...}, which "
                       "`xcecli presets pull` writes")
        return None
    out: dict[str, str] = {}
    for k, v in raw.items():
        if k not in ORIGIN_KEYS:
            src.error(_key_pos(raw, k), f"origin: unknown key {k!r}; origin holds {', '.join(ORIGIN_KEYS)}")
        elif not isinstance(v, str) or not v:
            src.error(_value_pos(raw, k), f"origin.{k}: expected a non-empty string")
        else:
            out[k] = v
    missing = [k for k in ORIGIN_KEYS if k not in raw]
    if missing:
        src.error(pos, f"origin: missing {', '.join(missing)}; origin holds {', '.join(ORIGIN_KEYS)}")
    return out if not src.failed else None


def _check_values(src: _Source, doc: Any, what: str, *, allow_origin: bool) -> dict[str, Any] | None:
    """The canonical values of one preset mapping `doc`, every problem reported at its key
    or value; None when any was found."""
    if not _is_map(doc):
        shown = "empty" if doc is None else ("a list" if isinstance(doc, list) else f"the scalar {shown_value(doc)}")
        src.error(getattr(doc, "lc", None) and (doc.lc.line, doc.lc.col) or None,
                  f"{what}: expected a mapping of submit options (e.g. queue: normal, run_limit: \"2:00\"), "
                  f"got {shown}")
        return None
    failed = src.failed
    src.failed = False
    values: dict[str, Any] = {}
    for key in doc:
        if key == "origin":
            if not allow_origin:
                src.error(_key_pos(doc, key), f"{what}: origin is written by `xcecli presets pull` on a local "
                                              f"copy; a server preset or an export carries none")
            continue
        if not isinstance(key, str):
            src.error(_key_pos(doc, key), f"{what}: the key {shown_value(key)} is not an option name; a preset sets "
                                          f"{', '.join(_FIELDS)}")
            continue
        try:
            value = normalize(key, doc[key])
            check(key, value, deep=True)
        except OptionError as e:
            if key not in _FIELDS:  # an unknown option or a control: the key is wrong
                src.error(_key_pos(doc, key), f"{what}: {e.message}")
            elif e.message.startswith(key):  # the shape, said of the key already
                src.error(_value_pos(doc, key), f"{what}: {e.message}")
            else:
                src.error(_value_pos(doc, key), f"{what}: {key}: {e.message}")
            continue
        values[key] = value
    ok = not src.failed
    src.failed = src.failed or failed
    if not ok:
        return None
    # in the table's order, so the file written back reads like the command line
    return {o: values[o] for o in _FIELDS if o in values}


_FIELDS = tuple(o.name for o in JOB_OPTIONS)


def load_preset_file(path: Path | str, errors: list[Diagnostic], warnings: list[Diagnostic], *,
                     allow_origin: bool = True, name: str | None = None) -> Preset | None:
    """One preset file `NAME.yaml`; its name is the file's stem unless `name` is given.
    `allow_origin`: a local copy may record its origin (PRE-4), a server preset may not.
    Returns None (with the problems in `errors`) for a file that is not a valid preset."""
    p = Path(path)
    src = _Source(p, errors, warnings)
    pname = name if name is not None else (p.name[: -len(PRESET_SUFFIX)] if p.name.endswith(PRESET_SUFFIX)
                                           else p.stem)
    try:
        check_preset_name(pname)
    except OptionError as e:
        src.error("file", e.message)
        return None
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        src.error("file", f"preset {pname} not found")
        return None
    except OSError as e:
        src.error("file", f"cannot read: {e.strerror or e}")
        return None
    if size > MAX_PRESET_BYTES:
        src.error("file", f"is {size} bytes, more than the {MAX_PRESET_BYTES} a preset file may be")
        return None
    fast = _fast_preset(p, pname, allow_origin)
    if fast is not None:
        return fast
    loaded, doc = _read_yaml(src)
    if not loaded:
        return None
    if _is_map(doc) and not doc:
        src.error((0, 0), f"preset {pname}: the file sets no option; a preset sets at least one, e.g. "
                          f"queue: normal")
        return None
    values = _check_values(src, doc, f"preset {pname}", allow_origin=allow_origin)
    origin = _check_origin(src, doc) if allow_origin and _is_map(doc) else None
    if values is None or src.failed:
        return None
    return Preset(pname, values, preset_hash(values), origin, str(p))


_FAST_KEY = re.compile(r"[a-z_]{1,32}")


def _fast_lines(text: str) -> dict[str, Any] | None:
    """The mapping of a preset file written as `xcecli presets` writes one: comment lines and
    `key: JSON` lines only (a JSON string, list or object is a YAML double-quoted scalar or
    flow collection of the same meaning). None for anything else: ruamel.yaml reads it then,
    with positions for every problem."""
    if not all(c.isprintable() or c == "\n" for c in text):  # YAML refuses some that JSON takes: let it say
        return None
    out: dict[str, Any] = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        key, sep, rest = line.partition(": ")
        if not sep or not _FAST_KEY.fullmatch(key) or key in out or not rest.lstrip().startswith(("\"", "[", "{")):
            return None
        try:
            out[key] = json.loads(rest)
        except ValueError:
            return None
    return out or None


def _fast_preset(path: Path, name: str, allow_origin: bool) -> Preset | None:
    """Preset file `path` read without ruamel.yaml when it is in `xcecli presets`' own form and
    valid (the daemon reads a directory of them on a request; ruamel's reader costs about a
    millisecond per hundred bytes); None sends the caller to the full reader, which reports
    whatever is wrong with its position."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    doc = _fast_lines(text)
    if doc is None:
        return None
    origin = doc.pop("origin", None)
    if origin is not None and (not allow_origin or not isinstance(origin, dict) or set(origin) != set(ORIGIN_KEYS)
                               or not all(isinstance(v, str) and v for v in origin.values())):
        return None
    values: dict[str, Any] = {}
    try:
        for key, v in doc.items():
            if key not in _FIELDS:
                return None
            values[key] = normalize(key, v)
            check(key, values[key], deep=True)
    except OptionError:
        return None
    values = {o: values[o] for o in _FIELDS if o in values}
    if not values:
        return None
    return Preset(name, values, preset_hash(values), origin, str(path))


def load_export_text(text: str, source: str, errors: list[Diagnostic],
                     warnings: list[Diagnostic]) -> list[Preset]:
    """An export (PRE-5): a YAML mapping from preset name to values, read from `text`
    (`source` names it in messages: a path, or "<stdin>"). Returns every preset, or []
    with the problems in `errors` when any is invalid (an import is all or nothing)."""
    src = _Source(Path(source), errors, warnings)
    loaded, doc = load_yaml_text(src, text)
    if not loaded:
        return []
    if not _is_map(doc) or not doc:
        shown = "empty" if doc is None or (_is_map(doc) and not doc) else \
            ("a list" if isinstance(doc, list) else f"the scalar {shown_value(doc)}")
        src.error((0, 0), f"an export is a mapping of preset name to its options (gpu-train: {{queue: gpu, "
                          f"ntasks: \"4\"}}), got {shown}")
        return []
    if all(k in _FIELDS or k == "origin" for k in doc):
        src.error((0, 0), "this is a preset file (its keys are submit options), not an export, which maps preset "
                          "names to their options (gpu-train: {queue: gpu}); `xcecli presets export NAME` writes one")
        return []
    out: list[Preset] = []
    for name in doc:
        try:
            check_preset_name(name if isinstance(name, str) else "")
        except OptionError as e:
            src.error(_key_pos(doc, name), e.message if isinstance(name, str) else
                      f"preset name {name!r} is not valid: a preset name is a string")
            continue
        body = doc[name]
        if _is_map(body) and not body:
            src.error(_value_pos(doc, name), f"preset {name}: sets no option; a preset sets at least one")
            continue
        values = _check_values(src, body, f"preset {name}", allow_origin=False)
        if values is not None:
            out.append(Preset(name, values, preset_hash(values), None, source))
    return [] if src.failed else out


def preset_paths(directory: Path | str) -> list[Path]:
    """The preset files of a directory: `*.yaml` that are not hidden, sorted by name."""
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []
    return [Path(e.path) for e in entries if e.name.endswith(PRESET_SUFFIX) and not e.name.startswith(".")]


#: the most server preset files the daemon serves (D-8: it reads them on requests); a
#: directory with more is an error of `xceadmin build`, and the daemon serves the first by name
MAX_SERVER_PRESETS = 1000


def server_preset_problem(path: Path) -> str | None:
    """Why the daemon does not read server preset file `path`, or None: it must be a regular
    file itself, never a symlink (which would let whoever made it have the daemon read and
    serve any file it may read)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"cannot read: {e.strerror or e}"
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink; a server preset is a regular file in the presets directory, never a link"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_mode & 0o022:
        return (f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}), so another user could "
                f"change what everyone is served; chmod go-w it")
    if st.st_uid not in (0, os.geteuid()):
        return f"belongs to uid {st.st_uid}, neither root nor the daemon's user"
    return None


def unsafe_presets_dir(directory: Path) -> str | None:
    """Why the daemon serves nothing from `directory`, or None: the directory, and every
    directory above it, must be writable by no one but its owner and that owner root or the
    daemon's user (D-7, as the rest of the TopDir), else another user could make presets that
    everyone is served, or swap one in as it is read."""
    me = os.geteuid()
    d = Path(os.path.abspath(directory))
    for p in (d, *d.parents):
        try:
            st = os.stat(p)
        except FileNotFoundError:
            continue
        except OSError as e:
            return f"{p}: cannot look at it: {e.strerror or e}"
        sticky = bool(st.st_mode & stat.S_ISVTX)
        if st.st_uid not in (0, me):
            return f"{p} belongs to uid {st.st_uid}, neither root nor the daemon's user"
        if st.st_mode & 0o022 and not (sticky and p != d):
            return f"{p} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); chmod go-w it"
    return None


def load_presets_dir(directory: Path | str, errors: list[Diagnostic], warnings: list[Diagnostic]) -> list[Preset]:
    """Every valid server preset of `directory` (PRE-3), sorted by name; each invalid file's
    problems go to `errors` and the file is left out, never served half-read. A missing
    directory holds no presets; an unsafe one (`unsafe_presets_dir`) serves none, and a
    symlink or other non-regular file is left out (`server_preset_problem`). More than
    MAX_SERVER_PRESETS files is an error; the first by name are read. `*.yml` files get a
    warning: presets are `NAME.yaml`."""
    d = Path(directory)
    out: list[Preset] = []
    if d.exists() and not d.is_dir():
        errors.append(Diagnostic("error", str(d), None, None, "the presets directory is not a directory; server "
                                                               "presets are NAME.yaml files in one"))
        return out
    why = unsafe_presets_dir(d) if d.is_dir() else None
    if why is not None:
        errors.append(Diagnostic("error", str(d), None, None, f"server presets not read: {why}"))
        return out
    paths = preset_paths(d)
    if len(paths) > MAX_SERVER_PRESETS:
        errors.append(Diagnostic("error", str(d), None, None, f"{len(paths)} preset files, more than the "
                                                               f"{MAX_SERVER_PRESETS} the daemon serves; it serves "
                                                               f"the first {MAX_SERVER_PRESETS} by name"))
        paths = paths[:MAX_SERVER_PRESETS]
    for p in paths:
        problem = server_preset_problem(p)
        if problem is not None:
            errors.append(Diagnostic("error", str(p), None, None, problem))
            continue
        pr = load_preset_file(p, errors, warnings, allow_origin=False)
        if pr is not None:
            out.append(pr)
    try:
        for e in sorted(os.scandir(d), key=lambda e: e.name):
            if e.name.endswith(".yml") and not e.name.startswith("."):
                warnings.append(Diagnostic("warning", e.path, None, None,
                                           f"not read: a preset file is NAME{PRESET_SUFFIX}"))
    except OSError:
        pass
    return out



def presets_directory(topdir: Path | str, presets_dir: str | None) -> Path:
    """Where the server presets are (PRE-3, CFG-1): xce.yaml's `presets_dir` (absolute, or
    relative to `topdir`), else `<topdir>/config/presets`."""
    top = Path(topdir)
    if presets_dir:
        p = Path(presets_dir).expanduser()
        return p if p.is_absolute() else top / p
    return top / "config" / "presets"

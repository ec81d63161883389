"""The user's local presets (PRE-1, PRE-4, PRE-5): one `NAME.yaml` per preset in
`<user config dir>/xce/presets/` (platformdirs, so XDG_CONFIG_HOME is honoured on Linux).

Each YAML file is what the user reads and edits; beside it a hidden `.NAME.json` holds the
same values already checked, with the YAML file's size, mtime and inode. `xcecli submit
--preset` reads only that copy while it matches (ruamel.yaml alone costs 20-27 ms to import,
more than the whole budget of expanding a preset); a YAML file edited by hand no longer
matches, so it is read and checked again and the copy rewritten.

The directory is made 0700 and every file 0600: a preset may carry `--env` values, and
only its owner reads it. Writes go to a temporary file renamed into place, so a refused or
interrupted command never leaves a file half-written; a replaced file is kept as
`NAME.yaml.bak` where the command says so (`--force`).

Errors: `PresetMissing` (no such local preset; the message lists the local ones),
`PresetInvalid` (a file that is not a valid preset, with FILE:LINE:COL lines). Both are
InvalidRequest (exit 1) for the `presets` commands; `submit --preset` turns them into a
usage error (exit 2), as for any bad option value.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xced.api.errors import InvalidRequest, NotFound

#: the cache format's version, bumped when the values' form changes
_CACHE_VERSION = 1
SUFFIX = ".yaml"


class PresetMissing(NotFound):
    """No local preset of that name."""


class PresetInvalid(InvalidRequest):
    """A preset file that is not a valid preset; `problems` are its FILE:LINE:COL lines."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


@dataclass(slots=True)
class LocalPreset:
    """A local preset: its name, canonical values (long option name -> value), hash (PRE-2)
    and origin ({server, name, hash} when pulled, else None)."""

    name: str
    values: dict[str, Any]
    hash: str
    origin: dict[str, str] | None = None


def presets_dir() -> Path:
    """`<user config dir>/xce/presets` (platformdirs.user_config_path: $XDG_CONFIG_HOME/xce
    or ~/.config/xce on Linux). Not created here."""
    from platformdirs import user_config_path

    return user_config_path("xce") / "presets"


def _check_name(name: str) -> str:
    from xced.api.submit_options import OptionError, check_preset_name

    try:
        return check_preset_name(name)
    except OptionError as e:
        raise InvalidRequest(e.message) from None


def path_of(name: str) -> Path:
    """The YAML file of preset `name` (checked: no `/`, no `..`). Raises InvalidRequest."""
    return presets_dir() / (_check_name(name) + SUFFIX)


def _cache_path(path: Path) -> Path:
    return path.with_name("." + path.name[: -len(SUFFIX)] + ".json")


def names() -> list[str]:
    """The local presets' names, sorted."""
    from xced.api.submit_options import OptionError, check_preset_name

    try:
        entries = os.listdir(presets_dir())
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise PresetInvalid(f"the presets directory {presets_dir()} is not a directory; move the file away") from None
    except OSError as e:
        raise PresetInvalid(f"cannot list the presets of {presets_dir()}: {e.strerror or e}") from None
    out = []
    for n in entries:
        if n.endswith(SUFFIX) and not n.startswith("."):
            try:
                out.append(check_preset_name(n[: -len(SUFFIX)]))
            except OptionError:
                continue
    return sorted(out)


def missing(name: str) -> PresetMissing:
    """The error for no local preset `name`, listing the local ones (at most 20)."""
    have = names()
    shown = ", ".join(have[:20]) + (f" and {len(have) - 20} more" if len(have) > 20 else "")
    where = presets_dir()
    return PresetMissing(f"no local preset {name!r} in {where}; " +
                         (f"local presets: {shown}" if have else "there are no local presets yet") +
                         " (xcecli presets create NAME ..., or xcecli presets pull NAME for a server preset)")


def _stamp(st: os.stat_result) -> list[int]:
    # ctime too: no one can set it back, so an edit that restores size and mtime is seen
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _cache_matches(path: Path, st: os.stat_result) -> dict | None:
    try:
        with open(_cache_path(path), "rb") as f:
            c = json.loads(f.read())
        if isinstance(c, dict) and c.get("v") == _CACHE_VERSION and c.get("stamp") == _stamp(st):
            return c
    except (OSError, ValueError):
        pass
    return None


def load_fast(name: str) -> LocalPreset:
    """Preset `name` for `submit --preset`: from its JSON copy while that matches the YAML
    file, else from the YAML file (checked, the copy rewritten). Raises PresetMissing,
    PresetInvalid, InvalidRequest (a bad name)."""
    path = path_of(name)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise missing(name) from None
    except OSError:
        exists(name)  # raises, saying why
        raise
    _refuse_link(name, path)
    _tighten(path, st)
    c = _cache_matches(path, st)
    if c is not None:
        lp = _from_cache(name, c)
        if lp is not None:
            return lp
    return load(name)


def _from_cache(name: str, c: dict) -> LocalPreset | None:
    """The preset a JSON copy holds, its values held to their shapes (cheap: no parsing of
    -R or -w, no hashing: its hash is the one computed when the copy was written, and only
    its owner can write it); None for a copy that is not right, which sends the caller to
    the YAML file."""
    from xced.api.submit_options import OptionError, normalize

    values, h, origin = c.get("values"), c.get("hash"), c.get("origin")
    if not isinstance(values, dict) or not isinstance(h, str) or not h.startswith("sha256:") or \
            not (origin is None or isinstance(origin, dict)):
        return None
    try:
        if any(normalize(k, v) != v for k, v in values.items()):
            return None
    except (OptionError, TypeError, ValueError):
        return None
    return LocalPreset(name, values, h, origin)


def _tighten(path: Path, st: os.stat_result) -> None:
    """A preset file (and its directory) made by hand more open than 0600 (0700) is made
    private as soon as it is read: a preset may carry --env values (D-7). Never through a
    symlink: a link is not followed to chmod what it points at."""
    try:
        lst = os.lstat(path)
        if stat.S_ISREG(lst.st_mode) and lst.st_uid == os.geteuid() and lst.st_mode & 0o077:
            os.chmod(path, 0o600, follow_symlinks=False)
        dst = os.lstat(path.parent)
        if stat.S_ISDIR(dst.st_mode) and dst.st_uid == os.geteuid() and dst.st_mode & 0o077:
            os.chmod(path.parent, 0o700, follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass


def _refuse_link(name: str, path: Path) -> None:
    """A preset file must be a regular file of the presets directory, never a symlink (which
    would have xcecli read, and quote in its messages, whatever it points at). Raises
    PresetInvalid."""
    try:
        lst = os.lstat(path)
    except FileNotFoundError:
        raise missing(name) from None
    except OSError as e:
        raise PresetInvalid(f"preset {name}: cannot read {path}: {e.strerror or e}") from None
    if stat.S_ISLNK(lst.st_mode):
        raise PresetInvalid(f"preset {name}: {path} is a symlink; a preset is a regular file in the presets "
                            f"directory, never a link (copy the file there instead)")
    if not stat.S_ISREG(lst.st_mode):
        raise PresetInvalid(f"preset {name}: {path} is not a regular file")


def load(name: str) -> LocalPreset:
    """Preset `name` read from its YAML file and checked (xced.config.presets), its JSON copy
    rewritten when it can be. Raises PresetMissing, PresetInvalid."""
    from xced.config.presets import load_preset_file

    path = path_of(name)
    if not exists(name):
        raise missing(name)
    _refuse_link(name, path)
    errors: list = []
    pr = load_preset_file(path, errors, [], allow_origin=True)
    if pr is None:
        shown = "; ".join(str(e) for e in errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        raise PresetInvalid(f"preset {name} is not valid: {shown or path}", [str(e) for e in errors])
    lp = LocalPreset(pr.name, pr.values, pr.hash, pr.origin)
    try:
        st = os.stat(path)
        _tighten(path, st)
        if _cache_matches(path, st) is None:  # only a stale copy is rewritten
            _write_cache(path, lp)
    except OSError:
        pass  # a read-only config dir: the YAML file is read each time
    return lp


def _private_dir() -> Path:
    d = presets_dir()
    if d.exists() and not d.is_dir():
        raise PresetInvalid(f"the presets directory {d} is not a directory; move the file away")
    missing_dirs = []
    p = d
    while not p.exists():
        missing_dirs.append(p)
        p = p.parent
    for m in reversed(missing_dirs):  # each one we make is 0700, whatever the umask
        os.mkdir(m, 0o700)
        os.chmod(m, 0o700)
    if d.stat().st_mode & 0o077:
        os.chmod(d, 0o700)  # a preset may carry --env values: only its owner reads them
    return d


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` as a 0600 file: a temporary file beside it, fsync'd, renamed
    over it, so a reader never sees half of it. Raises OSError."""
    _atomic_write(path, data)


def _atomic_write(path: Path, data: bytes) -> None:
    from xced.config.atomic import atomic_write

    atomic_write(path, data, 0o600)


def _write_cache(path: Path, p: LocalPreset) -> None:
    st = os.stat(path)
    doc = {"v": _CACHE_VERSION, "stamp": _stamp(st), "values": p.values, "hash": p.hash, "origin": p.origin}
    _atomic_write(_cache_path(path), json.dumps(doc).encode())  # in the file's order


def render_yaml(name: str, values: dict[str, Any], origin: dict[str, str] | None = None, *,
                header: bool = True) -> str:
    """The YAML text of a preset file: values in the option table's order, every scalar
    double-quoted (so `run_limit: "2:00"` reads the same in any YAML version), lists and
    mappings in flow style; then `origin` for a pulled copy."""
    lines = [f"# xcecli preset {name}: xcecli submit options by long name, values as on the command line",
             "# (xcecli presets --help; the keys are those of xcecli submit --help)"] if header else []
    for k, v in values.items():
        lines.append(f"{k}: {_flow(v)}")
    if origin:
        lines.append("origin: {" + ", ".join(f"{_q(k)}: {_q(origin[k])}" for k in origin) + "}")
    return "\n".join(lines) + "\n"


def _q(s: str) -> str:
    """`s` as a YAML double-quoted scalar that reads back as the same string: JSON's escapes
    (which YAML's double-quoted style shares), and any character that is not printable (DEL,
    C1 controls, U+0085 that YAML would fold into a space, U+FFFE, separators) as \\uXXXX."""
    out = json.dumps(s, ensure_ascii=False)
    if all(c.isprintable() for c in out):
        return out
    return "".join(c if c.isprintable() else (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
                   for c in out)


def _flow(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_q(k)}: {_q(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_q(x) for x in v) + "]"
    return _q(v)


def save(name: str, values: dict[str, Any], origin: dict[str, str] | None = None, *, backup: bool = False) -> Path:
    """Write preset `name` (YAML, then its JSON copy), replacing any; `backup` first keeps
    the old file as `NAME.yaml.bak`. The values must be canonical and checked. Any edit draft
    of the name is dropped: it was an edit of what was there before. Returns the path.
    Raises InvalidRequest for a bad name, PresetInvalid for a file over MAX_PRESET_BYTES,
    OSError when the directory cannot be written."""
    from xced.api.submit_options import preset_hash
    from xced.config.presets import MAX_PRESET_BYTES

    text = render_yaml(name, values, origin).encode("utf-8")
    if len(text) > MAX_PRESET_BYTES:
        raise PresetInvalid(f"preset {name} would be {len(text)} bytes, more than the {MAX_PRESET_BYTES} a preset "
                            f"file may be; give fewer or shorter values")
    path = _private_dir() / (_check_name(name) + SUFFIX)
    if backup and path.exists():
        _atomic_write(path.with_name(path.name + ".bak"), path.read_bytes())
    _atomic_write(path, text)
    _write_cache(path, LocalPreset(name, values, preset_hash(values), origin))
    drop_drafts(name)
    return path


def draft_path(name: str, base: str) -> Path:
    """Where `presets edit` keeps a refused edit of preset `name` (hidden, in the private
    directory), named after `base`, the digest of the preset file it was an edit of: a draft
    is opened again only while the preset is still that file."""
    return presets_dir() / f".{_check_name(name)}.edit.{base[:16]}.yaml"


def drop_drafts(name: str, keep: Path | None = None) -> None:
    """Remove the edit drafts of preset `name` (but `keep`)."""
    try:
        entries = os.listdir(presets_dir())
    except OSError:
        return
    prefix = f".{name}.edit."
    for e in entries:
        p = presets_dir() / e
        if e.startswith(prefix) and e.endswith(SUFFIX) and p != keep:
            try:
                p.unlink()
            except OSError:
                pass


def remove(name: str) -> Path:
    """Delete preset `name`, its JSON copy and any edit draft (a `.bak` stays). Raises
    PresetMissing."""
    path = path_of(name)
    try:
        path.unlink()
    except FileNotFoundError:
        raise missing(name) from None
    try:
        _cache_path(path).unlink()
    except FileNotFoundError:
        pass
    drop_drafts(name)
    return path


def save_text(name: str, text: str, values: dict[str, Any], origin: dict[str, str] | None) -> Path:
    """Write preset `name` as the YAML `text` itself (a checked edit, comments and all), with
    the JSON copy of its `values`; any edit draft is dropped. Raises OSError."""
    from xced.api.submit_options import preset_hash

    path = _private_dir() / (_check_name(name) + SUFFIX)
    _atomic_write(path, text.encode("utf-8"))
    _write_cache(path, LocalPreset(name, values, preset_hash(values), origin))
    drop_drafts(name)
    return path


def exists(name: str) -> bool:
    """Whether a local preset `name` exists. Raises PresetInvalid when its directory cannot
    be searched (another user's config dir)."""
    path = path_of(name)
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        raise PresetInvalid(f"the presets directory {path.parent} is not a directory; move the file away") from None
    except OSError as e:
        raise PresetInvalid(f"preset {name}: cannot read {path}: {e.strerror or e}") from None
    return True

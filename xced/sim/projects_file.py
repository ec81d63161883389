"""The projects file of `xceadmin sim run --projects FILE` (PRJ-6, PRJ-7, SIM-1).

STAND-IN, for the simulator only: a small reader of projects.yaml's form, written while the
config compiler for projects.yaml (xced/config/projects.py, issue 12 part 1) was not yet on
main. Once it is, `load_projects` should call it and this reader should go; nothing but the
simulator's command uses it, and the daemon never does.

The form read (issue 12's projects.yaml)::

    groups: {hep: [erin, frank]}       # accepted, unused by the simulator
    projects:
      /g12:
        share: 25%                     # of every resource of the parent
        quota: {slots: 40}
        member_quota: {slots: 16}
      /g12/sub:
        share: {slots: 50%, mem: 4GB}  # per resource: a percentage or an amount
      /g35: {}                         # no share: draws from the parent's unassigned part
    default_projects: {hep: /g12}      # accepted, unused

Resource keys: `slots`, `mem` (or `mem_mb`; a bare number is MB, or 4GB and the like) and
any other resource name. In the simulator, SWF group G runs in project `/g<G>` and SWF
user U as user `u<U>`. Errors name FILE:LINE and what would be valid.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ProjectsFileError", "load_projects"]

_TOP = ("groups", "projects", "default_projects")
_PROJECT = ("share", "quota", "member_quota", "members", "admins", "description")


class ProjectsFileError(ValueError):
    """A projects file that cannot be read: FILE:LINE and what is wrong."""


def _where(path: str, node, key=None) -> str:
    try:
        line = (node.lc.key(key)[0] if key is not None else node.lc.line) + 1
        return f"{path}:{line}"
    except (AttributeError, KeyError, TypeError):
        return path


def _key(k: str) -> str:
    return "mem_mb" if k == "mem" else k


def _amount(path: str, node, res: str, v) -> float:
    """A quota or share amount: a number, or for memory a size with a unit (MB)."""
    from xced.model.units import parse_memory_mb

    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ProjectsFileError(f"{_where(path, node, res)}: {res}: {v!r} is not an amount; give a number"
                                + (" or a size such as 4GB" if _key(res) == "mem_mb" else ""))
    if isinstance(v, str):
        if _key(res) != "mem_mb":
            raise ProjectsFileError(f"{_where(path, node, res)}: {res}: {v!r} is not a number")
        try:
            return float(parse_memory_mb(v))
        except ValueError as e:
            raise ProjectsFileError(f"{_where(path, node, res)}: {res}: {e}") from None
    if v < 0:
        raise ProjectsFileError(f"{_where(path, node, res)}: {res}: {v} is negative; an amount is 0 or more")
    return float(v)


def _percent(path: str, node, key, text: str) -> float | None:
    text = text.strip()
    if not text.endswith("%"):
        return None
    try:
        p = float(text[:-1])
    except ValueError:
        p = -1.0
    if not 0 < p <= 100:
        raise ProjectsFileError(f"{_where(path, node, key)}: share {text!r}: a percentage is more than 0% and at "
                                f"most 100%")
    return p


def _project(path: str, name: str, body) -> dict:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ProjectsFileError(f"{path}: project {name}: expected a mapping of {', '.join(_PROJECT)}")
    out: dict = {"path": name}
    for k, v in body.items():
        if k not in _PROJECT:
            raise ProjectsFileError(f"{_where(path, body, k)}: project {name}: unknown key {k!r}; valid keys: "
                                    f"{', '.join(_PROJECT)}")
        if k == "share":
            if isinstance(v, str):
                p = _percent(path, body, k, v)
                if p is None:
                    raise ProjectsFileError(f"{_where(path, body, k)}: project {name}: share {v!r}: give a "
                                            f"percentage such as 60%, or per resource {{slots: 50%, gpu: 8}}")
                out["share_percent"] = p
            elif isinstance(v, dict):
                terms = {}
                for r, t in v.items():
                    p = _percent(path, v, r, t) if isinstance(t, str) else None
                    terms[_key(r)] = {"percent": p} if p is not None else {"amount": _amount(path, v, r, t)}
                out["share"] = terms
            else:
                raise ProjectsFileError(f"{_where(path, body, k)}: project {name}: share: give a percentage "
                                        f"such as 60%, or per resource {{slots: 50%, gpu: 8}}")
        elif k in ("quota", "member_quota"):
            if not isinstance(v, dict):
                raise ProjectsFileError(f"{_where(path, body, k)}: project {name}: {k}: give amounts per "
                                        f"resource, such as {{slots: 32}}")
            out[k] = {_key(r): _amount(path, v, r, a) for r, a in v.items()}
        else:
            out[k] = list(v) if isinstance(v, list) else v
    return out


def load_projects(path: str | Path):
    """The ProjectsConfig of the projects file at `path` (the form in the module docstring),
    parents before children. Raises ProjectsFileError (FILE:LINE where known) for a file that
    cannot be read, bad YAML, an unknown key, a bad share or amount, or a path the model
    refuses (no leading `/`)."""
    from pydantic import ValidationError
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from xced.model.project import ProjectsConfig

    p = str(path)
    try:
        text = Path(p).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProjectsFileError(f"{p}: cannot read it: {getattr(e, 'strerror', None) or e}") from None
    try:
        doc = YAML(typ="rt").load(text)
    except YAMLError as e:
        raise ProjectsFileError(f"{p}: not YAML: {str(e).splitlines()[0]}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ProjectsFileError(f"{p}: expected a mapping with {', '.join(_TOP)}")
    for k in doc:
        if k not in _TOP:
            raise ProjectsFileError(f"{_where(p, doc, k)}: unknown key {k!r}; a projects file has {', '.join(_TOP)}")
    projects = doc.get("projects") or {}
    if not isinstance(projects, dict):
        raise ProjectsFileError(f"{_where(p, doc, 'projects')}: projects: expected a mapping of paths to projects")
    rows = [_project(p, str(name), body) for name, body in projects.items()]
    rows.sort(key=lambda r: r["path"].count("/"))  # parents before children, file order otherwise
    try:
        return ProjectsConfig.model_validate({"groups": dict(doc.get("groups") or {}), "projects": rows,
                                              "default_projects": dict(doc.get("default_projects") or {})})
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise ProjectsFileError(f"{p}: {where}: {err['msg']}") from None

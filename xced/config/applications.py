"""The compiler of `config/applications.yaml` (PROF-1..PROF-9, CFG-2).

The file is optional: without it only the built-in `default` profile exists
(PROF-1). A profile of the file named `default` replaces the built-in one.
Every problem is reported at once as FILE:LINE:COL with what would be valid;
the checks of `xceadmin build` (PROF-7, PROF-8, PROF-9) are warnings or errors
as said below. Units: memory in MB or with a unit KB/MB/GB/TB; run limits as in
queues.yaml; other durations in seconds or with a unit ms/s/m/h.

Layout: one top-level key, `applications:`, a *mapping* from profile name
(letters, digits, `_`, `.`, `-`) to the profile (a list is not accepted; a name
given twice is a duplicate key, an error at the second)::

    applications:
      pytorch:
        description: PyTorch training
        kind: batch                  # batch (default) | service
        mode: direct                 # direct (the only mode of v1)
        launch_type: direct          # free word, default direct
        env: {OMP_NUM_THREADS: "8"}  # NAME: string (numbers are turned into strings)
        pre_job_exec: /opt/hooks/pre.sh          # a command, or
        post_job_exec: {command: /opt/post.sh, timeout: 60}   # timeout > 0, default 300 s
        pre_host_exec: ...           # same forms; post_host_exec too
        job_starter: "/usr/bin/env"  # wraps the job's command
        resreq:
          select: "mem > 4GB && type == X86_64"   # validated, stored canonical
          rusage:                    # a list; each entry is either
            - mem: 4GB               #   {RESOURCE: VALUE} (+ optional per/default keys);
                                     #   without `default: true` an entry binds
            - {name: fluent_lic, value: 1, per: job, default: true}
          span: {ptile: 8}           # or "ptile=8"; exactly one of ptile, hosts (1|-1), block
          same: [rack]               # or "rack"
          order: ["-slots", mem]     # or "-slots mem"; or {name, desc}
        run_limit: "2h"              # [hours:]minutes or 90s/30m/2h
        memory_limit: 4GB
        tasks: "2,64"                # "MIN,MAX", N, or {min, max}
        params: {EPOCHS: "10"}       # declared params and defaults (null = "")
        annotations: {team.owner: ml}
        on_host_failure: requeue     # requeue (default) | exit
        allow_job_pre_post_exec: true
        service:                     # only (and required) with kind: service
          restart_policy: on-failure # always | on-failure | never
          replicas: {min: 1, max: 3} # or N
          ports: [{name: http, port: 8080, protocol: tcp}]
          probes: [{name: readiness, type: http, port: 8080, path: /health,
                    interval: 10, timeout: 5, failure_threshold: 3}]

Rusage values of memory resources (mem, swp, tmp) are stored in MB with unit
"MB"; other resources take plain numbers. `per` is task (default), host or job.

Checks: params and annotation names are exported as `XCE_APP_PARAM_<NAME>` /
`XCE_APP_ANN_<NAME>` after `xced.model.profile.export_name` (upper-case,
non-alphanumerics to `_`); two names of one profile converting to the same
name is an error, as is an annotation or param value over 4096 bytes or more
than 64 annotations. Warnings: secret-looking names in env, params and
annotations (PASSWORD, PASSWD, TOKEN, SECRET, KEY, CREDENTIAL, ...) and
secret-looking values; a select that no host of hosts.yaml matches; an rusage
resource that no host of hosts.yaml offers (`mem` is every host's memory).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from xced.config.diagnostics import Diagnostic
from xced.config.loader import (
    NAME_FORM,
    NAME_RE,
    RESOURCE_FORM,
    RESOURCE_RE,
    Pos,
    _bool,
    _check_mapping,
    _choice,
    _Field,
    _got,
    _int,
    _Invalid,
    _is_int,
    _is_map,
    _is_number,
    _is_seq,
    _item_pos,
    _key_pos,
    _memory,
    _node_pos,
    _nullable,
    _one_of,
    _read_yaml,
    _run_limit,
    _seconds,
    _Source,
    _str,
    _text,
    _value_pos,
)
from xced.model.profile import (
    MAX_ANNOTATION_BYTES,
    MAX_ANNOTATIONS,
    MAX_PARAM_BYTES,
    Profile,
    ServiceSpec,
    builtin_profiles,
    export_name,
)
from xced.model.units import MAX_RESOURCE, MAX_SLOTS, parse_memory_mb
from xced.resreq import (
    MEMORY_RESOURCES,
    ResReqError,
    parse_select,
    render_expr,
    select_matches,
)

__all__ = ["APPLICATIONS_FILE", "ApplicationsResult", "check_applications", "load_applications",
           "looks_secret_name", "looks_secret_value"]

APPLICATIONS_FILE = "applications.yaml"

ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ENV_FORM = "a letter or '_' followed by letters, digits and '_'"
KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
KEY_FORM = "a letter or '_' followed by letters, digits, '_', '.' and '-'"


@dataclass
class ApplicationsResult:
    """`profiles` is None when the file had an error; `names` holds every profile
    name known (built-in and declared), even then, for the default_application check."""

    profiles: dict[str, Profile] | None
    names: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- secrets

_SECRET_WORDS = ("PASSWORD", "PASSWD", "SECRET", "TOKEN", "CREDENTIAL", "PRIVATE", "APIKEY", "ACCESSKEY")
_SECRET_PARTS = {"KEY", "PASS", "PWD", "AUTH", "CERT", "COOKIE", "SESSION"}
_SECRET_VALUE_RES = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),                 # AWS access key id
    re.compile(r"\b(gh[pousr]|github_pat)_[A-Za-z0-9_]{20,}"),  # GitHub tokens
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),       # Slack tokens
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"),               # API secret keys
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\."),  # JWT
    re.compile(r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key)\s*[=:]\s*\S+"),
    re.compile(r"://[^/\s:@]+:[^/\s@]+@"),                # user:password@ in a URL
]
_OPAQUE_RE = re.compile(r"^[A-Za-z0-9+=_-]{32,}$")


def looks_secret_name(name: str) -> bool:
    """PROF-8: a name that suggests a secret (API_KEY, DB_PASSWORD, auth.token...)."""
    conv = export_name(name)
    if any(w in conv for w in _SECRET_WORDS):
        return True
    return any(part in _SECRET_PARTS for part in conv.split("_"))


def looks_secret_value(value: str) -> bool:
    """PROF-7/PROF-8: a value that looks like a key, a token or a password."""
    if any(r.search(value) for r in _SECRET_VALUE_RES):
        return True
    v = value.strip()
    return bool(_OPAQUE_RE.match(v)) and any(c.isupper() for c in v) and any(c.islower() for c in v) \
        and any(c.isdigit() for c in v)


# --------------------------------------------------------------------------- fields


def _passthrough(v: Any, what: str) -> Any:
    return v


_PROFILE_FIELDS = {
    "description": _Field(_text),
    "kind": _Field(_choice("batch", "service")),
    "mode": _Field(_choice("direct")),
    "launch_type": _Field(_str()),
    "env": _Field(_passthrough),
    "pre_job_exec": _Field(_passthrough),
    "post_job_exec": _Field(_passthrough),
    "pre_host_exec": _Field(_passthrough),
    "post_host_exec": _Field(_passthrough),
    "job_starter": _Field(_nullable(_str())),
    "resreq": _Field(_passthrough),
    "run_limit": _Field(_nullable(_run_limit)),
    "memory_limit": _Field(_nullable(_memory)),
    "tasks": _Field(_passthrough),
    "params": _Field(_passthrough),
    "annotations": _Field(_passthrough),
    "on_host_failure": _Field(_choice("requeue", "exit")),
    "allow_job_pre_post_exec": _Field(_bool),
    "service": _Field(_passthrough),
}
_HOOKS = ("pre_job_exec", "post_job_exec", "pre_host_exec", "post_host_exec")
_HOOK_FIELDS = {
    "command": _Field(_str(), required=True),
    "timeout": _Field(_seconds()),
}
_RESREQ_FIELDS = {
    "select": _Field(_nullable(_str())),
    "rusage": _Field(_passthrough),
    "span": _Field(_passthrough),
    "same": _Field(_passthrough),
    "order": _Field(_passthrough),
}
_RUSAGE_FIELDS = {
    "name": _Field(_str(RESOURCE_RE, RESOURCE_FORM), required=True),
    "value": _Field(_passthrough, required=True),
    "unit": _Field(_nullable(_str())),
    "per": _Field(_choice("task", "host", "job")),
    "default": _Field(_bool),
}
_RUSAGE_EXTRA = ("per", "default")
_SPAN_KEYS = ("ptile", "hosts", "block")
_ORDER_FIELDS = {"name": _Field(_str(), required=True), "desc": _Field(_bool)}
_TASKS_FIELDS = {"min": _Field(_int(1, MAX_SLOTS)), "max": _Field(_int(1, MAX_SLOTS))}
_SERVICE_FIELDS = {
    "probes": _Field(_passthrough),
    "restart_policy": _Field(_choice("always", "on-failure", "never")),
    "ports": _Field(_passthrough),
    "replicas": _Field(_passthrough),
}
_PROBE_FIELDS = {
    "name": _Field(_choice("liveness", "readiness", "startup"), required=True),
    "type": _Field(_choice("exec", "http", "tcp"), required=True),
    "command": _Field(_str()),
    "port": _Field(_int(1, 65535)),
    "path": _Field(_str()),
    "interval": _Field(_seconds()),
    "timeout": _Field(_seconds()),
    "failure_threshold": _Field(_int(1, 1000)),
}
_PORT_FIELDS = {
    "name": _Field(_str(NAME_RE, NAME_FORM), required=True),
    "port": _Field(_int(0, 65535), required=True),
    "protocol": _Field(_choice("tcp", "udp")),
}
_REPLICAS_FIELDS = {"min": _Field(_int(0, MAX_SLOTS)), "max": _Field(_int(1, MAX_SLOTS))}


def _pydantic_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


# --------------------------------------------------------------------------- one profile


class _ProfileChecker:
    def __init__(self, src: _Source, name: str, node: Any, hosts: list[dict[str, Any]] | None,
                 pos: Pos = None):
        self.src = src
        self.pos = pos
        self.name = name
        self.node = node
        self.hosts = hosts
        self.label = f'application "{name}"'

    def err(self, pos: Pos, message: str) -> None:
        self.src.error(pos, f"{self.label}: {message}")

    def warn(self, pos: Pos, message: str) -> None:
        self.src.warn(pos, f"{self.label}: {message}")

    # ---- scalars and small shapes

    def _string_value(self, mapping: Any, key: Any, what: str) -> str | None:
        v = mapping[key]
        if isinstance(v, str):
            return str(v)
        if _is_number(v):
            return str(v)
        self.err(_value_pos(mapping, key), f'{what} must be a string (quote values like "true"), got {_got(v)}')
        return None

    def hook(self, key: str) -> dict[str, Any] | None:
        v = self.node[key]
        pos = _value_pos(self.node, key)
        if v is None:
            return None
        if isinstance(v, str):
            if not v.strip():
                self.err(pos, f"{key} must be a command or {{command, timeout}}, got an empty string")
                return None
            return {"command": str(v)}
        values = _check_mapping(self.src, v, pos, _HOOK_FIELDS, where=f"{self.label}: {key}",
                                prefix=f"{self.label}: {key}.")
        if values is None or "command" not in values:
            return None
        out: dict[str, Any] = {"command": values["command"]}
        if "timeout" in values:
            out["timeout_s"] = values["timeout"]
        return out

    def env(self) -> dict[str, str]:
        env = self.node["env"]
        out: dict[str, str] = {}
        if env is None:
            return out
        if not _is_map(env):
            self.err(_value_pos(self.node, "env"), f"env must be a mapping of NAME: value, got {_got(env)}")
            return out
        for k in env:
            if not isinstance(k, str) or not ENV_RE.match(k):
                self.err(_key_pos(env, k), f"env name must be {ENV_FORM}, got {_got(k)}")
                continue
            if k.startswith(("XCE_", "LSB_")):
                self.err(_key_pos(env, k), f"env name {k!r} is reserved: XCE_* and LSB_* are set by XCE for "
                                           "every job (JOB-3); params and annotations are exported for you")
                continue
            value = self._string_value(env, k, f"env.{k}")
            if value is None:
                continue
            out[k] = value
            if looks_secret_name(k):
                self.warn(_key_pos(env, k), f'env name "{k}" looks like a secret; profiles are readable by '
                                            "every user: keep secrets out of them (PROF-8)")
            elif looks_secret_value(value):
                self.warn(_value_pos(env, k), f'env.{k} value looks like a secret; keep secrets out of '
                                              "profiles (PROF-8)")
        return out

    def named_strings(self, key: str, what: str, limit: int) -> dict[str, str]:
        """params / annotations: {name: string}, checked for conversion collisions,
        size and secrets."""
        node = self.node[key]
        out: dict[str, str] = {}
        if node is None:
            return out
        if not _is_map(node):
            self.err(_value_pos(self.node, key), f"{key} must be a mapping of name: value, got {_got(node)}")
            return out
        prefix = "XCE_APP_PARAM_" if key == "params" else "XCE_APP_ANN_"
        if key == "annotations" and len(node) > MAX_ANNOTATIONS:
            self.err(_value_pos(self.node, key),
                     f"{len(node)} annotations; a profile may have at most {MAX_ANNOTATIONS}")
        converted: dict[str, str] = {}
        for k in node:
            if not isinstance(k, str) or not KEY_RE.match(k):
                self.err(_key_pos(node, k), f"{what} name must be {KEY_FORM}, got {_got(k)}")
                continue
            conv = export_name(k)
            if conv in converted:
                self.err(_key_pos(node, k),
                         f'{what} names "{converted[conv]}" and "{k}" both become {prefix}{conv} '
                         "(upper-case, non-alphanumerics to '_'); rename one")
                continue
            converted[conv] = k
            v = node[k]
            if v is None and key == "params":
                value: str | None = ""
            else:
                value = self._string_value(node, k, f"{key}.{k}")
            if value is None:
                continue
            size = len(value.encode())
            if size > limit:
                self.err(_value_pos(node, k),
                         f"{key}.{k} is {size} bytes; a {what} value may be at most {limit} bytes")
                continue
            out[k] = value
            if looks_secret_name(k):
                self.warn(_key_pos(node, k), f'{what} name "{k}" looks like a secret; profiles are readable '
                                             "by every user: keep secrets out of them (PROF-8)")
            if looks_secret_value(value):
                self.warn(_value_pos(node, k), f"{key}.{k} value looks like a secret (a key, token or "
                                               "password); keep secrets out of profiles (PROF-7, PROF-8)")
        return out

    def tasks(self) -> tuple[int | None, int | None]:
        v = self.node["tasks"]
        pos = _value_pos(self.node, "tasks")
        form = 'expected "MIN,MAX" (e.g. "2,64"), a number of tasks, or {min, max}'
        lo: int | None
        hi: int | None
        if v is None:
            return None, None
        if _is_int(v):
            lo = hi = int(v)
        elif isinstance(v, str):
            m = re.match(r"^\s*([0-9]+)\s*(?:,\s*([0-9]+)\s*)?$", v)
            if not m:
                self.err(pos, f"tasks: {form}, got {_got(v)}")
                return None, None
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) else lo
        elif _is_map(v):
            values = _check_mapping(self.src, v, pos, _TASKS_FIELDS, where=f"{self.label}: tasks",
                                    prefix=f"{self.label}: tasks.")
            if values is None:
                return None, None
            lo, hi = values.get("min"), values.get("max")
        else:
            self.err(pos, f"tasks: {form}, got {_got(v)}")
            return None, None
        for n in (lo, hi):
            if n is not None and not 1 <= n <= MAX_SLOTS:
                self.err(pos, f"tasks must be from 1 to {MAX_SLOTS}, got {n}")
                return None, None
        if lo is not None and hi is not None and lo > hi:
            self.err(pos, f"tasks: min {lo} is more than max {hi}")
            return None, None
        return lo, hi

    # ---- resreq

    def _select_pos(self, mapping: Any, key: str, column: int | None) -> Pos:
        pos = _value_pos(mapping, key)
        if pos is None or column is None:
            return pos
        try:
            line = self.src.path.read_text(encoding="utf-8").splitlines()[pos[0]]
        except (OSError, IndexError, UnicodeDecodeError):
            return pos
        rest = line[pos[1]:]
        if rest[:1] in ("|", ">"):
            return pos
        return (pos[0], pos[1] + (1 if rest[:1] in ("'", '"') else 0) + column - 1)

    def resreq(self, out: dict[str, Any]) -> None:
        node = self.node["resreq"]
        pos = _value_pos(self.node, "resreq")
        if node is None:
            return
        values = _check_mapping(self.src, node, pos, _RESREQ_FIELDS, where=f"{self.label}: resreq",
                                prefix=f"{self.label}: resreq.")
        if values is None:
            return
        if values.get("select") is not None:
            text = values["select"].rstrip()
            try:
                expr = parse_select(text, capped=True)  # held to the request caps (D-8)
            except ResReqError as e:
                self.err(self._select_pos(node, "select", e.column),
                         f"resreq.select is not a valid select expression: "
                         f"{' '.join(str(e).split())}")
            else:
                out["select"] = text
                self._check_hosts_match(node, text, expr)
        if "rusage" in node:
            out["rusage"] = self.rusage(node)
        if "span" in node:
            out["span"] = self.span(node)
        if "same" in node:
            out["same"] = self.same(node)
        if "order" in node:
            out["order"] = self.order(node)

    def _check_hosts_match(self, node: Any, text: str, expr: Any) -> None:
        if not self.hosts:
            return  # no hosts.yaml hosts (workers join) or hosts.yaml broken
        for h in self.hosts:
            if select_matches(expr, _host_view(h)):
                return
        names = [h["name"] for h in self.hosts]
        self.warn(_value_pos(node, "select"),
                  f'resreq.select "{render_expr(expr)}" matches no host of hosts.yaml ({_one_of(names)}); '
                  "jobs of this profile are refused at submit until such a host exists (PROF-9)")

    def rusage(self, parent: Any) -> list[dict[str, Any]]:
        node = parent["rusage"]
        pos = _value_pos(parent, "rusage")
        if node is None:
            return []
        if not _is_seq(node):
            self.err(pos, "resreq.rusage must be a list of entries like {mem: 4GB} or "
                          f"{{name, value, per, default}}, got {_got(node)}")
            return []
        entries: list[dict[str, Any]] = []
        seen: set[str] = set()
        for i, item in enumerate(node):
            ipos = _item_pos(node, i)
            what = f"resreq.rusage[{i + 1}]"
            if not _is_map(item):
                self.err(ipos, f"{what} must be a mapping like {{mem: 4GB}} or {{name, value, per, default}}, "
                               f"got {_got(item)}")
                continue
            if "name" in item:
                values = _check_mapping(self.src, item, ipos, _RUSAGE_FIELDS, where=f"{self.label}: {what}",
                                        prefix=f"{self.label}: {what}.")
                if values is None or "name" not in values or "value" not in values:
                    continue
                rname, raw, vpos = values["name"], item["value"], _value_pos(item, "value")
            else:
                resource_keys = [k for k in item if k not in _RUSAGE_EXTRA]
                if len(resource_keys) != 1:
                    self.err(ipos, f"{what} must name exactly one resource ({{RESOURCE: VALUE}} plus optional "
                                   f"per and default), got {len(resource_keys)} keys "
                                   f"({_one_of([str(k) for k in resource_keys]) or 'none'})")
                    continue
                rname = resource_keys[0]
                if not isinstance(rname, str) or not RESOURCE_RE.match(rname):
                    self.err(_key_pos(item, rname), f"{what}: resource name must be {RESOURCE_FORM}, "
                                                    f"got {_got(rname)}")
                    continue
                extra = {k: _RUSAGE_FIELDS[k] for k in _RUSAGE_EXTRA}
                values = {}
                for k, spec in extra.items():
                    if k in item:
                        try:
                            values[k] = spec.check(item[k], f"{self.label}: {what}.{k}")
                        except _Invalid as e:
                            self.src.error(_value_pos(item, k), str(e))
                raw, vpos = item[rname], _value_pos(item, rname)
            entry: dict[str, Any] = {"name": rname}
            if rname in MEMORY_RESOURCES:
                try:
                    entry["value"] = float(parse_memory_mb(raw if isinstance(raw, str) else int(raw))) \
                        if (isinstance(raw, str) or _is_int(raw)) else None
                except ValueError as e:
                    self.err(vpos, f"{what}: {rname}: {e}")
                    continue
                if entry["value"] is None:
                    self.err(vpos, f'{what}: {rname} must be a memory size like 512 or "4GB", got {_got(raw)}')
                    continue
                entry["unit"] = "MB"
                if values.get("unit") not in (None, "MB"):
                    self.err(_value_pos(item, "unit"), f'{what}: the unit of {rname} is MB (write the '
                                                       f'value as "4GB" instead), got {_got(values["unit"])}')
                    continue
            else:
                if not _is_number(raw) or not math.isfinite(float(raw)) or not 0 <= raw <= MAX_RESOURCE:
                    self.err(vpos, f"{what}: {rname} must be a number from 0 to {MAX_RESOURCE:g}, got {_got(raw)}")
                    continue
                entry["value"] = float(raw)
                if values.get("unit") is not None:
                    entry["unit"] = values["unit"]
            for k in _RUSAGE_EXTRA:
                if k in values:
                    entry[k] = values[k]
            if rname in seen:
                self.err(ipos, f"{what}: resource {rname} appears twice in rusage; one entry per resource")
                continue
            seen.add(rname)
            entries.append(entry)
            self._check_hosts_offer(rname, ipos, what)
        return entries

    def _check_hosts_offer(self, rname: str, pos: Pos, what: str) -> None:
        """A warning when no host of hosts.yaml offers rusage resource `rname`: every job of
        the profile would be refused at submit as never satisfiable (MERGE-2), as the
        scheduler reserves `mem` from a host's memory and any other resource from what the
        host declares (`resources`). Only a warning: a worker may declare the resource when
        it joins (`xced --roles worker --resource NAME=N`, RES-2). No hosts in hosts.yaml:
        nothing to compare with (as for the select check, PROF-9)."""
        if not self.hosts or rname == "mem" or any(rname in h.get("resources", {}) for h in self.hosts):
            return
        offered = sorted({r for h in self.hosts for r in h.get("resources", {})})
        self.warn(pos, f'{what}: resource "{rname}" is offered by no host of hosts.yaml (their resources: '
                       f'{_one_of(offered) if offered else "none"}; mem is every host\'s memory); every job of '
                       f"this profile is refused at submit until a host offers it (in hosts.yaml "
                       f"resources, or a worker's --resource {rname}=N)")

    def span(self, parent: Any) -> dict[str, int] | None:
        node = parent["span"]
        pos = _value_pos(parent, "span")
        form = "exactly one of ptile (>= 1), hosts (1 or -1), block (>= 1), e.g. {ptile: 8} or \"ptile=8\""
        if node is None:
            return None
        if isinstance(node, str):
            m = re.match(r"^\s*(?:span\s*\[)?\s*(ptile|hosts|block)\s*=\s*(-?[0-9]+)\s*\]?\s*$", node)
            if not m:
                self.err(pos, f"resreq.span must be {form}, got {_got(node)}")
                return None
            items = {m.group(1): int(m.group(2))}
        elif _is_map(node):
            bad = [k for k in node if k not in _SPAN_KEYS]
            for k in bad:
                self.err(_key_pos(node, k), f"unknown key {_got(k)} in resreq.span; valid keys: "
                                            f"{_one_of(list(_SPAN_KEYS))}")
            if bad:
                return None
            items = dict(node)
            if len(items) != 1:
                self.err(pos, f"resreq.span must be {form}, got {len(items)} keys")
                return None
        else:
            self.err(pos, f"resreq.span must be {form}, got {_got(node)}")
            return None
        (k, v), = items.items()
        ok = _is_int(v) and ((k == "hosts" and v in (1, -1)) or (k != "hosts" and 1 <= v <= MAX_SLOTS))
        if not ok:
            valid = "1 or -1" if k == "hosts" else f"an integer from 1 to {MAX_SLOTS}"
            self.err(_value_pos(node, k) if _is_map(node) else pos, f"resreq.span {k} must be {valid}, got {_got(v)}")
            return None
        return {k: int(v)}

    def _words(self, parent: Any, key: str) -> list[tuple[Any, Pos]] | None:
        node = parent[key]
        pos = _value_pos(parent, key)
        if node is None:
            return []
        if isinstance(node, str):
            return [(w, pos) for w in re.split(r"[\s,:]+", node.strip()) if w]
        if _is_seq(node):
            return [(item, _item_pos(node, i)) for i, item in enumerate(node)]
        self.err(pos, f"resreq.{key} must be a string or a list, got {_got(node)}")
        return None

    def same(self, parent: Any) -> list[str]:
        out: list[str] = []
        for w, pos in self._words(parent, "same") or []:
            if not isinstance(w, str) or not RESOURCE_RE.match(w):
                self.err(pos, f"resreq.same: an attribute name must be {RESOURCE_FORM}, got {_got(w)}")
            elif w not in out:
                out.append(str(w))
        return out

    def order(self, parent: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for w, pos in self._words(parent, "order") or []:
            if _is_map(w):
                values = _check_mapping(self.src, w, pos, _ORDER_FIELDS, where=f"{self.label}: resreq.order",
                                        prefix=f"{self.label}: resreq.order.")
                if values and "name" in values:
                    out.append({"name": values["name"], "desc": values.get("desc", False)})
                continue
            if not isinstance(w, str) or not re.match(r"^-?[A-Za-z_][A-Za-z0-9_]*$", w):
                self.err(pos, f'resreq.order: expected a load index name, optionally with "-" '
                              f'(e.g. "-slots") or {{name, desc}}, got {_got(w)}')
                continue
            out.append({"name": w.lstrip("-"), "desc": w.startswith("-")})
        return out

    # ---- service

    def service(self) -> dict[str, Any] | None:
        node = self.node["service"]
        pos = _value_pos(self.node, "service")
        values = _check_mapping(self.src, node, pos, _SERVICE_FIELDS, where=f"{self.label}: service",
                                prefix=f"{self.label}: service.", null_ok=True)
        if values is None:
            return None
        node = node or {}
        out: dict[str, Any] = {}
        if "restart_policy" in values:
            out["restart_policy"] = values["restart_policy"]
        for key, fields in (("probes", _PROBE_FIELDS), ("ports", _PORT_FIELDS)):
            raw = node.get(key)
            if raw is None:
                continue
            if not _is_seq(raw):
                self.err(_value_pos(node, key), f"service.{key} must be a list, got {_got(raw)}")
                continue
            items = []
            for i, item in enumerate(raw):
                ipos = _item_pos(raw, i)
                v = _check_mapping(self.src, item, ipos, fields, where=f"{self.label}: service.{key}[{i + 1}]",
                                   prefix=f"{self.label}: service.{key}[{i + 1}].")
                if v is None:
                    continue
                v = {("interval_s" if k == "interval" else "timeout_s" if k == "timeout" else k): x
                     for k, x in v.items()}
                if key == "probes":
                    if v.get("type") == "exec" and "command" not in v:
                        self.err(ipos, f"service.probes[{i + 1}]: an exec probe needs command")
                        continue
                    if v.get("type") in ("http", "tcp") and "port" not in v:
                        self.err(ipos, f"service.probes[{i + 1}]: a {v['type']} probe needs port")
                        continue
                items.append(v)
            out[key] = items
        if "replicas" in node and node["replicas"] is not None:
            r = node["replicas"]
            rpos = _value_pos(node, "replicas")
            if _is_int(r):
                if r < 1:
                    self.err(rpos, f"service.replicas must be >= 1, got {r}")
                else:
                    out["replicas"] = {"min": int(r), "max": int(r)}
            else:
                rv = _check_mapping(self.src, r, rpos, _REPLICAS_FIELDS, where=f"{self.label}: service.replicas",
                                    prefix=f"{self.label}: service.replicas.")
                if rv is not None:
                    lo, hi = rv.get("min", 1), rv.get("max", max(1, rv.get("min", 1)))
                    if lo > hi:
                        self.err(rpos, f"service.replicas: min {lo} is more than max {hi}")
                    else:
                        out["replicas"] = {"min": lo, "max": hi}
        try:
            ServiceSpec(**out)
        except ValidationError as e:
            self.err(pos, f"service: {_pydantic_message(e)}")
            return None
        return out

    # ---- the whole profile

    def run(self) -> Profile | None:
        node = self.node
        pos = _node_pos(node) or self.pos
        if node is None:
            node = self.node = {}
        values = _check_mapping(self.src, node, pos, _PROFILE_FIELDS, where=self.label, prefix=f"{self.label}: ")
        if values is None:
            return None
        before = len(self.src.errors)
        kw: dict[str, Any] = {"name": self.name}
        for key in ("description", "kind", "mode", "launch_type", "job_starter", "on_host_failure",
                    "allow_job_pre_post_exec"):
            if key in values:
                kw[key] = values[key]
        if "env" in node:
            kw["env"] = self.env()
        for key in _HOOKS:
            if key in node:
                kw[key] = self.hook(key)
        if "resreq" in node:
            self.resreq(kw)
        limits: dict[str, Any] = {}
        if values.get("run_limit") is not None:
            limits["run_limit_s"] = values["run_limit"]
        if values.get("memory_limit") is not None:
            limits["memory_limit_mb"] = values["memory_limit"]
        if "tasks" in node:
            limits["task_min"], limits["task_max"] = self.tasks()
        kw["limits"] = limits
        if "params" in node:
            kw["params"] = self.named_strings("params", "param", MAX_PARAM_BYTES)
        if "annotations" in node:
            kw["annotations"] = self.named_strings("annotations", "annotation", MAX_ANNOTATION_BYTES)
        kind = values.get("kind", "batch")
        if "service" in node:
            if kind != "service":
                self.err(_key_pos(node, "service"), 'a service section needs kind: service (this profile is '
                                                    f'kind {kind})')
            else:
                kw["service"] = self.service()
        elif kind == "service":
            self.err(_value_pos(node, "kind"), "kind service needs a service section (probes, restart_policy, "
                                               "ports, replicas)")
        if len(self.src.errors) != before or self.src.failed:
            return None
        try:
            return Profile(**kw)
        except ValidationError as e:  # the checks above should make this unreachable
            self.err(pos, _pydantic_message(e))
            return None


def _host_view(h: dict[str, Any]) -> dict[str, object]:
    """What a select sees on an idle host of hosts.yaml (as the scheduler's view)."""
    v: dict[str, object] = dict(h.get("attributes", {}))
    for r, tot in h.get("resources", {}).items():
        v[r] = tot
        v["max" + r] = tot
    for t in h.get("tags", []):
        v[t] = True
    v["slots"] = v["maxslots"] = h.get("slots", 0)
    v["mem"] = v["maxmem"] = h.get("memory_mb", 0)
    v["hname"] = h.get("name", "")
    return v


# --------------------------------------------------------------------------- entry points


def check_applications(src: _Source, doc: Any, hosts: list[dict[str, Any]] | None) -> ApplicationsResult:
    """The loaded document of applications.yaml -> profiles (built-ins included)."""
    profiles = builtin_profiles()
    names = list(profiles)
    if doc is None:
        return ApplicationsResult(profiles, names)
    if not _is_map(doc):
        src.error(_node_pos(doc) or (0, 0),
                  f'expected a mapping with key "applications": a mapping of profile name to profile, got {_got(doc)}')
        return ApplicationsResult(None, names)
    for k in doc:
        if k != "applications":
            src.error(_key_pos(doc, k), f"unknown key {_got(k)} at the top of {APPLICATIONS_FILE}; "
                                        "valid keys: applications")
    apps = doc.get("applications")
    if apps is None:
        return ApplicationsResult(None if src.failed else profiles, names)
    if not _is_map(apps):
        hint = " (a list is not accepted: write `NAME:` keys)" if _is_seq(apps) else ""
        src.error(_value_pos(doc, "applications"),
                  f"applications must be a mapping of profile name to profile{hint}, got {_got(apps)}")
        return ApplicationsResult(None, names)
    for name in apps:
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            src.error(_key_pos(apps, name), f"an application name must consist of {NAME_FORM}, got {_got(name)}")
            continue
        if name not in names:
            names.append(name)
        profile = _ProfileChecker(src, name, apps[name], hosts, _value_pos(apps, name)).run()
        if profile is not None:
            profiles[name] = profile  # a file `default` replaces the built-in one (PROF-1)
    return ApplicationsResult(None if src.failed else profiles, names)


def load_applications(
    path: Path | str,
    errors: list[Diagnostic],
    warnings: list[Diagnostic],
    hosts: list[dict[str, Any]] | None = None,
) -> ApplicationsResult:
    """Compile the optional applications.yaml at `path`, appending diagnostics to
    `errors` / `warnings`. A missing file gives the built-in profiles only.
    `hosts` are hosts.yaml entries as the loader checked them (name, slots,
    memory_mb, resources, attributes, tags) for the select check; None skips it."""
    path = Path(path)
    if not path.exists():
        profiles = builtin_profiles()
        return ApplicationsResult(profiles, list(profiles))
    src = _Source(path, errors, warnings)
    loaded, doc = _read_yaml(src)
    if not loaded:
        return ApplicationsResult(None, list(builtin_profiles()))
    return check_applications(src, doc, hosts)


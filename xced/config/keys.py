"""The compiler and writer of `config/keys.yaml`, the trusted host keys (KEY-2, CFG-1, CFG-2).

The file is optional (no key trusted) and written by `xceadmin keys`, atomically; it is
checked like every config file, with FILE:LINE:COL for each problem::

    # the trusted host keys (KEY-2): written by `xceadmin keys`
    keys:
      - public_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI... h7"
        host: h7
        roles: [worker]                   # worker, scheduler, apiserver, admin
        expires: "2027-03-01T12:00:00Z"   # UTC; null: never
        added: "2026-12-01T17:00:00Z"
        comment: ""

Fingerprints are computed from the keys, never read from the file. A key listed twice is
an error; an expired key is a warning (it is kept, and refused at join).
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from xced.config.diagnostics import Diagnostic
from xced.config.loader import _is_map, _is_seq, _item_pos, _key_pos, _read_yaml, _Source, _value_pos
from xced.model.keys import ROLES, KeysConfig, TrustedKey

__all__ = ["KEYS_FILE", "format_time", "load_keys", "parse_time", "render_keys", "write_keys"]

KEYS_FILE = "keys.yaml"
_FIELDS = ("public_key", "host", "roles", "expires", "added", "comment")


def parse_time(v: Any) -> float:
    """An ISO 8601 time (`2027-03-01T12:00:00Z`; without a zone, UTC), or a datetime that
    YAML read from one, as epoch seconds. Raises ValueError."""
    if isinstance(v, _dt.datetime):
        t = v
    elif isinstance(v, str):
        t = _dt.datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
    else:
        raise ValueError("expected a time such as \"2027-03-01T12:00:00Z\"")
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.timestamp()


def format_time(t: float | None) -> str | None:
    """Epoch seconds as `2027-03-01T12:00:00Z` (UTC), None as None."""
    if t is None:
        return None
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(src: _Source, item: Any, pos, index: int, now: float) -> TrustedKey | None:
    import re

    from xced.auth.keys import KeyProblem, fingerprint, parse_public_key, public_line

    label = f"key #{index + 1}"
    if not _is_map(item):
        src.error(pos, f"{label}: expected a mapping of {', '.join(_FIELDS)}")
        return None
    bad = False
    for k in item:
        if k not in _FIELDS:
            src.error(_key_pos(item, k), f"{label}: unknown key {k!r}; valid keys: {', '.join(_FIELDS)}")
            bad = True
    for k in ("public_key", "host", "roles"):
        if k not in item:
            src.error(pos, f'{label}: missing required key "{k}"')
            bad = True
    if bad:
        return None
    try:
        if not isinstance(item["public_key"], str):
            raise KeyProblem("public_key: expected the key's one line, ssh-ed25519 AAAA...")
        pub = parse_public_key(item["public_key"], "public_key")
    except KeyProblem as e:
        src.error(_value_pos(item, "public_key"), f"{label}: {e}")
        return None
    host = item["host"]
    if not isinstance(host, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}", host):
        src.error(_value_pos(item, "host"), f"{label}: host: expected a host name (a letter or digit, then letters, "
                                            f"digits, '_', '.' and '-'), got {str(host)[:80]!r}")
        return None
    roles = item["roles"]
    if not _is_seq(roles) or not roles or any(r not in ROLES for r in roles):
        wrong = [r for r in roles if r not in ROLES] if _is_seq(roles) else []
        src.error(_value_pos(item, "roles"), f"{label}: roles: expected a list of {', '.join(ROLES)}"
                                             + (f"; {', '.join(map(repr, wrong))} is not a role" if wrong else ""))
        return None
    times: dict[str, float | None] = {}
    for k in ("expires", "added"):
        v = item.get(k)
        if v is None:
            times[k] = None
            continue
        try:
            times[k] = parse_time(v)
        except (ValueError, OverflowError, OSError):
            src.error(_value_pos(item, k), f"{label}: {k}: expected a UTC time such as \"2027-03-01T12:00:00Z\", "
                                           f"or null, got {v!r}")
            return None
    comment = item.get("comment") or ""
    if not isinstance(comment, str):
        src.error(_value_pos(item, "comment"), f"{label}: comment: expected text")
        return None
    if times["expires"] is not None and times["expires"] <= now:
        src.warn(_value_pos(item, "expires"), f"{label} (host {host}): expired {format_time(times['expires'])}; a "
                                              f"peer with it is refused at join")
    return TrustedKey(fingerprint=fingerprint(pub), public_key=public_line(pub, comment or host), host=host,
                      roles=list(dict.fromkeys(roles)), expires=times["expires"], added=times["added"],
                      comment=comment)


def load_keys(config_dir: Path | str, errors: list[Diagnostic], warnings: list[Diagnostic], *,
              now: float | None = None) -> KeysConfig | None:
    """keys.yaml of `config_dir` compiled (KEY-2): an empty KeysConfig when there is no file,
    None (with the problems in `errors`) when it is not valid."""
    import time

    path = Path(config_dir) / KEYS_FILE
    if not path.exists():
        return KeysConfig()
    src = _Source(path, errors, warnings)
    loaded, doc = _read_yaml(src)
    if not loaded:
        return None
    if doc is None:
        return KeysConfig()
    if not _is_map(doc) or any(k != "keys" for k in doc):
        src.error((0, 0), 'expected a mapping with the one key "keys": a list of trusted keys (xceadmin keys trust)')
        return None
    items = doc.get("keys") or []
    if not _is_seq(items):
        src.error(_value_pos(doc, "keys"), "keys must be a list of trusted keys")
        return None
    out: list[TrustedKey] = []
    seen: dict[str, int] = {}
    t = time.time() if now is None else now
    for i, item in enumerate(items):
        k = _entry(src, item, _item_pos(items, i), i, t)
        if k is None:
            continue
        if k.fingerprint in seen:
            src.error(_item_pos(items, i), f"key #{i + 1} ({k.fingerprint}) is key #{seen[k.fingerprint] + 1} again; "
                                           f"a key is listed once, with all its roles")
            continue
        seen[k.fingerprint] = i
        out.append(k)
    return None if src.failed else KeysConfig(keys=out)


def render_keys(cfg: KeysConfig) -> str:
    """The text of keys.yaml for `cfg` (what `load_keys` reads back the same)."""
    import json

    lines = ["# the trusted host keys (KEY-2): written by `xceadmin keys`; checked by `xceadmin build`",
             "keys:" + (" []" if not cfg.keys else "")]
    for k in cfg.keys:
        q = json.dumps
        lines += [f"  - public_key: {q(k.public_key)}", f"    host: {q(k.host)}",
                  f"    roles: [{', '.join(k.roles)}]", f"    expires: {q(format_time(k.expires))}",
                  f"    added: {q(format_time(k.added))}", f"    comment: {q(k.comment)}"]
    return "\n".join(lines) + "\n"


def write_keys(config_dir: Path | str, cfg: KeysConfig) -> Path:
    """Write keys.yaml atomically (a temporary file, fsync, rename, then the directory
    fsync'd), mode 0644 as the rest of config/ (public keys only). Returns its path."""
    from xced.config.atomic import atomic_write

    d = Path(config_dir)
    path = d / KEYS_FILE
    atomic_write(path, render_keys(cfg).encode("utf-8"), 0o644, sync_dir=True)
    return path

"""A first pass over a config file's YAML events, for what ruamel's loader cannot report
with a position (CFG-2: every error names file, line and column, all at once).

ruamel builds documents recursively and converts scalars without saying where, so some
bad files would reach the admin as a raw Python error instead of FILE:LINE:COL:

- nesting deeper than the interpreter's recursion limit (RecursionError);
- an integer of more than 4,300 digits (Python's int-from-string limit, ValueError),
  or an explicit tag whose value does not fit it (`!!int abc`, `!!bool maybe`);
- a key given twice in one mapping, which ruamel refuses at the first one, so the
  file's other errors would go unreported.

`scan(text)` walks ruamel's event stream, which is made without recursion, and returns
one `Finding` per problem. It stops at the first mapping or sequence nested deeper than
MAX_DEPTH, so its work is bounded however deep the file goes. A finding is `fatal` when
the file cannot then be loaded at all (depth, integers, tags); a duplicate key is not:
the loader reads the file with duplicates allowed and checks the rest of it too. YAML
syntax errors are left to the loader, which reports them with their position (the scan
raises ruamel's MarkedYAMLError for them; the caller treats that as "nothing found").
"""

from __future__ import annotations

from dataclasses import dataclass

from ruamel.yaml import YAML
from ruamel.yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "Finding", "scan"]

#: how deep mappings and sequences may nest; the config's own schema nests at most ~6
#: levels (applications > NAME > service > probes > [...] > {...})
MAX_DEPTH = 64
#: the most digits an integer may have; no bound of the schema needs more than 19
MAX_INT_DIGITS = 100

_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_STR = "tag:yaml.org,2002:str"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: 0-based (line, col) as ruamel keeps them, the whole message, and
    whether the file cannot be loaded because of it."""

    line: int
    col: int
    message: str
    fatal: bool


@dataclass(slots=True)
class _Frame:
    """An open mapping or sequence. For a mapping: whether the next node is a key, and
    the keys seen so far with their 0-based line."""

    mapping: bool
    key_next: bool = True
    seen: dict | None = None


def _tag_of(event, resolver) -> str:
    """The tag a scalar event will be constructed with: its explicit one, else what the
    YAML 1.2 resolver makes of a plain scalar, else str."""
    tag = event.tag
    if tag is not None:
        return str(getattr(tag, "value", tag))
    if not event.style:  # plain
        # str(): ruamel's Tag equals its string but hashes apart, so `/p` and `"/p"` differed as keys
        return str(resolver.resolve(ScalarNode, event.value, (True, False)))
    return _STR


def _digits(value: str) -> int:
    v = value.strip().lstrip("+-").replace("_", "")
    if v[:2].lower() in ("0x", "0o", "0b"):
        v = v[2:]
    return len(v)


def _key_identity(event, resolver) -> tuple | None:
    """How two keys of one mapping are told apart: scalars by tag and text, aliases by
    anchor; a mapping or sequence as key (rare) is not compared."""
    if isinstance(event, ScalarEvent):
        return ("scalar", _tag_of(event, resolver), event.value)
    if isinstance(event, AliasEvent):
        return ("alias", event.anchor)
    return None


def _shown_key(event) -> str:
    value = getattr(event, "value", None)
    if value is None:
        return f"*{event.anchor}"
    return f'"{value}"' if len(value) <= 60 else f'"{value[:57]}..."'


def scan(text: str) -> list[Finding]:
    """The findings of `text` (see the module docstring), in file order. Raises ruamel's
    MarkedYAMLError (or YAMLError) for a syntax error, which the caller reports."""
    resolver = VersionedResolver()
    found: list[Finding] = []
    stack: list[_Frame] = []

    def node_done() -> None:
        if stack and stack[-1].mapping:
            stack[-1].key_next = not stack[-1].key_next

    for ev in YAML(typ="rt").parse(text):
        if isinstance(ev, (ScalarEvent, AliasEvent, MappingStartEvent, SequenceStartEvent)):
            mark = ev.start_mark
            top = stack[-1] if stack else None
            if top is not None and top.mapping and top.key_next:
                ident = _key_identity(ev, resolver)
                if ident is not None:
                    assert top.seen is not None
                    if ident in top.seen:
                        found.append(Finding(
                            mark.line, mark.column,
                            f"duplicate key {_shown_key(ev)} (first given at line {top.seen[ident] + 1}); "
                            f"a key may appear once in a mapping: keep one", fatal=False))
                    else:
                        top.seen[ident] = mark.line
        if isinstance(ev, (MappingStartEvent, SequenceStartEvent)):
            if len(stack) >= MAX_DEPTH:
                found.append(Finding(
                    ev.start_mark.line, ev.start_mark.column,
                    f"mappings and lists nest more than {MAX_DEPTH} levels deep here; the config nests "
                    f"a few levels (see the schema in `xceadmin init`'s files)", fatal=True))
                return found  # nothing below can be loaded, and going on would be unbounded work
            mapping = isinstance(ev, MappingStartEvent)
            stack.append(_Frame(mapping, seen={} if mapping else None))
        elif isinstance(ev, (MappingEndEvent, SequenceEndEvent)):
            stack.pop()
            node_done()
        elif isinstance(ev, ScalarEvent):
            _check_scalar(ev, resolver, found)
            node_done()
        elif isinstance(ev, AliasEvent):
            node_done()
    return found


def _check_scalar(ev, resolver, found: list[Finding]) -> None:
    """An integer too long to convert, or an explicit !!int/!!float/!!bool whose value is
    not one."""
    tag = _tag_of(ev, resolver)
    if tag not in (_INT, _FLOAT, _BOOL):
        return
    mark = ev.start_mark
    value = ev.value
    implicit = resolver.resolve(ScalarNode, value, (True, False))
    if ev.tag is not None and implicit != tag and not (tag == _FLOAT and implicit == _INT):
        kind = {_INT: "an integer", _FLOAT: "a number", _BOOL: "true or false"}[tag]
        shown = value if len(value) <= 40 else value[:37] + "..."
        found.append(Finding(mark.line, mark.column,
                             f'the value "{shown}" is tagged !!{tag.rsplit(":", 1)[1]} but is not {kind}; '
                             f"drop the tag or give {kind}", fatal=True))
        return
    if implicit == _INT and _digits(value) > MAX_INT_DIGITS:
        found.append(Finding(mark.line, mark.column,
                             f"an integer of {_digits(value)} digits is too long: integers here have at most "
                             f"{MAX_INT_DIGITS} digits (every bound of the config is far smaller)", fatal=True))

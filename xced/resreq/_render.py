"""Canonical text and the documented JSON form of a parsed requirement."""

from __future__ import annotations

import math
from typing import Any

from ._ast import (
    MEMORY_RESOURCES,
    Binary,
    BoolOp,
    Defined,
    Expr,
    Name,
    Num,
    ResReq,
    RusageGroup,
    RusageTerm,
    Str,
    Unary,
)
from ._parser import format_number

__all__ = ["render", "render_expr", "to_json"]

_PREC = {
    "||": 1, "&&": 2, "==": 3, "!=": 3,
    "<": 4, "<=": 4, ">": 4, ">=": 4,
    "+": 5, "-": 5, "*": 6, "/": 6,
}
_UNARY_PREC = 7
_ATOM_PREC = 8


def _is_negative(value: float) -> bool:
    if isinstance(value, float):
        return math.copysign(1.0, value) < 0
    return value < 0


def _quote(value: str) -> str:
    return f"'{value}'" if "'" not in value else f'"{value}"'


def _expr(e: Expr) -> tuple[str, int]:
    if isinstance(e, Num):
        return format_number(e.value), _UNARY_PREC if _is_negative(e.value) else _ATOM_PREC
    if isinstance(e, Str):
        return _quote(e.value), _ATOM_PREC
    if isinstance(e, Name):
        return e.name, _ATOM_PREC
    if isinstance(e, Defined):
        return f"defined({e.name})", _ATOM_PREC
    if isinstance(e, Unary):
        text, prec = _expr(e.operand)
        if prec < _UNARY_PREC:
            text = f"({text})"
        return f"{e.op}{text}", _UNARY_PREC
    if isinstance(e, BoolOp):  # a flat chain: one loop, never one recursion per operand
        prec = _PREC[e.op]
        parts = []
        for o in e.operands:
            text, oprec = _expr(o)
            parts.append(f"({text})" if oprec <= prec else text)
        return f" {e.op} ".join(parts), prec
    if isinstance(e, Binary):
        prec = _PREC[e.op]
        left, lprec = _expr(e.left)
        right, rprec = _expr(e.right)
        if lprec < prec:
            left = f"({left})"
        if rprec <= prec:  # operators are left-associative: keep a right-hand group
            right = f"({right})"
        return f"{left} {e.op} {right}", prec
    raise TypeError(f"not a select expression node: {e!r}")


def render_expr(expr: Expr) -> str:
    """Canonical text of a select expression: single spaces around binary
    operators, parentheses only where precedence needs them, aliases already
    resolved, strings in single quotes (double when the value holds a ``'``).
    ``parse_select(render_expr(e)) == e`` for every ``e`` the parser produces."""
    return _expr(expr)[0]


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return str(seconds // 60)  # LSF's default unit: minutes
    return f"{seconds}s"


def _term(t: RusageTerm) -> str:
    text = f"{t.name}={format_number(t.value)}"
    if t.unit == "MB" and t.name not in MEMORY_RESOURCES:
        text += "MB"
    if t.per:
        text += f"/{t.per}"
    return text


def _group(g: RusageGroup) -> str:
    items = [_term(t) for t in g.terms]
    if g.duration_s is not None:
        items.append(f"duration={_duration(g.duration_s)}")
    if g.decay is not None:
        items.append(f"decay={g.decay}")
    return ":".join(items)


def render(req: ResReq) -> str:
    """Canonical requirement text: sections in the order select, order, rusage,
    span, same, each written out (a bare select becomes ``select[...]``), one
    space between sections; memory in MB (``mem=4096``), durations in the
    largest exact unit (``2h``, ``30`` minutes, ``90s``). Compound strings as
    ``N*{...} + M*{...}``, alternatives as ``{...} || {...}``. The empty
    requirement renders as ``""``. ``parse(render(r)) == r`` for parsed ``r``."""
    if req.kind == "compound":
        return " + ".join(f"{p.count}*{{{render(p.resreq)}}}" for p in req.parts)
    if req.kind == "alternative":
        return " || ".join(f"{{{render(p.resreq)}}}" for p in req.parts)
    out: list[str] = []
    if req.select is not None:
        out.append(f"select[{render_expr(req.select)}]")
    if req.order:
        out.append("order[" + ":".join(("-" if k.desc else "") + k.name for k in req.order) + "]")
    if req.rusage:
        out.append("rusage[" + " || ".join(", ".join(_group(g) for g in alt) for alt in req.rusage) + "]")
    if req.span is not None:
        s = req.span
        for key, value in (("ptile", s.ptile), ("hosts", s.hosts), ("block", s.block)):
            if value is not None:
                out.append(f"span[{key}={value}]")
                break
    if req.same:
        out.append("same[" + ":".join(req.same) + "]")
    return " ".join(out)


def to_json(req: ResReq) -> dict[str, Any]:
    """The documented JSON form (plain dict of str/int/float/bool/None/list)::

        {"kind": "simple" | "compound" | "alternative",
         "select": "<canonical expression>" | None,
         "order": [{"name": "slots", "desc": True}],
         "rusage": [[{"name": "mem", "value": 4096, "unit": "MB",
                      "per": "task" | "host" | "job" | None,
                      "duration_s": None, "decay": None}]],
         "span": {"ptile": 4, "hosts": None, "block": None} | None,
         "same": ["type"],
         "parts": [{"count": 2, "resreq": {...}}]}

    ``rusage`` lists the ``||`` alternatives in preference order; each is the
    flat list of its terms, every term carrying its group's duration (seconds)
    and decay. ``value`` is in MB when ``unit`` is ``"MB"``. For ``simple``,
    ``parts`` is ``[]``; for ``compound`` and ``alternative`` the section keys
    are null/empty and ``parts`` holds the pieces (alternative counts are null).
    """
    if req.kind != "simple":
        return {
            "kind": req.kind,
            "select": None,
            "order": [],
            "rusage": [],
            "span": None,
            "same": [],
            "parts": [{"count": p.count, "resreq": to_json(p.resreq)} for p in req.parts],
        }
    return {
        "kind": "simple",
        "select": render_expr(req.select) if req.select is not None else None,
        "order": [{"name": k.name, "desc": k.desc} for k in req.order],
        "rusage": [
            [
                {
                    "name": t.name,
                    "value": t.value,
                    "unit": t.unit,
                    "per": t.per,
                    "duration_s": g.duration_s,
                    "decay": g.decay,
                }
                for g in alt
                for t in g.terms
            ]
            for alt in req.rusage
        ],
        "span": (
            {"ptile": req.span.ptile, "hosts": req.span.hosts, "block": req.span.block}
            if req.span is not None else None
        ),
        "same": list(req.same),
        "parts": [],
    }

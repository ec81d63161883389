"""Evaluating a select expression against one host's resources."""

from __future__ import annotations

from collections.abc import Mapping

from ._ast import Binary, BoolOp, Defined, Expr, Name, Num, ResReq, Str, Unary
from ._parser import COMPARISONS, format_number, parse
from ._render import render_expr

__all__ = ["explain_select", "select_matches"]


class _Missing:
    """A value the host does not have (or an undefined arithmetic result)."""

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "MISSING"


MISSING = _Missing()
Value = int | float | str | bool | _Missing

_NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_SPECIAL_ATTRS = ("type", "model")
#: the operands of a false `||` chain a reason names (the rest are counted)
_EXPLAINED = 3


def _truthy(v: Value) -> bool:
    if v is MISSING:
        return False
    if isinstance(v, str):
        return v != ""
    return v != 0


def _is_number(v: Value) -> bool:
    return isinstance(v, (int, float))  # bool is an int


def _fmt(v: Value) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return format_number(v)
    if v is MISSING:
        return "undefined"
    return str(v)


def _cmp(op: str, a: Value, b: Value) -> bool:
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b  # type: ignore[operator]
    if op == "<=":
        return a <= b  # type: ignore[operator]
    if op == ">":
        return a > b  # type: ignore[operator]
    return a >= b  # type: ignore[operator]


class _Eval:
    def __init__(self, host: Mapping[str, object], local: Mapping[str, object] | None) -> None:
        self.host = host
        self.local = local

    def lookup(self, name: str) -> Value:
        v = self.host.get(name)
        if isinstance(v, (bool, int, float, str)):
            return v
        return MISSING

    def has(self, name: str) -> bool:
        return self.lookup(name) is not MISSING

    # -------------------------------------------------------------- values

    def value(self, e: Expr) -> Value:
        if isinstance(e, (Num, Str)):
            return e.value
        if isinstance(e, Name):
            return self.lookup(e.name)
        if isinstance(e, Defined):
            return self.has(e.name)
        if isinstance(e, Unary):
            v = self.value(e.operand)
            if e.op == "!":
                return not _truthy(v)
            return -v if _is_number(v) else MISSING  # type: ignore[operator]
        if isinstance(e, BoolOp):  # a flat chain, evaluated in a loop, left to right, short-circuit
            if e.op == "&&":
                return all(_truthy(self.value(o)) for o in e.operands)
            return any(_truthy(self.value(o)) for o in e.operands)
        op = e.op
        if op in COMPARISONS:
            return self.compare(e)[2]
        a, b = self.value(e.left), self.value(e.right)
        if not (_is_number(a) and _is_number(b)):
            return MISSING
        if op == "+":
            return a + b  # type: ignore[operator]
        if op == "-":
            return a - b  # type: ignore[operator]
        if op == "*":
            return a * b  # type: ignore[operator]
        if b == 0:
            return MISSING
        return a / b  # type: ignore[operator]

    def special(self, e: Binary) -> tuple[str, str] | None:
        """``type==any``, ``model!=local`` ...: (attribute, "any"|"local")."""
        if e.op not in ("==", "!="):
            return None
        for attr, other in ((e.left, e.right), (e.right, e.left)):
            if (isinstance(attr, Name) and attr.name in _SPECIAL_ATTRS
                    and isinstance(other, Name) and other.name in ("any", "local")):
                return attr.name, other.name
        return None

    def compare(self, e: Binary) -> tuple[Value, Value, bool]:
        special = self.special(e)
        if special is not None:
            attr, word = special
            mine = self.lookup(attr)
            if word == "any" or self.local is None:
                return mine, word, e.op == "=="
            theirs = self.local.get(attr)
            theirs = theirs if isinstance(theirs, str) else MISSING
            if mine is MISSING or theirs is MISSING:
                return mine, theirs, False
            return mine, theirs, _cmp(e.op, mine, theirs)
        a, b = self.value(e.left), self.value(e.right)
        # A bare name the host lacks, compared with a string, is a string literal.
        if a is MISSING and isinstance(e.left, Name) and isinstance(b, str):
            a = e.left.name
        if b is MISSING and isinstance(e.right, Name) and isinstance(a, str):
            b = e.right.name
        if a is MISSING or b is MISSING:
            return a, b, False
        if _is_number(a) and _is_number(b) or isinstance(a, str) and isinstance(b, str):
            return a, b, _cmp(e.op, a, b)
        return a, b, e.op == "!="  # a number and a string: never equal, never ordered

    # -------------------------------------------------------------- explanations

    def missing_name(self, e: Expr) -> str | None:
        stack = [e]
        while stack:
            node = stack.pop()
            if isinstance(node, Name) and not self.has(node.name):
                return node.name
            if isinstance(node, BoolOp):
                stack.extend(reversed(node.operands))
            elif isinstance(node, Binary):
                stack.extend((node.right, node.left))
            elif isinstance(node, Unary):
                stack.append(node.operand)
        return None

    def side(self, e: Expr, v: Value) -> str:
        if isinstance(e, Name):
            return f"{e.name} {_fmt(v)}" if self.has(e.name) else e.name
        if isinstance(e, (Num, Str)):
            return _fmt(v)
        return f"({render_expr(e)} = {_fmt(v)})"

    def explain(self, e: Expr) -> str:
        """Why ``e`` is false on this host (called only when it is)."""
        if isinstance(e, BoolOp):
            if e.op == "&&":  # the first false operand
                return self.explain(next(o for o in e.operands if not _truthy(self.value(o))))
            # every operand is false: the first few, so a long chain gives a short reason
            shown = [self.explain(o) for o in e.operands[:_EXPLAINED]]
            more = len(e.operands) - _EXPLAINED
            return " and ".join(shown) + (f" and {more} more false" if more > 0 else "")
        if isinstance(e, Binary):
            if e.op in COMPARISONS:
                a, b, _ = self.compare(e)
                special = self.special(e)
                if special is not None:
                    attr, word = special
                    if a is MISSING:
                        return f"not defined({attr})"
                    if word == "local":
                        return f"{attr} {_fmt(a)} {_NEGATE[e.op]} local ({_fmt(b)})"
                    return f"{attr} {_fmt(a)} {_NEGATE[e.op]} {word}"
                for node, v in ((e.left, a), (e.right, b)):
                    if v is MISSING:
                        name = self.missing_name(node)
                        return f"not defined({name})" if name else f"{render_expr(node)} is undefined"
                return f"{self.side(e.left, a)} {_NEGATE[e.op]} {self.side(e.right, b)}"
        if isinstance(e, Name):
            v = self.lookup(e.name)
            return f"not defined({e.name})" if v is MISSING else f"{e.name} is {_fmt(v)}"
        if isinstance(e, Defined):
            return f"not defined({e.name})"
        if isinstance(e, Unary) and e.op == "!":
            inner = e.operand
            if isinstance(inner, Defined):
                return f"defined({inner.name})"
            if isinstance(inner, Name):
                return f"{inner.name} is {_fmt(self.lookup(inner.name))}"
            return f"{render_expr(inner)} is true"
        v = self.value(e)
        if v is MISSING:
            name = self.missing_name(e)
            return f"not defined({name})" if name else f"{render_expr(e)} is undefined"
        return f"{render_expr(e)} is {_fmt(v)}"


def _expr_of(req_or_expr: object) -> ResReq | Expr | None:
    if isinstance(req_or_expr, str):
        return parse(req_or_expr)
    if isinstance(req_or_expr, (ResReq, Num, Str, Name, Defined, Unary, Binary, BoolOp)) or req_or_expr is None:
        return req_or_expr  # type: ignore[return-value]
    raise TypeError(f"expected a ResReq, a select expression or a string, got {type(req_or_expr).__name__}")


def select_matches(
    req_or_expr: ResReq | Expr | str | None,
    host: Mapping[str, object],
    *,
    local: Mapping[str, object] | None = None,
) -> bool:
    """Whether a host satisfies a select expression.

    ``req_or_expr``: a parsed ``ResReq`` (its select; no select matches every
    host; a compound or alternative request matches when any part's select
    does), a select expression node, a requirement string (parsed with
    ``parse``; a bare expression is the select), or None (matches).

    ``host`` maps resource names (canonical: ``swp`` not ``swap``) to numbers,
    strings or booleans; memory values in MB, like the request. Rules, after
    LSF's select_string page: a non-zero number is true; a boolean resource is
    1 when the host has it set, 0 when false or absent; a resource the host
    lacks makes any comparison on it false (``!=`` too) and is 0 as a bare
    name; ``defined(x)`` is true when the host has ``x`` at all (any value);
    a bare name compared with a string value is a string literal
    (``type == X86_64``); a number and a string are never equal.
    ``type``/``model`` ``== any`` always match; ``== local`` compares with
    ``local`` (the submission host's attributes), and matches every host when
    ``local`` is None (XCE's single-cluster default).

    Raises:
        ResReqError: when given a string that does not parse.
        TypeError: for any other kind of argument.
    """
    target = _expr_of(req_or_expr)
    if target is None:
        return True
    if isinstance(target, ResReq):
        if target.kind != "simple":
            return any(select_matches(p.resreq, host, local=local) for p in target.parts)
        if target.select is None:
            return True
        target = target.select
    return _truthy(_Eval(host, local).value(target))


def explain_select(
    req_or_expr: ResReq | Expr | str | None,
    host: Mapping[str, object],
    *,
    local: Mapping[str, object] | None = None,
) -> str | None:
    """None when the host satisfies the select (see ``select_matches``);
    otherwise a short reason naming the failing comparison and the host's
    value, for pend reasons (RES-6): ``"type x86_64 != aarch64"``,
    ``"gpu 0 < 1"``, ``"not defined(fluent)"``. For ``a && b && ...`` the first false
    operand is explained; for ``a || b || ...`` the first three, joined with
    ``" and "``, then ``"and N more false"``; for a
    compound or alternative request, each part as ``"part N: ..."`` joined
    with ``"; "``.

    Raises:
        ResReqError: when given a string that does not parse.
        TypeError: for any other kind of argument.
    """
    target = _expr_of(req_or_expr)
    if target is None:
        return None
    if isinstance(target, ResReq):
        if target.kind != "simple":
            reasons = []
            for i, p in enumerate(target.parts, 1):
                why = explain_select(p.resreq, host, local=local)
                if why is None:
                    return None
                reasons.append(f"part {i}: {why}")
            return "; ".join(reasons)
        if target.select is None:
            return None
        target = target.select
    ev = _Eval(host, local)
    if _truthy(ev.value(target)):
        return None
    return ev.explain(target)

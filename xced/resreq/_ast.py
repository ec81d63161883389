"""The parsed form of a resource requirement string: frozen, hashable dataclasses.

Equality is structural, so two strings that mean the same after
canonicalisation (aliases, units, spacing, section order) compare equal and hash
alike; the scheduler may cache by request.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "ALIASES",
    "MEMORY_RESOURCES",
    "STRING_ATTRIBUTES",
    "Binary",
    "BoolOp",
    "Defined",
    "Expr",
    "Name",
    "Num",
    "OrderKey",
    "Part",
    "ResReq",
    "RusageGroup",
    "RusageTerm",
    "Span",
    "Str",
    "Unary",
]

#: Resource names LSF accepts as aliases (select_string page); parse() stores the
#: right-hand name everywhere (select, order, rusage, same).
ALIASES: dict[str, str] = {"swap": "swp", "idle": "it", "login": "ls", "cpu": "r1m"}
#: Resources whose bare values are megabytes (rusage values and units).
MEMORY_RESOURCES: frozenset[str] = frozenset({"mem", "swp", "tmp"})
#: String-valued host attributes: a bare name compared with one of them is a
#: string literal (``type==X86_64``), and is never alias-rewritten.
STRING_ATTRIBUTES: frozenset[str] = frozenset({"type", "model", "hname"})


# --------------------------------------------------------------------------- select


@dataclass(frozen=True)
class Num:
    """A number literal (int or float). Negative only after folding ``-N``."""

    value: int | float


@dataclass(frozen=True)
class Str:
    """A quoted string literal (``'host06-x12'``); the quotes are not kept."""

    value: str


@dataclass(frozen=True)
class Name:
    """A resource name: a numeric or boolean resource, a string attribute, or
    (beside a string attribute) an unquoted string literal such as ``X86_64``."""

    name: str


@dataclass(frozen=True)
class Defined:
    """``defined(name)``: true when the host has the resource at all."""

    name: str


@dataclass(frozen=True)
class Unary:
    """``-operand`` or ``!operand``."""

    op: Literal["-", "!"]
    operand: Expr


@dataclass(frozen=True)
class Binary:
    """``left op right``; op is one of ``* / + - > < >= <= == !=`` (``&&`` and ``||``
    are ``BoolOp``: a ValueError here)."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op in ("&&", "||"):
            raise ValueError(f"{self.op!r} is a BoolOp, not a Binary: write BoolOp({self.op!r}, (a, b, ...))")


@dataclass(frozen=True)
class BoolOp:
    """``a && b && ...`` or ``a || b || ...``: two or more operands in written order
    (ValueError otherwise). A BoolOp of the same op among them is spliced in, so a chain
    is one flat node however long (``a || (b || c)`` is ``BoolOp("||", (a, b, c))``) and
    every walk over it is a loop, never a recursion per operand (D-8). The hash is
    computed once: the planner keys its memo by whole expressions."""

    op: Literal["&&", "||"]
    operands: tuple[Expr, ...]
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.op not in ("&&", "||"):
            raise ValueError(f"BoolOp op {self.op!r}: expected '&&' or '||'")
        flat: list[Expr] = []
        for o in self.operands:
            if isinstance(o, BoolOp) and o.op == self.op:
                flat.extend(o.operands)
            else:
                flat.append(o)
        if len(flat) < 2:
            raise ValueError(f"BoolOp {self.op!r} needs at least two operands")
        object.__setattr__(self, "operands", tuple(flat))
        object.__setattr__(self, "_hash", hash((BoolOp, self.op, self.operands)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):  # a copy or an unpickled node hashes afresh (str hashes differ per process)
        return (BoolOp, (self.op, self.operands))


Expr = Num | Str | Name | Defined | Unary | Binary | BoolOp


# --------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class OrderKey:
    """One ``order[]`` key. ``desc`` is True when LSF's ``-`` prefix was written
    (``order[-slots]``), i.e. the index's default direction is reversed."""

    name: str
    desc: bool = False


@dataclass(frozen=True)
class RusageTerm:
    """One ``name=value`` reservation.

    ``value`` is in MB when ``unit == "MB"`` (mem, swp, tmp, or any value written
    with a KB/MB/GB/TB unit); otherwise a plain count and ``unit`` is None.
    ``per`` is the LSF 10.1.0.9 method suffix: ``"task"``, ``"host"``, ``"job"``
    or None (cluster default)."""

    name: str
    value: int | float
    unit: Literal["MB"] | None = None
    per: Literal["task", "host", "job"] | None = None


@dataclass(frozen=True)
class RusageGroup:
    """``name=value[:name=value]...[:duration=N][:decay=0|1]``: terms that share
    one duration (seconds; None = the life of the job) and decay (0, 1 or None
    when not written)."""

    terms: tuple[RusageTerm, ...]
    duration_s: int | None = None
    decay: int | None = None


@dataclass(frozen=True)
class Span:
    """``span[ptile=N]``, ``span[hosts=1|-1]`` or ``span[block=N]``: exactly one
    field is set."""

    ptile: int | None = None
    hosts: int | None = None
    block: int | None = None


@dataclass(frozen=True)
class Part:
    """One piece of a compound (``count*{...}``) or alternative (``{...}``,
    count None) requirement."""

    count: int | None
    resreq: ResReq


@dataclass(frozen=True)
class ResReq:
    """A parsed requirement string.

    For ``kind == "simple"``: ``select`` (None = no condition), ``order`` keys,
    ``rusage`` = ordered alternatives (``||``), each a tuple of comma-separated
    groups; ``span`` (None = not given), ``same`` attribute names; ``parts`` is
    empty. For ``"compound"`` and ``"alternative"`` only ``parts`` is set.
    ``ResReq()`` is the empty requirement (what ``parse("")`` returns).
    """

    kind: Literal["simple", "compound", "alternative"] = "simple"
    select: Expr | None = None
    order: tuple[OrderKey, ...] = ()
    rusage: tuple[tuple[RusageGroup, ...], ...] = ()
    span: Span | None = None
    same: tuple[str, ...] = ()
    parts: tuple[Part, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True for a simple requirement with no section at all."""
        return self is _EMPTY or self == _EMPTY

    def __hash__(self) -> int:
        """The hash of the fields, computed once per object (the scheduler keys its per-session
        caches by whole requirements, issue 19); kept out of pickles and copies, whose strings
        may hash differently in another process."""
        h = self.__dict__.get("_hash_memo")
        if h is None:
            h = hash((self.kind, self.select, self.order, self.rusage, self.span, self.same, self.parts))
            object.__setattr__(self, "_hash_memo", h)
        return h

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_hash_memo", None)
        return state

    def rusage_terms(self, alternative: int = 0) -> list[tuple[RusageTerm, int | None, int | None]]:
        """The terms of one rusage alternative, flattened: ``(term, duration_s,
        decay)`` in written order. ``[]`` when there is no rusage section."""
        if not self.rusage:
            return []
        return [(t, g.duration_s, g.decay) for g in self.rusage[alternative] for t in g.terms]


_EMPTY = ResReq()


_SHARED: "weakref.WeakValueDictionary[ResReq, ResReq]" = weakref.WeakValueDictionary()


def shared(rr: ResReq) -> ResReq:
    """The one object kept for requirements equal to ``rr`` (``rr`` itself when none is kept),
    held weakly: while any job holds it, every equal requirement given here comes back as
    that same object. The daemon gives each job's effective requirement through this, so
    that 100,000 jobs of a few distinct requests hold a few objects, and the scheduler,
    which groups the jobs of a session by their requirement's identity (issue 19, SCHED-2),
    finds the jobs of one request together however they were submitted. Not thread-safe:
    the controller's thread alone calls it."""
    got = _SHARED.get(rr)
    if got is None:
        _SHARED[rr] = got = rr
    return got

"""Merging several ``-R`` strings the way LSF merges them."""

from __future__ import annotations

from collections.abc import Iterable

from ._ast import Binary, ResReq, RusageGroup
from ._errors import ResReqError
from ._render import render

__all__ = ["merge"]

Alternative = tuple[RusageGroup, ...]


def _merge_alternative(a: Alternative, b: Alternative) -> Alternative:
    """Per resource, the later term wins whole (value, unit, method and its
    group's duration/decay); the earlier groups keep their other terms."""
    later = {t.name for g in b for t in g.terms}
    out: list[RusageGroup] = []
    for g in a:
        kept = tuple(t for t in g.terms if t.name not in later)
        if kept:
            out.append(RusageGroup(kept, g.duration_s, g.decay))
    out.extend(b)
    return tuple(out)


def _merge_rusage(a: tuple[Alternative, ...], b: tuple[Alternative, ...], later: ResReq) -> tuple[Alternative, ...]:
    if not a:
        return b
    if not b:
        return a
    if len(a) > 1 and len(b) > 1:
        raise ResReqError(
            render(later), None, "at most one of the merged rusage sections with '||' alternatives",
            reason="two rusage sections with '||' alternatives cannot be merged; "
                   "give the alternatives in one -R string",
        )
    if len(b) == 1:
        return tuple(_merge_alternative(alt, b[0]) for alt in a)
    return tuple(_merge_alternative(a[0], alt) for alt in b)


def _merge_two(a: ResReq, b: ResReq) -> ResReq:
    if a.select is None:
        select = b.select
    elif b.select is None or b.select == a.select:
        select = a.select
    else:
        select = Binary("&&", a.select, b.select)
    return ResReq(
        kind="simple",
        select=select,
        order=b.order or a.order,
        rusage=_merge_rusage(a.rusage, b.rusage, b),
        span=b.span if b.span is not None else a.span,
        same=a.same + tuple(n for n in b.same if n not in a.same),
    )


def merge(reqs: Iterable[ResReq]) -> ResReq:
    """Merge several parsed ``-R`` strings, earliest first, into one.

    As LSF merges several ``bsub -R`` options (select_string and usage_string
    pages, "Specify multiple -R options"): the selects are ANDed (``a && b``;
    an identical select is kept once); ``same`` names are combined (union,
    first-seen order); ``order`` and ``span``: the later one given wins;
    ``rusage``: merged per resource, the later term winning whole (value, unit,
    method, and its group's duration and decay; no inheritance of modifiers).
    When one side has ``||`` rusage alternatives, the other side is merged into
    each of them; both sides having alternatives is an error.

    ``merge([])`` is the empty requirement; ``merge([r])`` is ``r`` itself (of
    any kind).

    Raises:
        ResReqError (column None): a compound or alternative requirement among
            two or more (LSF: "multiple -R options are not supported for
            compound resource requirements"), or two rusage sections that both
            have ``||`` alternatives.
    """
    items = list(reqs)
    if not items:
        return ResReq()
    if len(items) == 1:
        return items[0]
    for r in items:
        if r.kind != "simple":
            raise ResReqError(
                render(r), None, "simple requirement strings only",
                reason=f"{'an' if r.kind == 'alternative' else 'a'} {r.kind} requirement string cannot be merged with other -R strings "
                       "(give it as the only -R)",
            )
    out = items[0]
    for r in items[1:]:
        out = _merge_two(out, r)
    return out

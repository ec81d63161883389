"""Merging several ``-R`` strings the way LSF merges them."""

from __future__ import annotations

from collections.abc import Iterable

from ._ast import BoolOp, Expr, ResReq, RusageGroup
from ._errors import ResReqError
from ._render import render

__all__ = ["merge"]

Alternative = tuple[RusageGroup, ...]


def _merge_alternatives(alts: list[Alternative]) -> Alternative:
    """One rusage alternative from several, earliest first: per resource the latest term
    wins whole (value, unit, method and its group's duration/decay); an earlier group keeps
    its other terms. One pass from the latest back, so linear in the terms."""
    later: set[str] = set()
    out: list[list[RusageGroup]] = []
    for alt in reversed(alts):
        kept_groups = []
        for g in alt:
            kept = tuple(t for t in g.terms if t.name not in later)
            if kept:
                kept_groups.append(g if len(kept) == len(g.terms) else RusageGroup(kept, g.duration_s, g.decay))
        out.append(kept_groups)
        later.update(t.name for g in alt for t in g.terms)
    return tuple(g for groups in reversed(out) for g in groups)


def _merge_rusage(items: list[ResReq]) -> tuple[Alternative, ...]:
    """The rusage of several requirements: at most one may have '||' alternatives; the
    others' terms are merged into each of them, in the written order."""
    given = [r for r in items if r.rusage]
    multi = [r for r in given if len(r.rusage) > 1]
    if len(multi) > 1:
        raise ResReqError(
            render(multi[1]), None, "at most one of the merged rusage sections with '||' alternatives",
            reason="two rusage sections with '||' alternatives cannot be merged; "
                   "give the alternatives in one -R string",
        )
    if not given:
        return ()
    if not multi:
        return (_merge_alternatives([r.rusage[0] for r in given]),)
    m = given.index(multi[0])
    before = [r.rusage[0] for r in given[:m]]
    after = [r.rusage[0] for r in given[m + 1:]]
    return tuple(_merge_alternatives([*before, alt, *after]) for alt in multi[0].rusage)


def _merge_select(items: list[ResReq]) -> Expr | None:
    """The selects ANDed in order; one equal to all that came before adds nothing."""
    flat: list[Expr] = []  # the operands of the select so far, as one && chain
    for r in items:
        sel = r.select
        if sel is None:
            continue
        if flat and (sel == flat[0] if len(flat) == 1 else (
                isinstance(sel, BoolOp) and sel.op == "&&" and len(sel.operands) == len(flat)
                and list(sel.operands) == flat)):
            continue
        flat.extend(sel.operands if isinstance(sel, BoolOp) and sel.op == "&&" else (sel,))
    if not flat:
        return None
    return flat[0] if len(flat) == 1 else BoolOp("&&", tuple(flat))


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
    any kind). One pass over the requirements: linear in their terms (D-8).

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
    return ResReq(
        kind="simple",
        select=_merge_select(items),
        order=next((r.order for r in reversed(items) if r.order), ()),
        rusage=_merge_rusage(items),
        span=next((r.span for r in reversed(items) if r.span is not None), None),
        same=tuple(dict.fromkeys(n for r in items for n in r.same)),
    )

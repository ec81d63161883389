"""RES-1 and D-8: the resource requirement parser is bounded (issue 11 item 7).

The worst inputs for each bound, generated: long flat chains of && and || parse, render,
evaluate and explain with no recursion per operand; deep nesting, too many terms, -R
strings, rusage alternatives or parts are refused with a message naming the bound and
the column where it was passed. Linear work is checked by counting comparisons, never by
timing.
"""

from __future__ import annotations

import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xced.model.units import (
    MAX_RESREQ_ALTERNATIVES,
    MAX_RESREQ_STRINGS,
    MAX_RESREQ_TERMS,
    MAX_SELECT_DEPTH,
)
from xced.resreq import (
    MAX_PARSE_DEPTH,
    BoolOp,
    Name,
    OrderKey,
    ResReq,
    ResReqError,
    RusageGroup,
    RusageTerm,
    Span,
    explain_select,
    merge,
    parse,
    parse_job,
    parse_select,
    render,
    render_expr,
    select_matches,
)

SETTINGS = settings(deadline=None, database=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])


def refused(texts, *, capped: bool = True) -> ResReqError:
    with pytest.raises(ResReqError) as info:
        if isinstance(texts, list):
            parse_job(texts)
        else:
            parse(texts, capped=capped)
    err = info.value
    assert "\n" not in str(err) and len(str(err)) < 500, str(err)  # one short line, whatever the text
    return err


# --------------------------------------------------------------------------- flat chains


@pytest.mark.parametrize("op", ["||", "&&"])
def test_a_long_flat_chain_is_one_node_and_every_walk_is_a_loop(op):
    """`select[a||b||...]` of 200 terms used to fail "too deep": now a chain of any length
    parses into one BoolOp (uncapped, far past the recursion limit), renders, reads back,
    hashes, evaluates and explains."""
    n = 5 * sys.getrecursionlimit()
    text = f" {op} ".join(f"r{i}" for i in range(n))
    expr = parse_select(text)
    assert isinstance(expr, BoolOp) and expr.op == op and len(expr.operands) == n
    assert render_expr(expr) == text and parse_select(render_expr(expr)) == expr
    assert hash(expr) == hash(parse_select(text))
    everyone = {f"r{i}": True for i in range(n)}
    assert select_matches(expr, everyone)
    nobody: dict[str, object] = {}
    assert select_matches(expr, nobody) is False
    why = explain_select(expr, nobody)
    assert why is not None and len(why) < 200, why
    if op == "||":
        assert why == f"not defined(r0) and not defined(r1) and not defined(r2) and {n - 3} more false"
    else:
        assert why == "not defined(r0)"
        last_false = {**everyone, f"r{n - 1}": False}
        assert explain_select(expr, last_false) == f"r{n - 1} is false"


def test_chains_flatten_through_parentheses_and_mix_with_the_other_operator():
    assert parse_select("(a || b) || (c || (d))") == BoolOp("||", tuple(Name(x) for x in "abcd"))
    e = parse_select("a && b || c && d && e || f")
    assert e == BoolOp("||", (BoolOp("&&", (Name("a"), Name("b"))),
                              BoolOp("&&", (Name("c"), Name("d"), Name("e"))), Name("f")))
    assert render_expr(parse_select("(a || b) && c")) == "(a || b) && c"
    with pytest.raises(ValueError):
        BoolOp("||", (Name("a"),))


def test_a_chain_at_the_term_cap_is_accepted_and_one_more_term_is_refused_at_its_column():
    ok = " || ".join(f"h{i}" for i in range(MAX_RESREQ_TERMS))
    assert len(parse_job([f"select[{ok}]"]).select.operands) == MAX_RESREQ_TERMS
    text = f"select[{ok} || extra]"
    err = refused([text])
    assert err.column == text.index("extra") + 1
    assert f"more than {MAX_RESREQ_TERMS} terms (MAX_RESREQ_TERMS" in str(err)


# --------------------------------------------------------------------------- deep nesting


def _nested(kind: str, levels: int) -> tuple[str, int]:
    """A select `levels` deep and the (1-based) column of the character that makes it that deep."""
    if kind == "parens":
        return "(" * (levels - 1) + "a" + ")" * (levels - 1), levels - 1
    if kind == "not":
        return "!" * (levels - 1) + "a", levels - 1
    if kind == "minus":
        return "-" * (levels - 1) + "a", levels - 1
    if kind == "sum":  # a + a + ...: each operator one level
        return " + ".join(["a"] * levels), 3 + 4 * (levels - 2)  # the last "+"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["parens", "not", "minus", "sum"])
def test_deep_nesting_is_capped_naming_the_cap_and_the_column(kind):
    text, _ = _nested(kind, MAX_SELECT_DEPTH)
    assert parse(f"select[{text}]", capped=True).select is not None
    text, col = _nested(kind, MAX_SELECT_DEPTH + 1)
    err = refused(f"select[{text}]")
    assert err.column == len("select[") + col, (str(err), col)
    assert f"nested more than {MAX_SELECT_DEPTH} levels deep (MAX_SELECT_DEPTH" in str(err)
    # any text: the parser's own bound, far from the recursion limit, with a message too
    huge, _ = _nested(kind, 50_000)
    err = refused(huge, capped=False)
    assert f"nested more than {MAX_PARSE_DEPTH} levels deep (MAX_PARSE_DEPTH" in str(err)


@pytest.mark.parametrize("opener", ["(", "!(", "-("])
def test_a_parenthesis_or_prefix_around_a_deep_operand_counts_too(opener):
    """`(` and `!` are checked on the way in and, around an operand that is deep already
    (a chain, an operator), on the way out: `((...(a || a)...))` one level past the cap is
    refused at the `(` or `!` that passes it (hypothesis found it accepted)."""
    closers = ")" * opener.count("(")
    for n in range(1, MAX_SELECT_DEPTH):
        text = f"select[{opener * n}a || a{closers * n}]"
        levels = 2 + n * len(opener)
        if levels <= MAX_SELECT_DEPTH:
            parse(text, capped=True)
            continue
        err = refused(text)
        assert "MAX_SELECT_DEPTH" in str(err)
        assert len("select[") < err.column <= len("select[") + n * len(opener), (text, err.column)
        break


def test_what_the_daemon_renders_from_capped_requests_always_reads_back():
    """A profile select ANDed with a job's adds a level: the effective text of two requests
    at the depth cap still parses (uncapped), so a stored job always loads."""
    deep, _ = _nested("parens", MAX_SELECT_DEPTH - 1)  # in a || chain: MAX_SELECT_DEPTH levels
    job = parse(f"select[x || {deep}]", capped=True)
    profile = parse_select(f"y || {deep}", capped=True)
    merged = ResReq(select=BoolOp("&&", (profile, job.select)))
    assert parse(render(merged)) == merged


# --------------------------------------------------------------------------- terms, strings, alternatives


@pytest.mark.parametrize(("make", "needle"), [
    (lambda n: "rusage[" + ":".join(f"r{i}=1" for i in range(n)) + "]", "r{n}"),
    (lambda n: "order[" + ":".join(f"k{i}" for i in range(n)) + "]", "k{n}"),
    (lambda n: "same[" + ":".join(f"a{i}" for i in range(n)) + "]", "a{n}"),
    (lambda n: "select[" + " && ".join(f"x{i} > 1" for i in range(n // 2)) + "]", None),
])
def test_every_kind_of_term_counts(make, needle):
    parse_job([make(MAX_RESREQ_TERMS)])
    text = make(MAX_RESREQ_TERMS + 2)
    err = refused([text])
    assert "MAX_RESREQ_TERMS" in str(err) and err.text == text
    if needle is not None:
        assert err.column == text.index(needle.format(n=MAX_RESREQ_TERMS) + ("=" if "rusage" in text else "")) + 1


def test_the_term_cap_is_for_all_the_strings_of_a_job_together():
    one = "rusage[" + ":".join(f"r{{j}}_{i}=1" for i in range(40)) + "]"
    fits = [one.format(j=j) for j in range(MAX_RESREQ_TERMS // 40)]
    assert len(parse_job(fits).rusage[0]) == len(fits)
    over = fits + [one.format(j="last")]
    err = refused(over)
    assert err.text == over[-1] and "in the job's -R strings together" in str(err)
    assert err.column == over[-1].index(f"rlast_{MAX_RESREQ_TERMS % 40}=") + 1


def test_too_many_strings_alternatives_or_parts_are_refused_naming_the_cap():
    assert parse_job([""] * MAX_RESREQ_STRINGS) == ResReq()
    err = refused(["a"] * (MAX_RESREQ_STRINGS + 1))
    assert err.column is None and f"at most {MAX_RESREQ_STRINGS} -R strings (MAX_RESREQ_STRINGS)" in str(err)
    k = MAX_RESREQ_ALTERNATIVES
    cases = [  # (what is at the cap, one more, what the message says, where the extra one starts)
        (lambda n: "rusage[" + " || ".join(f"r{i}=1" for i in range(n)) + "]", "rusage alternatives", "||"),
        (lambda n: " + ".join(["1*{a}"] * n), "parts in a compound requirement", "1*{"),
        (lambda n: " || ".join(["{a}"] * n), "alternatives in an alternative requirement", "{a}"),
    ]
    for make, what, marker in cases:
        parse(make(k), capped=True)
        text = make(k + 1)
        err = refused(text)
        assert f"more than {k} {what}" in str(err) and "MAX_RESREQ_ALTERNATIVES" in str(err), str(err)
        assert err.column == text.rindex(marker) + 1, (err.column, str(err))


def test_uncapped_parse_reads_long_requests_the_daemon_wrote():
    big = "rusage[" + ":".join(f"r{i}=1" for i in range(3 * MAX_RESREQ_TERMS)) + "]"
    assert len(parse(big).rusage[0][0].terms) == 3 * MAX_RESREQ_TERMS
    refused(big)


# --------------------------------------------------------------------------- merge, linear


class CountingName(str):
    """A resource name that counts the comparisons made with it (a list scanned per term
    makes them quadratic; a set or a dict, about one per term)."""

    calls = 0

    def __eq__(self, other):
        CountingName.calls += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def _comparisons(fn, n: int) -> int:
    CountingName.calls = 0
    fn(n)
    return CountingName.calls


def _names(n: int, prefix: str = "r") -> list[CountingName]:
    return [CountingName(f"{prefix}{i}") for i in range(n)]


def _assert_linear(fn) -> None:
    small, large = _comparisons(fn, 500), _comparisons(fn, 4000)
    assert large <= 10 * max(small, 1) + 100, (small, large)  # 8x the input: quadratic would be 64x


def test_merge_compares_names_a_linear_number_of_times():
    def many_strings(n):
        reqs = [ResReq(rusage=((RusageGroup((RusageTerm(name, 1),)),),), same=(name,)) for name in _names(n)]
        out = merge(reqs)
        assert len(out.same) == n and len(out.rusage[0]) == n

    _assert_linear(many_strings)


def test_the_planner_demand_compares_names_a_linear_number_of_times():
    from xced.scheduler.placement import HostSupply, PlacementRequest, never_satisfiable

    host = HostSupply("h1", slots=4, slots_free=4, mem_mb=1024, mem_free_mb=1024)

    def wide_rusage(n):
        req = ResReq(rusage=((RusageGroup(tuple(RusageTerm(name, 1) for name in _names(n))),),))
        assert "no host has resource r0" in never_satisfiable(PlacementRequest(1, 1, req), [host])

    _assert_linear(wide_rusage)


@SETTINGS
@given(st.lists(st.tuples(st.lists(st.sampled_from("abcdef"), max_size=3, unique=True),
                          st.lists(st.sampled_from("abcdefg"), max_size=4, unique=True),
                          st.integers(0, 2), st.booleans(), st.booleans()), min_size=2, max_size=8))
def test_the_one_pass_merge_is_the_pairwise_merge_of_lsf(specs):
    """The linear merge gives what merging the strings two at a time does (the rule as LSF
    states it: selects ANDed, later order/span win, rusage per resource the later term
    whole, same names united)."""
    reqs = []
    for k, (sel, rus, nalts, has_order, has_span) in enumerate(specs):
        alts = tuple((RusageGroup(tuple(RusageTerm(n, k + 1) for n in rus)),) for _ in range(nalts if rus else 0))
        reqs.append(ResReq(select=Name(sel[0]) if sel else None,
                           order=(OrderKey(f"o{k}"),) if has_order else (), rusage=alts,
                           span=Span(ptile=k + 1) if has_span else None, same=tuple(sel)))
    try:
        want = _pairwise(reqs)
    except ResReqError:
        with pytest.raises(ResReqError):
            merge(reqs)
        return
    assert merge(reqs) == want


def _pairwise(reqs: list[ResReq]) -> ResReq:
    """The merge two at a time (an oracle: how LSF describes merging several -R)."""
    def alt2(a, b):
        later = {t.name for g in b for t in g.terms}
        out = []
        for g in a:
            kept = tuple(t for t in g.terms if t.name not in later)
            if kept:
                out.append(RusageGroup(kept, g.duration_s, g.decay))
        return tuple(out) + tuple(b)

    def rus2(a, b):
        if not a:
            return b
        if not b:
            return a
        if len(a) > 1 and len(b) > 1:
            raise ResReqError("x", None, "one", reason="both have alternatives")
        if len(b) == 1:
            return tuple(alt2(x, b[0]) for x in a)
        return tuple(alt2(a[0], x) for x in b)

    out = reqs[0]
    for b in reqs[1:]:
        if out.select is None:
            sel = b.select
        elif b.select is None or b.select == out.select:
            sel = out.select
        else:
            sel = BoolOp("&&", (out.select, b.select))
        out = ResReq(select=sel, order=b.order or out.order, rusage=rus2(out.rusage, b.rusage),
                     span=b.span if b.span is not None else out.span,
                     same=out.same + tuple(n for n in b.same if n not in out.same))
    return out


# --------------------------------------------------------------------------- generated worst inputs

CHARS = "()!-+*&|=<> ab1"


@SETTINGS
@given(st.lists(st.sampled_from(["(", ")", "!", "-", "a", "1", " + ", " * ", " && ", " || ", " == ", " < "]),
                min_size=1, max_size=400))
def test_generated_token_soup_parses_or_is_refused_with_a_column(tokens):
    """Any sequence of select tokens, as deep or as long as it comes: parse_job either reads
    it or refuses it with a ResReqError whose column is inside the text; nothing else,
    never a RecursionError."""
    text = "select[" + "".join(tokens) + "]"
    try:
        req = parse_job([text])
    except ResReqError as err:
        assert err.column is None or 1 <= err.column <= len(text) + 1
        return
    assert parse(render(req)) == req


@SETTINGS
@given(st.integers(1, 3 * MAX_SELECT_DEPTH), st.sampled_from(["(", "!", "-", "!(", "(-"]),
       st.integers(0, 3 * MAX_RESREQ_TERMS), st.sampled_from(["||", "&&"]))
def test_generated_deep_and_wide_selects_are_read_or_refused_by_the_right_cap(depth, opener, width, op):
    inner = f" {op} ".join(["a"] * width) if width else "a"
    closer = "".join(")" for c in opener * depth if c == "(")
    text = f"select[{opener * depth}{inner}{closer}]"
    levels = 1 + (1 if width > 1 else 0) + depth * len(opener)
    terms = max(width, 1)
    try:
        req = parse_job([text])
    except ResReqError as err:
        over_depth, over_terms = levels > MAX_SELECT_DEPTH, terms > MAX_RESREQ_TERMS
        assert over_depth or over_terms, str(err)
        assert ("MAX_SELECT_DEPTH" in str(err)) or ("MAX_RESREQ_TERMS" in str(err))
        return
    assert levels <= MAX_SELECT_DEPTH and terms <= MAX_RESREQ_TERMS
    assert select_matches(req, {"a": 1}) in (True, False)
    explain_select(req, {})


def test_the_term_cap_over_several_strings_names_the_cap_itself():
    """MAX_RESREQ_TERMS counts the terms of all the job's -R strings together; the message
    names the cap, not what was left of it for the string that went over."""
    from xced.model.units import MAX_RESREQ_TERMS
    from xced.resreq import ResReqError, parse_job

    one = "select[" + "&&".join(["a>1"] * 20) + "]"
    with pytest.raises(ResReqError) as e:
        parse_job([one] * 60)
    assert f"more than {MAX_RESREQ_TERMS} terms in the job's -R strings together" in str(e.value)
    parse_job([one] * 20)  # 800 terms: taken

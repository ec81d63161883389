"""RES-1 properties of xced.resreq (hypothesis).

1. For generated valid requirement strings, render(parse(s)) parses to an equal tree.
2. For any text, parse either succeeds or raises ResReqError (never anything else),
   with a column inside the text (or just past its end).
3. select evaluation never raises, and explain_select is None exactly when the
   host matches.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xced.resreq import (
    ALIASES,
    ResReqError,
    explain_select,
    parse,
    render,
    select_matches,
    to_json,
)

# deadline=None: parsing is fast, but generating nested strings is not; database=None:
# leave no example database behind. Example counts keep the file well under 10 s.
SETTINGS = settings(deadline=None, database=None, max_examples=120, suppress_health_check=[HealthCheck.too_slow])
FEWER = settings(SETTINGS, max_examples=60)

ws = st.sampled_from(["", " ", "  ", "\t", "\n"])
NAMES = ["mem", "swp", "swap", "tmp", "slots", "maxslots", "r15s", "r1m", "cpu", "idle", "login",
         "ut", "gpu", "rhel7", "fs", "fluent_lic", "x_1", "_a9"]
names = st.sampled_from(NAMES)


def canon(name: str) -> str:
    return ALIASES.get(name, name)


def join(*parts):
    return st.tuples(*parts).map("".join)


decimals = st.one_of(
    st.integers(0, 10**9).map(str),
    st.decimals(0, 10**6, places=3, allow_nan=False, allow_infinity=False).map(str),
    st.integers(0, 999).map(lambda i: f".{i}"),
)
units = st.sampled_from(["", "", "KB", "MB", "GB", "TB", "k", "m", "g", "t", "Gb"])
numbers = join(decimals, units)
quoted = st.text(alphabet="abcXYZ019_.-+* ", max_size=8).flatmap(
    lambda s: st.sampled_from([f"'{s}'", f'"{s}"']))
string_compare = join(st.sampled_from(["type", "model", "hname"]), ws, st.sampled_from(["==", "!=", "="]), ws,
                      st.one_of(st.sampled_from(["X86_64", "any", "local", "cpu", "swap"]), quoted))
atoms = st.one_of(names, numbers, quoted, string_compare,
                  join(st.just("defined"), ws, st.just("("), ws, names, ws, st.just(")")))
BINARY = ["||", "&&", "==", "!=", "=", "<", "<=", ">", ">=", "+", "-", "*", "/"]


def extend(children):
    return st.one_of(
        join(children, ws, st.sampled_from(BINARY), ws, children),
        join(st.sampled_from(["!", "-"]), ws, children),
        join(st.just("("), ws, children, ws, st.just(")")),
    )


exprs = st.recursive(atoms, extend, max_leaves=8)


@st.composite
def rusage_sections(draw):
    alternatives = []
    for _ in range(draw(st.integers(1, 3))):
        chosen = draw(st.lists(names, unique_by=canon, min_size=1, max_size=5))
        groups, i = [], 0
        while i < len(chosen):
            k = draw(st.integers(1, len(chosen) - i))
            groups.append(chosen[i:i + k])
            i += k
        texts = []
        for group in groups:
            items = []
            for name in group:
                per = draw(st.sampled_from(["", "", "/task", "/host", "/job"]))
                items.append(f"{name}{draw(ws)}={draw(ws)}{draw(numbers)}{per}")
            if draw(st.booleans()):
                items.append(f"duration={draw(st.integers(1, 10**5))}{draw(st.sampled_from(['', 's', 'm', 'h']))}")
            if draw(st.booleans()):
                items.append(f"decay={draw(st.sampled_from(['0', '1']))}")
            texts.append(draw(st.sampled_from([":", " : "])).join(items))
        alternatives.append(draw(st.sampled_from([",", ", ", " ,"])).join(texts))
    return f"rusage{draw(ws)}[" + draw(st.sampled_from(["||", " || "])).join(alternatives) + "]"


order_sections = st.lists(join(st.sampled_from(["", "-"]), names), min_size=1, max_size=5,
                          unique_by=lambda k: canon(k.lstrip("-"))).map(lambda ks: "order[" + ":".join(ks) + "]")
span_sections = st.one_of(
    st.integers(1, 128).map(lambda n: f"span[ptile={n}]"),
    st.sampled_from(["span[hosts=1]", "span[hosts=-1]", "span[ hosts = 1 ]"]),
    st.integers(1, 128).map(lambda n: f"span[block={n}]"),
)
same_sections = st.lists(st.sampled_from(["type", "model", "hname", "cpu", "r1m", "x_1"]), min_size=1,
                         max_size=4).map(lambda ns: "same[" + ":".join(ns) + "]")
select_sections = join(st.just("select"), ws, st.just("["), ws, exprs, ws, st.just("]"))


@st.composite
def simple_strings(draw):
    sections = {
        "order": order_sections, "rusage": rusage_sections(), "span": span_sections,
        "same": same_sections, "select": select_sections,
    }
    chosen = draw(st.lists(st.sampled_from(sorted(sections)), unique=True, max_size=5))
    bare = "select" not in chosen and draw(st.booleans())
    texts = [draw(sections[name]) for name in draw(st.permutations(chosen))]
    if bare:
        texts.insert(0, draw(exprs))
    separators = st.sampled_from([" ", "  ", " \t"])
    return "".join(t + draw(separators) for t in texts).strip()


@st.composite
def compound_strings(draw):
    parts = draw(st.lists(simple_strings(), min_size=1, max_size=3))
    return " + ".join(f"{draw(st.integers(1, 64))}*{{{p}}}" for p in parts)


@st.composite
def alternative_strings(draw):
    parts = draw(st.lists(st.one_of(simple_strings(), compound_strings()), min_size=2, max_size=3))
    return " || ".join(f"{{{p}}}" for p in parts)


valid_strings = st.one_of(simple_strings(), simple_strings(), compound_strings(), alternative_strings())


@SETTINGS
@given(valid_strings)
def test_render_parse_roundtrip(text):
    req = parse(text)
    canonical = render(req)
    again = parse(canonical)
    assert again == req, (text, canonical)
    assert render(again) == canonical
    assert hash(again) == hash(req)
    json.dumps(to_json(req))


def _only_resreq_errors(text: str) -> None:
    try:
        parse(text)
    except ResReqError as err:
        assert err.text == text
        assert err.column is None or 1 <= err.column <= len(text) + 1
        err.pretty()


@SETTINGS
@given(st.text())
def test_any_text_parses_or_raises_resreq_error(text):
    _only_resreq_errors(text)


@SETTINGS
@given(st.text(alphabet=" []{}()*+-!=<>&|:,'\"./0123456789abdemorstuyGBKMTh_\t", max_size=40))
def test_grammar_alphabet_parses_or_raises_resreq_error(text):
    _only_resreq_errors(text)


@FEWER
@given(valid_strings, st.data())
def test_mutated_valid_strings_parse_or_raise_resreq_error(text, data):
    pos = data.draw(st.integers(0, len(text)))
    action = data.draw(st.sampled_from(["delete", "insert", "truncate"]))
    if action == "delete":
        text = text[:pos] + text[pos + 1:]
    elif action == "insert":
        text = text[:pos] + data.draw(st.sampled_from(list("[]{}()*+-!=<>&|:,'\" 0aZ"))) + text[pos:]
    else:
        text = text[:pos]
    _only_resreq_errors(text)


hosts = st.dictionaries(
    st.sampled_from([canon(n) for n in NAMES] + ["type", "model", "hname", "X86_64", "any"]),
    st.one_of(st.integers(-5, 10**6), st.floats(allow_nan=False), st.booleans(),
              st.sampled_from(["X86_64", "aarch64", "", "cpu"])),
    max_size=8,
)


@FEWER
@given(st.one_of(simple_strings(), compound_strings(), alternative_strings()), hosts)
def test_evaluation_never_raises_and_explains_exactly_the_misses(text, host):
    req = parse(text)
    ok = select_matches(req, host)
    why = explain_select(req, host)
    assert isinstance(ok, bool)
    assert (why is None) == ok, (text, host, why)

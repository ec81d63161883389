"""RES-7, RES-1: host types and models with dots and digits are unquoted string values, as
LSF users write them (`type==LINUX2.4`, `model==PC6000`, `type==X86_64`).

Sources: docs/lsf-behaviour.md section 1 (select: string resources compared with == and
!=); LSF 6.2 Administration Guide p. 265 (select string; `type==local`/`any`)
http://38.142.81.21:8001/manual/hp/hp-xc-system-3-x-software/platform-lsf-administration-guide-version-62/page-265.html
and IBM's select string page https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/select_string.html
(host types such as LINUX2.4 and models such as PC6000 in its examples).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xced.resreq._parser import SECTIONS, UNSUPPORTED_SECTIONS
from xced.resreq import Binary, Name, ResReqError, explain_select, parse, parse_select, render, select_matches


@pytest.mark.parametrize("text, attr, value", [
    ("type==LINUX2.4", "type", "LINUX2.4"),
    ("model==PC6000", "model", "PC6000"),
    ("type==X86_64", "type", "X86_64"),
    ("select[type == LINUX2.4]", "type", "LINUX2.4"),
    ("select[type=LINUX2.4]", "type", "LINUX2.4"),  # '=' is read as '==' (real scripts write it)
    ("hname==node1.cluster.example", "hname", "node1.cluster.example"),
])
def test_unquoted_values_parse_as_strings(text, attr, value):
    """RES-7: the value is one unquoted word, the select matches the host that has it and no
    other, and the canonical text reads back the same."""
    req = parse(text)
    assert req.select == Binary("==", Name(attr), Name(value))
    assert select_matches(req, {attr: value})
    assert not select_matches(req, {attr: value + "X"})
    assert parse(render(req)) == req
    assert render(req) == f"select[{attr} == {value}]"


def test_dotted_value_in_a_larger_request():
    """RES-7 (docs/lsf-behaviour.md section 1): a dotted type beside other sections and
    operators; the reason a host is refused names its type."""
    req = parse("select[(type==LINUX2.4 || type==LINUX2.6) && mem > 100] order[ut] rusage[mem=50]")
    assert select_matches(req, {"type": "LINUX2.6", "mem": 200})
    assert not select_matches(req, {"type": "LINUX3.10", "mem": 200})
    assert explain_select(req, {"type": "LINUX3.10", "mem": 200}) == \
        "type LINUX3.10 != LINUX2.4 and type LINUX3.10 != LINUX2.6"
    assert parse(render(req)) == req
    assert parse_select("LINUX2.4 != type") == Binary("!=", Name("LINUX2.4"), Name("type"))


@pytest.mark.parametrize("text, column, words", [
    ("type==LINUX2.", 14, "letters or digits after '.'"),
    ("type==LINUX2..4", 14, "letters or digits after '.'"),
    ("select[LINUX2.4]", 8, "can only be compared with == or !="),
    ("type==LINUX2.4+1", 7, "can only be compared with == or !="),
    ("select[mem > 2 && type < LINUX2.4]", 26, "can only be compared with == or !="),
    ("mem.x > 3", 1, "can only be compared with == or !="),
    ("order[r1m.x]", 10, "':' or ']'"),
    ("defined(LINUX2.4)", 15, "')' after defined(name"),
])
def test_what_is_still_invalid_is_an_error_at_its_column(text, column, words):
    """RES-1: parse errors point at the column; a dotted word is a string, so anything but
    one side of == or != is refused, naming what would be valid."""
    with pytest.raises(ResReqError) as got:
        parse(text)
    assert got.value.column == column
    assert words in str(got.value)

# a word whose first part is a section's name (`cu.0`, `select.x`) is not one: at the start of
# a string that name opens its section, in LSF as here (docs/lsf-behaviour.md section 1)
_WORD = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}(\.[A-Za-z0-9_]{1,4}){1,3}", fullmatch=True).filter(
    lambda w: w.split(".")[0] not in SECTIONS + UNSUPPORTED_SECTIONS)


@settings(max_examples=200, deadline=None)
@given(_WORD, st.sampled_from(["type", "model", "hname"]), st.sampled_from(["==", "!=", "="]))
def test_any_dotted_word_reads_back_and_compares_as_a_string(word, attr, op):
    """RES-7: every word(.word)+ is one string value beside == / != (either side), reads
    back from its canonical text, and compares equal to exactly itself."""
    req = parse(f"{attr}{op}{word}")
    assert parse(render(req)) == req
    assert select_matches(req, {attr: word}) == (op != "!=")
    assert select_matches(req, {attr: word + "x"}) == (op == "!=")
    assert parse(f"{word} {op} {attr}") == parse(render(parse(f"{word} {op} {attr}")))

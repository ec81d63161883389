"""D-8: the bodies of the API hold every request to its bounds (issue 11 item 7): the
environment, app params, -R strings and exdata of a submit, with the bound named in the
refusal. The parsers' own bounds are tested with them (test_resreq_bounds.py,
test_deps.py, test_model.py); the body limit end to end (tests/e2e/test_bounds.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from xced.api.models import SubmitRequest
from xced.model.units import (
    MAX_APP_PARAMS,
    MAX_ENV_VARS,
    MAX_EXDATA_ITEMS,
    MAX_RESREQ_STRINGS,
)

SETTINGS = settings(deadline=None, database=None, max_examples=80, suppress_health_check=[HealthCheck.too_slow])


def refusal(**fields) -> str:
    with pytest.raises(ValidationError) as info:
        SubmitRequest(argv=["true"], cwd="/tmp", **fields)
    return info.value.errors()[0]["msg"]


def _depth_and_items(v) -> tuple[int, int]:
    """An independent count (recursive, for the small values generated)."""
    if isinstance(v, dict):
        inner = [_depth_and_items(x) for x in v.values()]
        return 1 + max((d for d, _ in inner), default=0), 2 * len(v) + sum(n for _, n in inner)
    if isinstance(v, list):
        inner = [_depth_and_items(x) for x in v]
        return 1 + max((d for d, _ in inner), default=0), len(v) + sum(n for _, n in inner)
    return 0, 0


def test_exdata_at_the_item_bound_is_taken_and_one_past_is_refused_naming_it():
    """The depth of exdata is the submit's check (xced.controller.submit, MAX_EXDATA_DEPTH);
    the body holds its size: MAX_EXDATA_ITEMS keys, values and elements."""
    SubmitRequest(argv=["true"], cwd="/tmp", exdata={"meta": list(range(MAX_EXDATA_ITEMS - 2))})
    assert "MAX_EXDATA_ITEMS" in refusal(exdata={"meta": list(range(MAX_EXDATA_ITEMS - 1))})
    # as deep as the JSON decoder reads (it stops near the recursion limit): walked without recursion
    deep = json.loads('{"meta": ' + "[" * 900 + "]" * 900 + "}")
    SubmitRequest.model_validate({"argv": ["true"], "cwd": "/tmp", "exdata": deep})


json_values = st.recursive(st.none() | st.integers() | st.text(max_size=3),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner,
                                                                                     max_size=4),
                           max_leaves=60)


@SETTINGS
@given(st.dictionaries(st.text(max_size=4), json_values, max_size=4), st.integers(0, 40), st.integers(0, 5000))
def test_generated_exdata_is_taken_exactly_within_the_item_bound(exdata, wrap, extra):
    for _ in range(wrap):
        exdata = {"w": exdata}
    exdata = {**exdata, "pad": [0] * extra}
    _, items = _depth_and_items(exdata)
    try:
        SubmitRequest(argv=["true"], cwd="/tmp", exdata=exdata)
    except ValidationError as e:
        assert items > MAX_EXDATA_ITEMS and "MAX_EXDATA_ITEMS" in str(e)
    else:
        assert items <= MAX_EXDATA_ITEMS


@pytest.mark.parametrize(("field", "make", "cap"), [
    ("env", lambda n: {f"V{i}": "x" for i in range(n)}, MAX_ENV_VARS),
    ("app_params", lambda n: {f"p{i}": "x" for i in range(n)}, MAX_APP_PARAMS),
    ("resreq", lambda n: ["a"] * n, MAX_RESREQ_STRINGS),
])
def test_counts_of_many_tiny_entries_are_bounded(field, make, cap):
    """A megabyte of tiny entries costs far more than a megabyte of a few long ones: the
    counts are capped, and the refusal says at most how many."""
    SubmitRequest(argv=["true"], cwd="/tmp", **{field: make(cap)})
    assert f"at most {cap} items" in refusal(**{field: make(cap + 1)})


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_exdata_with_a_number_json_cannot_carry_is_refused_saying_so(number):
    """RFC 8259 has no NaN or Infinity, but the json module reads them, and 1e400 as
    infinity: refused, so that no stored spec, listing or `show --json` holds a value JSON
    cannot give back (the store writes specs with orjson, which would make it null)."""
    body = json.loads('{"argv": ["true"], "cwd": "/tmp", "exdata": {"meta": {"x": [1, %s]}}}' % number)
    with pytest.raises(ValidationError) as info:
        SubmitRequest(**body)
    err = info.value.errors()[0]
    assert err["loc"] == ("exdata",)
    assert "a number JSON cannot carry" in err["msg"] and "give a finite number" in err["msg"]
    assert SubmitRequest(argv=["true"], cwd="/tmp", exdata={"meta": {"x": 1e300}}).exdata == {"meta": {"x": 1e300}}

"""xced.api.arrays: large arrays summarised by state and index range (issue 17 part 4; CLI-3, CLI-7)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xced.api.arrays import (
    MAX_RUNS_SHOWN,
    SUMMARY_HEADERS,
    action_lines,
    element_rows,
    elide_runs,
    format_runs,
    group,
    parse_runs,
    ref,
    runs_of,
)

indices = st.lists(st.integers(min_value=0, max_value=2_000_000), max_size=300)
states = st.sampled_from(["PEND", "PSUSP", "RUN", "USUSP", "DONE", "EXIT"])


@given(indices)
def test_printed_runs_read_back_to_the_index_set(idx):
    text = format_runs(runs_of(idx))
    assert parse_runs(text) == sorted(set(idx))
    assert " " not in text  # one awk field


@given(indices)
def test_runs_are_maximal_and_ordered(idx):
    runs = runs_of(idx)
    assert all(a <= b for a, b in runs)
    assert all(b1 + 1 < a2 for (_, b1), (a2, _) in zip(runs, runs[1:]))  # never two runs that touch


@given(st.lists(st.tuples(st.integers(0, 100_000), states), max_size=300, unique_by=lambda p: p[0]))
def test_group_partitions_the_elements_by_state(pairs):
    groups = group(pairs)
    assert sorted(k for k, _, _ in groups) == sorted({s for _, s in pairs})
    for key, n, runs in groups:
        want = sorted(i for i, s in pairs if s == key)
        assert parse_runs(runs) == want and n == len(want)
    firsts = [parse_runs(runs)[0] for _, _, runs in groups]
    assert firsts == sorted(firsts)  # ordered by each state's lowest index


@settings(max_examples=50)
@given(st.lists(st.tuples(st.integers(1, 10**9), states), min_size=1, max_size=2000, unique_by=lambda p: p[0]))
def test_a_summary_line_is_bounded_however_fragmented(pairs):
    lines = action_lines(123456, "kill", group(pairs), group(pairs))
    # at most 10 runs of two 10-digit indices each, and the words around them
    assert all(len(line) <= 80 + MAX_RUNS_SHOWN * 22 for line in lines)
    for line in lines:
        shown = line.split("[", 1)[1].split("]", 1)[0]
        if "..." not in shown:
            assert parse_runs(shown)  # what is shown whole reads back


def test_elided_runs_keep_the_first_and_last_and_say_how_many():
    text = format_runs(runs_of(range(1, 2000, 2)))
    assert elide_runs(text) == ("1,3,5,7,9,11,...,1995,1997,1999", 1000)
    assert elide_runs("1-10,12,15-20") == ("1-10,12,15-20", 3)
    assert elide_runs("") == ("", 0)
    assert ref(12, text) == "12[1,3,5,7,9,11,...,1995,1997,1999]"
    with pytest.raises(ValueError):
        parse_runs("1,3,...,9")


@pytest.mark.parametrize("bad", ["5-3", "a", "1,,2", "-4", "1-", "1 2"])
def test_parse_runs_refuses_what_is_not_runs(bad):
    with pytest.raises(ValueError):
        parse_runs(bad)


def test_action_lines_name_the_state_after_and_the_elements_left_alone():
    lines = action_lines(12, "kill", [("EXIT", 999996, "1-999996"), ("RUN", 4, "999997-1000000")],
                         [("DONE", 1, "1000001")], note=None)
    assert lines == ["Job <12[1-999996]>: kill requested (999996 elements, now EXIT)",
                     "Job <12[999997-1000000]>: kill requested (4 elements, now RUN)",
                     "Job <12[1000001]>: not killed (1 element, DONE)"]
    assert action_lines(7, "resume", [("PEND", 200, "1-200")], note="still held by the system (...)") == [
        "Job <7[1-200]>: resumed (200 elements, now PEND)", "Job <7>: still held by the system (...)"]


def test_element_rows_group_by_all_but_the_index():
    els = [(i, "EXIT", 1, None, "exited with code 1") for i in (1, 2, 3, 9)]
    els += [(i, "PEND", None, None, "waiting") for i in range(4, 9)] + [(10, "EXIT", 2, None, "exited with code 2")]
    rows = element_rows(5, els)
    assert SUMMARY_HEADERS == ("ID", "STAT", "COUNT", "EXIT", "SIGNAL", "REASON")
    assert rows == [["5[1-3,9]", "EXIT", 4, 1, None, "exited with code 1"],
                    ["5[4-8]", "PEND", 5, None, None, "waiting"],
                    ["5[10]", "EXIT", 1, 2, None, "exited with code 2"]]


def test_the_module_is_light():
    """The CLI imports it on its action and show paths (CLI-7): no typer, pydantic or rich."""
    code = ("import sys, xced.api.arrays; "
            "print(sorted(m for m in ('typer', 'pydantic', 'rich', 'click') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

"""SPEC JOB-5: job dependency expressions (xced.model.deps), LSF `bsub -w` semantics.

- parse: good inputs and their canonical text; bad inputs with the exact error column;
- render: parse(render(e)) == e for generated trees (hypothesis); any text parses or
  raises DependencyError with a column inside it;
- evaluate/explain: truth tables per condition and state, whole arrays, `!`, `&&`/`||`,
  unknown jobs, and soundness: MET and NEVER stay so whatever the unfinished jobs do next.

LSF pages the expectations come from (read through the search index) are the URLs below.
"""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xced.model.deps import (
    MAX_CONDITIONS,
    MAX_DEPTH,
    MAX_LENGTH,
    And,
    Cond,
    DependencyError,
    Not,
    Or,
    Ref,
    RefState,
    Verdict,
    evaluate,
    explain,
    parse_dependency,
    refs,
    render,
)
from xced.model.jobs import JobState

IBM_DEP_CONDITIONS = "https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=scheduling-dependency-conditions"
IBM_BSUB_W = "https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.w.1.html"
LSF73_STARTED = ("http://38.142.81.21:8001/manual/hp/hp-xc-system-4-x-software/"
                 "lsf-version-73-administering-platform-lsf/page-452.html")
LSF62_ARRAYS = ("http://38.142.81.21:8001/manual/hp/hp-xc-system-3-x-software/"
                "platform-lsf-administration-guide-version-62/page-421.html")

S = JobState
M, U, N = Verdict.MET, Verdict.UNMET, Verdict.NEVER
SETTINGS = settings(deadline=None, database=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])


def done(j, i=None):
    return Cond("done", Ref(j, i))


def ended(j, i=None):
    return Cond("ended", Ref(j, i))


def started(j, i=None):
    return Cond("started", Ref(j, i))


def exit_(j, i=None, op=None, code=None):
    return Cond("exit", Ref(j, i), op, code)


# ---------------------------------------------------------------------------- parse: good

GOOD = [
    # (text, tree, canonical text)
    ("done(12)", done(12), "done(12)"),
    ("ended(12)", ended(12), "ended(12)"),
    ("started(12)", started(12), "started(12)"),
    ("exit(12)", exit_(12), "exit(12)"),
    ("exit(12, >2)", exit_(12, None, ">", 2), "exit(12,>2)"),
    ("exit(12,==1)", exit_(12, None, "==", 1), "exit(12,==1)"),
    ("exit(12, !=0)", exit_(12, None, "!=", 0), "exit(12,!=0)"),
    ("exit(12,>=3)", exit_(12, None, ">=", 3), "exit(12,>=3)"),
    ("exit(12,<3)", exit_(12, None, "<", 3), "exit(12,<3)"),
    ("exit(12,<=255)", exit_(12, None, "<=", 255), "exit(12,<=255)"),
    # IBM_DEP_CONDITIONS: a code without an operator tests for equality
    ("exit(678,0)", exit_(678, None, "==", 0), "exit(678,==0)"),
    ("exit(12, 2)", exit_(12, None, "==", 2), "exit(12,==2)"),
    # IBM_DEP_CONDITIONS: a job without a condition means done
    ("123", done(123), "done(123)"),
    ("123[4]", done(123, 4), "done(123[4])"),
    ("done(123[4])", done(123, 4), "done(123[4])"),
    ("exit(7[2], >1)", exit_(7, 2, ">", 1), "exit(7[2],>1)"),
    ("  done ( 12 [ 3 ] )  ", done(12, 3), "done(12[3])"),
    ("done(007)", done(7), "done(7)"),
    ("done(1)\n&&\tdone(2)", And((done(1), done(2))), "done(1) && done(2)"),
    ("done(1)&&done(2)||done(3)", Or((And((done(1), done(2))), done(3))), "done(1) && done(2) || done(3)"),
    ("done(1)||done(2)&&done(3)", Or((done(1), And((done(2), done(3))))), "done(1) || done(2) && done(3)"),
    ("(done(1)||done(2))&&done(3)", And((Or((done(1), done(2))), done(3))), "(done(1) || done(2)) && done(3)"),
    ("!done(1)&&done(2)", And((Not(done(1)), done(2))), "!done(1) && done(2)"),
    ("!(done(1)&&done(2))", Not(And((done(1), done(2)))), "!(done(1) && done(2))"),
    ("!!done(1)", Not(Not(done(1))), "!!done(1)"),
    ("((done(1)))", done(1), "done(1)"),
    ("done(1) && (done(2) && done(3))", And((done(1), done(2), done(3))), "done(1) && done(2) && done(3)"),
    ("(done(1) || done(2)) || done(3)", Or((done(1), done(2), done(3))), "done(1) || done(2) || done(3)"),
    ("done(1) && (ended(2) || !exit(3,>2))", And((done(1), Or((ended(2), Not(exit_(3, None, ">", 2)))))),
     "done(1) && (ended(2) || !exit(3,>2))"),
    # IBM_DEP_CONDITIONS example, with the job names replaced by IDs
    ("done(312) && (started(313)||exit(99))", And((done(312), Or((started(313), exit_(99))))),
     "done(312) && (started(313) || exit(99))"),
]


@pytest.mark.parametrize(("text", "tree", "canonical"), GOOD, ids=[g[0] for g in GOOD])
def test_parse_good(text, tree, canonical):
    got = parse_dependency(text)
    assert got == tree
    assert render(got) == canonical
    assert parse_dependency(canonical) == tree
    hash(got)


# ---------------------------------------------------------------------------- parse: bad

BAD = [
    # (text, column, words the message contains)
    ("", 1, "empty dependency expression"),
    ("   ", 1, "empty dependency expression"),
    ("finished(1)", 1, ("unknown condition 'finished'; valid conditions: done(ID), ended(ID), "
                        "exit(ID[, OP CODE]), started(ID)")),
    ("DONE(1)", 1, "conditions are lower case"),
    ("post_done(1)", 1, "'post_done' is an LSF condition XCE does not support yet"),
    ("numdone(1, >=2)", 1, "'numdone' is an LSF condition XCE does not support yet"),
    ("done(12 & done(2))", 9, "expected ')' after job ID, found '&'"),
    ("done(12 && 3)", 9, "expected ')' after job ID, found '&&'"),
    ("done(1", 7, "expected ')' after job ID, found end of input"),
    ("done(1))", 8, "unbalanced ')'"),
    ("(done(1)", 9, "expected ')' to close the '(' at column 1, found end of input"),
    ("((done(1) && done(2))", 22, "expected ')' to close the '(' at column 1"),
    ("(done(1) done(2))", 10, "expected '&&', '||' or ')' to close the '(' at column 1, found 'done'"),
    ("done(1) done(2)", 9, "expected '&&', '||' or end of input, found 'done'"),
    ("done(1) &&", 11, "after '&&', found end of input"),
    ("done(1) || ", 12, "after '||', found end of input"),
    ("&& done(1)", 1, "before '&&', found '&&'"),
    ("done(1) && || done(2)", 12, "found '||'"),
    ("!", 2, "after '!', found end of input"),
    ("()", 2, "after '(', found ')'"),
    ("done(1) | done(2)", 9, "expected '||', found '|'"),
    ("done(1) & done(2)", 9, "expected '&&', found '&'"),
    ("done(1) = done(2)", 9, "found '='"),
    ("done && done(1)", 6, "expected '(' after 'done', found '&&'"),
    # a bad comparison in exit()
    ("exit(1, =>2)", 9, "expected a comparison (==, !=, >, >=, <, <=) or an exit code, found '='"),
    ("exit(1, =2)", 9, "found '='"),
    ("exit(1, !2)", 9, "found '!'"),
    ("exit(1, >)", 10, "expected an exit code (0 to 255) after '>', found ')'"),
    ("exit(1, >-1)", 10, "found '-'"),
    ("exit(1,)", 8, "expected an exit code (0 to 255), found ')'"),
    ("exit(1, 256)", 9, "exit code must be from 0 to 255, found '256'"),
    ("exit(1, 2, 3)", 10, "expected ')' after exit code, found ','"),
    ("exit(1 && 2)", 8, "expected ',' or ')' after job ID"),
    ("done(1, 2)", 7, "only for exit()"),
    # job IDs and indices
    ("done(0)", 6, "job ID must be a positive integer"),
    ("done(1[0])", 8, "array index must be a positive integer from 1 to 2147483646, found '0'"),
    ("done(1[])", 8, "array index must be a positive integer"),
    ("done(1[-1])", 8, "array index must be a positive integer"),
    ("done(1[2147483647])", 8, "array index must be a positive integer"),
    ("done(1[2-5])", 9, "expected ']' after array index, found '-'"),
    ("done(1[2)", 9, "expected ']' after array index, found ')'"),
    ("done(1[*])", 8, "ID[*]) are not supported yet"),
    ("done()", 6, "expected a job ID"),
    # names are not accepted yet
    ("done(myjob)", 6, "only numeric job IDs and ID[INDEX] are accepted, found 'myjob'"),
    ('done("210")', 6, "only numeric job IDs and ID[INDEX] are accepted"),
    ("done(1a)", 6, "only numeric job IDs and ID[INDEX] are accepted, found '1a'"),
    ("myjob", 1, "only numeric job IDs and ID[INDEX] are accepted, found 'myjob'"),
    ("done(1) && jobA", 12, "only numeric job IDs and ID[INDEX] are accepted"),
    ("done(1) && done(2) @", 20, "found '@'"),
    ("done(1)\u00a0", 8, "found"),
]


@pytest.mark.parametrize(("text", "column", "words"), BAD, ids=[repr(b[0]) for b in BAD])
def test_parse_bad(text, column, words):
    with pytest.raises(DependencyError) as ei:
        parse_dependency(text)
    err = ei.value
    assert isinstance(err, ValueError)
    assert err.column == column, str(err)
    assert words in str(err), str(err)
    assert f"column {column}: " in str(err)
    # pretty(): the message, the text, a caret under the column
    lines = err.pretty().split("\n")
    assert lines[0] == str(err)
    assert lines[2] == "  " + " " * (column - 1) + "^"


def test_error_message_shape():
    err = pytest.raises(DependencyError, parse_dependency, "done(12 & 3)").value
    assert str(err) == "done(12 & 3): column 9: expected ')' after job ID, found '&'"
    assert err.pretty() == ("done(12 & 3): column 9: expected ')' after job ID, found '&'\n"
                            "  done(12 & 3)\n"
                            "          ^")
    assert (err.expected, err.found, err.text) == ("')' after job ID", "'&'", "done(12 & 3)")


def test_limits():
    # length: MAX_LENGTH characters are fine, one more is not
    ok = "done(1)" + " " * (MAX_LENGTH - 7)
    assert parse_dependency(ok) == done(1)
    err = pytest.raises(DependencyError, parse_dependency, ok + " ").value
    assert err.column == MAX_LENGTH + 1 and f"longer than {MAX_LENGTH} characters" in str(err)
    assert len(err.pretty().split("\n")[1]) < 100  # a window of a long text, caret still under the column
    caret_line = err.pretty().split("\n")[2]
    assert caret_line.endswith("^")

    # conditions: MAX_CONDITIONS fine, the next one is an error at its column
    many = "||".join(["1"] * MAX_CONDITIONS)
    assert len(parse_dependency(many).operands) == MAX_CONDITIONS
    err = pytest.raises(DependencyError, parse_dependency, many + "||2").value
    assert err.column == len(many) + 3 and f"more than {MAX_CONDITIONS} conditions" in str(err)

    # nesting: MAX_DEPTH levels fine, one more is not
    deep = "(" * MAX_DEPTH + "1" + ")" * MAX_DEPTH
    assert parse_dependency(deep) == done(1)
    err = pytest.raises(DependencyError, parse_dependency, "(" + deep + ")").value
    assert err.column == MAX_DEPTH + 1 and f"deeper than {MAX_DEPTH}" in str(err)
    assert parse_dependency("!" * MAX_DEPTH + "1") is not None
    assert pytest.raises(DependencyError, parse_dependency, "!" * (MAX_DEPTH + 1) + "1").value.column == MAX_DEPTH + 1


def test_ast_invariants():
    assert And((done(1), And((done(2), done(3))))) == And((done(1), done(2), done(3)))
    with pytest.raises(ValueError):
        And((done(1),))
    with pytest.raises(ValueError):
        Cond("finished", Ref(1))
    with pytest.raises(ValueError):
        Cond("done", Ref(1), ">", 2)
    with pytest.raises(ValueError):
        Cond("exit", Ref(1), "=", 2)
    for bad in (lambda: Ref(0), lambda: Ref(1, 0), lambda: Ref(1, 2_147_483_647),
                lambda: Cond("exit", Ref(1), "==", 256), lambda: Cond("exit", Ref(1), ">", -1)):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(TypeError):
        parse_dependency(None)  # type: ignore[arg-type]


def test_refs():
    e = parse_dependency("done(1) && (ended(2[3]) || !exit(1, 2)) || 4 || started(2[3])")
    assert refs(e) == {(1, None), (2, 3), (4, None)}


# ---------------------------------------------------------------------------- render round trip

ids = st.integers(1, 10**18 - 1) | st.integers(1, 30)
indices = st.none() | st.integers(1, 2_147_483_646) | st.integers(1, 5)
leaves = st.one_of(
    st.builds(Cond, st.sampled_from(["done", "ended", "exit", "started"]), st.builds(Ref, ids, indices)),
    st.builds(lambda r, op, code: Cond("exit", r, op, code), st.builds(Ref, ids, indices),
              st.sampled_from(["==", "!=", ">", ">=", "<", "<="]), st.integers(0, 255)),
)
exprs = st.recursive(
    leaves,
    lambda sub: st.one_of(
        st.builds(Not, sub),
        st.builds(lambda xs: And(tuple(xs)), st.lists(sub, min_size=2, max_size=4)),
        st.builds(lambda xs: Or(tuple(xs)), st.lists(sub, min_size=2, max_size=4)),
    ),
    max_leaves=15,
)


@settings(SETTINGS, max_examples=100)
@given(exprs)
def test_render_round_trip(e):
    text = render(e)
    assert parse_dependency(text) == e
    assert render(parse_dependency(text)) == text


@settings(SETTINGS, max_examples=30)
@given(exprs, st.data())
def test_round_trip_with_any_spacing(e, data):
    """The canonical text with whitespace added or removed between tokens parses the same."""
    toks = re.findall(r"&&|\|\||[!<>=]=|[()\[\],!<>]|\w+", render(e))
    spaced = "".join(t + data.draw(st.sampled_from(["", "", " ", "\t", "\n  "])) for t in toks)
    assert parse_dependency(spaced) == e


TOKENS = ["done", "ended", "exit", "started", "(", ")", "[", "]", ",", "&&", "||", "!", "&", "|", "==", "!=",
          ">", ">=", "<", "<=", "=", "1", "12", "0", "255", "256", "x", '"', "*", " ", "-", "[3]"]


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), max_size=20).map("".join) | st.text(max_size=40))
def test_any_text_parses_or_raises_dependency_error(text):
    try:
        e = parse_dependency(text)
    except DependencyError as err:
        assert 1 <= err.column <= len(text) + 1
        assert "\n" not in str(err)
        err.pretty()
    else:
        assert parse_dependency(render(e)) == e


# ---------------------------------------------------------------------------- evaluate

def lookup_of(jobs: dict):
    """jobs: {id: RefState} for a plain job, {id: [RefState, ...]} for an array (indices 1..)."""
    def lookup(job_id, index):
        got = jobs.get(job_id)
        if got is None or index is None:
            return got
        if isinstance(got, RefState):
            return None  # no elements in a plain job
        return next((rs for rs in got if rs.index == index), None)
    return lookup


def st_(state, code=None, index=None):
    return RefState(state, code, index)


def arr(*states):
    return [RefState(s if isinstance(s, JobState) else s[0], None if isinstance(s, JobState) else s[1], i)
            for i, s in enumerate(states, start=1)]


# (condition, state, exit code, verdict): IBM_DEP_CONDITIONS; started from LSF73_STARTED
LEAF_TABLE = [
    ("done(5)", S.PEND, None, U), ("done(5)", S.PSUSP, None, U), ("done(5)", S.RUN, None, U),
    ("done(5)", S.USUSP, None, U), ("done(5)", S.DONE, 0, M), ("done(5)", S.EXIT, 1, N),
    ("ended(5)", S.PEND, None, U), ("ended(5)", S.RUN, None, U), ("ended(5)", S.USUSP, None, U),
    ("ended(5)", S.DONE, 0, M), ("ended(5)", S.EXIT, 1, M), ("ended(5)", S.EXIT, None, M),
    ("exit(5)", S.PEND, None, U), ("exit(5)", S.RUN, None, U), ("exit(5)", S.DONE, 0, N),
    ("exit(5)", S.EXIT, 1, M), ("exit(5)", S.EXIT, 0, M), ("exit(5)", S.EXIT, None, M),
    ("exit(5,>2)", S.EXIT, 3, M), ("exit(5,>2)", S.EXIT, 2, N), ("exit(5,>2)", S.RUN, None, U),
    ("exit(5,>2)", S.DONE, 0, N), ("exit(5,>2)", S.EXIT, None, N),
    ("exit(5,2)", S.EXIT, 2, M), ("exit(5,2)", S.EXIT, 3, N),
    ("exit(5,!=0)", S.EXIT, 137, M), ("exit(5,!=0)", S.EXIT, 0, N),
    ("exit(5,>=1)", S.EXIT, 1, M), ("exit(5,<1)", S.EXIT, 0, M), ("exit(5,<=1)", S.EXIT, 2, N),
    ("started(5)", S.PEND, None, U), ("started(5)", S.PSUSP, None, U), ("started(5)", S.RUN, None, M),
    ("started(5)", S.USUSP, None, M), ("started(5)", S.DONE, 0, M), ("started(5)", S.EXIT, 1, M),
    ("5", S.DONE, 0, M), ("5", S.EXIT, 1, N), ("5", S.RUN, None, U),
    # ! swaps MET and NEVER and keeps UNMET
    ("!done(5)", S.RUN, None, U), ("!done(5)", S.EXIT, 1, M), ("!done(5)", S.DONE, 0, N),
    ("!started(5)", S.PEND, None, U), ("!started(5)", S.RUN, None, N),
    ("!exit(5,>2)", S.EXIT, 1, M), ("!!done(5)", S.DONE, 0, M),
]


@pytest.mark.parametrize(("text", "state", "code", "verdict"), LEAF_TABLE,
                         ids=[f"{t}:{s}:{c}" for t, s, c, _ in LEAF_TABLE])
def test_leaf_truth_table(text, state, code, verdict):
    assert evaluate(parse_dependency(text), lookup_of({5: st_(state, code)})) is verdict


def test_states_may_be_given_by_name():
    assert evaluate(done(5), lambda j, i: RefState("DONE", 0)) is M
    with pytest.raises(ValueError):
        RefState("FINISHED")


def test_unknown_job_is_never():
    lk = lookup_of({1: st_(S.DONE, 0), 7: arr(S.DONE, S.DONE)})
    for text in ("done(99)", "ended(99)", "exit(99)", "started(99)", "99", "done(1[2])", "done(7[3])"):
        assert evaluate(parse_dependency(text), lk) is N, text
    assert explain(done(99), lk) == "Dependency can never be met: done(99) (job 99 does not exist)"
    assert explain(done(7, 3), lk) == "Dependency can never be met: done(7[3]) (job 7[3] does not exist)"
    assert evaluate(Not(done(99)), lk) is M  # !: the unknown job will never be DONE
    assert evaluate(done(7), lambda j, i: []) is N


# Whole arrays: every element must meet the condition (LSF62_ARRAYS: done(array) waits
# for the whole array; IBM_BSUB_W: every job a reference names must satisfy the test).
ARRAY_TABLE = [
    ("done(7)", arr(S.DONE, S.DONE, S.DONE), M),
    ("done(7)", arr(S.DONE, (S.EXIT, 1), S.RUN), N),
    ("done(7)", arr(S.DONE, S.RUN, S.PEND), U),
    ("ended(7)", arr(S.DONE, (S.EXIT, 1), S.DONE), M),
    ("ended(7)", arr(S.DONE, (S.EXIT, 1), S.PEND), U),
    ("exit(7)", arr((S.EXIT, 1), (S.EXIT, 2)), M),
    ("exit(7)", arr((S.EXIT, 1), S.DONE), N),
    ("exit(7)", arr((S.EXIT, 1), S.RUN), U),
    ("exit(7,>1)", arr((S.EXIT, 2), (S.EXIT, 1)), N),
    ("started(7)", arr(S.RUN, S.DONE, (S.EXIT, 1)), M),
    ("started(7)", arr(S.RUN, S.PEND), U),
    ("!done(7)", arr(S.DONE, (S.EXIT, 1), S.PEND), M),
    ("!done(7)", arr(S.DONE, S.DONE), N),
    ("!done(7)", arr(S.DONE, S.RUN), U),
    # one element
    ("done(7[2])", arr(S.DONE, (S.EXIT, 1)), N),
    ("done(7[1])", arr(S.DONE, (S.EXIT, 1)), M),
    ("exit(7[2],==1)", arr(S.DONE, (S.EXIT, 1)), M),
    ("done(7[1]) && started(7[3])", arr(S.DONE, S.PEND, S.RUN), M),
]


@pytest.mark.parametrize(("text", "elements", "verdict"), ARRAY_TABLE,
                         ids=[f"{t}:{i}" for i, (t, _, _) in enumerate(ARRAY_TABLE)])
def test_array_truth_table(text, elements, verdict):
    assert evaluate(parse_dependency(text), lookup_of({7: elements})) is verdict


def test_whole_array_is_the_and_of_its_elements():
    elements = arr(S.DONE, (S.EXIT, 3), S.RUN, S.PEND)
    lk = lookup_of({7: elements})
    for kind in ("done", "ended", "exit", "started"):
        whole = evaluate(Cond(kind, Ref(7)), lk)
        each = evaluate(And(tuple(Cond(kind, Ref(7, rs.index)) for rs in elements)), lk)
        assert whole is each, kind


V = [M, U, N]


def leaf_for(v: Verdict, job: int):
    """A condition on `job` (RUN / DONE) with verdict v."""
    return {M: done(job), U: done(job + 100), N: exit_(job)}[v]


LK3 = lookup_of({1: st_(S.DONE, 0), 2: st_(S.DONE, 0), 3: st_(S.DONE, 0),
                 101: st_(S.RUN), 102: st_(S.RUN), 103: st_(S.RUN)})


@pytest.mark.parametrize(("a", "b"), list(itertools.product(V, V)))
def test_and_or_truth_tables(a, b):
    x, y = leaf_for(a, 1), leaf_for(b, 2)
    assert (evaluate(x, LK3), evaluate(y, LK3)) == (a, b)
    want_and = N if N in (a, b) else M if (a, b) == (M, M) else U
    want_or = M if M in (a, b) else N if (a, b) == (N, N) else U
    assert evaluate(And((x, y)), LK3) is want_and
    assert evaluate(Or((x, y)), LK3) is want_or
    flip = {M: N, N: M, U: U}
    assert evaluate(Not(And((x, y))), LK3) is flip[want_and]
    # De Morgan holds in this three-valued logic
    assert evaluate(Not(And((x, y))), LK3) is evaluate(Or((Not(x), Not(y))), LK3)


def test_precedence_when_evaluating():
    lk = lookup_of({1: st_(S.DONE, 0), 2: st_(S.EXIT, 1), 3: st_(S.DONE, 0)})
    # || binds loosest: done(1) || (done(2) && done(3))
    assert evaluate(parse_dependency("done(1) || done(2) && done(3)"), lk) is M
    assert evaluate(parse_dependency("(done(1) || done(2)) && !done(3)"), lk) is N
    # ! binds tightest: (!done(2)) && done(3)
    assert evaluate(parse_dependency("!done(2) && done(3)"), lk) is M


# ---------------------------------------------------------------------------- explain

EXPLAIN = [
    ("done(12)", {12: st_(S.RUN)}, "Dependency condition not satisfied: done(12) (job 12 is RUN)"),
    ("done(12)", {12: st_(S.EXIT, 1)}, "Dependency can never be met: done(12) (job 12 ended EXIT with code 1)"),
    ("done(12)", {12: st_(S.DONE, 0)}, "Dependency condition satisfied: done(12) (job 12 ended DONE)"),
    ("exit(12, >2)", {12: st_(S.EXIT)},
     "Dependency can never be met: exit(12,>2) (job 12 ended EXIT without an exit code)"),
    ("!done(12)", {12: st_(S.DONE, 0)}, "Dependency can never be met: !done(12) (job 12 ended DONE)"),
    ("!done(12)", {12: st_(S.PEND)}, "Dependency condition not satisfied: !done(12) (job 12 is PEND)"),
    ("done(1) && done(12)", {1: st_(S.DONE, 0), 12: st_(S.USUSP)},
     "Dependency condition not satisfied: done(12) (job 12 is USUSP)"),
    # && with one NEVER: that one is named, even after an UNMET one
    ("done(1) && done(12)", {1: st_(S.RUN), 12: st_(S.EXIT, 2)},
     "Dependency can never be met: done(12) (job 12 ended EXIT with code 2)"),
    # || with every side NEVER: the whole, with each reason
    ("done(1) || exit(2)", {1: st_(S.EXIT, 1), 2: st_(S.DONE, 0)},
     "Dependency can never be met: done(1) || exit(2) (job 1 ended EXIT with code 1; job 2 ended DONE)"),
    ("done(1) || done(2)", {1: st_(S.EXIT, 1), 2: st_(S.PEND)},
     "Dependency condition not satisfied: done(2) (job 2 is PEND)"),
    ("!(done(1) && done(2))", {1: st_(S.DONE, 0), 2: st_(S.RUN)},
     "Dependency condition not satisfied: !(done(1) && done(2)) (job 2 is RUN)"),
    ("done(7)", {7: arr(S.DONE, S.RUN, S.PEND, S.PEND)},
     "Dependency condition not satisfied: done(7) (job 7 elements: 1 DONE, 1 RUN, 2 PEND)"),
    ("done(7)", {7: arr(S.DONE, (S.EXIT, 1), S.PEND)},
     "Dependency can never be met: done(7) (job 7[2] ended EXIT with code 1)"),
    ("done(7[3])", {7: arr(S.DONE, S.DONE, S.RUN)},
     "Dependency condition not satisfied: done(7[3]) (job 7[3] is RUN)"),
]


@pytest.mark.parametrize(("text", "jobs", "want"), EXPLAIN, ids=[f"{e[0]}:{i}" for i, e in enumerate(EXPLAIN)])
def test_explain(text, jobs, want):
    assert explain(parse_dependency(text), lookup_of(jobs)) == want


def test_explain_stays_one_short_line():
    n = 400
    e = Or(tuple(done(i) for i in range(1, n + 1)))
    lk = lookup_of({i: st_(S.EXIT, 1) for i in range(1, n + 1)})
    reason = explain(e, lk)
    assert reason.startswith("Dependency can never be met: done(1) || done(2)")
    assert "and 397 more" in reason and "\n" not in reason and len(reason) < 300


# ---------------------------------------------------------------------------- soundness

# Where each state may go next (no requeue): a MET or NEVER verdict must hold in every future.
FUTURES = {
    S.PEND: [(S.PEND, None), (S.PSUSP, None), (S.RUN, None), (S.USUSP, None), (S.DONE, 0), (S.EXIT, 1),
             (S.EXIT, 3), (S.EXIT, None)],
    S.RUN: [(S.RUN, None), (S.USUSP, None), (S.DONE, 0), (S.EXIT, 0), (S.EXIT, 2), (S.EXIT, 137)],
}
FUTURES[S.PSUSP] = FUTURES[S.PEND]
FUTURES[S.USUSP] = FUTURES[S.RUN]
NOW = st.sampled_from([(S.PEND, None), (S.RUN, None), (S.USUSP, None), (S.DONE, 0), (S.EXIT, 1), (S.EXIT, 3),
                       (S.EXIT, None)])
small = st.recursive(
    st.one_of(
        st.builds(Cond, st.sampled_from(["done", "ended", "exit", "started"]), st.builds(Ref, st.integers(1, 3))),
        st.builds(lambda j, op, c: Cond("exit", Ref(j), op, c), st.integers(1, 3),
                  st.sampled_from(["==", "!=", ">", ">=", "<", "<="]), st.integers(0, 3)),
    ),
    lambda sub: st.one_of(st.builds(Not, sub),
                          st.builds(lambda xs: And(tuple(xs)), st.lists(sub, min_size=2, max_size=3)),
                          st.builds(lambda xs: Or(tuple(xs)), st.lists(sub, min_size=2, max_size=3))),
    max_leaves=8,
)


@settings(SETTINGS, max_examples=80)
@given(small, st.tuples(NOW, NOW, NOW))
def test_met_and_never_are_final(e, now):
    jobs = {j: st_(*s) for j, s in zip((1, 2, 3), now, strict=True)}
    v = evaluate(e, lookup_of(jobs))
    reason = explain(e, lookup_of(jobs))
    assert reason.startswith({M: "Dependency condition satisfied: ", U: "Dependency condition not satisfied: ",
                              N: "Dependency can never be met: "}[v]) and "\n" not in reason
    if v is U:
        return
    options = [FUTURES.get(s.state, [(s.state, s.exit_code)]) for s in jobs.values()]
    for future in itertools.product(*options):
        later = {j: st_(*s) for j, s in zip((1, 2, 3), future, strict=True)}
        assert evaluate(e, lookup_of(later)) is v, (render(e), now, future)


# ---------------------------------------------------------------------------- bounds (D-8, issue 11 item 7)


def test_the_bounds_are_named_in_the_messages():
    """Each refusal names its bound in xced.model.units, so a user knows what to change."""
    for text, cap in (("1" + " " * MAX_LENGTH, "MAX_DEPENDENCY_LENGTH"),
                      ("||".join(["1"] * (MAX_CONDITIONS + 1)), "MAX_DEPENDENCY_CONDITIONS"),
                      ("!" * (MAX_DEPTH + 1) + "1", "MAX_DEPENDENCY_DEPTH")):
        err = pytest.raises(DependencyError, parse_dependency, text).value
        assert cap in str(err) and "\n" not in str(err) and len(str(err)) < 300, str(err)


WORST_TOKENS = ["(", ")", "!", "&&", "||", "1", "2[3]", "done(4)", "exit(5,>1)", " ", ",", "done(", "[", "]"]


@SETTINGS
@given(st.lists(st.sampled_from(WORST_TOKENS), min_size=1, max_size=1500).map("".join))
def test_generated_long_and_deep_expressions_parse_or_fail_at_a_column(text):
    """Texts up to past every bound (1,500 tokens: as deep, as long, as many conditions as
    they come): a parse, or a DependencyError with a column inside the text; never a
    RecursionError or anything else."""
    try:
        e = parse_dependency(text)
    except DependencyError as err:
        assert 1 <= err.column <= len(text) + 1
        return
    assert parse_dependency(render(e)) == e
    evaluate(e, lookup_of({}))


def test_a_whole_array_is_read_once_however_many_conditions_name_it(monkeypatch):
    """D-8: 1,000 conditions on one 1,000-element array used to judge every element for every
    condition (a million verdicts in every session while the job pends); now each condition
    is judged on the array's kinds of element (state, exit code)."""
    import xced.model.deps as deps

    calls = 0
    real = deps._cond_verdict

    def counting(c, rs):
        nonlocal calls
        calls += 1
        return real(c, rs)

    monkeypatch.setattr(deps, "_cond_verdict", counting)
    states = [st_(S.DONE, 0, i) for i in range(1, 1001)] + [st_(S.RUN, None, 1001)]
    lk = lookup_of({7: states})
    e = parse_dependency("&&".join(["7"] * MAX_CONDITIONS))  # done(7), a thousand times
    assert evaluate(e, lk) is U
    assert explain(e, lk) == "Dependency condition not satisfied: done(7) (job 7 elements: 1000 DONE, 1 RUN)"
    assert calls <= 2 * 2 * MAX_CONDITIONS, calls  # two kinds of element per condition, in evaluate and explain


arrays = st.lists(st.tuples(st.sampled_from(list(S)), st.sampled_from([None, 0, 1, 2, 3, 255])), min_size=2,
                  max_size=30).map(lambda ss: [st_(s, None if s not in (S.DONE, S.EXIT) else c, i)
                                               for i, (s, c) in enumerate(ss, 1)])
conds = st.one_of(st.sampled_from(["done", "ended", "started", "exit"]).map(lambda k: Cond(k, Ref(7))),
                  st.tuples(st.sampled_from(["==", "!=", ">", ">=", "<", "<="]), st.integers(0, 255))
                  .map(lambda oc: exit_(7, None, *oc)))


@SETTINGS
@given(arrays, conds)
def test_the_array_summary_judges_as_every_element_would(states, cond):
    """The verdict on a whole array from its kinds of element is the AND of the elements'
    own verdicts, and a NEVER names the first element (in order) that never can."""
    lk = lookup_of({7: states})
    own = [evaluate(Cond(cond.kind, Ref(7, rs.index), cond.op, cond.code), lookup_of({7: states})) for rs in states]
    want = N if N in own else U if U in own else M
    assert evaluate(cond, lk) is want
    if want is N:
        first = states[own.index(N)]
        assert f"job 7[{first.index}] " in explain(cond, lk)

"""Pure model pieces: array specs (JOB-4), job refs, the job environment (JOB-3), output
paths (%J/%I). The state machine's own tests are in test_machine.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xced.model.jobs import ArraySpecError, JobState, format_job_ref, parse_job_name, parse_job_ref
from xced.model.state import StartInfo, TaskSpec
from xced.model.units import MAX_ARRAY_SIZE_SETTING
from xced.worker.env import element_environment, expand_output_path, job_environment, task_environment


def test_array_specs():
    name, a = parse_job_name("sweep[1-10:3,20]%2")
    assert name == "sweep" and a.indices == (1, 4, 7, 10, 20) and a.limit == 2
    assert parse_job_name("plain") == ("plain", None)
    name, a = parse_job_name("x[5]")
    assert a.indices == (5,) and a.limit is None


@pytest.mark.parametrize("bad,needle", [
    ("x[5-1]", "ends before it starts"), ("x[]", "empty index list"), ("x[0-3]", "indices start at 1"),
    ("x[1-4:0]", "step 0"), ("x[1-4]%0", "limit '0'"), ("x[a]", "bad index range"), ("x%3", "only valid after"),
    ("x[1-4", "not a valid array"), ("x[1-2000000]", "2000000 indices, more than the 1000"),
    ("x[" + "9" * 5000 + "]", "indices go up to 2147483646"), ("x[1-3]%" + "9" * 5000, "is invalid"),
    # one line of a listing (a fresh tester's find: C1 controls and U+2028 passed, and bjobs printed them raw)
    ("a\nb", "control characters"), ("a\x7fb", "control characters"), ("a\x85b", "control characters"),
    ("a\x9b31mRED", "control characters"), ("a\u2028b", "control characters"), ("a\u2029b", "control characters"),
])
def test_bad_array_specs(bad, needle):
    with pytest.raises(ArraySpecError, match=needle.replace("[", r"\[")) as info:
        parse_job_name(bad)
    assert len(str(info.value)) < 300 and "\n" not in str(info.value)  # one short line, even for a long -J


def test_array_size_cap_names_the_setting_and_bounds_the_work():
    """JOB-4, D-8: at most `max_size` indices (the cluster's max_array_size, LSF
    MAX_JOB_ARRAY_SIZE, default 1000), counted from the ranges before any is expanded, so a
    spec listing a billion indices is refused without building them; an index listed twice
    counts twice; %limit is at most the cap too."""
    assert len(parse_job_name("x[1-1000]")[1].indices) == 1000
    with pytest.raises(ArraySpecError, match=r"1001 indices, more than the 1000 .*max_array_size in xce.yaml"):
        parse_job_name("x[1-1001]")
    with pytest.raises(ArraySpecError, match="1200 indices"):
        parse_job_name("x[1-600,1-600]")
    with pytest.raises(ArraySpecError, match="2147483646 indices, more than the 5000"):
        parse_job_name("x[1-2147483646]", 5000)
    with pytest.raises(ArraySpecError, match=r"limit '1001' is invalid; expected %N with 1 <= N <= 1000"):
        parse_job_name("x[1-10]%1001")
    assert parse_job_name("x[1-5000]%5000", 5000)[1].limit == 5000
    # the CLI, which does not know the cluster's setting, does not name a number it cannot know
    with pytest.raises(ArraySpecError, match=r"limit '0' is invalid; expected %N with N at least 1 and at most the "
                                             r"cluster's max_array_size$"):
        parse_job_name("x[1-3]%0", MAX_ARRAY_SIZE_SETTING)
    # a range down to 0 is refused for its 0, not told to be written the other way round
    with pytest.raises(ArraySpecError, match=r"index 0 is invalid; indices start at 1$"):
        parse_job_name("x[1-0]")
    # many small ranges: the total listed is what counts
    with pytest.raises(ArraySpecError, match="more than the 1000"):
        parse_job_name("x[" + ",".join(["1-1000"] * 300) + "]")


def test_job_refs():
    assert parse_job_ref("12") == (12, None)
    assert parse_job_ref("12[3]") == (12, 3)
    assert format_job_ref(12, 0) == "12" and format_job_ref(12, 3) == "12[3]"
    for bad in ("", "x", "12[", "-1", "1[a]"):
        with pytest.raises(ValueError):
            parse_job_ref(bad)


def test_job_environment():
    env = job_environment({"PATH": "/bin", "LSB_JOBID": "stale"}, job_id=7, index=3, name="sw", queue="q",
                          project=None, alloc=[("hA", 2), ("hB", 1)], hostfile=Path("/tmp/hf"))
    assert env["PATH"] == "/bin"
    assert env["XCE_JOBID"] == env["LSB_JOBID"] == "7"
    assert env["XCE_JOBINDEX"] == env["LSB_JOBINDEX"] == "3"
    assert env["LSB_HOSTS"] == env["XCE_HOSTS"] == "hA hA hB"
    assert env["LSB_MCPU_HOSTS"] == "hA 2 hB 1"
    assert env["XCE_NTASKS"] == "3"
    assert env["LSB_DJOB_HOSTFILE"] == env["XCE_HOSTFILE"] == "/tmp/hf"


def test_output_paths():
    assert expand_output_path("o-%J-%I.txt", 5, 2, "/w") == "/w/o-5-2.txt"
    assert expand_output_path("/abs/%J.out", 5, 0, "/w") == "/abs/5.out"


def test_element_and_task_environments_are_built_in_one_place():
    """JOB-3, JOB-7, PROF-10, D-7: the element gets its launch token, its tasks do not; the
    submitter's daemon address is replaced by this host's; the profile's names win."""
    base = {"PATH": "/bin", "XCE_SOCKET": "/submitter.sock", "MODE": "job", "XCE_CONTROLLER": "tcp://s:1",
            "XCE_CONTROLLER_KEY": "/home/s/ctl.pub"}
    info = StartInfo(7, 0, "n", "q", "alice", ["true"], "/w", base, None, None, None, None, [("hA", 2), ("hB", 1)],
                     "alice", None, None, 1.0, 1.0, "tok", 0o022, {"MODE": "profile"}, {"XCE_APP_PARAM_X": "1"}, "app")
    env = element_environment(info, Path("/j/hostfile"), {"XCE_SOCKET": "/here.sock"}, "xcecli launch --all --")
    assert env["XCE_JOB_TOKEN"] == "tok" and env["XCE_SOCKET"] == "/here.sock" and env["MODE"] == "profile"
    assert env["XCE_APP"] == "app" and env["XCE_APP_PARAM_X"] == "1" and env["LSB_HOSTS"] == "hA hA hB"
    assert "XCE_CONTROLLER" not in env and "XCE_CONTROLLER_KEY" not in env  # the submitter's remote xceadmin
    task = TaskSpec(7, 0, 3, ["id"], "/w", base, None, None, "alice", 1.0, None, 0o022, "n", "q",
                    [("hA", 2), ("hB", 1)], {"MODE": "profile"}, {}, None, {"XCE_TASK_ID": "3"})
    tenv = task_environment(task, "hB", Path("/j"), {"XCE_CONTROLLER": "tcp://c:1"}, "x")
    assert "XCE_JOB_TOKEN" not in tenv and "XCE_SOCKET" not in tenv and tenv["XCE_CONTROLLER"] == "tcp://c:1"
    assert tenv["XCE_HOST_NTASKS"] == "1" and tenv["XCE_JOB_HOST_DIR"] == "/j" and tenv["XCE_TASK_ID"] == "3"
    assert tenv["LSB_DJOB_HOSTFILE"] == "/j/hostfile" and tenv["MODE"] == "profile"


_NUMBERS = st.one_of(st.integers(0, 3000), st.integers(0, 10**12), st.just(2_147_483_646), st.just(2_147_483_647),
                     st.text("0123456789", min_size=1, max_size=60).map(int))
_RANGES = st.one_of(
    _NUMBERS.map(str),
    st.tuples(_NUMBERS, _NUMBERS).map(lambda t: f"{t[0]}-{t[1]}"),
    st.tuples(_NUMBERS, _NUMBERS, _NUMBERS).map(lambda t: f"{t[0]}-{t[1]}:{t[2]}"),
    st.text("0123456789-:, x", max_size=12),
)


@settings(deadline=None, database=None, max_examples=200)
@given(st.lists(_RANGES, min_size=1, max_size=300), st.one_of(st.none(), _NUMBERS.map(str), st.text(max_size=5)),
       st.sampled_from([1, 10, 1000, 1_000_000]))
def test_generated_array_specs_parse_within_the_cap_or_are_refused(ranges, limit, cap):
    """JOB-4, D-8: any index list (huge numbers, a thousand-digit index, hundreds of ranges,
    garbage) gives an ArraySpec of at most `cap` indices that are exactly the ones listed,
    or an ArraySpecError; nothing else, and never more than `cap` indices built."""
    text = "x[" + ",".join(ranges) + "]" + (f"%{limit}" if limit is not None else "")
    try:
        _, spec = parse_job_name(text, cap)
    except ArraySpecError as e:
        assert "\n" not in str(e) and len(str(e)) < 400
        return
    want: set[int] = set()
    for part in ",".join(ranges).split(","):  # a generated range may hold a comma itself ("1,1")
        a, _, rest = part.strip().partition("-")
        b, _, step = rest.partition(":")
        want.update(range(int(a), int(b or a) + 1, int(step or 1)))
    assert spec.indices == tuple(sorted(want)) and 1 <= len(spec.indices) <= cap
    assert spec.limit is None or 1 <= spec.limit <= cap


def test_array_refusals_name_the_right_bound():
    """The CLI checks against the largest max_array_size any cluster may set, so its message
    must not call that "this cluster's"; a step too large is named as the step."""
    from xced.model.jobs import ArraySpecError, parse_job_name
    from xced.model.units import MAX_ARRAY_SIZE_SETTING

    with pytest.raises(ArraySpecError, match="more than the 1000000 any cluster allows"):
        parse_job_name("a[1-100000000]", MAX_ARRAY_SIZE_SETTING)
    with pytest.raises(ArraySpecError, match="more than the 1000 an array may have on this cluster"):
        parse_job_name("a[1-1001]", 1000)
    with pytest.raises(ArraySpecError, match="step 1000000000000 is more than the largest, 2147483646"):
        parse_job_name("a[1-1000:1000000000000]", 1000)

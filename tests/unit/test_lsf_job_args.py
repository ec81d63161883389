"""The job arguments of LSF's job commands (xcecli.lsf.jobctl.job_args; CLI-8, JOB-4):
`123`, `"123[4]"`, `"123[1-10:2,15]"`, as LSF's `"job_ID[index_list]"` (IBM bkill.1), in
ASCII digits, checked before anything is sent (a second fresh tester's finds: `8[` was read
as job 8 and killed the whole array; an index list was built before its size was checked)."""

from __future__ import annotations

import tracemalloc

import pytest

from xcecli.lsf.common import LsfUsage
from xcecli.lsf.jobctl import MAX_ELEMENTS, job_args


def test_the_forms_lsf_takes_are_read():
    assert job_args(["12", "7[4]", "7[1,3,10-20:5]", "12[1-3,5:2]", "0"]) == [
        (12, None, "12"), (7, [4], "7[4]"), (7, [1, 3, 10, 15, 20], "7[1,3,10-20:5]"),
        (12, [1, 2, 3, 5], "12[1-3,5:2]"), (0, None, "0")]


@pytest.mark.parametrize("bad", ["8[", "8[]", "9]", "11[1", "10[+1]", "10[ 2 ]", "10[1_0]", "\uff12", "10[\uff12]",
                                 "12[3-1]", "12[1:0]", "-3", "12x", "1" * 19, "12[1-2]x", "[3]"])
def test_anything_else_is_an_illegal_job_id_and_nothing_is_acted_on(bad):
    with pytest.raises(LsfUsage) as ei:
        job_args(["5", bad])
    assert str(ei.value).startswith(f"{bad}: Illegal job ID. A job ID is a number (123), an array element 123[4]")


def test_an_index_list_past_the_cap_is_refused_before_it_is_built():
    """Five ranges of 10,000,000 indices each: refused before any is listed, in little memory,
    naming the cap (a typo must not exhaust the client's memory)."""
    tracemalloc.start()
    with pytest.raises(LsfUsage, match=f"names more than {MAX_ELEMENTS} array elements"):
        job_args(["11[" + ",".join(["1-10000000"] * 5) + "]"])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 2**20, peak  # nothing was listed: under 1 MB (it took 2.4 GB)
    assert len(job_args([f"11[1-{MAX_ELEMENTS}]"])[0][1]) == MAX_ELEMENTS

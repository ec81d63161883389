"""xced.sim.swf: the SWF reader (SPEC SIM-1) on the real traces in tests/data and on
small bad files written to tmp_path.

What a user sees: how many jobs a trace holds and keeps, why the others were dropped,
the converted values of a job, and, for bad input, one message naming FILE:LINE, what is
wrong and what would be valid.
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest

from tests.conftest import DATA
from xced.sim.swf import (
    DROP_REASONS,
    FIELD_NAMES,
    SimJob,
    SwfError,
    SwfJob,
    read_swf,
    read_swf_records,
)

KTH = DATA / "KTH-SP2-1996-2.1-cln.swf.gz"
SDSC = DATA / "SDSC-SP2-1998-4.2-cln.swf.gz"
ALEA = DATA / "alea_hpc2n.swf.gz"
LUBLIN = DATA / "lublin_256.swf.gz"

HEADER = "; Version: 2.2\n; MaxProcs: 8\n;\n"


def job_line(*fields: object) -> str:
    return " ".join(str(f) for f in fields) + "\n"


def job(n: int, submit: int, run: int, procs: int, req_time: int, *, alloc: int | None = None) -> str:
    """A job line: fields 4 run time, 5 allocated, 8 requested procs, 9 requested time."""
    alloc = procs if alloc is None else alloc
    return job_line(n, submit, 0, run, alloc, -1, -1, procs, req_time, -1, 1, 7, 1, -1, 2, -1, -1, -1)


def write(tmp_path: Path, text: str, name: str = "t.swf") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# --- the real traces ---------------------------------------------------------------


# sha256 of each trace uncompressed, as tests/data/README.md lists them: a copy that was
# edited, truncated or converted again fails here by name, before any count below.
TRACE_SHA256 = {
    KTH: "df76b94e5f670db52179688a98deec3e1887d10adb39f96c900b8e92abb386ab",
    SDSC: "2bb635f4b5793f52bd49ccb8fd913d95f9c5be6346925162cadcaf0117e28cf2",
    ALEA: "eaaccb339ef0f313d1b975cf02cc518b7cc012fb0c609ef2af2dbd0291aa74ba",
    LUBLIN: "a394ab3d81179ebcf645a1cbd593a60b6dff7f11a510e1e6285c45f43310c962",
}


@pytest.mark.parametrize("path", list(TRACE_SHA256), ids=lambda p: p.name)
def test_trace_copies_are_unchanged(path):
    assert hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest() == TRACE_SHA256[path]


@pytest.fixture(scope="module")
def kth():
    return read_swf(KTH)


def test_kth_counts_match_the_published_reference(kth):
    assert kth.total_records == 28_489
    assert len(kth.jobs) == 28_481
    # all 8 dropped jobs ran for 0 s; none asks for more than 100 processors
    assert kth.dropped == {"no run time": 8}
    assert kth.dropped_total == 8
    assert kth.machine_procs == 100
    assert kth.machine_procs_source == "MaxProcs header"
    assert kth.clamped == 475


def test_kth_header(kth):
    assert kth.header["MaxProcs"] == "100"
    assert kth.header["MaxNodes"] == "100"
    assert kth.header["UnixStartTime"] == "843480031"
    assert kth.header["StartTime"] == "Mon Sep 23 14:00:31 CEST 1996"
    # the archive wraps a second URL onto a bare ';' line: it continues Information
    assert kth.header["Information"] == "http://www.pdc.kth.se/\nhttp://www.cs.huji.ac.il/labs/parallel/workload/"


def test_kth_first_job_converted(kth):
    # "    1        0 964980  97225   56     -1    -1   56 210000    -1  1   1   1  -1 -1 -1 -1 -1"
    assert kth.jobs[0] == SimJob(job_id=1, submit=0, procs=56, estimate_s=210000, duration_s=97225,
                                 user_id=1, queue=-1, group_id=1)


def test_kth_run_time_clamped_to_requested_time(kth):
    # "  127   675520   2040    129   36 ... 36     60 ...": ran 129 s, asked for 60 s
    by_id = {j.job_id: j for j in kth.jobs}
    assert by_id[127].duration_s == 60
    assert by_id[127].estimate_s == 60
    assert by_id[128].duration_s == 60


def test_kth_dropped_jobs_are_the_zero_run_time_ones(kth):
    ids = {j.job_id for j in kth.jobs}
    for dropped in (2466, 4360, 4866, 6608, 15282, 20544, 25143, 25200):
        assert dropped not in ids


def test_kth_every_job_is_runnable_and_sorted(kth):
    for j in kth.jobs:
        assert 0 < j.procs <= 100
        assert 0 < j.duration_s <= j.estimate_s
    keys = [(j.submit, j.job_id) for j in kth.jobs]
    assert keys == sorted(keys)


def test_kth_procs_argument_overrides_header():
    trace = read_swf(KTH, procs=64)
    assert trace.machine_procs == 64
    assert trace.machine_procs_source == "procs argument"
    assert trace.dropped == {"more processors than the machine": 323, "no run time": 8}
    assert len(trace.jobs) == 28_489 - 331


def test_kth_raw_records():
    header, records = read_swf_records(KTH)
    assert header["MaxProcs"] == "100"
    assert len(records) == 28_489
    assert records[0] == SwfJob(1, 0, 964980, 97225, 56, -1, -1, 56, 210000, -1, 1, 1, 1, -1, -1, -1, -1, -1)
    # the header says MaxJobs: 28490; job 27313 is not in the file
    assert records[-1].job_number == 28490
    assert 27313 not in {r.job_number for r in records}


def test_sdsc_gzip():
    trace = read_swf(SDSC)
    assert trace.total_records == 59_715
    assert len(trace.jobs) == 53_999
    assert trace.dropped == {"no run time": 5681, "no requested time": 35}
    assert trace.machine_procs == 128
    # first line "   11   566129      5  28826    1  27758    -1    1  28800    -1  5 153  75 ...": clamped to 28800
    assert trace.jobs[0] == SimJob(job_id=11, submit=566129, procs=1, estimate_s=28800, duration_s=28800,
                                   user_id=153, queue=3, group_id=75)
    # repeated "; Queue:" lines are all kept
    assert trace.header["Queue"].split("\n")[0] == "0  interactive"
    assert len(trace.header["Queue"].split("\n")) == 7


def test_alea_decimals_and_trailing_blank_line():
    trace = read_swf(ALEA)
    # 3,171 non-';' lines: the last is a lone space, skipped
    assert trace.total_records == 3170
    assert len(trace.jobs) == 3145
    assert trace.dropped == {"no run time": 25}  # run time -1 (status -1)
    assert trace.machine_procs == 240
    _, records = read_swf_records(ALEA)
    last = records[-2]  # " 7182  4950007   7522    223   32 223.29 28672 ..."
    assert last.job_number == 7182
    assert last.avg_cpu_time == pytest.approx(223.29)
    assert last.used_memory_kb == 28672
    assert isinstance(last.run_time, int)


def test_lublin_has_no_requested_times():
    with pytest.raises(SwfError) as exc:
        read_swf(LUBLIN)
    msg = str(exc.value)
    assert "lublin_256.swf.gz: empty trace: all 10000 jobs were dropped (10000 no requested time)" in msg
    assert "256 processors (MaxNodes header)" in msg
    assert "--no-estimate run-time" in msg


def test_lublin_with_run_time_as_estimate():
    trace = read_swf(LUBLIN, missing_estimate="run_time")
    assert trace.total_records == len(trace.jobs) == 10_000
    assert trace.dropped == {}
    assert trace.estimated_from_run_time == 10_000
    # no MaxProcs line: MaxNodes gives the size
    assert "MaxProcs" not in trace.header
    assert (trace.machine_procs, trace.machine_procs_source) == (256, "MaxNodes header")
    # "1    5094 -1   12072  16 -1 -1 -1 -1 ...": requested procs unknown, allocated 16
    assert trace.jobs[0] == SimJob(job_id=1, submit=5094, procs=16, estimate_s=12072, duration_s=12072,
                                   user_id=-1, queue=0)


# --- conversion rules on small files ------------------------------------------------


def test_drop_rule_each_reason(tmp_path):
    text = HEADER + (
        job(1, 0, 100, 9, 200)               # more processors than the machine (8)
        + job(2, 0, 100, -1, 200, alloc=-1)  # no processors
        + job(3, 0, -1, 2, 200)              # no run time (unknown)
        + job(4, 0, 0, 2, 200)               # no run time (zero)
        + job(5, 0, 100, 2, -1)              # no requested time
        + job(6, 0, 100, 8, 200)             # kept: exactly the machine
        + job(7, 0, 300, -1, 200, alloc=3)   # kept: allocated procs, clamped to 200
    )
    trace = read_swf(write(tmp_path, text))
    assert trace.dropped == {
        "more processors than the machine": 1,
        "no processors": 1,
        "no run time": 2,
        "no requested time": 1,
    }
    assert list(trace.dropped) == [r for r in DROP_REASONS if r in trace.dropped]
    assert [(j.job_id, j.procs, j.estimate_s, j.duration_s) for j in trace.jobs] == [(6, 8, 200, 100), (7, 3, 200, 200)]
    assert trace.clamped == 1
    assert trace.total_records == 7


def test_first_matching_reason_counts(tmp_path):
    # too many processors and no run time: counted once, as the first rule
    trace = read_swf(write(tmp_path, HEADER + job(1, 0, -1, 99, -1) + job(2, 0, 5, 1, 5)))
    assert trace.dropped == {"more processors than the machine": 1}


def test_sorted_by_submit_then_job_number(tmp_path):
    text = HEADER + job(3, 50, 1, 1, 1) + job(2, 10, 1, 1, 1) + job(1, 50, 1, 1, 1)
    trace = read_swf(write(tmp_path, text))
    assert [(j.submit, j.job_id) for j in trace.jobs] == [(10, 2), (50, 1), (50, 3)]


def test_decimals_accepted_and_rounded(tmp_path):
    line = job_line(1, 0, 0, "100.0", 2, "3.5", "1e3", 2, "199.6", -1, 1, 7, 1, -1, 2, -1, -1, -1)
    _, records = read_swf_records(write(tmp_path, HEADER + line))
    r = records[0]
    assert r.avg_cpu_time == 3.5 and r.used_memory_kb == 1000
    assert (r.run_time, r.requested_time) == (100, 200)
    assert all(isinstance(getattr(r, f), int) for f in FIELD_NAMES if f not in ("avg_cpu_time", "used_memory_kb"))


def test_gzip_by_magic_without_suffix(tmp_path):
    p = tmp_path / "packed.swf"
    p.write_bytes(gzip.compress((HEADER + job(1, 0, 10, 2, 20)).encode()))
    trace = read_swf(p)
    assert [j.job_id for j in trace.jobs] == [1]


def test_procs_argument_without_header(tmp_path):
    trace = read_swf(write(tmp_path, job(1, 0, 10, 4, 20)), procs=4)
    assert trace.machine_procs == 4 and len(trace.jobs) == 1


def test_header_between_jobs_and_crlf(tmp_path):
    text = (job(1, 0, 10, 2, 20) + ";MaxProcs:8\n" + "\n   \n" + job(2, 5, 10, 2, 20)).replace("\n", "\r\n")
    trace = read_swf(write(tmp_path, text))
    assert [j.job_id for j in trace.jobs] == [1, 2]
    assert trace.header == {"MaxProcs": "8"}


# --- bad input: one message, FILE:LINE, what is wrong, what is valid ----------------


def error_of(path: Path, **kw) -> str:
    with pytest.raises(SwfError) as exc:
        read_swf(path, **kw)
    return str(exc.value)


def test_truncated_line(tmp_path):
    p = write(tmp_path, HEADER + job(1, 0, 10, 2, 20) + "2 0 0 10 2 -1 -1 2 20 -1 1 7 1 -1 2 -1 -1\n")
    msg = error_of(p)
    assert msg == (f"{p}:5: truncated job line: found 17 fields, an SWF job line has exactly "
                   f"18 whitespace-separated numbers (-1 when unknown)")


def test_too_many_fields(tmp_path):
    p = write(tmp_path, HEADER + job(1, 0, 10, 2, 20).rstrip("\n") + " 5\n")
    msg = error_of(p)
    assert msg.startswith(f"{p}:4: job line has too many fields: found 19 fields")
    assert "exactly 18" in msg


def test_non_numeric_field_names_field_and_column(tmp_path):
    line = "1 0 0 abc 2 -1 -1 2 20 -1 1 7 1 -1 2 -1 -1 -1\n"
    p = write(tmp_path, HEADER + line)
    msg = error_of(p)
    assert msg == (f"{p}:4:7: field 4 (run_time) is 'abc', not a number; "
                   f"every SWF job field is a number, -1 when unknown")


def test_non_finite_field(tmp_path):
    p = write(tmp_path, HEADER + job_line(1, 0, 0, 10, 2, "nan", -1, 2, 20, -1, 1, 7, 1, -1, 2, -1, -1, -1))
    assert f"{p}:4:" in (msg := error_of(p))
    assert "field 6 (avg_cpu_time) is 'nan', not a number" in msg


def test_no_machine_size(tmp_path):
    p = write(tmp_path, "; Version: 2\n" + job(1, 0, 10, 2, 20))
    msg = error_of(p)
    assert msg.startswith(f"{p}: has no MaxProcs header line")
    assert msg.endswith("give --procs N")


def test_bad_maxprocs_header(tmp_path):
    p = write(tmp_path, "; Version: 2\n; MaxProcs: -1\n" + job(1, 0, 10, 2, 20))
    msg = error_of(p)
    assert msg == (f"{p}:2: header MaxProcs is '-1', not a positive whole number of processors; "
                   f"fix it or give --procs N")
    assert len(read_swf(p, procs=4).jobs) == 1


def test_bad_procs_argument(tmp_path):
    p = write(tmp_path, HEADER + job(1, 0, 10, 2, 20))
    assert "--procs must be a positive whole number of processors, got 0" in error_of(p, procs=0)


def test_missing_file(tmp_path):
    p = tmp_path / "nope.swf"
    assert error_of(p) == f"{p}: no such file; give the path of an SWF trace (.swf or .swf.gz)"


def test_directory(tmp_path):
    assert error_of(tmp_path) == f"{tmp_path}: is a directory, not an SWF trace file"


def test_header_only_is_empty(tmp_path):
    p = write(tmp_path, HEADER)
    assert error_of(p).startswith(f"{p}: empty trace: no job lines")
    p0 = write(tmp_path, "", "zero.swf")
    assert error_of(p0).startswith(f"{p0}: empty trace: no job lines")


def test_all_dropped_is_empty(tmp_path):
    p = write(tmp_path, HEADER + job(1, 0, 10, 9, 20) + job(2, 0, 0, 2, 20))
    assert error_of(p) == (f"{p}: empty trace: all 2 jobs were dropped (1 more processors than the machine, "
                           f"1 no run time) on a machine of 8 processors (MaxProcs header)")


def test_corrupt_gzip(tmp_path):
    p = tmp_path / "bad.swf.gz"
    p.write_bytes(gzip.compress((HEADER + job(1, 0, 10, 2, 20)).encode())[:-12])
    msg = error_of(p)
    assert msg.startswith(f"{p}: cannot decompress (")
    assert msg.endswith("a .gz trace must be a complete gzip file")
    q = write(tmp_path, HEADER, "plain.swf.gz")
    assert error_of(q).startswith(f"{q}: cannot decompress (")


def test_errors_are_value_errors():
    assert issubclass(SwfError, ValueError)


def test_a_byte_order_mark_is_skipped(tmp_path):
    p = tmp_path / "bom.swf"
    p.write_bytes(b"\xef\xbb\xbf; MaxProcs: 4\n1 0 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n")
    assert [j.procs for j in read_swf(p).jobs] == [2]


def test_an_underscore_in_a_number_is_an_error(tmp_path):
    p = tmp_path / "u.swf"
    p.write_text("; MaxProcs: 4\n1 0 -1 1_000 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n")
    with pytest.raises(SwfError, match=r"u.swf:2:9: '_' in a number"):
        read_swf(p)


def test_maxprocs_given_twice_is_an_error(tmp_path):
    p = tmp_path / "two.swf"
    p.write_text("; MaxProcs: 8\n; MaxProcs: 16\n1 0 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n")
    with pytest.raises(SwfError, match=r"two.swf:1: header MaxProcs is given more than once \(8, 16\)"):
        read_swf(p)


@pytest.mark.parametrize("field,token,expect", [
    (5, "1.5", "field 5 (allocated_procs) is '1.5'; it must be a whole number"),
    (4, "1e300", "field 4 (run_time) is '1e300'; it must be a whole number of at most 100,000,000,000"),
])
def test_absurd_values_are_errors(tmp_path, field, token, expect):
    parts = "1 0 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1".split()
    parts[field - 1] = token
    p = tmp_path / "bad.swf"
    p.write_text("; MaxProcs: 4\n" + " ".join(parts) + "\n")
    with pytest.raises(SwfError, match=None) as info:
        read_swf(p)
    assert "bad.swf:2:" in str(info.value) and expect in str(info.value)


def test_a_huge_integer_is_an_error(tmp_path):
    p = tmp_path / "big.swf"
    p.write_text("; MaxProcs: 4\n1 0 -1 999999999999999 2 -1 -1 2 9999999999999999 -1 1 1 1 -1 -1 -1 -1 -1\n")
    with pytest.raises(SwfError, match="job 1: a time or count beyond 100,000,000,000"):
        read_swf(p)

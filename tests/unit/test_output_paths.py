"""The -o/-e path rules (JOB-12; IBM bsub -o: %J the job ID, %I the array index or 0; "Specifying
a directory for job output": DIR/ writes DIR/job_ID.out and DIR/job_ID.err)."""

from __future__ import annotations

import pytest

from xced.model.jobs import expand_output_template, output_file_name, resolve_output_path


@pytest.mark.parametrize("template, want", [
    ("out.%J", "out.12"), ("o-%J-%I.txt", "o-12-3.txt"), ("logs/%J/%I/", "logs/12/3/"),
    ("100%%", "100%"), ("%%J", "%J"), ("%%%J", "%12"), ("a%xb", "a%xb"), ("end%", "end%"), ("%", "%"),
    ("plain", "plain"), ("%I%J%%", "312%"),
])
def test_patterns_are_read_left_to_right_once(template, want):
    """JOB-12: %J, %I and %% in one pass (so %%J is the text %J); any other % stays."""
    assert expand_output_template(template, 12, 3) == want


def test_directory_file_names_per_stream_and_array_element():
    """JOB-12 (LSF: job_ID.out / job_ID.err; an array element JOBID_INDEX, LSB_JOB_TMPDIR's form)."""
    assert output_file_name(12, 0, "stdout") == "12.out" and output_file_name(12, 0, "stderr") == "12.err"
    assert output_file_name(12, 7, "stdout") == "12_7.out"
    with pytest.raises(ValueError, match="expected 'stdout' or 'stderr'"):
        output_file_name(12, 0, "stdin")


@pytest.mark.parametrize("template, index, stream, want", [
    ("logs/", 0, "stdout", "/w/logs/12.out"), ("logs/", 0, "stderr", "/w/logs/12.err"),
    ("/abs/%J_%I/", 4, "stdout", "/abs/12_4/12_4.out"), ("o.%J", 0, "stdout", "/w/o.12"),
    ("../up/x", 0, "stdout", "/up/x"), ("pct%%/", 0, "stdout", "/w/pct%/12.out"),
])
def test_resolve_joins_directory_and_cwd(template, index, stream, want):
    """JOB-12: a trailing / names a directory (DIR/ID.out); relative paths are the job's cwd's
    (IBM bsub -o: "If only a file name is specified, LSF writes the output file to the current
    working directory")."""
    assert resolve_output_path(template, 12, index, "/w", stream) == want

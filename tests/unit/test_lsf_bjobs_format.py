"""bjobs' table for a job on several hosts (CLI-8), which the one-host e2e daemon of
tests/e2e/test_lsf_bjobs.py cannot make: held to pysqa's real `bjobs` output
(tests/data/lsf_output_samples/pysqa_bjobs_output.txt, source in tests/data/README.md),
where a parallel job's EXEC_HOST is `N*host`, one host a line, the first cut to the
column's 11 characters and the later ones on continuation lines that start at the
EXEC_HOST column."""

from __future__ import annotations

from tests.conftest import DATA
from xcecli.lsf.bjobs import _table, alloc, host_lines, per_slot

SAMPLE = (DATA / "lsf_output_samples" / "pysqa_bjobs_output.txt").read_text().splitlines()


def _row(jid: int, hosts: str | None, state: str = "RUN") -> dict:
    return {"id": jid, "index": 0, "user": "testuse", "state": state, "queue": "pbatch", "from_host": "tester709",
            "hosts": hosts, "job_name": "pi_None", "submit_time": 1692700080.0}


def test_a_job_on_two_hosts_is_laid_out_as_pysqas_sample():
    lines = _table([_row(5136563, "launch_host:40*batch_hosts")], wide=False, noheader=False, pending=False)
    exec_at, name_at = lines[0].index("EXEC_HOST"), lines[0].index("JOB_NAME")
    s_exec, s_name = SAMPLE[0].index("EXEC_HOST"), SAMPLE[0].index("JOB_NAME")
    assert lines[1][exec_at:name_at] == SAMPLE[1][s_exec:s_name] == "1*launch_ho "
    assert lines[1][name_at:].split()[0] == SAMPLE[1][s_name:].split()[0] == "pi_None"
    assert lines[2] == " " * exec_at + "40*batch_hosts" and SAMPLE[2] == " " * s_exec + "40*batch_hosts"
    assert len(lines) == 3


def test_exec_host_forms():
    """The daemon's `h1:2*h2` cell read back; -w and -o give a host per slot joined by `:`
    (Nextflow's -w sample); the default table `N*host` lines, a bare host for one slot."""
    pairs = alloc("h1:2*h2")
    assert pairs == [("h1", 1), ("h2", 2)]
    assert per_slot(pairs) == "h1:h2:h2" and host_lines(pairs) == ["1*h1", "2*h2"]
    assert host_lines(alloc("h1")) == ["h1"] and alloc(None) == [] and per_slot([]) is None
    wide = _table([_row(7, "h1:2*h2")], wide=True, noheader=True, pending=False)
    assert wide[0].split()[5] == "h1:h2:h2" and len(wide) == 1

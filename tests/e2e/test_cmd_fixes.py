"""End to end: fixes to LSF's commands and to job start found by a tester (issue 18 follow-up;
CLI-8, CLI-3, JOB-1, JOB-12): a `-o` FIFO without a reader, bpeek of a large or unreadable
output, `-h`/`-V` of every LSF command, `bkill "ID[LIST]"`, and bqueues' slot counts and order.

A real xced on a Unix socket, real jobs, the real commands (`python -m xcecli.lsf.NAME`, the
console scripts' main()). LSF sources: IBM's LSF 10.1 command reference (bpeek.1, bkill.1,
bqueues.1, and each command's `-h`: "Prints command usage to stderr and exits"),
docs/lsf-behaviour.md section 5.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.e2e.test_lsf_commands import lsf

pytestmark = pytest.mark.timeout(120)


def test_a_fifo_output_without_a_reader_fails_the_start_with_its_reason(shared_daemon, tmp_path):
    """JOB-12, JOB-1: `-o FIFO` where the FIFO has no reader must not hang the job's start
    (out of reach of bkill, holding its slot): the job ends EXIT at once, its reason naming
    the FIFO; bpeek then says why there is nothing to show. A FIFO with a reader is written
    as any file. (LSF documents no FIFO output; a start that cannot open its output fails,
    as LSF's does for an unwritable -o.)"""
    d = shared_daemon
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    jid = d.submit("-o", str(fifo), "--", "echo", "fifo", cwd=tmp_path)
    j = d.wait_state(jid, ("DONE", "EXIT"), timeout=15)
    assert j["state"] == "EXIT", j
    [e] = j["elements"]
    assert e["exit_reason"] == f"cannot open output: stdout {fifo} is a FIFO with no reader", e
    r = lsf(d, "bpeek", str(jid))
    assert r.returncode == 255 and "Not yet started" not in r.stderr, (r.stdout, r.stderr)
    assert r.stderr == (f"Job <{jid}> : has ended (EXIT); its stdout file could not be opened: the job did not "
                        f"start: cannot open output: stdout {fifo} is a FIFO with no reader\n"), r.stderr
    r = d.cli("peek", str(jid))
    assert r.returncode != 0 and "has no stdout yet" not in r.stderr and "could not be opened" in r.stderr, r.stderr
    # with a reader, the FIFO gets the job's output
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        jid = d.submit("-o", str(fifo), "--", "echo", "through the fifo", cwd=tmp_path)
        j = d.wait_state(jid, ("DONE", "EXIT"), timeout=15)
        assert j["state"] == "DONE", j
        time.sleep(0.1)
        assert os.read(rfd, 4096) == b"through the fifo\n"
    finally:
        os.close(rfd)


def test_bpeek_of_an_unreadable_output_says_why_not_not_yet_started(shared_daemon, tmp_path):
    """CLI-8, CLI-3, D-7: a finished job whose -o is a symbolic link (which the daemon, reading
    as root, does not follow) is not "Not yet started" (LSF bpeek's words for a pending job,
    bpeek.1): bpeek and `xcecli peek` say the job has ended and why its file was not read."""
    d = shared_daemon
    (tmp_path / "real.out").write_text("")
    (tmp_path / "link.out").symlink_to(tmp_path / "real.out")
    jid = d.submit("-o", "link.out", "--", "echo", "via link", cwd=tmp_path)
    assert d.wait_state(jid, ("DONE", "EXIT"))["state"] == "DONE"
    assert (tmp_path / "real.out").read_text() == "via link\n"
    r = lsf(d, "bpeek", str(jid))
    assert (r.returncode, r.stdout) == (255, "")
    assert r.stderr == (f"Job <{jid}> : has ended (DONE); its stdout file could not be opened: "
                        f"{tmp_path / 'link.out'}: it is a symbolic link, which is not followed\n")
    r = d.cli("peek", str(jid))
    assert r.returncode == 1 and "has ended (DONE); its stdout file could not be opened" in r.stderr, r.stderr


def test_peek_of_a_large_output_says_what_it_cuts_and_starts_at_a_line(shared_daemon, tmp_path):
    """CLI-3, CLI-8 (LSF bpeek shows the output so far, bpeek.1): output over the 16 MiB that
    one read returns (over `--bytes N` for xcecli peek) is not cut silently: the first line says
    how many bytes are not shown, and the text shown starts at a line boundary."""
    d = shared_daemon
    line = "0123456789" * 9 + "abcdefghi\n"  # 100 bytes
    n = 170_000  # 17,000,000 bytes
    jid = d.submit("-o", "big.out", "--", "python3", "-c",
                   f"import sys; sys.stdout.write({line!r} * {n})", cwd=tmp_path)
    assert d.wait_state(jid, ("DONE", "EXIT"))["state"] == "DONE"
    size = (tmp_path / "big.out").stat().st_size
    assert size == 100 * n
    cap = 16 * 2**20
    skipped = -(-(size - cap) // 100) * 100  # up to the next line's start
    r = lsf(d, "bpeek", str(jid))
    assert r.returncode == 0, r.stderr
    head, notice, rest = r.stdout.split("\n", 2)
    assert head == "<< output from stdout >>"
    assert notice == f"<< the first {skipped} bytes are not shown: output over 16 MiB >>"
    assert rest.startswith(line) and len(rest) == size - skipped
    r = d.cli("peek", "--bytes", "1050", str(jid))
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"<< the first {size - 1000} bytes are not shown: output over 1050 bytes >>\n" + line * 10


#: every LSF command's options, as its usage must list them (besides -h and -V)
OPTIONS = {"bkill": ("-s", "-r", "-d", "-J", "0"), "bstop": ("-J", "0"), "bresume": ("-J", "0"),
           "brequeue": ("-J", "0"), "bpeek": ("-f", "-J"), "bhist": ("-l", "-a"), "bwait": ("-w", "-t"),
           "bqueues": ("-w",), "bhosts": ("-w",), "bparams": ("-a", "-l"), "badmin": ("showconf mbd",),
           "lsid": ()}


@pytest.mark.parametrize("cmd", sorted(OPTIONS))
def test_every_lsf_command_prints_its_usage_for_h_and_its_version_for_v(shared_daemon, cmd):
    """CLI-8: LSF's commands take `-h` ("Prints command usage to stderr and exits") and `-V`
    ("Prints LSF release version to stderr and exits"), exit 0 (IBM lsid.1, bkill.1 ... the
    same words on each page); the usage lists the command's options. Other options given
    with -h are not acted on (nothing is killed)."""
    d = shared_daemon
    r = lsf(d, cmd, "-h")
    assert (r.returncode, r.stdout) == (0, ""), r.stderr
    assert r.stderr.startswith(f"Usage: {cmd} [-h] [-V]"), r.stderr
    for opt in OPTIONS[cmd]:
        assert opt in r.stderr, (opt, r.stderr)
    r = lsf(d, cmd, "-V")
    assert (r.returncode, r.stdout) == (0, "")
    assert r.stderr.startswith("XCE ") and r.stderr.endswith(", LSF-compatible commands (CLI-8)\n"), r.stderr


def test_bkill_h_with_an_id_prints_the_usage_and_kills_nothing(shared_daemon, tmp_path):
    """CLI-8 (IBM bkill.1, -h: prints the usage and exits): `bkill -h ID` leaves ID running."""
    d = shared_daemon
    jid = d.submit("--", "sleep", "60", cwd=tmp_path)
    d.wait_state(jid, ("RUN",))
    r = lsf(d, "bkill", "-h", str(jid))
    assert r.returncode == 0 and r.stderr.startswith("Usage: bkill")
    assert d.show(jid)["state"] == "RUN"
    lsf(d, "bkill", str(jid))


def test_bkill_bstop_bresume_take_an_index_list(shared_daemon, tmp_path):
    """CLI-8: bkill, bstop and bresume take LSF's `"job_ID[index_list]"` (IBM bkill.1
    synopsis `"job_ID[index]"`; lists `start-end[:step],...` as bsub -J and bjobs take them):
    each element named is acted on, the others are left alone; a malformed list is LSF's
    "Illegal job ID"."""
    d = shared_daemon
    jid = d.submit("-J", "arr[1-4]", "--", "sleep", "60", cwd=tmp_path)  # the 4 slots
    deadline = time.monotonic() + 20
    while {e["state"] for e in d.show(jid)["elements"]} != {"RUN"}:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    r = lsf(d, "bstop", f"{jid}[1,3]")
    assert (r.returncode, r.stdout) == (0, f"Job <{jid}[1]> is being stopped\nJob <{jid}[3]> is being stopped\n")
    r = lsf(d, "bresume", f"{jid}[1-3:2]")
    assert (r.returncode, r.stdout) == (0, f"Job <{jid}[1]> is being resumed\nJob <{jid}[3]> is being resumed\n")
    r = lsf(d, "bkill", f"{jid}[3-4]")
    assert (r.returncode, r.stdout) == (0, f"Job <{jid}[3]> is being terminated\nJob <{jid}[4]> is being terminated\n")
    deadline = time.monotonic() + 20
    while True:
        states = {e["index"]: e["state"] for e in d.show(jid)["elements"]}
        if states[3] == states[4] == "EXIT" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert states == {1: "RUN", 2: "RUN", 3: "EXIT", 4: "EXIT"}, states
    r = lsf(d, "bkill", f"{jid}[5-4]")
    assert r.returncode == 255 and f"{jid}[5-4]: Illegal job ID" in r.stderr
    r = lsf(d, "bpeek", f"{jid}[1-2]")
    assert r.returncode == 255 and "not a list of elements" in r.stderr
    assert lsf(d, "bkill", str(jid)).returncode == 0


def test_bqueues_counts_slots_and_lists_queues_by_priority(daemon, tmp_path):
    """CLI-8: bqueues' NJOBS, PEND, RUN and SUSP are slots (IBM bqueues.1: "NJOBS: The total
    number of slots for jobs in the queue"): a stopped `-n 2` job is SUSP 2, as bhosts shows
    it USUSP 2; a pending `-n 3` job is PEND 3. Queues are listed "in order of priority"
    (bqueues.1), highest first."""
    d = daemon
    from tests.conftest import write_config

    write_config(d.top, extra_queues="  - name: low\n    priority: 10\n  - name: high\n    priority: 50\n")
    d.stop()
    d.start()
    jid = d.submit("-n", "2", "--", "sleep", "60", cwd=tmp_path)
    d.wait_state(jid, ("RUN",))
    assert lsf(d, "bstop", str(jid)).returncode == 0
    d.wait_state(jid, ("USUSP",))
    big = d.submit("-n", "3", "--", "sleep", "60", cwd=tmp_path)  # 2 of 4 slots free: it pends
    d.wait_state(big, ("PEND",))
    lines = [ln.split() for ln in lsf(d, "bqueues").stdout.splitlines()]
    assert [ln[:2] for ln in lines[1:]] == [["high", "50"], ["normal", "30"], ["low", "10"]]
    assert lines[2][7:] == ["5", "3", "0", "2"], lines
    hosts = lsf(d, "bhosts").stdout.splitlines()[1].split()
    assert hosts[4:8] == ["2", "0", "0", "2"], hosts
    assert lsf(d, "bkill", "0").returncode == 0

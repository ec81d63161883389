"""LSF's query commands' display options on a real xced (CLI-8, CLI-3; issue 18's remaining
gaps): `bjobs -A`, `bjobs -sum`, `bjobs -p0`..`-p3`, `bqueues -l`, `bhosts -l` and bhosts'
USUSP/SSUSP/RSV columns, `bhist -n`.

Each command runs as a user runs it, `python -m xcecli.lsf.NAME`, against a real daemon
with real job processes. The LSF behaviour each follows is docs/lsf-behaviour.md sections 4
and 5 with the sources cited in each test (IBM's LSF 10.1 command reference, and OpenLava's
lsbatch/cmd sources, LSF's open-source ancestor, for the exact column layouts).

The cluster: h1 (4 slots, served by the daemon's own worker) and h2 (2 slots, in hosts.yaml
but served by no worker: `unavail`), queue `normal` and a queue `short` with limits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from tests.conftest import XCEADMIN, _daemon_fixture, short_tmpdir
from tests.e2e.test_lsf_commands import HEAVY, lsf

pytestmark = pytest.mark.timeout(120)

SHORT = ("  - name: short\n    priority: 50\n    description: quick jobs\n    max_tasks: 2\n"
         "    max_run_limit: 10m\n    max_memory: 512MB\n    backfill: true\n")


def run(d, name: str, *args: str, env: dict | None = None, importtime: bool = False):
    """LSF command `name` with `args` against daemon `d` (tests.e2e.test_lsf_commands.lsf),
    with `env` added to its environment and LSB_BJOBS_PENDREASON_LEVEL unset unless given."""
    saved = {k: os.environ.get(k) for k in ("LSB_BJOBS_PENDREASON_LEVEL", *(env or {}))}
    os.environ.pop("LSB_BJOBS_PENDREASON_LEVEL", None)
    os.environ.update(env or {})
    try:
        return lsf(d, name, *args, importtime=importtime)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def cluster():
    """A daemon with h1 served and h2 unavail, and these jobs, all of the test user:
    `fin[1-2]` (an array, both DONE), `big` (-n 3, RUN on h1), `arr[1-3]` (element 1 RUN
    then stopped: USUSP; 2 PEND for want of a slot; 3 held: PSUSP). Yields (daemon, ids)."""
    top = short_tmpdir()
    gen = _daemon_fixture(top, extra_queues=SHORT)
    try:
        d = next(gen)
        d.stop()
        (d.top / "config" / "hosts.yaml").write_text(
            "hosts:\n  - name: h1\n    slots: 4\n    memory: 8GB\n  - name: h2\n    slots: 2\n    memory: 4GB\n")
        with open(d.top / "config" / "xce.yaml", "a") as f:
            f.write("clean_period: 0\n")  # a finished job leaves memory at once (bhist -n reads the store)
        d.args = ["--host-name", "h1"]  # the daemon's own worker serves h1 of the two
        d.start()
        ids = {"fin": d.submit("-J", "fin[1-2]", "--", "true")}
        d.wait_state(ids["fin"], ("DONE",))
        ids["big"] = d.submit("-n", "3", "-J", "big", "--", "sleep", "60")
        d.wait_state(ids["big"], ("RUN",))
        ids["arr"] = d.submit("-J", "arr[1-3]", "--", "sleep", "60")
        deadline = time.monotonic() + 20
        while d.show(ids["arr"])["counts"].get("RUN") != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run(d, "bstop", f"{ids['arr']}[1]").returncode == 0
        assert run(d, "bstop", f"{ids['arr']}[3]").returncode == 0
        deadline = time.monotonic() + 20
        while d.show(ids["arr"])["counts"] != {"USUSP": 1, "PEND": 1, "PSUSP": 1} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert d.show(ids["arr"])["counts"] == {"USUSP": 1, "PEND": 1, "PSUSP": 1}
        yield d, ids
    finally:
        gen.close()  # stops the daemon and kills its job processes
        shutil.rmtree(top, ignore_errors=True)


def test_bjobs_A_sums_up_each_array_in_lsfs_columns(cluster):
    """CLI-8: `bjobs -A` prints one line per job array, `JOBID ARRAY_SPEC OWNER NJOBS PEND
    DONE RUN EXIT SSUSP USUSP PSUSP` (the header of OpenLava's lsbatch/cmd/bjobs.c, LSF's
    ancestor, and what scripts that poll `bjobs -A` print and read by column): by default
    the arrays with an unfinished element, with -a the finished ones too; a job that is
    not an array is left out; -w gives the name in full; an index list with -A is refused
    (IBM bjobs -A: "do not include the index list"). docs/lsf-behaviour.md section 5 [91, 92]."""
    d, ids = cluster
    r = run(d, "bjobs", "-A")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "JOBID    ARRAY_SPEC  OWNER   NJOBS PEND DONE  RUN EXIT SSUSP USUSP PSUSP"
    user = d.show(ids["arr"])["user"]
    assert [ln.split() for ln in lines[1:]] == [[str(ids["arr"]), "arr[1-3]", user[:8], "3", "1", "0", "0", "0", "0",
                                                 "1", "1"]]
    rows = {ln.split()[0]: ln.split() for ln in run(d, "bjobs", "-A", "-a", "-w").stdout.splitlines()[1:]}
    assert rows[str(ids["fin"])] == [str(ids["fin"]), "fin[1-2]", user, "2", "0", "2", "0", "0", "0", "0", "0"]
    assert str(ids["big"]) not in rows and str(ids["arr"]) in rows
    by_id = run(d, "bjobs", "-A", str(ids["fin"])).stdout.splitlines()
    assert by_id[1].split()[:4] == [str(ids["fin"]), "fin[1-2]", user[:8], "2"]
    r = run(d, "bjobs", "-A", f"{ids['arr']}[1]")
    assert r.returncode == 255 and "without an index list" in r.stderr
    r = run(d, "bjobs", "-A", "-l")
    assert r.returncode == 255 and "-A cannot be used with -l" in r.stderr


def test_bjobs_sum_counts_the_slots_of_unfinished_jobs_by_state(cluster):
    """CLI-8: `bjobs -sum` prints IBM's columns `RUN SSUSP USUSP UNKNOWN PEND FWD_PEND PSUSP`
    laid out as IBM's example, counting slots ("displays the count of job slots"): big's 3
    running, arr[1]'s 1 stopped, arr[2]'s 1 pending, arr[3]'s 1 held; XCE has no SSUSP,
    UNKNOWN or FWD_PEND jobs. Filters narrow it (-q), a state option is refused. Source:
    https://www.ibm.com/support/knowledgecenter/SSWRJV_10.1.0/lsf_command_ref/bjobs.sum.1.html"""
    d, _ = cluster
    r = run(d, "bjobs", "-sum")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("RUN        SSUSP       USUSP      UNKNOWN    PEND       FWD_PEND  PSUSP\n"
                        "3          0           1          0          1          0         1\n")
    assert run(d, "bjobs", "-sum", "-q", "short").stdout.splitlines()[1].split() == ["0"] * 7
    flex = d.submit("-q", "short", "-n", "1,2", "--", "true")  # pends (no free slot): asks for at least 1
    try:
        assert run(d, "bjobs", "-sum", "-q", "short").stdout.splitlines()[1].split() == ["0"] * 4 + ["1", "0", "0"]
    finally:
        run(d, "bkill", str(flex))
        d.wait_state(flex, ("EXIT",))
    r = run(d, "bjobs", "-sum", "-r")
    assert r.returncode == 255 and "takes no state option (-r given)" in r.stderr


def test_bjobs_p_levels_give_the_main_reason_and_the_hosts_reasons(cluster):
    """CLI-8, RES-6: the -p levels of IBM's bjobs -p (and LSB_BJOBS_PENDREASON_LEVEL): -p1
    the single key reason; -p0 (LSF before 10.1) the main reason and each host reason with
    its number of hosts; -p2 the candidate hosts' reasons under `Candidate host pending
    reasons (K of N hosts):`; -p3 also `Non-candidate host pending reasons (M of N hosts):`
    (the shape of LSF's own text, as IBM's Python API example shows it). h1 is a candidate
    without a free slot; h2, served by no worker, is a non-candidate. A bare -p takes the
    level from LSB_BJOBS_PENDREASON_LEVEL, 0 when unset. Sources: docs/lsf-behaviour.md
    section 4 [33, 35, 90]."""
    d, ids = cluster
    pend = str(ids["arr"])

    def reasons(*args: str, env: dict | None = None) -> list[str]:
        r = run(d, "bjobs", *args, env=env)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0].split() == ["JOBID", "USER", "STAT", "QUEUE", "FROM_HOST", "JOB_NAME", "SUBMIT_TIME"]
        assert lines[1].split()[:3] == [pend, d.show(ids["arr"])["user"], "PEND"]
        assert all(ln[:1] == " " for ln in lines[2:]), "one pending row, its reasons under it"
        return lines[2:]

    one = reasons("-p1")
    assert len(one) == 1 and one[0].startswith(" ") and one[0].endswith(";") and "slot" in one[0]
    zero = reasons("-p0")
    assert zero[0] == one[0]
    assert zero[1:] == [" Not enough free job slots: 1 host;", " Host status unavail: 1 host;"]
    assert reasons("-p") == zero  # LSF's default level is 0
    assert reasons("-p", env={"LSB_BJOBS_PENDREASON_LEVEL": "1"}) == one
    two = reasons("-p2")
    assert two == [one[0], " Candidate host pending reasons (1 of 2 hosts):", "   Not enough free job slots: 1 host;"]
    three = reasons("-p3")
    assert three == two + [" Non-candidate host pending reasons (1 of 2 hosts):", "   Host status unavail: 1 host;"]
    assert reasons("-p3", pend) == three  # the job named by its ID
    assert reasons("-p0", "-q", "normal", "-u", "all") == zero
    r = run(d, "bjobs", "-p1", "-p3")
    assert r.returncode == 255 and "give one pending-reason level" in r.stderr
    r = run(d, "bjobs", "-p", env={"LSB_BJOBS_PENDREASON_LEVEL": "7"})
    assert r.returncode == 255 and "LSB_BJOBS_PENDREASON_LEVEL='7'" in r.stderr


def test_bqueues_l_prints_each_queues_parameters_and_limits(cluster):
    """CLI-8: `bqueues -l QUEUE` in LSF's long form (the layout of OpenLava's
    lsbatch/cmd/bqueues.c prtQueuesLong; IBM bqueues.1 -l: "queue description, queue
    characteristics and statistics, scheduling parameters, resource usage limits,
    scheduling policies, users, hosts"): `QUEUE: NAME`, the description, PARAMETERS/STATISTICS
    with PRIO NICE STATUS MAX JL/U JL/P JL/H NJOBS PEND RUN SSUSP USUSP RSV, the limits the
    queue sets (RUNLIMIT in minutes, TASKLIMIT, MEMLIMIT) and `unlimited` for those it does
    not, BACKFILL, USERS and HOSTS. `-l -w` is refused, as LSF's synopsis `[-w | -l]`.
    docs/lsf-behaviour.md section 5 [93]."""
    d, _ = cluster
    r = run(d, "bqueues", "-l", "short")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:6] == ["", "QUEUE: short", "  -- quick jobs", "", "PARAMETERS/STATISTICS",
                         "PRIO NICE STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN SSUSP USUSP  RSV"]
    assert lines[6].split() == ["50", "0", "Open:Active", "2", "-", "-", "-", "0", "0", "0", "0", "0", "0"]
    text = r.stdout
    for block in (" RUNLIMIT\n 10.0 min\n", " TASKLIMIT\n 2\n", " MEMLIMIT\n 512 M\n", " HOSTLIMIT_PER_JOB\n unlimited\n",
                  "SCHEDULING POLICIES:  BACKFILL\n", "USERS: all\nHOSTS:  all\n"):
        assert block in text, block
    normal = run(d, "bqueues", "-l", "normal").stdout
    assert "  -- No description provided.  This is the default queue.\n" in normal
    stats = normal.splitlines()[6].split()
    assert stats[:3] == ["30", "0", "Open:Active"] and stats[7:] == ["6", "2", "3", "0", "1", "0"]
    assert " RUNLIMIT\n unlimited\n" in normal and "BACKFILL" not in normal
    both = run(d, "bqueues", "-l").stdout
    assert both.index("QUEUE: short") < both.index("QUEUE: normal") and "-" * 79 in both  # by priority
    r = run(d, "bqueues", "-l", "-w")
    assert r.returncode == 255 and "-l and -w cannot be used together" in r.stderr
    assert run(d, "bqueues", "-l", "nosuch").stderr == "nosuch: No such queue\n"


def test_bhosts_counts_stopped_array_elements_and_l_shows_the_host(cluster):
    """CLI-8: bhosts' USUSP counts the slots of every stopped element on the host, an array
    element's too (arr[1]), and RUN the rest; SSUSP and RSV are 0, for the reasons
    docs/lsf-behaviour.md section 5 [94] gives (XCE never suspends a job itself; its
    backfill reserves a start time, not slots). `bhosts -l HOST` prints LSF's long form (the
    layout of OpenLava's lsbatch/cmd/bhosts.c prtHostsLong; IBM bhosts.1 -l): `HOST NAME`,
    STATUS CPUF JL/U MAX NJOBS RUN SSUSP USUSP RSV DISPATCH_WINDOW, the current load with
    the memory jobs reserve, and the load thresholds; a host no worker serves has no
    current load; a host an admin closed is closed_Adm with the admin's comment (LSF 6.0
    bhosts -l: "If you specified an administrator comment ..., -l displays the comment text")."""
    d, _ = cluster
    lines = run(d, "bhosts").stdout.splitlines()
    assert lines[1].split() == ["h1", "ok", "-", "4", "4", "3", "0", "1", "0"]
    assert lines[2].split() == ["h2", "unavail", "-", "2", "0", "0", "0", "0", "0"]
    r = run(d, "bhosts", "-l", "h1")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[:2] == ["HOST  h1", "STATUS           CPUF  JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV DISPATCH_WINDOW"]
    assert out[2].split() == ["ok", "1.00", "-", "4", "4", "3", "0", "1", "0", "-"]
    at = out.index(" CURRENT LOAD USED FOR SCHEDULING:")
    assert out[at + 1].split() == ["r15s", "r1m", "r15m", "ut", "pg", "io", "ls", "it", "tmp", "swp", "mem"]
    assert out[at + 2].split()[0] == "Total" and out[at + 2].split()[-1] == "8.0G"  # nothing reserves memory
    assert out[at + 3].split()[0] == "Reserved" and out[at + 3].split()[-1] == "0M"
    assert " LOAD THRESHOLD USED FOR SCHEDULING:" in out
    h2 = run(d, "bhosts", "-l", "h2").stdout
    assert h2.splitlines()[2].split()[0] == "unavail" and "CURRENT LOAD" not in h2
    r = run(d, "bhosts", "-l", "-w")
    assert r.returncode == 255 and "-l and -w cannot be used together" in r.stderr
    env = {**os.environ, "XCE_TOPDIR": str(d.top), "XCE_TEST_USER": "admin"}
    subprocess.run([XCEADMIN, "hosts", "close", "h1", "--reason", "disk swap"], env=env, check=True,
                   capture_output=True)
    try:
        closed = run(d, "bhosts", "-l", "h1").stdout.splitlines()
        assert closed[2].split()[0] == "closed_Adm"
        assert ' ADMIN ACTION COMMENT: "disk swap" (by admin)' in closed
    finally:
        subprocess.run([XCEADMIN, "hosts", "open", "h1"], env=env, check=True, capture_output=True)


def test_bhist_n_is_taken_and_every_search_reads_the_whole_store(cluster):
    """CLI-8, JOB-11: `bhist -n N` (LSF: search N event log files, the current one and the
    N-1 before it; `-n 0` all; `-n MIN,MAX` a range; at most 100) is taken, and XCE, which
    keeps every job's events in one store that is never rotated, reads all of it whatever
    N is: fin, which left the daemon's memory at once (clean_period 0), is found by ID with
    `-n 1` as without -n, and listed by `-a -n 0`. A bad value is refused saying what is
    valid. Sources: bhist.1's synopsis, lsb.events.5 (docs/lsf-behaviour.md section 5 [95])."""
    d, ids = cluster
    fin = str(ids["fin"])
    plain = run(d, "bhist", fin)
    assert plain.returncode == 0, plain.stderr
    assert [ln.split()[0] for ln in plain.stdout.splitlines()[2:]] == [f"{fin}[1]", f"{fin}[2]"]
    for n in ("1", "0", "3", "0,5"):
        r = run(d, "bhist", "-n", n, fin)
        assert (r.returncode, r.stdout) == (0, plain.stdout), (n, r.stderr)
    listed = run(d, "bhist", "-a", "-n", "0")
    assert listed.returncode == 0 and f"{fin}[1]" in listed.stdout
    for bad in ("x", "101", "-1", "5,2"):
        r = run(d, "bhist", "-n", bad, fin)
        assert r.returncode == 255 and "0 to 100 (0: all)" in r.stderr, (bad, r.stderr)


@pytest.mark.parametrize("cmd", [("bjobs", "-A"), ("bjobs", "-sum"), ("bjobs", "-p2"), ("bqueues", "-l"),
                                 ("bhosts", "-l"), ("bhist", "-n", "0", "987663")])
def test_the_new_options_import_no_pydantic_rich_or_typer(cluster, cmd):
    """CLI-7: the display options stay on the LSF commands' start-up budget: no pydantic,
    rich, typer or click (nor orjson, http.client, httpx) on their path (as
    tests/cli/test_fast.py checks)."""
    d, _ = cluster
    r = run(d, *cmd, importtime=True)
    mods = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "xcecli.lsf.common" in mods, r.stderr[-2000:]
    assert sorted(m for m in mods if m.split(".")[0] in HEAVY) == []

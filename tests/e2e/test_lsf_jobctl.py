"""End to end: the job selection of LSF's bkill and brequeue on a real xced (CLI-8, CLI-3,
JOB-1, D-5): bkill's filters `-u`, `-q`, `-m`, `-app`, `-J` with `0` (every job they match)
and without an ID (the most recently submitted one), an index list sent as one request, and
brequeue's state options `-e`, `-d`, `-r`, `-a` and `-H`.

Each command runs as a user runs it (`python -m xcecli.lsf.NAME`, the console script's
`main()`). Sources: IBM's bkill.1 and brequeue.1 (docs/lsf-behaviour.md section 5, [44],
[46]), OpenLava's bkill/brequeue sources for the messages and defaults ([80], [81]), and
section 6 for where XCE differs.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

from tests.conftest import Daemon, _daemon_fixture, short_tmpdir
from tests.e2e.test_lsf_commands import lsf

pytestmark = pytest.mark.timeout(120)

APPS = "applications:\n  myapp:\n    description: a profile to select by\n"


@pytest.fixture(scope="module")
def d():
    """One xced for the module: host h1 (4 slots), queues normal and short, profile myapp."""
    top = short_tmpdir()
    (top / "config").mkdir()
    (top / "config" / "applications.yaml").write_text(APPS)
    try:
        yield from _daemon_fixture(top, extra_queues="  - name: short\n    priority: 40\n")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _ended(d: Daemon, *jobs: int) -> None:
    for j in jobs:
        d.wait_state(j, ("EXIT", "DONE"))


def _states(d: Daemon, jid: int) -> dict[int, str]:
    return {e["index"]: e["state"] for e in d.show(jid)["elements"]}


def test_bkill_filters_take_the_last_matching_job_and_with_0_every_one(d):
    """CLI-8, JOB-1: bkill.1 ("If you specify the -app, -g, -J, -m, -u, or -q option without
    a job ID, the bkill command kills the last job that was submitted by the user who ran the
    command. Specify job ID 0 to kill multiple jobs"): `bkill -q short` kills only the
    caller's newest job in that queue; `bkill -q short 0` every other one of his there, not
    another user's; `-u all -q short 0` (an admin) that user's too. None left: LSF's "No
    unfinished job found in queue <short>" (OpenLava cmd.err.c), exit 255; an unknown queue
    is refused naming the queues; neither an ID nor a filter is LSF's usage error, and
    nothing is killed."""
    a = d.submit("-q", "short", "--", "sleep", "60", user="ku1")
    b = d.submit("--", "sleep", "60", user="ku1")
    c = d.submit("-q", "short", "--", "sleep", "60", user="ku1")
    other = d.submit("-q", "short", "--", "sleep", "60", user="ku2")
    r = lsf(d, "bkill", "-q", "short", user="ku1")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{c}> is being terminated\n", "")
    _ended(d, c)
    assert d.show(a)["state"] in ("PEND", "RUN") and d.show(b)["state"] in ("PEND", "RUN")
    r = lsf(d, "bkill", "-q", "short", "0", user="ku1")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{a}> is being terminated\n", "")
    _ended(d, a)
    r = lsf(d, "bkill", "-q", "short", "0", user="ku1")
    assert (r.returncode, r.stdout, r.stderr) == (255, "", "bkill: No unfinished job found in queue <short>\n")
    r = lsf(d, "bkill", "-q", "nosuch", "0", user="ku1")
    assert r.returncode == 255 and "no such queue" in r.stderr and "normal, short" in r.stderr, r.stderr
    r = lsf(d, "bkill", user="ku1")
    assert (r.returncode, r.stdout) == (255, "") and "Job ID or one of '-m', '-u', '-q', '-J'" in r.stderr
    assert d.show(other)["state"] in ("PEND", "RUN") and d.show(b)["state"] in ("PEND", "RUN")
    r = lsf(d, "bkill", "-u", "all", "-q", "short", "0", user="admin")
    assert (r.returncode, r.stdout) == (0, f"Job <{other}> is being terminated\n"), r.stderr
    _ended(d, other)
    assert d.show(b)["state"] in ("PEND", "RUN")
    r = lsf(d, "bkill", "-u", "ku1", "-J", "nosuch*", "0", user="ku1")
    assert (r.returncode, r.stderr) == (255, "bkill: Job <nosuch*> is not found\n")
    # a name with an escape or a newline is echoed escaped, on one line (a second fresh tester's find)
    r = lsf(d, "bkill", "-u", "ku1", "-J", "\x1b[31mred\nx", "0", user="ku1")
    assert (r.returncode, r.stderr) == (255, "bkill: Job <\\x1b[31mred\\nx> is not found\n")
    assert lsf(d, "bkill", str(b), user="ku1").returncode == 0
    _ended(d, b)


def test_bkill_m_takes_the_jobs_on_that_host_and_app_those_of_that_profile(d):
    """CLI-8, JOB-1: `bkill -m h1 0` kills the jobs dispatched to h1 and not a pending one
    (OpenLava's "-m host_name", IBM's "Kill multiple jobs": `bkill -m hostA 0`); an unknown
    host is LSF's "Bad host name, host group name or cluster name" listing the hosts;
    `bkill -app myapp` the newest job of that profile, `-app myapp 0` every one (bkill.1)."""
    r1 = d.submit("--", "sleep", "60", user="ku3")
    d.wait_state(r1, ("RUN",))
    waiting = d.submit("-w", f"done({r1})", "--", "true", user="ku3")  # pends: never dispatched
    r = lsf(d, "bkill", "-m", "nohost", "0", user="ku3")
    assert (r.returncode, r.stdout) == (255, "")
    assert r.stderr == "bkill: nohost: Bad host name, host group name or cluster name; the hosts are: h1\n"
    r = lsf(d, "bkill", "-m", "h1", "0", user="ku3")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{r1}> is being terminated\n", "")
    _ended(d, r1)
    assert d.show(waiting)["state"] == "PEND"
    r = lsf(d, "bkill", "-m", "h1", "0", user="ku3")
    assert (r.returncode, r.stderr) == (255, "bkill: No unfinished job found on host/group <h1>\n")
    ap1 = d.submit("-a", "myapp", "--", "sleep", "60", user="ku3")
    ap2 = d.submit("-a", "myapp", "--", "sleep", "60", user="ku3")
    r = lsf(d, "bkill", "-app", "myapp", user="ku3")
    assert (r.returncode, r.stdout) == (0, f"Job <{ap2}> is being terminated\n"), r.stderr
    _ended(d, ap2)
    r = lsf(d, "bkill", "-app", "myapp", "0", user="ku3")
    assert (r.returncode, r.stdout) == (0, f"Job <{ap1}> is being terminated\n"), r.stderr
    _ended(d, ap1)
    assert d.show(waiting)["state"] == "PEND"
    assert lsf(d, "bkill", str(waiting), user="ku3").returncode == 0


def test_bkill_stat_kills_the_jobs_in_that_status_and_b_skips_those_it_cannot_kill(d):
    """CLI-8, JOB-1: IBM bkill.1's `-stat run | pend | susp` ("Kills large numbers of jobs in
    the specified status ... silently skips the jobs that LSF cannot kill"; no job ID needed)
    kills the caller's jobs in that status only: pend a pending one, susp a held one (PSUSP),
    and with IDs only those of them in that status, the others left alone, exit 0. `-stat
    pend` takes -s INT, KILL or TERM only, and -stat excludes -b; none in that status is
    OpenLava's `No pending job found`, and an unknown job ID is still named (exit 255): it is
    no job that cannot be killed. `bkill -b 0` kills what it may and skips silently what it
    may not (another user's job), where plain `bkill 0` names each refusal and exits 255."""
    run = d.submit("--", "sleep", "60", user="kx1")
    d.wait_state(run, ("RUN",))
    pend = d.submit("-w", f"done({run})", "--", "true", user="kx1")  # pends until run ends
    held = d.submit("-H", "--", "true", user="kx1")
    r = lsf(d, "bkill", "-stat", "pend", "-s", "USR1", user="kx1")
    assert (r.returncode, r.stdout) == (255, "") and "a pending job takes only INT, KILL or TERM" in r.stderr
    r = lsf(d, "bkill", "-b", "-stat", "run", user="kx1")
    assert (r.returncode, r.stderr) == (255, "bkill: -b and -stat exclude each other (LSF: [-b | -stat run | pend | "
                                             "susp]); give one\n")
    r = lsf(d, "bkill", "-stat", "hold", user="kx1")
    assert (r.returncode, r.stderr) == (255, "bkill: -stat hold: not a status bkill takes; give run, pend or susp\n")
    r = lsf(d, "bkill", "-stat", "pend", user="kx1")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{pend}> is being terminated\n", "")
    r = lsf(d, "bkill", "-stat", "pend", user="kx1")  # OpenLava's words for a status none is in
    assert (r.returncode, r.stdout, r.stderr) == (255, "", "bkill: No pending job found\n")
    r = lsf(d, "bkill", "-stat", "run", "99999", user="kx1")  # an unknown job is named: no job to skip
    assert (r.returncode, r.stdout, r.stderr) == (255, "", "Job <99999>: No matching job found\n")
    r = lsf(d, "bkill", "-stat", "pend", str(run), user="kx1")  # IDs, none in that status: said, not exit 0
    assert (r.returncode, r.stdout, r.stderr) == (255, "", "bkill: No pending job found\n")
    r = lsf(d, "bkill", "-b", f"{held}[", user="kx1")  # a malformed ID acts on nothing
    assert r.returncode == 255 and r.stderr.startswith(f"bkill: {held}[: Illegal job ID"), r.stderr
    assert d.show(held, user="kx1")["state"] == "PSUSP"
    assert [d.show(j, user="kx1")["state"] for j in (run, pend, held)] == ["RUN", "EXIT", "PSUSP"]
    r = lsf(d, "bkill", "-stat", "susp", str(run), str(held), user="kx1")  # run is not suspended: left alone
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{held}> is being terminated\n", "")
    assert [d.show(j, user="kx1")["state"] for j in (run, held)] == ["RUN", "EXIT"]
    other = d.submit("-q", "short", "--", "sleep", "60", user="kx2")
    mine = d.submit("-q", "short", "-H", "--", "true", user="kx1")
    r = lsf(d, "bkill", "-u", "all", "-q", "short", "0", user="kx1")
    assert r.returncode == 255 and f"Job <{other}>: " in r.stderr, r.stderr
    assert f"Job <{mine}> is being terminated\n" in r.stdout
    mine = d.submit("-q", "short", "-H", "--", "true", user="kx1")
    r = lsf(d, "bkill", "-b", "-u", "all", "-q", "short", "0", user="kx1")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{mine}> is being terminated\n", "")
    assert d.show(other, user="kx2")["state"] in ("PEND", "RUN")
    r = lsf(d, "bkill", "-b", "-u", "kx2", "0", user="kx1")  # every job selected skipped: nothing done, said so
    assert (r.returncode, r.stdout) == (255, "") and "none of the 1 jobs selected could be killed" in r.stderr, r.stderr
    r = lsf(d, "bkill", "-stat", "run", user="kx1")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{run}> is being terminated\n", "")
    _ended(d, run)
    assert lsf(d, "bkill", str(other), user="kx2").returncode == 0
    _ended(d, other)


def test_bkill_C_records_the_kill_reason_in_the_history_and_a_pending_jobs_exit_reason(d):
    """CLI-8, CLI-3, D-5: IBM bkill.1's `-C kill_reason`: the reason is recorded with the kill.
    A pending job's exit reason ends with it (bjobs -l, xcecli show); a running job's kill
    request carries it (bhist -l, xcecli hist). One line only: a newline is refused naming
    the field (a usage error, exit 255, nothing killed), a bidi override is shown escaped; -C with -s is a usage error (bkill, and
    `xcecli kill -C` alike), and so is a blank reason."""
    run = d.submit("--", "sleep", "60", user="kx3")
    held = d.submit("-H", "--", "true", user="kx3")
    d.wait_state(run, ("RUN",))
    r = lsf(d, "bkill", "-C", "wrong input", str(held), user="kx3")
    assert (r.returncode, r.stdout) == (0, f"Job <{held}> is being terminated\n"), r.stderr
    e = d.show(held, user="kx3")["elements"][0]
    assert e["exit_reason"] == "killed by kx3 while pending; kill reason: wrong input", e
    assert "Exit reason: killed by kx3 while pending; kill reason: wrong input." in lsf(d, "bjobs", "-l", str(held),
                                                                                         user="kx3").stdout
    r = lsf(d, "bkill", "-s", "USR1", "-C", "x", str(run), user="kx3")
    assert (r.returncode, r.stderr) == (255, "bkill: -C (a kill reason) goes with a kill, not with one signal (-s); "
                                             "give one of them\n")
    r = d.cli("kill", "-s", "TERM", "-C", "x", str(run), user="kx3")
    assert r.returncode == 2 and "a kill reason (-C) goes with a kill, not with one signal" in r.stderr, r.stderr
    for bad, says in (("two\nlines", "the kill reason holds a control character ('\\n')"),
                      ("   ", "the kill reason is blank"), ("x" * 1025, "the kill reason has 1025 characters"),
                      ("\u202e\u200b", "the kill reason is blank (or only invisible characters)"),
                      ("caf\udce9", "the kill reason is not UTF-8 text")):
        for more in ((), ("-stat", "run"), ("-b",)):  # told once, before anything is sent, whatever else is given
            r = lsf(d, "bkill", *more, "-C", bad, "0" if more else str(run), user="kx3")
            assert (r.returncode, r.stdout) == (255, "") and r.stderr.startswith(f"bkill: -C: {says}"), r.stderr
            assert r.stderr.count("\n") == 1, r.stderr
        r = d.cli("kill", "-C", bad, str(run), user="kx3")
        assert r.returncode == 2 and says in r.stderr and "'-C' / '--comment'" in r.stderr, r.stderr
    assert d.show(run, user="kx3")["state"] == "RUN"
    r = d.cli("kill", "-C", "out \u202eof time", str(run), user="kx3")
    assert r.returncode == 0, r.stderr
    _ended(d, run)
    events = json.loads(d.cli("hist", str(run), "--json", user="kx3", check=True).stdout)["events"]
    assert [ev["reason"] for ev in events if ev["kind"] == "KILL_REQUEST"] == ["kill reason: out \u202eof time"]
    out = lsf(d, "bhist", "-l", str(run), user="kx3").stdout
    assert "Signal <KILL> requested by user or administrator <kx3>; kill reason: out \\u202eof time;" in out, out
    assert "\u202e" not in out


def test_post_jobs_kill_kills_many_in_one_request_each_answered_in_its_place(d):
    """CLI-8, CLI-3, D-8: POST /jobs/kill (what `bkill 0` and `bkill ID ID ...` send, up to
    2,000 targets a request) kills each target as POST /jobs/{id}/kill would, and answers
    each in the order given: one acted on with its elements, one refused (unknown, finished,
    another user's) with the code and message of the one-job route, the others still
    killed. An empty or oversized list, or a bad target, is refused whole (422) naming it.
    bkill prints LSF's line for each, in order, exit 255 for the refused."""
    from xced.api.client import Client
    from xced.api.errors import InvalidRequest

    mine = [d.submit("-H", "--", "true", user="kx4") for _ in range(3)]
    arr = d.submit("-J", "many[1-3]", "-H", "--", "true", user="kx4")
    theirs = d.submit("-H", "--", "true", user="kx5")
    body = {"targets": [{"job_id": mine[0]}, {"job_id": 99999}, {"job_id": arr, "index": 2}, {"job_id": theirs},
                        {"job_id": mine[1]}], "comment": "many at once"}
    with Client(d.top / "run" / "xced.sock", as_user="kx4", timeout=30) as c:
        res = c.request("POST", "/jobs/kill", json=body).json()["results"]
        assert [r["affected"] for r in res] == [[str(mine[0])], [], [f"{arr}[2]"], [], [str(mine[1])]], res
        assert [(r["refused"] or {}).get("code") for r in res] == [None, "not_found", None, "forbidden", None], res
        assert "job 99999 not found" in res[1]["refused"]["reason"] and "may not kill it" in res[3]["refused"]["reason"]
        res = c.request("POST", "/jobs/kill", json={"targets": [{"job_id": mine[0]}]}).json()["results"]
        assert res[0]["refused"]["code"] == "conflict" and "already finished" in res[0]["refused"]["reason"], res
        extra = d.submit("-H", "--", "true", user="kx4")
        res = c.request("POST", "/jobs/kill", json={"targets": [{"job_id": 0}, {"job_id": extra}],
                                                     "signal": 9}).json()["results"]  # a number, as bkill -s 9
        assert res[0]["refused"]["code"] == "not_found" and res[1]["refused"] is None, res
        for bad, says in (({"targets": []}, "targets is empty"),
                          ({"targets": [{"job_id": 1}] * 10_001}, "more than the 10000 one request may name"),
                          ({"targets": [{"job_id": -1}]}, "field 'targets.0.job_id'"),
                          ({"targets": [{"job_id": 1}], "signal": "USR1", "comment": "x"},
                           "a kill reason (bkill -C) goes with a kill, not with one signal")):
            with pytest.raises(InvalidRequest) as ei:
                c.request("POST", "/jobs/kill", json=bad)
            assert ei.value.status == 422 and says in ei.value.message, ei.value.message
    assert [e["state"] for e in d.show(arr, user="kx4")["elements"]] == ["PSUSP", "EXIT", "PSUSP"]
    assert d.show(mine[0], user="kx4")["elements"][0]["exit_reason"].endswith("; kill reason: many at once")
    assert d.show(theirs, user="kx5")["state"] == "PSUSP"
    r = lsf(d, "bkill", str(mine[2]), "99999", str(theirs), f"{arr}[1]", user="kx4")
    assert r.returncode == 255 and r.stdout == f"Job <{mine[2]}> is being terminated\nJob <{arr}[1]> is being " \
                                               f"terminated\n", r.stdout
    assert r.stderr.startswith("Job <99999>: No matching job found\nJob <%d>: job %d belongs to kx5" % (theirs, theirs))
    assert lsf(d, "bkill", "0", user="kx5").returncode == 0
    assert lsf(d, "bkill", "0", user="kx4").returncode == 0  # what is left of the array


def test_bkill_of_an_index_list_is_one_request_and_names_each_element(d):
    """CLI-8, JOB-4: `bkill "ID[1,3,5-7]"` (bkill.1: "job_ID[index_list]") prints LSF's line
    for each element in the order given, and the daemon got one request: every kill event
    of them carries the same stimulus (JobAction.indices). An element already finished is
    LSF's "Job has already finished", one the array lacks "No matching job found", each on
    its own line beside those killed, exit 255. The body is checked: `indices` with `index`,
    an empty list, a negative or a repeated index are refused naming what is wrong."""
    jid = d.submit("-J", "big[1-8]", "--", "sleep", "60", user="ku4")
    deadline = time.monotonic() + 20
    while d.show(jid, user="ku4")["counts"].get("RUN", 0) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    r = lsf(d, "bkill", f"{jid}[1,3,5-7]", user="ku4")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"Job <{jid}[{i}]> is being terminated" for i in (1, 3, 5, 6, 7)]
    deadline = time.monotonic() + 20
    while any(_states(d, jid)[i] not in ("EXIT",) for i in (1, 3, 5, 6, 7)) and time.monotonic() < deadline:
        time.sleep(0.05)
    st = _states(d, jid)
    assert [i for i in st if st[i] == "EXIT"] == [1, 3, 5, 6, 7]
    events = json.loads(d.cli("hist", str(jid), "--json", check=True).stdout)["events"]
    stims = {e["stimulus"] for e in events if e["kind"] in ("KILL_REQUEST", "EXIT") and e["actor"] == "user:ku4"
             and e["id"] != f"{jid}[8]"}
    assert len(stims) == 1, events
    r = lsf(d, "bkill", f"{jid}[1,2]", user="ku4")
    assert (r.returncode, r.stdout, r.stderr) == (255, f"Job <{jid}[2]> is being terminated\n",
                                                  f"Job <{jid}[1]>: Job has already finished\n")
    r = lsf(d, "bkill", f"{jid}[4,99]", user="ku4")
    assert (r.returncode, r.stdout, r.stderr) == (255, f"Job <{jid}[4]> is being terminated\n",
                                                  f"Job <{jid}[99]>: No matching job found\n")
    for body, needle in (('{"index": 8, "indices": [8]}', "either index"), ('{"indices": []}', "indices is empty"),
                         ('{"indices": [-1]}', "are negative"), ('{"indices": [8, 8]}', "more than once")):
        r = d.cli("api", "POST", f"/jobs/{jid}/kill", "--data", body, user="ku4")
        assert r.returncode == 1 and needle in r.stderr and "Traceback" not in r.stderr, (body, r.stderr)
    assert _states(d, jid)[8] in ("PEND", "RUN")  # none of those refused bodies killed anything
    assert lsf(d, "bkill", str(jid), user="ku4").returncode == 0
    _ended(d, jid)


def test_brequeue_state_options_choose_what_is_requeued(d, tmp_path):
    """CLI-8, D-5: brequeue with no state option requeues running jobs only (OpenLava's
    brequeue.c sends REQUEUE_RUN unless -d/-e/-r/-a; brequeue.1: it "Kills a running (RUN),
    user-suspended (USUSP), or system-suspended (SSUSP) job"): an EXIT job named by ID is
    refused naming -e; `-e` requeues it, `-d` a DONE one, and with no ID each takes the most
    recently submitted job of its kind ("By default, the brequeue command kills and requeues
    your most recently submitted job"); `-e 0` with none left is "No DONE/EXIT job found".
    `-H` requeues to PSUSP, held by the user ("Requeues jobs to PSUSP job status") until
    bresume."""
    ok = d.submit("--", "true", user="ku5")
    bad = d.submit("--", "sh", "-c", "exit 3", user="ku5")
    _ended(d, ok, bad)
    assert (d.show(ok)["state"], d.show(bad)["state"]) == ("DONE", "EXIT")
    r = lsf(d, "brequeue", str(bad), user="ku5")
    assert (r.returncode, r.stdout) == (255, "")
    assert r.stderr.startswith(f"Job <{bad}>: the job is EXIT, which brequeue does not requeue") and "-e" in r.stderr
    assert d.show(bad)["state"] == "EXIT"
    r = lsf(d, "brequeue", "-e", user="ku5")  # no ID: the newest EXIT job
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{bad}> is being requeued\n", "")
    d.wait_state(bad, ("EXIT",))  # it ran again and failed again
    r = lsf(d, "brequeue", "-d", "-H", str(ok), user="ku5")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{ok}> is being requeued\n", "")
    assert d.show(ok)["state"] == "PSUSP"
    time.sleep(0.3)
    assert d.show(ok)["state"] == "PSUSP"  # held: not dispatched
    assert lsf(d, "bresume", str(ok), user="ku5").returncode == 0
    d.wait_state(ok, ("DONE",))
    runs = tmp_path / "runs"
    live = d.submit("--", "sh", "-c", f"echo run >> {runs}; sleep 60", user="ku5")
    d.wait_state(live, ("RUN",))
    r = lsf(d, "brequeue", "-H", user="ku5")  # no ID, no option: the newest running job, held
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{live}> is being requeued\n", "")
    assert d.wait_state(live, ("PSUSP",))["elements"][0]["exit_code"] is None
    assert runs.read_text() == "run\n"
    r = lsf(d, "brequeue", "-e", "-r", "0", user="ku5")  # the EXIT job, not the held one
    assert (r.returncode, r.stdout) == (0, f"Job <{bad}> is being requeued\n"), r.stderr
    _ended(d, bad)
    r = lsf(d, "brequeue", "-u", "ku5", "-J", "nomatch", "-a", "0", user="ku5")
    assert (r.returncode, r.stderr) == (255, "brequeue: Job <nomatch> is not found\n")
    assert lsf(d, "bkill", str(live), user="ku5").returncode == 0
    _ended(d, live)
    r = lsf(d, "brequeue", "-d", "0", user="ku6")
    assert (r.returncode, r.stderr) == (255, "brequeue: No DONE/EXIT job found\n")


def test_the_usage_of_bkill_and_brequeue_names_their_options(d):
    """CLI-8: `-h` "Prints command usage to stderr and exits" (each LSF 10.1 command page,
    docs/lsf-behaviour.md section 5 [57]): bkill's names the filters -u, -q, -m, -app, -J,
    -stat and -b and what 0 and no ID do; brequeue's its state options -r (the default), -e, -d, -a and
    -H. An option neither takes (bkill's -g, brequeue's -p) is a usage error listing theirs."""
    r = lsf(d, "bkill", "-h")
    assert (r.returncode, r.stdout) == (0, "")
    for needle in ("[-b | -stat run | pend | susp] [-s SIG | -r | -d] [-u USER | -u all] [-q QUEUE]",
                   "[-m HOST] [-app PROFILE] [-J NAME]", "-m HOST  the jobs running on that host",
                   "-stat S  the jobs in status S: run (RUN), pend (PEND), susp (PSUSP, USUSP)",
                   "filters without an ID: the most recently submitted job they match"):
        assert needle in r.stderr, r.stderr
    r = lsf(d, "brequeue", "-h")
    assert (r.returncode, r.stdout) == (0, "")
    for needle in ("-r       requeue running jobs (RUN, USUSP): the default", "-e       requeue EXIT jobs",
                   "-d       requeue DONE jobs", "-H       requeue held (PSUSP) until bresume"):
        assert needle in r.stderr, r.stderr
    r = lsf(d, "bkill", "-g", "grp", "0")
    assert r.returncode == 255 and "-app" in r.stderr and "-m" in r.stderr, r.stderr
    r = lsf(d, "brequeue", "-p", "0")
    assert r.returncode == 255 and "-H" in r.stderr and "-e" in r.stderr, r.stderr


def test_bstop_and_bresume_choose_jobs_as_bkill_does(d):
    """CLI-8, D-5: bstop and bresume take bkill's filters (OpenLava's bstop and bresume are
    bkill's code, lsbatch/cmd/cmd.sig.c: "[-m host_name] [-q queue_name] [-u user_name | -u
    all] [0] ... [-J job_name]"; docs/lsf-behaviour.md [80]): `bstop -q short 0` stops the
    caller's jobs in that queue only (USUSP), `bresume -q short 0` runs them again, `bstop
    -J NAME` without an ID the newest of that name; neither an ID nor a filter is refused."""
    a = d.submit("-q", "short", "--", "sleep", "60", user="ku7")
    b = d.submit("-J", "keep", "--", "sleep", "60", user="ku7")
    for j in (a, b):
        d.wait_state(j, ("RUN",))
    r = lsf(d, "bstop", "-q", "short", "0", user="ku7")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{a}> is being stopped\n", "")
    assert (d.show(a)["state"], d.show(b)["state"]) == ("USUSP", "RUN")
    r = lsf(d, "bresume", "-q", "short", "0", user="ku7")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Job <{a}> is being resumed\n", "")
    assert d.show(a)["state"] == "RUN"
    r = lsf(d, "bstop", "-J", "kee*", user="ku7")
    assert (r.returncode, r.stdout) == (0, f"Job <{b}> is being stopped\n"), r.stderr
    assert (d.show(a)["state"], d.show(b)["state"]) == ("RUN", "USUSP")
    r = lsf(d, "bresume", user="ku7")
    assert (r.returncode, r.stdout) == (255, "") and "Job ID or one of '-m', '-u', '-q', '-J'" in r.stderr
    assert lsf(d, "bkill", "-u", "ku7", "0", user="ku7").returncode == 0
    _ended(d, a, b)

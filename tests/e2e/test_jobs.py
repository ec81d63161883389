"""End to end: a real xced on a Unix socket, the real xcecli, real job processes.

JOB-1 (run, output, exit codes), JOB-2 (run limit), JOB-3 (environment), JOB-4 (arrays),
D-5 (states and events), CLI-1..CLI-3.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import Daemon, write_config

pytestmark = pytest.mark.timeout(90)


def test_submit_runs_to_done_with_output(shared_daemon, tmp_path):
    d = shared_daemon
    r = d.cli("submit", "-o", "out-%J.txt", "--", "python3", "-c", "print(42)", cwd=tmp_path, check=True)
    assert r.stdout.startswith("Job <") and "is submitted to queue <normal>" in r.stdout
    jid = int(r.stdout.split("<")[1].split(">")[0])
    j = d.wait_state(jid, ("DONE", "EXIT"))
    assert j["state"] == "DONE"
    assert j["elements"][0]["exit_code"] == 0
    assert (tmp_path / f"out-{jid}.txt").read_text() == "42\n"
    # jobs, show, hist, peek all show it
    listing = d.cli("jobs", check=True).stdout
    assert any(line.split()[0] == str(jid) and "DONE" in line for line in listing.splitlines()[1:])
    show = d.cli("show", str(jid), check=True).stdout
    assert "Runs as:" in show and "DONE" in show
    hist = d.cli("hist", str(jid), check=True).stdout
    kinds = [line.split()[4] for line in hist.splitlines()[1:]]
    assert kinds == ["SUBMIT", "DISPATCH", "DONE"]
    assert d.cli("peek", str(jid), check=True).stdout == "42\n"


def test_exit_code_3_is_exit_with_code_and_wait_passes_it_through(shared_daemon, tmp_path):
    d = shared_daemon
    jid = d.submit("--", "sh", "-c", "exit 3", cwd=tmp_path)
    j = d.wait_state(jid, ("DONE", "EXIT"))
    assert j["state"] == "EXIT" and j["elements"][0]["exit_code"] == 3
    assert j["elements"][0]["exit_reason"] == "exited with code 3"
    r = d.cli("submit", "-K", "--", "sh", "-c", "exit 5", cwd=tmp_path)
    assert r.returncode == 5, r.stderr
    assert "<<Job is finished>>" in r.stderr
    r = d.cli("wait", str(jid))
    assert r.returncode == 1 and f"job {jid} ended EXIT (exit code 3)" in r.stderr


def test_run_limit_ends_job_exit_run_limit(shared_daemon, tmp_path):
    d = shared_daemon
    jid = d.submit("-W", "1s", "--", "sleep", "30", cwd=tmp_path)
    j = d.wait_state(jid, ("DONE", "EXIT"), timeout=20)
    e = j["elements"][0]
    assert j["state"] == "EXIT"
    assert e["exit_reason"] == "run limit"
    assert e["exit_signal"] == "SIGTERM"
    assert 0.8 < e["end_time"] - e["start_time"] < 5


def test_kill_running_job(shared_daemon, tmp_path):
    d = shared_daemon
    jid = d.submit("--", "sleep", "60", cwd=tmp_path)
    d.wait_state(jid, ("RUN",))
    r = d.cli("kill", str(jid), check=True)
    assert f"Job <{jid}>" in r.stdout
    j = d.wait_state(jid, ("DONE", "EXIT"))
    e = j["elements"][0]
    assert j["state"] == "EXIT" and e["exit_reason"] == "killed by root" or e["exit_reason"].startswith("killed by")
    assert e["exit_signal"] == "SIGINT"  # the first signal of the INT, TERM, KILL sequence ends sleep


def test_kill_sequence_reaches_sigkill(shared_daemon, tmp_path):
    d = shared_daemon
    jid = d.submit("--", "sh", "-c", "trap '' INT TERM; sleep 60 & wait; sleep 60", cwd=tmp_path)
    d.wait_state(jid, ("RUN",))
    t0 = time.time()
    d.cli("kill", str(jid), check=True)
    j = d.wait_state(jid, ("DONE", "EXIT"))
    assert j["elements"][0]["exit_signal"] == "SIGKILL"
    assert time.time() - t0 >= 0.5  # two kill intervals of 0.3 s


def test_environment_has_xce_and_lsb_names(shared_daemon, tmp_path):
    d = shared_daemon
    script = ("echo $XCE_JOBID $LSB_JOBID $XCE_JOBINDEX $XCE_QUEUE $LSB_QUEUE $XCE_NTASKS;"
              "echo $LSB_HOSTS; echo $LSB_MCPU_HOSTS; cat $LSB_DJOB_HOSTFILE; echo $MYVAR")
    jid = d.submit("-n", "2", "--env", "MYVAR=hello", "-o", "env.txt", "--", "sh", "-c", script, cwd=tmp_path)
    assert d.wait_state(jid, ("DONE", "EXIT"))["state"] == "DONE"
    lines = (tmp_path / "env.txt").read_text().splitlines()
    assert lines == [f"{jid} {jid} 0 normal normal 2", "h1 h1", "h1 2", "h1", "h1", "hello"]


def test_array_limit_never_more_than_two_running(shared_daemon, tmp_path):
    d = shared_daemon
    r = d.cli("submit", "-J", "sw[1-6]%2", "-o", "o-%J-%I.txt", "--", "sh", "-c", "echo $XCE_JOBINDEX; sleep 0.4",
              cwd=tmp_path, check=True)
    assert "Job array <" in r.stdout and "(6 elements)" in r.stdout
    jid = int(r.stdout.split("<")[1].split(">")[0])
    j = d.wait_state(jid, ("DONE", "EXIT"), timeout=30)
    assert j["state"] == "DONE" and j["counts"] == {"DONE": 6}
    assert [e["index"] for e in j["elements"]] == [1, 2, 3, 4, 5, 6]
    for e in j["elements"]:
        assert (tmp_path / f"o-{jid}-{e['index']}.txt").read_text() == f"{e['index']}\n"
    # never more than 2 elements running at once: sweep over the recorded intervals
    points = sorted([(e["start_time"], 1) for e in j["elements"]] + [(e["end_time"], -1) for e in j["elements"]],
                    key=lambda p: (p[0], p[1]))
    running = peak = 0
    for _, delta in points:
        running += delta
        peak = max(peak, running)
    assert peak == 2


def test_stop_resume_running_and_pending(shared_daemon, tmp_path):
    d = shared_daemon
    jid = d.submit("--", "sleep", "30", cwd=tmp_path)
    d.wait_state(jid, ("RUN",))
    d.cli("stop", str(jid), check=True)
    assert d.show(jid)["state"] == "USUSP"
    d.cli("resume", str(jid), check=True)
    assert d.show(jid)["state"] == "RUN"
    d.cli("kill", str(jid), check=True)
    d.wait_state(jid, ("EXIT",))
    # a pending job that is stopped is PSUSP with a user hold; resume releases it. The big job
    # holds every slot until it is killed, so the other one pends for certain (no race with time)
    big = d.submit("-n", "4", "--", "sleep", "60", cwd=tmp_path)
    d.wait_state(big, ("RUN",))
    held = d.submit("--", "true", cwd=tmp_path)
    d.cli("stop", str(held), check=True)
    j = d.show(held)
    assert j["state"] == "PSUSP" and j["elements"][0]["holds"] == ["user"]
    d.cli("resume", str(held), check=True)
    assert d.show(held)["state"] == "PEND"
    d.cli("kill", str(big), check=True)
    assert d.wait_state(held, ("DONE",))["state"] == "DONE"
    hist = d.cli("hist", str(jid), check=True).stdout
    assert "STOP" in hist and "RESUME" in hist


def test_pending_stop_is_psusp_with_user_hold(shared_daemon, tmp_path):
    d = shared_daemon
    blocker = d.submit("-n", "4", "--", "sleep", "30", cwd=tmp_path)
    d.wait_state(blocker, ("RUN",))
    jid = d.submit("--", "true", cwd=tmp_path)
    d.cli("stop", str(jid), check=True)
    j = d.show(jid)
    assert j["state"] == "PSUSP" and j["elements"][0]["holds"] == ["user"]
    assert j["elements"][0]["pend_reason"]["main"].startswith("The job was suspended by the user while pending")
    d.cli("resume", str(jid), check=True)
    assert d.show(jid)["state"] == "PEND"
    d.cli("kill", str(blocker), check=True)
    assert d.wait_state(jid, ("DONE",))["state"] == "DONE"


def test_requeue_running_job_runs_again(shared_daemon, tmp_path):
    d = shared_daemon
    jid = d.submit("-o", "rq.txt", "--", "sh", "-c", "echo run; sleep 30", cwd=tmp_path)
    d.wait_state(jid, ("RUN",))
    deadline = time.monotonic() + 20
    while not (tmp_path / "rq.txt").exists() or "run" not in (tmp_path / "rq.txt").read_text():
        assert time.monotonic() < deadline, "the job never ran"
        time.sleep(0.05)  # waits for a state (its output), never for a time
    d.cli("requeue", str(jid), check=True)
    deadline = time.time() + 20
    while time.time() < deadline:
        ev = json.loads(d.cli("hist", str(jid), "--json", check=True).stdout)["events"]
        if [e["kind"] for e in ev].count("DISPATCH") >= 2:
            break
        time.sleep(0.05)
    kinds = [e["kind"] for e in ev]
    assert kinds[:4] == ["SUBMIT", "DISPATCH", "REQUEUE_REQUEST", "REQUEUE"]
    assert kinds.count("DISPATCH") == 2
    d.cli("kill", str(jid), check=True)
    d.wait_state(jid, ("EXIT",))


def test_pend_reason_is_structured(shared_daemon, tmp_path):
    d = shared_daemon
    blocker = d.submit("-n", "4", "--", "sleep", "30", cwd=tmp_path)
    d.wait_state(blocker, ("RUN",))
    jid = d.submit("-n", "2", "--", "true", cwd=tmp_path)
    deadline = time.time() + 10
    while True:
        e = d.show(jid)["elements"][0]
        if e["pend_reason"] or time.time() > deadline:
            break
        time.sleep(0.05)
    pr = e["pend_reason"]
    assert pr["main"] == "Not enough free slots: 0 free on matching hosts, the job needs 2"
    assert pr["hosts"] == [{"host": "h1", "resource": "slots", "free": 0.0, "needed": 1.0,
                            "message": "h1: slots 0 free of 4, needs 1"}]
    assert pr["hint"] == "waits for 2 more free slot(s) on any host"
    assert "h1: slots 0 free of 4, needs 1" in d.cli("show", str(jid), check=True).stdout
    why = d.cli("why", str(jid), check=True).stdout.splitlines()
    assert why == [f"{jid} PEND: {pr['main']}", "  h1: slots 0 free of 4, needs 1",
                   "waits for 2 more free slot(s) on any host"]
    d.cli("kill", str(blocker), str(jid), check=True)


def test_jobs_filters_and_fields(shared_daemon, tmp_path):
    d = shared_daemon
    jid = d.submit("-J", "named", "--", "true", cwd=tmp_path)
    d.wait_state(jid, ("DONE",))
    out = d.cli("jobs", "-s", "DONE", "-o", "id state name exit_code", check=True).stdout.splitlines()
    assert out[0].split() == ["JOBID", "STAT", "JOB_NAME", "EXIT_CODE"]
    assert [str(jid), "DONE", "named", "0"] in [line.split() for line in out[1:]]
    assert all(line.split()[1] == "DONE" for line in out[1:])
    data = json.loads(d.cli("jobs", "--json", "-q", "normal", check=True).stdout)
    assert any(j["job_id"] == jid for j in data["jobs"])
    r = d.cli("jobs", "-o", "id bogus")
    assert r.returncode == 2 and "bogus" in r.stderr
    out = d.cli("jobs", "-s", "DONE", "-o", "JOBID,STAT,EXEC_HOST", check=True).stdout.splitlines()
    assert out[0].split() == ["JOBID", "STAT", "EXEC_HOST"]  # bjobs -o names work too
    hosts = json.loads(d.cli("hosts", "--json", check=True).stdout)["hosts"]
    assert hosts[0]["name"] == "h1" and hosts[0]["slots"] == 4 and hosts[0]["status"] == "ok"
    queues = json.loads(d.cli("queues", "--json", check=True).stdout)["queues"]
    assert queues[0]["name"] == "normal" and queues[0]["default"] is True


def test_json_outputs_match_the_published_models(shared_daemon, tmp_path):
    """CLI-1: every --json output is the API model's JSON (the schemas in docs/json)."""
    from xced.api.models import EventList, HostList, JobList, JobOut, QueueList

    d = shared_daemon
    jid = d.submit("-J", "m[1-3]", "--", "true", cwd=tmp_path)
    one = d.submit("--", "sh", "-c", "exit 2", cwd=tmp_path)
    d.wait_state(jid, ("DONE",))
    d.wait_state(one, ("EXIT",))
    listing = JobList.model_validate_json(d.cli("jobs", "-u", "all", "-a", "--json", check=True).stdout)
    assert {jid, one} <= {j.job_id for j in listing.jobs}
    shown = JobOut.model_validate_json(d.cli("show", str(jid), "--json", check=True).stdout)
    assert [e.id for e in shown.elements] == [f"{jid}[1]", f"{jid}[2]", f"{jid}[3]"]
    ev = EventList.model_validate_json(d.cli("hist", str(one), "--json", check=True).stdout)
    assert [e.kind for e in ev.events] == ["SUBMIT", "DISPATCH", "EXIT"]
    HostList.model_validate_json(d.cli("hosts", "--json", check=True).stdout)
    QueueList.model_validate_json(d.cli("queues", "--json", check=True).stdout)


def test_memory_limit_ends_job(shared_daemon, tmp_path):
    """JOB-2: the supervisor watches the job's resident memory; over -M it ends the job
    (SIGTERM, grace, SIGKILL) and the job is EXIT with reason "memory limit"."""
    d = shared_daemon
    jid = d.submit("-M", "50MB", "--", "python3", "-c",
                   "import time; a = bytearray(300 * 2**20); time.sleep(30)", cwd=tmp_path)
    j = d.wait_state(jid, ("DONE", "EXIT"), timeout=30)
    e = j["elements"][0]
    assert j["state"] == "EXIT" and e["exit_reason"] == "memory limit", e
    assert e["end_time"] - e["start_time"] < 10


def test_wait_json_and_elements(shared_daemon, tmp_path):
    """-K --json prints the finished job (exit codes inside) so scripts can tell a job's
    code 3 from a lost daemon; wait ID[I] waits for that element only."""
    d = shared_daemon
    r = d.cli("submit", "-K", "--json", "--", "sh", "-c", "exit 3", cwd=tmp_path)
    assert r.returncode == 3
    job = json.loads(r.stdout)
    assert job["state"] == "EXIT" and job["elements"][0]["exit_code"] == 3
    jid = d.submit("-J", "w[1-2]", "--", "sh", "-c", "exit $((XCE_JOBINDEX - 1))", cwd=tmp_path)
    d.wait_state(jid, ("EXIT",))
    assert d.cli("wait", f"{jid}[1]").returncode == 0
    r = d.cli("wait", f"{jid}[2]")
    assert r.returncode == 1 and f"job {jid}[2] ended EXIT (exit code 1)" in r.stderr
    r = d.cli("wait", f"{jid}[8]")
    assert r.returncode == 1 and "has no element 8" in r.stderr
    r = d.cli("hist", f"{jid}[8]")
    assert r.returncode == 1 and "has no element 8" in r.stderr
    r = d.cli("show", f"{jid}[8]")
    assert r.returncode == 1 and "has no element 8" in r.stderr
    r = d.cli("wait", "--timeout", "-1", str(jid))
    assert r.returncode == 2


def test_dependency_waits_then_runs_and_bad_ones_are_refused(shared_daemon, tmp_path):
    """JOB-5 (LSF bsub -w): a job waits PEND with the dependency's reason, then runs once the
    job it names is DONE; a bad expression or an unknown job is refused (exit 1)."""
    from xced.api.models import JobOut

    d = shared_daemon
    # `a` runs until the test lets it end (a file appears), so b's pending state is not a race
    a = d.submit("--", "sh", "-c", "i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done",
                 cwd=tmp_path)
    b = d.submit("-w", f"done({a})", "--", "true", cwd=tmp_path)
    j = d.show(b)
    assert JobOut.model_validate(j).dependency == f"done({a})"
    assert j["state"] == "PEND"
    why = d.cli("why", str(b), check=True).stdout
    assert why.startswith(f"{b} PEND: Dependency condition not satisfied: done({a}) (job {a} is "), why
    assert f"Dependency:   done({a})" in d.cli("show", str(b), check=True).stdout
    assert d.show(b)["state"] == "PEND"
    (tmp_path / "go").touch()
    assert d.wait_state(b, ("DONE", "EXIT"), timeout=30)["state"] == "DONE"
    ea, eb = d.show(a)["elements"][0], d.show(b)["elements"][0]
    assert eb["start_time"] >= ea["end_time"]
    r = d.cli("submit", "-w", f"done({a}) && ended({a}", "--", "true", cwd=tmp_path)
    col = len(f"done({a}) && ended({a}") + 1
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0].startswith("xcecli: error: dependency: ") and f"column {col}: expected ')'" in lines[0], r.stderr
    assert lines[1:] == [f"  done({a}) && ended({a}", "  " + " " * (col - 1) + "^"]
    r = d.cli("submit", "-w", "done(999999) || 1", "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "dependency: job 999999 does not exist" in r.stderr
    dry = d.cli("submit", "--dry-run", "-w", f"{a}||exit({a},3)", "--", "true", cwd=tmp_path, check=True).stdout
    assert f"dependency:      done({a}) || exit({a},==3)" in dry


def test_a_queues_max_memory_is_the_limit_of_a_job_that_gives_none(topdir, tmp_path):
    """JOB-2 (issue 15): a job without -M in a queue with max_memory gets that as its limit
    (as the queue's max_run_limit is its run limit): `show` says so, and over it the job is
    EXIT "memory limit". Before, a 5 GB job ran to DONE in a 4 GB queue."""
    write_config(topdir, extra_queues="  - name: small\n    max_memory: 50MB\n")
    d = Daemon(topdir).start()
    try:
        jid = d.submit("-q", "small", "--", "python3", "-c",
                       "import time; a = bytearray(300 * 2**20); time.sleep(30)", cwd=tmp_path)
        j = d.wait_state(jid, ("DONE", "EXIT"), timeout=30)
        assert j["memory_limit_mb"] == 50, j
        assert j["state"] == "EXIT" and j["elements"][0]["exit_reason"] == "memory limit", j
        dry = d.cli("submit", "-q", "small", "--dry-run", "--", "true", check=True).stdout
        assert "50" in dry and "queue" in dry, dry
    finally:
        d.stop()


def test_memory_refusals_and_what_rusage_reserves(shared_daemon, tmp_path):
    """MERGE-2, RES-2 (issue 15): a -M over the largest host (h1, 8 GB) and an rusage[mem] over
    -M are refused at submit naming both (exit 1, no job ID); the dry run and `show` give
    each rusage term with its method and the job's total, in text and in JSON."""
    from xced.api.models import JobOut

    d = shared_daemon
    r = d.cli("submit", "-M", "40GB", "--", "true", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == ("xcecli: error: memory limit -M 40960 MB is more than any host could ever give: the largest "
                        "host, h1, has 8192 MB; give -M 8192 MB or less\n")
    r = d.cli("submit", "-M", "4GB", "-R", "rusage[mem=8000]", "--", "true", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.startswith("xcecli: error: rusage[mem=8000] reserves 8000 MB per task, more than the job's "
                               "memory limit -M 4096 MB: "), r.stderr
    assert r.stderr.endswith("; lower one or raise the other\n"), r.stderr
    assert "reserve:         mem 1000 MB per task x 4 tasks = 4000 MB reserved\n" in \
        d.cli("submit", "--dry-run", "-n", "4", "-R", "rusage[mem=1000]", "--", "true", cwd=tmp_path,
              check=True).stdout
    dry = json.loads(d.cli("submit", "--dry-run", "--json", "-n", "2,4", "-R", "rusage[mem=1000]", "--", "true",
                           cwd=tmp_path, check=True).stdout)
    assert dry["effective"]["reserve"] == [{"name": "mem", "value": 1000, "unit": "MB", "per": "task", "count": 2,
                                            "total": 2000, "exact": False}]
    jid = d.submit("-n", "2", "-R", "rusage[mem=1000]", "--", "true", cwd=tmp_path)
    d.wait_state(jid, ("DONE", "EXIT"))
    assert "Reserves:     mem 1000 MB per task x 2 tasks = 2000 MB reserved\n" in d.cli("show", str(jid),
                                                                                        check=True).stdout
    j = JobOut.model_validate(d.show(jid))
    assert [r.model_dump() for r in j.reserve] == [{"name": "mem", "value": 1000, "unit": "MB", "per": "task",
                                                    "count": 2, "total": 2000, "exact": True}]


def test_show_quotes_the_command_and_jobs_refuses_an_unknown_queue(shared_daemon, tmp_path):
    """`show` gives the command as the shell would take it back (each argument quoted where it
    must be), and `jobs -q` of a queue the cluster does not have says so (LSF bjobs: "No such
    queue") rather than printing an empty table with exit 0 (the fresh tester's findings)."""
    d = shared_daemon
    jid = d.submit("--", "sh", "-c", 'echo "a b" >/dev/null', cwd=tmp_path)
    out = d.cli("show", str(jid), check=True).stdout
    assert """sh -c 'echo "a b" >/dev/null'""" in out, out
    r = d.cli("jobs", "-q", "nope")
    assert r.returncode == 1 and r.stdout == "" and "queue 'nope': no such queue" in r.stderr, r.stderr
    assert "the queues are: normal" in r.stderr
    assert d.cli("jobs", "-q", "normal").returncode == 0

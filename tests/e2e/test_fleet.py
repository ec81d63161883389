"""A thousand hosts on one machine (issue 19 part 6; D-1, RES-4, SCHED-1, SCHED-4, KEY-3): a
real controller (`xced --roles controller,scheduler,apiserver` in a temp TopDir, no hosts of
its own, peers on TCP) and a fleet of simulated hosts in this process (tests/fleet.py): one
event loop, one worker channel per host, each dispatched job run as an immediate exit with
the code its command names, reported through the real channel messages.

LSF sources: docs/lsf-behaviour.md section 1 (order[]: LSF's default order is `r15s:pg`,
least loaded first, so among hosts equally good for a request the load spreads rather than
going to one host name) and the IBM doc "bsub -pack" (one job per line of the pack file).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import Daemon, kill_job_processes, short_tmpdir, write_config
from tests.fleet import FD_MARGIN, FleetKeys, FleetThread, raise_nofile
from xced.api.client import Client

pytestmark = pytest.mark.timeout(240)

HOSTS = 1000
SLOTS = 4
JOBS = 5000
#: jobs of the pack whose command is `sh -c 'exit 3'` (they end EXIT 3); the rest run `true`
FAILING = {7, 1234, 2500, 4999}


def _controller(top: Path, *, tls: bool = False) -> Daemon:
    write_config(top)
    (top / "config" / "hosts.yaml").write_text("hosts: []\n")
    with open(top / "config" / "xce.yaml", "a") as f:
        f.write("listen:\n  host: 127.0.0.1\n  port: 0\n" + ("  tls: true\n" if tls else ""))
    return Daemon(top, args=["--roles", "controller,scheduler,apiserver"])


def _url(top: Path) -> str:
    return f"tcp://127.0.0.1:{(top / 'run' / 'xced.port').read_text().strip()}"


def _all_jobs(top: Path) -> list[dict]:
    with Client(top / "run" / "xced.sock", as_user="admin", timeout=60) as c:
        return c.request("GET", "/jobs", params={"user": "all", "all": "true"}).json()["jobs"]


def _wait_ended(top: Path, ids: set[int], timeout: float) -> dict[int, dict]:
    """The jobs `ids` once every one is DONE or EXIT (AssertionError after `timeout` s)."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = {j["job_id"]: j for j in _all_jobs(top) if j["job_id"] in ids}
        states = Counter(j["state"] for j in jobs.values())
        if len(jobs) == len(ids) and states["DONE"] + states["EXIT"] == len(ids):
            return jobs
        assert time.monotonic() < deadline, f"not all {len(ids)} jobs ended in {timeout:.0f} s: {dict(states)}"
        time.sleep(0.5)


def _submit_pack(d: Daemon, lines: list[str]) -> list[int]:
    pack = d.top / f"pack-{time.monotonic_ns()}"
    pack.write_text("".join(line + "\n" for line in lines))
    r = d.cli("submit", "--pack", str(pack), user="alice", check=True)
    ids = [int(w[len("<"):-len(">")]) for w in r.stdout.split() if w.startswith("<") and w[1:-1].isdigit()]
    assert len(ids) == len(lines), r.stdout[-500:]
    return ids


@pytest.fixture(scope="module")
def fleet_cluster():
    """A controller and HOSTS simulated hosts (sim1 ... sim1000: names whose string order
    is not their numeric order, as the issue's h1, h10 ... h19, h2), SLOTS slots each,
    joined over plain TCP (test mode: no keys, as tests/e2e/test_multihost.py's workers)."""
    raise_nofile(2 * HOSTS + FD_MARGIN)  # this process's channels; the daemon inherits the raised limit
    top = short_tmpdir("xce-fleet-")
    d = _controller(top)
    ft = None
    try:
        d.start()
        ft = FleetThread(_url(top), [f"sim{i + 1}" for i in range(HOSTS)], slots=SLOTS)
        join_s = ft.start(timeout=60)
        yield d, ft, join_s
    finally:
        if ft is not None:
            ft.stop()
        d.stop()
        kill_job_processes(top)
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def drained(fleet_cluster):
    """The 5,000-job pack submitted with `xcecli submit --pack` and drained: (daemon, fleet
    thread, job IDs, the jobs as the controller shows them at the end, host -> elements
    the fleet was told to start)."""
    d, ft, _ = fleet_cluster
    lines = ["sh -c 'exit 3'" if i in FAILING else "true" for i in range(JOBS)]
    ids = _submit_pack(d, lines)
    jobs = _wait_ended(d.top, set(ids), timeout=150)
    return d, ft, ids, jobs, ft.call(ft.fleet.per_host)


def test_a_thousand_hosts_join_and_the_controller_lists_them(fleet_cluster):
    """D-1, RES-2: every simulated host is a host of the controller, `ok`, with its slots
    (what `xcecli hosts` shows); no channel of the fleet failed."""
    d, ft, join_s = fleet_cluster
    hosts = {h["name"]: h for h in json.loads(d.cli("hosts", "--json", check=True).stdout)["hosts"]}
    assert len(hosts) == HOSTS, len(hosts)
    assert {h["status"] for h in hosts.values()} == {"ok"}
    assert {h["slots"] for h in hosts.values()} == {SLOTS}
    assert ft.call(lambda: list(ft.fleet.errors)) == []
    assert join_s < 60


def test_five_thousand_jobs_each_end_exactly_once(drained):
    """SCHED-1, D-4, JOB-8: 5,000 single-slot jobs of one pack (LSF bsub -pack) on 1,000
    hosts: each is dispatched once (the fleet was told to start it once, on the host the
    controller shows), and ends once: DONE with exit 0, or EXIT with the code its command
    chose (3) for the FAILING ones."""
    d, ft, ids, jobs, _ = drained
    runs = ft.call(ft.fleet.runs)
    assert set(runs) == {(j, 0) for j in ids}, "some job was never dispatched, or one not of the pack was"
    twice = {k: v for k, v in runs.items() if len(v) != 1}
    assert twice == {}, f"dispatched more than once: {list(twice.items())[:5]}"
    failing = {ids[i] for i in FAILING}
    for jid in ids:
        j = jobs[jid]
        (e,) = j["elements"]
        assert [a["host"] for a in e["alloc"]] == runs[(jid, 0)], (jid, e["alloc"], runs[(jid, 0)])
        if jid in failing:
            assert (j["state"], e["exit_code"]) == ("EXIT", 3), j
        else:
            assert (j["state"], e["exit_code"]) == ("DONE", 0), j
    assert Counter(j["state"] for j in jobs.values()) == {"DONE": JOBS - len(FAILING), "EXIT": len(FAILING)}
    # every report of the fleet was taken as a real worker's: none refused, no channel dropped
    log = d.log.read_text()
    assert not [ln for ln in log.splitlines() if "refused" in ln or "dropped" in ln or "Traceback" in ln], log[-3000:]


def test_the_drain_spreads_evenly_over_the_hosts(drained):
    """RES-4 and issue 19 part 2 (ties spread): 5,000 jobs over 1,000 hosts of 4 slots each
    is a mean of 5 per host. Every host takes at least one, and none more than mean + 2 (7):
    each host can hold 4 at once and the jobs end at once, so a spread that rotates among
    equally free hosts lands 4 to 6 on each (a host freed early may take a second turn); 8
    or more on a host means ties keep going to the same hosts (by name, as the issue saw:
    one host took 207 of 2,000 on 150)."""
    _, _, _, _, per_host = drained
    mean = JOBS / HOSTS
    bound = math.ceil(mean) + 2
    assert min(per_host.values()) >= 1, "some host was never used"
    worst = per_host.most_common(5)
    assert worst[0][1] <= bound, f"hosts over mean + 2 = {bound}: {worst}; spread {sorted(Counter(per_host.values()).items())}"


def test_ties_rotate_on_an_idle_cluster(drained):
    """RES-4, issue 19 part 2 (ties spread, SCHED-1): on the idle cluster (every host with
    all 4 slots free, so all are equally good), 3 packs of 40 single-slot jobs, each pack
    submitted once the one before ended. Placement that rotates among equal hosts (or takes
    the host dispatched to least recently) puts these 120 jobs on 120 hosts; the bound taken
    is at most 2 on any host. Ties broken by host name put every pack on the same 40 hosts
    (3 each: sim1, sim10, sim100, sim1000, sim101 ...)."""
    d, ft, *_ = drained
    before = ft.call(ft.fleet.per_host)
    for _ in range(3):
        _wait_ended(d.top, set(_submit_pack(d, ["true"] * 40)), timeout=60)
    after = ft.call(ft.fleet.per_host)
    got = Counter({h: after[h] - before[h] for h in after if after[h] > before[h]})
    assert sum(got.values()) == 120
    assert got.most_common(1)[0][1] <= 2, (f"the 120 jobs went to {len(got)} hosts, the busiest taking "
                                           f"{got.most_common(5)}: ties are not spread")


# ------------------------------------------------------------------ keyed joins (KEY-3)


def test_keyed_fleet_joins_with_one_trusted_key_per_host():
    """KEY-3, KEY-2: a controller with a key (`listen.tls: true`) challenges every worker:
    100 simulated hosts, each with its own key trusted for its own name in keys.yaml (as
    `xceadmin keys trust --host NAME --role worker` writes it), join over TLS pinned to the
    controller's key and run 400 jobs. A host whose key is not trusted, and one that signs
    with another host's key, are refused with the controller's reason."""
    from xced.auth.keys import fingerprint, generate, parse_public_key

    n = 100
    raise_nofile(2 * n + FD_MARGIN)
    top = short_tmpdir("xce-fleetk-")
    d = _controller(top, tls=True)
    names = [f"k{i + 1}" for i in range(n)]
    keys = FleetKeys.make(names)
    keys.trust_in(top / "config")
    fts: list[FleetThread] = []
    try:
        d.start()
        pin = fingerprint(parse_public_key((top / "keys" / "host.pub").read_text()))
        ft = FleetThread(_url(top), names, pin=pin, keys=keys)
        fts.append(ft)
        ft.start(timeout=60)
        ids = _submit_pack(d, ["true"] * 400)
        jobs = _wait_ended(top, set(ids), timeout=60)
        assert {j["state"] for j in jobs.values()} == {"DONE"}
        assert sum(ft.call(ft.fleet.per_host).values()) == 400
        # an untrusted key, and k1's key used by another host name
        strangers = FleetKeys({"stranger": generate(), "impostor": keys.keys["k1"]})
        bad = FleetThread(_url(top), ["stranger", "impostor"], pin=pin, keys=strangers)
        fts.append(bad)
        with pytest.raises(RuntimeError) as e:
            bad.start(timeout=20)
        msg = str(e.value)
        assert "stranger: key SHA256:" in msg and "is not trusted by this controller" in msg, msg
        assert "impostor: key SHA256:" in msg and "is trusted for host k1, not impostor" in msg, msg
        hosts = {h["name"] for h in json.loads(d.cli("hosts", "--json", check=True).stdout)["hosts"]}
        assert hosts == set(names)
    finally:
        for ft in fts:
            ft.stop()
        d.stop()
        kill_job_processes(top)
        shutil.rmtree(top, ignore_errors=True)

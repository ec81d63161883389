"""RES-7: LSF's built-in load indices, measured by the worker, kept by the controller, read by
select[] and order[] in placement, and order[] keys checked at submit (RES-1).

Sources: IBM Spectrum LSF 10.1 "Load indices"
https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=resources-load-indices (the same table
in the LSF 6.2 Administration Guide p. 209,
http://38.142.81.21:8001/manual/hp/hp-xc-system-3-x-software/platform-lsf-administration-guide-version-62/page-209.html);
the order string, LSF 6.2 Administration Guide p. 268 (each index sorted best first by its
direction, `-` reverses); the select string, p. 265 (ut in percent); docs/lsf-behaviour.md
sections 1 and 6.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.unit.test_controller import ALICE, Clock, req, session
from tests.unit.test_hosts import Link, _cfg
from xced.api.errors import InvalidRequest
from xced.controller.controller import Controller
from xced.api.peer import WORKER_MESSAGE
from xced.model.load import LOAD_INDICES, check_load
from xced.resreq import parse
from xced.scheduler.placement import Plan, PlacementRequest, Shortfall, never_satisfiable, place
from xced.scheduler.snapshot import HostSupply
from xced.store.sqlite import SqliteStore
from xced.worker.load import LoadSampler


def test_the_sampler_reads_this_machine():
    """RES-7: every index from the real /proc of this machine, in sane ranges and LSF's
    units: ut a fraction, run queues >= 0, tmp the free MB of /tmp (as df says, within a
    few MB), ncpus the machine's CPUs; a second sample measures rates since the first."""
    s = LoadSampler()
    first = s.sample()
    second = s.sample()
    for got in (first, second):
        for name in ("r15s", "r1m", "r15m", "ut", "pg", "io", "ls", "it", "tmp", "swp", "ncpus", "maxmem", "maxswp",
                     "maxtmp"):
            assert name in got, name
        assert 0 <= got["ut"] <= 1
        assert got["r1m"] >= 0 and got["r15m"] >= 0 and got["r15s"] >= 0
        assert got["tmp"] > 0 and got["maxtmp"] >= got["tmp"]
        assert got["ncpus"] == os.cpu_count()
        assert got["pg"] >= 0 and got["io"] >= 0 and got["ls"] >= 0 and got["it"] >= 0
        assert 0 <= got["swp"] <= got["maxswp"]
    free_mb = shutil.disk_usage("/tmp").free / 2**20
    assert abs(second["tmp"] - free_mb) < max(64, free_mb * 0.05)
    with open("/proc/loadavg") as f:
        assert abs(second["r15m"] - float(f.read().split()[2])) < 1.0
    with open("/proc/meminfo") as f:
        total_kb = int(next(ln for ln in f if ln.startswith("MemTotal:")).split()[1])
    assert second["maxmem"] == pytest.approx(total_kb / 1024, abs=0.01)


def test_r15s_is_an_average_over_15_seconds(tmp_path):
    """RES-7 (LSF: r15s is the run queue length averaged over 15 s): with an injected clock
    and a fake /proc whose running count goes from 0 to 4, r15s moves towards 4 as an
    exponential average: 1 - e^-1 of the way after 15 s, nearly all of it after 60 s."""
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "loadavg").write_text("0.00 0.00 0.00 1/100 1\n")
    t = [0.0]

    def stat(running: int) -> None:
        (proc / "stat").write_text(f"cpu  100 0 100 800 0 0 0 0 0 0\nprocs_running {running + 1}\n")

    stat(0)
    s = LoadSampler(clock=lambda: t[0], proc=str(proc), tmp=str(tmp_path), utmp=())
    assert s.sample()["r15s"] == 0
    stat(4)
    t[0] = 15.0
    assert s.sample()["r15s"] == pytest.approx(4 * (1 - 2.718281828 ** -1), abs=1e-3)
    t[0] = 60.0
    assert s.sample()["r15s"] > 3.9
    got = s.sample()
    assert got["ut"] == pytest.approx(0.2, abs=1e-3)  # 200 busy of 1,000 jiffies, no change since
    assert got["ls"] == 0 and "io" not in got  # no disk statistics in this /proc: left out, not guessed


@pytest.mark.parametrize("bad, words", [
    ({"r1m": -1}, "r1m: -1 is not a number from 0"),
    ({"ut": 5}, "ut: 5 is not a fraction from 0 to 1"),
    ({"cpu": 1}, "unknown load index 'cpu'"),
    ({"tmp": float("nan")}, "tmp: nan"),
    ({"tmp": True}, "tmp: True"),
])
def test_a_bad_load_report_is_refused_naming_what_is_wrong(bad, words):
    """RES-7: a report with an unknown index or a value out of LSF's range is refused whole."""
    with pytest.raises(ValueError) as got:
        check_load(bad)
    assert words in str(got.value)
    assert check_load({"ut": 0.5, "r1m": 2}) == {"ut": 0.5, "r1m": 2.0}
    assert WORKER_MESSAGE.validate_python({"op": "heartbeat", "load": {"r1m": 1.5}}).load == {"r1m": 1.5}


def host(name, load=None, slots=4, **attrs):
    return HostSupply(name, slots, slots, 4096, 4096, {}, {}, dict(attrs), frozenset(), "ok", dict(load or {}))


def alloc(got):
    assert isinstance(got, Plan), got
    return got.alloc


HOSTS = [host("a", {"r15s": 0.2, "r1m": 3.0, "ut": 0.9, "tmp": 100, "it": 5}),
         host("b", {"r15s": 1.5, "r1m": 0.5, "ut": 0.1, "tmp": 900, "it": 1}),
         host("c", {"r15s": 0.7, "r1m": 1.0, "ut": 0.5, "tmp": 50, "it": 30})]


@pytest.mark.parametrize("rr, first", [
    ("order[ut]", "b"),        # ut grows with load: least first
    ("order[-ut]", "a"),       # '-' reverses: most loaded first
    ("order[r15s]", "a"),
    ("order[-r15s]", "b"),
    ("order[r1m:ut]", "b"),
    ("order[tmp]", "b"),       # tmp is better larger: most free first
    ("order[it]", "c"),        # idle time: the longest idle first
    ("order[cpu]", "b"),       # LSF's alias of r1m
])
def test_order_by_a_load_index_sorts_best_first_by_its_direction(rr, first):
    """RES-7, RES-4 (LSF 6.2 Administration Guide p. 268: hosts sorted best to worst on the
    index by its direction; '-' reverses)."""
    assert alloc(place(PlacementRequest(1, 1, parse(rr)), HOSTS))[0][0] == first


def test_order_by_a_tag_puts_the_hosts_with_it_first():
    """RES-1 (an order key a host has, a boolean resource: 1 where set): hosts with the tag
    first, '-' last."""
    hosts = [HostSupply("a", 4, 4, 4096, 4096), HostSupply("b", 2, 2, 4096, 4096, tags=frozenset({"ssd"}))]
    assert alloc(place(PlacementRequest(1, 1, parse("order[ssd]")), hosts))[0][0] == "b"
    assert alloc(place(PlacementRequest(1, 1, parse("order[-ssd]")), hosts))[0][0] == "a"


def test_order_puts_hosts_without_the_index_last_either_way():
    """RES-7: a host that has not reported the index sorts after those that have."""
    hosts = [host("a"), *HOSTS[1:]]
    assert alloc(place(PlacementRequest(1, 1, parse("order[r1m]")), hosts))[0][0] == "b"
    assert alloc(place(PlacementRequest(1, 1, parse("order[-r1m]")), hosts))[0][0] == "c"


def test_select_on_load_indices_and_the_reason_names_them():
    """RES-7 (docs/lsf-behaviour.md section 1; LSF 6.2 Administration Guide p. 265: "For ut,
    specify the percentage CPU utilization as an integer between 0-100"): select reads the
    reported values, ut in percent; a host failing it is named with its value."""
    assert alloc(place(PlacementRequest(1, 1, parse("select[r1m < 2 && tmp > 100]")), HOSTS)) == [("b", 1)]
    assert alloc(place(PlacementRequest(1, 1, parse("select[ut < 20]")), HOSTS)) == [("b", 1)]
    assert alloc(place(PlacementRequest(1, 1, parse("select[ut > 80]")), HOSTS)) == [("a", 1)]
    sf = place(PlacementRequest(1, 1, parse("select[r1m < 0.1]")), HOSTS)
    assert isinstance(sf, Shortfall) and not sf.never
    lines = [h.message for h in sf.hosts]
    assert "a: select false: r1m 3.0 >= 0.1" in lines and "b: select false: r1m 0.5 >= 0.1" in lines, lines
    sf = place(PlacementRequest(1, 1, parse("select[r1m < 2]")), [host("x")])
    assert isinstance(sf, Shortfall) and "x: select false: not defined(r1m)" in [h.message for h in sf.hosts]


def test_a_select_on_load_is_never_refused_at_submit_but_the_rest_is_judged():
    """RES-7, MERGE-2: load changes and a host may not have reported yet, so the idle
    cluster check leaves out what reads a load index; the rest of an && chain still counts."""
    hosts = [host("x", type="LINUX2.4")]
    assert never_satisfiable(PlacementRequest(1, 1, parse("select[r1m < -1]")), hosts) is None
    assert never_satisfiable(PlacementRequest(1, 1, parse("select[r1m < 1 && type==LINUX2.4]")), hosts) is None
    why = never_satisfiable(PlacementRequest(1, 1, parse("select[r1m < 1 && type==LINUX2.6]")), hosts)
    assert why == "no host matches select[type == LINUX2.6]"


@pytest.fixture
def two(tmp_path):
    """A controller (test mode) with hosts h1 and h2, each served by a fake worker."""
    store = SqliteStore(tmp_path / "db")
    c = Controller(_cfg(), store, tmp_path, clock=Clock())
    c.links = {h: Link(h) for h in ("h1", "h2")}
    for link in c.links.values():
        c.attach_worker(link)
    yield c
    store.close()


def test_the_controller_keeps_reports_and_refuses_order_on_what_no_host_has(two):
    """RES-7: a worker's report becomes its host's load (shown by `hosts`); a bad one is
    dropped whole; RES-1: `order[foo]` is refused at submit with its column, load indices
    are taken even before any report."""
    from xced.controller.channel import handle_worker_message

    c = two
    assert handle_worker_message(c, c.links["h1"], {"op": "heartbeat", "load": {"r1m": 0.25, "ut": 0.5}})
    assert c.host_view(c.hosts["h1"])["load"] == {"r1m": 0.25, "ut": 0.5}
    assert 0 < c.host_view(c.hosts["h1"])["load_at"] <= c.clock()
    handle_worker_message(c, c.links["h1"], {"op": "heartbeat", "load": {"r1m": -3}})  # refused whole
    handle_worker_message(c, c.links["h1"], {"op": "heartbeat"})  # a heartbeat without: kept
    assert c.hosts["h1"].load == {"r1m": 0.25, "ut": 0.5}
    assert not c.host_load(Link("h2"), {"r1m": 1})  # a channel that does not serve h2 (replaced): dropped
    assert c.hosts["h2"].load == {}
    assert c.host_view(c.hosts["h2"])["load"] is None
    with pytest.raises(InvalidRequest) as got:
        c.submit(req(resreq=["order[r15s:foo]"]), ALICE)
    assert "order[r15s:foo]: column 12: order[foo]: no host has resource 'foo'" in got.value.message
    c.submit(req(resreq=["order[-r15s:ut:it]"]), ALICE)
    assert set(LOAD_INDICES) >= {"r15s", "ut", "it"}


def test_a_load_report_asks_for_a_session_only_for_a_pending_select_on_load(two):
    """RES-7 (a fresh tester's find: a session every 15 s for as long as any job pended):
    a host's new load can let a pending job start only through a select that reads a load
    index, so only then does a report ask for a session (at most one per LOAD_KICK_S)."""
    from xced.controller.hosts import LOAD_KICK_S

    c = two
    full = c.submit(req(ntasks_min=4), ALICE)  # every slot of the two hosts
    big = c.submit(req(ntasks_min=2), ALICE)  # pends on slots
    session(c)
    assert full.elements[0].state == "RUN" and big.elements[0].state == "PEND" and not c.session_asked
    c.kick = lambda: setattr(c, "kicked", getattr(c, "kicked", 0) + 1)
    c.host_load(c.links["h1"], {"r1m": 0.5})
    assert getattr(c, "kicked", 0) == 0  # no pending select reads load: nothing to decide again
    on_load = c.submit(req(resreq=["select[r1m < 0.1]"]), ALICE)
    assert on_load.elements[0].state == "PEND"
    c.host_load(c.links["h1"], {"r1m": 0.05})  # within LOAD_KICK_S of the last look: not looked at again
    assert getattr(c, "kicked", 0) == 0
    c.clock.t += LOAD_KICK_S
    c.host_load(c.links["h1"], {"r1m": 0.05})
    assert c.kicked == 1
    c.host_load(c.links["h2"], {"r1m": 0.05})  # within LOAD_KICK_S of the last: no second session
    assert c.kicked == 1
    c.clock.t += LOAD_KICK_S
    c.host_load(c.links["h2"], {"r1m": 0.02})
    assert c.kicked == 2

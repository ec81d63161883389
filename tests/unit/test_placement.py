"""The placement planner over plain HostSupply lists, no daemon (RES-3, RES-4, RES-5,
RES-6, MERGE-2). LSF behaviour cited from docs/lsf-behaviour.md sections 1-2.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xced.model.jobs import PendReason
from xced.resreq import ResReq, parse
from xced.scheduler.placement import (
    HostSupply,
    PlacementRequest,
    Plan,
    Shortfall,
    never_satisfiable,
    place,
    plan_fixed,
    shortfall,
)


def host(name, slots, free=None, mem=65536, memfree=None, res=None, resfree=None, status="ok", tags=(), **attrs):
    res = dict(res or {})
    return HostSupply(name, slots, slots if free is None else free, mem, mem if memfree is None else memfree,
                      res, dict(res if resfree is None else resfree), dict(attrs), frozenset(tags), status)


def req(nmin, nmax=None, rr="", limit=None):
    return PlacementRequest(nmin, nmax or nmin, parse(rr), limit)


def alloc(result):
    assert isinstance(result, Plan), result
    return result.alloc


def lines(result):
    assert isinstance(result, Shortfall), result
    return [h.message for h in result.hosts]


# --------------------------------------------------------------------------- span, order, range

# (case, hosts, request, expected alloc)
PLACED = [
    ("lsf-false-failure: A=2 B=4 C=4 D=8, limit 2, -n 10 -> D+B, never pends",
     [host("A", 8, 2), host("B", 8, 4), host("C", 8, 4), host("D", 8, 8)], req(10, limit=2),
     [("D", 8), ("B", 2)]),
    ("lsf-false-failure even with order[-slots] (packing order)",
     [host("A", 8, 2), host("B", 8, 4), host("C", 8, 4), host("D", 8, 8)], req(10, rr="order[-slots]", limit=2),
     [("B", 4), ("D", 6)]),
    ("bug-1931: -n 2,5 with 2 free slots -> 2",
     [host("h1", 4, 2)], req(2, 5), [("h1", 2)]),
    ("range takes max when it fits",
     [host("h1", 8)], req(2, 5), [("h1", 5)]),
    ("capacity-driven: most free slots first, ties by name",
     [host("a", 4, 1), host("c", 4, 3), host("b", 4, 3)], req(5), [("b", 3), ("c", 2)]),
    ("-n 8 span[ptile=4] on three 4-slot hosts -> 4+4",
     [host("h1", 4), host("h2", 4), host("h3", 4)], req(8, rr="span[ptile=4]"), [("h1", 4), ("h2", 4)]),
    ("-n 10 span[ptile=4] -> 4,4,2",
     [host("h1", 8), host("h2", 8), host("h3", 8)], req(10, rr="span[ptile=4]"), [("h1", 4), ("h2", 4), ("h3", 2)]),
    ("ptile remainder host listed last",
     [host("a", 8), host("b", 2), host("c", 8)], req(10, rr="span[ptile=4]"), [("a", 4), ("c", 4), ("b", 2)]),
    ("LSF example -n 1,20 span[ptile=2]: 2 on some hosts, 1 on one",
     [host("a", 4, 3), host("b", 4, 1), host("c", 8)], req(1, 20, "span[ptile=2]"), [("c", 2), ("a", 2), ("b", 1)]),
    ("-n 1,20 span[ptile=2] on a roomy cluster -> 20 on 10 hosts",
     [host(f"h{i:02}", 4) for i in range(12)], req(1, 20, "span[ptile=2]"), [(f"h{i:02}", 2) for i in range(10)]),
    ("span[hosts=1] picks the first host with room",
     [host("a", 8, 3), host("b", 8, 6), host("c", 8, 5)], req(5, rr="span[hosts=1]"), [("b", 5)]),
    ("span[hosts=1] with a range takes what the best host has",
     [host("a", 8, 3), host("b", 8, 6)], req(2, 8, "span[hosts=1]"), [("b", 6)]),
    ("span[hosts=-1] is no span",
     [host("a", 4, 3), host("b", 4, 2)], req(5, rr="span[hosts=-1]"), [("a", 3), ("b", 2)]),
    ("span[block=2] with odd free counts: 5->4, 3->2",
     [host("a", 8, 5), host("b", 8, 3)], req(6, rr="span[block=2]"), [("a", 4), ("b", 2)]),
    ("span[block=2] range only at even counts",
     [host("a", 8, 5), host("b", 8, 3)], req(1, 9, "span[block=2]"), [("a", 4), ("b", 2)]),
    ("host limit caps the range",
     [host("a", 4), host("b", 4), host("c", 4)], req(2, 12, limit=2), [("a", 4), ("b", 4)]),
    ("order[mem]: most free memory first",
     [host("a", 4, memfree=100), host("b", 4, memfree=900)], req(6, rr="order[mem]"), [("b", 4), ("a", 2)]),
    ("order[-mem]: least free memory first",
     [host("a", 4, memfree=100), host("b", 4, memfree=900)], req(6, rr="order[-mem]"), [("a", 4), ("b", 2)]),
    ("unknown LSF load indices in order[] are ignored",
     [host("a", 4, 1), host("b", 4, 3)], req(2, rr="order[r15s:pg]"), [("b", 2)]),
    ("order[gpu] then default tie by name",
     [host("a", 4, res={"gpu": 1}), host("b", 4, res={"gpu": 4})], req(2, rr="order[gpu]"), [("b", 2)]),
    ("hosts not ok are skipped",
     [host("a", 8, status="closed"), host("b", 4)], req(1, 8), [("b", 4)]),
    ("same[type] picks the bigger group",
     [host("x1", 4, type="x86_64"), host("a1", 4, type="aarch64"), host("a2", 4, type="aarch64")],
     req(1, 12, "same[type]"), [("a1", 4), ("a2", 4)]),
    ("same[type] tie: the group whose best host comes first",
     [host("x1", 4, 2, type="x86_64"), host("a1", 4, 3, type="aarch64"), host("x2", 4, 2, type="x86_64")],
     req(1, 3, "same[type]"), [("a1", 3)]),
    ("same[type] with fixed count takes the first group that fits",
     [host("x1", 4, type="x86_64"), host("a1", 8, type="aarch64")], req(4, rr="same[type]"), [("a1", 4)]),
    ("select on attributes and tags",
     [host("a", 8, type="x86_64"), host("b", 4, type="aarch64", tags={"fast"})],
     req(2, rr="select[type==aarch64 && fast]"), [("b", 2)]),
    ("select sees free slots as slots, total as maxslots",
     [host("a", 8, 1), host("b", 4, 4)], req(1, rr="select[slots>=2 && maxslots<=4]"), [("b", 1)]),
]


@pytest.mark.parametrize("case,hosts,request_,expected", PLACED, ids=[c[0] for c in PLACED])
def test_placed(case, hosts, request_, expected):
    got = place(request_, hosts)
    assert alloc(got) == expected
    assert got.ntasks == sum(n for _, n in expected)


# --------------------------------------------------------------------------- rusage


def test_documented_gpu_request_per_task_gpu_and_memory_packing_order():
    rr = "select[gpu>=1 && type==x86_64] order[-slots] rusage[mem=4GB:gpu=1]"
    hosts = [
        host("big", 16, 16, mem=65536, res={"gpu": 4}, type="x86_64"),
        host("full", 16, 3, mem=65536, res={"gpu": 4}, type="x86_64"),
        host("arm", 16, 2, mem=65536, res={"gpu": 8}, type="aarch64"),
        host("nogpu", 16, 1, mem=65536, res={"gpu": 0}, type="x86_64"),
        host("lowmem", 16, 2, mem=65536, memfree=4096, res={"gpu": 4}, type="x86_64"),
    ]
    got = place(req(6, rr=rr), hosts)
    # order[-slots]: fullest first: lowmem (2 free slots but memory for 1 task), full (3), big
    assert got.alloc == [("lowmem", 1), ("full", 3), ("big", 2)]
    assert got.reserve == {
        "lowmem": {"slots": 1, "mem": 4096, "gpu": 1},
        "full": {"slots": 3, "mem": 12288, "gpu": 3},
        "big": {"slots": 2, "mem": 8192, "gpu": 2},
    }
    # a range: per-task gpu caps each host at its gpus (4 + 3 + 1)
    got = place(req(1, 100, rr), hosts)
    assert got.ntasks == 4 + 3 + 1
    assert got.alloc[0] == ("lowmem", 1)


def test_rusage_per_host_and_per_job():
    hosts = [host("a", 4, res={"lic": 3}, resfree={"lic": 1}), host("b", 4, res={"lic": 3}, resfree={"lic": 2})]
    got = place(req(8, rr="rusage[mem=1000/host:lic=1/host]"), hosts)
    assert got.alloc == [("a", 4), ("b", 4)]
    assert got.reserve == {"a": {"slots": 4, "mem": 1000, "lic": 1}, "b": {"slots": 4, "mem": 1000, "lic": 1}}
    # /job: once for the job, on its first host; the first host in order without the
    # licence free is not the first host
    hosts = [host("a", 8, res={"lic": 2}, resfree={"lic": 0}), host("b", 4, res={"lic": 2})]
    got = place(req(10, rr="rusage[lic=2/job]"), hosts)
    assert got.alloc == [("b", 4), ("a", 6)]
    assert got.reserve["b"] == {"slots": 4, "lic": 2} and got.reserve["a"] == {"slots": 6}
    sf = place(req(1, rr="rusage[lic=3/job]"), hosts)
    assert sf.never and sf.hint.startswith("can never start: rusage lic=3 per job")


def test_rusage_per_task_memory_limits_tasks_per_host():
    hosts = [host("a", 8, memfree=10000), host("b", 8, memfree=3000)]
    got = place(req(1, 16, "rusage[mem=2500]"), hosts)
    assert got.alloc == [("a", 4), ("b", 1)]
    assert got.reserve["a"]["mem"] == 10000


def test_rusage_alternatives_first_fails_second_places():
    hosts = [host("a", 4, res={"lic": 2}, resfree={"lic": 0})]
    got = place(req(2, rr="rusage[lic=1 || mem=100]"), hosts)
    assert got.alloc == [("a", 2)] and got.alternative == 1
    assert got.reserve == {"a": {"slots": 2, "mem": 200}}
    # the first alternative wins when it places, even with fewer tasks
    hosts = [host("a", 4, res={"lic": 2})]
    got = place(req(1, 4, "rusage[lic=1 || mem=100]"), hosts)
    assert got.alloc == [("a", 2)] and got.alternative == 0


def test_rusage_on_a_resource_no_host_has():
    hosts = [host("h1", 4), host("h2", 4, res={"gpu": 1})]
    sf = place(req(1, rr="rusage[lic=1]"), hosts)
    assert sf.main == "Not enough hosts match: 0 of 2 hosts can take a task"
    assert lines(sf) == ["h1: no resource lic", "h2: no resource lic"]
    assert sf.never and sf.hint == "can never start: no host has resource lic"


def test_rusage_zero_term_reserves_nothing():
    got = place(req(2, rr="rusage[lic=0]"), [host("a", 4)])
    assert got.alloc == [("a", 2)] and got.reserve == {"a": {"slots": 2}}


# --------------------------------------------------------------------------- compound, alternative


def test_compound_parts_share_supply_in_written_order():
    hosts = [host("g1", 4, res={"gpu": 2}, type="x86_64"), host("c1", 8, type="x86_64"), host("c2", 8, type="x86_64")]
    rr = "1*{select[gpu>=1] rusage[gpu=1]} + 8*{span[ptile=4]}"
    got = place(req(9, rr=rr), hosts)
    assert got.alloc == [("g1", 1), ("c1", 4), ("c2", 4)]
    assert got.reserve["g1"] == {"slots": 1, "gpu": 1}
    # a host used by both parts appears once, with the total
    got = place(req(6, rr="2*{select[gpu>=1]} + 4*{}"), [host("g1", 8, res={"gpu": 1}), host("c1", 2)])
    assert got.alloc == [("g1", 6)] and got.ntasks == 6


def test_compound_count_must_equal_n():
    sf = place(req(1, 8, "2*{} + 4*{}"), [host("a", 16)])
    assert sf.never
    assert sf.main == ("The request can never start: the compound request places 6 tasks (2+4) "
                       "but the job asks for -n 1,8: -n must be 6")
    assert plan_fixed(req(6, rr="2*{} + 4*{}"), 6, [host("a", 16)]).ntasks == 6


def test_compound_part_fails_names_the_part():
    hosts = [host("g1", 4, res={"gpu": 1}, resfree={"gpu": 0}), host("c1", 8)]
    sf = place(req(3, rr="1*{rusage[gpu=1]} + 2*{}"), hosts)
    assert not sf.never
    assert sf.main.startswith("part 1 (1 tasks): ")
    assert "g1: gpu 0 free of 1, needs 1" in lines(sf)


def test_alternative_first_that_places_wins():
    hosts = [host("a", 4), host("b", 4)]
    got = place(req(6, rr="{span[hosts=1]} || {span[ptile=3]}"), hosts)
    assert got.alloc == [("a", 3), ("b", 3)] and got.alternative == 1
    got = place(req(4, rr="{span[hosts=1]} || {span[ptile=2]}"), hosts)
    assert got.alloc == [("a", 4)] and got.alternative == 0
    sf = place(req(6, rr="{span[hosts=1]} || {span[ptile=3] select[type==z]}"), hosts)
    assert sf.main.startswith("No alternative fits now (alternative 1: span[hosts=1]")


# --------------------------------------------------------------------------- shortfalls (RES-6)


def test_hosts1_pends_with_main_reason_and_per_host_lines():
    hosts = [host("h1", 8, 4), host("h2", 8, 2), host("h3", 8, 0)]
    sf = place(req(8, rr="span[hosts=1]"), hosts)
    assert sf.main == "span[hosts=1]: no host has 8 free slots"
    assert lines(sf) == ["h1: slots 4 free of 8, needs 8", "h2: slots 2 free of 8, needs 8",
                         "h3: slots 0 free of 8, needs 8"]
    assert sf.hint == "would start now with -n 4" and not sf.never
    assert isinstance(sf.pend_reason(), PendReason) and sf.pend_reason().main == sf.main


def test_not_enough_free_slots_and_waits_hint():
    hosts = [host("h1", 8, 2, res={"gpu": 1}), host("h2", 8, 1, res={"gpu": 1}), host("h3", 8, 8)]
    sf = place(req(5, rr="select[gpu>=1] span[block=5]"), hosts)
    assert sf.main == "Not enough free slots: 3 free on matching hosts, the job needs 5"
    assert sf.hint == "waits for 2 more free slot(s) on any host with gpu >= 1"
    assert "h3: select false: not defined(gpu)" in lines(sf)
    assert "h1: slots 2 free of 8, needs 5" in lines(sf)
    # without block the smaller count fits now: hint says so
    sf = place(req(4, rr="select[gpu>=1]"), hosts)
    assert sf.main == "Not enough free slots: 3 free on matching hosts, the job needs 4"
    assert sf.hint == "would start now with -n 3"


def test_shortfall_lines_select_status_resources():
    hosts = [
        host("h1", 8, 2, res={"gpu": 2}, type="x86_64"),
        host("h2", 8, 8, res={"gpu": 2}, resfree={"gpu": 0}, type="x86_64"),
        host("h3", 8, 8, res={"gpu": 2}, type="aarch64"),
        host("h4", 8, 8, res={"gpu": 2}, type="x86_64", status="unavail"),
        host("h5", 8, 8, mem=8192, memfree=1024, res={"gpu": 2}, type="x86_64"),
    ]
    sf = place(req(4, rr="select[type==x86_64] rusage[gpu=1:mem=2GB] span[ptile=4]"), hosts)
    assert lines(sf) == [
        "h1: slots 2 free of 8, needs 4",
        "h1: gpu 2 free of 2, needs 4",
        "h2: gpu 0 free of 2, needs 4",
        "h3: select false: type aarch64 != x86_64",
        "h4: status unavail",
        "h5: gpu 2 free of 2, needs 4",
        "h5: mem 1024 MB free of 8192 MB, needs 8192 MB",
    ]
    assert sf.main == "span[ptile=4]: 0 of the 1 hosts needed can take 4 tasks"
    assert sf.never  # gpu=2 per host, 1 gpu per task, 4 tasks on one host: never
    assert sf.hint == "can never start: span[ptile=4] with -n 4: only 0 matching hosts can take 4 tasks, 1 needed"
    sh = sf.hosts[1]
    assert (sh.host, sh.resource, sh.free, sh.needed) == ("h1", "gpu", 2, 4)


def test_no_host_matches():
    hosts = [host("h1", 8, type="x86_64"), host("h2", 8, type="x86_64")]
    sf = place(req(1, rr="select[type==aarch64]"), hosts)
    assert sf.main == "Not enough hosts match: 0 of 2 hosts can take a task"
    assert lines(sf) == ["h1: select false: type x86_64 != aarch64", "h2: select false: type x86_64 != aarch64"]
    assert sf.never and sf.hint == "can never start: no host matches select[type == aarch64]"


def test_all_hosts_down_is_not_never():
    sf = place(req(2), [host("h1", 8, status="unavail"), host("h2", 8, status="closed")])
    assert sf.main == "Not enough hosts match: 0 of 2 hosts can take a task"
    assert lines(sf) == ["h1: status unavail", "h2: status closed"]
    assert not sf.never


def test_host_limit_shortfall_and_ptile_over_limit():
    hosts = [host("a", 8, 4), host("b", 8, 4), host("c", 8, 4)]
    sf = place(req(10, limit=2), hosts)
    assert sf.main == "Host limit 2: the best 2 host(s) can take 8 tasks, the job needs 10"
    assert not sf.never
    sf = place(req(10, rr="span[ptile=2]", limit=2), hosts)
    assert sf.main == "span[ptile=2]: 10 tasks need 5 hosts, the host limit is 2"
    assert sf.never and sf.hint == "can never start: span[ptile=2] with -n 10 needs 5 hosts, more than the host limit of 2"


def test_same_pends_when_split():
    hosts = [host("x1", 4, type="x86_64"), host("a1", 4, type="aarch64"), host("b1", 4)]
    sf = place(req(6, rr="same[type]"), hosts)
    assert sf.main == "same[type]: no group of hosts with one type can take 6 tasks (at most 4 on type=aarch64)"
    assert lines(sf) == ["b1: same[type]: type not defined"]
    assert sf.never and sf.hint.startswith("can never start: same[type] with -n 6")
    # busy now, but an idle cluster would do: not never
    hosts = [host("x1", 4, 2, type="x86_64"), host("x2", 4, 1, type="x86_64"), host("a1", 4, 3, type="aarch64")]
    sf = place(req(8, rr="same[type]"), hosts)
    assert sf.main == "Not enough free slots: 6 free on matching hosts, the job needs 8"
    assert not sf.never
    sf = place(req(4, rr="same[type]"), hosts)
    assert sf.main == "same[type]: no group of hosts with one type can take 4 tasks (at most 3 on type=aarch64)"
    assert sf.hint == "would start now with -n 3" and not sf.never


def test_ptile_larger_than_task_count_is_refused():
    sf = place(req(4, rr="span[ptile=8]"), [host("a", 16)])
    assert sf.never and sf.main == "The request can never start: span[ptile=8] with -n 4: ptile is larger than the task count"
    assert plan_fixed(req(4, rr="span[ptile=8]"), 4, [host("a", 16)]) is None


def test_max_host_lines_sums_up_the_rest():
    hosts = [host(f"h{i}", 4, 0) for i in range(5)]
    sf = place(req(2), hosts, max_host_lines=2)
    assert lines(sf) == ["h0: slots 0 free of 4, needs 1", "h1: slots 0 free of 4, needs 1",
                         "and 3 more host(s) with shortfalls"]
    assert sf.main == "Not enough free slots: 0 free on matching hosts, the job needs 2"
    assert sf.hint == "waits for 2 more free slot(s) on any host"


def test_explain_false_is_cheap_and_bare():
    sf = place(req(8), [host("a", 4)], explain=False)
    assert isinstance(sf, Shortfall) and sf.hosts == [] and sf.hint is None


# --------------------------------------------------------------------------- never_satisfiable (MERGE-2)

NEVER = [
    ("ptile larger than -n", req(4, rr="span[ptile=8]"), [host("a", 16)],
     "span[ptile=8] with -n 4: ptile is larger than the task count"),
    ("hosts=1 larger than the largest host", req(8, rr="span[hosts=1]"), [host("a", 4, 0), host("b", 6, 1)],
     "span[hosts=1] with -n 8: the largest matching host has 6 slots"),
    ("a resource no host has", req(1, rr="rusage[lic=1]"), [host("a", 4)], "no host has resource lic"),
    ("select no host matches", req(1, rr="select[gpu>=1]"), [host("a", 4)], "no host matches select[gpu >= 1]"),
    ("more hosts than the host limit (ptile)", req(8, rr="span[ptile=2]", limit=3), [host(f"h{i}", 4) for i in range(8)],
     "span[ptile=2] with -n 8 needs 4 hosts, more than the host limit of 3"),
    ("more slots than the host limit's hosts have", req(10, limit=2), [host(f"h{i}", 4) for i in range(4)],
     "-n 10 needs more than the host limit of 2 host(s): the largest 2 matching host(s) can take 8 tasks"),
    ("block not dividing", req(6, rr="span[block=4]"), [host("a", 16)],
     "span[block=4] with -n 6: the task count is not a multiple of 4"),
    ("block: no multiple in the range", req(5, 7, "span[block=4]"), [host("a", 16)],
     "span[block=4] with -n 5,7: no count in the range is a multiple of 4"),
    ("more tasks than the cluster", req(20), [host("a", 8), host("b", 8, status="closed")],
     "-n 20: matching hosts have 16 slots in all"),
    ("per-task memory over every host", req(2, rr="rusage[mem=64GB]"), [host("a", 8, mem=32768)],
     "no matching host can hold one task with rusage[mem=65536 MB per task]"),
    ("compound mismatch", req(4, rr="2*{} + 4*{}"), [host("a", 16)],
     "the compound request places 6 tasks (2+4) but the job asks for -n 4: -n must be 6"),
]


@pytest.mark.parametrize("case,request_,hosts,reason", NEVER, ids=[c[0] for c in NEVER])
def test_never_satisfiable(case, request_, hosts, reason):
    assert never_satisfiable(request_, hosts) == reason


def test_satisfiable_on_idle_cluster_even_if_busy_or_closed_now():
    hosts = [host("a", 8, 0), host("b", 8, status="closed", res={"gpu": 2})]
    assert never_satisfiable(req(12, rr="rusage[mem=1000/host]"), hosts) is None
    assert never_satisfiable(req(2, rr="rusage[gpu=1/host]"), hosts) is None
    assert never_satisfiable(req(1, 20, "span[ptile=2]"), hosts) is None
    assert never_satisfiable(req(6, rr="2*{} + 4*{}"), hosts) is None
    sf = place(req(12), hosts)
    assert isinstance(sf, Shortfall) and not sf.never


def test_inputs_not_mutated():
    hosts = [host("a", 8, res={"gpu": 2}), host("b", 8, res={"gpu": 2})]
    before = [(h.slots_free, h.mem_free_mb, dict(h.resources_free)) for h in hosts]
    got = place(req(6, rr="3*{rusage[gpu=1/host]} + 3*{rusage[gpu=1/host]}"), hosts)
    assert got.ntasks == 6
    assert [(h.slots_free, h.mem_free_mb, dict(h.resources_free)) for h in hosts] == before


def test_thousand_hosts_places_within_the_constraints():
    """A thousand hosts (its speed is measured in bench/sched.py, never here)."""
    hosts = [host(f"h{i:04}", 32, i % 33, mem=262144, memfree=(i * 977) % 262144, res={"gpu": 4},
                  resfree={"gpu": i % 5}, type="x86_64" if i % 3 else "aarch64") for i in range(1000)]
    r = req(1, 5000, "select[type==x86_64 && gpu>=1] rusage[mem=2GB:gpu=1] same[type] span[block=2]", limit=100)
    got = place(r, hosts)
    assert isinstance(got, Plan) and got.ntasks > 0
    chosen = {h.name: h for h in hosts if h.name in {a[0] for a in got.alloc}}
    assert len({h.attributes.get("type") for h in chosen.values()}) == 1  # same[type]
    assert all(h.attributes.get("type") == "x86_64" and h.resources_free.get("gpu", 0) >= 1 for h in chosen.values())


# --------------------------------------------------------------------------- property test

ATTRS = ["x86_64", "aarch64"]


@st.composite
def clusters(draw):
    n = draw(st.integers(1, 7))
    hosts = []
    for i in range(n):
        slots = draw(st.integers(0, 8))
        mem = draw(st.sampled_from([4096, 8192, 16384]))
        gpus = draw(st.integers(0, 3))
        hosts.append(HostSupply(
            f"h{i}", slots, draw(st.integers(0, slots)), mem, draw(st.integers(0, mem)),
            {"gpu": gpus} if gpus else {}, {"gpu": draw(st.integers(0, gpus))} if gpus else {},
            {"type": draw(st.sampled_from(ATTRS))}, frozenset(),
            draw(st.sampled_from(["ok", "ok", "ok", "closed"]))))
    return hosts


@st.composite
def requests(draw):
    parts = []
    span = draw(st.sampled_from(["", "span[ptile=1]", "span[ptile=2]", "span[ptile=3]", "span[hosts=1]",
                                 "span[block=2]", "span[hosts=-1]"]))
    parts.append(span)
    parts.append(draw(st.sampled_from(["", "rusage[mem=1000]", "rusage[gpu=1]", "rusage[mem=2000/host:gpu=1]",
                                       "rusage[gpu=1/job]", "rusage[gpu=2 || mem=500]"])))
    parts.append(draw(st.sampled_from(["", "same[type]"])))
    parts.append(draw(st.sampled_from(["", "order[-slots]", "order[mem]", "select[type==x86_64]"])))
    nmin = draw(st.integers(1, 12))
    nmax = draw(st.integers(nmin, 24))
    limit = draw(st.sampled_from([None, 1, 2, 3]))
    return PlacementRequest(nmin, nmax, parse(" ".join(p for p in parts if p)), limit)


def _check_plan(plan: Plan, r: PlacementRequest, hosts: list[HostSupply], lo: int, hi: int):
    by = {h.name: h for h in hosts}
    assert lo <= plan.ntasks <= hi
    names = [h for h, _ in plan.alloc]
    assert len(names) == len(set(names))
    assert all(n > 0 for _, n in plan.alloc)
    for name, n in plan.alloc:
        h = by[name]
        res = plan.reserve[name]
        assert h.status == "ok"
        assert res["slots"] == n <= h.slots_free
        assert res.get("mem", 0) <= h.mem_free_mb + 1e-6
        for k, v in res.items():
            if k not in ("slots", "mem"):
                assert v <= h.resources_free.get(k, 0) + 1e-6
    rr = r.resreq
    if r.host_limit is not None:
        assert len(plan.alloc) <= r.host_limit
    counts = [n for _, n in plan.alloc]
    if rr.span is not None and rr.span.ptile is not None:
        p = rr.span.ptile
        assert sum(1 for c in counts if c != p) <= 1 and all(c <= p for c in counts)
    if rr.span is not None and rr.span.hosts == 1:
        assert len(counts) == 1
    if rr.span is not None and rr.span.block is not None:
        assert all(c % rr.span.block == 0 for c in counts)
    if rr.same:
        assert len({by[h].attributes.get("type") for h in names}) == 1
    if rr.select is not None:
        assert all(by[h].attributes["type"] == "x86_64" for h in names)


@settings(deadline=None, database=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), requests())
def test_property_plans_respect_supply_and_span(hosts, r):
    got = place(r, hosts)
    fixed = plan_fixed(r, r.ntasks_min, hosts)
    if isinstance(got, Plan):
        _check_plan(got, r, hosts, r.ntasks_min, r.ntasks_max)
    else:
        assert isinstance(got, Shortfall) and got.main
        assert fixed is None  # a Shortfall only if MIN does not fit either
        if got.never:
            assert never_satisfiable(r, hosts) is not None
    if fixed is not None:
        _check_plan(fixed, r, hosts, r.ntasks_min, r.ntasks_min)
        assert isinstance(got, Plan) and got.ntasks >= r.ntasks_min
    # never_satisfiable agrees with an idle cluster
    idle = [HostSupply(h.name, h.slots, h.slots, h.mem_mb, h.mem_mb, h.resources, dict(h.resources),
                       h.attributes, h.tags, "ok") for h in hosts]
    if never_satisfiable(r, hosts) is not None:
        assert isinstance(place(r, idle), Shortfall)


def test_empty_request_default():
    assert PlacementRequest(1, 1).resreq == ResReq()
    assert alloc(place(PlacementRequest(1, 1), [host("a", 1)])) == [("a", 1)]


def _cut(full: list, k: int) -> list[str]:
    """The rule of ``max_host_lines`` (RES-6), applied to the unbounded lines: every line of
    the first k hosts that have any, then one line counting the hosts left out."""
    kept, seen, dropped = [], [], set()
    for h in full:
        if h.host in seen or len(seen) < k:
            if h.host not in seen:
                seen.append(h.host)
            kept.append(h.message)
        else:
            dropped.add(h.host)
    return kept + ([f"and {len(dropped)} more host(s) with shortfalls"] if dropped else [])


@settings(deadline=None, database=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), requests(), st.integers(0, 4))
def test_bounded_host_lines_are_the_first_hosts_lines_of_the_full_reason(hosts, r, k):
    """RES-6, issue 19: a busy cluster of 5,000 hosts gives each request a line per host, so a
    session asks for the lines of the first 50 hosts (by name) only, and the planner makes no
    others. What it says must be the full reason cut by that rule: every line of the first k
    hosts with a shortfall (a host may have several: slots and mem), then "and N more host(s)
    with shortfalls"; the main line and hint unchanged. `shortfall()` (for a caller that has
    already found the request does not fit) says the same as `place()`."""
    full = place(r, hosts)
    if isinstance(full, Plan):
        return
    cut = place(r, hosts, max_host_lines=k)
    assert lines(cut) == _cut(full.hosts, k)
    assert (cut.main, cut.hint, cut.never, cut.start_with) == (full.main, full.hint, full.never, full.start_with)
    again = shortfall(r, hosts, max_host_lines=k)
    assert (again.main, lines(again), again.hint, again.never, again.start_with) == \
        (cut.main, lines(cut), cut.hint, cut.never, cut.start_with)


def test_bounded_host_lines_keep_every_line_of_a_kept_host():
    """RES-6: a host short of slots and memory both keeps both lines within the bound."""
    hosts = [host(f"h{i}", 4, 0, mem=1000, memfree=0) for i in range(4)] + [host("z", 4, status="closed")]
    sf = place(req(1, rr="rusage[mem=500]"), hosts, max_host_lines=1)
    assert lines(sf) == ["h0: slots 0 free of 4, needs 1", "h0: mem 0 MB free of 1000 MB, needs 500 MB",
                         "and 4 more host(s) with shortfalls"]

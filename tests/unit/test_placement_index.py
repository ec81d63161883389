"""Placement without scans (issue 19 parts 1-2, RES-4, RES-3, SCHED-1, SIM-2).

- The host index (`placement.place_ordered`, used by a session for plain requests) gives
  exactly the plan the full planner (`placement.place`) gives, for any hosts and any plain
  request; a whole session decides the same with and without it.
- Ties spread: among hosts with as many free slots, the one a job was dispatched to least
  recently goes first (then the name); `order[]` keys still come first.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

import xced.scheduler.session as session_mod
from xced.resreq import parse
from xced.scheduler.placement import Plan, PlacementRequest, matching_hosts, ordered_form, place, place_ordered
from xced.scheduler.session import schedule
from xced.scheduler.snapshot import HostSupply, JobSnap, QueueSnap, RunSnap, Snapshot

PLAIN = ["", "span[hosts=1]", "span[hosts=-1]", "rusage[mem=1000]", "rusage[mem=1500] span[hosts=1]",
         "rusage[mem=0]", "rusage[mem=700]", "select[type==X86_64]", "select[maxslots>=4] rusage[mem=900]",
         "select[fast] span[hosts=1]", "select[maxgpu>=1 || type==aarch64]", "select[hname!=h1]"]
#: selects that read what placing changes: the index is not used for them
DYNAMIC = ["select[slots>=2]", "select[mem>3000]", "select[gpu>=1]"]


@st.composite
def hosts(draw, max_hosts=12):
    out = []
    for i in range(draw(st.integers(1, max_hosts))):
        slots = draw(st.integers(1, 8))
        mem = draw(st.sampled_from([2000, 4000, 8000]))
        gpu = draw(st.sampled_from([0, 0, 2]))
        out.append(HostSupply(f"h{i}", slots, draw(st.integers(0, slots)), mem, draw(st.integers(-100, mem)),
                              {"gpu": gpu} if gpu else {}, {"gpu": draw(st.integers(0, gpu))} if gpu else {},
                              {"type": draw(st.sampled_from(["X86_64", "aarch64"]))},
                              draw(st.sampled_from([frozenset(), frozenset({"fast"})])),
                              status=draw(st.sampled_from(["ok", "ok", "ok", "closed"])),
                              exclusive=draw(st.sampled_from([False, False, False, True])),
                              last_dispatch=draw(st.sampled_from([0.0, 0.0, 5.0, 9.0]))))
    return out


@st.composite
def plain_requests(draw):
    lo = draw(st.integers(1, 10))
    hi = draw(st.integers(lo, 14))
    return PlacementRequest(lo, hi, parse(draw(st.sampled_from(PLAIN))))


def _ordered_names(hs):
    keyed = sorted((-h.slots_free, h.last_dispatch, h.name) for h in hs
                   if h.slots_free > 0 and h.status == "ok" and not h.exclusive)
    return [k[2] for k in keyed]


@settings(max_examples=400, deadline=None)
@given(hosts(), plain_requests())
def test_the_index_places_a_plain_request_as_the_full_planner_does(hs, req):
    """RES-3, RES-4: the largest count of the range that fits, on the same hosts in the same
    order with the same reservation; None exactly when the full planner finds no plan."""
    form = ordered_form(req)
    assert form is not None
    match = matching_hosts(form[2], hs) if form[2] is not None else None
    assert form[2] is None or match is not None
    full = place(req, hs, explain=False)
    fast = place_ordered(req, form, _ordered_names(hs), {h.name: h for h in hs}, match)
    if isinstance(full, Plan):
        assert fast is not None and (fast.alloc, fast.reserve, fast.alternative, fast.exclusive) == \
            (full.alloc, full.reserve, full.alternative, full.exclusive)
    else:
        assert fast is None


@settings(max_examples=400, deadline=None)
@given(hosts(), plain_requests(), st.sampled_from(PLAIN + DYNAMIC + ["select[r15s<1]", "span[ptile=2]"]))
def test_the_idle_cluster_check_of_a_plain_request_agrees_with_the_full_planner(hs, req, text):
    """MERGE-2, RES-6: "can never start" is judged on an idle cluster with every host open.
    For a plain request that check is a sum (or, span[hosts=1], a maximum) of what each
    matching host holds, with no sort (issue 19); it must say a request fits exactly when
    the full planner places it on the hosts' totals (closed and busy hosts counted whole),
    and must leave every other request to the full planner."""
    from xced.scheduler.placement import _Counters, _fits_idle_plain, _place_rr, _without_load

    req = PlacementRequest(req.ntasks_min, req.ntasks_max, parse(text))
    rr = _without_load(req.resreq)
    full = _place_rr(rr, _Counters(hs, idle=True), req.ntasks_min, req.ntasks_max, None) is not None
    fast = _fits_idle_plain(PlacementRequest(req.ntasks_min, req.ntasks_max, rr), hs)
    if ordered_form(req) is not None and (text not in DYNAMIC):
        assert fast == full
    else:
        assert not fast or full  # it may only ever say "fits" when the planner does


def test_requests_the_index_does_not_take_go_to_the_full_planner():
    """An order, same, ptile, block, a resource other than memory, a per-host or per-job
    term, rusage alternatives, a host limit or an exclusive job: not plain; a select that
    reads free slots, memory or a resource's free amount has no fixed set of hosts."""
    hs = [HostSupply("h1", 4, 4, 8000, 8000, {"gpu": 2}, {"gpu": 1})]
    for text in DYNAMIC:
        form = ordered_form(PlacementRequest(1, 1, parse(text)))
        assert form is not None and matching_hosts(form[2], hs) is None, text
    for text in ["order[-slots]", "same[type]", "span[ptile=2]", "span[block=2]",
                 "rusage[gpu=1]", "rusage[mem=100/host]", "rusage[mem=100/job]", "rusage[mem=1 || mem=2]",
                 "{rusage[mem=1]} || {span[hosts=1]}"]:
        assert ordered_form(PlacementRequest(1, 1, parse(text))) is None, text
    assert ordered_form(PlacementRequest(1, 1, parse(""), host_limit=2)) is None
    assert ordered_form(PlacementRequest(1, 1, parse(""), exclusive=True)) is None


@st.composite
def snapshots(draw):
    hs = draw(hosts(max_hosts=10))
    pending = []
    for k in range(draw(st.integers(1, 25))):
        lo = draw(st.integers(1, 6))
        text = draw(st.sampled_from(PLAIN + DYNAMIC + ["span[ptile=2]", "order[-slots]"]))
        pending.append(JobSnap(k + 1, 0, draw(st.sampled_from(["fcfs", "easy"])), float(k), lo,
                               draw(st.integers(lo, lo + 3)), parse(text),
                               run_limit_s=draw(st.sampled_from([None, 60.0, 3600.0]))))
    running = [RunSnap(1000 + i, 0, 500.0 + 100 * i, {h.name: {"slots": h.slots - h.slots_free}})
               for i, h in enumerate(hs) if h.slots_free < h.slots]
    return Snapshot(hs, [QueueSnap("easy", 40, 0, None, True), QueueSnap("fcfs", 30, 1, None, False)],
                    pending, {}, running)


@settings(max_examples=150, deadline=None)
@given(snapshots())
def test_a_session_decides_the_same_with_and_without_the_index(snap):
    """SCHED-1, SIM-2: dispatches, reservations and pend reasons are those of the full
    planner alone, backfilling queue and strict queue alike."""
    with_index = schedule(snap, 100.0)
    saved = session_mod.ordered_form
    session_mod.ordered_form = lambda req: None
    try:
        without = schedule(snap, 100.0)
    finally:
        session_mod.ordered_form = saved
    assert [(d.job_id, d.alloc, d.reserve) for d in with_index.dispatches] == \
        [(d.job_id, d.alloc, d.reserve) for d in without.dispatches]
    assert with_index.reservations == without.reservations
    assert with_index.pend_reasons == without.pend_reasons


def _snap(hosts_, jobs):
    return Snapshot(hosts_, [QueueSnap("normal", 30, 0)], jobs)


def test_ties_go_to_the_host_dispatched_to_least_recently():
    """RES-4 (issue 19 part 2): four equally free hosts, h1 and h10 dispatched to lately: a
    single job goes to the host never dispatched to first by name (h2), not to h1, and
    the next session's job, with h2 now dispatched to, to h3."""
    hs = [HostSupply(n, 4, 4, 8000, 8000, last_dispatch=t) for n, t in
          (("h1", 50.0), ("h10", 40.0), ("h2", 0.0), ("h3", 0.0))]
    out = schedule(_snap(hs, [JobSnap(1, 0, "normal", 0.0, 1, 1)]), 100.0)
    assert out.dispatches[0].alloc == [("h2", 1)]
    hs[2] = HostSupply("h2", 4, 4, 8000, 8000, last_dispatch=100.0)  # it ended, the host is free again
    out = schedule(_snap(hs, [JobSnap(2, 0, "normal", 0.0, 1, 1)]), 101.0)
    assert out.dispatches[0].alloc == [("h3", 1)]


def test_many_single_jobs_in_one_session_spread_over_equal_hosts():
    """RES-4: 8 single jobs over 4 equally free hosts of 4 slots: two on each (most free first,
    then least recently dispatched), by the index and by the full planner (a select)."""
    hs = [HostSupply(f"h{i}", 4, 4, 8000, 8000) for i in range(1, 5)]
    for text in ("", "select[maxslots>=1]"):
        jobs = [JobSnap(k, 0, "normal", float(k), 1, 1, parse(text)) for k in range(1, 9)]
        out = schedule(_snap(hs, jobs), 100.0)
        per: dict[str, int] = {}
        for d in out.dispatches:
            per[d.alloc[0][0]] = per.get(d.alloc[0][0], 0) + 1
        assert per == {"h1": 2, "h2": 2, "h3": 2, "h4": 2}, text


def test_an_order_key_still_wins_over_the_tie_rule():
    """RES-4: order[-slots] packs onto the fullest host whatever the last dispatches; the
    tie rule only splits hosts the order keys leave equal."""
    hs = [HostSupply("h1", 4, 1, 8000, 8000, last_dispatch=99.0), HostSupply("h2", 4, 4, 8000, 8000),
          HostSupply("h3", 4, 1, 8000, 8000, last_dispatch=10.0)]
    out = schedule(_snap(hs, [JobSnap(1, 0, "normal", 0.0, 1, 1, parse("order[-slots]"))]), 100.0)
    assert out.dispatches[0].alloc == [("h3", 1)]


def test_a_dispatch_in_the_session_makes_its_host_the_most_recent():
    """RES-4: host a (4 free) takes the first job and is left with 3, as many as b; the
    second job goes to b, which no job has gone to, not to a by name."""
    hs = [HostSupply("a", 4, 4, 8000, 8000), HostSupply("b", 4, 3, 8000, 8000)]
    out = schedule(_snap(hs, [JobSnap(1, 0, "normal", 0.0, 1, 1), JobSnap(2, 0, "normal", 1.0, 1, 1)]), 100.0)
    assert [d.alloc for d in out.dispatches] == [[("a", 1)], [("b", 1)]]


@settings(max_examples=60, deadline=None)
@given(snapshots())
def test_a_session_given_the_host_index_decides_as_one_that_sorts_the_hosts(snap):
    """Issue 19 part 4: Snapshot.host_order (the index the controller keeps) stands for the
    session's own sort of the hosts: the same dispatches, reservations and reasons."""
    from dataclasses import replace

    from xced.scheduler.snapshot import host_order_key

    given_order = replace(snap, host_order=sorted(k for k in map(host_order_key, snap.hosts) if k is not None))
    a, b = schedule(snap, 100.0), schedule(given_order, 100.0)
    assert [(d.job_id, d.alloc, d.reserve) for d in a.dispatches] == [(d.job_id, d.alloc, d.reserve) for d in b.dispatches]
    assert a.reservations == b.reservations and a.pend_reasons == b.pend_reasons
    assert given_order.host_order == sorted(k for k in map(host_order_key, snap.hosts) if k is not None)  # not changed


def test_the_trace_says_which_requests_read_every_host():
    """Issue 19 part 1 (D-4): a request the index places says nothing more; one that needs the
    full planner says why in its dispatch or pend line of the decision trace."""
    hs = [HostSupply(f"h{i}", 4, 4, 8000, 8000, {"gpu": 1}, {"gpu": 1}) for i in range(1, 4)]
    jobs = [JobSnap(1, 0, "normal", 1.0, 1, 1, parse("select[maxslots>=4]")),
            JobSnap(2, 0, "normal", 2.0, 2, 2, parse("span[ptile=1]")),
            JobSnap(3, 0, "normal", 3.0, 1, 1, parse("select[slots>=1]")),
            JobSnap(4, 0, "normal", 4.0, 1, 1, parse("rusage[gpu=1]")),
            JobSnap(5, 0, "normal", 5.0, 64, 64, parse("order[-slots]"))]
    lines = {t.ref: t.text for t in schedule(_snap(hs, jobs), 100.0).trace if t.ref}
    assert "every host read" not in lines["1"]
    assert lines["2"].endswith("(every host read: span[ptile=1])")
    assert lines["3"].endswith("(every host read: a select on free slots, memory or a resource)")
    assert lines["4"].endswith("(every host read: rusage of gpu)")
    assert lines["5"].startswith("pend:") and lines["5"].endswith("(every host read: order[-slots])")

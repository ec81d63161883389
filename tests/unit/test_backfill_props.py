"""Properties of EASY backfilling (SCHED-1) on random small clusters (hypothesis):

- the reserved start found by the galloping search equals a plain scan over end times;
- whatever a session starts, recomputing the head's reservation afterwards (with the
  started jobs running to their run limits) never gives a later start: backfill never
  delays the reserved head.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from xced.resreq import parse
from xced.scheduler.placement import Plan, PlacementRequest, place
from xced.scheduler.session import _reserve, _FreeHosts, schedule
from xced.scheduler.snapshot import HostSupply, JobSnap, QueueSnap, RunSnap, Snapshot

NOW = 1000.0
SHAPES = ["", "span[hosts=1]", "rusage[gpu=1]", "span[ptile=2]", "select[type == a]"]


@st.composite
def clusters(draw):
    nh = draw(st.integers(1, 4))
    hosts, running = [], []
    for i in range(nh):
        slots = draw(st.integers(1, 6))
        gpus = draw(st.integers(0, 2))
        busy = draw(st.integers(0, slots))
        gbusy = draw(st.integers(0, gpus))
        name = f"h{i}"
        hosts.append(HostSupply(name, slots, slots - busy, 1000, 1000, {"gpu": gpus}, {"gpu": gpus - gbusy},
                              {"type": draw(st.sampled_from(["a", "b"]))}))
        left, gleft = busy, gbusy
        while left > 0 or gleft > 0:
            n = draw(st.integers(1, max(left, 1))) if left else 0
            g = draw(st.integers(0, gleft))
            if n == 0 and g == 0:
                g = gleft
            end = NOW + draw(st.integers(1, 50)) * 10
            running.append(RunSnap(len(running) + 100, 0, end, {name: {"slots": n, "gpu": g} if g else {"slots": n}}))
            left -= n
            gleft -= g
    return hosts, running


def job(jid, n, shape, limit):
    return JobSnap(jid, 0, "q", float(jid), n, n, parse(shape), run_limit_s=limit)


def scan(req, supply, ends):
    sup = supply.copy()
    i = 0
    while i < len(ends):
        t = ends[i][0]
        while i < len(ends) and ends[i][0] == t:
            sup.take(ends[i][1], -1)
            i += 1
        if isinstance(place(req, list(sup.hosts.values()), explain=False), Plan):
            return max(t, NOW)
    return None


@settings(max_examples=150, deadline=None)
@given(clusters(), st.integers(1, 8), st.sampled_from(SHAPES))
def test_galloping_reservation_equals_a_scan(cl, n, shape):
    hosts, running = cl
    snap = Snapshot(hosts, [], [], {}, running)
    supply = _FreeHosts.of(snap)
    ends = sorted(((r.end_estimate, r.reserve) for r in running), key=lambda x: x[0])
    req = PlacementRequest(n, n, parse(shape))
    got = _reserve(req, supply, ends, NOW)
    assert (got[0] if got else None) == scan(req, supply, ends)


@settings(max_examples=150, deadline=None)
@given(clusters(), st.lists(st.tuples(st.integers(1, 6), st.sampled_from(SHAPES), st.integers(1, 60)),
                            min_size=2, max_size=8))
def test_backfill_never_delays_the_reserved_head(cl, reqs):
    hosts, running = cl
    pending = [job(k + 1, n, shape, limit * 10) for k, (n, shape, limit) in enumerate(reqs)]
    queues = [QueueSnap("q", 30, 0, None, True)]
    out = schedule(Snapshot(hosts, queues, pending, {}, running), NOW)
    if not out.reservations:
        return
    head = out.reservations[0]
    hj = next(j for j in pending if str(j.job_id) == head.job)
    # the cluster after the session: dispatched jobs hold their reservations until their run limits
    taken = _FreeHosts.of(Snapshot(hosts, [], [], {}, []))
    for d in out.dispatches:
        taken.take(d.reserve)
    after = running + [RunSnap(d.job_id, 0, NOW + next(j.run_limit_s for j in pending if j.job_id == d.job_id),
                               d.reserve) for d in out.dispatches]
    ends = sorted(((r.end_estimate, r.reserve) for r in after), key=lambda x: x[0])
    req = PlacementRequest(hj.ntasks_min, hj.ntasks_max, hj.resreq)
    again = scan(req, taken, ends)
    assert again is not None and again <= head.start, (head, again, out.trace)

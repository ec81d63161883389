"""Share carving and quotas (PRJ-6, PRJ-7) in xced/policy/projects.py: table tests of the
carving, the roll-up of use into caps, the cap lines a user reads, the submit-time refusal
and the report `xcecli projects` shows. The scheduler's side is in test_scheduler.py."""

from __future__ import annotations

import pytest

from xced.model import project as model_project
from xced.model.project import ProjectConfig, ProjectsConfig, ShareTerm
from xced.policy import projects as pp
from xced.policy.projects import QuotaBook, never_fits, report, reserve_use, resolve_shares, supply_totals
from xced.scheduler.snapshot import HostSupply


def P(path, share=None, quota=None, member_quota=None, **kw):
    """A project: `share` is "60%" (of every resource) or {res: "50%" | amount}."""
    if isinstance(share, str):
        kw["share_percent"] = float(share.rstrip("%"))
    elif share:
        kw["share"] = {r: ShareTerm(percent=float(v.rstrip("%"))) if isinstance(v, str) else ShareTerm(amount=v)
                       for r, v in share.items()}
    return ProjectConfig(path=path, quota=quota or {}, member_quota=member_quota or {}, **kw)


def cfg(*projects):
    return ProjectsConfig(projects=list(projects))


def sup(slots, mem=0, **res):
    return {"slots": slots, "mem_mb": mem, **res}


def shares(c, supply):
    """{path: own resolved share} ("" is the cluster's unassigned part)."""
    got = resolve_shares(c, supply)
    out = {path: r.share for path, r in got.items() if path}
    out[""] = got[""].unassigned
    return out


def test_the_keys_are_the_models():
    assert (pp.SLOTS, pp.MEM) == (model_project.SLOTS, model_project.MEM)


# ------------------------------------------------------------------ carving (PRJ-6)

CARVING = [
    pytest.param(  # percentages of percentages, every resource
        cfg(P("/a", "50%"), P("/a/b", "50%"), P("/a/b/c", "10%")), sup(200, 8000, gpu=8),
        {"/a": sup(100, 4000, gpu=4), "/a/b": sup(50, 2000, gpu=2), "/a/b/c": sup(5, 200, gpu=0),
         "": sup(100, 4000, gpu=4)},
        id="percent-of-percent"),
    pytest.param(  # a per-resource percentage of that resource only
        cfg(P("/a", {"slots": "25%", "gpu": "50%"})), sup(100, 1000, gpu=8),
        {"/a": {"slots": 25, "gpu": 4}, "": sup(75, 1000, gpu=4)},
        id="per-resource-percent"),
    pytest.param(  # absolute under a percentage: taken as is
        cfg(P("/a", "50%"), P("/a/b", {"slots": 20, "mem_mb": 1024})), sup(100, 8192),
        {"/a": sup(50, 4096), "/a/b": {"slots": 20, "mem_mb": 1024}, "": sup(50, 4096)},
        id="absolute-under-percent"),
    pytest.param(  # rounding down: siblings never add up to more than the parent
        cfg(P("/x", "33%"), P("/y", "33%"), P("/z", "33%")), sup(10, 1001, lic=2.5),
        {"/x": sup(3, 330, lic=0.825), "/y": sup(3, 330, lic=0.825), "/z": sup(3, 330, lic=0.825),
         "": sup(1, 11, lic=2.5 - 3 * 0.825)},
        id="rounding-floor"),
    pytest.param(  # 50% of 7 slots: 3 each, one slot stays unassigned; memory to whole MB
        cfg(P("/x", "50%"), P("/y", "50%")), sup(7, 1001),
        {"/x": sup(3, 500), "/y": sup(3, 500), "": sup(1, 1)},
        id="rounding-halves"),
    pytest.param(  # a share-less parent's children carve from the pool it draws from
        cfg(P("/a", "40%"), P("/b"), P("/b/c", "50%")), sup(100),
        {"/a": sup(40, 0), "/b": {}, "/b/c": sup(30, 0), "": sup(60, 0)},
        id="child-of-shareless"),
]


@pytest.mark.parametrize("config, supply, want", CARVING)
def test_share_carving(config, supply, want):
    got = shares(config, supply)
    assert set(got) == set(want)
    for path, w in want.items():
        assert got[path] == pytest.approx(w), path


def test_supply_changing_as_a_worker_joins_resolves_again():
    c = cfg(P("/a", "50%"), P("/a/b", {"slots": 40}), P("/c", {"slots": 20}))
    hosts = [HostSupply("h1", 32, 0, 1000, 0), HostSupply("h2", 32, 32, 1000, 1000)]
    before = resolve_shares(c, supply_totals(hosts))
    assert before["/a"].share["slots"] == 32 and before["/a/b"].share["slots"] == 32
    assert before["/a/b"].capped == {"slots": 40}  # larger than its parent's 50%: capped and flagged
    hosts.append(HostSupply("h3", 32, 32, 1000, 1000))  # a worker joins
    after = resolve_shares(c, supply_totals(hosts))
    assert after["/a"].share == {"slots": 48, "mem_mb": 1500}
    assert after["/a/b"].share["slots"] == 40 and after["/a/b"].capped == {}
    assert after["/c"].share["slots"] == 20 and after[""].unassigned["slots"] == 96 - 48 - 20
    # a host that is down is not present: its supply does not count
    hosts.append(HostSupply("h4", 32, 32, 1000, 1000, status="unavail"))
    assert resolve_shares(c, supply_totals(hosts))["/a"].share["slots"] == 48
    assert supply_totals(hosts, usable_only=False)["slots"] == 128


def test_absolute_child_larger_than_its_parents_share_is_capped_and_flagged():
    c = cfg(P("/a", "25%"), P("/a/b", {"slots": 40, "gpu": 8}))
    got = resolve_shares(c, sup(100, 0, gpu=4))
    assert got["/a/b"].share == {"slots": 25, "gpu": 1}
    assert got["/a/b"].capped == {"slots": 40, "gpu": 8}
    row = {r["path"]: r for r in report(c, sup(100, 0, gpu=4))["projects"]}["/a/b"]
    assert row["capped"] == ["gpu", "slots"] and row["share"] == {"slots": 25, "gpu": 1}
    book = QuotaBook(c, sup(100, 0, gpu=4), [("/a/b", "u", {"slots": 25})])
    assert [x.text for x in book.check("/a/b", "u", {"slots": 1})] == [
        "project /a/b at share (capped at the parent's share): 25/25 slots",
        "project /a at share: 25/25 slots"]


def test_absolute_siblings_over_their_parent_are_scaled_to_fit_and_flagged():
    c = cfg(P("/a", "50%"), P("/a/x", {"slots": 40}), P("/a/y", {"slots": 30}))
    got = resolve_shares(c, sup(100))
    assert (got["/a/x"].share["slots"], got["/a/y"].share["slots"]) == (28, 21)  # 40*50/70, 30*50/70, floored
    assert got["/a/x"].capped == {"slots": 40} and got["/a/y"].capped == {"slots": 30}
    assert got["/a"].unassigned["slots"] == 1


def test_unassigned_part_is_drawn_by_the_parents_own_jobs_and_shareless_children():
    c = cfg(P("/p", "50%"), P("/p/c", {"slots": 30}), P("/p/d"), P("/q"))
    usage = [("/p", "u1", {"slots": 12}), ("/p/d", "u2", {"slots": 8}), ("/p/c", "u3", {"slots": 5})]
    book = QuotaBook(c, sup(100), usage)
    full = "unassigned part of /p at share: 20/20 slots"
    assert [x.text for x in book.check("/p", "u1", {"slots": 1})] == [full]
    assert [x.text for x in book.check("/p/d", "u9", {"slots": 1})] == [full]
    assert book.check("/p/c", "u3", {"slots": 25}) == []  # its own share: 5 of 30 used
    assert book.headroom("/p/c", "u3") == 25 and book.headroom("/p", "u1") == 0
    # a top-level project with no share draws from the cluster's unassigned part (50)
    assert book.headroom("/q", "x") == 50
    assert [x.text for x in book.check("/q", "x", {"slots": 51})] == [
        "unassigned part of the cluster at share: 0/50 slots, 51 needed"]
    # a project the config no longer defines counts as a share-less child of its ancestor
    assert [x.text for x in book.check("/p/gone", "u1", {"slots": 1})] == [full]


# ------------------------------------------------------------------ roll-up (PRJ-7)

ISSUE = cfg(P("/physics", "60%"),
            P("/physics/hep", {"slots": 40}, quota={"slots": 32}, member_quota={"slots": 8}),
            P("/physics/astro"),
            P("/bio", "30%"))


def test_quota_roll_up_in_three_projects_and_member_quota():
    usage = [("/physics/hep", "bob", {"slots": 4, "mem_mb": 1000}), ("/physics/hep", "bob", {"slots": 4}),
             ("/physics/hep", "erin", {"slots": 8}), ("/physics/hep", "frank", {"slots": 8}),
             ("/physics/hep", "ivan", {"slots": 4}), ("/physics/astro", "dave", {"slots": 16, "gpu": 2}),
             ("/bio", "gina", {"slots": 10}), (None, "old", {"slots": 5})]
    book = QuotaBook(ISSUE, sup(100, 100_000, gpu=8), usage)
    assert book.use_of("/physics") == {"slots": 44, "mem_mb": 1000, "gpu": 2}
    assert book.use_of("/physics/hep") == {"slots": 28, "mem_mb": 1000, "gpu": 0}
    assert book.use_of("/bio")["slots"] == 10  # the job with no project counts nowhere
    # bob is at his member_quota; zoe is not, but the project's quota leaves 4 slots
    assert [x.text for x in book.check("/physics/hep", "bob", {"slots": 1})] == [
        "user bob at member_quota of /physics/hep: 8/8 slots"]
    assert book.headroom("/physics/hep", "bob") == 0 and book.headroom("/physics/hep", "ivan") == 4
    assert book.headroom("/physics/hep", "zoe") == 4
    assert [x.text for x in book.check("/physics/hep", "zoe", {"slots": 6})] == [
        "project /physics/hep at quota: 28/32 slots, 6 needed"]
    book.take("/physics/hep", "zoe", {"slots": 4})
    assert book.headroom("/physics/hep", "zoe") == 0 and book.use_of("/physics/hep")["slots"] == 32
    assert [x.text for x in book.check("/physics/hep", "ivan", {"slots": 1})] == [
        "project /physics/hep at quota: 32/32 slots"]
    # astro draws from /physics's unassigned part: 60 - 40 = 20, 16 held
    assert book.headroom("/physics/astro", "dave") == 4
    book.take("/physics/astro", "dave", {"slots": 4})
    assert book.headroom("/physics/astro", "dave") == 0 and book.use_of("/physics")["slots"] == 52
    # every cap in the way, nearest project first
    assert [x.text for x in book.check("/physics/hep", "bob", {"slots": 2})] == [
        "project /physics/hep at quota: 32/32 slots",
        "user bob at member_quota of /physics/hep: 8/8 slots"]
    caps = book.check("/physics/hep", "bob", {"slots": 2})
    assert [(x.kind, x.project, x.user, x.limit, x.use, x.need) for x in caps][1] == (
        "member_quota", "/physics/hep", "bob", 8, 8, 2)
    assert book.check(None, "anyone", {"slots": 1000}) == [] and book.headroom(None, "x") is None


def test_memory_and_resource_caps_and_their_lines():
    c = cfg(P("/a", quota={"mem_mb": 4096, "gpu": 2}), P("/b", {"gpu": "50%"}))
    book = QuotaBook(c, sup(10, 10_000, gpu=4), [("/a", "u", {"slots": 1, "mem_mb": 3072, "gpu": 2})])
    assert book.headroom("/a", "u") is None  # nothing caps its slots
    assert [x.text for x in book.check("/a", "u", {"slots": 1, "mem_mb": 2048, "gpu": 1})] == [
        "project /a at quota: 3072/4096 MB of memory, 2048 needed", "project /a at quota: 2/2 gpu",
        "unassigned part of the cluster at share: 2/2 gpu"]  # /b's share of gpu leaves 2 to the others
    assert book.check("/a", "u", {"slots": 4}) == []  # a job that needs no more memory or gpu fits
    assert [x.text for x in book.check("/b", "u", {"gpu": 3})] == ["project /b at share: 0/2 gpu, 3 needed"]


def test_reserve_use_is_the_one_conversion():
    reserve = {"h1": {"slots": 4, "mem": 2048, "gpu": 1}, "h2": {"slots": 2, "mem": 1024}, "h3": {"slots": 1}}
    assert reserve_use(reserve) == {"slots": 7, "mem_mb": 3072, "gpu": 1}
    assert reserve_use({}) == {}


# ------------------------------------------------------------------ submit time, report

def test_never_fits_refuses_what_no_cap_could_ever_hold():
    s = sup(100, 100_000)
    assert never_fits(ISSUE, s, "/physics/hep", "bob", {"slots": 64}) == (
        "The job needs 64 slots and can never start in project /physics/hep: project /physics/hep has a quota "
        "of 32 slots; project /physics/hep's share of the whole cluster is 40 slots; user bob's member_quota in "
        "/physics/hep is 8 slots; project /physics's share of the whole cluster is 60 slots")
    assert never_fits(ISSUE, s, "/physics/hep", "bob", {"slots": 9}) == (
        "The job needs 9 slots and can never start in project /physics/hep: user bob's member_quota in "
        "/physics/hep is 8 slots")
    assert never_fits(ISSUE, s, "/bio", "gina", {"slots": 31}).endswith(
        "project /bio's share of the whole cluster is 30 slots")
    assert never_fits(ISSUE, s, "/physics/hep", "bob", {"slots": 8}) is None
    assert never_fits(ISSUE, s, None, "bob", {"slots": 1000}) is None  # no project: never capped
    assert never_fits(ProjectsConfig(), s, "/physics", "bob", {"slots": 1000}) is None  # open mode
    # a share of a resource the cluster has none of yet may grow: only quotas refuse it
    g = cfg(P("/g", "50%", quota={"gpu": 2}))
    assert never_fits(g, s, "/g", "u", {"slots": 1, "gpu": 2}) is None
    assert never_fits(g, s, "/g", "u", {"gpu": 3}) == (
        "The job needs 3 gpu and can never start in project /g: project /g has a quota of 2 gpu")


def test_report_shape():
    usage = [("/physics/hep", "bob", {"slots": 8, "mem_mb": 512}), ("/physics/astro", "dave", {"slots": 3})]
    got = report(ISSUE, sup(100, 1000, gpu=8), usage)
    assert got["supply"] == {"slots": 100, "mem_mb": 1000, "gpu": 8}
    assert got["unassigned"] == {"slots": 10, "mem_mb": 100, "gpu": 2}  # 8 - floor(4.8) - floor(2.4)
    rows = {r["path"]: r for r in got["projects"]}
    assert list(rows) == ["/physics", "/physics/hep", "/physics/astro", "/bio"]
    assert rows["/physics/hep"] == {
        "path": "/physics/hep", "share": {"slots": 40}, "draws_from": None, "unassigned": {},
        "quota": {"slots": 32}, "member_quota": {"slots": 8}, "cap": {"slots": 32, "mem_mb": 600, "gpu": 4},
        "capped": [], "use": {"slots": 8, "mem_mb": 512, "gpu": 0}, "member_use": {"bob": {"slots": 8}}}  # the resources of its member_quota
    assert rows["/physics"]["share"] == {"slots": 60, "mem_mb": 600, "gpu": 4}
    assert rows["/physics"]["unassigned"] == {"slots": 20, "mem_mb": 600, "gpu": 4}
    assert rows["/physics"]["use"] == {"slots": 11, "mem_mb": 512, "gpu": 0}
    assert rows["/physics/astro"]["draws_from"] == "/physics" and rows["/physics/astro"]["cap"]["slots"] == 20


def test_a_session_of_many_jobs_works_out_each_project_and_user_once():
    book = QuotaBook(ISSUE, sup(100))
    for _ in range(1000):
        book.headroom("/physics/hep", "bob")
        book.check("/physics/hep", "bob", {"slots": 1})
    assert list(book.tree.plans) == [("/physics/hep", "bob")]
    # the next session with the same config and supply reuses what was worked out; new use is its own
    again = QuotaBook(ISSUE, sup(100), [("/physics/hep", "bob", {"slots": 8})])
    assert again.tree is book.tree and again.headroom("/physics/hep", "bob") == 0
    assert book.headroom("/physics/hep", "bob") == 8
    # another supply (a worker joined) or another config object: another tree
    assert QuotaBook(ISSUE, sup(132)).tree is not book.tree
    assert QuotaBook(ISSUE.model_copy(), sup(100)).tree is not book.tree


# ------------------------------------------------------------------ through the controller

def test_the_controllers_snapshot_carries_projects_use_and_why_lists_the_caps(tmp_path):
    """D-4: the controller's snapshot gives each pending element its project and user and the
    running elements' use; a job held back by a quota pends with the cap line, and `why`
    lists every cap. Open mode: no projects in the snapshot at all."""
    from tests.unit.test_controller import ALICE, BOB, Clock, FakeWorker, req
    from xced.controller.controller import Controller
    from xced.model.config import ClusterConfig, ClusterSettings, HostConfig, QueueConfig
    from xced.store.sqlite import SqliteStore

    projects = cfg(P("/a", quota={"slots": 2}, member_quota={"slots": 1}))
    config = ClusterConfig(settings=ClusterSettings(mode="test"), queues=[QueueConfig(name="normal")],
                           hosts=[HostConfig(name="h1", slots=8, memory_mb=1000)], projects=projects)
    store = SqliteStore(tmp_path / "db")
    try:
        c = Controller(config, store, tmp_path, clock=Clock())
        c.attach_worker(FakeWorker())
        jobs = [c.submit(req(project="/a"), who) for who in (ALICE, ALICE, BOB, BOB)] + [c.submit(req(), ALICE)]
        c.run_session()
        assert [j.elements[0].state for j in jobs] == ["RUN", "PEND", "RUN", "PEND", "RUN"]
        snap = c.snapshot()
        assert sorted(snap.usage) == [("/a", "alice", {"slots": 1}), ("/a", "bob", {"slots": 1})]
        assert [(s.project, s.user) for s in snap.pending] == [("/a", "alice"), ("/a", "bob")]
        assert sorted(c.project_usage()) == sorted(snap.usage)
        assert jobs[1].elements[0].pend_reason.main == "user alice at member_quota of /a: 1/1 slots"  # bob not yet in
        c.run_session()  # now both run: the quota is full too
        w = c.why(jobs[1].id, None)
        assert w["main"] == "project /a at quota: 2/2 slots"
        assert w["caps"] == ["project /a at quota: 2/2 slots", "user alice at member_quota of /a: 1/1 slots"]
        assert any("pend on project caps" in line for line in w["trace"])
        c.config = config.model_copy(update={"projects": ProjectsConfig()})  # open mode
        snap = c.snapshot()
        assert snap.projects is None and snap.usage == [] and {s.project for s in snap.pending} == {None}
    finally:
        store.close()

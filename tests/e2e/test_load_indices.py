"""RES-7, RES-1: LSF resource strings as LSF users write them, on a controller with two real
`xced --roles worker` processes: the workers report LSF's built-in load indices, which
`select[]` and `order[]` read; unquoted host types with dots (`type==LINUX2.4`) place; an
`order[]` key no host has is refused at submit with its column.

Sources: IBM Spectrum LSF 10.1 "Load indices"
(https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=resources-load-indices; the same table
in the LSF 6.2 Administration Guide p. 209); docs/lsf-behaviour.md sections 1 and 6; LSF 6.2
Administration Guide p. 268 (order string: "any built-in or external load index or static
resource").
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

from tests.conftest import short_tmpdir
from tests.e2e.test_multihost import Cluster

pytestmark = pytest.mark.timeout(120)

INDICES = ("r15s", "r1m", "r15m", "ut", "pg", "io", "ls", "it", "tmp", "swp", "ncpus", "maxmem", "maxswp", "maxtmp")


@pytest.fixture(scope="module")
def two_hosts():
    top = short_tmpdir("xce-load-")
    c = Cluster(top)
    try:
        yield c.start({"w1": ["--slots", "2", "--memory", "2GB", "--attribute", "type=LINUX2.4"],
                       "w2": ["--slots", "2", "--memory", "2GB", "--attribute", "model=PC6000", "--resource",
                              "gpu=1"]})
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)


def _hosts(c) -> dict[str, dict]:
    return {h["name"]: h for h in json.loads(c.ctl.cli("hosts", "--json", check=True).stdout)["hosts"]}


def test_workers_report_the_load_indices(two_hosts):
    """RES-7: each worker's join carries LSF's load indices, in the units of LSF's table;
    `xcecli hosts --load` shows them as lsload does."""
    for name, h in _hosts(two_hosts).items():
        load = h["load"]
        assert set(load) == set(INDICES), (name, load)
        assert 0 <= load["ut"] <= 1 and load["r1m"] >= 0 and load["r15s"] >= 0 and load["tmp"] > 0
        assert load["maxtmp"] >= load["tmp"] and load["ncpus"] >= 1 and load["maxmem"] > 0
        assert h["load_at"] is not None
    out = two_hosts.ctl.cli("hosts", "--load", check=True).stdout.splitlines()
    assert out[0].split() == ["HOST_NAME", "STATUS", "r15s", "r1m", "r15m", "ut", "pg", "io", "ls", "it", "tmp",
                              "swp", "mem"]
    w1 = next(ln.split() for ln in out if ln.startswith("w1 "))
    assert w1[1] == "ok" and w1[5].endswith("%") and w1[10].endswith("M") and w1[12] == "2048M", w1


def test_select_on_a_load_index_places_or_pends_naming_it(two_hosts, tmp_path):
    """RES-7 (LSF "Load indices"; docs/lsf-behaviour.md section 1 select): `select[r1m <
    1000]` runs; `select[r1m < -1]` is not refused at submit (load changes) but pends, and
    its reason names r1m and each host's value."""
    d = two_hosts.ctl
    r = d.cli("submit", "-K", "-R", "select[r1m < 1000 && ut <= 100] order[-r15s]", "--", "true", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    job = d.submit("-R", "select[r1m < -1]", "--", "true", cwd=tmp_path)
    try:
        why = ""
        for _ in range(100):
            why = d.cli("why", str(job), check=True).stdout
            if "r1m" in why:
                break
            time.sleep(0.1)
        assert d.show(job)["state"] == "PEND"
        assert "w1: select false: r1m " in why and ">= -1" in why and "w2: select false: r1m " in why, why
    finally:
        d.cli("kill", str(job))


def test_dotted_type_and_model_place(two_hosts, tmp_path):
    """RES-7, RES-1 (docs/lsf-behaviour.md section 1): `type==LINUX2.4` and `model==PC6000`,
    unquoted, place on the host that has them."""
    d = two_hosts.ctl
    for rr, host in (("type==LINUX2.4", "w1"), ("select[model==PC6000] order[ut]", "w2")):
        r = d.cli("submit", "-K", "-o", f"{host}.txt", "-R", rr, "--", "sh", "-c", "echo $LSB_HOSTS", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / f"{host}.txt").read_text().split() == [host], rr
    r = d.cli("submit", "-R", "type==LINUX2.", "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "column 14" in r.stderr and "letters or digits after '.'" in r.stderr


def test_order_on_a_resource_no_host_has_is_refused(two_hosts, tmp_path):
    """RES-1, RES-7: as a select on a resource no host has is refused, so is `order[foo]`,
    with the column of `foo`; load indices, slots, mem and host resources are taken
    (LSF 6.2 Administration Guide p. 268)."""
    d = two_hosts.ctl
    r = d.cli("submit", "-R", "select[mem > 0] order[r1m:foo]", "--", "true", cwd=tmp_path)
    assert r.returncode == 1
    assert "column 27" in r.stderr and "order[foo]: no host has resource 'foo'" in r.stderr, r.stderr
    assert "r15s" in r.stderr and "gpu" in r.stderr  # what would be valid
    r = d.cli("submit", "-R", "select[foo > 1]", "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "can never start" in r.stderr  # the select refusal it copies
    r = d.cli("submit", "--dry-run", "-R", "order[-gpu:ut:it:tmp:swp:ncpus:maxtmp:slots:mem]", "--", "true",
              cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_the_daemons_own_worker_reports_too(tmp_path):
    """RES-7: a single-host xced (all roles, the default) measures its own host's load at
    start, so `select[r1m < 1000]` runs and `order[r15s]` is taken there as on worker hosts."""
    from tests.conftest import Daemon, write_config

    top = short_tmpdir("xce-load1-")
    write_config(top)
    d = Daemon(top).start()
    try:
        hosts = json.loads(d.cli("hosts", "--json", check=True).stdout)["hosts"]
        assert len(hosts) == 1 and set(hosts[0]["load"]) == set(INDICES), hosts
        r = d.cli("submit", "-K", "-R", "select[r1m < 1000] order[r15s]", "--", "true", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    finally:
        d.stop()
        shutil.rmtree(top, ignore_errors=True)

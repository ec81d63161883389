"""Project caps in a live daemon (PRJ-6, PRJ-7, RES-6): a projects.yaml with a quota and a
member_quota, jobs submitted with -P, and what `xcecli why` says of the one they hold back;
the jobs of another project behind it in the queue still start (LSF: a job pending on a
limit holds nobody up); once the use drops the caps say so, and the job starts."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Daemon, write_config

pytestmark = pytest.mark.timeout(120)

PROJECTS = """\
projects:
  /physics:
    share: 50%
    quota: {slots: 3}
    member_quota: {slots: 2}
    members: [bob, erin]
  /bio:
    members: [gina]
"""


def test_a_job_over_its_projects_caps_pends_saying_which_and_blocks_nobody(topdir):
    write_config(topdir, slots=8)
    (topdir / "config" / "projects.yaml").write_text(PROJECTS)
    d = Daemon(topdir).start()
    try:
        a = d.submit("-P", "/physics", "-n", "2", "--", "sleep", "60", user="bob")
        d.wait_state(a, ("RUN",), user="bob")
        b = d.submit("-P", "/physics", "-n", "1", "--", "sleep", "60", user="erin")
        d.wait_state(b, ("RUN",), user="erin")
        c = d.submit("-P", "/physics", "-n", "1", "--", "sleep", "60", user="bob")  # bob at 2/2, /physics at 3/3
        g = d.submit("-P", "/bio", "-n", "2", "--", "sleep", "60", user="gina")  # behind it: starts
        d.wait_state(g, ("RUN",), user="gina")
        assert d.show(c, user="bob")["state"] == "PEND"
        why = json.loads(d.cli("why", str(c), "--json", user="bob", check=True).stdout)
        assert why["caps"] == ["project /physics at quota: 3/3 slots",
                               "user bob at member_quota of /physics: 2/2 slots"]
        assert why["main"] == why["caps"][0] and why["hosts"] == []
        text = d.cli("why", str(c), user="bob", check=True).stdout.splitlines()
        assert text[:2] == [f"{c} PEND: project /physics at quota: 3/3 slots",
                            "  also user bob at member_quota of /physics: 2/2 slots"], text
        d.cli("kill", str(b), user="erin", check=True)
        d.wait_state(b, ("EXIT",), user="erin")
        why = json.loads(d.cli("why", str(c), "--json", user="bob", check=True).stdout)
        assert why["caps"] == ["user bob at member_quota of /physics: 2/2 slots"], why
        d.cli("kill", str(a), user="bob", check=True)
        d.wait_state(c, ("RUN",), user="bob")
    finally:
        d.stop()

"""End to end: every request is bounded in size and in the work it can cause (D-8, issue 11
item 7). A real xced on its Unix socket: what is over a cap is refused with one line naming
the cap, the connection is never dropped, and the daemon answers the next request."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import XCECLI, Daemon, write_config
from tests.uds_http import UnixConnection as _UnixConnection
from xced.api.client import Client
from xced.api.errors import PayloadTooLarge
from xced.model.units import MAX_REQUEST_BYTES

pytestmark = pytest.mark.timeout(120)


def _socket(d: Daemon) -> str:
    return str(d.top / "run" / "xced.sock")


def _jobs(d: Daemon) -> list[dict]:
    return json.loads(d.cli("api", "GET", "/jobs?user=all&all=true", check=True).stdout)["jobs"]


def test_a_submit_over_the_body_limit_is_one_line_naming_the_limit(shared_daemon, tmp_path):
    """An environment of more than MAX_REQUEST_BYTES: xcecli submit exits 1 with the 413's
    message naming the limit, nothing is submitted, and the daemon serves on."""
    d = shared_daemon
    before = len(_jobs(d))
    env = {**os.environ, "XCE_TOPDIR": str(d.top)}
    env.pop("XCE_SOCKET", None)
    env.pop("XCE_TEST_USER", None)
    for i in range(12):  # 12 variables of 100 KB: over 1 MiB together (execve takes each under 128 KiB)
        env[f"BIG_{i}"] = "x" * 100_000
    r = subprocess.run([XCECLI, "submit", "--", "true"], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=60)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "the API server reads at most 1 MiB (MAX_REQUEST_BYTES" in r.stderr, r.stderr
    assert len(_jobs(d)) == before
    assert d.submit("--", "true", cwd=tmp_path) > 0


def test_an_over_size_body_gets_413_in_the_api_shape_and_the_connection_stays(shared_daemon):
    """413 `too_large` in the API's error shape, by Content-Length and for a chunked body,
    and the same connection then answers the next request (never a dropped connection)."""
    body = json.dumps({"argv": ["true"], "cwd": "/tmp", "env": {"X": "y" * MAX_REQUEST_BYTES}}).encode()
    conn = _UnixConnection(_socket(shared_daemon), 30)
    try:
        conn.request("POST", "/xce/v1/jobs", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        answer = json.loads(resp.read())
        assert resp.status == 413 and not resp.will_close
        assert answer["error"]["code"] == "too_large"
        assert f"the request body is {len(body)} bytes" in answer["error"]["message"]

        conn.putrequest("POST", "/xce/v1/jobs/dry-run")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        for i in range(0, len(body), 1 << 16):
            chunk = body[i:i + (1 << 16)]
            conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        conn.send(b"0\r\n\r\n")
        resp = conn.getresponse()
        answer = json.loads(resp.read())
        assert resp.status == 413 and answer["error"]["code"] == "too_large", answer
        assert "more than 1048576 bytes" in answer["error"]["message"]

        small = json.dumps({"argv": ["true"], "cwd": "/tmp"}).encode()
        conn.request("POST", "/xce/v1/jobs/dry-run", body=small, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["effective"]["ntasks_min"] == 1
    finally:
        conn.close()
    # the client's typed error, exit code 1 (bad input)
    with Client(_socket(shared_daemon)) as c, pytest.raises(PayloadTooLarge) as info:
        c.request("POST", "/jobs/dry-run", json={"argv": ["true"], "cwd": "/tmp", "exdata": {"meta": "m" * (2 << 20)}})
    assert info.value.exit_code == 1 and info.value.status == 413


def test_only_an_admin_may_send_a_config_larger_than_the_body_limit(shared_daemon):
    """`xceadmin build --apply` of a large cluster may send up to MAX_CONFIG_REQUEST_BYTES,
    but only an admin's request gets past MAX_REQUEST_BYTES: anyone else's is refused
    unread, so nobody else can make the daemon parse more than that."""
    from xced.model.units import MAX_CONFIG_REQUEST_BYTES

    hosts = [{"name": f"n{i}", "slots": 1, "memory_mb": 1} for i in range(40_000)]
    body = json.dumps({"config": {"hosts": hosts}, "hash": "0" * 64}).encode()
    assert MAX_REQUEST_BYTES < len(body) < MAX_CONFIG_REQUEST_BYTES
    conn = _UnixConnection(_socket(shared_daemon), 30)
    try:
        for user, status in (("alice", 413), ("admin", 422)):
            conn.request("PUT", "/xce/v1/config", body=body,
                         headers={"Content-Type": "application/json", "X-XCE-As-User": user})
            resp = conn.getresponse()
            msg = json.loads(resp.read())["error"]["message"]
            assert resp.status == status, (user, msg)
        # the admin's got through the limit to the config checks, which refuse this one
        assert "the daemon refused the config, nothing was applied" in msg
    finally:
        conn.close()
    with Client(_socket(shared_daemon), as_user="alice") as c, pytest.raises(PayloadTooLarge) as info:
        c.request("PUT", "/config", json={"config": {"hosts": hosts}, "hash": "0" * 64})
    assert "a cluster admin may send up to 8 MiB here (MAX_CONFIG_REQUEST_BYTES)" in info.value.message


def test_an_array_over_max_array_size_is_refused_naming_the_setting(topdir, tmp_path):
    """JOB-4, D-8: the array cap is xce.yaml's max_array_size (LSF MAX_JOB_ARRAY_SIZE,
    default 1000); an admin may raise it."""
    write_config(topdir)
    d = Daemon(topdir).start()
    try:
        r = d.cli("submit", "-J", "x[1-1001]", "--", "true", cwd=tmp_path)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert "1001 indices, more than the 1000 an array may have on this cluster (max_array_size in xce.yaml" \
            in r.stderr
        r = d.cli("submit", "--dry-run", "--json", "-J", "x[1-1000]%1000", "--", "true", cwd=tmp_path, check=True)
        assert json.loads(r.stdout)["effective"]["array_size"] == 1000
    finally:
        d.stop()
    with open(topdir / "config" / "xce.yaml", "a") as f:
        f.write("max_array_size: 5000\n")
    d = Daemon(topdir).start()
    try:
        r = d.cli("submit", "--dry-run", "--json", "-J", "x[1-5000]", "--", "true", cwd=tmp_path, check=True)
        assert json.loads(r.stdout)["effective"]["array_size"] == 5000
        r = d.cli("submit", "-J", "x[1-2000,3000-6000]", "--", "true", cwd=tmp_path)
        assert r.returncode == 1 and "5001 indices, more than the 5000" in r.stderr, r.stderr
    finally:
        d.stop()


def test_a_long_flat_select_is_taken_and_the_caps_are_named_with_the_column(shared_daemon, tmp_path):
    """RES-1, D-8: `-R "select[a||b||...]"` of hundreds of terms is a request like any other
    (it failed "too deep" at about 200); a request over the term cap or the depth cap is
    refused with the cap's name and the column; so is a -w over its condition cap."""
    d = shared_daemon
    chain = " || ".join(f"hname == n{i}" for i in range(300)) + " || hname == h1"
    r = d.cli("submit", "--dry-run", "--json", "-R", f"select[{chain}]", "--", "true", cwd=tmp_path, check=True)
    assert json.loads(r.stdout)["effective"]["resreq"]["select"] == chain
    jid = d.submit("-R", f"select[{chain}]", "--", "true", cwd=tmp_path)
    assert d.wait_state(jid, ("DONE",))["state"] == "DONE"

    terms = "rusage[" + ":".join(f"r{i}=1" for i in range(1001)) + "]"
    r = d.cli("submit", "-R", terms, "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert f"column {terms.index('r1000=') + 1}: more than 1000 terms (MAX_RESREQ_TERMS" in r.stderr, r.stderr

    deep = "select[" + "(" * 40 + "slots > 0" + ")" * 40 + "]"
    r = d.cli("submit", "-R", deep, "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "nested more than 32 levels deep (MAX_SELECT_DEPTH" in r.stderr, r.stderr
    assert f"column {len('select[') + 32}:" in r.stderr

    r = d.cli("submit", "-w", "||".join(["1"] * 1001), "--", "true", cwd=tmp_path)
    assert r.returncode == 1 and "more than 1000 conditions" in r.stderr and "MAX_DEPENDENCY_CONDITIONS" in r.stderr


def test_many_tiny_environment_variables_are_refused_naming_the_count(shared_daemon, tmp_path):
    """D-8: more than MAX_ENV_VARS variables (a megabyte of tiny ones costs the daemon ten
    times a megabyte of long ones) is refused in one line saying at most how many."""
    from xced.model.units import MAX_ENV_VARS

    env = {**os.environ, "XCE_TOPDIR": str(shared_daemon.top)}
    env.pop("XCE_SOCKET", None)
    env.pop("XCE_TEST_USER", None)
    env.update({f"T{i}": "1" for i in range(MAX_ENV_VARS)})
    r = subprocess.run([XCECLI, "submit", "--", "true"], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=60)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"field 'env': Dictionary should have at most {MAX_ENV_VARS} items" in r.stderr, r.stderr


def test_bounds_the_fuzz_cannot_reach_are_held(shared_daemon):
    """The string and list bounds of the submit body above what Hypothesis can generate
    (tests/e2e/test_api_fuzz.py leaves them out of the fuzzed document): one over each is
    refused with 422 naming the field and the bound; one at the bound is taken."""
    from tests.e2e.test_api_fuzz import HYPOTHESIS_MAX_SIZE, _fuzzable
    from xced.api.errors import InvalidRequest
    from xced.server.app import create_app

    body = create_app(None).openapi()["components"]["schemas"]["SubmitRequest"]["properties"]
    big = {}
    for name, prop in body.items():
        for alt in [prop, *prop.get("anyOf", [])]:
            if alt.get("type") == "string" and alt.get("maxLength", 0) > HYPOTHESIS_MAX_SIZE:
                big[name] = alt["maxLength"]
    assert big == {"pre_exec": 65536, "post_exec": 65536, "script": 524288, "command_line": 65536}, big  # a new one: add its case here
    assert "maxLength\": 65536" not in json.dumps(_fuzzable(body))
    with Client(_socket(shared_daemon)) as c:
        for name, bound in big.items():
            with pytest.raises(InvalidRequest, match=f"field '{name}': String should have at most {bound} characters"):
                c.request("POST", "/jobs/dry-run", json={"argv": ["true"], "cwd": "/tmp", name: "x" * (bound + 1)})
            ok = c.request("POST", "/jobs/dry-run", json={"argv": ["true"], "cwd": "/tmp", name: "x" * bound})
            assert ok.status == 200


def test_exdata_json_cannot_carry_is_refused_and_a_large_integer_is_kept(shared_daemon, tmp_path):
    """A submit whose exdata holds 1e400 (infinity to the json module) is 422 naming exdata,
    and nothing is submitted; one holding an integer over 64 bits is taken and shown back
    exactly (the store writes that spec with the json module, which orjson cannot)."""
    d = shared_daemon
    before = len(_jobs(d))
    conn = _UnixConnection(_socket(d), 30)
    try:
        raw = b'{"argv": ["true"], "cwd": "%s", "exdata": {"meta": {"x": 1e400}}}' % str(tmp_path).encode()
        conn.request("POST", "/xce/v1/jobs", body=raw, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        answer = json.loads(resp.read())
        assert resp.status == 422 and answer["error"]["field"] == "exdata", answer
        assert answer["error"]["message"].startswith("field 'exdata': exdata holds inf, a number JSON cannot carry")
        assert len(_jobs(d)) == before
        raw = b'{"argv": ["true"], "cwd": "%s", "hold": true, "exdata": {"meta": {"n": %d}}}' % (
            str(tmp_path).encode(), 2**70)
        conn.request("POST", "/xce/v1/jobs", body=raw, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        job_id = json.loads(resp.read())["job_id"]
        assert resp.status == 200
    finally:
        conn.close()
    shown = json.loads(d.cli("show", str(job_id), "--json", check=True).stdout)
    assert str(2**70) in json.dumps(shown), shown
    d.cli("kill", str(job_id), check=True)

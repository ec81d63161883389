"""A bounded schemathesis run against a live xced (D-2, issue 11 item 9).

Every operation of the daemon's own OpenAPI document is called with generated requests,
valid ones and ones that break the schema, on the daemon's Unix socket, as any HTTP client
would. The daemon is real and in test mode, but runs without the worker role (`--roles
controller,scheduler,apiserver`), so a fuzzed submit pends and its command never runs.
Allowed: no server error (5xx), and no answer outside the document (a status, a content
type or a body it does not describe); a request that breaks the schema must be refused.

Bounded: a fixed seed, a few examples per operation, no Hypothesis database, and the long
poll `GET /jobs/{id}/wait` capped at WAIT_CAP_S (its `timeout` is clamped before sending),
so the whole run stays well under two minutes on two cores.
"""

from __future__ import annotations

import json
import shutil
import socket

import pytest
import requests
import schemathesis
import urllib3
from hypothesis import HealthCheck, seed, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import _daemon_fixture, short_tmpdir

pytestmark = pytest.mark.timeout(300)

#: the longest a fuzzed `wait` may block, seconds
WAIT_CAP_S = 0.2
#: generated requests per operation and phase
MAX_EXAMPLES = 50
#: the socket's host name in URLs (the socket is what is reached, whatever the name)
BASE_URL = "http://xced"

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance, negative_data_rejection]


class _UnixConnection(urllib3.connection.HTTPConnection):
    """urllib3's connection, over the daemon's Unix socket instead of TCP."""

    def __init__(self, path: str, *args, **kwargs) -> None:
        super().__init__("xced", *args, **kwargs)
        self._path = path

    def _new_conn(self) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(self._path)
        return s


class _UnixPool(urllib3.HTTPConnectionPool):
    def __init__(self, path: str) -> None:
        super().__init__("xced")
        self._path = path

    def _new_conn(self) -> _UnixConnection:
        return _UnixConnection(self._path)


class _UnixAdapter(requests.adapters.HTTPAdapter):
    """A requests transport to one Unix socket (for every URL)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._pool = _UnixPool(path)

    def get_connection_with_tls_context(self, request, verify, proxies=None, cert=None):  # noqa: ARG002
        return self._pool

    def close(self) -> None:
        self._pool.close()
        super().close()


@pytest.fixture(scope="module")
def fuzz_daemon():
    """A real xced, test mode, without the worker role: nothing it accepts ever runs."""
    top = short_tmpdir()
    try:
        yield from _daemon_fixture(top, args=("--roles", "controller,scheduler,apiserver"))
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def session(fuzz_daemon):
    s = requests.Session()
    s.mount(BASE_URL, _UnixAdapter(str(fuzz_daemon.top / "run" / "xced.sock")))
    yield s
    s.close()


def _openapi() -> dict:
    """The document every xced serves (the app is built without a controller; pure)."""
    from xced.server.app import create_app

    return create_app(None).openapi()


#: Hypothesis draws no string or list longer than its buffer (8 KiB: a strategy of a larger
#: min_size raises InvalidArgument when drawn), so a request that breaks a bound above it
#: (-E/-Ep's 65,536 characters) can never be generated. Which mutation a negative case
#: draws varies from run to run, so such a bound made the run fail now and then; the
#: fuzzed copy of the document leaves those bounds out, and tests/e2e/test_bounds.py sends
#: requests over them instead.
HYPOTHESIS_MAX_SIZE = 8 * 1024


def _fuzzable(node):
    """A copy of the OpenAPI document `node` without maxLength/maxItems above
    HYPOTHESIS_MAX_SIZE."""
    if isinstance(node, dict):
        return {k: _fuzzable(v) for k, v in node.items()
                if not (k in ("maxLength", "maxItems") and isinstance(v, int) and v > HYPOTHESIS_MAX_SIZE)}
    if isinstance(node, list):
        return [_fuzzable(v) for v in node]
    return node


#: loaded at import, as schemathesis' pytest integration needs it (its lazy loader from a
#: fixture does not run on this pytest); the live daemon is checked to serve the document
#: it was made from
schema = schemathesis.openapi.from_dict(_fuzzable(_openapi()))


@pytest.fixture(scope="module", autouse=True)
def _jobs_to_find(fuzz_daemon, session):
    """Jobs 1 and 2 exist (PEND for ever), and the daemon serves the document fuzzed."""
    for name in ("fuzz-a", "fuzz-b"):
        r = session.post(f"{BASE_URL}/xce/v1/jobs", json={"argv": ["true"], "cwd": "/tmp", "name": name})
        assert r.status_code == 200, r.text
    assert session.get(f"{BASE_URL}/xce/v1/openapi.json").json() == _openapi()


def _aim_at_real_things(case) -> None:
    """Valid requests (positive mode) are aimed at what exists, so they reach past the first
    refusal: a job ID is one of the two jobs, a submit's cwd is /tmp. Requests that break
    the schema are sent as generated."""
    meta = getattr(case, "meta", None)
    if meta is None or meta.generation.mode is not GenerationMode.POSITIVE:
        return
    if isinstance(case.path_parameters, dict) and isinstance(case.path_parameters.get("job_id"), int):
        case.path_parameters["job_id"] = 1 + case.path_parameters["job_id"] % 2
    if case.path in ("/xce/v1/jobs", "/xce/v1/jobs/dry-run") and case.method == "POST" and isinstance(case.body, dict):
        case.body["cwd"] = "/tmp"


def _cap_wait(case) -> None:
    """A `wait` timeout the daemon would take (0 to 300 s; left out, 30) is lowered to
    WAIT_CAP_S; one it refuses is left as it is, so a request that breaks the schema still
    does."""
    if not case.path.endswith("/wait"):
        return
    if case.query is None:
        case.query = {}
    if not isinstance(case.query, dict):
        return
    t = case.query.setdefault("timeout", WAIT_CAP_S)
    try:
        value = float(t) if not isinstance(t, bool) and isinstance(t, (int, float, str)) else None
    except ValueError:
        value = None
    if value is not None and WAIT_CAP_S < value <= 300:
        case.query["timeout"] = WAIT_CAP_S


@schema.parametrize()
@seed(11)
@settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def test_the_api_answers_every_request_as_documented(case, session):
    _cap_wait(case)
    _aim_at_real_things(case)
    response = case.call(base_url=BASE_URL, session=session)
    case.validate_response(response, checks=CHECKS)


def test_the_fuzzed_daemon_ran_nothing_and_still_answers(fuzz_daemon, session):
    """Whatever was submitted pends: no worker role, no job directory. Runs after the fuzz
    (pytest keeps a module's order within one worker; alone it checks the same)."""
    jobs = session.get(f"{BASE_URL}/xce/v1/jobs", params={"user": "all", "all": "true"}).json()["jobs"]
    assert jobs and {j["state"] for j in jobs} <= {"PEND", "PSUSP", "EXIT"}, json.dumps(jobs)[:500]
    assert not any((fuzz_daemon.top / "jobs").glob("*/*/spec.json"))

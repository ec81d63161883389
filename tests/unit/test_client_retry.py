"""The client's retries (JOB-10, CLI-1, issue 15): a submit whose answer was lost is sent again
with the same Idempotency-Key until XCE_CONNECT_TIMEOUT has passed, which bounds each request
too; a refusal is never sent again; `jobs` and `wait` ride out a daemon that is away.

The client speaks HTTP/1.1 over a Unix socket itself (xced.api.client: httpx costs more than the
CLI's start-up budget), so respx, which patches httpx, cannot stand in for the daemon. A
real HTTP server on a Unix socket in a thread plays it instead, following a script: answer,
drop the connection before answering (a daemon killed between commit and answer), say
store_busy, or never answer. The end-to-end tests (tests/e2e/test_retry.py) use a real xced.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xced.api import errors
from xced.api.client import Client, connect_timeout
from xced.api.idempotency import HEADER, body_digest, canonical, check_key, new_key

from tests.unit.test_client import RecordingHandler, _Server

ANSWER = {"job_id": 7, "name": None, "queue": "normal", "project": None, "array_size": 0, "app": None,
          "warnings": []}
BUSY = (503, {"error": {"code": "store_busy", "message": "store busy (locked by another process), retry",
                        "field": None}})


def _job(state: str, code: int | None = None) -> dict:
    """A JobOut body of job 7 with one element in `state`."""
    return {"job_id": 7, "name": None, "user": "alice", "run_as": "alice", "queue": "normal", "state": state,
            "submit_time": 1.0, "argv": ["true"], "cwd": "/tmp", "ntasks_min": 1, "ntasks_max": 1,
            "run_limit_s": None, "memory_limit_mb": None,
            "elements": [{"id": "7", "job_id": 7, "index": 0, "state": state, "start_time": 2.0,
                          "exit_code": code}]}


class Script:
    """What the canned daemon does with each request, in order (the last step repeats):
    (status, body) answers; "drop" reads the request and closes the connection without an
    answer; "hang" never answers. `seen` records (method, path, headers, body)."""

    def __init__(self, *steps):
        self.steps = list(steps)
        self.seen: list[tuple[str, str, dict, bytes]] = []
        self.release = threading.Event()

    def next(self):
        return self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]


def _serve(sock, script: Script) -> _Server:
    class Handler(RecordingHandler):
        def _answer(self):
            self.record(script.seen)
            step = script.next()
            if step == "drop":
                self.close_connection = True
                return
            if step == "hang":
                script.release.wait(10)
                self.close_connection = True
                return
            status, out = step
            self.reply(status, json.dumps(out).encode())

        do_GET = do_POST = _answer

    srv = _Server(str(sock), Handler)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return srv


@pytest.fixture
def daemon_at(tmp_path):
    """start(script, after=0): a canned daemon on tmp_path/s.sock, bound `after` seconds from
    now (until then the socket does not exist: a daemon restarting); stopped afterwards."""
    sock = tmp_path / "s.sock"
    servers, scripts, timers = [], [], []

    def start(script: Script, after: float = 0.0):
        scripts.append(script)
        if after:
            t = threading.Timer(after, lambda: servers.append(_serve(sock, script)))
            timers.append(t)
            t.start()
        else:
            servers.append(_serve(sock, script))
        return sock

    yield start
    for t in timers:
        t.cancel()
        t.join()
    for s in scripts:
        s.release.set()
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_a_lost_answer_is_sent_again_with_the_same_key_until_it_is_answered(daemon_at):
    """The first answer is lost (the connection drops, as when xced dies after its commit), the
    second is store_busy; the third try answers. All three carry the same body and the same
    valid key; the user is told once."""
    script = Script("drop", BUSY, (200, ANSWER))
    sock = daemon_at(script)
    told = []
    with Client(sock, timeout=10) as c:
        r = c.submit({"argv": ["true"], "cwd": "/tmp"}, on_lost=told.append)
    assert r.job_id == 7
    sent = [(h[HEADER], b) for m, p, h, b in script.seen]
    assert len(sent) == 3 and len({k for k, _ in sent}) == 1 and len({b for _, b in sent}) == 1
    assert re.fullmatch(r"[0-9a-f]{32}", sent[0][0]) and check_key(sent[0][0])
    assert len(told) == 1 and "trying again for up to 10 s (XCE_CONNECT_TIMEOUT)" in told[0], told


def test_each_submit_has_its_own_key_and_a_given_key_is_checked(daemon_at):
    script = Script((200, ANSWER))
    sock = daemon_at(script)
    with Client(sock, timeout=5) as c:
        c.submit({"argv": ["true"], "cwd": "/tmp"})
        c.submit({"argv": ["true"], "cwd": "/tmp"})
        c.submit({"argv": ["true"], "cwd": "/tmp"}, key="my-key_0001")
        with pytest.raises(errors.InvalidRequest, match="Idempotency-Key 'no good' .* is malformed: a key is 8 to "
                                                         "128 characters of letters, digits"):
            c.submit({"argv": ["true"], "cwd": "/tmp"}, key="no good")
    keys = [h[HEADER] for _, _, h, _ in script.seen]
    assert len(keys) == 3 and keys[0] != keys[1] and keys[2] == "my-key_0001"


@pytest.mark.parametrize("status,code,cls", [(422, "invalid", errors.InvalidRequest),
                                             (409, "conflict", errors.Conflict),
                                             (503, "store_unavailable", errors.StoreUnavailable)])
def test_a_refusal_is_never_sent_again(daemon_at, status, code, cls):
    """An answer is an answer: a refused submit (or a store that cannot be written, whose
    message says what to fix) is raised at once, sent once."""
    script = Script((status, {"error": {"code": code, "message": "no", "field": None}}))
    sock = daemon_at(script)
    t0 = time.monotonic()
    with Client(sock, timeout=10) as c, pytest.raises(cls):
        c.submit({"argv": ["true"], "cwd": "/tmp"})
    assert len(script.seen) == 1 and time.monotonic() - t0 < 2


def test_no_daemon_for_the_whole_deadline_is_exit_3_saying_how_long(tmp_path, monkeypatch):
    """XCE_CONNECT_TIMEOUT is the client's timeout; retries stop once it has passed."""
    monkeypatch.setenv("XCE_CONNECT_TIMEOUT", "0.6")
    c = Client(tmp_path / "none.sock")
    assert c.timeout == 0.6
    t0 = time.monotonic()
    with pytest.raises(errors.DaemonUnreachable) as ei:
        c.submit({"argv": ["true"], "cwd": "/tmp"})
    took = time.monotonic() - t0
    assert 0.6 <= took < 2.5, took
    assert ei.value.exit_code == 3 and "no socket there" in ei.value.message
    assert "(tried for 0.6 s, XCE_CONNECT_TIMEOUT)" in ei.value.message
    assert "may have been carried out" not in ei.value.message  # it never reached a daemon


def test_the_deadline_bounds_each_request_too(daemon_at):
    """A daemon that takes the request and never answers (paused): the one try ends when the
    deadline does, not after a request timeout of its own."""
    script = Script("hang")
    sock = daemon_at(script)
    t0 = time.monotonic()
    with Client(sock, timeout=0.8) as c, pytest.raises(errors.DaemonUnreachable, match="tried for 0.8 s") as ei:
        c.submit({"argv": ["true"], "cwd": "/tmp"})
    assert 0.8 <= time.monotonic() - t0 < 2.5
    # it reached the daemon: exit 3, yet the job may exist, and the user is told to look first
    assert "it may have been carried out: once xced is back, look (`xcecli jobs`)" in ei.value.message


def test_a_daemon_back_within_the_deadline_answers_jobs_and_submit(daemon_at):
    """The socket appears 0.5 s after the first try (a restart): `jobs` is answered."""
    script = Script((200, {"jobs": []}))
    sock = daemon_at(script, after=0.5)
    t0 = time.monotonic()
    with Client(sock, timeout=10) as c:
        assert c.jobs().jobs == []
    assert 0.4 <= time.monotonic() - t0 < 5


def test_wait_rides_out_a_daemon_away_and_gives_up_only_past_the_timeout(daemon_at, tmp_path):
    """`wait` (submit -K) asks again while the daemon is away and ends with the job once it
    answers; with no daemon for the client's whole timeout it raises DaemonUnreachable (exit
    3) naming the job and how to wait again."""
    script = Script((200, _job("EXIT", 7)))
    sock = daemon_at(script, after=0.6)
    told = []
    with Client(sock, timeout=10) as c:
        job = c.wait(7, on_lost=told.append)
    assert job.elements[0].exit_code == 7 and len(told) == 1 and "still waiting for job 7" in told[0]
    t0 = time.monotonic()
    with Client(tmp_path / "none.sock", timeout=0.7) as c, pytest.raises(errors.DaemonUnreachable) as ei:
        c.wait(7)
    assert 0.7 <= time.monotonic() - t0 < 2.5
    assert "has not answered for 0.7 s (XCE_CONNECT_TIMEOUT)" in ei.value.message
    assert "`xcecli wait 7`" in ei.value.message


@pytest.mark.parametrize("text", ["abc", "0", "-1", "inf", "nan", "1e999", "1e308", "99999999999999999999", "86401"])
def test_a_bad_connect_timeout_is_refused_naming_it(monkeypatch, text):
    """A huge value failed with OverflowError from the socket's timeout; every bad value is a
    usage error (exit 2), caught before anything is sent."""
    monkeypatch.setenv("XCE_CONNECT_TIMEOUT", text)
    with pytest.raises(errors.InvalidRequest, match=f"XCE_CONNECT_TIMEOUT={text!r}: expected a number of seconds "
                                                    f"greater than 0 and at most 86400 \\(a day\\)") as ei:
        connect_timeout()
    assert ei.value.exit_code == 2


def test_connect_timeout_default_and_value(monkeypatch):
    monkeypatch.delenv("XCE_CONNECT_TIMEOUT", raising=False)
    assert connect_timeout() == 60.0
    monkeypatch.setenv("XCE_CONNECT_TIMEOUT", " 2.5 ")
    assert connect_timeout() == 2.5
    monkeypatch.setenv("XCE_CONNECT_TIMEOUT", "2m")  # a duration, as everywhere else
    assert connect_timeout() == 120.0


def test_body_digest_is_canonical_json():
    """JOB-10: bodies are compared as canonical JSON: key order and spacing do not matter,
    values do; a lone surrogate (a non-UTF-8 byte of an environment) does not break it."""
    a = body_digest({"argv": ["true"], "cwd": "/tmp", "env": {"A": "1", "B": "2"}})
    assert a == body_digest(json.loads('{"env": {"B": "2", "A": "1"},  "cwd": "/tmp", "argv": ["true"]}'))
    assert a != body_digest({"argv": ["true"], "cwd": "/tmp", "env": {"A": "1", "B": "3"}})
    assert len(body_digest({"env": {"X": "caf\udce9"}})) == 64
    assert len(new_key()) == 32 and new_key() != new_key()


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)))
_PLAIN = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | _TEXT,
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
                      max_leaves=16)


@settings(max_examples=400, deadline=None, database=None)
@given(_PLAIN)
def test_canonical_json_is_the_same_bytes_whichever_encoder_writes_it(value):
    """JOB-10: a digest kept by an older daemon must match a retry's: the fast way (orjson,
    for what holds no float) gives the json module's bytes exactly, control characters,
    non-ASCII text, key order and 64-bit integers included."""
    assert canonical(value, floatless=True) == canonical(value)
    assert canonical(value) == json.dumps(value, sort_keys=True, separators=(",", ":"),
                                          ensure_ascii=False).encode("utf-8", "surrogatepass")


def test_what_orjson_cannot_write_is_still_canonical_json():
    """A lone surrogate, an integer over 64 bits and a float (in exdata, the one free-form
    field) go the json module's way, the bytes the digest was always made of."""
    for value in ({"env": {"X": "caf\udce9"}}, {"exdata": {"n": 2**70}}, {"exdata": {"x": 1e-7}}):
        assert canonical(value, floatless=value.get("exdata") is None) == json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    assert body_digest({"argv": ["a"], "exdata": {"x": 1e-7}}) == \
        hashlib.sha256(b'{"argv":["a"],"exdata":{"x":1e-07}}').hexdigest()


def test_a_malformed_key_is_quoted_as_the_user_typed_it():
    """HTTP hands a header's bytes over as Latin-1: a UTF-8 key is shown decoded, not garbled."""
    with pytest.raises(errors.InvalidRequest) as ei:
        check_key("ключ-key-123".encode().decode("latin-1"))
    assert "Idempotency-Key 'ключ-key-123' (12 characters) is malformed" in ei.value.message

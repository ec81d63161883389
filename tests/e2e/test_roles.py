"""Per-role allowlists across real processes (KEY-3): a production controller, one key trusted
for each role (worker, scheduler, apiserver, admin), and for each role a session
(xced.api.peer_client.PeerClient over pinned TLS) that calls every route the app serves,
and a worker-channel join that sends every message type.

The rule under test is xced.auth.roles: a route whose declaration (xced.server.auth.requires)
is not in the role's ROLE_ROUTES answers 403 naming the role, before its body is read; a
route it allows is never refused for the role (its answer may be anything else: a 404 of a
job that does not exist, a 422 of the walk's deliberately empty body). Every route of
`create_app` needs a request in REQUESTS, so a route added without a decision fails here.
"""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace

import pytest

from tests.conftest import short_tmpdir
from tests.e2e.test_peers import KeyedCluster
from xced.auth import keys as K
from xced.constants import API_PREFIX
from xced.auth.roles import ROLE_MESSAGES, ROLE_ROUTES, route_allowed
from xced.model.keys import ROLES
from xced.server import auth
from xced.server.app import create_app, public_routes

pytestmark = pytest.mark.timeout(120)

#: a body no route takes (an unknown field: 422), so that what an allowed route does with it is
#: refuse it, and nothing changes; a refusal for the role comes before the body is read
NO_BODY: dict = {"walk": 1}
#: a job that does not exist: a job route a role may use answers 404
JOB = "424242"

#: (method, path as declared) -> (path to call, JSON body or None): every route of the app
REQUESTS: dict[tuple[str, str], tuple[str, dict | None]] = {
    ("POST", "/xce/v1/jobs"): ("/jobs", NO_BODY),
    ("POST", "/xce/v1/jobs/dry-run"): ("/jobs/dry-run", NO_BODY),
    ("POST", "/xce/v1/jobs/pack"): ("/jobs/pack", NO_BODY),
    ("GET", "/xce/v1/jobs"): ("/jobs", None),
    ("GET", "/xce/v1/jobs/table"): ("/jobs/table", None),
    ("GET", "/xce/v1/jobs/{job_id:jobid}"): (f"/jobs/{JOB}", None),
    ("GET", "/xce/v1/jobs/{job_id:jobid}/events"): (f"/jobs/{JOB}/events", None),
    ("GET", "/xce/v1/jobs/{job_id:jobid}/why"): (f"/jobs/{JOB}/why", None),
    ("GET", "/xce/v1/jobs/{job_id:jobid}/wait"): (f"/jobs/{JOB}/wait", None),
    ("GET", "/xce/v1/jobs/{job_id:jobid}/output"): (f"/jobs/{JOB}/output", None),
    ("POST", "/xce/v1/jobs/{job_id:jobid}/kill"): (f"/jobs/{JOB}/kill", NO_BODY),
    ("POST", "/xce/v1/jobs/kill"): ("/jobs/kill", NO_BODY),
    ("POST", "/xce/v1/jobs/{job_id:jobid}/stop"): (f"/jobs/{JOB}/stop", NO_BODY),
    ("POST", "/xce/v1/jobs/{job_id:jobid}/resume"): (f"/jobs/{JOB}/resume", NO_BODY),
    ("POST", "/xce/v1/jobs/{job_id:jobid}/requeue"): (f"/jobs/{JOB}/requeue", NO_BODY),
    ("POST", "/xce/v1/jobs/{job_id:jobid}/release"): (f"/jobs/{JOB}/release", NO_BODY),
    ("POST", "/xce/v1/jobs/{job_id:jobid}/launch"): (f"/jobs/{JOB}/launch", NO_BODY),
    ("GET", "/xce/v1/info"): ("/info", None),
    ("GET", "/xce/v1/hosts"): ("/hosts", None),
    ("GET", "/xce/v1/hosts/events"): ("/hosts/events", None),
    ("GET", "/xce/v1/queues"): ("/queues", None),
    ("GET", "/xce/v1/params"): ("/params", None),
    ("GET", "/xce/v1/apps"): ("/apps", None),
    ("GET", "/xce/v1/apps/{name}"): ("/apps/no-such-app", None),
    ("GET", "/xce/v1/projects"): ("/projects", None),
    ("GET", "/xce/v1/presets"): ("/presets", None),
    ("GET", "/xce/v1/presets/{name}"): ("/presets/no-such-preset", None),
    ("GET", "/xce/v1/keys"): ("/keys", None),
    ("POST", "/xce/v1/keys/trust"): ("/keys/trust", NO_BODY),
    ("POST", "/xce/v1/keys/revoke"): ("/keys/revoke", NO_BODY),
    ("POST", "/xce/v1/keys/token"): ("/keys/token", NO_BODY),
    ("POST", "/xce/v1/debug/clock"): ("/debug/clock", NO_BODY),
    ("PUT", "/xce/v1/config"): ("/config", NO_BODY),
    ("POST", "/xce/v1/sim/record"): ("/sim/record", NO_BODY),
    ("POST", "/xce/v1/hosts/{name}/{op}"): ("/hosts/r-none/close", {"reason": None}),
    ("POST", "/xce/v1/peers/challenge"): ("/peers/challenge", {"purpose": "session"}),
    ("POST", "/xce/v1/peers/session"): ("/peers/session", NO_BODY),
    ("POST", "/xce/v1/peers/enroll"): ("/peers/enroll", NO_BODY),
    # FastAPI's own documentation routes: public (xced.server.app.public_routes)
    ("GET", "/xce/v1/openapi.json"): ("/openapi.json", None),
    ("GET", "/xce/v1/docs"): ("/docs", None),
    ("GET", "/docs/oauth2-redirect"): ("/docs/oauth2-redirect", None),
}
#: the worker channel: only a worker key opens it (test_only_a_worker_key_opens_the_channel...)
CHANNEL = ("WEBSOCKET", "/xce/v1/workers/channel")
#: what a login host's API server adds to each request: the user it identified (root, a
#: cluster admin of the KeyedCluster, so that the admin routes are let in on the user's side)
USER = {auth.USER_HEADER: "root", auth.UID_HEADER: "0", auth.GID_HEADER: "0"}


def _routes() -> dict[tuple[str, str], str]:
    """(method, path) -> what the route declares (OPEN for the public documentation routes),
    for every route of create_app."""
    app = create_app(SimpleNamespace())
    out = {}
    for path, methods, route in auth.all_routes(app):
        if getattr(route, "dependant", None) is None:
            assert path in public_routes(app), path
            declared = auth.OPEN
        else:
            (declared,) = auth.route_permissions(route)
        for m in methods.split(","):
            if m != "HEAD":
                out[(m, path)] = declared
    return out


def test_every_route_has_a_request_in_the_walk_and_every_declaration_a_decision():
    """A route added to the app without a request here (and so without a decision for every
    role) fails; so does a declaration no role's allowlist has thought of."""
    routes = _routes()
    missing = sorted(set(routes) - set(REQUESTS) - {CHANNEL})
    assert not missing, (f"routes the role walk does not call: {missing}; add a request to REQUESTS and decide which "
                         f"roles may use them (xced.auth.roles.ROLE_ROUTES)")
    assert not set(REQUESTS) - set(routes), "REQUESTS names routes the app no longer serves"
    known = {p for allowed in ROLE_ROUTES.values() for p in allowed}
    undecided = {d for d in routes.values() if d not in (auth.OPEN, auth.PEER)} - known - {"cluster:admin"}
    assert not undecided, f"declarations no role may use, not even apiserver or admin: {undecided}"
    assert set(ROLE_ROUTES) == set(ROLES) == set(ROLE_MESSAGES)


@pytest.fixture(scope="module")
def cluster():
    """A production controller and one key per role, each for its own host `r-ROLE`."""
    c = KeyedCluster(short_tmpdir("xce-roles-"))
    try:
        c.start()
        c.keys = {}
        for role in ROLES:
            name = f"r-{role}"
            pub = c.gen_key(name)
            c.admin("keys", "trust", str(pub), "--host", name, "--role", role)
            c.keys[role] = K.read_private_key(c.top / name / "keys" / "host.key")
        c.pin = K.fingerprint(K.parse_public_key(c.controller_pub.read_text()))
        yield c
    finally:
        c.stop()


def _walk(c: KeyedCluster, role: str) -> dict[tuple[str, str], tuple[int, str]]:
    """Every route of REQUESTS called under a session of `role`'s key: (status, message)."""
    from xced.api.peer_client import PeerClient

    async def go():
        pc = PeerClient(c.url, c.pin, c.keys[role], f"r-{role}", role)
        out = {}
        try:
            for (method, path), (call, body) in REQUESTS.items():
                if not path.startswith(API_PREFIX):  # a route outside /xce/v1
                    call = c.url.replace("tcp://", "https://") + call
                headers = {"content-type": "application/json", **(USER if role == "apiserver" else {})}
                r = await pc.request(method, call, headers=headers,
                                     content=json.dumps(body).encode() if body is not None else None)
                try:
                    msg = r.json()["error"]["message"] if r.status_code >= 400 else ""
                except (ValueError, KeyError, TypeError):
                    msg = r.text[:200]
                out[(method, path)] = (r.status_code, msg)
        finally:
            await pc.close()
        return out

    return asyncio.run(go())


@pytest.mark.parametrize("role", ROLES)
def test_every_route_for_every_role(cluster, role):
    """KEY-3: each route a role's allowlist forbids is 403 naming the role (never a 401, a
    404 or a 422 first); each route it allows is never refused for the role."""
    routes = _routes()
    got = _walk(cluster, role)
    wrong = []
    for key, (status, msg) in got.items():
        declared = routes[key]
        allowed = declared == auth.OPEN or route_allowed(role, declared)
        refused_for_role = status == 403 and f"in the {role} role" in msg
        if allowed and (status == 401 or refused_for_role):
            wrong.append(f"{key} ({declared}) is allowed for {role}, but answered {status}: {msg}")
        if not allowed and not refused_for_role:
            wrong.append(f"{key} ({declared}) is forbidden for {role}, but answered {status}: {msg}")
    assert not wrong, "\n".join(wrong)
    # what the allowlists say in words (xced.auth.roles' docstring)
    may = {key for key, d in routes.items() if d not in (auth.OPEN, auth.PEER) and route_allowed(role, d)}
    if role in ("worker", "scheduler"):
        assert may == set()
    if role == "apiserver":  # every user route, never the cluster admin's (a login host changes no trust)
        assert may == {k for k, d in routes.items() if d not in (auth.OPEN, auth.PEER, "cluster:admin")}
    if role == "admin":
        assert ("POST", "/xce/v1/jobs") not in may and ("GET", "/xce/v1/keys") in may


@pytest.mark.parametrize("role", [r for r in ROLES if r != "apiserver"])
def test_a_peer_of_another_role_than_apiserver_cannot_act_for_a_user(cluster, role):
    """KEY-3: only an API server passes on users' requests; any other key naming a user is
    refused, on a route its role may use or not."""
    from xced.api.peer_client import PeerClient

    async def go():
        pc = PeerClient(cluster.url, cluster.pin, cluster.keys[role], f"r-{role}", role)
        try:
            return [await pc.request("GET", path, headers=h) for path in ("/info", "/jobs")
                    for h in (USER, {auth.AS_USER_HEADER: "root"})]
        finally:
            await pc.close()

    for r in asyncio.run(go()):
        assert r.status_code == 403 and f"in the {role} role" in r.json()["error"]["message"], r.text


# ---------------------------------------------------------------- the worker channel


def _channel(c: KeyedCluster, role: str, messages: list[dict]) -> tuple[dict, bool]:
    """Open the worker channel with `role`'s key (a keyed join for host r-ROLE), send
    `messages` once joined; (the controller's answer to the join, whether the channel was
    still open after the messages)."""
    import websockets

    from xced.api.peer import Join
    from xced.api.peer_client import parse_controller_url
    from xced.auth.tls import pinned_client_context

    host, port = parse_controller_url(c.url)
    key = c.keys[role]

    async def go():
        ctx = await asyncio.to_thread(pinned_client_context, host, port, c.pin)
        async with websockets.connect(f"wss://{host}:{port}/xce/v1/workers/channel", ssl=ctx) as ws:
            ch = json.loads(await ws.recv())
            assert ch["op"] == "challenge" and ch["purpose"] == "worker-channel"
            payload = K.join_payload(cluster=ch["cluster"], purpose="worker-channel", nonce=ch["nonce"],
                                     host=f"r-{role}", role=role)
            join = Join(host=f"r-{role}", slots=1, memory_mb=100, role=role, fingerprint=K.fingerprint(key.public_key()),
                        signature=K.sign(key, payload))
            await ws.send(join.model_dump_json())
            answer = json.loads(await ws.recv())
            if answer.get("op") != "joined":
                return answer, False
            for m in messages:
                await ws.send(json.dumps(m))
            # the channel still answers: a ping goes through after everything was sent
            await asyncio.wait_for(await ws.ping(), 10)
            return answer, True

    return asyncio.run(go())


@pytest.mark.parametrize("role", [r for r in ROLES if r != "worker"])
def test_only_a_worker_key_opens_the_worker_channel(cluster, role):
    """KEY-3: a key trusted for another role, signing a join in that role, is refused at the
    channel's door, naming the role."""
    answer, _ = _channel(cluster, role, [])
    assert answer == {"op": "refused", "reason": f"a peer in the {role} role may not open the worker channel"}
    assert f"r-{role}" not in cluster.hosts()


#: one message of each type the channel knows, either way, and some it does not
MESSAGES = [
    {"op": "started", "job_id": 424242, "index": 0, "start_time": 1.0},
    {"op": "finished", "job_id": 424242, "index": 0, "status": {"exit_code": 0, "end_time": 2.0}},
    {"op": "start_failed", "job_id": 424242, "index": 0, "reason": "walk"},
    {"op": "reply", "rid": 1, "result": None},
    # the controller's messages, and the handshake's, sent by the worker
    {"op": "start", "info": {}},
    *({"op": op, "job_id": 424242, "index": 0} for op in ("kill", "reattach", "end_tasks")),
    {"op": "signal", "job_id": 424242, "index": 0, "sig": 9},
    {"op": "request", "rid": 1, "what": "read_output", "args": {}},
    {"op": "join", "host": "r-other", "slots": 1, "memory_mb": 1},
    {"op": "challenge"}, {"op": "joined", "host": "r-other"}, {"op": "refused", "reason": "x"},
    # a user's request, as a compromised worker would try it
    {"op": "submit", "argv": ["id"], "cwd": "/"},
    {"no-op": 1},
]


def test_every_message_type_on_the_worker_channel(cluster):
    """KEY-3: on a worker's channel, the messages of its role (ROLE_MESSAGES['worker']) are
    taken (here each is then refused for naming an element that does not run there, D-7);
    every other type, the controller's own and a user request included, is dropped with a
    log line naming it, and the channel stays open; no job is made."""
    answer, open_after = _channel(cluster, "worker", MESSAGES)
    assert answer == {"op": "joined", "host": "r-worker", "heartbeat_s": 10.0} and open_after
    log = cluster.ctl.log
    allowed = ROLE_MESSAGES["worker"]
    want_dropped = [repr(m.get("op")) for m in MESSAGES if m.get("op") not in allowed]
    deadline = time.monotonic() + 10
    while True:
        text = log.read_text()
        dropped = [op for op in want_dropped if f"worker r-worker sent {op}, which its role may not send" in text]
        if len(dropped) == len(want_dropped) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert dropped == want_dropped, text[-4000:]
    for op in allowed:
        assert f"sent {op!r}, which its role may not send" not in text
    for op in ("started", "finished", "start_failed"):
        assert f"worker r-worker reported {op} of job 424242, which is not running; refused" in text, text[-4000:]
    assert json.loads(cluster.ctl.cli("jobs", "--json", "-a", check=True).stdout)["jobs"] == []

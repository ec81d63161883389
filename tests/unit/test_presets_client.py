"""`xcecli presets pull` and `list` against the server routes, with HTTP mocked (PRE-3, PRE-4).

The CLI's client speaks HTTP/1.1 itself (a socket and httptools) over the Unix
socket (xced.api.client: httpx costs more than the start-up budget), so respx, which
patches httpx, cannot stand in for the server here. A canned HTTP server on a Unix
socket answers instead, with the bodies the routes serve; the real `xcecli` runs against
it through XCE_SOCKET.
"""

from __future__ import annotations

import json
import os
import socketserver
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from xced.api.submit_options import preset_hash
from tests.conftest import short_tmpdir

XCECLI = str(Path(sys.executable).parent / "xcecli")
SITE = {"queue": "short", "run_limit": "30"}


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _handler(routes: dict[str, tuple[int, object]], seen: list[str]):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            status, body = routes.get(self.path, (404, {"error": {"code": "not_found", "message": "no route",
                                                                   "field": None}}))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def address_string(self):
            return "uds"

        def log_message(self, *a):
            pass

    return H


@pytest.fixture
def server():
    """(routes, seen paths, socket path): a canned API on a Unix socket, stopped afterwards."""
    d = short_tmpdir("xcep-")
    sock = d / "api.sock"
    routes: dict[str, tuple[int, object]] = {}
    seen: list[str] = []
    srv = _Server(str(sock), _handler(routes, seen))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield routes, seen, sock
    finally:
        srv.shutdown()
        srv.server_close()
        import shutil

        shutil.rmtree(d, ignore_errors=True)


def _serve(routes, values=SITE, name="site-default", cluster="alpha"):
    p = {"name": name, "hash": preset_hash(values), "values": values}
    routes["/xce/v1/presets"] = (200, {"presets": [p]})
    routes[f"/xce/v1/presets/{name}"] = (200, p)
    routes["/xce/v1/info"] = (200, {"cluster_name": cluster, "mode": "test", "version": "0", "config_hash": "0",
                                    "user": "u", "asserted_user": False, "is_admin": False, "topdir": "/t",
                                    "daemon_user": "root"})
    return p


def _cli(home: Path, sock: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "XCE_SOCKET": str(sock)}
    env.pop("XCE_TOPDIR", None)
    return subprocess.run([XCECLI, *args], capture_output=True, text=True, env=env, timeout=60)


def test_list_marks_server_presets_apart(server, tmp_path):
    routes, seen, sock = server
    _serve(routes)
    assert _cli(tmp_path, sock, "presets", "create", "mine", "-q", "normal").returncode == 0
    r = _cli(tmp_path, sock, "presets", "list")
    assert r.returncode == 0, r.stderr
    rows = [line.split()[:2] for line in r.stdout.splitlines()[1:]]
    assert rows == [["mine", "local"], ["site-default", "server"]]
    out = json.loads(_cli(tmp_path, sock, "presets", "list", "--json").stdout)
    assert [p["name"] for p in out["server"]] == ["site-default"] and out["server"][0]["values"] == SITE
    assert "/xce/v1/presets" in seen


def test_pull_copies_the_values_and_records_the_origin(server, tmp_path):
    routes, _, sock = server
    p = _serve(routes)
    r = _cli(tmp_path, sock, "presets", "pull", "site-default")
    assert r.returncode == 0 and "pulled from server preset site-default of alpha" in r.stderr, r.stderr
    shown = json.loads(_cli(tmp_path, sock, "presets", "show", "site-default", "--json").stdout)
    assert shown["values"] == SITE and shown["hash"] == p["hash"]  # the origin is not hashed
    assert shown["origin"] == {"server": "alpha", "name": "site-default", "hash": p["hash"]}
    # the server's preset changes: pulling again updates the copy, no .bak
    p2 = _serve(routes, {"queue": "normal", "run_limit": "30"})
    r = _cli(tmp_path, sock, "presets", "pull", "site-default")
    assert r.returncode == 0 and "updated" in r.stderr
    shown = json.loads(_cli(tmp_path, sock, "presets", "show", "site-default", "--json").stdout)
    assert shown["hash"] == p2["hash"] and shown["origin"]["hash"] == p2["hash"]
    assert not (tmp_path / "xce" / "presets" / "site-default.yaml.bak").exists()


def test_pull_refuses_a_local_preset_from_elsewhere_then_as_and_force(server, tmp_path):
    routes, _, sock = server
    _serve(routes)
    assert _cli(tmp_path, sock, "presets", "create", "site-default", "-q", "mine").returncode == 0
    f = tmp_path / "xce" / "presets" / "site-default.yaml"
    before = f.read_bytes()
    r = _cli(tmp_path, sock, "presets", "pull", "site-default")
    assert r.returncode == 1 and "a local preset site-default exists and was made here" in r.stderr
    assert "--as NEW" in r.stderr and "--force" in r.stderr and f.read_bytes() == before
    # a copy of another cluster's preset of that name is "elsewhere" too
    _serve(routes, cluster="beta")
    r = _cli(tmp_path, sock, "presets", "pull", "site-default", "--as", "sd")
    assert r.returncode == 0, r.stderr
    _serve(routes, cluster="alpha")
    r = _cli(tmp_path, sock, "presets", "pull", "site-default", "--as", "sd")
    assert r.returncode == 1 and "came from server preset site-default of beta" in r.stderr
    r = _cli(tmp_path, sock, "presets", "pull", "site-default", "--force")
    assert r.returncode == 0 and (tmp_path / "xce" / "presets" / "site-default.yaml.bak").read_bytes() == before
    assert json.loads(_cli(tmp_path, sock, "presets", "show", "site-default", "--json").stdout)["values"] == SITE


def test_pull_refuses_what_it_cannot_trust(server, tmp_path):
    """A missing server preset, a hash that does not match the values, values this client's
    submit would refuse: an error each, and no file written."""
    routes, _, sock = server
    _serve(routes)
    routes["/xce/v1/presets/nope"] = (404, {"error": {"code": "not_found", "field": None,
                                                      "message": "no server preset 'nope'; the server's presets: "
                                                                 "site-default"}})
    r = _cli(tmp_path, sock, "presets", "pull", "nope")
    assert r.returncode == 1 and "no server preset 'nope'; the server's presets: site-default" in r.stderr
    routes["/xce/v1/presets/bad"] = (200, {"name": "bad", "hash": "sha256:00", "values": SITE})
    r = _cli(tmp_path, sock, "presets", "pull", "bad")
    assert r.returncode == 1 and "does not match its values" in r.stderr
    routes["/xce/v1/presets/zero"] = (200, {"name": "zero", "hash": preset_hash({"ntasks": "0"}),
                                            "values": {"ntasks": "0"}})
    r = _cli(tmp_path, sock, "presets", "pull", "zero")
    assert r.returncode == 1 and "-n 0: the task count must be at least 1" in r.stderr
    r = _cli(tmp_path, sock, "presets", "pull", "../etc")
    assert r.returncode == 2 and "is not valid" in r.stderr  # a malformed argument: a usage error
    assert not (tmp_path / "xce" / "presets").exists() or not list((tmp_path / "xce" / "presets").glob("*.yaml"))


def test_pull_keeps_a_pulled_copy_that_was_changed_here(server, tmp_path):
    """A pulled copy edited by hand is no longer the server's: pulling again is refused like
    a preset from elsewhere (so the edit is not lost), and --force keeps it as .bak. A pull
    of what the copy holds already says so and writes nothing."""
    routes, _, sock = server
    _serve(routes)
    assert _cli(tmp_path, sock, "presets", "pull", "site-default").returncode == 0
    f = tmp_path / "xce" / "presets" / "site-default.yaml"
    r = _cli(tmp_path, sock, "presets", "pull", "site-default")
    assert r.returncode == 0 and "is already server preset site-default of alpha as it is now" in r.stderr
    f.write_text(f.read_text().replace('queue: "short"', 'queue: "normal"'))
    edited = f.read_bytes()
    r = _cli(tmp_path, sock, "presets", "pull", "site-default")
    assert r.returncode == 1 and "was changed here since it was pulled" in r.stderr and f.read_bytes() == edited
    r = _cli(tmp_path, sock, "presets", "pull", "site-default", "--force")
    assert r.returncode == 0 and (tmp_path / "xce" / "presets" / "site-default.yaml.bak").read_bytes() == edited

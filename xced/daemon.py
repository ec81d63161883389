"""`xced`: process lifecycle (D-1 to D-5). Load the config (refusing an invalid one with
the same messages as `xceadmin build`, CFG-4), open the store, wire the roles, serve the
API on the Unix socket, and shut down cleanly on SIGTERM, leaving running jobs to their
supervisors (JOB-8).

Without `--topdir` and XCE_TOPDIR, the TopDir is the user's data dir, where a personal
single-host cluster is made on first start.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import logging
import os
import signal
import sys
from pathlib import Path

import typer

from xced.constants import ENV_TOPDIR, PID_FILE, default_topdir, socket_path

log = logging.getLogger("xced")

#: seconds an idle client connection is kept open (clients reconnect after 20 s idle).
KEEP_ALIVE_S = 120
#: allocations between young collections (CPython's default is 700).
GC_THRESHOLD0 = 50_000

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help="The XCE daemon: controller, scheduler, worker and API server.")


class StartupError(Exception):
    """xced cannot start; the message says why and what to do."""


def _die(msg: str, code: int = 1) -> None:
    print(f"xced: error: {msg}", file=sys.stderr)
    raise typer.Exit(code)


def prepare_topdir(explicit: str | None) -> Path:
    """The TopDir to serve. An explicit one (`--topdir`, XCE_TOPDIR) must exist and hold a
    config; the default one gets a personal single-host cluster on first start."""
    from xced.config import write_personal_config

    given = explicit or os.environ.get(ENV_TOPDIR)
    if given:
        top = Path(given).expanduser().absolute()
        if not top.is_dir():
            raise StartupError(f"TopDir {top} does not exist; make one with `xceadmin init {top}`, "
                               f"or run `xced` without --topdir for a personal cluster")
        if not (top / "config" / "xce.yaml").exists():
            raise StartupError(f"TopDir {top} has no config/xce.yaml; make one with `xceadmin init {top}`")
        return top
    top = default_topdir()
    if not (top / "config" / "xce.yaml").exists():
        top.mkdir(parents=True, exist_ok=True)
        try:
            write_personal_config(top)
        except FileExistsError as e:
            raise StartupError(f"the personal cluster in {top} is half made ({e}); remove {top / 'config'} "
                               f"or finish it by hand, then check it with `xceadmin build --topdir {top}`") from None
        print(f"xced: made a personal single-host cluster in {top}", file=sys.stderr)
    return top


def _lock_topdir(top: Path) -> int:
    run = top / "run"
    run.mkdir(parents=True, exist_ok=True)
    fd = os.open(run / "xced.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            pid = (run / PID_FILE).read_text().strip()
        except OSError:
            pid = "?"
        os.close(fd)
        raise StartupError(f"xced already runs for TopDir {top} (pid {pid}); stop it first (kill -TERM {pid})")
    (run / PID_FILE).write_text(f"{os.getpid()}\n")
    return fd


def _local_host(config, host_name: str | None) -> str | None:
    import socket

    names = [h.name for h in config.hosts]
    if host_name:
        if host_name not in names:
            raise StartupError(f"--host-name {host_name!r} is not in hosts.yaml; hosts: {', '.join(names)}")
        return host_name
    me = socket.gethostname()
    if me in names:
        return me
    if len(names) == 1:
        return names[0]
    return None


async def serve(top: Path, config, host_name: str | None) -> None:
    """Run the daemon until SIGTERM/SIGINT."""
    import uvicorn

    from xced.controller.controller import Controller
    from xced.server.app import create_app
    from xced.server.auth import PeerCredProtocol
    from xced.store.sqlite import SqliteStore
    from xced.worker.local import LocalWorker

    store = SqliteStore(top / "state" / "xce.db")
    ctl = Controller(config, store, top)
    # Fewer, cheaper collections: with 10,000 pending jobs the default thresholds ran a
    # full collection every few submits and froze the event loop for ~100 ms each (bench).
    # Objects alive now (modules, loaded jobs) are frozen out of every later collection.
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD0, 50, 100)
    local = _local_host(config, host_name)
    worker = None
    if local is not None:
        worker = LocalWorker(local, top, ctl)
        ctl.attach_worker(worker)
    else:
        log.warning("no host in hosts.yaml is this machine (%s); this xced runs no jobs itself", host_name)
    sock = socket_path(top)
    env_sock = os.environ.get("XCE_SOCKET")
    if env_sock:
        sock = Path(env_sock)
    sock.parent.mkdir(parents=True, exist_ok=True)
    if sock.exists() or sock.is_symlink():
        sock.unlink()
    fastapi_app = create_app(ctl)
    cfg = uvicorn.Config(fastapi_app, uds=str(sock), http=PeerCredProtocol, lifespan="off",
                         access_log=False, log_level="warning", timeout_graceful_shutdown=2,
                         timeout_keep_alive=KEEP_ALIVE_S)
    server = uvicorn.Server(cfg)
    print(f"xced: cluster {config.settings.cluster_name!r} ({config.settings.mode} mode), "
          f"TopDir {top}, host {local}, socket {sock}", file=sys.stderr, flush=True)
    orig_startup = server.startup

    async def startup(sockets=None):
        await orig_startup(sockets)
        try:
            os.chmod(sock, 0o666)  # any local user may connect; identity comes from SO_PEERCRED (D-6)
        except OSError:
            pass
        (top / "run" / "xced.ready").write_text(str(sock))

    server.startup = startup  # type: ignore[method-assign]

    @contextlib.contextmanager
    def capture_signals():
        # SIGTERM/SIGINT: stop serving and exit 0 (uvicorn's own handler re-raises the signal).
        loop = asyncio.get_running_loop()
        for s in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(s, lambda: setattr(server, "should_exit", True))
        try:
            yield
        finally:
            for s in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(s)

    server.capture_signals = capture_signals  # type: ignore[method-assign]
    try:
        await server.serve()
    finally:
        if worker is not None:
            await worker.close()
        store.close()
        for p in (sock, top / "run" / "xced.ready"):
            try:
                p.unlink()
            except OSError:
                pass
        print("xced: stopped; running jobs keep running under their supervisors", file=sys.stderr, flush=True)


@app.command()
def run(
    topdir: str = typer.Option(None, "--topdir", help="the cluster's TopDir (default: XCE_TOPDIR, else a personal cluster in the user data dir)"),
    roles: str = typer.Option("controller,scheduler,worker,apiserver", "--roles", help="comma-separated roles"),
    host_name: str = typer.Option(None, "--host-name", help="the host this worker serves (default: this machine)"),
    controller: str = typer.Option(None, "--controller", help="URL of the controller to join as a worker"),
) -> None:
    """Start the daemon in the foreground."""
    logging.basicConfig(level=os.environ.get("XCE_LOG_LEVEL", "INFO"), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    wanted = {r.strip() for r in roles.split(",") if r.strip()}
    valid = {"controller", "scheduler", "worker", "apiserver"}
    if not wanted or wanted - valid:
        _die(f"--roles {roles!r}: valid roles are {', '.join(sorted(valid))}", 2)
    if wanted != valid or controller:
        _die("only the default roles (all four in one process) are built so far; "
             "`--roles worker --controller URL` comes with multi-host support", 2)
    from xced.config import load_cluster_config

    try:
        top = prepare_topdir(topdir)
        result = load_cluster_config(top)
        if result.errors:
            for d in result.errors:
                print(str(d), file=sys.stderr)
            _die(f"{len(result.errors)} error(s) in the config of {top}; fix them (check with `xceadmin build --topdir {top}`)")
        for w in result.warnings:
            print(str(w), file=sys.stderr)
        lock_fd = _lock_topdir(top)
        asyncio.run(serve(top, result.config, host_name))
        os.close(lock_fd)
    except StartupError as e:
        _die(str(e))


def main() -> None:
    app()


if __name__ == "__main__":
    main()

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
import time
from pathlib import Path

import typer

from xced.version import print_version_and_exit
from xced.constants import (DB_NAME, ENV_LOG_LEVEL, ENV_SOCKET, ENV_TEST_FAULT, ENV_TOPDIR, LOCK_FILE, PID_FILE, PORT_FILE,
                             READY_FILE, SOCKET_PATH_FILE, default_topdir)

log = logging.getLogger("xced")

#: seconds an idle client connection is kept open (clients reconnect after 20 s idle).
KEEP_ALIVE_S = 120
#: allocations between young collections (CPython's default is 700).
GC_THRESHOLD0 = 50_000

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help="The XCE daemon: controller, scheduler, worker and API server.")


class StartupError(Exception):
    """xced cannot start; the message says why and what to do."""


#: the faults XCE_TEST_FAULT may name (mode: test only), and what each does
TEST_FAULTS = {"exit-after-commit:submit": "xced ends (exit 86) right after a submit's commit, before its answer"}


def requested_test_fault(mode: str) -> str | None:
    """The fault XCE_TEST_FAULT asks for (TEST_FAULTS), or None when it is unset or empty.
    A test hook (JOB-10's retried submit, issue 15): raises StartupError in `mode`
    production, and for a name not in TEST_FAULTS, listing those that are."""
    value = os.environ.get(ENV_TEST_FAULT, "").strip()
    if not value:
        return None
    if mode != "test":
        raise StartupError(f"{ENV_TEST_FAULT}={value!r} is set, and it is a test hook: a {mode}-mode xced refuses "
                           f"to start with it; unset {ENV_TEST_FAULT} (it is taken in mode: test only)")
    if value not in TEST_FAULTS:
        raise StartupError(f"{ENV_TEST_FAULT}={value!r}: unknown fault; valid: {', '.join(TEST_FAULTS)}")
    return value


#: xced's exit codes, for its man page (tools/clidocs.py, CLI-5): (code, what it means)
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "stopped cleanly (SIGTERM or SIGINT); jobs that were running go on under their supervisors"),
    (1, "could not start: a config with errors, a TopDir that is unsafe or cannot be written, another xced "
        "serving the TopDir, a worker the controller refused"),
    (2, "a usage error: an unknown option, a bad --roles, --slots or --memory, a missing --controller"),
)


def _run_loop(main):
    """Run `main` as asyncio.run does, on xced.server.fdlimit's GuardedLoop: accepting a
    connection that fails for want of descriptors backs off instead of spinning (issue 19)."""
    from xced.server.fdlimit import run

    return run(main)


def _die(msg: str, code: int = 1) -> None:
    print(f"xced: error: {msg}", file=sys.stderr)
    raise typer.Exit(code)


def prepare_topdir(explicit: str | None) -> Path:
    """The TopDir to serve. An explicit one (`--topdir`, XCE_TOPDIR) must exist and hold a
    config; the default one gets a personal single-host cluster on first start."""
    from xced.config import write_personal_config

    given = explicit if explicit is not None else os.environ.get(ENV_TOPDIR)
    if given is not None and not str(given).strip():
        raise StartupError("--topdir '' (or XCE_TOPDIR=''): the TopDir is empty; give a directory")
    if given:
        top = Path(given).expanduser().absolute()
        if top.exists() and not top.is_dir():
            raise StartupError(f"TopDir {top} is not a directory")
        if not top.is_dir():
            raise StartupError(f"TopDir {top} does not exist; make one with `xceadmin init {top}`, "
                               f"or run `xced` without --topdir for a personal cluster")
        if not (top / "config" / "xce.yaml").exists():
            raise StartupError(f"TopDir {top} has no config/xce.yaml; make one with `xceadmin init {top}`")
        return top
    top = default_topdir()
    if not (top / "config" / "xce.yaml").exists():
        from xced.config.topdir import make_layout

        make_layout(top, check=False)  # D-7: the modes of LAYOUT; secure_topdir checks them after
        try:
            write_personal_config(top)
        except FileExistsError as e:
            raise StartupError(f"the personal cluster in {top} is half made ({e}); remove {top / 'config'} "
                               f"or finish it by hand, then check it with `xceadmin build --topdir {top}`") from None
        print(f"xced: made a personal single-host cluster in {top}", file=sys.stderr)
    return top


def secure_topdir(top: Path, dirs: tuple[str, ...] | None = None) -> None:
    """Make the TopDir's directories with their modes and refuse a TopDir that lets other
    users change what xced trusts (D-7): each problem names the path, its mode and owner,
    and the mode it needs. `dirs`: the layout entries this role uses (default: all)."""
    from xced.config.topdir import (UnsafeDirectory, check_ancestors, check_config_files, check_store_file,
                                    make_layout)

    try:
        problems = check_ancestors(top) + make_layout(top, only=dirs)
        if dirs is None:
            problems += check_config_files(top) + check_store_file(top)
    except UnsafeDirectory as e:
        raise StartupError(str(e)) from None
    if problems:
        raise StartupError("the TopDir lets other users change what xced trusts (the store, job specs, the "
                           "socket); refusing to start:\n  " + "\n  ".join(str(p) for p in problems))


def write_lsf_conf_or_warn(top: Path) -> None:
    """Write `<TopDir>/lsf.conf` (xced.config.lsfconf: XCE's semantics for LSF tools that
    read LSF_ENVDIR, issue 18 part 5) at every start; a TopDir where it cannot be written
    is a warning on stderr, not a refusal: the daemon does not need it."""
    from xced.config.lsfconf import write_lsf_conf

    try:
        write_lsf_conf(top)
    except OSError as e:
        print(f"xced: warning: cannot write {top / 'lsf.conf'} (for LSF tools through LSF_ENVDIR): "
              f"{e.strerror or e}", file=sys.stderr)


def _lock_topdir(top: Path) -> int:
    run = top / "run"
    fd = os.open(run / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
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


def _unlock_topdir(top: Path, fd: int) -> None:
    """Undo `_lock_topdir` at exit: remove run/xced.pid while it still names this process,
    then release the TopDir's lock (`fd`), in that order, so that the pid file of a daemon
    started right after is never the one removed (issue 16: the pid file outlived a clean
    SIGTERM). A daemon killed outright leaves it behind; the next start overwrites it."""
    pid_path = top / "run" / PID_FILE
    try:
        if pid_path.read_text().strip() == str(os.getpid()):
            pid_path.unlink()
    except OSError:
        pass
    os.close(fd)


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


def _socket_place(top: Path) -> Path:
    """Where to bind (D-7): XCE_SOCKET, else `daemon_socket_path`. The directory is checked
    first: the fallback one must be this user's own (made 0711), any other must not let
    another user swap the socket. Raises StartupError saying why and what to do."""
    from xced.config.topdir import (UnsafeDirectory, check_socket_parent, daemon_socket_path,
                                    fallback_socket_dir, private_socket_dir)

    env_sock = os.environ.get(ENV_SOCKET)
    sock = Path(env_sock).absolute() if env_sock else daemon_socket_path(top)
    try:
        if sock.parent == fallback_socket_dir():
            private_socket_dir(sock.parent)
        elif sock.parent != top / "run":
            check_socket_parent(sock)
    except UnsafeDirectory as e:
        raise StartupError(str(e)) from None
    except OSError as e:
        raise StartupError(f"cannot make the socket directory {sock.parent}: {e.strerror}") from None
    if len(os.fsencode(str(sock))) > 107:
        raise StartupError(f"the socket path {sock} is longer than the 107 bytes of a Unix socket path; set "
                           f"XCE_SOCKET to a shorter one")
    return sock


def _closed_to_others(sock: Path) -> Path | None:
    """The first directory on the socket's path that other users cannot pass (no x for
    others), or None when every user can reach the socket."""
    for d in reversed(sock.parents):
        try:
            if not os.stat(d).st_mode & 0o001:
                return d
        except OSError:
            return d
    return None


def _unix_listener(path: Path):
    """The Unix socket for local clients, mode 0666: anyone may connect, and the daemon
    knows who from SO_PEERCRED (D-6). The mode comes from the umask at bind, never from a
    chmod by path, which would follow a symlink swapped in meanwhile (D-7)."""
    import socket

    if path.exists() or path.is_symlink():
        path.unlink()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o111)
    try:
        s.bind(str(path))
    finally:
        os.umask(old)
    s.listen(512)
    return s


def _write_public(path: Path, text: str) -> None:
    """A file of run/ that any user may read (the port), mode 0644 whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.fchmod(fd, 0o644)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _tcp_listener(host: str, port: int):
    """The TCP socket for peers (D-2); port 0 picks a free one (written to run/xced.port)."""
    import socket

    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
    except OSError as e:
        s.close()
        raise StartupError(f"cannot listen on {host}:{port} (listen: in xce.yaml): {e.strerror}") from None
    s.listen(512)
    return s


def _controller_tls(top: Path, ctl, serve_tcp: bool):
    """A production controller's key (`keys/host.key`, made on first start) and, when it
    serves TCP, its TLS context (KEY-6). Sets `ctl.own_fingerprint`, the pin its peers and
    its enrolment tokens carry. Raises StartupError for a key it cannot use."""
    import socket

    from xced.auth.keys import KeyProblem, fingerprint, host_key
    from xced.auth.tls import server_context

    try:
        key, made = host_key(top, f"xced {ctl.config.settings.cluster_name}@{socket.gethostname()}")
    except (KeyProblem, OSError) as e:
        raise StartupError(f"the controller's host key: {e}") from None
    ctl.own_fingerprint = fingerprint(key.public_key())
    if made:
        print(f"xced: made the controller's host key {top / 'keys' / 'host.key'} ({ctl.own_fingerprint}); peers pin "
              f"it: give them {top / 'keys' / 'host.pub'} or its fingerprint", file=sys.stderr, flush=True)
    return server_context(key, top / "keys") if serve_tcp else None


def _stop_on_signals(server, also=None):
    """uvicorn's `capture_signals` for `server`: SIGTERM/SIGINT stop serving and xced exits 0
    (uvicorn's own handler re-raises the signal); `also()` runs at the signal too."""

    @contextlib.contextmanager
    def capture_signals():
        loop = asyncio.get_running_loop()

        def stop() -> None:
            server.should_exit = True
            if also is not None:
                also()

        for s in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(s, stop)
        try:
            yield
        finally:
            for s in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(s)

    return capture_signals


def _raise_fd_limit() -> int:
    """Raise the soft open-file limit to the hard one (xced.server.fdlimit) and return the
    soft limit xced was started with. Jobs get that one back (ENV_JOB_NOFILE, read by the
    supervisor launcher): a job runs with its user's limit, as under LSF, not the daemon's."""
    from xced.server.fdlimit import ENV_JOB_NOFILE, raise_nofile_limit

    before, now, _hard = raise_nofile_limit()
    if now > before:
        os.environ[ENV_JOB_NOFILE] = str(before)
    return before


async def serve_worker(top: Path, url: str, join, *, pin: str | None = None, key=None, enroll: str | None = None) -> None:
    """`xced --roles worker`: serve as a worker host of the controller at `url` until SIGTERM."""
    from xced.worker.remote import run_worker

    _raise_fd_limit()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    print(f"xced: worker host {join.host} ({join.slots} slots, {join.memory_mb} MB) of {url}"
          f"{f' (TLS pinned to {pin})' if pin else ' (plain TCP: a test-mode controller)'}, TopDir {top}",
          file=sys.stderr, flush=True)
    relay = relay_server = None
    job_env = None
    if key is not None:  # production: the jobs here reach the controller through this worker (JOB-7)
        import uvicorn

        from xced.server.auth import PeerCredProtocol
        from xced.server.relay import create_relay_app
        from xced.worker.remote import LaunchRelay

        relay = LaunchRelay()
        sock = _socket_place(top)  # run/xced.sock, or the fallback directory for a TopDir path too long
        listener = _unix_listener(sock)
        job_env = {ENV_SOCKET: str(sock)}
        relay_server = uvicorn.Server(uvicorn.Config(create_relay_app(relay.forward), http=PeerCredProtocol,
                                                     lifespan="off", access_log=False, log_level="warning"))
        relay_server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
        relay_task = asyncio.get_running_loop().create_task(relay_server.serve(sockets=[listener]))
    (top / "run" / READY_FILE).write_text(url)
    try:
        await run_worker(url, join, top, stop, pin=pin, key=key, enroll=enroll, relay=relay, job_env=job_env)
    finally:
        if relay_server is not None:
            relay_server.should_exit = True
            await asyncio.gather(relay_task, return_exceptions=True)
        try:
            (top / "run" / READY_FILE).unlink()
        except OSError:
            pass
        print("xced: worker stopped; running jobs keep running under their supervisors", file=sys.stderr, flush=True)


async def serve(top: Path, config, host_name: str | None, run_jobs_here: bool = True) -> None:
    """Run the daemon until SIGTERM/SIGINT."""
    import uvicorn

    from xced.controller.controller import Controller
    from xced.server.app import create_app
    from xced.server.auth import PeerCredProtocol
    from xced.store.sqlite import SqliteStore
    from xced.worker.local import LocalWorker

    from xced.api.errors import StoreBusy, StoreUnavailable
    from xced.store.sqlite import StoreError

    fault = requested_test_fault(config.settings.mode)  # first: a production xced with it set never opens its store
    nofile_at_start = _raise_fd_limit()  # issue 19: one descriptor per worker host
    try:
        store = SqliteStore(top / "state" / DB_NAME)
    except StoreError as e:
        raise StartupError(f"{e}; if the file is damaged, move {top / 'state'} aside to start with an empty store")
    try:  # D-8: a store it can read but not write would fail the first submit; refuse to start instead
        store.check_writable()
        ctl = Controller(config, store, top)
        ctl.purge_idempotency_keys()  # JOB-10: keys older than a day go at start (and hourly at a submit)
    except (StoreBusy, StoreUnavailable) as e:
        store.close()
        raise StartupError(f"cannot write the store {top / 'state' / DB_NAME}: {e.message}")
    ctl.start_retention()  # finished jobs leave memory after clean_period (issue 15)
    ctl.start_host_watch()  # hosts without a worker for host_lost_grace are lost (SCHED-4)
    if fault is not None:
        ctl.test_fault = fault
        print(f"xced: test fault {ENV_TEST_FAULT}={fault}: {TEST_FAULTS[fault]}", file=sys.stderr, flush=True)
    for line in ctl.remerged_at_start[1]:  # as `xceadmin build --apply` lists them (CFG-3)
        print(f"xced: held: {line}", file=sys.stderr, flush=True)
    # Fewer, cheaper collections: with 10,000 pending jobs the default thresholds ran a
    # full collection every few submits and froze the event loop for ~100 ms each (bench).
    # Objects alive now (modules, loaded jobs) are frozen out of every later collection.
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD0, 50, 100)
    local = _local_host(config, host_name) if run_jobs_here else None
    sock = _socket_place(top)
    worker = None
    if local is not None:
        worker = LocalWorker(local, top, ctl, {ENV_SOCKET: str(sock)})
        ctl.attach_worker(worker)
    elif run_jobs_here:
        log.warning("no host in hosts.yaml is this machine (%s); this xced runs no jobs itself", host_name)
    from xced.config.topdir import write_socket_path_file

    listeners = [_unix_listener(sock)]
    write_socket_path_file(top, sock)
    tcp_note = ""
    listen = config.settings.listen
    tls_ctx = None
    if listen.keyed(config.settings.mode):
        tls_ctx = _controller_tls(top, ctl, listen.port is not None)
    tcp = None
    if listen.port is not None:
        port_file = top / "run" / PORT_FILE
        tcp = None
        if listen.port == 0 and port_file.exists():
            # keep the port of the last run, so that workers rejoin a restarted controller; it
            # may be a moment before the old socket lets go, so try for up to 2 s
            last, why = None, None
            try:
                last = int(port_file.read_text().strip())
            except ValueError:
                why = "run/xced.port is not a port number"
            for _ in range(20 if last else 0):
                try:
                    tcp = _tcp_listener(listen.host, last)
                    break
                except StartupError as e:
                    why = str(e)
                    time.sleep(0.1)
        if tcp is None:
            tcp = _tcp_listener(listen.host, listen.port)
            if listen.port == 0 and port_file.exists():
                print(f"xced: warning: could not listen on the port of the last run again ({why}); now on port "
                      f"{tcp.getsockname()[1]}: workers and login hosts given the old port must be given this one",
                      file=sys.stderr, flush=True)
        port = tcp.getsockname()[1]
        _write_public(top / "run" / PORT_FILE, f"{port}\n")
        tcp_note = f", peers on tcp://{listen.host}:{port}" + (f" (TLS, key {ctl.own_fingerprint})" if tls_ctx
                                                                 else " (plain TCP, test mode)")
    from xced.server.fdlimit import FdBudget, current_loop_budget

    # what it holds now (store, listeners, logs) is the baseline of the host capacity
    ctl.fd_budget = budget = FdBudget.measure(raised_from=nofile_at_start)
    current_loop_budget(budget)
    if tcp is not None:
        print(f"xced: {budget.describe()}", file=sys.stderr, flush=True)
    fastapi_app = create_app(ctl)
    cfg = uvicorn.Config(fastapi_app, http=PeerCredProtocol, lifespan="off", ws="websockets-sansio",
                         access_log=False, log_level="warning", timeout_graceful_shutdown=2,
                         timeout_keep_alive=KEEP_ALIVE_S,
                         # no proxy stands in front of the socket: its X-Forwarded-* headers are
                         # not read (one ASGI layer fewer per request; issue 17 part 5)
                         proxy_headers=False)
    server = uvicorn.Server(cfg)
    print(f"xced: cluster {config.settings.cluster_name!r} ({config.settings.mode} mode), "
          f"TopDir {top}, {'host ' + local if local else 'no jobs on this machine'}, socket {sock}{tcp_note}",
          file=sys.stderr, flush=True)
    if config.settings.mode == "test":
        print("xced: test mode: workers may join without keys, --as-user and direct submits are taken"
              + ("" if tls_ctx else ", and TCP is not encrypted") + "; for harnesses only (KEY-1, D-6)",
              file=sys.stderr, flush=True)
    closed = _closed_to_others(sock)
    if closed is not None and config.settings.mode == "production" and os.geteuid() == 0:
        print(f"xced: note: other users cannot reach the socket: {closed} is not open to them (mode "
              f"{closed.stat().st_mode & 0o777:04o}); only root's clients can submit (D-7)", file=sys.stderr, flush=True)
    orig_startup = server.startup

    load_task = None

    async def startup(sockets=None):
        nonlocal load_task
        await orig_startup(sockets)
        if worker is not None:  # RES-7: this host's load indices, measured now and every LOAD_REPORT_S
            from xced.worker.load import LoadSampler, report_load, safe_sample

            sampler = LoadSampler()
            first = safe_sample(sampler)
            if first is not None:
                ctl.host_load(worker, first)
            load_task = asyncio.create_task(report_load(sampler, lambda values: ctl.host_load(worker, values)))
        if tcp is not None:  # the TCP port has TLS in production (KEY-6); the Unix socket never
            srv = await asyncio.get_running_loop().create_server(
                lambda: cfg.http_protocol_class(config=cfg, server_state=server.server_state,
                                                app_state=server.lifespan.state),
                sock=tcp, ssl=tls_ctx, backlog=cfg.backlog)
            server.servers.append(srv)
        (top / "run" / READY_FILE).write_text(str(sock))

    server.startup = startup  # type: ignore[method-assign]
    # waiting clients get an answer before the connections close
    server.capture_signals = _stop_on_signals(server, ctl.wake_waiters)  # type: ignore[method-assign]
    try:
        await server.serve(sockets=listeners)
    finally:
        if load_task is not None:
            load_task.cancel()
        if worker is not None:
            await worker.close()
        store.close()
        for p in (sock, top / "run" / READY_FILE, top / "run" / SOCKET_PATH_FILE):  # run/xced.port stays
            try:
                p.unlink()
            except OSError:
                pass
        print("xced: stopped; running jobs keep running under their supervisors", file=sys.stderr, flush=True)


#: the TopDir entries a login host uses: its socket and READY file (run/), its key and the
#: controller's pin (keys/); no config, store or jobs of its own
LOGIN_DIRS = ("", "run", "keys")


async def serve_login(top: Path, url: str, pin: str, key, host: str) -> None:
    """`xced --roles apiserver --controller URL`: serve the Unix socket of login host
    `host`'s TopDir `top` (as the controller serves its own: `_socket_place`, mode 0666,
    run/xced.sock.path, run/xced.ready once serving), passing its users' requests to the
    controller at `url` over TLS pinned to `pin`, authenticated with `key` in the apiserver
    role (xced.server.login), until SIGTERM/SIGINT. A controller that cannot be reached or
    refuses the key at start is logged, not fatal: users get the reason with each request
    until it is fixed. Raises StartupError for a socket it cannot place."""
    import uvicorn

    from xced.api.errors import XceError
    from xced.api.peer_client import PeerClient
    from xced.auth.keys import fingerprint
    from xced.config.topdir import write_socket_path_file
    from xced.server.auth import PeerCredProtocol
    from xced.server.login import LoginForwarder, create_login_app

    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request passed on
    _raise_fd_limit()
    sock = _socket_place(top)
    listeners = [_unix_listener(sock)]
    write_socket_path_file(top, sock)
    fp = fingerprint(key.public_key())
    fwd = LoginForwarder(PeerClient(url, pin, key, host, "apiserver"), topdir=top, fingerprint=fp)
    cfg = uvicorn.Config(create_login_app(fwd), http=PeerCredProtocol, lifespan="off", access_log=False,
                         log_level="warning", timeout_graceful_shutdown=2, timeout_keep_alive=KEEP_ALIVE_S)
    server = uvicorn.Server(cfg)
    print(f"xced: login host {host} (apiserver role, key {fp}) of the controller at {url} (TLS pinned to {pin}), "
          f"TopDir {top}, socket {sock}", file=sys.stderr, flush=True)
    closed = _closed_to_others(sock)
    if closed is not None and os.geteuid() == 0:
        print(f"xced: note: other users cannot reach the socket: {closed} is not open to them (mode "
              f"{closed.stat().st_mode & 0o777:04o}); only root's clients can submit here (D-7)", file=sys.stderr,
              flush=True)

    async def first_session() -> None:
        try:
            mode = await fwd.connect()
        except XceError as e:
            print(f"xced: warning: {e.message}", file=sys.stderr, flush=True)
            return
        print(f"xced: authenticated to the controller at {url} as apiserver of {host} (cluster in {mode} mode"
              + ("; asserted users are refused" if mode != "test" else "; --as-user is passed on") + ")",
              file=sys.stderr, flush=True)

    orig_startup = server.startup
    tasks: list[asyncio.Task] = []

    async def startup(sockets=None):
        await orig_startup(sockets)
        (top / "run" / READY_FILE).write_text(str(sock))
        tasks.append(asyncio.get_running_loop().create_task(first_session()))

    server.startup = startup  # type: ignore[method-assign]
    server.capture_signals = _stop_on_signals(server)  # type: ignore[method-assign]
    try:
        await server.serve(sockets=listeners)
    finally:
        for t in tasks:
            t.cancel()
        await fwd.close()
        for p in (sock, top / "run" / READY_FILE, top / "run" / SOCKET_PATH_FILE):
            try:
                p.unlink()
            except OSError:
                pass
        print("xced: login host stopped", file=sys.stderr, flush=True)


#: `xced --help` and the man page's DESCRIPTION (one line per paragraph: Typer keeps line breaks)
RUN_HELP = (
    "Start the daemon in the foreground.\n\n"
    "With the default roles, xced is a whole cluster in one process: the controller (the store, the only "
    "writer), the scheduler, a worker running the jobs of this host, and the API server on the TopDir's Unix "
    "socket. Without --topdir and XCE_TOPDIR it serves a personal cluster in the user's data directory, made on "
    "its first start.\n\n"
    "`--roles worker --controller URL` joins another host's controller as a worker; `--roles apiserver "
    "--controller URL` is a login host that passes its users' requests on. SIGTERM stops xced cleanly: running "
    "jobs go on under their supervisors and are found again at the next start.")


@app.command(help=RUN_HELP)
def run(
    topdir: str = typer.Option(None, "--topdir", metavar="DIR", help="the cluster's TopDir (default: XCE_TOPDIR, else a personal cluster in the user data dir)"),
    roles: str = typer.Option("controller,scheduler,worker,apiserver", "--roles", metavar="ROLES", help="comma-separated roles"),
    host_name: str = typer.Option(None, "--host-name", metavar="NAME", help="worker, login host: the host name its key is trusted for "
                                                            "(default: this machine's)"),
    controller: str = typer.Option(None, "--controller", metavar="tcp://HOST:PORT", help="tcp://HOST:PORT of the controller to join (--roles worker) "
                                                              "or to pass users' requests to (--roles apiserver)"),
    slots: int = typer.Option(None, "--slots", metavar="N", help="worker: slots this host offers (default: its usable CPUs)"),
    memory: str = typer.Option(None, "--memory", metavar="SIZE", help="worker: memory this host offers, e.g. 8GB (default: physical memory)"),
    resource: list[str] = typer.Option([], "--resource", metavar="NAME=NUMBER", help="worker: NAME=NUMBER, a consumable resource (repeatable), e.g. gpu=2"),
    attribute: list[str] = typer.Option([], "--attribute", metavar="NAME=VALUE", help="worker: NAME=VALUE, a string attribute (repeatable), e.g. type=x86_64"),
    tag: list[str] = typer.Option([], "--tag", metavar="NAME", help="worker: a boolean resource (repeatable)"),
    controller_key: str = typer.Option(None, "--controller-key", metavar="FILE|SHA256:...",
                                       help="worker, login host: the controller's public key file (its keys/host.pub) "
                                            "or fingerprint, which TLS is pinned to (KEY-6); saved at the first join"),
    enroll: str = typer.Option(None, "--enroll", metavar="TOKEN",
                               help="worker: trade a one-time enrolment token (`xceadmin keys token`) for trust of "
                                    "this host's key"),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=print_version_and_exit("xced"),
                                 help="print the version (the package's) and exit"),
) -> None:
    """Start the daemon in the foreground (RUN_HELP)."""
    os.umask(0o077)  # D-7: what the daemon makes is its user's alone unless it says otherwise
    logging.basicConfig(level=os.environ.get(ENV_LOG_LEVEL, "INFO"), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    wanted = {r.strip() for r in roles.split(",") if r.strip()}
    valid = {"controller", "scheduler", "worker", "apiserver"}
    if not wanted or wanted - valid:
        _die(f"--roles {roles!r}: valid roles are {', '.join(sorted(valid))}", 2)
    if wanted == {"worker"}:
        if not controller:
            _die("--roles worker needs --controller tcp://HOST:PORT (the controller's run/xced.port)", 2)
        _run_worker(topdir, controller, host_name, slots, memory, resource, attribute, tag, controller_key, enroll)
        return
    if enroll:
        _die("--enroll is for a new worker host (--roles worker --controller URL)", 2)
    # what only a worker offers (given as 0 too): refused by the other roles, never ignored
    worker_only = [f"--{n}" for n, v in (("slots", slots), ("memory", memory), ("resource", resource),
                                         ("attribute", attribute), ("tag", tag)) if v or v == 0]
    if wanted == {"apiserver"}:
        if not controller:
            _die("--roles apiserver (a login host) needs --controller tcp://HOST:PORT (the controller's run/xced.port)",
                 2)
        if worker_only:
            _die(f"{', '.join(worker_only)}: worker options; a login host (--roles apiserver) runs no jobs", 2)
        _run_login(topdir, controller, controller_key, host_name)
        return
    if worker_only:  # never silently ignored: the controller's hosts are those of hosts.yaml
        _die(f"{', '.join(worker_only)}: options of a worker joining a controller (--roles worker --controller "
             f"URL); with the default roles this host offers what config/hosts.yaml says", 2)
    if "worker" in wanted and wanted != valid or controller or not {"controller", "scheduler", "apiserver"} <= wanted:
        _die("the roles run all together (the default), as `--roles controller,scheduler,apiserver` (no jobs "
             f"on this machine; every host joins as a worker), as `--roles worker --controller URL`, or as "
             f"`--roles apiserver --controller URL` (a login host); --roles {roles} is not supported", 2)
    run_jobs_here = "worker" in wanted
    from xced.config import load_cluster_config

    try:
        top = prepare_topdir(topdir)
        result = load_cluster_config(top)
        if result.errors:
            for d in result.errors:
                print(str(d), file=sys.stderr)
            for w in result.warnings:
                print(str(w), file=sys.stderr)
            _die(f"{len(result.errors)} error(s) in the config of {top}; fix them (check with `xceadmin build --topdir {top}`)")
        for w in result.warnings:
            print(str(w), file=sys.stderr)
        secure_topdir(top)
        lock_fd = _lock_topdir(top)
        write_lsf_conf_or_warn(top)
        try:
            _run_loop(serve(top, result.config, host_name, run_jobs_here))
        finally:
            _unlock_topdir(top, lock_fd)
    except StartupError as e:
        _die(str(e))
    except PermissionError as e:
        _die(f"permission denied: {e.filename}; xced needs to read the config and write run/, state/ and "
             f"jobs/ under the TopDir")
    except OSError as e:
        _die(f"{e.strerror or e}: {e.filename}" if getattr(e, "filename", None) else str(e))


def _parse_pairs(items: list[str], what: str, number: bool) -> dict:
    out: dict = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k or not all(c.isalnum() or c in "_." for c in k):
            _die(f"--{what} {item!r}: expected NAME={'NUMBER' if number else 'VALUE'}", 2)
        if number:
            try:
                out[k] = float(v)
            except ValueError:
                _die(f"--{what} {item!r}: {v!r} is not a number", 2)
            if out[k] < 0:
                _die(f"--{what} {item!r}: must be >= 0", 2)
        else:
            out[k] = v
    return out


def _peer_pin(top: Path, controller_key: str | None, enroll: str | None) -> str | None:
    """The controller fingerprint a worker or a login host pins (KEY-6): --controller-key,
    else the token's, else the one saved at its last keyed join or session
    (`<TopDir>/keys/controller`); None: a test-mode controller, plain TCP (workers only).
    Exits 2 with the reason for a pin that is not a fingerprint or a public key file."""
    from xced.auth.keys import KeyProblem, token_pin
    from xced.auth.tls import parse_pin, saved_pin

    try:
        if controller_key:
            pin = parse_pin(controller_key)
            if enroll and token_pin(enroll) not in (None, pin):
                _die(f"--enroll: the token is for the controller with key {token_pin(enroll)}, not the "
                     f"--controller-key {pin}", 2)
            return pin
        if enroll:
            pin = token_pin(enroll)
            if pin is None:
                _die("--enroll: this token carries no controller key (its controller has none: test mode?); give "
                     "--controller-key", 2)
            return pin
    except KeyProblem as e:
        _die(str(e), 2)
    try:
        return saved_pin(top)
    except KeyProblem as e:
        _die(str(e), 2)


def _run_worker(topdir, controller, host_name, slots, memory, resource, attribute, tag, controller_key=None,
                enroll=None) -> None:
    import socket

    import psutil
    from pydantic import ValidationError

    from xced.api.peer import Join
    from xced.model.units import parse_memory_mb

    if not topdir and not os.environ.get(ENV_TOPDIR):
        _die("--roles worker needs --topdir DIR (the worker's own directory for job files)", 2)
    from xced.api.peer_client import parse_controller_url

    try:
        parse_controller_url(controller)
    except ValueError as e:
        _die(str(e), 2)
    top = Path(topdir or os.environ[ENV_TOPDIR]).expanduser().absolute()
    if slots is not None and slots < 1:
        _die(f"--slots {slots}: must be at least 1", 2)
    try:
        mem = parse_memory_mb(memory) if memory else psutil.virtual_memory().total // 2**20
    except ValueError as e:
        _die(f"--memory {memory!r}: {e}", 2)
    import re

    from xced.model.units import HOST_FORM, HOST_PATTERN

    name = host_name if host_name is not None else socket.gethostname()
    if not re.fullmatch(HOST_PATTERN, name):
        _die(f"--host-name {name[:80]!r}: {HOST_FORM}", 2)
    try:
        join = Join(host=name, slots=slots or len(os.sched_getaffinity(0)),
                    memory_mb=mem, resources=_parse_pairs(resource, "resource", True),
                    attributes=_parse_pairs(attribute, "attribute", False), tags=list(tag))
    except ValidationError as e:
        _die(f"bad worker description: {e.errors()[0]['loc'][0]}: {e.errors()[0]['msg']}", 2)
    try:
        secure_topdir(top, ("", "run", "jobs", "keys"))
        lock_fd = _lock_topdir(top)
        write_lsf_conf_or_warn(top)
    except StartupError as e:
        _die(str(e))
    except OSError as e:
        _die(f"cannot make the worker's TopDir {top}: {e.strerror}")
    pin = _peer_pin(top, controller_key, enroll)
    key = None
    if pin is not None:
        from xced.auth.keys import KeyProblem, host_key

        try:
            key, made = host_key(top, f"xced worker {join.host}")
        except (KeyProblem, OSError) as e:
            _unlock_topdir(top, lock_fd)
            _die(f"the worker's host key: {e}")
        if made:
            from xced.auth.keys import fingerprint

            print(f"xced: made this worker's host key {top / 'keys' / 'host.key'} ({fingerprint(key.public_key())})",
                  file=sys.stderr, flush=True)
    try:
        _run_loop(serve_worker(top, controller, join, pin=pin, key=key, enroll=enroll))
    except StartupError as e:
        _die(str(e))
    except ValueError as e:
        _die(str(e), 2)
    except Exception as e:  # the controller refused us
        _die(f"the controller refused this worker: {e}" if type(e).__name__ == "_Refused" else
             str(e) if type(e).__name__ == "PinMismatch" else f"{type(e).__name__}: {e}")
    finally:
        _unlock_topdir(top, lock_fd)


def _run_login(topdir: str | None, controller: str, controller_key: str | None, host_name: str | None) -> None:
    """`xced --roles apiserver`: check the options, secure the TopDir (LOGIN_DIRS only), lock
    it, make or read its key, pin the controller, and serve (`serve_login`). Exits 2 for a
    bad option, 1 for a TopDir or key it cannot use, each with the reason."""
    import re
    import socket

    from xced.api.peer_client import parse_controller_url
    from xced.model.units import HOST_FORM, HOST_PATTERN

    try:
        parse_controller_url(controller)
    except ValueError as e:
        _die(str(e), 2)
    if not topdir and not os.environ.get(ENV_TOPDIR):
        _die("--roles apiserver needs --topdir DIR (the login host's own directory: its socket and key)", 2)
    host = host_name or socket.gethostname()
    if not re.fullmatch(HOST_PATTERN, host):
        _die(f"--host-name {host[:80]!r}: {HOST_FORM}", 2)
    top = Path(topdir or os.environ[ENV_TOPDIR]).expanduser().absolute()
    if top.exists() and not top.is_dir():
        _die(f"TopDir {top} is not a directory", 2)
    try:
        secure_topdir(top, LOGIN_DIRS)
        lock_fd = _lock_topdir(top)
        write_lsf_conf_or_warn(top)
    except StartupError as e:
        _die(str(e))
    except OSError as e:
        _die(f"cannot make the login host's TopDir {top}: {e.strerror}")
    try:
        pin = _peer_pin(top, controller_key, None)
        if pin is None:
            _die("--roles apiserver needs --controller-key FILE|SHA256:... (the controller's keys/host.pub, or its "
                 "fingerprint from `xceadmin keys list`): a login host talks to a production controller over TLS "
                 "pinned to its key only (KEY-6)", 2)
        from xced.auth.keys import KeyProblem, fingerprint, host_key

        try:
            key, made = host_key(top, f"xced login {host}")
        except (KeyProblem, OSError) as e:
            _die(f"the login host's key: {e}")
        if made:
            print(f"xced: made this login host's key {top / 'keys' / 'host.key'} ({fingerprint(key.public_key())}); "
                  f"on the controller host, trust it with `xceadmin keys trust {top / 'keys' / 'host.pub'} --host "
                  f"{host} --role apiserver`", file=sys.stderr, flush=True)
        _run_loop(serve_login(top, controller, pin, key, host))
    except StartupError as e:
        _die(str(e))
    except OSError as e:
        _die(f"{e.strerror or e}: {e.filename}" if getattr(e, "filename", None) else str(e))
    finally:
        _unlock_topdir(top, lock_fd)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

"""File descriptors: how many worker hosts xced can hold, and an accept path that never spins
(issue 19 part 5; D-1, D-2, D-8).

The budget. Every worker host joined over TCP holds one file descriptor in the controller
for as long as it is joined: its channel's socket (TLS or not, one socket; a relayed launch,
a `peek` or a task's end travels on that channel and opens nothing). Everything else the
daemon holds is counted once at start (`FdBudget.baseline`: stdio, the store's database,
WAL and shared-memory files, the listening sockets, the event loop's selector and wake-up
pipe, log files) and a reserve is kept apart on top of it for what comes and goes:
`CLIENT_RESERVE_MIN` (or an eighth of the limit, whichever is more, at most
`CLIENT_RESERVE_MAX`) for clients on the Unix socket (long polls of `wait`/`submit -K`
included), files a request opens (job specs, outputs for `peek`) and the local worker's
pipes to its supervisors. So

    host capacity = soft RLIMIT_NOFILE - baseline - reserve          (FDS_PER_HOST = 1)

e.g. 1,024 -> about 880 hosts, 65,536 -> about 61,000. A join beyond it is refused with a
message naming the limit and how to raise it (`worker_channel`, xced.server.routes.peers).

The soft limit is raised as far as the hard limit allows at start (`raise_nofile_limit`),
as daemons that hold many sockets do (nginx `worker_rlimit_nofile`, systemd's advice to
raise the soft limit in the program that needs it). An unlimited hard limit is taken as the
kernel's per-process maximum (/proc/sys/fs/nr_open).

The accept path (`GuardedLoop`). CPython's selector loop (3.11) answers EMFILE on accept
by logging the error with its traceback and scheduling a retry, but then goes on calling
accept() up to `backlog` (uvicorn: 2,048) times in the same tick: each failure logs and
schedules another retry, so a controller out of descriptors spun at 100% CPU and wrote 1.7
million log lines in 25 s while answering no client. `GuardedLoop` stops at the first such
failure, stops watching that listener, and tries it again after a back-off that doubles
from `ACCEPT_BACKOFF_MIN_S` to `ACCEPT_BACKOFF_MAX_S`; it logs a failure once per distinct
(listener, errno) until an accept succeeds again, which is logged once too, with how many
failed meanwhile. It also keeps TCP connections (peers: workers, login hosts, xceadmin)
under `FdBudget.tcp_limit` (the host capacity plus room for handshakes): above it the TCP
listener waits (connections stay in the kernel's backlog) while the Unix socket keeps
being served, so local clients are answered whatever the workers do.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable, Coroutine

log = logging.getLogger("xced.server.fdlimit")

#: file descriptors a joined worker host holds in the controller: its channel's socket
FDS_PER_HOST = 1
#: descriptors kept apart for Unix-socket clients, request files and pipes: at least this ...
CLIENT_RESERVE_MIN = 32
#: ... or an eighth of the limit, at most this
CLIENT_RESERVE_MAX = 4096
#: TCP connections beyond the joined hosts allowed at once (handshakes, refusals, HTTP peers):
#: at least this, or a sixteenth of the host capacity
HANDSHAKE_SLACK_MIN = 8
#: accept errors that mean "out of descriptors or memory", answered by a back-off
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: seconds before accepting again after such an error; doubles up to the max while it lasts
ACCEPT_BACKOFF_MIN_S = 0.05
ACCEPT_BACKOFF_MAX_S = 2.0
#: seconds the TCP listener waits before looking again when the TCP connections are at the limit
TCP_FULL_WAIT_S = 0.25
#: the soft open-file limit xced was started with, for its jobs: the supervisor launcher
#: (xced.worker.launcher) sets it back, so jobs run with their user's limit, not the daemon's
ENV_JOB_NOFILE = "XCE_JOB_NOFILE"
#: how to raise the limit, for messages
HOW_TO_RAISE = ("raise xced's open-file limit (`ulimit -n N` in the shell that starts it, LimitNOFILE=N in its "
                "systemd unit, or nofile in /etc/security/limits.conf) and restart xced")


def _nr_open() -> int:
    try:
        with open("/proc/sys/fs/nr_open") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 1 << 20


def raise_nofile_limit() -> tuple[int, int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (an unlimited hard limit: to the
    kernel's nr_open). Returns (soft before, soft now, hard), counts of descriptors; a
    raise the kernel refuses leaves the soft limit as it was (logged), never raises."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else _nr_open()
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, target, e)
            return soft, soft, hard
        return soft, target, hard
    return soft, soft, hard


def open_fds() -> int:
    """How many file descriptors this process has open now (Linux: /proc/self/fd)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # the directory's own descriptor
    except OSError:
        return 0


@dataclass(frozen=True)
class FdBudget:
    """The controller's descriptor budget (module docstring): `soft`, `hard` the
    RLIMIT_NOFILE now, `raised_from` the soft limit xced was started with, `baseline` the
    descriptors open at start, `reserve` those kept for clients and files; `host_capacity`
    the worker hosts it can hold (>= 0), `tcp_limit` the TCP connections it lets in at once."""

    soft: int
    hard: int
    raised_from: int
    baseline: int
    reserve: int
    host_capacity: int
    tcp_limit: int

    @classmethod
    def measure(cls, raised_from: int | None = None) -> "FdBudget":
        """The budget for the limit now and the descriptors open now (call it once the
        store and the listeners are open)."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        soft = soft if soft != resource.RLIM_INFINITY else _nr_open()
        hard = hard if hard != resource.RLIM_INFINITY else _nr_open()
        baseline = open_fds()
        reserve = min(max(CLIENT_RESERVE_MIN, soft // 8), CLIENT_RESERVE_MAX)
        capacity = max(0, (soft - baseline - reserve) // FDS_PER_HOST)
        slack = max(HANDSHAKE_SLACK_MIN, capacity // 16)
        # the TCP connections never eat into the clients' reserve, whatever the slack
        tcp_limit = max(1, min(capacity + slack, soft - baseline - reserve // 2))
        return cls(soft, hard, raised_from if raised_from is not None else soft, baseline, reserve, capacity, tcp_limit)

    def describe(self) -> str:
        """The start-up line: the limit (and its raise) and the hosts it holds."""
        raised = (f"raised from {self.raised_from} to {self.soft}" if self.soft > self.raised_from
                  else f"{self.soft}")
        return (f"open-file limit {raised} (hard limit {self.hard}): room for {self.host_capacity} worker hosts "
                f"({FDS_PER_HOST} file descriptor each; {self.baseline} open at start and {self.reserve} kept for "
                f"clients, the store and logs)")

    def refusal(self, joined: int) -> str:
        """Why a join beyond the capacity is refused, and what to do."""
        return (f"this controller holds at most {self.host_capacity} worker hosts and {joined} are joined: its "
                f"open-file limit (RLIMIT_NOFILE) is {self.soft} (hard limit {self.hard}), {FDS_PER_HOST} file "
                f"descriptor per host after {self.baseline + self.reserve} kept for clients, the store and logs; "
                f"to hold more, {HOW_TO_RAISE}")


def _kind(sock: socket.socket) -> str:
    try:
        if sock.family == socket.AF_UNIX:
            return f"the Unix socket {sock.getsockname()}"
        host, port = sock.getsockname()[:2]
        return f"TCP {host}:{port}"
    except OSError:
        return "a listener"


class GuardedLoop(asyncio.SelectorEventLoop):
    """An asyncio selector loop whose accept path backs off on EMFILE/ENFILE/ENOBUFS/ENOMEM
    and keeps TCP connections under `fd_budget.tcp_limit` (module docstring). Set
    `fd_budget` once it is known; until then only the back-off applies. Everything else is
    the standard loop's."""

    def __init__(self) -> None:
        super().__init__()
        #: the budget whose tcp_limit gates TCP accepts (None: no gate)
        self.fd_budget: FdBudget | None = None
        #: accepted TCP sockets; closed ones (fileno -1) are pruned when the count matters
        self._tcp_conns: set[socket.socket] = set()
        #: per listener fd: (back-off now, failures since the last success, first failure time)
        self._backoff: dict[int, list] = {}
        #: (listener fd, errno) logged since the listener's last success
        self._logged: set[tuple[int, int]] = set()
        self._tcp_full_logged = False

    def tcp_connections(self) -> int:
        """Open TCP connections accepted by this loop."""
        self._tcp_conns = {s for s in self._tcp_conns if s.fileno() != -1}
        return len(self._tcp_conns)

    def _pause(self, args: tuple, delay: float) -> None:
        protocol_factory, sock, sslcontext, server, backlog, *rest = args
        self._remove_reader(sock.fileno())

        def resume() -> None:
            if sock.fileno() == -1 or (server is not None and getattr(server, "_sockets", ()) is None):
                return  # the server closed meanwhile
            self._start_serving(protocol_factory, sock, sslcontext, server, backlog, *rest)

        self.call_later(delay, resume)

    def _accept_connection(self, protocol_factory, sock, sslcontext=None, server=None, backlog=100, *rest: Any):
        """CPython's `_accept_connection` (selector_events.py, 3.11), with the back-off and the
        TCP gate of the module docstring. `rest`: ssl_handshake_timeout, ssl_shutdown_timeout."""
        args = (protocol_factory, sock, sslcontext, server, backlog, *rest)
        fd = sock.fileno()
        tcp = sock.family != socket.AF_UNIX
        budget = self.fd_budget
        for _ in range(backlog):
            if tcp and budget is not None and len(self._tcp_conns) >= budget.tcp_limit \
                    and self.tcp_connections() >= budget.tcp_limit:
                if not self._tcp_full_logged:
                    self._tcp_full_logged = True
                    log.warning("%d TCP connections are open, the most this controller lets in (%d worker hosts "
                                "and handshakes); new ones wait until some close, the Unix socket is served on. "
                                "To hold more, %s", budget.tcp_limit, budget.host_capacity, HOW_TO_RAISE)
                self._pause(args, TCP_FULL_WAIT_S)
                return
            try:
                conn, addr = sock.accept()
                conn.setblocking(False)
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in RESOURCE_ERRNOS:
                    raise  # the loop logs it and goes on, as the standard loop does
                state = self._backoff.setdefault(fd, [ACCEPT_BACKOFF_MIN_S / 2, 0, time.monotonic()])
                state[0] = min(state[0] * 2, ACCEPT_BACKOFF_MAX_S)
                state[1] += 1
                if (fd, exc.errno) not in self._logged:
                    self._logged.add((fd, exc.errno))
                    log.error("cannot accept connections on %s: %s (%s); backing off up to %.0f s between tries, "
                              "logged once until it accepts again. The open-file limit is %s; %s", _kind(sock),
                              os.strerror(exc.errno), errno.errorcode.get(exc.errno, exc.errno), ACCEPT_BACKOFF_MAX_S,
                              resource.getrlimit(resource.RLIMIT_NOFILE)[0], HOW_TO_RAISE)
                self._pause(args, state[0])
                return
            state = self._backoff.pop(fd, None)
            if state is not None:
                self._logged = {k for k in self._logged if k[0] != fd}
                log.warning("accepting connections on %s again after %d failed tries over %.1f s", _kind(sock),
                            state[1], time.monotonic() - state[2])
            if tcp:
                self._tcp_conns.add(conn)
                if self._tcp_full_logged and budget is not None and len(self._tcp_conns) < budget.tcp_limit // 2:
                    self._tcp_full_logged = False
            self.create_task(self._accept_connection2(protocol_factory, conn, {"peername": addr}, sslcontext,
                                                      server, *rest))


def run(main: Coroutine, *, on_loop: Callable[[GuardedLoop], None] | None = None) -> Any:
    """`asyncio.run(main)` on a GuardedLoop (`on_loop(loop)` called first). A Python whose
    loop lacks the accept method this overrides gets the standard loop, logged."""
    if not hasattr(asyncio.SelectorEventLoop, "_accept_connection"):
        log.warning("this Python's event loop has no _accept_connection: accept errors are not backed off")
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=GuardedLoop) as runner:
        loop = runner.get_loop()
        if on_loop is not None:
            on_loop(loop)  # type: ignore[arg-type]
        return runner.run(main)


def current_loop_budget(budget: FdBudget) -> None:
    """Give the running loop (a GuardedLoop) `budget` for its TCP gate; a no-op on another loop."""
    loop = asyncio.get_running_loop()
    if isinstance(loop, GuardedLoop):
        loop.fd_budget = budget

"""The supervisor launcher: a small pre-started process that forks job supervisors.

Starting `python -m xced.worker.supervisor` for every job costs a whole interpreter
start-up (about 35 ms of CPU here, bench/RESULTS.md), which capped job starts at a few
dozen per second on two cores and put most of the submit-to-start latency into process
start-up. The launcher pays that once: it imports the supervisor module, then for each
request forks a child that becomes the job's supervisor (own session, stdout/stderr to
JOBDIR/supervisor.log) and runs `Supervisor(JOBDIR).run()`.

Protocol (an AF_UNIX socketpair with the worker): the worker sends one line, the
absolute JOBDIR; the launcher answers with one line, the supervisor's pid (or
`error MESSAGE`), and passes a pidfd of the child with SCM_RIGHTS, opened before the
child could be reaped, so the worker never trusts a bare pid (JOB-8). The launcher
reaps its children; supervisors outlive it (they are in their own sessions and only
need their JOBDIR), so a daemon that dies or restarts loses nothing. The launcher
exits when the worker's end of the socket closes, and forks nothing once the daemon that
started it is gone (its parent changed), even for a request still buffered in the socket:
a launcher stopped or slowed while its daemon was killed would otherwise fork a supervisor
at any later time, after the restarted daemon found the job never started and dispatched
it again, and the job would run twice (D-8, JOB-8).

STDLIB ONLY, like the supervisor: it must not import the daemon's heavy modules.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys


def _child(jobdir: str) -> int:
    """In the forked child: become the supervisor of JOBDIR."""
    from xced.worker.supervisor import LOG_FILE, Supervisor

    os.setsid()
    fd = os.open(os.path.join(jobdir, LOG_FILE), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    for f in (fd, null):
        if f > 2:
            os.close(f)
    os.chdir(jobdir)
    return Supervisor(jobdir).run()


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(sock: socket.socket) -> int:
    """Answer launch requests on `sock` until it closes, or until the process that started
    the launcher (its parent at this call: the daemon's worker) is gone; returns 0."""
    import xced.worker.supervisor  # noqa: F401  (imported once, inherited by every fork)

    daemon = os.getppid()

    rfd, wfd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    buf = b""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poller.register(rfd, select.POLLIN)
    while True:
        # poll, not select: the socket keeps the number it had in the daemon, which may be
        # 1024 or more there (a daemon with many clients), and select() refuses those
        ready = {fd for fd, _ in poller.poll()}
        ready = [x for x in (sock, rfd) if (x.fileno() if hasattr(x, "fileno") else x) in ready]
        if rfd in ready:
            try:
                while os.read(rfd, 512):
                    pass
            except BlockingIOError:
                pass
            _reap()
        if sock not in ready:
            continue
        data = sock.recv(65536)
        if not data:
            return 0
        buf += data
        while b"\n" in buf:
            if os.getppid() != daemon:
                return 0  # the daemon that asked is gone: its restart decides about the job (D-8)
            line, buf = buf.split(b"\n", 1)
            jobdir = line.decode()
            try:
                pid = os.fork()
            except OSError as e:
                sock.sendall(f"error fork failed: {e}\n".encode())
                continue
            if pid == 0:  # the child: never returns into this loop
                code = 1
                try:
                    sock.close()
                    signal.set_wakeup_fd(-1)
                    os.close(rfd)
                    os.close(wfd)
                    for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGCHLD):
                        signal.signal(s, signal.SIG_DFL)
                    code = _child(jobdir)
                except BaseException as e:  # noqa: BLE001
                    try:
                        os.write(2, f"launcher child failed: {e!r}\n".encode())
                    except OSError:
                        pass
                finally:
                    os._exit(code)
            pidfd = os.pidfd_open(pid)  # not reaped yet: this is exactly our child
            try:
                socket.send_fds(sock, [f"{pid}\n".encode()], [pidfd])
            finally:
                os.close(pidfd)


def main() -> int:
    """`python -m xced.worker.launcher FD`: serve on the inherited socket FD."""
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        sys.stderr.write("usage: python -m xced.worker.launcher FD\n")
        return 2
    sock = socket.socket(fileno=int(sys.argv[1]))
    _job_nofile()
    return serve(sock)


def _job_nofile() -> None:
    """Give the supervisors, and so the jobs, the soft open-file limit xced was started with
    (XCE_JOB_NOFILE, xced.server.fdlimit.ENV_JOB_NOFILE): xced raised its own to the hard
    limit to hold many hosts (issue 19); a job keeps its user's limit, as under LSF."""
    import resource

    value = os.environ.pop("XCE_JOB_NOFILE", "")
    if value.isdigit():
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(int(value), soft), hard))
        except (ValueError, OSError):
            pass


if __name__ == "__main__":
    sys.exit(main())

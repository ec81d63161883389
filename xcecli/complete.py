"""Completion of the values a cluster knows: job IDs, queue, profile and host names (asked
of the daemon) and preset names (from the local store), for the shell completion scripts
in completions/ (CLI-5).

The scripts are static: they hold every command and option, generated from the command
definitions by tools/clidocs.py. Only these values are asked for at each TAB, by

    xcecli __complete KIND [PREFIX] [--topdir DIR]

which prints one value per line as `VALUE<TAB>DESCRIPTION` (fish shows the description
after the TAB itself; the bash and zsh scripts split it off), values that start with PREFIX
only, in the daemon's order. KIND is one of KINDS. It asks the daemon with a timeout of
TIMEOUT_S seconds (200 ms) for the whole question, no retry, and is silent, exit 0 and no output, when the daemon
is down, stopped, slow or refuses: a TAB never hangs and never prints an error into the
user's command line. `xcecli.__main__` answers it before Typer is imported: a TAB
costs the interpreter's start and the client's import, measured here at a median of 97 ms
with a daemon and 73 ms without one (`python -c pass`: 19 ms), 20 calls each.

A command declares which of its parameters complete which KIND by its metavar: JOB, QUEUE,
PROFILE, HOST or PRESET (METAVAR_KINDS), which `--help` and the man page show too.
"""

from __future__ import annotations

import sys

#: what `xcecli __complete KIND` knows
KINDS = ("jobs", "queues", "profiles", "hosts", "presets")
#: seconds a completion waits for the daemon (the issue's 200 ms)
TIMEOUT_S = 0.2


def values(kind: str, prefix: str = "", *, topdir: str | None = None,
           timeout: float = TIMEOUT_S) -> list[tuple[str, str]]:
    """The (value, description) pairs of `kind` that start with `prefix`. Jobs are the
    caller's, as plain `xcecli jobs` lists them (unfinished, and finished in the last hour),
    described by state and name; queues, profiles and hosts are the cluster's. Raises
    ValueError for an unknown kind; XceError (DaemonUnreachable after `timeout` seconds) when
    the daemon cannot answer: `main` turns that into silence."""
    if kind not in KINDS:
        raise ValueError(f"unknown completion kind {kind!r}; the kinds are: {', '.join(KINDS)}")
    if kind == "presets":
        from xcecli.presets import names

        out = [(n, "preset") for n in names()]
    else:
        from xced.api.client import Client

        path = {"jobs": "/jobs", "queues": "/queues", "profiles": "/apps", "hosts": "/hosts"}[kind]
        with Client.connect(topdir=topdir, timeout=timeout) as c:
            body = c.request("GET", path, timeout=timeout).json()
        if kind == "jobs":
            out = [(str(j["job_id"]), f"{j['state']} {j.get('name') or ''}".strip()) for j in body["jobs"]]
        elif kind == "queues":
            out = [(q["name"], q.get("description") or "queue") for q in body["queues"]]
        elif kind == "profiles":
            out = [(a["name"], a.get("description") or a.get("kind") or "profile") for a in body["apps"]]
        else:
            out = [(h["name"], h["status"]) for h in body["hosts"]]
    return [(v, " ".join(d.split())) for v, d in out if v.startswith(prefix)]


def main(argv: list[str]) -> int:
    """`xcecli __complete KIND [PREFIX] [--topdir DIR]`: print the values, one
    `VALUE<TAB>DESCRIPTION` per line. Always returns 0 and prints nothing on any failure
    (an unknown KIND, bad arguments, no daemon): completion must never disturb the shell."""
    args = list(argv)
    topdir = None
    if "--topdir" in args:
        i = args.index("--topdir")
        topdir = args[i + 1] if i + 1 < len(args) else None
        del args[i:i + 2]
    if not args or len(args) > 2:
        return 0
    import signal

    def out_of_time(signum, frame):
        raise TimeoutError("the daemon took longer than the completion's timeout")

    # the whole question, not each read: a daemon that answers a byte at a time is cut off too
    signal.signal(signal.SIGALRM, out_of_time)
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT_S)
    try:
        got = values(args[0], args[1] if len(args) == 2 else "", topdir=topdir or None)
    except Exception:  # noqa: BLE001 - a TAB stays silent whatever went wrong
        return 0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        sys.stdout.write("".join(f"{v}\t{d}\n" for v, d in got))
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        pass
    return 0


#: the metavars whose values the daemon (or the preset store) knows, and their KIND
METAVAR_KINDS: dict[str, str] = {"JOB": "jobs", "QUEUE": "queues", "PROFILE": "profiles", "HOST": "hosts",
                                 "PRESET": "presets"}


def kind_of_metavar(metavar: str) -> str | None:
    """The KIND that completes a parameter shown as `metavar` (`JOB`, `JOB...`, `[HOST]`,
    `QUEUE`, ...), or None. The metavar is the declaration: a command that names its
    argument JOB gets job IDs at a TAB; the generator of completions/ reads it
    (tools/clidocs.py)."""
    return METAVAR_KINDS.get(metavar.strip("[]").removesuffix("...").strip("[]"))

"""A fleet of simulated worker hosts for tests and benchmarks (issue 19 part 6; D-1, RES-4,
SCHED-4, KEY-3).

One process, one asyncio event loop, N worker channels to a real controller: each channel
is a host with its own name, slots and memory that speaks the real worker channel
(`xced.api.peer`; the real worker's end is `xced.worker.remote`). It joins as
`xced --roles worker` does, sends a heartbeat every `heartbeat_s` the `joined` answer names
(SCHED-4), and runs each element the controller dispatches to it as an immediate exit: it
reports `started`, then `finished` with a chosen exit code, the same messages a real
worker's supervisor makes it send, without forking anything. This is how 1,000 and 5,000
hosts are tested on one machine (LSF's own scaling tests use simulated sbatchd/LIM hosts the
same way; docs/lsf-behaviour.md has no section on it: the numbers are the issue's).

Authentication (KEY-3). A test-mode controller without a key takes a join without one, as
harnesses do (tests/e2e/test_multihost.py). A controller with a key (production, or test
mode with `listen.tls: true`) serves TLS and challenges every worker; each host then needs
its own key, trusted for that host name and the `worker` role: the controller looks a key
up by its fingerprint and refuses it for any host but the one it is trusted for
(xced.controller.peers._trusted_entry), so one key cannot serve many hosts. `FleetKeys`
makes one Ed25519 key per host (about 0.1 ms each) and writes them into the controller's
`config/keys.yaml` before the controller starts, with the same renderer `xceadmin keys
trust` writes the file with (xced.config.keys.write_keys): one write for all, where 1,000
`keys trust` calls would rewrite the file and re-apply the config 1,000 times. The
controller checks every join against that list as it checks any other (no bypass).

Shapes and units: seconds, MB, slots; a run is keyed (job ID, element index).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import resource
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

#: the channel's path under the API prefix (xced.api.peer.CHANNEL_PATH)
CHANNEL_URL_PATH = "/xce/v1/workers/channel"
#: a job whose command is `exit N` (0 <= N <= 255) ends with code N; any other ends 0
_EXIT_RE = re.compile(r"\s*exit\s+(\d{1,3})\s*;?\s*")
#: file descriptors a process needs besides its channels (stdio, logs, the store, sockets)
FD_MARGIN = 256


def raise_nofile(need: int) -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (children started after
    inherit it) when the soft limit is below `need` descriptors; returns (soft, hard) after.
    Raises RuntimeError naming both limits when the hard limit is below `need` (raising
    the hard limit takes root: `ulimit -Hn`, or LimitNOFILE= in a systemd unit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        new = hard if hard != resource.RLIM_INFINITY else max(need, soft)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        soft = new
    if soft != resource.RLIM_INFINITY and soft < need:
        raise RuntimeError(f"the open-file limit is {soft} (hard {hard}), below the {need} descriptors this fleet "
                           f"needs; raise the hard limit (ulimit -Hn, LimitNOFILE=)")
    return soft, hard


def command_exit_code(info: dict) -> int:
    """The exit code a simulated host ends element `info` (a StartInfo as the `start`
    message carries it) with: N for a job whose command is `exit N` (0..255), else 0."""
    cmd = info.get("command") or " ".join(info.get("argv") or [])
    m = _EXIT_RE.fullmatch(cmd)
    if m is None and info.get("argv"):  # `sh -c 'exit N'` as a shell wraps it
        m = _EXIT_RE.fullmatch(info["argv"][-1])
    return min(int(m.group(1)), 255) if m else 0


@dataclass
class FleetKeys:
    """One Ed25519 key per host name (KEY-3): `keys[name]` is the private key."""

    keys: dict = field(default_factory=dict)

    @classmethod
    def make(cls, names: list[str]) -> "FleetKeys":
        from xced.auth.keys import generate

        return cls({n: generate() for n in names})

    def trust_in(self, config_dir: Path) -> Path:
        """Write `config_dir`/keys.yaml trusting every key for its own host as `worker` (no
        expiry), as `xceadmin keys trust PUB --host NAME --role worker` would, one entry per
        key; write it before the controller starts (a running one takes it with `xceadmin
        build --apply`). Returns the file's path."""
        from xced.auth.keys import fingerprint, public_line
        from xced.config.keys import write_keys
        from xced.model.keys import KeysConfig, TrustedKey

        now = float(int(time.time()))
        entries = [TrustedKey(fingerprint=fingerprint(k.public_key()), public_key=public_line(k.public_key(), n),
                              host=n, roles=["worker"], expires=None, added=now, comment="fleet")
                   for n, k in self.keys.items()]
        return write_keys(config_dir, KeysConfig(keys=entries))


class SimHost:
    """One simulated worker host: `name`, `slots`, `memory_mb`; `runs` lists the
    (job ID, index, attempt) it was told to start, in order."""

    def __init__(self, name: str, slots: int, memory_mb: int) -> None:
        self.name = name
        self.slots = slots
        self.memory_mb = memory_mb
        self.runs: list[tuple[int, int, int]] = []
        self.joined = asyncio.Event()
        #: set once the join is over: joined, refused, or failed
        self.settled = asyncio.Event()
        self.refused: str | None = None
        self.ws = None


class Fleet:
    """N simulated hosts joined to the controller at `url` (`tcp://HOST:PORT`), all on the
    running event loop.

    - `names`: the hosts' names; `slots`, `memory_mb`: what each offers (RES-2);
    - `exit_code(info) -> int`: the code each element ends with (default: command_exit_code);
    - `pin`: the controller's key fingerprint (its keys/host.pub): TLS pinned to it, and
      `keys` (FleetKeys) signs each host's join (KEY-3); None: plain TCP, no key (test mode);
    - `connect_limit`: joins in flight at once (a burst of thousands overflows the listen
      backlog and retries for seconds).

    `await start(timeout)` joins all and returns the seconds it took; raises RuntimeError
    naming the hosts refused or not joined in `timeout`. `await close()` closes every channel.
    `runs()` maps (job ID, index) to the hosts told to start it; `errors` lists each channel
    that failed or that the controller closed (a simulated host does not rejoin, unlike
    `xced --roles worker`: a controller that stalls past HEARTBEAT_MISSES beats and drops
    channels shows here, SCHED-4).
    """

    def __init__(self, url: str, names: list[str], *, slots: int = 4, memory_mb: int = 8192,
                 exit_code: Callable[[dict], int] = command_exit_code, pin: str | None = None,
                 keys: FleetKeys | None = None, connect_limit: int = 64) -> None:
        if not url.startswith("tcp://"):
            raise ValueError(f"controller url {url!r}: expected tcp://HOST:PORT")
        if pin is not None and keys is None:
            raise ValueError("a pinned (keyed) fleet needs FleetKeys for its hosts")
        self.url = url
        self.netloc = url[len("tcp://"):]
        self.hosts = [SimHost(n, slots, memory_mb) for n in names]
        self.exit_code = exit_code
        self.pin = pin
        self.keys = keys
        self._sem = asyncio.Semaphore(connect_limit)
        self._tasks: list[asyncio.Task] = []
        self._ssl = None
        self._stop = asyncio.Event()
        self.errors: list[str] = []

    # ------------------------------------------------------------------ life

    async def start(self, timeout: float = 60.0) -> float:
        t0 = time.monotonic()
        if self.pin is not None:
            from xced.api.peer_client import parse_controller_url
            from xced.auth.tls import pinned_client_context

            host, port = parse_controller_url(self.url)
            self._ssl = await asyncio.to_thread(pinned_client_context, host, port, self.pin)
        self._tasks = [asyncio.create_task(self._serve(h), name=f"fleet-{h.name}") for h in self.hosts]
        waits = [asyncio.create_task(h.settled.wait()) for h in self.hosts]
        _, pending = await asyncio.wait(waits, timeout=timeout)
        for w in pending:
            w.cancel()
        refused = [f"{h.name}: {h.refused}" for h in self.hosts if h.refused]
        missing = [h.name for h in self.hosts if not h.joined.is_set()]
        if refused or missing:
            raise RuntimeError(f"{len(missing)} of {len(self.hosts)} simulated hosts did not join (waited up to {timeout:.0f} s) "
                               f"(first: {missing[:5]}); refused: {refused[:5]}; errors: {self.errors[:5]}")
        return time.monotonic() - t0

    async def close(self) -> None:
        self._stop.set()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def __aenter__(self) -> "Fleet":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # ------------------------------------------------------------------ results

    def runs(self) -> dict[tuple[int, int], list[str]]:
        """(job ID, index) -> the hosts that were told to start it (one per dispatch)."""
        out: dict[tuple[int, int], list[str]] = defaultdict(list)
        for h in self.hosts:
            for job_id, index, _ in h.runs:
                out[(job_id, index)].append(h.name)
        return dict(out)

    def per_host(self) -> Counter:
        """Host name -> how many elements it was told to start (hosts with none included)."""
        return Counter({h.name: len(h.runs) for h in self.hosts})

    # ------------------------------------------------------------------ one host

    async def _serve(self, h: SimHost) -> None:
        try:
            await self._serve_channel(h)
        finally:
            h.settled.set()

    async def _serve_channel(self, h: SimHost) -> None:
        import websockets

        scheme = "wss://" if self._ssl is not None else "ws://"
        async with self._sem:
            try:
                ws = await websockets.connect(scheme + self.netloc + CHANNEL_URL_PATH, max_size=2**24,
                                              open_timeout=60, ssl=self._ssl, ping_interval=None)
            except Exception as e:  # noqa: BLE001 - reported by start()
                self.errors.append(f"{h.name}: {type(e).__name__}: {e}")
                return
            h.ws = ws
            try:
                beat = await self._join(ws, h)
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"{h.name}: join: {type(e).__name__}: {e}")
                await ws.close()
                return
        if beat is None:
            await ws.close()
            return
        hb = asyncio.create_task(self._heartbeat(ws, beat))
        try:
            async for raw in ws:
                msg = json.loads(raw)
                op = msg.get("op")
                if op == "start":
                    info = msg["info"]
                    job_id, index, attempt = info["job_id"], info["index"], info.get("attempt", 0)
                    h.runs.append((job_id, index, attempt))
                    now = time.time()
                    code = int(self.exit_code(info))
                    await ws.send(json.dumps({"op": "started", "job_id": job_id, "index": index, "start_time": now,
                                              "containment": None, "attempt": attempt, "outputs": None}))
                    await ws.send(json.dumps({"op": "finished", "job_id": job_id, "index": index, "attempt": attempt,
                                              "status": {"exit_code": code, "signal_name": None, "start_time": now,
                                                         "end_time": time.time(), "reason": None}}))
                elif op == "request":  # nothing runs here to read or launch into: an empty answer
                    await ws.send(json.dumps({"op": "reply", "rid": msg["rid"], "result": None}))
                elif op == "refused":
                    h.refused = msg.get("reason")
                # kill, signal, reattach, end_tasks: the element has ended already; nothing to do
            if not self._stop.is_set():  # a simulated host does not rejoin: its loss is the caller's to see
                self.errors.append(f"{h.name}: the controller closed the channel ({ws.close_code} {ws.close_reason})")
        except Exception as e:  # noqa: BLE001 - the channel closed under it
            if not self._stop.is_set():
                self.errors.append(f"{h.name}: {type(e).__name__}: {e}")
        finally:
            hb.cancel()
            await ws.close()

    async def _join(self, ws, h: SimHost) -> float | None:
        """Send the join (signed when keyed) and read the answer: the heartbeat period, or
        None when refused (h.refused says why)."""
        hello = {"op": "join", "host": h.name, "slots": h.slots, "memory_mb": h.memory_mb, "resources": {},
                 "attributes": {}, "tags": [], "running": [], "version": "fleet", "load": None, "role": "worker"}
        if self._ssl is not None:
            from xced.auth.keys import fingerprint, join_payload, sign

            ch = json.loads(await ws.recv())
            if ch.get("op") != "challenge":
                h.refused = ch.get("reason", f"expected a challenge, got {ch.get('op')}")
                return None
            key = self.keys.keys[h.name]
            payload = join_payload(cluster=ch["cluster"], purpose="worker-channel", nonce=ch["nonce"], host=h.name,
                                   role="worker")
            hello["fingerprint"] = fingerprint(key.public_key())
            hello["signature"] = sign(key, payload)
        await ws.send(json.dumps(hello))
        answer = json.loads(await ws.recv())
        if answer.get("op") != "joined":
            h.refused = answer.get("reason") or f"answered {answer.get('op')}"
            return None
        h.joined.set()
        h.settled.set()
        return float(answer.get("heartbeat_s") or 10.0)

    async def _heartbeat(self, ws, beat: float) -> None:
        await asyncio.sleep(random.uniform(0, beat))  # spread the fleet's beats over the period
        while True:
            await ws.send('{"op": "heartbeat"}')
            await asyncio.sleep(beat)


class FleetThread:
    """A Fleet on its own event loop in a background thread, for synchronous tests and
    benchmarks: `start(timeout)` joins every host and returns the seconds it took (raises
    RuntimeError as Fleet.start does); `stop()` closes every channel and ends the thread.
    `fleet` is the Fleet; read its results once the controller says the jobs ended."""

    def __init__(self, url: str, names: list[str], **kw) -> None:
        import threading

        self._url, self._names, self._kw = url, names, kw
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fleet", daemon=True)
        self.fleet: Fleet | None = None

    def start(self, timeout: float = 60.0) -> float:
        self._thread.start()

        async def make() -> Fleet:
            return Fleet(self._url, self._names, **self._kw)

        self.fleet = asyncio.run_coroutine_threadsafe(make(), self.loop).result()
        return asyncio.run_coroutine_threadsafe(self.fleet.start(timeout), self.loop).result(timeout + 30)

    def call(self, fn: Callable, timeout: float = 30.0):
        """`fn()` run on the fleet's loop (to read its results without racing it)."""
        async def run():
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def stop(self) -> None:
        if self._thread.is_alive():
            if self.fleet is not None:
                try:
                    asyncio.run_coroutine_threadsafe(self.fleet.close(), self.loop).result(30)
                except Exception:  # noqa: BLE001 - the loop is stopped all the same
                    pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)
        if not self.loop.is_running():
            self.loop.close()

"""Hosts and their workers (D-1, RES-2): what each host offers and holds, who serves it, the
re-check of a decision against it (DISPATCH-2), lost hosts (SCHED-4) and an admin's host
control (CLI-4).

- A host's status is LSF bhosts' word for it: `ok` (a worker serves it, open), `closed_Adm`
  (served, closed by an admin: no new dispatches, what runs there runs on) or `unavail`
  (no worker). Only `ok` hosts take new work.
- Lost hosts (SCHED-4): a host whose worker went away (its channel closed, or no heartbeat
  for HEARTBEAT_MISSES x HEARTBEAT_S, xced.api.peer), or that no worker has served since
  the controller started, is lost `host_lost_grace` seconds (xce.yaml, default 120, on the
  daemon's clock) after. Each job running there is then requeued (same ID, profile and
  submit time; event `requeued: host H lost`) or ended EXIT ("host H lost"), as its
  profile's `on_host_failure` says (default requeue); a multi-host job that loses any of its
  hosts is handled as a whole. A kill or requeue asked while the host was away wins.
- Fencing: every dispatch carries the element's attempt (its dispatch count, stored), and
  so does each task started for it on its hosts. A worker that joins lists what it still
  runs with the attempts (elements on their first host, tasks on any host of the job); each
  copy that is not the current attempt of an element dispatched to that host (requeued and
  run elsewhere since, or never dispatched there at all) is killed there, its tasks there
  ended, and logged, never adopted, and its reports are ignored (xced.controller.reports).
- Host control (LSF badmin hopen, hclose; Slurm scontrol update state=drain): `close`
  stops new dispatches, `drain` closes and records `drained` when the host's last job has
  ended, `open` reverses either. Each is a host event with the admin's name and reason,
  and a restart keeps the status the latest one gives.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread and changes state only through the shell (`_commit`).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
from typing import Protocol

from xced.controller import machine as m
from xced.model.jobs import ACTIVE, JobState, format_job_ref
from xced.model.state import Element, HostState, StartInfo, TaskSpec
from xced.scheduler.snapshot import HostSupply, host_order_key

log = logging.getLogger("xced.controller")

#: the longest gap between two looks for lost hosts, seconds (a step of the test clock looks at once)
LOST_CHECK_S = 5.0
#: the shortest gap between two sessions that load reports ask for (RES-7), seconds
LOAD_KICK_S = 15.0
#: test mode only: seconds between a worker's heartbeats instead of xced.api.peer.HEARTBEAT_S
ENV_TEST_HEARTBEAT = "XCE_TEST_HEARTBEAT_S"


class WorkerLink(Protocol):
    """The controller's handle on one worker host (in-process now, remote in D-1 multi-host)."""

    host: str

    def start(self, info: StartInfo) -> None: ...
    def kill(self, job_id: int, index: int, attempt: int | None = None) -> bool: ...
    def signal(self, job_id: int, index: int, sig: int) -> bool: ...
    def reattach(self, job_id: int, index: int, attempt: int | None = None) -> None: ...
    def read_output(self, job_id: int, index: int, stream: str, max_bytes: int) -> dict | str | None: ...
    async def launch_task(self, task: TaskSpec) -> dict: ...
    def end_tasks(self, job_id: int, index: int, attempt: int | None = None) -> None: ...


class HostsMixin:
    """Hosts and their workers (D-1, RES-2), lost hosts (SCHED-4), host control (CLI-4): a
    part of the Controller."""

    def _init_hosts(self) -> None:
        """At start: every host is away until a worker joins for it (lost host_lost_grace
        after now, SCHED-4), and has the admin status its latest host event gives (CLI-4)."""
        now = self.clock()
        #: when this controller started: the hosts no worker has served since are away from then
        self._hosts_since = now
        #: hosts named by running jobs that no worker has declared since the start (SCHED-4)
        self._ghosts: dict[str, HostState] = {}
        self._host_admin: dict[str, tuple] = self.store.host_admin()
        #: the scheduler's host view (D-4, issue 19 part 4): each host's HostSupply, in the
        #: order of self.hosts, made again only for the hosts changed since the last look
        #: (`_host_changed`; `host_view_now` brings it up to date)
        self._supply: dict[str, HostSupply] = {}
        #: the host index of that view (host_order_now): sorted keys, and each host's key in it
        self._order: list[tuple[int, float, str]] = []
        self._order_keys: dict[str, tuple[int, float, str]] = {}
        #: the hosts changed since (a dict for its order: a host new to the view goes last)
        self._supply_dirty: dict[str, None] = dict.fromkeys(self.hosts)
        for h in self.hosts.values():
            h.away_since = now
            self._apply_admin(h)
        self._lost_handle: asyncio.TimerHandle | None = None
        hb = None
        if self.config.settings.mode == "test" and os.environ.get(ENV_TEST_HEARTBEAT):
            try:
                hb = float(os.environ[ENV_TEST_HEARTBEAT])
            except ValueError:
                hb = None
            if hb is None or not 0.05 <= hb <= 3600:
                raise ValueError(f"{ENV_TEST_HEARTBEAT}={os.environ[ENV_TEST_HEARTBEAT]!r}: expected seconds "
                                 f"from 0.05 to 3600")
        from xced.api.peer import HEARTBEAT_S

        #: seconds between a worker's heartbeats, told to each worker at its join
        self.heartbeat_s: float = hb or HEARTBEAT_S

    def _apply_admin(self, h: HostState) -> None:
        """Give `h` the admin status of its latest open/close/drain event (a drain followed by
        `drained` is over: the host stays closed)."""
        got = self._host_admin.get(h.name)
        if got is None:
            return
        t, kind, actor, reason, drained = got
        h.closed = (actor, reason, t) if kind in ("close", "drain") else None
        h.draining = kind == "drain" and not drained
        h.status = self._status_of(h)
        self._host_changed(h.name)

    def _host_changed(self, name: str) -> None:
        """Host `name`'s supply, use, status or load changed: its record in the scheduler's
        host view is made again at the next look (issue 19 part 4). Every change to what
        `_host_supply` reads comes through here."""
        self._supply_dirty[name] = None

    def host_view_now(self) -> list[HostSupply]:
        """The scheduler's host view (D-4): every known host's supply (`_host_supply`) in the
        order of self.hosts, equal to a fresh `[_host_supply(h) for h in hosts]` but made again
        only for the hosts changed since the last call (issue 19 part 4: a snapshot costs what
        changed). A new list each call; its records are never changed (HostSupply is frozen)."""
        dirty = self._supply_dirty
        if dirty:
            sup, hosts, make = self._supply, self.hosts, self._host_supply
            order, keys = self._order, self._order_keys
            for name in dirty:
                h = hosts.get(name)
                if h is not None:
                    s = sup[name] = make(h)
                    old, new = keys.get(name), host_order_key(s)
                    if old != new:  # the host index (issue 19): moved by a bisection, not sorted anew
                        if old is not None:
                            del order[bisect.bisect_left(order, old)]
                            del keys[name]
                        if new is not None:
                            bisect.insort(order, new)
                            keys[name] = new
            dirty.clear()
        return list(self._supply.values())

    def host_order_now(self) -> list[tuple[int, float, str]]:
        """The host index of the host view (`host_view_now`, called first): the sorted
        `host_order_key`s of the hosts that have one (Snapshot.host_order), a new list."""
        return list(self._order)

    def _status_of(self, h: HostState) -> str:
        """LSF bhosts' status of `h`: unavail (no worker), closed_Adm, or ok."""
        if h.name not in self.workers:
            return "unavail"
        return "closed_Adm" if h.closed is not None else "ok"

    def _use(self, e: Element, sign: int, only: str | None = None) -> None:
        """Take (+1) or give back (-1) what a running element holds on its hosts (RES-2);
        `only`: on that host alone."""
        reserve = e.reserve or {host: {"slots": n} for host, n in e.alloc}
        for host, held in reserve.items():
            h = self.hosts.get(host)
            if h is None or (only is not None and host != only):
                continue
            self._supply_dirty[host] = None  # _host_changed, inline: once per dispatch and end
            h.njobs += sign
            if sign > 0:
                h.last_dispatch = self.clock()  # ties go to the host dispatched to least recently (RES-4)
            for k, v in held.items():
                if k == "slots":
                    h.slots_used += sign * int(v)
                elif k == "mem":
                    h.mem_used_mb += sign * int(v)
                else:
                    h.resources_used[k] = h.resources_used.get(k, 0.0) + sign * v
            if sign < 0 and h.draining and h.njobs == 0:
                self._drain_check(h)

    def worker_joined(self, link: WorkerLink, offer) -> None:
        """A worker host joined over the channel (D-1) with `offer` (a peer.Join). A host
        not in hosts.yaml is declared by what the worker offers (RES-2), at each join (a
        worker restarted with other --slots, --memory or resources offers those); a host of
        hosts.yaml keeps its hosts.yaml values. The join is the host's `last_heard`."""
        declared = link.host in self.hosts
        if declared and all(h.name != link.host for h in self.config.hosts):
            h = self.hosts[link.host]
            h.slots, h.memory_mb = offer.slots, offer.memory_mb
            h.resources, h.attributes, h.tags = dict(offer.resources), dict(offer.attributes), list(offer.tags)
            self._host_changed(link.host)
            log.info("host %s declared again at join: %d slots, %d MB", link.host, offer.slots, offer.memory_mb)
        if not declared:
            self.hosts[link.host] = HostState(link.host, offer.slots, offer.memory_mb, dict(offer.resources),
                                              dict(offer.attributes), list(offer.tags))
            self._host_changed(link.host)  # new to the view: last, as in self.hosts
            self._apply_admin(self.hosts[link.host])
            log.info("host %s declared at join: %d slots, %d MB", link.host, offer.slots, offer.memory_mb)
            # what running jobs hold there (known from the store before the host was)
            for job in self.active.values():
                for e in job.elements.values():
                    if e.state in ACTIVE and link.host in (e.reserve or dict(e.alloc)):
                        self._use(e, +1, only=link.host)
        if getattr(offer, "load", None):
            self.host_load(link, offer.load)
        self._fence(link, getattr(offer, "running", None) or ())
        self._host_stimulus(self._stim(m.HostJoined, "host", f"worker:{link.host}", host=link.host,
                                       declared=declared), link)
        self.worker_heard(link)  # its join is the first thing heard from it

    def _fence(self, link: WorkerLink, running) -> None:
        """SCHED-4 fencing at a join: kill each copy the worker reports running (job ID,
        index, attempt: the element's own supervisor on its first host, or its tasks on any
        host of the job, xced.worker.remote.running_elements) that is not the current
        attempt of an element dispatched to this host, as its first host or another: the
        element's copy of that attempt there is killed and its tasks of that attempt ended
        (a copy of the current attempt beside it is left alone). It is logged, never adopted,
        and its reports are ignored."""
        for item in running:
            job_id, index = item[0], item[1]
            attempt = item[2] if len(item) > 2 else 0
            job = self.jobs.get(job_id)
            e = job.elements.get(index) if job else None
            hosts = [h for h, _ in e.alloc] if e is not None else []
            if e is not None and e.state in ACTIVE and link.host in hosts and e.attempt == attempt:
                continue
            if e is None:
                why = "which this controller never dispatched" if job is None else "which is no element of the job"
            elif e.state not in ACTIVE:
                why = f"which is {e.state} now (attempt {e.attempt})" + (
                    ", removed by bkill -r" if m.removed_by(e.action) is not None and e.attempt == attempt else "")
            elif link.host not in hosts:
                why = f"which runs on {' '.join(hosts)} now (attempt {e.attempt})"
            else:
                why = f"whose current attempt is {e.attempt}"
            log.warning("host %s runs a stale copy of job %s (attempt %d), %s: killed there, its result ignored "
                        "(SCHED-4)", link.host, format_job_ref(job_id, index), attempt, why)
            link.kill(job_id, index, attempt=attempt)
            link.end_tasks(job_id, index, attempt=attempt)

    def is_stale_copy(self, job_id: int, index: int, attempt: int) -> bool:
        """Whether `attempt` is not the current attempt of element (job_id, index) (SCHED-4)."""
        job = self.jobs.get(job_id)
        e = job.elements.get(index) if job else None
        return e is None or e.attempt != attempt

    def worker_heard(self, link: WorkerLink) -> None:
        """A message (a heartbeat included) came from `link`'s worker: note the time as its
        host's `last_heard` (SCHED-4; `xcecli hosts --json`). Memory only, like a host's
        presence; a channel another worker of the host has replaced notes nothing."""
        h = self.hosts.get(link.host)
        if h is not None and self.workers.get(link.host) is link:
            h.last_heard = self.clock()

    def host_load(self, link: WorkerLink, values: dict) -> bool:
        """`link`'s worker reported its host's load indices (RES-7; at its join and with each
        heartbeat, or every xced.worker.load.LOAD_REPORT_S for the daemon's own): kept in memory as the host's `load` (what select and
        order read, and `xcecli hosts --load` shows) with the time. A report that
        xced.model.load.check_load refuses (an unknown index, a value out of range) is logged
        and dropped whole; so is one from a channel another worker has replaced. Returns
        whether it was taken. A session follows when a pending job's select reads a load
        index (it may hold now): the pending jobs are looked at, and a session asked for,
        at most once per LOAD_KICK_S however many hosts report; with no such job a load
        report changes no decision, and a quiet cluster stays quiet (a fresh tester saw a
        session every 15 s for as long as any job pended)."""
        from xced.model.load import check_load

        h = self.hosts.get(link.host)
        if h is None or self.workers.get(link.host, link) is not link:
            return False
        try:
            h.load = check_load(values)
        except ValueError as e:
            log.warning("worker %s sent a load report that is refused: %s", link.host, e)
            return False
        self._host_changed(h.name)
        now = h.load_at = self.clock()
        last = getattr(self, "_load_kicked_at", None)
        if last is None or not 0 <= now - last < LOAD_KICK_S:  # the look, too, once per LOAD_KICK_S
            self._load_kicked_at = now
            if self._pending_select_reads_load():
                self.kick()
        return True

    def _pending_select_reads_load(self) -> bool:
        """Whether a pending element's job (not a held one) has a select that reads a load index
        (xced.scheduler.placement.select_reads_load), each distinct requirement looked at
        once (jobs of one requirement share one object, xced.resreq.shared)."""
        from xced.scheduler.placement import select_reads_load

        seen: dict[int, bool] = {}
        for job in self.active.values():
            rr = job.resreq
            reads = seen.get(id(rr))
            if reads is None:
                reads = seen[id(rr)] = select_reads_load(rr)
            if reads and any(e.state is JobState.PEND for e in job.elements.values()):
                return True
        return False

    def is_joined(self, host: str) -> bool:
        """Whether a worker serves `host` now (host names are unique among joined workers)."""
        return host in self.workers

    def worker_left(self, link: WorkerLink) -> None:
        """The host's channel closed: it takes no new work until it rejoins; its running
        elements stay RUN (their supervisors keep running, JOB-8) for host_lost_grace, then
        the host is lost (SCHED-4, `check_lost_hosts`). A channel that another worker of the
        same host has replaced changes nothing. The host's status_reason is
        `link.left_reason` when the controller closed it (a revoked or expired key, KEY-4;
        no heartbeat), else that its channel closed."""
        if self.workers.get(link.host) is link:
            self._host_stimulus(self._stim(m.HostLeft, "host", f"worker:{link.host}", host=link.host), link)

    def attach_worker(self, link: WorkerLink) -> None:
        """A worker now serves `link.host` (a host hosts.yaml declares): mark it ok, re-attach
        its running elements, schedule (the in-process worker, and tests' workers)."""
        self._host_stimulus(self._stim(m.HostJoined, "host", f"worker:{link.host}", host=link.host), link)

    def _host_stimulus(self, s, link: WorkerLink) -> None:
        """Apply a host stimulus (machine.host_transition): the registry first (who serves the
        host, its status), then the effects (re-attach what runs there), then a session. No
        store write: a host's presence is not durable; what runs there is, per element."""
        running = [e for job in list(self.active.values()) for e in list(job.elements.values())
                   if e.state in ACTIVE and e.alloc and e.alloc[0][0] == s.host]
        out = m.host_transition(s, running, self._unsent_signals)
        if isinstance(s, m.HostJoined):
            self.workers[s.host] = link
        else:
            del self.workers[s.host]
        h = self.hosts.get(s.host)
        if h is not None:
            h.status = self._status_of(h)
            self._host_changed(h.name)
            if isinstance(s, m.HostJoined):
                if h.lost_at is not None:
                    log.warning("host %s is back after it was lost", s.host)
                    self._note_rejoined(h)
                h.status_reason, h.away_since, h.lost_at = None, None, None
            else:
                h.status_reason = getattr(link, "left_reason", None) or "its worker's channel closed"
                h.away_since = self.clock()
                self._lost_check_at(self.config.settings.host_lost_grace_s)
        log.info("host %s %s (%s)", s.host, "joined" if isinstance(s, m.HostJoined) else "left", s.id)
        for eff in out.effects:  # re-attaching may finish jobs (ended while the worker was away)
            if isinstance(eff, m.ReattachElement):
                link.reattach(eff.job_id, eff.index, eff.attempt)
            elif isinstance(eff, m.KillAgain):
                log.info("kill of %s sent again to %s (asked while it was away)", format_job_ref(eff.job_id,
                                                                                               eff.index), s.host)
                link.kill(eff.job_id, eff.index)
            else:
                self._unsent_signals.pop((eff.job_id, eff.index), None)
                link.signal(eff.job_id, eff.index, eff.sig)
        if isinstance(s, m.HostJoined):
            self.kick()

    # ------------------------------------------------------------------ lost hosts (SCHED-4)

    def start_host_watch(self) -> None:
        """Look for lost hosts at the end of the grace period that started now (every host
        is away until its worker joins), and every LOST_CHECK_S seconds."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (unit tests call check_lost_hosts by hand)
            return

        def tick() -> None:
            self._safe_lost_check()
            loop.call_later(LOST_CHECK_S, tick)

        loop.call_later(LOST_CHECK_S, tick)
        self._lost_check_at(self.config.settings.host_lost_grace_s)

    def _lost_check_at(self, delay: float) -> None:
        """Look for lost hosts `delay` seconds from now (wall time; a test clock step looks at once)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.call_later(delay + 0.05, self._safe_lost_check)

    def _safe_lost_check(self) -> None:
        try:
            self.check_lost_hosts()
        except Exception:  # noqa: BLE001 - the watch goes on; a failed commit is tried at the next look
            log.exception("the look for lost hosts failed")

    def check_lost_hosts(self) -> int:
        """Declare lost each host away for host_lost_grace seconds or more on the daemon's
        clock, and requeue or end what ran there (SCHED-4, see the module docstring).
        Returns how many elements changed. A store that refuses the change raises; the
        elements stay RUN and the next look tries again. Also finishes a drain whose
        `drained` event the store refused when the host's last job ended."""
        grace = self.config.settings.host_lost_grace_s
        now = self.clock()
        changed = 0
        for h in self.hosts.values():
            if h.draining and h.njobs == 0:
                self._drain_check(h)
        # a host a worker declared at its join (none in hosts.yaml) is unknown after a restart
        # until it joins again; its jobs are lost all the same, a grace period after the start
        named = {x for job in self.active.values() for e in job.elements.values() if e.state in ACTIVE
                 for x, _ in e.alloc}
        for x in named - self.hosts.keys() - self._ghosts.keys():
            self._ghosts[x] = HostState(x, 0, 0, {}, {}, [], away_since=self._hosts_since)
        for x in [x for x in self._ghosts if x in self.hosts or x not in named]:
            del self._ghosts[x]
        for h in [*self.hosts.values(), *self._ghosts.values()]:
            if h.away_since is None or h.name in self.workers or now - h.away_since < grace:
                continue
            there = [e for job in list(self.active.values()) for e in job.elements.values()
                     if e.state in ACTIVE and any(x == h.name for x, _ in e.alloc)]
            first = h.lost_at is None
            if not there and not first:
                continue
            changed += self._lose_host(h, there, now, first)
        return changed

    def _lose_host(self, h: HostState, there: list[Element], now: float, first: bool) -> int:
        """Apply the machine's HostLost to each element of `there` (running on lost host `h`),
        with a `lost` host event the first time; returns how many elements changed."""
        sid = self._sid("host")
        changes = []
        for e in there:
            profile = self._profile_of(e.job)
            policy = profile.on_host_failure if profile is not None else "requeue"
            head = e.alloc[0][0]
            stim = m.HostLost(sid, "system", now, host=h.name, policy=policy,
                              first_alive=head != h.name and head in self.workers)
            try:
                out = m.transition(e, stim)
            except m.IllegalTransition:
                continue
            if out is not None:
                changes.append((e, stim, out))
        away = now - (h.away_since or now)
        reason = (f"no worker for {away:.0f} s (host_lost_grace {self.config.settings.host_lost_grace_s:.0f} s): "
                  f"{len(changes)} job element(s) requeued or ended")

        def note() -> None:
            self.store.add_host_event(now, h.name, "lost", "system", reason)

        self._commit(changes, note if first else None)
        if first:
            h.lost_at = now
            h.status_reason = f"lost: {reason}"
            log.warning("host %s lost: %s", h.name, reason)
        for job in {id(e.job): e.job for e, _, _ in changes}.values():
            self._job_changed(job)
        if changes:
            self.kick()
        return len(changes)

    # ------------------------------------------------------------------ host control (CLI-4)

    def host_control(self, caller, name: str, op: str, reason: str | None) -> dict:
        """An admin's `open`, `close` or `drain` of host `name` (CLI-4; LSF badmin hopen and
        hclose, Slurm's drain), recorded as a host event with the admin's name and `reason`.
        Returns {"host": the host as `xcecli hosts --json` shows it, "changed": False when it
        was so already, "message"}. Raises PermissionDenied for a caller who is not a
        cluster admin, NotFound for an unknown host, Conflict for a drain of a host that no
        worker serves (nothing can end there: close it instead), InvalidRequest for an
        unknown op or a reason over 1,000 characters."""
        from xced.api.errors import Conflict, InvalidRequest, NotFound
        from xced.policy.rbac import require_admin

        if op not in ("open", "close", "drain"):
            raise InvalidRequest(f"unknown host operation {op!r}: open, close or drain", field="op")
        require_admin(caller, f"{op} a host")
        h = self.hosts.get(name)
        if h is None:
            known = ", ".join(sorted(self.hosts)[:20]) or "none"
            raise NotFound(f"host {name!r} is not a host of this cluster (hosts: {known}); `xcecli hosts` lists them")
        if reason is not None and len(reason) > 1000:
            raise InvalidRequest("--reason: at most 1,000 characters", field="reason")
        if op == "drain" and name not in self.workers:
            raise Conflict(f"host {name} is {h.status}: no worker serves it, so no job can end there and a drain "
                           f"would never finish; close it (`xceadmin hosts close {name}`), or start its worker first")
        now = self.clock()
        actor = f"admin:{caller.user}"
        if op == "open":
            changed = h.closed is not None
        elif op == "close":
            changed = h.closed is None or h.draining
        else:
            changed = not h.draining and (h.closed is None or h.njobs > 0)
        if changed:
            with self.store.tx():
                self.store.add_host_event(now, name, op, actor, reason)
            self._host_admin[name] = (now, op, actor, reason, False)
            h.closed = None if op == "open" else (actor, reason, now)
            h.draining = op == "drain"
            h.status = self._status_of(h)
            self._host_changed(name)
            log.info("host %s: %s by %s%s", name, op, caller.user, f" ({reason})" if reason else "")
            if op == "open":
                self.kick()
            elif op == "drain":
                self._drain_check(h)
        word = {"open": "opened", "close": "closed", "drain": "draining"}[op]
        if changed:
            msg = f"host {name} {word}" + (f": its {h.njobs} job(s) run on" if op != "open" and h.njobs else "")
            if op == "drain" and not h.draining:
                msg = f"host {name} drained: no job runs there"
        else:
            msg = {"open": f"host {name} is already open",
                   "close": f"host {name} is already closed",
                   "drain": f"host {name} is already {'draining' if h.draining else 'drained (closed, no job runs there)'}"}[op]
        return {"host": self.host_view(h), "changed": changed, "message": msg}

    def _drain_check(self, h: HostState) -> None:
        """A draining host whose last job has ended is drained: a `drained` event (it stays
        closed). Best effort: a store that refuses it leaves the drain running, looked at again
        at the next end there."""
        if not h.draining or h.njobs > 0:
            return
        reason = "its last job has ended"
        if not self._system_host_event(h.name, "drained", reason):  # looked at again at the next end
            return
        got = self._host_admin.get(h.name)
        if got is not None:
            self._host_admin[h.name] = (*got[:4], True)
        h.draining = False
        log.info("host %s drained: %s", h.name, reason)

    def _system_host_event(self, host: str, kind: str, reason: str) -> bool:
        """Write a host event of the system's (`drained`, `rejoined`) in its own transaction;
        False, logged, when the store refuses it (busy, full): the caller decides what that
        costs. Never raises."""
        try:
            with self.store.tx():
                self.store.add_host_event(self.clock(), host, kind, "system", reason)
        except Exception as e:  # noqa: BLE001 - a history line, not state
            log.warning("host %s %s, but the store refused its host event: %s", host, kind, e)
            return False
        return True

    def _note_rejoined(self, h: HostState) -> None:
        """A `rejoined` host event for lost host `h`, whose worker joined again; a store that
        refuses it costs the history line, not the join."""
        away = self.clock() - (h.away_since or h.lost_at or self.clock())
        self._system_host_event(h.name, "rejoined", f"its worker joined again {away:.0f} s after it left")

    def host_history(self, host: str | None) -> list[tuple]:
        """Host events (time, host, kind, actor, reason), oldest first, of every host or of
        `host` (`xceadmin hosts hist`, LSF badmin hhist). Raises NotFound for a host that is
        neither known now nor in the history."""
        from xced.api.errors import NotFound

        rows = self.store.host_events(host)
        if host is not None and not rows and host not in self.hosts:
            raise NotFound(f"host {host!r} is not a host of this cluster (known: "
                           f"{', '.join(sorted(self.hosts)[:20]) or 'none'})")
        return rows

    def jobs_by_host(self) -> dict[str, list[str]]:
        """Host -> the refs of the elements running there (one pass over the active jobs)."""
        out: dict[str, list[str]] = {}
        for job in self.active.values():
            for e in job.elements.values():
                if e.state in ACTIVE:
                    for x, _ in e.alloc:
                        out.setdefault(x, []).append(e.ref)
        return out

    def host_view(self, h: HostState, jobs: dict[str, list[str]] | None = None) -> dict:
        """One host as `GET /hosts` gives it (xced.api.models.HostOut): status, slots (used and
        total), memory (MB), resources, who closed it and why, whether a drain runs, when its
        worker was last heard from, went away or was lost (epoch seconds), and the jobs
        running there (refs, first 1,000; `jobs`: `jobs_by_host()`, made once for a listing)."""
        jobs = (jobs if jobs is not None else self.jobs_by_host()).get(h.name, [])
        closed = h.closed
        return {"name": h.name, "status": h.status, "slots": h.slots, "slots_used": h.slots_used,
                "memory_mb": h.memory_mb, "memory_used_mb": h.mem_used_mb, "njobs": h.njobs,
                "resources": h.resources, "attributes": h.attributes, "tags": h.tags,
                "status_reason": h.status_reason, "closed_by": closed[0].split(":", 1)[-1] if closed else None,
                "closed_reason": closed[1] if closed else None, "closed_at": closed[2] if closed else None,
                "draining": h.draining, "away_since": h.away_since, "lost_at": h.lost_at,
                "last_heard": h.last_heard, "load": h.load or None, "load_at": h.load_at,
                "jobs": jobs[:1000]}

    def host_supplies(self, idle: bool = False) -> list[HostSupply]:
        """Every known host's supply (`_host_supply`): what shares are carved from (PRJ-6,
        xced.policy.projects.supply_totals) and what placement checks run on."""
        if not idle:
            return self.host_view_now()
        return [self._host_supply(h, idle) for h in self.hosts.values()]

    @staticmethod
    def _host_supply(h: HostState, idle: bool = False) -> HostSupply:
        """A host's supply for the scheduler (RES-2): totals, and what is free after what runs
        there; `idle`: as if nothing ran and the host were up (the never-satisfiable check,
        MERGE-2)."""
        free = dict(h.resources) if idle else {k: v - h.resources_used.get(k, 0.0) for k, v in h.resources.items()}
        return HostSupply(h.name, h.slots, h.slots if idle else h.slots - h.slots_used, h.memory_mb,
                          h.memory_mb if idle else h.memory_mb - h.mem_used_mb, dict(h.resources), free,
                          dict(h.attributes), frozenset(h.tags), "ok" if idle else h.status,
                          {} if idle else h.load, 0 if idle else h.njobs, False, h.last_dispatch)

    def _fits(self, reserve: dict[str, dict[str, float]], taken: dict[str, dict[str, float]]) -> bool:
        """DISPATCH re-check (DESIGN rule 1): every host is served and still has what the
        decision reserves on it, beyond what `taken` (this session's accepted dispatches,
        not yet in memory) takes."""
        for host, held in reserve.items():
            h = self.hosts.get(host)
            if h is None or h.status != "ok" or host not in self.workers:
                return False
            t = taken.get(host, {})
            for k, v in held.items():
                v += t.get(k, 0.0)
                if k == "slots":
                    if h.slots - h.slots_used < v:
                        return False
                elif k == "mem":
                    if h.memory_mb - h.mem_used_mb < v:
                        return False
                elif h.resources.get(k, 0.0) - h.resources_used.get(k, 0.0) < v - 1e-9:
                    return False
        return True

    def element_host(self, job_id: int, index: int) -> str | None:
        """The first host of element (job_id, index) while it runs (RUN or USUSP, dispatched
        there) or while the processes of one removed at once (bkill -r, machine.removed_by)
        are being killed, else None: the only worker whose reports about it count (D-7)."""
        job = self.jobs.get(job_id)
        e = job.elements.get(index) if job else None
        if e is None or not e.alloc or (e.state not in ACTIVE and m.removed_by(e.action) is None):
            return None
        return e.alloc[0][0]

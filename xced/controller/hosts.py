"""Hosts and their workers (D-1, RES-2): what each host offers and holds, who serves it, the
re-check of a decision against it (DISPATCH-2). Lost hosts (SCHED-4) come here.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread and changes state only through the shell (`_commit`).
"""

from __future__ import annotations

import logging
from typing import Protocol

from xced.controller import machine as m
from xced.model.jobs import ACTIVE, format_job_ref
from xced.model.state import Element, HostState, StartInfo, TaskSpec
from xced.scheduler.snapshot import HostSupply

log = logging.getLogger("xced.controller")


class WorkerLink(Protocol):
    """The controller's handle on one worker host (in-process now, remote in D-1 multi-host)."""

    host: str

    def start(self, info: StartInfo) -> None: ...
    def kill(self, job_id: int, index: int) -> bool: ...
    def signal(self, job_id: int, index: int, sig: int) -> bool: ...
    def reattach(self, job_id: int, index: int) -> None: ...
    def read_output(self, job_id: int, index: int, stream: str, max_bytes: int) -> str | None: ...
    async def launch_task(self, task: TaskSpec) -> dict: ...
    def end_tasks(self, job_id: int, index: int) -> None: ...


class HostsMixin:
    """Hosts and their workers (D-1, RES-2): a part of the Controller."""

    def _use(self, e: Element, sign: int, only: str | None = None) -> None:
        """Take (+1) or give back (-1) what a running element holds on its hosts (RES-2);
        `only`: on that host alone."""
        reserve = e.reserve or {host: {"slots": n} for host, n in e.alloc}
        for host, held in reserve.items():
            h = self.hosts.get(host)
            if h is None or (only is not None and host != only):
                continue
            h.njobs += sign
            for k, v in held.items():
                if k == "slots":
                    h.slots_used += sign * int(v)
                elif k == "mem":
                    h.mem_used_mb += sign * int(v)
                else:
                    h.resources_used[k] = h.resources_used.get(k, 0.0) + sign * v

    def worker_joined(self, link: WorkerLink, offer) -> None:
        """A worker host joined over the channel (D-1) with `offer` (a peer.Join). A host
        not in hosts.yaml is declared by what the worker offers (RES-2), at each join (a
        worker restarted with other --slots, --memory or resources offers those); a host of
        hosts.yaml keeps its hosts.yaml values."""
        declared = link.host in self.hosts
        if declared and all(h.name != link.host for h in self.config.hosts):
            h = self.hosts[link.host]
            h.slots, h.memory_mb = offer.slots, offer.memory_mb
            h.resources, h.attributes, h.tags = dict(offer.resources), dict(offer.attributes), list(offer.tags)
            log.info("host %s declared again at join: %d slots, %d MB", link.host, offer.slots, offer.memory_mb)
        if not declared:
            self.hosts[link.host] = HostState(link.host, offer.slots, offer.memory_mb, dict(offer.resources),
                                              dict(offer.attributes), list(offer.tags))
            log.info("host %s declared at join: %d slots, %d MB", link.host, offer.slots, offer.memory_mb)
            # what running jobs hold there (known from the store before the host was)
            for job in self.active.values():
                for e in job.elements.values():
                    if e.state in ACTIVE and link.host in (e.reserve or dict(e.alloc)):
                        self._use(e, +1, only=link.host)
        self._host_stimulus(self._stim(m.HostJoined, "host", f"worker:{link.host}", host=link.host,
                                       declared=declared), link)

    def is_joined(self, host: str) -> bool:
        """Whether a worker serves `host` now (host names are unique among joined workers)."""
        return host in self.workers

    def worker_left(self, link: WorkerLink) -> None:
        """The host's channel closed: it takes no new work until it rejoins; its running
        elements stay RUN (their supervisors keep running, JOB-8). A channel that another
        worker of the same host has replaced changes nothing. The host's status_reason is
        `link.left_reason` when the controller closed it (a revoked or expired key, KEY-4),
        else that its channel closed. What happens to its jobs after a grace period is
        SCHED-4's (lost hosts, issue 16): until then they stay RUN."""
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
        if s.host in self.hosts:
            self.hosts[s.host].status = out.status
            self.hosts[s.host].status_reason = (None if isinstance(s, m.HostJoined) else
                                                getattr(link, "left_reason", None) or "its worker's channel closed")
        log.info("host %s %s (%s)", s.host, "joined" if isinstance(s, m.HostJoined) else "left", s.id)
        for eff in out.effects:  # re-attaching may finish jobs (ended while the worker was away)
            if isinstance(eff, m.ReattachElement):
                link.reattach(eff.job_id, eff.index)
            elif isinstance(eff, m.KillAgain):
                log.info("kill of %s sent again to %s (asked while it was away)", format_job_ref(eff.job_id,
                                                                                               eff.index), s.host)
                link.kill(eff.job_id, eff.index)
            else:
                self._unsent_signals.pop((eff.job_id, eff.index), None)
                link.signal(eff.job_id, eff.index, eff.sig)
        if isinstance(s, m.HostJoined):
            self.kick()

    def host_supplies(self, idle: bool = False) -> list[HostSupply]:
        """Every known host's supply (`_host_supply`): what shares are carved from (PRJ-6,
        xced.policy.projects.supply_totals) and what placement checks run on."""
        return [self._host_supply(h, idle) for h in self.hosts.values()]

    @staticmethod
    def _host_supply(h: HostState, idle: bool = False) -> HostSupply:
        """A host's supply for the scheduler (RES-2): totals, and what is free after what runs
        there; `idle`: as if nothing ran and the host were up (the never-satisfiable check,
        MERGE-2)."""
        free = dict(h.resources) if idle else {k: v - h.resources_used.get(k, 0.0) for k, v in h.resources.items()}
        return HostSupply(h.name, h.slots, h.slots if idle else h.slots - h.slots_used, h.memory_mb,
                          h.memory_mb if idle else h.memory_mb - h.mem_used_mb, dict(h.resources), free,
                          dict(h.attributes), frozenset(h.tags), "ok" if idle else h.status)

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
        there), else None: the only worker whose reports about it count (D-7)."""
        job = self.jobs.get(job_id)
        e = job.elements.get(index) if job else None
        if e is None or e.state not in ACTIVE or not e.alloc:
            return None
        return e.alloc[0][0]

"""A new config under pending jobs (CFG-3, MERGE-1): pending jobs are merged again with the
config in force; one the config refuses gets a system hold naming why.

Part of the Controller (xced.controller.controller), which mixes these in: every method
runs on the event loop thread and changes state only through the shell (`_commit`).
"""

from __future__ import annotations

import logging
from typing import Callable

from xced.api.errors import InvalidRequest
from xced.controller import machine as m
from xced.controller.submit import effective_resreq
from xced.model.config import ClusterConfig
from xced.model.jobs import JobState
from xced.model.spec import EffectiveJob, to_record
from xced.model.state import Job
from xced.policy.rbac import Caller, Policy, require_admin
from xced.merge import MergeError
from xced.resreq import ResReqError

S = JobState
log = logging.getLogger("xced.controller")


class ReconfigMixin:
    """A new config under pending jobs (CFG-3, MERGE-1): a part of the Controller."""

    def _remerged(self, job: Job, check_hosts: bool = False) -> tuple[str | None, EffectiveJob | None, object]:
        """Re-merge a job none of whose elements has started with the config in force
        (CFG-3: pending jobs see new profiles at their next session), changing nothing:
        (None, its new effective values, its new effective resreq), or (the merge's refusal,
        None, None) (the job then keeps its old values and gets a system hold). A job
        submitted before job values were kept gives (None, None, None): its values stay."""
        sp = job.spec
        values = sp.job_values
        if values is None:
            return None, None, None
        gone = self._gone(job)
        if gone is not None:
            return gone, None, None
        profile = self.config.applications.get(sp.app) if sp.app else None
        queue = self.config.queue(job.queue)
        try:
            # env: the job's own (cached) dict, which the merge shares (never changes) rather than copies
            eff = self._merge(effective_resreq(sp.resreq), values, self.job_env(job), profile, queue)
        except (MergeError, ResReqError) as e:
            return str(e), None, None
        if check_hosts and self.hosts:  # as at submit (MERGE-2): never left pending silently
            never = self._never_starts(eff.ntasks_min, eff.ntasks_max, eff.resreq, queue.host_limit)
            if never is not None:
                return never[0], None, None
        return None, self._effective(eff, profile), eff.resreq

    def _respec(self, specs: list[tuple[Job, EffectiveJob, object]]) -> tuple[Callable[[], None], Callable[[], None]]:
        """The (store write, memory change) pair that gives each job its new effective values
        (and its new effective resreq when not None), for `_commit`."""
        def write() -> None:
            for job, eff, _ in specs:
                self.store.update_spec(job.id, to_record(job.spec, eff))

        def remember() -> None:
            for job, eff, rr in specs:
                job.effective = eff
                if rr is not None:
                    job.resreq = rr
        return write, remember

    def _gone(self, job: Job) -> str | None:
        """Why the config in force has no place for `job` (its queue or its profile is gone, or,
        PRJ-5, its project was removed or its user may no longer submit there), or None."""
        app = job.spec.app
        if app and app not in self.config.applications:
            return f"its application profile {app!r} no longer exists"
        if self.config.queue(job.queue) is None:
            return f"its queue {job.queue!r} no longer exists"
        return self.policy.still_allowed(job.user, job.spec.project, job.spec.auth_basis)

    def _remerge_pending(self, actor: str, applied: m.ConfigApplied | None = None) -> tuple[int, list[str]]:
        """Re-merge every job whose elements all pend and whose values came from another
        config (CFG-3). A job the new config refuses gets a system hold naming why (for an
        array with started elements: its pending ones, when its queue or profile is gone);
        one an earlier config refused and this one takes has that hold released. Returns (jobs
        re-merged, one line per refused job). One transaction. `applied`: the stimulus that
        put the config in force, whose ID the holds and releases record (at start: a new one)."""
        done = 0
        refused: list[str] = []
        specs: list[tuple[Job, EffectiveJob, object]] = []
        changes: list = []
        sid, now = (applied.id if applied is not None else self._sid("config")), self.clock()
        for job in list(self.active.values()):
            if job.effective.config_hash == self._config_hash or job.spec.job_values is None:
                continue
            if any(e.state not in (S.PEND, S.PSUSP) for e in job.elements.values()):
                # an array with started elements keeps the values it started with, but its
                # pending elements cannot run in a queue or with a profile that is gone
                why = self._gone(job)
                if why is None:
                    continue
                new, rr = None, None
            else:
                why, new, rr = self._remerged(job, check_hosts=actor != "system")
            if why is None:
                done += 1
                if job.effective.config_refused:  # an earlier config refused it; this one takes it
                    changes += self._changes(list(job.elements.values()), m.Release(
                        sid, actor, now, reason="the new config takes it: system hold released"))
                specs.append((job, new, rr))
                continue
            held = self._changes(list(job.elements.values()), m.SystemHold(
                sid, actor, now, reason=f"the new config refuses it: {why}",
                pend_reason=f"Held by the system: the config {self._config_hash[:12]} refuses it: {why}"))
            if not held:
                continue  # nothing of it pends (every element runs or has ended): nothing to hold or report
            refused.append(f"job {job.id}: {why}")
            specs.append((job, job.effective.refused_by(self._config_hash), None))  # refused once per config
            changes += held
        write, remember = self._respec(specs)
        self._commit(changes, write, memory=remember)
        return done, refused

    def apply_config(self, new: ClusterConfig, caller: Caller) -> dict:
        """CFG-3: validate `new` again and swap it in atomically, or refuse it whole.

        Admins only (PermissionDenied). InvalidRequest lists every problem (cross-references,
        settings only a restart can change). On success pending jobs are re-merged with the
        new profiles and queues and a session is asked for. Returns {"hash", "previous_hash",
        "remerged" (jobs), "held" (lines naming the jobs the new config refuses)}.
        """
        from xced.config.live import check_compiled, restart_only_changes

        require_admin(caller, "apply a config")
        problems = check_compiled(new) + [f"{p}: restart xced to apply it"
                                          for p in restart_only_changes(self.config, new)]
        if problems:
            raise InvalidRequest("the daemon refused the config, nothing was applied: " + "; ".join(problems),
                                 field="config")
        previous = self._config_hash
        self.config = new
        self.policy = Policy(new)
        self._config_hash = new.content_hash()
        applied = self._stim(m.ConfigApplied, "config", f"admin:{caller.user}", config_hash=self._config_hash,
                             previous_hash=previous)
        log.info("config %s applied by %s (%s)", self._config_hash[:12], caller.user, applied.id)
        remerged, held = self._remerge_pending(applied.actor, applied)
        if self.recorder is not None:  # SIM-2: the config in force from here on
            self.recorder.config(new)
        self.kick()
        self.sweep_soon()  # a key no longer trusted by the new list closes its channels (KEY-4)
        return {"hash": self._config_hash, "previous_hash": previous, "remerged": remerged, "held": held}

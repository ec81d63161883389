"""Job environments kept out of the daemon's memory (D-7, issue 15): a job's environment is
needed only at dispatch, by a task launch, at a re-merge and by those allowed to see it, so
the controller keeps only its digest in memory and the environment itself in the store, one
row per distinct environment (identical environments share one copy: most jobs of a user
carry the same one). A small cache keeps the environments used last, so that a burst of
jobs with the same environment reads it once.

Part of the Controller (xced.controller.controller), which mixes these in.
"""

from __future__ import annotations

import collections
import json


#: distinct environments kept in memory, the ones used last (each a few kB)
ENV_CACHE = 64


class EnvsMixin:
    """Environments by digest: a part of the Controller."""

    def _init_envs(self) -> None:
        #: digest -> environment, the ENV_CACHE used last (least recently used first). Each is
        #: in the store too (kept after its submit's commit, or read from the store; the store
        #: never deletes one), so a submit with one of them writes no envs row (issue 17 part 5)
        self._envs: collections.OrderedDict[str, dict[str, str]] = collections.OrderedDict()

    def _remember_env(self, digest: str, env: dict[str, str]) -> dict[str, str]:
        """Cache `env` under `digest`; returns the cached dict (an identical one already kept
        is shared rather than kept twice)."""
        cache = self._envs
        kept = cache.get(digest)
        if kept is not None:
            cache.move_to_end(digest)
            return kept
        cache[digest] = env
        if len(cache) > ENV_CACHE:
            cache.popitem(last=False)
        return env

    def job_env(self, job) -> dict[str, str]:
        """The environment `job` was submitted with ({name: value}; not to be changed): from
        the cache, else one read of the store by primary key. A job whose environment row is
        missing (a store damaged by hand) gets {} and a warning in the daemon's log. Raises
        StoreBusy or StoreUnavailable when the store cannot be read."""
        digest = job.spec.env_digest
        if not digest:
            return {}
        kept = self._envs.get(digest)
        if kept is not None:
            self._envs.move_to_end(digest)
            return kept
        text = self.store.env(digest)
        if text is None:
            import logging

            logging.getLogger("xced.controller").warning("job %s: environment %s is not in the store; it runs with "
                                                         "none of its own", job.id, digest)
            return {}
        return self._remember_env(digest, json.loads(text))

    def job_script(self, job) -> str | None:
        """The script `job` was submitted with (JOB-12: one read from standard input), read
        from the store where it is kept beside the environments (xced.model.spec.script_record);
        None when the job has none, or when its row is missing (a store damaged by hand:
        logged, and the worker then refuses to start the job, saying so). Raises StoreBusy or
        StoreUnavailable when the store cannot be read."""
        digest = job.spec.script_digest
        if not digest:
            return None
        text = self.store.env(digest)
        if text is None:
            import logging

            logging.getLogger("xced.controller").warning("job %s: script %s is not in the store", job.id, digest)
            return None
        return json.loads(text)

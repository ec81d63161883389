"""Domain objects -> API response models (the wire form of `xced.api.models`)."""

from __future__ import annotations

from xced.api.models import AllocOut, ElementOut, EventOut, HostShortfallOut, JobOut, PendReasonOut
from xced.model.jobs import JobState, format_job_ref


def element_out(e) -> ElementOut:
    pr = e.pend_reason
    return ElementOut.model_construct(
        id=e.ref, job_id=e.job.id, index=e.index, state=e.state, holds=sorted(e.holds),
        start_time=e.start_time, end_time=e.end_time, exit_code=e.exit_code, exit_signal=e.exit_signal,
        exit_reason=e.exit_reason,
        alloc=[AllocOut.model_construct(host=h, slots=n) for h, n in e.alloc],
        pend_reason=PendReasonOut.model_construct(
            main=pr.main, hosts=[HostShortfallOut.model_construct(host=s.host, resource=s.resource, free=s.free,
                                                                  needed=s.needed, message=s.message)
                                 for s in pr.hosts]) if pr else None,
        stdout=None, stderr=None,
    )


def job_out(job, *, elements: bool = True) -> JobOut:
    sp = job.spec
    counts: dict[str, int] = {}
    for e in job.elements.values():
        counts[e.state.value] = counts.get(e.state.value, 0) + 1
    return JobOut.model_construct(
        job_id=job.id, name=job.name, user=job.user, run_as=sp["run_as"], asserted_user=sp.get("asserted", False),
        queue=job.queue, state=job.state(), submit_time=job.submit_time, argv=sp["argv"], cwd=sp["cwd"],
        ntasks_min=sp["ntasks_min"], ntasks_max=sp["ntasks_max"], run_limit_s=sp.get("run_limit_s"),
        memory_limit_mb=sp.get("memory_limit_mb"), array_spec=sp.get("array_spec"),
        array_limit=sp.get("array_limit"), counts=counts,
        elements=[element_out(e) for e in job.elements.values()] if elements else [],
    )


def event_out(row) -> EventOut:
    t, jid, idx, kind, fs, ts, actor, reason = row
    return EventOut.model_construct(time=t, id=format_job_ref(jid, idx or 0) if idx is not None else str(jid),
                                    kind=kind, from_state=JobState(fs) if fs else None,
                                    to_state=JobState(ts) if ts else None, actor=actor, reason=reason)

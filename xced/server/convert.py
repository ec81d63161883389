"""Domain objects -> the wire form of `xced.api.models`, as plain dicts serialised with
orjson. Listings of 10,000 jobs must leave the daemon in well under 300 ms (bench), which
building and re-validating pydantic models did not allow; the field names and types are
exactly the models' (JobOut, ElementOut, EventOut), and the e2e tests validate the
daemon's answers against those models."""

from __future__ import annotations

import orjson
from fastapi import Response

from xced.model.jobs import ACTIVE, format_job_ref


def json_response(obj: object) -> Response:
    """`obj` as a JSON answer. Text that UTF-8 cannot encode (a lone surrogate, from a job an
    older version accepted with a byte that is not UTF-8) is sent as a JSON escape rather
    than failing the whole listing: one such job must not hide every other (D-8)."""
    try:
        body = orjson.dumps(obj)
    except TypeError:
        import json

        body = json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode()
    return Response(body, media_type="application/json")


def host_problem(e, hosts) -> str | None:
    """Why a running element's host is not ok (KEY-4: a revoked or expired key, a worker
    gone), from `hosts` (name -> HostState), or None: the element stays RUN meanwhile, its
    supervisor running on (JOB-8), until its host rejoins or SCHED-4 handles it as lost."""
    if hosts is None or not e.alloc or e.state not in ACTIVE:
        return None
    for h, _ in e.alloc:
        st = hosts.get(h)
        if st is not None and st.status != "ok":
            return f"host {h} is {st.status}" + (f": {st.status_reason}" if st.status_reason else "")
    return None


def _pend_reason(e, hosts):
    pr = e.pend_reason
    return {"main": pr.main, "hint": pr.hint, "hosts": [
        {"host": s.host, "resource": s.resource, "free": s.free, "needed": s.needed, "message": s.message}
        for s in pr.hosts]} if pr else None


#: ElementOut's fields in the model's order, each from (element, hosts)
_ELEMENT = {
    "id": lambda e, h: e.ref, "job_id": lambda e, h: e.job.id, "index": lambda e, h: e.index,
    "state": lambda e, h: e.state.value, "holds": lambda e, h: sorted(e.holds),
    "start_time": lambda e, h: e.start_time, "end_time": lambda e, h: e.end_time,
    "exit_code": lambda e, h: e.exit_code, "exit_signal": lambda e, h: e.exit_signal,
    "exit_reason": lambda e, h: e.exit_reason, "containment": lambda e, h: e.containment,
    "alloc": lambda e, h: [{"host": n, "slots": k} for n, k in e.alloc], "pend_reason": _pend_reason,
    "host_problem": lambda e, h: host_problem(e, h), "stdout": lambda e, h: None, "stderr": lambda e, h: None,
}


def element_dict(e, hosts=None) -> dict:
    """The ElementOut of element `e`; `hosts` (name -> HostState) gives its host_problem."""
    return {k: f(e, hosts) for k, f in _ELEMENT.items()}


def reserve_list(job) -> list[dict]:
    """JobOut.reserve: the job's effective rusage terms with method and total
    (xced.resreq.reserve_terms), counted with the tasks and hosts its element runs on once
    a plain job has started, else with its task range."""
    rr = job.resreq
    if rr is None or not (rr.rusage or rr.parts):
        return []
    from xced.resreq import reserve_terms

    eff = job.effective
    nmin, nmax, nhosts = eff.ntasks_min, eff.ntasks_max, None
    if not job.is_array and len(job.elements) == 1:
        alloc = next(iter(job.elements.values())).alloc
        if alloc:
            nmin = nmax = sum(n for _, n in alloc)
            nhosts = len(alloc)
    return [r.to_json() for r in reserve_terms(rr, nmin, nmax, nhosts)]


def _counts(job, x) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in job.elements.values():
        k = e.state.value
        counts[k] = counts.get(k, 0) + 1
    return counts


def _elements(job, x) -> list[dict]:
    if not x.elements:
        return []
    return [element_dict(e, x.hosts) for e in job.elements.values()]


#: JobOut's fields in the model's order, each from (job, what was asked: `_Asked`)
_JOB = {
    "job_id": lambda j, x: j.id, "name": lambda j, x: j.name, "user": lambda j, x: j.user,
    "run_as": lambda j, x: j.spec.run_as, "asserted_user": lambda j, x: j.spec.asserted,
    "queue": lambda j, x: j.queue, "project": lambda j, x: j.spec.project,
    "auth_basis": lambda j, x: j.spec.auth_basis, "app": lambda j, x: j.spec.app or None,
    "app_params": lambda j, x: j.effective.app_params, "state": lambda j, x: j.state().value,
    "submit_time": lambda j, x: j.submit_time, "argv": lambda j, x: list(j.spec.argv), "cwd": lambda j, x: j.spec.cwd,
    "ntasks_min": lambda j, x: j.effective.ntasks_min, "ntasks_max": lambda j, x: j.effective.ntasks_max,
    "run_limit_s": lambda j, x: j.effective.run_limit_s, "memory_limit_mb": lambda j, x: j.effective.memory_limit_mb,
    "array_spec": lambda j, x: j.spec.array_spec, "array_limit": lambda j, x: j.spec.array_limit,
    "resreq_requested": lambda j, x: list(j.spec.resreq), "resreq": lambda j, x: j.effective.resreq,
    "reserve": lambda j, x: reserve_list(j) if x.reserve else None, "dependency": lambda j, x: j.spec.dependency,
    "counts": _counts, "elements": _elements,
    "env": lambda j, x: dict(x.env) if x.env is not None else None, "umask": lambda j, x: j.spec.umask,
    "meta": lambda j, x: j.effective.exdata.get("meta") if isinstance(j.effective.exdata, dict) else None,
}


class _Asked:
    """What a job_dict call asked for, handed to each field's getter."""

    __slots__ = ("elements", "env", "hosts", "reserve")

    def __init__(self, elements, env, hosts, reserve) -> None:
        self.elements, self.env, self.hosts, self.reserve = elements, env, hosts, reserve


def job_dict(job, *, elements: bool = True, env: dict | None = None, hosts=None, reserve: bool = False) -> dict:
    """The JobOut of `job`; `env`: its environment, given only for who may see it (D-7);
    `hosts` (name -> HostState): say of each running element whose host is not ok why;
    `reserve`: give its rusage terms with method and total (`show`, `wait`; null in listings,
    which stay lean for 10,000 jobs)."""
    x = _Asked(elements, env, hosts, reserve)
    return {k: f(job, x) for k, f in _JOB.items()}


def _exec_host(e) -> str | None:
    if e is None or not e.alloc:
        return None
    return ":".join(f"{n}*{h}" if n > 1 else h for h, n in e.alloc)


def _job_name(j) -> str | None:
    spec = j.spec.array_spec
    return (j.name or "") + (spec[spec.index("["):] if spec else "") or None


def _ntasks(j, e) -> object:
    if e is not None and e.alloc:
        return sum(n for _, n in e.alloc)
    lo, hi = j.effective.ntasks_min, j.effective.ntasks_max
    return lo if lo == hi else f"{lo},{hi}"


def _reason(e, hosts) -> str | None:
    if e is None:
        return None
    return e.pend_reason.main if e.pend_reason else host_problem(e, hosts)


#: the cells of each listing field (xced.api.listing.FIELDS), from (job, its one element for
#: a plain job else None, hosts): the rules of the listing's module docstring
_CELLS = {
    "id": lambda j, e, h: j.id, "user": lambda j, e, h: j.user, "state": lambda j, e, h: j.state().value,
    "queue": lambda j, e, h: j.queue, "project": lambda j, e, h: j.spec.project,
    "run_as": lambda j, e, h: j.spec.run_as, "hosts": lambda j, e, h: _exec_host(e),
    "app": lambda j, e, h: j.spec.app or None, "name": lambda j, e, h: _job_name(j),
    "submit_time": lambda j, e, h: j.submit_time,
    "start_time": lambda j, e, h: e.start_time if e is not None else None,
    "end_time": lambda j, e, h: e.end_time if e is not None else None,
    "exit_code": lambda j, e, h: e.exit_code if e is not None else None, "ntasks": lambda j, e, h: _ntasks(j, e),
    "elements": lambda j, e, h: ",".join(f"{n} {s}" for s, n in sorted(_counts(j, None).items()))
    if j.spec.array_spec else None,
    "reason": lambda j, e, h: _reason(e, h),
}


def table_rows(jobs, cols: list[str], hosts=None) -> list[list[object]]:
    """The rows of a listing projected to `cols` (fields of xced.api.listing.FIELDS), one per
    job of `jobs`, each cell computed from the job itself (GET /jobs/table, issue 17): a
    listing of 10,000 jobs costs what its columns cost, not 10,000 JobOuts. `hosts` (name ->
    HostState) for PEND_REASON's host problems. Raises KeyError for an unknown field."""
    fns = [_CELLS[c] for c in cols]
    out = []
    for j in jobs:
        e = None
        if not j.is_array and len(j.elements) == 1:
            e = next(iter(j.elements.values()))
        out.append([f(j, e, hosts) for f in fns])
    return out


def event_dict(row) -> dict:
    t, jid, idx, kind, fs, ts, actor, reason = row[:8]
    return {"time": t, "id": format_job_ref(jid, idx) if idx is not None else str(jid), "kind": kind,
            "from_state": fs, "to_state": ts, "actor": actor, "reason": reason,
            "stimulus": row[8] if len(row) > 8 else None}

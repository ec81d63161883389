"""Domain objects -> the wire form of `xced.api.models`, as plain dicts serialised with
orjson. Listings of 10,000 jobs must leave the daemon in well under 300 ms (bench), which
building and re-validating pydantic models did not allow; the field names and types are
exactly the models' (JobOut, ElementOut, EventOut), and the e2e tests validate the
daemon's answers against those models."""

from __future__ import annotations

import orjson
from fastapi import Response

from xced.api.listing import one_line
from xced.model.jobs import ACTIVE, format_job_ref, resolve_output_path


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


def _json_bytes(obj: object) -> bytes:
    """`obj` as JSON bytes, as json_response sends it (a lone surrogate as a JSON escape)."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        import json

        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode()


class ListingCache:
    """The JSON of each plain job in GET /jobs, kept from one listing to the next (issue 17:
    `xcecli jobs -u all --json` over 10,000 pending jobs within 150 ms; building the 10,000
    JobOut dicts anew was about 110 ms of it, a hit costs about a tenth of that).

    An entry is used only while everything its JSON is made of is the same: the job and its
    element as objects (a reload or a requeue makes new ones), the job's effective values
    (replaced whole by a reconfiguration, never changed in place), and each field of the
    element that ElementOut shows (state, holds, times, exit, containment, pend reason,
    output paths, and the host problem of a running element, which the hosts' state
    decides). The records it reads are never changed in place: a transition gives an element
    new holds, alloc and pend reason objects (xced.model.state). Job arrays are not kept
    (their listing entry has no elements and counts them anew). At most MAX jobs are kept
    (about 1 KB each); beyond that the cache starts again, so a listing of more jobs than
    MAX costs what it did without it. Lives on the app (one per daemon)."""

    MAX = 20_000

    def __init__(self) -> None:
        #: job ID -> (the objects the entry was made from, its key, its JSON)
        self._entries: dict[int, tuple[tuple, tuple, bytes]] = {}

    def job_json(self, job, hosts) -> bytes:
        """The JobOut JSON of `job` as a listing gives it (no environment, no reserve)."""
        if job.is_array or len(job.elements) != 1:
            return _json_bytes(job_dict(job, elements=not job.is_array, hosts=hosts))
        for e in job.elements.values():
            break
        objs = (job, job.effective, e, e.pend_reason, e.holds, e.alloc, e.outputs)
        key = (e.state, e.start_time, e.end_time, e.exit_code, e.exit_signal, e.exit_reason, e.containment,
               host_problem(e, hosts) if e.alloc else None)
        hit = self._entries.get(job.id)
        if hit is not None and hit[1] == key and all(a is b for a, b in zip(hit[0], objs)):
            return hit[2]
        # copied to its own size: orjson's bytes keep the capacity of its working buffer (about
        # 8 KB here for 900 bytes of JSON), which 10,000 kept entries would hold on to
        body = memoryview(_json_bytes(job_dict(job, elements=True, hosts=hosts))).tobytes()
        if hit is None and len(self._entries) >= self.MAX:
            self._entries.clear()
        self._entries[job.id] = (objs, key, body)
        return body

    def listing(self, jobs, hosts) -> Response:
        """The GET /jobs answer over `jobs`: {"jobs": [JobOut, ...]}."""
        return Response(b'{"jobs":[' + b",".join([self.job_json(j, hosts) for j in jobs]) + b"]}",
                        media_type="application/json")


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


def element_dict(e, hosts=None) -> dict:
    """The ElementOut of element `e`; `hosts` (name -> HostState) gives its host_problem."""
    pr = e.pend_reason
    stdout, stderr = output_paths(e)
    return {
        "id": e.ref, "job_id": e.job.id, "index": e.index, "state": e.state.value, "holds": sorted(e.holds),
        "start_time": e.start_time, "end_time": e.end_time, "exit_code": e.exit_code,
        "exit_signal": e.exit_signal, "exit_reason": e.exit_reason, "containment": e.containment,
        "alloc": [{"host": h, "slots": n} for h, n in e.alloc],
        "pend_reason": {"main": pr.main, "hint": pr.hint, "hosts": [
            {"host": s.host, "resource": s.resource, "free": s.free, "needed": s.needed, "message": s.message}
            for s in pr.hosts]} if pr else None,
        "host_problem": host_problem(e, hosts), "stdout": stdout, "stderr": stderr,
    }


def output_paths(e) -> tuple[str | None, str | None]:
    """ElementOut.stdout/stderr (JOB-12): the files element `e` writes. Once it has started,
    the paths its supervisor opened (a -o DIR resolved to DIR/ID.out on the execution host,
    the job directory's own files when the job names none); before that, or when the daemon
    has restarted since, what the -o/-e text says (xced.model.jobs.resolve_output_path:
    %J, %I, %% expanded, DIR/ resolved, relative to the job's cwd), None for a stream the
    job names no file for. Without -e, stderr goes with stdout (LSF bsub -o)."""
    if e.outputs is not None:
        return e.outputs
    sp = e.job.spec
    out = resolve_output_path(sp.stdout, e.job.id, e.index, sp.cwd, "stdout") if sp.stdout else None
    err = resolve_output_path(sp.stderr, e.job.id, e.index, sp.cwd, "stderr") if sp.stderr else out
    return out, err


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


def job_dict(job, *, elements: bool = True, env: dict | None = None, hosts=None, reserve: bool = False) -> dict:
    """The JobOut of `job`; `env`: its environment, given only for who may see it (D-7);
    `hosts` (name -> HostState): say of each running element whose host is not ok why;
    `reserve`: give its rusage terms with method and total (`show`, `wait`; null in listings,
    which stay lean for 10,000 jobs)."""
    sp, eff = job.spec, job.effective
    counts = _counts(job)
    return {
        "job_id": job.id, "name": job.name, "user": job.user, "run_as": sp.run_as,
        "asserted_user": sp.asserted, "queue": job.queue, "project": sp.project, "auth_basis": sp.auth_basis,
        "app": sp.app or None,
        "app_params": eff.app_params, "state": job.state().value,
        "submit_time": job.submit_time, "argv": list(sp.argv), "cwd": sp.cwd, "ntasks_min": eff.ntasks_min,
        "ntasks_max": eff.ntasks_max, "run_limit_s": eff.run_limit_s,
        "memory_limit_mb": eff.memory_limit_mb, "array_spec": sp.array_spec,
        "array_limit": sp.array_limit, "resreq_requested": list(sp.resreq),
        "resreq": eff.resreq, "reserve": reserve_list(job) if reserve else None, "dependency": sp.dependency,
        "exclusive": sp.exclusive, "counts": counts,
        "elements": [element_dict(e, hosts) for e in job.elements.values()] if elements else [],
        "env": dict(env) if env is not None else None, "umask": sp.umask,
        "meta": eff.exdata.get("meta") if isinstance(eff.exdata, dict) else None,
    }


def _counts(job) -> dict[str, int]:
    """JobOut.counts: the job's elements by state."""
    if len(job.elements) == 1:  # a plain job (listings build 10,000 of these)
        for e in job.elements.values():
            return {e.state.value: 1}
    counts: dict[str, int] = {}
    for e in job.elements.values():
        k = e.state.value
        counts[k] = counts.get(k, 0) + 1
    return counts


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
    "elements": lambda j, e, h: ",".join(f"{n} {s}" for s, n in sorted(_counts(j).items()))
    if j.spec.array_spec else None,
    "reason": lambda j, e, h: _reason(e, h),
}


def _command(j) -> str:
    return one_line(j.spec.shown_command())  # a cell of one line (xced.api.listing.one_line)


def _lsf_name(j, e, command=_command, shown=one_line) -> str:
    """LSF's JOB_NAME (bsub -J, else the command line, as `command(j)` gives it); an array
    element's `name[index]`. The name as `shown` gives it: by default one_line's, so that a
    bidi override or a zero-width character in a -J name (printable to the daemon's
    checks, xced.model.jobs.first_control) is shown escaped in bjobs' columns, as it is in
    xcecli jobs', and cannot reorder or hide what the terminal shows."""
    if j.is_array:
        return f"{shown(j.name or '')}[{e.index}]" if e is not None else shown(_job_name(j) or '') or command(j)
    return shown(j.name) if j.name else command(j)


#: the host name FROM_HOST gives (xced.api.listing.LSF_FIELDS), found once
_FROM_HOST: list[str] = []


def _from_host() -> str:
    if not _FROM_HOST:
        import socket

        _FROM_HOST.append(socket.gethostname())
    return _FROM_HOST[0]


#: the cells of xced.api.listing.LSF_FIELDS (bjobs, CLI-8), as _CELLS
_LSF_CELLS = {
    "from_host": lambda j, e, h: _from_host(), "job_name": lambda j, e, h: _lsf_name(j, e),
    "command": lambda j, e, h: _command(j),
    "command_text": lambda j, e, h: j.spec.shown_command(),
    "job_name_text": lambda j, e, h: _lsf_name(j, e, lambda j: j.spec.shown_command(), str),
    "index": lambda j, e, h: (e.index if j.is_array else 0) if e is not None else None,
    "exit_reason": lambda j, e, h: e.exit_reason if e is not None else None,
    "exit_signal": lambda j, e, h: e.exit_signal if e is not None else None,
}

#: the cells that differ on a row per element (`per_element`): the element's own state and name
_ELEMENT_CELLS = {"state": lambda j, e, h: e.state.value,
                  "name": lambda j, e, h: f"{j.name or ''}[{e.index}]" if j.is_array else _job_name(j)}


def table_rows(jobs, cols: list[str], hosts=None, *, per_element: bool = False) -> list[list[object]]:
    """The rows of a listing projected to `cols` (fields of xced.api.listing.FIELDS and
    LSF_FIELDS), one per job of `jobs`, each cell computed from the job itself (GET
    /jobs/table, issue 17): a listing of 10,000 jobs costs what its columns cost, not 10,000
    JobOuts. With `per_element`, one row per element instead, by index (LSF's bjobs shows
    each element of an array as a row: CLI-8), its cells the element's (STAT its state,
    JOB_NAME `name[index]`). `hosts` (name -> HostState) for PEND_REASON's host problems.
    Raises KeyError for an unknown field."""
    cells = {**_CELLS, **_LSF_CELLS}
    if per_element:
        cells.update(_ELEMENT_CELLS)
    fns = [cells[c] for c in cols]
    out = []
    for j in jobs:
        if per_element and j.is_array:
            for i in sorted(j.elements):
                e = j.elements[i]
                out.append([f(j, e, hosts) for f in fns])
            continue
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

"""What `xcecli jobs` and `xcecli show` do once their command line is parsed (CLI-3), from the
daemon's plain JSON and with no parser library or model in it, so that the Typer commands
(xcecli.commands.jobs) and the start-up fast path (xcecli.fast, CLI-7) run the same code and
print the same bytes. Bad arguments raise xcecli.usage.Usage before anything is sent.
"""

from __future__ import annotations

import sys

from xcecli.usage import Usage


#: the most characters of a `jobs` filter (-u, -q, -P) or field list (-o): GET /jobs/table's bound
MAX_FILTER_TEXT = 1000


def job_ref(text: str) -> tuple[int, int | None]:
    """`123` -> (123, None), `123[4]` -> (123, 4) (xced.model.states.parse_job_ref). Raises
    Usage naming the forms it takes."""
    from xced.model.states import parse_job_ref

    try:
        return parse_job_ref(text)
    except ValueError as e:
        raise Usage(str(e)) from None


def jobs(client_of, *, user: str | None = None, queue: str | None = None, project: str | None = None,
         state: list[str] = (), all_: bool = False, fields: str | None = None, as_json: bool = False,
         ids: list[str] = ()) -> None:
    """`xcecli jobs` (LSF bjobs): your unfinished jobs and those that finished in the last
    hour, or those of `user` ("all": everyone's), `queue`, `project` and the `state`s given
    (each may hold several, space or comma separated; any case); `all_`: finished ones of any
    age. `ids` (`123`, `123[4]`): those jobs only, in that order, of any user, state and age
    (a job past the clean period is read back from the store, JOB-11), an element as its own
    row `123[4]` (LSF's `bjobs ID...`; the other filters still apply). `fields`: the `-o`
    columns (xced.api.listing.parse_fields). Prints a table of the columns the daemon
    computed (GET /jobs/table), or with `as_json` the GET /jobs answer as it came (with `ids`,
    a JobList of each job's GET /jobs/ID answer, an element's job with that element only).
    Raises Usage for an empty value, a malformed ID, an unknown state or field; NotFound,
    after printing the others, naming the jobs the cluster does not know; the daemon's
    typed errors otherwise (an unknown queue or user is refused, never an empty table). The
    request is retried while the daemon is away, up to XCE_CONNECT_TIMEOUT (a read is safe
    to repeat: JOB-10)."""
    from xced.model.states import JobState
    from xcecli.output import err

    for opt, val in (("-u", user), ("-q", queue), ("-P", project), ("-o", fields)):
        if val is None:
            continue
        if not val.strip():
            raise Usage(f"{opt} '': the value is empty")
        try:
            val.encode("utf-8")
        except UnicodeEncodeError as e:
            raise Usage(f"{opt}: a byte that is not UTF-8 at character {e.start + 1}; XCE takes UTF-8 text only") \
                from None
        if len(val) > MAX_FILTER_TEXT:
            raise Usage(f"{opt}: {len(val)} characters, more than the {MAX_FILTER_TEXT} a listing's filter or field "
                        f"list may have")
    states = []
    for s in state:
        for part in s.replace(",", " ").split():
            if part.upper() not in JobState.__members__:
                raise Usage(f"-s {part!r}: valid states are {', '.join(JobState.__members__)}")
            states.append(part.upper())
    from xced.api.listing import parse_fields

    try:
        cols = parse_fields(fields)
    except ValueError as e:
        raise Usage(f"-o: {e}") from None
    refs = [job_ref(t) for t in ids]
    if refs:
        return _jobs_by_id(client_of(), refs, cols, user=user, queue=queue, project=project, states=states,
                           as_json=as_json)
    client = client_of()
    if as_json:
        res = client.jobs_raw(user=user, queue=queue, states=states or None, all=all_, project=project,
                              on_lost=err)
        sys.stdout.buffer.write(res.body + b"\n")
        return
    # the daemon sends only these columns (GET /jobs/table, issue 17): a tenth of the bytes
    params = {"fields": " ".join(cols), "user": user, "queue": queue, "project": project,
              "state": states or None, "all": "true" if all_ else None}
    res = client.request_retried("GET", "/jobs/table", params={k: v for k, v in params.items() if v},
                                 on_lost=err)
    _print_rows(cols, res.json()["rows"])


def _print_rows(cols: list[str], rows: list[list]) -> None:
    from xced.api.listing import FIELDS, TIME_FIELDS
    from xcecli.output import table

    timed = [i for i, c in enumerate(cols) if c in TIME_FIELDS]
    if timed:
        from xcecli.output import fmt_time

        for r in rows:
            for i in timed:
                r[i] = fmt_time(r[i])
    table([FIELDS[f] for f in cols], rows)


def _jobs_by_id(client, refs: list[tuple[int, int | None]], cols: list[str], *, user, queue, project, states,
                as_json: bool) -> None:
    """`xcecli jobs ID...` (see `jobs`): the rows of `refs` in order, each once."""
    import json

    from xced.api.errors import NotFound
    from xcecli.output import err

    missing: list[str] = []
    if as_json:
        out = []
        for jid, idx in dict.fromkeys(refs):
            try:
                j = client.request_retried("GET", f"/jobs/{jid}", on_lost=err).json()
            except NotFound:
                missing.append(f"{jid}" if idx is None else f"{jid}[{idx}]")
                continue
            if idx is not None:
                j["elements"] = [e for e in j["elements"] if e["index"] == idx]
                if not j["elements"]:
                    missing.append(f"{jid}[{idx}]")
                    continue
            out.append(j)
        print(json.dumps({"jobs": out}, ensure_ascii=False, separators=(",", ":")))
    else:
        base = {"user": user, "queue": queue, "project": project, "state": states or None}
        base = {k: v for k, v in base.items() if v}
        want = list(dict.fromkeys(refs))
        plain = list(dict.fromkeys(j for j, i in want if i is None))
        elems = list(dict.fromkeys(j for j, i in want if i is not None))
        by_job: dict[int, list] = {}
        by_el: dict[tuple[int, int], list] = {}
        gone: set[int] = set()
        if plain:
            body = client.table({**base, "fields": " ".join(["id", *cols])}, plain, on_lost=err)
            for r in body["rows"]:
                by_job[r[0]] = r[1:]
            gone.update(body["missing"])
        if elems:
            body = client.table({**base, "fields": " ".join(["id", "index", *cols]), "elements": "true"}, elems,
                                on_lost=err)
            for r in body["rows"]:
                by_el[(r[0], r[1])] = r[2:]
            gone.update(body["missing"])
        rows = []
        for jid, idx in want:
            if idx is None:
                r = by_job.get(jid)
            else:
                r = by_el.get((jid, idx))
                if r is not None and "id" in cols:
                    r = list(r)
                    r[cols.index("id")] = f"{jid}[{idx}]"
            if r is not None:
                rows.append(r)
            elif jid in gone or idx is not None and not base:  # else left out by a filter, as in a listing
                missing.append(f"{jid}" if idx is None else f"{jid}[{idx}]")
        if rows or not missing:
            _print_rows(cols, rows)
    if missing:
        raise NotFound(f"job(s) not found: {', '.join(missing)}; `xcecli jobs -a -u all` lists the jobs the cluster "
                       f"knows")


def show(client_of, job: str, as_json: bool = False, verbose: bool = False) -> None:
    """`xcecli show JOB` (LSF bjobs -l): the job's request, who it runs as, and a row per
    element, from the daemon's GET /jobs/ID answer (a JobOut, read as plain JSON). `job` is
    `123` or `123[4]` (that element only). `as_json`: the JobOut itself, indented by 2, as
    the daemon sent it (its fields in the model's order; with `123[4]` only that element).
    Past xced.api.arrays.SUMMARY_OVER (100) elements, unless `verbose`, the elements are
    grouped: one row per state (and exit code, signal, reason) with its indices as runs
    (xced.api.arrays.element_rows; issue 17 part 4). Raises Usage for a malformed ID,
    NotFound for an unknown job or element."""
    import json

    jid, idx = job_ref(job)
    j = client_of().request("GET", f"/jobs/{jid}").json()
    els = j.get("elements") or []
    if idx is not None:
        els = [e for e in els if e["index"] == idx]
        if not els:
            from xced.api.errors import NotFound

            raise NotFound(f"job {jid} has no element {idx}")
        j["elements"] = els
    if as_json:
        print(json.dumps(j, indent=2, ensure_ascii=False))
        return
    import shlex

    from xcecli.output import fmt_duration, fmt_time, table

    params = j.get("app_params") or {}
    meta = j.get("meta")
    pr = meta.get("preset") if isinstance(meta, dict) else None
    lo, hi = j["ntasks_min"], j["ntasks_max"]
    lines = [
        ("Job", f"{j['job_id']}" + (f" ({j['name']})" if j.get("name") else "")),
        ("User", j["user"] + (" (asserted in test mode)" if j.get("asserted_user") else "")),
        ("Runs as", j["run_as"]),
        ("Queue", j["queue"]),
        ("Project", f"{j.get('project') or 'none'} (let in as: {j.get('auth_basis', 'direct')})"),
        ("Application", (j.get("app") or "none") + (" " + " ".join(f"{k}={v}" for k, v in params.items())
                                                    if params else "")),
        *([("Preset", f"{pr.get('name')} ({pr.get('hash')})")] if isinstance(pr, dict) else []),
        ("State", j["state"]),
        ("Command", shlex.join(j["argv"])),  # quoted: where each argument ends shows
        ("CWD", j["cwd"]),
        ("Tasks", (str(lo) if lo == hi else f"{lo},{hi}")
         + (f" (running with {sum(a['slots'] for a in els[0]['alloc'])})"
            if len(els) == 1 and els[0].get("alloc") and lo != hi else "")),
        ("Run limit", fmt_duration(j["run_limit_s"]) if j.get("run_limit_s") else "none"),
        ("Memory limit", f"{j['memory_limit_mb']} MB" if j.get("memory_limit_mb") else "none"),
        ("Submitted", fmt_time(j["submit_time"])),
    ]
    if j.get("resreq_requested") or j.get("resreq"):  # LSF bjobs -l: "Requested Resources" / "Effective RESREQ"
        lines.append(("Requested", " ".join(j.get("resreq_requested") or []) or "-"))
        lines.append(("Effective", j.get("resreq") or "-"))
    if j.get("reserve"):  # each rusage term with its method and the job's total (RES-2, issue 15)
        from xced.resreq import reserve_line

        lines += [("Reserves" if i == 0 else "", reserve_line({"unit": None, "exact": True, **r}, hi))
                  for i, r in enumerate(j["reserve"])]
    if j.get("dependency"):  # LSF bjobs -l: "Dependency Condition"
        lines.append(("Dependency", j["dependency"]))
    if j.get("exclusive"):  # -x (LSF bsub -x, docs/lsf-behaviour.md section 6)
        lines.append(("Exclusive", "yes: only on hosts where no other job runs; they take no other job meanwhile"))
    if len(els) == 1 and (els[0].get("stdout") or els[0].get("stderr")):  # JOB-12; LSF bjobs -l "Output File"
        lines.append(("Output", els[0].get("stdout") or "-"))
        lines.append(("Errors", els[0].get("stderr") or "-"))
    kept = sorted({e["containment"] for e in els if e.get("containment")})
    if kept:  # JOB-1: how the job's processes are kept together and ended with it
        lines.append(("Containment", ", ".join(kept)))
    if j.get("array_spec"):
        limit = j.get("array_limit")
        lines.append(("Array", j["array_spec"] + ("" if limit is None else f" (at most {limit} running)")))
        lines.append(("Elements", ", ".join(f"{n} {s}" for s, n in sorted((j.get("counts") or {}).items()))))
    from xced.api.listing import one_line

    for k, v in lines:  # a value's control characters escaped: a job's command never drives the terminal
        print(f"{k + ':' if k else '':<14}{one_line(str(v))}")
    from xced.api.arrays import SUMMARY_OVER

    if len(els) > SUMMARY_OVER and not verbose:  # grouped, not a row per element (issue 17 part 4)
        _grouped(j["job_id"], els)
        return
    rows = []
    for e in els:
        pend = e.get("pend_reason")
        why = e.get("exit_reason") or (pend["main"] if pend else None) or e.get("host_problem")
        hosts = " ".join(f"{a['host']}:{a['slots']}" for a in e.get("alloc") or []) or None
        rows.append([e["id"], e["state"], hosts, fmt_time(e.get("start_time")), fmt_time(e.get("end_time")),
                     e.get("exit_code"), e.get("exit_signal"), why])
    print()
    table(["ID", "STAT", "HOSTS", "START", "END", "EXIT", "SIGNAL", "REASON"], rows)
    if len(els) > 1 and any(e.get("stdout") or e.get("stderr") for e in els):  # each element's files (JOB-12)
        print()
        table(["ID", "OUTPUT", "ERRORS"], [[e["id"], e.get("stdout"), e.get("stderr")] for e in els])
    for e in els:
        pend = e.get("pend_reason")
        if pend and pend.get("hosts"):
            print(f"\n{e['id']} pending: {one_line(pend['main'])}")
            for h in pend["hosts"]:
                print(f"  {one_line(h['message'])}")


def _grouped(job_id: int, els: list[dict]) -> None:
    """`show`'s element table past 100 elements (issue 17 part 4, CLI-3): one row per group of
    elements alike (xced.api.arrays.element_rows), then each distinct host breakdown of
    pending elements once, under the elements it concerns."""
    from xced.api.arrays import SUMMARY_HEADERS, element_rows, group, ref
    from xcecli.output import table

    print()
    table(SUMMARY_HEADERS, element_rows(job_id, (
        (e["index"], e["state"], e.get("exit_code"), e.get("exit_signal"),
         e.get("exit_reason") or (e["pend_reason"]["main"] if e.get("pend_reason") else None) or e.get("host_problem"))
        for e in els)))
    pending = ((e["index"], (e["pend_reason"]["main"], tuple(h["message"] for h in e["pend_reason"]["hosts"])))
               for e in els if e.get("pend_reason") and e["pend_reason"].get("hosts"))
    for (main, msgs), _, runs in group(pending):
        print(f"\n{ref(job_id, runs)} pending: {main}")
        for m in msgs:
            print(f"  {m}")

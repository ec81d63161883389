"""What LSF's job control commands share (CLI-8): `bkill`, `bstop`, `bresume` and `brequeue`
read job IDs (`123`, `"123[4]"`, `0` for all of the caller's unfinished jobs, `-J NAME` for
those of that name), ask the daemon (POST /jobs/ID/ACTION, plain JSON: no pydantic on this
path, CLI-7) and print LSF's one line per job on stdout:

    Job <123> is being terminated            (bkill)
    Job <123> is being signaled              (bkill -s SIG)
    Job <123> is being stopped               (bstop)
    Job <123> is being resumed               (bresume)
    Job <123> is being requeued              (brequeue)

and for a job refused, LSF's `Job <ID>: REASON` on stderr: `Job <999>: No matching job
found` for a job the cluster does not know, `Job <123>: Job has already finished` for a
finished one (bkill), else the daemon's reason. Sources: the bkill, bstop, bresume and
brequeue pages of IBM's LSF 10.1 command reference (docs/lsf-behaviour.md section 5, [44],
[46], [51], [52]).

Exit codes: 0 when every job was acted on; 255 (LSF_FAILED) when any was refused or not
found, or for a usage error; 3 when the daemon cannot be reached (xcecli's funnel).
"""

from __future__ import annotations

import re
import sys

from xcecli.lsf.common import LSF_FAILED, LsfUsage

#: LSF's words for what each action does to a job: "Job <N> is being VERB"
BEING = {"kill": "terminated", "signal": "signaled", "stop": "stopped", "resume": "resumed", "requeue": "requeued"}


def client():
    """The API client of the environment (XCE_SOCKET, XCE_TOPDIR, XCE_TEST_USER ...), as
    xcecli makes it without --topdir (xced.api.client.Client.connect)."""
    from xced.api.client import Client

    return Client.connect()


#: a job argument: `123`, `123[LIST]` (ASCII digits only: no sign, space, `_` or other
#: script's digits, which Python's int() would take)
_JOB_ARG = re.compile(r"([0-9]{1,18})(?:\[([0-9,:\-]+)\])?")
#: one part of an index list: `START`, `START-END`, `START-END:STEP` (a step alone is read as before)
_INDEX_PART = re.compile(r"([0-9]{1,10})(?:-([0-9]{1,10}))?(?::([0-9]{1,10}))?")


def job_args(args: list[str]) -> list[tuple[int, list[int] | None, str]]:
    """The job arguments of bjobs, bkill, bstop, bresume and brequeue: `123` -> (123, None,
    "123"); `123[4]` and `123[1-3,5:2]`-style index lists -> (123, [indices], text). LSF's
    `"job_ID[index_list]"` (IBM bjobs.1 and bkill.1: "job_ID[index]"; an index list
    `start[-end[:step]],...` as in bsub -J), in ASCII digits. The elements an argument
    names are counted before any is listed, so an index list naming more than
    MAX_ELEMENTS is refused without being built. Raises LsfUsage `TEXT: Illegal job ID.`
    (LSF's words) naming the forms it takes, or naming the cap."""
    out = []
    for a in args:
        text = a.strip()
        m = _JOB_ARG.fullmatch(text)
        idx: list[int] | None = None
        ok = m is not None
        if m is not None and m.group(2) is not None:
            ranges, count = [], 0
            for part in m.group(2).split(","):
                pm = _INDEX_PART.fullmatch(part)
                if pm is None:
                    ok = False
                    break
                lo = int(pm.group(1))
                hi = int(pm.group(2)) if pm.group(2) else lo
                st = int(pm.group(3)) if pm.group(3) else 1
                if hi < lo or st < 1:
                    ok = False
                    break
                count += (hi - lo) // st + 1
                if count > MAX_ELEMENTS:
                    raise LsfUsage(f"{a}: names more than {MAX_ELEMENTS} array elements")
                ranges.append((lo, hi, st))
            if ok:
                idx = [i for lo, hi, st in ranges for i in range(lo, hi + 1, st)]
        if not ok or m is None:
            raise LsfUsage(f"{a}: Illegal job ID. A job ID is a number (123), an array element 123[4], or "
                           f"elements \"123[1-10:2,15]\"")
        out.append((int(m.group(1)), idx, text))
    return out


def job_id(text: str) -> tuple[int, int | None]:
    """One job or array element (bpeek, bhist): `123` -> (123, None), `123[4]` -> (123, 4).
    Raises LsfUsage "TEXT: Illegal job ID." (LSF's words; job_args) naming the forms it
    takes, also for an index list naming more than one element."""
    [(jid, idx, _)] = job_args([text])
    if idx is not None and len(idx) != 1:
        raise LsfUsage(f"{text}: Illegal job ID here: this command takes one job (123) or one array element "
                       f"(\"123[4]\"), not a list of elements")
    return jid, idx[0] if idx is not None else None


#: the states of an unfinished job or element (LSF's CUR_JOB: PEND, PSUSP, RUN, USUSP)
UNFINISHED = ("PEND", "PSUSP", "RUN", "USUSP")
#: the states of a finished one (LSF's DONE_JOB)
FINISHED = ("DONE", "EXIT")


def _hosts_of(cell: object) -> set[str]:
    """The host names of an EXEC_HOST cell ("2*h1:h2" -> {"h1", "h2"}; None -> none)."""
    return {part.partition("*")[2] or part for part in str(cell or "").split(":") if part}


def where(queue: str | None = None, host: str | None = None, app: str | None = None) -> str:
    """What LSF appends to "No unfinished job found" for the filters given (OpenLava's
    lsbatch/cmd/cmd.err.c, jobInfoErr: " in queue <Q>", " on host/group <H>", joined by
    "> and "); `app` (IBM bkill.1's -app, which OpenLava lacks) in XCE's words " with
    application profile <A>"."""
    parts = [f"in queue <{queue}"] if queue is not None else []
    if host is not None:
        parts.append(f"on host/group <{host}")
    if app is not None:
        parts.append(f"with application profile <{app}")
    return " " + "> and ".join(parts) + ">" if parts else ""


def none_found(name: str | None, states: tuple[str, ...], queue: str | None = None, host: str | None = None,
               app: str | None = None) -> str:
    """LSF's words when a selection finds no job (OpenLava cmd.err.c, jobInfoErr): `Job <NAME>
    is not found` for -J NAME, else `No unfinished job found` (unfinished states), `No
    pending job found`, `No running job found`, `No suspended job found` (bkill -stat pend,
    run, susp), `No DONE/EXIT job found` (finished ones: brequeue -d/-e), or `No job found`
    (both: brequeue -a), each followed by `where`."""
    w = where(queue, host, app)
    if name is not None:  # a -J pattern as given, its control characters escaped (one line, no terminal escapes)
        from xced.api.listing import one_line

        return f"Job <{one_line(name)}> is not found{w}"
    if set(states) <= set(FINISHED):
        return f"No DONE/EXIT job found{w}"
    for only, words in ((("PEND",), "pending"), (("RUN",), "running"), (("PSUSP", "USUSP"), "suspended")):
        if tuple(states) == only:  # bkill -stat (OpenLava's cmd.err.c words for bjobs -p, -r, -s)
            return f"No {words} job found{w}"
    if set(states) & set(FINISHED):
        return f"No job found{w}"
    return f"No unfinished job found{w}"


def matching(c, *, user: str | None = None, queue: str | None = None, host: str | None = None,
             app: str | None = None, name: str | None = None,
             states: tuple[str, ...] = UNFINISHED) -> dict[int, tuple[list[int], int]]:
    """The jobs a selection names, by job ID in ID order (so the last is the most recently
    submitted): job ID -> (the indices of its elements that match, 0 for a plain job; how
    many elements it has). An element matches when its state is one of `states` and, for
    each filter given: it belongs to `user` (None: the caller; "all": everyone), is in
    `queue`, runs on `host` (one of its EXEC_HOST hosts: LSF's "jobs dispatched to the
    host"), was submitted with application profile `app`, and its job name matches `name`
    (`*` a wildcard, as bjobs -J; an array element's name without its `[INDEX]`). One GET
    /jobs/table. Raises LsfUsage with the daemon's words for an unknown user or queue."""
    import fnmatch

    from xced.api.errors import InvalidRequest

    params: dict[str, object] = {"fields": "id index state name hosts app", "state": list(states),
                                 "elements": "true"}
    if user is not None:
        params["user"] = user
    if queue is not None:
        params["queue"] = queue
    try:
        r = c.request_retried("GET", "/jobs/table", params=params).json()
    except InvalidRequest as e:
        raise LsfUsage(e.message) from None
    cols = r["fields"]
    i_id, i_idx, i_st, i_name, i_hosts, i_app = (cols.index(f) for f in ("id", "index", "state", "name", "hosts",
                                                                         "app"))
    out: dict[int, tuple[list[int], int]] = {}
    for row in r["rows"]:
        jid = int(str(row[i_id]).partition("[")[0])
        got, total = out.get(jid, ([], 0))
        out[jid] = (got, total + 1)
        if row[i_st] not in states:
            continue
        if host is not None and host not in _hosts_of(row[i_hosts]):
            continue
        if app is not None and row[i_app] != app:
            continue
        if name is not None:
            full = str(row[i_name] or "")
            if not (fnmatch.fnmatchcase(full.partition("[")[0], name) or fnmatch.fnmatchcase(full, name)):
                continue
        got.append(int(row[i_idx] or 0))
    return {j: v for j, v in sorted(out.items()) if v[0]}


def unknown_host(c, host: str) -> None:
    """Raises LsfUsage `HOST: Bad host name, host group name or cluster name` (LSF's words for
    lsberrno LSBE_BAD_HOST) listing the cluster's hosts, when the cluster has no host `host`."""
    names = [h["name"] for h in c.request_retried("GET", "/hosts").json()["hosts"]]
    if host not in names:
        raise LsfUsage(f"{host}: Bad host name, host group name or cluster name; the hosts are: {', '.join(names)}")


def unfinished(c, name: str | None = None) -> list[int]:
    """The caller's unfinished jobs (PEND, PSUSP, RUN, USUSP), oldest first; with `name`, only
    those whose job name matches it (`*` a wildcard, as bjobs -J). matching()'s job IDs."""
    return list(matching(c, name=name))


#: the most array elements one command line may name through index lists
MAX_ELEMENTS = 100_000

#: a target of a job action: (job ID, None for the whole job / one element index / several
#: element indices of an array, the reference as printed: "12", "12[3]", "12[1-3,7]")
Target = tuple[int, "int | list[int] | None", str]

#: what bkill says when given neither a job ID nor a filter (OpenLava lsbatch/cmd/cmd.sig.c,
#: "Job ID or one of '-m', '-u' '-q' and '-J' must be specified"; IBM bkill.1: "You must
#: specify a job ID or the -app, -g, -J, -m, -u, or -q option")
NO_TARGET = ("Job ID or one of '-m', '-u', '-q', '-J' and '-app' must be specified (0 with them for every job they "
             "match, 0 alone for all of your unfinished jobs)")


def _ref(jid: int, idx: "int | list[int] | None") -> str:
    """How a target is printed: `12`, `12[3]`, `12[1-3,7]`."""
    if idx is None:
        return str(jid)
    if isinstance(idx, int):
        return f"{jid}[{idx}]"
    from xced.api.arrays import format_runs, runs_of

    return f"{jid}[{format_runs(runs_of(idx))}]"


def _narrowed(jid: int, got: list[int], total: int, per_element: bool) -> Target:
    """The target for the matching elements `got` of a job of `total` elements: the whole job
    when all match (or when not `per_element`), else that element or those elements."""
    if not per_element or len(got) == total:
        return jid, None, str(jid)
    idx: int | list[int] = got[0] if len(got) == 1 else got
    return jid, idx, _ref(jid, idx)


def targets(c, args: list[str], name: str | None, lists: bool = True, *, user: str | None = None,
            queue: str | None = None, host: str | None = None, app: str | None = None,
            states: tuple[str, ...] = UNFINISHED, last_by_default: bool = False) -> list[Target]:
    """The jobs a command line names (Target). `"ID[INDEX_LIST]"` names those elements
    (`lists`; job_args, as bjobs reads it; without `lists` one element only, job_id), each
    once. Job IDs are taken as they are, whatever the filters (LSF: OpenLava's getJobIds
    returns the IDs given before it looks at -u, -q, -m, -J). `0` (alone or among IDs) is
    every job that the filters match (matching(): `user`, `queue`, `host`, `app`, `name`,
    in `states`); no ID with a filter is the most recently submitted job they match (IBM
    bkill.1: "If you specify the -app, -g, -J, -m, -u, or -q option without a job ID, the
    bkill command kills the last job that was submitted by the user who ran the command.
    Specify job ID 0 to kill multiple jobs."); no ID and no filter is that job too with
    `last_by_default` (brequeue.1: "By default, the brequeue command kills and requeues your
    most recently submitted job when no job ID is specified"), else the usage error
    NO_TARGET (as bkill, bstop and bresume say it). A job the filters match is acted on
    whole, unless `host` is given or `states` is not UNFINISHED: then only its matching
    elements (an array's elements run on different hosts and end in different states).
    Raises LsfUsage: no target, more than MAX_ELEMENTS elements, an unknown user, queue or
    host, and none_found() when the filters match nothing."""
    filtered = any(x is not None for x in (name, user, queue, host, app))
    if not args and not filtered and not last_by_default:
        raise LsfUsage(NO_TARGET)
    refs: list[tuple[int, int | list[int] | None]] = []
    if lists:
        seen: set[tuple[int, int]] = set()
        count = 0
        for jid, idx, text in job_args(args):
            if idx is None:
                refs.append((jid, None))
                continue
            fresh = [i for i in dict.fromkeys(idx) if (jid, i) not in seen]
            count += len(fresh)
            if count > MAX_ELEMENTS:
                raise LsfUsage(f"{text}: names more than {MAX_ELEMENTS} array elements in all")
            seen.update((jid, i) for i in fresh)
            if fresh:
                refs.append((jid, fresh[0] if len(fresh) == 1 else fresh))
    else:
        refs = list(job_id(a) for a in args)
    out: list[Target] = []
    if any(j == 0 and i is None for j, i in refs) or not refs:
        found = matching(c, user=user, queue=queue, host=host, app=app, name=name, states=states)
        if not found:
            if host is not None:
                unknown_host(c, host)
            raise LsfUsage(none_found(name, states, queue, host, app))
        per_element = host is not None or states != UNFINISHED
        picks = list(found.items()) if refs else list(found.items())[-1:]
        out += [_narrowed(j, got, total, per_element) for j, (got, total) in picks]
    for j, i in refs:
        if j == 0 and i is None:
            continue
        out.append((j, i, _ref(j, i)))
    return out


def in_states(c, refs: list[Target], states: tuple[str, ...], hint) -> tuple[list[Target], list[str]]:
    """`refs` narrowed to their elements in `states` (brequeue's -d, -e, -r, -a classes; LSF
    passes them to mbatchd with the job IDs, OpenLava lsbatch/cmd/brequeue.c), by one GET
    /jobs/table of their IDs: a job whose elements all are in `states` stays whole, one with
    some is narrowed to those, and one with none is left out with the line to print for it
    (`Job <REF>: ` + `hint(state)`). A job the cluster does not know stays, so the action
    says it is not found."""
    ids = list(dict.fromkeys(j for j, _, _ in refs))
    if not ids:
        return refs, []
    r = c.table({"fields": "id index state", "user": "all", "elements": "true"}, ids)
    cols = r["fields"]
    i_id, i_idx, i_st = cols.index("id"), cols.index("index"), cols.index("state")
    el: dict[int, dict[int, str]] = {}
    for row in r["rows"]:
        el.setdefault(int(str(row[i_id]).partition("[")[0]), {})[int(row[i_idx] or 0)] = str(row[i_st])
    kept: list[Target] = []
    refused: list[str] = []
    for jid, idx, ref in refs:
        have = el.get(jid)
        if have is None:
            kept.append((jid, idx, ref))
            continue
        asked = list(have) if idx is None else [idx] if isinstance(idx, int) else idx
        asked = [i for i in asked if i in have] or asked  # an index the job lacks: the action names it
        if any(i not in have for i in asked):
            kept.append((jid, idx, ref))
            continue
        got = [i for i in asked if have[i] in states]
        if not got:
            st = sorted({have[i] for i in asked})
            refused.append(f"Job <{ref}>: {hint(st)}")
        elif len(got) == len(asked):
            kept.append((jid, idx, ref))
        else:
            part: int | list[int] = got[0] if len(got) == 1 else got
            kept.append((jid, part, _ref(jid, part)))
    return kept, refused


def _reason(action: str, e) -> str:
    """LSF's words for a refusal where LSF has them (`No matching job found`, `Job has
    already finished`), else the daemon's message."""
    code = getattr(e, "code", "")
    if code == "not_found":
        return "No matching job found"
    if action in ("kill", "signal") and code == "conflict" and "already finished" in e.message:
        return "Job has already finished"
    return e.message



def action_body(index: int | None, signal: str | None = None, record_done: bool = False,
                force: bool = False, comment: str | None = None) -> dict[str, object]:
    """The body of a job action (POST /jobs/ID/kill, stop, resume, requeue): the element
    `index` (None: the whole job), and for a kill its `signal` (bkill -s), `record_done`
    (bkill -d), `force` (bkill -r) and `comment` (bkill -C), each sent only when given
    (KillRequest). Shared by the LSF commands and `xcecli kill/stop/resume/requeue`."""
    body: dict[str, object] = {"index": index} if index is not None else {}
    if signal is not None:
        body["signal"] = signal
    if record_done:
        body["record_done"] = True
    if force:
        body["force"] = True
    if comment is not None:
        body["comment"] = comment
    return body

def _one(c, prog: str, action: str, jid: int, idx: int | None, ref: str, body: dict[str, object],
         signal: str | None, skip_refused: bool = False, tally: dict[str, int] | None = None) -> bool:
    """Ask for `action` on job `jid` (element `idx`) and print LSF's line for it (module
    docstring); True when it was acted on, or when it was refused as SKIPPABLE and
    `skip_refused` (bkill -b with 0, bkill -stat: skipped silently); `tally["acted"]`
    counts the jobs acted on. A daemon that cannot be reached raises."""
    from xced.api.errors import XceError

    try:
        res = c.request("POST", f"/jobs/{jid}/{action}", json={**body, **({"index": idx} if idx is not None else {})}
                        ).json()
    except XceError as e:
        if e.exit_code == 3:
            raise
        if skip_refused and e.code in SKIPPABLE:
            return True
        print(f"Job <{ref}>: {_reason('signal' if signal else action, e)}", file=sys.stderr)
        return False
    if tally is not None:
        tally["acted"] += 1
    print(f"Job <{ref}> is being {_verb(action, signal, res)}")
    return True


def _verb(action: str, signal: str | None, res: dict) -> str:
    """LSF's verb for an action's answer: `terminated`, `requeued` ...; with a signal
    `signaled`, or `stopped` / `resumed` for STOP, TSTP and CONT (KillRequest)."""
    if signal is None:
        return BEING[action]
    msg = res.get("message", "")
    return BEING["stop" if msg.startswith("stopped") else "resume" if msg.startswith("resumed") else "signal"]


#: the most targets `act` sends in one POST /jobs/kill (the daemon takes up to 10,000)
KILL_BATCH = 2000
#: the refusals bkill -b (with 0) and bkill -stat skip silently, "the jobs that LSF cannot kill"
#: (IBM bkill.1): a job that has finished meanwhile or is not in a state to take it (conflict),
#: and another user's (forbidden). A job the cluster does not know is still named (not_found):
#: it is not a job that cannot be killed, but a wrong ID
SKIPPABLE = ("conflict", "forbidden")
#: the codes of a refusal inside a POST /jobs/kill answer that end the command with exit 3, as
#: the error itself would (the store failed: xced.api.errors.StoreBusy, StoreUnavailable)
UNREACHABLE_CODES = ("store_busy", "store_unavailable")


def kill_many(c, pairs: list[tuple[int, int | None]], base: dict[str, object], full: bool = False) -> list[dict]:
    """One POST /jobs/kill of `pairs` ((job ID, element index or None), at most KILL_BATCH)
    with the kill options of `base` (action_body): the answers, one per pair in order, a
    refused one with `refused` set (refusal_error reads it). Raises the API's errors for the
    request as a whole (422 for the options, 503, unreachable)."""
    targets = [{"job_id": j} if i is None else {"job_id": j, "index": i} for j, i in pairs]
    return c.request("POST", "/jobs/kill", json={**base, "targets": targets},
                     params={"full": "true"} if full else None).json()["results"]


def refusal_error(refused: dict):
    """The API's typed error for a target refused inside a POST /jobs/kill answer (its code
    and reason), as the one-job route would have raised it: its exit_code says what the
    command exits with (3 for a store that failed)."""
    from xced.api.errors import from_body

    return from_body(400, {"error": {"code": refused["code"], "message": refused["reason"]}})


def _kill_batch(c, batch: list[Target], base: dict[str, object], signal: str | None, skip_refused: bool,
                tally: dict[str, int] | None = None) -> int:
    """Kill `batch` (whole jobs and single elements) in one POST /jobs/kill and print LSF's
    line for each, in order, as `_one` prints it; 0, or LSF_FAILED when any was refused
    (and not `skip_refused`). Nothing for an empty batch. Raises LsfUsage when the daemon
    refuses the request whole (422: the options, such as a -C reason that is not one line)."""
    if not batch:
        return 0
    from xced.api.errors import InvalidRequest

    try:
        results = kill_many(c, [(j, i) for j, i, _ in batch], base)  # type: ignore[misc]
    except InvalidRequest as e:  # the options themselves (a -C with a newline): a usage error, exit 255
        raise LsfUsage(e.message) from None
    rc = 0
    for (jid, idx, ref), res in zip(batch, results):
        refused = res.get("refused")
        if refused is not None and refused["code"] in UNREACHABLE_CODES:  # the store failed: exit 3, as one kill
            raise refusal_error(refused)
        if refused is None:
            if tally is not None:
                tally["acted"] += 1
            print(f"Job <{ref}> is being {_verb('kill', signal, res)}")
        elif not (skip_refused and refused["code"] in SKIPPABLE):
            print(f"Job <{ref}>: {_reason('signal' if signal else 'kill', refusal_error(refused))}", file=sys.stderr)
            rc = LSF_FAILED
    return rc


def act(prog: str, action: str, refs: list[Target], c, *, signal: str | None = None,
        record_done: bool = False, force: bool = False, extra: dict[str, object] | None = None,
        skip_refused: bool = False, comment: str | None = None, batched: bool = False,
        tally: dict[str, int] | None = None) -> int:
    """Ask for `action` (kill, stop, resume, requeue) on each of `refs` and print LSF's line
    for each job or element (module docstring); `signal` (a name or number, bkill -s) turns a
    kill into that signal; `record_done` (bkill -d) records the jobs a kill ends DONE, `force`
    (bkill -r) removes them at once, EXIT, their processes killed after, and `comment`
    (bkill -C) is recorded with each kill (KillRequest);
    `extra` goes into each body as it is (brequeue -H's `hold`). Several elements of one
    array (`"12[1,3,5-7]"`) go in one request (JobAction.indices, with ?full=true so every
    element acted on is named): each is printed `Job <12[1]> is being terminated`, in the
    order given; an element the request left alone (a finished one) is then asked on its own,
    so that its refusal is LSF's line for it, and when the daemon refuses the list whole (an
    index the array lacks, nothing left to act on) each element is asked on its own. With
    `skip_refused` (bkill -b with 0, bkill -stat: "silently skips the jobs that LSF cannot
    kill", IBM bkill.1) a refusal of SKIPPABLE prints nothing and fails nothing (an unknown
    job is still named). A kill sends its whole jobs and single elements up to KILL_BATCH
    to a request (POST /jobs/kill, _kill_batch), so `bkill 0` over thousands of jobs is a
    few requests; index lists go as above (`batched`: this call is for those alone).
    `tally["acted"]`, when given, counts the jobs and elements acted on. Returns 0, or
    LSF_FAILED when any was refused; a daemon that cannot be reached raises (exit 3
    through the funnel)."""
    from xced.api.errors import XceError

    rc = 0
    base = {**action_body(None, signal, record_done, force, comment), **(extra or {})}
    if action == "kill" and not batched:  # whole jobs and single elements go many to a request (POST /jobs/kill)
        batch: list[Target] = []
        for ref in refs:
            listed = isinstance(ref[1], list)
            if listed or len(batch) >= KILL_BATCH:  # what came before is answered first: lines stay in order
                rc = max(rc, _kill_batch(c, batch, base, signal, skip_refused, tally))
                batch = []
            if listed:
                rc = max(rc, act(prog, action, [ref], c, signal=signal, record_done=record_done, force=force,
                                 extra=extra, skip_refused=skip_refused, comment=comment, batched=True, tally=tally))
            else:
                batch.append(ref)
        return max(rc, _kill_batch(c, batch, base, signal, skip_refused, tally))
    for jid, idx, ref in refs:
        if not isinstance(idx, list):
            rc = rc if _one(c, prog, action, jid, idx, ref, base, signal, skip_refused, tally) else LSF_FAILED
            continue
        try:
            res = c.request("POST", f"/jobs/{jid}/{action}", params={"full": "true"},
                            json={**base, "indices": idx}).json()
        except XceError as e:
            if e.exit_code == 3:
                raise
            left, done = idx, set()
        else:
            done = set(res.get("affected") or [])
            left = [i for i in idx if f"{jid}[{i}]" not in done]
            verb = _verb(action, signal, res)
            for i in idx:
                if f"{jid}[{i}]" in done:
                    if tally is not None:
                        tally["acted"] += 1
                    print(f"Job <{jid}[{i}]> is being {verb}")
        for i in left:
            rc = rc if _one(c, prog, action, jid, i, f"{jid}[{i}]", base, signal, skip_refused, tally) else LSF_FAILED
    return rc

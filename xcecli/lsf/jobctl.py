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

import sys

from xcecli.lsf.common import LSF_FAILED, LsfUsage

#: LSF's words for what each action does to a job: "Job <N> is being VERB"
BEING = {"kill": "terminated", "signal": "signaled", "stop": "stopped", "resume": "resumed", "requeue": "requeued"}


def client():
    """The API client of the environment (XCE_SOCKET, XCE_TOPDIR, XCE_TEST_USER ...), as
    xcecli makes it without --topdir (xced.api.client.Client.connect)."""
    from xced.api.client import Client

    return Client.connect()


def job_args(args: list[str]) -> list[tuple[int, list[int] | None, str]]:
    """The job arguments of bjobs, bkill, bstop, bresume and brequeue: `123` -> (123, None,
    "123"); `123[4]` and `123[1-3,5:2]`-style index lists -> (123, [indices], text). LSF's
    `"job_ID[index_list]"` (IBM bjobs.1 and bkill.1: "job_ID[index]"; an index list
    `start[-end[:step]],...` as in bsub -J). Raises LsfUsage `TEXT: Illegal job ID.` (LSF's
    words) naming the forms it takes."""
    out = []
    for a in args:
        text = a.strip()
        head, _, rest = text.partition("[")
        try:
            jid = int(head) if head.isdigit() and len(head) <= 18 else -1
            idx = None
            if rest:
                if not rest.endswith("]"):
                    raise ValueError
                idx = []
                for part in rest[:-1].split(","):
                    rng, _, step = part.partition(":")
                    lo, _, hi = rng.partition("-")
                    lo_i = int(lo)
                    hi_i = int(hi) if hi else lo_i
                    st = int(step) if step else 1
                    if lo_i < 0 or hi_i < lo_i or st < 1 or hi_i - lo_i > 10**7:
                        raise ValueError
                    idx.extend(range(lo_i, hi_i + 1, st))
        except ValueError:
            jid = -1
        if jid < 0:
            raise LsfUsage(f"{a}: Illegal job ID. A job ID is a number (123), an array element 123[4], or "
                           f"elements \"123[1-10:2,15]\"")
        out.append((jid, idx, text))
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


def unfinished(c, name: str | None = None) -> list[int]:
    """The caller's unfinished jobs (PEND, PSUSP, RUN, USUSP), oldest first; with `name`, only
    those whose job name matches it (`*` a wildcard, as bjobs -J)."""
    import fnmatch

    r = c.request_retried("GET", "/jobs/table", params={"fields": "id state name",
                                                         "state": ["PEND", "PSUSP", "RUN", "USUSP"]}).json()
    cols = r["fields"]
    i_id, i_name = cols.index("id"), cols.index("name")
    out = []
    for row in r["rows"]:
        if name is not None and not fnmatch.fnmatchcase(str(row[i_name] or ""), name):
            continue
        jid = int(str(row[i_id]).partition("[")[0])
        if jid not in out:
            out.append(jid)
    return sorted(out)


#: the most array elements one command line may name through index lists
MAX_ELEMENTS = 100_000


def targets(c, args: list[str], name: str | None, lists: bool = True) -> list[tuple[int, int | None, str]]:
    """The jobs a command line names: (job ID, element index or None, the reference as
    printed). `"ID[INDEX_LIST]"` names each element of the list (`lists`; job_args, as
    bjobs reads it; without `lists` one element only, job_id). `0` (alone or among IDs) is
    every unfinished job of the caller (matching `-J NAME` when given); `-J NAME` without
    IDs is the caller's last submitted unfinished job of that name, as LSF's bkill does.
    Raises LsfUsage for no job at all, for lists naming over MAX_ELEMENTS elements, and
    "No unfinished job found" / "No matching job found" (LSF's words) when 0 or -J finds none."""
    if not args and name is None:
        raise LsfUsage("give a job ID, \"ID[INDEX]\", 0 for all of your unfinished jobs, or -J NAME")
    if lists:
        refs: list[tuple[int, int | None]] = []
        for jid, idx, text in job_args(args):
            if idx is None:
                refs.append((jid, None))
                continue
            if len(refs) + len(idx) > MAX_ELEMENTS:
                raise LsfUsage(f"{text}: names more than {MAX_ELEMENTS} array elements in all")
            refs += [(jid, i) for i in dict.fromkeys(idx)]
    else:
        refs = [job_id(a) for a in args]
    out: list[tuple[int, int | None, str]] = []
    if any(j == 0 and i is None for j, i in refs) or (not refs and name is not None):
        found = unfinished(c, name)
        if not found:
            raise LsfUsage("No unfinished job found" if name is None else f"Job <{name}>: No matching job found")
        if refs:
            out += [(j, None, str(j)) for j in found]
        else:
            out.append((found[-1], None, str(found[-1])))
    for j, i in refs:
        if j == 0 and i is None:
            continue
        out.append((j, i, f"{j}[{i}]" if i is not None else str(j)))
    return out


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
                force: bool = False) -> dict[str, object]:
    """The body of a job action (POST /jobs/ID/kill, stop, resume, requeue): the element
    `index` (None: the whole job), and for a kill its `signal` (bkill -s), `record_done`
    (bkill -d) and `force` (bkill -r), each sent only when given (KillRequest). Shared by
    the LSF commands and `xcecli kill/stop/resume/requeue`."""
    body: dict[str, object] = {"index": index} if index is not None else {}
    if signal is not None:
        body["signal"] = signal
    if record_done:
        body["record_done"] = True
    if force:
        body["force"] = True
    return body

def act(prog: str, action: str, refs: list[tuple[int, int | None, str]], c, *, signal: str | None = None,
        record_done: bool = False, force: bool = False) -> int:
    """Ask for `action` (kill, stop, resume, requeue) on each of `refs` and print LSF's line
    for each (module docstring); `signal` (a name or number, bkill -s) turns a kill into that
    signal; `record_done` (bkill -d) records the jobs a kill ends DONE, `force` (bkill -r)
    removes them at once, EXIT, their processes killed after (KillRequest). Returns
    0, or LSF_FAILED when any job was refused; a daemon that cannot be reached raises (exit 3
    through the funnel)."""
    from xced.api.errors import XceError

    rc = 0
    for jid, idx, ref in refs:
        body = action_body(idx, signal, record_done, force)
        try:
            res = c.request("POST", f"/jobs/{jid}/{action}", json=body).json()
        except XceError as e:
            if e.exit_code == 3:
                raise
            print(f"Job <{ref}>: {_reason('signal' if signal else action, e)}", file=sys.stderr)
            rc = LSF_FAILED
            continue
        verb = BEING[action]
        if signal is not None:  # STOP, TSTP and CONT are a stop and a resume (KillRequest)
            msg = res.get("message", "")
            verb = BEING["stop" if msg.startswith("stopped") else "resume" if msg.startswith("resumed") else "signal"]
        print(f"Job <{ref}> is being {verb}")
    return rc

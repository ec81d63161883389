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


def job_id(text: str) -> tuple[int, int | None]:
    """An LSF job ID argument: `123` -> (123, None), `123[4]` -> (123, 4). Raises LsfUsage
    "TEXT: Illegal job ID." (LSF's words) naming the forms it takes."""
    t = text.strip()
    head, br, tail = t.partition("[")
    try:
        if not head.isdigit() or len(head) > 18:
            raise ValueError
        if br:
            if not tail.endswith("]") or not tail[:-1].isdigit() or len(tail) > 12:
                raise ValueError
            return int(head), int(tail[:-1])
        return int(head), None
    except ValueError:
        raise LsfUsage(f"{text}: Illegal job ID. A job ID is a number (123) or an array element "
                       f"(\"123[4]\")") from None


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


def targets(c, args: list[str], name: str | None) -> list[tuple[int, int | None, str]]:
    """The jobs a command line names: (job ID, element index or None, the reference as
    printed). `0` (alone or among IDs) is every unfinished job of the caller (matching `-J
    NAME` when given); `-J NAME` without IDs is the caller's last submitted unfinished job of
    that name, as LSF's bkill does. Raises LsfUsage for no job at all, and "No unfinished
    job found" / "No matching job found" (LSF's words) when 0 or -J finds none."""
    if not args and name is None:
        raise LsfUsage("give a job ID, \"ID[INDEX]\", 0 for all of your unfinished jobs, or -J NAME")
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


def act(prog: str, action: str, refs: list[tuple[int, int | None, str]], c, *, signal: str | None = None,
        record_done: bool = False) -> int:
    """Ask for `action` (kill, stop, resume, requeue) on each of `refs` and print LSF's line
    for each (module docstring); `signal` (a name or number, bkill -s) turns a kill into that
    signal; `record_done` (bkill -d) records the jobs a kill ends DONE (KillRequest). Returns
    0, or LSF_FAILED when any job was refused; a daemon that cannot be reached raises (exit 3
    through the funnel)."""
    from xced.api.errors import XceError

    rc = 0
    for jid, idx, ref in refs:
        body: dict[str, object] = {"index": idx} if idx is not None else {}
        if signal is not None:
            body["signal"] = signal
        if record_done:
            body["record_done"] = True
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

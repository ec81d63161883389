"""Following a job's output as it grows: `xcecli peek -f` and `bpeek -f` (CLI-3, CLI-8; LSF's
`bpeek -f`, which runs `tail -f` on the job's output: IBM's LSF 10.1 command reference,
https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bpeek.1.html).

Plain JSON and the light client only (no pydantic, rich or typer: CLI-7), so that `bpeek`
stays on the LSF commands' start-up budget.
"""

from __future__ import annotations

import sys
import time

#: the most of the output one read returns (the output route's own bound, 16 MiB)
CAP = 16 * 2**20
#: how the output route's answer starts when it is cut (its first line says how much is not shown)
CUT = "<< the first "
#: seconds between two reads while following
POLL_S = 0.3


def _element_state(c, job_id: int, index: int | None) -> str:
    """The state of the job (a plain job) or of element `index` of an array, as the daemon
    has it now (GET /jobs/ID, plain JSON)."""
    job = c.request_retried("GET", f"/jobs/{job_id}").json()
    if index is None:
        return job["state"]
    return next((e["state"] for e in job["elements"] if e["index"] == index), job["state"])


def read(c, job_id: int, index: int | None, stream: str) -> str | None:
    """The element's output so far (the last CAP bytes from a line boundary; when cut, its
    first line is the daemon's `<< the first N bytes are not shown: output over 16 MiB >>`),
    or None when it has none yet (it has not started: the daemon's InvalidRequest "has no
    stdout yet"). Raises InvalidRequest when its file could not be read (the reason in it)."""
    from xced.api.errors import InvalidRequest

    params: dict[str, object] = {"stream": stream, "max_bytes": CAP}
    if index is not None:
        params["index"] = index
    try:
        return c.request("GET", f"/jobs/{job_id}/output", params=params).text
    except InvalidRequest as e:
        if "yet" in e.message:
            return None
        raise


def follow(c, job_id: int, index: int | None, stream: str = "stdout", out=None, poll: float = POLL_S) -> int:
    """Print the element's output so far, then what it writes next, until it ends (DONE or
    EXIT), as `tail -f` would; returns 0. While it pends, waits for it to start. Whole lines
    are printed while it runs (a line still being written waits for its end), the rest once
    it has ended. The output is read whole each time, so following stops, with a line on
    stderr naming the file to follow instead, once it passes CAP (16 MiB: the daemon's
    answer then starts with its `<< the first N bytes are not shown ... >>` line). Raises the
    daemon's errors (NotFound for an unknown job ...)."""
    out = out or sys.stdout
    shown = 0
    while True:
        state = _element_state(c, job_id, index)
        ended = state in ("DONE", "EXIT")
        text = read(c, job_id, index, stream)
        if text is not None:
            if text.startswith(CUT) and shown:
                print(f"peek -f: the output of job {job_id} passed 16 MiB; follow its output file itself "
                      f"(tail -f)", file=sys.stderr)
                return 0
            upto = len(text) if ended else text.rfind("\n") + 1
            if upto > shown:
                out.write(text[shown:upto])
                out.flush()
                shown = upto
        if ended:
            return 0
        time.sleep(poll)

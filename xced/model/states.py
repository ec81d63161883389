"""Job states and job references: the part of the job domain (xced.model.jobs) that the CLI's
start-up fast path needs (CLI-7), in a module that imports only `re` and `enum`.

Pure: no I/O.
"""

from __future__ import annotations

import re
from enum import StrEnum


class JobState(StrEnum):
    """Job states of D-5, spelled as LSF spells them."""

    PEND = "PEND"
    PSUSP = "PSUSP"
    RUN = "RUN"
    USUSP = "USUSP"
    DONE = "DONE"
    EXIT = "EXIT"


_JOBREF_RE = re.compile(r"^([0-9]{1,18})(?:\[([0-9]{1,10})\])?$")


def parse_job_ref(text: str) -> tuple[int, int | None]:
    """`"123"` -> (123, None); `"123[4]"` -> (123, 4). Raises ValueError otherwise."""
    m = _JOBREF_RE.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a job ID; expected a number like 123 or an array element like 123[4]")
    return int(m.group(1)), (int(m.group(2)) if m.group(2) is not None else None)

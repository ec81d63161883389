"""Job states and job references: the part of the job domain (xced.model.jobs) that the CLI's
start-up fast path needs (CLI-7), in a module that imports only `re`, `enum` and the
bounds of xced.model.units.

Pure: no I/O.
"""

from __future__ import annotations

import re
from enum import StrEnum

from xced.model.units import MAX_KILL_COMMENT


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


def first_control(text: str) -> str | None:
    """The first character of `text` that would break a one-line listing, or None: a C0
    control (newline, tab, ESC; U+0000-U+001F), DEL, a C1 control (U+0080-U+009F: NEL
    breaks a line, CSI starts a terminal escape) or a Unicode line or paragraph separator
    (U+2028, U+2029, which line-based readers split on). A job name or a reason is one
    line of `bjobs` and `xcecli jobs` (LSF bsub -J: a name is shown on one line)."""
    for c in text:
        o = ord(c)
        if o < 32 or 127 <= o < 160 or o in (0x2028, 0x2029):
            return c
    return None


def one_line_error(text: str, what: str, instead: str, cap: int | None = None) -> str | None:
    """What is wrong with `text` as a reason a user gives that every user who may see it then
    reads on one line (a host's close reason, a kill's reason), or None: a control character
    (first_control), a blank text (it says `instead`), or more than `cap` characters. `what`
    names it ("the kill reason")."""
    bad = first_control(text)
    if bad is not None:
        return f"{what} holds a control character ({bad!r}); give one line of text, without newlines, tabs or escapes"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes of another encoding, as Python hands them on (surrogates)
        return f"{what} is not UTF-8 text; give it in UTF-8"
    if not "".join(c for c in text if c.isprintable()).strip():  # spaces, or only invisible ones (U+202E)
        return f"{what} is blank (or only invisible characters); give a few words, or {instead}"
    if cap is not None and len(text) > cap:
        return f"{what} has {len(text)} characters, more than the {cap} it may have"
    return None


def kill_comment_error(text: str) -> str | None:
    """What is wrong with `text` as a kill's reason (bkill -C, xcecli kill -C; at most
    MAX_KILL_COMMENT characters of one line), or None (one_line_error)."""
    return one_line_error(text, "the kill reason", "leave it out", MAX_KILL_COMMENT)

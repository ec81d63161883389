"""Signals a user may send to a job (`bkill -s SIG`, `xcecli kill -s SIG`; CLI-3, CLI-8).

LSF's `bkill -s` takes a signal by name or by number (`bkill -s USR1 123`, `bkill -s 9 123`;
https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bkill.1.html, docs/lsf-behaviour.md
section 5). Pure: no I/O, only the standard library's `signal` table of this platform, so the
CLIs (on their start-up budget, CLI-7) and the daemon read a signal alike.
"""

from __future__ import annotations

import signal as _signal

#: the signals a job may be sent, by number -> LSF's name (without the SIG prefix), in
#: number order: the classic Unix signals this platform has (1..31 on Linux)
NAMES: dict[int, str] = {}
for _s in sorted(_signal.Signals, key=int):
    _n = _s.name
    if _n.startswith("SIG") and not _n.startswith(("SIGRT", "SIG_")) and int(_s) not in NAMES:
        NAMES[int(_s)] = _n[3:]
del _s, _n
_BY_NAME = {n: k for k, n in NAMES.items()}
#: the names a signal may also go by (POSIX's SIGIOT is SIGABRT, SIGPOLL SIGIO, SIGCLD SIGCHLD)
_ALIASES = {"IOT": "ABRT", "POLL": "IO", "CLD": "CHLD"}


def valid() -> str:
    """The valid signals for a message: "HUP (1), INT (2), ..., SYS (31); or the number"."""
    return ", ".join(f"{n} ({k})" for k, n in NAMES.items()) + "; a name may start with SIG"


def parse_signal(text: str) -> tuple[int, str]:
    """A signal by name (`USR1`, `SIGUSR1`, `usr1`) or number (`10`) -> (number, "SIGUSR1").
    Raises ValueError naming `text` and listing the valid signals (`valid()`) for anything
    else: an unknown name, a number that is no signal here, 0, a negative number, a blank."""
    word = text.strip()
    if word.isdigit() and len(word) <= 3:
        num = int(word)
        if num in NAMES:
            return num, "SIG" + NAMES[num]
    else:
        name = word.upper()
        name = name[3:] if name.startswith("SIG") else name
        name = _ALIASES.get(name, name)
        if name in _BY_NAME:
            return _BY_NAME[name], "SIG" + name
    raise ValueError(f"signal {text!r}: not a signal; give a name or a number: {valid()}")

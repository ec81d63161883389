"""Parsers and formatters for the units admins and users type (DESIGN "Conventions").

Pure functions, no I/O; the config compiler and the CLIs share them. Internally
memory is in MB (1 GB = 1024 MB) and time in seconds.

Every parser raises ValueError whose message says what was given and what
would be valid, ready to be shown to a human after a "NAME: " prefix.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "DEFAULT_MAX_ARRAY_SIZE",
    "MAX_ARRAY_INDEX",
    "MAX_ARRAY_SIZE_SETTING",
    "MAX_CONFIG_REQUEST_BYTES",
    "MAX_DEPENDENCY_CONDITIONS",
    "MAX_DEPENDENCY_DEPTH",
    "MAX_DEPENDENCY_LENGTH",
    "MAX_APP_PARAMS",
    "MAX_ENV_VARS",
    "MAX_EXDATA_DEPTH",
    "MAX_EXDATA_ITEMS",
    "MAX_PACK_JOBS",
    "MAX_PACK_REQUEST_BYTES",
    "MAX_REQUEST_BYTES",
    "MAX_RESREQ_ALTERNATIVES",
    "MAX_RESREQ_STRINGS",
    "MAX_QUEUE_TEXT",
    "MAX_NAME_TEXT",
    "MAX_HOOK_TEXT",
    "MAX_SCRIPT_TEXT",
    "MAX_RESREQ_TERMS",
    "MAX_SELECT_DEPTH",
    "MEMORY_FORMS",
    "RUN_LIMIT_FORMS",
    "SECONDS_FORMS",
    "format_duration",
    "format_memory",
    "parse_memory_mb",
    "parse_run_limit_s",
    "parse_seconds",
]

#: What `parse_memory_mb` accepts, for messages.
MEMORY_FORMS = "an integer number of MB or a number with a unit KB, MB, GB or TB (e.g. 512, 4GB)"
#: What `parse_run_limit_s` accepts, for messages.
RUN_LIMIT_FORMS = '[hours:]minutes (e.g. 10, 1:30) or a number with a unit s, m, h or d (e.g. 90s, 2h)'
#: What `parse_seconds` accepts, for messages.
SECONDS_FORMS = "a number of seconds or a number with a unit ms, s, m, h or d (e.g. 10, 0.5, 500ms, 2m, 1h30m)"

_MEM_FACTOR_MB = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
_MEM_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)

_TIME_FACTOR_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_LSF_MINUTES_RE = re.compile(r"^\s*([0-9]+)\s*$")
_LSF_HOURS_MINUTES_RE = re.compile(r"^\s*([0-9]+):([0-9]+)\s*$")
_UNIT_ONE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ms|s|m|h|d)\s*$", re.IGNORECASE)
_UNIT_COMPOUND_RE = re.compile(r"^\s*(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?\s*$", re.IGNORECASE)
_BARE_NUMBER_RE = re.compile(r"^\s*[+-]?([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*$")


def _shown(text: object) -> str:
    if isinstance(text, str):
        return f'"{text}"'
    return repr(text)


def _is_bool(value: object) -> bool:
    # ruamel's ScalarBoolean is an int subclass, not a bool: compare by name too.
    return isinstance(value, bool) or type(value).__name__ == "ScalarBoolean"


#: Upper bounds that keep every number inside 64 bits and sane (bad input gets a clear
#: error rather than an overflow deep inside): 10 years, 1 PB, a million slots.
MAX_RUN_LIMIT_S = 10 * 365 * 86400
MAX_MEMORY_MB = 2**30
MAX_SLOTS = 1_000_000
MAX_RESOURCE = 1e12
MAX_INTERVAL_S = 86400.0
#: the longest clean_period (LSF CLEAN_PERIOD): a year, seconds
MAX_CLEAN_PERIOD_S = 365 * 86400.0
#: the default clean_period: finished jobs leave memory an hour after they end (LSF's default)
DEFAULT_CLEAN_PERIOD_S = 3600.0
#: the default host_lost_grace (SCHED-4): two minutes, longer than a worker restart plus rejoin
DEFAULT_HOST_LOST_GRACE_S = 120.0
#: seconds, default of pend_reason_update (xce.yaml): a session's reasons that a later
#: dispatch of the same session may have made wrong are made again this long after it
#: (LSF refreshes pend reasons on an interval too, PEND_REASON_UPDATE_INTERVAL)
DEFAULT_PEND_REASON_UPDATE_S = 5.0
#: D-4: the scheduler's coalescing delay may not pass 10 ms.
MAX_SCHED_DELAY_S = 0.010
#: the longest a request waits for a store another process has locked (D-8), seconds
MAX_STORE_BUSY_TIMEOUT_S = 600.0
#: the most failed starts and declined dispatches in a row an admin may allow (DISPATCH-2)
MAX_DISPATCH_FAILURES = 1000

# --------------------------------------------------------------------------- request bounds
# D-8: every request is bounded in size and in the work it can cause. Each cap below is
# checked where the text is parsed (the pydantic bodies of xced.api.models, the resreq and
# dependency parsers, the array spec), and a request over one is refused with a message
# naming it. The README documents each next to the option it bounds.

#: the largest request body the API server reads, bytes; a larger one is answered 413
#: `too_large` (xced.api.errors.PayloadTooLarge) and never parsed. 1 MiB holds a job's
#: environment many times over (execve itself takes at most ~2 MiB of argv and env on Linux).
MAX_REQUEST_BYTES = 1 << 20
#: the largest body of a cluster admin's `PUT /config` (`xceadmin build --apply`), bytes: a
#: compiled config of tens of thousands of hosts fits (anyone else's is held to
#: MAX_REQUEST_BYTES, so only an admin can make the daemon parse more)
MAX_CONFIG_REQUEST_BYTES = 8 << 20
#: a pack submit (`POST /jobs/pack`, `xcecli submit --pack FILE`, LSF's `bsub -pack`; CLI-7):
#: the largest body, bytes, anyone may send there (the environment once, then each job's own
#: options: 64 MiB holds 100,000 jobs of a few hundred bytes each), and the most jobs in one
#: pack (all are checked, then committed in one transaction, while the daemon waits)
MAX_PACK_REQUEST_BYTES = 64 << 20
MAX_PACK_JOBS = 100_000
#: the most jobs (or single elements) one many-job kill names (POST /jobs/kill; bkill 0 sends
#: 2,000 at a time)
MAX_KILL_JOBS = 10_000
#: the most characters of a kill's reason (bkill -C kill_reason, xcecli kill -C)
MAX_KILL_COMMENT = 1024
#: the most terms in one job's resource requirement, all its -R strings together: each
#: select operand (a name, number, string or defined()), rusage item, order key, same name
#: and each part of a compound or alternative requirement counts one (RES-1)
MAX_RESREQ_TERMS = 1000
#: the most -R strings one job may give
MAX_RESREQ_STRINGS = 64
#: the longest -q and -a values, -J and -P text, and the job's own -E/-Ep commands
#: (characters): bounds of the submit body, which the client holds presets to as well
MAX_QUEUE_TEXT = 256
MAX_NAME_TEXT = 4096
MAX_HOOK_TEXT = 65536
#: the longest job script a submit carries (characters): a script read from standard input
#: (`bsub < job.lsf`, `xcecli submit < job.lsf`; JOB-12), kept with the job
MAX_SCRIPT_TEXT = 512 * 1024
#: the most rusage `||` alternatives in one rusage[] section, and the most parts of one
#: compound (`N*{...} + ...`) or alternative (`{...} || {...}`) requirement: the planner
#: tries each in turn for every pending job in every session
MAX_RESREQ_ALTERNATIVES = 32
#: the deepest nesting of a select expression a user or admin writes: a value is one
#: level, each '(', '!' or '-' prefix and each arithmetic or comparison operator around it
#: adds one (`a + b + c` is three), and a chain of && or || adds one however long
MAX_SELECT_DEPTH = 32
#: a -w dependency expression (JOB-5): its length in characters, its conditions and its
#: nesting of '(' and '!'
MAX_DEPENDENCY_LENGTH = 4096
MAX_DEPENDENCY_CONDITIONS = 1000
MAX_DEPENDENCY_DEPTH = 100
#: job arrays (JOB-4): the default of the admin setting `max_array_size` (xce.yaml), as
#: LSF's MAX_JOB_ARRAY_SIZE defaults to 1000; the largest value an admin may set (a submit
#: makes one store row per element, so an array's submit costs time linear in its size);
#: the largest index (LSF's)
DEFAULT_MAX_ARRAY_SIZE = 1000
MAX_ARRAY_SIZE_SETTING = 1_000_000
MAX_ARRAY_INDEX = 2_147_483_646
#: the JSON side record of a submit (exdata, MERGE-4): deepest nesting of objects and
#: arrays (the store writes it as JSON, whose encoder recurses), and the most values in it
#: (each key, value and array element counts one)
MAX_EXDATA_DEPTH = 32
MAX_EXDATA_ITEMS = 4096
#: the most variables in a submit's environment (a login shell has a few hundred), and the
#: most --app-param values: a megabyte of tiny entries costs the daemon far more than a
#: megabyte of a few long ones
MAX_ENV_VARS = 4096
MAX_APP_PARAMS = 256

#: names of clusters, queues and hosts (CFG-2)
#: the largest config file `xceadmin build` reads, bytes (D-8): far more than any real
#: cluster's (20,000 projects fit in about 1 MB)
MAX_CONFIG_BYTES = 64 * 2**20

NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
#: a host name (hosts.yaml, a worker's join, a trusted key): a letter or digit first, never
#: "." or "-" (RFC 1123 host names start with one; ".." would read as a path)
HOST_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}"
HOST_FORM = "a host name is a letter or digit, then letters, digits, '_', '.' and '-' (at most 255)"
NAME_FORM = "letters, digits, '_', '.' and '-'"
#: names of consumable resources (RES-2: gpu, licenses)
RESOURCE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
RESOURCE_FORM = "a letter or '_' followed by letters, digits and '_'"


def parse_memory_mb(text: str | int) -> int:
    """Memory size to whole MB: a bare integer is MB; KB, MB, GB, TB suffixes
    (case-insensitive; K/M/G/T and KiB-style spellings also accepted), with
    1 GB = 1024 MB. Fractions of a MB round up ("512KB" -> 1). Must be > 0."""
    if _is_bool(text) or not isinstance(text, (str, int)):
        raise ValueError(f"expected {MEMORY_FORMS}, got {_shown(text)}")
    if isinstance(text, int):
        if text <= 0:
            raise ValueError(f"memory must be greater than 0, got {int(text)}")
        if text > MAX_MEMORY_MB:
            raise ValueError(f"memory of {int(text)} MB is more than the largest accepted, {MAX_MEMORY_MB} MB (1 PB)")
        return int(text)
    m = _MEM_RE.match(text)
    if not m:
        if text.strip().startswith("-"):
            raise ValueError(f"memory must be greater than 0, got {_shown(text)}")
        raise ValueError(f"expected {MEMORY_FORMS}, got {_shown(text)}")
    number, unit = m.group(1), (m.group(2) or "").lower()
    if not unit:
        if "." in number:
            raise ValueError(
                f"a memory size without a unit is whole MB; got {_shown(text)}, "
                f"expected {MEMORY_FORMS}"
            )
        factor: float = 1
    elif unit == "b":
        raise ValueError(f"memory in bytes is not accepted, got {_shown(text)}; expected {MEMORY_FORMS}")
    else:
        factor = _MEM_FACTOR_MB[unit[0]]
    value = float(number) * factor
    if value > MAX_MEMORY_MB:
        raise ValueError(f"memory {_shown(text)} is more than the largest accepted, {MAX_MEMORY_MB} MB (1 PB)")
    mb = math.ceil(value)
    if mb <= 0:
        raise ValueError(f"memory must be greater than 0, got {_shown(text)}")
    return mb


def parse_run_limit_s(text: str | int) -> int:
    """Run limit to whole seconds, LSF `-W` style: `[hours:]minutes` ("10" ->
    600, "1:30" -> 5400; a bare int is minutes), or with a unit: "90s", "30m",
    "2h", "1d", "1h30m". Zero, negative or garbage raise ValueError."""
    if _is_bool(text) or not isinstance(text, (str, int)):
        raise ValueError(f"expected {RUN_LIMIT_FORMS}, got {_shown(text)}")
    if isinstance(text, int):
        text = str(int(text))
    seconds: float
    if m := _LSF_MINUTES_RE.match(text):
        seconds = int(m.group(1)) * 60
    elif m := _LSF_HOURS_MINUTES_RE.match(text):
        hours, minutes = int(m.group(1)), int(m.group(2))
        if minutes >= 60:
            raise ValueError(
                f"in hours:minutes the minutes must be 0..59, got {_shown(text)}; "
                f"expected {RUN_LIMIT_FORMS}"
            )
        seconds = hours * 3600 + minutes * 60
    elif (m := _UNIT_ONE_RE.match(text)) and m.group(2).lower() != "ms":
        seconds = float(m.group(1)) * _TIME_FACTOR_S[m.group(2).lower()]
    elif (m := _UNIT_COMPOUND_RE.match(text)) and any(m.groups()):
        d, h, mi, s = (int(g or 0) for g in m.groups())
        seconds = d * 86400 + h * 3600 + mi * 60 + s
    else:
        if text.strip().startswith("-"):
            raise ValueError(f"a run limit must be greater than 0, got {_shown(text)}")
        raise ValueError(f"expected {RUN_LIMIT_FORMS}, got {_shown(text)}")
    if seconds != int(seconds):
        raise ValueError(f"a run limit is whole seconds, got {_shown(text)}")
    if seconds <= 0:
        raise ValueError(f"a run limit must be greater than 0, got {_shown(text)}")
    if seconds > MAX_RUN_LIMIT_S:
        raise ValueError(f"a run limit is at most 10 years ({MAX_RUN_LIMIT_S // 3600} hours), got {_shown(text)}")
    return int(seconds)


def parse_seconds(text: str | int | float) -> float:
    """A duration in seconds as a float: a bare number is seconds ("10", 0.5),
    or a number with a unit ms, s, m, h, d ("500ms", "2m"), or whole units together as
    format_duration writes them ("1h30m", "1d12h"). Negative values and
    garbage raise ValueError; zero is returned (callers check their own range)."""
    if _is_bool(text) or not isinstance(text, (str, int, float)):
        raise ValueError(f"expected {SECONDS_FORMS}, got {_shown(text)}")
    if isinstance(text, (int, float)):
        value = float(text)
    elif _BARE_NUMBER_RE.match(text):
        value = float(text)
    elif m := _UNIT_ONE_RE.match(text):
        value = float(m.group(1)) * _TIME_FACTOR_S[m.group(2).lower()]
    elif (m := _UNIT_COMPOUND_RE.match(text)) and any(m.groups()):  # "1h30m", as format_duration writes
        d, h, mi, s = (int(g or 0) for g in m.groups())
        value = float(d * 86400 + h * 3600 + mi * 60 + s)
    else:
        raise ValueError(f"expected {SECONDS_FORMS}, got {_shown(text)}")
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"expected {SECONDS_FORMS}, got {_shown(text)}")
    if value < 0:
        raise ValueError(f"a duration cannot be negative, got {_shown(text)}")
    return value


def format_duration(seconds: int | float) -> str:
    """Seconds for humans, compact and parseable back: 0 -> "0s", 90 -> "1m30s",
    5400 -> "1h30m", 90000 -> "1d1h", 0.25 -> "250ms", 2.5 -> "2.5s"."""
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 1 and seconds != 0:
        return f"{round(seconds * 1000):d}ms"
    if seconds < 60 and seconds != int(seconds):
        return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"
    total = int(round(seconds))
    if total == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, total = divmod(total, size)
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts)


def format_memory(mb: int | float) -> str:
    """MB for humans: 512 -> "512MB", 4096 -> "4GB", 1536 -> "1.5GB"."""
    for unit, size in (("TB", 1024 * 1024), ("GB", 1024)):
        if mb >= size:
            value = mb / size
            text = f"{value:.1f}".rstrip("0").rstrip(".")
            return f"{text}{unit}"
    return f"{int(mb) if mb == int(mb) else mb}MB"

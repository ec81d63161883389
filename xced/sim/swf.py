"""Standard Workload Format (SWF) reader for the simulator (SPEC SIM-1).

Pure and standalone: the standard library only, no I/O besides reading the one file.

The format (tests/data/README.md, after the Parallel Workloads Archive):

- Lines whose first non-blank character is ``;`` are header comments.  ``; Key: value``
  lines are collected into a dict (``MaxProcs``, ``MaxNodes``, ``UnixStartTime``, ...).
  An indented comment line that is not ``Key: value`` continues the previous key's value (the
  archive wraps long notes that way); a repeated key (``Queue:`` lines) keeps every
  value.  Continued and repeated values are joined with ``"\\n"``.
- Blank lines are skipped.
- Every other line is one job: exactly 18 whitespace-separated numbers, -1 for unknown.

Conversion to simulator jobs (:func:`read_swf`), the rule behind the published KTH-SP2
reference result (Gaussier, Glesser, Reis and Trystram, SC'15, pyss; tests/data/README.md):

- processors = requested processors (field 8), or allocated processors (field 5) when
  field 8 is unknown (-1; any value <= 0 is treated as unknown);
- estimate = requested time (field 9), in seconds;
- duration = run time (field 4) clamped to the requested time: ``min(run, requested)``.

A job is dropped for the first of these reasons that holds (:data:`DROP_REASONS`):

1. ``"more processors than the machine"``: processors > the machine's size;
2. ``"no processors"``: processors <= 0 (fields 5 and 8 both unknown or zero);
3. ``"no run time"``: run time (field 4) <= 0, i.e. unknown (-1) or zero; a job that ran
   for 0 s gives the simulator nothing to run;
4. ``"no requested time"``: requested time (field 9) <= 0 (unknown), unless
   ``missing_estimate="run_time"``, which keeps the job and uses its run time as its
   estimate (for synthetic traces such as the Lublin model's, which have no estimates).

On KTH-SP2-1996-2.1-cln.swf this keeps 28,481 of 28,489 jobs, as the reference says: the
8 dropped jobs all have run time 0 (none asks for more than 100 processors, none lacks a
requested time); 475 run times are clamped.

The machine's size is the ``procs`` argument when given, else the ``MaxProcs`` header,
else the ``MaxNodes`` header (lublin_256.swf has only ``MaxNodes: 256``), else an error
asking for ``--procs N``.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import zlib
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DROP_REASONS",
    "FIELD_NAMES",
    "SimJob",
    "SwfError",
    "SwfJob",
    "SwfTrace",
    "read_swf",
    "read_swf_records",
]

#: The 18 SWF fields, in file order (field N is ``FIELD_NAMES[N - 1]``).
FIELD_NAMES: tuple[str, ...] = (
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_procs",
    "avg_cpu_time",
    "used_memory_kb",
    "requested_procs",
    "requested_time",
    "requested_memory_kb",
    "status",
    "user_id",
    "group_id",
    "executable",
    "queue",
    "partition",
    "preceding_job",
    "think_time",
)
_NFIELDS = len(FIELD_NAMES)
# Fields 6 and 7 (average CPU time, used memory) are measurements: archives write them
# with decimals (alea_hpc2n.swf: "223.29"), so they stay floats.  All others are counts,
# ids or whole seconds and are rounded to int when written with decimals.
_FLOAT_FIELDS = frozenset({5, 6})  # 0-based indexes

DROP_MORE_PROCS = "more processors than the machine"
DROP_NO_PROCS = "no processors"
DROP_NO_RUN_TIME = "no run time"
DROP_NO_REQUESTED_TIME = "no requested time"
#: Why a job is dropped, in the order the rules are tried (the first that holds counts).
DROP_REASONS: tuple[str, ...] = (DROP_MORE_PROCS, DROP_NO_PROCS, DROP_NO_RUN_TIME, DROP_NO_REQUESTED_TIME)

_GZIP_MAGIC = b"\x1f\x8b"
#: the largest time (s) or count an SWF field may hold here: about 3,000 years
MAX_VALUE = 10 ** 11
#: fields that may be written with decimals and are rounded (times, requested memory);
#: counts, IDs and processors must be whole (0-based indexes)
_ROUNDED_FIELDS = frozenset({1, 2, 3, 8, 9, 17})
_TOKEN = re.compile(r"\S+")


class SwfError(ValueError):
    """A trace that cannot be read: the message names ``FILE:LINE`` (or ``FILE``), what is
    wrong, and what would be valid.  Bad input never raises anything else."""


@dataclass(slots=True)
class SwfJob:
    """One SWF job line, all 18 fields as written (-1 = unknown).

    Times are seconds, memory is KB per processor, processors are counts.
    ``avg_cpu_time`` and ``used_memory_kb`` may be fractional; the others are ints.
    """

    job_number: int
    submit_time: int
    wait_time: int
    run_time: int
    allocated_procs: int
    avg_cpu_time: float
    used_memory_kb: float
    requested_procs: int
    requested_time: int
    requested_memory_kb: int
    status: int
    user_id: int
    group_id: int
    executable: int
    queue: int
    partition: int
    preceding_job: int
    think_time: int


@dataclass(frozen=True, slots=True)
class SimJob:
    """A job as the simulator sees it (conversion rule in the module docstring).

    ``submit`` is seconds since the trace's start, as in the file (field 2);
    ``procs`` processors; ``estimate_s`` the requested time, seconds; ``duration_s`` the
    run time clamped to the estimate, seconds, always ``0 < duration_s <= estimate_s``.
    ``user_id``, ``queue`` and ``group_id`` are the file's numbers (-1 = unknown); with a
    projects file the simulator runs the job as user ``u<user_id>`` in project
    ``/g<group_id>`` (PRJ-6, PRJ-7).
    """

    job_id: int
    submit: int
    procs: int
    estimate_s: int
    duration_s: int
    user_id: int
    queue: int
    group_id: int = -1


@dataclass(slots=True)
class SwfTrace:
    """The result of :func:`read_swf`.

    - ``jobs``: the kept jobs, sorted by submit time, then job number;
    - ``header``: the ``; Key: value`` header pairs (values stripped);
    - ``machine_procs``: the machine's size in processors, and ``machine_procs_source``
      where it came from (``"procs argument"``, ``"MaxProcs header"``, ``"MaxNodes header"``);
    - ``dropped``: how many jobs were dropped per reason (only reasons that occurred, in
      :data:`DROP_REASONS` order);
    - ``total_records``: job lines in the file (kept + dropped);
    - ``clamped``: kept jobs whose run time was cut to their requested time;
    - ``estimated_from_run_time``: kept jobs with no requested time whose run time became
      their estimate (only with ``missing_estimate="run_time"``).
    """

    path: str
    jobs: list[SimJob]
    header: dict[str, str]
    machine_procs: int
    machine_procs_source: str
    dropped: dict[str, int]
    total_records: int
    clamped: int = 0
    estimated_from_run_time: int = 0

    @property
    def dropped_total(self) -> int:
        """Jobs dropped for any reason."""
        return sum(self.dropped.values())


def _load_text(path: str | os.PathLike[str]) -> tuple[str, str]:
    """Return (display name, text) of a plain or gzip-compressed file."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise SwfError(f"{name}: no such file; give the path of an SWF trace (.swf or .swf.gz)") from None
    except IsADirectoryError:
        raise SwfError(f"{name}: is a directory, not an SWF trace file") from None
    except OSError as exc:
        raise SwfError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if data[:2] == _GZIP_MAGIC or name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise SwfError(
                f"{name}: cannot decompress ({exc}); a .gz trace must be a complete gzip file"
            ) from None
    if data[:3] == b"\xef\xbb\xbf":  # a UTF-8 byte order mark some editors write
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # never fails; bad bytes then show up as bad fields
    return name, text


def _measure(tok: str) -> int | float:
    """Field 6 or 7: an int when written as one, else a finite float (ValueError if not)."""
    try:
        return int(tok)
    except ValueError:
        value = float(tok)
        if not math.isfinite(value):
            raise ValueError(tok) from None
        return value


def _mixed_fields(parts: list[str]) -> list[int | float] | None:
    """The common case after all-int: decimals only in fields 6 and 7 (SDSC, HPC2N)."""
    try:
        return [*map(int, parts[:5]), _measure(parts[5]), _measure(parts[6]), *map(int, parts[7:])]
    except ValueError:
        return None


def _slow_fields(name: str, lineno: int, line: str, parts: list[str]) -> list[int | float]:
    """Parse a line that is not all plain integers: accept decimals, report the bad field."""
    values: list[int | float] = []
    for i, tok in enumerate(parts):
        try:
            value = float(tok)
        except ValueError:
            value = math.nan
            finite = False
        else:
            finite = math.isfinite(value)
        if not finite:
            col = [m.start() + 1 for m in _TOKEN.finditer(line)][i]
            raise SwfError(
                f"{name}:{lineno}:{col}: field {i + 1} ({FIELD_NAMES[i]}) is {tok!r}, not a number; "
                f"every SWF job field is a number, -1 when unknown"
            )
        if i in _FLOAT_FIELDS:
            values.append(int(value) if value.is_integer() else value)
        elif abs(value) > MAX_VALUE or (i not in _ROUNDED_FIELDS and not value.is_integer()):
            col = [m.start() + 1 for m in _TOKEN.finditer(line)][i]
            raise SwfError(
                f"{name}:{lineno}:{col}: field {i + 1} ({FIELD_NAMES[i]}) is {tok!r}; it must be a whole "
                f"number of at most {MAX_VALUE:,} (-1 when unknown)"
            )
        else:
            values.append(round(value))  # times and memory written with decimals are rounded
    return values


def _parse(name: str, text: str) -> tuple[dict[str, str], dict[str, int], list[list[int | float]]]:
    """(header, header key -> line number of its first line, each job line's 18 values in
    file order).  Rows stay plain lists: read_swf converts them without an object each."""
    header: dict[str, str] = {}
    header_lines: dict[str, int] = {}
    rows: list[list[int | float]] = []
    append = rows.append
    last_key: str | None = None
    mixed = False
    for lineno, line in enumerate(text.split("\n"), 1):
        parts = line.split()
        if not parts:
            continue
        if parts[0][0] == ";":
            body = line.lstrip()[1:]
            key, sep, value = body.partition(":")
            key = key.strip()
            # "Key: value" (or "Key:value"); not a wrapped URL such as "http://..."
            if sep and key.replace("_", "").replace("-", "").isalnum() and not value.startswith("//"):
                value = value.strip()
                if key in header:
                    header[key] += "\n" + value
                else:
                    header[key] = value
                    header_lines[key] = lineno
                last_key = key
            elif body.strip():
                # only an indented line continues the previous value (KTH's wrapped
                # Information URLs); free text after "; MaxProcs: 10" is a comment
                if last_key is not None and body[:2].isspace():
                    header[last_key] += "\n" + body.strip()
                else:
                    last_key = None
            else:
                last_key = None
            continue
        n = len(parts)
        if n != _NFIELDS:
            what = "truncated job line" if n < _NFIELDS else "job line has too many fields"
            raise SwfError(
                f"{name}:{lineno}: {what}: found {n} fields, an SWF job line has exactly "
                f"{_NFIELDS} whitespace-separated numbers (-1 when unknown)"
            )
        if "_" in line:  # Python's int() takes "1_000"; SWF numbers are plain digits
            col = line.index("_") + 1
            raise SwfError(f"{name}:{lineno}:{col}: '_' in a number; SWF fields are plain numbers such as 1000")
        values: list[int | float] | None
        if mixed:  # this file writes decimals in fields 6/7: skip the all-int attempt
            values = _mixed_fields(parts)
        else:
            try:
                values = list(map(int, parts))
            except ValueError:
                values = _mixed_fields(parts)
                mixed = values is not None
        if values is None:
            values = _slow_fields(name, lineno, line, parts)
        append(values)
    return header, header_lines, rows


def read_swf_records(path: str | os.PathLike[str]) -> tuple[dict[str, str], list[SwfJob]]:
    """Read an SWF file (plain, or gzip by ``.gz`` suffix or magic bytes) without converting.

    Returns ``(header, records)``: the ``; Key: value`` header pairs and every job line
    as a :class:`SwfJob`, in file order.  Raises :class:`SwfError` for a missing or
    unreadable file, a bad gzip stream, or a job line that does not hold exactly 18
    numbers.
    """
    name, text = _load_text(path)
    header, _, rows = _parse(name, text)
    return header, [SwfJob(*row) for row in rows]  # type: ignore[arg-type]


def _machine_size(name: str, header: dict[str, str], header_lines: dict[str, int], procs: int | None) -> tuple[int, str]:
    if procs is not None:
        if isinstance(procs, bool) or not isinstance(procs, int) or procs <= 0:
            raise SwfError(f"--procs must be a positive whole number of processors, got {procs!r}")
        return procs, "procs argument"
    for key in ("MaxProcs", "MaxNodes"):
        raw = header.get(key)
        if raw is None:
            continue
        if "\n" in raw:  # the key on several lines
            raise SwfError(f"{name}:{header_lines[key]}: header {key} is given more than once "
                           f"({', '.join(raw.splitlines())}); keep one, or give --procs N")
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value <= 0:
            raise SwfError(
                f"{name}:{header_lines[key]}: header {key} is {raw!r}, not a positive whole number "
                f"of processors; fix it or give --procs N"
            )
        return value, f"{key} header"
    raise SwfError(
        f"{name}: has no MaxProcs header line (nor MaxNodes), so the machine's size is unknown; "
        f"give --procs N"
    )


def read_swf(
    path: str | os.PathLike[str],
    procs: int | None = None,
    *,
    missing_estimate: Literal["drop", "run_time"] = "drop",
) -> SwfTrace:
    """Read an SWF trace and convert it to simulator jobs (SPEC SIM-1).

    ``path``: a ``.swf`` file, plain or gzip-compressed (by ``.gz`` suffix or the gzip
    magic bytes).  ``procs``: the machine's size in processors; overrides the header's
    ``MaxProcs`` (or ``MaxNodes``).  ``missing_estimate``: ``"drop"`` (the reference
    rule) drops jobs with no requested time; ``"run_time"`` keeps them with their run
    time as their estimate.

    The conversion and the drop rule are in the module docstring (tests/data/README.md's
    reference: KTH-SP2 keeps 28,481 of 28,489 jobs).

    Raises :class:`SwfError` (a ``ValueError``) with ``FILE:LINE`` for: a missing or
    unreadable file, a bad gzip stream, a job line with fewer or more than 18 fields or
    a field that is not a number, no machine size (no ``MaxProcs``/``MaxNodes`` and no
    ``procs``), a trace with no job lines, or one whose jobs are all dropped.
    """
    if missing_estimate not in ("drop", "run_time"):
        raise ValueError(f"missing_estimate must be 'drop' or 'run_time', got {missing_estimate!r}")
    name, text = _load_text(path)
    header, header_lines, records = _parse(name, text)
    if not records:
        raise SwfError(f"{name}: empty trace: no job lines (an SWF job line holds 18 numbers; "
                       f"lines starting with ';' are header comments)")
    machine, source = _machine_size(name, header, header_lines, procs)
    keep_without_estimate = missing_estimate == "run_time"

    jobs: list[SimJob] = []
    append = jobs.append
    n_more = n_none = n_norun = n_noreq = 0
    clamped = from_run = 0
    # row indexes: 0 job number, 1 submit, 3 run time, 4 allocated procs, 7 requested
    # procs, 8 requested time, 11 user, 14 queue (FIELD_NAMES)
    for r in records:
        p = r[7]
        if p <= 0:
            p = r[4]
        if p > machine:
            n_more += 1
            continue
        if p <= 0:
            n_none += 1
            continue
        run = r[3]
        if run <= 0:
            n_norun += 1
            continue
        if max(run, r[8], r[1], p) > MAX_VALUE:
            raise SwfError(f"{name}: job {r[0]}: a time or count beyond {MAX_VALUE:,} (seconds or processors); "
                           f"that is no real workload")
        est = r[8]
        if est <= 0:
            if not keep_without_estimate:
                n_noreq += 1
                continue
            est = run
            from_run += 1
        elif run > est:
            run = est
            clamped += 1
        append(SimJob(r[0], r[1], p, est, run, r[11], r[14], r[12]))  # type: ignore[arg-type]

    counts = (n_more, n_none, n_norun, n_noreq)
    dropped = {reason: n for reason, n in zip(DROP_REASONS, counts) if n}
    if not jobs:
        detail = ", ".join(f"{n} {reason}" for reason, n in dropped.items())
        hint = ""
        if n_noreq:
            hint = ("; for a trace without requested times, use each job's run time as its "
                    "estimate (xceadmin sim run --no-estimate run-time)")
        raise SwfError(f"{name}: empty trace: all {len(records)} jobs were dropped ({detail}) "
                       f"on a machine of {machine} processors ({source}){hint}")
    jobs.sort(key=lambda j: (j.submit, j.job_id))
    return SwfTrace(
        path=name,
        jobs=jobs,
        header=header,
        machine_procs=machine,
        machine_procs_source=source,
        dropped=dropped,
        total_records=len(records),
        clamped=clamped,
        estimated_from_run_time=from_run,
    )

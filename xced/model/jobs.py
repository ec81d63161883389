"""Job domain types (D-5, JOB-1, JOB-4): states, holds, array specs, job IDs.

Pure: no I/O. Times are epoch seconds (float); memory MB; run limits seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from xced.model.states import JobState, first_control, parse_job_ref  # noqa: F401  (their home is the light module)
from xced.model.units import DEFAULT_MAX_ARRAY_SIZE, MAX_ARRAY_SIZE_SETTING
from xced.model.units import MAX_ARRAY_INDEX as _MAX_ARRAY_INDEX


FINISHED = frozenset({JobState.DONE, JobState.EXIT})
PENDING = frozenset({JobState.PEND, JobState.PSUSP})
ACTIVE = frozenset({JobState.RUN, JobState.USUSP})


class HoldKind(StrEnum):
    """A hold's kind (D-5): releasing one kind never releases the other."""

    USER = "user"
    SYSTEM = "system"


class EndReason(StrEnum):
    """Why an element's processes ended when not of themselves (JOB-1, JOB-2, JOB-8), as the
    supervisor records it in status.json (other reasons are free text: "cannot execute:
    ...", a hook's failure). The values are what `show` and `hist` print."""

    RUN_LIMIT = "run limit"
    MEMORY_LIMIT = "memory limit"
    KILLED = "killed"
    SUPERVISOR_LOST = "supervisor lost"
    SUPERVISOR_ERROR = "supervisor error"


#: The bounds of job arrays live with the other request bounds (xced.model.units, D-8):
#: the default of the admin setting `max_array_size`, its ceiling, and the largest index.
MAX_ARRAY_INDEX = _MAX_ARRAY_INDEX

_ARRAY_RE = re.compile(r"^(?P<name>[^\[\]%]*)\[(?P<spec>[^\]]*)\](?:%(?P<limit>\S*))?$")
#: an index range; numbers of more than 10 digits are over MAX_ARRAY_INDEX whatever they are
_RANGE_RE = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?")
_MAX_INDEX_DIGITS = len(str(_MAX_ARRAY_INDEX))


def _q(text: str) -> str:
    """A -J value for a message: quoted, and shortened when long, so the message stays one short line."""
    return repr(text) if len(text) <= 60 else repr(text[:57]) + "..."


class ArraySpecError(ValueError):
    """A job name's array part is malformed; the message says what would be valid."""


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """`NAME[1-100:2,200]%10` (JOB-4, LSF bsub -J): indices ascending, unique; `limit`
    caps elements running at once (None: no cap)."""

    name: str
    indices: tuple[int, ...]
    limit: int | None
    text: str


def parse_job_name(text: str, max_size: int = DEFAULT_MAX_ARRAY_SIZE) -> tuple[str, ArraySpec | None]:
    """Split a `-J` value into (name, array spec or None).

    Grammar (LSF bsub -J): `name[start[-end[:step]][,...]][%limit]`, indices 1 to
    MAX_ARRAY_INDEX (2147483646, as LSF). `max_size` is the most indices the ranges may
    list together (an index listed twice counts twice) and the largest `%limit`: the
    cluster's `max_array_size` setting (LSF MAX_JOB_ARRAY_SIZE, default 1000), which the
    daemon passes; the CLI passes the ceiling MAX_ARRAY_SIZE_SETTING, leaving the setting
    to the daemon. The work is linear in `max_size` and the text, whatever the text.

    Raises ArraySpecError naming what was wrong and what would be valid: `x[5-1]`, `x[]`,
    `x[0]`, a step < 1, a limit outside 1..max_size, more than `max_size` indices (naming
    the cap and the setting), an index over MAX_ARRAY_INDEX, or a name with `[` but no
    valid array part.
    """
    if first_control(text) is not None:
        raise ArraySpecError(f"job name {_q(text)}: control characters (newlines, tabs, escapes, line separators) "
                             f"are not allowed: a name is one line of a listing")
    if "[" not in text and "]" not in text:
        if "%" in text:
            raise ArraySpecError(f"job name {_q(text)}: '%limit' is only valid after an array part, as in 'name[1-10]%2'")
        return text, None
    m = _ARRAY_RE.match(text)
    if not m:
        raise ArraySpecError(f"job name {_q(text)} is not a valid array: expected NAME[START-END:STEP,...]%LIMIT, e.g. 'sweep[1-100:2]%10'")
    spec = m.group("spec").strip()
    if not spec:
        raise ArraySpecError(f"job array {_q(text)}: empty index list; expected e.g. [1-100]")
    ranges: list[tuple[int, int, int]] = []
    listed = 0
    for part in spec.split(","):
        part = part.strip()
        pm = _RANGE_RE.fullmatch(part)
        if not pm:
            raise ArraySpecError(f"job array {_q(text)}: bad index range {part!r}; expected START, START-END or START-END:STEP with positive integers")
        if any(g is not None and len(g.lstrip("0")) > _MAX_INDEX_DIGITS for g in pm.groups()[:2]):
            raise ArraySpecError(f"job array {_q(text)}: indices go up to {MAX_ARRAY_INDEX}")
        if pm.group(3) is not None and len(pm.group(3).lstrip("0")) > _MAX_INDEX_DIGITS:
            raise ArraySpecError(f"job array {_q(text)}: step {pm.group(3)[:20]} is more than the largest, "
                                 f"{MAX_ARRAY_INDEX}")
        start = int(pm.group(1))
        end = int(pm.group(2)) if pm.group(2) is not None else start
        step = int(pm.group(3)) if pm.group(3) is not None else 1
        if start < 1:
            raise ArraySpecError(f"job array {_q(text)}: index {start} is invalid; indices start at 1")
        if end > MAX_ARRAY_INDEX:
            raise ArraySpecError(f"job array {_q(text)}: indices go up to {MAX_ARRAY_INDEX}")
        if step > MAX_ARRAY_INDEX:
            raise ArraySpecError(f"job array {_q(text)}: step {step} is more than the largest, {MAX_ARRAY_INDEX}")
        if end < 1:
            raise ArraySpecError(f"job array {_q(text)}: index {end} is invalid; indices start at 1")
        if end < start:
            raise ArraySpecError(f"job array {_q(text)}: range {part!r} ends before it starts; write it as {end}-{start}")
        if step < 1:
            raise ArraySpecError(f"job array {_q(text)}: step {step} is invalid; the step must be at least 1")
        listed += (end - start) // step + 1
        ranges.append((start, end, step))
    if listed > max_size:
        where = ("any cluster allows (the most max_array_size may be)" if max_size >= MAX_ARRAY_SIZE_SETTING else
                 "an array may have on this cluster (max_array_size in xce.yaml, as LSF's MAX_JOB_ARRAY_SIZE)")
        raise ArraySpecError(f"job array {_q(text)}: {listed} indices, more than the {max_size} {where}; split it "
                             f"into arrays of at most {max_size}")
    indices: set[int] = set()
    for start, end, step in ranges:
        indices.update(range(start, end + 1, step))
    limit = None
    if m.group("limit") is not None:
        lim = m.group("limit")
        if not lim.isascii() or not lim.isdigit() or len(lim) > _MAX_INDEX_DIGITS or not 1 <= int(lim) <= max_size:
            bound = (f"1 <= N <= {max_size}" if max_size < MAX_ARRAY_SIZE_SETTING else
                     "N at least 1 and at most the cluster's max_array_size")  # the CLI does not know the setting
            raise ArraySpecError(f"job array {_q(text)}: limit {_q(lim)} is invalid; expected %N with {bound}")
        limit = int(lim)
    return m.group("name"), ArraySpec(m.group("name"), tuple(sorted(indices)), limit, text)


def expand_output_template(template: str, job_id: int, index: int) -> str:
    """An `-o/-e` path with LSF's patterns replaced (JOB-12; IBM bsub -o: "%J is replaced by
    the job ID ... %I is replaced by the index of the job in the array ... Otherwise, %I is
    replaced by 0"): `%J` -> `job_id`, `%I` -> `index` (0 for a plain job), `%%` -> a literal
    `%`, read left to right in one pass (so `%%J` is `%J`); any other `%` is kept as
    written. Works in directory names as in file names: `logs/%J/` -> `logs/12/`."""
    if "%" not in template:
        return template
    out: list[str] = []
    i, n = 0, len(template)
    while i < n:
        c = template[i]
        if c == "%" and i + 1 < n and template[i + 1] in "JI%":
            nxt = template[i + 1]
            out.append(str(job_id) if nxt == "J" else str(index) if nxt == "I" else "%")
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def output_file_name(job_id: int, index: int, stream: str) -> str:
    """The file an `-o DIR/` (`stream` "stdout") or `-e DIR/` ("stderr") writes in DIR
    (JOB-12): `ID.out` / `ID.err` as LSF ("Specifying a directory for job output": "Standard
    output: output_directory/job_ID.out, Standard error: error_directory/job_ID.err"); an
    array element (index >= 1; array indices start at 1) gets `ID_INDEX.out`, so its
    elements do not share one file: LSF's documented form for per-element files
    (LSB_JOB_TMPDIR: "arrayID_arrayIndex"). Raises ValueError for another `stream`."""
    if stream not in ("stdout", "stderr"):
        raise ValueError(f"output stream {stream!r}: expected 'stdout' or 'stderr'")
    ext = "out" if stream == "stdout" else "err"
    return f"{job_id}.{ext}" if index == 0 else f"{job_id}_{index}.{ext}"


def resolve_output_path(template: str, job_id: int, index: int, cwd: str, stream: str) -> str:
    """Where element (job_id, index) writes `stream` ("stdout"/"stderr") for an `-o/-e`
    value `template`, as far as the text tells (JOB-12, IBM bsub -o): the patterns expanded
    (expand_output_template); a path ending in `/` names a directory, and the file is
    `DIR/ID.out` (output_file_name; LSF: "Make the final character in the path a slash");
    a relative path is relative to the job's working directory `cwd` ("If only a file name
    is specified, LSF writes the output file to the current working directory"). A path
    without the slash that names an existing directory is found so only on the execution
    host, by its supervisor (xced.worker.supervisor), which writes `DIR/ID.out` then."""
    import posixpath

    p = expand_output_template(template, job_id, index)
    if p.endswith("/"):
        p = p + output_file_name(job_id, index, stream)
    return posixpath.normpath(posixpath.join(cwd, p))


def format_job_ref(job_id: int, index: int) -> str:
    """Display form: `123` for a plain job (index 0), `123[4]` for an array element."""
    return str(job_id) if index == 0 else f"{job_id}[{index}]"


def format_refs(refs: list[str]) -> str:
    """Element references for a message, runs of consecutive indices of one job folded as
    LSF folds an array's indices: ["5[1]", "5[2]", "5[3]", "5[7]", "6"] -> "5[1-3,7], 6".
    A million elements of a killed array are then "5[1-1000000]", not 10 MB of text."""
    out: list[str] = []
    run_job: str | None = None
    spans: list[list[int]] = []

    def flush() -> None:
        if run_job is not None:
            out.append(run_job + "[" + ",".join(f"{a}-{b}" if a != b else str(a) for a, b in spans) + "]")

    for ref in refs:
        if not ref.endswith("]") or "[" not in ref:
            flush()
            run_job, spans = None, []
            out.append(ref)
            continue
        job, _, rest = ref.partition("[")
        try:
            idx = int(rest[:-1])
        except ValueError:
            flush()
            run_job, spans = None, []
            out.append(ref)
            continue
        if job == run_job and spans and idx == spans[-1][1] + 1:
            spans[-1][1] = idx
        elif job == run_job:
            spans.append([idx, idx])
        else:
            flush()
            run_job, spans = job, [[idx, idx]]
    flush()
    return ", ".join(out)


@dataclass(slots=True)
class HostShortfall:
    """One host's reason for not taking a job (RES-6), e.g. host h1: slots 2 free, 4 needed."""

    host: str
    resource: str
    free: float
    needed: float
    message: str


#: the hint of a job that would start now with fewer tasks (RES-6): rendered from the count
#: (PendReason.start_with), the one data the scheduler reads back
HINT_START_WITH = "would start now with -n {n}"


@dataclass(slots=True)
class PendReason:
    """A structured pend reason (RES-6): a main reason plus per-host shortfalls."""

    main: str
    hosts: list[HostShortfall] = field(default_factory=list)
    #: what would make the job start now ("would start now with -n 4"), or None
    hint: str | None = None
    #: the smaller task count that would start now (the N of that hint), as data: what the
    #: scheduler reads back, never the text (None when no smaller count would)
    start_with: int | None = field(default=None, compare=False)
    #: what the reason is about, as data: "dependency" for an element waiting on its -w
    #: expression (JOB-5), which is cleared once the dependency is met; "quota" for one held
    #: back by its project's caps (PRJ-6, PRJ-7); else None
    cause: str | None = field(default=None, compare=False)
    #: every project cap in the job's way, one line each, nearest project first (PRJ-6,
    #: PRJ-7): "project /physics/hep at quota: 32/32 slots", "user bob at member_quota of
    #: /physics/hep: 8/8 slots"; `main` is the first. Empty for any other reason (a tuple:
    #: the empty one costs no allocation in the many reasons of a session)
    caps: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {
            "main": self.main,
            "hint": self.hint,
            "caps": list(self.caps),
            "hosts": [
                {"host": h.host, "resource": h.resource, "free": h.free, "needed": h.needed, "message": h.message}
                for h in self.hosts
            ],
        }

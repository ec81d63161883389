"""Large arrays summarised by state and index range (issue 17 part 4; CLI-1, CLI-3, CLI-7).

Pure and light: standard library only, no typer, pydantic or rich, so that the daemon's
action routes and `xcecli` (kill/stop/resume/requeue/release, show) share it at no start-up
cost. It takes plain data (indices, state names, a few cells) and returns strings.

Above SUMMARY_OVER (100) elements, the job actions print one line per state of the elements
acted on, and `xcecli show` one table row per group of elements alike, instead of one per
element; arrays of at most 100 elements print as they always did. LSF does the like: bkill
of a whole array prints one line, "Job <123> is being terminated", and bjobs -A one line per
array with its counts by state.

Index runs are written as LSF writes an array's index list, without the step form:
consecutive indices fold into `a-b`, the runs are comma separated: "1-10,12,15-20"
(`format_runs`; `parse_runs` reads it back). A printed line stays short however fragmented
the runs are: past MAX_RUNS_SHOWN runs it keeps the first and last few around "..." and the
line says how many runs there were (`elide_runs`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

#: arrays of more elements than this are summarised (by state and index range) unless the
#: user asks for every element (`--json`, `-v`); at most this many print one line each
SUMMARY_OVER = 100
#: a printed index list keeps at most this many runs: the first HEAD_RUNS, "...", the last TAIL_RUNS
MAX_RUNS_SHOWN = 10
HEAD_RUNS = 6
TAIL_RUNS = 3
#: an elided index list: the runs kept on each side of it
ELLIPSIS = "..."

#: what each job action did, as its line says it, and what it says of the elements it left alone
DONE_PHRASE = {"kill": "kill requested", "stop": "stopped", "resume": "resumed", "requeue": "requeued",
               "release": "system hold released"}
NOT_DONE_PHRASE = {"kill": "not killed", "stop": "not stopped", "resume": "not resumed", "requeue": "not requeued",
                   "release": "not released"}


def runs_of(indices: Iterable[int]) -> list[tuple[int, int]]:
    """Indices (any order, repeats allowed) -> sorted runs of consecutive integers:
    [5, 1, 2, 3, 7] -> [(1, 3), (5, 5), (7, 7)]."""
    runs: list[list[int]] = []
    for i in sorted(set(indices)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return [(a, b) for a, b in runs]


def format_runs(runs: Iterable[tuple[int, int]]) -> str:
    """Runs -> "1-3,5,7-9" (a run of one index is the index alone). Exact, not bounded:
    `elide_runs` bounds it for printing."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def parse_runs(text: str) -> list[int]:
    """"1-3,5,7-9" -> [1, 2, 3, 5, 7, 8, 9] (the inverse of format_runs; "" -> []). Raises
    ValueError on anything else, an elided list ("...") included."""
    out: list[int] = []
    if not text:
        return out
    for part in text.split(","):
        a, sep, b = part.partition("-")
        if not a.isdigit() or (sep and not b.isdigit()) or (sep and int(b) < int(a)):
            raise ValueError(f"{part!r} is not an index or a range a-b with a <= b")
        lo, hi = int(a), int(b) if sep else int(a)
        out.extend(range(lo, hi + 1))
    return out


def elide_runs(text: str) -> tuple[str, int]:
    """A runs string (format_runs) -> (a printable one of at most MAX_RUNS_SHOWN runs, the
    number of runs). Past that it keeps the first HEAD_RUNS and last TAIL_RUNS runs around
    "...": "1,3,5,7,9,11,...,95,97,99". Works on the text (one split), never per index."""
    if text.count(",") < MAX_RUNS_SHOWN:
        return text, (text.count(",") + 1 if text else 0)
    parts = text.split(",")
    return ",".join([*parts[:HEAD_RUNS], ELLIPSIS, *parts[-TAIL_RUNS:]]), len(parts)


def group(items: Iterable[tuple[int, Hashable]]) -> list[tuple[Hashable, int, str]]:
    """(index, key) pairs -> one (key, count, runs) per distinct key, runs exact
    (format_runs), ordered by each key's lowest index: [(1, "EXIT"), (2, "EXIT"), (3, "PEND")]
    -> [("EXIT", 2, "1-2"), ("PEND", 1, "3")]."""
    by_key: dict[Hashable, list[int]] = {}
    for index, key in items:
        by_key.setdefault(key, []).append(index)
    out = []
    for key, idx in by_key.items():
        runs = runs_of(idx)
        out.append((runs[0][0], key, len(idx), format_runs(runs)))
    out.sort(key=lambda g: g[0])
    return [(key, n, runs) for _, key, n, runs in out]


def ref(job_id: int | str, runs: str) -> str:
    """The printed reference of some elements of an array: "12[1-10,15]", elided past
    MAX_RUNS_SHOWN runs ("12[1,3,5,7,9,11,...,95,97,99]")."""
    return f"{job_id}[{elide_runs(runs)[0]}]"


def _many(n: int, runs: str) -> str:
    k = elide_runs(runs)[1]
    return f"{n} element{'' if n == 1 else 's'}" + (f" in {k} runs" if k > MAX_RUNS_SHOWN else "")


def action_lines(job_id: int | str, action: str, states: Sequence[tuple[str, int, str]],
                 skipped: Sequence[tuple[str, int, str]] = (), note: str | None = None) -> list[str]:
    """The lines `xcecli kill` (stop, resume, requeue, release) prints for an array of more
    than SUMMARY_OVER elements: one per state of the elements acted on (`states`: (state,
    count, runs) as `group` makes them, the state after the action), then one per state of
    those left alone (`skipped`), then the daemon's `note` if any. `action`: a key of
    DONE_PHRASE. Each line is bounded (elide_runs) and reads like LSF's "Job <123> is being
    terminated", the elements in the brackets, fields split by blanks for awk:

        Job <12[1-999996]>: kill requested (999996 elements, now EXIT)
        Job <12[1,3,5,7,9,11,...,95,97,99]>: not killed (50 elements in 50 runs, DONE)
    """
    done, not_done = DONE_PHRASE[action], NOT_DONE_PHRASE[action]
    lines = [f"Job <{ref(job_id, runs)}>: {done} ({_many(n, runs)}, now {state})" for state, n, runs in states]
    lines += [f"Job <{ref(job_id, runs)}>: {not_done} ({_many(n, runs)}, {state})" for state, n, runs in skipped]
    if note:
        lines.append(f"Job <{job_id}>: {note}")
    return lines


#: the columns of `xcecli show`'s summarised element table
SUMMARY_HEADERS = ("ID", "STAT", "COUNT", "EXIT", "SIGNAL", "REASON")


def element_rows(job_id: int | str, elements: Iterable[tuple[int, str, object, object, object]]) -> list[list[object]]:
    """`xcecli show`'s element table for an array of more than SUMMARY_OVER elements: the
    elements (index, state, exit code, signal, reason; None for none) grouped by everything
    but the index, one row per group, ordered by its lowest index:
    [ID (bounded, "12[1-500000]"), STAT, COUNT, EXIT, SIGNAL, REASON], under SUMMARY_HEADERS.
    Hosts and times differ per element; `xcecli show -v` lists them."""
    rows: list[list[object]] = []
    for (state, code, sig, why), n, runs in group((i, (s, c, g, w)) for i, s, c, g, w in elements):
        rows.append([ref(job_id, runs), state, n, code, sig, why])
    return rows

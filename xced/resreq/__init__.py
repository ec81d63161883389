"""The LSF resource requirement grammar (SPEC RES-1): parse, render, merge,
evaluate select. Pure: standard library only, no I/O.

Public API::

    parse(text, capped=False) -> ResReq    one -R string; raises only ResReqError
    parse_job([text, ...]) -> ResReq       a job's -R strings, held to the request caps, merged
    parse_select(text, capped=False) -> Expr  a bare select expression
    order_keys_at(text) -> [(name, column)]  the order[] keys of a string, with their columns
    merge([ResReq, ...]) -> ResReq         several -R strings, as LSF merges them
    render(req) -> str                     canonical text; parse(render(r)) == r
    shared(req) -> ResReq                  the one object kept for requirements equal to req
    render_expr(expr) -> str               canonical select expression text
    to_json(req) -> dict                   the documented JSON form
    reserve_ways(req, nmin, nmax=None, nhosts=None) -> [[Reserved]]  each rusage way, with
                                           method (per task unless /host or /job) and totals
    reserve_terms(...) -> [Reserved]       the preferred way's; reserve_line(dict) -> str
    select_matches(req|expr|str, host, local=None) -> bool
    explain_select(req|expr|str, host, local=None) -> str | None
    ResReqError(ValueError)                .column (1-based) .text .expected .found .pretty()

The parsed form (``ResReq``, ``Span``, ``RusageGroup``, ``RusageTerm``,
``OrderKey``, ``Part`` and the select nodes ``Num``, ``Str``, ``Name``,
``Defined``, ``Unary``, ``Binary``, ``BoolOp``) is frozen, hashable dataclasses. A chain
of ``&&`` or ``||`` is one flat ``BoolOp`` (``a || b || c`` has three operands), so
parsing, rendering, evaluating and explaining it are loops, however long it is.

Bounds (D-8): the parser's work is linear in the text; ``parse_job`` holds a job's -R
strings to MAX_RESREQ_STRINGS, MAX_RESREQ_TERMS (together), MAX_SELECT_DEPTH and
MAX_RESREQ_ALTERNATIVES (xced.model.units), naming the bound and the column when one is
passed; ``capped=True`` holds one string (a profile's) to the same caps.

Units: memory in MB (``mem=4GB`` -> 4096; bare ``mem``/``swp``/``tmp`` rusage
values are MB, the LSF 7.3 default and XCE's internal unit), durations in
seconds (a bare ``duration=N`` is minutes, as in LSF).

Decisions where LSF is ambiguous or XCE differs (sources: IBM Spectrum LSF 10.1
"Resource requirement strings" pages, the LSF 6.2/7.3 administration guides):

- ``=`` in a select is accepted as ``==`` (real job scripts write
  ``select[type=RHEL7_4]``) and rendered as ``==``.
- A bare name compared with ``type``, ``model`` or ``hname`` is a string literal
  (``type==X86_64``) and is not alias-rewritten; elsewhere ``swap``, ``idle``,
  ``login``, ``cpu`` become ``swp``, ``it``, ``ls``, ``r1m`` in every section.
- Unquoted string values may hold dots and digits (``type==LINUX2.4``,
  ``model==PC6000``, RES-7): a word with a ``.`` is a string and may only be one side
  of ``==`` or ``!=``; elsewhere it is an error at its column.
- ``type==local`` / ``type==any`` (and ``model``) are kept as written; the
  evaluator gives them meaning (``any`` matches all; ``local`` compares with the
  submitting host's attributes when given, else matches all).
- Numbers in a select may carry a memory unit (``mem>4GB`` -> ``mem > 4096``).
  KB/MB/GB/TB and K/M/G/T, case-insensitive; 1 GB = 1024 MB.
- ``order[-slots]`` is ``{"name": "slots", "desc": true}``: ``desc`` records
  LSF's ``-``, which reverses the index's default (best-first) direction. For
  ``slots`` LSF's default is most free slots first, so ``-slots`` packs.
- Section names are reserved where a section may start: ``rusage=[...]`` is an
  error at the ``=`` ("expected '[' after 'rusage'"), never a bare select.
- One section of each kind per string (LSF: "cannot specify multiple select
  sections in the same -R"); several ``-R`` strings go through ``merge``.
- ``span``: exactly one of ``ptile=N`` (N >= 1), ``hosts=1``, ``hosts=-1``,
  ``block=N`` (N >= 1); ``ptile='!'``, per-type ptile and ``stripe`` are
  "not supported yet". ``cu[...]`` and ``affinity[...]`` likewise.
- rusage: each load index at most once per ``||`` alternative; duration/decay
  at most once per comma group and the group needs a ``name=value``;
  ``duration`` > 0, whole number; ``decay`` 0 or 1 (kept even without a
  duration, which LSF ignores). Multi-phase reservations are not parsed.
- A single ``{simple}`` is that simple string; alternatives may hold compound
  strings (``{2*{...} + 4*{...}} || {...}``); compound parts must be simple.
- Merging: later ``order``/``span`` win; rusage per resource, the later term
  winning whole (no inheritance of duration/decay); compound/alternative
  strings cannot be merged with others.

Pages the grammar follows (tests/unit/test_resreq.py cites one per example):
https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.__r.1.html,
https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/select_string.html,
https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/order_string.html,
https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/usage_string.html,
https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/span_string.html,
https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/same_string.html, and the
LSF 6.2 / 7.3 "Administering Platform LSF" chapters on resource requirements.
"""

from ._ast import (
    ALIASES,
    MEMORY_RESOURCES,
    STRING_ATTRIBUTES,
    Binary,
    BoolOp,
    Defined,
    Expr,
    Name,
    Num,
    OrderKey,
    Part,
    ResReq,
    RusageGroup,
    RusageTerm,
    Span,
    Str,
    Unary,
    shared,
)
from ._errors import ResReqError
from ._merge import merge
from ._parser import MAX_PARSE_DEPTH, order_keys_at, parse, parse_job, parse_select
from ._render import render, render_expr, to_json
from ._reserve import DEFAULT_PER, Reserved, reserve_line, reserve_terms, reserve_ways
from ._select import explain_select, select_matches

__all__ = [
    "ALIASES",
    "MEMORY_RESOURCES",
    "STRING_ATTRIBUTES",
    "Binary",
    "BoolOp",
    "DEFAULT_PER",
    "Defined",
    "MAX_PARSE_DEPTH",
    "Expr",
    "Name",
    "Num",
    "OrderKey",
    "Part",
    "ResReq",
    "ResReqError",
    "Reserved",
    "RusageGroup",
    "RusageTerm",
    "Span",
    "Str",
    "Unary",
    "shared",
    "explain_select",
    "merge",
    "order_keys_at",
    "parse",
    "parse_job",
    "parse_select",
    "render",
    "render_expr",
    "reserve_line",
    "reserve_terms",
    "reserve_ways",
    "select_matches",
    "to_json",
]

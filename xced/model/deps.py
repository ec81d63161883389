"""Job dependency expressions (SPEC JOB-5): the text of ``xcecli submit -w '...'``,
parsed, rendered and evaluated as LSF evaluates ``bsub -w``. Pure: no I/O; the
caller supplies the states of the referenced jobs through a lookup function.

Public API::

    parse_dependency(text) -> DepExpr        raises only DependencyError
    render(expr) -> str                      canonical text; parse_dependency(render(e)) == e
    refs(expr) -> set[(job_id, index|None)]  every job or element the expression names
    evaluate(expr, lookup) -> Verdict        MET, UNMET (may still be met) or NEVER
    explain(expr, lookup) -> str             one-line pend reason
    DependencyError(ValueError)              .text .column (1-based) .expected .found .pretty()

The parsed form is frozen, hashable dataclasses: ``Ref``, ``Cond``, ``Not``,
``And``, ``Or`` (``DepExpr`` is their union). ``RefState`` is what a lookup
returns for one job or array element.

Grammar (LSF's, less job names)::

    expr  := and ('||' and)*                  '!' binds tightest, then '&&', then '||'
    and   := unary ('&&' unary)*
    unary := '!' unary | '(' expr ')' | cond | ref        a bare ref means done(ref)
    cond  := ('done' | 'ended' | 'started') '(' ref ')'
           | 'exit' '(' ref [',' [op] code] ')'           op: == != > >= < <= (none: ==)
    ref   := ID ['[' INDEX ']']                           ID >= 1, 1 <= INDEX <= 2147483646

Whitespace is allowed between any two tokens. Bounds (D-8; xced.model.units): 4,096
characters (MAX_DEPENDENCY_LENGTH), 1,000 conditions (MAX_DEPENDENCY_CONDITIONS), 100
levels of nesting of '(' and '!' (MAX_DEPENDENCY_DEPTH); each error names its bound. The
parser is linear in the text (a chain of && or || is one flat node), and an evaluation
reads each whole array it names once, however many conditions name it.

LSF pages the rules follow (read through the search index; not copied):

- Conditions and their meaning, bare ID = done, the exit() comparison:
  https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=scheduling-dependency-conditions
  (the same text: https://www.hpc.dtu.dk/lsf931/lsf_admin/job_dep_conditions.html).
- Operators &&, ||, !, parentheses; a dependency on a job LSF cannot find fails
  the submission; "all of your jobs that have that name must satisfy the test":
  https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.w.1.html
- started(): RUN, DONE or EXIT (LSF 7.3 "Administering Platform LSF", p. 452):
  http://38.142.81.21:8001/manual/hp/hp-xc-system-4-x-software/lsf-version-73-administering-platform-lsf/page-452.html
- A whole array: ``done(123)`` waits for the whole array (LSF 6.2 admin guide,
  "Job Array Dependencies", p. 421):
  http://38.142.81.21:8001/manual/hp/hp-xc-system-3-x-software/platform-lsf-administration-guide-version-62/page-421.html
- The pend reasons "waiting for its dependency condition(s)" and "invalid or
  never satisfied" (PEND_JOB_DEPEND, PEND_JOB_DEP_INVALID in the LSF 7.0.5 API
  reference, lsb_pendreason(), in
  https://ftpmirror.your.org/pub/misc/ftp.software.ibm.com/software/server/plcomp/plsf/7.0.5/lsf7Update5_documentation.zip).

Decisions where LSF is silent or XCE differs:

- Job names (``done(myjob)``, ``done("x")``, ``myjob*``), ``ID[*]``, ``post_done``,
  ``post_err``, ``external`` and the ``num*`` array counters are not accepted
  yet; each gets an error saying what is accepted.
- A whole-array reference is met when every element meets the condition (the
  rule LSF states for a name that matches several jobs, and what ``done(array)``
  means); so one EXIT element makes ``done(array)`` NEVER.
- ``exit()`` looks at the state: EXIT (any code, or the code that satisfies the
  comparison). A DONE job never satisfies it. An EXIT job without an exit code
  (killed before it ran) satisfies ``exit(ID)`` but no ``exit(ID, OP CODE)``.
  Exit codes are 0..255 (a job killed by signal N exits 128+N).
- ``started()`` is met by RUN, USUSP, DONE and EXIT. LSF 7.3 lists RUN, DONE,
  EXIT and a PEND/PSUSP job whose pre-exec is running; XCE runs pre-exec in RUN,
  and a job suspended after it started has started. An EXIT job counts even if
  it was killed while pending (as in LSF).
- LSF documents a two-valued test plus a "never satisfied" pend reason; XCE
  makes that three-valued: ``!`` swaps MET and NEVER, ``&&``/``||`` combine
  as Kleene logic, so ``!done(5)`` waits while 5 runs and is met once 5 exits.
- A job that does not exist is NEVER here; rejecting an unknown job at
  submission, as LSF does, is the caller's check on ``refs()``.
- NEVER is relative to the states the lookup gives now: a requeue moves an
  ended job back to PEND, so callers re-evaluate on every state change.
- The canonical text writes ``exit(12,==2)`` for ``exit(12, 2)``, ``done(123)``
  for a bare ``123``, single spaces around ``&&``/``||``, and flattens
  ``a && (b && c)`` to ``a && b && c`` (likewise ``||``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from xced.model.jobs import MAX_ARRAY_INDEX, JobState
from xced.model.units import MAX_DEPENDENCY_CONDITIONS, MAX_DEPENDENCY_DEPTH, MAX_DEPENDENCY_LENGTH

__all__ = [
    "MAX_CONDITIONS",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "And",
    "Cond",
    "DepExpr",
    "DependencyError",
    "Lookup",
    "Not",
    "Or",
    "Ref",
    "RefState",
    "Verdict",
    "evaluate",
    "explain",
    "parse_dependency",
    "refs",
    "render",
]

#: Longest dependency text accepted, in characters (xced.model.units).
MAX_LENGTH = MAX_DEPENDENCY_LENGTH
#: Most conditions (done/ended/exit/started or bare IDs) in one expression.
MAX_CONDITIONS = MAX_DEPENDENCY_CONDITIONS
#: Deepest nesting of '(' and '!' accepted (keeps every recursive walk shallow).
MAX_DEPTH = MAX_DEPENDENCY_DEPTH
#: Largest job ID (the 18 digits ``parse_job_ref`` accepts).
MAX_JOB_ID = 10**18 - 1
#: Exit codes a process can have.
MAX_EXIT_CODE = 255

KINDS = ("done", "ended", "exit", "started")
OPS = ("==", "!=", ">", ">=", "<", "<=")
#: LSF conditions XCE does not implement yet (named in the error).
_LSF_ONLY = frozenset({"post_done", "post_err", "external", "numdone", "numexit", "numended",
                       "numhold", "numpend", "numrun", "numstart"})
_VALID = "done(ID), ended(ID), exit(ID[, OP CODE]), started(ID) or a bare ID"


# ---------------------------------------------------------------------------- AST


@dataclass(frozen=True, slots=True)
class Ref:
    """A job (``index`` None: a plain job, or a whole array) or one array element
    (DESIGN: "an array element is ``ID[INDEX]``"). Raises ValueError for a job ID
    outside 1..MAX_JOB_ID or an index outside 1..MAX_ARRAY_INDEX (xced.model.jobs)."""

    job_id: int
    index: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.job_id <= MAX_JOB_ID:
            raise ValueError(f"job ID {self.job_id}: expected 1 to {MAX_JOB_ID}")
        if self.index is not None and not 1 <= self.index <= MAX_ARRAY_INDEX:
            raise ValueError(f"array index {self.index}: expected 1 to {MAX_ARRAY_INDEX}")

    def __str__(self) -> str:
        return str(self.job_id) if self.index is None else f"{self.job_id}[{self.index}]"


@dataclass(frozen=True, slots=True)
class Cond:
    """One condition: ``kind`` is done, ended, exit or started (SPEC JOB-5; LSF
    "Dependency conditions"). ``op`` (one of OPS) and ``code`` (0..255) only for
    exit, both or neither; a bare ``exit(ID, CODE)`` is parsed with op ``==``.
    Raises ValueError for anything else."""

    kind: str
    ref: Ref
    op: str | None = None
    code: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"condition kind {self.kind!r}: expected one of {', '.join(KINDS)}")
        if (self.op is None) != (self.code is None) or (self.op is not None and self.kind != "exit"):
            raise ValueError("op and code go together, and only with exit")
        if self.op is not None and self.op not in OPS:
            raise ValueError(f"exit comparison {self.op!r}: expected one of {' '.join(OPS)}")
        if self.code is not None and not 0 <= self.code <= MAX_EXIT_CODE:
            raise ValueError(f"exit code {self.code}: expected 0 to {MAX_EXIT_CODE}")


@dataclass(frozen=True, slots=True)
class Not:
    """``!operand``: MET when the operand can never be met, NEVER when it is met,
    UNMET while it is undecided (see evaluate)."""

    operand: DepExpr


@dataclass(frozen=True, slots=True)
class And:
    """``a && b && ...``: two or more operands (ValueError otherwise); an And among
    them is spliced in, so the tree has one canonical shape."""

    operands: tuple[DepExpr, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "operands", _flatten(And, self.operands))


@dataclass(frozen=True, slots=True)
class Or:
    """``a || b || ...``: two or more operands (ValueError otherwise); an Or among
    them is spliced in, so the tree has one canonical shape."""

    operands: tuple[DepExpr, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "operands", _flatten(Or, self.operands))


DepExpr = Cond | Not | And | Or


def _flatten(cls: type, operands: Sequence[DepExpr]) -> tuple[DepExpr, ...]:
    flat: list[DepExpr] = []
    for o in operands:
        flat.extend(o.operands if isinstance(o, cls) else (o,))
    if len(flat) < 2:
        raise ValueError(f"{cls.__name__} needs at least two operands")
    return tuple(flat)


# ---------------------------------------------------------------------------- errors


class DependencyError(ValueError):
    """A dependency expression that cannot be parsed.

    Attributes: ``text`` (the expression), ``column`` (1-based, of the offending
    character; one past the end for "end of input"), ``expected`` (what would
    have been valid there, in words), ``found`` (what was there, or None).

    ``str(err)`` is one line, e.g. ``done(1 && done(2): column 8: expected ')'
    after job ID, found '&&'`` (a long text is shortened); ``err.pretty()`` adds
    the text (a window of it when long) and a caret under the column.
    """

    def __init__(self, text: str, column: int, expected: str, found: str | None = None,
                 reason: str | None = None) -> None:
        self.text = text
        self.column = column
        self.expected = expected
        self.found = found
        self.reason = reason if reason is not None else (
            f"expected {expected}" + (f", found {found}" if found is not None else ""))
        shown = text if len(text) <= 60 else text[:57] + "..."
        prefix = f"{_printable(shown)}: " if text.strip() else ""
        super().__init__(f"{prefix}column {column}: {self.reason}")

    def pretty(self) -> str:
        """The message, then the text (at most ~80 characters around the column)
        and a line with ``^`` under the column."""
        text, col = _printable(self.text), self.column
        if len(text) > 80:
            start = max(0, col - 41)
            end = min(len(text), start + 80)
            piece = text[start:end]
            if start > 0:
                piece, col = "..." + piece, col - start + 3
            if end < len(text):
                piece += "..."
            text = piece
        return f"{self}\n  {text}\n  {' ' * (col - 1)}^"


def _printable(s: str) -> str:
    return "".join(c if c.isprintable() else " " for c in s)


# ---------------------------------------------------------------------------- tokens


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # "num" "word" "str" "op" "bad" "eof", or the punctuation itself: ( ) [ ] , && || ! *
    text: str
    col: int  # 1-based

    def shown(self) -> str:
        if self.kind == "eof":
            return "end of input"
        t = self.text if len(self.text) <= 24 else self.text[:21] + "..."
        return f"'{t}'"


_DIGITS = frozenset("0123456789")
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_SPACE = frozenset(" \t\r\n")


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _SPACE:
            i += 1
            continue
        j = i + 1
        if c in _WORD:
            while j < n and text[j] in _WORD:
                j += 1
            word = text[i:j]
            kind = "num" if all(ch in _DIGITS for ch in word) else "word"
        elif c == '"':
            while j < n and text[j] != '"':
                j += 1
            j = min(j + 1, n)
            kind = "str"
        elif c in "&|":
            if j < n and text[j] == c:
                j += 1
                kind = c * 2
            else:
                kind = "bad"
        elif c in "<>!=":
            if j < n and text[j] == "=":
                j += 1
                kind = "op"
            elif c == "!":
                kind = "!"
            elif c == "=":
                kind = "bad"
            else:
                kind = "op"
        elif c in "()[],*":
            kind = c
        else:
            kind = "bad"
        out.append(_Tok(kind, text[i:j], i + 1))
        i = j
    out.append(_Tok("eof", "", n + 1))
    return out


# ---------------------------------------------------------------------------- parser


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.pos = 0
        self.conditions = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.pos]

    def take(self) -> _Tok:
        t = self.toks[self.pos]
        self.pos += 1
        return t

    def fail(self, expected: str, tok: _Tok | None = None, reason: str | None = None) -> DependencyError:
        tok = tok or self.tok
        return DependencyError(self.text, tok.col, expected, tok.shown(), reason)

    def parse(self) -> DepExpr:
        if self.tok.kind == "eof":
            raise DependencyError(self.text, 1, "a dependency condition such as done(123)", None,
                                  "empty dependency expression; expected a condition such as done(123)")
        expr = self.expr(0)
        t = self.tok
        if t.kind == ")":
            raise self.fail("", reason="unbalanced ')': no '(' before it to close")
        if t.kind != "eof":
            raise self.fail("'&&', '||' or end of input", reason=self.single(t))
        return expr

    def single(self, t: _Tok) -> str | None:
        """A lone '&' or '|' where an operator may stand: say how to write it."""
        if t.text in ("&", "|"):
            return f"expected '{t.text * 2}', found {t.shown()} (the operators are '&&' and '||')"
        return None

    def expr(self, depth: int) -> DepExpr:
        parts = [self.conj(depth)]
        while self.tok.kind == "||":
            self.take()
            parts.append(self.conj(depth))
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def conj(self, depth: int) -> DepExpr:
        parts = [self.unary(depth)]
        while self.tok.kind == "&&":
            self.take()
            parts.append(self.unary(depth))
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def unary(self, depth: int) -> DepExpr:
        t = self.tok
        if t.kind in ("!", "("):
            if depth >= MAX_DEPTH:
                raise self.fail("", reason=f"nested deeper than {MAX_DEPTH} levels of '(' and '!' "
                                           f"(MAX_DEPENDENCY_DEPTH)")
            self.take()
            if t.kind == "!":
                return Not(self.unary(depth + 1))
            inner = self.expr(depth + 1)
            if self.tok.kind != ")":
                raise self.fail(f"')' to close the '(' at column {t.col}" if self.tok.kind == "eof"
                                else f"'&&', '||' or ')' to close the '(' at column {t.col}",
                                reason=self.single(self.tok))
            self.take()
            return inner
        if t.kind == "num":
            self.count(t)
            return Cond("done", self.ref())  # LSF: a bare job ID means done(ID)
        if t.kind == "word":
            nxt = self.toks[self.pos + 1]
            if nxt.kind != "(" and t.text in KINDS:
                raise self.fail(f"'(' after '{t.text}'", nxt)
            if nxt.kind != "(":
                raise self.fail("", reason=f"only numeric job IDs and ID[INDEX] are accepted, found {t.shown()} "
                                           f"(job names are not supported yet); conditions: {_VALID}")
            return self.cond()
        after = {"&&": "before '&&'", "||": "before '||'"}.get(t.kind)
        if after is None and self.pos > 0:
            prev = self.toks[self.pos - 1].kind
            after = {"&&": "after '&&'", "||": "after '||'", "!": "after '!'", "(": "after '('"}.get(prev)
        raise self.fail(f"a condition ({_VALID})" + (f" {after}" if after else ""))

    def count(self, t: _Tok) -> None:
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            raise self.fail("", t, reason=f"more than {MAX_CONDITIONS} conditions in one dependency expression "
                                          f"(MAX_DEPENDENCY_CONDITIONS)")

    def cond(self) -> Cond:
        name = self.tok
        kind = name.text
        if kind not in KINDS:
            if kind in _LSF_ONLY:
                reason = f"'{kind}' is an LSF condition XCE does not support yet; valid conditions: {_VALID}"
            else:
                hint = " (conditions are lower case)" if kind.lower() in KINDS else ""
                reason = f"unknown condition '{kind}'{hint}; valid conditions: {_VALID}"
            raise self.fail("", reason=reason)
        self.count(name)
        self.take()
        self.take()  # "(", checked by unary()
        ref = self.ref()
        op = code = None
        if kind == "exit" and self.tok.kind == ",":
            self.take()
            written = None
            if self.tok.kind == "op":
                written = self.take().text
            elif self.tok.kind in ("!", "bad") and self.tok.text in ("!", "=", "&", "|"):
                raise self.fail(f"a comparison ({', '.join(OPS)}) or an exit code")
            code = self.exit_code(written)
            op = written or "=="  # LSF: a code without an operator tests for equality
        if self.tok.kind != ")":
            what = "exit code" if code is not None else "job ID"
            hint = ("an exit code after ',' is only for exit()"
                    if self.tok.kind == "," and kind != "exit" else None)
            if hint:
                raise self.fail("", reason=f"expected ')' after job ID, found ','; {hint}")
            if kind == "exit" and code is None:
                raise self.fail("',' or ')' after job ID")
            raise self.fail(f"')' after {what}")
        self.take()
        return Cond(kind, ref, op, code)

    def exit_code(self, op: str | None) -> int:
        t = self.tok
        if t.kind != "num":
            raise self.fail(f"an exit code (0 to {MAX_EXIT_CODE})" + (f" after '{op}'" if op else ""))
        if int(t.text) > MAX_EXIT_CODE:
            raise self.fail("", reason=f"exit code must be from 0 to {MAX_EXIT_CODE}, found {t.shown()}")
        self.take()
        return int(t.text)

    def ref(self) -> Ref:
        t = self.tok
        if t.kind != "num":
            if t.kind in ("word", "str"):
                raise self.fail("", reason=f"only numeric job IDs and ID[INDEX] are accepted, found {t.shown()} "
                                           f"(job names are not supported yet)")
            raise self.fail("a job ID (a number like 123, or 123[4] for an array element)")
        job_id = int(t.text)
        if not 1 <= job_id <= MAX_JOB_ID:
            raise self.fail("", reason=f"job ID must be a positive integer up to {MAX_JOB_ID}, found {t.shown()}")
        self.take()
        if self.tok.kind != "[":
            return Ref(job_id)
        self.take()
        t = self.tok
        if t.kind == "*":
            raise self.fail("", reason="one-to-one array dependencies (ID[*]) are not supported yet; "
                                       "name an element (123[4]) or the whole array (123)")
        if t.kind != "num" or not 1 <= int(t.text) <= MAX_ARRAY_INDEX:
            raise self.fail("", reason=f"array index must be a positive integer from 1 to {MAX_ARRAY_INDEX}, "
                                       f"found {t.shown()}")
        self.take()
        if self.tok.kind != "]":
            raise self.fail("']' after array index")
        self.take()
        return Ref(job_id, int(t.text))


def parse_dependency(text: str) -> DepExpr:
    """Parse a ``-w`` dependency expression (SPEC JOB-5; LSF ``bsub -w``, grammar in
    the module docstring). Returns the AST; a bare ``123`` becomes ``done(123)``.

    Raises DependencyError (a ValueError) naming the 1-based column and what was
    expected: an empty text, an unknown or unsupported condition, a job name, an
    unbalanced parenthesis, a dangling operator, a bad exit() comparison or code,
    an index that is not a positive integer, more than MAX_LENGTH characters,
    MAX_CONDITIONS conditions or MAX_DEPTH levels of nesting.
    """
    if not isinstance(text, str):
        raise TypeError(f"dependency expression must be a str, not {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise DependencyError(text, MAX_LENGTH + 1, "", None,
                              f"dependency expression is longer than {MAX_LENGTH} characters ({len(text)}; "
                              f"MAX_DEPENDENCY_LENGTH)")
    return _Parser(text).parse()


# ---------------------------------------------------------------------------- render, refs


def render(expr: DepExpr) -> str:
    """Canonical text of an expression (SPEC JOB-5: the stored dependency reads
    back normalised), e.g. ``done(1) && (ended(2) || !exit(3,>2))``.
    ``parse_dependency(render(e)) == e`` for every well-formed ``e``."""
    if isinstance(expr, Cond):
        arg = str(expr.ref) if expr.op is None else f"{expr.ref},{expr.op}{expr.code}"
        return f"{expr.kind}({arg})"
    if isinstance(expr, Not):
        inner = render(expr.operand)
        return "!" + (inner if isinstance(expr.operand, (Cond, Not)) else f"({inner})")
    if isinstance(expr, And):
        return " && ".join(f"({render(o)})" if isinstance(o, Or) else render(o) for o in expr.operands)
    if isinstance(expr, Or):
        return " || ".join(render(o) for o in expr.operands)
    raise TypeError(f"not a dependency expression: {expr!r}")


def refs(expr: DepExpr) -> set[tuple[int, int | None]]:
    """Every (job_id, index) the expression names; index None for a whole job or
    array. The controller checks these exist at submission (LSF: a dependency on a
    job it cannot find fails the submission, bsub -w page)."""
    out: set[tuple[int, int | None]] = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Cond):
            out.add((e.ref.job_id, e.ref.index))
        elif isinstance(e, Not):
            stack.append(e.operand)
        else:
            stack.extend(e.operands)
    return out


# ---------------------------------------------------------------------------- evaluation


class Verdict(StrEnum):
    """Three-valued result: MET (the job may start), UNMET (not yet, may be met
    later), NEVER (cannot be met given the current states: SPEC JOB-5's "can
    never be met", LSF's PEND_JOB_DEP_INVALID "invalid or never satisfied")."""

    MET = "MET"
    UNMET = "UNMET"
    NEVER = "NEVER"


@dataclass(frozen=True, slots=True)
class RefState:
    """What a lookup reports for one job or array element: its state (a JobState or
    its name), the exit code once ended (None if it never ran or is still going),
    and the element index (None or 0 for a plain job) used in explanations."""

    state: JobState
    exit_code: int | None = None
    index: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", JobState(self.state))


#: ``lookup(job_id, index)``: a RefState for a plain job or an element; for a
#: whole array (index None) a sequence of the elements' RefStates; None when
#: the job (or element) does not exist.
Lookup = Callable[[int, int | None], RefState | Sequence[RefState] | None]

_M, _U, _N = Verdict.MET, Verdict.UNMET, Verdict.NEVER
_STARTED = frozenset({JobState.RUN, JobState.USUSP, JobState.DONE, JobState.EXIT})
_ORDER = (JobState.DONE, JobState.EXIT, JobState.RUN, JobState.USUSP, JobState.PEND, JobState.PSUSP)
_CMP = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
}


def _cond_verdict(c: Cond, rs: RefState) -> Verdict:
    """One condition against one job or element (LSF "Dependency conditions")."""
    s = rs.state
    if c.kind == "done":  # the job state is DONE
        return _M if s is JobState.DONE else _N if s is JobState.EXIT else _U
    if c.kind == "ended":  # EXIT or DONE
        return _M if s in (JobState.DONE, JobState.EXIT) else _U
    if c.kind == "started":  # LSF 7.3: RUN, DONE or EXIT; a suspended job has started too
        return _M if s in _STARTED else _U
    # exit: the state is EXIT and the code satisfies the comparison, if any
    if s is JobState.DONE:
        return _N
    if s is not JobState.EXIT:
        return _U
    if c.op is None:
        return _M
    return _M if rs.exit_code is not None and _CMP[c.op](rs.exit_code, c.code) else _N


def _label(job_id: int, rs: RefState | None = None, index: int | None = None) -> str:
    idx = rs.index if rs is not None else index
    return f"job {job_id}" if not idx else f"job {job_id}[{idx}]"


def _describe(label: str, rs: RefState) -> str:
    if rs.state is JobState.DONE:
        return f"{label} ended DONE"
    if rs.state is JobState.EXIT:
        return f"{label} ended EXIT " + ("without an exit code" if rs.exit_code is None
                                          else f"with code {rs.exit_code}")
    return f"{label} is {rs.state}"


class _Summary:
    """A whole array's elements by (state, exit code): for each, the first element of the
    kind (its place in element order and its RefState) and how many there are. A condition's
    verdict depends on state and exit code alone, so a condition over the array is decided
    from these few kinds (at most 6 states x 257 codes) instead of every element."""

    __slots__ = ("kinds", "states")

    def __init__(self, states: Sequence[RefState]) -> None:
        self.states = states  # held, so the id this summary is memoised by stays its own
        kinds: dict[tuple[JobState, int | None], list] = {}
        for pos, rs in enumerate(states):
            kind = kinds.get((rs.state, rs.exit_code))
            if kind is None:
                kinds[(rs.state, rs.exit_code)] = [pos, rs, 1]
            else:
                kind[2] += 1
        self.kinds = kinds


def _eval_cond(c: Cond, lookup: Lookup, why: bool, memo: dict[int, _Summary]) -> tuple[Verdict, str]:
    got = lookup(c.ref.job_id, c.ref.index)
    if got is None:
        return _N, f"{_label(c.ref.job_id, index=c.ref.index)} does not exist"
    if isinstance(got, RefState):
        label = _label(c.ref.job_id, index=c.ref.index) if c.ref.index is not None else _label(c.ref.job_id, got)
        return _cond_verdict(c, got), (_describe(label, got) if why else "")
    states = list(got)
    if not states:
        return _N, f"job {c.ref.job_id} has no elements"
    if len(states) == 1:
        return _cond_verdict(c, states[0]), (_describe(_label(c.ref.job_id, states[0]), states[0]) if why else "")
    # A whole array: every element must meet the condition (LSF: all jobs the
    # reference names must satisfy the test; done(array) waits for all of it). The
    # first element that never can (in element order) is the one named.
    summary = memo.get(id(got))
    if summary is None:
        summary = memo[id(got)] = _Summary(got)  # type: ignore[arg-type]
    verdict = _M
    never: tuple[int, RefState] | None = None
    for pos, rs, _ in summary.kinds.values():
        v = _cond_verdict(c, rs)
        if v is _N:
            if never is None or pos < never[0]:
                never = (pos, rs)
        elif v is _U:
            verdict = _U
    if never is not None:
        return _N, (_describe(_label(c.ref.job_id, never[1]), never[1]) if why else "")
    if not why:
        return verdict, ""
    counts = dict.fromkeys(_ORDER, 0)
    for (state, _code), (_pos, _rs, n) in summary.kinds.items():
        counts[state] += n
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    return verdict, f"job {c.ref.job_id} elements: {summary}"


def _clip(s: str, width: int = 80) -> str:
    return s if len(s) <= width else s[: width - 3] + "..."


def _join(details: list[str]) -> str:
    shown = "; ".join(details[:3])
    return shown + (f"; and {len(details) - 3} more" if len(details) > 3 else "")


def _eval(expr: DepExpr, lookup: Lookup, why: bool, memo: dict[int, _Summary]) -> tuple[Verdict, DepExpr, str]:
    """(verdict, culprit, detail): the culprit is the part of the expression that
    decides the verdict and the detail the states behind it (both for explain();
    the detail is "" unless ``why``). ``memo``: the whole arrays read so far."""
    if isinstance(expr, Cond):
        v, detail = _eval_cond(expr, lookup, why, memo)
        return v, expr, detail
    if isinstance(expr, Not):
        v, _, detail = _eval(expr.operand, lookup, why, memo)
        return (_N if v is _M else _M if v is _N else _U), expr, detail  # MET <-> NEVER, UNMET stays
    # &&: any NEVER -> NEVER, all MET -> MET, else UNMET; || is the dual.
    stop, every = (_N, _M) if isinstance(expr, And) else (_M, _N)
    first_unmet = None
    details: list[str] = []
    for o in expr.operands:
        v, culprit, detail = _eval(o, lookup, why, memo)
        if v is stop:
            return v, culprit, detail
        if v is _U and first_unmet is None:
            first_unmet = (v, culprit, detail)
        if why:
            details.append(detail)
    if first_unmet is not None:
        return first_unmet
    return every, expr, _join(details)


def evaluate(expr: DepExpr, lookup: Lookup) -> Verdict:
    """Three-valued value of a dependency expression given the referenced jobs'
    states (SPEC JOB-5: a dependency that can never be met leaves the job pending
    with that reason).

    ``lookup(job_id, index)`` returns a RefState (plain job or element), a
    sequence of RefStates (a whole array, index None), or None (no such job).

    Conditions (LSF "Dependency conditions" page): done = DONE; ended = DONE or
    EXIT; exit = EXIT with a code satisfying the comparison (a DONE job: NEVER);
    started = RUN, USUSP, DONE or EXIT. A condition on a job that ended the other
    way is NEVER; on an unknown job NEVER. A whole array meets a condition when
    every element does (NEVER when any element cannot). ``!`` swaps MET and
    NEVER and keeps UNMET; ``&&``: any NEVER -> NEVER, all MET -> MET, else
    UNMET; ``||``: any MET -> MET, all NEVER -> NEVER, else UNMET.
    """
    return _eval(expr, lookup, False, {})[0]


def explain(expr: DepExpr, lookup: Lookup) -> str:
    """One-line pend reason for ``evaluate(expr, lookup)`` (SPEC JOB-5, RES-6 style;
    LSF's "waiting for its dependency condition(s)" / "never satisfied"), naming the
    deciding condition and the state behind it, e.g.
    ``Dependency condition not satisfied: done(12) (job 12 is RUN)`` or
    ``Dependency can never be met: done(12) (job 12 ended EXIT with code 1)``.
    For MET: ``Dependency condition satisfied: ...``."""
    v, culprit, detail = _eval(expr, lookup, True, {})
    head = {_M: "Dependency condition satisfied", _U: "Dependency condition not satisfied",
            _N: "Dependency can never be met"}[v]
    return f"{head}: {_clip(render(culprit))} ({detail})"

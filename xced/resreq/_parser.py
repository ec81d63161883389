"""A hand-written recursive-descent parser for LSF resource requirement strings.

Grammar (whitespace — space, tab, CR, LF — is allowed between any two tokens)::

    resreq      := ""  |  simple  |  compound  |  alternative
    compound    := count "*" "{" simple "}" ( "+" count "*" "{" simple "}" )*
    alternative := "{" (simple | compound) "}" ( "||" "{" (simple | compound) "}" )*
    simple      := [ expr ] section*            -- a leading bare expr is the select
    section     := "select" "[" expr "]" | "order" "[" order "]"
                 | "rusage" "[" rusage "]" | "span" "[" span "]" | "same" "[" same "]"
    order       := ["-"] name ( ":" ["-"] name )*
    rusage      := groups ( "||" groups )*
    groups      := group ( "," group )*
    group       := item ( ":" item )*        -- items: name=value, duration=N[s|m|h], decay=0|1
    value       := number [ "KB"|"MB"|"GB"|"TB"|"K"|"M"|"G"|"T" ] [ "/task"|"/host"|"/job" ]
    span        := "ptile" "=" int>=1 | "hosts" "=" ("1"|"-1") | "block" "=" int>=1
    same        := name ( ":" name )*
    expr        := or ;  or := and ("||" and)* ;  and := eq ("&&" eq)*   -- flat BoolOp chains
    eq          := rel (("=="|"!="|"=") rel)* ;  rel := add (("<"|"<="|">"|">=") add)*
    add         := mul (("+"|"-") mul)* ;  mul := unary (("*"|"/") unary)*
    unary       := ("-"|"!") unary | primary
    primary     := number [unit] | 'string' | "string" | name | "defined" "(" name ")"
                 | "(" expr ")"

Names are ASCII ``[A-Za-z_][A-Za-z0-9_]*``; numbers are ASCII decimals. A name followed
by ``.word``s (``LINUX2.4``, RES-7) is an unquoted string value, read as one ``Name``; it
may only be one side of ``==``/``!=`` (LSF writes host types so: docs/lsf-behaviour.md
section 1).

Bounds (D-8; the values are in xced.model.units). The work is linear in the text: a chain
of ``&&`` or ``||`` is read in a loop into one ``BoolOp``, every other construct nests
the parser at most ``max_depth`` deep. Depth: a value (name, number, string,
``defined()``) is one level, and each ``(``, each ``!``/``-`` prefix and each arithmetic or
comparison operator around it adds one (``a + b + c`` is three levels, ``(a > 1)`` three),
a whole ``&&``/``||`` chain adds one however long. ``parse`` holds any text to
MAX_PARSE_DEPTH (the walkers over the tree recurse per level) and, with ``capped=True``,
to what a user or admin may write: MAX_SELECT_DEPTH levels, MAX_RESREQ_TERMS terms,
MAX_RESREQ_ALTERNATIVES rusage alternatives or parts; ``parse_job`` holds all the -R
strings of one job to those caps together. An error names the cap and the column.
"""

from __future__ import annotations

import re
from decimal import Decimal

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
)
from ._errors import ResReqError
from xced.model.units import (
    MAX_RESREQ_ALTERNATIVES,
    MAX_RESREQ_STRINGS,
    MAX_RESREQ_TERMS,
    MAX_SELECT_DEPTH,
)

__all__ = ["MAX_PARSE_DEPTH", "order_keys_at", "parse", "parse_job", "parse_select"]

SECTIONS = ("select", "order", "rusage", "span", "same")
UNSUPPORTED_SECTIONS = ("cu", "affinity")
SECTION_LIST = "select[...], order[...], rusage[...], span[...] or same[...]"

_WS = " \t\r\n"
_DIGITS = "0123456789"
_IDENT_START = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_IDENT_CHARS = _IDENT_START + _DIGITS
_LETTERS = _IDENT_START[:-1]

#: Memory units accepted on numbers, as factors to MB (1 GB = 1024 MB).
UNIT_FACTORS: dict[str, float] = {
    "KB": 1 / 1024, "K": 1 / 1024, "MB": 1, "M": 1,
    "GB": 1024, "G": 1024, "TB": 1024 * 1024, "T": 1024 * 1024,
}
_DURATION_FACTORS = {"s": 1, "m": 60, "h": 3600}
_PER = ("task", "host", "job")

_BINARY_LEVELS: tuple[tuple[str, ...], ...] = (
    ("||",),
    ("&&",),
    ("==", "!=", "="),
    ("<", "<=", ">", ">="),
    ("+", "-"),
    ("*", "/"),
)
_TWO_CHAR_OPS = ("&&", "||", "==", "!=", "<=", ">=")
_ONE_CHAR_OPS = "<>=+-*/!()"
COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})

_COMPOUND_START = re.compile(r"[0-9]+[ \t\r\n]*\*[ \t\r\n]*\{")

#: The deepest select expression ``parse`` reads from any text (see the module
#: docstring): a safety bound for the parser and the walkers that recurse per level
#: (render, evaluation, equality), above what users and admins may write
#: (MAX_SELECT_DEPTH), so that text the daemon renders from a merged request (the
#: profile's select ANDed with the job's adds a level) always reads back.
MAX_PARSE_DEPTH = 2 * MAX_SELECT_DEPTH
_MAX_NUMBER_CHARS = 40
#: the longest unquoted dotted value (``LINUX2.4``) a select may hold
_MAX_WORD_CHARS = 255
_VALUE_WORDS = "a value (number, resource name, quoted string, '(', '!', '-' or defined(name))"


def _normalise_number(value: float) -> int | float:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


def format_number(value: float) -> str:
    """Decimal text for a number that parses back to the same value (no exponent)."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return str(value)
    text = repr(value)
    if "e" in text or "E" in text:
        text = format(Decimal(text), "f")
        if "." not in text:
            text += ".0"
    return text


_TERM_WORDS = "select operands, rusage items, order keys, same names and parts count one each"


class _Parser:
    def __init__(self, text: str, *, max_depth: int = MAX_PARSE_DEPTH, max_terms: int | None = None,
                 max_alternatives: int | None = None, depth_name: str = "MAX_PARSE_DEPTH",
                 terms_words: str = "", terms_before: int = 0) -> None:
        self.text = text
        self.n = len(text)
        self.pos = 0
        self.nesting = 0
        self.max_depth = max_depth
        self.depth_name = depth_name
        self.max_terms = max_terms
        self.terms_words = terms_words
        self.max_alternatives = max_alternatives
        self.terms = 0
        #: terms of the job's earlier -R strings, which count towards max_terms too
        self.terms_before = terms_before
        #: (order key, 1-based column) of each order[] key read, when asked for (order_keys_at)
        self.order_at: list[tuple[str, int]] | None = None

    # ------------------------------------------------------------------ helpers

    def fail(self, pos: int, expected: str, reason: str | None = None, found: str | None = None) -> ResReqError:
        return ResReqError(self.text, pos + 1, expected, found if found is not None else self.found(pos), reason)

    def found(self, pos: int) -> str:
        text, n = self.text, self.n
        if pos >= n:
            return "end of input"
        c = text[pos]
        end = pos + 1
        if c in _IDENT_START:
            while end < n and text[end] in _IDENT_CHARS:
                end += 1
        elif c in _DIGITS:
            while end < n and text[end] in _DIGITS + ".":
                end += 1
        elif text[pos:pos + 2] in _TWO_CHAR_OPS:
            end = pos + 2
        tok = text[pos:end]
        if len(tok) > 30:
            tok = tok[:30] + "..."
        return repr(tok)

    def term(self, pos: int) -> None:
        """One more term (MAX_RESREQ_TERMS), at ``pos``."""
        self.terms += 1
        if self.max_terms is not None and self.terms + self.terms_before > self.max_terms:
            raise self.fail(pos, f"at most {self.max_terms} terms",
                            reason=f"more than {self.max_terms} terms{self.terms_words} (MAX_RESREQ_TERMS; "
                                   f"{_TERM_WORDS})")

    def alternative(self, pos: int, count: int, what: str) -> None:
        """``count`` rusage alternatives or parts so far (MAX_RESREQ_ALTERNATIVES)."""
        if self.max_alternatives is not None and count > self.max_alternatives:
            raise self.fail(pos, f"at most {self.max_alternatives} {what}",
                            reason=f"more than {self.max_alternatives} {what} (MAX_RESREQ_ALTERNATIVES)")

    def too_deep(self, pos: int, depth: int) -> None:
        if depth > self.max_depth:
            raise self.fail(pos, f"a select expression at most {self.max_depth} levels deep",
                            reason=f"select expression nested more than {self.max_depth} levels deep "
                                   f"({self.depth_name}: a value is one level, and each '(', '!', '-' and "
                                   f"arithmetic or comparison operator around it adds one; a chain of && or || "
                                   f"adds one)")

    def skip_ws(self) -> None:
        text, n, pos = self.text, self.n, self.pos
        while pos < n and text[pos] in _WS:
            pos += 1
        self.pos = pos

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < self.n else ""

    def at_end(self) -> bool:
        return self.pos >= self.n

    def expect(self, char: str, expected: str | None = None) -> None:
        self.skip_ws()
        if self.peek() != char:
            raise self.fail(self.pos, expected or repr(char))
        self.pos += 1

    def ident_at(self, pos: int) -> str | None:
        text, n = self.text, self.n
        if pos >= n or text[pos] not in _IDENT_START:
            return None
        end = pos + 1
        while end < n and text[end] in _IDENT_CHARS:
            end += 1
        return text[pos:end]

    def read_ident(self, expected: str) -> str:
        self.skip_ws()
        ident = self.ident_at(self.pos)
        if ident is None:
            raise self.fail(self.pos, expected)
        self.pos += len(ident)
        return ident

    def next_non_ws(self, pos: int) -> int:
        text, n = self.text, self.n
        while pos < n and text[pos] in _WS:
            pos += 1
        return pos

    def read_digits(self) -> str:
        text, n, start = self.text, self.n, self.pos
        end = start
        while end < n and text[end] in _DIGITS:
            end += 1
        if end - start > _MAX_NUMBER_CHARS:
            raise self.fail(start, f"a number of at most {_MAX_NUMBER_CHARS} digits", found="a longer number")
        self.pos = end
        return text[start:end]

    def read_decimal(self, expected: str) -> int | float:
        """ASCII ``123``, ``1.5``, ``1.`` or ``.5`` at pos; int unless a '.' is written."""
        start = self.pos
        whole = self.read_digits()
        frac = None
        if self.peek() == ".":
            self.pos += 1
            frac = self.read_digits()
        if not whole and not frac:
            self.pos = start
            raise self.fail(start, expected)
        if self.pos - start > _MAX_NUMBER_CHARS:
            raise self.fail(start, f"a number of at most {_MAX_NUMBER_CHARS} characters", found="a longer number")
        if frac is None:
            return int(whole)
        return float(f"{whole or '0'}.{frac or '0'}")

    def read_unit(self, what: str) -> float | None:
        """An optional memory unit right after a number: its factor to MB."""
        text, n, start = self.text, self.n, self.pos
        end = start
        while end < n and text[end] in _LETTERS:
            end += 1
        if end == start:
            return None
        word = text[start:end]
        if word.upper() not in UNIT_FACTORS or (end < n and text[end] in _IDENT_CHARS):
            raise self.fail(start, f"a unit KB, MB, GB or TB{what}")
        self.pos = end
        return UNIT_FACTORS[word.upper()]

    # ------------------------------------------------------------------ top level

    def parse(self) -> ResReq:
        self.skip_ws()
        if self.at_end():
            return ResReq()
        if _COMPOUND_START.match(self.text, self.pos):
            req = self.parse_compound(stop=None)
        elif self.peek() == "{":
            req = self.parse_alternative()
        else:
            req = self.parse_simple(stop=None)
        self.skip_ws()
        if not self.at_end():  # pragma: no cover - each branch consumes to the end
            raise self.fail(self.pos, "end of input")
        return req

    def parse_compound(self, stop: str | None) -> ResReq:
        parts: list[Part] = []
        while True:
            self.skip_ws()
            start = self.pos
            digits = self.read_digits()
            if not digits:
                raise self.fail(start, "a slot count and a requirement (N*{...})")
            count = int(digits)
            if count < 1:
                raise self.fail(start, "a slot count >= 1 before '*{'")
            self.term(start)
            self.alternative(start, len(parts) + 1, "parts in a compound requirement")
            self.expect("*", "'*' after the slot count")
            self.expect("{", "'{' after '*'")
            inner = self.parse_simple(stop="}")
            self.not_empty(inner)
            self.expect("}", "'}'")
            parts.append(Part(count, inner))
            self.skip_ws()
            if self.at_end() or (stop is not None and self.peek() == stop):
                break
            if self.peek() != "+":
                raise self.fail(self.pos, "'+' and another N*{...}, or end of input" if stop is None
                                else f"'+' and another N*{{...}}, or {stop!r}")
            self.pos += 1
            self.skip_ws()
            if self.at_end():
                raise self.fail(self.pos, "a slot count and a requirement (N*{...}) after '+'")
        return ResReq(kind="compound", parts=tuple(parts))

    def parse_alternative(self) -> ResReq:
        parts: list[Part] = []
        while True:
            self.skip_ws()
            self.term(self.pos)
            self.alternative(self.pos, len(parts) + 1, "alternatives in an alternative requirement")
            self.expect("{", "'{'")
            self.skip_ws()
            if _COMPOUND_START.match(self.text, self.pos):
                inner = self.parse_compound(stop="}")
            else:
                inner = self.parse_simple(stop="}")
                self.not_empty(inner)
            self.expect("}", "'}'")
            parts.append(Part(None, inner))
            self.skip_ws()
            if self.at_end():
                break
            if self.text.startswith("||", self.pos):
                self.pos += 2
                self.skip_ws()
                if self.at_end():
                    raise self.fail(self.pos, "'{' and another requirement after '||'")
                continue
            raise self.fail(self.pos, "'||' and another {...}, or end of input")
        if len(parts) == 1:
            return parts[0].resreq
        return ResReq(kind="alternative", parts=tuple(parts))

    def not_empty(self, inner: ResReq) -> None:
        """Refuse `{}` (a part or an alternative with no section, at its '}') in what a user
        or admin writes (a capped parse): it would say nothing, as the empty sections
        `select[]`, `rusage[]` ... are refused. A stored requirement (uncapped) is read as it
        was, so that jobs taken before this rule still load."""
        if inner.is_empty and self.max_terms is not None:
            raise self.fail(self.pos, "a requirement inside '{...}' (select[...], rusage[...], span[...], ...)")

    def parse_simple(self, stop: str | None) -> ResReq:
        found: dict[str, object] = {}
        first = True
        after_bare = False
        end_words = "end of input" if stop is None else repr(stop)
        while True:
            self.skip_ws()
            if self.at_end() or (stop is not None and self.peek() == stop):
                break
            start = self.pos
            ident = self.ident_at(start)
            if ident is not None:
                bracket = self.next_non_ws(start + len(ident))
                has_bracket = bracket < self.n and self.text[bracket] == "["
                if has_bracket:
                    if ident in UNSUPPORTED_SECTIONS:
                        raise self.fail(start, f"one of {SECTION_LIST}",
                                        reason=f"{ident}[...] sections are not supported yet "
                                               f"(XCE accepts {SECTION_LIST})")
                    if ident not in SECTIONS:
                        raise self.fail(start, f"a section name: {SECTION_LIST}",
                                        reason=f"unknown section '{ident}[...]'; expected {SECTION_LIST}")
                    if ident in found:
                        what = ("a leading expression already is the select section"
                                if ident == "select" and found.get("__bare__") else
                                f"{ident}[...] appears twice; give one per string, or merge several -R strings")
                        raise self.fail(start, f"one {ident}[...] section", reason=what)
                    self.pos = bracket + 1
                    found[ident] = getattr(self, f"section_{ident}")()
                    first = False
                    after_bare = False
                    continue
                if ident in SECTIONS or ident in UNSUPPORTED_SECTIONS:
                    raise self.fail(bracket, f"'[' after '{ident}'")
            if first:
                if self.peek() in "[]{}":
                    raise self.fail(start, f"a select expression or a section ({SECTION_LIST})")
                found["select"] = self.parse_expr()
                found["__bare__"] = True
                first = False
                after_bare = True
                continue
            if after_bare:
                raise self.fail(start, f"an operator, a section ({SECTION_LIST}) or {end_words}")
            raise self.fail(start, f"a section ({SECTION_LIST}) or {end_words}")
        return ResReq(
            kind="simple",
            select=found.get("select"),  # type: ignore[arg-type]
            order=found.get("order", ()),  # type: ignore[arg-type]
            rusage=found.get("rusage", ()),  # type: ignore[arg-type]
            span=found.get("span"),  # type: ignore[arg-type]
            same=found.get("same", ()),  # type: ignore[arg-type]
        )

    # ------------------------------------------------------------------ sections

    def section_select(self) -> Expr:
        self.skip_ws()
        if self.peek() == "]":
            raise self.fail(self.pos, "a select expression inside select[...]")
        expr = self.parse_expr()
        self.expect("]", "an operator or ']'")
        return expr

    def section_order(self) -> tuple[OrderKey, ...]:
        keys: list[OrderKey] = []
        seen: set[str] = set()
        while True:
            self.skip_ws()
            desc = False
            if self.peek() == "-":
                desc = True
                self.pos += 1
                self.skip_ws()
            start = self.pos
            raw = self.read_ident("a load index name ([-]name[:[-]name]...)")
            self.term(start)
            name = ALIASES.get(raw, raw)
            if self.order_at is not None:
                self.order_at.append((name, start + 1))
            if name in seen:
                raise self.fail(start, "each load index once in order[...]",
                                reason=f"'{name}' appears twice in order[...]")
            seen.add(name)
            keys.append(OrderKey(name, desc))
            self.skip_ws()
            if self.peek() == ":":
                self.pos += 1
                continue
            self.expect("]", "':' or ']'")
            return tuple(keys)

    def section_rusage(self) -> tuple[tuple[RusageGroup, ...], ...]:
        alternatives: list[tuple[RusageGroup, ...]] = []
        while True:
            groups: list[RusageGroup] = []
            seen: set[str] = set()
            while True:
                groups.append(self.rusage_group(seen))
                self.skip_ws()
                if self.peek() == ",":
                    self.pos += 1
                    continue
                break
            alternatives.append(tuple(groups))
            if self.text.startswith("||", self.pos):
                self.alternative(self.pos, len(alternatives) + 1, "rusage alternatives ('||') in one rusage[]")
                self.pos += 2
                continue
            self.expect("]", "':', ',', '||' or ']'")
            return tuple(alternatives)

    def rusage_group(self, seen: set[str]) -> RusageGroup:
        terms: list[RusageTerm] = []
        duration: int | None = None
        decay: int | None = None
        self.skip_ws()
        group_start = self.pos
        while True:
            self.skip_ws()
            start = self.pos
            raw = self.read_ident("a resource name (name=value)")
            self.term(start)
            self.expect("=", f"'=' after '{raw}'")
            self.skip_ws()
            if raw == "duration":
                if duration is not None:
                    raise self.fail(start, "one duration per usage string", reason="duration appears twice")
                duration = self.rusage_duration()
            elif raw == "decay":
                if decay is not None:
                    raise self.fail(start, "one decay per usage string", reason="decay appears twice")
                vstart = self.pos
                digits = self.read_digits()
                if digits not in ("0", "1") or (self.peek() and self.peek() in _IDENT_CHARS + "."):
                    raise self.fail(vstart, "0 or 1 for decay")
                decay = int(digits)
            else:
                name = ALIASES.get(raw, raw)
                if name in seen:
                    raise self.fail(start, "each resource once per rusage alternative",
                                    reason=f"'{name}' appears twice in one rusage alternative "
                                           "(LSF allows a load index only once)")
                seen.add(name)
                terms.append(self.rusage_value(name))
            self.skip_ws()
            if self.peek() == ":":
                self.pos += 1
                continue
            break
        if not terms:
            raise self.fail(group_start, "at least one name=value before duration/decay",
                            reason="a usage string needs at least one name=value term")
        return RusageGroup(tuple(terms), duration, decay)

    def rusage_duration(self) -> int:
        start = self.pos
        digits = self.read_digits()
        if not digits:
            raise self.fail(start, "a duration N[s|m|h] (minutes by default)")
        factor = 60
        c = self.peek()
        if c and c in _LETTERS:
            if c.lower() not in _DURATION_FACTORS or (self.pos + 1 < self.n and self.text[self.pos + 1] in _IDENT_CHARS):
                raise self.fail(self.pos, "a duration unit s, m or h (minutes by default)")
            factor = _DURATION_FACTORS[c.lower()]
            self.pos += 1
        elif c == ".":
            raise self.fail(self.pos, "a whole number for duration")
        seconds = int(digits) * factor
        if seconds <= 0:
            raise self.fail(start, "a duration > 0")
        return seconds

    def rusage_value(self, name: str) -> RusageTerm:
        value: int | float = self.read_decimal(f"a non-negative number after '{name}='")
        unit = None
        factor = self.read_unit(f" after the value of '{name}'")
        if factor is not None:
            value = value * factor
            unit = "MB"
        elif name in MEMORY_RESOURCES:
            unit = "MB"
        per = None
        if self.peek() == "/":
            self.pos += 1
            pstart = self.pos
            word = self.ident_at(pstart)
            if word not in _PER:
                raise self.fail(pstart, "task, host or job after '/'")
            self.pos += len(word)  # type: ignore[arg-type]
            per = word
        if self.peek() and self.peek() in _IDENT_CHARS + ".":
            raise self.fail(self.pos, f"':', ',', '||' or ']' after the value of '{name}'")
        return RusageTerm(name, _normalise_number(value), unit, per)  # type: ignore[arg-type]

    def section_span(self) -> Span:
        self.skip_ws()
        start = self.pos
        key = self.read_ident("ptile=N, hosts=1, hosts=-1 or block=N")
        if key == "stripe":
            raise self.fail(start, "ptile=N, hosts=1, hosts=-1 or block=N",
                            reason="span[stripe] is not supported yet; use ptile=N, hosts=1 or block=N")
        if key not in ("ptile", "hosts", "block"):
            raise self.fail(start, "ptile=N, hosts=1, hosts=-1 or block=N")
        self.expect("=", f"'=' after '{key}'")
        self.skip_ws()
        vstart = self.pos
        if key == "ptile" and self.peek() in ("'", '"'):
            raise self.fail(vstart, "a number of tasks per host for ptile",
                            reason="ptile='!' (the host's MXJ) is not supported yet; give ptile=N")
        negative = self.peek() == "-"
        if negative:
            self.pos += 1
        digits = self.read_digits()
        if not digits or (self.peek() and self.peek() in _IDENT_CHARS + "."):
            self.pos = vstart
            raise self.fail(vstart, "1 or -1 for hosts" if key == "hosts" else f"an integer >= 1 for {key}")
        value = -int(digits) if negative else int(digits)
        if key == "hosts" and value not in (1, -1):
            raise self.fail(vstart, "1 or -1 for hosts (span[hosts=1]: all tasks on one host; "
                                    "hosts=-1 cancels a queue span)", found=repr(self.text[vstart:self.pos]))
        if key != "hosts" and value < 1:
            raise self.fail(vstart, f"an integer >= 1 for {key}", found=repr(self.text[vstart:self.pos]))
        self.skip_ws()
        if self.peek() in (":", ","):
            nxt = self.next_non_ws(self.pos + 1)
            other = self.ident_at(nxt)
            if other in ("ptile", "hosts", "block"):
                raise self.fail(nxt, "']'", reason=f"span takes only one of ptile, hosts and block "
                                                  f"({key} is already given)")
        self.expect("]", "']'")
        return Span(**{key: value})

    def section_same(self) -> tuple[str, ...]:
        names: dict[str, None] = {}  # first-seen order, each once
        while True:
            self.skip_ws()
            self.term(self.pos)
            raw = self.read_ident("a resource name (name[:name]...)")
            names.setdefault(ALIASES.get(raw, raw))
            self.skip_ws()
            if self.peek() == ":":
                self.pos += 1
                continue
            self.expect("]", "':' or ']'")
            return tuple(names)

    # ------------------------------------------------------------------ expressions

    def parse_expr(self) -> Expr:
        expr, _ = self.binary(0)
        return canonical(expr)

    def peek_op(self) -> str | None:
        self.skip_ws()
        two = self.text[self.pos:self.pos + 2]
        if two in _TWO_CHAR_OPS:
            return two
        c = self.peek()
        if c and c in _ONE_CHAR_OPS:
            return c
        if c in ("&", "|"):
            raise self.fail(self.pos, f"'{c}{c}'")
        return None

    def binary(self, level: int) -> tuple[Expr, int]:
        """The expression at precedence ``level`` and its depth (see the module docstring)."""
        if level == len(_BINARY_LEVELS):
            return self.unary()
        ops = _BINARY_LEVELS[level]
        left, depth = self.binary(level + 1)
        if ops[0] in ("||", "&&"):  # a chain, read in a loop into one flat node
            operands = [left]
            deepest = None  # the operator before the deepest operand (or the first operator)
            while self.peek_op() == ops[0]:
                at = self.pos
                self.pos += 2
                right, rdepth = self.binary(level + 1)
                operands.append(right)
                if deepest is None or rdepth > depth:
                    deepest = at
                depth = max(depth, rdepth)
            if deepest is None:
                return left, depth
            self.too_deep(deepest, depth + 1)
            return BoolOp(ops[0], tuple(operands)), depth + 1  # type: ignore[arg-type]
        while True:
            op = self.peek_op()
            if op not in ops:
                return left, depth
            at = self.pos
            self.pos += len(op)  # type: ignore[arg-type]
            right, rdepth = self.binary(level + 1)
            depth = max(depth, rdepth) + 1
            self.too_deep(at, depth)
            left = Binary("==" if op == "=" else op, left, right)  # type: ignore[arg-type]

    def enter(self, pos: int) -> None:
        """One more '(' or prefix operator at ``pos``: refused before the parser goes deeper."""
        self.nesting += 1
        self.too_deep(pos, self.nesting + 1)

    def unary(self) -> tuple[Expr, int]:
        self.skip_ws()
        c = self.peek()
        if c in ("-", "!") and not self.text.startswith("!=", self.pos):
            at = self.pos
            self.pos += 1
            self.enter(at)
            operand, depth = self.unary()
            self.nesting -= 1
            if c == "-" and isinstance(operand, Num):
                return Num(-operand.value), depth
            self.too_deep(at, depth + 1)  # around an operand that is deep already
            return Unary(c, operand), depth + 1  # type: ignore[arg-type]
        return self.primary()

    def primary(self) -> tuple[Expr, int]:
        self.skip_ws()
        start = self.pos
        c = self.peek()
        if c != "(":
            self.term(start)
        if c and (c in _DIGITS or (c == "." and self.pos + 1 < self.n and self.text[self.pos + 1] in _DIGITS)):
            value = self.read_decimal(_VALUE_WORDS)
            factor = self.read_unit(" or an operator after the number")
            if factor is not None:
                value = _normalise_number(value * factor)
            if self.peek() == ".":
                raise self.fail(self.pos, "an operator after the number")
            return Num(value), 1
        if c in ("'", '"'):
            end = self.text.find(c, start + 1)
            if end < 0:
                raise self.fail(start, f"a closing {c} for the string that starts here",
                                reason=f"unterminated string: no closing {c}")
            self.pos = end + 1
            return Str(self.text[start + 1:end]), 1
        ident = self.ident_at(start)
        if ident is not None:
            self.pos = start + len(ident)
            if self.peek() == ".":
                return self.dotted_word(start), 1
            nxt = self.next_non_ws(self.pos)
            if ident == "defined" and nxt < self.n and self.text[nxt] == "(":
                self.pos = nxt + 1
                name = self.read_ident("a resource name in defined(...)")
                self.expect(")", "')' after defined(name")
                return Defined(name), 1
            if nxt < self.n and self.text[nxt] == "[":
                raise self.fail(start, _VALUE_WORDS, found=f"section {ident + '[...]'!r}")
            return Name(ident), 1
        if c == "(":
            self.pos += 1
            self.enter(start)
            expr, depth = self.binary(0)
            self.nesting -= 1
            self.expect(")", "an operator or ')'")
            self.too_deep(start, depth + 1)  # around an expression that is deep already
            return expr, depth + 1
        raise self.fail(start, _VALUE_WORDS)

    def dotted_word(self, start: int) -> Name:
        """An unquoted string value with dots (``LINUX2.4``, ``node1.cluster``), the name
        at ``start`` read up to a ``.``: ``word(.word)+`` of ASCII letters, digits and
        ``_`` (RES-7; LSF writes ``type==LINUX2.4`` unquoted, docs/lsf-behaviour.md
        section 1). It is a string, so it may only be one side of ``==`` or ``!=``
        (``type==LINUX2.4``, ``LINUX2.4!=model``); anywhere else it is an error at its
        column, as is a ``.`` not followed by a letter or digit (``LINUX2.``)."""
        text, n = self.text, self.n
        pos = self.pos
        while pos < n and text[pos] == ".":
            end = pos + 1
            while end < n and text[end] in _IDENT_CHARS:
                end += 1
            if end == pos + 1:
                raise self.fail(pos + 1, "letters or digits after '.' in an unquoted value such as LINUX2.4",
                                found=self.found(pos + 1))
            pos = end
        word = text[start:pos]
        if len(word) > _MAX_WORD_CHARS:
            raise self.fail(start, f"an unquoted value of at most {_MAX_WORD_CHARS} characters",
                            found="a longer value")
        self.pos = pos
        before = text[:start].rstrip(_WS)
        after = text[self.next_non_ws(pos):]
        eq_before = before.endswith(("==", "!=")) or (before.endswith("=") and not before.endswith(("<=", ">=")))
        eq_after = after.startswith(("=", "!="))
        op_after = bool(after) and after[0] in "+-*/<>"
        op_before = before.endswith(("+", "-", "*", "/", "<", ">", "<=", ">=", "!"))
        if not ((eq_before and not op_after) or (eq_after and not op_before)):
            raise self.fail(start, f"a number, a resource name, or {word!r} as a string value beside == or != "
                                   f"(type=={word})",
                            reason=f"{word!r} is an unquoted string value (it holds a '.'); it can only be compared "
                                   f"with == or != (type=={word}, model!={word}); quote it ('{word}') or compare it")
        return Name(word)


def canonical(expr: Expr) -> Expr:
    """Rewrite alias names (swap -> swp, ...), except a bare name compared with a
    string attribute (``type == cpu`` keeps ``cpu``: it is a string literal)."""
    if isinstance(expr, Name):
        return Name(ALIASES.get(expr.name, expr.name))
    if isinstance(expr, Defined):
        return Defined(ALIASES.get(expr.name, expr.name))
    if isinstance(expr, Unary):
        return Unary(expr.op, canonical(expr.operand))
    if isinstance(expr, BoolOp):
        return BoolOp(expr.op, tuple(canonical(o) for o in expr.operands))
    if isinstance(expr, Binary):
        left, right = expr.left, expr.right
        if expr.op in COMPARISONS and isinstance(left, Name) and isinstance(right, Name):
            if left.name in STRING_ATTRIBUTES:
                return Binary(expr.op, left, right)
            if right.name in STRING_ATTRIBUTES:
                return Binary(expr.op, left, right)
        return Binary(expr.op, canonical(left), canonical(right))
    return expr


def _caps(capped: bool) -> dict:
    if not capped:
        return {}
    return {"max_depth": MAX_SELECT_DEPTH, "depth_name": "MAX_SELECT_DEPTH", "max_terms": MAX_RESREQ_TERMS,
            "max_alternatives": MAX_RESREQ_ALTERNATIVES}


def _not_a_string(text: object) -> ResReqError:
    return ResReqError(repr(text), None, "a string", reason=f"expected a string, got {type(text).__name__}")


def parse(text: str, *, capped: bool = False) -> ResReq:
    """Parse one LSF resource requirement string (one ``bsub -R`` value).

    Accepts simple strings (``select[...] order[...] rusage[...] span[...]
    same[...]`` in any order, a leading bare expression being the select),
    compound strings ``N1*{simple} + N2*{simple}`` and alternative strings
    ``{...} || {...}`` (a single ``{simple}`` is the simple string itself).
    ``""`` gives the empty requirement ``ResReq()``.

    Units: rusage values and select numbers written with KB/MB/GB/TB (or
    K/M/G/T) are converted to MB (1 GB = 1024 MB); bare mem/swp/tmp rusage
    values are MB; durations are stored in seconds (a bare duration is minutes).

    Bounds (D-8, module docstring): any text is held to MAX_PARSE_DEPTH; ``capped``
    holds it to what a user or admin may write (MAX_SELECT_DEPTH levels,
    MAX_RESREQ_TERMS terms, MAX_RESREQ_ALTERNATIVES rusage alternatives or parts, of
    xced.model.units). Text the daemon rendered itself (a stored effective requirement)
    is read uncapped. A job's -R strings go through ``parse_job``. The work is linear in
    the text.

    Follows IBM Spectrum LSF 10.1 "Resource requirement strings" (select, order,
    usage, span and same string pages) and ``bsub -R``.

    Raises:
        ResReqError: for any text that is not a valid requirement string, or is over
            a bound, with the 1-based column and what was expected there (the bound
            by name). Nothing else is raised, whatever the input.
    """
    if not isinstance(text, str):
        raise _not_a_string(text)
    return _parse(text, _caps(capped))[0]


def _parse(text: str, caps: dict, terms_words: str = "") -> tuple[ResReq, int]:
    """(the requirement, the terms it has)."""
    p = _Parser(text, terms_words=terms_words, **caps)
    try:
        req = p.parse()
    except RecursionError:  # pragma: no cover - the depth bounds keep the parser well inside the limit
        raise ResReqError(text, None, "a less deeply nested requirement",
                          reason="requirement nested too deeply") from None
    return req, p.terms


def parse_job(texts: list[str] | tuple[str, ...]) -> ResReq:
    """A job's own -R strings (RES-1), parsed and merged as LSF merges them (``merge``);
    blank strings are skipped, none gives ``ResReq()``.

    Held to what a user may write (D-8; xced.model.units): at most MAX_RESREQ_STRINGS
    strings, MAX_RESREQ_TERMS terms in all of them together, and each string to
    MAX_SELECT_DEPTH and MAX_RESREQ_ALTERNATIVES. The one place the submit and the
    re-merge of a job read its -R strings. Linear in the texts.

    Raises:
        ResReqError: a string that does not parse or is over a bound (``text`` is that
            string and ``column`` where it went wrong), too many strings (column None),
            or strings that cannot be merged (see ``merge``).
    """
    from ._merge import merge

    if len(texts) > MAX_RESREQ_STRINGS:
        raise ResReqError(f"{len(texts)} -R strings", None, f"at most {MAX_RESREQ_STRINGS} -R strings",
                          reason=f"a job may give at most {MAX_RESREQ_STRINGS} -R strings (MAX_RESREQ_STRINGS); "
                                 f"merge them into fewer")
    used_before = 0
    reqs: list[ResReq] = []
    for text in texts:
        if not isinstance(text, str):
            raise _not_a_string(text)
        if not text.strip():
            continue
        words = " in the job's -R strings together" if len(texts) > 1 else ""
        req, used = _parse(text, {**_caps(True), "terms_before": used_before}, words)
        reqs.append(req)
        used_before += used
    return merge(reqs)


def order_keys_at(text: str) -> list[tuple[str, int]]:
    """The ``order[...]`` keys of one requirement string with their 1-based columns, in
    written order, names canonical (``cpu`` -> ``r1m``): ``"select[x>1] order[-ut:foo]"``
    gives ``[("ut", 20), ("foo", 23)]`` (the column of the name, after any ``-``). For the
    submit-time check that every key names a resource some host has (RES-1, RES-7).

    Raises:
        ResReqError: when the text does not parse (as ``parse``, uncapped).
    """
    if not isinstance(text, str):
        raise _not_a_string(text)
    p = _Parser(text)
    p.order_at = []
    try:
        p.parse()
    except RecursionError:  # pragma: no cover - the depth bounds keep the parser well inside the limit
        raise ResReqError(text, None, "a less deeply nested requirement",
                          reason="requirement nested too deeply") from None
    return p.order_at


def parse_select(text: str, *, capped: bool = False) -> Expr:
    """Parse a bare select expression (``"mem > 100 && type == X86_64"``); the
    text of ``select[...]`` without the brackets. ``capped`` as for ``parse`` (a
    profile's select is held to the caps of what an admin writes).

    Raises:
        ResReqError: when the text is not one select expression, or is over a bound.
    """
    if not isinstance(text, str):
        raise _not_a_string(text)
    p = _Parser(text, **_caps(capped))
    try:
        p.skip_ws()
        expr = p.parse_expr()
        p.skip_ws()
        if not p.at_end():
            raise p.fail(p.pos, "an operator or end of input")
    except RecursionError:  # pragma: no cover - the depth bounds keep the parser well inside the limit
        raise ResReqError(text, None, "a less deeply nested expression",
                          reason="expression nested too deeply") from None
    return expr

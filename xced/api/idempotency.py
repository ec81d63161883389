"""Idempotency keys of submits (JOB-10, D-3, CLI-1): what a valid key is, how a client makes
one, and how a request body is compared.

A submit carries a key made by its client in the `Idempotency-Key` header (the IETF draft
"The Idempotency-Key HTTP Header Field", as Stripe's API uses it); `xcecli submit` makes one
per invocation and sends every retry of that submit with it. The daemon records the key with
the job, in the transaction that inserts the job, scoped to the submitting user: a retry with
the same key and the same body gets the first job's answer and creates nothing, even after a
restart; the same key with another body is refused (409, naming the job). Keys are kept at
least KEEP_S (24 hours).

Pure: the CLI imports it (DESIGN rule 4).
"""

from __future__ import annotations

import os
import re

from xced.api.errors import InvalidRequest

#: the request header that carries the key
HEADER = "Idempotency-Key"
#: a key: 8 to 128 characters of letters, digits, `-` and `_` (a UUID, or hex of 128 random bits)
KEY_FORM = "8 to 128 characters of letters, digits, '-' and '_' (a UUID4, or 32 hex digits of 128 random bits)"
_KEY = re.compile(r"[A-Za-z0-9_-]{8,128}")
#: keys are kept at least this long (seconds): a retry within a day always finds its job
KEEP_S = 24 * 3600.0


def new_key() -> str:
    """A fresh key: 32 lowercase hex digits of 128 random bits (os.urandom; no uuid import,
    CLI-6 start-up)."""
    return os.urandom(16).hex()


def check_key(value: str) -> str:
    """`value` if it is a valid key (KEY_FORM), else InvalidRequest (HTTP 422) quoting what was
    given (its first 40 characters) and what would be valid."""
    if _KEY.fullmatch(value):
        return value
    try:  # HTTP gives a header's bytes as Latin-1; a UTF-8 key is shown as the user typed it
        value = value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        pass
    shown = value if len(value) <= 40 else value[:40] + "..."
    raise InvalidRequest(f"{HEADER} {shown!r} ({len(value)} characters) is malformed: a key is {KEY_FORM}; make "
                         f"one per submit and send each retry of that submit with the same one", field=HEADER)


def canonical(value: object, *, floatless: bool = False) -> bytes:
    """`value` (JSON-able) as canonical JSON: keys sorted, no spaces, UTF-8 (lone surrogates
    kept as they are, `surrogatepass`), so two values that say the same thing are the same
    bytes whatever their key order or spacing.

    The bytes are the json module's (`sort_keys`, `separators=(",", ":")`,
    `ensure_ascii=False`), so a digest kept by an older daemon still matches. `floatless`:
    the caller knows `value` holds no float (a SubmitRequest's fields without `exdata`);
    then orjson makes them, about 8 times faster (issue 17 part 5), and its bytes are the
    json module's for every value without a float (tests/unit/test_client_retry.py proves it
    over generated values). A float is written differently by the two (1e-7 against 1e-07),
    so it always goes the json module's way, as does what orjson refuses (a lone
    surrogate, an integer over 64 bits, a key that is not a string)."""
    if floatless:
        import orjson  # the daemon's alone, as json below

        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # orjson.JSONEncodeError: what it cannot write, written below
            pass
    import json  # the daemon's alone: kept out of the CLI's start-up (CLI-6)

    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def body_digest(body: dict) -> str:
    """The hex SHA-256 of `body` (a submit request: SubmitRequest's fields as JSON-able
    values) as `canonical` JSON. Only its `exdata` (the free-form side record) can hold a
    float; without one it is canonical's fast way."""
    import hashlib  # the daemon's alone: kept out of the CLI's start-up (CLI-6)

    return hashlib.sha256(canonical(body, floatless=body.get("exdata") is None)).hexdigest()

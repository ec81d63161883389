"""The one error the resreq package raises."""

from __future__ import annotations

__all__ = ["ResReqError"]


class ResReqError(ValueError):
    """A resource requirement string that cannot be parsed or merged.

    Attributes:
        text: the requirement string that was being parsed (for a merge error,
            the canonical text of the request that could not be merged).
        column: 1-based column of the offending character in ``text``; ``None``
            when the error is not about one place (merge errors).
        expected: what would have been valid at that place, in words
            (``"'[' after 'rusage'"``, ``"an integer >= 1 for ptile"``).
        found: what was there instead (``"'='"``, ``"end of input"``), or None.

    ``str(err)`` is one line, e.g.
    ``rusage=[mem=20MB]: column 7: expected '[' after 'rusage', found '='`` (a text of
    more than 80 characters is shortened there); ``err.pretty()`` adds the text (a window
    of it around the column when long) and a caret under the column.
    """

    def __init__(
        self,
        text: str,
        column: int | None,
        expected: str,
        found: str | None = None,
        reason: str | None = None,
    ) -> None:
        self.text = text
        self.column = column
        self.expected = expected
        self.found = found
        self.reason = reason
        if reason is None:
            reason = f"expected {expected}" + (f", found {found}" if found is not None else "")
        where = f"column {column}: " if column is not None else ""
        shown = text if len(text) <= 80 else text[:77] + "..."  # one short line, even for a long text
        super().__init__(f"{shown}: {where}{reason}")

    def pretty(self) -> str:
        """The message, then the text and a caret line pointing at the column.

        Control characters in the text are shown as spaces so the caret lines up.
        """
        msg = str(self)
        if self.column is None:
            return msg
        shown = "".join(c if c.isprintable() else " " for c in self.text)
        col = self.column
        if len(shown) > 80:
            start = max(0, col - 41)
            end = min(len(shown), start + 80)
            piece, col = shown[start:end], col - start
            if start > 0:
                piece, col = "..." + piece, col + 3
            shown = piece + ("..." if end < len(shown) else "")
        return f"{msg}\n  {shown}\n  {' ' * (col - 1)}^"

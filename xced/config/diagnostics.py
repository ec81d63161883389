"""Diagnostics of the config compiler (CFG-2): each names file, line and column.

`str(diag)` is the compiler-style line `FILE:LINE:COL: error: MESSAGE`; lines
and columns are 1-based. A diagnostic about a whole file or directory (a file
that is missing) has no position and prints as `FILE: error: MESSAGE`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["error", "warning"]

__all__ = ["Diagnostic", "Severity"]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    severity: Severity
    #: the file's path as the loader was given it (`<topdir>/config/queues.yaml`).
    file: str
    #: 1-based; None when the diagnostic is about the file as a whole.
    line: int | None
    #: 1-based; None when `line` is None.
    col: int | None
    #: what was wrong and what would be valid.
    message: str

    @property
    def location(self) -> str:
        if self.line is None:
            return self.file
        if self.col is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.col}"

    def __str__(self) -> str:
        """One line: what the config file holds is quoted in messages, and a bidi override,
        a zero-width or a control character in it is shown escaped (`\\u202e`), as the
        listings show it, so that it cannot reorder what the terminal shows."""
        from xced.api.listing import one_line

        return one_line(f"{self.location}: {self.severity}: {self.message}")

    def to_dict(self) -> dict[str, Any]:
        """The `--json` form: {severity, file, line, col, message}."""
        return asdict(self)

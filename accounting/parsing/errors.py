"""Validation errors shared by all usage parsers.

Every parser collects problems as :class:`LineIssue` objects (``line N, column X: reason``)
and raises one :class:`UsageValidationError` carrying all of them, so the user fixes a file
in one round trip instead of one error at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

DEFAULT_MAX_ERRORS = 50


@dataclass(frozen=True, order=True)
class LineIssue:
    """One problem in an input file; ``line`` is the 1-based physical line (or sheet row)."""

    line: int
    column: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}: {self.reason}"


class UsageValidationError(ValueError):
    """A usage file had bad lines; nothing from it may be stored.

    ``issues`` holds every collected problem (at most ``max_errors``); ``truncated`` says
    that parsing stopped early because the limit was reached.
    """

    def __init__(self, issues: Iterable[LineIssue], *, truncated: bool = False) -> None:
        self.issues: list[LineIssue] = sorted(issues)
        self.truncated = truncated
        shown = "\n".join(str(issue) for issue in self.issues)
        more = "\n(stopped after the first errors; fix these and import again)" if truncated else ""
        super().__init__(f"{len(self.issues)} problem(s) in the usage file:\n{shown}{more}")


class TooManyIssues(Exception):
    """Internal signal: the collector is full, stop reading."""


@dataclass
class IssueCollector:
    """Collects issues up to ``max_errors``; raises :class:`TooManyIssues` once full."""

    max_errors: int = DEFAULT_MAX_ERRORS
    issues: list[LineIssue] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.issues)

    @property
    def full(self) -> bool:
        return len(self.issues) >= self.max_errors

    def add(self, line: int, column: str, reason: str) -> None:
        self.issues.append(LineIssue(int(line), column, reason))
        if self.full:
            raise TooManyIssues

    def add_where(
        self,
        mask: pd.Series | np.ndarray,
        lines: pd.Series | np.ndarray,
        column: str,
        reason: str | Callable[[np.ndarray], Sequence[str]],
        values: pd.Series | np.ndarray | None = None,
    ) -> None:
        """Vectorised add: one issue per True in ``mask`` (only as many as still fit).

        ``reason`` is a template (``{value}`` is replaced by ``values`` at that row) or a
        function of the row positions; either way, texts are built only for reported rows.
        """
        mask_array = np.asarray(mask, dtype=bool)
        if not mask_array.any():
            return
        room = self.max_errors - len(self.issues)
        positions = np.flatnonzero(mask_array)[:room]
        line_numbers = np.asarray(lines)[positions]
        if callable(reason):
            texts = [str(text) for text in reason(positions)]
        elif values is not None:
            picked = np.asarray(values, dtype=object)[positions]
            texts = [reason.format(value=value) for value in picked]
        else:
            texts = [reason] * len(positions)
        for line, text in zip(line_numbers.tolist(), texts, strict=True):
            self.issues.append(LineIssue(int(line), column, text))
        if self.full:
            raise TooManyIssues

    def error(self, *, truncated: bool = False) -> UsageValidationError:
        return UsageValidationError(self.issues, truncated=truncated)

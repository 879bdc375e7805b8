"""Limits every usage text reader enforces while it streams, before anything is parsed.

A parser's memory must follow its block size, never the file: one 300 MB line, a quoted
field that never closes, or a file larger than allowed is refused with a message naming the
line and the limit after reading little more than the limit itself. :class:`BoundedStream`
wraps the source (byte total, line length, "is it text at all" from the first bytes);
:func:`cut_block` keeps a block of records within its byte budget.

The limits are process-wide (:func:`configure`): the Django side sets them from settings
before each import, so the pure parsers keep their signatures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Any, Protocol

import numpy as np

from accounting.parsing.errors import LineIssue, UsageValidationError
from core.uploads.sniff import text_problem

NEWLINE = 10
DEFAULT_MAX_LINE_BYTES = 16 * 2**20
DEFAULT_MAX_BLOCK_BYTES = 32 * 2**20
DEFAULT_READ_BYTES = 4 * 2**20


@dataclass(frozen=True)
class ReaderLimits:
    """``max_bytes``: the whole file (None: no cap); a line; one parser block of records."""

    max_bytes: int | None = None
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES

    def __post_init__(self) -> None:
        # A block must hold at least one whole line, else no block could ever be cut.
        if self.max_block_bytes <= self.max_line_bytes:
            object.__setattr__(self, "max_block_bytes", self.max_line_bytes + 1)


_current = ReaderLimits()


def configure(limits: ReaderLimits) -> None:
    """Set the limits of every reader in this process (called before each import)."""
    global _current
    _current = limits


def current_limits() -> ReaderLimits:
    return _current


class ReaderLimitExceeded(UsageValidationError):
    """The input broke a reader limit or is not text; one issue names the line and why."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__([LineIssue(line, "*", reason)])


class Readable(Protocol):
    """What the readers need of a stream: ``read(size)``, bytes (or text, which they encode)."""

    def read(self, size: int = -1, /) -> bytes | str: ...


def size_text(size_bytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.3g} {unit}"
    return f"{size_bytes} bytes"


class BoundedStream:
    """A binary stream that refuses, while it is read, what breaks the limits."""

    def __init__(self, raw: IO[Any], limits: ReaderLimits | None = None) -> None:
        self.raw = raw
        self.limits = limits or current_limits()
        self.bytes_read = 0
        self.lines_done = 0  # complete lines so far
        self.open_line_bytes = 0  # bytes of the line not yet ended

    def tell(self) -> int:
        return self.raw.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.raw.seek(offset, whence)

    def read(self, size: int = -1) -> bytes:
        piece: bytes | str = self.raw.read(
            size if size is not None and size >= 0 else DEFAULT_READ_BYTES
        )
        if isinstance(piece, str):
            piece = piece.encode("utf-8")
        if self.bytes_read == 0 and piece:
            problem = text_problem(piece)
            if problem is not None:
                raise ReaderLimitExceeded(1, problem)
        self.bytes_read += len(piece)
        cap = self.limits.max_bytes
        if cap is not None and self.bytes_read > cap:
            raise ReaderLimitExceeded(
                self.lines_done + 1, f"the file is larger than the {size_text(cap)} limit"
            )
        self._check_lines(piece)
        return piece

    def _check_lines(self, piece: bytes) -> None:
        newlines = np.flatnonzero(np.frombuffer(piece, dtype=np.uint8) == NEWLINE)
        if len(newlines) == 0:
            self.open_line_bytes += len(piece)
            self._refuse_if_long(self.open_line_bytes, 0)
            return
        # Lengths of the lines ended in this piece (the first continues the open line).
        ended = np.diff(newlines, prepend=-1) - 1
        ended[0] += self.open_line_bytes
        longest = int(np.argmax(ended))
        self._refuse_if_long(int(ended[longest]), longest)
        self.lines_done += len(newlines)
        self.open_line_bytes = len(piece) - int(newlines[-1]) - 1
        self._refuse_if_long(self.open_line_bytes, 0)

    def _refuse_if_long(self, length: int, lines_before: int) -> None:
        limit = self.limits.max_line_bytes
        if length > limit:
            line = self.lines_done + lines_before + 1
            raise ReaderLimitExceeded(
                line, f"line {line} is longer than the {size_text(limit)} limit for one line"
            )


def cut_block(
    record_ends: np.ndarray, pending_bytes: int, first_line: int, limits: ReaderLimits
) -> np.ndarray:
    """The record ends that fit one block's byte budget (at least one record).

    Raises when no record ends within the budget: a quoted field spanning that much.
    """
    fitting = record_ends[record_ends < limits.max_block_bytes]
    if len(fitting):
        return fitting
    if len(record_ends) == 0 and pending_bytes < limits.max_block_bytes:
        return fitting  # not cut yet: the caller reads more
    raise ReaderLimitExceeded(
        first_line,
        f"a record starting at line {first_line} is longer than the "
        f"{size_text(limits.max_block_bytes)} limit (a quoted field never closed?)",
    )

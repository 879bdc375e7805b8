"""Constant-memory reading of delimited text in blocks of whole records.

The reader finds record boundaries and per-record field counts with numpy over the raw bytes
(no Python loop per line), so parsers can reject lines with the wrong number of fields by
line number before handing the good lines to ``pandas.read_csv``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Literal

import numpy as np
import pandas as pd

from accounting.parsing.bounded import BoundedStream, Readable, current_limits, cut_block

NEWLINE = 10
CARRIAGE_RETURN = 13
DEFAULT_READ_SIZE = 4 * 2**20

UsageSource = str | os.PathLike[str] | IO[bytes] | IO[str]
# csv.QUOTE_MINIMAL, QUOTE_ALL, QUOTE_NONNUMERIC or QUOTE_NONE.
CsvQuoting = Literal[0, 1, 2, 3]


@dataclass(frozen=True)
class ParseProgress:
    """Cumulative progress of one parse; feed ``bytes_read`` to a tqdm bar or Celery meta."""

    bytes_read: int
    lines_read: int
    records_emitted: int
    total_bytes: int | None


ProgressCallback = Callable[[ParseProgress], None]


@dataclass
class RecordBlock:
    """Whole records of one block; every per-record array has one entry per record."""

    data: np.ndarray  # uint8 view of the block bytes; every record ends with a newline
    record_starts: np.ndarray  # byte offset where each record starts
    record_ends: np.ndarray  # byte offset of each record's terminating newline
    record_lines: np.ndarray  # 1-based physical line number where each record starts
    field_counts: np.ndarray  # fields per record (delimiters outside quotes + 1)
    bytes_read: int  # cumulative bytes consumed from the source after this block
    lines_read: int  # cumulative physical lines after this block
    unterminated_quote: bool  # the source ended inside a quoted field

    def __len__(self) -> int:
        return len(self.record_starts)

    @property
    def blank(self) -> np.ndarray:
        """Records that are empty (or a lone carriage return)."""
        lengths = self.record_ends - self.record_starts
        lone_cr = (lengths == 1) & (
            self.data[np.minimum(self.record_starts, len(self.data) - 1)] == CARRIAGE_RETURN
        )
        blank: np.ndarray = (lengths == 0) | lone_cr
        return blank

    def record_text(self, index: int) -> str:
        """Decoded text of one record (for headers and banners; not for bulk data)."""
        raw = self.data[self.record_starts[index] : self.record_ends[index]].tobytes()
        return raw.decode("utf-8", errors="replace").rstrip("\r")

    def select_bytes(self, keep: np.ndarray) -> bytes:
        """The bytes of the kept records only, still newline-terminated."""
        keep = np.asarray(keep, dtype=bool)
        if keep.all():
            return self.data.tobytes()
        byte_keep = np.repeat(keep, self.record_ends - self.record_starts + 1)
        kept: bytes = self.data[: len(byte_keep)][byte_keep].tobytes()
        return kept


@contextlib.contextmanager
def open_source(source: UsageSource) -> Iterator[tuple[BoundedStream, int | None]]:
    """Yield a readable stream and its size in bytes when known; close only what we opened.

    The stream enforces the reader limits (:mod:`accounting.parsing.bounded`) as it is read.
    """
    if isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        with open(path, "rb") as stream:
            yield BoundedStream(stream), os.path.getsize(path)
        return
    total: int | None = None
    with contextlib.suppress(AttributeError, OSError, ValueError, io.UnsupportedOperation):
        position = source.tell()
        total = source.seek(0, os.SEEK_END) - position
        source.seek(position)
    yield source if isinstance(source, BoundedStream) else BoundedStream(source), total


def iter_record_blocks(
    stream: Readable,
    *,
    delimiter: str,
    quotechar: str | None,
    records_per_block: int,
    read_size: int = DEFAULT_READ_SIZE,
) -> Iterator[RecordBlock]:
    """Split ``stream`` into blocks of up to ``records_per_block`` whole records.

    With ``quotechar`` set, delimiters and newlines inside quoted fields do not count
    (RFC 4180 doubled quotes keep the parity right). Memory stays O(block size): a block
    also stops at the reader limits' ``max_block_bytes``.
    """
    if records_per_block < 1:
        raise ValueError("records_per_block must be at least 1")
    limits = current_limits()
    delimiter_byte = ord(delimiter.encode())
    quote_byte = ord(quotechar.encode()) if quotechar else None
    pending = bytearray()
    pending_newlines = 0
    source_bytes = 0
    consumed_bytes = 0
    lines_read = 0
    eof = False
    while not eof or pending:
        while (
            not eof
            and pending_newlines < records_per_block
            and len(pending) < limits.max_block_bytes
        ):
            piece = stream.read(read_size)
            if isinstance(piece, str):
                piece = piece.encode("utf-8")
            if not piece:
                eof = True
                break
            pending += piece
            source_bytes += len(piece)
            pending_newlines += piece.count(b"\n")
        if not pending:
            break
        if eof and pending[-1] != NEWLINE:
            # A last line without its newline: terminate it so it is a record like the rest.
            pending += b"\n"
        data = np.frombuffer(bytes(pending), dtype=np.uint8)
        is_newline = data == NEWLINE
        if quote_byte is not None:
            # Parity of quotes seen so far; uint8 wraparound keeps the parity exact.
            outside_quotes = (np.cumsum(data == quote_byte, dtype=np.uint8) & 1) == 0
            record_ends = np.flatnonzero(is_newline & outside_quotes)
        else:
            outside_quotes = None
            record_ends = np.flatnonzero(is_newline)
        all_ends = len(record_ends)
        record_ends = cut_block(record_ends, len(data), lines_read + 1, limits)
        unterminated_quote = False
        if not eof or len(record_ends) < all_ends:
            record_ends = record_ends[:records_per_block]
            if len(record_ends) == 0:
                # So far only the inside of one long quoted field: read more before cutting.
                pending_newlines = records_per_block - 1
                continue
        elif len(record_ends) == 0 or record_ends[-1] != len(data) - 1:
            # The source ended inside a quoted field: keep the rest as one bad record.
            record_ends = np.append(record_ends, len(data) - 1)
            unterminated_quote = True
        cut = int(record_ends[-1]) + 1
        block = data[:cut]
        record_starts = np.concatenate(([0], record_ends[:-1] + 1))
        all_newlines = np.flatnonzero(is_newline[:cut])
        record_lines = lines_read + 1 + np.searchsorted(all_newlines, record_starts)
        delimiter_mask = block == delimiter_byte
        if outside_quotes is not None:
            delimiter_mask &= outside_quotes[:cut]
        delimiter_positions = np.flatnonzero(delimiter_mask)
        field_counts = (
            np.searchsorted(delimiter_positions, record_ends)
            - np.searchsorted(delimiter_positions, record_starts)
            + 1
        )
        consumed_bytes += cut
        lines_read += len(all_newlines)
        del pending[:cut]
        pending_newlines = pending.count(b"\n")
        yield RecordBlock(
            data=block,
            record_starts=record_starts,
            record_ends=record_ends,
            record_lines=record_lines.astype(np.int64),
            field_counts=field_counts.astype(np.int64),
            bytes_read=min(consumed_bytes, source_bytes),
            lines_read=lines_read,
            unterminated_quote=unterminated_quote,
        )


def read_block_frame(
    payload: bytes,
    names: Sequence[str],
    *,
    delimiter: str,
    quoting: CsvQuoting = csv.QUOTE_NONE,
) -> pd.DataFrame:
    """Parse pre-validated records (right field count) into all-string columns."""
    if not payload:
        return pd.DataFrame({name: pd.Series(dtype="str") for name in names})
    # NUL is valid UTF-8 but no database text can hold it: treat it like an invalid byte.
    payload = payload.replace(b"\x00", "\ufffd".encode())
    frame = pd.read_csv(
        io.BytesIO(payload),
        sep=delimiter,
        header=None,
        names=list(names),
        dtype="str",
        na_filter=False,
        quoting=quoting,
        skip_blank_lines=False,
        engine="c",
        encoding="utf-8",
        encoding_errors="replace",
        # Records end at "\n" only, as the block reader counted them: a stray "\r" inside a
        # line must not split it into two rows (then rows and line numbers would not match).
        lineterminator="\n",
    )
    last = frame.columns[-1]
    frame[last] = frame[last].str.removesuffix("\r")  # CRLF files
    return frame

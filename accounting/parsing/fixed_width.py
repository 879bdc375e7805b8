"""Slurm's fixed-width tables (``sacct`` and ``sreport`` without ``-p``/``-P``), read exactly.

Slurm prints (``src/common/print_fields.c``) a header line, then one run of dashes per column,
each as wide as the column, a space after each::

           JobID  Partition    Account      State  AllocTRES
    ------------ ---------- ---------- ---------- ----------
    1001               h100     team-a  COMPLETED billing=1+

The dashed line gives every column's exact byte span, so each value is read from its span;
the table is rewritten, while streaming, into a delimited one the block reader counts (the
dashed line becomes a blank line, so line numbers stay those of the file). Three things make
a value unreadable, each refused by line and column with the fix:

* a text value longer than its column is cut and ends in ``+`` (``billing=1+``): export the
  column wider (``--format=...,AllocTRES%80``) or with ``-P``;
* a time (Submit, Start, End) in a column narrower than 19 characters is cut silently;
* numbers and durations are never cut: a wider one pushes the rest of the line to the right,
  which shows as a character where a column's separating space belongs.

A cut value in a column the parser does not read (``JobName``) is harmless and ignored; a cut
State keeps its word (``CANCELLED+`` is ``CANCELLED by 1234``) and is read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from accounting.parsing.bounded import Readable
from accounting.parsing.errors import IssueCollector

_RULE_RE = re.compile(rb"^-+(?: -+)* ?\r?$")
_DASHES_RE = re.compile(rb"-+")
MAX_HEADER_SCAN_LINES = 40
TIME_WIDTH = 19  # YYYY-MM-DDTHH:MM:SS
READ_SIZE = 1 << 20
BOM = "\ufeff".encode()


@dataclass(frozen=True)
class TablePolicy:
    """What one tool's table means: which columns are read and how to word the fix.

    ``read``: lower-case names whose values are used (a cut one is refused); ``times``: those
    holding a date-time; ``tolerated``: name -> predicate of a cut value that still reads
    (a State such as ``CANCELLED+``); ``known``: every name the tool prints (cut header
    names are matched to them by prefix); ``is_header``: whether a line's cells (lower
    case) are this tool's header; ``widths``: the width to suggest per column;
    ``fix``: how to export the column wider, with ``{name}`` and ``{width}``;
    ``blank_before_header``: lines above the header are not data (sacct has no banner);
    ``format_names``: name -> what the tool's format option calls the column, where the
    header prints it otherwise (sreport's ``TRES Name`` is ``TresName``).
    """

    read: Collection[str]
    times: Collection[str]
    known: Collection[str]
    is_header: Callable[[Sequence[str]], bool]
    fix: str
    widths: Mapping[str, int]
    tolerated: Mapping[str, Callable[[str], bool]]
    blank_before_header: bool
    format_names: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FixedTable:
    """Where the table starts in the file and its columns' byte spans."""

    header_index: int  # 0-based line of the header
    spans: tuple[tuple[int, int], ...]
    labels: tuple[str, ...]  # the header's names, cut names completed where unambiguous


def _lines(head: bytes) -> list[bytes]:
    return head.removeprefix(BOM).split(b"\n")[:MAX_HEADER_SCAN_LINES]


def _cells(line: bytes, spans: Sequence[tuple[int, int]]) -> list[str]:
    text = line.rstrip(b"\r")
    last = len(spans) - 1
    return [
        text[start : None if index == last else end].decode("utf-8", "replace").strip()
        for index, (start, end) in enumerate(spans)
    ]


def find_table(head: bytes, policy: TablePolicy) -> FixedTable | None:
    """The first header line of ``policy``'s tool directly above a dashed line, if any."""
    lines = _lines(head)
    for index in range(len(lines) - 1):
        if not lines[index].strip() or _RULE_RE.match(lines[index]):
            continue
        if not _RULE_RE.match(lines[index + 1]):
            continue
        spans = tuple((m.start(), m.end()) for m in _DASHES_RE.finditer(lines[index + 1]))
        labels = _cells(lines[index], spans)
        if policy.is_header([label.lower() for label in labels]):
            names = tuple(_complete(label, end - start, policy.known) for label, (start, end)
                          in zip(labels, spans, strict=True))  # fmt: skip
            return FixedTable(index, spans, names)
    return None


def _complete(label: str, width: int, known: Collection[str]) -> str:
    """A header name cut to its column (``TRESUsageI``) -> the one known name it starts."""
    lower = label.lower()
    if lower in known or len(label) < width:
        return label
    matches = [name for name in known if name.startswith(lower)]
    return matches[0] if len(matches) == 1 else label


class FixedWidthStream:
    """The file from ``head`` on, its fixed-width table rewritten with ``delimiter``.

    Problems (cut values, cut times, values pushed out of their column) go to ``issues``
    with their line and column; the caller's parser stops delivering once there are any.
    """

    def __init__(
        self,
        head: bytes,
        stream: Readable,
        table: FixedTable,
        policy: TablePolicy,
        delimiter: str,
        issues: IssueCollector,
    ) -> None:
        self.stream, self.table, self.policy, self.issues = stream, table, policy, issues
        self.delimiter = delimiter.encode()
        self.pending = head
        self.out = bytearray()
        self.line = 0  # 0-based index of the next line to convert
        self.eof = False
        self._check_header()

    def _check_header(self) -> None:
        for label, (start, end) in zip(self.table.labels, self.table.spans, strict=True):
            self._check_cut_name(label, end - start)
            if label.lower() in self.policy.times and end - start < TIME_WIDTH:
                self.issues.add(
                    self.table.header_index + 2,
                    label,
                    f"the column is {end - start} characters wide, a time needs "
                    f"{TIME_WIDTH}: {self._fix(label, TIME_WIDTH)}",
                )

    def _check_cut_name(self, label: str, width: int) -> None:
        """A header name cut to its column that may be a column we read: refuse, naming it."""
        lower = label.lower()
        if lower in self.policy.known or len(label) < width:
            return
        candidates = sorted(name for name in self.policy.read if name.startswith(lower))
        if candidates:
            named = candidates[0] if candidates[0] in self.policy.format_names else label + "…"
            self.issues.add(
                self.table.header_index + 1,
                label,
                f"the column's name is cut to {width} characters ({' or '.join(candidates)}?): "
                + self._fix(named, max(self.policy.widths.get(candidates[0], 0), 2 * width)),
            )

    def _fix(self, label: str, width: int) -> str:
        name = self.policy.format_names.get(label.lower(), label)
        return self.policy.fix.format(name=name, width=width)

    def read(self, size: int = -1) -> bytes:
        while not self.out and not (self.eof and not self.pending):
            piece = self.stream.read(READ_SIZE)
            if isinstance(piece, str):
                piece = piece.encode("utf-8")
            data = self.pending + (piece or b"")
            if piece:
                cut = data.rfind(b"\n") + 1
                self.pending = data[cut:]
                lines, newline_after_last = data[:cut].split(b"\n")[:-1], True
            else:
                self.eof, self.pending = True, b""
                lines = data.split(b"\n")
                newline_after_last = data.endswith(b"\n")
                if newline_after_last:
                    lines.pop()
            for position, raw in enumerate(lines):
                self.out += self._convert(raw)
                if position < len(lines) - 1 or newline_after_last:
                    self.out += b"\n"
        size = len(self.out) if size is None or size < 0 else size
        chunk = bytes(self.out[:size])
        del self.out[:size]
        return chunk

    def _convert(self, raw: bytes) -> bytes:
        index, self.line = self.line, self.line + 1
        raw = raw.removeprefix(BOM) if index == 0 else raw
        header = self.table.header_index
        if index < header:
            return b"" if self.policy.blank_before_header else raw
        if index == header:
            return self.delimiter.join(label.encode() for label in self.table.labels)
        if index == header + 1 or not raw.strip():
            return b""  # the dashed line, and blank lines, stay blank (same line numbers)
        return self.delimiter.join(self._values(raw.rstrip(b"\r"), index + 1))

    def _values(self, text: bytes, line: int) -> list[bytes]:
        spans, labels = self.table.spans, self.table.labels
        last = len(spans) - 1
        values = []
        pushed = False
        for column, (start, end) in enumerate(spans):
            cell = text[start : None if column == last else end]
            label = labels[column]
            if not pushed and column < last and text[end : end + 1] not in (b" ", b""):
                pushed = True  # the columns after it are out of place too: name the first
                self.issues.add(
                    line,
                    label,
                    "a value is wider than its column and pushed the rest of the line out "
                    f"of place: {self._fix(label, 2 * (end - start))}",
                )
            full = text[start:end]
            if len(full) == end - start and full.endswith(b"+") and full[:1] != b" ":
                self._cut(line, label, full.decode("utf-8", "replace"), end - start)
            values.append(cell.strip())
        return values

    def _cut(self, line: int, label: str, value: str, width: int) -> None:
        name = label.lower()
        if name not in self.policy.read:
            return
        tolerated = self.policy.tolerated.get(name)
        if tolerated is not None and tolerated(value):
            return
        suggested = max(2 * width, self.policy.widths.get(name, 0))
        self.issues.add(
            line,
            label,
            f"'{value}' was cut to the column's {width} characters: {self._fix(label, suggested)}",
        )


def fixed_width_stream(
    stream: Readable, head: bytes, policy: TablePolicy, delimiter: str, issues: IssueCollector
) -> FixedWidthStream | None:
    """A rewriting stream when ``head`` holds ``policy``'s fixed-width table, else None."""
    table = find_table(head, policy)
    if table is None:
        return None
    return FixedWidthStream(head, stream, table, policy, delimiter, issues)

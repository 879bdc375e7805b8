"""sacct's field delimiter: found from the header line, and any string made one byte.

``sacct --delimiter`` takes any string (sites use ``☃``, ``,`` or ``;;``); the block reader
counts fields by one byte. A multi-byte delimiter is therefore rewritten, while streaming,
to :data:`UNIT_SEPARATOR` (a control byte no sacct field holds), so parsing stays vectorised.
"""

from __future__ import annotations

import re

from accounting.parsing.bounded import Readable

UNIT_SEPARATOR = "\x1f"
DEFAULT_DELIMITER = "|"
HEAD_BYTES = 64 * 1024
# sacct --helpformat names (lower case) that start or follow in real exports.
SACCT_FIELD_NAMES = frozenset(
    [
        "account",
        "admincomment",
        "alloccpus",
        "allocgres",
        "allocnodes",
        "alloctres",
        "associd",
        "avecpu",
        "avecpufreq",
        "avediskread",
        "avediskwrite",
        "avepages",
        "averss",
        "avevmsize",
        "blockid",
        "cluster",
        "comment",
        "constraints",
        "consumedenergy",
        "consumedenergyraw",
        "cputime",
        "cputimeraw",
        "dbindex",
        "derivedexitcode",
        "elapsed",
        "elapsedraw",
        "eligible",
        "end",
        "exitcode",
        "flags",
        "gid",
        "group",
        "jobid",
        "jobidraw",
        "jobname",
        "layout",
        "maxdiskread",
        "maxrss",
        "maxvmsize",
        "mincpu",
        "ncpus",
        "nnodes",
        "nodelist",
        "ntasks",
        "partition",
        "planned",
        "priority",
        "qos",
        "qosraw",
        "reason",
        "reqcpufreq",
        "reqcpus",
        "reqgres",
        "reqmem",
        "reqnodes",
        "reqtres",
        "reservation",
        "reservationid",
        "start",
        "state",
        "submit",
        "suspended",
        "systemcpu",
        "timelimit",
        "timelimitraw",
        "totalcpu",
        "tresusageinave",
        "tresusageinmax",
        "tresusageintot",
        "tresusageoutave",
        "tresusageouttot",
        "uid",
        "user",
        "usercpu",
        "wckey",
        "wckeyid",
        "workdir",
    ]
)
_LEADING_NAME_RE = re.compile(r"^\ufeff?([A-Za-z]+)")


def detect_delimiter(line: str) -> str | None:
    """The delimiter of a sacct header line, or None when the line is not a header.

    The line must start with a known field name; the delimiter is what follows it up to
    the next letter, and splitting by it must give mostly known names.
    """
    text = line.rstrip("\r\n")
    match = _LEADING_NAME_RE.match(text)
    if match is None or match[1].lower() not in SACCT_FIELD_NAMES:
        return None
    rest = text[match.end() :]
    delimiter = re.match(r"^[^A-Za-z]+", rest)
    if delimiter is None:
        return None
    candidate = delimiter[0]
    names = [name.strip().lower() for name in text.lstrip("\ufeff").split(candidate)]
    names = [name for name in names if name]
    known = sum(name in SACCT_FIELD_NAMES for name in names)
    return candidate if len(names) >= 2 and known * 2 > len(names) else None


def first_line(head: bytes) -> str:
    """The first non-blank line of the head bytes (decoded leniently)."""
    for raw in head.split(b"\n"):
        if raw.strip():
            return raw.decode("utf-8", errors="replace")
    return ""


class ReplayStream:
    """``head`` then the rest of ``stream``; a delimiter string is rewritten to one byte."""

    def __init__(self, head: bytes, stream: Readable, delimiter: str) -> None:
        self.stream = stream
        encoded = delimiter.encode("utf-8")
        self.pattern = encoded if len(encoded) > 1 else None
        self.carry = head
        self.eof = False

    def read(self, size: int = -1) -> bytes:
        while True:
            data = self.carry if self.eof else self.carry + self._next(size)
            if self.pattern is None:
                self.carry = b""
                return data
            data = data.replace(self.pattern, UNIT_SEPARATOR.encode())
            # After the rewrite, only the last len-1 bytes can hold the start of a delimiter.
            keep = 0 if self.eof else len(self.pattern) - 1
            out, self.carry = data[: len(data) - keep], data[len(data) - keep :]
            if out or self.eof:
                return out

    def _next(self, size: int) -> bytes:
        piece = self.stream.read(size if size and size > 0 else HEAD_BYTES)
        if isinstance(piece, str):
            piece = piece.encode("utf-8")
        if not piece:
            self.eof = True
        return piece or b""


def read_head(stream: Readable) -> bytes:
    """The first :data:`HEAD_BYTES` of ``stream`` as bytes (replayed by the caller)."""
    head = stream.read(HEAD_BYTES)
    if isinstance(head, str):
        head = head.encode("utf-8")
    return head or b""


def prepare_stream(
    stream: Readable, delimiter: str | None, head: bytes | None = None
) -> tuple[ReplayStream, str, str]:
    """Peek at the head, settle the delimiter; returns (stream, delimiter, delimiter in stream).

    The delimiter is the one given, else the header line's, else ``|``. ``head``: the bytes
    already read from ``stream`` (:func:`read_head`), if any.
    """
    head = read_head(stream) if head is None else head
    chosen = delimiter or detect_delimiter(first_line(head or b"")) or DEFAULT_DELIMITER
    replay = ReplayStream(head or b"", stream, chosen)
    in_stream = UNIT_SEPARATOR if replay.pattern is not None else chosen
    return replay, chosen, in_stream

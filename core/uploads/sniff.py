"""Is an upload UTF-8 text at all? One answer from its first bytes, before any parsing.

A UTF-16 export (Excel's "Unicode text", PowerShell's default) or a binary file read as
UTF-8 would otherwise produce dozens of garbled per-column errors; this names it once.
Legacy 8-bit files (Latin-1, Windows-1252) with a few accented letters still pass: their
odd bytes are replaced, as before, and only a file mostly made of such bytes is refused.
"""

from __future__ import annotations

import codecs
from typing import Any

SNIFF_BYTES = 64 * 1024
# Signatures of common binary formats someone may pick by mistake.
BINARY_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a zip archive or XLSX workbook"),
    (b"\xd0\xcf\x11\xe0", "an old Excel .xls / OLE file"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"BZh", "a bzip2 archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"%PDF", "a PDF"),
    (b"\x89PNG", "a PNG image"),
)
# A text file has no NUL and few control characters; a few stray ones are tolerated.
MAX_CONTROL_SHARE = 0.01
# Share of bytes that are not valid UTF-8 above which it is no longer "a few accents".
MAX_INVALID_SHARE = 0.10
_ALLOWED_CONTROLS = frozenset("\t\n\r\f\v")


def text_problem(head: bytes, *, legacy_8bit_ok: bool = False) -> str | None:
    """``None`` for UTF-8 text, else the one message: ``not UTF-8 text (looks like …)``.

    ``legacy_8bit_ok``: the caller decodes Windows-1252 itself, so only UTF-16/32 and
    binary files (NUL and control bytes, known signatures) are refused.
    """
    kind = _non_text_kind(head[:SNIFF_BYTES], legacy_8bit_ok)
    return None if kind is None else f"not UTF-8 text (looks like {kind})"


def _non_text_kind(sample: bytes, legacy_8bit_ok: bool) -> str | None:
    if sample.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "UTF-32"
    if sample.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16"
    for magic, name in BINARY_MAGIC:
        if sample.startswith(magic):
            return f"binary: {name}"
    if not sample:
        return None
    if _looks_like_utf16_without_bom(sample):
        return "UTF-16"
    # Incremental decoding: a character cut at the end of the sample is not an error.
    text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(sample, final=False)
    controls = sum(1 for char in text if char < " " and char not in _ALLOWED_CONTROLS)
    if controls > max(2, MAX_CONTROL_SHARE * len(text)):
        return "binary"
    if not legacy_8bit_ok and text.count("\ufffd") > max(8, MAX_INVALID_SHARE * len(text)):
        return "binary or another encoding"
    return None


def _looks_like_utf16_without_bom(sample: bytes) -> bool:
    """ASCII text in UTF-16 has a NUL in every other byte, on one side only."""
    half = len(sample) // 2
    if half < 2:
        return False
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    return max(even, odd) >= 0.3 * half and min(even, odd) <= 0.05 * half


def peek_head(upload: Any, size: int) -> bytes:
    """The first ``size`` bytes from the upload's position, as bytes; the position is kept."""
    position = upload.tell()
    try:
        head = upload.read(size)
    finally:
        upload.seek(position)
    return head if isinstance(head, bytes) else head.encode("utf-8")

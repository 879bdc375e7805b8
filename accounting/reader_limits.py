"""The Django side of the bounded usage readers: limits from settings, checks at upload.

The pure readers (:mod:`accounting.parsing.bounded`) take process-wide limits; an import
sets them from settings first. An uploaded file is held to the upload limit while it is
read too (it cannot have grown), a file given to ``manage.py import_usage`` only to the
line and block limits.
"""

from __future__ import annotations

from django.conf import settings

from accounting.models import ImportKind
from accounting.parsing.bounded import ReaderLimits, configure
from core.uploads.sniff import SNIFF_BYTES, text_problem

TEXT_KINDS = frozenset({ImportKind.SACCT, ImportKind.SREPORT, ImportKind.CSV})


def configure_readers(*, max_bytes: int | None) -> ReaderLimits:
    """Apply the settings' reader limits to this process; returns them."""
    limits = ReaderLimits(
        max_bytes=max_bytes,
        max_line_bytes=settings.FLEETWISE_READER_MAX_LINE_BYTES,
        max_block_bytes=settings.FLEETWISE_READER_MAX_BLOCK_BYTES,
    )
    configure(limits)
    return limits


def upload_text_problem(upload, kind: str) -> str | None:
    """For a text kind, why the upload is not UTF-8 text (one message), else None."""
    if kind not in TEXT_KINDS:
        return None
    position = upload.tell()
    try:
        head = upload.read(SNIFF_BYTES)
    finally:
        upload.seek(position)
    return text_problem(head if isinstance(head, bytes) else head.encode("utf-8"))

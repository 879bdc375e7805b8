"""XLSX files are zip archives: check what they would inflate to before anything opens them.

A few hundred kilobytes can inflate to gigabytes (a zip bomb); openpyxl and pandas would try.
The zip's central directory states every member's sizes, so the check reads no content.
"""

from __future__ import annotations

import os
import zipfile
from typing import IO

# Worksheet XML compresses well, but not a thousandfold; bombs do.
MAX_COMPRESSION_RATIO = 200
# A member this small cannot hurt, whatever its ratio (tiny XML parts compress oddly).
RATIO_EXEMPT_BYTES = 1 * 2**20
MAX_MEMBERS = 10_000


class UnsafeArchive(ValueError):
    """The file is not a zip, or it would inflate beyond the limits; the message says which."""


def check_xlsx_archive(
    source: str | os.PathLike[str] | IO[bytes], *, max_uncompressed_bytes: int
) -> None:
    """Raise UnsafeArchive unless `source` is a zip whose members inflate within the limits.

    A stream is left at the position it had.
    """
    stream = None if isinstance(source, str | os.PathLike) else source
    position = 0 if stream is None else stream.tell()
    try:
        with zipfile.ZipFile(source) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise UnsafeArchive(f"not an XLSX workbook (not a readable zip archive: {exc})") from exc
    finally:
        if stream is not None:
            stream.seek(position)
    if len(members) > MAX_MEMBERS:
        raise UnsafeArchive(f"the archive holds {len(members)} parts (at most {MAX_MEMBERS})")
    total = sum(member.file_size for member in members)
    if total > max_uncompressed_bytes:
        raise UnsafeArchive(
            f"it would inflate to {total / 2**20:.0f} MB, more than the "
            f"{max_uncompressed_bytes / 2**20:.0f} MB allowed"
        )
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > RATIO_EXEMPT_BYTES and ratio > MAX_COMPRESSION_RATIO:
            raise UnsafeArchive(
                f"part {member.filename} is compressed {ratio:.0f} to 1 (at most "
                f"{MAX_COMPRESSION_RATIO} to 1): this looks like a zip bomb"
            )

"""Hostile input shared by the fuzz and bounded-reader tests: nasty field values, workbooks,
a zip bomb and a workbook with one far cell."""

from __future__ import annotations

import io
import zipfile

from openpyxl import Workbook

NASTY = [
    "",
    " ",
    "-1",
    "-0",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "1e309",
    "9" * 40,
    "1e-400",
    "=cmd|' /C calc'!A0",
    "=SUM(A1:A9)",
    "@SUM(1)",
    "+1",
    "\x00",
    "\r",
    "é",
    "１",
    '"',
    "Unknown",
    "2024-13-45T99:99:99",
    "0001-01-01T00:00:00",
    "10000-01-01T00:00:00",
    "2024-03-01T10:00:00+99:00",
    "gres/gpu=-8",
    "gres/gpu:h100=1e309",
    "gres/gpu=99999999999999999999",
    "gres/gpu=nan",
    "99999999:00:00",
    "1-99:99:99",
    "-5%",
    "1e400%",
]


def xlsx_bytes(rows) -> bytes:
    workbook = Workbook()
    for row in rows:
        workbook.active.append(row)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def zip_bomb(inflated_mb: int) -> bytes:
    """A valid-looking XLSX whose sheet inflates to `inflated_mb` MB of blanks."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as sheet:
            block = b" " * 2**20
            for _ in range(inflated_mb):
                sheet.write(block)
    return buffer.getvalue()


def one_far_cell_xlsx(declared: bool) -> bytes:
    """A tiny workbook with one cell at XFD1048576, with or without its <dimension> element."""
    workbook = Workbook()
    workbook.active["XFD1048576"] = "x"
    buffer = io.BytesIO()
    workbook.save(buffer)
    if declared:
        return buffer.getvalue()
    source, out = zipfile.ZipFile(io.BytesIO(buffer.getvalue())), io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for member in source.infolist():
            data = source.read(member.filename)
            if member.filename.endswith("sheet1.xml"):
                start = data.index(b"<dimension")
                data = data[:start] + data[data.index(b"/>", start) + 2 :]
            target.writestr(member, data)
    return out.getvalue()

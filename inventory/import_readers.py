"""Bounded readers of inventory import files: the sheet's size is checked before any grid exists.

``pd.read_excel`` builds the whole declared grid: one cell at ``XFD1048576`` in a 1.5 KB file
asks for 17 billion cells. Here the workbook is streamed with openpyxl in read-only mode (as
the usage XLSX reader does); the declared dimension is checked first, and rows and columns
are counted while streaming for a sheet that declares none. Text is checked the same way
(one "not UTF-8 text" message for UTF-16 or binary files, caps on lines and columns) before
pandas sees it.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pandas as pd

from core.uploads.sniff import text_problem

# An inventory import holds at most 5000 rows of ~20 columns; blank rows and a few spare
# columns are tolerated, a sheet declared larger than this is refused unread.
MAX_SHEET_ROWS = 20_000
MAX_SHEET_COLUMNS = 200
MAX_SHEET_CELLS = 1_000_000


class SheetTooLarge(ValueError):
    """The sheet (declared or as streamed) is beyond the reader's limits."""


def _shape_error(rows: int, columns: int, what: str) -> SheetTooLarge:
    return SheetTooLarge(
        f"the sheet {what} {rows:,} rows × {columns:,} columns; an inventory import reads at "
        f"most {MAX_SHEET_ROWS:,} rows, {MAX_SHEET_COLUMNS} columns and {MAX_SHEET_CELLS:,} cells"
    )


def check_shape(rows: int, columns: int, what: str = "has") -> None:
    if rows > MAX_SHEET_ROWS or columns > MAX_SHEET_COLUMNS or rows * columns > MAX_SHEET_CELLS:
        raise _shape_error(rows, columns, what)


def _cell_value(cell: Any) -> Any:
    """As pandas' openpyxl reader gives it: whole floats as int, dates as their text."""
    if isinstance(cell, float) and cell.is_integer():
        return int(cell)
    if isinstance(cell, datetime):
        return str(pd.Timestamp(cell))
    return cell


def _bounded_rows(sheet) -> Iterator[tuple[Any, ...]]:
    """The sheet's rows, refusing one beyond the limits as soon as it is streamed."""
    for number, row in enumerate(sheet.iter_rows(values_only=True), start=1):
        width = len(row)
        if width > MAX_SHEET_COLUMNS:
            if any(cell not in (None, "") for cell in row[MAX_SHEET_COLUMNS:]):
                raise _shape_error(number, width, "reaches")
            row = row[:MAX_SHEET_COLUMNS]
        if number > MAX_SHEET_ROWS:
            if any(cell not in (None, "") for cell in row):
                raise _shape_error(number, width, "reaches")
            continue  # trailing blank rows some tools write: nothing to keep
        yield row


def read_first_sheet(content: bytes) -> pd.DataFrame:
    """The first sheet as a frame: row 1 is the header (blank names as pandas names them)."""
    from openpyxl import load_workbook

    workbook = load_workbook(io.BytesIO(content), read_only=True, data_only=True)
    try:
        sheet = workbook.worksheets[0]
        if sheet.max_row is not None and sheet.max_column is not None:
            check_shape(sheet.max_row, sheet.max_column, "declares")
        rows = [tuple(_cell_value(cell) for cell in row) for row in _bounded_rows(sheet)]
    finally:
        workbook.close()
    while rows and all(cell in (None, "") for cell in rows[-1]):
        rows.pop()
    if not rows:
        raise ValueError("the first sheet is empty")
    width = max(len(row) for row in rows)
    header = [
        f"Unnamed: {index}" if cell in (None, "") else str(cell)
        for index, cell in enumerate(rows[0] + (None,) * (width - len(rows[0])))
    ]
    body = [row + (None,) * (width - len(row)) for row in rows[1:]]
    return pd.DataFrame(body, columns=header, dtype=object)


# What opening a broken workbook raises (SyntaxError: ElementTree's ParseError).
XLSX_READ_ERRORS = (zipfile.BadZipFile, ValueError, KeyError, OSError, SyntaxError, TypeError)


def check_text(content: bytes) -> None:
    """Refuse UTF-16 and binary files with one message (Windows-1252 text is fine)."""
    problem = text_problem(content, legacy_8bit_ok=True)
    if problem is not None:
        raise ValueError(f"The file is {problem}.")


def check_text_shape(text: str, delimiter: str) -> None:
    """Lines and header columns of pasted or CSV text, counted before pandas parses it."""
    lines = text.count("\n") + 1
    header = text.lstrip("\ufeff").split("\n", 1)[0]
    columns = header.count(delimiter) + 1
    check_shape(lines, columns)

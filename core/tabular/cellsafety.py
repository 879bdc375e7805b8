"""The one cell-safety rule, and the only spreadsheet writers the project may use.

Spreadsheet apps run text starting with ``= + - @``, a tab or a carriage return (and, with
East Asian input, the full-width ``＝ ＋ － ＠``) as a formula: CSV/formula injection (OWASP,
"CSV Injection"; see ``docs/export.md``). Every file a person may open in a spreadsheet is
written through this module:

* CSV: :func:`safe_csv_writer`; every cell goes through :func:`csv_cell` (formula-like text
  gets a leading apostrophe, numbers keep JSON's text);
* XLSX: :class:`SafeWorkbook`; formula-like text becomes a text cell (``data_type`` "s",
  quote-prefixed), in write-only sheets as rows are appended and in ordinary sheets at save.

Text also loses its bidi overrides and zero-width characters (`engine.text.strip_invisible`):
names stored before names refused them must not reorder or hide what a cell shows.

A number written as text ("-1.5", "+3e9", ASCII digits only) is data, never prefixed. The
PostgreSQL COPY export (`core.tabular.exporting`) writes the same rule in SQL from these constants.
``tests/exports/test_cell_safety.py`` fails when code outside this module writes a sheet.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import math
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.utils import timezone
from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.cell.cell import Cell
from openpyxl.styles import Font
from openpyxl.worksheet._write_only import WriteOnlyWorksheet

from engine.text import strip_invisible

FULL_WIDTH_PREFIXES = ("\uff1d", "\uff0b", "\uff0d", "\uff20")  # ＝ ＋ － ＠
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", *FULL_WIDTH_PREFIXES)
FORMULA_FIRST = frozenset(FORMULA_PREFIXES)  # every prefix is one character
NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# Excel refuses these in sheet names, and a name may not start or end with an apostrophe.
_SHEET_TITLE_BAD = re.compile(r"[\[\]:*?/\\\x00-\x1f]")
SHEET_TITLE_MAX_CHARS = 31


def is_formula_like(text: str) -> bool:
    return text[:1] in FORMULA_FIRST and not NUMBER_TEXT.fullmatch(text)


def defuse(text: str) -> str:
    """Text a spreadsheet would run as a formula, made inert with a leading apostrophe (and
    without invisible characters, which could hide the formula's first character)."""
    text = strip_invisible(text)
    return "'" + text if is_formula_like(text) else text


def safe_sheet_title(title: str, default: str = "Sheet") -> str:
    """A sheet name Excel accepts that starts with no formula character."""
    text = _SHEET_TITLE_BAD.sub(" ", str(title))
    text = text.lstrip("".join(FORMULA_PREFIXES) + "' ").rstrip("' ")
    return text[:SHEET_TITLE_MAX_CHARS].rstrip("' ") or default


# -- CSV ------------------------------------------------------------------------------------


def iso_datetime(value: dt.datetime) -> str:
    """The same text DRF's DateTimeField writes (current time zone, ``Z`` for UTC)."""
    if timezone.is_aware(value):
        value = timezone.localtime(value)
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def csv_cell(value: Any) -> Any:
    """A value as CSV text: JSON's own text for numbers, ISO 8601 times, inert formulas."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    if isinstance(value, str):
        return defuse(value)
    if isinstance(value, int):
        return value
    if isinstance(value, dt.datetime):
        return iso_datetime(value)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (Mapping, list, tuple)):
        return defuse(json_text(value))
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return defuse(str(value))


def _text_column(values: list[Any]) -> list[Any]:
    # The common case (ASCII, no formula-like first character) costs two cheap checks a cell.
    return [
        (v if not v or (v[0] not in FORMULA_FIRST and v.isascii()) else defuse(v))
        if isinstance(v, str) or v is None
        else csv_cell(v)
        for v in values
    ]


def _number_column(values: list[Any]) -> list[Any]:
    # Integers and null print as they are; anything else (a float, a bool) as JSON would.
    return [v if v is None or v.__class__ is int else csv_cell(v) for v in values]


def _float_column(values: list[Any]) -> list[Any]:
    # csv prints a float as repr(): JSON's own text. Only non-finite values need care.
    return [
        v
        if v is None or (v.__class__ is float and math.isfinite(v))
        else ""
        if v.__class__ is float
        else csv_cell(v)
        for v in values
    ]


def _datetime_column(values: list[Any]) -> list[Any]:
    utc = timezone.get_current_timezone_name() == "UTC"
    return [
        v
        if v is None or (v.__class__ is str and v[:1] not in FORMULA_FIRST)
        else v.isoformat()[:-6] + "Z"
        if utc and isinstance(v, dt.datetime) and v.utcoffset() == dt.timedelta(0)
        else csv_cell(v)
        for v in values
    ]


def _any_column(values: list[Any]) -> list[Any]:
    return [csv_cell(v) for v in values]


# Per-kind column converters (csv writes None as an empty cell and ints as their digits).
_CSV_COLUMN = {
    "string": _text_column,
    "integer": _number_column,
    "number": _float_column,
    "datetime": _datetime_column,
}


class SafeCSVWriter:
    """``csv.writer`` whose every cell passes :func:`csv_cell` (the only CSV writer to use)."""

    def __init__(self, target, **options):
        self._writer = csv.writer(target, **options)

    def writerow(self, row: Iterable[Any]) -> None:
        self._writer.writerow([csv_cell(value) for value in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)

    def write_chunk(self, kinds: Sequence[str], chunk: Sequence[Sequence[Any]]) -> None:
        """Rows aligned to columns of these kinds, converted column-wise (fast for big files)."""
        if not chunk:
            return
        converters = [_CSV_COLUMN.get(kind, _any_column) for kind in kinds]
        transposed = zip(*chunk, strict=True)
        values = [convert(list(col)) for convert, col in zip(converters, transposed, strict=True)]
        self._writer.writerows(zip(*values, strict=True))


def safe_csv_writer(target, **options) -> SafeCSVWriter:
    return SafeCSVWriter(target, **options)


# -- XLSX -----------------------------------------------------------------------------------


def mark_text(cell) -> None:
    """A cell whose text looks like a formula: a text cell that stays text when edited."""
    cell.data_type = "s"
    cell.quotePrefix = True


def _unsafe(cell) -> bool:
    value = cell.value
    return cell.data_type == "f" or (isinstance(value, str) and is_formula_like(value))


def safe_xlsx_value(sheet, value: Any) -> Any:
    """A value for a write-only row: formula-like text (or cell) as a quote-prefixed text cell."""
    if isinstance(value, Cell):
        if isinstance(value.value, str) and not value.value.isascii():
            value.value = strip_invisible(value.value)
        if _unsafe(value):
            mark_text(value)
        return value
    if isinstance(value, str):
        value = strip_invisible(value)
    if isinstance(value, str) and is_formula_like(value):
        cell = WriteOnlyCell(sheet, value=value)
        mark_text(cell)
        return cell
    return value


def bold_cell(sheet, value: Any) -> WriteOnlyCell:
    """A bold cell for a write-only sheet (a header), made text when it looks like a formula."""
    cell = WriteOnlyCell(sheet, value=value)
    cell.font = Font(bold=True)
    return safe_xlsx_value(sheet, cell)


class SafeWriteOnlySheet(WriteOnlyWorksheet):
    def append(self, row):
        super().append([safe_xlsx_value(self, value) for value in row])


class SafeWorkbook(Workbook):
    """openpyxl's Workbook that never writes a formula: the only workbook class to use."""

    def create_sheet(self, title=None, index=None):
        title = None if title is None else safe_sheet_title(title)
        if not self.write_only:
            return super().create_sheet(title, index)
        sheet = SafeWriteOnlySheet(parent=self, title=title)
        self._add_sheet(sheet=sheet, index=index)
        return sheet

    def save(self, filename) -> None:
        for sheet in self.worksheets:
            if isinstance(sheet, WriteOnlyWorksheet):
                continue  # made safe row by row as appended
            title = safe_sheet_title(sheet.title)
            if title != sheet.title:  # openpyxl renames a sheet set to its own name
                sheet.title = title
            for row in sheet.iter_rows():
                for cell in row:
                    if isinstance(cell.value, str) and not cell.value.isascii():
                        cell.value = strip_invisible(cell.value)
                    if cell.value is not None and _unsafe(cell):
                        mark_text(cell)
        super().save(filename)

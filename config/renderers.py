"""Tabular export renderers for DRF: `?format=csv` and `?format=xlsx` on any list endpoint.

Both take what a list view returns: a list of flat dicts, or a paginated body whose rows are
under "results". A view may set `export_columns` (the column order) and `export_filename`
(without extension); otherwise columns come from the rows in first-seen order. Nested values
(dicts, lists) are written as JSON text. An error body (a dict without "results") is written
as one row so the client still sees why.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from openpyxl import Workbook
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter
from rest_framework.renderers import BaseRenderer

MIN_COLUMN_WIDTH = 8
MAX_COLUMN_WIDTH = 60
WIDTH_SAMPLE_ROWS = 500  # widths from the first rows: enough to size, cheap for big exports
# Spreadsheet apps run text starting with these as a formula (CSV/formula injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def table_rows(data: Any) -> list[Mapping[str, Any]]:
    """The rows of a list response (plain or paginated), or an error body as one row."""
    if isinstance(data, Mapping):
        if isinstance(data.get("results"), list):
            return data["results"]
        return [data]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        return [row if isinstance(row, Mapping) else {"value": row} for row in data]
    return [{"value": data}]


def table_columns(rows: Iterable[Mapping[str, Any]], preferred: Sequence[str] = ()) -> list[str]:
    """`preferred` first (those present, or all when there are no rows), then the rest."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    if not seen:
        return list(preferred)
    ordered = [column for column in preferred if column in seen]
    return ordered + [column for column in seen if column not in set(ordered)]


def _view_setting(renderer_context: Mapping[str, Any] | None, name: str, default: Any) -> Any:
    view = (renderer_context or {}).get("view")
    value = getattr(view, name, default)
    return value() if callable(value) else value


def _attach(renderer_context: Mapping[str, Any] | None, extension: str) -> None:
    """Ask the browser to download the file under the view's export name."""
    response = (renderer_context or {}).get("response")
    if response is None:
        return
    filename = _view_setting(renderer_context, "export_filename", "export")
    response["Content-Disposition"] = f'attachment; filename="{filename}.{extension}"'


def _plain(value: Any) -> Any:
    """A JSON-ish cell value as a scalar a table can hold (None stays None)."""
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(value, ensure_ascii=False, default=str)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _defused(text: str) -> str:
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


class CSVRenderer(BaseRenderer):
    """UTF-8 CSV with a header row; numbers in full precision, empty cells for null."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        rows = table_rows(data)
        columns = table_columns(rows, _view_setting(renderer_context, "export_columns", ()))
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([self._cell(row.get(column)) for column in columns])
        _attach(renderer_context, self.format)
        return buffer.getvalue().encode(self.charset)

    @staticmethod
    def _cell(value: Any) -> Any:
        value = _plain(value)
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            return repr(value)  # shortest text that reads back to the same float
        if isinstance(value, (dt.date, dt.datetime, dt.time)):
            return value.isoformat()
        if isinstance(value, str):
            return _defused(value)
        return value


class XLSXRenderer(BaseRenderer):
    """One worksheet: typed cells, bold frozen header, auto-filter and fitted column widths."""

    media_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    format = "xlsx"
    charset = None
    render_style = "binary"
    sheet_title = "Export"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        rows = table_rows(data)
        columns = table_columns(rows, _view_setting(renderer_context, "export_columns", ()))
        workbook = Workbook()
        sheet = workbook.active
        sheet.title = _view_setting(renderer_context, "export_sheet_title", self.sheet_title)[:31]
        sheet.append(columns)
        for cell in sheet[1]:
            cell.font = Font(bold=True)
        widths = [max(MIN_COLUMN_WIDTH, len(str(column)) + 2) for column in columns]
        for number, row in enumerate(rows, start=2):
            for index, column in enumerate(columns, start=1):
                value = self._cell(row.get(column))
                cell = sheet.cell(row=number, column=index, value=value)
                if isinstance(value, str) and value.startswith("="):
                    cell.data_type = "s"  # text, never a formula
                if number <= WIDTH_SAMPLE_ROWS and value is not None:
                    widths[index - 1] = max(widths[index - 1], len(self._shown(value)) + 2)
        for index, width in enumerate(widths, start=1):
            sheet.column_dimensions[get_column_letter(index)].width = min(width, MAX_COLUMN_WIDTH)
        sheet.freeze_panes = "A2"
        if columns:
            last = f"{get_column_letter(len(columns))}{max(len(rows) + 1, 1)}"
            sheet.auto_filter.ref = f"A1:{last}"
        buffer = io.BytesIO()
        workbook.save(buffer)
        _attach(renderer_context, self.format)
        return buffer.getvalue()

    @staticmethod
    def _cell(value: Any) -> Any:
        value = _plain(value)
        if isinstance(value, str):
            return ILLEGAL_CHARACTERS_RE.sub("", value)  # control characters break the file
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            # Excel has no time zones: store UTC wall time.
            return value.astimezone(dt.UTC).replace(tzinfo=None)
        return value

    @staticmethod
    def _shown(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.6g}"
        return str(value)

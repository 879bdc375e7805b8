"""DRF renderers for every endpoint: JSON, CSV and XLSX (``?format=`` or the Accept header).

The tabular renderers take what a view returns: a list of rows, or a paginated body whose
rows are under "results". Rows are flattened (nested objects as dotted names, lists as JSON
text); columns come from the view's serializer (`core.tabular.exporting.view_columns`) in its
order, or from a view's ``export_columns``; ``?fields=`` selects and orders them (JSON too).
A view may set ``export_filename`` (without extension) and ``export_sheet_title``. An error
body (status ≥ 400) is written as one row so the client still sees why. Every text cell a
spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, full-width ``＝`` …) is
neutralised by the one rule of `core.tabular.cellsafety`; numbers stay numbers. Tables are built in
`core.tabular.columns`.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping
from typing import Any

from django.utils import timezone
from django.utils.http import quote_etag
from rest_framework import renderers

from core.tabular.cellsafety import FORMULA_PREFIXES
from core.tabular.columns import (
    ROWS_HEADER,
    Column,
    flatten,
    infer_kinds,
    iter_csv,
    prune,
    requested_fields,
    select_columns,
    table_columns,
    table_rows,
    view_columns,
    view_filename,
    write_xlsx,
)

__all__ = ["FORMULA_PREFIXES", "CSVRenderer", "JSONRenderer", "XLSXRenderer", "table_rows"]


def _context(renderer_context: Mapping[str, Any] | None) -> tuple[Any, Any, Any]:
    context = renderer_context or {}
    return context.get("request"), context.get("view"), context.get("response")


def _failed(response) -> bool:
    return response is not None and getattr(response, "status_code", 200) >= 400


def _fields(request, response) -> list[str]:
    if request is None or _failed(response):
        return []
    params = getattr(request, "query_params", None) or getattr(request, "GET", {})
    return requested_fields(params.get("fields"))


class JSONRenderer(renderers.JSONRenderer):
    """DRF's JSON, with ``?fields=`` applied to each row (of a page or a plain list)."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        request, _view, response = _context(renderer_context)
        names = _fields(request, response)
        if names:
            if isinstance(data, Mapping) and isinstance(data.get("results"), list):
                data = {**data, "results": prune(data["results"], names)}
            else:
                data = prune(data, names)
        return super().render(data, accepted_media_type, renderer_context)


class TableRenderer(renderers.BaseRenderer):
    """What CSV and XLSX share: rows → flat, typed, selected columns."""

    def table(self, data, renderer_context) -> tuple[list[Column], list[list[Any]]]:
        request, view, response = _context(renderer_context)
        rows = [flatten(row) for row in table_rows(data)]
        if _failed(response):
            columns = table_columns(rows)
        else:
            preferred = getattr(view, "export_columns", ()) or ()
            columns = table_columns(rows, view_columns(view), preferred)
            columns = select_columns(columns, _fields(request, response))
        values = [[row.get(column.name) for column in columns] for row in rows]
        columns = infer_kinds(columns, values)
        if response is not None and not _failed(response):
            response[ROWS_HEADER] = str(len(values))
            filename = view_filename(view) if view is not None else "export"
            response["Content-Disposition"] = f'attachment; filename="{filename}.{self.format}"'
            # From the table, not the bytes: an XLSX embeds its creation time.
            response["ETag"] = table_etag(self.format, columns, values)
        return columns, values


class CSVRenderer(TableRenderer):
    """UTF-8 CSV with a header row; numbers in full precision, empty cells for null."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        columns, values = self.table(data, renderer_context)
        return b"".join(iter_csv(columns, [values]))


class XLSXRenderer(TableRenderer):
    """Typed cells, bold frozen header, auto-filter, fitted widths; a second sheet "About"."""

    media_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    format = "xlsx"
    charset = None
    render_style = "binary"
    sheet_title = "Export"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        request, view, _response = _context(renderer_context)
        columns, values = self.table(data, renderer_context)
        title = getattr(view, "export_sheet_title", None) or self.sheet_title
        buffer = io.BytesIO()
        write_xlsx(buffer, columns, [values], about=about_rows(request), sheet_title=title)
        return buffer.getvalue()


def table_etag(fmt: str, columns: list[Column], values: list[list[Any]]) -> str:
    digest = hashlib.sha256(fmt.encode())
    digest.update(json.dumps([c.name for c in columns]).encode())
    for row in values:
        digest.update(json.dumps(row, default=str).encode())
    return quote_etag(digest.hexdigest()[:32])


def about_rows(request) -> list[tuple[str, Any]]:
    """The query behind a file, for the "About" sheet."""
    if request is None:
        return [("generated_at", timezone.now())]
    return [
        ("query", request.build_absolute_uri()),
        ("generated_at", timezone.now()),
        ("times", "UTC (Excel has no time zones)"),
    ]

"""Tables for spreadsheets: typed columns, flattened rows, safe cells, CSV and XLSX writers.

Shared by the DRF renderers (`core.tabular.renderers`), the streaming list exports
(`core.tabular.exporting`) and the background XLSX jobs (`exports.services`):

* a :class:`Column` has a stable name (units in the name: ``it_power_kw``), a kind (integer,
  number, boolean, datetime, date, string, any), a unit and a description, taken from the
  serializer that produced the rows (:func:`serializer_columns`);
* rows are flattened: nested objects become dotted names (``factors.mfu``), lists JSON text;
* cells are typed for XLSX (numbers, booleans, dates as Excel dates in UTC) and every text
  cell that a spreadsheet would run as a formula is neutralised (:func:`defuse`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
from openpyxl.utils import get_column_letter
from rest_framework import serializers
from rest_framework.relations import ManyRelatedField, RelatedField

# The cell-safety rule and the safe writers live in core.tabular.cellsafety (re-exported here).
from core.tabular.cellsafety import (  # noqa: F401
    FORMULA_PREFIXES,
    NUMBER_TEXT,
    SafeWorkbook,
    bold_cell,
    csv_cell,
    defuse,
    is_formula_like,
    iso_datetime,
    json_text,
    safe_csv_writer,
    safe_sheet_title,
)

MIN_COLUMN_WIDTH = 8
MAX_COLUMN_WIDTH = 60
WIDTH_SAMPLE_ROWS = 500  # widths from the first rows: enough to size, cheap for big exports
XLSX_MAX_CELL_CHARS = 32_767  # Excel refuses longer text in one cell
# With "\r\n" Python's csv module quotes a field holding a lone "\r" (with "\n" it would not).
CSV_LINE_END = "\r\n"

KINDS = ("integer", "number", "boolean", "datetime", "date", "string", "any")

# Unit of a column from the end of its name; longest suffix first.
UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("_g_per_kwh", "g CO2e per kWh"),
    ("_per_card_hour", "currency per card-hour"),
    ("_per_pflop_day", "currency per PFLOP-day"),
    ("_per_kwh", "currency per kWh"),
    ("_card_hours", "card-hours"),
    ("_pflop_days", "PFLOP-days"),
    ("_usd", "USD"),
    ("_kw", "kW"),
    ("_w", "W"),
    ("_mwh", "MWh"),
    ("_kwh", "kWh"),
    ("_pflops", "PFLOP/s"),
    ("_tflops", "TFLOP/s"),
    ("_gbs", "GB/s"),
    ("_gb", "GB"),
    ("_bytes", "bytes"),
    ("_tonnes", "tonnes CO2e"),
    ("_hours", "hours"),
    ("_h", "hours"),
    ("_s", "seconds"),
    ("_minutes", "minutes"),
    ("_days", "days"),
    ("_cost_share", "currency of the row"),  # a team's share of idle cost is money
    ("_share", "fraction 0-1"),
    ("_cost", "currency of the row"),
    ("utilization", "fraction 0-1"),
    ("mfu", "fraction 0-1"),
    ("effective_time", "fraction 0-1"),
    ("pue", "ratio ≥ 1"),
    ("progress", "percent 0-100"),
)


@dataclass(frozen=True)
class Column:
    name: str
    kind: str = "any"
    unit: str = ""
    description: str = ""


def unit_of(name: str) -> str:
    leaf = name.rsplit(".", 1)[-1]
    for suffix, unit in UNIT_SUFFIXES:
        if leaf.endswith(suffix):
            return unit
    return ""


# -- columns from serializers -------------------------------------------------------------


def _kind(field: serializers.Field) -> str:
    if isinstance(field, serializers.BooleanField):
        return "boolean"
    if isinstance(field, serializers.IntegerField):
        return "integer"
    if isinstance(field, (serializers.FloatField, serializers.DecimalField)):
        return "number"
    if isinstance(field, serializers.DateTimeField):
        return "datetime"
    if isinstance(field, serializers.DateField):
        return "date"
    if isinstance(field, RelatedField) and not isinstance(field, serializers.StringRelatedField):
        return "integer" if isinstance(field, serializers.PrimaryKeyRelatedField) else "string"
    if isinstance(field, serializers.ChoiceField):
        values = list(field.choices)
        return "string" if all(isinstance(value, str) for value in values) else "any"
    if isinstance(field, (serializers.CharField, serializers.UUIDField)):
        return "string"
    return "any"


def _describe(field: serializers.Field) -> str:
    text = str(field.help_text or "")
    if not text and field.label and field.label.lower() != str(field.field_name).replace("_", " "):
        text = str(field.label)
    return text


def _field_columns(name: str, field: serializers.Field) -> list[Column]:
    if isinstance(field, (serializers.ListSerializer, serializers.ListField, ManyRelatedField)):
        return [Column(name, "any", "", _describe(field) or "A list, as JSON text.")]
    if isinstance(field, serializers.BaseSerializer):
        return [
            column
            for child_name, child in field.fields.items()
            if not child.write_only
            for column in _field_columns(f"{name}.{child_name}", child)
        ]
    return [Column(name, _kind(field), unit_of(name), _describe(field))]


def serializer_columns(serializer: serializers.BaseSerializer | None) -> list[Column]:
    """The flat columns a serializer's rows have (nested serializers as dotted names)."""
    if serializer is None:
        return []
    if isinstance(serializer, serializers.ListSerializer):
        serializer = serializer.child
    if not hasattr(serializer, "fields"):
        return []
    return [
        column
        for name, field in serializer.fields.items()
        if not field.write_only
        for column in _field_columns(name, field)
    ]


# -- views --------------------------------------------------------------------------------

TABLE_FORMATS = ("csv", "xlsx")
ROWS_HEADER = "X-Export-Rows"


def export_format(request) -> str | None:
    renderer = getattr(request, "accepted_renderer", None)
    return getattr(renderer, "format", None)


def wants_whole_table(request) -> bool:
    """A CSV/XLSX without an explicit page is the whole (filtered) table, not page 1."""
    params = getattr(request, "query_params", request.GET)
    return export_format(request) in TABLE_FORMATS and not ({"page", "page_size"} & set(params))


def view_columns(view) -> list[Column]:
    """The documented columns of a view's rows, from its serializer (empty when unknown)."""
    if view is None:
        return []
    if hasattr(view, "get_export_columns"):
        return view.get_export_columns()
    if not hasattr(view, "get_serializer"):
        return []
    try:
        return serializer_columns(view.get_serializer())
    except Exception:  # a view without a usable serializer has no spec
        return []


def view_filename(view) -> str:
    """The download's name without extension, dated by the query's ``start``/``end``."""
    request = getattr(view, "request", None)
    return dated_filename(_undated_filename(view), getattr(request, "GET", None) or {})


def _undated_filename(view) -> str:
    name = getattr(view, "export_filename", None)
    if callable(name):
        name = name()
    if name:
        return str(name)
    path = getattr(getattr(view, "request", None), "path", "")
    # A router's list is named as its URL ("usage-records"), not its singular basename.
    segments = [part for part in path.split("/") if part and not re.fullmatch(r"api|v\d+", part)]
    if getattr(view, "basename", None):
        return "-".join(segments) or str(view.basename)
    words = re.sub(r"(?<!^)(?=[A-Z])", "-", type(view).__name__.removesuffix("View"))
    return words.lower() or "export"


def _query_day(text: str, exclusive_end: bool = False) -> dt.date | None:
    """A query's date or date-time as a day; an exclusive end at midnight is the day before."""
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    midnight = moment.time() == dt.time()
    return moment.date() - dt.timedelta(days=1) if exclusive_end and midnight else moment.date()


def dated_filename(name: str, params: Mapping[str, Any]) -> str:
    """``usage-records_2026-11-01_2026-11-30``: the first and last day of ``start``/``end``
    (end exclusive, as every period filter here); undated without a valid period."""
    start = _query_day(params.get("start") or "")
    last = _query_day(params.get("end") or "", exclusive_end=True)
    if start is not None and last is not None and last >= start:
        return f"{name}_{start.isoformat()}_{last.isoformat()}"
    if start is not None and not params.get("end"):
        return f"{name}_from_{start.isoformat()}"
    if last is not None and not params.get("start"):
        return f"{name}_to_{last.isoformat()}"
    return name


# -- rows -----------------------------------------------------------------------------------


def table_rows(data: Any) -> list[Mapping[str, Any]]:
    """The rows of a list response (plain or paginated), or an error body as one row."""
    if isinstance(data, Mapping):
        if isinstance(data.get("results"), list):
            return data["results"]
        return [data]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        return [row if isinstance(row, Mapping) else {"value": row} for row in data]
    return [{"value": data}]


def flatten(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects as dotted names; lists and scalars stay as they are."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def _covers(column: str, name: str) -> bool:
    return column == name or column.startswith(f"{name}.")


def table_columns(
    rows: Iterable[Mapping[str, Any]], spec: Sequence[Column] = (), preferred: Sequence[str] = ()
) -> list[Column]:
    """Columns of flattened rows: the spec's (or preferred) order first, then the rest.

    A spec column whose values are objects is replaced by its dotted children.
    """
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    by_name = {column.name: column for column in spec}
    order = list(preferred) or [column.name for column in spec]
    if not seen:
        return [by_name.get(name, Column(name, "any", unit_of(name))) for name in order]
    ordered: list[str] = []
    placed: set[str] = set()
    for name in order:
        children = [key for key in seen if key.startswith(f"{name}.") and key not in placed]
        # A bare name beside its children held null where other rows held an object.
        if name in seen and name not in placed and not children:
            ordered.append(name)
        placed.add(name)
        ordered.extend(children)
        placed.update(children)
    for key in seen:
        if key in placed:
            continue
        children = [other for other in seen if other.startswith(f"{key}.")]
        if not children:
            ordered.append(key)
        placed.add(key)
        ordered.extend(child for child in children if child not in placed)
        placed.update(children)
    columns = []
    for name in ordered:
        column = by_name.get(name)
        if column is None:
            parent = next((c for c in spec if name.startswith(f"{c.name}.")), None)
            column = Column(name, "any", unit_of(name), parent.description if parent else "")
        columns.append(column)
    return columns


def requested_fields(text: str | None) -> list[str]:
    """``?fields=a,b.c`` as a list of names (empty: every column)."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def unknown_fields(names: Sequence[str], spec: Sequence[Column]) -> list[str]:
    """Names that match no column (a dotted name below a free-form column is accepted)."""
    if not spec:
        return []

    def known(name: str) -> bool:
        return any(
            _covers(column.name, name)
            or (column.kind == "any" and name.startswith(f"{column.name}."))
            for column in spec
        )

    return [name for name in names if not known(name)]


def select_columns(columns: Sequence[Column], names: Sequence[str]) -> list[Column]:
    """The columns named (a name also selects its dotted children), in the order named."""
    if not names:
        return list(columns)
    chosen: dict[str, Column] = {}
    for name in names:
        for column in columns:
            if _covers(column.name, name) and column.name not in chosen:
                chosen[column.name] = column
    return list(chosen.values())


def prune(value: Any, names: Sequence[str]) -> Any:
    """A JSON object (or list of them) keeping only the named (dotted) paths, in that order."""
    if isinstance(value, list):
        return [prune(item, names) for item in value]
    if not isinstance(value, Mapping) or not names:
        return value
    out: dict[str, Any] = {}
    for name in names:
        head, _, rest = name.partition(".")
        if head not in value:
            continue
        if rest:
            child = prune(value[head], [rest]) if isinstance(value[head], Mapping) else None
            if isinstance(child, Mapping):
                merged = out.get(head) if isinstance(out.get(head), dict) else {}
                out[head] = {**merged, **child}
        else:
            out[head] = value[head]
    return out


# -- cells ----------------------------------------------------------------------------------


def _parse_datetime(text: str) -> dt.datetime | str:
    try:
        return _excel_datetime(dt.datetime.fromisoformat(text))
    except ValueError:
        return text


def _excel_datetime(value: dt.datetime) -> dt.datetime:
    # Excel has no time zones: store UTC wall time.
    return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value


def xlsx_value(value: Any, kind: str = "any") -> Any:
    """A value as a typed XLSX cell value (formula-like text is made text by the sheet)."""
    if value is None:
        return None
    if isinstance(value, str):
        if kind == "datetime":
            return _parse_datetime(value)
        if kind == "date":
            try:
                return dt.date.fromisoformat(value)
            except ValueError:
                return value
        if kind == "number" and NUMBER_TEXT.fullmatch(value):
            return float(value)  # a decimal serialized as text
        return ILLEGAL_CHARACTERS_RE.sub("", value)[:XLSX_MAX_CELL_CHARS]
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        return value
    if isinstance(value, dt.datetime):
        return _excel_datetime(value)
    if isinstance(value, (dt.date, dt.time)):
        return value
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (Mapping, list, tuple)):
        return ILLEGAL_CHARACTERS_RE.sub("", json_text(value))[:XLSX_MAX_CELL_CHARS]
    return ILLEGAL_CHARACTERS_RE.sub("", str(value))[:XLSX_MAX_CELL_CHARS]


# -- writers --------------------------------------------------------------------------------

Chunks = Iterable[Sequence[Sequence[Any]]]  # lists of rows, each row aligned to the columns


def dict_chunks(rows: Iterable[Mapping[str, Any]], columns: Sequence[Column], size: int = 2000):
    """Flat dict rows as chunks of value rows aligned to ``columns``."""
    names = [column.name for column in columns]
    chunk: list[list[Any]] = []
    for row in rows:
        chunk.append([row.get(name) for name in names])
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def iter_csv(columns: Sequence[Column], chunks: Chunks, counter: list[int] | None = None):
    """CSV bytes: a header line, then one block per chunk (memory bounded by the chunk)."""
    buffer = io.StringIO()
    writer = safe_csv_writer(buffer, lineterminator=CSV_LINE_END)
    writer.writerow([column.name for column in columns])
    yield buffer.getvalue().encode("utf-8")
    kinds = [column.kind for column in columns]
    for chunk in chunks:
        if not chunk:
            continue
        buffer.seek(0)
        buffer.truncate()
        writer.write_chunk(kinds, chunk)
        if counter is not None:
            counter[0] += len(chunk)
        yield buffer.getvalue().encode("utf-8")


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dt.datetime):
        return "2026-01-01 00:00:00"
    return str(value)


def write_xlsx(
    target,
    columns: Sequence[Column],
    chunks: Chunks,
    about: Sequence[tuple[str, Any]] = (),
    sheet_title: str = "Export",
    progress: Callable[[int], None] | None = None,
) -> int:
    """An XLSX workbook (write-only, so memory stays flat): the rows, then "About".

    The first sheet has typed cells, a bold frozen header, an auto-filter and column widths
    fitted to the first rows; the second describes each column and the query behind the file.
    Returns the number of rows written.
    """
    workbook = SafeWorkbook(write_only=True)
    sheet = workbook.create_sheet(safe_sheet_title(sheet_title, "Export"))
    kinds = [column.kind for column in columns]
    chunk_iter = iter(chunks)

    # Buffer the first rows to size the columns: widths must be set before any row is written.
    sample: list[list[Any]] = []
    pending: list[Sequence[Sequence[Any]]] = []
    for chunk in chunk_iter:
        pending.append(chunk)
        sample.extend(
            [xlsx_value(v, k) for v, k in zip(row, kinds, strict=True)]
            for row in chunk[: WIDTH_SAMPLE_ROWS - len(sample)]
        )
        if len(sample) >= WIDTH_SAMPLE_ROWS:
            break
    widths = [max(MIN_COLUMN_WIDTH, len(column.name) + 2) for column in columns]
    for row in sample:
        for index, value in enumerate(row):
            if value is not None:
                widths[index] = max(widths[index], len(_shown(value)) + 2)
    for index, width in enumerate(widths, start=1):
        sheet.column_dimensions[get_column_letter(index)].width = min(width, MAX_COLUMN_WIDTH)
    sheet.freeze_panes = "A2"

    sheet.append([bold_cell(sheet, column.name) for column in columns])

    written = 0

    def append(chunk: Sequence[Sequence[Any]]) -> None:
        nonlocal written
        for row in chunk:
            sheet.append([xlsx_value(v, k) for v, k in zip(row, kinds, strict=True)])
        written += len(chunk)
        if progress is not None:
            progress(written)

    for chunk in pending:
        append(chunk)
    for chunk in chunk_iter:
        append(chunk)
    if columns:
        sheet.auto_filter.ref = f"A1:{get_column_letter(len(columns))}{written + 1}"

    notes = workbook.create_sheet("About")
    notes.append([bold_cell(notes, title) for title in ("column", "type", "unit", "description")])
    for column in columns:
        notes.append([column.name, column.kind, column.unit, column.description])
    notes.append([])
    for key, value in [*about, ("rows", written)]:
        notes.append([bold_cell(notes, key), xlsx_value(value)])
    notes.column_dimensions["A"].width = 28
    notes.column_dimensions["D"].width = 80
    workbook.save(target)
    return written


def infer_kinds(columns: Sequence[Column], rows: Iterable[Sequence[Any]]) -> list[Column]:
    """Columns of kind "any" get a kind from their values (numbers stay numbers)."""
    samples: list[set[str]] = [set() for _ in columns]
    for row in rows:
        for index, value in enumerate(row):
            if value is None:
                continue
            if isinstance(value, bool):
                samples[index].add("boolean")
            elif isinstance(value, int):
                samples[index].add("integer")
            elif isinstance(value, float):
                samples[index].add("number")
            elif isinstance(value, str):
                samples[index].add("string")
            else:
                samples[index].add("any")
    out = []
    for column, kinds in zip(columns, samples, strict=True):
        if column.kind != "any" or not kinds:
            out.append(column)
            continue
        if len(kinds) == 1:
            kind = next(iter(kinds))
        else:
            kind = "number" if kinds == {"integer", "number"} else "any"
        out.append(replace(column, kind=kind))
    return out


def iter_rows(chunks: Chunks) -> Iterator[Sequence[Any]]:
    for chunk in chunks:
        yield from chunk

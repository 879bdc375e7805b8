"""Spreadsheet exports of API lists: column selection, whole-table CSV streams, size limits.

Every view gets CSV and XLSX from the default renderers (`core.tabular.renderers`) and ``?fields=``
from :class:`FieldSelectionFilter`; a list viewset adds :class:`TabularListMixin` so a whole
table (no ``page``) streams as CSV in chunks — straight from ``values_list`` when its
serializer is plain model columns — and an XLSX above ``EXPORT_XLSX_MAX_ROWS`` is refused
with a pointer to the background export jobs. :class:`RowsView` is the base of the list
endpoints whose rows are computed (reports, analysis factor rows).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from django.conf import settings
from django.core.exceptions import EmptyResultSet, FieldDoesNotExist
from django.db import connection, models
from django.db.models import Count, F, Func, Max, TextField
from django.db.models.functions import Cast
from django.http import StreamingHttpResponse
from django.utils import timezone
from django.utils.cache import get_conditional_response
from django.utils.http import http_date, quote_etag
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.relations import PrimaryKeyRelatedField
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.settings import api_settings

from core.tabular.cellsafety import FORMULA_PREFIXES, NUMBER_TEXT, safe_csv_writer
from core.tabular.columns import (
    ROWS_HEADER,
    Column,
    dict_chunks,
    export_format,
    flatten,
    iter_csv,
    select_columns,
    serializer_columns,
    table_columns,
    view_filename,
    wants_whole_table,
)
from core.tabular.filters import check_fields
from engine.text import INVISIBLE

CHUNK_ROWS = 5000
COPY_CHUNK_BYTES = 256 * 1024  # PostgreSQL sends one message per row: send the client blocks


# -- values_list fast path --------------------------------------------------------------------

# Serializer fields whose output equals the database value (to_representation is a cast).
_PLAIN_FIELDS = (
    serializers.CharField,
    serializers.IntegerField,
    serializers.FloatField,
    serializers.BooleanField,
    serializers.DateTimeField,
    serializers.ChoiceField,
)


def _orm_path(model: type[models.Model], source: str) -> str | None:
    """``cluster.name`` → ``cluster__name`` when every step is a concrete field."""
    parts = source.split(".")
    current = model
    for index, part in enumerate(parts):
        try:
            field = current._meta.get_field(part)
        except FieldDoesNotExist:
            return None
        if not getattr(field, "concrete", False):
            return None
        if index < len(parts) - 1:
            if not field.is_relation or field.many_to_many:
                return None
            current = field.related_model
        elif field.many_to_many:
            return None
    return "__".join(parts)


def values_plan(serializer: serializers.BaseSerializer) -> list[tuple[str, str]] | None:
    """(column, ORM path) per field when every field reads one plain column; else None."""
    if not isinstance(serializer, serializers.ModelSerializer):
        return None
    model = serializer.Meta.model
    plan = []
    for name, field in serializer.fields.items():
        if field.write_only:
            continue
        if isinstance(field, PrimaryKeyRelatedField):
            plain = (
                type(field).to_representation is PrimaryKeyRelatedField.to_representation
                and field.pk_field is None
            )
        elif isinstance(field, serializers.BigIntegerField):
            plain = not getattr(field, "coerce_to_string", api_settings.COERCE_BIGINT_TO_STRING)
        else:
            # A subclass that keeps its base's to_representation writes the value as it is.
            plain = any(
                isinstance(field, base) and type(field).to_representation is base.to_representation
                for base in _PLAIN_FIELDS
            )
        if not plain or field.source == "*":
            return None
        if isinstance(field, serializers.DateTimeField) and getattr(field, "format", None):
            return None  # a custom output format: let the serializer write it
        path = _orm_path(model, field.source)
        if path is None:
            return None
        plan.append((name, path))
    return plan


class TabularListMixin:
    """``list()`` that streams a whole-table CSV and sends big XLSX to a background job.

    ``export_version_fields``: columns whose maximum changes when rows change (default: the
    model's auto_now times); with the row count and largest id they make the ETag of a
    streamed CSV, so a refreshing spreadsheet gets 304 Not Modified.
    """

    export_version_fields: Sequence[str] | None = None
    export_chunk_rows = CHUNK_ROWS

    def get_export_columns(self) -> list[Column]:
        return serializer_columns(self.get_serializer())

    def list(self, request, *args, **kwargs):
        if not wants_whole_table(request):
            return super().list(request, *args, **kwargs)
        queryset = self.filter_queryset(self.get_queryset())
        fmt = export_format(request)
        if fmt == "xlsx":
            limit = settings.EXPORT_XLSX_MAX_ROWS
            count = queryset.count()
            if count > limit:
                return too_large_for_xlsx(request, count, limit)
            response = super().list(request, *args, **kwargs)
            response[ROWS_HEADER] = str(count)
            return response
        version = self.export_version(queryset)
        etag, last_modified = version["etag"], version["last_modified"]
        not_modified = get_conditional_response(
            request, etag=etag, last_modified=last_modified and last_modified.timestamp()
        )
        if not_modified is not None:
            return not_modified
        response = StreamingHttpResponse(
            self.export_csv(queryset), content_type="text/csv; charset=utf-8"
        )
        response["Content-Disposition"] = f'attachment; filename="{view_filename(self)}.csv"'
        response[ROWS_HEADER] = str(version["count"])
        response["ETag"] = etag
        if last_modified is not None:
            response["Last-Modified"] = http_date(last_modified.timestamp())
        return response

    def _version_fields(self, model) -> list[str]:
        if self.export_version_fields is not None:
            return list(self.export_version_fields)
        return [
            field.name
            for field in model._meta.concrete_fields
            if isinstance(field, models.DateTimeField) and field.auto_now
        ]

    def export_version(self, queryset) -> dict[str, Any]:
        """Row count, largest id and version columns of the filtered rows, in one query."""
        names = self._version_fields(queryset.model)
        aggregates = {"n": Count("pk"), "top": Max("pk")}
        aggregates.update({f"v{index}": Max(name) for index, name in enumerate(names)})
        found = queryset.order_by().aggregate(**aggregates)
        times = [found[f"v{index}"] for index in range(len(names))]
        last_modified = max((t for t in times if hasattr(t, "timestamp")), default=None)
        text = "|".join(
            [
                self.request.get_full_path(),
                str(getattr(self.request.user, "pk", "")),
                *(str(found[key]) for key in sorted(found)),
            ]
        )
        digest = hashlib.sha256(text.encode()).hexdigest()[:32]
        return {
            "count": found["n"],
            "etag": "W/" + quote_etag(digest),
            "last_modified": last_modified,
        }

    def _plain_columns(self, serializer, names) -> list[tuple[Column, str]] | None:
        """(column, ORM path) of each selected column when all are plain model columns."""
        plan = values_plan(serializer)
        if plan is None:
            return None
        spec = {column.name: column for column in serializer_columns(serializer)}
        path_of = dict(plan)
        columns = select_columns([spec[name] for name, _ in plan], names)
        return [(column, path_of[column.name]) for column in columns]

    def export_csv(self, queryset) -> Iterator[bytes]:
        """CSV bytes of the filtered queryset, ``?fields=`` applied.

        On PostgreSQL a table of plain columns is written by the database itself (``COPY``),
        each cell as :func:`core.tabular.columns.iter_csv` would write it; otherwise rows are read
        in chunks and converted in Python.
        """
        serializer = self.get_serializer()
        names = check_fields(self.request, serializer_columns(serializer))
        plain = self._plain_columns(serializer, names)
        if plain is not None and copy_csv_supported(plain):
            return copy_csv(queryset, plain)
        return iter_csv(*self.export_table(queryset))

    def export_table(self, queryset) -> tuple[list[Column], Iterator[list]]:
        """The columns and row chunks of the filtered queryset, with ``?fields=`` applied."""
        serializer = self.get_serializer()
        names = check_fields(self.request, serializer_columns(serializer))
        plain = self._plain_columns(serializer, names)
        if plain is not None:
            columns = [column for column, _ in plain]
            paths, texts, times = [], {}, text_time_reader()
            for index, (column, path) in enumerate(plain):
                if column.kind == "datetime" and times is not None:
                    # Times as text from the database: parsing and re-printing a datetime
                    # object per cell is most of the cost of a big export.
                    alias = f"_export_text_{index}"
                    texts[alias] = Cast(path, TextField())
                    path = alias
                paths.append(path)
            rows = (
                queryset.annotate(**texts).values_list(*paths)
                if texts
                else (queryset.values_list(*paths))
            )
            chunks = _chunked(rows.iterator(chunk_size=self.export_chunk_rows), self)
            if texts:
                indexes = [i for i, c in enumerate(columns) if c.kind == "datetime"]
                chunks = _convert_columns(chunks, indexes, times)
            return columns, chunks
        return self._serialized_table(queryset, serializer, names)

    def _serialized_table(self, queryset, serializer, names):
        spec = serializer_columns(serializer)
        context = self.get_serializer_context()
        serializer_class = type(serializer)
        objects = _chunked(queryset.iterator(chunk_size=self.export_chunk_rows // 5), self, 1000)

        def rows_of(chunk):
            return [
                flatten(row) for row in serializer_class(chunk, many=True, context=context).data
            ]

        first = rows_of(next(objects, []))
        columns = select_columns(table_columns(first, spec), names)

        def chunks():
            yield from dict_chunks(first, columns)
            for chunk in objects:
                yield from dict_chunks(rows_of(chunk), columns)

        return columns, chunks()


# -- PostgreSQL COPY fast path ------------------------------------------------------------------


def _sql_text(text: str) -> str:
    """A Python string as a PostgreSQL escape-string literal (E'...')."""
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    return "E'" + escaped.replace("\t", "\\t").replace("\r", "\\r") + "'"


# NUMBER_TEXT in SQL (both ASCII-only): a number written as text is never defused.
_SQL_NUMBER_TEXT = _sql_text("^" + NUMBER_TEXT.pattern.replace("(?:", "(") + "$")
_SQL_FORMULA_FIRST = ", ".join(_sql_text(prefix) for prefix in FORMULA_PREFIXES)
# engine.text.strip_invisible in SQL: translate() drops the characters it has no partner for.
_SQL_VISIBLE = f"translate(%(expressions)s, {_sql_text(INVISIBLE)}, '')"

# Each kind's cell in SQL: the same text `core.tabular.columns.iter_csv` writes (NULL: empty cell).
_COPY_CELL_TEMPLATES = {
    "integer": "%(expressions)s",
    "string": (
        f"CASE WHEN left({_SQL_VISIBLE}, 1) IN ({_SQL_FORMULA_FIRST})"
        f" AND {_SQL_VISIBLE} !~ {_SQL_NUMBER_TEXT}"
        f" THEN E'\\'' || {_SQL_VISIBLE} ELSE {_SQL_VISIBLE} END"
    ),
    # NaN and infinities have no JSON text: an empty cell, as in Python. Whole numbers get
    # Python's ".0" (7.0, not 7); PostgreSQL writes the exponent form from 1e15 (Python: 1e16).
    "number": (
        "CASE WHEN %(expressions)s IN ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)"
        " THEN NULL WHEN %(expressions)s = trunc(%(expressions)s)"
        " AND abs(%(expressions)s) < 1e15 THEN %(expressions)s::text || '.0'"
        " ELSE %(expressions)s::text END"
    ),
    "boolean": "CASE WHEN %(expressions)s THEN 'true' WHEN NOT %(expressions)s THEN 'false' END",
    # DRF's ISO 8601 in UTC: microseconds only when there are some, then "Z".
    "datetime": (
        "to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS')"
        " || CASE WHEN mod(extract(microseconds FROM %(expressions)s)::bigint, 1000000) = 0"
        " THEN '' ELSE to_char(%(expressions)s AT TIME ZONE 'UTC', '.US') END || 'Z'"
    ),
    "date": "to_char(%(expressions)s, 'YYYY-MM-DD')",
}


class _CopyCell(Func):
    """One column as the CSV text of its kind (see ``_COPY_CELL_TEMPLATES``)."""

    def __init__(self, path: str, kind: str):
        super().__init__(F(path), output_field=TextField())
        self.template = _COPY_CELL_TEMPLATES[kind]

    def as_sql(self, compiler, connection, **extra_context):
        sql, params = super().as_sql(compiler, connection, **extra_context)
        if params:  # the template repeats the column: it must be plain SQL without parameters
            raise ValueError("a COPY cell must be a plain column")
        return sql, params


def copy_csv_supported(plain: Sequence[tuple[Column, str]]) -> bool:
    """PostgreSQL, UTC output (DRF writes times in the current zone) and known column kinds."""
    return (
        connection.vendor == "postgresql"
        and timezone.get_current_timezone_name() == "UTC"
        and all(column.kind in _COPY_CELL_TEMPLATES for column, _ in plain)
    )


def copy_csv(queryset, plain: Sequence[tuple[Column, str]]) -> Iterator[bytes]:
    """The header line, then the rows as PostgreSQL's ``COPY ... TO STDOUT (FORMAT csv)``
    writes them, in blocks of about ``COPY_CHUNK_BYTES`` (memory flat, no Python per cell)."""
    cells = {
        f"copy_cell_{index}": _CopyCell(path, column.kind)
        for index, (column, path) in enumerate(plain)
    }
    header = io.StringIO()
    # "\n" as COPY ends its lines (the Python writer's "\r\n" would mix two in one file).
    safe_csv_writer(header, lineterminator="\n").writerow([column.name for column, _ in plain])
    try:
        sql, params = queryset.annotate(**cells).values_list(*cells).query.sql_with_params()
    except EmptyResultSet:  # e.g. a scope of no teams: `account__in=[]` compiles to no SQL
        return iter([header.getvalue().encode("utf-8")])

    def stream() -> Iterator[bytes]:
        yield header.getvalue().encode("utf-8")
        # Opened at the first block, not before: the connection is busy until the COPY ends.
        with connection.cursor() as cursor:
            # Shortest exact float text (the default), whatever the server's configuration.
            cursor.execute("SET extra_float_digits = 1")
            # COPY takes no bound parameters: merged client-side, as Django's own queries are.
            with psycopg.ClientCursor(connection.connection) as merger:
                select = merger.mogrify(sql, params)
            with cursor.cursor.copy(f"COPY ({select}) TO STDOUT WITH (FORMAT csv)") as copy:
                block = bytearray()
                for data in copy:
                    block += data
                    if len(block) >= COPY_CHUNK_BYTES:
                        yield bytes(block)
                        block.clear()
                if block:
                    yield bytes(block)

    return stream()


def text_time_reader():
    """Text of a time column (``CAST AS TEXT``) → DRF's ISO 8601 with ``Z``, or None when the
    database's text is not UTC in a known layout (then datetime objects are printed)."""
    if timezone.get_current_timezone_name() != "UTC":
        return None
    if connection.vendor == "postgresql":
        return _postgres_utc_text
    if connection.vendor == "sqlite":
        return _sqlite_utc_text
    return None


def _postgres_utc_text(text: str | None) -> str | None:
    # "2024-03-01 10:00:00.5+00" (session time zone UTC) → "2024-03-01T10:00:00.500000Z"
    if text is None:
        return None
    head = text[:-3]
    if len(head) > 19:
        head = head.ljust(26, "0")
    return f"{head[:10]}T{head[11:]}Z"


def _sqlite_utc_text(text: str | None) -> str | None:
    # Django stores UTC as "2024-03-01 10:00:00[.500000]" in SQLite.
    return None if text is None else f"{text[:10]}T{text[11:]}Z"


def _convert_columns(chunks, indexes: list[int], convert) -> Iterator[list]:
    for chunk in chunks:
        columns = list(zip(*chunk, strict=True))
        for index in indexes:
            columns[index] = [convert(value) for value in columns[index]]
        yield list(zip(*columns, strict=True))


def _chunked(iterable, view, size: int | None = None) -> Iterator[list]:
    size = size or view.export_chunk_rows
    chunk = []
    for item in iterable:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def too_large_for_xlsx(request, count: int, limit: int) -> Response:
    """413 in JSON (not a spreadsheet): the client should start a background export job."""
    request.accepted_renderer = JSONRenderer()
    request.accepted_media_type = JSONRenderer.media_type
    return Response(
        {
            "detail": f"{count:,} rows are more than {limit:,} for a direct XLSX download. "
            "POST this URL to /api/v1/export-jobs/ to build the file in the background, "
            "or use format=csv (streamed, no limit).",
            "rows": count,
            "max_rows": limit,
            "jobs_url": request.build_absolute_uri("/api/v1/export-jobs/"),
        },
        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )


class RowsView(GenericAPIView):
    """A GET list of computed rows (one serializer per row); JSON, CSV and XLSX alike.

    Subclasses set ``serializer_class`` (one row) and implement :meth:`get_rows`.
    """

    pagination_class = None
    filter_backends: list = []

    def get_rows(self, request, *args, **kwargs) -> list[dict]:
        raise NotImplementedError

    def get_export_columns(self) -> list[Column]:
        return serializer_columns(self.get_serializer())

    def get(self, request, *args, **kwargs):
        check_fields(request, self.get_export_columns())
        rows = self.get_rows(request, *args, **kwargs)
        data = self.get_serializer(rows, many=True).data
        response = Response(data)
        response[ROWS_HEADER] = str(len(data))
        return response

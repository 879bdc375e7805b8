"""Bulk import of inventory objects from CSV, XLSX or pasted rows (HackSoft-style services).

Two steps, both driven from a `ParsedTable` (the file's cells as text):

- `preview_import(kind, table)` converts and validates every row and saves nothing: types are
  converted with pandas column by column, parents, catalog names and existing objects are looked
  up in one query per level, then each row goes through the model's `full_clean()`;
- `commit_import(kind, table)` repeats the validation inside one transaction and saves every
  row, or raises `ImportRejected` and saves nothing.

Rows are matched on natural keys (site name; site + cluster; site + cluster + pool; that pool
path + node group name; accelerator catalog name), so importing the same file twice updates
instead of duplicating. Row numbers count the header as row 1, as a spreadsheet does.

In a column that is present, an empty cell means "no value" (null, empty text or the model
default); a column left out of the file leaves that field of existing objects unchanged.
"""

from __future__ import annotations

import csv
import io
import json
import math
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import IntegrityError, models, transaction

from accounting.parsing.archive import UnsafeArchive, check_xlsx_archive
from inventory.forms import FIELD_LABELS
from inventory.import_readers import check_text, check_text_shape, read_first_sheet
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

MAX_ROWS = 5000
MAX_UPLOAD_BYTES = 5 * 1024 * 1024
# What an XLSX may inflate to (5000 rows are a few MB of XML); more is refused unopened.
MAX_XLSX_INFLATED_BYTES = 100 * 1024 * 1024
FIRST_DATA_ROW = 2  # the header is spreadsheet row 1

NUL_MESSAGE = "contains a NUL character, which cannot be stored."
EARLIEST_DATE, LATEST_DATE = pd.Timestamp("1900-01-01"), pd.Timestamp("2200-01-01")

CREATE, UPDATE, UNCHANGED = "create", "update", "unchanged"
TRUE_WORDS = {"true", "yes", "y", "1", "x"}
FALSE_WORDS = {"false", "no", "n", "0"}


class ImportFileError(ValueError):
    """The file as a whole cannot be used (unreadable, unknown or missing columns, too big)."""


@dataclass(frozen=True)
class ImportKind:
    """One importable object type: its columns and how rows map onto model instances."""

    slug: str
    label: str
    model: type[models.Model]
    columns: tuple[str, ...]
    # Natural-key columns naming the parent object, outermost first, e.g. ("site", "cluster").
    parent_columns: tuple[str, ...] = ()
    example: dict[str, str] = field(default_factory=dict)

    @property
    def parent_field(self) -> str | None:
        return self.parent_columns[-1] if self.parent_columns else None

    @property
    def key_columns(self) -> tuple[str, ...]:
        return (*self.parent_columns, "name")

    @property
    def value_fields(self) -> tuple[str, ...]:
        return tuple(c for c in self.columns if c not in self.key_columns)

    def model_field(self, column: str) -> models.Field:
        return self.model._meta.get_field(column)

    @property
    def required_columns(self) -> tuple[str, ...]:
        """Key columns plus fields that accept no empty value and have no default."""
        required = [
            name
            for name in self.value_fields
            if not (
                self.model_field(name).has_default()
                or self.model_field(name).null
                or self.model_field(name).blank
            )
        ]
        return (*self.key_columns, *required)


KINDS: dict[str, ImportKind] = {
    kind.slug: kind
    for kind in [
        ImportKind(
            slug="sites",
            label="Sites",
            model=Site,
            columns=Site.EDITABLE_FIELDS,
            example={
                "name": "Oslo DC3",
                "location": "Oslo, NO",
                "cooling_type": "direct_liquid",
                "pue": "1.15",
                "tariff_per_kwh": "0.07",
                "currency": "EUR",
                "grid_carbon_g_per_kwh": "30",
                "metered_period_start": "2026-01-01",
                "assumptions": '{"mtbf_card_h": 30000}',
            },
        ),
        ImportKind(
            slug="clusters",
            label="Clusters",
            model=Cluster,
            parent_columns=("site",),
            columns=Cluster.EDITABLE_FIELDS,
            example={
                "site": "Oslo DC3",
                "name": "train-1",
                "fabric": "infiniband",
                "inter_node_bandwidth_gbps_per_card": "400",
                "commissioned_on": "2025-06-01",
                "capital_cost_per_card": "35000",
                "amortization_years": "5",
            },
        ),
        ImportKind(
            slug="pools",
            label="Pools",
            model=Pool,
            parent_columns=("site", "cluster"),
            columns=("site", "cluster", "name", "purpose", "planned_utilization", "assumptions")
            + ("notes",),
            example={
                "site": "Oslo DC3",
                "cluster": "train-1",
                "name": "h100-training",
                "purpose": "training",
                "planned_utilization": "0.7",
            },
        ),
        ImportKind(
            slug="node-groups",
            label="Node groups",
            model=NodeGroup,
            parent_columns=("site", "cluster", "pool"),
            columns=(
                "site",
                "cluster",
                "pool",
                "name",
                "accelerator",
                "node_count",
                "cards_per_node",
                "mfu",
            ),
            example={
                "site": "Oslo DC3",
                "cluster": "train-1",
                "pool": "h100-training",
                "name": "h100-nodes",
                "accelerator": "H100 SXM5 80GB",
                "node_count": "64",
                "cards_per_node": "8",
            },
        ),
        ImportKind(
            slug="accelerators",
            label="Card catalog (accelerator models)",
            model=AcceleratorModel,
            columns=AcceleratorModel.EDITABLE_FIELDS,
            example={
                "vendor": "Example Corp",
                "name": "XPU-1 96GB",
                "dense_bf16_tflops": "800",
                "memory_gb": "96",
                "memory_bandwidth_tbs": "3.2",
                "tdp_w": "700",
                "confidence": "user",
            },
        ),
    ]
}


def get_kind(slug: str) -> ImportKind:
    try:
        return KINDS[slug]
    except KeyError:
        raise ImportFileError(f"Unknown import type {slug!r}.") from None


# --- Reading files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedTable:
    """The cells of an uploaded table as stripped text, indexed by spreadsheet row number."""

    frame: pd.DataFrame

    def to_payload(self) -> dict[str, list]:
        """A JSON-serialisable form (for the session between preview and commit)."""
        return {
            "columns": list(self.frame.columns),
            "rows": [int(i) for i in self.frame.index],
            "cells": self.frame.to_numpy().tolist(),
        }

    @classmethod
    def from_payload(cls, payload: dict[str, list]) -> ParsedTable:
        frame = pd.DataFrame(payload["cells"], columns=payload["columns"], index=payload["rows"])
        return cls(_as_text(frame))

    def __len__(self) -> int:
        return len(self.frame)


def _normalise_header(name: object) -> str:
    return str(name).strip().lower().replace(" ", "_").replace("-", "_")


def _as_text(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.fillna("").astype(str).apply(lambda column: column.str.strip())


def _table_from_frame(raw: pd.DataFrame) -> ParsedTable:
    """Normalise headers, drop blank rows and number rows as a spreadsheet does."""
    raw = raw.copy()
    raw.columns = [_normalise_header(name) for name in raw.columns]
    raw.index = range(FIRST_DATA_ROW, FIRST_DATA_ROW + len(raw))
    frame = _as_text(raw)
    unnamed = [c for c in frame.columns if c.startswith("unnamed:") or c == ""]
    # A trailing delimiter makes an empty, headerless column: drop it, but not one with data.
    for column in unnamed:
        if (frame[column] == "").all():
            frame = frame.drop(columns=column)
        else:
            position = list(raw.columns).index(column) + 1
            raise ImportFileError(f"Column {position} has values but no header.")
    duplicated = sorted({c for c in frame.columns if list(frame.columns).count(c) > 1})
    if duplicated:
        raise ImportFileError(f"These columns appear more than once: {', '.join(duplicated)}.")
    frame = frame[(frame != "").any(axis=1)]
    if frame.empty:
        raise ImportFileError("The table has a header but no rows.")
    if len(frame) > MAX_ROWS:
        raise ImportFileError(f"At most {MAX_ROWS} rows per import; this table has {len(frame)}.")
    return ParsedTable(frame)


def _delimiter_of(text: str) -> str:
    header = text.lstrip("\ufeff").splitlines()[0] if text.strip() else ""
    return max(["\t", ";", ","], key=header.count) if header else ","


def parse_text(text: str) -> ParsedTable:
    """Rows pasted from a spreadsheet (tab-separated) or written as CSV, header first."""
    if not text.strip():
        raise ImportFileError("Paste a header row and at least one row.")
    try:
        check_text_shape(text.strip("\n"), _delimiter_of(text))
        raw = pd.read_csv(
            io.StringIO(text.strip("\n")),
            sep=_delimiter_of(text),
            dtype=str,
            keep_default_na=False,
            skipinitialspace=True,
            skip_blank_lines=False,  # keep row numbers equal to the file's lines
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error, ValueError) as exc:
        raise ImportFileError(f"Could not read the rows: {exc}") from exc
    return _table_from_frame(raw)


def _decode(content: bytes) -> str:
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Excel on Windows saves CSV in the ANSI code page.
        return content.decode("cp1252", errors="replace")


def parse_upload(uploaded) -> ParsedTable:
    """A CSV (or TSV/TXT) or XLSX upload (first sheet) as a table."""
    if uploaded.size > MAX_UPLOAD_BYTES:
        raise ImportFileError(f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB.")
    name = (uploaded.name or "").lower()
    content = uploaded.read()
    if name.endswith((".xlsx", ".xlsm")):
        try:
            check_xlsx_archive(io.BytesIO(content), max_uncompressed_bytes=MAX_XLSX_INFLATED_BYTES)
        except UnsafeArchive as exc:
            raise ImportFileError(f"Could not read the XLSX file: {exc}.") from exc
        try:
            raw = read_first_sheet(content)  # streamed; the sheet's size checked first
        except (zipfile.BadZipFile, ValueError, KeyError, OSError, SyntaxError, TypeError) as exc:
            # SyntaxError: ElementTree's ParseError for broken XML inside the archive.
            raise ImportFileError(f"Could not read the XLSX file: {exc}") from exc
        return _table_from_frame(raw)
    if name.endswith((".csv", ".tsv", ".txt")):
        try:
            check_text(content)
        except ValueError as exc:
            raise ImportFileError(str(exc)) from exc
        return parse_text(_decode(content))
    raise ImportFileError("Upload a .csv or .xlsx file.")


# --- Validating rows ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RowError:
    row: int
    column: str
    message: str

    def __str__(self) -> str:
        return f"row {self.row}, column {self.column}: {self.message}"


@dataclass
class ImportRow:
    number: int
    cells: dict[str, str]
    action: str = CREATE
    errors: list[RowError] = field(default_factory=list)
    instance: models.Model | None = None

    @property
    def error_columns(self) -> set[str]:
        return {error.column for error in self.errors}


@dataclass
class ImportPreview:
    kind: ImportKind
    columns: list[str]
    rows: list[ImportRow]

    @property
    def errors(self) -> list[RowError]:
        return [error for row in self.rows for error in row.errors]

    @property
    def is_valid(self) -> bool:
        return not any(row.errors for row in self.rows)

    def count(self, action: str) -> int:
        return sum(1 for row in self.rows if row.action == action and not row.errors)


@dataclass(frozen=True)
class ImportResult:
    created: int
    updated: int
    unchanged: int


class ImportRejected(Exception):
    """The commit saved nothing; `preview` says why (row errors) or `message` does."""

    def __init__(self, preview: ImportPreview | None = None, message: str = ""):
        self.preview = preview
        self.message = message or (
            f"{len(preview.errors)} problem(s) found; nothing was saved." if preview else ""
        )
        super().__init__(self.message)


_BLANK = object()  # a present but empty cell


def _numbers(raw: pd.Series, whole: bool) -> tuple[pd.Series, pd.Series]:
    blank = raw == ""
    numbers = pd.to_numeric(raw.where(~blank), errors="coerce").astype(float)
    finite = numbers.notna() & numbers.abs().lt(math.inf)
    errors = pd.Series("", index=raw.index, dtype=object)
    errors[~blank & ~finite] = "'" + raw[~blank & ~finite] + "' is not a number."
    if whole:
        fractional = ~blank & finite & (numbers % 1 != 0)
        errors[fractional] = "'" + raw[fractional] + "' is not a whole number."
        values = numbers.where(finite & ~fractional).astype(object)
        values = values.map(lambda v: int(v) if isinstance(v, float) and not math.isnan(v) else v)
    else:
        values = numbers.astype(object)
    return values.where(~blank, _BLANK), errors


def _choices(raw: pd.Series, model_field: models.Field) -> tuple[pd.Series, pd.Series]:
    lookup = {}
    for value, label in model_field.choices:
        lookup[str(value).lower()] = value
        lookup[str(label).lower()] = value
    values = raw.str.lower().map(lookup)
    bad = (raw != "") & values.isna()
    allowed = ", ".join(str(value) for value, _ in model_field.choices)
    errors = pd.Series("", index=raw.index, dtype=object)
    errors[bad] = "'" + raw[bad] + f"' is not one of: {allowed}."
    return values.astype(object).where(raw != "", _BLANK), errors


def _booleans(raw: pd.Series) -> tuple[pd.Series, pd.Series]:
    lowered = raw.str.lower()
    values = lowered.map(lambda v: True if v in TRUE_WORDS else False if v in FALSE_WORDS else None)
    bad = (raw != "") & values.isna()
    errors = pd.Series("", index=raw.index, dtype=object)
    errors[bad] = "'" + raw[bad] + "' is not yes/no (use true or false)."
    return values.astype(object).where(raw != "", _BLANK), errors


def _dates(raw: pd.Series) -> tuple[pd.Series, pd.Series]:
    blank = raw == ""
    parsed = pd.to_datetime(raw.where(~blank), format="ISO8601", errors="coerce")
    # Years such as -1 or 0 parse, but no Python date can hold them; none is a real date here.
    parsed = parsed.where((parsed >= EARLIEST_DATE) & (parsed < LATEST_DATE))
    bad = ~blank & parsed.isna()
    errors = pd.Series("", index=raw.index, dtype=object)
    errors[bad] = "'" + raw[bad] + "' is not a date (use YYYY-MM-DD)."
    values = parsed.map(lambda v: v.date() if not pd.isna(v) else None).astype(object)
    return values.where(~blank, _BLANK), errors


def _json_objects(raw: pd.Series) -> tuple[pd.Series, pd.Series]:
    values = pd.Series(_BLANK, index=raw.index, dtype=object)
    errors = pd.Series("", index=raw.index, dtype=object)
    for number, text in raw[raw != ""].items():
        try:
            values[number] = json.loads(text)
        except json.JSONDecodeError as exc:
            errors[number] = f'not valid JSON ({exc.msg}); write e.g. {{"mtbf_card_h": 30000}}.'
    return values, errors


def _accelerators(raw: pd.Series) -> tuple[pd.Series, pd.Series]:
    catalog = list(AcceleratorModel.objects.all())
    exact = {a.name: a for a in catalog}
    folded = {a.name.casefold(): a for a in catalog}
    values = raw.map(lambda name: exact.get(name) or folded.get(name.casefold()))
    bad = (raw != "") & values.isna()
    errors = pd.Series("", index=raw.index, dtype=object)
    errors[bad] = "no accelerator named '" + raw[bad] + "' in the card catalog."
    return values.astype(object).where(raw != "", _BLANK), errors


def _convert(kind: ImportKind, column: str, raw: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Typed values (or `_BLANK`) and an error message per cell ("" when fine), vectorised."""
    model_field = kind.model_field(column)
    if isinstance(model_field, models.ForeignKey):
        return _accelerators(raw)
    if model_field.choices:
        return _choices(raw, model_field)
    if isinstance(model_field, models.BooleanField):
        return _booleans(raw)
    if isinstance(model_field, models.IntegerField):
        return _numbers(raw, whole=True)
    if isinstance(model_field, models.FloatField):
        return _numbers(raw, whole=False)
    if isinstance(model_field, models.DateField):
        return _dates(raw)
    if isinstance(model_field, models.JSONField):
        return _json_objects(raw)
    return raw.astype(object).where(raw != "", _BLANK), pd.Series("", index=raw.index)


def _blank_value(model_field: models.Field) -> Any:
    if model_field.null:
        return None
    if model_field.has_default():
        return model_field.get_default()
    if isinstance(model_field, (models.CharField, models.TextField)) and model_field.blank:
        return ""
    return _BLANK


def check_columns(kind: ImportKind, table: ParsedTable) -> None:
    columns = list(table.frame.columns)
    unknown = [c for c in columns if c not in kind.columns]
    if unknown:
        raise ImportFileError(
            f"Unknown column(s): {', '.join(unknown)}. "
            f"{kind.label} take: {', '.join(kind.columns)}."
        )
    missing = [c for c in kind.required_columns if c not in columns]
    if missing:
        raise ImportFileError(f"Missing required column(s): {', '.join(missing)}.")


def _storable(column: pd.Series) -> list[str]:
    """Distinct values a query may contain (PostgreSQL refuses NUL even in a lookup)."""
    return [value for value in column.unique().tolist() if "\x00" not in value]


def _parents(kind: ImportKind, frame: pd.DataFrame) -> dict[tuple[str, ...], models.Model]:
    """Existing parents keyed by their natural-key path, in one query per level."""
    names = {column: _storable(frame[column]) for column in kind.parent_columns}
    found: dict[tuple[str, ...], models.Model] = {}
    if "site" in names:
        for site in Site.objects.filter(name__in=names["site"]):
            found[(site.name,)] = site
    if "cluster" in names:
        clusters = Cluster.objects.select_related("site").filter(
            site__name__in=names["site"], name__in=names["cluster"]
        )
        for cluster in clusters:
            found[(cluster.site.name, cluster.name)] = cluster
    if "pool" in names:
        pools = Pool.objects.select_related("cluster__site").filter(
            cluster__site__name__in=names["site"],
            cluster__name__in=names["cluster"],
            name__in=names["pool"],
        )
        for pool in pools:
            found[(pool.cluster.site.name, pool.cluster.name, pool.name)] = pool
    return found


def _existing(kind: ImportKind, frame: pd.DataFrame, parents: dict) -> dict[tuple, models.Model]:
    """Objects already saved, keyed by (parent pk or None, name)."""
    queryset = kind.model.objects.filter(name__in=_storable(frame["name"]))
    if kind.parent_field:
        wanted = [p for key, p in parents.items() if len(key) == len(kind.parent_columns)]
        queryset = queryset.filter(**{f"{kind.parent_field}__in": wanted})
        return {(getattr(o, f"{kind.parent_field}_id"), o.name): o for o in queryset}
    return {(None, o.name): o for o in queryset}


def _missing_parent(kind: ImportKind, path: tuple[str, ...], parents: dict) -> RowError | None:
    for depth, column in enumerate(kind.parent_columns, start=1):
        if path[:depth] not in parents:
            where = " / ".join(path[: depth - 1])
            scope = f" in {where}" if where else ""
            message = f"no {column} named '{path[depth - 1]}'{scope}; add it first."
            return RowError(0, column, message)
    return None


def _key_errors(
    kind: ImportKind, row: ImportRow, key: tuple, first_row_of_key: dict, parents: dict
) -> list[RowError]:
    """Blank key cells, a key repeated within the file, or a parent that does not exist."""
    blank = [c for c in kind.key_columns if not row.cells[c]]
    if blank:
        return [RowError(row.number, column, "a value is required.") for column in blank]
    if key in first_row_of_key:
        message = f"the same {' / '.join(kind.key_columns)} is already in row "
        return [RowError(row.number, "name", message + f"{first_row_of_key[key]}.")]
    first_row_of_key[key] = row.number
    if kind.parent_columns and (missing := _missing_parent(kind, key[:-1], parents)):
        return [RowError(row.number, missing.column, missing.message)]
    return []


def _field_values(instance: models.Model, names: Iterable[str]) -> dict[str, Any]:
    return {name: getattr(instance, name) for name in names}


def _messages_of(exc: ValidationError) -> dict[str, list[str]]:
    if hasattr(exc, "error_dict"):
        return exc.message_dict
    return {NON_FIELD_ERRORS: exc.messages}


def preview_import(kind: ImportKind | str, table: ParsedTable) -> ImportPreview:
    """Convert and validate every row; nothing is saved. Raises ImportFileError for the file."""
    kind = get_kind(kind) if isinstance(kind, str) else kind
    check_columns(kind, table)
    frame = table.frame
    present = [c for c in kind.value_fields if c in frame.columns]
    converted = {column: _convert(kind, column, frame[column]) for column in present}
    parents = _parents(kind, frame) if kind.parent_columns else {}
    existing = _existing(kind, frame, parents)
    keys = frame[list(kind.key_columns)].apply(tuple, axis=1)
    first_row_of_key: dict[tuple, int] = {}
    bulk_checked = [
        name
        for name in (kind.parent_field, *present)
        if name and isinstance(kind.model_field(name), models.ForeignKey)
    ]

    rows = []
    for number, cells in zip(frame.index, frame.to_dict("records"), strict=True):
        row = ImportRow(number=int(number), cells=cells)
        rows.append(row)
        key = keys[number]
        row.errors.extend(_key_errors(kind, row, key, first_row_of_key, parents))
        # No database text can hold NUL (PostgreSQL refuses it); say so instead of failing.
        with_nul = [column for column, text in cells.items() if "\x00" in text]
        row.errors.extend(RowError(row.number, c, NUL_MESSAGE) for c in with_nul)
        parent = parents.get(key[:-1]) if kind.parent_columns else None
        instance = existing.get((parent.pk if parent else None, cells["name"]))
        if instance is None:
            instance = kind.model(name=cells["name"])
            if parent is not None:
                setattr(instance, kind.parent_field, parent)
        else:
            row.action = UPDATE
        before = _field_values(instance, present) if row.action == UPDATE else {}
        skip_validation = []
        for column in present:
            value, error = converted[column][0][number], converted[column][1][number]
            if column in with_nul:
                skip_validation.append(column)
                continue
            if value is _BLANK and not error:
                value = _blank_value(kind.model_field(column))
                error = "a value is required." if value is _BLANK else ""
            if error:
                row.errors.append(RowError(row.number, column, error))
                skip_validation.append(column)
            else:
                setattr(instance, column, value)
        if any(error.column in kind.key_columns for error in row.errors):
            continue  # without a usable key the model checks would only repeat those errors
        try:
            # Foreign keys were looked up and natural keys de-duplicated in bulk above, so the
            # per-row existence and uniqueness queries would only repeat them (the database
            # constraints still guard the commit).
            instance.full_clean(
                exclude=[*skip_validation, *bulk_checked],
                validate_unique=False,
                validate_constraints=False,
            )
        except ValidationError as exc:
            for field_name, messages in _messages_of(exc).items():
                column = "name" if field_name == NON_FIELD_ERRORS else field_name
                row.errors.extend(RowError(row.number, column, m) for m in messages)
        if row.action == UPDATE and _field_values(instance, present) == before:
            row.action = UNCHANGED
        row.instance = instance
    return ImportPreview(kind=kind, columns=list(frame.columns), rows=rows)


def commit_import(kind: ImportKind | str, table: ParsedTable) -> ImportResult:
    """Validate again and save every row in one transaction, or save nothing.

    Raises ImportRejected when any row is invalid (or the database refuses a row), and
    ImportFileError when the table itself is unusable.
    """
    try:
        with transaction.atomic():
            preview = preview_import(kind, table)
            if not preview.is_valid:
                raise ImportRejected(preview)
            for row in preview.rows:
                if row.action in (CREATE, UPDATE):
                    row.instance.save()
    except IntegrityError as exc:
        # Someone saved a clashing object between validation and save.
        message = f"The database refused a row ({exc}); nothing was saved."
        raise ImportRejected(message=message) from exc
    return ImportResult(
        created=preview.count(CREATE),
        updated=preview.count(UPDATE),
        unchanged=preview.count(UNCHANGED),
    )


# --- Templates and column help ------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnHelp:
    name: str
    required: bool
    meaning: str
    example: str


def _meaning(kind: ImportKind, column: str) -> str:
    if column in kind.parent_columns:
        return f"Name of the existing {column} this row belongs to."
    model_field = kind.model_field(column)
    if isinstance(model_field, models.ForeignKey):
        return "Catalog name of the accelerator model, e.g. H100 SXM5 80GB."
    if column == "name":
        if not kind.parent_columns:
            return "Name; it identifies the row, so importing it again updates that object."
        key = " + ".join(kind.parent_columns)
        return f"Name; with {key} it identifies the row, so importing it again updates it."
    label = FIELD_LABELS.get(column, str(model_field.verbose_name))
    parts = [label[:1].upper() + label[1:] + "."]
    if model_field.choices:
        parts.append("One of: " + ", ".join(str(v) for v, _ in model_field.choices) + ".")
    elif isinstance(model_field, models.BooleanField):
        parts.append("true or false.")
    elif isinstance(model_field, models.DateField):
        parts.append("Date as YYYY-MM-DD.")
    elif isinstance(model_field, models.JSONField):
        parts.append("A JSON object.")
    if model_field.help_text:
        parts.append(str(model_field.help_text))
    return " ".join(parts)


def column_help(kind: ImportKind | str) -> list[ColumnHelp]:
    kind = get_kind(kind) if isinstance(kind, str) else kind
    return [
        ColumnHelp(
            name=column,
            required=column in kind.required_columns,
            meaning=_meaning(kind, column),
            example=kind.example.get(column, ""),
        )
        for column in kind.columns
    ]


def template_csv(kind: ImportKind | str) -> bytes:
    """The header row, as UTF-8 CSV."""
    kind = get_kind(kind) if isinstance(kind, str) else kind
    from config.cellsafety import safe_csv_writer

    buffer = io.StringIO()
    safe_csv_writer(buffer, lineterminator="\r\n").writerow(kind.columns)
    return buffer.getvalue().encode("utf-8")


def template_xlsx(kind: ImportKind | str) -> bytes:
    """A workbook: the header row on the first sheet, what each column means on the second."""
    from openpyxl.styles import Font

    from config.cellsafety import SafeWorkbook

    kind = get_kind(kind) if isinstance(kind, str) else kind
    workbook = SafeWorkbook()
    sheet = workbook.active
    sheet.title = kind.slug
    sheet.append(list(kind.columns))
    for cell in sheet[1]:
        cell.font = Font(bold=True)
        sheet.column_dimensions[cell.column_letter].width = max(14, len(str(cell.value)) + 4)
    sheet.freeze_panes = "A2"
    help_sheet = workbook.create_sheet("columns")
    help_sheet.append(["column", "required", "meaning", "example"])
    for entry in column_help(kind):
        required = "yes" if entry.required else ""
        help_sheet.append([entry.name, required, entry.meaning, entry.example])
    for cell in help_sheet[1]:
        cell.font = Font(bold=True)
    help_sheet.column_dimensions["A"].width = 34
    help_sheet.column_dimensions["C"].width = 90
    help_sheet.column_dimensions["D"].width = 30
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()

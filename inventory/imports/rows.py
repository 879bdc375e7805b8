"""Validating rows (preview, saves nothing) and saving them in one transaction (commit)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import IntegrityError, models, transaction

from core.parsers import load_bounded_json
from engine.text import name_error
from inventory.imports.kinds import (
    CREATE,
    EARLIEST_DATE,
    FALSE_WORDS,
    LATEST_DATE,
    NUL_MESSAGE,
    TRUE_WORDS,
    UNCHANGED,
    UNKNOWN_WORD,
    UPDATE,
    ImportFileError,
    ImportKind,
    get_kind,
)
from inventory.imports.reading import ParsedTable
from inventory.models import AcceleratorModel, Cluster, Pool, Site

# Columns that hold a name: the forms' rule (engine.text) applies to them on import too.
NAME_COLUMNS = ("name", "location", "vendor")


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
            values[number] = load_bounded_json(text)  # the API's bounds: depth, finite numbers
        except ValueError as exc:
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            errors[number] = f'not valid JSON ({why}); write e.g. {{"mtbf_card_hours": 30000}}.'
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
    if column in kind.unknown_allowed:
        raw = raw.mask(raw.str.strip().str.casefold() == UNKNOWN_WORD, "0")
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


def _required_message(kind: ImportKind, column: str) -> str:
    fix = kind.stated.get(column)
    return f"a value is required: {fix}" if fix else "a value is required."


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
    """Blank key cells, a name no form would take, a key repeated within the file, or a parent
    that does not exist."""
    blank = [c for c in kind.key_columns if not row.cells[c]]
    if blank:
        return [RowError(row.number, column, "a value is required.") for column in blank]
    # A NUL has its own message (NUL_MESSAGE, below): this names the other characters.
    texts = {c: str(row.cells[c]) for c in NAME_COLUMNS if c in row.cells}
    named = [(c, name_error(text)) for c, text in texts.items() if "\x00" not in text]
    if unsafe := [RowError(row.number, column, problem) for column, problem in named if problem]:
        return unsafe
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
                if value is _BLANK or column in kind.stated:
                    error = _required_message(kind, column)
            if error:
                row.errors.append(RowError(row.number, column, error))
                skip_validation.append(column)
            else:
                setattr(instance, column, value)
        if row.action == CREATE:
            unstated = [column for column in kind.stated if column not in present]
            row.errors.extend(RowError(row.number, c, _required_message(kind, c)) for c in unstated)
            skip_validation += unstated
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

"""Templates (CSV, XLSX) and the column help shown beside the import form."""

from __future__ import annotations

import io
from dataclasses import dataclass

from django.db import models

from inventory.forms import FIELD_LABELS
from inventory.imports.kinds import ImportKind, get_kind


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
    if column in kind.stated:
        parts.append(f"Required of a new row: {kind.stated[column]}")
    return " ".join(parts)


def column_help(kind: ImportKind | str) -> list[ColumnHelp]:
    kind = get_kind(kind) if isinstance(kind, str) else kind
    return [
        ColumnHelp(
            name=column,
            required=column in kind.required_columns or column in kind.stated,
            meaning=_meaning(kind, column),
            example=kind.example.get(column, ""),
        )
        for column in kind.columns
    ]


def template_csv(kind: ImportKind | str) -> bytes:
    """The header row, as UTF-8 CSV."""
    kind = get_kind(kind) if isinstance(kind, str) else kind
    from core.tabular.cellsafety import safe_csv_writer

    buffer = io.StringIO()
    safe_csv_writer(buffer, lineterminator="\r\n").writerow(kind.columns)
    return buffer.getvalue().encode("utf-8")


def template_xlsx(kind: ImportKind | str) -> bytes:
    """A workbook: the header row on the first sheet, what each column means on the second."""
    from openpyxl.styles import Font

    from core.tabular.cellsafety import SafeWorkbook

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

"""``?fields=`` on every list: the filter backend validates it, the renderers apply it.

Kept apart from `core.tabular.exporting`: DRF imports filter backends while
`rest_framework.generics` is still loading, so this module must not import views.
"""

from __future__ import annotations

from collections.abc import Sequence

from rest_framework.exceptions import ValidationError
from rest_framework.filters import BaseFilterBackend

from core.tabular.columns import Column, requested_fields, unknown_fields, view_columns


def check_fields(request, spec: Sequence[Column]) -> list[str]:
    """``?fields=`` as names; 400 naming the unknown ones (and the known columns)."""
    names = requested_fields(request.query_params.get("fields"))
    unknown = unknown_fields(names, spec)
    if unknown:
        raise ValidationError(
            {
                "fields": [
                    f"Unknown column(s): {', '.join(unknown)}. "
                    f"Columns: {', '.join(column.name for column in spec)}."
                ]
            }
        )
    return names


class FieldSelectionFilter(BaseFilterBackend):
    """``?fields=a,b.c``: validate the column selection (the renderers apply it)."""

    description = (
        "Comma-separated columns to return, in this order (JSON, CSV and XLSX); nested "
        "objects by dotted name (factors.mfu) or whole (factors)."
    )

    def filter_queryset(self, request, queryset, view):
        check_fields(request, view_columns(view))
        return queryset

    def get_schema_operation_parameters(self, view):
        return [
            {
                "name": "fields",
                "required": False,
                "in": "query",
                "description": self.description,
                "schema": {"type": "string"},
            }
        ]

"""OpenAPI schema: the spreadsheet formats, ``?fields=``, conditional GETs and If-Match.

Every operation lists JSON, CSV and XLSX responses (the default renderers); CSV and XLSX are
described as text and a binary file rather than repeating the JSON shape. Row list views
(`core.tabular.exporting.RowsView`) are arrays with their query parameters and ``fields``.
"""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter

from core.concurrency import ConditionalUpdateMixin
from core.tabular.exporting import RowsView
from core.tabular.filters import FieldSelectionFilter

TABLE_MEDIA_SCHEMAS = {
    "text/csv": {
        "type": "string",
        "description": "UTF-8 CSV, a header row of the columns, one row per object.",
    },
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": {
        "type": "string",
        "format": "binary",
        "description": "XLSX: sheet 1 the rows (typed cells), sheet 2 About (columns, query).",
    },
}


class ExportAutoSchema(AutoSchema):
    def _is_list_view(self, serializer=None) -> bool:
        if isinstance(self.view, RowsView):
            return True
        return super()._is_list_view(serializer)

    def get_override_parameters(self):
        parameters = list(super().get_override_parameters())
        if isinstance(self.view, RowsView) and self.method == "GET":
            query = getattr(self.view, "query_serializer", None)
            if query is not None:
                parameters.append(query)
            parameters.append(
                OpenApiParameter("fields", str, description=FieldSelectionFilter.description)
            )
        if self._checks_if_match():
            parameters.append(
                OpenApiParameter(
                    "If-Match",
                    str,
                    OpenApiParameter.HEADER,
                    description="The ETag you read; 412 when the object changed since. "
                    "Without it the update is applied.",
                )
            )
        return parameters

    def _checks_if_match(self) -> bool:
        return self.method in ("PUT", "PATCH") and isinstance(self.view, ConditionalUpdateMixin)

    def _get_response_for_code(
        self, serializer, status_code, media_types=None, direction="response"
    ):
        response = super()._get_response_for_code(serializer, status_code, media_types, direction)
        content = response.get("content") or {}
        for media_type, schema in TABLE_MEDIA_SCHEMAS.items():
            if media_type in content:
                content[media_type] = {"schema": dict(schema)}
        return response

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if self.method == "GET" and "200" in responses:
            responses["304"] = {
                "description": "Not modified: the ETag (If-None-Match) or Last-Modified "
                "(If-Modified-Since) still matches."
            }
        if self._checks_if_match():
            responses["412"] = {
                "description": "Precondition failed: If-Match does not match the current "
                "ETag (someone changed the object since you read it)."
            }
        return responses

"""Request bodies that refuse what they do not know: an unknown or misspelt field is a 400
naming it, never silently ignored (a dropped `hiden_size` would answer for another model).

Mix `StrictFieldsMixin` in before `serializers.Serializer`; nested serializers and lists of
them refuse their own unknown fields, so the 400 nests as the body does
(`{"workload": {"hiden_size": ["Unknown field. Did you mean hidden_size?"]}}`). A read-only
field sent by a client is refused too. Fields the view reads itself (a renderer's `format`
query parameter) are listed in `ignored_fields`; an HTML form's CSRF token is always allowed.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

UNKNOWN_FIELD = "Unknown field."
READ_ONLY_FIELD = "Read-only field: it cannot be set."
# Sent by every HTML form (the browsable API's too), never a field of a body.
FORM_FIELDS = ("csrfmiddlewaretoken",)


def unknown_field_message(name: str, known: list[str]) -> str:
    """'Unknown field.', with the closest known name when the field looks misspelt."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return f"{UNKNOWN_FIELD} Did you mean {close[0]}?" if close else UNKNOWN_FIELD


class StrictFieldsMixin:
    """A serializer whose input may hold only its writable fields (and `ignored_fields`)."""

    ignored_fields: tuple[str, ...] = ()

    def refused_fields(self, data: Any) -> dict[str, list[str]]:
        """Each key of `data` the serializer does not take, with why."""
        if not isinstance(data, Mapping):
            return {}  # DRF answers "Expected a dictionary" itself
        fields: Mapping[str, serializers.Field] = self.fields
        writable = [name for name, field in fields.items() if not field.read_only]
        refused: dict[str, list[str]] = {}
        for key in data:
            name = str(key)
            if name in self.ignored_fields or name in FORM_FIELDS:
                continue
            field = fields.get(name)
            if field is None:
                refused[name] = [unknown_field_message(name, writable)]
            elif field.read_only:
                refused[name] = [READ_ONLY_FIELD]
        return refused

    def to_internal_value(self, data: Any) -> Any:
        refused = self.refused_fields(data)
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if refused and isinstance(exc.detail, Mapping):
                raise serializers.ValidationError({**exc.detail, **refused}) from exc
            raise
        if refused:
            raise serializers.ValidationError(refused)
        return value

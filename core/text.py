"""The names' rule (`engine.text`) on every form, serializer and admin page that takes a name.

One validator, :func:`validate_name`: Django forms run it, DRF turns its error into a 400 on
the field. The mixins add it to the fields a class lists in ``name_fields`` (default
``name``), so a form and the API of one object refuse the same names. No model field carries
it (a validator on a model field would be a migration of every app); `access`, beside `core`,
applies the same rule in its own admin (`access/admin_names.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any

from django.core.exceptions import ValidationError

from engine.text import name_error

NAME_ERROR_CODE = "unsafe_characters"


def validate_name(value: Any) -> None:
    """Refuse a name with control, bidi-override or zero-width characters (engine.text)."""
    if isinstance(value, str) and (message := name_error(value)):
        raise ValidationError(message, code=NAME_ERROR_CODE)


def guard_names(fields: MutableMapping[str, Any], names: Iterable[str]) -> None:
    """Add :func:`validate_name` to the named fields present (form or serializer fields)."""
    for name in names:
        field = fields.get(name)
        if field is None or getattr(field, "read_only", False):
            continue
        if validate_name not in field.validators:
            field.validators.append(validate_name)


class SafeNamesFormMixin:
    """A form whose ``name_fields`` (default: ``name``) refuse unsafe characters."""

    name_fields: tuple[str, ...] = ("name",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        guard_names(self.fields, self.name_fields)  # type: ignore[attr-defined]


class SafeNamesSerializerMixin:
    """A serializer whose ``name_fields`` (default: ``name``) refuse unsafe characters."""

    name_fields: tuple[str, ...] = ("name",)

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()  # type: ignore[misc]
        guard_names(fields, self.name_fields)
        return fields


class SafeNamesAdminMixin:
    """A ModelAdmin (or inline) whose ``name_fields`` (default: ``name``) refuse them too."""

    name_fields: tuple[str, ...] = ("name",)

    def formfield_for_dbfield(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        formfield = super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]
        if formfield is not None and db_field.name in self.name_fields:
            guard_names({db_field.name: formfield}, [db_field.name])
        return formfield

"""The names' rule (`engine.text`) in access's admin pages: a team, a user's display name.

`access` sits beside `core` and may not import it, so it cannot use `core.text`'s mixin; this
is the same rule through Django's own RegexValidator (the message names the rule, not the
character found).
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator

from engine.text import NAME_RULE, REFUSED_IN_NAMES

name_validator = RegexValidator(
    REFUSED_IN_NAMES, message=NAME_RULE, code="unsafe_characters", inverse_match=True
)


class NameCheckedAdminMixin:
    """A ModelAdmin whose ``name_fields`` refuse control, bidi and zero-width characters."""

    name_fields: tuple[str, ...] = ()

    def formfield_for_dbfield(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        formfield = super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]
        if formfield is not None and db_field.name in self.name_fields:
            formfield.validators.append(name_validator)
        return formfield

"""The API's OpenAPI schema for tests, generated once per test process.

Generating it (drf-spectacular walks every view and serializer) takes seconds; it depends on
the code only, not on the data or the settings the tests change, so every test that reads it
shares one copy, made as `manage.py spectacular --validate --fail-on-warn` makes it: a
warning or an invalid schema fails every test that asks for it.
"""

from __future__ import annotations

import functools
import io
import json
from typing import Any


@functools.cache
def _validated_schema_json() -> str:
    from django.core.management import call_command

    out = io.StringIO()
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--format", "openapi-json", stdout=out
    )
    return out.getvalue()


def validated_schema() -> dict[str, Any]:
    """A fresh copy of the validated schema (parsed anew: callers may change theirs)."""
    schema: dict[str, Any] = json.loads(_validated_schema_json())
    return schema

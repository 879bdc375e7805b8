"""The API's JSON parser: a number too large for a double (1e400, or an integer of 400
digits), or nesting deeper than ``MAX_JSON_DEPTH``, is a 400.

The standard parser already refuses the NaN and Infinity literals (STRICT_JSON); 1e400 is
valid JSON that Python reads as inf, which then reached integer and key lookups as a 500.
Deep nesting ([[[[…]]]] a thousand levels) made the decoder raise RecursionError, another 500;
no body of this API nests more than a handful of levels. The JSON boxes of the pages' forms
(a site's assumption overrides) read their text with the same bounds
(:class:`BoundedJSONFormField`).
"""

from __future__ import annotations

import codecs
import json as std_json
import math
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.settings import api_settings
from rest_framework.utils import json

MAX_JSON_DEPTH = 32  # levels of objects and arrays; the deepest real body (a plan) has 5


def finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def float_sized_int(text: str) -> int:
    """An integer that fits a double: a 400-digit one overflowed float() in a number field."""
    value = int(text)
    if len(text) > 300:
        try:
            float(value)
        except OverflowError as exc:
            raise ValueError(f"the number {text[:40]}… is out of range") from exc
    return value


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` levels (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class FiniteJSONParser(JSONParser):
    max_depth = MAX_JSON_DEPTH

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = get_encoding(parser_context or {})  # refuses bytes-to-bytes codecs
        strict = json.strict_constant if api_settings.STRICT_JSON else None
        too_deep = ParseError(f"JSON parse error - nested deeper than {self.max_depth} levels")
        try:
            decoded_stream = codecs.getreader(encoding)(stream)
            data = json.load(
                decoded_stream,
                parse_constant=strict,
                parse_float=finite_float,
                parse_int=float_sized_int,
            )
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
        except RecursionError as exc:  # the decoder recurses once per level
            raise too_deep from exc
        if deeper_than(data, self.max_depth):
            raise too_deep
        return data


def load_bounded_json(text: str) -> Any:
    """``json.loads`` with the parser's bounds; a ValueError saying which one was crossed."""
    try:
        data = std_json.loads(
            text,
            parse_constant=json.strict_constant,
            parse_float=finite_float,
            parse_int=float_sized_int,
        )
    except RecursionError as exc:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels") from exc
    if deeper_than(data, MAX_JSON_DEPTH):
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return data


class BoundedJSONFormField(forms.JSONField):
    """A form's JSON box with the API's bounds: a form error, not a 500, for deep nesting,
    NaN or 1e400 (Django's own field let RecursionError through, at validation and again
    when the page showed the text back)."""

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and not self.disabled and value not in self.empty_values:
            try:
                load_bounded_json(value)
            except ValueError as exc:  # json.JSONDecodeError is a ValueError too
                raise ValidationError(f"Enter valid JSON: {exc}.", code="invalid") from exc
        return super().to_python(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        if isinstance(data, str) and not self.disabled:
            try:
                load_bounded_json(data)
            except ValueError:
                return InvalidJSONInput(data)
        return super().bound_data(data, initial)

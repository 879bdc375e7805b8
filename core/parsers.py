"""The API's JSON parser: a number too large for a double (1e400) is a 400, not infinity.

The standard parser already refuses the NaN and Infinity literals (STRICT_JSON); 1e400 is
valid JSON that Python reads as inf, which then reached integer and key lookups as a 500.
"""

from __future__ import annotations

import codecs
import math

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.settings import api_settings
from rest_framework.utils import json


def finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


class FiniteJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = get_encoding(parser_context or {})  # refuses bytes-to-bytes codecs
        strict = json.strict_constant if api_settings.STRICT_JSON else None
        try:
            decoded_stream = codecs.getreader(encoding)(stream)
            return json.load(decoded_stream, parse_constant=strict, parse_float=finite_float)
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc

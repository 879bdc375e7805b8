"""Serializer fields, validators and model checks that take their range from one table.

Declare a bound by its name in `engine.limits.LIMITS`, never by copied numbers:
`bounded_float("tokens", required=False)`, `WithinLimit("pue")` on a form field,
`limit_errors(site, {"tariff_per_kwh": "tariff_per_kwh"})` (engine.limits) in a
model's clean().
An out-of-range value is a 400 (or a form error) naming the field and the range.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.utils.deconstruct import deconstructible
from rest_framework import serializers

from engine.limits import date_error, limit, range_error


@deconstructible
class WithinLimit:
    """A Django validator (also run by DRF) for the named limit."""

    def __init__(self, name: str) -> None:
        limit(name)  # an unknown name fails at import, not at the first request
        self.name = name

    def __call__(self, value) -> None:
        message = range_error(self.name, value)
        if message:
            raise ValidationError(message, code="out_of_range")

    def __eq__(self, other) -> bool:
        return isinstance(other, WithinLimit) and other.name == self.name


def _document_range(field: serializers.Field, name: str) -> serializers.Field:
    # The schema shows the range (drf-spectacular reads these); WithinLimit does the checking.
    field.min_value, field.max_value = limit(name).low, limit(name).high
    return field


def _messages(name: str, kwargs: dict, noun: str = "number") -> dict:
    """Every way a value can be refused names the range (NaN, "inf", 1e400, 10**400)."""
    message = limit(name).message
    invalid = dict.fromkeys(("invalid", "overflow"), f"A valid {noun} is required. {message}")
    return {**invalid, **kwargs.pop("error_messages", {})}


def bounded_float(name: str, **kwargs) -> serializers.FloatField:
    validators = [*kwargs.pop("validators", []), WithinLimit(name)]
    messages = _messages(name, kwargs)
    field = serializers.FloatField(validators=validators, error_messages=messages, **kwargs)
    return _document_range(field, name)


def bounded_int(name: str, **kwargs) -> serializers.IntegerField:
    validators = [*kwargs.pop("validators", []), WithinLimit(name)]
    messages = _messages(name, kwargs, "whole number")
    field = serializers.IntegerField(validators=validators, error_messages=messages, **kwargs)
    return _document_range(field, name)


@deconstructible
class WithinDates:
    """A Django/DRF validator for dates and date-times in the accepted years."""

    def __call__(self, value) -> None:
        message = date_error(value)
        if message:
            raise ValidationError(message, code="out_of_range")

    def __eq__(self, other) -> bool:
        return isinstance(other, WithinDates)

"""Currency codes (ISO 4217, from the `iso4217` package) and dated exchange rates.

Money in different currencies is never added, ranked or compared unconverted. One lookup
(:func:`conversions`) serves the planner, the result pages, Costs and reports: the newest rate
an administrator entered for the pair, else the ECB's euro reference rates shipped in
``data/ecb_euro_reference_rates.json`` (one published day, never fetched at run time); every
converted figure says which (`Conversion.note`, e.g. "converted at EUR→USD 1.08 of 2026-11-01",
a shipped rate with its source). Without either, nothing is converted and the caller says why.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from iso4217 import Currency

ISO_4217_CODES: frozenset[str] = frozenset(currency.code for currency in Currency)


def validate_currency(value: str) -> None:
    """A model-field validator: an ISO 4217 code (the models store it upper case)."""
    if not isinstance(value, str) or value.upper() not in ISO_4217_CODES:
        raise ValidationError(
            "“%(value)s” is not an ISO 4217 currency code (e.g. USD, EUR, CNY).",
            code="invalid_currency",
            params={"value": value},
        )


class ExchangeRate(models.Model):
    """1 ``from_currency`` = ``rate`` ``to_currency``, from ``valid_on`` until a newer rate."""

    from_currency = models.CharField(max_length=3, validators=[validate_currency])
    to_currency = models.CharField(max_length=3, validators=[validate_currency])
    rate = models.FloatField(validators=[MinValueValidator(1e-9)])
    valid_on = models.DateField(help_text="The rate applies from this day until a newer one.")
    source = models.CharField(max_length=200, blank=True, help_text="Where the rate comes from.")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "inventory"
        ordering = ["from_currency", "to_currency", "-valid_on"]
        constraints = [
            models.UniqueConstraint(
                fields=["from_currency", "to_currency", "valid_on"], name="one_rate_per_day"
            )
        ]

    def __str__(self) -> str:
        return f"{self.from_currency}→{self.to_currency} {self.rate:g} of {self.valid_on}"

    def save(self, *args, **kwargs) -> None:
        self.from_currency = (self.from_currency or "").upper()
        self.to_currency = (self.to_currency or "").upper()
        super().save(*args, **kwargs)

    def clean(self) -> None:
        if self.from_currency and self.from_currency.upper() == (self.to_currency or "").upper():
            raise ValidationError({"to_currency": "Convert between two different currencies."})


# Where a conversion's rate comes from.
ENTERED = "entered"
REFERENCE = "reference"

REFERENCE_RATES_FILE = Path(__file__).with_name("data") / "ecb_euro_reference_rates.json"


@dataclass(frozen=True)
class Conversion:
    from_currency: str
    to_currency: str
    rate: float
    valid_on: dt.date
    provenance: str = ENTERED
    source: str = ""

    @property
    def note(self) -> str:
        text = (
            f"converted at {self.from_currency}→{self.to_currency} {self.rate:g} "
            f"of {self.valid_on:%Y-%m-%d}"
        )
        return f"{text} ({self.source})" if self.provenance == REFERENCE else text

    @property
    def label(self) -> str:
        """The rate with its day and provenance, e.g. "USD→EUR 0.952835 of 2024-11-25
        (ECB euro reference rate …)" or "… (entered: finance desk)"."""
        if self.provenance == REFERENCE:
            origin = self.source
        else:
            origin = f"entered: {self.source}" if self.source else "entered"
        return (
            f"{self.from_currency}→{self.to_currency} {self.rate:g} "
            f"of {self.valid_on:%Y-%m-%d} ({origin})"
        )

    def as_record(self) -> dict[str, Any]:
        """JSON-safe, for results that must say later which rate they used."""
        return {
            "from_currency": self.from_currency,
            "to_currency": self.to_currency,
            "rate": self.rate,
            "valid_on": self.valid_on.isoformat(),
            "provenance": self.provenance,
            "source": self.source,
            "label": self.label,
        }


@dataclass(frozen=True)
class ReferenceRates:
    """One published day of the ECB's euro reference rates (units of a currency per euro)."""

    published_on: dt.date
    source: str
    url: str
    units_per_eur: Mapping[str, float]


@functools.cache
def reference_rates() -> ReferenceRates:
    """The shipped reference table, read once per process."""
    data = json.loads(REFERENCE_RATES_FILE.read_text(encoding="utf-8"))
    units = {str(code).upper(): float(rate) for code, rate in data["units_per_eur"].items()}
    bad = sorted(code for code, rate in units.items() if code not in ISO_4217_CODES or rate <= 0)
    if bad:
        raise ValueError(f"{REFERENCE_RATES_FILE.name}: bad codes or rates {', '.join(bad)}")
    return ReferenceRates(
        published_on=dt.date.fromisoformat(data["published_on"]),
        source=data["source"],
        url=data["url"],
        units_per_eur=units,
    )


def reference_conversion(source: str, target: str, on: dt.date) -> Conversion | None:
    """``source`` → ``target`` from the shipped ECB table (crossed via EUR when neither is
    EUR); None when a code is not in it or the table is newer than ``on``."""
    table = reference_rates()
    per_eur = {"EUR": 1.0, **table.units_per_eur}
    if table.published_on > on or source not in per_eur or target not in per_eur:
        return None
    crossed = "" if "EUR" in (source, target) else ", crossed via EUR"
    return Conversion(
        source,
        target,
        per_eur[target] / per_eur[source],
        table.published_on,
        provenance=REFERENCE,
        source=f"ECB euro reference rate{crossed}, shipped with Fleetwise",
    )


def conversions(
    currencies: Iterable[str], target: str, on: dt.date, *, reference: bool = True
) -> dict[str, Conversion | None]:
    """The newest rate on or before ``on`` from each currency to ``target`` (None: no rate).

    A rate entered the other way round (target → currency) is used inverted. A currency
    without an entered rate gets the shipped ECB reference rate (``reference=False``: entered
    rates only).
    """
    wanted = {code for code in currencies if code and code != target}
    found: dict[str, Conversion | None] = dict.fromkeys(wanted)
    rates = ExchangeRate.objects.filter(valid_on__lte=on).filter(
        models.Q(from_currency__in=wanted, to_currency=target)
        | models.Q(from_currency=target, to_currency__in=wanted)
    )
    for rate in rates.order_by("valid_on"):  # newer rows overwrite older ones
        direct = rate.to_currency == target
        code = rate.from_currency if direct else rate.to_currency
        previous = found[code]
        if previous is None or previous.valid_on <= rate.valid_on:
            found[code] = Conversion(
                code,
                target,
                rate.rate if direct else 1.0 / rate.rate,
                rate.valid_on,
                source=rate.source,
            )
    if reference:
        for code in [code for code, found_rate in found.items() if found_rate is None]:
            found[code] = reference_conversion(code, target, on)
    return found


def converted_total(
    rows: Sequence[Mapping[str, Any]], key: str, rates: Mapping[str, Any], target: str
) -> dict[str, Any] | None:
    """One figure in ``target`` from per-currency ``rows``; None unless every currency has a rate.

    ``rates``: currency → :class:`Conversion` (or anything with ``rate`` and ``note``).
    """
    total, notes = 0.0, []
    for row in rows:
        value = row.get(key)
        if value is None:
            continue
        if row["currency"] == target:
            total += value
            continue
        conversion = rates.get(row["currency"])
        if conversion is None:
            return None
        total += value * conversion.rate
        notes.append(conversion.note)
    return {"value": total, "currency": target, "notes": notes}


def in_reporting_currency(
    totals: Sequence[Mapping[str, Any]], keys: Sequence[str], target: str, on: dt.date
) -> dict[str, Any]:
    """Per-currency ``totals`` converted to ``target`` with the newest rates on or before ``on``.

    Rates: :func:`conversions` (entered, else shipped). Every figure or none: without a rate
    for each currency, ``figures`` is None and ``reason`` names the missing rates (the
    per-currency totals stay the answer).
    """
    rates = conversions([row["currency"] for row in totals], target, on)
    missing = sorted(code for code, rate in rates.items() if rate is None)
    notes = sorted(rate.note for rate in rates.values() if rate is not None)
    if missing:
        return {
            "currency": target,
            "figures": None,
            "notes": notes,
            "reason": f"no exchange rate from {', '.join(missing)} to {target} on or before "
            f"{on:%Y-%m-%d} (none entered, none in the shipped ECB reference rates): "
            "figures stay per currency",
        }
    figures = {}
    for key in keys:
        converted = converted_total(totals, key, rates, target)
        known = any(row.get(key) is not None for row in totals)
        figures[key] = converted["value"] if converted and known else None
    return {"currency": target, "figures": figures, "notes": notes, "reason": None}

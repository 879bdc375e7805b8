"""A report's money in the schedule's reporting currency, with the dated rates of its period end.

All or nothing: every currency in the scope needs a rate on or before the period's last day
(:func:`inventory.currency.conversions`: the newest entered, else the shipped ECB reference
rate); otherwise the report stays per currency and says which rate is missing. Every converted
row carries its rate note, with the source of a shipped rate.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from accounting.selectors import COST_MONEY_COLUMNS
from engine.factors import FACTOR_NAMES
from inventory.currency import REFERENCE, Conversion, conversions, in_reporting_currency
from reports.trends import change

HEADLINE_KEYS = ("total_cost", "idle_cost", "lost_cost")
# Money columns of each converted table (figures that are shares or hours stay as they are).
ROW_MONEY = (
    *COST_MONEY_COLUMNS,
    "cost_per_allocated_card_hour",
    "cost_per_effective_pflop_day",
    "used_cost",
    "idle_cost_share",
    "chargeback_cost",
    "lost_cost_per_month",
)


def _last_day(end_iso: str) -> dt.date:
    """The period's last day (its end is exclusive, at local midnight)."""
    return (dt.datetime.fromisoformat(end_iso) - dt.timedelta(microseconds=1)).date()


def rate_note(conversion: Conversion) -> str:
    """E.g. "EUR → USD at 1.08 (rate of 2026-10-31)", a shipped rate with its source:
    "… (rate of 2024-11-25, ECB euro reference rate, shipped with Fleetwise)"."""
    shipped = f", {conversion.source}" if conversion.provenance == REFERENCE else ""
    return (
        f"{conversion.from_currency} → {conversion.to_currency} at {conversion.rate:.4g} "
        f"(rate of {conversion.valid_on:%Y-%m-%d}{shipped})"
    )


def _convert_row(row: dict[str, Any], rates: dict, target: str) -> dict[str, Any]:
    currency = row.get("currency")
    if currency is None:
        return row
    if currency == target:
        return {**row, "conversion": f"in {target} (no conversion)"}
    rate = rates[currency]
    converted = {
        key: (row[key] * rate.rate if row.get(key) is not None else None)
        for key in ROW_MONEY
        if key in row
    }
    if isinstance(row.get("lost_cost_by_factor"), dict):
        converted["lost_cost_by_factor"] = {
            name: value * rate.rate if value is not None else None
            for name, value in row["lost_cost_by_factor"].items()
        }
    return {**row, **converted, "currency": target, "conversion": rate_note(rate)}


def _merged_waste(rows: list[dict[str, Any]], target: str, notes: str) -> list:
    """One "where the money is lost" row per factor: the converted per-currency losses added."""
    labels = {row["factor"]: row["label"] for row in rows}
    merged = []
    for name in FACTOR_NAMES:
        known = [row["lost_cost"] for row in rows if row["factor"] == name]
        known = [value for value in known if value is not None]
        merged.append(
            {
                "factor": name,
                "label": labels.get(name, name),
                "currency": target,
                "lost_cost": sum(known) if known else None,
                "conversion": notes,
            }
        )
    return merged


def _headline(numbers: dict, current: dict, previous: dict | None, target: str, notes: str):
    """The summary's money figures as one converted total each (previous: same rates)."""
    summary = numbers["summary"]
    teams = numbers["chargeback"]["teams"]
    charged = [row["chargeback_cost"] for row in teams if row.get("chargeback_cost") is not None]
    values = {**current, "chargeback_cost": sum(charged) if charged else None}
    for figure in summary["figures"]:
        if figure["unit"] != "money":
            figure["conversion"] = ""  # card-hours: nothing to convert
            continue
        now, before = values.get(figure["name"]), (previous or {}).get(figure["name"])
        figure.update(value=now, previous=before, relative=None)
        figure.update(change(now, before, higher_is_better=False))  # all are costs
        if now is not None and before:
            figure["relative"] = (now - before) / before
        figure["no_data_reason"] = None if figure["value"] is not None else "no cost data"
        figure["conversion"] = notes
    summary["currency"] = target
    summary["currencies"] = [target]


def apply(
    numbers: dict[str, Any], target: str, previous_totals: list[dict[str, Any]]
) -> dict[str, Any]:
    """Convert ``numbers`` in place to ``target`` when every rate exists; else say which is missing.

    Rates: the newest on or before the period's last day. ``previous_totals``: the previous
    period's per-currency cost totals, converted with the same rates (a change is never an
    exchange-rate move).
    """
    period_end = _last_day(numbers["period"]["end"])
    totals = numbers["costs"]["totals"]
    present = [row["currency"] for row in [*totals, *previous_totals] if row.get("currency")]
    present += [row["currency"] for row in numbers["chargeback"]["teams"]]
    headline = in_reporting_currency(
        [{"currency": code} for code in dict.fromkeys(present)] + totals,
        HEADLINE_KEYS,
        target,
        period_end,
    )
    if headline["figures"] is None:
        reason = f"Reporting currency {target} not applied: {headline['reason']}."
        numbers["reporting_currency"] = {"currency": target, "converted": False, "reason": reason}
        numbers["warnings"].append(reason)
        return numbers
    rates = conversions(present, target, period_end)
    notes = "; ".join(rate_note(rate) for rate in rates.values()) or f"all in {target}"
    previous = in_reporting_currency(previous_totals, HEADLINE_KEYS, target, period_end)
    _convert_tables(numbers, rates, target)
    waste = [_convert_row(row, rates, target) for row in numbers["waste"]]
    numbers["waste"] = _merged_waste(waste, target, notes)
    _headline(numbers, headline["figures"], previous["figures"], target, notes)
    numbers["idle"]["idle_cost"] = headline["figures"]["idle_cost"]
    numbers["idle"]["currency"] = target
    numbers["warnings"] = [
        warning for warning in numbers["warnings"] if not warning.startswith("The scope mixes ")
    ]
    numbers["warnings"].append(f"Money is shown in {target}, converted: {notes}.")
    numbers["reporting_currency"] = {
        "currency": target,
        "converted": True,
        "notes": notes,
        "reason": None,
    }
    return numbers


def _convert_tables(numbers: dict[str, Any], rates: dict, target: str) -> None:
    for section, keys in (
        ("costs", ("clusters", "pools", "totals")),
        ("chargeback", ("teams", "totals")),
        ("idle", ("top_pools",)),
    ):
        for key in keys:
            numbers[section][key] = [
                _convert_row(row, rates, target) for row in numbers[section][key]
            ]
    recommendations = []
    for row in numbers["recommendations"]:
        converted = _convert_row(row, rates, target)
        if row.get("currency") not in (None, target) and converted.get("lost_cost") is not None:
            # The sentence keeps the original currency; the converted figures follow it.
            month = converted.get("lost_cost_per_month")
            in_month = f", about {month:,.0f} {target} a month" if month is not None else ""
            converted["text"] = (
                f"{row['text']} In {target}: {converted['lost_cost']:,.0f} {target} in the "
                f"period{in_month} ({converted['conversion']})."
            )
        recommendations.append(converted)
    numbers["recommendations"] = recommendations

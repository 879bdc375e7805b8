"""Exchange rates and plans: a plan stores the rates its card prices were converted with
(`results["exchange_rates"]`); a rate entered, changed or deleted afterwards marks the plans
whose conversion it changes stale, and says why."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from inventory.currency import Conversion, ExchangeRate, conversions
from planner.models import Plan


def _same(used: Mapping[str, Any], now: Conversion | None) -> bool:
    return (
        now is not None
        and math.isclose(float(used["rate"]), now.rate, rel_tol=1e-12)
        and used["valid_on"] == now.valid_on.isoformat()
        and used.get("provenance") == now.provenance
    )


def rate_changes(used: Iterable[Mapping[str, Any]], on: dt.date) -> list[str]:
    """One sentence per stored rate that a recompute on ``on`` would no longer use."""
    reasons = []
    for record in used:
        source, target = record["from_currency"], record["to_currency"]
        now = conversions({source}, target, on, reference=True)[source]
        if _same(record, now):
            continue
        replacement = now.label if now is not None else "no rate (the options become unpriced)"
        reasons.append(
            f"The {source}→{target} exchange rate changed after this run: {replacement} "
            f"replaces {record['label']}."
        )
    return reasons


def stale_rate_reasons(plan: Plan) -> list[str]:
    """Why a plan's money is out of date because of exchange rates (empty: it is not)."""
    used = (plan.results or {}).get("exchange_rates") or []
    return rate_changes(used, timezone.now().date()) if used else []


def mark_plans_stale_for_rate(from_currency: str, to_currency: str) -> int:
    """Flag the plans that converted between these two currencies with a rate that a
    recompute today would replace (an unchanged conversion flags nothing)."""
    pair = {from_currency.upper(), to_currency.upper()}
    today = timezone.now().date()
    hits = []
    for pk, used in Plan.objects.values_list("pk", "results__exchange_rates"):
        mine = [r for r in used or [] if {r["from_currency"], r["to_currency"]} == pair]
        if mine and rate_changes(mine, today):
            hits.append(pk)
    if not hits:
        return 0
    return Plan.objects.filter(pk__in=hits).update(stale=True, inventory_changed_at=timezone.now())


def _on_rate_change(sender, instance: ExchangeRate, **kwargs) -> None:
    if kwargs.get("raw"):
        return  # fixture loading
    pair = (instance.from_currency, instance.to_currency)
    # After commit, so a rolled-back edit flags nothing.
    transaction.on_commit(lambda: mark_plans_stale_for_rate(*pair))


def connect_rate_signals() -> None:
    for signal, name in ((post_save, "save"), (post_delete, "delete")):
        uid = f"planner.stale.ExchangeRate.{name}"
        signal.connect(_on_rate_change, sender=ExchangeRate, dispatch_uid=uid)

"""Money kept apart per currency: never added, ranked, plotted on one axis or compared across.

Analyses store their pools' money in each site's currency; a scope whose pools use several
currencies gets its money per currency (:func:`money_by_currency`) and no single total.
Conversion to a reporting currency happens only on request, with a dated rate that is named
next to every converted figure (`inventory.currency`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from engine.factors import FACTOR_NAMES

LOST_MONEY_KEYS: tuple[str, ...] = tuple(f"lost_{name}_money" for name in FACTOR_NAMES)
MONEY_KEYS: tuple[str, ...] = ("total_cost", *LOST_MONEY_KEYS)


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def money_by_currency(pools: pd.DataFrame) -> list[dict[str, Any]]:
    """Per currency (sorted): total cost, money lost, lost per factor and the worst factor."""
    if pools.empty or "currency" not in pools:
        return []
    columns = [key for key in MONEY_KEYS if key in pools]
    sums = pools.groupby("currency", sort=True)[columns].sum(min_count=1)
    rows = []
    for currency, row in sums.iterrows():
        lost = {name: _number(row.get(f"lost_{name}_money")) for name in FACTOR_NAMES}
        known = {name: value for name, value in lost.items() if value is not None}
        rows.append(
            {
                "currency": str(currency),
                "total_cost": _number(row.get("total_cost")),
                "lost_money": sum(known.values()) if known else None,
                "lost_by_factor": lost,
                "worst_factor": max(known, key=known.__getitem__) if known else None,
            }
        )
    return rows


def without_mixed_money(summary: dict[str, Any], currencies: int) -> dict[str, Any]:
    """The summary with its money totals removed when they would add several currencies."""
    if currencies <= 1:
        return summary
    return {**summary, **dict.fromkeys(MONEY_KEYS), "currency": None}

"""What a recommendation's loss costs: the card-hours a factor lost, at what they cost.

Pure (no Django): reads one row of the accounting cost report (one cluster over the report's
period, granularity ``total``). The money lost per factor stored beside it
(``lost_cost_by_factor``) splits the whole bill's lost share over the factors (the −ln
attribution); on a nearly idle cluster that hands a few failed jobs a share of the idle cards'
money. Advice prices what the factor itself lost instead, along the waterfall, over the hours
usage records cover:

* utilization: the idle card-hours, at their cost (``idle_cost``);
* effective time: the card-hours of failed and preempted jobs, at the busy rate;
* scaling, then MFU: the busy card-hours' share each loses (of what the previous left);
* energy: the PUE overhead (``energy_overhead_cost``).

The busy rate is the used cost per allocated card-hour (ownership + busy energy, as the
chargeback prices used hours). So the losses of utilization, effective time, scaling and MFU
together never exceed the covered cost. A month is extrapolated only from a shorter period,
at the period's own rate, and never above the month's bill at that rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

HOURS_PER_MONTH = 730.0  # 8,760 h / 12
SHORTEST_MONTH_H = 28 * 24.0  # a period this long or longer is a month's figure already
# The order the losses are priced in (planner.analysis.WATERFALL_ORDER): each factor acts on
# what the previous ones left.
WATERFALL: tuple[str, ...] = ("utilization", "effective_time", "scaling", "mfu", "energy")


@dataclass(frozen=True)
class PricedLoss:
    """One factor's loss over the report's period, and its month at the period's rate."""

    card_hours: float | None  # card-hours (or their equivalent) lost; None for energy
    cost: float  # what those card-hours cost in the period, in the row's currency
    per_month: float | None  # None: the period is a month or longer (nothing extrapolated)
    months_factor: float | None  # 730 h ÷ the period's hours, when extrapolated


def _number(row: Mapping[str, Any], key: str) -> float | None:
    value = row.get(key)
    return None if value is None else float(value)


def _covered(row: Mapping[str, Any], key: str, uncovered_key: str) -> float | None:
    """A money or card-hour total over the hours usage records cover."""
    total = _number(row, key)
    if total is None:
        return None
    return total - (_number(row, uncovered_key) or 0.0)


def busy_rate(row: Mapping[str, Any]) -> float | None:
    """Used cost per allocated card-hour over the covered hours; None when nothing ran."""
    covered_cost = _covered(row, "total_cost", "uncovered_cost")
    idle = _number(row, "idle_cost")
    allocated = _number(row, "allocated_card_hours")
    if covered_cost is None or idle is None or allocated is None or allocated <= 0:
        return None
    return max(covered_cost - idle, 0.0) / allocated


def lost_card_hours(factor: str, row: Mapping[str, Any]) -> float | None:
    """Card-hours (or their equivalent) the factor lost, along the waterfall; None: unknown."""
    allocated = _number(row, "allocated_card_hours")
    if allocated is None:
        return None
    if factor == "utilization":
        covered = _covered(row, "card_hours", "uncovered_card_hours")
        return None if covered is None else max(covered - allocated, 0.0)
    lost = min(max(_number(row, "lost_card_hours") or 0.0, 0.0), allocated)
    if factor == "effective_time":
        return lost
    factors = row.get("factors") or {}
    scaling, mfu = factors.get("scaling"), factors.get("mfu")
    productive = allocated - lost
    if factor == "scaling":
        return None if scaling is None else productive * (1.0 - scaling)
    if factor == "mfu":
        return None if scaling is None or mfu is None else productive * scaling * (1.0 - mfu)
    return None


def priced_loss(factor: str, row: Mapping[str, Any], period_hours: float) -> PricedLoss | None:
    """The factor's loss in ``row``'s currency over the period; None when it has no price."""
    hours: float | None = None
    if factor == "energy":
        cost = _number(row, "energy_overhead_cost")
    elif factor == "utilization":
        hours, cost = lost_card_hours(factor, row), _number(row, "idle_cost")
    else:
        hours, rate = lost_card_hours(factor, row), busy_rate(row)
        cost = None if hours is None or rate is None else hours * rate
    if cost is None:
        return None
    per_month = months = None
    if 0 < period_hours < SHORTEST_MONTH_H:
        months = HOURS_PER_MONTH / period_hours
        bill = _number(row, "total_cost")
        per_month = cost * months
        if bill is not None:  # at the period's rate a loss is never more than the bill
            per_month = min(per_month, bill * months)
    return PricedLoss(card_hours=hours, cost=cost, per_month=per_month, months_factor=months)

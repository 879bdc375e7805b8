"""Attribution step: the product, the period's size, and the waste split over the factors.

The lost share ``1 − product`` is split in proportion to ``−ln(factor)`` (kernel:
``aggregate.attribute_waste_arrays``) and shown in card-hours, PFLOP-days and money.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from engine.aggregate import attribute_waste_arrays
from engine.factors import FACTOR_NAMES
from engine.steps.context import FactorStep, PoolContext


def attribution_columns(
    ctx: PoolContext, steps: Mapping[str, FactorStep], duration_h: np.ndarray
) -> dict[str, object]:
    """Product, size of the period and the lost share of each factor in its units."""
    factors = np.column_stack([steps[name].value for name in FACTOR_NAMES])
    product, lost, shares = attribute_waste_arrays(factors)
    card_hours = ctx.pool_cards * duration_h
    peak_pflops = ctx.pool_peak_tflops / 1000.0
    peak_pflop_days = peak_pflops * duration_h / 24.0
    cost_per_card_hours = ctx.column("cost_per_card_hours")
    out: dict[str, object] = {
        "product": product,
        "cards": ctx.pool_cards,
        "job_cards": ctx.job_cards,
        "peak_pflops": peak_pflops,
        "duration_h": duration_h,
        "card_hours": card_hours,
        "peak_pflop_days": peak_pflop_days,
        "effective_pflop_days": product * peak_pflop_days,
        "lost_share": lost,
    }
    for position, name in enumerate(FACTOR_NAMES):
        out[f"lost_share_{name}"] = shares[:, position]
    for position, name in enumerate(FACTOR_NAMES):
        out[f"lost_{name}_card_hours"] = shares[:, position] * card_hours
        out[f"lost_{name}_pflop_days"] = shares[:, position] * peak_pflop_days
        out[f"lost_{name}_money"] = shares[:, position] * card_hours * cost_per_card_hours
    return out

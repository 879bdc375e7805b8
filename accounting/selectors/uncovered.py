"""Card-hours outside the usage coverage still cost money (docs/efficiency-model.md,
"Coverage and provenance").

Costs price every in-service card-hour of the period, as analyses do. Inside a cluster's
covered window the busy/idle split comes from the records. Outside it there is no data: those
hours are priced at the pool's utilization by the analyses' rule (measured over the covered
days when the cluster meets the coverage rule, else planned), and they are never charged to a
team, counted in a utilization, or called idle or lost money.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accounting.selectors.measured import ENGINE_MEASURED_COLUMNS, measured_pool_inputs
from engine.coverage import measured_applies
from engine.defaults import FACTOR_FLOOR

# The chargeback row of the money on hours without usage records (bill by bill).
UNCOVERED_TEAM = "(no usage records, not charged)"
_KEYS = ["cluster", "pool", "bucket_start"]
# Columns that only records can give: no data on uncovered hours.
_MEASURED_ONLY = (
    "allocated_card_hours",
    "lost_card_hours",
    "down_card_hours",
    *ENGINE_MEASURED_COLUMNS,
)


def with_uncovered_hours(
    covered: pd.DataFrame,
    uncut_inventory: pd.DataFrame | None,
    usage: pd.DataFrame,
    edges: pd.DatetimeIndex,
    frequency: str,
    tz: str,
) -> pd.DataFrame:
    """``covered`` (measured pool inputs per pool × bucket) plus one row per pool × bucket
    for its in-service hours outside the covered window; ``covered`` says which is which.

    The extra rows carry ``fill_utilization``: the pool's utilization over its covered hours
    where its cluster meets the coverage rule, else NaN (the planned value is used).
    """
    covered = covered.assign(covered=True)
    if uncut_inventory is None or uncut_inventory.empty:
        return covered
    uncut = measured_pool_inputs(usage.iloc[:0], uncut_inventory, None, edges, frequency, tz)
    uncut = uncut[uncut["pool"].isin(uncut_inventory["pool"].dropna().unique())]
    hours_covered = covered.set_index(_KEYS)["in_service_card_hours"]
    uncovered_h = (
        uncut["in_service_card_hours"].to_numpy()
        - hours_covered.reindex(pd.MultiIndex.from_frame(uncut[_KEYS])).fillna(0.0).to_numpy()
    )
    rows = uncut[uncovered_h > 1e-9].copy()
    rows["in_service_card_hours"] = uncovered_h[uncovered_h > 1e-9]
    rows["available_card_hours"] = rows["in_service_card_hours"]
    rows[[c for c in _MEASURED_ONLY if c in rows]] = np.nan
    rows["fill_utilization"] = rows["pool"].map(_fill_utilization(covered, uncut))
    return pd.concat([covered, rows.assign(covered=False)], ignore_index=True)


def _fill_utilization(covered: pd.DataFrame, uncut: pd.DataFrame) -> pd.Series:
    """Per pool: (allocated + down) ÷ available over its covered hours, where its cluster's
    covered card-hours meet the coverage rule (the analyses' measured utilization)."""
    per_pool = covered.groupby("pool")[
        ["allocated_card_hours", "down_card_hours", "available_card_hours"]
    ].sum()
    available = per_pool["available_card_hours"].where(per_pool["available_card_hours"] > 0)
    # It goes in as the planned utilization, which the engine floors: an idle pool is 1e-6, not 0.
    ratio = ((per_pool["allocated_card_hours"] + per_pool["down_card_hours"]) / available).clip(
        lower=FACTOR_FLOOR, upper=1.0
    )
    cluster_covered = covered.groupby("cluster")["in_service_card_hours"].sum()
    cluster_period = uncut.groupby("cluster")["in_service_card_hours"].sum()
    applies = pd.Series(
        measured_applies(cluster_covered.reindex(cluster_period.index).fillna(0.0), cluster_period),
        index=cluster_period.index,
    )
    cluster_of_pool = covered.drop_duplicates("pool").set_index("pool")["cluster"]
    return ratio.where(cluster_of_pool.reindex(ratio.index).map(applies).fillna(False).astype(bool))

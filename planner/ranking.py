"""Ranking plan options by cost and by days, and their Pareto front, within each currency."""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.capacity import pareto_front


def rank_options(plan: pd.DataFrame) -> pd.DataFrame:
    """Ranks and Pareto flags over the whole plan (chunks were evaluated separately), within
    each currency: costs in different currencies are never compared."""
    feasible = plan["feasible"].to_numpy(dtype=bool)
    cost = pd.Series(np.where(feasible, plan["total_cost"].to_numpy(np.float64), np.nan))
    days = pd.Series(np.where(feasible, plan["days"].to_numpy(np.float64), np.nan))
    currency = pd.Series(plan["currency"].astype(str).to_numpy())
    plan["rank_by_cost"] = cost.groupby(currency).rank(method="min").to_numpy()
    plan["rank_by_days"] = days.groupby(currency).rank(method="min").to_numpy()
    front = np.zeros(len(plan), dtype=bool)
    for positions in currency.groupby(currency).indices.values():
        front[positions] = pareto_front(days.to_numpy()[positions], cost.to_numpy()[positions])
    plan["on_pareto_front"] = front
    return plan


def ranked(plan: pd.DataFrame, column: str) -> list[int]:
    """Option ids currency by currency, each in its rank order."""
    rows = plan[plan[column].notna()]
    return rows.sort_values(["currency", column], kind="stable").index.tolist()


def first_by_currency(plan: pd.DataFrame, column: str) -> dict[str, int]:
    """Currency → the option ranked first within it (currencies sorted; none without a rank)."""
    rows = plan[plan[column].notna()]
    order = rows.sort_values(["currency", column], kind="stable")
    return {str(c): int(ids[0]) for c, ids in order.groupby("currency", sort=True).groups.items()}


def first_by(plan: pd.DataFrame, column: str) -> int | None:
    """The option ranked first; None when the ranked options use several currencies."""
    ranked = plan[column].dropna()
    if plan.loc[ranked.index, "currency"].nunique() > 1:
        return None
    return None if ranked.empty else int(ranked.sort_values(kind="stable").index[0])

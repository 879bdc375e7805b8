"""Chargeback per team and bucket: used card-hours at cost plus a share of the idle cost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from accounting.selectors.costs import PoolCosts, pool_costs
from accounting.selectors.frames import NO_ACCOUNT, AccountingQueryError, AccountingScope
from accounting.selectors.uncovered import UNCOVERED_TEAM
from core.frames import json_rows, json_value
from engine.cost import (
    IDLE_RULES,
    chargeback,
)
from engine.usage import allocated_by_bucket


def chargeback_report(
    scope: AccountingScope,
    usage: pd.DataFrame | None = None,
    costs: PoolCosts | None = None,
    activity: Callable[[pd.DataFrame, pd.DatetimeIndex], pd.Series] | None = None,
) -> dict[str, Any]:
    """Chargeback per team and bucket: used card-hours at cost plus an idle share.

    Each pool's used card-hours are priced at its ``used_cost_per_card_hour`` (ownership +
    busy energy); its idle cost is shared by ``scope.idle_rule`` (none, proportional, even;
    :func:`engine.cost.chargeback`). Per currency and bucket, the charges sum to the
    total cost of the pools in scope. Each row's ``chargeback_cost`` is its ``used_cost`` +
    ``idle_cost_share`` + ``uncovered_cost`` (hours without usage records: only on the row
    "(no usage records, not charged)", which no team pays). With ``scope.team`` only that
    team's rows are listed, the totals still cover every team. ``costs`` as in
    :func:`cost_report` (its usage must carry the teams). ``activity``: charge by measured
    activity instead of allocation, a factor per team row
    (telemetry.selectors.activity_factors).
    """
    if scope.idle_rule not in IDLE_RULES:
        raise AccountingQueryError({"idle_rule": f"Must be one of {', '.join(IDLE_RULES)}."})
    costs = costs if costs is not None else pool_costs(scope, usage)
    rows: list[dict[str, Any]] = []
    totals: list[dict[str, Any]] = []
    if not costs.units.empty:
        team_usage = _team_usage(scope, costs, activity)
        rows, totals = _charged_rows(scope, costs.units, team_usage)
    return {
        "period_start": scope.period_start,
        "period_end": scope.period_end,
        "granularity": scope.granularity,
        "idle_rule": scope.idle_rule,
        "rows": rows,
        "totals": totals,
        "warnings": costs.warnings,
    }


def _team_usage(
    scope: AccountingScope,
    costs: PoolCosts,
    activity: Callable[[pd.DataFrame, pd.DatetimeIndex], pd.Series] | None,
) -> pd.DataFrame:
    """Used card-hours per team and pool-bucket unit, capped as the pool's were."""
    units = costs.units
    usage = costs.usage
    team_usage = allocated_by_bucket(usage, costs.edges, ["pool", "account"])
    team_usage["pool"] = team_usage["pool"].astype("int64")
    # Teams are charged on priced hours their records cover (the rest: warnings, own rows).
    chargeable = units["covered"] & units["total_cost"].notna()
    unit_of = units[chargeable].set_index(["pool_id", "bucket_start"])["unit"]
    bucket_starts = costs.edges.tz_convert(scope.tz)[:-1]
    keys = pd.MultiIndex.from_arrays(
        [team_usage["pool"], bucket_starts[team_usage["_bucket"].to_numpy()]]
    )
    team_usage["unit"] = unit_of.reindex(keys).to_numpy()
    team_usage = team_usage[team_usage["unit"].notna()].copy()
    team_usage["unit"] = team_usage["unit"].astype("int64")
    # Records beyond the inventory were capped in pool_costs: scale the teams alike.
    used_total = team_usage.groupby("unit")["allocated_card_hours"].transform("sum")
    capped = team_usage["unit"].map(units.set_index("unit")["allocated_card_hours"])
    scale = (capped / used_total.where(used_total > 0)).clip(upper=1.0).fillna(1.0)
    team_usage["used_card_hours"] = team_usage["allocated_card_hours"] * scale
    if activity is not None:
        team_usage["used_card_hours"] *= activity(team_usage, bucket_starts).to_numpy()
    return team_usage


def chargeback_frames(
    scope: AccountingScope, costs: PoolCosts
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`chargeback_report`'s rows (in its order) and bills as frames, before JSON (the
    dashboards sum them); empty frames when no pool costs anything."""
    if costs.units.empty:
        return pd.DataFrame(), pd.DataFrame()
    team_usage = _team_usage(scope, costs, None)
    charged, bills = _charged_frame(scope, costs.units, team_usage)
    return charged.sort_values(["currency", "bucket_start"], kind="stable"), bills


def _charged_rows(
    scope: AccountingScope, units: pd.DataFrame, team_usage: pd.DataFrame
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each team's charge per bill (currency × bucket), and each bill's total and charged sum."""
    bill_keys = ["currency", "bucket_start"]
    charged, bills = _charged_frame(scope, units, team_usage)
    charged_by_bill = charged.groupby(bill_keys, sort=True)["chargeback_cost"].sum()
    # Rows bill by bill in time order, as the report always listed them.
    charged = charged.sort_values(bill_keys, kind="stable")
    columns = [c for c in charged.columns if c not in ("currency", "bucket_start", "bucket_end")]
    rows = json_rows(charged[[*columns, "currency", "bucket_start", "bucket_end"]])
    totals = [
        {
            "currency": currency,
            "bucket_start": json_value(bucket_start),
            "bucket_end": json_value(bill["bucket_end"]),
            "total_cost": float(bill["total_cost"]),
            "charged_cost": float(charged_by_bill.get((currency, bucket_start), 0.0)),
        }
        for (currency, bucket_start), bill in bills.iterrows()
    ]
    return rows, totals


def _charged_frame(
    scope: AccountingScope, units: pd.DataFrame, team_usage: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each team's charge per bill (currency × bucket) and the bills with their totals."""
    pool_rows = units[
        ["unit", "currency", "bucket_start", "bucket_end", "total_cost"]
        + ["used_cost_per_card_hour", "allocated_card_hours"]
    ]
    # One bill per currency and bucket, all charged in one pass.
    bill_keys = ["currency", "bucket_start"]
    charged = chargeback(
        team_usage[["unit", "account", "used_card_hours"]],
        pool_rows[(units["covered"] & units["total_cost"].notna()).to_numpy()],
        pool_keys=("unit",),
        team_column="account",
        idle_rule=scope.idle_rule,  # type: ignore[arg-type]
        scope_keys=bill_keys,
    )
    # Teams' rows have no uncovered money; per row used + idle share + uncovered = chargeback.
    charged = pd.concat(
        [charged.assign(uncovered_cost=0.0), _uncovered_rows(units, bill_keys)], ignore_index=True
    )
    bills = pool_rows.groupby(bill_keys, sort=True).agg(
        bucket_end=("bucket_end", "first"), total_cost=("total_cost", "sum")
    )
    charged = charged.rename(columns={"account": "team"})
    charged["team"] = charged["team"].fillna(NO_ACCOUNT)
    bill_of_row = pd.MultiIndex.from_frame(charged[bill_keys])
    bill_total = bills["total_cost"].reindex(bill_of_row).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        charged["share_of_total"] = np.where(
            bill_total != 0, charged["chargeback_cost"].to_numpy() / bill_total, np.nan
        )
    charged["bucket_end"] = bills["bucket_end"].reindex(bill_of_row).to_numpy()
    if scope.team is not None:
        charged = charged[charged["team"] == scope.team]
    return charged, bills


def _uncovered_rows(units: pd.DataFrame, bill_keys: list[str]) -> pd.DataFrame:
    """Per bill, the money of hours without usage records: not charged to any team."""
    uncovered = units[~units["covered"] & units["total_cost"].notna()]
    if uncovered.empty:
        return pd.DataFrame()
    rows = uncovered.groupby(bill_keys, sort=True)["total_cost"].sum().reset_index()
    return pd.DataFrame(
        {
            **{key: rows[key] for key in bill_keys},
            "account": UNCOVERED_TEAM,
            "used_card_hours": 0.0,
            "used_cost": 0.0,
            "idle_cost_share": 0.0,
            "uncovered_cost": rows["total_cost"],
            "chargeback_cost": rows["total_cost"],
        }
    )

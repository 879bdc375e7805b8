"""Bridge between the inventory (Django) and the pure engine: frames in, JSON-safe rows out.

`inventory.frames` builds the engine's input frames for a cluster and prices them (the one
money path shared with Costs, reports and plans); `evaluate_cluster` runs
the engine for one part of an analysis, `summarise` aggregates the parts to the scope.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accounting.coverage import COVERAGE_COLUMNS, scope_coverage_summary
from accounting.selectors import apply_measured_usage
from core.frames import json_rows, json_value
from core.scopes import Scope
from engine.aggregate import aggregate_factors
from engine.defaults import DEFAULTS
from engine.evaluate import evaluate_pools
from engine.factors import FACTOR_NAMES
from inventory.frames import node_group_frame, pool_frame, price_pools, unpriced_reason
from inventory.validity import invalid_clusters
from planner.analysis_rows import with_training_params
from planner.measured_sources import TELEMETRY_COLUMNS, apply_telemetry
from planner.meters import flag_meters_outside_period
from planner.models import Analysis
from planner.money import money_by_currency, without_mixed_money
from planner.serving_factors import (
    SERVING_COLUMNS,
    SERVING_NOTE,
    aggregate_labels,
    apply_serving_factors,
    with_serving_columns,
)

HOURS_PER_YEAR = 8760.0

# The order of the waterfall charts: from allocation down to energy (docs/efficiency-model.md).
WATERFALL_ORDER = ("utilization", "effective_time", "scaling", "mfu", "energy")


def _period_hours(analysis: Analysis) -> float:
    return (analysis.period_end - analysis.period_start).total_seconds() / 3600.0


def _price(pools: pd.DataFrame, groups: pd.DataFrame, evaluated: pd.DataFrame):
    """Money of each pool over the period, and the price of one of its card-hours."""
    units = pools.set_index("pool_id", drop=False).reindex(evaluated.index)
    _, costs = price_pools(
        units,
        groups,
        card_hours=evaluated["card_hours"],
        allocated_card_hours=evaluated["card_hours"] * evaluated["utilization"],
        pue=evaluated["pue"],
        effective_utilization=evaluated["product"],
    )
    return costs, costs["total_cost"] / evaluated["card_hours"]


def evaluate_frames(pools: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    """Engine result per pool, priced; pools without cards are left out."""
    pools = pools[pools["pool_id"].isin(groups["pool_id"])]
    if pools.empty:
        return pd.DataFrame()
    # Inference pools: serving definitions replace the training factors before pricing.
    first = apply_serving_factors(evaluate_pools(groups, pools), pools)
    costs, cost_per_card_hours = _price(pools, groups, first)
    priced = pools.assign(
        cost_per_card_hours=cost_per_card_hours.reindex(pools["pool_id"]).to_numpy()
    )
    result = apply_serving_factors(evaluate_pools(groups, priced), priced)
    label_columns = ["pool", "cluster", "site", "currency", "purpose"]
    passed = (*COVERAGE_COLUMNS, *TELEMETRY_COLUMNS, *SERVING_COLUMNS)
    label_columns += [name for name in passed if name in pools]
    labels = pools.set_index("pool_id")[label_columns]
    mix = (
        groups.assign(cards=groups["nodes"] * groups["cards_per_node"])
        .groupby(["pool_id", "accelerator"])["cards"]
        .sum()
    )
    result = result.join(labels).join(
        costs[
            [
                "total_cost",
                "energy_cost",
                "energy_overhead_cost",
                "compute_cost",
                "idle_cost",
                "cost_per_effective_pflop_day",
                "it_energy_mwh",
                "it_energy_provenance",
                "facility_energy_mwh",
                "co2_tonnes",
            ]
        ]
    )
    result["cost_per_card_hours"] = cost_per_card_hours
    result["cost_reason"] = unpriced_reasons(costs["cost_basis"], result["cluster"])
    result["factor_note"] = np.where(result["purpose"] == "inference", SERVING_NOTE, "")
    if "serving_tokens_per_s" in result:
        result = with_serving_cost(result, pools.set_index("pool_id")["duration_h"])
    result = with_training_params(result, pools)  # which counts a named model used
    result["card_mix"] = [
        {name: int(count) for name, count in mix.loc[pool_id].items()} for pool_id in result.index
    ]
    return result


SECONDS_PER_HOUR = 3600.0
TRAINING_COST_FIGURE = "training pool: its figure is cost_per_effective_pflop_day"


def with_serving_cost(result: pd.DataFrame, duration_h: pd.Series) -> pd.DataFrame:
    """Inference pools get cost per million tokens served (total cost ÷ the measured served
    tokens/s × the period's hours) in place of cost per effective PFLOP-day, a training figure;
    null with its reason where the served tokens or the cost are unknown."""
    serving = result["purpose"] == "inference"
    tokens_million = (
        result["serving_tokens_per_s"] * SECONDS_PER_HOUR * duration_h.reindex(result.index) / 1e6
    )
    measured = serving & result["serving_utilization"].notna() & tokens_million.gt(0)
    per_million = (result["total_cost"] / tokens_million).where(measured)
    unknown = serving & per_million.isna()
    reasons = pd.Series(None, index=result.index, dtype=object)
    reasons[~serving] = TRAINING_COST_FIGURE
    no_load = unknown & ~measured
    reasons[no_load] = "no measured serving load: " + result.loc[no_load, "serving_reason"]
    no_cost = unknown & measured
    reasons[no_cost] = result.loc[no_cost, "cost_reason"].fillna("no cost")
    result["cost_per_million_tokens"] = per_million
    result["cost_per_million_tokens_reason"] = reasons
    result.loc[serving, "cost_per_effective_pflop_day"] = np.nan  # a training figure
    return result


def evaluate_cluster(analysis: Analysis, cluster_id: int) -> tuple[list[dict], dict]:
    """One part: every pool of a cluster (or the one pool of a pool-scope analysis)."""
    pool_id = analysis.object_id if analysis.scope == Scope.POOL else None
    if invalid := invalid_clusters([cluster_id]):  # name the object, not the engine's column
        raise ValueError(invalid[cluster_id])
    pools = pool_frame(cluster_id, pool_id, _period_hours(analysis))
    if pools.empty:
        return [], {"cluster_id": cluster_id, "pools": [], "node_groups": []}
    pools = flag_meters_outside_period(pools, analysis.period_start, analysis.period_end)
    groups = node_group_frame(pools["pool_id"].tolist())
    if not groups.empty:
        # Usage covering enough of the period replaces modeled values (accounting.coverage).
        pools, groups = apply_measured_usage(
            pools, groups, cluster_id, analysis.period_start, analysis.period_end
        )
        # DCGM telemetry covering enough of the period gives the pool's MFU proxy.
        pools = apply_telemetry(pools, groups, analysis.period_start, analysis.period_end)
        # Inference pools: MBU, availability and measured serving load (serving_factors).
        pools = with_serving_columns(pools, groups, analysis.period_start, analysis.period_end)
    inputs = {
        "cluster_id": cluster_id,
        "pools": json_rows(pools, index=True),
        "node_groups": json_rows(groups, index=True),
    }
    if groups.empty:
        return [], inputs
    return json_rows(evaluate_frames(pools, groups), index=True), inputs


def unpriced_reasons(cost_basis: pd.Series, cluster: pd.Series) -> pd.Series:
    """Why a pool has no total cost (None where it is priced)."""
    unpriced = cost_basis.reindex(cluster.index) == "none"
    return pd.Series(
        [
            unpriced_reason(name) if flag else None
            for name, flag in zip(cluster, unpriced, strict=True)
        ],
        index=cluster.index,
        dtype=object,
    )


def inference_notes(frame: pd.DataFrame) -> list[str]:
    """Name the inference pools, whose factors have serving definitions, and how they count."""
    names = sorted(frame.loc[frame["purpose"] == "inference", "pool"].astype(str))
    if not names:
        return []
    return [
        f"{', '.join(names)}: {SERVING_NOTE}; included in the totals as their share of the "
        "cards' peak (MBU × availability × utilization × energy)."
    ]


def _aggregate(frame: pd.DataFrame, by: list[str]) -> list[dict]:
    summary = aggregate_factors(frame, by or None)
    if by:
        names = frame.drop_duplicates(by).set_index(by)[
            [{"site_id": "site", "cluster_id": "cluster"}[by[-1]]]
        ]
        summary = summary.join(names, on=by)
        # Which definitions the aggregated MFU and effective time blend (serving_factors).
        labels = pd.DataFrame(
            [
                {**dict(zip(by, key, strict=True)), **aggregate_labels(definitions)}
                for key, definitions in frame.groupby(by)["factor_definitions"]
            ]
        ).set_index(by)
        summary = summary.join(labels, on=by)
    return json_rows(summary, index=True)


def summarise(analysis: Analysis, parts) -> tuple[dict, dict]:
    """Aggregate the parts' pool rows to the scope; return (results, input snapshot)."""
    rows = [row for part in parts for row in part.pool_rows]
    snapshot = {
        "period_start": analysis.period_start.isoformat(),
        "period_end": analysis.period_end.isoformat(),
        "clusters": [part.inputs for part in sorted(parts, key=lambda p: p.cluster_id)],
        "defaults": {key: entry.value for key, entry in DEFAULTS.items()},
    }
    base = {
        "period_hours": _period_hours(analysis),
        "factor_names": list(FACTOR_NAMES),
        "waterfall_order": list(WATERFALL_ORDER),
        "attribution": "lost share split over factors in proportion to -ln(factor)",
        "headline": "aggregate_of_products",
    }
    if not rows:
        return {
            **base,
            "summary": None,
            "pools": [],
            "clusters": [],
            "sites": [],
            "note": "No cards in this scope.",
        }, snapshot
    frame = pd.DataFrame.from_records(rows)
    for name in FACTOR_NAMES:
        frame[f"{name}_provenance"] = frame[f"{name}_provenance"].astype(str)
    summary = json_rows(aggregate_factors(frame, None), index=True)[0]
    summary["currency"] = frame["currency"].iloc[0] if frame["currency"].nunique() == 1 else None
    summary.update(aggregate_labels(frame["factor_definitions"]))
    summary["coverage"] = scope_coverage_summary(frame)
    summary["notes"] = inference_notes(frame) + sorted(
        set(frame.get("cost_reason", pd.Series(dtype=object)).dropna())
    )
    summary["total_cost"] = json_value(frame["total_cost"].sum(min_count=1))
    # Money is never added across currencies: per currency, and no mixed total.
    summary["money_by_currency"] = money_by_currency(frame)
    summary = without_mixed_money(summary, frame["currency"].nunique())
    results = {
        **base,
        "summary": summary,
        "sites": _aggregate(frame, ["site_id"]),
        "clusters": _aggregate(frame, ["site_id", "cluster_id"]),
        "pools": rows,
    }
    return results, snapshot

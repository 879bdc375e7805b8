"""Bridge between the inventory (Django) and the pure engine: frames in, JSON-safe rows out.

One query per table builds the engine's input frames for a cluster; `evaluate_cluster` runs
the engine for one part of an analysis, `summarise` aggregates the parts to the scope.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from accounting.selectors import apply_measured_usage
from config.frames import json_rows, json_value
from inventory.models import NodeGroup, Pool
from planner.engine.aggregate import aggregate_factors
from planner.engine.cost import energy_and_cost
from planner.engine.defaults import DEFAULTS, layer_overrides
from planner.engine.evaluate import evaluate_pools
from planner.engine.factors import FACTOR_NAMES
from planner.models import Analysis, Scope

HOURS_PER_YEAR = 8760.0

# Pool purpose → the engine's workload class (a mixed pool is sized for its training jobs).
WORKLOAD_CLASS = {"training": "pretraining", "inference": "inference", "mixed": "pretraining"}

# The order of the waterfall charts: from allocation down to energy (spec §1).
WATERFALL_ORDER = ("utilization", "effective_time", "scaling", "mfu", "energy")


def _period_hours(analysis: Analysis) -> float:
    return (analysis.period_end - analysis.period_start).total_seconds() / 3600.0


def node_group_frame(pool_ids: list[int]) -> pd.DataFrame:
    rows = NodeGroup.objects.filter(pool_id__in=pool_ids).values(
        "pool_id",
        "name",
        "node_count",
        "cards_per_node",
        "mfu",
        "accelerator__name",
        "accelerator__vendor",
        "accelerator__dense_bf16_tflops",
        "accelerator__intra_node_interconnect_gbs",
        "accelerator__default_training_mfu",
        "accelerator__tdp_w",
    )
    frame = pd.DataFrame.from_records(list(rows))
    if frame.empty:
        return frame
    frame = frame.rename(
        columns={
            "node_count": "nodes",
            "accelerator__name": "accelerator",
            "accelerator__vendor": "vendor",
            "accelerator__dense_bf16_tflops": "peak_tflops",
            "accelerator__intra_node_interconnect_gbs": "nvlink_bidir_gbs",
            "accelerator__default_training_mfu": "default_mfu",
            "accelerator__tdp_w": "tdp_w",
        }
    )
    frame["mfu"] = frame["mfu"].astype(float)
    return frame[frame["nodes"] * frame["cards_per_node"] > 0].reset_index(drop=True)


def _overrides_frame(records: list[dict], id_key: str) -> pd.DataFrame:
    table = {row[id_key]: row["assumptions"] or {} for row in records}
    frame = pd.DataFrame.from_dict(table, orient="index")
    return frame.dropna(axis=1, how="all") if not frame.empty else frame


def pool_frame(
    cluster_id: int | Sequence[int], pool_id: int | None, duration_h: float
) -> pd.DataFrame:
    """The engine's pool inputs of one cluster (or of several, in one query)."""
    if isinstance(cluster_id, int):
        pools = Pool.objects.filter(cluster_id=cluster_id)
    else:
        # Cluster by cluster, as one query per cluster would have listed them.
        pools = Pool.objects.filter(cluster_id__in=cluster_id).order_by("cluster_id", "name")
    if pool_id is not None:
        pools = pools.filter(pk=pool_id)
    records = list(
        pools.values(
            "id",
            "name",
            "purpose",
            "planned_utilization",
            "assumptions",
            "cluster_id",
            "cluster__name",
            "cluster__fabric",
            "cluster__inter_node_bandwidth_gbps_per_card",
            "cluster__capital_cost_per_card",
            "cluster__amortization_years",
            "cluster__yearly_opex",
            "cluster__rental_price_per_card_hour",
            "cluster__assumptions",
            "cluster__site_id",
            "cluster__site__name",
            "cluster__site__cooling_type",
            "cluster__site__pue",
            "cluster__site__metered_facility_energy_kwh",
            "cluster__site__metered_it_energy_kwh",
            "cluster__site__tariff_per_kwh",
            "cluster__site__currency",
            "cluster__site__grid_carbon_g_per_kwh",
            "cluster__site__assumptions",
        )
    )
    frame = pd.DataFrame.from_records(
        [
            {
                "pool_id": r["id"],
                "pool": r["name"],
                "purpose": r["purpose"],
                "cluster_id": r["cluster_id"],
                "cluster": r["cluster__name"],
                "site_id": r["cluster__site_id"],
                "site": r["cluster__site__name"],
                "currency": r["cluster__site__currency"],
                "cooling": r["cluster__site__cooling_type"],
                "fabric": r["cluster__fabric"],
                "workload_class": WORKLOAD_CLASS[r["purpose"]],
                "duration_h": duration_h,
                "pue": r["cluster__site__pue"],
                "facility_kwh": r["cluster__site__metered_facility_energy_kwh"],
                "it_kwh": r["cluster__site__metered_it_energy_kwh"],
                "utilization_planned": r["planned_utilization"],
                "inter_node_gbit_s_per_card": r["cluster__inter_node_bandwidth_gbps_per_card"],
                "tariff_per_kwh": r["cluster__site__tariff_per_kwh"],
                "grid_carbon_g_per_kwh": r["cluster__site__grid_carbon_g_per_kwh"],
                "capital_cost_per_card": r["cluster__capital_cost_per_card"],
                "amortization_years": r["cluster__amortization_years"],
                "cluster_yearly_opex": r["cluster__yearly_opex"],
                "rental_price_per_card_hour": r["cluster__rental_price_per_card_hour"],
                **(r["assumptions"] or {}),
            }
            for r in records
        ]
    )
    if frame.empty:
        return frame
    numeric = [
        "pue",
        "facility_kwh",
        "it_kwh",
        "utilization_planned",
        "capital_cost_per_card",
        "amortization_years",
        "cluster_yearly_opex",
        "rental_price_per_card_hour",
    ]
    frame[numeric] = frame[numeric].astype(float)
    site_overrides = _overrides_frame(
        [
            {"id": r["cluster__site_id"], "assumptions": r["cluster__site__assumptions"]}
            for r in records
        ],
        "id",
    )
    cluster_overrides = _overrides_frame(
        [{"id": r["cluster_id"], "assumptions": r["cluster__assumptions"]} for r in records], "id"
    )
    return layer_overrides(frame, site_overrides, cluster_overrides)


def _cost_per_card_hour(pools: pd.DataFrame, groups: pd.DataFrame, evaluated: pd.DataFrame):
    """Price of one card-hour of each pool over the period (ownership or rental + energy)."""
    cards = groups.assign(cards=groups["nodes"] * groups["cards_per_node"])
    watts = (cards["cards"] * cards["tdp_w"]).groupby(cards["pool_id"]).sum()
    card_count = cards.groupby("pool_id")["cards"].sum()
    per_pool = pools.set_index("pool_id")
    cluster_cards = card_count.groupby(per_pool["cluster_id"].reindex(card_count.index)).transform(
        "sum"
    )
    cost_input = pd.DataFrame(
        {
            "card_hours": evaluated["card_h"],
            "allocated_card_hours": evaluated["card_h"] * evaluated["utilization"],
            "tdp_w": watts / card_count,
            "pue": evaluated["pue"],
            "tariff_per_kwh": per_pool["tariff_per_kwh"],
            "grid_carbon_g_per_kwh": per_pool["grid_carbon_g_per_kwh"],
            "capital_cost_per_card": per_pool["capital_cost_per_card"],
            "amortization_years": per_pool["amortization_years"],
            # The inventory keeps opex per cluster; the cost model wants it per card.
            "yearly_opex_per_card": per_pool["cluster_yearly_opex"] / cluster_cards,
            "rental_price_per_card_hour": per_pool["rental_price_per_card_hour"],
            "peak_tflops": evaluated["peak_pflops"] * 1000.0 / card_count,
            "effective_utilization": evaluated["product"],
        },
        index=evaluated.index,
    )
    costs = energy_and_cost(cost_input)
    return costs, costs["total_cost"] / cost_input["card_hours"]


def evaluate_frames(pools: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    """Engine result per pool, priced; pools without cards are left out."""
    pools = pools[pools["pool_id"].isin(groups["pool_id"])]
    if pools.empty:
        return pd.DataFrame()
    first = evaluate_pools(groups, pools)
    costs, cost_per_card_h = _cost_per_card_hour(pools, groups, first)
    priced = pools.assign(cost_per_card_h=cost_per_card_h.reindex(pools["pool_id"]).to_numpy())
    result = evaluate_pools(groups, priced)
    labels = pools.set_index("pool_id")[["pool", "cluster", "site", "currency", "purpose"]]
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
                "facility_energy_mwh",
                "co2_tonnes",
            ]
        ]
    )
    result["cost_per_card_h"] = cost_per_card_h
    result["card_mix"] = [
        {name: int(count) for name, count in mix.loc[pool_id].items()} for pool_id in result.index
    ]
    return result


def evaluate_cluster(analysis: Analysis, cluster_id: int) -> tuple[list[dict], dict]:
    """One part: every pool of a cluster (or the one pool of a pool-scope analysis)."""
    pool_id = analysis.object_id if analysis.scope == Scope.POOL else None
    pools = pool_frame(cluster_id, pool_id, _period_hours(analysis))
    if pools.empty:
        return [], {"cluster_id": cluster_id, "pools": [], "node_groups": []}
    groups = node_group_frame(pools["pool_id"].tolist())
    if not groups.empty:
        # Usage records that cover the period replace modeled values (provenance measured).
        pools, groups = apply_measured_usage(
            pools, groups, cluster_id, analysis.period_start, analysis.period_end
        )
    inputs = {
        "cluster_id": cluster_id,
        "pools": json_rows(pools, index=True),
        "node_groups": json_rows(groups, index=True),
    }
    if groups.empty:
        return [], inputs
    return json_rows(evaluate_frames(pools, groups), index=True), inputs


def _aggregate(frame: pd.DataFrame, by: list[str]) -> list[dict]:
    summary = aggregate_factors(frame, by or None)
    if by:
        names = frame.drop_duplicates(by).set_index(by)[
            [{"site_id": "site", "cluster_id": "cluster"}[by[-1]]]
        ]
        summary = summary.join(names, on=by)
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
    summary["total_cost"] = json_value(frame["total_cost"].sum(min_count=1))
    results = {
        **base,
        "summary": summary,
        "sites": _aggregate(frame, ["site_id"]),
        "clusters": _aggregate(frame, ["site_id", "cluster_id"]),
        "pools": rows,
    }
    return results, snapshot

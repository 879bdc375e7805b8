"""The one adapter from the inventory (and measured usage) to the engine, and the one money path.

Analyses (`planner.analysis`), the Costs page and reports (`accounting.selectors.pool_costs`)
and capacity plans (`planner.plans`) all read pools and node groups here, turn a cluster's
yearly opex into opex per card here, and price a pool with :func:`price_pools`; so the same
pool over the same hours costs the same on every page.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from django.db.models import F, Sum

from engine.cost import energy_and_cost
from engine.defaults import layer_overrides
from inventory.models import NodeGroup, Pool
from inventory.pool_models import model_counts

# Pool purpose → the engine's workload class (a mixed pool is sized for its training jobs).
WORKLOAD_CLASS = {"training": "pretraining", "inference": "inference", "mixed": "pretraining"}

# The inventory columns that price a card-hour (besides hours, PUE and card power).
PRICE_COLUMNS = (
    "tariff_per_kwh",
    "grid_carbon_g_per_kwh",
    "capital_cost_per_card",
    "amortization_years",
    "rental_price_per_card_hour",
)


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
        "accelerator__nvlink_domain_cards",
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
            "accelerator__nvlink_domain_cards": "nvlink_domain_cards",
            "accelerator__default_training_mfu": "default_mfu",
            "accelerator__tdp_w": "tdp_w",
        }
    )
    frame["mfu"] = frame["mfu"].astype(float)
    frame["nvlink_domain_cards"] = frame["nvlink_domain_cards"].astype(float)  # None → NaN
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
            "model_name",
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
    layered = layer_overrides(frame, site_overrides, cluster_overrides)
    return with_model_counts(layered, [r["model_name"] for r in records])


def with_model_counts(frame: pd.DataFrame, model_names: Sequence[str]) -> pd.DataFrame:
    """Pools that name a catalog model take its counts: ``model_params`` (the total, over any
    site, cluster or pool override), ``model_active_params`` (MFU's N) and
    ``model_replicated_params`` (the gradient all-reduce's). Unchanged when none names one."""
    counts = [model_counts(name) for name in model_names]
    if not any(counts):  # the frame stays as it was before pools named models
        return frame
    named = pd.Series([c is not None for c in counts], index=frame.index)
    frame = frame.assign(
        model_name=[c.name if c else None for c in counts],
        model_active_params=[c.active if c else np.nan for c in counts],
        model_replicated_params=[c.replicated if c else np.nan for c in counts],
    )
    totals = pd.Series([c.total if c else np.nan for c in counts], index=frame.index)
    given = frame.get("model_params", np.nan)
    frame["model_params"] = totals.where(named, given).astype(float)
    return frame


def cluster_cards(cluster_ids: Sequence[int]) -> pd.Series:
    """Cards per cluster over all its node groups (the base that opex is spread over)."""
    rows = (
        NodeGroup.objects.filter(pool__cluster_id__in=list(cluster_ids))
        .values("pool__cluster_id")
        .annotate(cards=Sum(F("node_count") * F("cards_per_node")))
        .values_list("pool__cluster_id", "cards")
    )
    return pd.Series(dict(rows), dtype="float64")


def opex_per_card(yearly_opex: pd.Series, cards: pd.Series) -> pd.Series:
    """The inventory keeps opex per cluster; the cost model wants it per card-year."""
    return yearly_opex.astype("float64").fillna(0.0) / cards.astype("float64").where(cards > 0)


def card_profile(groups: pd.DataFrame) -> pd.DataFrame:
    """Per pool: cards, and card-weighted TDP (W) and dense peak (TFLOPS) of its node groups."""
    cards = groups["nodes"] * groups["cards_per_node"]
    weights = pd.DataFrame(
        {
            "pool_id": groups["pool_id"],
            "cards": cards,
            "tdp": cards * groups["tdp_w"],
            "peak": cards * groups["peak_tflops"],
        }
    )
    summed = weights.groupby("pool_id")[["cards", "tdp", "peak"]].sum()
    return pd.DataFrame(
        {
            "cards": summed["cards"].astype("float64"),
            "tdp_w": summed["tdp"] / summed["cards"],
            "peak_tflops": summed["peak"] / summed["cards"],
        }
    )


def unpriced_reason(cluster: str) -> str:
    """Why a cluster's money is no data: the cost model has no price for its cards."""
    return (
        f"cluster {cluster} has no capital cost or rental price: its ownership cost is unknown, "
        "so its total cost, idle and lost money are no data (energy is priced)"
    )


def price_pools(
    units: pd.DataFrame,
    groups: pd.DataFrame,
    *,
    card_hours: pd.Series,
    allocated_card_hours: pd.Series,
    pue: pd.Series,
    effective_utilization: pd.Series,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Price each unit (a pool over a period or a bucket): (cost inputs, energy and money).

    ``units``: one row per unit with ``pool_id``, ``cluster_id``, ``cluster_yearly_opex`` and
    :data:`PRICE_COLUMNS` (from :func:`pool_frame`); ``groups``: the node groups
    (:func:`node_group_frame`); the series are aligned with ``units``. Opex is spread over all
    the cluster's cards, whichever pools are in ``units``.
    """
    profile = card_profile(groups)
    per_card_opex = opex_per_card(
        units["cluster_yearly_opex"],
        units["cluster_id"].map(cluster_cards(units["cluster_id"].unique().tolist())),
    )
    cost_input = pd.DataFrame(
        {
            "card_hours": card_hours,
            "allocated_card_hours": allocated_card_hours,
            "tdp_w": units["pool_id"].map(profile["tdp_w"]),
            "pue": pue,
            **{name: units[name] for name in PRICE_COLUMNS},
            "yearly_opex_per_card": per_card_opex,
            "peak_tflops": units["pool_id"].map(profile["peak_tflops"]),
            "effective_utilization": effective_utilization,
        },
        index=units.index,
    )
    if "measured_it_kwh" in units:  # telemetry's measured IT energy (planner.measured_sources)
        cost_input["measured_it_kwh"] = units["measured_it_kwh"]
    return cost_input, energy_and_cost(cost_input)

"""Stored analysis results → rows and frames for the fleet and analyses pages.

Everything here reads `Analysis.results` (and, for the card speeds of a mixed pool, the
input snapshot) as the worker stored them: no engine call and no inventory query per
request, so the pages stay fast however large the fleet is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from django.db.models import Q

from core.jobs.status import JobStatus
from core.scopes import Scope
from engine.defaults import STRATEGIES
from engine.factors import FACTOR_LABELS, FACTOR_NAMES
from planner.analysis import WATERFALL_ORDER
from planner.models import Analysis

STRATEGY_LABELS = {
    "synchronous_uniform": "Synchronous, equal shares",
    "static_proportional": "Static, shares by speed",
    "dynamic_fine_grained": "Dynamic, fine-grained",
    "split_homogeneous": "Split into one job per card model",
}
IN_FLIGHT = (JobStatus.QUEUED, JobStatus.RUNNING)
# Summary key of the scope selector: the analysis' own scope (fleet, or its site/cluster/pool).
SUMMARY = "all"


class UnknownScopeError(LookupError):
    """The scope key names no site, cluster or pool of this analysis."""


# --- which analyses ---------------------------------------------------------------------


def analyses_light():
    """Analyses without the (large) input snapshot."""
    return Analysis.objects.defer("input_snapshot")


def latest_fleet_analysis() -> Analysis | None:
    """The fleet analysis with the most recent successful result (a failed rerun keeps it)."""
    return (
        analyses_light()
        .filter(scope=Scope.FLEET, succeeded_at__isnull=False, results__isnull=False)
        .order_by("-succeeded_at", "-pk")
        .first()
    )


def fleet_analysis_in_flight() -> Analysis | None:
    """The newest fleet analysis still queued or running (its progress shows on the fleet page)."""
    return (
        Analysis.objects.filter(scope=Scope.FLEET, status__in=IN_FLIGHT)
        .only("pk", "status", "progress", "scope", "period_start", "period_end")
        .order_by("-created", "-pk")
        .first()
    )


def stale_count() -> int:
    return Analysis.objects.filter(stale=True).count()


def list_analyses(stale_only: bool = False):
    """The analyses list: no results or snapshots loaded (they can be megabytes)."""
    rows = Analysis.objects.only(
        "pk",
        "scope",
        "object_id",
        "scope_label",
        "period_start",
        "period_end",
        "status",
        "progress",
        "stale",
        "error",
        "succeeded_at",
        "finished_at",
        "created",
    ).order_by("-created", "-pk")
    return rows.filter(stale=True) if stale_only else rows


def latest_analysis_covering_pool(pool) -> Analysis | None:
    """The newest successful analysis whose scope holds this pool (pool, cluster, site, fleet)."""
    covering = (
        Q(scope=Scope.FLEET)
        | Q(scope=Scope.POOL, object_id=pool.pk)
        | Q(scope=Scope.CLUSTER, object_id=pool.cluster_id)
        | Q(scope=Scope.SITE, object_id=pool.cluster.site_id)
    )
    return (
        analyses_light()
        .filter(covering, succeeded_at__isnull=False, results__isnull=False)
        .order_by("-succeeded_at", "-pk")
        .first()
    )


# --- scopes inside one result -------------------------------------------------------------


@dataclass(frozen=True)
class ScopeOption:
    key: str
    label: str
    level: str


def has_results(results: dict | None) -> bool:
    return bool(results) and results.get("summary") is not None


def scope_options(results: dict, summary_label: str) -> list[ScopeOption]:
    """The analysis' own scope first, then each site, cluster and pool it holds."""
    options = [ScopeOption(SUMMARY, summary_label, "summary")]
    if not has_results(results):
        return options
    for level, id_key, name_key in (
        ("site", "site_id", "site"),
        ("cluster", "cluster_id", "cluster"),
        ("pool", "pool_id", "pool"),
    ):
        for row in results.get(f"{level}s", []):
            options.append(ScopeOption(f"{level}-{row[id_key]}", str(row[name_key]), level))
    return options


def scope_row(results: dict, key: str) -> dict[str, Any]:
    """The stored row of one scope: the summary, or a site, cluster or pool row."""
    if not has_results(results):
        raise UnknownScopeError("this analysis has no result yet")
    if key in ("", SUMMARY):
        return results["summary"]
    level, _, raw_id = key.partition("-")
    id_key = {"site": "site_id", "cluster": "cluster_id", "pool": "pool_id"}.get(level)
    if id_key is None or not raw_id.isdecimal():
        raise UnknownScopeError(f"unknown scope {key!r}")
    for row in results.get(f"{level}s", []):
        if row[id_key] == int(raw_id):
            return row
    raise UnknownScopeError(f"no {level} {raw_id} in this analysis")


def scope_pools(results: dict, key: str) -> list[dict[str, Any]]:
    """The stored pool rows inside one scope (all of them for the summary)."""
    pools = results.get("pools", [])
    if key in ("", SUMMARY):
        return pools
    level, _, raw_id = key.partition("-")
    return [pool for pool in pools if raw_id.isdecimal() and pool.get(f"{level}_id") == int(raw_id)]


def telemetry_note(results: dict, key: str) -> str:
    """Where GPU telemetry replaced the modeled MFU in a scope: "" when nowhere."""
    pools = scope_pools(results, key)
    measured = [p for p in pools if p.get("mfu_basis") == "telemetry_proxy"]
    if not measured:
        return ""
    if len(measured) == len(pools):
        return "MFU from GPU telemetry"
    return f"MFU from GPU telemetry in {len(measured)} of {len(pools)} pools"


def scope_currency(results: dict, key: str) -> str | None:
    """The currency of a scope's money figures; None when its pools use several."""
    if key in ("", SUMMARY):
        return results["summary"].get("currency")
    level, _, raw_id = key.partition("-")
    id_key = f"{level}_id"
    currencies = {
        pool.get("currency") for pool in results.get("pools", []) if pool.get(id_key) == int(raw_id)
    }
    return currencies.pop() if len(currencies) == 1 else None


def _number(value: Any) -> float:
    return float("nan") if value is None else float(value)


def factor_frame(row: dict[str, Any]) -> pd.DataFrame:
    """The five factors of one scope: value, provenance, and the loss attributed to each."""
    order = list(FACTOR_NAMES)
    frame = pd.DataFrame(
        {
            "factor": order,
            # A serving pool's row names its definitions (MBU, availability): serving_factors.
            "factor_label": [row.get(f"{f}_label") or FACTOR_LABELS[f] for f in order],
            "value_share": [_number(row.get(f)) for f in order],
            "provenance": [row.get(f"{f}_provenance") or "" for f in order],
            "lost_share": [_number(row.get(f"lost_share_{f}")) for f in order],
            "lost_pflop_days": [_number(row.get(f"lost_{f}_pflop_days")) for f in order],
            "lost_card_hours": [_number(row.get(f"lost_{f}_card_hours")) for f in order],
            "lost_money": [_number(row.get(f"lost_{f}_money")) for f in order],
        }
    )
    return frame


def serving_pool_names(pools: list[dict[str, Any]]) -> list[str]:
    """Pools whose factors use serving definitions (planner.serving_factors)."""
    return [str(p.get("pool")) for p in pools if p.get("factor_definitions") == "serving"]


def pools_worst_first(pools: list[dict[str, Any]], factor: str) -> list[dict[str, Any]]:
    """Pools by one factor's value, lowest (most lost) first, pools without it last; any
    other ``factor`` keeps the stored order."""
    if factor not in FACTOR_NAMES:
        return pools
    return sorted(pools, key=lambda pool: (pool.get(factor) is None, pool.get(factor) or 0.0))


def waterfall_frame(
    row: dict[str, Any], order: list[str] | tuple[str, ...] = WATERFALL_ORDER, currency=None
) -> pd.DataFrame:
    """Nameplate PFLOP-days, one loss per factor in `order`, effective PFLOP-days.

    The losses are the stored −ln attribution (`lost_<factor>_pflop_days`), so they add up to
    nameplate − effective exactly; the order only decides how the bars are read.
    """
    factors = factor_frame(row).set_index("factor").loc[list(order)].reset_index()
    nameplate = _number(row.get("peak_pflop_days"))
    effective = _number(row.get("effective_pflop_days"))
    losses = -factors["lost_pflop_days"].to_numpy()
    steps = pd.DataFrame(
        {
            "step": ["Nameplate compute", *factors["factor_label"], "Effective compute"],
            "factor": ["", *factors["factor"], ""],
            "measure": ["absolute", *["relative"] * len(factors), "total"],
            "factor_value_share": [np.nan, *factors["value_share"], np.nan],
            "provenance": ["", *factors["provenance"], ""],
            "pflop_days": [nameplate, *losses, effective],
            "level_pflop_days": [nameplate, *(nameplate + np.cumsum(losses)), effective],
            "lost_money": [np.nan, *(-factors["lost_money"].to_numpy()), np.nan],
            "currency": currency or "",
        }
    )
    return steps


def scope_tiles(results: dict, level: str) -> list[dict[str, Any]]:
    """One tile per site or cluster: headline, compute, money lost and the biggest loss."""
    tiles = []
    for row in results.get(f"{level}s", []) if has_results(results) else []:
        key = f"{level}-{row[f'{level}_id']}"
        factors = factor_frame(row)
        worst = factors.loc[factors["lost_share"].fillna(0).idxmax()]
        lost_money = factors["lost_money"].sum(min_count=1)
        tiles.append(
            {
                "key": key,
                "name": row[level],
                "effective_utilization": row.get("aggregate_of_products"),
                "nameplate_pflop_days": row.get("peak_pflop_days"),
                "effective_pflop_days": row.get("effective_pflop_days"),
                "cards": row.get("cards"),
                "lost_money": None if pd.isna(lost_money) else float(lost_money),
                "currency": scope_currency(results, key),
                "worst_factor": worst["factor_label"],
                "worst_factor_share": float(worst["lost_share"]),
            }
        )
    return tiles


def compute_by_scope_frame(results: dict) -> pd.DataFrame:
    """Nameplate vs effective PFLOP-days per site and per cluster."""
    if not has_results(results):
        return pd.DataFrame()
    rows = []
    for level in ("site", "cluster"):
        for row in results.get(f"{level}s", []):
            rows.append(
                {
                    "level": level,
                    "scope": row[level],
                    "nameplate_pflop_days": _number(row.get("peak_pflop_days")),
                    "effective_pflop_days": _number(row.get("effective_pflop_days")),
                    "effective_utilization_share": _number(row.get("aggregate_of_products")),
                }
            )
    return pd.DataFrame(rows)


def money_lost(row: dict[str, Any]) -> dict[str, Any]:
    """Money lost in the period in total and the factor that lost the most."""
    factors = factor_frame(row)
    total = factors["lost_money"].sum(min_count=1)
    if pd.isna(total):
        return {"total": None, "factor": None, "factor_money": None}
    worst = factors.loc[factors["lost_money"].fillna(0).idxmax()]
    return {
        "total": float(total),
        "factor": worst["factor_label"],
        "factor_money": float(worst["lost_money"]),
    }


# --- heterogeneous pools ---------------------------------------------------------------------


def is_heterogeneous(pool_row: dict[str, Any]) -> bool:
    return (pool_row.get("card_models") or 0) > 1


def strategy_frame(pool_row: dict[str, Any]) -> pd.DataFrame:
    """The four strategies of one pool from the stored h_<strategy> columns.

    Bucket throughput is W·h with W = peak × MFU (the pool's MFU is peak-weighted, so this is
    Σ n_i·s_i); delivered adds the strategy's scaling and effective time (stored by the engine).
    """
    ideal_pflops = _number(pool_row.get("peak_pflops")) * _number(pool_row.get("mfu"))
    h = np.array([_number(pool_row.get(f"h_{s}")) for s in STRATEGIES])
    return pd.DataFrame(
        {
            "strategy": list(STRATEGIES),
            "strategy_label": [STRATEGY_LABELS[s] for s in STRATEGIES],
            "heterogeneity_factor": h,
            "throughput_pflops": ideal_pflops * h,
            "delivered_pflops": [
                _number(pool_row.get(f"delivered_pflops_{s}")) for s in STRATEGIES
            ],
            "recommended": [s == pool_row.get("recommended_strategy") for s in STRATEGIES],
            "used": [s == pool_row.get("strategy") for s in STRATEGIES],
        }
    )


# Strategies that run one job across every card of a pool (the split runs one per card model).
SINGLE_JOB_STRATEGIES = ("synchronous_uniform", "static_proportional", "dynamic_fine_grained")


def best_single_job(strategies: pd.DataFrame) -> dict[str, Any] | None:
    """The single-job strategy with the highest heterogeneity factor h (for a goal of one large
    synchronous job); None when no single-job strategy has an h."""
    single = strategies[
        strategies["strategy"].isin(SINGLE_JOB_STRATEGIES)
        & strategies["heterogeneity_factor"].notna()
    ]
    if single.empty:
        return None
    return single.loc[single["heterogeneity_factor"].idxmax()].to_dict()


def card_speeds(snapshot: dict | None, pool_id: int) -> pd.DataFrame:
    """Per-card effective speed of each card model in a pool, from the run's input snapshot.

    Speed = peak × MFU with the MFU the run used for that card when it is per card (entered or
    measured), else the card's catalog default, else the vendor default. The pool-wide
    multipliers (cooling, workload class, a pool-level MFU) scale every card alike, so they do
    not change which card is slowest and are left out.
    """
    snapshot = snapshot or {}
    groups = [
        group
        for cluster in snapshot.get("clusters", [])
        for group in cluster.get("node_groups", [])
        if group.get("pool_id") == pool_id
    ]
    if not groups:
        return pd.DataFrame()
    frame = pd.DataFrame.from_records(groups)
    defaults = snapshot.get("defaults", {})
    vendor_default = frame["vendor"].map(
        lambda vendor: defaults.get(f"mfu_default_{vendor}", defaults.get("mfu_default_other"))
    )
    entered = pd.to_numeric(frame.get("mfu"), errors="coerce")
    card_default = pd.to_numeric(frame.get("default_mfu"), errors="coerce")
    frame["mfu_share"] = entered.fillna(card_default).fillna(vendor_default).astype(float)
    frame["mfu_source"] = np.where(
        entered.notna(),
        "entered or measured",
        np.where(card_default.notna(), "card default", "vendor default"),
    )
    frame["cards"] = frame["nodes"] * frame["cards_per_node"]
    frame["weighted_tflops"] = frame["cards"] * frame["peak_tflops"] * frame["mfu_share"]
    per_model = frame.groupby(["accelerator", "vendor"], as_index=False).agg(
        cards=("cards", "sum"),
        peak_tflops=("peak_tflops", "first"),
        weighted_tflops=("weighted_tflops", "sum"),
        mfu_source=("mfu_source", "first"),
    )
    per_model["effective_tflops_per_card"] = per_model["weighted_tflops"] / per_model["cards"]
    per_model["mfu_share"] = per_model["effective_tflops_per_card"] / per_model["peak_tflops"]
    slowest = per_model["effective_tflops_per_card"].min()
    per_model["slowest"] = np.isclose(per_model["effective_tflops_per_card"], slowest)
    return per_model[
        [
            "accelerator",
            "vendor",
            "cards",
            "peak_tflops",
            "mfu_share",
            "mfu_source",
            "effective_tflops_per_card",
            "slowest",
        ]
    ].sort_values("effective_tflops_per_card", ignore_index=True)

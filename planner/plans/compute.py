"""Evaluating a plan (engine → ranked results, headlines per currency, sensitivity and
levers) and the stateless training estimate."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from django.utils import timezone

from core.frames import json_rows
from engine.capacity import (
    DEFAULT_MAX_CARDS,
    ESTIMATE_PAYLOAD_FIELDS,
    PlannerInputError,
    estimate_training,
    plan_capacity,
)
from engine.capacity.plan import model_summary
from engine.sensitivity import Lever, lever_roi, sensitivity
from inventory.models import AcceleratorModel
from planner.estimates import EstimateInputError
from planner.models import Plan
from planner.plans.options import build_options, without_unpriced_money
from planner.plans.workload import (
    DEFAULT_HISTORY_DAYS,
    GB,
    HEADLINE_COLUMNS,
    MAX_CHUNKS,
    MIN_OPTIONS_PER_CHUNK,
    OPTION_COLUMN_NAMES,
    OPTION_COLUMNS,
    SHORTLIST_PER_RANKING,
    WHOLE_NUMBER_COLUMNS,
    build_workload,
)
from planner.ranking import first_by, first_by_currency, rank_options, ranked

# --------------------------------------------------------------------------------------------
# Computation
# --------------------------------------------------------------------------------------------


def option_rows(plan: pd.DataFrame) -> list[dict[str, Any]]:
    """Flat, JSON-safe option rows with units in the column names."""
    table = pd.DataFrame(index=plan.index)
    for name, column, scale in OPTION_COLUMNS:
        values = plan[column] if column in plan else pd.Series(np.nan, index=plan.index)
        table[name] = values * scale if scale != 1 else values
    for name in WHOLE_NUMBER_COLUMNS:
        table[name] = table[name].astype("Int64")
    table["feasible"] = table["feasible"].astype(bool)
    table["on_pareto_front"] = table["on_pareto_front"].astype(bool)
    return json_rows(table)


def build_levers(specs: Iterable[Mapping[str, Any]]) -> list[Lever]:
    levers = []
    for spec in specs:
        name, cost = spec["name"], float(spec["one_off_cost"])
        if name == "liquid_cooling":
            levers.append(Lever.liquid_cooling(cost, pue=spec.get("pue")))
        elif name == "faster_checkpoints":
            levers.append(
                Lever.faster_checkpoints(
                    cost,
                    checkpoint_save_hours=spec["checkpoint_save_hours"],
                    restart_hours=spec["restart_hours"],
                )
            )
        elif name == "mfu_upgrade":
            levers.append(Lever.mfu_upgrade(cost, mfu=spec["mfu"]))
        elif name == "colocation":
            levers.append(Lever.colocation(cost, utilization=spec.get("utilization", 0.9)))
    return levers


def _shortlist(plan: pd.DataFrame) -> pd.Index:
    """Options worth a tornado chart: the Pareto front and the best few on each ranking."""
    keep = (
        plan["on_pareto_front"]
        | (plan["rank_by_cost"] <= SHORTLIST_PER_RANKING)
        | (plan["rank_by_days"] <= SHORTLIST_PER_RANKING)
    )
    return plan.index[keep.fillna(False).to_numpy(dtype=bool)]


def _headline(rows_by_id: Mapping[int, dict], option_id: Any) -> dict[str, Any] | None:
    if option_id is None:
        return None
    row = rows_by_id[int(option_id)]
    return {column: row[column] for column in HEADLINE_COLUMNS}


def _headlines_by_currency(plan: pd.DataFrame, rows_by_id: Mapping[int, dict]) -> list[dict]:
    """Cheapest and fastest option within each currency (costs in two currencies never compete)."""
    cheapest = first_by_currency(plan, "rank_by_cost")
    fastest = first_by_currency(plan, "rank_by_days")
    return [
        {
            "currency": currency,
            "cheapest": _headline(rows_by_id, cheapest.get(currency)),
            "fastest": _headline(rows_by_id, fastest.get(currency)),
        }
        for currency in sorted(set(cheapest) | set(fastest))
    ]


def _measured_history_rows(plan: pd.DataFrame) -> list[dict[str, Any]]:
    """Pool options with usage records in the window: the window and the factors (of those
    accounting measures) that are measured."""
    pools = plan[plan["measured_from"].notna()]
    factors = ("mfu", "effective_time", "utilization")
    return [
        {
            "option_id": int(option_id),
            "pool_id": int(row["pool_id"]),
            "pool": row["pool"],
            "measured_from": row["measured_from"],
            "measured_to": row["measured_to"],
            "measured_factors": [f for f in factors if row[f"{f}_provenance"] == "measured"],
        }
        for option_id, row in pools.iterrows()
    ]


def compute(
    plan: Plan, on_progress: Callable[[int], None] = lambda percent: None
) -> tuple[dict, dict, dict]:
    """Evaluate a plan: (results, summary, input snapshot). Progress 10 → 95 percent."""
    workload = build_workload(plan.workload)
    now = timezone.now()
    rates_used: list[dict[str, Any]] = []
    options, warnings = build_options(
        plan.options_spec, plan.overrides, history_end=now, rates_used=rates_used
    )
    on_progress(10)
    max_cards = int((plan.overrides or {}).get("max_cards") or DEFAULT_MAX_CARDS)
    chunks = max(1, min(MAX_CHUNKS, math.ceil(len(options) / MIN_OPTIONS_PER_CHUNK)))
    parts = []
    for done, positions in enumerate(np.array_split(np.arange(len(options)), chunks), 1):
        parts.append(plan_capacity(workload, options.iloc[positions], max_cards=max_cards))
        on_progress(10 + int(70 * done / chunks))
    evaluated = rank_options(without_unpriced_money(pd.concat(parts)))
    shortlist = evaluated.loc[_shortlist(evaluated)]
    tornado = sensitivity(shortlist, workload.flops)
    on_progress(88)
    levers = lever_roi(shortlist, build_levers(plan.levers or []), workload.flops)
    on_progress(95)

    rows = option_rows(evaluated)
    rows_by_id = {row["option_id"]: row for row in rows}
    cheapest, fastest = first_by(evaluated, "rank_by_cost"), first_by(evaluated, "rank_by_days")
    pareto_ids = (
        evaluated[evaluated["on_pareto_front"]].sort_values(["days", "total_cost"]).index.tolist()
    )
    shape = workload.model_shape
    summary = {
        "total_flops": workload.flops,
        "options": len(rows),
        "feasible": int(evaluated["feasible"].sum()),
        "pareto": len(pareto_ids),
        "cheapest": _headline(rows_by_id, cheapest),
        "fastest": _headline(rows_by_id, fastest),
        "by_currency": _headlines_by_currency(evaluated, rows_by_id),
    }
    results = {
        "computed_at": now.isoformat(),
        "history_days": (plan.options_spec or {}).get("history_days", DEFAULT_HISTORY_DAYS),
        "measured_history": _measured_history_rows(evaluated),
        "total_flops": workload.flops,
        "model_shape": {
            "layers": shape.layers,
            "hidden": shape.hidden,
            "heads": shape.heads,
            "kv_heads": shape.kv_heads or shape.heads,
            "ffn_hidden": shape.ffn,
            "mlp": shape.mlp,
            "vocab": shape.vocab,
            "tied_embeddings": shape.tied_embeddings,
            "shape_params": shape.params,
            "params": workload.params,
            "source": "given" if workload.shape or workload.moe else "inferred",
        },
        "model": model_summary(workload, (plan.workload or {}).get("model") or None),
        "state_gb": float(evaluated["state_bytes"].iloc[0]) / GB,
        "summary": summary,
        "columns": list(OPTION_COLUMN_NAMES),
        "options": rows,
        # Per currency, then by rank within it (one list per ranking, currencies apart).
        "ranking": {
            "by_cost": ranked(evaluated, "rank_by_cost"),
            "by_days": ranked(evaluated, "rank_by_days"),
        },
        "pareto_front": pareto_ids,
        "sensitivity_option_ids": shortlist[shortlist["feasible"]].index.tolist(),
        "sensitivity": json_rows(tornado),
        "levers": json_rows(levers),
        "warnings": warnings,
        # The rates card prices were converted with: a later rate change marks the plan stale.
        "exchange_rates": rates_used,
    }
    snapshot = {"options": json_rows(options.drop(columns=["label"]).reset_index())}
    return results, summary, snapshot


# --------------------------------------------------------------------------------------------
# Stateless training estimate (POST /api/v1/estimates/training/)
# --------------------------------------------------------------------------------------------

_ESTIMATE_PASSTHROUGH = ESTIMATE_PAYLOAD_FIELDS


def estimate_training_for(data: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar estimate with the accelerator's catalog figures (a validated payload whose
    `accelerator` is an AcceleratorModel). Without a price, the catalog's rental price is used;
    without either the money is null with `cost.unpriced_reason`.
    """
    accelerator: AcceleratorModel = data["accelerator"]
    payload = {key: data[key] for key in _ESTIMATE_PASSTHROUGH if data.get(key) is not None}
    if payload.get("checkpoint_save_minutes") is None:
        payload.pop("checkpoint_async", None)  # the default save already blocks asynchronously
    payload["accelerator"] = {
        "name": accelerator.name,
        "dense_bf16_tflops": accelerator.dense_bf16_tflops,
        "dense_fp8_tflops": accelerator.dense_fp8_tflops,
        "dense_fp4_tflops": accelerator.dense_fp4_tflops,
        "memory_gb": accelerator.memory_gb,
        "memory_bandwidth_tbs": accelerator.memory_bandwidth_tbs,
        "tdp_w": accelerator.tdp_w,
        "intra_node_interconnect_gbs": accelerator.intra_node_interconnect_gbs,
        "nvlink_domain_cards": accelerator.nvlink_domain_cards,
        "default_training_mfu": accelerator.default_training_mfu,
    }
    price_source = None
    if "price_per_card_hour" in payload or "capital_cost_per_card" in payload:
        price_source = "entered"
    elif accelerator.rental_price_per_card_hour is not None:
        payload["price_per_card_hour"] = accelerator.rental_price_per_card_hour
        price_source = "catalog"
    try:
        result = estimate_training(payload)
    except PlannerInputError as exc:
        raise EstimateInputError(exc.errors) from exc
    result["accelerator"] = {"id": accelerator.pk, "name": accelerator.name}
    result["cost"]["price_source"] = price_source
    result["cost"]["unpriced_reason"] = None
    if price_source is None:  # no price entered nor in the catalog: unknown money, not 0
        for key in ("compute", "idle", "total", "per_effective_pflop_day"):
            result["cost"][key] = None
        result["cost"]["unpriced_reason"] = (
            f"no price for {accelerator.name}: none entered and none in the catalog"
        )
    result["cost"]["currency"] = accelerator.currency
    return result

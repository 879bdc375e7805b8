"""plan_capacity: every option evaluated, ranked and Pareto-marked; the scalar estimate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from engine.capacity.band import days_band, uncertainty_tornado
from engine.capacity.deadline import cards_for_deadline
from engine.capacity.options import OPTION_COLUMN_DEFAULTS, prepare_options
from engine.capacity.outcomes import (
    OUTPUT_COLUMNS,
    compute_outcomes,
    infeasible_reasons,
    pareto_front,
)
from engine.capacity.splits import SPLIT_COLUMNS, best_split_per_option
from engine.capacity.workload import (
    DEFAULT_MAX_CARDS,
    DEGREE_FIELDS,
    FACTORS,
    MOE_SHAPE_FIELDS,
    MOE_TRAINING_FIELDS,
    SHAPE_SPEC_FIELDS,
    PlannerInputError,
    TrainingWorkload,
    workload_from_spec,
)
from engine.memory import (
    min_cards_for_state,
    training_state_bytes,
)
from engine.steptime import STEP_PARTS


def plan_capacity(
    workload: TrainingWorkload,
    options: pd.DataFrame,
    *,
    max_cards: int = DEFAULT_MAX_CARDS,
) -> pd.DataFrame:
    """Evaluate every option; one output row per option (same index), ranked, Pareto-marked.

    Time mode (cards given): the fastest split that fits. Deadline mode (deadline_days given):
    the fewest cards that meet the deadline. See OPTION_COLUMN_DEFAULTS for input columns and
    engine.records.PlanOptionRow for the leading output columns (OUTPUT_COLUMNS).
    """
    if options.empty:
        return pd.DataFrame(columns=list(OUTPUT_COLUMNS))
    frame = prepare_options(options, workload)
    frame["max_cards"] = max_cards
    frame["min_cards_memory"] = min_cards_for_state(
        workload.params,
        frame["memory_gb"].to_numpy(np.float64),
        workload.usable_memory_share,
        **workload.state_bytes,
    )
    deadline_rows = frame["cards"].isna().to_numpy() & frame["peak_tflops"].notna().to_numpy()
    if deadline_rows.any():
        deadline_frame = frame.iloc[np.flatnonzero(deadline_rows)]
        found = cards_for_deadline(workload, deadline_frame, max_cards=max_cards)
        frame.loc[frame.index[deadline_rows], "cards"] = found
    cards = frame["cards"].fillna(0).to_numpy(np.int64)
    best = best_split_per_option(workload, frame, cards)
    for column in SPLIT_COLUMNS:
        if column not in ("days", "running_days", "mfu"):  # compute_outcomes recomputes these
            frame[column] = best[column]
    frame["mfu"] = best["mfu"].fillna(frame["mfu"])  # the chosen split's per-card MFU
    frame["state_bytes"] = training_state_bytes(workload.params, **workload.state_bytes)
    out = compute_outcomes(frame, workload.flops)
    out = out.join(days_band(out))
    out["reason"] = infeasible_reasons(workload, frame, best)
    out["feasible"] = out["reason"] == ""
    out["option_id"] = out.index
    feasible = out["feasible"].to_numpy()
    cost = np.where(feasible, out["total_cost"], np.nan)
    days = np.where(feasible, out["days"], np.nan)
    out["rank_by_cost"] = pd.Series(cost, index=out.index).rank(method="min")
    out["rank_by_days"] = pd.Series(days, index=out.index).rank(method="min")
    out["on_pareto_front"] = pareto_front(days, cost)
    extra = [c for c in out.columns if c not in OUTPUT_COLUMNS]
    return out[list(OUTPUT_COLUMNS) + extra]


# --------------------------------------------------------------------------------------------
# Scalar entry for POST /api/v1/estimates/training/ (the serializer has validated the payload)
# --------------------------------------------------------------------------------------------

# Payload field -> option column (same name unless listed); "accelerator" holds catalog columns.
_SCALAR_OPTION_FIELDS: dict[str, str] = {
    **{
        key: key
        for key in (
            "cards",
            "deadline_days",
            "mfu",
            "achieved_tflops_per_card",
            "scaling",
            "effective_time",
            "utilization",
            "pue",
            "cooling_type",
            "tariff_per_kwh",
            "grid_carbon_g_per_kwh",
            "capital_cost_per_card",
            "amortization_years",
            "yearly_opex_per_card",
            "inter_node_bandwidth_gbps_per_card",
        )
    },
    "price_per_card_hour": "rental_price_per_card_hour",
}


# Payload minutes -> option hours (the effective-time endpoint's units).
_MINUTE_FIELDS = {
    "checkpoint_save_minutes": "checkpoint_save_hours",
    "restart_minutes": "restart_hours",
    "checkpoint_interval_minutes": "checkpoint_interval_hours",
}
_PASSED_AS_IS = ("fabric", "site_kind", "mtbf_card_hours", "checkpoint_async")
_WORKLOAD_FIELDS = (
    "model_params",
    "tokens",
    "total_flops",
    "flops_per_param_token",
    "precision",
    "fp4_bf16_layer_share",
    "gradient_precision",
    "optimizer_state_precision",
    "zero_stage",
    *(f"{degree}_degree" for degree in DEGREE_FIELDS),
    "micro_batch",
    "seq_len",
    "global_batch_sequences",
    "global_batch_tokens",
    "max_batch_tokens",
    "software_stack",
    *SHAPE_SPEC_FIELDS,
    "model",
    *MOE_SHAPE_FIELDS,
    *MOE_TRAINING_FIELDS,
)
# Every payload field the scalar estimate reads, besides "accelerator".
ESTIMATE_PAYLOAD_FIELDS: tuple[str, ...] = (
    *_WORKLOAD_FIELDS,
    *_SCALAR_OPTION_FIELDS,
    *_MINUTE_FIELDS,
    *_PASSED_AS_IS,
)


def _scalar_option(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The option row of a validated payload; plain factors not given are 1, "modeled" ones
    are left to the model."""
    accelerator = payload["accelerator"]
    option: dict[str, Any] = {
        "accelerator": str(accelerator.get("name") or ""),
        **{k: v for k, v in accelerator.items() if k != "name" and v is not None},
    }
    for key, column in _SCALAR_OPTION_FIELDS.items():
        if payload.get(key) is not None and payload.get(key) != "modeled":
            option[column] = payload[key]
    for key in ("scaling", "effective_time", "utilization"):
        if key not in option and payload.get(key) != "modeled":
            option[key] = 1.0
            option[f"{key}_provenance"] = "default"
    for key, column in _MINUTE_FIELDS.items():
        if payload.get(key) is not None:
            option[column] = float(payload[key]) / 60.0
    for key in _PASSED_AS_IS:
        if payload.get(key) is not None:
            option[key] = float(payload[key]) if isinstance(payload[key], bool) else payload[key]
    return option


def _number(row: pd.Series, column: str) -> float | None:
    value = row[column]
    return None if pd.isna(value) else float(value)


def _whole(row: pd.Series, column: str) -> int | None:
    value = _number(row, column)
    return None if value is None else int(value)


def split_why(row: pd.Series) -> str:
    """One sentence on the chosen split: what each degree buys and where the step goes."""
    if pd.isna(row["tp"]):
        return ""
    parts = ("bubble", "tp", "cp", "pp", "dp", "ep")
    shares = {part: float(row[f"{part}_share"]) for part in parts}
    names = {
        "bubble": "pipeline bubble",
        "tp": "tensor-parallel collectives",
        "cp": "context-parallel exchange",
        "pp": "pipeline transfers",
        "dp": "gradient and weight collectives",
        "ep": "experts' all-to-all",
    }
    experts = ""
    if float(row.get("ep", 1) or 1) > 1:
        experts = f" (ep={int(row['ep'])} of them split the experts)"
    worst = max(shares, key=lambda part: shares[part])
    return (
        f"tp={int(row['tp'])} keeps tensor traffic inside a node; pp={int(row['pp'])} with "
        f"{int(row['vp'])} virtual stage(s) and cp={int(row['cp'])} hold "
        f"{row['memory_per_card_bytes'] / 1e9:.0f} of "
        f"{row['usable_memory_per_card_bytes'] / 1e9:.0f} usable GB per card; "
        f"dp={int(row['dp'])} replicas{experts} run {int(row['micro_batches'])} "
        f"micro-batch(es) of {int(row['micro_batch'])} sequence(s) per step; the largest loss is "
        f"the {names[worst]} ({shares[worst]:.1%} of a step). The fastest split that fits."
    )


def _ranges(plan: pd.DataFrame) -> dict[str, Any]:
    """days_range and cost_range of the one option, with the uncertainty tornado on days."""
    row = plan.iloc[0]
    tornado = uncertainty_tornado(plan[plan["days"].notna()])
    swings = [
        {"uncertainty": t.uncertainty, "days_low": t.days_low, "days_high": t.days_high}
        for t in tornado[tornado["swing_days"] > 0].itertuples()
    ]

    def band(column: str) -> dict[str, Any]:
        return {
            "low": _number(row, f"{column}_low"),
            "high": _number(row, f"{column}_high"),
            "note": str(row["band_note"] or ""),
            "uncertainties": swings if column == "days" else [],
        }

    return {"days_range": band("days"), "cost_range": band("cost")}


def _goodput(row: pd.Series) -> dict[str, float | None]:
    """Google's goodput terms and Meta's ETTR from the five factors (docs/capacity-planning.md)."""
    program = None if pd.isna(row["scaling"]) else float(row["mfu"] * row["scaling"])
    return {
        "scheduling": _number(row, "utilization"),
        "runtime": _number(row, "effective_time"),
        "program": program,
        "ettr": _number(row, "effective_time"),
    }


def model_summary(workload: TrainingWorkload, name: str | None = None) -> dict[str, Any]:
    """What every training figure is about: the model's total and active parameters (equal for
    a dense model) and, for a mixture, its experts."""
    moe = workload.moe
    return {
        "name": name,
        "total_params": float(workload.params),
        "active_params": float(workload.flops_params),
        "mixture_of_experts": moe is not None,
        "experts": None if moe is None else int(moe.experts),
        "experts_per_token": None if moe is None else int(moe.experts_per_token),
        "shared_experts": None if moe is None else int(moe.shared_experts),
        "attention": "gqa" if moe is None else str(moe.attention),
    }


def estimate_training(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Scalar training estimate (POST /api/v1/estimates/training/), via `plan_capacity`.

    `payload` is the serializer's validated data with `accelerator` as a dict of catalog
    columns. Raises PlannerInputError for what only the engine can check (e.g. the shape).
    """
    workload = workload_from_spec(payload)
    option = _scalar_option(payload)
    cards_per_node = option.get("cards_per_node", OPTION_COLUMN_DEFAULTS["cards_per_node"])
    cards = option.get("cards")
    domain = option.get("nvlink_domain_cards")
    errors = workload.parallelism.split_errors(
        cards=None if cards is None else int(cards),
        cards_per_node=int(cards_per_node),
        nvlink_domain_cards=int(domain) if domain and not pd.isna(domain) else None,
    )
    if errors:  # one option: a fixed degree it cannot take is the caller's error, not a reason
        raise PlannerInputError(errors)
    plan = plan_capacity(workload, pd.DataFrame([option]))
    row = plan.iloc[0]

    def number(column: str) -> float | None:
        return _number(row, column)

    def whole(column: str) -> int | None:
        return _whole(row, column)

    return {
        "feasible": bool(row["feasible"]),
        "reason": row["reason"],
        "model": model_summary(workload, payload.get("model") or None),
        "total_flops": workload.flops,
        "days": number("days"),
        "cards": whole("cards"),
        "card_hours": number("card_hours"),
        "parallelism": {
            "tp": whole("tp"),
            "pp": whole("pp"),
            "virtual_stages": whole("vp"),
            "cp": whole("cp"),
            "dp": whole("dp"),
            "ep": whole("ep"),
            "micro_batch": whole("micro_batch"),
            "micro_batches": whole("micro_batches"),
            "global_batch_sequences": whole("global_batch"),
            "step_shares": {part: number(f"{part}_share") for part in STEP_PARTS},
            "why": split_why(row),
        },
        **_ranges(plan),
        "goodput": _goodput(row),
        "memory": {
            "state_bytes": number("state_bytes"),
            "per_card_bytes": number("memory_per_card_bytes"),
            "state_per_card_bytes": number("state_bytes_per_card"),
            "activation_per_card_bytes": number("activation_bytes_per_card"),
            "usable_per_card_bytes": number("usable_memory_per_card_bytes"),
            "min_cards": whole("min_cards_memory"),
        },
        "energy_mwh": {"it": number("it_energy_mwh"), "facility": number("facility_energy_mwh")},
        "co2_tonnes": number("co2_tonnes"),
        "cost": {
            "basis": str(row["cost_basis"]) or None,
            "compute": number("compute_cost"),
            "energy": number("energy_cost"),
            "energy_overhead": number("energy_overhead_cost"),
            "idle": number("idle_cost"),
            "total": number("total_cost"),
            "per_effective_pflop_day": number("cost_per_effective_pflop_day"),
        },
        "factors": {
            **{factor: number(factor) for factor in FACTORS},
            "pue": number("pue"),
            "effective_utilization": number("effective_utilization"),
            "provenance": {factor: str(row[f"{factor}_provenance"]) for factor in FACTORS},
        },
    }

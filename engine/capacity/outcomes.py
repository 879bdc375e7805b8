"""Outcomes of resolved factors: days, card-hours, energy, cost, CO₂, reasons and the Pareto
front."""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from engine.capacity.workload import SECONDS_PER_DAY, TrainingWorkload
from engine.cost import energy_and_cost
from engine.defaults import (
    FACTOR_FLOOR,
)
from engine.parallelism import no_split_reason
from engine.records import PLAN_OPTION_COLUMNS


def _seam_energy_and_cost(frame: pd.DataFrame) -> pd.DataFrame:
    """Energy, money, CO₂ and effective PFLOP-days: engine.cost.energy_and_cost.

    Rows without a result (no split, unreachable deadline) get NaN instead of an error.
    """
    computable = np.isfinite(frame["card_hours"].to_numpy(np.float64))
    part = energy_and_cost(frame[computable].reset_index(drop=True))  # index may repeat
    part.index = np.flatnonzero(computable)
    money = part.reindex(pd.RangeIndex(len(frame)))
    money["cost_basis"] = money["cost_basis"].fillna("")
    money.index = frame.index
    return money


# --------------------------------------------------------------------------------------------
# Outcomes, ranking, Pareto
# --------------------------------------------------------------------------------------------


def compute_outcomes(frame: pd.DataFrame, total_flops: float) -> pd.DataFrame:
    """Days, card-hours, energy, cost, CO₂ and effective utilization from resolved factors.

    Needs cards, peak_tflops, mfu, scaling, effective_time, utilization, pue and the cost/site
    columns; recomputing with changed factors (sensitivity, levers) reuses this function.
    """
    out = frame.copy()
    peak_flops = out["peak_tflops"] * 1e12
    throughput = out["cards"] * peak_flops * out["mfu"] * out["scaling"] * out["effective_time"]
    out["energy"] = 1.0 / out["pue"]
    out["running_days"] = total_flops / throughput / SECONDS_PER_DAY
    out["days"] = out["running_days"] / out["utilization"]
    out["card_hours"] = out["cards"] * out["days"] * 24
    out["allocated_card_hours"] = out["cards"] * out["running_days"] * 24
    out["idle_card_hours"] = out["card_hours"] - out["allocated_card_hours"]
    out["effective_utilization"] = (
        out["energy"] * out["mfu"] * out["scaling"] * out["effective_time"] * out["utilization"]
    )
    money = _seam_energy_and_cost(out)
    for column in money.columns:
        out[column] = money[column]
    return out


def pareto_front(days: NDArray[np.float64], cost: NDArray[np.float64]) -> NDArray[np.bool_]:
    """True where no other point is at least as good on both and better on one (NaN: False)."""
    days = np.asarray(days, dtype=np.float64)
    cost = np.asarray(cost, dtype=np.float64)
    on_front = np.zeros(len(days), dtype=bool)
    valid = np.flatnonzero(np.isfinite(days) & np.isfinite(cost))
    if valid.size == 0:
        return on_front
    order = valid[np.lexsort((cost[valid], days[valid]))]
    sorted_cost = cost[order]
    sorted_days = days[order]
    best_before = np.minimum.accumulate(np.r_[np.inf, sorted_cost[:-1]])
    strict = sorted_cost < best_before
    # Exact duplicates of a front point are not dominated either.
    front_pairs = set(zip(sorted_days[strict], sorted_cost[strict], strict=True))
    duplicate = np.array(
        [(d, c) in front_pairs for d, c in zip(sorted_days, sorted_cost, strict=True)]
    )
    on_front[order] = strict | duplicate
    return on_front


# The leading columns of plan_capacity, in order: the keys of engine.records.PlanOptionRow.
OUTPUT_COLUMNS: tuple[str, ...] = PLAN_OPTION_COLUMNS


def _domain(row: pd.Series) -> int | None:
    """The option's NVLink domain in cards, None when it gives none (the node then)."""
    value = row.get("nvlink_domain_cards")
    return int(value) if value is not None and pd.notna(value) and value >= 1 else None


def infeasible_reasons(
    workload: TrainingWorkload, frame: pd.DataFrame, best: pd.DataFrame
) -> NDArray[np.object_]:
    """Why each infeasible option fails ("" when feasible)."""
    shape = workload.model_shape
    reasons = np.full(len(frame), "", dtype=object)
    missed_deadline = frame["deadline_days"].notna().to_numpy() & ~(
        best["days"].to_numpy() <= frame["deadline_days"].to_numpy()
    )
    failing = (
        frame["peak_tflops"].isna().to_numpy()
        | frame["cards"].isna().to_numpy()
        | ~best["has_split"].to_numpy()
        | ~best["fits_memory"].to_numpy()
        | (best["effective_time"].to_numpy() <= 2 * FACTOR_FLOOR)
        | missed_deadline
    )
    for i in np.flatnonzero(failing):  # strings only for the failing options
        row = frame.iloc[i]
        chosen = best.iloc[i]
        if pd.isna(row["peak_tflops"]):
            reasons[i] = (
                f"{row['accelerator'] or 'this card'} has no {workload.precision} peak in the "
                "catalog"
            )
        elif pd.isna(row["cards"]):
            reasons[i] = (
                f"deadline of {row['deadline_days']:g} days not reachable with at most "
                f"{row['max_cards']:,} cards"
            )
        elif not chosen["has_split"]:
            reasons[i] = no_split_reason(
                int(row["cards"]),
                int(row["cards_per_node"]),
                layers=shape.layers,
                heads=shape.heads,
                global_batch=workload.global_batch_sequences,
                micro_batch=workload.micro_batch,
                fixed=workload.parallelism,
                nvlink_domain_cards=_domain(row),
            )
        elif not chosen["fits_memory"]:
            reasons[i] = (
                f"does not fit in memory: the leanest split (tp={int(chosen['tp'])}, "
                f"pp={int(chosen['pp'])}, dp={int(chosen['dp'])}) needs "
                f"{chosen['memory_per_card_bytes'] / 1e9:.1f} GB per card (state "
                f"{chosen['state_bytes_per_card'] / 1e9:.1f} + activations "
                f"{chosen['activation_bytes_per_card'] / 1e9:.1f}), usable "
                f"{chosen['usable_memory_per_card_bytes'] / 1e9:.1f} GB of "
                f"{row['memory_gb']:g} GB; the training state alone needs at least "
                f"{int(row['min_cards_memory'])} cards"
            )
        elif chosen["effective_time"] <= 2 * FACTOR_FLOOR:
            reasons[i] = (
                f"at {int(row['cards']):,} cards failures and restarts leave no productive time "
                f"(MTBF per card {row['mtbf_card_hours']:,.0f} h)"
            )
        elif not pd.isna(row["deadline_days"]) and chosen["days"] > row["deadline_days"]:
            reasons[i] = f"misses the {row['deadline_days']:g}-day deadline"
    return reasons

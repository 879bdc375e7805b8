"""Vectorised entry point: the five factors of many pools at once (docs/efficiency-model.md).

:func:`evaluate_pools` takes one frame row per node group and one per pool and returns one
row per pool. It is a pipeline of named steps, one per factor, in
:mod:`engine.steps` (each with its precedence rule beside its kernel); everything
is computed with numpy over whole columns (no loop per pool or card). :func:`evaluate_pool`
is the scalar calculator: it builds one-row frames and calls the same code. Column schemas
are in :data:`NODE_GROUP_COLUMNS`, :data:`POOL_COLUMNS`, :data:`SPEEDUP_COLUMNS` and
:data:`OUTPUT_COLUMNS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import cast

import numpy as np
import pandas as pd

from engine.defaults import COOLING_TYPES, FABRICS, FACTOR_FLOOR, PROVENANCES, STRATEGIES
from engine.factors import FACTOR_NAMES, FactorResult
from engine.heterogeneous import why_categorical
from engine.records import PoolResultRow
from engine.scaling import ScalingArrays
from engine.steps.attribution import attribution_columns
from engine.steps.bucket import Strategies, strategies
from engine.steps.context import FactorStep, PoolContext, categorical
from engine.steps.effective_time import (
    MTBF_BASES,
    FailureModel,
    effective_time_step,
    failure_model,
)
from engine.steps.energy import energy_step
from engine.steps.mfu import mfu_step
from engine.steps.scaling import joint_job, scaling_step
from engine.steps.utilization import utilization_step

NODE_GROUP_COLUMNS: Mapping[str, str] = {
    "pool_id": "required; the pool this node group belongs to (matches the pools frame)",
    "accelerator": "required; card model name, e.g. 'H100 SXM5 80GB' (mixing is detected by name)",
    "vendor": "required; 'NVIDIA', 'AMD', 'Huawei', 'Intel' or other (case-insensitive)",
    "peak_tflops": "required; dense BF16 peak per card, TFLOP/s",
    "nodes": "required; number of nodes",
    "cards_per_node": "required; cards in each node",
    "nvlink_bidir_gbs": "optional; intra-node card-to-card bandwidth, GB/s in both directions "
    "as vendors print it (NaN → intra_node_bidir_gbs default)",
    "nvlink_domain_cards": "optional; cards of one NVLink domain, what tensor parallelism may "
    "span on NVLink (NaN → the node)",
    "default_mfu": "optional; catalog default per-card MFU of this model (NaN → vendor default)",
    "mfu": "optional; MFU measured or entered for this card model in this pool (wins over pool)",
    "mfu_from_jobs": "optional; 1 when mfu was filled from this period's job records (measured)",
}

POOL_COLUMNS: Mapping[str, str] = {
    "pool_id": "index or column; unique",
    "site_id, cluster_id": "optional; passed through for aggregation",
    "cooling": "site cooling type: air | rear_door | direct_liquid | immersion (NaN → default)",
    "fabric": "cluster fabric: infiniband | roce | ethernet (NaN → default)",
    "workload_class": "pretraining | finetuning | inference (NaN → default)",
    "duration_h": "period length, h (NaN → default)",
    "pue": "entered PUE for the period (measured)",
    "facility_kwh, it_kwh": "meter readings for the period, kWh (measured; win over pue)",
    "meters_outside_period": "1 when the meter readings are of another period: their PUE is "
    "used, labelled modeled (basis metered_kwh_other_period)",
    "mfu": "MFU entered for the whole pool (measured)",
    "mfu_telemetry": "optional; the pool's DCGM MFU proxy over allocated time, measured "
    "(wins over mfu and the default, not over card-model or throughput MFU)",
    "job_tokens_per_s": "measured tokens/s of the representative job (needs model_params)",
    "job_cards": "cards of the representative job (NaN → all the pool's cards)",
    "model_params": "parameters N of the representative job (NaN → reference workload)",
    "model_active_params": "parameters one token multiplies through, a mixture of experts' "
    "active ones: MFU's and the compute's N (NaN → model_params, a dense model)",
    "model_replicated_params": "weights replicated over data parallelism, whose gradients the "
    "all-reduce carries: an MoE's total less its routed experts (NaN → model_params)",
    "global_batch_tokens": "tokens per optimizer step (NaN → microbatches_per_replica)",
    "model_hidden_size": "hidden size of the model (NaN → estimated from model_params)",
    "tensor_parallel, pipeline_parallel": "job shape t, p (NaN → defaults; t capped at the "
    "NVLink domain, else the node)",
    "checkpoint_interval_h": "entered checkpoint interval τ, h (NaN → checkpoint_interval_rule)",
    "failure_count, failure_exposure_card_hours": "failures over card-hours (measured MTBF)",
    "mtbf_card_hours": "entered per-card MTBF, h, used as given (NaN → default ÷ cooling factor)",
    "productive_h, wall_h": "job logs: productive and wall-clock hours (measured effective time)",
    "utilization_measured": "allocated ÷ available card-hours from usage records (measured)",
    "allocated_card_hours": "allocated card-hours in the period from usage records (measured)",
    "utilization_planned": "entered planning assumption (modeled; NaN → default)",
    "cost_per_card_hours": "money per card-hour (NaN → money columns are NaN)",
    "strategy": "heterogeneous strategy actually run (NaN → the recommended one)",
    "must_span_pool": "bool; one job must use the whole pool, so split_homogeneous is excluded",
    "<any DEFAULTS key>": "per-pool override of a default (NaN → table); see layer_overrides",
}

SPEEDUP_COLUMNS: Mapping[str, str] = {
    "pool_id": "pool the measurement belongs to",
    "cards": "cards in the measured run",
    "throughput": "measured throughput at that size (any unit, consistent within the pool)",
}

OUTPUT_COLUMNS: Mapping[str, str] = {
    "<factor>": "energy, mfu, scaling, effective_time, utilization: value in (0, 1]",
    "<factor>_provenance": "measured | modeled | default",
    "<factor>_basis": "which input produced the value (e.g. metered_kwh, card_default)",
    "<factor>_defaults": "comma-separated DEFAULTS keys whose table value was used ('' if none)",
    "product": "energy × mfu × scaling × effective_time × utilization",
    "cards, job_cards, peak_pflops, duration_h, card_hours": "size of the pool and the period",
    "peak_pflop_days, effective_pflop_days": "peak compute of the period and its delivered share",
    "cooling, fabric, pue, cooling_performance": "inputs behind energy and default MFU",
    "scaling_model, heterogeneity": "scaling = scaling_model × heterogeneity (modeled mode)",
    "tensor_parallel, pipeline_parallel, data_parallel, microbatches_per_replica": "job shape",
    "bubble_fraction, tp_comm_share, dp_exposed_share, tp_crosses_nodes": "scaling breakdown of "
    "the joint job (shares are of compute time; NaN when split_homogeneous is used)",
    "mtbf_card_hours, mtbf_card_basis, mtbf_job_h": "failure model inputs",
    "checkpoint_save_h, restart_h, checkpoint_interval_h": "checkpoint model inputs",
    "lost_checkpoint_share, lost_rework_share, lost_restart_share": "effective-time breakdown",
    "effective_time_stalled": "the job cannot progress: the factor is stored as FACTOR_FLOOR",
    "card_models, vendors, mixing_penalty, microbatches, static_balance": "bucket-effect inputs",
    "h_<strategy>": "heterogeneity factor of each strategy",
    "delivered_pflops_<strategy>": "model PFLOP/s after scaling and failures (before energy "
    "and utilization) under each strategy",
    "split_largest_job_pflops": "delivered PFLOP/s of the largest job under split_homogeneous",
    "recommended_strategy, strategy, strategy_why": "recommendation, strategy used, and why",
    "lost_share, lost_share_<factor>": "1 − product, split in proportion to −ln(factor)",
    "lost_<factor>_card_hours, lost_<factor>_pflop_days, lost_<factor>_money": "the same in units",
}


def _defaults_column(used: Sequence[tuple[str, np.ndarray]], n_rows: int) -> pd.Categorical[str]:
    """Comma-separated names of the defaults used per row, built from bit masks (no row loop)."""
    bits = np.zeros(n_rows, dtype=np.int64)
    for position, (_, mask) in enumerate(used):
        bits |= np.asarray(mask, dtype=np.int64) << position
    codes, unique_bits = pd.factorize(bits, sort=True)
    names = [
        ", ".join(name for position, (name, _) in enumerate(used) if value >> position & 1)
        for value in unique_bits.tolist()
    ]
    return pd.Categorical.from_codes(codes, categories=pd.Index(names))


def evaluate_pools(
    node_groups: pd.DataFrame,
    pools: pd.DataFrame,
    speedup: pd.DataFrame | None = None,
    passthrough: Sequence[str] = ("site_id", "cluster_id"),
) -> pd.DataFrame:
    """The five factors, their product, heterogeneous strategies and waste attribution per pool.

    Inputs are described in :data:`NODE_GROUP_COLUMNS` (one row per node group),
    :data:`POOL_COLUMNS` (one row per pool; NaN = not given) and :data:`SPEEDUP_COLUMNS`
    (optional measured speed-up points); one row of each is typed as
    :class:`~engine.records.NodeGroupRow` and :class:`~engine.records.PoolRow`. Returns a
    frame indexed by pool id with the columns of :data:`OUTPUT_COLUMNS`, plus ``passthrough``
    columns present in ``pools``: one :class:`~engine.records.PoolResultRow` per pool.
    Raises :class:`~engine.factors.EngineInputError` (a ``ValueError``) naming the
    column and pools for impossible inputs, and the defaults errors for bad overrides.
    """
    ctx = PoolContext(node_groups, pools)
    mfu, speed = mfu_step(ctx)
    energy = energy_step(ctx)
    shape, joint = joint_job(ctx, speed)
    failures = failure_model(ctx)
    run = strategies(ctx, speed, shape, joint, failures)
    steps = {
        "energy": energy,
        "mfu": mfu,
        "scaling": scaling_step(ctx, speedup, shape, run),
        "effective_time": effective_time_step(ctx, failures, run.modeled_time),
    }
    duration_h = ctx.setting("duration_h")
    steps["utilization"] = utilization_step(ctx, ctx.pool_cards * duration_h)
    attribution = attribution_columns(ctx, steps, duration_h)
    out: dict[str, object] = {
        column: ctx.pools[column].to_numpy() for column in passthrough if column in ctx.pools
    }
    out |= _factor_columns(steps, ctx.n_pools)
    out |= {key: attribution.pop(key) for key in list(attribution) if not key.startswith("lost")}
    out |= _detail_columns(ctx, steps, joint, failures, run)
    out |= _strategy_columns(run)
    out |= attribution
    return pd.DataFrame(out, index=ctx.labels)


def evaluate_money_inputs(node_groups: pd.DataFrame, pools: pd.DataFrame) -> pd.DataFrame:
    """Only ``pue`` and ``utilization`` per pool, as :func:`evaluate_pools` gives them.

    What pricing a pool needs (a chargeback prices hours, it reports no factor): the same
    checked inputs and the same two steps, without MFU, scaling, strategies and attribution.
    """
    ctx = PoolContext(node_groups, pools)
    energy = energy_step(ctx)
    utilization = utilization_step(ctx, ctx.pool_cards * ctx.setting("duration_h"))
    return pd.DataFrame(
        {"pue": energy.extra["pue"], "utilization": utilization.value}, index=ctx.labels
    )


def _factor_columns(steps: Mapping[str, FactorStep], n_pools: int) -> dict[str, object]:
    out: dict[str, object] = {}
    for name in FACTOR_NAMES:
        step = steps[name]
        out[name] = step.value
        out[f"{name}_provenance"] = categorical(step.provenance, PROVENANCES)
        out[f"{name}_basis"] = step.basis
        out[f"{name}_defaults"] = _defaults_column(step.used, n_pools)
    return out


def _detail_columns(
    ctx: PoolContext,
    steps: Mapping[str, FactorStep],
    joint: ScalingArrays,
    failures: FailureModel,
    run: Strategies,
) -> dict[str, object]:
    """The inputs behind each factor: energy and MFU, the joint job's shape, the failure model."""
    joint_used = ~run.is_split
    time = failures.joint
    return {
        "cooling": categorical(ctx.cooling, COOLING_TYPES),
        "fabric": categorical(ctx.fabric, FABRICS),
        "pue": steps["energy"].extra["pue"],
        "cooling_performance": steps["mfu"].extra["cooling_performance"],
        "scaling_model": run.chosen_model,
        "heterogeneity": run.chosen_h,
        "tensor_parallel": np.where(joint_used, joint.tensor_parallel, np.nan),
        "pipeline_parallel": np.where(joint_used, joint.pipeline_parallel, np.nan),
        "data_parallel": np.where(joint_used, joint.data_parallel, np.nan),
        "microbatches_per_replica": np.where(joint_used, joint.microbatches_per_replica, np.nan),
        "bubble_fraction": np.where(joint_used, joint.bubble_fraction, np.nan),
        "tp_comm_share": np.where(joint_used, joint.tp_comm_s / joint.compute_s, np.nan),
        "dp_exposed_share": np.where(joint_used, joint.dp_exposed_s / joint.compute_s, np.nan),
        "tp_crosses_nodes": joint.tp_crosses_nodes & joint_used,
        "mtbf_card_hours": failures.mtbf_card_hours,
        "mtbf_card_basis": categorical(failures.mtbf_basis, MTBF_BASES),
        "mtbf_job_h": time.mtbf_job_h,
        "checkpoint_save_h": failures.save_h,
        "restart_h": failures.restart_h,
        "checkpoint_interval_h": time.checkpoint_interval_h,
        "lost_checkpoint_share": time.lost_checkpoint_share,
        "lost_rework_share": time.lost_rework_share,
        "lost_restart_share": time.lost_restart_share,
        "effective_time_stalled": steps["effective_time"].value <= FACTOR_FLOOR,
    }


def _strategy_columns(run: Strategies) -> dict[str, object]:
    bucket = run.bucket
    out: dict[str, object] = {
        "card_models": bucket.models,
        "vendors": bucket.vendors,
        "mixing_penalty": bucket.mixing_penalty,
        "microbatches": bucket.microbatches,
        "static_balance": bucket.static_balance,
    }
    for position, name in enumerate(STRATEGIES):
        out[f"h_{name}"] = run.heterogeneity[:, position]
    for position, name in enumerate(STRATEGIES):
        out[f"delivered_pflops_{name}"] = run.delivered[:, position] / 1000.0
    out["split_largest_job_pflops"] = run.largest_split_job / 1000.0
    out["recommended_strategy"] = categorical(run.recommended, STRATEGIES)
    out["strategy"] = categorical(run.strategy, STRATEGIES)
    out["strategy_why"] = why_categorical(run.recommended, bucket.mix_class)
    return out


# --- scalar calculator ------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeGroup:
    """One node group of a pool for :func:`evaluate_pool` (see :data:`NODE_GROUP_COLUMNS`)."""

    accelerator: str
    vendor: str
    peak_tflops: float
    nodes: int
    cards_per_node: int
    nvlink_bidir_gbs: float | None = None
    default_mfu: float | None = None
    mfu: float | None = None
    nvlink_domain_cards: float | None = None


@dataclass(frozen=True)
class StrategyOutcome:
    strategy: str
    heterogeneity: float
    delivered_pflops: float


@dataclass(frozen=True)
class PoolEvaluation:
    """Everything :func:`evaluate_pools` says about one pool, typed."""

    factors: dict[str, FactorResult]
    product: float
    lost_share: float
    lost_share_by_factor: dict[str, float]
    strategies: tuple[StrategyOutcome, ...]
    recommended_strategy: str
    strategy: str
    why: str
    row: PoolResultRow  # the full output row


_FACTOR_INPUTS: Mapping[str, tuple[str, ...]] = {
    "energy": ("pue", "cooling"),
    "mfu": ("cooling_performance",),
    "scaling": (
        "scaling_model",
        "heterogeneity",
        "tensor_parallel",
        "pipeline_parallel",
        "data_parallel",
        "microbatches_per_replica",
        "bubble_fraction",
        "tp_comm_share",
        "dp_exposed_share",
    ),
    "effective_time": (
        "mtbf_card_hours",
        "mtbf_job_h",
        "checkpoint_save_h",
        "restart_h",
        "checkpoint_interval_h",
        "lost_checkpoint_share",
        "lost_rework_share",
        "lost_restart_share",
    ),
    "utilization": ("card_hours",),
}


def evaluate_pool(
    node_groups: Sequence[NodeGroup],
    *,
    speedup: Mapping[float, float] | None = None,
    **pool_inputs: object,
) -> PoolEvaluation:
    """Evaluate one pool through :func:`evaluate_pools` (keywords as in :data:`POOL_COLUMNS`)."""
    if not node_groups:
        raise ValueError("a pool needs at least one node group")
    groups = pd.DataFrame([{"pool_id": 0, **asdict(group)} for group in node_groups])
    floats = ("nvlink_bidir_gbs", "default_mfu", "mfu", "nvlink_domain_cards")
    groups = groups.astype(dict.fromkeys(floats, float))
    pool = pd.DataFrame([{"pool_id": 0, **pool_inputs}])
    table = (
        pd.DataFrame(
            {"pool_id": 0, "cards": list(speedup.keys()), "throughput": list(speedup.values())}
        )
        if speedup
        else None
    )
    row = evaluate_pools(groups, pool, table).iloc[0].to_dict()
    factors = {
        name: FactorResult(
            name=name,
            value=float(row[name]),
            provenance=str(row[f"{name}_provenance"]),
            basis=str(row[f"{name}_basis"]),
            inputs={
                key: (row[key] if isinstance(row[key], str) else float(row[key]))
                for key in _FACTOR_INPUTS[name]
            },
            defaults_used=tuple(filter(None, str(row[f"{name}_defaults"]).split(", "))),
        )
        for name in FACTOR_NAMES
    }
    return PoolEvaluation(
        factors=factors,
        product=float(row["product"]),
        lost_share=float(row["lost_share"]),
        lost_share_by_factor={name: float(row[f"lost_share_{name}"]) for name in FACTOR_NAMES},
        strategies=tuple(
            StrategyOutcome(name, float(row[f"h_{name}"]), float(row[f"delivered_pflops_{name}"]))
            for name in STRATEGIES
        ),
        recommended_strategy=str(row["recommended_strategy"]),
        strategy=str(row["strategy"]),
        why=str(row["strategy_why"]),
        row=cast(PoolResultRow, row),
    )

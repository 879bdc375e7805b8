"""Scaling step: the joint job's shape and modeled scaling, then the scaling factor.

Precedence: a measured speed-up table of the pool (measured; kernel:
``scaling.speedup_efficiency``) > the communication/bubble model of the strategy run ×
its heterogeneity factor (modeled; kernels: ``scaling.modeled_scaling_arrays`` and the
bucket effect in :mod:`engine.steps.bucket`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.defaults import FABRICS, FACTOR_FLOOR
from engine.factors import choice_lookup, require
from engine.heterogeneous import DYNAMIC
from engine.scaling import ScalingArrays, modeled_scaling_arrays, speedup_efficiency
from engine.steps.bucket import Strategies
from engine.steps.context import (
    DefaultsUsed,
    FactorStep,
    PoolContext,
    categorical,
    optional,
    provenance_codes,
)
from engine.steps.mfu import CardSpeed

SCALING_BASES: tuple[str, ...] = ("speedup_table", "comm_model")
SCALING_PROVENANCE: tuple[str, ...] = ("measured", "modeled")
# Defaults the communication model reads whenever the pool gives no value.
_MODEL_KEYS: tuple[str, ...] = (
    "model_params",
    "pipeline_parallel",
    "micro_batch_tokens",
    "gradient_bytes_per_param",
    "dp_overlap_share",
    "inter_node_gbit_s_per_card",
    "flops_per_param_token",
)


def joint_job(ctx: PoolContext, speed: CardSpeed) -> tuple[dict[str, np.ndarray], ScalingArrays]:
    """The job shape per pool and the modeled scaling of one job spanning ``job_cards``."""
    shape = {
        "inter_node_gbit_s_per_card": ctx.setting("inter_node_gbit_s_per_card"),
        "fabric_efficiency": choice_lookup(
            ctx.fabric, [ctx.setting(f"fabric_efficiency_{f}") for f in FABRICS]
        ),
        "model_params": ctx.setting("model_params"),
        "model_active_params": ctx.column("model_active_params"),
        "model_replicated_params": ctx.column("model_replicated_params"),
        "tensor_parallel": ctx.column("tensor_parallel"),
        "pipeline_parallel": ctx.setting("pipeline_parallel"),
        "microbatches_per_replica": ctx.setting("microbatches_per_replica"),
        "global_batch_tokens": ctx.column("global_batch_tokens"),
        "micro_batch_tokens": ctx.setting("micro_batch_tokens"),
        "model_hidden_size": ctx.column("model_hidden_size"),
        "flops_per_param_token": ctx.setting("flops_per_param_token"),
        "gradient_bytes_per_param": ctx.setting("gradient_bytes_per_param"),
        "dp_overlap_share": ctx.setting("dp_overlap_share"),
    }
    joint = modeled_scaling_arrays(
        ctx.job_cards,
        speed.pool_speed / ctx.pool_cards,
        ctx.segments.min(ctx.cards_per_node),
        nvlink_bidir_gbs=ctx.segments.min(ctx.nvlink),
        scale_up_cards=ctx.segments.min(ctx.scale_up),
        **shape,
    )
    return shape, joint


def _speedup_table(ctx: PoolContext, speedup: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray]:
    """Scaling from measured speed-up points at ``job_cards`` and where a table exists."""
    if speedup is None or not len(speedup):
        return np.full(ctx.n_pools, np.nan), np.zeros(ctx.n_pools, dtype=bool)
    table_pool = ctx.labels.get_indexer(pd.Index(speedup["pool_id"]))
    require(table_pool >= 0, "speedup.pool_id not found in pools", speedup["pool_id"].tolist())
    return speedup_efficiency(
        table_pool,
        optional(speedup, "cards"),
        optional(speedup, "throughput"),
        np.arange(ctx.n_pools),
        ctx.job_cards,
    )


def scaling_step(
    ctx: PoolContext,
    speedup: pd.DataFrame | None,
    shape: dict[str, np.ndarray],
    run: Strategies,
) -> FactorStep:
    table_scaling, has_table = _speedup_table(ctx, speedup)
    modeled = np.clip(run.chosen_model * run.chosen_h, FACTOR_FLOOR, 1.0)
    basis = np.where(has_table, 0, 1)
    return FactorStep(
        value=np.where(has_table, table_scaling, modeled),
        basis=categorical(basis, SCALING_BASES),
        provenance=provenance_codes(basis, SCALING_PROVENANCE),
        used=_scaling_defaults_used(ctx, shape, run, ~has_table),
    )


def _scaling_defaults_used(
    ctx: PoolContext, shape: dict[str, np.ndarray], run: Strategies, modeled: np.ndarray
) -> DefaultsUsed:
    mix = run.bucket.mix_class
    joint_mixed = modeled & ~run.is_split
    used: DefaultsUsed = [(key, modeled & ctx.defaulted(key)) for key in _MODEL_KEYS]
    used += [
        ("tensor_parallel", modeled & np.isnan(shape["tensor_parallel"])),
        (
            "microbatches_per_replica",
            modeled
            & np.isnan(shape["global_batch_tokens"])
            & ctx.defaulted("microbatches_per_replica"),
        ),
        ("fabric", modeled & ctx.fabric_defaulted),
        (
            "intra_node_bidir_gbs",
            modeled
            & ctx.any_group(np.isnan(ctx.nvlink_given))
            & ctx.defaulted("intra_node_bidir_gbs"),
        ),
        (
            "mixing_penalty_same_vendor",
            joint_mixed & (mix == 1) & ctx.defaulted("mixing_penalty_same_vendor"),
        ),
        (
            "mixing_penalty_cross_vendor",
            joint_mixed & (mix == 2) & ctx.defaulted("mixing_penalty_cross_vendor"),
        ),
        (
            "granularity_penalty",
            modeled & (run.strategy == DYNAMIC) & ctx.defaulted("granularity_penalty"),
        ),
    ]
    used += [
        (
            f"fabric_efficiency_{f}",
            modeled & (ctx.fabric == i) & ctx.defaulted(f"fabric_efficiency_{f}"),
        )
        for i, f in enumerate(FABRICS)
    ]
    return used

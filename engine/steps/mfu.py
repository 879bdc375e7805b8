"""MFU step: per node group by precedence, then per pool weighted by peak FLOP/s.

Precedence per node group (kernel: ``factors.group_mfu_arrays``): an MFU entered for the
card model in this pool > the MFU derived from the pool's measured job throughput > an MFU
entered for the whole pool > the default (catalog or vendor MFU × workload × cooling).
A group MFU filled from this period's job records is measured, not entered. The pool's
telemetry MFU proxy (``mfu_telemetry``, DCGM tensor activity over the allocated time) is
measured too: it replaces an MFU entered for the whole pool and the default, never a
card-model MFU (entered or from job records) nor one derived from job throughput.
The throughput MFU counts a mixture of experts' active parameters (``model_active_params``,
from the catalog model a pool names): a token multiplies through those alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.defaults import COOLING_TYPES, VENDOR_KEYS, WORKLOAD_CLASSES
from engine.factors import (
    MFU_BASES,
    MFU_PROVENANCE,
    choice_lookup,
    default_mfu_arrays,
    group_mfu_arrays,
    mfu_from_throughput,
    require,
)
from engine.steps.context import (
    DefaultsUsed,
    FactorStep,
    PoolContext,
    categorical,
    provenance_codes,
)

_DEFAULT = MFU_BASES.index("card_default")
_THROUGHPUT = MFU_BASES.index("job_throughput")
_TELEMETRY = MFU_BASES.index("telemetry_proxy")
_BELOW_TELEMETRY = (MFU_BASES.index("pool_entered"), _DEFAULT)


@dataclass
class CardSpeed:
    """Effective TFLOP/s per card of each node group and their sum per pool (W = Σ n_i s_i)."""

    group_speed: np.ndarray
    pool_speed: np.ndarray


def mfu_step(ctx: PoolContext) -> tuple[FactorStep, CardSpeed]:
    k = ctx.setting("flops_per_param_token")
    params = ctx.column("model_params")
    tokens_per_s = ctx.column("job_tokens_per_s")
    ctx.require(
        np.isnan(tokens_per_s) | ~np.isnan(params),
        "job_tokens_per_s needs model_params to derive MFU",
    )
    derived = mfu_from_throughput(
        active_params(ctx, params),
        tokens_per_s,
        ctx.job_cards,
        ctx.pool_peak_tflops / ctx.pool_cards,
        k,
    )
    cooling_performance = choice_lookup(
        ctx.cooling, [ctx.setting(f"cooling_performance_{c}") for c in COOLING_TYPES]
    )
    gp = ctx.group_pool
    default = default_mfu_arrays(
        ctx.card_default_mfu,
        choice_lookup(ctx.vendor, [ctx.setting(f"mfu_default_{v}")[gp] for v in VENDOR_KEYS]),
        choice_lookup(ctx.workload, [ctx.setting(f"workload_mfu_{w}") for w in WORKLOAD_CLASSES])[
            gp
        ],
        cooling_performance[gp],
    )
    group_mfu, group_basis = group_mfu_arrays(
        ctx.group_mfu_entered, derived[gp], ctx.column("mfu")[gp], default
    )
    group_basis = np.where(
        (group_basis == 0) & ctx.mfu_from_jobs, MFU_BASES.index("job_records"), group_basis
    )
    group_mfu, group_basis = _with_telemetry(ctx, group_mfu, group_basis)
    require(
        (group_mfu > 0) & (group_mfu <= 1.0),
        "MFU must be in (0, 1] (check mfu / job_tokens_per_s)",
        ctx.labels[gp].tolist(),
    )
    group_speed = ctx.peak * group_mfu
    pool_speed = ctx.segments.sum(ctx.cards * group_speed)
    peak_weight = ctx.cards * ctx.peak
    basis_share = np.column_stack(
        [ctx.segments.sum(peak_weight * (group_basis == b)) for b in range(len(MFU_BASES))]
    )
    basis = np.argmax(basis_share, axis=1)
    step = FactorStep(
        value=pool_speed / ctx.pool_peak_tflops,
        basis=categorical(basis, MFU_BASES),
        provenance=provenance_codes(basis, MFU_PROVENANCE),
        used=_mfu_defaults_used(ctx, group_basis),
        extra={"cooling_performance": cooling_performance},
    )
    return step, CardSpeed(group_speed, pool_speed)


def active_params(ctx: PoolContext, params: np.ndarray) -> np.ndarray:
    """N of k·N·tokens/s: a mixture of experts' active parameters, else ``params`` (dense)."""
    active = ctx.column("model_active_params")
    return np.where(np.isnan(active), params, active)


def _with_telemetry(
    ctx: PoolContext, group_mfu: np.ndarray, group_basis: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The pool's telemetry proxy replaces a pool-entered or default MFU of its node groups."""
    proxy = ctx.column("mfu_telemetry")[ctx.group_pool]
    use = ~np.isnan(proxy) & np.isin(group_basis, _BELOW_TELEMETRY)
    return np.where(use, proxy, group_mfu), np.where(use, _TELEMETRY, group_basis)


def _mfu_defaults_used(ctx: PoolContext, group_basis: np.ndarray) -> DefaultsUsed:
    """Table values behind the MFU of pools where some node group fell back to the default."""
    any_default = ctx.any_group(group_basis == _DEFAULT)
    vendor_default = (group_basis == _DEFAULT) & np.isnan(ctx.card_default_mfu)
    used: DefaultsUsed = [
        ("cooling", ctx.cooling_defaulted & any_default),
        ("workload_class", ctx.workload_defaulted & any_default),
    ]
    used += [
        (
            f"mfu_default_{v}",
            ctx.any_group(
                vendor_default
                & (ctx.vendor == i)
                & ctx.defaulted(f"mfu_default_{v}")[ctx.group_pool]
            ),
        )
        for i, v in enumerate(VENDOR_KEYS)
    ]
    used += [
        (
            f"workload_mfu_{w}",
            any_default & (ctx.workload == i) & ctx.defaulted(f"workload_mfu_{w}"),
        )
        for i, w in enumerate(WORKLOAD_CLASSES)
    ]
    used += [
        (
            f"cooling_performance_{c}",
            any_default & (ctx.cooling == i) & ctx.defaulted(f"cooling_performance_{c}"),
        )
        for i, c in enumerate(COOLING_TYPES)
    ]
    used += [
        (
            "flops_per_param_token",
            ctx.any_group(group_basis == _THROUGHPUT) & ctx.defaulted("flops_per_param_token"),
        )
    ]
    return used

"""Utilization step: allocated ÷ available card-hours of the period.

Precedence (kernel: ``factors.utilization_arrays``): a measured share from usage records >
allocated card-hours from usage records (both measured) > an entered planning assumption
(modeled) > the default planned utilization (default).
"""

from __future__ import annotations

import numpy as np

from engine.defaults import DEFAULTS, resolve_column
from engine.factors import UTILIZATION_BASES, UTILIZATION_PROVENANCE, utilization_arrays
from engine.steps.context import FactorStep, PoolContext, categorical, provenance_codes

_PLANNED_DEFAULT = UTILIZATION_BASES.index("planned_default")


def utilization_step(ctx: PoolContext, card_hours: np.ndarray) -> FactorStep:
    """``card_hours``: available card-hours of each pool in the period."""
    planned, planned_defaulted = resolve_column(ctx.pools, "utilization_planned")
    measured = ctx.column("utilization_measured")
    allocated = ctx.column("allocated_card_hours")
    ctx.require(
        np.isnan(measured) | ((measured >= 0) & (measured <= 1)),
        "utilization_measured must be in [0, 1]",
    )
    ctx.require(
        np.isnan(allocated) | ((allocated >= 0) & (allocated <= card_hours * (1 + 1e-9))),
        "allocated_card_hours must be in [0, cards × duration_h]",
    )
    value, basis = utilization_arrays(
        measured,
        allocated,
        card_hours,
        np.where(planned_defaulted, np.nan, planned),
        float(DEFAULTS["utilization_planned"].value),
    )
    return FactorStep(
        value=np.minimum(value, 1.0),
        basis=categorical(basis, UTILIZATION_BASES),
        provenance=provenance_codes(basis, UTILIZATION_PROVENANCE),
        used=[("utilization_planned", basis == _PLANNED_DEFAULT)],
    )

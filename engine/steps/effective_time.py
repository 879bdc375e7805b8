"""Effective training time step: the failure/checkpoint model, then job logs over it.

Precedence: job logs of the period, productive ÷ wall-clock hours (measured) > the
failure/checkpoint model of the strategy actually run (modeled; kernel:
``reliability.effective_time_arrays``). The per-card MTBF behind the model: failures
observed over card-hours (measured) > an entered MTBF > the default ÷ the cooling type's
failure rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.defaults import COOLING_TYPES, FACTOR_FLOOR, INTERVAL_RULES
from engine.factors import choice_lookup
from engine.reliability import (
    EffectiveTimeArrays,
    effective_time_arrays,
    failures_count,
    mtbf_card_from_failures,
)
from engine.steps.context import (
    FactorStep,
    PoolContext,
    categorical,
    provenance_codes,
)

MTBF_BASES: tuple[str, ...] = ("failures_measured", "entered", "cooling_adjusted_default")
TIME_BASES: tuple[str, ...] = ("job_logs", "failure_model")
TIME_PROVENANCE: tuple[str, ...] = ("measured", "modeled")
_INTERVAL_DALY = INTERVAL_RULES.index("daly")


@dataclass
class FailureModel:
    """Per-pool failure/checkpoint inputs and the joint job's modeled effective time."""

    mtbf_card_hours: np.ndarray
    mtbf_basis: np.ndarray
    save_h: np.ndarray
    restart_h: np.ndarray
    interval_given: np.ndarray
    use_daly: np.ndarray
    joint: EffectiveTimeArrays

    def for_jobs(self, cards: np.ndarray, pool: np.ndarray) -> EffectiveTimeArrays:
        """The model for other jobs (e.g. one per card model) of pools ``pool``."""
        return effective_time_arrays(
            cards,
            self.mtbf_card_hours[pool],
            self.save_h[pool],
            self.restart_h[pool],
            self.interval_given[pool],
            self.use_daly[pool],
        )


def failure_model(ctx: PoolContext) -> FailureModel:
    failures, exposure = ctx.column("failure_count"), ctx.column("failure_exposure_card_hours")
    mtbf_entered = ctx.column("mtbf_card_hours")
    failure_rate = choice_lookup(
        ctx.cooling, [ctx.setting(f"failure_rate_{c}") for c in COOLING_TYPES]
    )
    measured = failures_count(failures, exposure)
    mtbf_basis = np.where(measured, 0, np.where(~np.isnan(mtbf_entered), 1, 2))
    mtbf_card = np.select(
        [mtbf_basis == 0, mtbf_basis == 1],
        [mtbf_card_from_failures(failures, exposure), mtbf_entered],
        ctx.setting("mtbf_card_hours") / failure_rate,
    )
    ctx.require(mtbf_card > 0, "MTBF per card must be positive")
    save_h, restart_h = ctx.setting("checkpoint_save_h"), ctx.setting("restart_h")
    interval_given = ctx.column("checkpoint_interval_h")
    ctx.require(
        np.isnan(interval_given) | (interval_given > 0), "checkpoint_interval_h must be > 0"
    )
    use_daly = ctx.interval_rule == _INTERVAL_DALY
    joint = effective_time_arrays(
        ctx.job_cards, mtbf_card, save_h, restart_h, interval_given, use_daly
    )
    return FailureModel(mtbf_card, mtbf_basis, save_h, restart_h, interval_given, use_daly, joint)


def effective_time_step(
    ctx: PoolContext, failures: FailureModel, modeled_time: np.ndarray
) -> FactorStep:
    """``modeled_time``: the failure model's factor for the strategy run (joint or split)."""
    productive_h, wall_h = ctx.column("productive_h"), ctx.column("wall_h")
    logged = ~np.isnan(productive_h) & ~np.isnan(wall_h)
    ctx.require(
        ~logged | ((wall_h > 0) & (productive_h >= 0) & (productive_h <= wall_h * (1 + 1e-9))),
        "job logs need 0 <= productive_h <= wall_h and wall_h > 0",
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        logged_share = productive_h / wall_h
    value = np.clip(np.where(logged, logged_share, modeled_time), FACTOR_FLOOR, 1.0)
    modeled = ~logged
    from_table = modeled & (failures.mtbf_basis == 2)
    used = [
        ("mtbf_card_hours", from_table & ctx.defaulted("mtbf_card_hours")),
        ("cooling", from_table & ctx.cooling_defaulted),
        ("checkpoint_save_h", modeled & ctx.defaulted("checkpoint_save_h")),
        ("restart_h", modeled & ctx.defaulted("restart_h")),
        (
            "checkpoint_interval_rule",
            modeled & np.isnan(failures.interval_given) & ctx.rule_defaulted,
        ),
    ]
    used += [
        (f"failure_rate_{c}", from_table & (ctx.cooling == i) & ctx.defaulted(f"failure_rate_{c}"))
        for i, c in enumerate(COOLING_TYPES)
    ]
    basis = np.where(logged, 0, 1)
    return FactorStep(
        value, categorical(basis, TIME_BASES), provenance_codes(basis, TIME_PROVENANCE), used
    )

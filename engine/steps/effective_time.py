"""Effective training time step: the failure/checkpoint model, then job logs over it.

Precedence: job logs of the period, productive ÷ wall-clock hours (measured) > the
failure/checkpoint model of the strategy actually run (modeled; kernel:
``reliability.effective_time_arrays``). The per-card MTBF behind the model: failures
observed over card-hours (measured) > an entered MTBF > the default (the pool's card
generation's published figure where all its cards share one, else ``mtbf_card_hours``) ÷ the
cooling type's failure rate. A default restart grows with the job's size (production
practice, ``reliability.restart_h_at``); an entered one is used as given.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.defaults import COOLING_TYPES, FACTOR_FLOOR, INTERVAL_RULES, MTBF_GENERATIONS
from engine.factors import choice_lookup
from engine.reliability import (
    EffectiveTimeArrays,
    card_generation,
    effective_time_arrays,
    failures_count,
    mtbf_card_from_failures,
    restart_h_at,
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
    restart_base_h: np.ndarray  # at 1,024 cards or fewer
    restart_growth_h: np.ndarray  # per doubling above; 0 where the restart was entered
    interval_given: np.ndarray
    use_daly: np.ndarray
    joint: EffectiveTimeArrays
    restart_h: np.ndarray  # at the joint job's size

    def for_jobs(self, cards: np.ndarray, pool: np.ndarray) -> EffectiveTimeArrays:
        """The model for other jobs (e.g. one per card model) of pools ``pool``."""
        return effective_time_arrays(
            cards,
            self.mtbf_card_hours[pool],
            self.save_h[pool],
            restart_h_at(self.restart_base_h[pool], cards, self.restart_growth_h[pool]),
            self.interval_given[pool],
            self.use_daly[pool],
        )


def _generation_of_pools(ctx: PoolContext) -> list[tuple[str, np.ndarray]]:
    """Per generation with a published MTBF, the pools whose cards all belong to it."""
    of_group = card_generation(np.asarray(ctx.accelerators, dtype=object))[ctx.accelerator_code]
    return [(g, ~ctx.any_group(of_group != g)) for g in MTBF_GENERATIONS]


def _table_mtbf(ctx: PoolContext) -> tuple[np.ndarray, list[tuple[str, np.ndarray]]]:
    """The table MTBF per pool before cooling: a generation's figure where the general one
    is not overridden, and which generation keys each pool used."""
    general = ctx.setting("mtbf_card_hours")
    mtbf, used = general.copy(), []
    for generation, pools in _generation_of_pools(ctx):
        chosen = pools & ctx.defaulted("mtbf_card_hours")
        key = f"mtbf_card_hours_{generation}"
        mtbf = np.where(chosen, ctx.setting(key), mtbf)
        used.append((key, chosen))
    return mtbf, used


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
        _table_mtbf(ctx)[0] / failure_rate,
    )
    ctx.require(mtbf_card > 0, "MTBF per card must be positive")
    save_h, restart_base = ctx.setting("checkpoint_save_h"), ctx.setting("restart_h")
    growth = np.where(ctx.defaulted("restart_h"), ctx.setting("restart_growth_h_per_doubling"), 0.0)
    interval_given = ctx.column("checkpoint_interval_h")
    ctx.require(
        np.isnan(interval_given) | (interval_given > 0), "checkpoint_interval_h must be > 0"
    )
    use_daly = ctx.interval_rule == _INTERVAL_DALY
    restart_h = restart_h_at(restart_base, ctx.job_cards, growth)
    joint = effective_time_arrays(
        ctx.job_cards, mtbf_card, save_h, restart_h, interval_given, use_daly
    )
    return FailureModel(
        mtbf_card_hours=mtbf_card,
        mtbf_basis=mtbf_basis,
        save_h=save_h,
        restart_base_h=restart_base,
        restart_growth_h=growth,
        interval_given=interval_given,
        use_daly=use_daly,
        joint=joint,
        restart_h=restart_h,
    )


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
    by_generation = _table_mtbf(ctx)[1]
    of_a_generation = np.logical_or.reduce([pools for _, pools in by_generation])
    used = [
        ("mtbf_card_hours", from_table & ctx.defaulted("mtbf_card_hours") & ~of_a_generation),
        *((key, from_table & pools & ctx.defaulted(key)) for key, pools in by_generation),
        ("cooling", from_table & ctx.cooling_defaulted),
        ("checkpoint_save_h", modeled & ctx.defaulted("checkpoint_save_h")),
        ("restart_h", modeled & ctx.defaulted("restart_h")),
        (
            "restart_growth_h_per_doubling",
            modeled
            & (failures.restart_growth_h > 0)
            & (ctx.job_cards > 1024)
            & ctx.defaulted("restart_growth_h_per_doubling"),
        ),
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

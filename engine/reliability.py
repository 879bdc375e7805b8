"""Failures, checkpoints and effective training time (docs/efficiency-model.md).

All functions take scalars or numpy arrays (broadcast together) and are the one
implementation used by both the vectorised engine and the scalar calculators.

Model, per job on ``n`` cards:

* ``MTBF_job = MTBF_card / n`` (failures of independent cards add up);
* checkpoint every ``τ`` hours, each save blocking for ``δ`` hours; after a failure the job
  loses on average half an interval of work and ``R`` hours of restart;
* lost share of wall time ``δ/τ + (τ/2 + R)/MTBF_job``;
  ``effective_time = max(0, 1 − lost)`` — a zero is stored as ``FACTOR_FLOOR`` with
  ``stalled = True`` ("the job cannot progress"), so the factor stays in (0, 1].

The effective time is Meta's ETTR (effective training time ratio) and Google's runtime
goodput. Defaults follow production practice (asynchronous saves blocking seconds, automated
restarts growing with the job, MTBF by card generation from production fleets); the research
cluster preset (``site_kind="research"``) takes Meta's RSC figures instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from engine.defaults import (
    COOLING_TYPES,
    DEFAULTS,
    FACTOR_FLOOR,
    MTBF_GENERATIONS,
    MTBF_GENERATIONS_WITHOUT_FIGURE,
)


def mtbf_job_h(mtbf_card_hours: ArrayLike, cards: ArrayLike) -> np.ndarray:
    """Mean time between failures of a job on ``cards`` cards, in hours."""
    return np.asarray(mtbf_card_hours, dtype=np.float64) / np.asarray(cards, dtype=np.float64)


def mtbf_from_interruptions(interruptions: ArrayLike, period_h: ArrayLike) -> np.ndarray:
    """Observed MTBF (hours) of one job from its interruption count over a wall period."""
    return np.asarray(period_h, dtype=np.float64) / np.asarray(interruptions, dtype=np.float64)


# Fewer card-hours of jobs than this say too little about a pool's failure rate to replace
# the default; zero failures give only a lower bound (exposure ÷ 1), never used either.
MIN_FAILURE_EXPOSURE_CARD_HOURS = 10_000.0


def failures_count(failures: ArrayLike, exposure_card_hours: ArrayLike) -> np.ndarray:
    """Where observed failures are enough to measure the MTBF: at least one failure over at
    least :data:`MIN_FAILURE_EXPOSURE_CARD_HOURS` card-hours (the plans' rule as well)."""
    failures_arr = np.asarray(failures, dtype=float)
    exposure = np.asarray(exposure_card_hours, dtype=float)
    with np.errstate(invalid="ignore"):
        return (failures_arr >= 1) & (exposure >= MIN_FAILURE_EXPOSURE_CARD_HOURS)


def mtbf_card_from_failures(failures: ArrayLike, exposure_card_hours: ArrayLike) -> np.ndarray:
    """Per-card MTBF (hours) from failures observed over ``exposure_card_hours`` card-hours.

    With zero failures the estimate is the exposure itself (a lower bound), not infinity.
    """
    failures_arr = np.asarray(failures, dtype=float)
    mtbf: np.ndarray = np.asarray(exposure_card_hours, dtype=float) / np.maximum(failures_arr, 1.0)
    return mtbf


# The effective-time presets a user picks; "unknown" (not declared) is production practice.
RELIABILITY_PRESETS: tuple[str, ...] = ("production", "research")
PRESET_LABELS = {"production": "Production fleet", "research": "Research cluster"}
SITE_KINDS: tuple[str, ...] = ("unknown", *RELIABILITY_PRESETS)
RESTART_GROWTH_FROM_CARDS = 1024.0


def restart_h_at(
    restart_h: ArrayLike, cards: ArrayLike, growth_h_per_doubling: ArrayLike
) -> np.ndarray:
    """Restart time of a job on ``cards`` cards: the base, plus the growth per doubling of
    the job above 1,024 cards (more nodes to replace, bigger communicators to set up)."""
    doublings = np.log2(np.maximum(np.asarray(cards, dtype=float) / RESTART_GROWTH_FROM_CARDS, 1))
    restart: np.ndarray = (
        np.asarray(restart_h, dtype=float) + np.asarray(growth_h_per_doubling) * doublings
    )
    return restart


def site_kind_defaults(site_kind: ArrayLike) -> dict[str, np.ndarray]:
    """Table MTBF per card (where the card generation has no figure) and restart time at
    1,024 cards for each site kind; unknown (not declared) is production practice."""
    names = np.asarray(site_kind).astype(str)
    mtbf = {
        "unknown": DEFAULTS["mtbf_card_hours_production"].value,
        "production": DEFAULTS["mtbf_card_hours_production"].value,
        "research": DEFAULTS["mtbf_card_hours_research"].value,
    }
    restart = {
        "unknown": DEFAULTS["restart_h"].value,
        "production": DEFAULTS["restart_h_production"].value,
        "research": DEFAULTS["restart_h_research"].value,
    }
    masks = [names == kind for kind in SITE_KINDS]
    return {
        "mtbf_card_hours": np.select(masks, [float(mtbf[k]) for k in SITE_KINDS], np.nan),
        "restart_h": np.select(masks, [float(restart[k]) for k in SITE_KINDS], np.nan),
    }


GENERATION_LABELS = {
    "ampere": "Ampere",
    "hopper": "Hopper",
    "blackwell": "Blackwell",
    "ascend_910b": "Ascend 910B",
}
# Catalog names as vendors print them; word boundaries keep A10 from matching A100.
_GENERATION_PATTERNS: tuple[tuple[str, str], ...] = (
    ("ampere", r"\b(?:A100|A800|A40|A30|A10)\b"),
    ("hopper", r"\b(?:GH200|H100|H200|H800|H20)\b"),
    ("blackwell", r"\b(?:GB200|GB300|B100|B200|B300)\b"),
    ("ascend_910b", r"910B"),
)


def card_generation(accelerator: ArrayLike) -> np.ndarray:
    """Generation key per catalog card name ("" when not recognised)."""
    names = pd.Series(np.asarray(accelerator).astype(str))
    masks = [
        names.str.contains(p, case=False, regex=True).to_numpy() for _, p in _GENERATION_PATTERNS
    ]
    return np.select(masks, [g for g, _ in _GENERATION_PATTERNS], "").astype(object)


def _generation_mtbf_h(generation: np.ndarray) -> np.ndarray:
    """The generation's published MTBF per card (NaN where none is published)."""
    values = [float(DEFAULTS[f"mtbf_card_hours_{g}"].value) for g in MTBF_GENERATIONS]
    return np.select([generation == g for g in MTBF_GENERATIONS], values, np.nan)


_KIND_BASIS = {
    "unknown": "default for a production fleet (mtbf_card_hours_production)",
    "production": "default for a production fleet (mtbf_card_hours_production)",
    "research": "research-cluster preset (mtbf_card_hours_research)",
}


def default_mtbf_card_hours(
    site_kind: ArrayLike, generation: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """Table MTBF per card and its basis: the research-cluster preset's figure; otherwise
    (production practice) the card generation's published fleet figure, else the site kind's
    default."""
    kind = np.asarray(site_kind).astype(str)
    gen = np.asarray(generation).astype(str)
    by_generation = _generation_mtbf_h(gen)
    use_generation = (kind != "research") & ~np.isnan(by_generation)
    mtbf = np.where(use_generation, by_generation, site_kind_defaults(kind)["mtbf_card_hours"])
    labels = pd.Series(gen).map(GENERATION_LABELS).fillna("")
    basis = np.where(
        use_generation,
        "default for " + labels + " cards (mtbf_card_hours_" + pd.Series(gen) + ")",
        pd.Series(kind).map(_KIND_BASIS).fillna("general default"),
    ).astype(object)
    reasons = pd.Series(gen).map(MTBF_GENERATIONS_WITHOUT_FIGURE)
    without = reasons.notna().to_numpy() & (kind != "research")  # the preset's own
    basis[without] = basis[without] + "; " + reasons[without].to_numpy()
    return mtbf, basis


def default_restart_h(site_kind: ArrayLike, cards: ArrayLike) -> np.ndarray:
    """Table restart time of a job on ``cards`` cards: the site kind's figure at 1,024 cards,
    grown by ``restart_growth_h_per_doubling`` above (an entered restart is used as given)."""
    base = site_kind_defaults(site_kind)["restart_h"]
    return restart_h_at(base, cards, float(DEFAULTS["restart_growth_h_per_doubling"].value))


def young_interval_h(checkpoint_save_h: ArrayLike, mtbf_job_hours: ArrayLike) -> np.ndarray:
    """Young's first-order optimal checkpoint interval ``sqrt(2 δ M)`` in hours."""
    interval: np.ndarray = np.sqrt(
        2.0 * np.asarray(checkpoint_save_h, dtype=float) * np.asarray(mtbf_job_hours, dtype=float)
    )
    return interval


def daly_interval_h(checkpoint_save_h: ArrayLike, mtbf_job_hours: ArrayLike) -> np.ndarray:
    """Daly's higher-order optimal interval, in hours.

    ``τ = sqrt(2δM)·[1 + ⅓·sqrt(δ/2M) + (1/9)·(δ/2M)] − δ`` when ``δ < 2M``, else ``τ = M``.
    """
    save = np.asarray(checkpoint_save_h, dtype=float)
    mtbf = np.asarray(mtbf_job_hours, dtype=float)
    ratio = save / (2.0 * mtbf)
    tau = np.sqrt(2.0 * save * mtbf) * (1.0 + np.sqrt(ratio) / 3.0 + ratio / 9.0) - save
    return np.where(save < 2.0 * mtbf, tau, mtbf)


def cooling_failure_rate_factor(
    cooling: ArrayLike, overrides: dict[str, float] | None = None
) -> np.ndarray:
    """Failure-rate multiplier per cooling type name (``failure_rate_<cooling>`` defaults)."""
    names = np.asarray(cooling)
    table = {
        c: float((overrides or {}).get(f"failure_rate_{c}", DEFAULTS[f"failure_rate_{c}"].value))
        for c in COOLING_TYPES
    }
    unknown = ~np.isin(names, COOLING_TYPES)
    if unknown.any():
        raise ValueError(
            f"cooling must be one of {', '.join(COOLING_TYPES)}, got {names[unknown][:5]}"
        )
    return np.select([names == c for c in COOLING_TYPES], [table[c] for c in COOLING_TYPES])


def cooling_adjusted_mtbf_card_hours(
    mtbf_card_hours: ArrayLike, cooling: ArrayLike, overrides: dict[str, float] | None = None
) -> np.ndarray:
    """Table MTBF per card ÷ the cooling failure-rate factor (fewer failures → longer MTBF)."""
    mtbf: np.ndarray = np.asarray(mtbf_card_hours, dtype=float) / cooling_failure_rate_factor(
        cooling, overrides
    )
    return mtbf


@dataclass(frozen=True)
class EffectiveTimeArrays:
    """Vectorised effective-time breakdown; every field is an array of the broadcast shape."""

    effective_time: np.ndarray  # factor in (0, 1]; FACTOR_FLOOR when stalled
    stalled: np.ndarray  # bool: lost share >= 1, the job cannot make progress
    mtbf_job_h: np.ndarray
    checkpoint_interval_h: np.ndarray
    lost_checkpoint_share: np.ndarray  # δ/τ: time spent saving
    lost_rework_share: np.ndarray  # (τ/2)/M: work redone after failures
    lost_restart_share: np.ndarray  # R/M: detect + reschedule + reload
    lost_share: np.ndarray


def effective_time_arrays(
    cards: ArrayLike,
    mtbf_card_hours: ArrayLike,
    checkpoint_save_h: ArrayLike,
    restart_h: ArrayLike,
    checkpoint_interval_h: ArrayLike = np.nan,
    use_daly: ArrayLike = False,
) -> EffectiveTimeArrays:
    """Effective training time of jobs on ``cards`` cards (all arguments broadcast).

    ``checkpoint_interval_h`` NaN means "choose the optimum": Daly's where ``use_daly`` is
    true, Young's otherwise. ``mtbf_card_hours`` is used as given (apply
    :func:`cooling_adjusted_mtbf_card_hours` to table values first).
    """
    mtbf_job = mtbf_job_h(mtbf_card_hours, cards)
    save = np.asarray(checkpoint_save_h, dtype=float)
    restart = np.asarray(restart_h, dtype=float)
    optimum = np.where(use_daly, daly_interval_h(save, mtbf_job), young_interval_h(save, mtbf_job))
    given = np.asarray(checkpoint_interval_h, dtype=float)
    interval = np.where(np.isnan(given), optimum, given)
    # δ = 0 with Young's rule gives τ = 0: saving is free, so only restarts cost time.
    with np.errstate(divide="ignore", invalid="ignore"):
        checkpoint_share = np.where(save > 0, save / interval, 0.0)
    rework_share = interval / 2.0 / mtbf_job
    restart_share = restart / mtbf_job
    lost = checkpoint_share + rework_share + restart_share
    stalled = lost >= 1.0
    effective = np.clip(1.0 - lost, FACTOR_FLOOR, 1.0)
    return EffectiveTimeArrays(
        effective_time=effective,
        stalled=stalled,
        mtbf_job_h=mtbf_job,
        checkpoint_interval_h=interval,
        lost_checkpoint_share=checkpoint_share,
        lost_rework_share=rework_share,
        lost_restart_share=restart_share,
        lost_share=lost,
    )


@dataclass(frozen=True)
class EffectiveTimeResult:
    """Scalar effective-time breakdown for one job (see :class:`EffectiveTimeArrays`)."""

    effective_time: float
    stalled: bool
    mtbf_card_hours: float
    mtbf_basis: str  # where the MTBF came from ("entered", a default's name)
    mtbf_job_h: float
    checkpoint_save_h: float
    restart_h: float
    checkpoint_interval_h: float
    interval_rule: str  # "young", "daly" or "given"
    lost_checkpoint_share: float
    lost_rework_share: float
    lost_restart_share: float
    lost_share: float
    site_kind: str = "unknown"

    @property
    def ettr(self) -> float:
        """Meta's effective training time ratio (Kokolis et al. 2024): the same figure."""
        return self.effective_time


def _scalar_mtbf(
    mtbf_card_hours: float | None, site_kind: str, accelerator: str, cooling: str
) -> tuple[float, str]:
    """An entered MTBF as given; else the table's (preset, card generation) ÷ cooling."""
    if mtbf_card_hours is not None:
        return float(mtbf_card_hours), "entered"
    table, basis = default_mtbf_card_hours([site_kind], card_generation([accelerator]))
    return float(cooling_adjusted_mtbf_card_hours(table[0], cooling)), str(basis[0])


def effective_training_time(
    cards: float,
    *,
    mtbf_card_hours: float | None = None,
    cooling: str = "air",
    checkpoint_save_h: float | None = None,
    restart_h: float | None = None,
    checkpoint_interval_h: float | None = None,
    interval_rule: str = "young",
    site_kind: str = "unknown",
    accelerator: str = "",
) -> EffectiveTimeResult:
    """Effective training time of one job; ``None`` arguments take the documented defaults.

    Defaults: the ``site_kind`` preset (production practice unless "research"), the MTBF of
    the ``accelerator``'s generation adjusted for ``cooling``, the restart grown to the job's
    size. Entered figures are used as given (an entered MTBF already reflects the cooling).
    """
    if interval_rule not in ("young", "daly"):
        raise ValueError(f"interval_rule must be 'young' or 'daly', got {interval_rule!r}")
    if site_kind not in SITE_KINDS:
        raise ValueError(f"site_kind must be one of {', '.join(SITE_KINDS)}, got {site_kind!r}")
    if cards <= 0:
        raise ValueError(f"cards must be positive, got {cards}")
    mtbf, mtbf_basis = _scalar_mtbf(mtbf_card_hours, site_kind, accelerator, cooling)
    save = float(
        DEFAULTS["checkpoint_save_h"].value if checkpoint_save_h is None else checkpoint_save_h
    )
    restart = float(default_restart_h([site_kind], cards)[0] if restart_h is None else restart_h)
    arrays = effective_time_arrays(
        cards,
        mtbf,
        save,
        restart,
        np.nan if checkpoint_interval_h is None else checkpoint_interval_h,
        interval_rule == "daly",
    )
    return EffectiveTimeResult(
        effective_time=float(arrays.effective_time),
        stalled=bool(arrays.stalled),
        mtbf_card_hours=mtbf,
        mtbf_basis=mtbf_basis,
        mtbf_job_h=float(arrays.mtbf_job_h),
        checkpoint_save_h=save,
        restart_h=restart,
        checkpoint_interval_h=float(arrays.checkpoint_interval_h),
        interval_rule="given" if checkpoint_interval_h is not None else interval_rule,
        lost_checkpoint_share=float(arrays.lost_checkpoint_share),
        lost_rework_share=float(arrays.lost_rework_share),
        lost_restart_share=float(arrays.lost_restart_share),
        lost_share=float(arrays.lost_share),
        site_kind=site_kind,
    )

"""Energy, MFU and utilization factors (docs/efficiency-model.md), with their provenance.

Each ``*_arrays`` kernel works on numpy arrays (one element per pool or node group) and
returns the factor and a *basis* code saying which input produced it; the vectorised
engine and the scalar helpers below call the same kernels.

Basis → provenance:

* measured: computed from data of this period (meter readings of the period, a job's
  throughput, usage records, job logs, a speed-up table);
* entered: a value someone typed (a PUE, an MFU);
* modeled: computed by the engine's formulas, or an entered planning assumption;
* default: taken straight from the defaults table (cooling PUE, card MFU, planned utilization).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from engine.defaults import (
    COOLING_TYPES,
    DEFAULTS,
    FACTOR_FLOOR,
    VENDOR_KEYS,
    WORKLOAD_CLASSES,
    validate_overrides,
)

FACTOR_NAMES: tuple[str, ...] = ("energy", "mfu", "scaling", "effective_time", "utilization")
# The one place factor labels are written: pages, reports and exports all use these.
FACTOR_LABELS: Mapping[str, str] = {
    "energy": "Energy (1/PUE)",
    "mfu": "MFU",
    "scaling": "Scaling",
    "effective_time": "Effective training time",
    "utilization": "Utilization",
}

ENERGY_BASES: tuple[str, ...] = (
    "metered_kwh",
    "pue_entered",
    "cooling_default",
    "metered_kwh_other_period",
)
# Meter readings of another period give the ratio, but are not a measurement of this one.
ENERGY_PROVENANCE: tuple[str, ...] = ("measured", "entered", "default", "modeled")

MFU_BASES: tuple[str, ...] = (
    "group_entered",
    "job_throughput",
    "pool_entered",
    "card_default",
    "job_records",
    "telemetry_proxy",
)
# Typed values are "entered"; only MFU from this period's jobs or telemetry is "measured".
MFU_PROVENANCE: tuple[str, ...] = (
    "entered",
    "measured",
    "entered",
    "default",
    "measured",
    "measured",
)

UTILIZATION_BASES: tuple[str, ...] = (
    "measured_share",
    "allocated_card_hours",
    "planned_entered",
    "planned_default",
)
UTILIZATION_PROVENANCE: tuple[str, ...] = ("measured", "measured", "modeled", "default")


class EngineInputError(ValueError):
    """An input value is impossible (e.g. PUE < 1, MFU > 1); the message names the column."""


def require(
    valid: np.ndarray, message: str, labels: Sequence[object] | pd.Index | None = None
) -> None:
    """Raise :class:`EngineInputError` with up to five offending labels where ``valid`` is false."""
    bad = ~np.asarray(valid, dtype=bool)
    if bad.any():
        positions = np.flatnonzero(bad)[:5]
        where = [labels[i] for i in positions] if labels is not None else positions.tolist()
        raise EngineInputError(f"{message} (pool(s) {where})")


def choice_lookup(codes: np.ndarray, per_choice: Sequence[np.ndarray | float]) -> np.ndarray:
    """Pick ``per_choice[code]`` element-wise (per-choice values may be per-row arrays)."""
    stacked = np.stack(
        [np.broadcast_to(np.asarray(v, dtype=float), codes.shape) for v in per_choice]
    )
    picked: np.ndarray = np.take_along_axis(stacked, codes[np.newaxis, :], axis=0)[0]
    return picked


# --- energy --------------------------------------------------------------------------------


def energy_arrays(
    pue_entered: ArrayLike,
    facility_kwh: ArrayLike,
    it_kwh: ArrayLike,
    default_pue: ArrayLike,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``energy = 1/PUE``: meter readings win, then an entered PUE, then the cooling default.

    NaN means "not given". Returns ``(energy, pue, basis_code)`` with codes into ``ENERGY_BASES``.
    Callers validate that the chosen PUE is >= 1.
    """
    entered = np.asarray(pue_entered, dtype=float)
    facility = np.asarray(facility_kwh, dtype=float)
    it = np.asarray(it_kwh, dtype=float)
    metered = ~np.isnan(facility) & ~np.isnan(it) & (it > 0)
    has_entered = ~np.isnan(entered)
    with np.errstate(divide="ignore", invalid="ignore"):
        metered_pue = facility / it
    basis = np.where(metered, 0, np.where(has_entered, 1, 2))
    pue = np.where(
        metered, metered_pue, np.where(has_entered, entered, np.asarray(default_pue, dtype=float))
    )
    return 1.0 / pue, pue, basis


@dataclass(frozen=True)
class FactorResult:
    """One factor for one scope: value in (0, 1], where it came from and from what."""

    name: str
    value: float
    provenance: str  # measured | modeled | default
    basis: str  # which input produced it, e.g. "metered_kwh", "card_default"
    inputs: dict[str, float | str] = field(default_factory=dict)
    defaults_used: tuple[str, ...] = ()


def energy_factor(
    *,
    pue: float | None = None,
    facility_kwh: float | None = None,
    it_kwh: float | None = None,
    cooling: str = "air",
    overrides: Mapping[str, object] | None = None,
) -> FactorResult:
    """Energy factor of one site: meter readings > entered PUE > cooling-type default PUE."""
    if cooling not in COOLING_TYPES:
        raise EngineInputError(
            f"cooling must be one of {', '.join(COOLING_TYPES)}, got {cooling!r}"
        )
    settings = validate_overrides(overrides, "pool")
    key = f"pue_{cooling}"
    default_pue = float(settings.get(key, DEFAULTS[key].value))
    energy, chosen_pue, basis = energy_arrays(
        np.nan if pue is None else pue,
        np.nan if facility_kwh is None else facility_kwh,
        np.nan if it_kwh is None else it_kwh,
        default_pue,
    )
    require(np.asarray(chosen_pue) >= 1.0, f"PUE must be >= 1, got {float(chosen_pue):.4g}")
    code = int(basis)
    inputs: dict[str, float | str] = {"pue": float(chosen_pue), "cooling": cooling}
    if code == 0:
        inputs |= {"facility_kwh": float(facility_kwh or 0), "it_kwh": float(it_kwh or 0)}
    return FactorResult(
        name="energy",
        value=float(energy),
        provenance=ENERGY_PROVENANCE[code],
        basis=ENERGY_BASES[code],
        inputs=inputs,
        defaults_used=(key,) if code == 2 and key not in settings else (),
    )


# --- MFU -----------------------------------------------------------------------------------


def mfu_from_throughput(
    model_params: ArrayLike,
    tokens_per_s: ArrayLike,
    cards: ArrayLike,
    peak_tflops: ArrayLike,
    flops_per_param_token: ArrayLike = 6.0,
) -> np.ndarray:
    """Model-FLOPs utilization of a job: ``k · N · tokens/s / (cards · peak FLOP/s)``."""
    achieved = (
        np.asarray(flops_per_param_token, dtype=float)
        * np.asarray(model_params, dtype=float)
        * np.asarray(tokens_per_s, dtype=float)
    )
    peak_flops = np.asarray(cards, dtype=float) * np.asarray(peak_tflops, dtype=float) * 1e12
    mfu: np.ndarray = achieved / peak_flops
    return mfu


def vendor_codes(vendor: ArrayLike) -> np.ndarray:
    """Index into ``VENDOR_KEYS`` from free-text vendor names (case-insensitive; else ``other``)."""
    lowered = np.char.lower(np.asarray(vendor, dtype=str))
    codes = np.full(lowered.shape, VENDOR_KEYS.index("other"), dtype=np.int64)
    for position, name in enumerate(VENDOR_KEYS[:-1]):
        codes[lowered == name] = position
    return codes


def default_mfu_arrays(
    card_default_mfu: ArrayLike,
    vendor_fallback_mfu: ArrayLike,
    workload_factor: ArrayLike,
    cooling_performance: ArrayLike,
) -> np.ndarray:
    """Default per-card MFU: (catalog, else vendor fallback) × workload × cooling, capped at 1."""
    card = np.asarray(card_default_mfu, dtype=float)
    base = np.where(np.isnan(card), np.asarray(vendor_fallback_mfu, dtype=float), card)
    mfu: np.ndarray = np.clip(
        base * np.asarray(workload_factor) * np.asarray(cooling_performance), FACTOR_FLOOR, 1.0
    )
    return mfu


def group_mfu_arrays(
    group_entered: ArrayLike,
    job_throughput: ArrayLike,
    pool_entered: ArrayLike,
    card_default: ArrayLike,
) -> tuple[np.ndarray, np.ndarray]:
    """Per node-group MFU by precedence; returns ``(mfu, basis_code into MFU_BASES)``.

    A value entered for the card model in this pool wins, then the MFU derived from the
    pool's measured job throughput, then an MFU entered for the whole pool, then the default.
    """
    candidates = [np.asarray(v, dtype=float) for v in (group_entered, job_throughput, pool_entered)]
    shape = np.broadcast_shapes(*(c.shape for c in candidates), np.shape(card_default))
    basis = np.full(shape, 3, dtype=np.int64)
    value = np.broadcast_to(np.asarray(card_default, dtype=float), shape).copy()
    for code in (2, 1, 0):  # lowest precedence first so the highest overwrites
        given = ~np.isnan(np.broadcast_to(candidates[code], shape))
        value = np.where(given, np.broadcast_to(candidates[code], shape), value)
        basis = np.where(given, code, basis)
    return value, basis


def mfu_factor(
    *,
    peak_tflops: float,
    vendor: str = "other",
    mfu: float | None = None,
    model_params: float | None = None,
    tokens_per_s: float | None = None,
    cards: float | None = None,
    flops_per_param_token: float | None = None,
    card_default_mfu: float | None = None,
    cooling: str = "air",
    workload_class: str = "pretraining",
    overrides: Mapping[str, object] | None = None,
) -> FactorResult:
    """MFU of one homogeneous pool: job throughput > entered MFU > card default × cooling."""
    if cooling not in COOLING_TYPES or workload_class not in WORKLOAD_CLASSES:
        raise EngineInputError(f"unknown cooling {cooling!r} or workload_class {workload_class!r}")
    settings = validate_overrides(overrides, "pool")

    def setting(key: str) -> float:
        return float(settings.get(key, DEFAULTS[key].value))

    vendor_key = f"mfu_default_{VENDOR_KEYS[int(vendor_codes([vendor])[0])]}"
    k = setting("flops_per_param_token") if flops_per_param_token is None else flops_per_param_token
    derived = (
        mfu_from_throughput(model_params, tokens_per_s, cards, peak_tflops, k)
        if model_params is not None and tokens_per_s is not None and cards is not None
        else np.nan
    )
    default = default_mfu_arrays(
        np.nan if card_default_mfu is None else card_default_mfu,
        setting(vendor_key),
        setting(f"workload_mfu_{workload_class}"),
        setting(f"cooling_performance_{cooling}"),
    )
    value, basis = group_mfu_arrays(np.nan, derived, np.nan if mfu is None else mfu, default)
    require((value > 0) & (value <= 1.0), f"MFU must be in (0, 1], got {float(value):.4g}")
    code = int(basis)
    inputs: dict[str, float | str] = {"peak_tflops": peak_tflops, "vendor": vendor}
    used: tuple[str, ...] = ()
    if code == 1:  # derived from job throughput, so all three were given
        assert model_params is not None and tokens_per_s is not None and cards is not None
        inputs |= {
            "model_params": float(model_params),
            "tokens_per_s": float(tokens_per_s),
            "cards": float(cards),
            "flops_per_param_token": float(k),
        }
    elif code == 3:
        inputs |= {"cooling": cooling, "workload_class": workload_class}
        keys = [f"workload_mfu_{workload_class}", f"cooling_performance_{cooling}"]
        if card_default_mfu is None:
            keys.insert(0, vendor_key)
        else:
            inputs["card_default_mfu"] = card_default_mfu
        used = tuple(key for key in keys if key not in settings)
    return FactorResult("mfu", float(value), MFU_PROVENANCE[code], MFU_BASES[code], inputs, used)


# --- utilization ---------------------------------------------------------------------------


def utilization_arrays(
    measured_share: ArrayLike,
    allocated_card_hours: ArrayLike,
    available_card_hours: ArrayLike,
    planned_entered: ArrayLike,
    planned_default: ArrayLike,
) -> tuple[np.ndarray, np.ndarray]:
    """Allocated ÷ available card-hours: measured share > usage records > entered plan > default.

    Returns ``(utilization, basis_code into UTILIZATION_BASES)``; zero is floored to
    ``FACTOR_FLOOR`` so the factor stays in (0, 1].
    """
    measured = np.asarray(measured_share, dtype=float)
    allocated = np.asarray(allocated_card_hours, dtype=float)
    planned = np.asarray(planned_entered, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        from_records = allocated / np.asarray(available_card_hours, dtype=float)
    basis = np.where(
        ~np.isnan(measured),
        0,
        np.where(~np.isnan(from_records), 1, np.where(~np.isnan(planned), 2, 3)),
    )
    value = np.select(
        [basis == 0, basis == 1, basis == 2],
        [measured, from_records, planned],
        np.asarray(planned_default, dtype=float),
    )
    return np.clip(value, FACTOR_FLOOR, None), basis


def utilization_factor(
    *,
    measured_share: float | None = None,
    allocated_card_hours: float | None = None,
    available_card_hours: float | None = None,
    planned: float | None = None,
    overrides: Mapping[str, object] | None = None,
) -> FactorResult:
    """Utilization of one scope: measured share > allocated/available card-h > plan > default."""
    settings = validate_overrides(overrides, "pool")
    planned_default = float(
        settings.get("utilization_planned", DEFAULTS["utilization_planned"].value)
    )
    value, basis = utilization_arrays(
        np.nan if measured_share is None else measured_share,
        np.nan if allocated_card_hours is None else allocated_card_hours,
        np.nan if available_card_hours is None else available_card_hours,
        np.nan if planned is None else planned,
        planned_default,
    )
    require(np.asarray(value) <= 1.0 + 1e-9, f"utilization must be <= 1, got {float(value):.4g}")
    code = int(basis)
    inputs: dict[str, float | str] = {}
    if code == 1:  # from usage records, so both card-hour totals were given
        assert allocated_card_hours is not None and available_card_hours is not None
        inputs = {
            "allocated_card_hours": float(allocated_card_hours),
            "available_card_hours": float(available_card_hours),
        }
    used = ("utilization_planned",) if code == 3 and "utilization_planned" not in settings else ()
    return FactorResult(
        "utilization",
        min(float(value), 1.0),
        UTILIZATION_PROVENANCE[code],
        UTILIZATION_BASES[code],
        inputs,
        used,
    )

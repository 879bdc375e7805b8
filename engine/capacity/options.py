"""Option rows: column defaults, validation, and the resolved peak, MFU, PUE and utilization
with provenance (the seams to the defaults, factors and reliability modules)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from engine.capacity.workload import FACTORS, PlannerInputError, TrainingWorkload
from engine.defaults import (
    COOLING_TYPES,
    FABRICS,
    GENERATION_GEMM_KEYS,
    INTERVAL_RULES,
    VENDOR_KEYS,
    default_value,
)
from engine.factors import (
    ENERGY_PROVENANCE,
    energy_arrays,
    vendor_codes,
)
from engine.reliability import (
    SITE_KINDS,
    card_generation,
    cooling_adjusted_mtbf_card_hours,
    default_mtbf_card_hours,
    site_kind_defaults,
)
from engine.steptime import stack_attention_kernel_ratio
from engine.training_precision import fp4_format, peak_column

# --------------------------------------------------------------------------------------------
# SEAM to the other engine modules (scaling, reliability, defaults, cost).
# Every formula owned elsewhere is reached through these functions only.
# --------------------------------------------------------------------------------------------


def table_default(key: str) -> float:
    return float(default_value(key))


def _cooling_lookup(prefix: str, cooling_type: NDArray[np.object_]) -> NDArray[np.float64]:
    """Per-cooling-type default `<prefix>_<cooling>` from engine.defaults."""
    names = np.asarray(cooling_type).astype(str)
    return np.select(
        [names == c for c in COOLING_TYPES], [table_default(f"{prefix}_{c}") for c in COOLING_TYPES]
    )


def _seam_default_pue(cooling_type: NDArray[np.object_]) -> NDArray[np.float64]:
    """Default PUE per cooling type: defaults.pue_<cooling>."""
    return _cooling_lookup("pue", cooling_type)


def _seam_cooling_mfu_factor(cooling_type: NDArray[np.object_]) -> NDArray[np.float64]:
    """MFU performance factor per cooling type: defaults.cooling_performance_<cooling>."""
    return _cooling_lookup("cooling_performance", cooling_type)


def _seam_card_rates(
    vendor: NDArray[np.object_], cooling_type: NDArray[np.object_], frame: pd.DataFrame
) -> dict[str, NDArray[np.float64]]:
    """What the per-card model needs of each card (engine.steptime.CardRates): its vendor's
    GEMM efficiency (its generation's where the table has one: GENERATION_GEMM_KEYS), the
    cooling's performance factor and the HBM bandwidth (entered, else the table's bytes per
    FLOP of an H100)."""
    vendor_keys = np.array(VENDOR_KEYS, dtype=object)[vendor_codes(np.asarray(vendor, str))]
    gemm = np.array([table_default(f"gemm_efficiency_{v}") for v in vendor_keys], dtype=float)
    generation = card_generation(frame["accelerator"].fillna("").to_numpy(dtype=object))
    for name, key in GENERATION_GEMM_KEYS.items():
        gemm = np.where(generation == name, table_default(key), gemm)
    hbm_fallback = (
        frame["dense_bf16_tflops"].to_numpy(np.float64)
        / 1e3
        * table_default("hbm_tbs_per_bf16_pflops")
    )
    return {
        "gemm_efficiency": gemm,
        "cooling_performance": _seam_cooling_mfu_factor(cooling_type),
        "memory_bandwidth_tbs": frame["memory_bandwidth_tbs"]
        .fillna(pd.Series(hbm_fallback, index=frame.index))
        .to_numpy(np.float64),
    }


def _seam_energy(
    pue_entered: NDArray[np.float64],
    facility_kwh: NDArray[np.float64],
    it_kwh: NDArray[np.float64],
    cooling_type: NDArray[np.object_],
) -> tuple[NDArray[np.float64], NDArray[np.object_]]:
    """PUE and its provenance: factors.energy_arrays (meters > entered PUE > cooling default)."""
    default_pue = _seam_default_pue(cooling_type)
    _, pue, basis = energy_arrays(pue_entered, facility_kwh, it_kwh, default_pue)
    return pue, np.array(ENERGY_PROVENANCE, dtype=object)[basis]


def _seam_default_reliability(
    cooling_type: NDArray[np.object_],
    site_kind: NDArray[np.object_],
    accelerator: NDArray[np.object_],
) -> dict[str, NDArray[np.float64]]:
    """Default MTBF per card (by site kind, else card generation; cooling-adjusted),
    checkpoint save δ and the restart R at 1,024 cards (reliability module)."""
    n = len(cooling_type)
    by_kind = site_kind_defaults(site_kind)
    return {
        "mtbf_card_hours": cooling_adjusted_mtbf_card_hours(
            default_mtbf_card_hours(site_kind, card_generation(accelerator))[0],
            np.asarray(cooling_type).astype(str),
        ),
        "checkpoint_save_hours": np.full(n, table_default("checkpoint_save_h")),
        "restart_hours": by_kind["restart_h"],
    }


def blocking_save_hours(frame: pd.DataFrame) -> NDArray[np.float64]:
    """How long each prepared option's checkpoint blocks: an entered save scaled to its copy to
    host memory when saves are asynchronous; the default is already an asynchronous save's."""
    stall = np.where(
        (frame["checkpoint_async"].to_numpy(np.float64) > 0)
        & frame["checkpoint_save_entered"].to_numpy(bool),
        table_default("checkpoint_async_stall_share"),
        1.0,
    )
    return frame["checkpoint_save_hours"].to_numpy(np.float64) * stall


def _mtbf_provenance(frame: pd.DataFrame, options: pd.DataFrame) -> None:
    """`mtbf_provenance` and `mtbf_basis` per option: the caller's (a pool's measured
    failures), else entered, else the table default naming its site kind or generation;
    a caller's `mtbf_note` is appended to the basis."""
    _, table_basis = default_mtbf_card_hours(
        frame["site_kind"].to_numpy(dtype=object),
        card_generation(frame["accelerator"].fillna("").to_numpy(dtype=object)),
    )
    defaulted = frame["mtbf_defaulted"].to_numpy(bool)
    provenance = pd.Series(np.where(defaulted, "default", "entered"), frame.index, dtype=object)
    basis = pd.Series(np.where(defaulted, table_basis, "entered"), frame.index, dtype=object)
    for column, values in (("mtbf_provenance", provenance), ("mtbf_basis", basis)):
        given = options[column] if column in options.columns else None
        frame[column] = values if given is None else given.where(given.notna(), values)
    # A caller's note (e.g. why measured failures were not used) follows the basis.
    if "mtbf_note" in options.columns:
        note = options["mtbf_note"]
        frame["mtbf_basis"] = frame["mtbf_basis"].where(
            note.isna(), frame["mtbf_basis"] + "; " + note.astype(str)
        )


OPTION_COLUMN_DEFAULTS: dict[str, Any] = {
    "accelerator": "",
    "vendor": "",  # picks the per-vendor GEMM efficiency of the per-card model
    "dense_bf16_tflops": math.nan,  # required
    "dense_fp8_tflops": math.nan,
    "dense_fp4_tflops": math.nan,  # NVFP4 (NVIDIA) or MXFP4 peak: fp4 training
    "memory_bandwidth_tbs": math.nan,  # HBM TB/s; NaN: hbm_tbs_per_bf16_pflops × the bf16 peak
    "memory_gb": math.nan,  # required
    "tdp_w": math.nan,  # required
    "cards_per_node": 8,
    # Cards on one NVLink / Infinity Fabric domain (72 on an NVL72 rack); NaN: the node.
    "nvlink_domain_cards": math.nan,
    "intra_node_interconnect_gbs": table_default("intra_node_bidir_gbs"),  # GB/s per card, NVLink
    # The option's fused-attention kernel speed over the measured one (1: the cuDNN / flash SDPA
    # kernels the attention_efficiency_* defaults were fitted to), times the stack's own
    # (software_stack "megatron_2024": attention_kernel_ratio_megatron_2024).
    "attention_kernel_ratio": 1.0,
    "default_training_mfu": math.nan,  # passed through: the per-card model replaces it
    "cards": math.nan,  # give cards, or deadline_days
    "deadline_days": math.nan,
    "card_granularity": 1,  # deadline search step (e.g. 8 for whole nodes)
    "site": "",
    "cooling_type": str(default_value("cooling")),
    "pue": math.nan,
    "metered_facility_energy_kwh": math.nan,  # meter readings beat an entered PUE
    "metered_it_energy_kwh": math.nan,
    "tariff_per_kwh": 0.0,
    "grid_carbon_g_per_kwh": 0.0,
    "fabric": str(default_value("fabric")),
    "inter_node_bandwidth_gbps_per_card": table_default("inter_node_gbit_s_per_card"),  # Gbit/s
    "comm_overlap_share": table_default("dp_overlap_share"),  # DP all-reduce hidden behind backward
    "tp_overlap_share": table_default("tp_overlap_share"),  # TP collectives hidden behind GEMMs
    "fabric_oversubscription": table_default("fabric_oversubscription"),  # 1: non-blocking
    "mtbf_card_hours": math.nan,
    "checkpoint_save_hours": math.nan,
    "restart_hours": math.nan,
    "checkpoint_interval_hours": math.nan,  # NaN: the optimum of checkpoint_interval_rule
    "checkpoint_interval_rule": str(default_value("checkpoint_interval_rule")),  # young | daly
    "checkpoint_async": 0.0,  # 1: saves block only for the copy to host memory
    "site_kind": "unknown",  # production | research: picks the MTBF and restart defaults
    "rental_price_per_card_hour": math.nan,
    "capital_cost_per_card": math.nan,
    "amortization_years": math.nan,
    "yearly_opex_per_card": 0.0,
    # Factor overrides: typed values are "entered"; a caller that measured them (a pool's
    # history) passes <factor>_provenance = "measured" alongside.
    "mfu": math.nan,
    "achieved_tflops_per_card": math.nan,
    "scaling": math.nan,
    "effective_time": math.nan,
    "utilization": math.nan,
}
REQUIRED_OPTION_COLUMNS: tuple[str, ...] = ("dense_bf16_tflops", "memory_gb", "tdp_w")
# Planning assumption when none is given (defaults.utilization_planned: industry ~50%).
DEFAULT_UTILIZATION = table_default("utilization_planned")
_CHOICE_COLUMNS: dict[str, tuple[str, ...]] = {
    "cooling_type": COOLING_TYPES,
    "fabric": FABRICS,
    "checkpoint_interval_rule": INTERVAL_RULES,
    "site_kind": SITE_KINDS,
}
_UNIT_INTERVAL_COLUMNS = ("mfu", "scaling", "effective_time", "utilization")
_SHARE_OR_ZERO_COLUMNS = ("comm_overlap_share", "tp_overlap_share")
_POSITIVE_COLUMNS = (
    "dense_bf16_tflops",
    "memory_gb",
    "tdp_w",
    "cards_per_node",
    "nvlink_domain_cards",
    "intra_node_interconnect_gbs",
    "inter_node_bandwidth_gbps_per_card",
    "achieved_tflops_per_card",
    "deadline_days",
    "card_granularity",
    "mtbf_card_hours",
    "checkpoint_interval_hours",
    "amortization_years",
    "dense_fp8_tflops",
    "dense_fp4_tflops",
    "memory_bandwidth_tbs",
    "default_training_mfu",
    "attention_kernel_ratio",
)
_NON_NEGATIVE_COLUMNS = (
    "tariff_per_kwh",
    "grid_carbon_g_per_kwh",
    "checkpoint_save_hours",
    "restart_hours",
    "rental_price_per_card_hour",
    "capital_cost_per_card",
    "yearly_opex_per_card",
    "metered_facility_energy_kwh",
    "metered_it_energy_kwh",
)


def cross_options(
    card_models: pd.DataFrame,
    sites: pd.DataFrame | None = None,
    *,
    cards: list[int] | None = None,
    deadline_days: list[float] | None = None,
) -> pd.DataFrame:
    """Options grid: every card model × card count (or deadline) × site, one row each.

    `card_models` holds catalog columns (dense_bf16_tflops, memory_gb, tdp_w, ...), `sites`
    the site and cost columns (pue, tariff_per_kwh, cooling_type, ...).
    """
    if (cards is None) == (deadline_days is None):
        raise PlannerInputError({"cards": "give cards or deadline_days, not both"})
    sizes = (
        pd.DataFrame({"cards": cards})
        if cards is not None
        else pd.DataFrame({"deadline_days": deadline_days})
    )
    grid = card_models.merge(sizes, how="cross")
    if sites is not None:
        grid = grid.merge(sites, how="cross")
    return grid


def rows_label(mask: pd.Series) -> str:
    ids = [str(i) for i in mask[mask].index[:5]]
    more = "…" if int(mask.sum()) > 5 else ""
    return f"option(s) {', '.join(ids)}{more}"


def _filled(options: pd.DataFrame) -> pd.DataFrame:
    """The options with every column present: numbers coerced, defaults where not given."""
    frame = options.copy()
    if not frame.index.is_unique:
        raise PlannerInputError({"options": "the index is the option id and must be unique"})
    missing = [column for column in REQUIRED_OPTION_COLUMNS if column not in frame.columns]
    if missing:
        raise PlannerInputError(dict.fromkeys(missing, "required column is missing"))
    for column, default in OPTION_COLUMN_DEFAULTS.items():
        if column not in frame.columns:
            frame[column] = default
        elif isinstance(default, (float, int)):
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
            if not (isinstance(default, float) and math.isnan(default)):
                frame[column] = frame[column].fillna(default)
    for column in _CHOICE_COLUMNS:
        frame[column] = frame[column].fillna(OPTION_COLUMN_DEFAULTS[column]).astype(str)
    return frame


def _range_errors(frame: pd.DataFrame) -> dict[str, str]:
    """Columns outside their range, each naming the offending option ids."""
    errors: dict[str, str] = {}
    checks = [
        *((c, "required", frame[c].isna()) for c in REQUIRED_OPTION_COLUMNS),
        *((c, "must be positive", ~(frame[c] > 0)) for c in _POSITIVE_COLUMNS),
        *((c, "must be >= 0", ~(frame[c] >= 0)) for c in _NON_NEGATIVE_COLUMNS),
        *(
            (c, "must be in (0, 1]", ~((frame[c] > 0) & (frame[c] <= 1)))
            for c in _UNIT_INTERVAL_COLUMNS
        ),
        *(
            (c, "must be in [0, 1]", ~((frame[c] >= 0) & (frame[c] <= 1)))
            for c in _SHARE_OR_ZERO_COLUMNS
        ),
        ("pue", "must be >= 1", ~(frame["pue"] >= 1)),
    ]
    for column, message, bad in checks:
        if message != "required":
            bad = frame[column].notna() & bad
        if bad.any():
            errors[column] = f"{rows_label(bad)}: {message}"
    bad = ~(frame["fabric_oversubscription"] >= 1)
    if bad.any():
        errors["fabric_oversubscription"] = f"{rows_label(bad)}: must be >= 1"
    for column, choices in _CHOICE_COLUMNS.items():
        bad = ~frame[column].isin(choices)
        if bad.any():
            errors[column] = f"{rows_label(bad)}: must be one of {', '.join(choices)}"
    return errors


def _size_errors(frame: pd.DataFrame, workload: TrainingWorkload) -> dict[str, str]:
    """Cards or a deadline (one of them, whole cards), and years with a capital cost."""
    errors: dict[str, str] = {}
    both = frame["cards"].notna() & frame["deadline_days"].notna()
    neither = frame["cards"].isna() & frame["deadline_days"].isna()
    bad_cards = frame["cards"].notna() & ~(
        (frame["cards"] >= 1) & (frame["cards"] == np.floor(frame["cards"]))
    )
    if both.any():
        errors["cards"] = f"{rows_label(both)}: give cards or deadline_days, not both"
    elif neither.any() and workload.parallelism.model_parallel_cards is None:
        errors["cards"] = f"{rows_label(neither)}: give cards or deadline_days"
    elif bad_cards.any():
        errors["cards"] = f"{rows_label(bad_cards)}: must be a whole number >= 1"
    capex_without_years = (
        frame["capital_cost_per_card"].notna() & frame["amortization_years"].isna()
    )
    if capex_without_years.any():
        errors["amortization_years"] = (
            f"{rows_label(capex_without_years)}: required with capital_cost_per_card"
        )
    return errors


def prepare_options(options: pd.DataFrame, workload: TrainingWorkload) -> pd.DataFrame:
    """Fill defaults, validate, and resolve peak, MFU, PUE, utilization with provenance."""
    frame = _filled(options)
    errors = {**_range_errors(frame), **_size_errors(frame, workload)}
    if errors:
        raise PlannerInputError(errors)
    neither = frame["cards"].isna() & frame["deadline_days"].isna()
    fixed = workload.parallelism
    if neither.any() and fixed.tp and fixed.pp and fixed.dp:
        frame.loc[neither, "cards"] = fixed.product
    frame["cards_per_node"] = frame["cards_per_node"].astype(np.int64)
    frame["card_granularity"] = frame["card_granularity"].astype(np.int64)
    cooling = frame["cooling_type"].to_numpy(dtype=object)

    frame["precision"] = workload.precision
    frame["attention_kernel_ratio"] *= stack_attention_kernel_ratio(workload.software_stack)
    frame["peak_tflops"] = frame[peak_column(workload.precision)]
    frame["fp4_format"] = [fp4_format(v) for v in frame["vendor"].fillna("").astype(str)]

    # An entered MFU or throughput wins; else the per-card model gives it per split (steptime).
    achieved_mfu = frame["achieved_tflops_per_card"] / frame["peak_tflops"]
    frame["mfu_provenance"] = np.where(
        frame["mfu"].notna() | frame["achieved_tflops_per_card"].notna(), "entered", "modeled"
    )
    frame["mfu"] = frame["mfu"].fillna(achieved_mfu)
    rates = _seam_card_rates(frame["vendor"].fillna("").to_numpy(dtype=object), cooling, frame)
    for column, values in rates.items():
        frame[column] = values
    pue, energy_provenance = _seam_energy(
        frame["pue"].to_numpy(np.float64),
        frame["metered_facility_energy_kwh"].to_numpy(np.float64),
        frame["metered_it_energy_kwh"].to_numpy(np.float64),
        cooling,
    )
    if (pue < 1).any():
        bad = pd.Series(pue < 1, index=frame.index)
        raise PlannerInputError(
            {"metered_facility_energy_kwh": f"{rows_label(bad)}: facility kWh < IT kWh (PUE < 1)"}
        )
    frame["pue"] = pue
    frame["energy"] = 1.0 / frame["pue"]
    frame["energy_provenance"] = energy_provenance
    frame["utilization_provenance"] = np.where(frame["utilization"].notna(), "entered", "default")
    frame["utilization"] = frame["utilization"].fillna(DEFAULT_UTILIZATION)
    frame["restart_grows"] = frame["restart_hours"].isna()  # an entered restart is used as given
    frame["mtbf_defaulted"] = frame["mtbf_card_hours"].isna()
    frame["checkpoint_save_entered"] = frame["checkpoint_save_hours"].notna()
    _mtbf_provenance(frame, options)
    reliability = _seam_default_reliability(
        cooling,
        frame["site_kind"].to_numpy(dtype=object),
        frame["accelerator"].fillna("").to_numpy(dtype=object),
    )
    for column, default in reliability.items():
        frame[column] = frame[column].fillna(pd.Series(default, index=frame.index))
    for factor in ("scaling", "effective_time"):
        frame[f"{factor}_provenance"] = np.where(frame[factor].notna(), "entered", "modeled")
    for factor in FACTORS:  # the caller knows best where an override came from
        given = f"{factor}_provenance"
        if given in options.columns:
            frame[given] = options[given].where(options[given].notna(), frame[given])
    return frame

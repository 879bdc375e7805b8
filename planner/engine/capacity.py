"""Capacity planner: how many cards, how many days, what it costs (spec §6), vectorised.

One DataFrame row per option (card model × card count or deadline × site); the planner
expands each option into its valid TP × PP × DP splits, keeps the fastest that fits in
memory, and computes days, card-hours, energy, cost, CO₂ and the five factors.

Time model (spec §6):
    total_flops = k · N · D
    running_seconds = total_flops / (n · peak · mfu · scaling · effective_time)
    days = running_seconds / utilization / 86,400
Utilization < 1 stretches calendar time: the job only holds its cards for that share of the
calendar (queueing, sharing with other work), and the cards are paid for the whole time.

The scaling (§3), effective-time (§4), cooling defaults (§5) and cost (§7) formulas belong to
their own modules; this module reaches them only through the SEAM section below.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from planner.engine.cost import energy_and_cost
from planner.engine.defaults import (
    COOLING_TYPES,
    FABRICS,
    FACTOR_FLOOR,
    INTERVAL_RULES,
    VENDOR_KEYS,
    default_value,
)
from planner.engine.factors import (
    ENERGY_PROVENANCE,
    default_mfu_arrays,
    energy_arrays,
    vendor_codes,
)
from planner.engine.limits import (
    ESTIMATE_LIMITS,
    SHAPE_LIMITS,
    WORKLOAD_LIMITS,
    EngineInputError,
    check_grid,
    range_error,
)
from planner.engine.memory import (
    ACTIVATION_RECOMPUTE_MODES,
    DEFAULT_USABLE_MEMORY_SHARE,
    ActivationRecompute,
    ModelShape,
    activation_bytes_per_card,
    min_cards_for_state,
    model_state_bytes_per_card,
    training_state_bytes,
    usable_card_bytes,
)
from planner.engine.parallelism import FixedParallelism, enumerate_splits, no_split_reason
from planner.engine.reliability import cooling_adjusted_mtbf_card_h, effective_time_arrays
from planner.engine.scaling import fabric_efficiency_of, modeled_scaling_arrays

SECONDS_PER_DAY = 86_400.0
DEFAULT_MAX_CARDS = 1_000_000
FACTORS: tuple[str, ...] = ("energy", "mfu", "scaling", "effective_time", "utilization")
Precision = Literal["bf16", "fp8"]
K_ERROR = "must be 6, or 8 with full activation recomputation"


class PlannerInputError(EngineInputError):
    """Invalid planner input; `errors` maps each offending field to a message."""


# --------------------------------------------------------------------------------------------
# SEAM to the other engine modules (scaling §3, reliability §4, defaults §5, cost §7).
# Every formula owned elsewhere is reached through these functions only.
# --------------------------------------------------------------------------------------------


def _table(key: str) -> float:
    return float(default_value(key))


def _cooling_lookup(prefix: str, cooling_type: NDArray[np.object_]) -> NDArray[np.float64]:
    """Per-cooling-type default `<prefix>_<cooling>` from planner.engine.defaults."""
    names = np.asarray(cooling_type).astype(str)
    return np.select(
        [names == c for c in COOLING_TYPES], [_table(f"{prefix}_{c}") for c in COOLING_TYPES]
    )


def _seam_default_pue(cooling_type: NDArray[np.object_]) -> NDArray[np.float64]:
    """Default PUE per cooling type (§5): defaults.pue_<cooling>."""
    return _cooling_lookup("pue", cooling_type)


def _seam_cooling_mfu_factor(cooling_type: NDArray[np.object_]) -> NDArray[np.float64]:
    """MFU performance factor per cooling type (§5): defaults.cooling_performance_<cooling>."""
    return _cooling_lookup("cooling_performance", cooling_type)


def _seam_default_mfu(
    card_default_mfu: NDArray[np.float64],
    vendor: NDArray[np.object_],
    cooling_type: NDArray[np.object_],
) -> NDArray[np.float64]:
    """Per-card MFU without a measurement: factors.default_mfu_arrays (catalog value, else
    the vendor default) × the pre-training workload multiplier × the cooling factor (§5)."""
    vendor_keys = np.array(VENDOR_KEYS, dtype=object)[vendor_codes(np.asarray(vendor, str))]
    vendor_fallback = np.array([_table(f"mfu_default_{v}") for v in vendor_keys], dtype=float)
    return default_mfu_arrays(
        card_default_mfu,
        vendor_fallback,
        _table("workload_mfu_pretraining"),
        _seam_cooling_mfu_factor(cooling_type),
    )


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


def _seam_default_reliability(cooling_type: NDArray[np.object_]) -> dict[str, NDArray[np.float64]]:
    """Default MTBF per card (cooling-adjusted), checkpoint save δ and restart R (§4)."""
    n = len(cooling_type)
    return {
        "mtbf_card_hours": cooling_adjusted_mtbf_card_h(
            _table("mtbf_card_h"), np.asarray(cooling_type).astype(str)
        ),
        "checkpoint_save_hours": np.full(n, _table("checkpoint_save_h")),
        "restart_hours": np.full(n, _table("restart_h")),
    }


def _seam_scaling(
    workload: TrainingWorkload, frame: pd.DataFrame, splits: pd.DataFrame, cards: NDArray
) -> NDArray[np.float64]:
    """§3 modeled scaling of each split row: planner.engine.scaling.modeled_scaling_arrays."""
    row = splits["row"].to_numpy()
    shape = workload.model_shape

    def column(name: str) -> NDArray[np.float64]:
        return frame[name].to_numpy(np.float64)[row]

    return modeled_scaling_arrays(
        np.asarray(cards, dtype=np.float64)[row],
        column("peak_tflops") * column("mfu"),
        column("cards_per_node"),
        nvlink_bidir_gbs=column("intra_node_interconnect_gbs"),
        inter_node_gbit_s_per_card=column("inter_node_bandwidth_gbps_per_card"),
        fabric_efficiency=fabric_efficiency_of(frame["fabric"].to_numpy().astype(str))[row],
        model_params=workload.params,
        tensor_parallel=splits["tp"].to_numpy(np.float64),
        pipeline_parallel=splits["pp"].to_numpy(np.float64),
        microbatches_per_replica=splits["micro_batches"].to_numpy(np.float64),
        micro_batch_tokens=float(workload.micro_batch * workload.seq_len),
        model_hidden_size=float(shape.hidden),
        flops_per_param_token=float(workload.flops_per_param_token),
        dp_overlap_share=column("comm_overlap_share"),
    ).scaling


def _seam_effective_time(
    cards: NDArray[np.float64],
    mtbf_card_hours: NDArray[np.float64],
    checkpoint_save_hours: NDArray[np.float64],
    restart_hours: NDArray[np.float64],
    checkpoint_interval_hours: NDArray[np.float64],
    use_daly: NDArray[np.bool_],
) -> NDArray[np.float64]:
    """§4 effective training time: planner.engine.reliability.effective_time_arrays."""
    return effective_time_arrays(
        cards,
        mtbf_card_hours,
        checkpoint_save_hours,
        restart_hours,
        checkpoint_interval_hours,
        use_daly,
    ).effective_time


def _seam_energy_and_cost(frame: pd.DataFrame) -> pd.DataFrame:
    """§7 energy, money, CO₂ and effective PFLOP-days: planner.engine.cost.energy_and_cost.

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
# Inputs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingWorkload:
    """What to train. Give `tokens` (with k) or `total_flops`."""

    params: float
    tokens: float | None = None
    total_flops: float | None = None
    flops_per_param_token: int = 6  # k: 6, or 8 with full activation recomputation
    precision: Precision = "bf16"
    seq_len: int = 2048
    global_batch_sequences: int = 1536
    micro_batch: int = 1
    zero_stage: int = 1
    # None: "full" when k = 8 (that is what k = 8 pays for), else "selective" (Megatron default).
    recompute: ActivationRecompute | None = None
    sequence_parallel: bool = True
    shape: ModelShape | None = None
    parallelism: FixedParallelism = field(default_factory=FixedParallelism)
    usable_memory_share: float = DEFAULT_USABLE_MEMORY_SHARE

    def __post_init__(self) -> None:
        errors: dict[str, str] = {}
        if not _positive(self.params):
            errors["params"] = "must be a positive number of parameters"
        if self.total_flops is None and self.tokens is None:
            errors["tokens"] = "give tokens or total_flops"
        if self.tokens is not None and not _positive(self.tokens):
            errors["tokens"] = "must be positive"
        if self.total_flops is not None and not _positive(self.total_flops):
            errors["total_flops"] = "must be positive"
        if self.flops_per_param_token not in (6, 8):
            errors["flops_per_param_token"] = K_ERROR
        if self.precision not in ("bf16", "fp8"):
            errors["precision"] = "must be 'bf16' or 'fp8'"
        for name in ("seq_len", "global_batch_sequences", "micro_batch"):
            if int(getattr(self, name)) < 1:
                errors[name] = "must be >= 1"
        if self.micro_batch > self.global_batch_sequences:
            errors["micro_batch"] = "must not exceed global_batch_sequences"
        if self.zero_stage not in (0, 1, 2, 3):
            errors["zero_stage"] = "must be 0, 1, 2 or 3"
        if self.recompute is not None and self.recompute not in ACTIVATION_RECOMPUTE_MODES:
            errors["recompute"] = f"must be one of {ACTIVATION_RECOMPUTE_MODES}"
        if not 0 < self.usable_memory_share <= 1:
            errors["usable_memory_share"] = "must be in (0, 1]"
        errors = {**self._range_errors(), **errors}
        if errors:
            raise PlannerInputError(errors)

    def _range_errors(self) -> dict[str, str]:
        """Sizes outside their documented range (they drive the split grid and the arrays)."""
        errors = {}
        for attribute, name in WORKLOAD_LIMITS.items():
            if message := range_error(name, getattr(self, attribute)):
                errors[attribute] = message
        for attribute, name in SHAPE_LIMITS.items():
            if self.shape and (message := range_error(name, getattr(self.shape, attribute))):
                errors[name] = message
        return errors

    @property
    def flops(self) -> float:
        """Total training FLOPs: k · N · D unless given."""
        if self.total_flops is not None:
            return float(self.total_flops)
        return float(self.flops_per_param_token * self.params * float(self.tokens or 0.0))

    @property
    def model_shape(self) -> ModelShape:
        return self.shape or ModelShape.infer(self.params)

    @property
    def activation_recompute(self) -> ActivationRecompute:
        if self.recompute is not None:
            return self.recompute
        return "full" if self.flops_per_param_token == 8 else "selective"


# Option columns: name -> default (NaN: not given; modeled or default value used instead).
OPTION_COLUMN_DEFAULTS: dict[str, Any] = {
    "accelerator": "",
    "vendor": "",  # picks the per-vendor MFU default when the row has no default_training_mfu
    "dense_bf16_tflops": math.nan,  # required
    "dense_fp8_tflops": math.nan,
    "memory_gb": math.nan,  # required
    "tdp_w": math.nan,  # required
    "cards_per_node": 8,
    "intra_node_interconnect_gbs": _table("intra_node_bidir_gbs"),  # GB/s per card, NVLink
    "default_training_mfu": math.nan,
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
    "inter_node_bandwidth_gbps_per_card": _table("inter_node_gbit_s_per_card"),  # Gbit/s
    "comm_overlap_share": _table("dp_overlap_share"),  # DP all-reduce hidden behind backward
    "mtbf_card_hours": math.nan,
    "checkpoint_save_hours": math.nan,
    "restart_hours": math.nan,
    "checkpoint_interval_hours": math.nan,  # NaN: the optimum of checkpoint_interval_rule
    "checkpoint_interval_rule": str(default_value("checkpoint_interval_rule")),  # young | daly
    "rental_price_per_card_hour": math.nan,
    "capital_cost_per_card": math.nan,
    "amortization_years": math.nan,
    "yearly_opex_per_card": 0.0,
    # Factor overrides (measured from a pool's history, or entered):
    "mfu": math.nan,
    "achieved_tflops_per_card": math.nan,
    "scaling": math.nan,
    "effective_time": math.nan,
    "utilization": math.nan,
}
REQUIRED_OPTION_COLUMNS: tuple[str, ...] = ("dense_bf16_tflops", "memory_gb", "tdp_w")
# Planning assumption when none is given (defaults.utilization_planned: industry ~50%).
DEFAULT_UTILIZATION = _table("utilization_planned")
_CHOICE_COLUMNS: dict[str, tuple[str, ...]] = {
    "cooling_type": COOLING_TYPES,
    "fabric": FABRICS,
    "checkpoint_interval_rule": INTERVAL_RULES,
}
_UNIT_INTERVAL_COLUMNS = ("mfu", "scaling", "effective_time", "utilization", "comm_overlap_share")
_POSITIVE_COLUMNS = (
    "dense_bf16_tflops",
    "memory_gb",
    "tdp_w",
    "cards_per_node",
    "intra_node_interconnect_gbs",
    "inter_node_bandwidth_gbps_per_card",
    "achieved_tflops_per_card",
    "deadline_days",
    "card_granularity",
    "mtbf_card_hours",
    "checkpoint_interval_hours",
    "amortization_years",
    "dense_fp8_tflops",
    "default_training_mfu",
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


def _positive(value: Any) -> bool:
    try:
        return math.isfinite(float(value)) and float(value) > 0
    except (TypeError, ValueError):
        return False


def _rows_label(mask: pd.Series) -> str:
    ids = [str(i) for i in mask[mask].index[:5]]
    more = "…" if int(mask.sum()) > 5 else ""
    return f"option(s) {', '.join(ids)}{more}"


def prepare_options(options: pd.DataFrame, workload: TrainingWorkload) -> pd.DataFrame:
    """Fill defaults, validate, and resolve peak, MFU, PUE, utilization with provenance."""
    frame = options.copy()
    errors: dict[str, str] = {}
    if not frame.index.is_unique:
        raise PlannerInputError({"options": "the index is the option id and must be unique"})
    for column in REQUIRED_OPTION_COLUMNS:
        if column not in frame.columns:
            errors[column] = "required column is missing"
    if errors:
        raise PlannerInputError(errors)
    for column, default in OPTION_COLUMN_DEFAULTS.items():
        if column not in frame.columns:
            frame[column] = default
        elif isinstance(default, (float, int)):
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
            if not (isinstance(default, float) and math.isnan(default)):
                frame[column] = frame[column].fillna(default)
    for column in REQUIRED_OPTION_COLUMNS:
        bad = frame[column].isna()
        if bad.any():
            errors[column] = f"{_rows_label(bad)}: required"
    for column in _POSITIVE_COLUMNS:
        bad = frame[column].notna() & ~(frame[column] > 0)
        if bad.any():
            errors[column] = f"{_rows_label(bad)}: must be positive"
    for column in _NON_NEGATIVE_COLUMNS:
        bad = frame[column].notna() & ~(frame[column] >= 0)
        if bad.any():
            errors[column] = f"{_rows_label(bad)}: must be >= 0"
    for column in _UNIT_INTERVAL_COLUMNS:
        bad = frame[column].notna() & ~((frame[column] > 0) & (frame[column] <= 1))
        if column == "comm_overlap_share":
            bad = frame[column].notna() & ~((frame[column] >= 0) & (frame[column] <= 1))
        if bad.any():
            errors[column] = f"{_rows_label(bad)}: must be in (0, 1]"
    for column, choices in _CHOICE_COLUMNS.items():
        frame[column] = frame[column].fillna(OPTION_COLUMN_DEFAULTS[column]).astype(str)
        bad = ~frame[column].isin(choices)
        if bad.any():
            errors[column] = f"{_rows_label(bad)}: must be one of {', '.join(choices)}"
    bad_pue = frame["pue"].notna() & ~(frame["pue"] >= 1)
    if bad_pue.any():
        errors["pue"] = f"{_rows_label(bad_pue)}: must be >= 1"
    both = frame["cards"].notna() & frame["deadline_days"].notna()
    neither = frame["cards"].isna() & frame["deadline_days"].isna()
    bad_cards = frame["cards"].notna() & ~(
        (frame["cards"] >= 1) & (frame["cards"] == np.floor(frame["cards"]))
    )
    if both.any():
        errors["cards"] = f"{_rows_label(both)}: give cards or deadline_days, not both"
    elif neither.any() and workload.parallelism.model_parallel_cards is None:
        errors["cards"] = f"{_rows_label(neither)}: give cards or deadline_days"
    elif bad_cards.any():
        errors["cards"] = f"{_rows_label(bad_cards)}: must be a whole number >= 1"
    capex_without_years = (
        frame["capital_cost_per_card"].notna() & frame["amortization_years"].isna()
    )
    if capex_without_years.any():
        errors["amortization_years"] = (
            f"{_rows_label(capex_without_years)}: required with capital_cost_per_card"
        )
    if errors:
        raise PlannerInputError(errors)

    fixed = workload.parallelism
    if neither.any() and fixed.tp and fixed.pp and fixed.dp:
        frame.loc[neither, "cards"] = fixed.tp * fixed.pp * fixed.dp
    frame["cards_per_node"] = frame["cards_per_node"].astype(np.int64)
    frame["card_granularity"] = frame["card_granularity"].astype(np.int64)
    cooling = frame["cooling_type"].to_numpy(dtype=object)

    peak_column = "dense_fp8_tflops" if workload.precision == "fp8" else "dense_bf16_tflops"
    frame["precision"] = workload.precision
    frame["peak_tflops"] = frame[peak_column]

    achieved_mfu = frame["achieved_tflops_per_card"] / frame["peak_tflops"]
    default_mfu = _seam_default_mfu(
        frame["default_training_mfu"].to_numpy(np.float64),
        frame["vendor"].fillna("").to_numpy(dtype=object),
        cooling,
    )
    frame["mfu_provenance"] = np.where(
        frame["mfu"].notna() | frame["achieved_tflops_per_card"].notna(), "measured", "default"
    )
    frame["mfu"] = frame["mfu"].fillna(achieved_mfu).fillna(pd.Series(default_mfu, frame.index))
    pue, energy_provenance = _seam_energy(
        frame["pue"].to_numpy(np.float64),
        frame["metered_facility_energy_kwh"].to_numpy(np.float64),
        frame["metered_it_energy_kwh"].to_numpy(np.float64),
        cooling,
    )
    if (pue < 1).any():
        bad = pd.Series(pue < 1, index=frame.index)
        raise PlannerInputError(
            {"metered_facility_energy_kwh": f"{_rows_label(bad)}: facility kWh < IT kWh (PUE < 1)"}
        )
    frame["pue"] = pue
    frame["energy"] = 1.0 / frame["pue"]
    frame["energy_provenance"] = energy_provenance
    frame["utilization_provenance"] = np.where(frame["utilization"].notna(), "measured", "default")
    frame["utilization"] = frame["utilization"].fillna(DEFAULT_UTILIZATION)
    reliability = _seam_default_reliability(cooling)
    for column, default in reliability.items():
        frame[column] = frame[column].fillna(pd.Series(default, index=frame.index))
    for factor in ("scaling", "effective_time"):
        frame[f"{factor}_provenance"] = np.where(frame[factor].notna(), "measured", "modeled")
    for factor in FACTORS:  # the caller knows best where an override came from
        given = f"{factor}_provenance"
        if given in options.columns:
            frame[given] = options[given].where(options[given].notna(), frame[given])
    return frame


# --------------------------------------------------------------------------------------------
# Evaluation at given card counts
# --------------------------------------------------------------------------------------------


def effective_time_at_cards(frame: pd.DataFrame, cards: NDArray[np.float64]) -> NDArray[np.float64]:
    """Effective time of each prepared option at `cards`: the override, else the §4 model."""
    modeled = _seam_effective_time(
        cards,
        frame["mtbf_card_hours"].to_numpy(np.float64),
        frame["checkpoint_save_hours"].to_numpy(np.float64),
        frame["restart_hours"].to_numpy(np.float64),
        frame["checkpoint_interval_hours"].to_numpy(np.float64),
        (frame["checkpoint_interval_rule"] == "daly").to_numpy(),
    )
    return np.where(frame["effective_time"].isna(), modeled, frame["effective_time"])


_SPLIT_COLUMNS = (
    "tp",
    "pp",
    "dp",
    "micro_batches",
    "state_bytes_per_card",
    "activation_bytes_per_card",
    "memory_per_card_bytes",
    "usable_memory_per_card_bytes",
    "fits_memory",
    "scaling",
    "effective_time",
    "running_days",
    "days",
    "has_split",
)


def evaluate_splits(
    workload: TrainingWorkload, frame: pd.DataFrame, cards: NDArray[np.int64]
) -> pd.DataFrame:
    """Every valid split of `cards[i]` cards for prepared option row i, with memory and days.

    `frame` comes from `prepare_options`; the result has one row per (option, split) and a
    `row` column giving the option's position in `frame`.
    """
    shape = workload.model_shape
    splits = enumerate_splits(
        cards,
        frame["cards_per_node"].to_numpy(),
        layers=shape.layers,
        heads=shape.heads,
        global_batch=workload.global_batch_sequences,
        micro_batch=workload.micro_batch,
        fixed=workload.parallelism,
    )
    row = splits["row"].to_numpy()
    tp = splits["tp"].to_numpy(np.float64)
    pp = splits["pp"].to_numpy(np.float64)
    dp = splits["dp"].to_numpy(np.float64)
    m = splits["micro_batches"].to_numpy(np.float64)
    n = np.asarray(cards, dtype=np.float64)[row]

    state = model_state_bytes_per_card(workload.params, tp, pp, dp, workload.zero_stage)
    activations = activation_bytes_per_card(
        workload.seq_len,
        workload.micro_batch,
        shape.layers,
        shape.hidden,
        shape.heads,
        tp,
        pp,
        m,
        sequence_parallel=workload.sequence_parallel,
        recompute=workload.activation_recompute,
    )
    memory_gb = frame["memory_gb"].to_numpy(np.float64)[row]
    usable = usable_card_bytes(memory_gb, workload.usable_memory_share)
    splits["state_bytes_per_card"] = state
    splits["activation_bytes_per_card"] = activations
    splits["memory_per_card_bytes"] = state + activations
    splits["usable_memory_per_card_bytes"] = usable
    splits["fits_memory"] = state + activations <= usable

    peak_flops = frame["peak_tflops"].to_numpy(np.float64)[row] * 1e12
    mfu = frame["mfu"].to_numpy(np.float64)[row]
    # The split is chosen on the modeled scaling even when an override fixes the reported value.
    splits["scaling_modeled"] = _seam_scaling(workload, frame, splits, cards)
    scaling_override = frame["scaling"].to_numpy(np.float64)[row]
    splits["scaling"] = np.where(
        np.isnan(scaling_override), splits["scaling_modeled"], scaling_override
    )
    effective_time = effective_time_at_cards(frame, np.asarray(cards, dtype=np.float64))
    splits["effective_time"] = effective_time[row]
    throughput = n * peak_flops * mfu * splits["scaling"].to_numpy() * effective_time[row]
    splits["running_days"] = workload.flops / throughput / SECONDS_PER_DAY
    splits["days"] = splits["running_days"] / frame["utilization"].to_numpy(np.float64)[row]
    return splits


# Cap on (option × TP candidate × PP candidate) grid cells evaluated at once, to bound memory.
MAX_GRID_CELLS_PER_CHUNK = 2_000_000


def _best_split_per_option(
    workload: TrainingWorkload, frame: pd.DataFrame, cards: NDArray[np.int64]
) -> pd.DataFrame:
    """The fastest split that fits (else the one needing least memory), one row per option.

    Fastest is judged on the modeled scaling, so an overridden scaling still gets a sensible
    split; ties go to the split with most memory headroom, then the smallest TP.
    """
    columns = {name: np.full(len(frame), np.nan) for name in _SPLIT_COLUMNS}
    cards = np.asarray(cards, dtype=np.int64)
    evaluable = frame["peak_tflops"].notna().to_numpy() & (cards >= 1)
    positions = np.flatnonzero(evaluable)
    shape = workload.model_shape
    cells_per_option = int(frame["cards_per_node"].max()) * shape.layers
    check_grid("layers" if workload.shape else "model_params", cells_per_option)
    chunk = max(1, MAX_GRID_CELLS_PER_CHUNK // max(cells_per_option, 1))
    picked: list[pd.DataFrame] = []
    for start in range(0, positions.size, chunk):  # chunks of options, not one per option
        part = positions[start : start + chunk]
        splits = evaluate_splits(workload, frame.iloc[part], cards[part])
        if splits.empty:
            continue
        fits = splits["fits_memory"].to_numpy()
        modeled_days = splits["days"].to_numpy() * (
            splits["scaling"].to_numpy() / splits["scaling_modeled"].to_numpy()
        )
        order = np.lexsort(
            (
                splits["tp"].to_numpy(),
                splits["memory_per_card_bytes"].to_numpy(),
                np.where(fits, modeled_days, 0.0),
                ~fits,
                splits["row"].to_numpy(),
            )
        )
        ordered_rows = splits["row"].to_numpy()[order]
        first = order[np.r_[True, ordered_rows[1:] != ordered_rows[:-1]]]
        best = splits.iloc[first].copy()
        best["position"] = part[best["row"].to_numpy()]
        picked.append(best)
    if picked:
        best = pd.concat(picked, ignore_index=True)
        target = best["position"].to_numpy()
        for column in _SPLIT_COLUMNS:
            if column != "has_split":
                columns[column][target] = best[column].to_numpy(np.float64)
    result = pd.DataFrame(columns, index=frame.index)
    result["has_split"] = result["tp"].notna()
    result["fits_memory"] = result["fits_memory"].fillna(0.0).astype(bool)
    return result


def _feasible(best: pd.DataFrame, deadline_days: NDArray[np.float64]) -> NDArray[np.bool_]:
    days = best["days"].to_numpy(np.float64)
    return best["fits_memory"].to_numpy(bool) & (days <= deadline_days)


def _granularity(frame: pd.DataFrame, workload: TrainingWorkload) -> NDArray[np.int64]:
    fixed = workload.parallelism
    fixed_product = int(np.prod([v for v in (fixed.tp, fixed.pp, fixed.dp) if v is not None]))
    step = frame["card_granularity"].to_numpy(np.int64)
    return np.lcm(step, fixed_product)


# The deadline search checks every count from its lower bound up to the bisection's answer
# when that range is at most this many steps, in windows of DEADLINE_SCAN_WINDOW counts.
DEADLINE_EXACT_SCAN_LIMIT = 32_768
DEADLINE_SCAN_WINDOW = 2_048


def _feasible_at(
    workload: TrainingWorkload, frame: pd.DataFrame, idx: NDArray[np.int64], cards: NDArray
) -> NDArray[np.bool_]:
    best = _best_split_per_option(workload, frame.iloc[idx], cards.astype(np.int64))
    return _feasible(best, frame["deadline_days"].to_numpy(np.float64)[idx])


def cards_for_deadline(
    workload: TrainingWorkload, frame: pd.DataFrame, *, max_cards: int = DEFAULT_MAX_CARDS
) -> NDArray[np.float64]:
    """Smallest card count (in steps of the granularity g) meeting each option's deadline.

    Feasible(n): the best split of n cards fits in memory and days(n) <= deadline. Since
    scaling and effective time depend on n (and whole splits exist only for some n),
    feasibility is not monotone in n, so the search
    1. starts from a lower bound lo that cannot make it (scaling = effective time = 1),
    2. doubles hi until feasible, then bisects, keeping lo infeasible and hi feasible,
    3. scans the counts from the lower bound upwards (when at most DEADLINE_EXACT_SCAN_LIMIT
       steps below hi) and keeps the first feasible one: the true smallest count.
    So days(n) <= deadline and n - g misses the deadline (or does not fit), always; n is the
    smallest such count unless the exact scan was skipped for a very wide range.
    Returns NaN where no count <= max_cards meets the deadline.
    """
    deadline = frame["deadline_days"].to_numpy(np.float64)
    g = _granularity(frame, workload)
    peak = frame["peak_tflops"].to_numpy(np.float64) * 1e12
    upper_factors = (
        frame["mfu"].to_numpy(np.float64)
        * frame["scaling"].fillna(1.0).to_numpy(np.float64)
        * frame["effective_time"].fillna(1.0).to_numpy(np.float64)
        * frame["utilization"].to_numpy(np.float64)
    )
    ideal_cards = workload.flops / (deadline * SECONDS_PER_DAY * peak * upper_factors)
    # In units of g; infeasible by the bound above (the margin absorbs float rounding).
    lo = np.ceil(ideal_cards * (1 - 1e-9) / g) - 1
    known_infeasible = lo.copy()
    memory_floor = min_cards_for_state(
        workload.params, frame["memory_gb"].to_numpy(np.float64), workload.usable_memory_share
    )
    hi = np.maximum(lo + 1, np.ceil(memory_floor / g))
    max_units = np.floor(max_cards / g)
    found = np.zeros(len(frame), dtype=bool)
    active = np.isfinite(hi) & (hi <= max_units)
    while active.any():  # doubling: each infeasible probe becomes the new lo
        idx = np.flatnonzero(active)
        ok = _feasible_at(workload, frame, idx, hi[idx] * g[idx])
        found[idx[ok]] = True
        failed = idx[~ok]
        lo[failed] = hi[failed]
        hi[failed] = np.minimum(hi[failed] * 2, np.maximum(max_units[failed], hi[failed] + 1))
        active[:] = False
        active[failed] = lo[failed] < max_units[failed]
    active = found & (hi - lo > 1)
    while active.any():  # bisection between infeasible lo and feasible hi
        idx = np.flatnonzero(active)
        mid = np.floor((lo[idx] + hi[idx]) / 2)
        ok = _feasible_at(workload, frame, idx, mid * g[idx])
        hi[idx[ok]] = mid[ok]
        lo[idx[~ok]] = mid[~ok]
        active = found & (hi - lo > 1)
    _scan_up(workload, frame, np.flatnonzero(found), known_infeasible, hi, g)
    return np.where(found, hi * g, np.nan)


def _scan_up(
    workload: TrainingWorkload,
    frame: pd.DataFrame,
    idx: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    g: NDArray[np.int64],
) -> None:
    """Lower hi (in place) to the first feasible count above the known-infeasible bound lo.

    Windows of candidates are evaluated for all options at once; an option stops at its
    first feasible count (its predecessor failed: lo or an earlier candidate).
    """
    idx = idx[(hi[idx] - lo[idx] - 1 > 0) & (hi[idx] - lo[idx] - 1 <= DEADLINE_EXACT_SCAN_LIMIT)]
    start = lo[idx] + 1
    while idx.size:
        counts = np.minimum(hi[idx] - start, DEADLINE_SCAN_WINDOW).astype(np.int64)
        owner = np.repeat(np.arange(idx.size), counts)
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        units = start[owner] + offsets
        ok = _feasible_at(workload, frame, idx[owner], units * g[idx[owner]])
        first = np.full(idx.size, np.inf)
        np.minimum.at(first, owner, np.where(ok, units, np.inf))
        done = np.isfinite(first)
        hi[idx[done]] = first[done]
        start = start + counts
        keep = ~done & (start < hi[idx])
        idx, start = idx[keep], start[keep]


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


_OUTPUT_COLUMNS = (
    "option_id",
    "accelerator",
    "site",
    "precision",
    "feasible",
    "reason",
    "cards",
    "tp",
    "pp",
    "dp",
    "micro_batches",
    "days",
    "running_days",
    "card_hours",
    "allocated_card_hours",
    "peak_tflops",
    "effective_utilization",
    "energy",
    "mfu",
    "scaling",
    "effective_time",
    "utilization",
    "pue",
    "energy_provenance",
    "mfu_provenance",
    "scaling_provenance",
    "effective_time_provenance",
    "utilization_provenance",
    "state_bytes",
    "state_bytes_per_card",
    "activation_bytes_per_card",
    "memory_per_card_bytes",
    "usable_memory_per_card_bytes",
    "min_cards_memory",
    "it_energy_mwh",
    "facility_energy_mwh",
    "cost_basis",
    "compute_cost",
    "energy_cost",
    "energy_overhead_cost",
    "idle_cost",
    "total_cost",
    "co2_tonnes",
    "peak_pflop_days",
    "effective_pflop_days",
    "cost_per_effective_pflop_day",
    "rank_by_cost",
    "rank_by_days",
    "on_pareto_front",
)


def _reasons(
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


def plan_capacity(
    workload: TrainingWorkload,
    options: pd.DataFrame,
    *,
    max_cards: int = DEFAULT_MAX_CARDS,
) -> pd.DataFrame:
    """Evaluate every option; one output row per option (same index), ranked, Pareto-marked.

    Time mode (cards given): the fastest split that fits. Deadline mode (deadline_days given):
    the fewest cards that meet the deadline. See OPTION_COLUMN_DEFAULTS for input columns and
    _OUTPUT_COLUMNS for the output.
    """
    if options.empty:
        return pd.DataFrame(columns=list(_OUTPUT_COLUMNS))
    frame = prepare_options(options, workload)
    frame["max_cards"] = max_cards
    frame["min_cards_memory"] = min_cards_for_state(
        workload.params, frame["memory_gb"].to_numpy(np.float64), workload.usable_memory_share
    )
    deadline_rows = frame["cards"].isna().to_numpy() & frame["peak_tflops"].notna().to_numpy()
    if deadline_rows.any():
        deadline_frame = frame.iloc[np.flatnonzero(deadline_rows)]
        found = cards_for_deadline(workload, deadline_frame, max_cards=max_cards)
        frame.loc[frame.index[deadline_rows], "cards"] = found
    cards = frame["cards"].fillna(0).to_numpy(np.int64)
    best = _best_split_per_option(workload, frame, cards)
    for column in _SPLIT_COLUMNS:
        if column not in ("days", "running_days"):  # compute_outcomes recomputes these
            frame[column] = best[column]
    frame["state_bytes"] = training_state_bytes(workload.params)
    out = compute_outcomes(frame, workload.flops)
    out["reason"] = _reasons(workload, frame, best)
    out["feasible"] = out["reason"] == ""
    out["option_id"] = out.index
    feasible = out["feasible"].to_numpy()
    cost = np.where(feasible, out["total_cost"], np.nan)
    days = np.where(feasible, out["days"], np.nan)
    out["rank_by_cost"] = pd.Series(cost, index=out.index).rank(method="min")
    out["rank_by_days"] = pd.Series(days, index=out.index).rank(method="min")
    out["on_pareto_front"] = pareto_front(days, cost)
    extra = [c for c in out.columns if c not in _OUTPUT_COLUMNS]
    return out[list(_OUTPUT_COLUMNS) + extra]


# --------------------------------------------------------------------------------------------
# Scalar entry for POST /api/v1/estimates/training/
# --------------------------------------------------------------------------------------------

# Payload fields inside "accelerator" -> option column.
_ACCELERATOR_FIELDS: dict[str, tuple[str, ...]] = {
    "dense_bf16_tflops": ("dense_bf16_tflops", "peak_tflops_bf16", "peak_bf16_tflops"),
    "dense_fp8_tflops": ("dense_fp8_tflops", "peak_tflops_fp8", "peak_fp8_tflops"),
    "memory_gb": ("memory_gb",),
    "tdp_w": ("tdp_w",),
    "default_training_mfu": ("default_training_mfu",),
    "intra_node_interconnect_gbs": ("intra_node_interconnect_gbs",),
    "cards_per_node": ("cards_per_node",),
}
# Top-level payload field -> option column (same name unless listed).
_SCALAR_OPTION_FIELDS: dict[str, str] = {
    "cards": "cards",
    "deadline_days": "deadline_days",
    "mfu": "mfu",
    "achieved_tflops_per_card": "achieved_tflops_per_card",
    "scaling": "scaling",
    "effective_time": "effective_time",
    "utilization": "utilization",
    "pue": "pue",
    "cooling_type": "cooling_type",
    "tariff_per_kwh": "tariff_per_kwh",
    "grid_carbon_g_per_kwh": "grid_carbon_g_per_kwh",
    "price_per_card_hour": "rental_price_per_card_hour",
    "capital_cost_per_card": "capital_cost_per_card",
    "amortization_years": "amortization_years",
    "yearly_opex_per_card": "yearly_opex_per_card",
    "inter_node_bandwidth_gbps_per_card": "inter_node_bandwidth_gbps_per_card",
}
_SCALAR_UNIT_FACTORS = ("mfu", "scaling", "effective_time", "utilization")


def _number(payload: Mapping[str, Any], key: str, errors: dict[str, str], label: str = "") -> Any:
    """payload[key] as float (None when absent); records an error under `label or key`."""
    value = payload.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        errors[label or key] = "must be a number"
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        errors[label or key] = "must be a number"
        return None
    if not math.isfinite(number):
        errors[label or key] = "must be a finite number"
        return None
    return number


def _scalar_inputs(
    payload: Mapping[str, Any],
) -> tuple[TrainingWorkload, dict[str, Any]]:
    """Validate the endpoint payload; every error names its field."""
    errors: dict[str, str] = {}
    params = _number(payload, "model_params", errors)
    tokens = _number(payload, "tokens", errors)
    total_flops = _number(payload, "total_flops", errors)
    if params is None and "model_params" not in errors:
        errors["model_params"] = "required"
    elif params is not None and params <= 0:
        errors["model_params"] = "must be positive"
    if tokens is None and total_flops is None and "tokens" not in errors:
        errors["tokens"] = "required (or give total_flops)"
    elif tokens is not None and tokens <= 0:
        errors["tokens"] = "must be positive"
    if total_flops is not None and total_flops <= 0:
        errors["total_flops"] = "must be positive"
    k = payload.get("flops_per_param_token", 6)
    if k not in (6, 8) or isinstance(k, bool):
        errors["flops_per_param_token"] = K_ERROR
    zero_stage = payload.get("zero_stage", 1)
    if zero_stage not in (0, 1, 2, 3) or isinstance(zero_stage, bool):
        errors["zero_stage"] = "must be 0, 1, 2 or 3"
    precision = payload.get("precision", "bf16")
    if precision not in ("bf16", "fp8"):
        errors["precision"] = "must be 'bf16' or 'fp8'"
    dp_degree = _number(payload, "dp_degree", errors)
    if dp_degree is not None and (dp_degree < 1 or dp_degree != int(dp_degree)):
        errors["dp_degree"] = "must be a whole number >= 1"

    option: dict[str, Any] = {}
    accelerator = payload.get("accelerator")
    if not isinstance(accelerator, Mapping):
        errors["accelerator"] = "required: a catalog row (peak TFLOPS, memory_gb, tdp_w, ...)"
        accelerator = {}
    option["accelerator"] = str(accelerator.get("name") or accelerator.get("model") or "")
    for column, aliases in _ACCELERATOR_FIELDS.items():
        key = next((a for a in aliases if accelerator.get(a) is not None), aliases[0])
        value = _number(accelerator, key, errors, f"accelerator.{key}")
        if value is not None:
            if value <= 0:
                errors[f"accelerator.{key}"] = "must be positive"
            option[column] = value
    for column in REQUIRED_OPTION_COLUMNS:
        if column not in option and not any(k.startswith("accelerator.") for k in errors):
            errors[f"accelerator.{column}"] = "required"
    if "dense_fp8_tflops" not in option and precision == "fp8" and "accelerator" not in errors:
        errors["precision"] = "fp8 requested but the accelerator has no dense_fp8_tflops"

    for key, column in _SCALAR_OPTION_FIELDS.items():
        if key == "cooling_type":
            if payload.get(key) is not None:
                option[column] = str(payload[key])
            continue
        value = _number(payload, key, errors)
        if value is not None:
            option[column] = value
    cards, deadline = option.get("cards"), option.get("deadline_days")
    if cards is None and deadline is None:
        errors["cards"] = "give cards or deadline_days"
    elif cards is not None and deadline is not None:
        errors["cards"] = "give cards or deadline_days, not both"
    elif cards is not None and (cards < 1 or cards != int(cards)):
        errors["cards"] = "must be a whole number >= 1"
    elif deadline is not None and deadline <= 0:
        errors["deadline_days"] = "must be positive"
    elif cards is not None and dp_degree and cards % dp_degree:
        errors["dp_degree"] = "must divide cards"
    for key in _SCALAR_UNIT_FACTORS:
        value = option.get(key)
        if value is not None and not 0 < value <= 1:
            errors[key] = "must be in (0, 1]"
    achieved = option.get("achieved_tflops_per_card")
    if achieved is not None and achieved <= 0:
        errors["achieved_tflops_per_card"] = "must be positive"
    if option.get("mfu") is not None and achieved is not None:
        errors["mfu"] = "give mfu or achieved_tflops_per_card, not both"
    if option.get("pue") is not None and option["pue"] < 1:
        errors["pue"] = "must be >= 1"
    for key in ("tariff_per_kwh", "grid_carbon_g_per_kwh", "price_per_card_hour"):
        value = payload.get(key)
        if key not in errors and value is not None and float(value) < 0:
            errors[key] = "must be >= 0"
    if option.get("capital_cost_per_card") is not None and option.get("amortization_years") is None:
        errors["amortization_years"] = "required with capital_cost_per_card"
    for key, name in ESTIMATE_LIMITS.items():
        if key not in errors and (message := range_error(name, payload.get(key))):
            errors[key] = message
    if errors:
        raise PlannerInputError(errors)

    # A plain time estimate: factors not given are 1, not modeled.
    for key in ("scaling", "effective_time", "utilization"):
        if key not in option:
            option[key] = 1.0
            option[f"{key}_provenance"] = "default"
    try:
        workload = TrainingWorkload(
            params=float(params or 0),
            tokens=tokens,
            total_flops=total_flops,
            flops_per_param_token=int(k),
            precision=precision,
            seq_len=int(payload.get("seq_len", 2048)),
            global_batch_sequences=int(payload.get("global_batch_sequences", 1536)),
            zero_stage=int(zero_stage),
            parallelism=FixedParallelism(dp=int(dp_degree) if dp_degree else None),
        )
    except (TypeError, ValueError) as exc:
        if isinstance(exc, PlannerInputError):
            raise
        raise PlannerInputError({"seq_len": str(exc)}) from exc
    return workload, option


def estimate_training(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Scalar training estimate (POST /api/v1/estimates/training/), via `plan_capacity`.

    Raises PlannerInputError (a ValueError) whose `errors` maps payload fields to messages.
    """
    workload, option = _scalar_inputs(payload)
    try:
        plan = plan_capacity(workload, pd.DataFrame([option]))
    except EngineInputError as exc:  # translate option columns back to payload fields
        to_field = {column: key for key, column in _SCALAR_OPTION_FIELDS.items()}
        to_field.update({column: f"accelerator.{column}" for column in _ACCELERATOR_FIELDS})
        raise PlannerInputError(
            {to_field.get(key, key): msg for key, msg in exc.errors.items()}
        ) from exc
    row = plan.iloc[0]

    def number(column: str) -> float | None:
        value = row[column]
        return None if pd.isna(value) else float(value)

    def whole(column: str) -> int | None:
        value = number(column)
        return None if value is None else int(value)

    return {
        "feasible": bool(row["feasible"]),
        "reason": row["reason"],
        "total_flops": workload.flops,
        "days": number("days"),
        "cards": whole("cards"),
        "card_hours": number("card_hours"),
        "parallelism": {"tp": whole("tp"), "pp": whole("pp"), "dp": whole("dp")},
        "memory": {
            "state_bytes": number("state_bytes"),
            "per_card_bytes": number("memory_per_card_bytes"),
            "state_per_card_bytes": number("state_bytes_per_card"),
            "activation_per_card_bytes": number("activation_bytes_per_card"),
            "usable_per_card_bytes": number("usable_memory_per_card_bytes"),
            "min_cards": whole("min_cards_memory"),
        },
        "energy_mwh": {"it": number("it_energy_mwh"), "facility": number("facility_energy_mwh")},
        "co2_tonnes": number("co2_tonnes"),
        "cost": {
            "basis": str(row["cost_basis"]) or None,
            "compute": number("compute_cost"),
            "energy": number("energy_cost"),
            "energy_overhead": number("energy_overhead_cost"),
            "idle": number("idle_cost"),
            "total": number("total_cost"),
            "per_effective_pflop_day": number("cost_per_effective_pflop_day"),
        },
        "factors": {
            **{factor: number(factor) for factor in FACTORS},
            "pue": number("pue"),
            "effective_utilization": number("effective_utilization"),
            "provenance": {factor: str(row[f"{factor}_provenance"]) for factor in FACTORS},
        },
    }

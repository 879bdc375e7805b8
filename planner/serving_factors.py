"""Serving factors for inference pools in analyses (docs/efficiency-model.md, "Serving pools").

An inference pool's stored row keeps the five factor keys, with serving definitions:
`mfu` holds the MBU of its cards at capacity for the served model, `scaling` is 1,
`effective_time` holds the availability of a replica, and `utilization` is the measured
serving load over the cards' modeled capacity when the loads cover enough of the period.
The pure formulas are in engine/inference/serving.py; this module reads the serving
loads (Django) and rewrites the engine's rows.

A load naming a catalog model (`model_name`) is served with the catalog's shape; for a
mixture of experts the memory holds every expert, a decode step reads the common weights and
the experts its tokens route to (engine.moe.decode_params_read) and a token's FLOPs are the
active parameters' (issue #32). The row says which counts it used (`serving_params`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pandas as pd

from accounting.models import ServingLoad
from engine.aggregate import attribute_waste_arrays
from engine.coverage import MIN_COVERED_SHARE, measured_applies
from engine.coverage import union_hours as coverage_union_hours
from engine.factors import FACTOR_LABELS, FACTOR_NAMES
from engine.inference import serving
from engine.inference.defaults import SERVING_REPAIR, serving_default
from engine.inference.memory import BYTES_PER_GB, AttentionShape
from engine.inference.precision import WEIGHT_FORMATS
from engine.inference.sizing import InferenceWorkload, evaluate_inference
from engine.limits import EngineInputError
from engine.model_catalog import UnknownModelError
from engine.moe import MoeShape, decode_params_read
from inventory.models import AcceleratorModel, Cluster
from planner.inference_estimate import card_frame
from planner.inference_model import served_model

INFERENCE = "inference"
SERVING_LABELS = {**FACTOR_LABELS, "mfu": "MBU", "effective_time": "Availability"}
SERVING_NOTE = (
    "inference pool: serving definitions (MBU in place of MFU, no pipeline scaling, "
    "availability in place of effective training time; docs/efficiency-model.md, "
    '"Serving pools")'
)
# Columns added to the pools frame (and so to the analysis's input snapshot).
SERVING_COLUMNS = (
    "serving_mbu",
    "serving_mbu_basis",
    "serving_mfu",
    "serving_params",
    "serving_tp",
    "serving_tokens_per_s",
    "serving_capacity_tokens_per_s",
    "serving_covered_share",
    "serving_utilization",
    "serving_reason",
)


# -- capacity of a pool's cards for a served model ------------------------------------------


def card_counts(groups: pd.DataFrame, pool_id) -> pd.Series:
    """Cards of each card model in the pool."""
    rows = groups[groups["pool_id"] == pool_id]
    return (rows["nodes"] * rows["cards_per_node"]).groupby(rows["accelerator"]).sum()


@dataclass(frozen=True)
class ServedParams:
    """The parameter counts a load's model is scored on, its shape, and where they come from."""

    total: float  # what memory holds (every expert)
    active: float  # what one token multiplies through (2 FLOPs each)
    provenance: str
    attention: AttentionShape | None = None  # a dense catalog model's shape
    moe: MoeShape | None = None  # a mixture of experts' shape


def billions(params: float) -> str:
    return f"{params / 1e9:.3g} B"


def served_params(model_name: str, model_params: float) -> ServedParams:
    """A named catalog model's counts and shape (planner.inference_model.served_model), else
    the entered count with every parameter active."""
    entered = float(model_params)
    as_entered = f"all {billions(entered)} active, model_params as entered"
    if not model_name:
        return ServedParams(entered, entered, as_entered)
    try:
        model = served_model({"model": model_name})
    except UnknownModelError:  # renamed or dropped from the catalog since it was entered
        gone = f"{as_entered} (the catalog no longer holds {model_name})"
        return ServedParams(entered, entered, gone)
    if model.moe is None:
        text = f"all {billions(model.params)} active, catalog {model.name}"
        return ServedParams(model.params, model.params, text, attention=model.attention)
    active = float(model.active_params or model.params)
    text = f"active {billions(active)} of {billions(model.params)}, catalog {model.name}"
    return ServedParams(model.params, active, text, moe=model.moe)


def best_option(
    cards: pd.DataFrame, load: ServingLoad, count: int, params: ServedParams | None = None
) -> pd.Series | None:
    """The tensor-parallel degree at which `count` cards serve the most tokens/s (None: the
    model does not fit)."""
    params = params or served_params(load.model_name, load.model_params)
    try:
        workload = InferenceWorkload(
            params=params.total,
            input_tokens=load.input_tokens,
            output_tokens=load.output_tokens,
            weight_precision=load.weight_precision,
            kv_precision=load.kv_precision,
            cards=int(count),
            shape=params.attention,
            moe=params.moe,
        )
        options = evaluate_inference(cards, workload)
    except EngineInputError:
        return None
    options = options[options["feasible"]]
    if options.empty:
        return None
    return options.loc[options["capacity_tokens_per_s"].idxmax()]


def weight_bytes_per_card(option: pd.Series, params: ServedParams, precision: str) -> float:
    """Weight bytes a card reads per decode step: all it holds for a dense model; for a
    mixture of experts the common weights and the experts the step's tokens (decoded and
    folded prompt tokens, as sizing.py counts them) route to, split over tp."""
    if params.moe is None:
        return float(option["weight_gb_per_card"] * BYTES_PER_GB)
    batch = float(option["batch"])
    prompt = batch * float(option["step_prompt_per_output"]) if option["step_chunked"] else 0.0
    read = float(decode_params_read(params.moe, batch + prompt))
    return read * WEIGHT_FORMATS[precision].bytes_per_value / float(option["tp"])


def flops_per_output_token(params: ServedParams, load: ServingLoad) -> float:
    """Model FLOPs per generated token: 2 per active parameter for it and for its share of
    the prompt ((input + output) / output tokens a request); attention left out."""
    return 2.0 * params.active * (load.input_tokens + load.output_tokens) / load.output_tokens


def _model_of(load: ServingLoad) -> tuple:
    """What decides a load's capacity on given cards (loads of one model share it)."""
    return (
        load.model_name,
        load.model_params,
        load.weight_precision,
        load.kv_precision,
        load.input_tokens,
        load.output_tokens,
    )


class CapacityModel:
    """Capacity of card counts for served models: the catalog read once, each (model, card,
    count) evaluated once however many loads repeat it (a load a day for a year is common)."""

    def __init__(self, groups: pd.DataFrame):
        self.groups = groups
        names = groups["accelerator"].unique().tolist()
        self.cards = {card.name: card for card in AcceleratorModel.objects.filter(name__in=names)}
        self.memo: dict[tuple, dict] = {}

    def of_load(self, pool_id, load: ServingLoad) -> dict:
        """Modeled capacity (tokens/s), MBU at capacity and tp of the pool's cards for a load."""
        counts = tuple(card_counts(self.groups, pool_id).items())
        key = (_model_of(load), counts)
        if key not in self.memo:
            self.memo[key] = self._capacity(load, counts)
        return self.memo[key]

    def _capacity(self, load: ServingLoad, counts) -> dict:
        params = served_params(load.model_name, load.model_params)
        capacity, moved, flops, tp = 0.0, 0.0, 0.0, np.nan
        peak_bytes, peak_flops = 0.0, 0.0
        for name, count in counts:
            card = self.cards.get(name)
            option = None if card is None else best_option(card_frame([card]), load, count, params)
            peak_bytes += count * _peak(card, "memory_bandwidth_tbs") * 1e12
            peak_flops += count * _peak(card, "dense_bf16_tflops") * 1e12
            if option is None:
                continue
            kv_read = option["kv_bytes_per_token_per_card"] * (
                load.input_tokens + load.output_tokens / 2.0
            )
            weights = weight_bytes_per_card(option, params, load.weight_precision)
            per_token = serving.bytes_per_token(
                weights,
                option["tp"],
                option["batch"],
                kv_read,
                option["hidden_state_bytes_per_sequence"],
            )
            served = float(option["capacity_tokens_per_s"])
            capacity += served
            moved += served * float(per_token)
            flops += served * flops_per_output_token(params, load)
            tp = int(option["tp"]) if np.isnan(tp) else max(tp, int(option["tp"]))
        known = capacity > 0
        mbu = moved / peak_bytes if known and peak_bytes > 0 else np.nan
        mfu = flops / peak_flops if known and peak_flops > 0 else np.nan
        return {"capacity": capacity, "mbu": mbu, "mfu": mfu, "tp": tp, "params": params.provenance}


def _peak(card: AcceleratorModel | None, field: str) -> float:
    """A card's peak figure (bandwidth TB/s, dense BF16 TFLOP/s); NaN when unknown."""
    value = None if card is None else getattr(card, field)
    return float(value) if value else np.nan


# -- serving loads over the period -----------------------------------------------------------


def overlap_hours(load: ServingLoad, start: dt.datetime, end: dt.datetime) -> float:
    seconds = (min(load.period_end, end) - max(load.period_start, start)).total_seconds()
    return max(seconds, 0.0) / 3600.0


def union_hours(spans: list[tuple[dt.datetime, dt.datetime]], start, end) -> float:
    """Hours of the period inside at least one span (overlapping loads count once)."""
    begin = pd.Series([max(span_start, start) for span_start, _ in spans], dtype=object)
    until = pd.Series([min(span_end, end) for _, span_end in spans], dtype=object)
    return coverage_union_hours(begin, until)


def pool_serving(
    capacities: CapacityModel,
    loads: list,
    pool_id,
    start: dt.datetime,
    end: dt.datetime,
    in_service_from: dt.datetime | None = None,
) -> dict:
    """The pool's serving columns from its loads overlapping the period (time-weighted).

    Coverage is over the pool's time in service in the period (from its cluster's
    commissioning), as the usage rule counts only in-service card-hours.
    """
    groups = capacities.groups
    service_start = max(start, in_service_from) if in_service_from is not None else start
    if service_start >= end:
        return _no_load("not in service in this period", default_tp(groups, pool_id))
    service_h = (end - service_start).total_seconds() / 3600.0
    rows = [
        {
            "h": overlap_hours(load, start, end),
            "span": (load.period_start, load.period_end),
            "served": load.served_tokens_per_s,
            **capacities.of_load(pool_id, load),
        }
        for load in loads
    ]
    if not rows:
        return _no_load("no serving load entered for this period", default_tp(groups, pool_id))
    frame = pd.DataFrame(rows)
    # A card model without bandwidth in the catalog leaves the pool's MBU unknown, too.
    known = frame[(frame["capacity"] > 0) & np.isfinite(frame["mbu"])]
    if known.empty:
        reason = (
            "the served model does not fit these cards (or the catalog lacks their memory "
            "figures), so their capacity is unknown"
        )
        return _no_load(reason, default_tp(groups, pool_id))
    weights = known["h"] / known["h"].sum()
    # Hours in service inside a load with a known capacity.
    covered_h = union_hours(known["span"].tolist(), service_start, end)
    covered = covered_h / service_h
    utilization = serving.serving_utilization(known["served"], known["capacity"])
    applies = bool(measured_applies(covered_h, service_h))
    since = service_start if service_start > start else None
    return {
        "serving_mbu": float((known["mbu"] * weights).sum()),
        "serving_mbu_basis": "serving_load_model",
        "serving_mfu": float((known["mfu"] * weights).sum(min_count=1, skipna=False)),
        "serving_params": "; ".join(dict.fromkeys(known["params"])),
        "serving_tp": float(known.loc[known["h"].idxmax(), "tp"]),
        "serving_tokens_per_s": float((known["served"] * weights).sum()),
        "serving_capacity_tokens_per_s": float((known["capacity"] * weights).sum()),
        "serving_covered_share": covered,
        "serving_utilization": float((utilization * weights).sum()) if applies else np.nan,
        "serving_reason": _coverage_reason(covered, applies, since),
    }


def _coverage_reason(covered: float, applies: bool, since: dt.datetime | None = None) -> str:
    span = "the period" if since is None else f"its time in service (from {since:%Y-%m-%d})"
    share = f"serving loads cover {covered:.0%} of {span}"
    if applies:
        return f"measured: served tokens/s ÷ modeled capacity ({share})"
    return f"{share}, under {MIN_COVERED_SHARE:.0%}: serving load not used"


def default_tp(groups: pd.DataFrame, pool_id) -> float:
    """Without a served model, a replica is taken to span one node, at most max_tp cards."""
    per_node = groups.loc[groups["pool_id"] == pool_id, "cards_per_node"].min()
    return float(min(serving_default("max_tp"), per_node))


def _no_load(reason: str, tp: float) -> dict:
    return {
        "serving_mbu": serving_default("bandwidth_efficiency"),
        "serving_mbu_basis": "bandwidth_efficiency_default",
        "serving_mfu": np.nan,
        "serving_params": None,
        "serving_tp": tp,
        "serving_tokens_per_s": np.nan,
        "serving_capacity_tokens_per_s": np.nan,
        "serving_covered_share": np.nan,
        "serving_utilization": np.nan,
        "serving_reason": reason,
    }


def _in_service_from(cluster_ids: list[int]) -> dict[int, dt.datetime]:
    """Clusters' commissioning (UTC midnight, as the usage rule reads it); none: always."""
    commissioned = Cluster.objects.filter(pk__in=cluster_ids, commissioned_on__isnull=False)
    return {
        pk: dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
        for pk, day in commissioned.values_list("pk", "commissioned_on")
    }


def with_serving_columns(pools: pd.DataFrame, groups: pd.DataFrame, start, end) -> pd.DataFrame:
    """The pools frame with the serving columns filled for inference pools (NaN elsewhere)."""
    inference = pools["purpose"] == INFERENCE
    if not inference.any():
        return pools
    capacities = CapacityModel(groups)
    loads_of: dict = {}
    # One query for every inference pool's loads overlapping the period.
    for load in ServingLoad.objects.filter(
        pool_id__in=pools.loc[inference, "pool_id"].tolist(),
        period_start__lt=end,
        period_end__gt=start,
    ).order_by("period_start", "pk"):
        loads_of.setdefault(load.pool_id, []).append(load)
    in_service = _in_service_from(pools.loc[inference, "cluster_id"].tolist())
    rows = {}
    for index in pools.index[inference]:
        pool_id = int(pools.at[index, "pool_id"])
        since = in_service.get(int(pools.at[index, "cluster_id"]))
        loads = loads_of.get(pool_id, [])
        rows[index] = pool_serving(capacities, loads, pool_id, start, end, since)
    extra = pd.DataFrame.from_dict(rows, orient="index").reindex(pools.index)
    pools = pools.assign(**{column: extra[column] for column in SERVING_COLUMNS})
    if "utilization_reason" in pools:  # the usage coverage reason no longer explains the value
        measured = pools["serving_utilization"].notna()
        pools.loc[measured, "utilization_reason"] = pools.loc[measured, "serving_reason"]
    return pools


# -- the engine's rows rewritten with serving factors -----------------------------------------

# Columns that describe a training job's shape and checkpoints: not defined for serving.
TRAINING_ONLY_COLUMNS = (
    "pipeline_parallel",
    "data_parallel",
    "microbatches_per_replica",
    "bubble_fraction",
    "tp_comm_share",
    "dp_exposed_share",
    "mtbf_job_h",
    "checkpoint_save_h",
    "checkpoint_interval_h",
    "lost_checkpoint_share",
    "lost_rework_share",
    "lost_restart_share",
)


# A scope with both kinds of pool: its aggregated factor is a blend of the two definitions.
MIXED_LABELS = {
    **FACTOR_LABELS,
    "mfu": "MFU / MBU",
    "effective_time": "Effective training time / availability",
}


def aggregate_labels(definitions: pd.Series) -> dict[str, str]:
    """`mfu_label`, `effective_time_label` of a scope from its pools' `factor_definitions`."""
    kinds = set(definitions.dropna().astype(str))
    labels = (
        SERVING_LABELS
        if kinds == {"serving"}
        else MIXED_LABELS
        if "serving" in kinds
        else FACTOR_LABELS
    )
    return {f"{name}_label": labels[name] for name in ("mfu", "effective_time")}


def label_columns(result: pd.DataFrame, rows: np.ndarray) -> None:
    """`factor_definitions` and the labels pages show for mfu and effective_time."""
    result["factor_definitions"] = np.where(rows, "serving", "training")
    for name in ("mfu", "effective_time"):
        result[f"{name}_label"] = np.where(rows, SERVING_LABELS[name], FACTOR_LABELS[name])


def set_factor(result, rows, name, value, provenance, basis, defaults="") -> None:
    for suffix in ("_provenance", "_basis", "_defaults"):
        result[f"{name}{suffix}"] = result[f"{name}{suffix}"].astype(object)
    result.loc[rows, name] = value
    result.loc[rows, f"{name}_provenance"] = provenance
    result.loc[rows, f"{name}_basis"] = basis
    result.loc[rows, f"{name}_defaults"] = defaults


def availability_defaults(training_defaults: pd.Series) -> list[str]:
    """The card-MTBF defaults the engine used, and restart_h (the serving repair time)."""
    names = [
        [name for name in str(value).split(", ") if name.startswith("mtbf_card_hours")]
        for value in training_defaults
    ]
    return [", ".join([*mtbf, "restart_h"]) for mtbf in names]


def serving_factor_columns(result: pd.DataFrame, info: pd.DataFrame, rows: np.ndarray) -> None:
    """MBU, scaling 1, availability and (when measured) utilization on the serving rows."""
    sub = info[rows]
    default_mbu = (sub["serving_mbu_basis"] == "bandwidth_efficiency_default").to_numpy()
    set_factor(
        result,
        rows,
        "mfu",
        sub["serving_mbu"].to_numpy(),
        np.where(default_mbu, "default", "modeled"),
        sub["serving_mbu_basis"].to_numpy(),
        np.where(default_mbu, "bandwidth_efficiency", ""),
    )
    set_factor(result, rows, "scaling", 1.0, "modeled", "serving: no pipeline scaling")
    up = serving.availability(
        result.loc[rows, "mtbf_card_hours"], sub["serving_tp"], SERVING_REPAIR.value
    )
    used = availability_defaults(result.loc[rows, "effective_time_defaults"])
    set_factor(result, rows, "effective_time", up, "modeled", "serving_availability", used)
    result.loc[rows, "serving_repair_h"] = SERVING_REPAIR.value
    measured = rows & info["serving_utilization"].notna().to_numpy()
    if measured.any():
        value = info.loc[measured, "serving_utilization"].to_numpy()
        set_factor(result, measured, "utilization", value, "measured", "serving_load")


def recompute_attribution(result: pd.DataFrame, rows: np.ndarray, cost_per_card_hours) -> None:
    """Product and lost shares (in card-hours, PFLOP-days, money) of the rewritten rows."""
    factors = result.loc[rows, list(FACTOR_NAMES)].to_numpy(dtype=float)
    product, lost, shares = attribute_waste_arrays(factors)
    card_hours = result.loc[rows, "card_hours"].to_numpy()
    peak_days = result.loc[rows, "peak_pflop_days"].to_numpy()
    result.loc[rows, "product"] = product
    result.loc[rows, "effective_pflop_days"] = product * peak_days
    result.loc[rows, "lost_share"] = lost
    for position, name in enumerate(FACTOR_NAMES):
        share = shares[:, position]
        result.loc[rows, f"lost_share_{name}"] = share
        result.loc[rows, f"lost_{name}_card_hours"] = share * card_hours
        result.loc[rows, f"lost_{name}_pflop_days"] = share * peak_days
        result.loc[rows, f"lost_{name}_money"] = share * card_hours * cost_per_card_hours[rows]


def apply_serving_factors(result: pd.DataFrame, pools: pd.DataFrame) -> pd.DataFrame:
    """The engine's pool rows with serving factors on inference pools (others unchanged)."""
    result = result.copy()
    info = pools.set_index("pool_id").reindex(result.index)
    rows = (info["purpose"] == INFERENCE).to_numpy() & ("serving_mbu" in info)
    label_columns(result, rows)
    if not rows.any():
        return result
    serving_factor_columns(result, info, rows)
    cost = info.get("cost_per_card_hours", pd.Series(np.nan, index=info.index)).to_numpy(float)
    recompute_attribution(result, rows, cost)
    for column in TRAINING_ONLY_COLUMNS:
        result.loc[rows, column] = np.nan
    result.loc[rows, "tensor_parallel"] = info.loc[rows, "serving_tp"].to_numpy()
    result.loc[rows, "effective_time_stalled"] = False
    return result

"""Cards for a serving target: one row per (card model × tensor-parallel degree), vectorised.

For each option: weights and KV cache per card, the largest batch that fits and meets the
TTFT/TPOT bounds, the throughput of one replica at that batch, then replicas (and cards) for
the target, or the throughput the given cards deliver; energy and cost per million tokens.
`choose` keeps the best degree per card model and marks the cheapest and the Pareto front
(cost per million tokens vs time per output token). Formulas: memory.py, roofline.py, energy.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from engine.capacity import pareto_front
from engine.inference import energy, queueing, roofline
from engine.inference import memory as mem
from engine.inference.defaults import INFERENCE_DEFAULTS, serving_default
from engine.inference.memory import AttentionShape
from engine.limits import EngineInputError, check_grid, limit, range_error

# Workload attribute -> its limit in engine.limits.LIMITS.
INFERENCE_WORKLOAD_LIMITS = {
    "params": "model_params",
    "input_tokens": "seq_len",
    "output_tokens": "seq_len",
    "context_tokens": "seq_len",
    "requests_per_s": "requests_per_s",
    "tokens_per_s": "serving_tokens_per_s",
    "cards": "cards",
    "tp": "tp_degree",
    "batch": "micro_batch",
    "ttft_ms": "latency_ms",
    "tpot_ms": "latency_ms",
    "ttft_p95_ms": "latency_ms",
    "tpot_p95_ms": "latency_ms",
    "tariff_per_kwh": "tariff_per_kwh",
    "price_per_card_hour": "price_per_card_hour",
}
SHAPE_LIMITS = {
    "layers": "layers",
    "hidden": "hidden_size",
    "heads": "attention_heads",
    "kv_heads": "attention_heads",
    "head_dim": "head_dim",
}
OVERRIDE_LIMITS = {
    "bandwidth_efficiency": "share",
    "compute_efficiency": "share",
    "usable_memory_share": "share",
    "power_share_of_tdp": "share",
    "pue": "pue",
    "amortization_years": "amortization_years",
    "prefill_chunk_tokens": "seq_len",
    "max_tp": "tp_degree",
}


@dataclass(frozen=True)
class InferenceWorkload:
    """What to serve and how fast; a target (requests_per_s or tokens_per_s) or cards."""

    params: float
    input_tokens: int
    output_tokens: int
    weight_precision: str = "bf16"
    kv_precision: str = "bf16"
    shape: AttentionShape | None = None
    context_tokens: int | None = None
    requests_per_s: float | None = None
    tokens_per_s: float | None = None
    cards: int | None = None
    tp: int | None = None
    batch: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    ttft_p95_ms: float | None = None
    tpot_p95_ms: float | None = None
    tariff_per_kwh: float | None = None
    price_per_card_hour: float | None = None
    overrides: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if errors := workload_errors(self):
            raise EngineInputError(errors)

    @property
    def attention(self) -> AttentionShape:
        return self.shape or AttentionShape.infer(self.params)

    @property
    def context(self) -> int:
        return self.context_tokens or self.input_tokens + self.output_tokens

    @property
    def target_tokens_per_s(self) -> float | None:
        """Output tokens per second asked for (requests/s × output tokens), None without one."""
        if self.tokens_per_s is not None:
            return float(self.tokens_per_s)
        if self.requests_per_s is not None:
            return float(self.requests_per_s) * self.output_tokens
        return None

    def setting(self, key: str) -> float:
        return float(self.overrides.get(key, serving_default(key)))

    def provenance(self) -> dict[str, str]:
        """Where each default-able input came from: entered, or the documented default."""
        given = dict.fromkeys(self.overrides, "entered")
        return {key: given.get(key, "default") for key in INFERENCE_DEFAULTS}


def workload_errors(w: InferenceWorkload) -> dict[str, str]:
    """Field -> message for every input the model refuses (ranges from the one limits table)."""
    errors = {
        key: msg
        for key, name in INFERENCE_WORKLOAD_LIMITS.items()
        if (msg := range_error(name, getattr(w, key)))
    }
    for key, value in w.overrides.items():
        if key not in OVERRIDE_LIMITS:
            errors[key] = "Unknown setting."
        elif msg := range_error(OVERRIDE_LIMITS[key], value):
            errors[key] = msg
    if w.shape is not None:
        for key, name in SHAPE_LIMITS.items():
            if msg := range_error(name, getattr(w.shape, key)):
                errors[key] = msg
    if w.weight_precision not in mem.WEIGHT_PRECISIONS:
        errors["weight_precision"] = f"One of {', '.join(mem.WEIGHT_PRECISIONS)}."
    if w.kv_precision not in mem.KV_PRECISIONS:
        errors["kv_precision"] = f"One of {', '.join(mem.KV_PRECISIONS)}."
    targets = [w.requests_per_s, w.tokens_per_s, w.cards]
    if sum(value is not None for value in targets) != 1:
        errors["requests_per_s"] = "Give exactly one of requests_per_s, tokens_per_s or cards."
    short = w.context_tokens is not None and w.context_tokens < w.input_tokens + w.output_tokens
    if not errors and short:
        errors["context_tokens"] = "Must be at least input_tokens + output_tokens."
    if not errors and w.tp is not None and w.cards is not None and w.tp > w.cards:
        errors["tp"] = "Must not exceed cards."
    return errors


# --------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------

CARD_COLUMNS = ("accelerator", "memory_gb", "memory_bandwidth_tbs", "dense_bf16_tflops", "tdp_w")
OPTIONAL_CARD_COLUMNS = (
    "dense_fp8_tflops",
    "dense_int8_tops",
    "rental_price_per_card_hour",
    "list_price",
)
# Option rows one evaluation may hold (~40 columns of 8 bytes: 200,000 rows ≈ 64 MB).
MAX_OPTION_ROWS = 200_000
_PEAK_COLUMN = {"fp8": "dense_fp8_tflops", "int8": "dense_int8_tops"}


def tp_candidates(w: InferenceWorkload) -> np.ndarray:
    """Powers of two up to max_tp that divide the attention heads, or the fixed degree."""
    if w.tp is not None:
        return np.array([w.tp], dtype=np.int64)
    limit = int(w.setting("max_tp"))
    if w.cards is not None:
        limit = min(limit, w.cards)
    powers = 2 ** np.arange(int(math.log2(limit)) + 1, dtype=np.int64)
    dividing: np.ndarray = powers[w.attention.heads % powers == 0]
    return dividing


def expand_options(cards: pd.DataFrame, w: InferenceWorkload) -> pd.DataFrame:
    """One row per (card model, tp); the size is checked before anything is allocated."""
    missing = [c for c in CARD_COLUMNS if c not in cards.columns]
    if missing:
        raise EngineInputError({"accelerator": f"Card data lacks {', '.join(missing)}."})
    degrees = tp_candidates(w)
    check_grid("accelerator", float(len(cards)) * max(len(degrees), 1), MAX_OPTION_ROWS)
    used = [c for c in (*CARD_COLUMNS, *OPTIONAL_CARD_COLUMNS) if c in cards.columns]
    frame = cards.loc[cards.index.repeat(len(degrees)), used].reset_index(drop=True)
    frame["tp"] = np.tile(degrees, len(cards))
    return frame


def compute_peak(frame: pd.DataFrame, precision: str) -> tuple[np.ndarray, np.ndarray]:
    """Peak used by the matrix products: the weights' precision when the card has it, else
    16-bit (weight-only quantization dequantizes to bf16/fp16 before multiplying)."""
    bf16 = frame["dense_bf16_tflops"].astype(float).to_numpy()
    column = _PEAK_COLUMN.get(precision)
    if column is None or column not in frame.columns:
        return bf16, np.full(len(frame), "bf16", dtype=object)
    low = frame[column].astype(float).to_numpy()
    has = np.isfinite(low)
    return np.where(has, low, bf16), np.where(has, precision, "bf16").astype(object)


def memory_columns(frame: pd.DataFrame, w: InferenceWorkload) -> pd.DataFrame:
    """Weights, KV bytes and the maximum batch per option (memory.py)."""
    shape, tp = w.attention, frame["tp"].to_numpy()
    kv_bytes = mem.PRECISION_BYTES[w.kv_precision]
    frame["kv_bytes_per_token"] = float(
        mem.kv_bytes_per_token(shape.layers, shape.kv_heads, shape.head_dim, kv_bytes)
    )
    frame["kv_bytes_per_token_per_card"] = mem.kv_bytes_per_token_per_card(
        shape.layers, shape.kv_heads, shape.head_dim, kv_bytes, tp
    )
    frame["weight_gb_per_card"] = (
        mem.weight_bytes_per_card(w.params, mem.PRECISION_BYTES[w.weight_precision], tp)
        / mem.BYTES_PER_GB
    )
    activations = mem.prefill_activation_bytes(w.setting("prefill_chunk_tokens"), shape.hidden, tp)
    frame["max_batch"] = mem.max_batch(
        frame["memory_gb"].astype(float).to_numpy(),
        w.setting("usable_memory_share"),
        frame["weight_gb_per_card"].to_numpy() * mem.BYTES_PER_GB,
        activations,
        frame["kv_bytes_per_token_per_card"].to_numpy(),
        w.context,
    )
    return frame


def timing_columns(frame: pd.DataFrame, w: InferenceWorkload) -> pd.DataFrame:
    """Batch within the bounds, TTFT, TPOT, one replica's tokens/s and MBU (roofline.py)."""
    tp = frame["tp"].to_numpy()
    peak, frame["compute_precision"] = compute_peak(frame, w.weight_precision)
    bandwidth = frame["memory_bandwidth_tbs"].astype(float).to_numpy()
    bw_eff, flop_eff = w.setting("bandwidth_efficiency"), w.setting("compute_efficiency")
    prefill_s = roofline.prefill_seconds(w.params, w.input_tokens, tp, peak, flop_eff)
    # A sequence's KV read per step averages its length over the decode: input + output / 2.
    kv_read = frame["kv_bytes_per_token_per_card"].to_numpy() * (
        w.input_tokens + w.output_tokens / 2.0
    )
    weights = frame["weight_gb_per_card"].to_numpy() * mem.BYTES_PER_GB
    fixed, per_seq, compute = roofline.step_coefficients(
        weights, kv_read, w.params, tp, bandwidth, bw_eff, peak, flop_eff
    )
    amortized_prefill = prefill_s / w.output_tokens
    tpot_bound = np.inf if w.tpot_ms is None else w.tpot_ms / 1e3
    # A p95 TTFT bound also bounds the typical TTFT (the queueing wait comes on top).
    ttft_ms = min((v for v in (w.ttft_ms, w.ttft_p95_ms) if v is not None), default=None)
    ttft_bound = np.inf if ttft_ms is None else ttft_ms / 1e3 - prefill_s
    by_tpot = roofline.batch_within(tpot_bound, fixed, per_seq, compute, amortized_prefill)
    by_ttft = roofline.batch_within(ttft_bound, fixed, per_seq, compute, 0.0)
    allowed = np.minimum(np.minimum(by_tpot, by_ttft), frame["max_batch"].to_numpy())
    if w.batch is not None:  # a fixed number of concurrent sequences per replica, at most
        allowed = np.minimum(allowed, w.batch)
    batch = np.floor(np.nan_to_num(allowed, nan=0.0) + 1e-9).clip(min=0)
    if w.tpot_p95_ms is not None:
        batch = queueing.largest_batch_within_tpot_p95(
            w.tpot_p95_ms / 1e3, batch, (fixed, per_seq, compute), prefill_s, w.output_tokens
        )
    step = roofline.step_seconds(batch, fixed, per_seq, compute)
    tpot = roofline.tpot_seconds(batch, step, prefill_s, w.output_tokens)
    frame["tpot_p95_ms"] = queueing.tpot_p95_seconds(batch, step, prefill_s, w.output_tokens) * 1e3
    frame["batch"] = batch.astype(np.int64)
    frame["prefill_ms"] = prefill_s * 1e3
    frame["step_fixed_s"], frame["step_memory_s"], frame["step_compute_s"] = fixed, per_seq, compute
    frame["decode_step_ms"] = step * 1e3
    frame["ttft_ms"] = (prefill_s + step) * 1e3
    frame["tpot_ms"] = tpot * 1e3
    memory_bound = fixed + per_seq * batch >= compute * batch
    frame["decode_bound"] = np.where(memory_bound, "memory", "compute")
    with np.errstate(divide="ignore", invalid="ignore"):
        frame["replica_tokens_per_s"] = np.where(batch >= 1, batch / tpot, 0.0)
        frame["mbu"] = np.where(
            batch >= 1, (weights + kv_read * batch) / tpot / (bandwidth * roofline.TERA), np.nan
        )
    return frame


def scale_columns(frame: pd.DataFrame, w: InferenceWorkload) -> pd.DataFrame:
    """Replicas and cards for the target, or what the given cards serve."""
    tp = frame["tp"].to_numpy()
    per_replica = frame["replica_tokens_per_s"].to_numpy()
    target = w.target_tokens_per_s
    with np.errstate(divide="ignore", invalid="ignore"):
        if target is not None:
            replicas = np.where(per_replica > 0, np.ceil(target / per_replica - 1e-9), 0)
            cards = replicas * tp
            served = np.where(per_replica > 0, target, 0.0)
        else:
            assert w.cards is not None  # validated: no target means the cards are given
            replicas = np.floor_divide(w.cards, tp)
            cards = np.full(len(frame), float(w.cards))
            served = replicas * per_replica
    frame["replicas"] = replicas.astype(np.int64)
    frame["cards"] = cards.astype(np.int64)
    frame["tokens_per_s"] = served
    frame["capacity_tokens_per_s"] = replicas * per_replica
    frame["requests_per_s"] = served / w.output_tokens
    return frame


def tail_columns(frame: pd.DataFrame, w: InferenceWorkload) -> pd.DataFrame:
    """p95 TTFT from the queueing at the served load (queueing.py); with a p95 TTFT bound,
    more replicas for a target, or less load on given cards, until it is met."""
    batch = frame["batch"].to_numpy().astype(float)
    service_s = frame["tpot_ms"].to_numpy() / 1e3 * w.output_tokens  # a slot per request
    ttft_s = frame["ttft_ms"].to_numpy() / 1e3

    def ttft_p95_s(replicas: np.ndarray, requests_per_s: np.ndarray) -> np.ndarray:
        return ttft_s + queueing.wait_p95_seconds(replicas * batch, service_s, requests_per_s)

    replicas = frame["replicas"].to_numpy().astype(float)
    served_rps = frame["requests_per_s"].to_numpy()
    unmet = np.zeros(len(frame), dtype=bool)
    bound_s = np.inf if w.ttft_p95_ms is None else w.ttft_p95_ms / 1e3
    if w.ttft_p95_ms is not None and w.target_tokens_per_s is not None:
        cap = np.floor(limit("cards").high / frame["tp"].to_numpy())
        needed = queueing.smallest_integer(
            lambda r: ttft_p95_s(r, served_rps) <= bound_s, replicas, cap
        )
        unmet = (needed > cap) & (replicas > 0)
        replicas = np.where((replicas > 0) & ~unmet, needed, replicas)
        frame["replicas"] = replicas.astype(np.int64)
        frame["cards"] = frame["replicas"] * frame["tp"]
        frame["capacity_tokens_per_s"] = replicas * frame["replica_tokens_per_s"]
    elif w.ttft_p95_ms is not None:  # the largest load, in 0.1 % of capacity, within the bound
        capacity_rps = replicas * frame["replica_tokens_per_s"].to_numpy() / w.output_tokens
        share = queueing.largest_integer(
            lambda n: ttft_p95_s(replicas, capacity_rps * n / 1e3) <= bound_s,
            np.zeros(len(frame)),
            np.full(len(frame), 1e3),
        )
        served_rps = capacity_rps * share / 1e3
        unmet = (share < 1) & (capacity_rps > 0)
        frame["requests_per_s"] = served_rps
        frame["tokens_per_s"] = served_rps * w.output_tokens
    frame["p95_unmet"] = unmet
    frame["ttft_p95_ms"] = ttft_p95_s(replicas, served_rps) * 1e3
    with np.errstate(divide="ignore", invalid="ignore"):
        capacity = frame["capacity_tokens_per_s"].to_numpy()
        frame["utilization"] = np.where(capacity > 0, frame["tokens_per_s"] / capacity, np.nan)
    return frame


def money_columns(frame: pd.DataFrame, w: InferenceWorkload) -> pd.DataFrame:
    served = frame["tokens_per_s"].to_numpy().astype(float)
    served = np.where(served > 0, served, np.nan)
    power = frame["tdp_w"].astype(float).to_numpy() * w.setting("power_share_of_tdp")
    price, basis = energy.card_hour_price(
        frame, w.price_per_card_hour, w.setting("amortization_years")
    )
    kwh = energy.energy_kwh_per_million(frame["cards"], power, w.setting("pue"), served)
    frame["card_hour_price"] = price
    frame["price_basis"] = basis
    frame["energy_kwh_per_million_tokens"] = kwh
    frame["cost_per_million_tokens"] = energy.cost_per_million(
        frame["cards"], price, served, kwh, w.tariff_per_kwh
    )
    return frame


def reasons(frame: pd.DataFrame, w: InferenceWorkload) -> pd.Series:
    """Why an option serves nothing ('' when it does)."""
    usable = frame["memory_gb"].astype(float) * w.setting("usable_memory_share")
    no_data = frame[["memory_gb", "memory_bandwidth_tbs", "dense_bf16_tflops"]].isna().any(axis=1)
    too_big = frame["weight_gb_per_card"] >= usable
    no_room = frame["max_batch"] < 1
    return pd.Series(
        np.select(
            [no_data, too_big, no_room, frame["batch"] < 1, frame["p95_unmet"]],
            [
                "the catalog lacks memory, bandwidth or peak figures for this card",
                "the weights alone exceed the usable memory at this tensor-parallel degree",
                "no sequence of the context length fits beside the weights",
                "no batch meets the TTFT/TPOT bounds",
                "the p95 TTFT bound is not met: requests wait too long for a free slot",
            ],
            "",
        ),
        index=frame.index,
    )


def evaluate_inference(cards: pd.DataFrame, w: InferenceWorkload) -> pd.DataFrame:
    """All (card model × tp) options with memory, timing, scale, energy and cost columns."""
    frame = expand_options(cards, w)
    for step in (memory_columns, timing_columns, scale_columns, tail_columns, money_columns):
        frame = step(frame, w)
    frame["reason"] = reasons(frame, w)
    frame["feasible"] = frame["reason"] == ""
    frame = frame.drop(columns="p95_unmet")
    return frame


def choose(frame: pd.DataFrame, by_cost: bool = True) -> pd.DataFrame:
    """The best degree per card model (cheapest, then fewest cards, then fastest), with
    `pareto` (cost per million tokens vs TPOT) and `cheapest` flags."""
    keys = ["cost_per_million_tokens", "cards", "tpot_ms"] if by_cost else ["cards", "tpot_ms"]
    ordered = frame.assign(_infeasible=~frame["feasible"]).sort_values(
        ["_infeasible", *keys], kind="stable", na_position="last"
    )
    best = ordered.drop_duplicates("accelerator").drop(columns="_infeasible")
    feasible = best["feasible"].to_numpy()
    cost = np.where(feasible, best["cost_per_million_tokens"], np.nan)
    best["pareto"] = pareto_front(best["tpot_ms"].to_numpy(), cost)
    best["cheapest"] = False
    if feasible.any() and np.isfinite(cost).any():
        cheapest = best.columns.get_loc("cheapest")
        assert isinstance(cheapest, int)  # column names are unique
        best.iloc[0, cheapest] = True
    return best.reset_index(drop=True)

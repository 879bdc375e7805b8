"""Cards for a serving target: one row per (card model × tensor-parallel degree), vectorised.

For each option: weights and KV cache per card, the largest batch that fits and meets the
TTFT/TPOT bounds, the throughput of one replica at that batch, then replicas (and cards) for
the target, or the throughput the given cards deliver; energy and cost per million tokens.
`choose` keeps the best degree per card model and marks the cheapest and the Pareto front
(cost per million tokens vs time per output token). The input: workload.py; the step terms
(weights, KV cache, compute, collectives, a mixture of experts' experts): step_terms.py;
formulas: memory.py, roofline.py, energy.py; the serving engine's efficiencies: engines.py;
the band around TTFT, TPOT and tokens/s: band.py; a mixture-of-experts model (``moe``):
moe_serving.py.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from engine.capacity import pareto_front
from engine.inference import band, energy, engines, moe_serving, queueing, roofline
from engine.inference import memory as mem
from engine.inference.precision import FP4_COLUMN, KV_BYTES, WEIGHT_FORMATS
from engine.inference.step_terms import (
    hidden_state_bytes,
    option_column,
    step_terms,
    streamed_params,
)
from engine.inference.workload import InferenceWorkload as InferenceWorkload  # re-exported
from engine.limits import EngineInputError, check_grid, limit
from engine.moe import kv_values_per_token

# --------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------

CARD_COLUMNS = ("accelerator", "memory_gb", "memory_bandwidth_tbs", "dense_bf16_tflops", "tdp_w")
OPTIONAL_CARD_COLUMNS = (
    "dense_fp8_tflops",
    "dense_int8_tops",
    FP4_COLUMN,
    "intra_node_interconnect_gbs",
    "rental_price_per_card_hour",
    "list_price",
    "currency",
)
# Option rows one evaluation may hold (~60 columns of 8 bytes: 200,000 rows ≈ 96 MB).
MAX_OPTION_ROWS = 200_000


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


def memory_columns(frame: pd.DataFrame, w: InferenceWorkload) -> pd.DataFrame:
    """Weights, KV bytes and the maximum batch per option (memory.py)."""
    shape, tp = w.attention, frame["tp"].to_numpy()
    kv_bytes = KV_BYTES[w.kv_precision]
    frame["engine"] = w.engine
    if w.moe is not None:
        frame["kv_bytes_per_token"] = kv_values_per_token(w.moe) * kv_bytes
        per_card = [
            moe_serving.kv_values_per_token_per_card(w.moe, t, w.attention_data_parallel)
            for t in tp
        ]
        frame["kv_bytes_per_token_per_card"] = np.asarray(per_card, np.float64) * kv_bytes
    else:
        frame["kv_bytes_per_token"] = float(
            mem.kv_bytes_per_token(shape.layers, shape.kv_heads, shape.head_dim, kv_bytes)
        )
        frame["kv_bytes_per_token_per_card"] = mem.kv_bytes_per_token_per_card(
            shape.layers, shape.kv_heads, shape.head_dim, kv_bytes, tp
        )
    weight_bytes = WEIGHT_FORMATS[w.weight_precision].bytes_per_value
    if w.moe is not None:  # every expert's weights are held, not only the active ones
        per_card = [
            moe_serving.weight_params_per_card(w.moe, t, w.attention_data_parallel) for t in tp
        ]
        weight_params = np.asarray(per_card, np.float64) * weight_bytes
        frame["weight_gb_per_card"] = weight_params / mem.BYTES_PER_GB
    else:
        frame["weight_gb_per_card"] = (
            mem.weight_bytes_per_card(w.params, weight_bytes, tp) / mem.BYTES_PER_GB
        )
    activations = mem.prefill_activation_bytes(w.setting("prefill_chunk_tokens"), shape.hidden, tp)
    frame["max_batch"] = mem.max_batch(
        frame["memory_gb"].astype(float).to_numpy(),
        w.setting("usable_memory_share"),
        frame["weight_gb_per_card"].to_numpy() * mem.BYTES_PER_GB,
        activations,
        frame["kv_bytes_per_token_per_card"].to_numpy(),
        w.context,
        reserve_bytes=engines.SHARED.runtime_reserve_gib * mem.CARD_BYTES_PER_GB,
        share_of_free=w.preset.kv_memory == "share_of_free",
    )
    return frame


# StepTerms field -> the option column that stores it (the curve rebuilds the terms from them).
STEP_COLUMNS = {
    "fixed_s": "step_fixed_s",
    "weights_s": "step_memory_s",
    "kv_s_per_sequence": "step_kv_s_per_sequence",
    "kv_floor_s": "step_kv_floor_s",
    "decode_flop_s": "step_decode_flop_s",
    "prefill_flop_s": "step_prefill_flop_s",
    "allreduce_s_per_token": "step_allreduce_s_per_token",
    "gemm_efficiency": "step_gemm_efficiency",
    "prompt_per_output": "step_prompt_per_output",
    "chunked": "step_chunked",
    "expert_read_s": "step_expert_read_s",
    "routed_decode_flop_s": "step_routed_decode_flop_s",
    "routed_prefill_flop_s": "step_routed_prefill_flop_s",
    "experts": "step_experts",
    "experts_per_token": "step_experts_per_token",
}


def store_terms(frame: pd.DataFrame, terms: roofline.StepTerms) -> None:
    for name, column in STEP_COLUMNS.items():
        frame[column] = getattr(terms, name)
    # Compute time of one decoded token at the best efficiency (the roofline's slope).
    frame["step_compute_s"] = (
        terms.decode_flop_s + np.asarray(terms.routed_decode_flop_s)
    ) / terms.gemm_efficiency


def terms_from_columns(options: pd.DataFrame) -> roofline.StepTerms:
    """The step terms stored in option rows (as returned by evaluate_inference)."""
    values = {
        name: options[column].to_numpy(dtype=bool if name == "chunked" else float)
        for name, column in STEP_COLUMNS.items()
    }
    return roofline.StepTerms(
        **values,
        half_tokens=engines.SHARED.gemm_half_tokens,
        sharpness=engines.SHARED.roofline_sharpness,
    )


def batch_cap(frame: pd.DataFrame, w: InferenceWorkload) -> np.ndarray:
    """Sequences a step may hold: memory, the engine's cap, its token budget per step (chunked
    engines fold B · prompt / output prompt tokens into each step) and the entered cap."""
    preset = w.preset
    # Attention data parallel: each card schedules its own sequences, the caps are per card.
    ranks = frame["tp"].to_numpy().astype(float) if w.attention_data_parallel else 1.0
    cap = np.minimum(frame["max_batch"].to_numpy().astype(float), preset.max_batch * ranks)
    if preset.chunked_prefill:
        per_sequence = 1.0 + w.input_tokens / w.output_tokens
        # At least one: a prompt longer than the budget is split over several steps.
        budget = max(np.floor(w.setting("prefill_chunk_tokens") / per_sequence), 1.0)
        cap = np.minimum(cap, budget * ranks)
    if w.batch is not None:  # a fixed number of concurrent sequences per replica, at most
        cap = np.minimum(cap, float(w.batch))
    return np.where(lacks_fp4(frame, w), 0.0, np.maximum(cap, 0.0))


def timing_columns(frame: pd.DataFrame, w: InferenceWorkload) -> pd.DataFrame:
    """Batch within the bounds, TTFT, TPOT, one replica's tokens/s and MBU (roofline.py)."""
    terms = step_terms(frame, w)
    prefill_s = roofline.prefill_seconds(terms, w.input_tokens)
    cap = batch_cap(frame, w)
    tpot_bound = np.inf if w.tpot_ms is None else w.tpot_ms / 1e3
    # A p95 TTFT bound also bounds the typical TTFT (the queueing wait comes on top).
    ttft_ms = min((v for v in (w.ttft_ms, w.ttft_p95_ms) if v is not None), default=None)
    ttft_bound = np.inf if ttft_ms is None else ttft_ms / 1e3 - prefill_s
    batch = roofline.largest_batch_within(tpot_bound, cap, terms, prefill_s, w.output_tokens)
    by_ttft = roofline.largest_batch_within(
        ttft_bound, cap, terms, prefill_s, w.output_tokens, first_step_only=True
    )
    batch = np.minimum(batch, by_ttft)
    if w.tpot_p95_ms is not None:
        bound = w.tpot_p95_ms / 1e3

        def fits(b: np.ndarray) -> np.ndarray:
            starts = queueing.poisson_p95(b)
            p95: np.ndarray = roofline.tpot_seconds(terms, b, prefill_s, w.output_tokens, starts)
            return p95 <= bound

        batch = queueing.largest_integer(fits, np.zeros_like(batch), batch)
    step = roofline.step_seconds(terms, batch)
    tpot = roofline.tpot_seconds(terms, batch, prefill_s, w.output_tokens)
    tpot_p95 = roofline.tpot_seconds(
        terms, batch, prefill_s, w.output_tokens, queueing.poisson_p95(batch)
    )
    store_terms(frame, terms)
    frame["tpot_p95_ms"] = tpot_p95 * 1e3
    frame["batch"] = batch.astype(np.int64)
    frame["prefill_ms"] = prefill_s * 1e3
    frame["decode_step_ms"] = step * 1e3
    frame["ttft_ms"] = (prefill_s + step) * 1e3
    frame["tpot_ms"] = tpot * 1e3
    prompt = np.where(terms.chunked, batch * terms.prompt_per_output, 0.0)
    tokens = batch + prompt
    memory = roofline.weight_read_seconds(terms, tokens) + np.maximum(
        batch * terms.kv_s_per_sequence, terms.kv_floor_s
    )
    compute = roofline.compute_seconds(terms, batch, prompt)
    frame["decode_bound"] = np.where(memory >= compute, "memory", "compute")
    streamed, routed = streamed_params(w)
    read = streamed + routed * roofline.experts_touched(terms, tokens)
    weight_bytes = read * WEIGHT_FORMATS[w.weight_precision].bytes_per_value
    weights = weight_bytes / frame["tp"].to_numpy()
    if w.attention_data_parallel:  # the common weights are read whole on every card
        weights = weights + streamed * WEIGHT_FORMATS[w.weight_precision].bytes_per_value * (
            1.0 - 1.0 / frame["tp"].to_numpy()
        )
    # A decoded sequence's KV read and, around an MoE's experts, its hidden state on every
    # card (0 for a dense model): the bytes the step time charges (kv_s_per_sequence).
    hidden_state = hidden_state_bytes(w)
    frame["hidden_state_bytes_per_sequence"] = hidden_state
    per_sequence = (
        frame["kv_bytes_per_token_per_card"].to_numpy() * (w.input_tokens + w.output_tokens / 2.0)
        + hidden_state
    )
    bandwidth = frame["memory_bandwidth_tbs"].astype(float).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        frame["replica_tokens_per_s"] = np.where(batch >= 1, batch / tpot, 0.0)
        moved = weights + per_sequence * batch
        frame["mbu"] = np.where(batch >= 1, moved / tpot / (bandwidth * roofline.TERA), np.nan)
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
    if "currency" not in frame.columns:  # money without a currency is no figure
        frame["currency"] = None
    return frame


def lacks_fp4(frame: pd.DataFrame, w: InferenceWorkload) -> np.ndarray:
    """Options whose card has no FP4 tensor cores for an FP4 format (NVFP4, MXFP4)."""
    if not WEIGHT_FORMATS[w.weight_precision].needs_fp4_cores:
        return np.zeros(len(frame), dtype=bool)
    lacks: np.ndarray = ~np.isfinite(option_column(frame, FP4_COLUMN))
    return lacks


def reasons(frame: pd.DataFrame, w: InferenceWorkload) -> pd.Series:
    """Why an option serves nothing ('' when it does)."""
    room = mem.kv_budget_bytes(
        frame["memory_gb"].astype(float).to_numpy(),
        w.setting("usable_memory_share"),
        frame["weight_gb_per_card"].to_numpy() * mem.BYTES_PER_GB,
        0.0,
        engines.SHARED.runtime_reserve_gib * mem.CARD_BYTES_PER_GB,
        w.preset.kv_memory == "share_of_free",
    )
    no_data = frame[["memory_gb", "memory_bandwidth_tbs", "dense_bf16_tflops"]].isna().any(axis=1)
    no_room = frame["max_batch"] < 1
    return pd.Series(
        np.select(
            [
                no_data,
                lacks_fp4(frame, w),
                room <= 0,
                no_room,
                frame["batch"] < 1,
                frame["p95_unmet"],
            ],
            [
                "the catalog lacks memory, bandwidth or peak figures for this card",
                f"{w.weight_precision} needs FP4 tensor cores (Blackwell), which this card lacks",
                "the weights alone exceed the usable memory at this tensor-parallel degree",
                "no sequence of the context length fits beside the weights",
                "no batch meets the TTFT/TPOT bounds",
                "the p95 TTFT bound is not met: requests wait too long for a free slot",
            ],
            "",
        ),
        index=frame.index,
    )


def band_columns(frame: pd.DataFrame, w: InferenceWorkload) -> pd.DataFrame:
    """The calibrated band around tokens/s, TTFT and TPOT (band.py): the published figure
    within modeled ÷ factor .. modeled × factor, the factor a split-conformal quantile of the
    calibration rows' errors widened for the constants fitted on them."""
    for column, group in band.BAND_COLUMNS.items():
        low, high = band.band(frame[column].to_numpy().astype(float), group, w.engine)
        frame[f"{column}_low"], frame[f"{column}_high"] = low, high
    return frame


def evaluate_inference(cards: pd.DataFrame, w: InferenceWorkload) -> pd.DataFrame:
    """All (card model × tp) options with memory, timing, scale, energy and cost columns."""
    frame = expand_options(cards, w)
    steps = (memory_columns, timing_columns, scale_columns, tail_columns, money_columns)
    for step in (*steps, band_columns):
        frame = step(frame, w)
    frame["reason"] = reasons(frame, w)
    frame["feasible"] = frame["reason"] == ""
    frame = frame.drop(columns="p95_unmet")
    return frame


def choose(frame: pd.DataFrame, by_cost: bool = True) -> pd.DataFrame:
    """The best degree per card model (cheapest, then fastest, then fewest cards), with
    `pareto` (cost per million tokens vs TPOT) and `cheapest` flags. Speed breaks a tie in
    cost before the card count, so the cheapest is never dominated on that front (3 cards at
    1.90 and 10 at 0.57 an hour cost the same)."""
    keys = ["cost_per_million_tokens", "tpot_ms", "cards"] if by_cost else ["cards", "tpot_ms"]
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

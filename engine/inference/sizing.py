"""Cards for a serving target: one row per (card model × tensor-parallel degree), vectorised.

For each option: weights and KV cache per card, the largest batch that fits and meets the
TTFT/TPOT bounds, the throughput of one replica at that batch, then replicas (and cards) for
the target, or the throughput the given cards deliver; energy and cost per million tokens.
`choose` keeps the best degree per card model and marks the cheapest and the Pareto front
(cost per million tokens vs time per output token). Formulas: memory.py, roofline.py, energy.py;
the serving engine's efficiencies: engines.py; the band around TTFT, TPOT and tokens/s: band.py;
a mixture-of-experts model (``moe``): moe_serving.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from engine.capacity import pareto_front
from engine.inference import band, energy, engines, moe_serving, queueing, roofline
from engine.inference import memory as mem
from engine.inference.defaults import INFERENCE_DEFAULTS, serving_default
from engine.inference.engines import DEFAULT_ENGINE, ENGINES, EnginePreset
from engine.inference.memory import AttentionShape
from engine.inference.precision import FP4_COLUMN, KV_BYTES, WEIGHT_FORMATS
from engine.limits import EngineInputError, check_grid, limit, range_error
from engine.moe import MoeShape, kv_values_per_token

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
# Settings whose default is the serving engine's (engines.py), not the defaults table's.
ENGINE_SETTINGS = ("bandwidth_efficiency", "compute_efficiency", "usable_memory_share")
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
    """What to serve and how fast; a target (requests_per_s or tokens_per_s) or cards.

    A mixture of experts gives `moe` (its shape; `params` is then its total) instead of
    `shape`; `expert_parallel` spreads its experts whole over the replica's cards rather
    than splitting every expert by tensor parallelism; `attention_data_parallel` (with expert
    parallelism) gives each card whole attention for its share of the sequences, the MoE
    layers then trading tokens by all-to-all instead of all-reducing (moe_serving.py)."""

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
    engine: str = DEFAULT_ENGINE
    moe: MoeShape | None = None
    expert_parallel: bool = False
    attention_data_parallel: bool = False

    def __post_init__(self) -> None:
        if errors := workload_errors(self):
            raise EngineInputError(errors)

    @property
    def attention(self) -> AttentionShape:
        if self.moe is not None:
            return moe_serving.attention_shape(self.moe)
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

    @property
    def preset(self) -> EnginePreset:
        return ENGINES[self.engine]

    def setting(self, key: str) -> float:
        """An entered value, else the engine's (efficiencies, memory share), else the table's."""
        if key in self.overrides:
            return float(self.overrides[key])
        if key in ENGINE_SETTINGS:
            return float(getattr(self.preset, key))
        return serving_default(key)

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
    if w.moe is not None:
        if w.shape is not None:
            errors["shape"] = "Give either shape (a dense model) or moe, not both."
        errors.update(moe_serving.moe_errors(w.moe, w.params))
        if w.attention_data_parallel and not w.expert_parallel:
            errors["attention_data_parallel"] = "Only with expert_parallel."
    elif w.expert_parallel or w.attention_data_parallel:
        key = "expert_parallel" if w.expert_parallel else "attention_data_parallel"
        errors[key] = "Only for a mixture-of-experts model (moe)."
    if w.weight_precision not in WEIGHT_FORMATS:
        errors["weight_precision"] = f"One of {', '.join(WEIGHT_FORMATS)}."
    if w.kv_precision not in KV_BYTES:
        errors["kv_precision"] = f"One of {', '.join(KV_BYTES)}."
    if w.engine not in ENGINES:
        errors["engine"] = f"One of {', '.join(ENGINES)}."
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
    FP4_COLUMN,
    "intra_node_interconnect_gbs",
    "rental_price_per_card_hour",
    "list_price",
    "currency",
)
# Option rows one evaluation may hold (~60 columns of 8 bytes: 200,000 rows ≈ 96 MB).
MAX_OPTION_ROWS = 200_000
# NVLink of an A100 (600 GB/s both ways) where the card data has no interconnect figure:
# the slowest NVLink generation a tensor-parallel replica is built on, so never optimistic.
DEFAULT_LINK_GBS = 600.0


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


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame.columns:
        return np.full(len(frame), np.nan)
    values: np.ndarray = frame[name].astype(float).to_numpy()
    return values


def compute_peak(frame: pd.DataFrame, precision: str) -> tuple[np.ndarray, np.ndarray]:
    """Peak used by the matrix products: the weights' format where the card has its tensor
    cores, else 16-bit (weight-only formats dequantise to bf16 before multiplying)."""
    fmt = WEIGHT_FORMATS[precision]
    bf16 = frame["dense_bf16_tflops"].astype(float).to_numpy()
    if fmt.path == "weight_only" or not fmt.peak_column:
        return bf16, np.full(len(frame), "bf16", dtype=object)
    low = _column(frame, fmt.peak_column)
    has = np.isfinite(low)
    return np.where(has, low, bf16), np.where(has, precision, "bf16").astype(object)


def weight_only(frame: pd.DataFrame, precision: str) -> np.ndarray:
    """Whether the weights are dequantised in the kernel on each option's card."""
    fmt = WEIGHT_FORMATS[precision]
    if fmt.path == "weight_only":
        return np.ones(len(frame), dtype=bool)
    if not fmt.peak_column or fmt.needs_fp4_cores:
        return np.zeros(len(frame), dtype=bool)
    lacks: np.ndarray = ~np.isfinite(_column(frame, fmt.peak_column))
    return lacks


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


def step_terms(frame: pd.DataFrame, w: InferenceWorkload) -> roofline.StepTerms:
    """The step-time model's coefficients of every option (roofline.py, engines.py)."""
    shape, preset, tp = w.attention, w.preset, frame["tp"].to_numpy().astype(float)
    peak, precision = compute_peak(frame, w.weight_precision)
    frame["compute_precision"] = precision
    # FP8/FP4 products keep only part of their 2x/4x peak.
    narrow_share = engines.SHARED.narrow_format_compute
    narrow = np.select(
        [precision == "fp8", np.isin(precision, ("nvfp4", "mxfp4"))],
        [narrow_share["fp8"], narrow_share["fp4"]],
        1.0,
    )
    dequant = engines.SHARED.dequant_bandwidth.get(WEIGHT_FORMATS[w.weight_precision].dequant, 1.0)
    stream = np.where(weight_only(frame, w.weight_precision), dequant, 1.0)
    bandwidth = (
        frame["memory_bandwidth_tbs"].astype(float).to_numpy()
        * roofline.TERA
        * w.setting("bandwidth_efficiency")
    )
    streamed, routed = streamed_params(w)
    weight_bytes = WEIGHT_FORMATS[w.weight_precision].bytes_per_value
    # Attention data parallel: every card reads the common weights whole.
    weights = streamed * weight_bytes / np.where(w.attention_data_parallel, 1.0, tp)
    # A sequence's KV read per step averages its length over the decode: input + output / 2.
    context = w.input_tokens + w.output_tokens / 2.0
    kv_read = frame["kv_bytes_per_token_per_card"].to_numpy() * context
    split = engines.SHARED.split_tokens if preset.flash_decoding else np.inf
    # MLA's latent is one unit per card (no KV heads to split the attention kernel over).
    kv_heads = 1.0 if w.moe is not None and w.moe.attention == "mla" else shape.kv_heads
    kv_heads_per_card = np.maximum(kv_heads / (1.0 if w.attention_data_parallel else tp), 1.0)
    flops = tp * peak * roofline.TERA
    attention, prefill_attention = attention_widths(w)
    link = _column(frame, "intra_node_interconnect_gbs")
    link = np.where(np.isfinite(link) & (link > 0), link, DEFAULT_LINK_GBS)
    ar_latency, ar_per_token = collective_terms(w, tp, link)
    # An expert's products are as narrow as its FFN on one card (split by tp unless expert
    # parallel): the width law of the dense products, applied to that width.
    routed_flops = 2.0 * routed * experts_per_token(w) / expert_width_factor(w, tp)
    overhead = (shape.layers * preset.layer_overhead_us + preset.step_overhead_us) * roofline.MICRO
    n = len(frame)
    return roofline.StepTerms(
        fixed_s=overhead + ar_latency,
        weights_s=weights / (bandwidth * stream),
        expert_read_s=routed * weight_bytes / tp / (bandwidth * stream),
        routed_decode_flop_s=routed_flops / flops,
        routed_prefill_flop_s=routed_flops / flops,
        experts=np.full(n, float(w.moe.experts if w.moe is not None else 1)),
        experts_per_token=np.full(n, experts_per_token(w)),
        kv_s_per_sequence=kv_read / (bandwidth * preset.kv_read_efficiency),
        kv_floor_s=roofline.attention_floor_seconds(
            kv_read, kv_heads_per_card, context, split, engines.SHARED.attention_unit_gbs
        ),
        decode_flop_s=(2.0 * streamed + 4.0 * attention * context) / flops,
        prefill_flop_s=(2.0 * streamed + 2.0 * prefill_attention * w.input_tokens)
        * prompt_ranks(w, tp)
        / flops,
        allreduce_s_per_token=ar_per_token,
        gemm_efficiency=w.setting("compute_efficiency")
        * float(roofline.width_factor(shape.hidden, engines.SHARED.gemm_half_hidden))
        * narrow,
        half_tokens=engines.SHARED.gemm_half_tokens,
        sharpness=engines.SHARED.roofline_sharpness,
        prompt_per_output=np.full(n, w.input_tokens / w.output_tokens),
        chunked=np.full(n, preset.chunked_prefill),
    )


def streamed_params(w: InferenceWorkload) -> tuple[float, float]:
    """(weights every step reads, one routed expert of every MoE layer): a dense model's
    matrix weights and 0; an MoE's common weights and its experts' (moe_serving.py)."""
    if w.moe is None:
        return w.attention.streamed_params(w.params), 0.0
    return moe_serving.common_params_read(w.moe), moe_serving.routed_params_per_expert(w.moe)


def experts_per_token(w: InferenceWorkload) -> float:
    return float(w.moe.experts_per_token) if w.moe is not None else 1.0


def prompt_ranks(w: InferenceWorkload, tp: np.ndarray) -> np.ndarray:
    """How many cards' compute a prompt's common products (attention, dense and shared
    FFNs) take: 1 on tensor-parallel attention; tp under attention data parallel, where one
    card prefills the prompt and the others wait for it at the next all-to-all."""
    ranks: np.ndarray = np.where(w.attention_data_parallel, tp.astype(float), 1.0)
    return ranks


def expert_width_factor(w: InferenceWorkload, tp: np.ndarray) -> np.ndarray:
    """Share of the peak an expert's products reach for their width on one card, relative
    to the model width's already in the GEMM efficiency: w_e/(w_e + h½) ÷ h/(h + h½), at most
    1 (an expert narrower than the model on a card loses; a wider one gains nothing, as the
    dense products' efficiency is set by the model width alone)."""
    if w.moe is None:
        return np.ones(len(tp))
    half = engines.SHARED.gemm_half_hidden
    width = w.moe.expert_ffn / (1.0 if w.expert_parallel else tp.astype(float))
    factor: np.ndarray = np.minimum(
        roofline.width_factor(width, half) / roofline.width_factor(w.moe.hidden_size, half), 1.0
    )
    return factor


def attention_widths(w: InferenceWorkload) -> tuple[float, float]:
    """Attention's FLOP width per layer × layers, decoding and prefilling (roofline.py)."""
    shape = w.attention
    if w.moe is None:
        width = float(shape.layers * shape.heads * shape.head_dim)
        return width, width
    layers = w.moe.layers
    return (
        layers * moe_serving.attention_width(w.moe, decode=True),
        layers * moe_serving.attention_width(w.moe, decode=False),
    )


def collective_terms(
    w: InferenceWorkload, tp: np.ndarray, link: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(latency s per step, s per token) of the replica's collectives: 2 all-reduces per
    layer (tensor-parallel attention, whether the experts are split or spread: the MoE output
    is all-reduced); attention data parallel, none, and 2 all-to-alls per MoE layer, each card
    sending its 1/tp of the tokens."""
    shape, preset, efficiency = w.attention, w.preset, engines.SHARED.allreduce_efficiency
    if w.moe is None or not w.attention_data_parallel:
        return roofline.allreduce_terms(
            shape.layers, tp, shape.hidden, link, preset.allreduce_latency_us, efficiency
        )
    latency, per_token = roofline.alltoall_terms(
        w.moe.moe_layer_count, tp, shape.hidden, w.moe.experts_per_token, link,
        preset.allreduce_latency_us, efficiency,
    )  # fmt: skip
    return latency, per_token / tp


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
    kv_read = frame["kv_bytes_per_token_per_card"].to_numpy() * (
        w.input_tokens + w.output_tokens / 2.0
    )
    bandwidth = frame["memory_bandwidth_tbs"].astype(float).to_numpy()
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
    if "currency" not in frame.columns:  # money without a currency is no figure
        frame["currency"] = None
    return frame


def lacks_fp4(frame: pd.DataFrame, w: InferenceWorkload) -> np.ndarray:
    """Options whose card has no FP4 tensor cores for an FP4 format (NVFP4, MXFP4)."""
    if not WEIGHT_FORMATS[w.weight_precision].needs_fp4_cores:
        return np.zeros(len(frame), dtype=bool)
    lacks: np.ndarray = ~np.isfinite(_column(frame, FP4_COLUMN))
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
    """The calibrated band around tokens/s, TTFT and TPOT (band.py): where the published
    figure fell around the model's on the calibration rows, 10th to 90th percentile."""
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

"""The step-time model's coefficients of every option (roofline.StepTerms): weights, KV
cache and compute per step, the collectives, and what a mixture of experts changes in them
(the common weights and the routed experts read, the experts' width, attention data parallel's
prompt ranks and all-to-alls). sizing.py evaluates the options with them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.inference import engines, moe_serving, roofline
from engine.inference.defaults import HIDDEN_STATE_TRAFFIC
from engine.inference.precision import WEIGHT_FORMATS
from engine.inference.workload import InferenceWorkload

# NVLink of an A100 (600 GB/s both ways) where the card data has no interconnect figure:
# the slowest NVLink generation a tensor-parallel replica is built on, so never optimistic.
DEFAULT_LINK_GBS = 600.0


def option_column(frame: pd.DataFrame, name: str) -> np.ndarray:
    """A card column of the options as floats; NaN throughout where the data lacks it."""
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
    low = option_column(frame, fmt.peak_column)
    has = np.isfinite(low)
    return np.where(has, low, bf16), np.where(has, precision, "bf16").astype(object)


def weight_only(frame: pd.DataFrame, precision: str) -> np.ndarray:
    """Whether the weights are dequantised in the kernel on each option's card."""
    fmt = WEIGHT_FORMATS[precision]
    if fmt.path == "weight_only":
        return np.ones(len(frame), dtype=bool)
    if not fmt.peak_column or fmt.needs_fp4_cores:
        return np.zeros(len(frame), dtype=bool)
    lacks: np.ndarray = ~np.isfinite(option_column(frame, fmt.peak_column))
    return lacks


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
    link = option_column(frame, "intra_node_interconnect_gbs")
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
        routed_prefill_flop_s=routed_flops * prompt_ranks(w, tp) / flops,
        experts=np.full(n, float(w.moe.experts if w.moe is not None else 1)),
        experts_per_token=np.full(n, experts_per_token(w)),
        kv_s_per_sequence=kv_read / (bandwidth * preset.kv_read_efficiency)
        + hidden_state_bytes(w) / bandwidth,
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
        dp_ranks=prompt_ranks(w, tp),
        prompt_length=np.full(n, float(w.input_tokens)),
    )


def hidden_state_bytes(w: InferenceWorkload) -> float:
    """Bytes a decoded token's hidden state costs every card in a step, around an MoE's
    routed experts (routing, permutation, the top-k partial outputs, un-permutation): the
    replica's parallelism does not split it (defaults.HIDDEN_STATE_TRAFFIC); 0 for a dense
    model, or a one-expert shape, whose constants were fitted without it."""
    if w.moe is None or not w.moe.is_moe:
        return 0.0
    return HIDDEN_STATE_TRAFFIC.value * w.moe.hidden_size * w.moe.moe_layer_count


def streamed_params(w: InferenceWorkload) -> tuple[float, float]:
    """(weights every step reads, one routed expert of every MoE layer): a dense model's
    matrix weights and 0; an MoE's common weights and its experts' (moe_serving.py)."""
    if w.moe is None:
        return w.attention.streamed_params(w.params), 0.0
    return moe_serving.common_params_read(w.moe), moe_serving.routed_params_per_expert(w.moe)


def experts_per_token(w: InferenceWorkload) -> float:
    return float(w.moe.experts_per_token) if w.moe is not None else 1.0


def prompt_ranks(w: InferenceWorkload, tp: np.ndarray) -> np.ndarray:
    """How many cards' worth of compute a prompt's tokens take: 1 on tensor-parallel
    attention; tp under attention data parallel, where one card prefills the prompt and the
    others wait for it at the next all-to-all (its common products: attention, dense and
    shared FFNs), and where the MoE pads every card's tokens to the busiest card's count
    before the experts, so the routed products run on tp × the prompt's tokens too
    (TensorRT-LLM, tensorrt_llm/_torch/models/modeling_deepseekv3.py,
    Deepseekv3MoE.compute_routed_output, and modeling_qwen3_moe.py, Qwen3MoE.forward: with
    attention DP and no MNNVL all-to-all, the hidden states are padded to
    max(all_rank_num_tokens) ahead of the gate and the fused MoE). The step waits for the
    busiest card's prompts, not all of them (roofline.busiest_rank_prompt_tokens)."""
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

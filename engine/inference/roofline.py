"""Step times of a serving replica: the roofline plus the terms real engines pay.

One decode step of B sequences, each attending to c tokens, with P prompt tokens folded into
the step (chunked prefill), on a replica of tp cards (docs/inference.md, section 2):

    step = fixed + all-reduce bandwidth · (B + P) + ((weights + KV)^p + compute^p)^(1/p)

- fixed: per-layer kernel launches and tails, a per-step cost (scheduling, sampling) and the
  latency of the 2 all-reduces per layer under tensor parallelism;
- weights: every weight read once per step, at the achieved bandwidth; weight-only formats
  (int8, int4) reach a smaller share of it, the dequantisation being done in the kernel;
- KV: each sequence's cache read once per step, at the achieved bandwidth, but never faster
  than the attention kernel's parallelism allows: a sequence is split into (KV heads per card
  × context chunks) work units, each pulling a bounded bandwidth, so 4 sequences of 64k tokens
  take longer than 256 of 1k (flash-decoding engines split the context; plain SDPA does not);
- compute: 2 FLOP per matrix parameter and token plus attention (4·layers·heads·head_dim·c per
  decoded token, 2·layers·heads·head_dim·prompt per prompt token, causal), at the dense peak
  of the compute format times an efficiency that falls for few tokens and narrow models:
  best × M/(M + M½) × h/(h + h½) (a GEMM of M rows fills the card only for large M);
- the p-norm joins memory and compute: the plain maximum (large p) is the textbook roofline;
  a finite p, fitted, charges the crossover where neither term alone sets the pace.

Mixture of experts (docs/inference.md, "Mixture of experts"): the routed experts' weights are
read as the step's tokens touch them, E·(1 − (1 − k/E)^tokens) experts per layer (engine.moe),
and their products run on tokens·k/E rows per expert, at that smaller GEMM's efficiency;
expert parallelism adds a dispatch and a combine all-to-all per MoE layer; attention data
parallel makes the step wait for the card with the most prompt tokens (E[max] of the cards'
Poisson counts of starting prompts, busiest_rank_prompt_tokens). A dense model has no routed
terms (all zero) and one rank, so its step is the one above.

TPOT at steady state: chunked engines fold B · prompt/output prompt tokens into every step;
the others pause the batch for each prefill, adding B · prefill / output tokens. TTFT: one
prefill (fixed + all-reduce + p-norm of the weight read and the prompt's compute) plus a step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from engine.inference.queueing import largest_integer

TERA = 1e12
GIGA = 1e9
MICRO = 1e-6
ALLREDUCES_PER_LAYER = 2  # after attention and after the MLP (Megatron-style TP)
ACTIVATION_BYTES = 2.0  # all-reduced activations are 16-bit


def _f(value: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(value, dtype=np.float64)


@dataclass(frozen=True)
class StepTerms:
    """Per-option coefficients of the step-time model; every field broadcasts over options."""

    fixed_s: NDArray[np.float64]
    weights_s: NDArray[np.float64]
    kv_s_per_sequence: NDArray[np.float64]
    kv_floor_s: NDArray[np.float64]
    decode_flop_s: NDArray[np.float64]  # at peak, per decoded token
    prefill_flop_s: NDArray[np.float64]  # at peak, per prompt token
    allreduce_s_per_token: NDArray[np.float64]
    gemm_efficiency: NDArray[np.float64]  # best × width factor
    half_tokens: float
    sharpness: float
    prompt_per_output: NDArray[np.float64]  # prompt tokens folded into each step per sequence
    chunked: NDArray[np.bool_]
    # Mixture of experts (zero for a dense model): seconds to read one routed expert of every
    # MoE layer, and the routed experts' FLOPs (at peak) per decoded and per prompt token.
    expert_read_s: ArrayLike = 0.0
    routed_decode_flop_s: ArrayLike = 0.0
    routed_prefill_flop_s: ArrayLike = 0.0
    experts: ArrayLike = 1.0  # routed experts per MoE layer (E)
    experts_per_token: ArrayLike = 1.0  # top-k
    # Attention data parallel (1 otherwise): cards that each prefill their own requests, and
    # one request's prompt tokens (busiest_rank_prompt_tokens).
    dp_ranks: ArrayLike = 1.0
    prompt_length: ArrayLike = 1.0


def gemm_efficiency(tokens: ArrayLike, best: ArrayLike, half_tokens: float) -> NDArray[np.float64]:
    """Share of the peak a product of `tokens` rows reaches: best · M / (M + M½)."""
    m = np.maximum(_f(tokens), 1.0)
    return _f(best) * m / (m + half_tokens)


def width_factor(hidden: ArrayLike, half_hidden: float) -> NDArray[np.float64]:
    """Narrow models reach less of the peak: h / (h + h½)."""
    h = _f(hidden)
    return h / (h + half_hidden)


def join(memory_s: ArrayLike, compute_s: ArrayLike, sharpness: float) -> NDArray[np.float64]:
    """(memory^p + compute^p)^(1/p): never below the larger, the plain max as p grows."""
    a, b = _f(memory_s), _f(compute_s)
    top = np.maximum(np.maximum(a, b), 1e-300)
    return top * ((a / top) ** sharpness + (b / top) ** sharpness) ** (1.0 / sharpness)


def attention_floor_seconds(
    kv_bytes_per_sequence: ArrayLike,
    kv_heads_per_card: ArrayLike,
    context: ArrayLike,
    split_tokens: ArrayLike,
    unit_gbs: float,
) -> NDArray[np.float64]:
    """Shortest time one sequence's KV read can take: its bytes over its work units × the
    bandwidth of one unit; units = KV heads per card × context chunks (1 chunk without
    flash-decoding: split_tokens = inf)."""
    chunks = np.maximum(np.ceil(_f(context) / _f(split_tokens)), 1.0)
    units = np.maximum(_f(kv_heads_per_card), 1.0) * chunks
    return _f(kv_bytes_per_sequence) / (units * unit_gbs * GIGA)


def allreduce_terms(
    layers: ArrayLike,
    tp: ArrayLike,
    hidden: ArrayLike,
    link_gbs: ArrayLike,
    latency_us: ArrayLike,
    efficiency: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(latency s per step, s per token) of the tensor-parallel all-reduces; 0 at tp = 1.

    Ring all-reduce moves 2(tp − 1)/tp of the message each way; `link_gbs` is the card's
    NVLink figure (both directions, as datasheets print it), so one way is half of it."""
    t, count = _f(tp), ALLREDUCES_PER_LAYER * _f(layers)
    multi = t > 1
    latency = np.where(multi, count * _f(latency_us) * MICRO, 0.0)
    one_way = _f(link_gbs) * GIGA / 2.0 * efficiency
    per_token_bytes = count * 2.0 * (t - 1.0) / t * _f(hidden) * ACTIVATION_BYTES
    with np.errstate(divide="ignore", invalid="ignore"):
        per_token = np.where(multi, per_token_bytes / one_way, 0.0)
    return latency, per_token


def experts_touched(terms: StepTerms, tokens: ArrayLike) -> NDArray[np.float64]:
    """Distinct routed experts per layer a step over `tokens` tokens reads (uniform routing):
    E·(1 − (1 − k/E)^tokens), k for one token, nearly E for many (engine.moe)."""
    e, k = np.maximum(_f(terms.experts), 1.0), _f(terms.experts_per_token)
    return e * (1.0 - (1.0 - k / e) ** np.maximum(_f(tokens), 0.0))


def weight_read_seconds(terms: StepTerms, tokens: ArrayLike) -> NDArray[np.float64]:
    """The weights a step over `tokens` tokens reads: all of a dense model's; an MoE's common
    weights plus the routed experts its tokens touch."""
    routed = _f(terms.expert_read_s) * experts_touched(terms, tokens)
    return _f(terms.weights_s) + np.where(_f(tokens) > 0, routed, 0.0)


def compute_seconds(terms: StepTerms, decoded: ArrayLike, prompt: ArrayLike) -> NDArray[np.float64]:
    """Matrix and attention time of `decoded` + `prompt` tokens; an MoE's routed products
    run on tokens·k/E rows per expert, so at a smaller GEMM's efficiency."""
    b, p = _f(decoded), _f(prompt)
    tokens = b + p
    dense = (b * terms.decode_flop_s + p * terms.prefill_flop_s) / gemm_efficiency(
        tokens, terms.gemm_efficiency, terms.half_tokens
    )
    rows = tokens * _f(terms.experts_per_token) / np.maximum(_f(terms.experts), 1.0)
    routed_flop_s = b * _f(terms.routed_decode_flop_s) + p * _f(terms.routed_prefill_flop_s)
    routed = routed_flop_s / gemm_efficiency(rows, terms.gemm_efficiency, terms.half_tokens)
    return dense + routed


def alltoall_terms(
    moe_layers: ArrayLike,
    ep: ArrayLike,
    hidden: ArrayLike,
    experts_per_token: ArrayLike,
    link_gbs: ArrayLike,
    latency_us: ArrayLike,
    efficiency: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(latency s per step, s per token) of expert parallelism's all-to-alls; 0 at ep = 1.

    Each MoE layer dispatches every token's activations to its top-k experts and combines
    their outputs back (2 all-to-alls); the share (ep − 1)/ep bound for other cards crosses
    NVLink one way (half the datasheet's both-ways figure)."""
    e, count = _f(ep), 2.0 * _f(moe_layers)
    multi = e > 1
    latency = np.where(multi, count * _f(latency_us) * MICRO, 0.0)
    one_way = _f(link_gbs) * GIGA / 2.0 * efficiency
    moved = count * _f(hidden) * _f(experts_per_token) * ACTIVATION_BYTES * (e - 1.0) / e
    with np.errstate(divide="ignore", invalid="ignore"):
        per_token = np.where(multi, moved / one_way, 0.0)
    return latency, per_token


def poisson_max_mean(mean: ArrayLike, count: ArrayLike) -> NDArray[np.float64]:
    """E[max] of `count` independent Poisson(`mean`) counts: the sum over k >= 1 of
    P(max >= k) = 1 − F(k − 1)^count, F the Poisson CDF, to k = mean + 12·√mean + 12."""
    mu, n = np.maximum(_f(mean), 0.0), np.maximum(_f(count), 1.0)
    log_mu = np.log(np.maximum(mu, 1e-300))
    cdf, total = np.zeros_like(mu), np.zeros_like(mu)
    top = float(np.max(mu, initial=0.0))
    for k in range(int(np.ceil(top + 12.0 * np.sqrt(top) + 12.0))):
        cdf = np.minimum(cdf + np.exp(k * log_mu - mu - math.lgamma(k + 1.0)), 1.0)
        total = total + 1.0 - cdf**n
    return total


def busiest_rank_prompt_tokens(terms: StepTerms, prompt_tokens: ArrayLike) -> NDArray[np.float64]:
    """The prompt tokens a step's compute waits for (each charged at one card's compute,
    step_terms.prompt_ranks). One rank: all of them. Attention data parallel over r cards:
    each card prefills its own requests, the others wait for the busiest, and the MoE pads
    every card's tokens to the busiest card's count; the P folded tokens are λ = P / prompt
    length prompts starting a step, spread over the cards as Poisson(λ / r) each, so the
    step waits for E[max] prompts, not λ (λ = 0.5 on 8 cards: 0.41; λ = 1.5: 0.90)."""
    p, ranks = _f(prompt_tokens), _f(terms.dp_ranks)
    if not np.any(ranks > 1.0):
        return p
    length = np.maximum(_f(terms.prompt_length), 1.0)
    busiest = length * poisson_max_mean(p / length / ranks, ranks)
    return np.where(ranks > 1.0, np.minimum(busiest, p), p)


def step_seconds(
    terms: StepTerms, batch: ArrayLike, prompt_tokens: ArrayLike | None = None
) -> NDArray[np.float64]:
    """One decode step of `batch` sequences with `prompt_tokens` prompt tokens folded in."""
    b = _f(batch)
    p = np.zeros_like(b) if prompt_tokens is None else _f(prompt_tokens)
    tokens = b + p
    kv = np.where(b > 0, np.maximum(b * terms.kv_s_per_sequence, terms.kv_floor_s), 0.0)
    compute = compute_seconds(terms, b, busiest_rank_prompt_tokens(terms, p))
    memory = weight_read_seconds(terms, tokens) + kv
    return (
        terms.fixed_s
        + terms.allreduce_s_per_token * tokens
        + join(memory, compute, terms.sharpness)
    )


def prefill_seconds(terms: StepTerms, prompt_tokens: ArrayLike) -> NDArray[np.float64]:
    """One forward pass over `prompt_tokens` tokens (a request's prompt, or a batch of them)."""
    m = _f(prompt_tokens)
    compute = compute_seconds(terms, np.zeros_like(m), m)
    return (
        terms.fixed_s
        + terms.allreduce_s_per_token * m
        + join(weight_read_seconds(terms, m), compute, terms.sharpness)
    )


def tpot_seconds(
    terms: StepTerms,
    batch: ArrayLike,
    prefill_s: ArrayLike,
    output_tokens: ArrayLike,
    prefills_per_request: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """A request's time per output token at steady state, `prefills_per_request` other
    requests starting during its decode (default: the batch turns over once, B of them)."""
    b = _f(batch)
    starts = b if prefills_per_request is None else _f(prefills_per_request)
    folded = starts * terms.prompt_per_output
    chunked = step_seconds(terms, b, np.where(terms.chunked, folded, 0.0))
    paused = step_seconds(terms, b) + starts * _f(prefill_s) / _f(output_tokens)
    return np.where(terms.chunked, chunked, paused)


def largest_batch_within(
    bound_s: ArrayLike,
    high: ArrayLike,
    terms: StepTerms,
    prefill_s: ArrayLike,
    output_tokens: float,
    first_step_only: bool = False,
) -> NDArray[np.float64]:
    """Largest whole batch <= high whose TPOT (or, with first_step_only, one bare decode
    step) stays within bound_s; 0 when even one does not. TPOT grows with the batch."""
    bound = _f(bound_s)

    def fits(batch: NDArray[np.float64]) -> NDArray[np.bool_]:
        if first_step_only:
            taken = step_seconds(terms, batch)
        else:
            taken = tpot_seconds(terms, batch, prefill_s, output_tokens)
        ok: NDArray[np.bool_] = taken <= bound
        return ok

    top = np.floor(np.nan_to_num(_f(high), nan=0.0, posinf=1e9))
    found = largest_integer(fits, np.zeros_like(top), top)
    return np.where(np.isfinite(bound), found, top)

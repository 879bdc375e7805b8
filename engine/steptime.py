"""Time of one training step of a (tp, pp, v, cp, dp, micro-batch) split, vectorised.

The capacity planner's split search calls :func:`step_time_arrays` on every candidate split;
the modeled scaling factor is the useful model-FLOP time over the whole step time. All
arguments broadcast (one entry per split row). Seconds are per training step and card.

Per data-parallel replica a step runs ``m`` micro-batches of ``b`` sequences of ``s`` tokens
on ``t·p·c`` cards (tensor, pipeline, context parallel). With ``k`` FLOPs per parameter and
token (6, or 8 with full recomputation) and ``F`` the card's achieved rate (peak × MFU):

    useful    = k·N·m·b·s / (t·p·c·F)
    compute   = useful · (1 + s/(6h)/e_att + h_kernels/h)   attention core; memory-bound kernels
    bubble    = compute · (p − 1) / (v · m)              interleaved 1F1B (v = 1: plain 1F1B)
    tp        = m · L/p · n_ar · ring(2·b·s/c·h bytes over t) · (1 − tp_overlap)
    cp        = max(0, ring-attention K/V exchange − attention compute)   (overlapped by design)
    pp        = 2 · (p·v − 1) · one activation transfer  (fill and drain; steady state overlaps)
    dp        = reduce-scatter beyond the last micro-batch's backward
                + all-gather beyond the next first forward (ZeRO ≥ 1; one all-reduce for ZeRO 0)
    scaling   = useful / (compute + bubble + tp + cp + pp + dp)

Sources: Narayanan et al. 2021 (SC21, interleaved schedule and its bubble), Korthikanti et al.
2022 (sequence parallel collectives), Liu et al. 2023 (ring attention), Rajbhandari et al.
2020 (ZeRO communication volume). See docs/capacity-planning.md "Split search".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from engine.defaults import DEFAULTS, FACTOR_FLOOR

FloatArray = NDArray[np.float64]
# (layers, hidden, seq_len) and (tp, pp, virtual stages, cp, dp, micro-batch sequences,
# micro-batches per replica), each broadcast over the split rows.
Shape = tuple[FloatArray, FloatArray, FloatArray]
Split = tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]

BF16_BYTES = 2.0
BUCKET_PARAMS = 40e6
BUCKET_PARAMS_PER_RANK = 1e6
# Where a step's time goes beyond the useful model FLOPs (StepTime fields <part>_s).
STEP_PARTS: tuple[str, ...] = ("bubble", "tp", "cp", "pp", "dp", "fabric")


def _default(key: str) -> float:
    return float(DEFAULTS[key].value)


def ring_s(
    bytes_per_member: ArrayLike, members: ArrayLike, bytes_s: ArrayLike, latency_s: ArrayLike
) -> NDArray[np.float64]:
    """Seconds for a ring reduce-scatter or all-gather: (D−1)/D of the data, D−1 hops."""
    d = np.maximum(np.asarray(members, dtype=float), 1.0)
    data = np.asarray(bytes_per_member, dtype=float)
    hops = d - 1.0
    seconds: FloatArray = hops / d * data / np.asarray(bytes_s) + hops * np.asarray(latency_s)
    return seconds


@dataclass(frozen=True)
class StepTime:
    """Breakdown of one training step (seconds); `scaling` = useful / step, in (0, 1]."""

    scaling: NDArray[np.float64]
    useful_s: NDArray[np.float64]
    compute_s: NDArray[np.float64]
    bubble_s: NDArray[np.float64]
    tp_s: NDArray[np.float64]
    cp_s: NDArray[np.float64]
    pp_s: NDArray[np.float64]
    dp_s: NDArray[np.float64]
    fabric_s: NDArray[np.float64]  # the exposed seconds that ride on the scale-out fabric
    step_s: NDArray[np.float64]


@dataclass(frozen=True)
class Links:
    """Per-card link rates (bytes/s) and the fabric's per-hop latency (s)."""

    nvlink_bytes_s: ArrayLike
    fabric_bytes_s: ArrayLike
    fabric_latency_s: ArrayLike
    cards_per_node: ArrayLike


def _tp_s(
    shape: Shape, split: Split, links: Links, k: FloatArray, tp_overlap: ArrayLike
) -> FloatArray:
    """Sequence-parallel reduce-scatter + all-gather pairs of every layer on NVLink."""
    layers, hidden, s = shape
    t, p, _, c, _, b, m = split
    collectives = 4.0 + 2.0 * np.clip((np.asarray(k) - 6.0) / 2.0, 0.0, 1.0)  # 6 with recompute
    per_collective = 2.0 * ring_s(BF16_BYTES * b * s / c * hidden, t, links.nvlink_bytes_s, 0.0)
    return m * np.ceil(layers / p) * collectives * per_collective * (1.0 - np.asarray(tp_overlap))


def _cp_s(
    shape: Shape, split: Split, links: Links, attention_s: FloatArray, kv_hidden: FloatArray
) -> FloatArray:
    """Ring attention: K and V chunks go round the c ranks (backward sends them and their
    gradients again); the exchange hides behind the attention compute it feeds."""
    layers, _, s = shape
    t, p, _, c, _, b, m = split
    node = np.asarray(links.cards_per_node, dtype=float)
    bw = np.where(t * c > node, links.fabric_bytes_s, links.nvlink_bytes_s)
    chunk = 2.0 * BF16_BYTES * b * s / c * kv_hidden / t  # K and V of the local chunk
    exchange = m * np.ceil(layers / p) * 3.0 * (c - 1.0) * chunk / bw
    exposed: FloatArray = np.maximum(exchange - attention_s, 0.0)
    return exposed


def _pp_s(shape: Shape, split: Split, links: Links) -> FloatArray:
    """Pipeline fill and drain: 2·(p·v − 1) activation transfers on the critical path."""
    _, hidden, s = shape
    t, p, v, c, _, b, _ = split
    node = np.asarray(links.cards_per_node, dtype=float)
    bw = np.where(t * c >= node, links.fabric_bytes_s, links.nvlink_bytes_s)
    transfer = BF16_BYTES * b * s / c * hidden / t / bw + np.asarray(links.fabric_latency_s)
    return np.where(p > 1, 2.0 * (p * v - 1.0) * transfer, 0.0)


def _dp_s(
    params: FloatArray,
    split: Split,
    links: Links,
    zero_stage: ArrayLike,
    windows: tuple[FloatArray, FloatArray],
    overlap: ArrayLike,
) -> FloatArray:
    """Gradient reduce-scatter in buckets behind the last backward, parameter all-gather
    behind the next first forward; one bucket (a layer's share) always stays exposed."""
    t, p, _, c, d, _, _ = split
    backward_s, forward_s = windows
    members = d * c  # context-parallel ranks hold the same weights
    node = np.asarray(links.cards_per_node, dtype=float)
    bw = np.where(members * t * c <= node, links.nvlink_bytes_s, links.fabric_bytes_s)
    grads = BF16_BYTES * params / (t * p)
    half = ring_s(grads, members, bw, links.fabric_latency_s)  # one reduce-scatter or all-gather
    # Megatron-LM's DDP bucket: max(40M, 1M × DP size) parameters; the last one stays exposed.
    bucket_params = np.maximum(BUCKET_PARAMS, BUCKET_PARAMS_PER_RANK * members)
    bucket = half * np.minimum(bucket_params * t * p / params, 1.0)
    o = np.asarray(overlap, dtype=float)
    zero = np.asarray(zero_stage, dtype=float)
    reduce = np.where(zero >= 1, half, 2.0 * half)  # ZeRO 0: a full all-reduce in backward
    exposed = np.maximum(reduce - o * backward_s, bucket)
    gather = np.where(zero >= 1, np.maximum(half - o * forward_s, bucket), 0.0)
    fsdp = np.where(zero >= 3, 2.0 * half, 0.0)  # ZeRO 3 gathers weights again in backward
    exposed_s: FloatArray = np.where(
        members > 1, exposed + gather + np.maximum(fsdp - o * backward_s, 0.0), 0.0
    )
    return exposed_s


def step_time_arrays(
    *,
    params: ArrayLike,
    shape: tuple[ArrayLike, ArrayLike, ArrayLike],
    split: tuple[ArrayLike, ...],
    per_card_flops: ArrayLike,
    links: Links,
    flops_per_param_token: ArrayLike = 6.0,
    zero_stage: ArrayLike = 1,
    dp_overlap: ArrayLike | None = None,
    tp_overlap: ArrayLike = 0.0,
    kv_hidden: ArrayLike | None = None,
) -> StepTime:
    """Step time of every split row. `shape` is (layers, hidden, seq_len); `split` is
    (tp, pp, virtual stages, cp, dp, micro-batch sequences, micro-batches per replica)."""
    layers, hidden, s = (np.asarray(x, dtype=np.float64) for x in shape)
    t, p, v, c, d, b, m = (np.asarray(x, dtype=np.float64) for x in split)
    arrays: Split = (t, p, v, c, d, b, m)
    k = np.asarray(flops_per_param_token, dtype=np.float64)
    n_params = np.asarray(params, dtype=np.float64)
    flops = np.asarray(per_card_flops, dtype=np.float64)
    useful = k * n_params * m * b * s / (t * p * c * flops)
    # The attention core (Q·Kᵀ and A·V over the full s × s square, as the published FLOP counts
    # take it) runs slower than the matmuls MFU describes.
    attention_share = s / (6.0 * hidden) / _default("attention_kernel_efficiency")
    kernels_share = _default("memory_bound_kernel_width") / hidden
    compute = useful * (1.0 + attention_share + kernels_share)
    attention = useful * attention_share
    bubble = compute * (p - 1.0) / (v * m)
    tp = _tp_s((layers, hidden, s), arrays, links, k, tp_overlap)
    kv = hidden if kv_hidden is None else np.asarray(kv_hidden, dtype=np.float64)
    cp = _cp_s((layers, hidden, s), arrays, links, attention, kv)
    pp = _pp_s((layers, hidden, s), arrays, links)
    # Gradients reduce behind the last backward and the pipeline's drain; weights gather behind
    # the next first forward and the fill (each virtual chunk starts as soon as it is done).
    per_micro = compute / m
    windows = (per_micro * (k - 2.0) / k + bubble / 2.0, per_micro * 2.0 / k + bubble / 2.0)
    overlap = _default("dp_overlap_share") if dp_overlap is None else dp_overlap
    dp = _dp_s(n_params, arrays, links, zero_stage, windows, overlap)
    node = np.asarray(links.cards_per_node, dtype=float)
    fabric = pp * (t * c >= node) + cp * (t * c > node) + dp * (t * c * d > node)
    step = compute + bubble + tp + cp + pp + dp
    return StepTime(
        scaling=np.clip(useful / step, FACTOR_FLOOR, 1.0),
        useful_s=useful,
        compute_s=compute,
        bubble_s=bubble,
        tp_s=tp,
        cp_s=cp,
        pp_s=pp,
        dp_s=dp,
        fabric_s=fabric,
        step_s=step,
    )

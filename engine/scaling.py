"""Parallel-scaling efficiency: measured speed-up tables and the communication model.

Formulas: docs/efficiency-model.md, "Scaling".

Everything here takes scalars or numpy arrays (broadcast together); the scalar helpers
(:func:`modeled_scaling`, :func:`scaling_from_speedup`) call the same array code.

Modeled mode, for a job of ``n`` cards with tensor parallel ``t``, pipeline parallel ``p``
and data parallel ``d = n / (t·p)`` (kept real-valued so the model is smooth in ``n``),
``m`` micro-batches per replica and step::

    compute   = k · N · tokens_per_step / (n · per_card_flops)  # N: active params (MoE)
    bubble    = compute · (p − 1) / m                 # 1F1B: bubble share (p−1)/(m+p−1)
    tp_comm   = n_ar · (t−1)/t · tokens_per_step · N / (3 · hidden · d · p) / tp_bandwidth
    dp_comm   = 2 (d−1)/d · (N_rep · gradient_bytes / (t·p)) / dp_bandwidth   # ring all-reduce
    scaling   = compute / (compute + tp_comm + (1 − overlap) · dp_comm + bubble)

``n_ar`` is the number of tensor-parallel all-reduces per layer (4 without activation
recomputation, 6 with it, i.e. k = 8); the layer count is ``N / (12 · hidden²)``. N is the
parameter count of a dense model; of a mixture of experts the active parameters (what a
token multiplies through), and ``N_rep`` the weights replicated over data parallelism (the
total less the routed experts, which expert parallelism shards; engine/moe_training.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from engine.defaults import DEFAULTS, FABRICS, FACTOR_FLOOR

# GPT-3-like aspect ratio (96 layers at hidden 12,288): layers ≈ hidden / 128.
HIDDEN_PER_LAYER: float = 128.0
BF16_BYTES: float = 2.0


def _param(value: ArrayLike | None, key: str) -> np.ndarray:
    """Array of ``value`` with None/NaN replaced by the table default for ``key``."""
    default = float(DEFAULTS[key].value)
    if value is None:
        return np.asarray(default)
    array = np.asarray(value, dtype=float)
    return np.where(np.isnan(array), default, array)


def _or(value: ArrayLike | None, fallback: np.ndarray) -> np.ndarray:
    """Array of ``value`` with None/NaN replaced by ``fallback`` (broadcast)."""
    if value is None:
        return fallback
    array = np.asarray(value, dtype=float)
    filled: np.ndarray = np.where(np.isnan(array), fallback, array)
    return filled


def estimate_hidden_size(model_params: ArrayLike) -> np.ndarray:
    """Hidden size of a dense transformer from its parameter count.

    ``N ≈ 12·L·h²`` with ``L = h/128`` gives ``h = (128·N/12)^(1/3)`` (175B → ~12,300).
    """
    hidden: np.ndarray = np.cbrt(HIDDEN_PER_LAYER * np.asarray(model_params, dtype=float) / 12.0)
    return hidden


def pipeline_bubble_fraction(pipeline_parallel: ArrayLike, microbatches: ArrayLike) -> np.ndarray:
    """Idle share of a 1F1B pipeline step: ``(p − 1) / (m + p − 1)``."""
    p = np.asarray(pipeline_parallel, dtype=float)
    bubble: np.ndarray = (p - 1.0) / (np.asarray(microbatches, dtype=float) + p - 1.0)
    return bubble


def ring_allreduce_s(
    bytes_per_member: ArrayLike, members: ArrayLike, bandwidth_bytes_s: ArrayLike
) -> np.ndarray:
    """Seconds for a ring all-reduce of ``bytes_per_member`` over ``members`` at a link rate."""
    members_arr = np.asarray(members, dtype=np.float64)
    return (
        2.0
        * (members_arr - 1.0)
        / members_arr
        * np.asarray(bytes_per_member, dtype=np.float64)
        / np.asarray(bandwidth_bytes_s, dtype=np.float64)
    )


def fabric_efficiency_of(
    fabric: ArrayLike, overrides: Mapping[str, float] | None = None
) -> np.ndarray:
    """Achieved share of line rate per fabric name (``fabric_efficiency_<fabric>`` defaults)."""
    names = np.asarray(fabric)
    unknown = ~np.isin(names, FABRICS)
    if unknown.any():
        raise ValueError(f"fabric must be one of {', '.join(FABRICS)}, got {names[unknown][:5]}")
    values = [
        float(
            (overrides or {}).get(
                f"fabric_efficiency_{f}", DEFAULTS[f"fabric_efficiency_{f}"].value
            )
        )
        for f in FABRICS
    ]
    return np.select([names == f for f in FABRICS], values)


@dataclass(frozen=True)
class ScalingArrays:
    """Vectorised breakdown of the modeled scaling factor (seconds are per training step)."""

    scaling: np.ndarray  # compute / (compute + exposed comm + bubble), in (0, 1]
    compute_s: np.ndarray
    tp_comm_s: np.ndarray
    dp_comm_s: np.ndarray  # full all-reduce time; only (1 − overlap) of it is exposed
    dp_exposed_s: np.ndarray
    bubble_s: np.ndarray
    bubble_fraction: np.ndarray
    tensor_parallel: np.ndarray
    pipeline_parallel: np.ndarray
    data_parallel: np.ndarray
    microbatches_per_replica: np.ndarray
    tp_crosses_nodes: np.ndarray  # bool: t > the NVLink domain (else node), TP on the fabric


def modeled_scaling_arrays(
    cards: ArrayLike,
    per_card_tflops: ArrayLike,
    cards_per_node: ArrayLike,
    *,
    nvlink_bidir_gbs: ArrayLike | None = None,
    inter_node_gbit_s_per_card: ArrayLike | None = None,
    fabric_efficiency: ArrayLike | None = None,
    model_params: ArrayLike | None = None,
    tensor_parallel: ArrayLike | None = None,
    pipeline_parallel: ArrayLike | None = None,
    microbatches_per_replica: ArrayLike | None = None,
    global_batch_tokens: ArrayLike | None = None,
    micro_batch_tokens: ArrayLike | None = None,
    model_hidden_size: ArrayLike | None = None,
    flops_per_param_token: ArrayLike | None = None,
    gradient_bytes_per_param: ArrayLike | None = None,
    dp_overlap_share: ArrayLike | None = None,
    model_active_params: ArrayLike | None = None,
    model_replicated_params: ArrayLike | None = None,
    scale_up_cards: ArrayLike | None = None,
) -> ScalingArrays:
    """Modeled scaling factor of training jobs (all arguments broadcast; None/NaN → default).

    Units: ``per_card_tflops`` is the achieved per-card rate (peak dense TFLOP/s × MFU);
    ``nvlink_bidir_gbs`` the vendor's both-directions NVLink figure per card in GB/s (half
    of it is used per direction); ``inter_node_gbit_s_per_card`` the card's NIC rate in
    Gbit/s, multiplied by ``fabric_efficiency`` (default: the RoCE entry).

    A defaulted ``tensor_parallel`` is capped at ``scale_up_cards`` (the cards of one NVLink
    domain; NaN or None → the node size), and a ``t`` beyond it sends its traffic over the
    fabric; any ``t`` is capped at ``cards`` and ``p`` so that ``t·p ≤ cards``.
    ``global_batch_tokens`` (when given) sets the micro-batches per replica, else
    ``microbatches_per_replica`` is used. A mixture of experts gives ``model_active_params``
    (compute and tensor-parallel traffic: what a token multiplies through) and
    ``model_replicated_params`` (the gradient all-reduce: the weights not sharded by expert
    parallelism); NaN or None → ``model_params``, a dense model.
    """
    n = np.asarray(cards, dtype=float)
    per_card_flops = np.asarray(per_card_tflops, dtype=float) * 1e12
    node = np.asarray(cards_per_node, dtype=float)
    reach = _or(scale_up_cards, node)
    total = _param(model_params, "model_params")
    params = _or(model_active_params, total)
    k = _param(flops_per_param_token, "flops_per_param_token")

    t_in = np.asarray(np.nan if tensor_parallel is None else tensor_parallel, dtype=float)
    t = np.where(np.isnan(t_in), np.minimum(float(DEFAULTS["tensor_parallel"].value), reach), t_in)
    t = np.maximum(1.0, np.minimum(t, n))
    p = np.maximum(1.0, np.minimum(_param(pipeline_parallel, "pipeline_parallel"), np.floor(n / t)))
    d = n / (t * p)

    micro_tokens = _param(micro_batch_tokens, "micro_batch_tokens")
    batch_in = np.asarray(
        np.nan if global_batch_tokens is None else global_batch_tokens, dtype=float
    )
    m = np.where(
        np.isnan(batch_in),
        _param(microbatches_per_replica, "microbatches_per_replica"),
        np.maximum(1.0, batch_in / (d * micro_tokens)),
    )
    tokens_per_step = m * d * micro_tokens
    compute = k * params * tokens_per_step / (n * per_card_flops)

    hidden_in = np.asarray(np.nan if model_hidden_size is None else model_hidden_size, dtype=float)
    hidden = np.where(np.isnan(hidden_in), estimate_hidden_size(params), hidden_in)
    allreduces_per_layer = 4.0 + 2.0 * np.clip((k - 6.0) / 2.0, 0.0, 1.0)

    nvlink_bytes_s = _param(nvlink_bidir_gbs, "intra_node_bidir_gbs") / 2.0 * 1e9
    efficiency = (
        np.asarray(float(DEFAULTS["fabric_efficiency_roce"].value))
        if fabric_efficiency is None
        else np.asarray(fabric_efficiency, dtype=float)
    )
    fabric_bytes_s = (
        _param(inter_node_gbit_s_per_card, "inter_node_gbit_s_per_card") * 1e9 / 8.0 * efficiency
    )

    tp_crosses_nodes = t > reach
    tp_bytes = (
        allreduces_per_layer * (t - 1.0) / t * tokens_per_step * params / (3.0 * hidden * d * p)
    )
    tp_comm = tp_bytes / np.where(tp_crosses_nodes, fabric_bytes_s, nvlink_bytes_s)

    replicated = _or(model_replicated_params, total)
    gradient_bytes = (
        replicated * _param(gradient_bytes_per_param, "gradient_bytes_per_param") / (t * p)
    )
    dp_bandwidth = np.where(n <= node, nvlink_bytes_s, fabric_bytes_s)
    dp_comm = ring_allreduce_s(gradient_bytes, d, dp_bandwidth)
    dp_exposed = (1.0 - _param(dp_overlap_share, "dp_overlap_share")) * dp_comm
    bubble = compute * (p - 1.0) / m

    scaling = compute / (compute + tp_comm + dp_exposed + bubble)
    return ScalingArrays(
        scaling=np.clip(scaling, FACTOR_FLOOR, 1.0),
        compute_s=compute,
        tp_comm_s=tp_comm,
        dp_comm_s=dp_comm,
        dp_exposed_s=dp_exposed,
        bubble_s=bubble,
        bubble_fraction=pipeline_bubble_fraction(p, m),
        tensor_parallel=t,
        pipeline_parallel=p,
        data_parallel=d,
        microbatches_per_replica=m,
        tp_crosses_nodes=tp_crosses_nodes,
    )


@dataclass(frozen=True)
class ScalingResult:
    """Scalar modeled-scaling breakdown for one job (seconds per step)."""

    scaling: float
    compute_s: float
    tp_comm_s: float
    dp_comm_s: float
    dp_exposed_s: float
    bubble_s: float
    bubble_fraction: float
    tensor_parallel: float
    pipeline_parallel: float
    data_parallel: float
    microbatches_per_replica: float
    tp_crosses_nodes: bool


def modeled_scaling(
    cards: float,
    *,
    peak_tflops: float,
    mfu: float,
    cards_per_node: float = 8,
    fabric: str | None = None,
    nvlink_bidir_gbs: float | None = None,
    inter_node_gbit_s_per_card: float | None = None,
    model_params: float | None = None,
    tensor_parallel: float | None = None,
    pipeline_parallel: float | None = None,
    microbatches_per_replica: float | None = None,
    global_batch_tokens: float | None = None,
    micro_batch_tokens: float | None = None,
    model_hidden_size: float | None = None,
    flops_per_param_token: float | None = None,
    gradient_bytes_per_param: float | None = None,
    dp_overlap_share: float | None = None,
    model_active_params: float | None = None,
    model_replicated_params: float | None = None,
    scale_up_cards: float | None = None,
) -> ScalingResult:
    """Modeled scaling of one homogeneous job; ``None`` arguments take the documented defaults."""
    if cards <= 0 or peak_tflops <= 0 or not 0 < mfu <= 1:
        raise ValueError("cards and peak_tflops must be positive and mfu in (0, 1]")
    arrays = modeled_scaling_arrays(
        cards,
        peak_tflops * mfu,
        cards_per_node,
        nvlink_bidir_gbs=nvlink_bidir_gbs,
        inter_node_gbit_s_per_card=inter_node_gbit_s_per_card,
        fabric_efficiency=fabric_efficiency_of(fabric or str(DEFAULTS["fabric"].value)),
        model_params=model_params,
        tensor_parallel=tensor_parallel,
        pipeline_parallel=pipeline_parallel,
        microbatches_per_replica=microbatches_per_replica,
        global_batch_tokens=global_batch_tokens,
        micro_batch_tokens=micro_batch_tokens,
        model_hidden_size=model_hidden_size,
        flops_per_param_token=flops_per_param_token,
        gradient_bytes_per_param=gradient_bytes_per_param,
        dp_overlap_share=dp_overlap_share,
        model_active_params=model_active_params,
        model_replicated_params=model_replicated_params,
        scale_up_cards=scale_up_cards,
    )
    values = {name: getattr(arrays, name) for name in ScalingArrays.__dataclass_fields__}
    return ScalingResult(
        **{name: float(value) for name, value in values.items() if name != "tp_crosses_nodes"},
        tp_crosses_nodes=bool(values["tp_crosses_nodes"]),
    )


def speedup_efficiency(
    table_pool: ArrayLike,
    table_cards: ArrayLike,
    table_throughput: ArrayLike,
    query_pool: ArrayLike,
    query_cards: ArrayLike,
) -> tuple[np.ndarray, np.ndarray]:
    """Scaling efficiency from measured speed-up tables, interpolated at ``query_cards``.

    Each table row is (integer pool code, cards, throughput in any unit consistent within
    the pool). Efficiency at a point is ``throughput / (cards × per-card throughput of the
    smallest measured size)``, so losses below the smallest size stay in MFU. Between
    points it is interpolated linearly in cards; outside the table the nearest end's
    efficiency is kept; above 1 (super-linear) it is capped at 1.

    Returns ``(efficiency, has_table)`` per query; efficiency is NaN where the pool has no table.
    """
    pool = np.asarray(table_pool, dtype=np.int64)
    cards = np.asarray(table_cards, dtype=float)
    throughput = np.asarray(table_throughput, dtype=float)
    q_pool = np.asarray(query_pool, dtype=np.int64)
    q_cards = np.asarray(query_cards, dtype=float)
    result = np.full(q_pool.shape, np.nan)
    if pool.size == 0:
        return result, np.zeros(q_pool.shape, dtype=bool)
    if (
        (cards <= 0).any()
        or (throughput <= 0).any()
        or np.isnan(cards).any()
        or np.isnan(throughput).any()
    ):
        raise ValueError("speed-up table cards and throughput must be positive numbers")
    order = np.lexsort((cards, pool))
    pool, cards, throughput = pool[order], cards[order], throughput[order]
    if ((np.diff(pool) == 0) & (np.diff(cards) == 0)).any():
        raise ValueError("speed-up table repeats a card count within one pool")
    starts = np.flatnonzero(np.r_[True, pool[1:] != pool[:-1]])
    ends = np.r_[starts[1:], pool.size]
    sizes = ends - starts
    base_per_card = np.repeat(throughput[starts] / cards[starts], sizes)
    efficiency = throughput / (cards * base_per_card)

    first_row = np.full(max(int(pool.max()), int(q_pool.max(initial=0))) + 1, -1, dtype=np.int64)
    first_row[pool[starts]] = starts
    last_row = np.full_like(first_row, -1)
    last_row[pool[starts]] = ends - 1
    q_first = first_row[q_pool]
    has_table = q_first >= 0
    if not has_table.any():
        return result, has_table
    qp, qc = q_pool[has_table], q_cards[has_table]
    lo_row, hi_row = q_first[has_table], last_row[q_pool][has_table]
    x = np.clip(qc, cards[lo_row], cards[hi_row])
    span = 2.0 * max(float(cards.max()), float(np.nanmax(x))) + 1.0
    keys = pool * span + cards
    left = np.searchsorted(keys, qp * span + x, side="right") - 1
    left = np.clip(left, lo_row, hi_row)
    right = np.minimum(left + 1, hi_row)
    width = cards[right] - cards[left]
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.where(width > 0, (x - cards[left]) / width, 0.0)
    interpolated = efficiency[left] + weight * (efficiency[right] - efficiency[left])
    result[has_table] = np.clip(interpolated, FACTOR_FLOOR, 1.0)
    return result, has_table


def scaling_from_speedup(points: Mapping[float, float], cards: float) -> float:
    """Measured scaling at ``cards`` from a {cards: throughput} table (see speedup_efficiency)."""
    if not points:
        raise ValueError("speed-up table is empty")
    table_cards = np.fromiter(points.keys(), dtype=float)
    table_throughput = np.fromiter(points.values(), dtype=float)
    efficiency, _ = speedup_efficiency(
        np.zeros(table_cards.size, dtype=np.int64), table_cards, table_throughput, [0], [cards]
    )
    return float(efficiency[0])

"""The mixture of experts' own kernels in training: the experts' grouped GEMMs by their shape,
and the memory-bound routing kernels around them.

**Grouped GEMMs.** Each local expert multiplies the ``m`` tokens routed to it through its own
matrices: forward ``m × K`` by ``K × N`` for the gate and up projections (``K`` = hidden ``h``,
``N`` = 2·f_e fused when gated) and the down projection (``K`` = f_e, ``N`` = h); backward
the same two shapes again for the input gradient (dgrad, ``N`` and ``K`` swapped) and for the
weight gradient (wgrad, reducing over the ``m`` tokens and accumulating into FP32 main
gradients). Each of those GEMMs takes

    t = max(FLOPs ÷ R, bytes ÷ W) + t_expert       FLOPs = 2·m·N·K
    bytes = b_in·(m·K + K·N) + b_out·m·N          wgrad: b_in·m·(K + N) + 8·K·N (FP32 r + w)

with ``R`` the card's large-GEMM rate in the training precision and ``W`` its achieved HBM
bandwidth: the roofline (Williams, Waterman and Patterson 2009, "Roofline: an insightful visual
performance model", CACM 52(4)): below the ridge point ``R/W`` FLOPs per byte a GEMM is
memory-bound. Its arithmetic intensity is ``2/(b_in/N + b_in/m + b_out/K)`` (forward), so a
narrower expert (smaller ``N`` or ``K``) or fewer tokens per expert lowers it. ``t_expert`` is a
fixed cost per expert GEMM: Transformer Engine's GroupedLinear (what Megatron-Core's
``--moe-grouped-gemm`` runs on Hopper) issues one cuBLAS GEMM per local expert (its
``general_grouped_gemm``), and the dense step-time model already charges each GEMM call a fixed
launch, tile-quantisation and ramp-up cost (engine/defaults.py ``gemm_call_overhead_us``,
measured); ``MOE_EXPERT_GEMM_OVERHEAD_US`` is its value for an expert's GEMM, fitted on the
MoE calibration runs (docs/decisions/0016-moe-calibration.md). The grouped-GEMM efficiency is
the compute-bound time over the time taken: 1 for large, compute-bound experts.

**Routing kernels** (memory-bound; Gale et al. 2023, "MegaBlocks", MLSys, §3; Megatron-Core's
router and token permutation). Per token and MoE layer, in BF16 unless marked:

    router     logits (FP32, E) written, read by softmax / top-k, scores written;
               the top-k probabilities and indices (4 + 8 bytes each) written        fwd and bwd
    permute    each of the k copies gathered (k·h read, k·h written)                 fwd
    combine    the k expert outputs read with their probabilities, one h written     fwd
    backward   the output gradient gathered to k copies (k·h read, k·h written), the
               expert outputs read again for the probabilities' gradient (k·h), the
               k copies' gradients scattered back (k·h read, h written)

Every byte counts once at the card's achieved HBM bandwidth (the dense model's ``hbm_efficiency``
× the data sheet); the experts' activation function is the dense view's (engine.moe_training
``dense_view``), not counted here. A full recomputation runs the forward kernels again.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

BF16_BYTES = 2.0
FP8_BYTES = 1.0
FP32_BYTES = 4.0
INDEX_BYTES = 8.0  # a top-k expert index (int64, as torch.topk returns)
# Fixed cost of one local expert's GEMM per micro-batch, everything the stack spends on each
# expert beyond its FLOPs and bytes (launches, per-expert FP8 casts and scales, host work):
# fitted on the MoE calibration runs alone, least squares of log(modeled ÷ published
# throughput), 10 µs grid (docs/decisions/0016-moe-calibration.md). ~100× the dense GEMM
# call's measured 2.75 µs: host-bound, as Megatron-Core's MoE report finds ("compute wall").
MOE_EXPERT_GEMM_OVERHEAD_US = 290.0
# Per expert and pass: forward, input gradient, weight gradient of each of its two matrices.
GEMM_KINDS: tuple[str, ...] = ("forward", "dgrad", "wgrad")


def _f(value: ArrayLike) -> FloatArray:
    return np.asarray(value, dtype=np.float64)


def gemm_bytes(m: ArrayLike, n: ArrayLike, k: ArrayLike, kind: str, in_bytes: float) -> FloatArray:
    """HBM bytes of one expert GEMM (module docstring): its operands read and its output written
    once; the weight gradient read and written in FP32 (accumulated into the main gradient)."""
    m_, n_, k_ = _f(m), _f(n), _f(k)
    if kind == "wgrad":
        accumulated: FloatArray = in_bytes * m_ * (k_ + n_) + 2.0 * FP32_BYTES * k_ * n_
        return accumulated
    plain: FloatArray = in_bytes * (m_ * k_ + k_ * n_) + BF16_BYTES * m_ * n_
    return plain


def arithmetic_intensity(
    m: ArrayLike, n: ArrayLike, k: ArrayLike, kind: str = "forward", in_bytes: float = BF16_BYTES
) -> FloatArray:
    """FLOPs per HBM byte of one expert GEMM of ``m`` tokens by a ``K × N`` matrix."""
    flops = 2.0 * _f(m) * _f(n) * _f(k)
    intensity: FloatArray = flops / gemm_bytes(m, n, k, kind, in_bytes)
    return intensity


def expert_gemm_shapes(
    hidden: float, expert_ffn: float, *, gated: bool = True
) -> tuple[tuple[float, float], ...]:
    """(N, K) of every GEMM an expert runs per micro-batch, forward and backward: the gate and
    up projections (fused, 2·f_e wide when gated) and the down projection, each as forward,
    dgrad (N and K swapped) and wgrad (the weight's K × N, reduced over the tokens)."""
    up = (2.0 if gated else 1.0) * expert_ffn
    matrices = ((up, hidden), (hidden, expert_ffn))  # (N, K) forward
    return tuple((k, n) if kind == "dgrad" else (n, k) for n, k in matrices for kind in GEMM_KINDS)


def grouped_gemm_efficiency(
    tokens_per_expert: ArrayLike,
    hidden: float,
    expert_ffn: float,
    rates: tuple[ArrayLike, ArrayLike],
    *,
    in_bytes: float = BF16_BYTES,
    gated: bool = True,
    overhead_us: float | None = None,
) -> FloatArray:
    """The experts' GEMMs' rate as a share of the card's large-GEMM rate ``R``: their
    compute-bound time over the roofline time plus the fixed cost of each (module docstring).
    ``rates`` are ``R`` (FLOP/s in the training precision) and the achieved HBM bytes/s."""
    fixed_s = (MOE_EXPERT_GEMM_OVERHEAD_US if overhead_us is None else overhead_us) * 1e-6
    m = np.maximum(_f(tokens_per_expert), 1.0)
    flops_s, bytes_s = (_f(rate) for rate in rates)
    compute = np.zeros(np.broadcast(m, flops_s, bytes_s).shape)
    taken = np.zeros_like(compute)
    for index, (n, k) in enumerate(expert_gemm_shapes(hidden, expert_ffn, gated=gated)):
        kind = GEMM_KINDS[index % len(GEMM_KINDS)]
        gemm_s = 2.0 * m * n * k / flops_s
        memory_s = gemm_bytes(m, n, k, kind, in_bytes) / bytes_s
        compute = compute + gemm_s
        taken = taken + np.maximum(gemm_s, memory_s) + fixed_s
    share: FloatArray = compute / taken
    return share


def router_bytes_per_token(experts: int, experts_per_token: int) -> float:
    """HBM bytes of the router's softmax and top-k per token, forward and backward: the FP32
    logits written and read, the scores written, the top-k probabilities and indices."""
    per_pass = 3.0 * FP32_BYTES * experts + (FP32_BYTES + INDEX_BYTES) * experts_per_token
    return 2.0 * per_pass


def routing_bytes_per_token(
    hidden: float, experts_per_token: int, experts: int, passes: float
) -> float:
    """HBM bytes of one token's routing kernels in one MoE layer (module docstring): router,
    permute and combine forward (again under full recomputation, ``passes`` 4), and their
    gradients backward."""
    h, k = float(hidden), float(experts_per_token)
    forward = BF16_BYTES * ((2.0 * k + k + 1.0) * h) + FP32_BYTES * k  # permute, combine
    backward = BF16_BYTES * ((2.0 * k + k + k + 1.0) * h) + FP32_BYTES * k
    return (passes - 2.0) * forward + backward + router_bytes_per_token(experts, experts_per_token)

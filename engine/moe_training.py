"""Training a mixture of experts: what expert parallelism shards, what it sends, what it costs.

A token multiplies through the active weights only (engine.moe.matmul_params_per_token), so
the useful FLOPs are k × the active parameters per token; memory holds every expert. Expert
parallelism (EP) places each MoE layer's routed experts on ``ep`` data-parallel ranks (carved
out of DP, as Megatron-Core and DeepSeek-V3 do); everything else (attention, dense FFNs,
router, shared experts, embeddings) is replicated over DP like a dense model's weights. Per
MoE layer and micro-batch each card sends its tokens to their experts and gets them back
(dispatch and combine all-to-all), forward and backward:

    bytes per all-to-all = tokens × hidden × top-k × bytes per value × (ep − 1)/ep
    across nodes a token goes once to each node holding one of its experts (DeepEP forwards it
    on NVLink inside the node): (n − 1)·(1 − (1 − 1/n)^k) remote nodes of n on average
    exposed = max(all-to-all − overlap × the MoE layers' compute, 0)

The busiest expert sets the pace of the grouped GEMMs: the routed experts' time is × the
capacity factor (routing imbalance); the grouped GEMMs reach a share of a large GEMM's rate
set by the experts' shape, the tokens each gets and the card's ridge point, and the routing
kernels move their bytes at HBM bandwidth (engine.moe_kernels).

Sources (docs/capacity-planning.md, "Mixture of experts"): DeepSeek-AI 2024, "DeepSeek-V3
Technical Report" (arXiv:2412.19437) §3.2 (DualPipe overlapping the all-to-all with compute,
node-limited dispatch over InfiniBand forwarded on NVLink, FP8 dispatch and BF16 combine) and
§3.3 (FP8 training); Fedus et al. 2022, "Switch Transformers" (JMLR 23) §2.2 (capacity factor,
1.0-1.25 in their runs); Lepikhin et al. 2021, "GShard" (ICLR) (the dispatch and combine
all-to-all per MoE layer); Gale et al. 2023, "MegaBlocks" (MLSys) §3 (token permutation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from engine import moe_kernels
from engine.memory import ModelShape
from engine.moe import (
    MoeShape,
    attention_params_per_layer,
    expert_params,
    matmul_params_per_token,
    router_params,
    total_params,
)

FloatArray = NDArray[np.float64]

# Switch Transformers §2.2 trains at capacity factors 1.0-1.25; a dropless router without
# a cap (Megatron-Core's default, DeepSeek-V3) still waits for its busiest expert: 1.1 is
# the load spread DeepSeek-V3's balancing keeps (§2.1.2, Fig. 9: expert load within ~10 %).
DEFAULT_CAPACITY_FACTOR = 1.25
# Share of the MoE layers' compute the all-to-all can hide behind. Megatron-Core overlaps the
# dispatch/combine of one micro-batch with another's compute (EP A2A overlap, 2025); DeepSeek-
# V3's DualPipe hides it fully (§3.2.1): a run states its own (training.moe_a2a_overlap).
DEFAULT_A2A_OVERLAP = 0.5
# While the all-to-all runs behind compute its kernels hold SMs the GEMMs then lack: DeepSeek-V3
# gives 20 of the H800's 132 SMs to communication (§3.2.2); NCCL's all-to-all takes as many.
COMMUNICATION_SM_SHARE = 20.0 / 132.0
BF16_BYTES = 2.0
FP8_BYTES = 1.0


@dataclass(frozen=True)
class MoeTraining:
    """A mixture of experts as the step-time model takes it (scalars)."""

    shape: MoeShape
    capacity_factor: float = DEFAULT_CAPACITY_FACTOR
    a2a_overlap: float = DEFAULT_A2A_OVERLAP
    # Multi-token prediction modules trained alongside (DeepSeek-V3 §2.2: depth 1): each is
    # one more MoE layer, a 2h × h projection and the shared output head, per token.
    mtp_depth: int = 0

    @property
    def routed_params(self) -> float:
        """The routed experts' weights, every MoE layer: what expert parallelism shards."""
        return float(self.shape.moe_layer_count * self.shape.experts * expert_params(self.shape))

    @property
    def replicated_params(self) -> float:
        """Every other weight (attention, dense FFNs, router, shared experts, embeddings)."""
        return total_params(self.shape) - self.routed_params

    @property
    def mtp_matmul_params(self) -> float:
        """Weights a token multiplies through in the multi-token prediction modules."""
        shape = self.shape
        if not self.mtp_depth or not shape.moe_layer_count:
            return 0.0
        h = float(shape.hidden_size)
        layer = attention_params_per_layer(shape) + router_params(shape) / shape.moe_layer_count
        layer += (shape.experts_per_token + shape.shared_experts) * expert_params(shape)
        return self.mtp_depth * (layer + 2.0 * h * h + shape.vocab_size * h)

    @property
    def routed_active_params(self) -> float:
        """The routed experts' weights one token multiplies through (top-k per MoE layer)."""
        shape = self.shape
        return float(shape.moe_layer_count * shape.experts_per_token * expert_params(shape))


def params_per_model_rank(moe: MoeTraining | None, params: float, ep: ArrayLike) -> FloatArray:
    """Weights one (tp × pp) model-parallel group holds on an EP rank: the replicated ones and
    1/ep of the routed experts (a dense model: all of them)."""
    ep_ = np.asarray(ep, dtype=np.float64)
    if moe is None:
        return np.full_like(ep_, float(params))
    held: FloatArray = moe.replicated_params + moe.routed_params / ep_
    return held


def dense_view(shape: MoeShape) -> ModelShape:
    """The planner's dense shape of an MoE model, for its activations: the attention (MLA as
    multi-head: every head keeps its own K and V after the up-projection) and an FFN as wide as
    the experts a token goes through (top-k + shared, × the expert width)."""
    kv_heads = shape.attention_heads if shape.attention == "mla" else shape.kv_heads
    width = (shape.experts_per_token + shape.shared_experts) * shape.expert_ffn
    ffn = width if shape.is_moe else shape.ffn_hidden_size
    return ModelShape(
        layers=shape.layers,
        hidden=shape.hidden_size,
        heads=shape.attention_heads,
        kv_heads=kv_heads,
        ffn_hidden=ffn,
        vocab=shape.vocab_size,
        tied_embeddings=shape.tied_embeddings,
        mlp="gated" if shape.gated_mlp else "plain",
    )


def attention_width(shape: MoeShape) -> tuple[float, float]:
    """The attention core's width (the h of 2·s·h FLOPs per token and layer: heads × the mean
    of the query-key and value head widths) and its query-key head width. MLA: 128 heads of
    128 + 64 (RoPE) and values of 128 on DeepSeek-V3."""
    heads = float(shape.attention_heads)
    if shape.attention == "mla":
        qk = float(shape.head_dim + shape.qk_rope_head_dim)
        return heads * (qk + shape.value_head_dim) / 2.0, qk
    return heads * float(shape.head_dim), float(shape.head_dim)


def grouped_gemm_efficiency(
    tokens_per_expert: ArrayLike,
    shape: MoeShape,
    rates: tuple[ArrayLike, ArrayLike],
    *,
    fp8: bool = False,
) -> FloatArray:
    """The experts' grouped GEMMs' rate relative to a large GEMM's, by the experts' shape and
    the card's ridge point (`rates`: its large-GEMM FLOP/s and HBM bytes/s; engine.moe_kernels)."""
    return moe_kernels.grouped_gemm_efficiency(
        tokens_per_expert,
        float(shape.hidden_size),
        float(shape.expert_ffn),
        rates,
        in_bytes=FP8_BYTES if fp8 else BF16_BYTES,
        gated=shape.gated_mlp,
    )


def tokens_per_local_expert(shape: MoeShape, tokens: ArrayLike, ep: ArrayLike) -> FloatArray:
    """Tokens each of a card's experts gets per micro-batch when routing is uniform: the EP
    group's tokens × top-k spread over the E experts."""
    per_expert: FloatArray = (
        np.asarray(tokens, dtype=np.float64)
        * np.asarray(ep, dtype=np.float64)
        * shape.experts_per_token
        / shape.experts
    )
    return per_expert


def remote_nodes_per_token(nodes: ArrayLike, experts_per_token: int) -> FloatArray:
    """Other nodes a token's top-k experts sit on when the EP group spans `nodes` nodes
    (uniform routing): each other node is hit with probability 1 − (1 − 1/n)^k."""
    n = np.maximum(np.asarray(nodes, dtype=np.float64), 1.0)
    remote: FloatArray = (n - 1.0) * (1.0 - (1.0 - 1.0 / n) ** experts_per_token)
    return remote


def all_to_all_s(
    moe: MoeTraining,
    tokens: ArrayLike,
    ep: ArrayLike,
    tp: ArrayLike,
    links: tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike],
    *,
    passes: float,
    fp8: bool,
) -> FloatArray:
    """One micro-batch's dispatch and combine all-to-alls on one card, every MoE layer of the
    model (the caller takes its stage's share): forward (dispatch in FP8 under FP8 training,
    DeepSeek-V3 §3.3.2; combine in BF16), backward (both in BF16), one more forward with full
    recomputation. `tokens` are the card's tokens (sequence parallel: ÷ tp); `links` are NVLink
    and fabric bytes/s, the fabric's latency and the cards per node."""
    nvlink, fabric, latency, per_node = (np.asarray(x, dtype=np.float64) for x in links)
    shape = moe.shape
    ep_ = np.asarray(ep, dtype=np.float64)
    t = np.asarray(tp, dtype=np.float64)
    hidden, k = float(shape.hidden_size), float(shape.experts_per_token)
    dispatch = FP8_BYTES if fp8 else BF16_BYTES
    forward_values = dispatch + BF16_BYTES
    per_value = forward_values * (passes - 2.0) + 2.0 * BF16_BYTES  # bytes per token-value
    ranks_per_node = np.maximum(per_node / t, 1.0)
    nodes = np.ceil(ep_ / ranks_per_node)
    local_peers = np.minimum(ep_, ranks_per_node)
    token_values = np.asarray(tokens, dtype=np.float64) * hidden
    # Inside the node: the share of the top-k destinations on the node's other EP ranks.
    intra = token_values * k * (local_peers - 1.0) / ep_ * per_value / nvlink
    # Across nodes: one copy per remote node the token's experts sit on.
    remote = remote_nodes_per_token(nodes, shape.experts_per_token)
    inter = token_values * remote * per_value / fabric + 2.0 * (passes - 1.0) * latency
    seconds: FloatArray = np.where(
        ep_ > 1, np.where(nodes > 1, np.maximum(intra, inter), intra), 0.0
    )
    return seconds * shape.moe_layer_count


def permutation_bytes(moe: MoeTraining, tokens: ArrayLike, passes: float) -> FloatArray:
    """HBM bytes of the routing kernels (router softmax and top-k, permute, combine, and their
    gradients) of `tokens` tokens, every MoE layer (engine.moe_kernels). The caller takes its
    stage's share."""
    shape = moe.shape
    per_token = moe_kernels.routing_bytes_per_token(
        shape.hidden_size, shape.experts_per_token, shape.experts, passes
    )
    total: FloatArray = np.asarray(tokens, dtype=np.float64) * per_token * shape.moe_layer_count
    return total


def communication_sm_slowdown(
    moe: MoeTraining, exchange_s: ArrayLike, compute_s: ArrayLike
) -> FloatArray:
    """Seconds the compute loses while the all-to-all it hides holds COMMUNICATION_SM_SHARE of
    the SMs: the hidden time × share / (1 − share)."""
    hidden = np.minimum(np.asarray(exchange_s), moe.a2a_overlap * np.asarray(compute_s))
    lost: FloatArray = hidden * COMMUNICATION_SM_SHARE / (1.0 - COMMUNICATION_SM_SHARE)
    return lost


def active_matmul_params(moe: MoeTraining) -> float:
    """The active weights a token multiplies through (the input embedding is a lookup)."""
    return matmul_params_per_token(moe.shape)

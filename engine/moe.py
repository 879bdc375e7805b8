"""Mixture-of-experts shapes: total and active parameters, the experts a step reads, the KV cache.

One shape describes dense and MoE decoders alike: a dense model is ``experts=1``,
``experts_per_token=1``, no shared experts and every layer dense (``dense_layers=layers``), and
gives the dense counts exactly (a property test). Attention is multi-head or grouped-query
(``attention="gqa"``; MHA is ``kv_heads == attention_heads``) or DeepSeek's multi-head latent
attention (``"mla"``: queries and keys/values through low-rank projections, the KV cache holds
the compressed latent and the decoupled RoPE key). Norms and biases are left out (< 0.1 %).

Sources (docs/capacity-planning.md, "Mixture of experts"): DeepSeek-AI 2024, "DeepSeek-V3
Technical Report" (arXiv:2412.19437) §2.1 and its config.json; Jiang et al. 2024, "Mixtral of
Experts" (arXiv:2401.04088); the expected number of distinct experts a batch reads under
uniform routing, ``E·(1 − (1 − k/E)^tokens)``, is the occupancy expectation of tokens drawing
k of E experts each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

AttentionKind = Literal["gqa", "mla"]
ATTENTION_KINDS: tuple[str, ...] = ("gqa", "mla")
GATED_MATRICES = 3  # SwiGLU: gate, up and down projections
PLAIN_MATRICES = 2


@dataclass(frozen=True)
class MoeShape:
    """A decoder's shape; the MoE fields default to a dense model's."""

    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    ffn_hidden_size: int  # the dense layers' FFN width
    experts: int = 1  # routed experts per MoE layer
    experts_per_token: int = 1  # top-k
    shared_experts: int = 0  # always-active experts per MoE layer
    expert_ffn_hidden_size: int = 0  # one expert's FFN width (0: ffn_hidden_size)
    dense_layers: int | None = None  # leading layers with a dense FFN (None: all if 1 expert)
    attention: AttentionKind = "gqa"
    q_lora_rank: int = 0  # MLA: query compression (0: a full query projection)
    kv_lora_rank: int = 0  # MLA: the compressed KV latent the cache holds
    qk_rope_head_dim: int = 0  # MLA: the decoupled RoPE key per head (shared across heads)
    v_head_dim: int = 0  # MLA: value width per head (0: head_dim)
    gated_mlp: bool = True
    tied_embeddings: bool = False

    @property
    def is_moe(self) -> bool:
        return self.experts > 1 or self.shared_experts > 0

    @property
    def dense_layer_count(self) -> int:
        if self.dense_layers is not None:
            return self.dense_layers
        return self.layers if not self.is_moe else 0

    @property
    def moe_layer_count(self) -> int:
        return self.layers - self.dense_layer_count

    @property
    def expert_ffn(self) -> int:
        return self.expert_ffn_hidden_size or self.ffn_hidden_size

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim or self.head_dim


def check_shape(shape: MoeShape) -> dict[str, str]:
    """What is wrong with a shape, by field (empty when it is consistent)."""
    problems: dict[str, str] = {}
    if shape.attention not in ATTENTION_KINDS:
        problems["attention"] = f"one of {', '.join(ATTENTION_KINDS)}"
    if shape.experts_per_token > shape.experts:
        problems["experts_per_token"] = f"at most the {shape.experts} experts"
    if not 0 <= shape.dense_layer_count <= shape.layers:
        problems["dense_layers"] = f"between 0 and the {shape.layers} layers"
    if shape.attention == "gqa" and shape.attention_heads % shape.kv_heads:
        problems["kv_heads"] = "must divide attention_heads"
    if shape.attention == "mla" and shape.kv_lora_rank < 1:
        problems["kv_lora_rank"] = "multi-head latent attention needs kv_lora_rank >= 1"
    if shape.attention == "gqa" and (shape.kv_lora_rank or shape.q_lora_rank):
        problems["kv_lora_rank"] = "only for attention='mla'"
    return problems


def attention_params_per_layer(shape: MoeShape) -> float:
    """Weights of one layer's attention: Q, K, V and O projections (MLA: through its latents)."""
    h, heads = shape.hidden_size, shape.attention_heads
    out = heads * shape.value_head_dim * h
    if shape.attention == "gqa":
        return float(h * heads * shape.head_dim + 2 * h * shape.kv_heads * shape.head_dim + out)
    query_width = heads * (shape.head_dim + shape.qk_rope_head_dim)
    query = (
        h * shape.q_lora_rank + shape.q_lora_rank * query_width
        if shape.q_lora_rank
        else (h * query_width)
    )
    latent = h * (shape.kv_lora_rank + shape.qk_rope_head_dim)
    key_value = shape.kv_lora_rank * heads * (shape.head_dim + shape.value_head_dim)
    return float(query + latent + key_value + out)


def ffn_params(shape: MoeShape, width: int) -> float:
    """One FFN (a dense layer's or one expert's) of the given hidden width."""
    matrices = GATED_MATRICES if shape.gated_mlp else PLAIN_MATRICES
    return float(matrices * shape.hidden_size * width)


def expert_params(shape: MoeShape) -> float:
    """One expert's weights."""
    return ffn_params(shape, shape.expert_ffn)


def router_params(shape: MoeShape) -> float:
    """The gate of every MoE layer (hidden × experts each); none for a dense model."""
    return float(shape.moe_layer_count * shape.hidden_size * shape.experts) if shape.is_moe else 0.0


def embedding_params(shape: MoeShape) -> float:
    """Input embedding and output head (one matrix when tied)."""
    return float(shape.vocab_size * shape.hidden_size * (1 if shape.tied_embeddings else 2))


def _common_params(shape: MoeShape) -> float:
    """Every weight a token always uses: attention, dense FFNs, router, embeddings."""
    attention = shape.layers * attention_params_per_layer(shape)
    dense = shape.dense_layer_count * ffn_params(shape, shape.ffn_hidden_size)
    return attention + dense + router_params(shape) + embedding_params(shape)


def total_params(shape: MoeShape) -> float:
    """Every weight: what memory must hold."""
    per_layer = (shape.experts + shape.shared_experts) * expert_params(shape)
    if not shape.is_moe:
        per_layer = 0.0
    return _common_params(shape) + shape.moe_layer_count * per_layer


def active_params(shape: MoeShape) -> float:
    """The weights one token uses: the common ones, the shared and its top-k routed experts."""
    per_layer = (shape.experts_per_token + shape.shared_experts) * expert_params(shape)
    if not shape.is_moe:
        per_layer = 0.0
    return _common_params(shape) + shape.moe_layer_count * per_layer


def matmul_params_per_token(shape: MoeShape) -> float:
    """Active weights a token multiplies through (the input embedding is a lookup, not a
    product; a tied head is still one): 2 FLOPs each forward, 6 in training."""
    lookup = 0.0 if shape.tied_embeddings else shape.vocab_size * shape.hidden_size
    return active_params(shape) - lookup


def expected_experts_read(
    experts: int, experts_per_token: int, tokens: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Distinct routed experts a step's ``tokens`` touch per layer under uniform routing:
    ``E·(1 − (1 − k/E)^tokens)``: k for one token, all E for many."""
    count = np.asarray(tokens, dtype=np.float64)
    if experts <= 1:
        return np.where(count > 0, float(experts), 0.0)
    return experts * (1.0 - (1.0 - experts_per_token / experts) ** count)


def decode_params_read(shape: MoeShape, tokens: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Weights a step over ``tokens`` tokens reads: the common ones, the shared experts and
    the routed experts the tokens touch (the input embedding only by row, left out)."""
    if not shape.is_moe:
        return np.full_like(np.asarray(tokens, dtype=np.float64), matmul_params_per_token(shape))
    routed = expected_experts_read(shape.experts, shape.experts_per_token, tokens)
    per_token_experts = shape.experts_per_token + shape.shared_experts
    common = matmul_params_per_token(shape) - _experts_params(shape, per_token_experts)
    return common + _experts_params(shape, routed + shape.shared_experts)


def _experts_params(
    shape: MoeShape, experts_per_layer: float | npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Weights of ``experts_per_layer`` experts in every MoE layer."""
    per_layer = np.asarray(experts_per_layer, dtype=np.float64)
    return shape.moe_layer_count * per_layer * expert_params(shape)


def kv_values_per_token(shape: MoeShape) -> float:
    """Values the KV cache holds per token, all layers: K and V per KV head (GQA), or the
    compressed latent and the shared RoPE key (MLA)."""
    if shape.attention == "mla":
        return float(shape.layers * (shape.kv_lora_rank + shape.qk_rope_head_dim))
    return float(shape.layers * 2 * shape.kv_heads * shape.head_dim)

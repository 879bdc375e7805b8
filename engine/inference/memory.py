"""What a serving replica holds per card: weights, the KV cache and prefill activations.

- Weights: parameters × bytes per weight / tensor-parallel degree.
- KV cache per token: 2 (K and V) × layers × KV heads × head dimension × bytes per value
  (grouped-query attention: Ainslie et al. 2023; Llama-3-70B in bf16: 2·80·8·128·2 =
  327,680 bytes). Tensor parallelism splits the KV heads; with fewer KV heads than cards each
  card keeps a whole head (the head is replicated).
- Maximum concurrent sequences: the memory the engine gives the KV cache, divided by the KV
  bytes of a full context (the scheduler reserves the whole sequence up front, as
  TensorRT-LLM's default GUARANTEED_NO_EVICT policy does). TensorRT-LLM gives it a share of
  the memory left after the weights, one layer's prefill activations and the runtime's
  reserve (kv_cache_free_gpu_mem_fraction); vLLM and SGLang a share of the whole card, less
  the rest (gpu_memory_utilization, mem_fraction_static).

Sizes of weights and caches are decimal (1 GB = 1e9 bytes). A card's memory_gb is its
datasheet figure, which is binary: an "80 GB" H100 or A100 has 80 GiB (81,920 MiB of HBM, of
which nvidia-smi shows 81,559 MiB), a "141 GB" H200 about 140 GiB; so card capacity is read
as GiB (CARD_BYTES_PER_GB).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from engine.inference.precision import WEIGHT_FORMATS
from engine.memory import HEAD_DIM, ModelShape, activation_bytes_per_layer

BYTES_PER_GB = 1e9
CARD_BYTES_PER_GB = float(2**30)
# The formats a stored serving load may name (accounting.ServingLoad's choices: changing
# these tuples changes that model). The estimate also takes NVFP4 and MXFP4 (precision.py).
PRECISION_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
WEIGHT_PRECISIONS: tuple[str, ...] = tuple(PRECISION_BYTES)
KV_PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp8", "int8")
SERVING_WEIGHT_PRECISIONS: tuple[str, ...] = tuple(WEIGHT_FORMATS)


@dataclass(frozen=True)
class AttentionShape:
    """Layers, width and attention heads of a decoder; KV heads < heads means GQA.

    `vocab` (with `tied_embeddings`) tells the input embedding apart from the weights a step
    reads; `ffn_hidden` is informational here. Unknown (None): every parameter is read."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_hidden: int | None = None
    vocab: int | None = None
    tied_embeddings: bool = False

    def streamed_params(self, params: float) -> float:
        """Parameters a forward pass multiplies: all but an untied input embedding (its
        rows are looked up, not read whole)."""
        if self.vocab is None or self.tied_embeddings:
            return params
        return max(params - float(self.vocab) * self.hidden, params * 0.5)

    @classmethod
    def infer(cls, params: float) -> AttentionShape:
        """The training planner's GPT-3-like shape, with one KV head per head (no GQA).

        Without GQA the KV cache is the largest it can be for that shape, so an inferred
        shape never overstates how many sequences fit.
        """
        base = ModelShape.infer(params)
        return cls(base.layers, base.hidden, base.heads, base.heads, HEAD_DIM)


def kv_bytes_per_token(
    layers: ArrayLike, kv_heads: ArrayLike, head_dim: ArrayLike, kv_bytes: ArrayLike
) -> NDArray[np.float64]:
    """K and V of one token over all layers, for the whole model (all cards together)."""
    return (
        2.0
        * np.asarray(layers, np.float64)
        * np.asarray(kv_heads, np.float64)
        * np.asarray(head_dim, np.float64)
        * np.asarray(kv_bytes, np.float64)
    )


def kv_bytes_per_token_per_card(
    layers: ArrayLike,
    kv_heads: ArrayLike,
    head_dim: ArrayLike,
    kv_bytes: ArrayLike,
    tp: ArrayLike,
) -> NDArray[np.float64]:
    """One card's share of a token's KV cache: KV heads split over tp, at least one head."""
    heads_per_card = np.maximum(np.asarray(kv_heads, np.float64) / np.asarray(tp, np.float64), 1.0)
    return kv_bytes_per_token(layers, heads_per_card, head_dim, kv_bytes)


def weight_bytes_per_card(
    params: ArrayLike, weight_bytes: ArrayLike, tp: ArrayLike
) -> NDArray[np.float64]:
    return (
        np.asarray(params, np.float64)
        * np.asarray(weight_bytes, np.float64)
        / np.asarray(tp, np.float64)
    )


def prefill_activation_bytes(
    chunk_tokens: ArrayLike, hidden: ArrayLike, tp: ArrayLike
) -> NDArray[np.float64]:
    """One layer's live activations while a prefill chunk passes (attention scores not kept)."""
    return activation_bytes_per_layer(chunk_tokens, 1, hidden, 1, tp, recompute="selective")


def kv_budget_bytes(
    card_memory_gb: ArrayLike,
    usable_share: ArrayLike,
    weights_per_card: ArrayLike,
    activation_bytes: ArrayLike,
    reserve_bytes: ArrayLike = 0.0,
    share_of_free: bool = False,
) -> NDArray[np.float64]:
    """Bytes of KV cache a card holds: a share of what is left after the weights,
    activations and reserve (share_of_free), or a share of the card less those."""
    card = np.asarray(card_memory_gb, np.float64) * CARD_BYTES_PER_GB
    held = (
        np.asarray(weights_per_card, np.float64)
        + np.asarray(activation_bytes, np.float64)
        + np.asarray(reserve_bytes, np.float64)
    )
    share = np.asarray(usable_share, np.float64)
    budget: NDArray[np.float64] = (card - held) * share if share_of_free else card * share - held
    return budget


def max_batch(
    card_memory_gb: ArrayLike,
    usable_share: ArrayLike,
    weights_per_card: ArrayLike,
    activation_bytes: ArrayLike,
    kv_per_token_per_card: ArrayLike,
    context_tokens: ArrayLike,
    *,
    reserve_bytes: ArrayLike = 0.0,
    share_of_free: bool = False,
) -> NDArray[np.int64]:
    """Concurrent sequences of `context_tokens` whose KV cache fits beside the weights (>= 0)."""
    free = kv_budget_bytes(
        card_memory_gb,
        usable_share,
        weights_per_card,
        activation_bytes,
        reserve_bytes,
        share_of_free,
    )
    per_sequence = np.asarray(kv_per_token_per_card, np.float64) * np.asarray(
        context_tokens, np.float64
    )
    # Tiny epsilon so an exact fit is not lost to float noise.
    fits: NDArray[np.int64] = np.maximum(np.floor(free / per_sequence + 1e-9), 0).astype(np.int64)
    return fits

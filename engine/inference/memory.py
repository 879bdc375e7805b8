"""What a serving replica holds per card: weights, the KV cache and prefill activations.

- Weights: parameters × bytes per weight / tensor-parallel degree.
- KV cache per token: 2 (K and V) × layers × KV heads × head dimension × bytes per value
  (grouped-query attention: Ainslie et al. 2023; Llama-3-70B in bf16: 2·80·8·128·2 =
  327,680 bytes). Tensor parallelism splits the KV heads; with fewer KV heads than cards each
  card keeps a whole head (the head is replicated).
- Maximum concurrent sequences: the usable memory left after weights and one layer's prefill
  activations, divided by the KV bytes of a full context (the scheduler reserves the whole
  sequence up front, as TensorRT-LLM's default GUARANTEED_NO_EVICT policy does).

Sizes are decimal (1 GB = 1e9 bytes), as the catalog's memory_gb.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from engine.memory import HEAD_DIM, ModelShape, activation_bytes_per_layer

BYTES_PER_GB = 1e9
PRECISION_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
WEIGHT_PRECISIONS: tuple[str, ...] = tuple(PRECISION_BYTES)
KV_PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp8", "int8")


@dataclass(frozen=True)
class AttentionShape:
    """Layers, width and attention heads of a decoder; KV heads < heads means GQA."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int

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


def max_batch(
    card_memory_gb: ArrayLike,
    usable_share: ArrayLike,
    weights_per_card: ArrayLike,
    activation_bytes: ArrayLike,
    kv_per_token_per_card: ArrayLike,
    context_tokens: ArrayLike,
) -> NDArray[np.int64]:
    """Concurrent sequences of `context_tokens` whose KV cache fits beside the weights (>= 0)."""
    free = (
        np.asarray(card_memory_gb, np.float64) * BYTES_PER_GB * np.asarray(usable_share)
        - np.asarray(weights_per_card, np.float64)
        - np.asarray(activation_bytes, np.float64)
    )
    per_sequence = np.asarray(kv_per_token_per_card, np.float64) * np.asarray(
        context_tokens, np.float64
    )
    # Tiny epsilon so an exact fit is not lost to float noise.
    fits: NDArray[np.int64] = np.maximum(np.floor(free / per_sequence + 1e-9), 0).astype(np.int64)
    return fits

"""Serving a mixture-of-experts model: what its shape changes in memory and in the step.

- Memory: the weights of every expert (total parameters) live on the replica, split over its
  cards (each expert by tensor parallelism, or whole experts by expert parallelism), while
  with attention data parallel every card keeps the common weights; the KV cache is the shape's
  (engine.moe.kv_values_per_token): grouped-query K and V split over the cards by KV head, or
  multi-head latent attention's compressed latent and RoPE key, which every card of a
  tensor-parallel replica holds whole (it has no heads to split).
- A decode step reads the common weights (attention, dense FFNs, shared experts, router, head)
  and the routed experts the step's tokens touch (roofline.weight_read_seconds); its FLOPs are
  the active parameters' (2 per matrix parameter and token) plus attention.
- Expert parallelism (``expert_parallel``): whole experts spread over the replica's cards, so
  an expert's products keep their full width (tensor parallelism splits each expert tp ways).
  With tensor-parallel attention every card holds every token and the MoE output is
  all-reduced as a dense FFN's. With attention data parallel (``attention_data_parallel``,
  as DeepSeek, SGLang and TensorRT-LLM serve large MoEs) each card runs attention for its
  1/tp of the sequences with whole attention weights and no all-reduce; each MoE layer then
  dispatches and combines its tokens by all-to-all (roofline.alltoall_terms), each card
  sending its own tokens. A card prefills its own requests' prompts: the step waits for the
  busiest card (its common products at one card's compute), and the MoE pads every card's
  tokens to the busiest card's count (TensorRT-LLM's Deepseekv3MoE.compute_routed_output,
  tensorrt_llm/_torch/models/modeling_deepseekv3.py), so the routed products of a prompt
  run on tp times its tokens; the busiest card holds E[max] of tp Poisson counts of the
  prompts starting in a step (roofline.busiest_rank_prompt_tokens, step_terms.prompt_ranks).

Sources: docs/inference.md, "Mixture of experts".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.inference.memory import AttentionShape
from engine.moe import (
    MoeShape,
    active_params,
    check_shape,
    expert_params,
    kv_values_per_token,
    matmul_params_per_token,
    total_params,
)

# A workload's params must be the shape's total within this share (as for a dense shape).
PARAMS_TOLERANCE = 0.10
# Shape fields that must be whole numbers >= 1 (the others may be 0).
POSITIVE_FIELDS = (
    "layers",
    "hidden_size",
    "attention_heads",
    "kv_heads",
    "head_dim",
    "vocab_size",
    "ffn_hidden_size",
    "experts",
    "experts_per_token",
)


def attention_shape(shape: MoeShape) -> AttentionShape:
    """The dense serving model's view of the shape (layers, width, heads, vocabulary)."""
    return AttentionShape(
        layers=shape.layers,
        hidden=shape.hidden_size,
        heads=shape.attention_heads,
        kv_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        ffn_hidden=shape.ffn_hidden_size,
        vocab=shape.vocab_size,
        tied_embeddings=shape.tied_embeddings,
    )


def moe_errors(shape: MoeShape, params: float) -> dict[str, str]:
    """Field -> message for an MoE shape the serving model refuses; `params` must be its total."""
    errors = {
        key: "Must be a whole number of at least 1."
        for key in POSITIVE_FIELDS
        if int(getattr(shape, key)) < 1
    }
    if errors:
        return errors
    errors.update(check_shape(shape))
    if not errors:
        total = total_params(shape)
        if abs(params - total) > PARAMS_TOLERANCE * total:
            errors["params"] = (
                f"The MoE shape holds {total / 1e9:.1f}B parameters in all "
                f"({active_params(shape) / 1e9:.1f}B active per token): give the total."
            )
    return errors


def kv_values_per_token_per_card(
    shape: MoeShape, tp: int | float, attention_data_parallel: bool = False
) -> float:
    """KV values one card holds per token of the replica. Tensor-parallel attention: GQA
    splits its KV heads (a card keeps at least one); MLA's latent has no heads, so every card
    keeps it whole. Attention data parallel: each card holds the whole cache of its 1/tp of
    the sequences."""
    whole = kv_values_per_token(shape)
    if attention_data_parallel:
        return whole / float(tp)
    if shape.attention == "mla":
        return whole
    return whole * max(shape.kv_heads / float(tp), 1.0) / shape.kv_heads


def weight_params_per_card(
    shape: MoeShape, tp: int | float, attention_data_parallel: bool = False
) -> float:
    """Parameters one card holds: all of them split over tp (experts split or spread whole,
    the same bytes), or, attention data parallel, the common weights whole and 1/tp of the
    experts."""
    total = total_params(shape)
    if not attention_data_parallel:
        return total / float(tp)
    routed = shape.experts * routed_params_per_expert(shape)
    return total - routed + routed / float(tp)


def routed_params_per_expert(shape: MoeShape) -> float:
    """One routed expert of every MoE layer (0 for a dense model: nothing routed)."""
    return shape.moe_layer_count * expert_params(shape) if shape.is_moe else 0.0


def common_params_read(shape: MoeShape) -> float:
    """Weights every step reads whatever the routing: the active matrix parameters less the
    top-k routed experts (attention, dense FFNs, shared experts, router, the output head)."""
    return matmul_params_per_token(shape) - shape.experts_per_token * routed_params_per_expert(
        shape
    )


def attention_width(shape: MoeShape, decode: bool) -> float:
    """Per layer, the width w of attention's FLOPs: 4·w·context per decoded token, 2·w·prompt
    per prompt token (causal). GQA: heads × head_dim. MLA decodes against the latent
    (absorbed: scores over kv_lora_rank + rope, values over kv_lora_rank) and prefills with
    full heads (scores over head_dim + rope, values over v_head_dim)."""
    heads = shape.attention_heads
    if shape.attention != "mla":
        return float(heads * shape.head_dim)
    if decode:
        return heads * (shape.kv_lora_rank + shape.qk_rope_head_dim / 2.0)
    return heads * (shape.head_dim + shape.qk_rope_head_dim + shape.value_head_dim) / 2.0


def decode_flops_per_token(shape: MoeShape, context_tokens: float) -> float:
    """FLOPs of one decoded token attending to `context_tokens`: 2 per active matrix
    parameter (the top-k and shared experts, not all) plus attention's 4·w·context a layer."""
    attention = 4.0 * shape.layers * attention_width(shape, decode=True) * context_tokens
    return 2.0 * matmul_params_per_token(shape) + attention


def moe_shape_of(model: Mapping[str, Any]) -> MoeShape | None:
    """The MoE shape of a published-runs model record (its "moe" part), None for a dense one."""
    moe = model.get("moe")
    if not moe:
        return None
    return MoeShape(
        layers=int(model["layers"]),
        hidden_size=int(model["hidden"]),
        attention_heads=int(model["heads"]),
        kv_heads=int(model["kv_heads"]),
        head_dim=int(model["head_dim"]),
        vocab_size=int(model["vocab"]),
        ffn_hidden_size=int(model["ffn_hidden"]),
        experts=int(moe["experts"]),
        experts_per_token=int(moe["experts_per_token"]),
        shared_experts=int(moe.get("shared_experts", 0)),
        expert_ffn_hidden_size=int(moe.get("expert_ffn_hidden", 0)),
        dense_layers=int(moe.get("dense_layers", 0)),
        attention=moe.get("attention", "gqa"),
        q_lora_rank=int(moe.get("q_lora_rank", 0)),
        kv_lora_rank=int(moe.get("kv_lora_rank", 0)),
        qk_rope_head_dim=int(moe.get("qk_rope_head_dim", 0)),
        v_head_dim=int(moe.get("v_head_dim", 0)),
        tied_embeddings=bool(model.get("tied_embeddings", False)),
    )


def run_fields(run: Mapping[str, Any], model: Mapping[str, Any]) -> dict[str, Any]:
    """The InferenceWorkload fields a published run of an MoE model adds (none for a dense
    one): its shape in place of the dense one, and the run's expert/attention layout."""
    shape = moe_shape_of(model)
    if shape is None:
        return {}
    layout = run.get("moe_parallelism") or {}
    return {
        "shape": None,
        "moe": shape,
        "expert_parallel": bool(layout.get("expert_parallel", False)),
        "attention_data_parallel": bool(layout.get("attention_data_parallel", False)),
    }

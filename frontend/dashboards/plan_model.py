"""The model a plan trains, in the plan page's words: its parameters (a mixture of experts' total
and active ones, "671 B total · 37.55 B active"), its shape, the degrees it fixes, and the
expert-parallel degree of each option of a mixture.

Read from the stored workload with the engine's own reading of it
(engine.capacity.workload.workload_from_spec), so the page names the counts the figures rest
on: memory holds the total, the FLOPs count the active parameters (docs/capacity-planning.md,
"Mixture of experts").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.capacity import TrainingWorkload
from engine.capacity.workload import shape_from_spec, workload_from_spec
from engine.memory import ModelShape
from engine.moe import MoeShape, active_params, total_params

BILLION = 1e9
SPLIT_HEADING = "TP × PP × DP"
# Degrees a plan may fix: (workload key, label).
FIXED_DEGREES = (
    ("tp_degree", "TP"),
    ("pp_degree", "PP"),
    ("vp_degree", "VP"),
    ("cp_degree", "CP"),
    ("dp_degree", "DP"),
    ("ep_degree", "EP"),
)


def billions(count: float) -> str:
    return f"{count / BILLION:,.4g} B"


def _given_shape(workload: Mapping[str, Any]) -> ModelShape | None:
    try:
        return shape_from_spec(workload)
    except (TypeError, ValueError):  # a stored workload from before a field existed
        return None


def trained(workload: Mapping[str, Any]) -> TrainingWorkload | None:
    """The engine's reading of a stored workload (None: one it cannot read any more)."""
    try:
        return workload_from_spec(workload)
    except (KeyError, TypeError, ValueError):  # PlannerInputError is a ValueError
        return None


def mixture_of(workload: Mapping[str, Any]) -> MoeShape | None:
    """The mixture of experts a plan trains (by catalog name or by shape); None: dense."""
    engine_workload = trained(workload) if workload else None
    return engine_workload.moe if engine_workload is not None else None


def params_summary(workload: Mapping[str, Any]) -> str:
    """ "DeepSeek-V3: 671 B total · 37.55 B active parameters", "175 B parameters"."""
    name = f"{workload['model']}: " if workload.get("model") else ""
    engine_workload = trained(workload)
    if engine_workload is not None and engine_workload.moe is not None:
        total, active = engine_workload.params, engine_workload.flops_params
        return f"{name}{billions(total)} total · {billions(active)} active parameters"
    if engine_workload is not None and workload.get("model"):
        return f"{name}{billions(engine_workload.params)} parameters"  # the published count
    shape = _given_shape(workload)
    return f"{billions(workload.get('model_params') or (shape.params if shape else 0))} parameters"


def model_summary(workload: Mapping[str, Any]) -> str:
    """ "175 B parameters, 300 B tokens" (or total FLOPs when the plan gives those); without
    model_params, the given shape's own count; a mixture's total and active parameters."""
    params = params_summary(workload)
    if workload.get("tokens"):
        return f"{params}, {workload['tokens'] / BILLION:,.4g} B tokens"
    return f"{params}, {workload.get('total_flops', 0):.3g} FLOPs"


def _attention_text(moe: MoeShape) -> str:
    if moe.attention == "mla":
        query = f", query rank {moe.q_lora_rank:,}" if moe.q_lora_rank else ""
        return f", latent attention (KV rank {moe.kv_lora_rank:,}{query})"
    if moe.kv_heads != moe.attention_heads:
        return f" ({moe.kv_heads} KV)"
    return ""


def moe_shape_summary(moe: MoeShape, catalog_name: str | None = None) -> str:
    """ "61 layers × 7,168 hidden, 128 heads, latent attention (…), 256 routed experts, top 8,
    + 1 shared, gated FFN 2,048 wide each, first 3 layers dense (18,432 wide), …"."""
    shared = f" + {moe.shared_experts} shared" if moe.shared_experts else ""
    mlp = "gated" if moe.gated_mlp else "plain"
    dense = ""
    if moe.dense_layer_count:
        dense = f", first {moe.dense_layer_count} layers dense ({moe.ffn_hidden_size:,} wide)"
    tied = "tied" if moe.tied_embeddings else "untied"
    source = f"by {catalog_name}'s published shape" if catalog_name else "by the shape"
    return (
        f"{moe.layers} layers × {moe.hidden_size:,} hidden, {moe.attention_heads} heads"
        f"{_attention_text(moe)}, {moe.experts} routed experts, top {moe.experts_per_token}"
        f"{shared}, {mlp} FFN {moe.expert_ffn:,} wide each{dense}, vocabulary "
        f"{moe.vocab_size:,} ({tied}): {billions(total_params(moe))} total, "
        f"{billions(active_params(moe))} active {source}"
    )


def shape_summary(workload: Mapping[str, Any], results: Mapping[str, Any] | None) -> str:
    """The model's shape as the plan gives it (or as the planner inferred it from N)."""
    moe = mixture_of(workload)
    if moe is not None:
        return moe_shape_summary(moe, workload.get("model"))
    shape = _given_shape(workload)
    if shape is None:
        inferred = (results or {}).get("model_shape") or {}
        if not inferred.get("layers"):
            return "inferred GPT-3-like from the parameters"
        return (
            f"{inferred['layers']} layers × {inferred['hidden']:,} hidden, {inferred['heads']} "
            "heads: inferred GPT-3-like from the parameters"
        )
    kv = f" ({shape.kv_heads} KV)" if shape.kv_heads and shape.kv_heads != shape.heads else ""
    mlp = f"{shape.mlp} MLP {shape.ffn:,} wide"
    vocab = "embeddings not counted"
    if shape.vocab:
        tied = "tied" if shape.tied_embeddings else "untied"
        vocab = f"vocabulary {shape.vocab:,} ({tied})"
    model = workload.get("model")
    source = f"by {model}'s published shape" if model else "by the shape"
    return (
        f"{shape.layers} layers × {shape.hidden:,} hidden, {shape.heads} heads{kv}, {mlp}, "
        f"{vocab}: {shape.params / BILLION:,.4g} B parameters {source}"
    )


def split_summary(workload: Mapping[str, Any]) -> str:
    """ "fixed TP 8 · PP 4, the rest chosen per option, micro-batch 1 sequence"."""
    fixed = [f"{label} {workload[key]}" for key, label in FIXED_DEGREES if workload.get(key)]
    text = "split chosen per option"
    if fixed:
        text = f"fixed {' · '.join(fixed)}, the rest chosen per option"
    micro = workload.get("micro_batch")
    if micro:
        text += f", micro-batch {micro} sequence{'s' if micro != 1 else ''}"
    return text


def with_expert_parallel(rows: list[dict[str, Any]], headers: list[dict[str, Any]]) -> None:
    """A mixture's options: the split column names each option's expert-parallel degree
    ("8 × 4 × 64 · EP 8"), where the stored row carries it."""
    for header in headers:
        if header["key"] == "split":
            header["label"] = f"{SPLIT_HEADING} · EP"
    for row in rows:
        ep = row.get("ep")
        if row.get("split") and ep:
            row["split"] = f"{row['split']} · EP {int(ep)}"

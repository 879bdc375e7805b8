"""A mixture of experts entered by its shape in the inference estimate (docs/inference.md,
"Mixture of experts"): the fields the training estimate takes (planner.api.shape_serializers),
checked for serving and built into the engine's shape (engine.moe.MoeShape).

`experts` > 1 (or `shared_experts` > 0) with `layers`, `hidden_size`, `attention_heads`,
`vocab_size`, `experts_per_token` and `expert_ffn_hidden_size` is a mixture; `kv_heads` and
`head_dim` default as in training (the heads, hidden ÷ heads), `dense_layers` to 0 and
`attention` to "gqa". A dense field that means nothing for the mixture is refused naming
what is meant instead: `ffn_hidden_size` with no dense layers (expert_ffn_hidden_size),
`kv_heads` with latent attention (its cache holds kv_lora_rank), the latent ranks with
grouped-query attention. `experts` = 1 with the dense values of the others is a dense model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.capacity.workload import (
    DENSE_FFN_MISUSED,
    MOE_FIELD_ALONE,
    MOE_NEEDS,
    MOE_REQUIRED_FIELDS,
    MOE_SHAPE_FIELDS,
    moe_shape_from_spec,
    spec_is_moe,
)
from engine.inference.moe_serving import PARAMS_TOLERANCE, moe_errors
from engine.limits import range_error
from engine.model_catalog import MOE_FIELDS, SHAPE_FIELDS
from engine.moe import MoeShape, active_params, total_params

# The mixture's fields besides the dense shape's (the training API's names).
MOE_INPUT_FIELDS: tuple[str, ...] = tuple(f for f in MOE_SHAPE_FIELDS if f != "head_dim")
# A dense model's value of each (given so, a field says nothing about a mixture).
DENSE_VALUES: dict[str, int | str] = {**MOE_FIELDS, "attention": "gqa"}
LATENT_FIELDS: tuple[str, ...] = ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim")
KV_HEADS_WITH_MLA = (
    "Multi-head latent attention has no KV heads: its cache holds kv_lora_rank (the "
    "compressed latent) and qk_rope_head_dim per layer. Leave kv_heads out; attention_heads "
    "counts the query heads."
)
LATENT_WITHOUT_MLA = (
    'Only with attention "mla" (multi-head latent attention\'s low-rank widths); a '
    "grouped-query model's KV cache is kv_heads × head_dim."
)


def moe_fields_given(attrs: Mapping[str, Any]) -> list[str]:
    """The MoE fields given with another value than a dense model's."""
    return [
        key
        for key in MOE_INPUT_FIELDS
        if attrs.get(key) is not None and attrs[key] != DENSE_VALUES[key]
    ]


def _misused_fields(attrs: Mapping[str, Any]) -> dict[str, str]:
    """Dense or attention fields given that mean nothing for this mixture."""
    mla = attrs.get("attention") == "mla"
    errors: dict[str, str] = {}
    if attrs.get("ffn_hidden_size") is not None and not attrs.get("dense_layers"):
        errors["ffn_hidden_size"] = DENSE_FFN_MISUSED
    if mla and attrs.get("kv_heads") is not None:
        errors["kv_heads"] = KV_HEADS_WITH_MLA
    if not mla:
        errors |= {key: LATENT_WITHOUT_MLA for key in LATENT_FIELDS if attrs.get(key)}
    return errors


def moe_input_errors(attrs: Mapping[str, Any]) -> dict[str, str] | None:
    """Field -> why for a mixture of experts entered by its shape; None when the input is no
    mixture (the dense checks apply), empty when the mixture is fine."""
    if not spec_is_moe(attrs):
        given = moe_fields_given(attrs)
        return dict.fromkeys(given, MOE_FIELD_ALONE) if given else None
    if errors := _misused_fields(attrs):
        return errors
    if missing := [key for key in MOE_REQUIRED_FIELDS if attrs.get(key) is None]:
        return dict.fromkeys(missing, MOE_NEEDS)
    shape = moe_shape_from_spec(attrs)
    total = total_params(shape)
    if errors := moe_errors(shape, total):
        return errors
    if message := range_error("model_params", total):
        return {"layers": f"The mixture has {total:.4g} parameters in all. {message}"}
    return _params_errors(attrs, shape)


def _params_errors(attrs: Mapping[str, Any], shape: MoeShape) -> dict[str, str]:
    """model_params, when given, must be the shape's total within the tolerance."""
    if attrs.get("model_params") is None:
        return {}
    given, total = float(attrs["model_params"]), total_params(shape)
    if abs(given - total) <= PARAMS_TOLERANCE * total:
        return {}
    return {
        "model_params": f"{given:.4g} parameters given, but the mixture's shape has "
        f"{total:.4g} in all ({active_params(shape):.4g} active per token): give its total "
        "or leave model_params out."
    }


def entered_moe_shape(attrs: Mapping[str, Any]) -> MoeShape:
    """The engine's shape of a checked mixture (moe_input_errors found nothing)."""
    return moe_shape_from_spec(attrs)


def shown_shape(shape: MoeShape) -> dict[str, int | None]:
    """The seven shape fields as results show them (None: means nothing for this mixture:
    the KV heads of latent attention, the dense FFN width without dense layers)."""
    values: dict[str, int | None] = {
        "layers": shape.layers,
        "hidden_size": shape.hidden_size,
        "attention_heads": shape.attention_heads,
        "kv_heads": None if shape.attention == "mla" else shape.kv_heads,
        "head_dim": shape.head_dim,
        "ffn_hidden_size": shape.ffn_hidden_size if shape.dense_layer_count else None,
        "vocab_size": shape.vocab_size,
    }
    return {key: values[key] for key in SHAPE_FIELDS}


def moe_fields_of(shape: MoeShape) -> dict[str, int | str]:
    """The MoE fields as the API names them (as a catalog model's, CatalogModel.moe_fields)."""
    fields: dict[str, int | str] = {key: int(getattr(shape, key)) for key in MOE_FIELDS}
    return {**fields, "dense_layers": shape.dense_layer_count, "attention": shape.attention}

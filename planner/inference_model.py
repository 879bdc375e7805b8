"""Which model an inference estimate serves, and where its shape came from.

Three ways in (docs/inference.md, "Choosing a model"):

- `model`: a name from the model catalog (engine.model_catalog): the published shape and
  parameter count (shape_source "catalog");
- the shape (`layers`, `hidden_size`, `attention_heads`, `kv_heads`, `head_dim`,
  `ffn_hidden_size`, `vocab_size`): N is `model_params` when given (checked against the
  shape's own count, 10 %), else that count, with `mlp_kind` (default gated, SwiGLU) and
  `tied_embeddings` (default no) (shape_source "entered"); `ffn_hidden_size` and
  `vocab_size` only count N, so they may be left out when `model_params` is given;
- `model_params` alone: a GPT-3-like shape with one KV head per query head is inferred, the
  largest KV cache for that size (shape_source "inferred");
- a mixture of experts by its shape (`experts` > 1 with the training API's MoE fields,
  planner.inference_moe_shape): N is its total, counted from the shape, and the active
  parameters are counted too (shape_source "entered").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.capacity.workload import spec_is_moe
from engine.inference.memory import AttentionShape
from engine.limits import range_error
from engine.memory import FFN_PER_HIDDEN, ModelShape, shape_params_error
from engine.model_catalog import SHAPE_FIELDS, CatalogModel, find_model
from engine.moe import MoeShape, active_params, total_params
from planner.inference_moe_shape import (
    MOE_INPUT_FIELDS,
    entered_moe_shape,
    moe_fields_of,
    moe_input_errors,
    shown_shape,
)

ATTENTION_FIELDS: tuple[str, ...] = (
    "layers",
    "hidden_size",
    "attention_heads",
    "kv_heads",
    "head_dim",
)
COUNT_FIELDS: tuple[str, ...] = ("ffn_hidden_size", "vocab_size")  # they only count N
COUNT_OPTIONS: tuple[str, ...] = ("mlp_kind", "tied_embeddings")
DEFAULT_MLP_KIND = "gated"  # every catalog model but GPT-3 and Falcon: Llama, Mistral, Qwen
SHAPE_SOURCES: tuple[str, ...] = ("catalog", "entered", "inferred")

WHOLE_SHAPE = (
    "Give the whole shape: layers, hidden_size, attention_heads, kv_heads, head_dim, "
    "ffn_hidden_size and vocab_size (the last two may be left out with model_params)."
)
NOTHING_GIVEN = (
    "Give model (a name from the model catalog), the shape (layers, hidden_size, "
    "attention_heads, kv_heads, head_dim, ffn_hidden_size, vocab_size), a mixture of experts' "
    "shape (with experts, experts_per_token, expert_ffn_hidden_size) or model_params."
)
INFERRED = (
    "inferred from model_params: GPT-3-like, one KV head per query head (the largest KV cache "
    "for that size); pick the model from the catalog or enter its shape"
)


@dataclass(frozen=True)
class ServedModel:
    """The model of one estimate: N, the shape shown, the engine's attention shape (None:
    the engine infers it from N) and each one's provenance."""

    name: str | None
    params: float
    shape: dict[str, int | None]
    shape_source: str
    attention: AttentionShape | None
    provenance: dict[str, str]
    moe: MoeShape | None = None  # a mixture of experts: the engine's shape instead of attention
    active_params: float | None = None  # None: a dense model, every parameter active
    moe_fields: dict[str, int | str] | None = None  # the MoE fields as the API names them


def _given(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> list[str]:
    return [key for key in keys if attrs.get(key) is not None]


def counted_shape(attrs: Mapping[str, Any]) -> ModelShape:
    """The training planner's shape of entered fields, to count N (engine.memory)."""
    return ModelShape(
        layers=int(attrs["layers"]),
        hidden=int(attrs["hidden_size"]),
        heads=int(attrs["attention_heads"]),
        kv_heads=int(attrs["kv_heads"]),
        ffn_hidden=int(attrs["ffn_hidden_size"]),
        vocab=int(attrs["vocab_size"]),
        tied_embeddings=bool(attrs.get("tied_embeddings") or False),
        mlp=attrs.get("mlp_kind") or DEFAULT_MLP_KIND,
    )


def model_input_errors(attrs: Mapping[str, Any]) -> dict[str, str]:
    """Field -> why, for a model given twice, a shape given in part or impossible, or N and
    the shape's count more than 10 % apart. Empty when the model is fine."""
    shape_given = _given(attrs, SHAPE_FIELDS)
    extras = [key for key in _given(attrs, COUNT_OPTIONS) if attrs[key] is not False]
    if attrs.get("model"):
        moe_given = _given(attrs, MOE_INPUT_FIELDS)
        clash = [*shape_given, *extras, *moe_given, *_given(attrs, ("model_params",))]
        message = "The catalog model sets the shape and the parameters: give model or these."
        return dict.fromkeys(clash, message)
    if (moe_errors := moe_input_errors(attrs)) is not None:
        return moe_errors
    if not shape_given:
        if extras:
            return dict.fromkeys(extras, "Give it with the shape (layers, hidden_size, …).")
        return {} if attrs.get("model_params") is not None else {"model_params": NOTHING_GIVEN}
    has_params = attrs.get("model_params") is not None
    needed = ATTENTION_FIELDS if has_params else (*ATTENTION_FIELDS, *COUNT_FIELDS)
    if missing := [key for key in needed if attrs.get(key) is None]:
        return dict.fromkeys(missing, WHOLE_SHAPE)
    heads, kv_heads = int(attrs["attention_heads"]), int(attrs["kv_heads"])
    if kv_heads > heads or heads % kv_heads:
        return {"kv_heads": f"Must divide attention_heads ({heads})."}
    if not all(attrs.get(key) is not None for key in COUNT_FIELDS):
        return {}  # N entered; the shape cannot count its own
    shape = counted_shape(attrs)
    if errors := shape.errors():
        return errors
    if message := range_error("model_params", shape.params):
        return {"layers": f"The shape has {shape.params:.4g} parameters. {message}"}
    if has_params and (message := shape_params_error(float(attrs["model_params"]), shape)):
        return {"model_params": message}
    return {}


def _attention(shape: Mapping[str, int | None], tied_embeddings: bool) -> AttentionShape:
    """The engine's shape: the attention, and what it needs of the rest (vocabulary, ties)."""
    layers, hidden, heads, kv_heads, head_dim = (int(shape[key] or 0) for key in ATTENTION_FIELDS)
    return AttentionShape(
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        ffn_hidden=shape.get("ffn_hidden_size"),
        vocab=shape.get("vocab_size"),
        tied_embeddings=tied_embeddings,
    )


def _from_catalog(name: str) -> ServedModel:
    model = find_model(name)
    shape: dict[str, int | None] = dict(model.shape())
    if model.is_moe:
        return _moe_from_catalog(model, shape)
    return ServedModel(
        name=model.name,
        params=model.params,
        shape=shape,
        shape_source="catalog",
        attention=_attention(shape, model.tied_embeddings),
        provenance={
            "shape": f"model catalog: {model.source}",
            "model_params": f"model catalog: {model.name}'s published count",
        },
    )


def _moe_from_catalog(model: CatalogModel, shape: dict[str, int | None]) -> ServedModel:
    """A mixture of experts: memory holds every expert (total), a step reads the experts its
    tokens route to (engine.inference.moe_serving); both counts shown."""
    return ServedModel(
        name=model.name,
        params=model.total_params(),
        shape=shape,
        shape_source="catalog",
        attention=None,
        provenance={
            "shape": f"model catalog: {model.source}",
            "model_params": f"model catalog: {model.name}'s total, counted from its shape",
            "active_params": f"model catalog: {model.name}'s active per token, counted",
        },
        moe=model.moe_shape(),
        active_params=model.active_params(),
        moe_fields=model.moe_fields(),
    )


def _entered(data: Mapping[str, Any]) -> ServedModel:
    shape = {key: (None if data.get(key) is None else int(data[key])) for key in SHAPE_FIELDS}
    if data.get("model_params") is not None:
        params, params_source = float(data["model_params"]), "entered"
    else:
        counted = counted_shape(data)
        params = float(counted.params)
        tied = "tied" if counted.tied_embeddings else "untied"
        params_source = f"counted from the shape ({counted.mlp} MLP, {tied} embeddings)"
    return ServedModel(
        name=None,
        params=params,
        shape=shape,
        shape_source="entered",
        attention=_attention(shape, bool(data.get("tied_embeddings"))),
        provenance={"shape": "entered", "model_params": params_source},
    )


def _entered_moe(data: Mapping[str, Any]) -> ServedModel:
    """A mixture of experts by its shape: N its total (every expert, what memory holds), the
    active parameters what one token uses (engine.moe), both counted from the shape."""
    shape = entered_moe_shape(data)
    counted = "counted from the mixture's shape"
    entered = " (model_params entered agrees within 10 %)" if data.get("model_params") else ""
    return ServedModel(
        name=None,
        params=total_params(shape),
        shape=shown_shape(shape),
        shape_source="entered",
        attention=None,
        provenance={
            "shape": "entered (a mixture of experts)",
            "model_params": f"{counted}: every expert{entered}",
            "active_params": f"{counted}: the shared and top-k routed experts and the rest",
        },
        moe=shape,
        active_params=active_params(shape),
        moe_fields=moe_fields_of(shape),
    )


def _inferred(params: float) -> ServedModel:
    attention = AttentionShape.infer(params)
    shape: dict[str, int | None] = {
        "layers": attention.layers,
        "hidden_size": attention.hidden,
        "attention_heads": attention.heads,
        "kv_heads": attention.kv_heads,
        "head_dim": attention.head_dim,
        "ffn_hidden_size": FFN_PER_HIDDEN * attention.hidden,
        "vocab_size": None,  # not inferred: N is taken as given
    }
    return ServedModel(
        name=None,
        params=float(params),
        shape=shape,
        shape_source="inferred",
        attention=None,
        provenance={"shape": INFERRED, "model_params": "entered"},
    )


def served_model(data: Mapping[str, Any]) -> ServedModel:
    """The model of checked inputs (model_input_errors found nothing)."""
    if data.get("model"):
        return _from_catalog(str(data["model"]))
    if spec_is_moe(data):
        return _entered_moe(data)
    if any(data.get(key) is not None for key in SHAPE_FIELDS):
        return _entered(data)
    return _inferred(float(data["model_params"]))

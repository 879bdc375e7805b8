"""The model catalog: decoder models by name, with their published shapes and sources.

``engine/data/model_catalog.json`` holds each model's shape as its config.json (or paper)
publishes it, under the API's field names, with its published parameter count and source.
A mixture-of-experts entry adds its experts, top-k, shared experts, expert width, leading
dense layers and attention kind (MLA with its low-rank widths) and its published active
parameters; ``CatalogModel.moe_shape`` gives the engine.moe shape, which counts total and
active parameters for dense and MoE entries alike. A lookup is by name or alias, ignoring
case (and spaces or underscores for hyphens); an unknown name is refused naming the closest
names, a name listed as unsupported naming why. Pure Python: no Django (docs/inference.md,
"Choosing a model"; docs/capacity-planning.md, "Mixture of experts").
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from engine.limits import EngineInputError
from engine.memory import MLP_KINDS, MlpKind, ModelShape
from engine.moe import ATTENTION_KINDS, AttentionKind, MoeShape, active_params, check_shape
from engine.moe import total_params as moe_total_params

CATALOG_PATH = Path(__file__).resolve().parent / "data" / "model_catalog.json"
SCHEMA = 1
# The shape a caller may enter instead of a catalog name (the API's field names).
SHAPE_FIELDS: tuple[str, ...] = (
    "layers",
    "hidden_size",
    "attention_heads",
    "kv_heads",
    "head_dim",
    "ffn_hidden_size",
    "vocab_size",
)
# A mixture-of-experts entry's fields beyond the dense shape (integers >= 0; experts and
# experts_per_token >= 1), with the dense model's values.
MOE_FIELDS: dict[str, int] = {
    "experts": 1,
    "experts_per_token": 1,
    "shared_experts": 0,
    "expert_ffn_hidden_size": 0,
    "dense_layers": 0,
    "q_lora_rank": 0,
    "kv_lora_rank": 0,
    "qk_rope_head_dim": 0,
    "v_head_dim": 0,
}
# How a publisher counts active parameters: every weight a token uses, or without the input
# embedding (a lookup; OpenAI's gpt-oss model card).
ACTIVE_COUNTS: tuple[str, ...] = ("all", "without_input_embedding")
MOE_NOT_HERE = (
    "a mixture-of-experts model: its active and total parameters differ, which this "
    "calculation does not take"
)
CLOSE_NAMES = 5  # names suggested for a misspelt model
CLOSE_CUTOFF = 0.6  # difflib similarity below which a name is not suggested


class UnknownModelError(EngineInputError):
    """A model name the catalog does not hold (or holds as not modeled); keyed `model`."""

    def __init__(self, message: str) -> None:
        super().__init__({"model": message})


@dataclass(frozen=True)
class CatalogModel:
    """One decoder: the published shape, parameter count and where they come from; a
    mixture of experts also its experts, attention kind and published active count."""

    name: str
    params: float
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    ffn_hidden_size: int
    vocab_size: int
    mlp_kind: MlpKind
    tied_embeddings: bool
    source: str
    aliases: tuple[str, ...] = ()
    experts: int = 1
    experts_per_token: int = 1
    shared_experts: int = 0
    expert_ffn_hidden_size: int = 0
    dense_layers: int = 0
    attention: AttentionKind = "gqa"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    published_active_params: float | None = None  # None: a dense model, all active
    active_params_counts: str = "all"

    @property
    def is_moe(self) -> bool:
        return self.experts > 1 or self.shared_experts > 0

    def moe_shape(self) -> MoeShape:
        """The engine.moe shape: a dense entry is one expert with every layer dense."""
        return MoeShape(
            layers=self.layers,
            hidden_size=self.hidden_size,
            attention_heads=self.attention_heads,
            kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            vocab_size=self.vocab_size,
            ffn_hidden_size=self.ffn_hidden_size,
            experts=self.experts,
            experts_per_token=self.experts_per_token,
            shared_experts=self.shared_experts,
            expert_ffn_hidden_size=self.expert_ffn_hidden_size,
            dense_layers=self.dense_layers if self.is_moe else None,
            attention=self.attention,
            q_lora_rank=self.q_lora_rank,
            kv_lora_rank=self.kv_lora_rank,
            qk_rope_head_dim=self.qk_rope_head_dim,
            v_head_dim=self.v_head_dim,
            gated_mlp=self.mlp_kind == "gated",
            tied_embeddings=self.tied_embeddings,
        )

    def total_params(self) -> float:
        """Every weight, counted from the shape (memory holds them all)."""
        return moe_total_params(self.moe_shape())

    def active_params(self) -> float:
        """The weights one token uses, counted from the shape (= total for a dense model)."""
        return active_params(self.moe_shape())

    def moe_fields(self) -> dict[str, int | str]:
        """The mixture-of-experts fields as the API takes them (empty for a dense model)."""
        if not self.is_moe:
            return {}
        fields: dict[str, int | str] = {key: int(getattr(self, key)) for key in MOE_FIELDS}
        return {**fields, "attention": self.attention}

    def shape(self) -> dict[str, int]:
        """The seven shape fields, as the API takes them."""
        return {key: int(getattr(self, key)) for key in SHAPE_FIELDS}

    def model_shape(self) -> ModelShape:
        """The dense planner's shape of this model (its own parameter count included); of a
        mixture of experts only the attention and the dense FFN: use moe_shape."""
        return ModelShape(
            layers=self.layers,
            hidden=self.hidden_size,
            heads=self.attention_heads,
            kv_heads=self.kv_heads,
            ffn_hidden=self.ffn_hidden_size,
            vocab=self.vocab_size,
            tied_embeddings=self.tied_embeddings,
            mlp=self.mlp_kind,
        )


@dataclass(frozen=True)
class ModelCatalog:
    models: tuple[CatalogModel, ...]
    unsupported: Mapping[str, str]  # name -> why it is not modeled yet

    def names(self) -> list[str]:
        return [model.name for model in self.models]


def normalized(name: str) -> str:
    """The lookup key: case folded, spaces and underscores as hyphens, trimmed."""
    return re.sub(r"[\s_]+", "-", name.strip()).casefold()


def parse_model(entry: Mapping[str, Any]) -> CatalogModel:
    """One catalog entry, checked: every shape field a positive integer, a known MLP kind."""
    name = str(entry["name"])
    for key in SHAPE_FIELDS:
        value = entry[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}: {key} must be a positive integer, not {value!r}")
    if entry["mlp_kind"] not in MLP_KINDS:
        raise ValueError(f"{name}: mlp_kind must be one of {', '.join(MLP_KINDS)}")
    if not str(entry.get("source", "")).strip():
        raise ValueError(f"{name}: a source is required")
    moe = _moe_entry(name, entry)
    return CatalogModel(
        name=name,
        params=float(entry["params"]),
        **_dense_stub(entry),
        source=str(entry["source"]),
        aliases=tuple(str(alias) for alias in entry.get("aliases", ())),
        **moe,
    )


def _moe_entry(name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """A mixture-of-experts entry's fields, checked (a dense entry gives none of them)."""
    given = [key for key in (*MOE_FIELDS, "attention", "active_params") if key in entry]
    if not given:
        return {}
    values: dict[str, Any] = {}
    for key, dense in MOE_FIELDS.items():
        value = entry.get(key, dense)
        least = 1 if key in ("experts", "experts_per_token") else 0
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{name}: {key} must be an integer >= {least}, not {value!r}")
        values[key] = value
    attention = entry.get("attention", "gqa")
    if attention not in ATTENTION_KINDS:
        raise ValueError(f"{name}: attention must be one of {', '.join(ATTENTION_KINDS)}")
    active = entry.get("active_params")
    if not isinstance(active, int | float) or isinstance(active, bool) or not active > 0:
        raise ValueError(f"{name}: active_params must be the published positive count")
    counts = entry.get("active_params_counts", "all")
    if counts not in ACTIVE_COUNTS:
        raise ValueError(f"{name}: active_params_counts must be one of {', '.join(ACTIVE_COUNTS)}")
    values.update(
        attention=cast(AttentionKind, attention),
        published_active_params=float(active),
        active_params_counts=str(counts),
    )
    model = CatalogModel(name=name, params=1.0, **_dense_stub(entry), source="-", **values)
    if problems := check_shape(model.moe_shape()):
        field, problem = next(iter(problems.items()))
        raise ValueError(f"{name}: {field} {problem}")
    if not model.is_moe:
        raise ValueError(f"{name}: a mixture of experts needs experts > 1 or shared_experts")
    return values


def _dense_stub(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The dense fields of an entry already checked by parse_model."""
    return {
        **{key: int(entry[key]) for key in SHAPE_FIELDS},
        "mlp_kind": cast(MlpKind, entry["mlp_kind"]),
        "tied_embeddings": bool(entry["tied_embeddings"]),
    }


def parse_catalog(document: Mapping[str, Any]) -> ModelCatalog:
    """The catalog of a parsed data file; a duplicate name or alias is refused."""
    if document.get("schema") != SCHEMA:
        raise ValueError(f"model catalog schema {document.get('schema')!r}, expected {SCHEMA}")
    models = tuple(parse_model(entry) for entry in document["models"])
    unsupported = {str(e["name"]): str(e["reason"]) for e in document.get("unsupported", ())}
    seen: set[str] = set()
    for key in [*unsupported, *(n for m in models for n in (m.name, *m.aliases))]:
        if normalized(key) in seen:
            raise ValueError(f"model catalog: {key} is listed twice")
        seen.add(normalized(key))
    return ModelCatalog(models=models, unsupported=unsupported)


@functools.cache
def load_catalog(path: Path = CATALOG_PATH) -> ModelCatalog:
    return parse_catalog(json.loads(path.read_text(encoding="utf-8")))


def close_names(name: str, catalog: ModelCatalog) -> list[str]:
    """Catalog names like `name`: similar spellings first, then names containing it."""
    by_key = {normalized(n): n for m in catalog.models for n in (m.name, *m.aliases)}
    canonical = {normalized(n): m.name for m in catalog.models for n in (m.name, *m.aliases)}
    key = normalized(name)
    similar = difflib.get_close_matches(key, list(by_key), n=CLOSE_NAMES, cutoff=CLOSE_CUTOFF)
    containing = [k for k in by_key if key and (key in k or k in key)]
    names = dict.fromkeys(canonical[k] for k in [*similar, *containing])
    return list(names)[:CLOSE_NAMES]


def find_model(
    name: str, catalog: ModelCatalog | None = None, *, allow_moe: bool = True
) -> CatalogModel:
    """The catalog model called `name` (or one of its aliases), ignoring case. A caller that
    does not model mixtures of experts passes `allow_moe=False`: one is refused saying why."""
    catalog = catalog or load_catalog()
    key = normalized(name)
    for model in catalog.models:
        if key in {normalized(n) for n in (model.name, *model.aliases)}:
            if model.is_moe and not allow_moe:
                raise UnknownModelError(f"{model.name} is {MOE_NOT_HERE}; enter a dense model.")
            return model
    for unsupported, reason in catalog.unsupported.items():
        if key == normalized(unsupported):
            raise UnknownModelError(f"{unsupported} is {reason}; enter a dense model's shape.")
    close = close_names(name, catalog)
    known = ", ".join(catalog.names())
    hint = f"Close names: {', '.join(close)}." if close else f"Known models: {known}."
    raise UnknownModelError(f"No model “{name}” in the model catalog. {hint}")

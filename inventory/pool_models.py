"""The catalog model a pool trains (or serves): its name checked, its parameter counts read.

A pool's `model_name` names an entry of the model catalog (engine/model_catalog.py). For a
mixture of experts the engine then scores MFU on the ACTIVE parameters (k × active × tokens/s)
and the data-parallel gradient all-reduce on the weights replicated over data parallelism
(the total less the routed experts, which expert parallelism shards: engine.moe_training);
a dense model's counts are all its total, as if `model_params` had been entered
(docs/efficiency-model.md, "Training pools that name their model").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.model_catalog import CatalogModel, UnknownModelError, find_model, load_catalog
from engine.moe_training import MoeTraining

# Publishers round their counts (671 B; DeepSeek-V3's card says 685 B with its MTP module):
# an entered model_params within this share of the catalog's total agrees with it.
PARAMS_TOLERANCE = 0.05
WHERE_NAMES_ARE = (
    "The names are those of the model catalog (the Inference page's model picker; "
    "docs/inference.md, “Choosing a model”)"
)


@dataclass(frozen=True)
class PoolModelCounts:
    """The parameter counts a named model is scored on (dense: all three are the total)."""

    name: str
    total: float  # every weight (model_params)
    active: float  # what one token multiplies through: MFU's N
    replicated: float  # what the data-parallel gradient all-reduce carries
    is_moe: bool


def catalog_model(name: str) -> CatalogModel:
    """The catalog model called `name` (or an alias), else UnknownModelError whose message
    names the close names (or every name) and where to find them."""
    try:
        return find_model(name, allow_moe=True)
    except UnknownModelError as error:
        message = error.errors["model"]
        if "Known models" not in message:
            message = f"{message} Known models: {', '.join(load_catalog().names())}."
        raise UnknownModelError(f"{message} {WHERE_NAMES_ARE}.") from None


def model_counts(name: str) -> PoolModelCounts | None:
    """The counts of the catalog model `name` (None: no name, or no longer in the catalog)."""
    if not name:
        return None
    try:
        model = find_model(name, allow_moe=True)
    except UnknownModelError:  # renamed or dropped since it was entered: as if unnamed
        return None
    if not model.is_moe:
        return PoolModelCounts(model.name, model.params, model.params, model.params, False)
    # Counted from the shape, as the Inference tab and serving loads count them.
    training = MoeTraining(model.moe_shape())
    total = model.total_params()
    return PoolModelCounts(
        model.name, total, model.active_params(), training.replicated_params, True
    )


def pool_model_errors(pool: Any) -> dict[str, str]:
    """Canonicalise a pool's `model_name`; field → message when the name is unknown or the
    pool's own `model_params` assumption disagrees with the catalog's total."""
    name = (getattr(pool, "model_name", "") or "").strip()
    pool.model_name = name
    if not name:
        return {}
    try:
        model = catalog_model(name)
    except UnknownModelError as error:
        return {"model_name": error.errors["model"]}
    pool.model_name = model.name
    assumptions = pool.assumptions if isinstance(pool.assumptions, dict) else {}
    entered = assumptions.get("model_params")
    if not isinstance(entered, int | float) or isinstance(entered, bool):
        return {}
    counts = model_counts(model.name)
    total = counts.total if counts else model.params
    if abs(float(entered) - total) <= PARAMS_TOLERANCE * total:
        return {}
    return {
        "assumptions": f"model_params {float(entered) / 1e9:.4g} B disagrees with "
        f"{model.name}'s {total / 1e9:.4g} B in all (model catalog): leave model_params out "
        "to take the catalog's count, or correct it."
    }

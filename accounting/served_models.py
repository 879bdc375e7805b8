"""The model a serving load names: a model catalog entry (engine/model_catalog.py, dense or a
mixture of experts), whose published total parameter count fills the load's `model_params`
or must agree with it. Analyses then read the catalog's shape for the served model's active
parameters and the bytes a decode step reads (planner/serving_factors.py;
docs/efficiency-model.md, "Serving pools").
"""

from __future__ import annotations

from typing import Any

from engine.model_catalog import CatalogModel, UnknownModelError
from inventory.pool_models import PARAMS_TOLERANCE, catalog_model


def params_disagree(entered: float, model: CatalogModel) -> str | None:
    """Why an entered parameter count is not the catalog model's total (None: it agrees)."""
    if abs(entered - model.params) <= PARAMS_TOLERANCE * model.params:
        return None
    return (
        f"{model.name} has {model.params / 1e9:.4g} B parameters in all (model catalog), "
        f"not {entered / 1e9:.4g} B: leave model_params empty to take the catalog's count, "
        "or correct it."
    )


def resolve_served_model(load: Any) -> dict[str, str]:
    """Fill a load that names a catalog model: its canonical name and, when left empty,
    `model_params` (the catalog's total). Field -> message when the name is unknown, the
    count disagrees, or neither a name nor a count is given."""
    name = (getattr(load, "model_name", "") or "").strip()
    load.model_name = name
    params = getattr(load, "model_params", None)
    if not name:
        if params is None:
            return {"model_params": "Give model_params, or model_name (a catalog model)."}
        return {}
    try:
        model = catalog_model(name)
    except UnknownModelError as error:
        return {"model_name": error.errors["model"]}
    load.model_name = model.name
    if params is None:
        load.model_params = model.params
        return {}
    if message := params_disagree(float(params), model):
        return {"model_params": message}
    return {}

"""The inference estimate from checked inputs (planner.inference_inputs): cards, latency,
energy and cost to serve a model. The card figures come from the catalog; the formulas from
engine.inference (docs/inference.md). Used by the API, the page and stored plans.
"""

from __future__ import annotations

import math

import pandas as pd

from engine.inference import InferenceWorkload, evaluate_inference
from engine.inference.memory import AttentionShape
from engine.inference.sizing import choose
from engine.limits import EngineInputError
from inventory.models import AcceleratorModel
from planner.inference_inputs import SETTING_FIELDS

CARD_FIELDS = (
    "memory_gb",
    "memory_bandwidth_tbs",
    "dense_bf16_tflops",
    "dense_fp8_tflops",
    "dense_int8_tops",
    "tdp_w",
    "rental_price_per_card_hour",
    "list_price",
)
WORKLOAD_FIELDS = (
    "input_tokens",
    "output_tokens",
    "weight_precision",
    "kv_precision",
    "context_tokens",
    "requests_per_s",
    "tokens_per_s",
    "cards",
    "tp",
    "batch",
    "ttft_ms",
    "tpot_ms",
    "ttft_p95_ms",
    "tpot_p95_ms",
    "tariff_per_kwh",
    "price_per_card_hour",
)

API_NAMES = {"params": "model_params", "heads": "attention_heads"}  # engine -> API field


def card_frame(accelerators: list[AcceleratorModel] | None) -> pd.DataFrame:
    """The chosen catalog entries (all of them when none is named); blanks stay NaN."""
    cards = accelerators or list(AcceleratorModel.objects.all())
    if not cards:
        raise EngineInputError({"accelerator": "The card catalog is empty."})
    rows = [
        {"accelerator": card.name, **{key: getattr(card, key) for key in CARD_FIELDS}}
        for card in cards
    ]
    return pd.DataFrame(rows).astype(dict.fromkeys(CARD_FIELDS, float))


def shape_and_params(data: dict) -> tuple[AttentionShape | None, float, dict[str, str]]:
    """The attention shape (entered or inferred) and N; N from 12·L·h² when only the shape is."""
    provenance = {}
    shape = None
    if data.get("layers"):
        hidden, head_dim = data["hidden"], data["head_dim"]
        heads = data.get("attention_heads") or max(1, hidden // head_dim)
        shape = AttentionShape(data["layers"], hidden, heads, data["kv_heads"], head_dim)
        provenance["shape"] = "entered"
    else:
        provenance["shape"] = "inferred from model_params (GPT-3-like, one KV head per head)"
    params = data.get("model_params")
    provenance["model_params"] = "entered"
    if params is None:
        params = 12.0 * shape.layers * shape.hidden**2
        provenance["model_params"] = "estimated as 12 × layers × hidden²"
    return shape, float(params), provenance


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value.item() if hasattr(value, "item") else value


def estimate_inference(data: dict) -> dict:
    shape, params, provenance = shape_and_params(data)
    overrides = {key: data[key] for key in SETTING_FIELDS if data.get(key) is not None}
    workload = InferenceWorkload(
        params=params,
        shape=shape,
        overrides=overrides,
        **{key: data[key] for key in WORKLOAD_FIELDS if data.get(key) is not None},
    )
    best = choose(evaluate_inference(card_frame(data.get("accelerator")), workload))
    options = [
        {key: _clean(value) for key, value in row.items()} for row in best.to_dict("records")
    ]
    shape_used = workload.attention
    return {
        **options[0],
        "options": options,
        "model_params": params,
        "output_tokens": workload.output_tokens,
        "shape": {key: getattr(shape_used, key) for key in AttentionShape.__annotations__},
        "settings": {key: workload.setting(key) for key in workload.provenance()},
        "provenance": {**workload.provenance(), **provenance, **price_provenance(data)},
    }


def price_provenance(data: dict) -> dict[str, str]:
    tariff = (
        "entered" if data.get("tariff_per_kwh") is not None else "not given: energy cost left out"
    )
    price = (
        "entered" if data.get("price_per_card_hour") is not None else "catalog (see price_basis)"
    )
    return {"tariff_per_kwh": tariff, "price_per_card_hour": price}

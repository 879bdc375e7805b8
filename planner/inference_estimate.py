"""The inference estimate from checked inputs (planner.inference_inputs): cards, latency,
energy and cost to serve a model. The card figures come from the catalog, the model from the
model catalog or the caller (planner.inference_model); the formulas from engine.inference
(docs/inference.md). Used by the API, the page and stored plans.

Money is in a currency, named on every option: an entered `price_per_card_hour` is in the
entered `currency` (USD when none is given, and the provenance says so), a catalog price in
its card's currency. An entered tariff is in `currency` too, or each card's price currency
when none is given; a card priced in another currency than the tariff has no cost (money in
two currencies is never added).
"""

from __future__ import annotations

import math

import pandas as pd

from engine.inference import InferenceWorkload, evaluate_inference
from engine.inference.engines import DEFAULT_ENGINE, ENGINES
from engine.inference.sizing import choose
from engine.limits import EngineInputError
from inventory.models import AcceleratorModel
from planner.inference_inputs import SETTING_FIELDS
from planner.inference_model import served_model

CARD_FIELDS = (
    "memory_gb",
    "memory_bandwidth_tbs",
    "dense_bf16_tflops",
    "dense_fp8_tflops",
    "dense_int8_tops",
    "dense_fp4_tflops",
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
    "engine",
)

# engine field -> API field
API_NAMES = {"params": "model_params", "heads": "attention_heads", "hidden": "hidden_size"}
PRICE_FIELDS = ("rental_price_per_card_hour", "list_price")
DEFAULT_CURRENCY = "USD"  # of an entered price without a currency, as the training planner's


def card_frame(accelerators: list[AcceleratorModel] | None) -> pd.DataFrame:
    """The chosen catalog entries (all of them when none is named); blanks stay NaN."""
    cards = accelerators or list(AcceleratorModel.objects.all())
    if not cards:
        raise EngineInputError({"accelerator": "The card catalog is empty."})
    rows = [
        {
            "accelerator": card.name,
            "currency": card.currency,
            **{key: getattr(card, key) for key in CARD_FIELDS},
        }
        for card in cards
    ]
    return pd.DataFrame(rows).astype(dict.fromkeys(CARD_FIELDS, float))


def option_currency(cards: pd.DataFrame, data: dict) -> pd.Series:
    """Each card model's money currency: the entered one for an entered price, else its own."""
    if data.get("price_per_card_hour") is not None:
        entered = data.get("currency") or DEFAULT_CURRENCY
        return pd.Series(entered, index=cards.index, dtype=object)
    return cards["currency"].astype(object)


def tariff_mismatch(cards: pd.DataFrame, data: dict) -> pd.Series:
    """Cards whose money is in another currency than the entered tariff (never added)."""
    if data.get("tariff_per_kwh") is None or not data.get("currency"):
        return pd.Series(False, index=cards.index)
    return option_currency(cards, data) != data["currency"]


def priced_cards(cards: pd.DataFrame, data: dict) -> pd.DataFrame:
    """The cards with their prices removed where they cannot be added to the tariff."""
    mismatch = tariff_mismatch(cards, data)
    priced = cards.copy()
    priced.loc[mismatch, list(PRICE_FIELDS)] = float("nan")
    return priced


def with_currency(best: pd.DataFrame, cards: pd.DataFrame, data: dict) -> pd.DataFrame:
    """The options with their currency, and why a card in another currency has no cost."""
    by_card = dict(zip(cards["accelerator"], option_currency(cards, data), strict=True))
    mismatched = set(cards.loc[tariff_mismatch(cards, data), "accelerator"])
    best = best.assign(currency=best["accelerator"].map(by_card))
    for index in best.index[best["accelerator"].isin(mismatched)]:
        currency = best.at[index, "currency"]
        best.at[index, "price_basis"] = (
            f"priced in {currency}, the tariff in {data['currency']}: not added"
        )
    return best


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value.item() if hasattr(value, "item") else value


def estimate_inference(data: dict) -> dict:
    model = served_model(data)
    overrides = {key: data[key] for key in SETTING_FIELDS if data.get(key) is not None}
    workload = InferenceWorkload(
        params=model.params,
        shape=model.attention,
        moe=model.moe,
        overrides=overrides,
        **{key: data[key] for key in WORKLOAD_FIELDS if data.get(key) is not None},
    )
    cards = card_frame(data.get("accelerator"))
    best = choose(evaluate_inference(priced_cards(cards, data), workload))
    best = with_currency(best, cards, data)
    options = [
        {key: _clean(value) for key, value in row.items()} for row in best.to_dict("records")
    ]
    return {
        **options[0],
        "options": options,
        "engine": workload.engine,
        "engine_label": workload.preset.label,
        "model": model.name,
        "model_params": model.params,
        "active_params": model.params if model.active_params is None else model.active_params,
        "output_tokens": workload.output_tokens,
        "shape": model.shape,
        "moe": model.moe_fields,
        "shape_source": model.shape_source,
        "settings": {key: workload.setting(key) for key in workload.provenance()},
        "provenance": {
            **engine_provenance(workload, data),
            **model.provenance,
            **price_provenance(data),
        },
    }


def engine_provenance(workload: InferenceWorkload, data: dict) -> dict[str, str]:
    """Where each setting came from ("default": the engine's preset for its efficiencies and
    memory share, the defaults table for the rest), and the engine."""
    engine = "entered" if data.get("engine") else f"default ({ENGINES[DEFAULT_ENGINE].label})"
    return {**workload.provenance(), "engine": engine}


def price_provenance(data: dict) -> dict[str, str]:
    tariff = (
        "entered" if data.get("tariff_per_kwh") is not None else "not given: energy cost left out"
    )
    price = (
        "entered" if data.get("price_per_card_hour") is not None else "catalog (see price_basis)"
    )
    if data.get("currency"):
        currency = "entered"
    elif data.get("price_per_card_hour") is not None:
        currency = f"not given: the entered price is taken in {DEFAULT_CURRENCY}"
    else:
        currency = "each card's catalog currency"
    return {"tariff_per_kwh": tariff, "price_per_card_hour": price, "currency": currency}

"""The inference estimate's model: a catalog name, a full shape or a parameter count, the shape
shown on every result with where it came from, and money with its currency
(POST /api/v1/estimates/inference/, /api/v1/inference-plans/; docs/inference.md)."""

from __future__ import annotations

import importlib
import math

import pytest

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimates/inference/"
PLANS = "/api/v1/inference-plans/"
H100 = "H100 SXM5 80GB"
H100_MEMORY_GIB = 80  # H100 SXM5 (NVIDIA datasheet: 80 GB of HBM3, binary)

# Meta-Llama-3-70B's config.json, written out here rather than read from the catalog.
LLAMA3_70B_SHAPE = {
    "layers": 80,
    "hidden_size": 8192,
    "attention_heads": 64,
    "kv_heads": 8,
    "head_dim": 128,
    "ffn_hidden_size": 28672,
    "vocab_size": 128256,
}
LLAMA3_70B_PARAMS = 70_553_706_496  # the published safetensors total
TRAFFIC = {
    "accelerator": H100,
    "input_tokens": 1000,
    "output_tokens": 500,
    "requests_per_s": 10,
    "tpot_ms": 50,
}


@pytest.fixture
def api(client_for, viewer):
    return client_for(viewer)


def post(api, body):
    return api.post(URL, body, format="json")


def estimate(api, body) -> dict:
    response = post(api, body)
    assert response.status_code == 200, response.content
    return response.json()


def kv_bytes_per_token(shape: dict, bytes_per_value: float) -> float:
    """2 (K and V) × layers × KV heads × head dimension × bytes: Ainslie et al. 2023."""
    return 2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * bytes_per_value


def test_a_catalog_name_gives_the_true_shape_and_says_so(api):
    body = estimate(api, {**TRAFFIC, "model": "llama-3-70b"})
    assert body["model"] == "Llama-3-70B"
    assert body["shape"] == LLAMA3_70B_SHAPE
    assert body["shape_source"] == "catalog"
    assert body["model_params"] == LLAMA3_70B_PARAMS
    assert body["provenance"]["shape"].startswith("model catalog: meta-llama/Meta-Llama-3-70B")
    assert body["kv_bytes_per_token"] == 2 * 80 * 8 * 128 * 2 == 327_680  # bf16


@pytest.mark.parametrize(("precision", "bytes_per_value"), [("bf16", 2), ("fp8", 1)])
def test_llama_3_70b_on_h100_needs_the_cards_its_true_shape_gives(api, precision, bytes_per_value):
    traffic = {**TRAFFIC, "weight_precision": precision, "kv_precision": precision}
    by_name = estimate(api, {**traffic, "model": "Llama-3-70B"})
    by_shape = estimate(api, {**traffic, **LLAMA3_70B_SHAPE, "model_params": LLAMA3_70B_PARAMS})
    assert by_shape["shape_source"] == "entered"
    for key in ("cards", "tp", "replicas", "batch", "max_batch", "tpot_ms", "ttft_ms"):
        assert by_name[key] == by_shape[key], key
    assert by_name["cost_per_million_tokens"] == pytest.approx(by_shape["cost_per_million_tokens"])

    kv = kv_bytes_per_token(LLAMA3_70B_SHAPE, bytes_per_value)
    assert by_name["kv_bytes_per_token"] == kv
    # Whatever the engine reserves, the sequences one card holds fit in its memory (80 GiB at
    # most) beside its share of the weights.
    tp, context = by_name["tp"], TRAFFIC["input_tokens"] + TRAFFIC["output_tokens"]
    free = H100_MEMORY_GIB * 2**30 - LLAMA3_70B_PARAMS * bytes_per_value / tp
    per_sequence = kv / min(tp, 8) * context
    assert 0 < by_name["max_batch"] <= math.floor(free / per_sequence)
    assert by_name["cards"] == by_name["replicas"] * tp


def test_a_parameter_count_alone_infers_a_bigger_kv_cache_and_says_so(api):
    long = {**TRAFFIC, "context_tokens": 32_000}
    inferred = estimate(api, {**long, "model_params": LLAMA3_70B_PARAMS})
    true = estimate(api, {**long, "model": "Llama-3-70B"})
    assert inferred["shape_source"] == "inferred" and inferred["model"] is None
    assert inferred["provenance"]["shape"].startswith("inferred from model_params")
    assert inferred["shape"]["kv_heads"] == inferred["shape"]["attention_heads"]  # no GQA
    assert inferred["kv_bytes_per_token"] == kv_bytes_per_token(inferred["shape"], 2)
    assert inferred["kv_bytes_per_token"] > 7 * true["kv_bytes_per_token"]
    assert inferred["max_batch"] < true["max_batch"]
    assert inferred["cards"] > true["cards"]


def test_a_shape_without_model_params_counts_them_by_hand(api):
    body = estimate(api, {**TRAFFIC, **LLAMA3_70B_SHAPE})
    h, kv_width, ffn, vocab = 8192, 8 * 128, 28672, 128256
    by_hand = 80 * (2 * h * h + 2 * h * kv_width + 3 * h * ffn) + 2 * vocab * h  # SwiGLU, untied
    assert body["model_params"] == by_hand
    assert abs(by_hand - LLAMA3_70B_PARAMS) < 0.001 * LLAMA3_70B_PARAMS  # norms only
    assert body["provenance"]["model_params"].startswith("counted from the shape (gated MLP")
    plain = estimate(api, {**TRAFFIC, **LLAMA3_70B_SHAPE, "mlp_kind": "plain"})
    assert plain["model_params"] == by_hand - 80 * h * ffn


def test_model_params_and_the_attention_are_enough(api):
    counting = ("ffn_hidden_size", "vocab_size")
    attention = {k: v for k, v in LLAMA3_70B_SHAPE.items() if k not in counting}
    body = estimate(api, {**TRAFFIC, **attention, "model_params": 70e9})
    assert body["shape"]["kv_heads"] == 8 and body["shape"]["ffn_hidden_size"] is None
    assert body["kv_bytes_per_token"] == 327_680


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"hidden": 8192}, "hidden", "Did you mean hidden_size?"),
        ({"modle": "Llama-3-70B"}, "modle", "Did you mean model?"),
        ({"shape": LLAMA3_70B_SHAPE}, "shape", "Unknown field"),
        ({"model": "Llama3-70B"}, "model", "Llama-3-70B"),
        ({"model": "Llama-3-70B", "layers": 80}, "layers", "give model or these"),
        ({"model": "Llama-3-70B", "model_params": 7e10}, "model_params", "give model or these"),
        ({"layers": 80, "hidden_size": 8192}, "kv_heads", "whole shape"),
        ({**LLAMA3_70B_SHAPE, "kv_heads": 7}, "kv_heads", "divide"),
        ({**LLAMA3_70B_SHAPE, "model_params": 7e9}, "model_params", "differ"),
        ({**LLAMA3_70B_SHAPE, "vocab_size": 10**8}, "vocab_size", ""),
        ({"mlp_kind": "gated", "model_params": 7e9}, "mlp_kind", "with the shape"),
        ({"model": "x" * 101}, "model", ""),
        ({"model_params": 7e9, "currency": "XYZ"}, "currency", "ISO 4217"),
    ],
)
def test_a_wrong_model_is_a_400_naming_the_field(api, change, field, words):
    response = post(api, {**TRAFFIC, **change})
    assert response.status_code == 400, response.content
    errors = response.json()
    assert field in errors, errors
    assert words in " ".join(map(str, errors[field])), errors


def test_every_option_names_its_currency(api):
    body = estimate(api, {**TRAFFIC, "model": "Llama-3-8B", "accelerator": [H100, "L4"]})
    assert body["currency"] == "USD"  # the catalog's prices
    assert {option["currency"] for option in body["options"]} == {"USD"}
    assert body["provenance"]["currency"] == "each card's catalog currency"


def test_an_entered_price_is_in_the_entered_currency(api):
    base = {**TRAFFIC, "model": "Llama-3-8B", "price_per_card_hour": 2.0}
    euros = estimate(api, {**base, "currency": "eur"})
    assert euros["currency"] == "EUR" and euros["provenance"]["currency"] == "entered"
    # One card at 2.0 EUR an hour serving 5,000 tokens/s: 2.0 / (5,000 × 3,600) per token.
    hours_per_million = 1e6 / (10 * 500) / 3600
    assert euros["cost_per_million_tokens"] == pytest.approx(
        euros["cards"] * 2.0 * hours_per_million
    )
    unnamed = estimate(api, base)
    assert unnamed["currency"] == "USD"
    assert unnamed["provenance"]["currency"].startswith("not given")


def test_a_tariff_in_another_currency_is_not_added_to_catalog_prices(api):
    tariff = {"tariff_per_kwh": 0.2, "currency": "EUR"}
    body = estimate(api, {**TRAFFIC, "model": "Llama-3-8B", **tariff})
    assert body["currency"] == "USD"  # the card's price
    assert body["cost_per_million_tokens"] is None  # unknown, not a sum of two currencies
    assert "not added" in body["price_basis"]


def test_a_stored_plan_keeps_the_catalog_name_and_shows_shape_and_currency(client_for, planner):
    api = client_for(planner)
    inputs = {**TRAFFIC, "model": "LLAMA-3-70B"}
    response = api.post(PLANS, {"name": "Llama 3 chat", "inputs": inputs}, format="json")
    assert response.status_code == 201, response.content
    plan = response.json()
    assert plan["inputs"]["model"] == "Llama-3-70B"  # the catalog's spelling
    assert "layers" not in plan["inputs"]
    assert plan["results"]["shape"] == LLAMA3_70B_SHAPE
    assert plan["results"]["shape_source"] == "catalog"
    assert plan["results"]["currency"] == "USD"
    listed = api.get(PLANS).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert rows[0]["currency"] == "USD"
    options = api.get(f"{PLANS}{plan['id']}/options/").json()
    assert options[0]["currency"] == "USD"


def test_a_stored_plan_refuses_an_unknown_field_in_its_inputs(client_for, planner):
    body = {"name": "typo", "inputs": {**TRAFFIC, "model": "Llama-3-70B", "kv_head": 8}}
    response = client_for(planner).post(PLANS, body, format="json")
    assert response.status_code == 400
    assert "kv_head" in response.json()["inputs"]


def test_plans_stored_with_the_old_shape_names_still_compute(client_for, planner):
    from django.utils import timezone

    from planner.models import InferencePlan

    migration = importlib.import_module("planner.migrations.0009_inference_plan_shape_names")
    old = {**TRAFFIC, "layers": 80, "hidden": 8192, "kv_heads": 8, "head_dim": 128}
    upgraded = migration.upgraded_inputs(old)
    assert upgraded["hidden_size"] == 8192 and "hidden" not in upgraded
    assert upgraded["attention_heads"] == 8192 // 128
    assert upgraded["model_params"] == 12.0 * 80 * 8192**2  # what the old estimate used
    plan = InferencePlan.objects.create(
        owner=planner, name="old", inputs=upgraded, results={}, computed_at=timezone.now()
    )
    response = client_for(planner).post(f"{PLANS}{plan.pk}/recompute/")
    assert response.status_code == 200, response.content
    assert response.json()["results"]["kv_bytes_per_token"] == 327_680
    results = migration.upgraded_results(
        {"shape": {"layers": 80, "hidden": 8192, "heads": 64}, "provenance": {"shape": "entered"}}
    )
    assert results["shape"] == {"layers": 80, "hidden_size": 8192, "attention_heads": 64}
    assert results["shape_source"] == "entered"


def test_a_mixture_of_experts_by_name_holds_every_expert_and_reads_the_routed_ones(api):
    """Mixtral-8x7B (Jiang et al. 2024, arXiv:2401.04088): 46.7B parameters, 12.9B active per
    token (2 of 8 experts). Its weights are all held, so it needs the cards of a dense model of
    46.7B; a decode step reads fewer of them, so it decodes faster than that dense model."""
    body = estimate(api, {**TRAFFIC, "model": "Mixtral-8x7B", "requests_per_s": 0.5})
    assert body["model_params"] == pytest.approx(46.7e9, rel=0.01)
    assert body["active_params"] == pytest.approx(12.9e9, rel=0.01)
    assert (body["moe"]["experts"], body["moe"]["experts_per_token"]) == (8, 2)
    assert body["shape_source"] == "catalog" and "active_params" in body["provenance"]
    dense_shape = {**LLAMA3_70B_SHAPE, "layers": 32, "hidden_size": 4096, "attention_heads": 32}
    dense_shape |= {"kv_heads": 8, "ffn_hidden_size": 14336 * 8, "vocab_size": 32000}
    dense = estimate(api, {**TRAFFIC, **dense_shape, "requests_per_s": 0.5})
    assert dense["model_params"] == pytest.approx(body["model_params"], rel=0.01)
    assert dense["active_params"] == dense["model_params"]
    assert body["moe"] is not None and dense["moe"] is None
    assert body["tpot_ms"] < dense["tpot_ms"]

"""The Inference tab's model: the catalog picker, a custom shape in the URL, the shape shown on
every result and the currency on every money figure (docs/inference.md, "Choosing a model")."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

TAB = reverse("frontend:planner-inference")
API = "/api/v1/estimates/inference/"
SAVE = reverse("frontend:inference-plan-save")
TRAFFIC = {
    "weight_precision": "fp8",
    "kv_precision": "fp8",
    "input_tokens": "1000",
    "output_tokens": "500",
    "requests_per_s": "10",
    "tpot_ms": "50",
    "accelerator": ["H100 SXM5 80GB"],
}
# Meta-Llama-3-70B's config.json (grouped-query attention: 8 KV heads for 64 query heads).
LLAMA3_70B_SHAPE = {
    "layers": "80",
    "hidden_size": "8192",
    "attention_heads": "64",
    "kv_heads": "8",
    "head_dim": "128",
    "ffn_hidden_size": "28672",
    "vocab_size": "128256",
}


@pytest.fixture
def page(client_for, viewer):
    return client_for(viewer)


def _shown(html: str) -> dict[str, str]:
    """The shape the page shows ([data-shape] cells) and the headline's figures."""
    shape = dict(re.findall(r'data-shape="(\w+)">([^<]*)<', html))
    headline = dict(re.findall(r'data-headline-value="(\w+)">([^<]*)<', html))
    return {**{f"shape.{k}": v.strip() for k, v in shape.items()}, **headline}


def test_the_tab_opens_on_llama_3_70b_from_the_catalog_with_its_shape(page):
    html = page.get(TAB).content.decode()
    assert re.search(r'<option value="Llama-3-70B" selected>', html)
    shown = _shown(html)
    assert shown["shape.kv_heads"] == "8" and shown["shape.layers"] == "80"
    assert "shape from the model catalog" in html
    assert re.fullmatch(r"\d+\.\d{3} USD / M tokens", shown["cost"]), shown["cost"]


def test_a_custom_shape_in_the_url_gives_what_the_catalog_name_gives(page):
    by_name = page.get(TAB, {**TRAFFIC, "model": "Llama-3-70B"})
    by_shape = page.get(TAB, {**TRAFFIC, **LLAMA3_70B_SHAPE})
    assert by_name.status_code == by_shape.status_code == 200
    name_shown, shape_shown = _shown(by_name.content.decode()), _shown(by_shape.content.decode())
    for key in ("cards", "tpot_ms", "cost", "shape.kv_heads", "shape.layers", "shape.head_dim"):
        assert name_shown[key] == shape_shown[key], key
    assert "shape entered" in by_shape.content.decode()
    assert by_shape.context["result"]["kv_bytes_per_token"] == 2 * 80 * 8 * 128 * 1  # fp8


def test_the_url_s_kv_heads_are_honoured_beside_a_parameter_count(page):
    attention = {k: v for k, v in LLAMA3_70B_SHAPE.items() if k not in ("ffn_hidden_size",)}
    gqa = page.get(TAB, {**TRAFFIC, **attention, "model_params": "70.55e9"}).context["result"]
    mha = page.get(TAB, {**TRAFFIC, **attention, "kv_heads": "64", "model_params": "70.55e9"})
    assert gqa["shape"]["kv_heads"] == 8 and gqa["kv_bytes_per_token"] == 163_840
    assert mha.context["result"]["kv_bytes_per_token"] == 8 * 163_840
    inferred = page.get(TAB, {**TRAFFIC, "model_params": "70.55e9"})
    html = inferred.content.decode()
    assert "shape inferred from the parameter count" in html
    assert inferred.context["result"]["shape"]["kv_heads"] > 8  # no GQA when inferred


def test_an_unknown_model_name_is_a_400_with_close_names(page):
    response = page.get(TAB, {**TRAFFIC, "model": "llama3-70b"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "Llama-3-70B" in html and 'href="#id_model"' in html


def test_a_model_and_a_shape_together_are_a_400(page):
    response = page.get(TAB, {**TRAFFIC, "model": "Llama-3-70B", "kv_heads": "64"})
    assert response.status_code == 400
    assert "give model or these" in response.content.decode()


def test_every_money_figure_on_the_tab_names_its_currency(page):
    two_cards = {**TRAFFIC, "model": "Llama-3-8B", "accelerator": ["H100 SXM5 80GB", "L4"]}
    text = page.get(TAB, two_cards).content.decode()
    costs = re.findall(r'data-cost="[^"]+">([^<]*)<', text)
    assert len(costs) == 2
    assert all(re.fullmatch(r"\d+\.\d{3} USD", cost.strip()) for cost in costs), costs
    euros = page.get(
        TAB, {**TRAFFIC, "model": "Llama-3-8B", "price_per_card_hour": "2", "currency": "EUR"}
    )
    assert _shown(euros.content.decode())["cost"].endswith(" EUR / M tokens")


def test_a_plan_saved_from_the_tab_keeps_the_name_and_shows_the_shape(client_for, planner):
    from planner.models import InferencePlan

    client = client_for(planner)
    body = {**TRAFFIC, "model": "Llama-3-70B", "name": "Llama 3 chat"}
    response = client.post(SAVE, body, format="multipart")  # a browser form
    assert response.status_code == 302
    plan = InferencePlan.objects.get()
    assert plan.inputs["model"] == "Llama-3-70B" and "layers" not in plan.inputs
    html = client.get(reverse("frontend:inference-plan-detail", args=[plan.pk])).content.decode()
    shown = _shown(html)
    assert shown["shape.kv_heads"] == "8" and shown["cost"].endswith(" USD / M tokens")
    edit = re.search(r'href="(/planner/inference/\?[^"]+)"', html).group(1)
    assert "model=Llama-3-70B" in edit

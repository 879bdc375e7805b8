"""Picking Llama-3-70B by name on the Inference tab, in a real headless Chromium: the page's
cards, TPOT and cost are the API's for the true shape, and the cost names its currency."""

from __future__ import annotations

import pytest
from django.template.defaultfilters import floatformat

from tests.support.browser import assert_accessible_basics

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRAFFIC = {
    "weight_precision": "fp8",
    "kv_precision": "fp8",
    "input_tokens": 1000,
    "output_tokens": 500,
    "requests_per_s": 10,
    "tpot_ms": 50,
    "accelerator": "H100 SXM5 80GB",
}
# The tab as a parameter count alone leaves it: the shape inferred, without grouped-query attention.
START = (
    "/planner/inference/?model=&model_params=70.55e9&weight_precision=fp8&kv_precision=fp8"
    "&input_tokens=1000&output_tokens=500&requests_per_s=10&tpot_ms=50"
    "&accelerator=H100+SXM5+80GB"
)
# Meta-Llama-3-70B's config.json and published parameter count, written out for the API.
LLAMA3_70B = {
    "model_params": 70_553_706_496,
    "layers": 80,
    "hidden_size": 8192,
    "attention_heads": 64,
    "kv_heads": 8,
    "head_dim": 128,
    "ffn_hidden_size": 28672,
    "vocab_size": 128256,
}


def _headline(page, name: str) -> str:
    return page.locator(f'[data-headline-value="{name}"]').inner_text().strip()


def _shape(page, name: str) -> str:
    return page.locator(f'[data-shape="{name}"]').inner_text().strip()


def test_picking_llama_3_70b_gives_the_api_s_cards_tpot_and_cost(
    browser_page, browser_planner, client_for
):
    page = browser_page
    page.goto(START)
    assert _shape(page, "kv_heads") != "8"  # inferred: one KV head per query head
    picker = page.get_by_label("Model from the model catalog")
    picker.select_option("Llama-3-70B")
    # The picked model's published shape fills the custom fields, read-only and not sent.
    assert page.locator("#id_kv_heads").input_value() == "8"
    assert page.locator("#id_layers").is_disabled()
    assert page.locator("#id_model_params").input_value() == ""
    page.get_by_role("button", name="Estimate").click()
    page.wait_for_url(lambda url: "model=Llama-3-70B" in url)
    assert "layers=" not in page.url and "model_params=" not in page.url
    assert_accessible_basics(page)
    assert _shape(page, "kv_heads") == "8" and _shape(page, "layers") == "80"

    response = client_for(browser_planner).post(
        "/api/v1/estimates/inference/", {**TRAFFIC, **LLAMA3_70B}, format="json"
    )
    assert response.status_code == 200, response.content
    api = response.json()
    assert api["currency"] == "USD"  # the catalog's H100 rental price
    assert int(_headline(page, "cards")) == api["cards"]
    assert _headline(page, "tpot_ms") == floatformat(api["tpot_ms"], 1)
    cost = f"{floatformat(api['cost_per_million_tokens'], 3)} USD / M tokens"
    assert _headline(page, "cost") == cost
    assert page.locator('[data-result="cost"]').inner_text().strip() == cost  # the what-if panel

    # Back to a custom shape: the fields are editable again, starting from Llama-3-70B's.
    picker.select_option("")
    assert page.locator("#id_layers").is_enabled()
    assert page.locator("#id_layers").input_value() == "80"
    # A plain-MLP model with tied embeddings carries both over, so the custom count is its own.
    picker.select_option("GPT-3-175B")
    picker.select_option("")
    assert page.locator("#id_mlp_kind").input_value() == "plain"
    assert page.locator("#id_tied_embeddings").is_checked()
    assert page.locator("#id_kv_heads").input_value() == "96"

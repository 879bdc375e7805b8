"""The Inference tab and a mixture of experts: the picker names each catalog mixture with its
total and active parameters, a result shows both with the MoE fields, the custom fields enter
a mixture by its shape, and a dense field misused for one is a 400 naming it
(docs/inference.md, "Mixture of experts")."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse

from engine.model_catalog import load_catalog

pytestmark = pytest.mark.django_db

TAB = reverse("frontend:planner-inference")
SAVE = reverse("frontend:inference-plan-save")
TRAFFIC = {
    "weight_precision": "fp8",
    "kv_precision": "fp8",
    "input_tokens": "1000",
    "output_tokens": "500",
    "requests_per_s": "1",
    "accelerator": ["H100 SXM5 80GB"],
}
# Qwen Team 2025, "Qwen3 Technical Report" (arXiv:2505.09388) Table 2: 235B total, 22B
# activated, 128 experts, 8 activated per token.
QWEN3_LINE = r"235 B total · 22(\.\d)? B active, 128 experts, top-8"
# deepseek-ai/DeepSeek-V3 config.json (huggingface.co): latent attention, no kv_heads.
DEEPSEEK_V3 = {
    "layers": "61",
    "hidden_size": "7168",
    "attention_heads": "128",
    "head_dim": "128",
    "ffn_hidden_size": "18432",
    "vocab_size": "129280",
    "experts": "256",
    "experts_per_token": "8",
    "shared_experts": "1",
    "expert_ffn_hidden_size": "2048",
    "dense_layers": "3",
    "attention": "mla",
    "q_lora_rank": "1536",
    "kv_lora_rank": "512",
    "qk_rope_head_dim": "64",
    "v_head_dim": "128",
}
MOE_NAMES = [model.name for model in load_catalog().models if model.is_moe]


@pytest.fixture
def page(client_for, viewer):
    return client_for(viewer)


def _text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def _headline(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-headline-value="(\w+)">([^<]*)<', html))


def test_the_picker_names_each_mixture_with_its_total_and_active_parameters(page):
    html = unescape(page.get(TAB).content.decode())
    assert re.search(r">Qwen3-235B-A22B \(MoE: " + QWEN3_LINE.split(",")[0] + r"\)<", html)
    assert ">Llama-3-70B<" in html  # a dense model: its name alone
    for name in MOE_NAMES:
        assert re.search(rf">{re.escape(name)} \(MoE: [\d.]+ B total · [\d.]+ B active\)<", html)


def test_a_mixture_s_result_shows_total_active_and_its_moe_fields(page):
    response = page.get(TAB, {**TRAFFIC, "model": "Qwen3-235B-A22B"})
    assert response.status_code == 200
    html = response.content.decode()
    summary = _text(re.search(r"<p data-moe-summary>(.*?)</p>", html).group(1))
    assert re.search(QWEN3_LINE, summary), summary
    assert re.search(r'data-moe="experts">128<', html)
    assert re.search(r'data-moe="expert_ffn_hidden_size">1536<', html)
    dense = page.get(TAB, {**TRAFFIC, "model": "Llama-3-70B"}).content.decode()
    assert "data-moe-summary" not in dense and 'data-moe="' not in dense


def test_deepseek_v3_entered_by_shape_is_served_as_by_its_name(page):
    by_name = page.get(TAB, {**TRAFFIC, "model": "DeepSeek-V3"}).content.decode()
    response = page.get(TAB, {**TRAFFIC, **DEEPSEEK_V3})
    assert response.status_code == 200
    by_shape = response.content.decode()
    assert _headline(by_shape) == _headline(by_name)
    summary = _text(re.search(r"<p data-moe-summary>(.*?)</p>", by_shape).group(1))
    # DeepSeek-V3 Technical Report (arXiv:2412.19437) §4.2: 671B total, 37B activated.
    assert re.search(r"671 B total · 37(\.\d)? B active, 256 experts, top-8, 1 shared", summary)
    assert "latent attention (MLA)" in summary
    kv_heads = re.search(r'data-shape="kv_heads">(.*?)</dd>', by_shape).group(1)
    assert "not used by this mixture" in kv_heads


@pytest.mark.parametrize("name", MOE_NAMES)
def test_a_catalog_mixture_s_custom_fields_enter_the_same_model(page, name):
    """What the picker fills into the custom fields, sent as a custom shape, is that model."""
    opened = page.get(TAB, {**TRAFFIC, "model": name})
    fields = next(e for e in opened.context["models"] if e["name"] == name)["shape"]
    custom = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in fields.items()}
    response = page.get(TAB, {**TRAFFIC, **custom})
    assert response.status_code == 200, response.context["errors"]
    by_name, by_shape = opened.context["result"], response.context["result"]
    for key in ("cards", "tpot_ms", "kv_bytes_per_token", "model_params", "active_params"):
        assert by_shape[key] == pytest.approx(by_name[key]), key


@pytest.mark.parametrize(
    ("extra", "field", "meant"),
    [
        ({"kv_heads": "128"}, "kv_heads", "kv_lora_rank"),
        ({"dense_layers": ""}, "ffn_hidden_size", "expert_ffn_hidden_size"),
    ],
)
def test_a_dense_field_misused_for_a_mixture_is_a_400_naming_it(page, extra, field, meant):
    response = page.get(TAB, {**TRAFFIC, **DEEPSEEK_V3, **extra})
    assert response.status_code == 400
    html = response.content.decode()
    assert f'href="#id_{field}"' in html and meant in response.context["errors"][field]


def test_a_plan_saved_from_the_tab_keeps_the_mixture(client_for, planner):
    from planner.models import InferencePlan

    client = client_for(planner)
    body = {**TRAFFIC, **DEEPSEEK_V3, "name": "DeepSeek by shape"}
    response = client.post(SAVE, body, format="multipart")  # a browser form
    assert response.status_code == 302
    plan = InferencePlan.objects.get()
    assert plan.inputs["attention"] == "mla" and plan.inputs["experts"] == 256
    html = client.get(reverse("frontend:inference-plan-detail", args=[plan.pk])).content.decode()
    assert re.search(r"671 B total · 37(\.\d)? B active", _text(html))


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_picking_deepseek_v3_fills_its_moe_fields_and_custom_gives_the_same(browser_page):
    """In headless Chromium: the picked mixture's MoE fields fill the custom fields (kv_heads
    left blank: latent attention), and sent as a custom shape they serve the same model."""
    page = browser_page
    page.goto(TAB + "?model=DeepSeek-V3&input_tokens=1000&output_tokens=500&requests_per_s=1")
    summary = page.locator("[data-moe-summary]").inner_text()
    assert re.search(r"671 B total · 37(\.\d)? B active, 256 experts, top-8", summary)
    assert page.locator("#id_kv_lora_rank").input_value() == "512"
    assert page.locator("#id_attention").input_value() == "mla"
    assert page.locator("#id_kv_heads").input_value() == ""
    assert page.locator("#id_experts").is_disabled()
    cards = page.locator('[data-headline-value="cards"]').inner_text()
    page.get_by_label("Model from the model catalog").select_option("")
    assert page.locator("#id_experts").is_enabled()
    page.get_by_role("button", name="Estimate").click()
    page.wait_for_url(lambda url: "experts=256" in url and "model=&" in url)
    assert page.locator("[data-moe-summary]").inner_text() == summary
    assert page.locator('[data-headline-value="cards"]').inner_text() == cards
    page.get_by_label("Model from the model catalog").select_option("Llama-3-70B")
    assert page.locator("#id_experts").input_value() == ""  # a dense model: no MoE fields
    assert page.locator("#id_attention").input_value() == ""

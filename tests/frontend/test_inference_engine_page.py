"""The serving engine on the planner's Inference tab and on an inference plan's page: picked in
the form (the default labelled so), named on the result, and the same answer as the API.

Llama-3-8B in FP8 on one H100 (80 GiB): TensorRT-LLM's cache (90 % of the memory left after
the weights) holds 512 sequences of 2,000 tokens and it batches them all; vLLM (90 % of the
card) holds 503 but batches at most 256 (max_num_seqs). Worked in
tests/planner/test_inference_engine_api.py.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

TAB = reverse("frontend:planner-inference")
SAVE = reverse("frontend:inference-plan-save")
API = "/api/v1/estimates/inference/"
QUERY = {
    "model": "Llama-3-8B",
    "accelerator": "H100 SXM5 80GB",
    "weight_precision": "fp8",
    "kv_precision": "fp8",
    "input_tokens": "1000",
    "output_tokens": "1000",
    "cards": "1",
}
TRT_BATCH, VLLM_BATCH = 512, 256


@pytest.fixture
def page(client_for, viewer):
    return client_for(viewer)


def test_the_form_offers_every_engine_with_the_default_labelled(page):
    html = page.get(TAB).content.decode()
    assert '<select id="id_engine" name="engine"' in html
    assert '<option value="tensorrt-llm" selected>TensorRT-LLM (default)</option>' in html
    for name, label in (("vllm", "vLLM"), ("sglang", "SGLang"), ("plain-pytorch", "Plain PyTorch")):
        assert f'<option value="{name}">{label}</option>' in html
    assert 'data-engine="tensorrt-llm">TensorRT-LLM</strong> (default)' in html  # the example


def test_vllm_on_the_tab_is_the_apis_vllm_and_not_tensorrt_llm(page):
    vllm = page.get(TAB, {**QUERY, "engine": "vllm"})
    trt = page.get(TAB, {**QUERY, "engine": "tensorrt-llm"})
    assert vllm.status_code == trt.status_code == 200
    html = vllm.content.decode()
    assert '<option value="vllm" selected>vLLM</option>' in html
    assert 'Serving engine: <strong data-engine="vllm">vLLM</strong>;' in html
    assert "bandwidth_efficiency: 0.83 (default)" in html  # vLLM's preset, not 0.78
    shown, other = vllm.context["result"], trt.context["result"]
    assert (shown["batch"], other["batch"]) == (VLLM_BATCH, TRT_BATCH)
    assert shown["tpot_ms"] != other["tpot_ms"]
    api = page.post(API, {**QUERY, "engine": "vllm"}, format="json").json()
    assert (shown["cards"], shown["batch"]) == (api["cards"], api["batch"])
    assert shown["tpot_ms"] == pytest.approx(api["tpot_ms"])
    band = f"{api['tpot_ms_low']:.1f}–{api['tpot_ms_high']:.1f}</span> ms"
    assert band in html  # the calibrated band on the page, as the API gives it


def test_an_unknown_engine_on_the_tab_is_a_400_naming_the_choices(page):
    response = page.get(TAB, {**QUERY, "engine": "fastllm"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "is not a serving engine" in html
    assert "tensorrt-llm, vllm, sglang, plain-pytorch, pytorch-compiled" in html


def test_a_plan_saved_from_the_tab_names_its_engine(client_for, planner, viewer):
    from planner.models import InferencePlan

    client_for(planner).post(
        SAVE, {**QUERY, "engine": "vllm", "name": "8B on vLLM"}, format="multipart"
    )
    plan = InferencePlan.objects.get()
    assert plan.inputs["engine"] == "vllm" and plan.results["engine"] == "vllm"
    html = client_for(viewer).get(reverse("frontend:inference-plan-detail", args=[plan.pk]))
    text = html.content.decode()
    assert 'Serving engine: <strong data-engine="vllm">vLLM</strong>;' in text
    assert "engine=vllm" in html.context["edit_url"]


def test_a_plan_stored_before_the_engine_was_an_input_says_so(client_for, planner, viewer):
    from planner.models import InferencePlan

    client_for(planner).post(SAVE, {**QUERY, "name": "old"}, format="multipart")
    plan = InferencePlan.objects.get()
    results = {key: value for key, value in plan.results.items() if key != "engine_label"}
    InferencePlan.objects.filter(pk=plan.pk).update(results=results | {"engine": None})
    html = client_for(viewer).get(reverse("frontend:inference-plan-detail", args=[plan.pk]))
    assert "Serving engine: not stored" in html.content.decode()

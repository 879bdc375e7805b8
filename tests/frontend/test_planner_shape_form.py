"""The planner page's "Advanced: model shape" fieldset and every fixed degree: stored in the
plan's workload, errors next to their field, and the plan page's assumptions show them."""

from __future__ import annotations

import re

import pytest

from tests.support.builders import plan_payload
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db

PLANNER_URL = "/planner/"
LLAMA_SHAPE = {
    "layers": "80",
    "hidden_size": "8192",
    "ffn_hidden_size": "28672",
    "mlp_kind": "gated",
    "attention_heads": "64",
    "kv_heads": "8",
    "vocab_size": "128256",
}


def _data(**changes) -> dict:
    from inventory.models import AcceleratorModel

    data = {
        "name": "Llama form plan",
        "params_billions": "",
        "tokens_billions": "15000",
        "flops_per_param_token": "6",
        "precision": "bf16",
        "seq_len": "8192",
        "global_batch_sequences": "2048",
        "zero_stage": "1",
        "parallelism": "choose",
        "accelerators": [str(AcceleratorModel.objects.get(name="H100 SXM5 80GB").pk)],
        "size_mode": "cards",
        "cards": "512",
        "history_days": "90",
        "cost_basis": "rental",
        **LLAMA_SHAPE,
    }
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


def _field_error(html: str, field: str) -> str:
    errors = re.search(rf'id="id_{field}_error"[^>]*>(.*?)</ul>', html, re.S)
    assert errors, html[:2000]
    return errors.group(1)


def test_the_form_shows_the_shape_fieldset_and_every_degree(client, planner, demo_fleet):
    client.force_login(planner)
    html = client.get(PLANNER_URL).content.decode()
    assert "Advanced: model shape" in html
    for field in (*LLAMA_SHAPE, "tied_embeddings"):
        assert f'name="{field}"' in html, field
    for field in ("tp_degree", "pp_degree", "vp_degree", "cp_degree", "dp_degree", "micro_batch"):
        assert f'name="{field}"' in html, field


def test_the_form_stores_the_shape_and_the_fixed_degrees(
    client, planner, demo_fleet, django_capture_on_commit_callbacks
):
    from planner.models import Plan

    client.force_login(planner)
    fixed = {"tp_degree": "8", "pp_degree": "4", "vp_degree": "2", "cp_degree": "2"}
    data = _data(parallelism="fixed", micro_batch="2", tied_embeddings="on", **fixed)
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(PLANNER_URL, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    plan = Plan.objects.get()
    workload = plan.workload
    assert "model_params" not in workload  # the shape's own count
    assert {key: workload[key] for key in LLAMA_SHAPE} == {
        key: (value if key == "mlp_kind" else int(value)) for key, value in LLAMA_SHAPE.items()
    }
    assert workload["tied_embeddings"] is True
    assert {k: workload[k] for k in fixed} == {k: int(v) for k, v in fixed.items()}
    assert workload["micro_batch"] == 2

    run_plan_inline(plan.pk)
    page = client.get(f"{PLANNER_URL}{plan.pk}/").content.decode()
    assert "80 layers × 8,192 hidden, 64 heads (8 KV), gated MLP 28,672 wide" in page
    assert "vocabulary 128,256 (tied)" in page
    assert "fixed TP 8 · PP 4 · VP 2 · CP 2" in page and "micro-batch 2 sequences" in page
    assert "69.5 B parameters" in page  # 70.55 B less one 128,256 × 8,192 embedding


def test_a_plan_without_a_shape_shows_the_inferred_one(
    client, planner, demo_fleet, django_capture_on_commit_callbacks
):
    from planner import plans

    body = plan_payload(accelerators=["H100 SXM5 80GB"], cards=[1024], pools=None)
    with django_capture_on_commit_callbacks(execute=False):
        plan = plans.create_plan(owner=planner, **body)
    run_plan_inline(plan.pk)
    client.force_login(planner)
    page = client.get(f"{PLANNER_URL}{plan.pk}/").content.decode()
    assert "96 layers × 12,288 hidden, 96 heads: inferred GPT-3-like" in page
    assert "split chosen per option" in page


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        (dict.fromkeys(LLAMA_SHAPE, ""), "params_billions", "required"),
        ({"hidden_size": "", "attention_heads": ""}, "hidden_size", "together"),
        ({"params_billions": "175"}, "params_billions", "more than 10%"),
        ({"kv_heads": "7"}, "kv_heads", "Must divide attention_heads"),
        ({"attention_heads": ""}, "attention_heads", "together"),
        ({"ffn_hidden_size": ""}, "ffn_hidden_size", "gated MLP"),
        ({"parallelism": "fixed", "tp_degree": "3"}, "tp_degree", "64 attention heads"),
        ({"parallelism": "fixed", "pp_degree": "3"}, "pp_degree", "80 layers"),
        ({"parallelism": "fixed", "cp_degree": "3"}, "cp_degree", "seq_len"),
        (
            {"parallelism": "fixed", "pp_degree": "1", "vp_degree": "2"},
            "vp_degree",
            "pipeline parallelism",
        ),
    ],
)
def test_shape_and_degree_errors_land_next_to_their_field(
    client, planner, demo_fleet, changes, field, message
):
    from planner.models import Plan

    client.force_login(planner)
    response = client.post(PLANNER_URL, _data(**changes))
    assert response.status_code == 200 and not Plan.objects.exists()
    assert message in _field_error(response.content.decode(), field)

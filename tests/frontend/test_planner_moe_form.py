"""The Training tab takes a mixture of experts by catalog name or by shape: the plan form stores
it as POST /api/v1/plans/ does, refuses what the API refuses in the API's words (next to the
field), and the plan page names total and active parameters and each option's EP degree."""

from __future__ import annotations

import html
import re

import pytest

from tests.support.builders import PLANS
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db

PLANNER_URL = "/planner/"
# Jiang et al. 2024, "Mixtral of Experts" (arXiv:2401.04088) Table 1: 32 layers, dim 4096,
# 32 heads, 8 KV heads, expert width 14336, 8 experts, top-2, vocabulary 32000 (SwiGLU).
MIXTRAL_SHAPE = {
    "layers": 32,
    "hidden_size": 4096,
    "attention_heads": 32,
    "kv_heads": 8,
    "vocab_size": 32000,
    "experts": 8,
    "experts_per_token": 2,
    "expert_ffn_hidden_size": 14336,
}
# 32 × (attention 2·4096² + 2·4096·1024, router 8·4096, 8 experts × 3·4096·14336)
# + untied embeddings 2·32000·4096 = 46,702,526,464; active: 2 of the 8 experts per layer.
MIXTRAL_TOTAL = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 8 * 4096 + 8 * 3 * 4096 * 14336) + (
    2 * 32000 * 4096
)
MIXTRAL_ACTIVE = MIXTRAL_TOTAL - 32 * 6 * 3 * 4096 * 14336  # 12,879,659,008
# DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" (arXiv:2412.19437), abstract: 671B total
# parameters, 37B activated for each token.
DEEPSEEK_V3_TOTAL, DEEPSEEK_V3_ACTIVE = 671e9, 37e9


def _page(**changes) -> dict:
    """The plan form's fields: 1,000 B tokens on 512 new H100s, the model from `changes`."""
    from inventory.models import AcceleratorModel

    data = {
        "name": "MoE form plan",
        "tokens_billions": "1000",
        "flops_per_param_token": "6",
        "precision": "bf16",
        "seq_len": "4096",
        "global_batch_sequences": "1024",
        "zero_stage": "1",
        "software_stack": "megatron",
        "parallelism": "choose",
        "accelerators": [str(AcceleratorModel.objects.get(name="H100 SXM5 80GB").pk)],
        "size_mode": "cards",
        "cards": "512",
        "history_days": "90",
        "site_kind": "production",
        "cost_basis": "rental",
    }
    data.update({key: str(value) for key, value in changes.items()})
    return data


def _api(**model) -> dict:
    """The same plan as POST /api/v1/plans/ takes it."""
    from inventory.models import AcceleratorModel

    workload = {
        "tokens": 1e12,
        "flops_per_param_token": 6,
        "precision": "bf16",
        "seq_len": 4096,
        "global_batch_sequences": 1024,
        "zero_stage": 1,
        "software_stack": "megatron",
        **model,
    }
    spec = {
        "accelerators": [AcceleratorModel.objects.get(name="H100 SXM5 80GB").pk],
        "cards": [512],
        "history_days": 90,
        "site_kind": "production",
        "cost_basis": "rental",
    }
    return {"name": "MoE form plan", "workload": workload, "options_spec": spec}


def _field_error(page: str, field: str) -> str:
    errors = re.search(rf'id="id_{field}_error"[^>]*>(.*?)</ul>', page, re.S)
    assert errors, f"no error next to {field}: {page[:2000]}"
    return " ".join(html.unescape(m) for m in re.findall(r"<li>(.*?)</li>", errors.group(1)))


def _page_plan(client, planner, capture, **changes):
    from planner.models import Plan

    client.force_login(planner)
    with capture(execute=False):
        response = client.post(PLANNER_URL, _page(**changes))
    assert response.status_code == 302, response.content.decode()[:3000]
    return Plan.objects.get(pk=int(response["Location"].rstrip("/").rsplit("/", 1)[1]))


def test_the_form_offers_catalog_models_and_the_api_moe_fields(client, planner, demo_fleet):
    from planner.api.shape_serializers import TrainingModelSerializer

    client.force_login(planner)
    page = html.unescape(client.get(PLANNER_URL).content.decode())
    assert "Model from the catalog" in page and "Advanced: mixture of experts" in page
    # The catalog's published counts name each model (dense: one count; a mixture: both).
    assert "DeepSeek-V3 (671 B total · 37 B active)" in page
    assert "Llama-3.1-70B (70.55 B)" in page
    api_fields = TrainingModelSerializer().fields
    for name in (
        "experts",
        "experts_per_token",
        "shared_experts",
        "expert_ffn_hidden_size",
        "dense_layers",
        "attention",
        "q_lora_rank",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "v_head_dim",
        "moe_capacity_factor",
        "moe_a2a_overlap",
        "moe_mtp_depth",
        "ep_degree",
    ):
        assert f'name="{name}"' in page, name
        assert api_fields[name].help_text in page, name  # the API's help, word for word


@pytest.mark.parametrize(
    "model",
    [
        pytest.param({"model": "DeepSeek-V3"}, id="catalog-mixture"),
        pytest.param({"model": "Llama-3.1-70B"}, id="catalog-dense"),
        pytest.param(
            {
                **MIXTRAL_SHAPE,
                "mlp_kind": "plain",  # not the mixture's default (gated): stored as chosen
                "moe_capacity_factor": 1.0,
                "moe_a2a_overlap": 0.0,  # a value, not "not given"
                "moe_mtp_depth": 1,
                "ep_degree": 8,
            },
            id="mixture-by-shape",
        ),
        pytest.param(
            {
                **MIXTRAL_SHAPE,
                "attention": "mla",
                "kv_lora_rank": 512,
                "qk_rope_head_dim": 64,
                "shared_experts": 1,
                "dense_layers": 1,
                "ffn_hidden_size": 14336,
            },
            id="mla-mixture-with-a-dense-layer",
        ),
        pytest.param({"model_params": 175e9}, id="dense-by-n"),
    ],
)
def test_a_page_made_plan_is_stored_as_the_api_stores_it(
    client, client_for, planner, demo_fleet, django_capture_on_commit_callbacks, model
):
    from planner.models import Plan

    form = {key: value for key, value in model.items() if key != "model_params"}
    if "model_params" in model:
        form["params_billions"] = model["model_params"] / 1e9
    page_plan = _page_plan(client, planner, django_capture_on_commit_callbacks, **form)
    with django_capture_on_commit_callbacks(execute=False):
        response = client_for(planner).post(PLANS, _api(**model), format="json")
    assert response.status_code == 202, response.content
    api_plan = Plan.objects.get(pk=response.json()["id"])

    assert page_plan.workload == api_plan.workload
    assert page_plan.overrides == api_plan.overrides and page_plan.levers == api_plan.levers
    # The options: the API adds its default card granularity (1), the engine's default too.
    assert api_plan.options_spec == {**page_plan.options_spec, "card_granularity": 1}


SHAPE = MIXTRAL_SHAPE
WITHOUT_EXPERT_WIDTH = {k: v for k, v in SHAPE.items() if k != "expert_ffn_hidden_size"}


@pytest.mark.parametrize(
    ("model", "field", "words"),
    [
        # The brief's case: a dense-only field for a mixture with no dense layers.
        ({**WITHOUT_EXPERT_WIDTH, "ffn_hidden_size": 14336}, "ffn_hidden_size", "expert_ffn"),
        ({**SHAPE, "ffn_hidden_size": 14336}, "ffn_hidden_size", "expert_ffn_hidden_size"),
        ({**SHAPE, "experts_per_token": 9}, "experts_per_token", "at most"),
        ({**SHAPE, "attention": "mla"}, "kv_lora_rank", "latent"),
        ({**SHAPE, "ep_degree": 3}, "ep_degree", "experts"),
        ({**SHAPE, "moe_capacity_factor": 0.5}, "moe_capacity_factor", "1"),
        ({**SHAPE, "experts": 0}, "experts", "65"),
        ({"model": "Mixtral-8x7B", "layers": 32}, "layers", "catalog model"),
        ({"model_params": 7e9, "experts_per_token": 2}, "experts_per_token", "experts > 1"),
    ],
)
def test_the_page_refuses_what_the_api_refuses_in_its_words(
    client, client_for, planner, demo_fleet, model, field, words
):
    from planner.models import Plan

    form = {key: value for key, value in model.items() if key != "model_params"}
    if "model_params" in model:
        form["params_billions"] = model["model_params"] / 1e9
    client.force_login(planner)
    page = client.post(PLANNER_URL, _page(**form))
    assert page.status_code == 200 and not Plan.objects.exists()
    on_page = _field_error(page.content.decode(), field)

    response = client_for(planner).post(PLANS, _api(**model), format="json")
    assert response.status_code == 400, response.content
    from_api = " ".join(response.json()["workload"][field])
    assert words in from_api
    assert on_page == from_api


def test_a_catalog_model_with_the_parameters_too_is_refused_next_to_them(
    client, planner, demo_fleet
):
    client.force_login(planner)
    response = client.post(PLANNER_URL, _page(model="Mixtral-8x7B", params_billions="46.7"))
    assert "catalog model sets the shape" in _field_error(
        response.content.decode(), "params_billions"
    )


def test_the_plan_page_names_total_and_active_parameters_and_each_options_ep(
    client, planner, demo_fleet, django_capture_on_commit_callbacks
):
    plan = _page_plan(
        client, planner, django_capture_on_commit_callbacks, mlp_kind="gated", **MIXTRAL_SHAPE
    )
    run_plan_inline(plan.pk)
    plan.refresh_from_db()
    assert plan.status == "succeeded", plan.error
    page = html.unescape(client.get(f"{PLANNER_URL}{plan.pk}/").content.decode())

    total, active = f"{MIXTRAL_TOTAL / 1e9:.4g}", f"{MIXTRAL_ACTIVE / 1e9:.4g}"
    assert (total, active) == ("46.7", "12.88")
    assert f"{total} B total · {active} B active parameters, 1,000 B tokens" in page
    assert "8 routed experts, top 2, gated FFN 14,336 wide each" in page
    assert "TP × PP × DP · EP" in page
    rows = [r for r in plan.results["options"] if r.get("tp") and r.get("ep")]
    assert rows, plan.results["options"]
    for row in rows:
        split = f"{row['tp']} × {row['pp']} × {row['dp']} · EP {row['ep']}"
        assert f"<td>{split}</td>" in page, split


def test_a_catalog_mixture_names_its_counts_before_it_is_computed(
    client, planner, demo_fleet, django_capture_on_commit_callbacks
):
    plan = _page_plan(client, planner, django_capture_on_commit_callbacks, model="DeepSeek-V3")
    page = html.unescape(client.get(f"{PLANNER_URL}{plan.pk}/").content.decode())
    counts = re.search(r"DeepSeek-V3: ([\d.,]+) B total · ([\d.,]+) B active parameters", page)
    assert counts, page[:3000]
    # The shape's own counts, within 2 % of the published 671 B and 37 B.
    assert float(counts.group(1)) * 1e9 == pytest.approx(DEEPSEEK_V3_TOTAL, rel=0.02)
    assert float(counts.group(2)) * 1e9 == pytest.approx(DEEPSEEK_V3_ACTIVE, rel=0.02)
    assert "latent attention (KV rank 512" in page and "256 routed experts, top 8 + 1" in page
    assert "active by DeepSeek-V3's published shape" in page

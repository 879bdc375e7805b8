"""A mixture of experts in the training estimate and stored plans: by catalog name or by shape,
total and active parameters in every answer, 400s naming the misused field."""

from __future__ import annotations

import pytest

from tests.support.builders import PLANS, plan_payload
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimates/training/"
# Jiang et al. 2024, "Mixtral of Experts" (arXiv:2401.04088) Table 1: 32 layers, dim 4096,
# 32 heads, 8 KV heads, expert width 14336, 8 experts, top-2, vocabulary 32000.
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
# 32 × (2·4096² + 2·4096·1024 + 8·4096 router + 8 × 3·4096·14336) + 2·32000·4096
MIXTRAL_TOTAL = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 8 * 4096 + 8 * 3 * 4096 * 14336) + (
    2 * 32000 * 4096
)
MIXTRAL_ACTIVE = MIXTRAL_TOTAL - 32 * 6 * 3 * 4096 * 14336  # 2 of the 8 experts per layer


def estimate(**extra) -> dict:
    return {
        "tokens": 1e12,
        "accelerator": "H100 SXM5 80GB",
        "cards": 64,
        "seq_len": 4096,
        "global_batch_sequences": 1024,
        "scaling": "modeled",
        **extra,
    }


@pytest.fixture
def api(client_for, viewer):
    return client_for(viewer)


def _ok(response) -> dict:
    assert response.status_code == 200, response.content
    return response.json()


def _refused(response, field: str) -> str:
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    return " ".join(response.json()[field])


def test_mixtral_by_shape_names_46_7b_total_and_12_9b_active(api):
    body = _ok(api.post(URL, estimate(**MIXTRAL_SHAPE), format="json"))
    model = body["model"]
    assert model["total_params"] == MIXTRAL_TOTAL  # 46.70B
    assert model["active_params"] == MIXTRAL_ACTIVE  # 12.88B
    assert model["mixture_of_experts"] is True and model["experts"] == 8
    # k·N·D on the active parameters.
    assert body["total_flops"] == pytest.approx(6 * MIXTRAL_ACTIVE * 1e12)
    # Memory holds every expert: 16 bytes per parameter of the total.
    assert body["memory"]["state_bytes"] == pytest.approx(16 * MIXTRAL_TOTAL, rel=1e-6)
    assert body["parallelism"]["ep"] >= 1


def test_the_catalog_name_gives_the_same_mixture(api):
    by_name = _ok(api.post(URL, estimate(model="Mixtral-8x7B"), format="json"))
    by_shape = _ok(api.post(URL, estimate(**MIXTRAL_SHAPE), format="json"))
    assert by_name["model"]["name"] == "Mixtral-8x7B"
    assert by_name["model"]["total_params"] == by_shape["model"]["total_params"]
    assert by_name["days"] == pytest.approx(by_shape["days"])


def test_a_dense_answer_names_equal_total_and_active_params(api):
    body = _ok(api.post(URL, estimate(model="Llama-3-8B"), format="json"))
    assert body["model"]["total_params"] == body["model"]["active_params"] == 8030261248
    assert body["model"]["mixture_of_experts"] is False
    assert body["parallelism"]["ep"] == 1


def test_deepseek_v3_by_name_in_fp8_picks_expert_parallelism(api):
    body = _ok(
        api.post(
            URL,
            estimate(
                model="DeepSeek-V3", precision="fp8", cards=2048, global_batch_sequences=15360
            ),
            format="json",
        )
    )
    assert body["model"]["total_params"] == pytest.approx(671.0e9, rel=0.001)
    assert body["model"]["active_params"] == pytest.approx(37.55e9, rel=0.001)
    assert body["model"]["attention"] == "mla"
    assert body["parallelism"]["ep"] > 1
    assert "experts" in body["parallelism"]["why"]


def test_ffn_hidden_size_for_a_mixture_without_dense_layers_is_a_400_saying_which(api):
    shape = {**MIXTRAL_SHAPE, "ffn_hidden_size": 14336}
    shape.pop("expert_ffn_hidden_size")
    message = _refused(api.post(URL, estimate(**shape), format="json"), "ffn_hidden_size")
    assert "expert_ffn_hidden_size" in message
    both = {**MIXTRAL_SHAPE, "ffn_hidden_size": 14336}
    assert "expert_ffn_hidden_size" in _refused(
        api.post(URL, estimate(**both), format="json"), "ffn_hidden_size"
    )


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ({"model": "Mixtral-8x7B", "layers": 32}, "layers", "catalog model"),
        ({"model": "Mixtral-8x7B", "model_params": 46.7e9}, "model_params", "catalog model"),
        ({"model": "Mixtral-8x8B"}, "model", "Mixtral-8x7B"),
        ({"model_params": 7e9, "experts_per_token": 2}, "experts_per_token", "experts > 1"),
        ({**MIXTRAL_SHAPE, "experts_per_token": 9}, "experts_per_token", "at most"),
        ({**MIXTRAL_SHAPE, "model_params": 12.9e9}, "model_params", "active"),
        ({**MIXTRAL_SHAPE, "attention": "mla"}, "kv_lora_rank", "latent"),
        ({**MIXTRAL_SHAPE, "ep_degree": 3}, "ep_degree", "experts"),
        ({**MIXTRAL_SHAPE, "moe_capacity_factor": 0.5}, "moe_capacity_factor", ""),
    ],
)
def test_a_wrong_mixture_is_a_400_naming_the_field(api, extra, field, words):
    assert words in _refused(api.post(URL, estimate(**extra), format="json"), field)


def test_a_stored_plan_trains_a_catalog_mixture(
    client_for, planner, demo_fleet, django_capture_on_commit_callbacks
):
    client = client_for(planner)
    payload = plan_payload(accelerators=["H100 SXM5 80GB"], cards=[512], pools=None)
    payload["workload"] = {"tokens": 1e12, "seq_len": 4096, "model": "Mixtral-8x7B"}
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(PLANS, payload, format="json")
    assert response.status_code == 202, response.content
    created = response.json()
    assert created["workload"]["model"] == "Mixtral-8x7B"
    run_plan_inline(created["id"])
    plan = client.get(f"{PLANS}{created['id']}/").json()
    assert plan["status"] == "succeeded", plan["error"]
    model = plan["results"]["model"]
    assert model["total_params"] == MIXTRAL_TOTAL and model["active_params"] == MIXTRAL_ACTIVE
    assert plan["results"]["total_flops"] == pytest.approx(6 * MIXTRAL_ACTIVE * 1e12)

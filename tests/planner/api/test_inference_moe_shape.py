"""A mixture of experts entered by its shape in the inference estimate and stored inference
plans: total and active parameters on every result, the same answer as the catalog name, and
a dense field misused for a mixture a 400 naming it and what is meant instead
(POST /api/v1/estimates/inference/, /api/v1/inference-plans/; docs/inference.md)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimates/inference/"
PLANS = "/api/v1/inference-plans/"
TRAFFIC = {
    "accelerator": "H100 SXM5 80GB",
    "input_tokens": 1000,
    "output_tokens": 500,
    "requests_per_s": 1,
    "weight_precision": "fp8",
    "kv_precision": "fp8",
}
# Qwen/Qwen3-235B-A22B config.json (huggingface.co), written out rather than read from the
# catalog: every layer sparse, so no dense FFN width is entered.
QWEN3_235B = {
    "layers": 94,
    "hidden_size": 4096,
    "attention_heads": 64,
    "kv_heads": 4,
    "head_dim": 128,
    "vocab_size": 151936,
    "experts": 128,
    "experts_per_token": 8,
    "expert_ffn_hidden_size": 1536,
}
# Qwen Team 2025, "Qwen3 Technical Report" (arXiv:2505.09388), Table 2.
QWEN3_235B_TOTAL, QWEN3_235B_ACTIVE = 235e9, 22e9
# deepseek-ai/DeepSeek-V3 config.json (huggingface.co): multi-head latent attention, so no
# kv_heads; qk_nope_head_dim 128 is head_dim; first_k_dense_replace 3 dense layers of 18432.
DEEPSEEK_V3 = {
    "layers": 61,
    "hidden_size": 7168,
    "attention_heads": 128,
    "head_dim": 128,
    "ffn_hidden_size": 18432,
    "vocab_size": 129280,
    "experts": 256,
    "experts_per_token": 8,
    "shared_experts": 1,
    "expert_ffn_hidden_size": 2048,
    "dense_layers": 3,
    "attention": "mla",
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}
# DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" (arXiv:2412.19437) §4.2: 671B total, 37B
# activated per token (the MTP module aside).
DEEPSEEK_V3_TOTAL, DEEPSEEK_V3_ACTIVE = 671e9, 37e9
# Meta-Llama-3-70B's config.json (huggingface.co).
LLAMA3_70B = {
    "layers": 80,
    "hidden_size": 8192,
    "attention_heads": 64,
    "kv_heads": 8,
    "head_dim": 128,
    "ffn_hidden_size": 28672,
    "vocab_size": 128256,
}
COMPARED = ("cards", "tp", "replicas", "batch", "max_batch", "tpot_ms", "ttft_ms")


@pytest.fixture
def api(client_for, viewer):
    return client_for(viewer)


def estimate(api, body) -> dict:
    response = api.post(URL, body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def refused(api, body) -> dict:
    response = api.post(URL, body, format="json")
    assert response.status_code == 400, response.content
    return response.json()


def test_qwen3_by_shape_counts_its_published_total_and_active_parameters(api):
    body = estimate(api, {**TRAFFIC, **QWEN3_235B})
    assert body["model"] is None and body["shape_source"] == "entered"
    assert body["model_params"] == pytest.approx(QWEN3_235B_TOTAL, rel=0.01)
    assert body["active_params"] == pytest.approx(QWEN3_235B_ACTIVE, rel=0.02)
    assert body["moe"]["experts"] == 128 and body["moe"]["experts_per_token"] == 8
    assert body["moe"]["attention"] == "gqa" and body["moe"]["dense_layers"] == 0
    assert body["shape"]["ffn_hidden_size"] is None  # every layer sparse: no dense FFN
    assert "active_params" in body["provenance"]
    # grouped-query KV cache: 2 (K, V) × layers × KV heads × head_dim × 1 byte (fp8)
    assert body["kv_bytes_per_token"] == 2 * 94 * 4 * 128


@pytest.mark.parametrize(
    ("name", "shape"), [("Qwen3-235B-A22B", QWEN3_235B), ("DeepSeek-V3", DEEPSEEK_V3)]
)
def test_a_mixture_by_shape_is_served_as_by_its_catalog_name(api, name, shape):
    by_name = estimate(api, {**TRAFFIC, "model": name})
    by_shape = estimate(api, {**TRAFFIC, **shape})
    for key in (*COMPARED, "kv_bytes_per_token", "weight_gb_per_card"):
        assert by_shape[key] == pytest.approx(by_name[key]), key
    assert by_shape["model_params"] == pytest.approx(by_name["model_params"])
    assert by_shape["active_params"] == pytest.approx(by_name["active_params"])


def test_deepseek_v3_by_shape_caches_the_latent_not_kv_heads(api):
    body = estimate(api, {**TRAFFIC, **DEEPSEEK_V3})
    assert body["model_params"] == pytest.approx(DEEPSEEK_V3_TOTAL, rel=0.01)
    assert body["active_params"] == pytest.approx(DEEPSEEK_V3_ACTIVE, rel=0.02)
    assert body["moe"]["attention"] == "mla" and body["moe"]["shared_experts"] == 1
    assert body["shape"]["kv_heads"] is None
    # DeepSeek-V2 (arXiv:2405.04434) §2.1.3: the cache is (d_c + d_h^R) per token and layer
    assert body["kv_bytes_per_token"] == 61 * (512 + 64)


def test_one_expert_gives_the_dense_answer(api):
    dense = estimate(api, {**TRAFFIC, **LLAMA3_70B})
    one = estimate(
        api, {**TRAFFIC, **LLAMA3_70B, "experts": 1, "experts_per_token": 1, "shared_experts": 0}
    )
    assert one["moe"] is None and one["active_params"] == one["model_params"]
    for key in (*COMPARED, "model_params", "kv_bytes_per_token"):
        assert one[key] == dense[key], key


def test_ffn_hidden_size_for_a_mixture_without_dense_layers_names_the_expert_width(api):
    body = refused(api, {**TRAFFIC, **QWEN3_235B, "ffn_hidden_size": 1536})
    assert list(body) == ["ffn_hidden_size"]
    assert "expert_ffn_hidden_size" in body["ffn_hidden_size"][0]
    without_expert = {k: v for k, v in QWEN3_235B.items() if k != "expert_ffn_hidden_size"}
    body = refused(api, {**TRAFFIC, **without_expert, "ffn_hidden_size": 1536})
    assert "expert_ffn_hidden_size" in body["ffn_hidden_size"][0]


def test_kv_heads_with_latent_attention_names_the_latent(api):
    body = refused(api, {**TRAFFIC, **DEEPSEEK_V3, "kv_heads": 128})
    assert list(body) == ["kv_heads"] and "kv_lora_rank" in body["kv_heads"][0]


def test_latent_ranks_with_grouped_query_attention_are_refused_by_name(api):
    body = refused(api, {**TRAFFIC, **QWEN3_235B, "kv_lora_rank": 512, "qk_rope_head_dim": 64})
    assert set(body) == {"kv_lora_rank", "qk_rope_head_dim"}
    assert "mla" in body["kv_lora_rank"][0]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**LLAMA3_70B, "expert_ffn_hidden_size": 2048}, "expert_ffn_hidden_size"),
        ({"model": "Llama-3-70B", "experts": 8}, "experts"),
        ({**QWEN3_235B, "experts_per_token": None}, "experts_per_token"),
        ({**QWEN3_235B, "experts_per_token": 256}, "experts_per_token"),
        ({**QWEN3_235B, "model_params": 100e9}, "model_params"),
        ({**QWEN3_235B, "num_experts": 128}, "num_experts"),  # unknown: the API's name is experts
    ],
)
def test_a_wrong_mixture_is_a_400_naming_the_field(api, body, field):
    assert field in refused(api, {**TRAFFIC, **body})


def test_model_params_agreeing_with_the_mixture_is_taken(api):
    body = estimate(api, {**TRAFFIC, **QWEN3_235B, "model_params": QWEN3_235B_TOTAL})
    assert body["model_params"] == pytest.approx(QWEN3_235B_TOTAL, rel=0.01)
    assert "agrees" in body["provenance"]["model_params"]


def test_a_plan_stores_a_mixture_by_shape_and_recomputes_it(client_for, planner):
    api = client_for(planner)
    response = api.post(
        PLANS, {"name": "qwen3", "inputs": {**TRAFFIC, **QWEN3_235B}}, format="json"
    )
    assert response.status_code == 201, response.content
    plan = response.json()
    assert plan["inputs"]["experts"] == 128
    assert plan["results"]["moe"]["experts_per_token"] == 8
    total, active = plan["results"]["model_params"], plan["results"]["active_params"]
    assert active < total / 5  # 8 of 128 experts read per token
    again = api.post(f"{PLANS}{plan['id']}/recompute/")
    assert again.status_code == 200, again.content
    assert again.json()["results"]["active_params"] == active


def test_a_plan_with_a_misused_dense_field_is_refused_naming_it(client_for, planner):
    inputs = {**TRAFFIC, **DEEPSEEK_V3, "kv_heads": 128}
    response = client_for(planner).post(PLANS, {"name": "v3", "inputs": inputs}, format="json")
    assert response.status_code == 400, response.content
    assert "kv_lora_rank" in response.json()["inputs"]["kv_heads"]

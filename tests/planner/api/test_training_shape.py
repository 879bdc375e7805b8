"""The full model shape and every fixed parallel degree in the training estimate and stored
plans: N from the shape, memory from GQA and the MLP's width, 400s naming the field."""

from __future__ import annotations

import pytest

from tests.support.builders import PLANS, plan_payload
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimates/training/"
# Llama 3.1 70B (Meta's published config.json): 80 layers, hidden 8,192, a gated (SwiGLU)
# MLP 28,672 wide, 64 query heads, 8 KV heads, a 128,256-token vocabulary, untied embeddings.
LLAMA_31_70B = {
    "layers": 80,
    "hidden_size": 8192,
    "ffn_hidden_size": 28672,
    "mlp_kind": "gated",
    "attention_heads": 64,
    "kv_heads": 8,
    "vocab_size": 128_256,
}
# 80 × (2·8192² + 2·8192·1024 + 3·8192·28672) + 2·128,256·8192
LLAMA_31_70B_PARAMS = 70_552_387_584
# One split for both shapes, so their memory is compared like for like.
SPLIT = {"tp_degree": 8, "pp_degree": 4, "vp_degree": 1, "cp_degree": 1, "micro_batch": 1}


def estimate(**extra) -> dict:
    return {
        "tokens": 15e12,
        "accelerator": "H100 SXM5 80GB",
        "cards": 512,
        "seq_len": 8192,
        "global_batch_sequences": 2048,
        "mfu": 0.4,
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


def test_the_llama_shape_alone_counts_70_6_billion_parameters(api):
    body = _ok(api.post(URL, estimate(**LLAMA_31_70B), format="json"))
    assert body["total_flops"] == pytest.approx(6 * LLAMA_31_70B_PARAMS * 15e12, rel=1e-12)
    assert abs(LLAMA_31_70B_PARAMS - 70.6e9) < 0.001 * 70.6e9  # the published "70.6B"
    assert body["memory"]["state_bytes"] == pytest.approx(16 * LLAMA_31_70B_PARAMS, rel=1e-12)


def test_tied_embeddings_count_the_vocabulary_once(api):
    tied = _ok(api.post(URL, estimate(**LLAMA_31_70B, tied_embeddings=True), format="json"))
    one_embedding = 128_256 * 8192
    assert tied["total_flops"] == pytest.approx(
        6 * (LLAMA_31_70B_PARAMS - one_embedding) * 15e12, rel=1e-12
    )


def test_the_shape_changes_memory_from_the_gpt_like_inference(api):
    """Same N and split: the given shape's activations are not the inferred shape's."""
    given = _ok(api.post(URL, estimate(**LLAMA_31_70B, **SPLIT), format="json"))
    inferred = _ok(
        api.post(URL, estimate(model_params=LLAMA_31_70B_PARAMS, **SPLIT), format="json")
    )
    assert given["memory"]["state_per_card_bytes"] == pytest.approx(
        inferred["memory"]["state_per_card_bytes"]
    )
    assert given["memory"]["activation_per_card_bytes"] != pytest.approx(
        inferred["memory"]["activation_per_card_bytes"], rel=0.01
    )


def test_grouped_query_attention_keeps_fewer_kv_bytes(api):
    """8 KV heads instead of 64: K and V activations are 1/8 as wide. With selective
    recomputation a layer keeps s·b·h·(10 + 2 + 4·kv/h + 2 + 6·ffn/h)/t bytes: 35.5 vs 39."""
    gqa = _ok(api.post(URL, estimate(**LLAMA_31_70B, **SPLIT), format="json"))
    mha_shape = {**LLAMA_31_70B, "kv_heads": 64}
    mha_params = LLAMA_31_70B_PARAMS + 80 * 2 * 8192 * (8192 - 1024)
    mha = _ok(api.post(URL, estimate(**mha_shape, model_params=mha_params, **SPLIT), format="json"))
    gqa_bytes = gqa["memory"]["activation_per_card_bytes"]
    mha_bytes = mha["memory"]["activation_per_card_bytes"]
    assert gqa_bytes < mha_bytes
    assert gqa_bytes / mha_bytes == pytest.approx(35.5 / 39, rel=1e-12)


def test_params_and_shape_may_differ_a_little_but_not_much(api):
    _ok(api.post(URL, estimate(**LLAMA_31_70B, model_params=70e9), format="json"))
    message = _refused(
        api.post(URL, estimate(**LLAMA_31_70B, model_params=175e9), format="json"),
        "model_params",
    )
    assert "1.75e+11" in message and "7.055e+10" in message  # both counts


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"attention_heads": 60}, "attention_heads"),  # does not divide 8,192
        ({"kv_heads": 7}, "kv_heads"),
        ({"kv_heads": 128}, "kv_heads"),
        ({"ffn_hidden_size": None}, "ffn_hidden_size"),  # gated needs its width
        ({"hidden_size": None}, "hidden_size"),
        ({"attention_heads": None, "layers": None}, "attention_heads"),
        ({"ffn_hidden_size": 2_000_000}, "ffn_hidden_size"),
        ({"vocab_size": 0}, "vocab_size"),
        ({"mlp_kind": "swiglu"}, "mlp_kind"),
        ({"layers": 2000, "hidden_size": 262_144, "attention_heads": 2048}, "layers"),
    ],
)
def test_an_impossible_shape_is_400_naming_the_field(api, change, field):
    body = {key: value for key, value in {**LLAMA_31_70B, **change}.items() if value is not None}
    _refused(api.post(URL, estimate(**body), format="json"), field)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model_params": 7e9, "ffn_hidden_size": 11008}, "ffn_hidden_size"),
        ({"model_params": 7e9, "tied_embeddings": True}, "tied_embeddings"),
        ({"model_params": 7e9, "mlp_kind": "gated"}, "mlp_kind"),
        ({}, "model_params"),
        ({**LLAMA_31_70B, "vocab_size": None, "tied_embeddings": True}, "tied_embeddings"),
    ],
)
def test_refinements_need_the_shape_and_n_needs_one_or_the_other(api, body, field):
    body = {key: value for key, value in body.items() if value is not None}
    _refused(api.post(URL, estimate(**body), format="json"), field)


def test_the_params_alone_still_work_as_before(api):
    body = _ok(api.post(URL, estimate(model_params=7e9), format="json"))
    assert body["total_flops"] == pytest.approx(6 * 7e9 * 15e12)


# --- fixed degrees ----------------------------------------------------------------------------


def test_every_fixed_degree_appears_in_the_split(api):
    fixed = {"tp_degree": 8, "pp_degree": 4, "vp_degree": 2, "cp_degree": 2, "micro_batch": 2}
    body = _ok(api.post(URL, estimate(**LLAMA_31_70B, **fixed), format="json"))
    split = body["parallelism"]
    assert (split["tp"], split["pp"], split["virtual_stages"], split["cp"]) == (8, 4, 2, 2)
    assert split["micro_batch"] == 2
    assert split["dp"] == 512 // (8 * 4 * 2)
    all_four = {"tp_degree": 4, "pp_degree": 8, "cp_degree": 1, "dp_degree": 16}
    body = _ok(api.post(URL, estimate(**LLAMA_31_70B, **all_four), format="json"))
    split = body["parallelism"]
    assert (split["tp"], split["pp"], split["cp"], split["dp"]) == (4, 8, 1, 16)


@pytest.mark.parametrize(
    ("fixed", "field"),
    [
        ({"tp_degree": 16}, "tp_degree"),  # beyond the 8 cards of a node
        ({"tp_degree": 3}, "tp_degree"),  # 64 heads
        ({"pp_degree": 3}, "pp_degree"),  # 80 layers
        ({"pp_degree": 81}, "pp_degree"),
        ({"pp_degree": 1, "vp_degree": 2}, "vp_degree"),
        ({"pp_degree": 4, "vp_degree": 3}, "vp_degree"),  # 12 does not divide 80
        ({"cp_degree": 3}, "cp_degree"),  # 8,192 tokens
        ({"tp_degree": 8, "pp_degree": 4, "cp_degree": 4, "dp_degree": 8}, "dp_degree"),  # 1,024
        ({"tp_degree": 8, "pp_degree": 16, "cp_degree": 8}, "cp_degree"),  # 1,024 ∤ 512
        ({"dp_degree": 512, "micro_batch": 8}, "dp_degree"),  # 4,096 > 2,048 sequences
        ({"micro_batch": 4096}, "micro_batch"),
        ({"vp_degree": 0}, "vp_degree"),
        ({"cp_degree": 5000}, "cp_degree"),
    ],
)
def test_an_impossible_degree_is_400_naming_it(api, fixed, field):
    _refused(api.post(URL, estimate(**LLAMA_31_70B, **fixed), format="json"), field)


def test_an_inferred_shape_bounds_the_degrees_and_says_so(api):
    message = _refused(
        api.post(URL, estimate(model_params=7e9, pp_degree=500), format="json"), "pp_degree"
    )
    assert "inferred" in message


def test_a_deadline_estimate_steps_in_the_fixed_degrees(api):
    body = estimate(**LLAMA_31_70B, tp_degree=8, pp_degree=4, cp_degree=2)
    del body["cards"]
    result = _ok(api.post(URL, {**body, "deadline_days": 60}, format="json"))
    assert result["cards"] % (8 * 4 * 2) == 0
    assert (result["parallelism"]["tp"], result["parallelism"]["cp"]) == (8, 2)


# --- stored plans -----------------------------------------------------------------------------


@pytest.fixture
def planner_api(client_for, planner):
    return client_for(planner)


def _llama_plan(**workload) -> dict:
    payload = plan_payload(accelerators=["H100 SXM5 80GB"], cards=[512, 1024], pools=None)
    payload["workload"] = {"tokens": 15e12, "seq_len": 8192, **LLAMA_31_70B, **workload}
    return payload


def test_a_plan_stores_the_shape_and_degrees_and_computes_with_them(
    planner_api, demo_fleet, django_capture_on_commit_callbacks
):
    fixed = {"tp_degree": 8, "pp_degree": 4, "cp_degree": 2, "vp_degree": 2, "micro_batch": 2}
    with django_capture_on_commit_callbacks(execute=False):
        response = planner_api.post(PLANS, _llama_plan(**fixed), format="json")
    assert response.status_code == 202, response.content
    created = response.json()
    assert {key: created["workload"][key] for key in LLAMA_31_70B} == LLAMA_31_70B
    assert {key: created["workload"][key] for key in fixed} == fixed
    assert "model_params" not in created["workload"]
    run_plan_inline(created["id"])
    plan = planner_api.get(f"{PLANS}{created['id']}/").json()
    assert plan["status"] == "succeeded", plan["error"]
    shape = plan["results"]["model_shape"]
    assert shape["source"] == "given"
    assert (shape["kv_heads"], shape["ffn_hidden"], shape["mlp"]) == (8, 28672, "gated")
    assert shape["params"] == LLAMA_31_70B_PARAMS
    for row in plan["results"]["options"]:
        if row["tp"] is not None:
            assert (row["tp"], row["pp"], row["cp"], row["virtual_stages"]) == (8, 4, 2, 2)
            assert row["micro_batch"] == 2


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        ({"model_params": 175e9}, "model_params"),
        ({"kv_heads": 7}, "kv_heads"),
        ({"tp_degree": 3}, "tp_degree"),
        ({"pp_degree": 3}, "pp_degree"),
        ({"cp_degree": 3}, "cp_degree"),
        ({"pp_degree": 1, "vp_degree": 2}, "vp_degree"),
        ({"ffn_hidden_size": None}, "ffn_hidden_size"),
    ],
)
def test_a_plan_refuses_an_impossible_shape_or_degree_naming_it(
    planner_api, demo_fleet, workload, field
):
    payload = _llama_plan(**workload)
    payload["workload"] = {k: v for k, v in payload["workload"].items() if v is not None}
    response = planner_api.post(PLANS, payload, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["workload"], response.json()

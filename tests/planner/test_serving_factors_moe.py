"""A serving load naming a catalog mixture of experts is scored on the right parameter counts
(docs/efficiency-model.md, "Serving pools", issue #32): memory holds every expert, a decode
step reads the common weights and the experts its tokens route to, a token's FLOPs are the
active parameters', and the analysis row says which counts it used."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from accounting.models import ServingLoad
from engine.inference.defaults import HIDDEN_STATE_TRAFFIC
from engine.inference.sizing import InferenceWorkload, evaluate_inference
from engine.model_catalog import find_model
from engine.moe import decode_params_read, expected_experts_read, matmul_params_per_token
from inventory.models import AcceleratorModel
from planner import services
from planner.inference_estimate import card_frame
from planner.serving_factors import served_params, weight_bytes_per_card
from tests.support.builders import add_h100_pool
from tests.support.inline import run_analysis_inline

START = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
END = dt.datetime(2024, 3, 31, tzinfo=dt.UTC)
QWEN = "Qwen3-235B-A22B"
# Qwen Team 2025, "Qwen3 Technical Report" (arXiv:2505.09388), Table 2: 235B total, 22B
# activated; 128 experts, 8 per token (config.json on huggingface.co).
QWEN_TOTAL, QWEN_ACTIVE, QWEN_EXPERTS, QWEN_TOP_K = 235e9, 22e9, 128, 8
SERVED = {
    "weight_precision": "fp8",
    "kv_precision": "fp8",
    "input_tokens": 1000,
    "output_tokens": 300,
}
FP8_BYTES = 1.0


def add_load(pool, **model) -> ServingLoad:
    return ServingLoad.objects.create(
        pool=pool,
        period_start=START,
        period_end=END,
        served_tokens_per_s=1000.0,
        **SERVED,
        **model,
    )


def rows_of(capture) -> dict[str, dict]:
    with capture(execute=False):
        analysis = services.start_analysis(scope="fleet", period_start=START, period_end=END)
    analysis = run_analysis_inline(analysis)
    return {row["pool"]: row for row in analysis.results["pools"]}


def best_moe_option(count: int = 8) -> pd.Series:
    """The engine's best option for Qwen3 on `count` H100, from its MoE shape directly."""
    model = find_model(QWEN)
    workload = InferenceWorkload(
        params=model.total_params(), moe=model.moe_shape(), cards=count, **SERVED
    )
    card = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    options = evaluate_inference(card_frame([card]), workload)
    options = options[options["feasible"]]
    return options.loc[options["capacity_tokens_per_s"].idxmax()]


def test_the_catalog_counts_are_the_published_ones():
    model = find_model(QWEN)
    assert model.params == QWEN_TOTAL
    assert model.active_params() == pytest.approx(QWEN_ACTIVE, rel=0.02)  # norms not counted
    assert (model.experts, model.experts_per_token) == (QWEN_EXPERTS, QWEN_TOP_K)


def test_provenance_names_the_counts_used():
    moe = served_params(QWEN, QWEN_TOTAL)
    active = find_model(QWEN).active_params()
    assert moe.provenance == f"active {active / 1e9:.3g} B of 235 B, catalog {QWEN}"
    # Memory holds the total counted from the shape (the engine checks shapes against it).
    assert moe.total == pytest.approx(QWEN_TOTAL, rel=0.001) and moe.active == active
    dense = served_params("llama-3.1-70b", 70.55e9)
    assert dense.provenance == "all 70.6 B active, catalog Llama-3.1-70B"
    assert dense.attention is not None and dense.attention.kv_heads == 8  # the real GQA
    assert served_params("", 8e9).provenance == "all 8 B active, model_params as entered"
    gone = served_params("Not-In-Catalog-7B", 7e9)
    assert gone.moe is None and "no longer holds Not-In-Catalog-7B" in gone.provenance


def test_one_token_reads_the_active_weights_not_every_expert():
    """At batch 1 a step touches k of E experts a layer: the MBU's weight bytes are the
    active matrix weights, an order of magnitude below the 235 B memory holds."""
    params = served_params(QWEN, QWEN_TOTAL)
    shape = params.moe
    assert shape is not None
    assert float(expected_experts_read(QWEN_EXPERTS, QWEN_TOP_K, 1)) == pytest.approx(QWEN_TOP_K)
    option = pd.Series({"batch": 1, "tp": 8, "step_chunked": False, "step_prompt_per_output": 0.0})
    per_card = weight_bytes_per_card(option, params, "fp8")
    assert per_card == pytest.approx(matmul_params_per_token(shape) * FP8_BYTES / 8)
    assert per_card * 8 < QWEN_TOTAL / 10
    # Many tokens a step: nearly every expert is read (still not more than memory holds).
    many = option.copy()
    many["batch"] = 512
    all_experts = find_model(QWEN).total_params() * FP8_BYTES
    assert 0.9 * all_experts < weight_bytes_per_card(many, params, "fp8") * 8 <= all_experts


@pytest.mark.django_db
def test_a_named_moe_load_uses_active_flops_and_the_experts_read(
    alpha, django_capture_on_commit_callbacks
):
    moe_pool = add_h100_pool(alpha, "moe", purpose="inference")
    dense_pool = add_h100_pool(alpha, "dense", purpose="inference")
    add_load(moe_pool, model_name=QWEN, model_params=QWEN_TOTAL)
    add_load(dense_pool, model_params=QWEN_TOTAL)  # the same count, taken as all active
    rows = rows_of(django_capture_on_commit_callbacks)
    moe, dense = rows["moe"], rows["dense"]
    model = find_model(QWEN)
    active, shape = model.active_params(), model.moe_shape()
    assert moe["serving_params"] == f"active {active / 1e9:.3g} B of 235 B, catalog {QWEN}"
    assert dense["serving_params"] == "all 235 B active, model_params as entered"

    best = best_moe_option()
    card = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    capacity = float(best["capacity_tokens_per_s"])
    assert moe["serving_capacity_tokens_per_s"] == pytest.approx(capacity)
    # MFU at capacity: 2 FLOPs per active parameter for each token of a request, per output.
    flops = capacity * 2 * active * (1000 + 300) / 300
    assert moe["serving_mfu"] == pytest.approx(flops / (8 * card.dense_bf16_tflops * 1e12))
    # The same count read as dense: FLOPs per served token in the ratio total / active.
    per_token_moe = moe["serving_mfu"] / moe["serving_capacity_tokens_per_s"]
    per_token_dense = dense["serving_mfu"] / dense["serving_capacity_tokens_per_s"]
    assert per_token_dense / per_token_moe == pytest.approx(QWEN_TOTAL / active)
    # MBU at capacity: the experts the step's decoded and folded prompt tokens touch.
    batch = float(best["batch"])
    tokens = batch * (1 + best["step_prompt_per_output"]) if best["step_chunked"] else batch
    weights = float(decode_params_read(shape, tokens)) * FP8_BYTES
    kv = best["kv_bytes_per_token_per_card"] * (1000 + 300 / 2) * best["tp"]
    # ...and the hidden state every card moves around the experts: hidden 4,096 × 94 MoE
    # layers a decoded token (engine/inference/defaults.py HIDDEN_STATE_TRAFFIC), on each card.
    hidden = HIDDEN_STATE_TRAFFIC.value * 4096 * 94 * best["tp"]
    moved = capacity * (weights / batch + kv + hidden)
    assert moe["mfu"] == pytest.approx(moved / (8 * card.memory_bandwidth_tbs * 1e12))
    assert moe["mfu_basis"] == "serving_load_model"
    # Utilization: served over the MoE's capacity, far above what a dense 235 B would serve.
    assert moe["utilization"] == pytest.approx(1000.0 / capacity)
    assert capacity > dense["serving_capacity_tokens_per_s"]

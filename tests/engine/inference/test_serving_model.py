"""The step-time model's terms and properties (engine/inference: roofline, sizing, engines)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.inference import InferenceWorkload, evaluate_inference
from engine.inference.curve import latency_throughput_curve
from engine.inference.engines import ENGINES
from engine.inference.memory import AttentionShape
from engine.inference.sizing import choose
from engine.limits import EngineInputError
from tests.support.inference_inputs import A100_40GB, H100_SXM, H200

# Meta's published config.json shapes.
LLAMA31_8B = AttentionShape(32, 4096, 32, 8, 128, ffn_hidden=14336, vocab=128256)
LLAMA2_70B = AttentionShape(80, 8192, 64, 8, 128, ffn_hidden=28672, vocab=32000)
LLAMA31_405B = AttentionShape(126, 16384, 128, 8, 128, ffn_hidden=53248, vocab=128256)
B200 = {
    **H100_SXM,
    "accelerator": "B200 180GB",
    "memory_gb": 180.0,
    "memory_bandwidth_tbs": 7.7,
    "dense_bf16_tflops": 2250.0,
    "dense_fp8_tflops": 4500.0,
    "dense_fp4_tflops": 9000.0,
    "intra_node_interconnect_gbs": 1800.0,
}
A100_80GB = {**A100_40GB, "accelerator": "A100 SXM4 80GB", "memory_gb": 80.0,
             "memory_bandwidth_tbs": 2.039, "intra_node_interconnect_gbs": 600.0}  # fmt: skip


def one(card: dict, **kwargs) -> pd.Series:
    return evaluate_inference(pd.DataFrame([card]), InferenceWorkload(**kwargs)).iloc[0]


def test_long_context_at_small_batch_is_paced_by_the_attention_kernel():
    """4 sequences of 64k tokens read the same KV bytes as 256 of 1k; without a split along
    the context (plain SDPA) 4 sequences give the card 32 work units and take far longer."""
    common = {"params": 8.03e9, "output_tokens": 64, "cards": 1, "tp": 1, "shape": LLAMA31_8B}
    for engine in ("plain-pytorch", "tensorrt-llm"):
        few_long = one(H100_SXM, **common, input_tokens=65_536, batch=4, engine=engine)
        many_short = one(H100_SXM, **common, input_tokens=1_024, batch=256, engine=engine)
        assert few_long["batch"] == 4 and many_short["batch"] == 256
        ratio = few_long["decode_step_ms"] / many_short["decode_step_ms"]
        if engine == "plain-pytorch":
            assert ratio > 1.3
        else:  # flash-decoding splits the 64k context: the bytes, not the kernel, set the pace
            assert ratio < 1.2


def test_tensor_parallel_all_reduce_costs_latency_at_batch_1():
    """Llama-2-70B at batch 1 on 8 A100: the step is more than an eighth of the weights' time,
    by at least the 160 all-reduces' latency."""
    common = {"params": 68.98e9, "input_tokens": 5, "output_tokens": 200, "batch": 1,
              "shape": LLAMA2_70B, "engine": "pytorch-compiled"}  # fmt: skip
    tp8 = one(A100_80GB, **common, cards=8, tp=8)
    weights_ms = tp8["step_memory_s"] * 1e3
    latency_ms = 2 * 80 * ENGINES["pytorch-compiled"].allreduce_latency_us / 1e3
    assert tp8["decode_step_ms"] >= weights_ms + latency_ms
    assert tp8["step_fixed_s"] * 1e3 >= latency_ms


def test_weight_only_int8_is_less_than_twice_as_fast_as_bf16():
    """Half the bytes, but dequantising in the kernel reaches a smaller share of the
    bandwidth (gpt-fast: 155.6 against 104.9 tokens/s, not 210)."""
    common = {"params": 6.74e9, "input_tokens": 5, "output_tokens": 200, "cards": 1, "tp": 1,
              "batch": 1, "engine": "pytorch-compiled"}  # fmt: skip
    bf16 = one(A100_80GB, **common, weight_precision="bf16")
    int8 = one(A100_80GB, **common, weight_precision="int8")
    assert int8["compute_precision"] == "bf16"  # weight-only: the products run in 16 bits
    assert 1.0 < bf16["tpot_ms"] / int8["tpot_ms"] < 2.0


def test_a_405b_fp8_model_at_maximum_load_is_compute_bound():
    row = one(H200, params=405.85e9, input_tokens=1000, output_tokens=1000, cards=8, tp=8,
              weight_precision="fp8", kv_precision="fp8", shape=LLAMA31_405B)  # fmt: skip
    assert row["feasible"] and row["decode_bound"] == "compute"
    assert row["compute_precision"] == "fp8"


def test_fp4_needs_fp4_tensor_cores():
    common = {"params": 70.55e9, "input_tokens": 1000, "output_tokens": 1000, "cards": 1,
              "tp": 1, "weight_precision": "nvfp4", "kv_precision": "fp8"}  # fmt: skip
    hopper = one(H200, **common)
    assert not hopper["feasible"] and "FP4 tensor cores" in hopper["reason"]
    assert hopper["tokens_per_s"] == 0
    blackwell = one(B200, **common)
    assert blackwell["feasible"] and blackwell["compute_precision"] == "nvfp4"
    # 4.5 bits a weight: NVFP4's 16-value blocks carry one FP8 scale.
    assert blackwell["weight_gb_per_card"] == pytest.approx(70.55 * 4.5 / 8, rel=1e-9)


def test_prefill_is_more_efficient_for_longer_prompts():
    def per_token_ms(prompt: int) -> float:
        row = one(H200, params=8.03e9, input_tokens=prompt, output_tokens=1, cards=1, tp=1,
                  shape=LLAMA31_8B)  # fmt: skip
        return float(row["prefill_ms"]) / prompt

    assert per_token_ms(128) > per_token_ms(512) > per_token_ms(2048)


def test_engines_differ_where_their_code_does():
    common = {"params": 8.03e9, "input_tokens": 32, "output_tokens": 128, "cards": 1, "tp": 1,
              "batch": 8, "shape": LLAMA31_8B}  # fmt: skip
    steps = {e: one(H100_SXM, **common, engine=e)["decode_step_ms"] for e in ENGINES}
    assert steps["tensorrt-llm"] < steps["vllm"]  # vLLM's per-step host work
    assert steps["pytorch-compiled"] < steps["plain-pytorch"]  # fused kernels, fewer launches
    assert steps["sglang"] == steps["vllm"]  # no SGLang figure: vLLM's efficiencies


def test_an_unknown_engine_or_format_is_refused_by_name():
    base = {"params": 8e9, "input_tokens": 100, "output_tokens": 100, "cards": 1}
    with pytest.raises(EngineInputError) as caught:
        InferenceWorkload(**base, engine="triton")
    assert "engine" in caught.value.errors
    with pytest.raises(EngineInputError) as caught:
        InferenceWorkload(**base, weight_precision="fp4")
    assert "weight_precision" in caught.value.errors


def test_the_band_brackets_the_estimate():
    row = one(H100_SXM, params=8.03e9, input_tokens=500, output_tokens=500, cards=1, tp=1,
              shape=LLAMA31_8B)  # fmt: skip
    for column in ("capacity_tokens_per_s", "tpot_ms", "ttft_ms"):
        assert row[f"{column}_low"] < row[column] < row[f"{column}_high"], column


def test_the_curve_is_the_same_model_as_the_estimate():
    frame = evaluate_inference(
        pd.DataFrame([H100_SXM, H200]),
        InferenceWorkload(
            params=8.03e9,
            input_tokens=1000,
            output_tokens=500,
            cards=1,
            tp=1,
            shape=LLAMA31_8B,
            batch=64,
        ),  # fmt: skip
    )
    curve = latency_throughput_curve(frame, 500)
    for _, option in frame.iterrows():
        point = curve[(curve["accelerator"] == option["accelerator"])]
        at = point[point["batch"] == option["batch"]]
        if not at.empty:
            assert at["tpot_ms"].iloc[0] == pytest.approx(option["tpot_ms"], rel=1e-9)
        assert point["tpot_ms"].is_monotonic_increasing


# --------------------------------------------------------------------------------------------
# Properties, for every engine
# --------------------------------------------------------------------------------------------

engine_st = st.sampled_from(sorted(ENGINES))
params_st = st.floats(1e9, 2e11)
tokens_st = st.integers(16, 8192)
precision_st = st.sampled_from(["bf16", "fp8", "int8", "int4"])


@given(engine=engine_st, precision=precision_st, params=params_st, tokens_in=tokens_st,
       tokens_out=tokens_st, more=st.floats(1.0, 4.0))  # fmt: skip
def test_more_bandwidth_never_lowers_decode_throughput(
    engine, precision, params, tokens_in, tokens_out, more
):
    w = InferenceWorkload(params=params, input_tokens=tokens_in, output_tokens=tokens_out,
                          cards=8, engine=engine, weight_precision=precision)  # fmt: skip
    faster = {**H100_SXM, "memory_bandwidth_tbs": H100_SXM["memory_bandwidth_tbs"] * more}
    slow = evaluate_inference(pd.DataFrame([H100_SXM]), w)["replica_tokens_per_s"].to_numpy()
    fast = evaluate_inference(pd.DataFrame([faster]), w)["replica_tokens_per_s"].to_numpy()
    assert np.all(fast >= slow * (1 - 1e-12))


@given(engine=engine_st, params=params_st, context=st.integers(64, 100_000),
       longer=st.integers(1, 100_000))  # fmt: skip
def test_a_longer_context_never_raises_the_maximum_batch(engine, params, context, longer):
    def frame(ctx: int) -> pd.DataFrame:
        w = InferenceWorkload(params=params, input_tokens=32, output_tokens=32,
                              context_tokens=ctx, cards=8, engine=engine)  # fmt: skip
        return evaluate_inference(pd.DataFrame([H100_SXM, A100_40GB, H200]), w)

    short, long_ = frame(context), frame(context + longer)
    assert np.all(long_["max_batch"].to_numpy() <= short["max_batch"].to_numpy())


@given(engine=engine_st, params=params_st, target=st.floats(10, 1e6),
       tpot=st.one_of(st.none(), st.floats(5, 500)),
       prices=st.lists(st.floats(0.1, 20), min_size=3, max_size=3))  # fmt: skip
def test_the_cheapest_option_is_on_the_pareto_front(engine, params, target, tpot, prices):
    rows = [
        {**card, "rental_price_per_card_hour": price}
        for card, price in zip((H100_SXM, A100_40GB, H200), prices, strict=True)
    ]
    w = InferenceWorkload(params=params, input_tokens=512, output_tokens=256,
                          tokens_per_s=target, tpot_ms=tpot, engine=engine)  # fmt: skip
    best = choose(evaluate_inference(pd.DataFrame(rows), w))
    cheapest = best[best["cheapest"]]
    if best["feasible"].any():
        assert len(cheapest) == 1 and bool(cheapest["pareto"].iloc[0])
        costs = best.loc[best["feasible"], "cost_per_million_tokens"]
        assert math.isclose(cheapest["cost_per_million_tokens"].iloc[0], costs.min())
    else:
        assert cheapest.empty

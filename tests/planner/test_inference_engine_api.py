"""The serving engine as an input of the inference estimate and of stored inference plans
(POST /api/v1/estimates/inference/, /api/v1/inference-plans/; docs/inference.md).

The expectations are worked by hand from the engines' published defaults (as engines.py
cites them), not read from the engine: TensorRT-LLM gives the KV cache 90 % of the memory left
after the weights (kv_cache_free_gpu_mem_fraction 0.9) and batches up to 2,048 sequences;
vLLM takes 90 % of the whole card (gpu_memory_utilization 0.9) and batches at most 256
(max_num_seqs).
"""

from __future__ import annotations

import io

import pandas as pd
import pytest

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimates/inference/"
PLANS = "/api/v1/inference-plans/"
ENGINE_NAMES = ("tensorrt-llm", "vllm", "sglang", "plain-pytorch", "pytorch-compiled")

# Llama-3-8B (Meta's config.json): 32 layers, 8 KV heads of 128, hidden 4,096, vocabulary
# 128,256 (untied), 8,030,261,248 parameters; FP8 weights and KV cache on one H100 SXM5 (80 GiB
# of HBM3, 3.35 TB/s: NVIDIA H100 datasheet).
ONE_H100 = {
    "model": "Llama-3-8B",
    "accelerator": "H100 SXM5 80GB",
    "weight_precision": "fp8",
    "kv_precision": "fp8",
    "input_tokens": 1000,
    "output_tokens": 1000,
    "cards": 1,
}
CARD_BYTES = 80 * 2**30
WEIGHT_BYTES = 8_030_261_248  # one byte per FP8 weight
RUNTIME_RESERVE_BYTES = 2 * 2**30  # CUDA context and workspaces (docs/inference.md)
# One 8,192-token prefill chunk through a layer: 34 bytes per token and hidden unit
# (Korthikanti et al. 2022, selective recomputation).
ACTIVATION_BYTES = 34 * 8192 * 4096
KV_BYTES_PER_SEQUENCE = 2 * 32 * 8 * 128 * 1 * (1000 + 1000)  # K and V, 2,000 tokens, FP8

# (80 GiB - weights - activations - reserve) x 0.9 / 131,072,000 bytes = 512.1 sequences
TRT_MAX_BATCH = 512
# 80 GiB x 0.9 - weights - activations - reserve = 503.5 sequences
VLLM_MAX_BATCH = 503
VLLM_MAX_NUM_SEQS = 256

# A batch of one: the weights stream (all but the untied input embedding, 7.505e9 bytes) at
# each engine's achieved bandwidth, plus its fixed cost per step: TensorRT-LLM 32 x 49 us
# per layer + 12 us; vLLM 32 x 27 us + 1,500 us (the host's scheduling and sampling).
STREAMED_BYTES = WEIGHT_BYTES - 128_256 * 4096
BANDWIDTH = 3.35e12
TRT_BATCH1_MS = (32 * 49 + 12) / 1e3 + STREAMED_BYTES / (BANDWIDTH * 0.78) * 1e3  # 4.45
VLLM_BATCH1_MS = (32 * 27 + 1500) / 1e3 + STREAMED_BYTES / (BANDWIDTH * 0.83) * 1e3  # 5.06


@pytest.fixture
def api(client_for, viewer):
    return client_for(viewer)


def estimate(api, body: dict) -> dict:
    response = api.post(URL, body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_hand_worked_memory_figures_are_the_ones_above():
    trt = (CARD_BYTES - WEIGHT_BYTES - ACTIVATION_BYTES - RUNTIME_RESERVE_BYTES) * 0.9
    vllm = CARD_BYTES * 0.9 - WEIGHT_BYTES - ACTIVATION_BYTES - RUNTIME_RESERVE_BYTES
    assert int(trt // KV_BYTES_PER_SEQUENCE) == TRT_MAX_BATCH
    assert int(vllm // KV_BYTES_PER_SEQUENCE) == VLLM_MAX_BATCH


def test_without_an_engine_the_default_is_tensorrt_llm_and_says_so(api):
    body = estimate(api, ONE_H100)
    assert (body["engine"], body["engine_label"]) == ("tensorrt-llm", "TensorRT-LLM")
    assert body["provenance"]["engine"] == "default (TensorRT-LLM)"
    assert all(option["engine"] == "tensorrt-llm" for option in body["options"])
    named = estimate(api, {**ONE_H100, "engine": "tensorrt-llm"})
    assert named["provenance"]["engine"] == "entered"
    assert named | {"provenance": None} == body | {"provenance": None}


def test_vllm_and_tensorrt_llm_reserve_and_batch_as_their_presets(api):
    trt = estimate(api, {**ONE_H100, "engine": "tensorrt-llm"})
    vllm = estimate(api, {**ONE_H100, "engine": "vllm"})
    assert (trt["engine"], vllm["engine"]) == ("tensorrt-llm", "vllm")
    assert vllm["provenance"]["engine"] == "entered"
    assert (trt["max_batch"], vllm["max_batch"]) == (TRT_MAX_BATCH, VLLM_MAX_BATCH)
    # TensorRT-LLM fills the memory (2,048 > 512); vLLM stops at its 256 sequences.
    assert (trt["batch"], vllm["batch"]) == (TRT_MAX_BATCH, VLLM_MAX_NUM_SEQS)
    assert trt["capacity_tokens_per_s"] != vllm["capacity_tokens_per_s"]
    assert vllm["tpot_ms"] < trt["tpot_ms"]  # half the batch per step
    assert trt["settings"]["bandwidth_efficiency"] == 0.78
    assert vllm["settings"]["bandwidth_efficiency"] == 0.83


def test_at_a_batch_of_one_vllm_pays_its_host_step(api):
    trt = estimate(api, {**ONE_H100, "engine": "tensorrt-llm", "batch": 1})
    vllm = estimate(api, {**ONE_H100, "engine": "vllm", "batch": 1})
    # The KV read and the compute (at one token, ~0.2 ms) ride on top of both alike.
    assert trt["decode_step_ms"] == pytest.approx(TRT_BATCH1_MS, rel=0.08)
    assert vllm["decode_step_ms"] == pytest.approx(VLLM_BATCH1_MS, rel=0.08)
    difference_ms = vllm["decode_step_ms"] - trt["decode_step_ms"]
    assert difference_ms == pytest.approx(VLLM_BATCH1_MS - TRT_BATCH1_MS, abs=0.05)


@pytest.mark.parametrize("engine", ["fastllm", "TensorRT", "vLLM ", 7])
def test_an_unknown_engine_is_a_400_naming_the_choices(api, engine):
    response = api.post(URL, {**ONE_H100, "engine": engine}, format="json")
    assert response.status_code == 400
    message = " ".join(response.json()["engine"])
    assert "is not a serving engine" in message
    assert all(name in message for name in ENGINE_NAMES), message


def test_a_plan_keeps_its_engine_and_its_engines_result(client_for, planner, api):
    client = client_for(planner)
    inputs = {**ONE_H100, "engine": "vllm"}
    created = client.post(PLANS, {"name": "8B on vLLM", "inputs": inputs}, format="json")
    assert created.status_code == 201, created.content
    plan = created.json()
    assert plan["inputs"]["engine"] == "vllm"
    assert plan["results"]["engine"] == "vllm"
    assert plan["results"]["batch"] == VLLM_MAX_NUM_SEQS
    assert plan["results"]["tpot_ms"] == pytest.approx(estimate(api, inputs)["tpot_ms"])

    listed = client.get(PLANS).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["engine"] for row in rows] == ["vllm"]
    frame = pd.read_csv(io.BytesIO(client.get(f"{PLANS}{plan['id']}/options/?format=csv").content))
    assert frame["engine"].tolist() == ["vllm"]

    changed = client.patch(
        f"{PLANS}{plan['id']}/", {"inputs": {**inputs, "engine": "tensorrt-llm"}}, format="json"
    ).json()
    assert changed["results"]["engine"] == "tensorrt-llm"
    assert changed["results"]["batch"] == TRT_MAX_BATCH


def test_a_plan_refuses_an_unknown_engine(client_for, planner):
    from planner.models import InferencePlan

    body = {"name": "bad", "inputs": {**ONE_H100, "engine": "fastllm"}}
    response = client_for(planner).post(PLANS, body, format="json")
    assert response.status_code == 400
    assert "tensorrt-llm" in str(response.json()["inputs"]["engine"])
    assert not InferencePlan.objects.exists()


def test_the_result_carries_the_calibrated_band_of_its_figures(api):
    # docs/inference.md section 6: within modeled ÷ f … × f, f = 1.103 on TPOT, 1.134 on TTFT
    # and 1.184 on tokens/s, the same for every engine.
    for engine in ("tensorrt-llm", "vllm"):
        body = estimate(api, {**ONE_H100, "engine": engine})
        assert body["tpot_ms_low"] == pytest.approx(body["tpot_ms"] / 1.103)
        assert body["tpot_ms_high"] == pytest.approx(body["tpot_ms"] * 1.103)
        assert body["ttft_ms_high"] == pytest.approx(body["ttft_ms"] * 1.134)
        capacity = body["capacity_tokens_per_s"]
        assert body["capacity_tokens_per_s_low"] == pytest.approx(capacity / 1.184)

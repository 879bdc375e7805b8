"""The per-card model of engine/steptime.py: what one card spends on matmuls, attention and
memory-bound work, and what a split adds on top."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.capacity import TrainingWorkload, plan_capacity
from engine.capacity.options import prepare_options
from engine.capacity.splits import card_rates, step_workload
from engine.defaults import DEFAULTS
from engine.memory import ModelShape
from engine.steptime import (
    CardRates,
    Links,
    Traffic,
    Workload,
    attention_efficiency,
    matmul_params,
    mfu_ceiling,
    step_time_arrays,
    traffic_defaults,
)
from tests.support.capacity_inputs import H100_SXM

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "results"
SHAPE = ModelShape(layers=2, hidden=1024, heads=8)  # GPT-like: 12·h² per layer, head size 128
PARAMS = float(SHAPE.params)  # 2 × 12 × 1024² = 25,165,824
CARD = CardRates(
    peak_flops_s=1e15,
    matmul_flops_s=5e14,
    bf16_matmul_flops_s=5e14,
    attention_peak_flops_s=1e15,
    hbm_bytes_s=1e12,
)
TRAFFIC = Traffic(
    per_activation_byte=2.0,
    fp8_cast_per_activation_byte=0.0,
    weight_bytes_per_param=0.0,
    optimizer_bytes_per_param=32.0,
    logits_bytes_per_vocab=40.0,
)
LINKS = Links(nvlink_bytes_s=3.6e11, fabric_bytes_s=4.5e10, fabric_latency_s=5e-6, cards_per_node=8)
ONE_CARD = (1, 1, 1, 1, 1, 1, 1)  # tp, pp, vp, cp, dp, micro-batch, micro-batches


def _value(key: str) -> float:
    return float(DEFAULTS[key].value)


def _step(work: Workload, card: CardRates = CARD, split: tuple = ONE_CARD, traffic=TRAFFIC):
    return step_time_arrays(work=work, split=split, card=card, links=LINKS, traffic=traffic)


def test_one_card_step_written_out():
    work = Workload(params=PARAMS, shape=SHAPE, seq_len=2048)
    tokens = 2048
    # Matmuls: 2 FLOPs × 3 passes × tokens × N at 5e14, plus 4 GEMMs × 2 layers × 3 passes calls.
    matmuls = 6 * tokens * PARAMS / 5e14 + 24 * _value("gemm_call_overhead_us") * 1e-6
    # Attention core: 3.5 × 2·s·h per token and layer, at the kernel's efficiency for 2,048
    # tokens and head size 128 of the 1e15 peak.
    efficiency = (
        _value("attention_efficiency_max")
        * 2048
        / (2048 + _value("attention_half_efficiency_tokens"))
        * 128
        / (128 + _value("attention_half_efficiency_head_dim"))
    )
    attention = 3.5 * 2 * 2048 * 1024 * tokens * 2 / (1e15 * efficiency)
    # Memory-bound kernels: 2 bytes per stored activation byte, (10 + 24)·h per token and layer.
    kernels = 2.0 * 34 * 1024 * tokens * 2 / 1e12
    optimizer = 32.0 * PARAMS / 1e12  # the Adam step over every parameter
    step = _step(work)
    assert step.compute_s[()] == pytest.approx(matmuls + attention + kernels + optimizer)
    useful = 6 * PARAMS * tokens / 1e15
    assert step.mfu[()] == pytest.approx(useful / (matmuls + attention + kernels + optimizer))
    assert step.scaling[()] == 1.0  # one card: nothing on top


def test_fp8_speeds_up_the_matmuls_only():
    bf16 = Workload(params=PARAMS, shape=SHAPE, seq_len=2048)
    fp8 = Workload(params=PARAMS, shape=SHAPE, seq_len=2048, fp8=True)
    # FP8 doubles the peak and the matmul rate; attention and memory traffic stay bf16.
    fast = CardRates(2e15, 1e15, 5e14, 1e15, 1e12)
    matmuls = 6 * 2048 * PARAMS
    saved = matmuls / 5e14 - matmuls / 1e15
    assert _step(fp8, fast).compute_s[()] == pytest.approx(_step(bf16).compute_s[()] - saved)
    # The gain is far below the 2× of the peaks: the non-matmul work does not speed up.
    assert 1 < _step(bf16).compute_s[()] / _step(fp8, fast).compute_s[()] < 2


def test_fp8_scaling_traffic_counts_against_fp8_runs_only():
    casts = Traffic(2.0, 1.0, 0.0, 32.0, 40.0)
    bf16 = Workload(params=PARAMS, shape=SHAPE, seq_len=2048)
    fp8 = Workload(params=PARAMS, shape=SHAPE, seq_len=2048, fp8=True)
    assert _step(bf16, traffic=casts).compute_s[()] == _step(bf16).compute_s[()]
    extra = 1.0 * 34 * 1024 * 2048 * 2 / 1e12
    assert _step(fp8, traffic=casts).compute_s[()] == pytest.approx(
        _step(fp8).compute_s[()] + extra
    )


def test_memory_bandwidth_shortens_only_the_memory_bound_part():
    work = Workload(params=PARAMS, shape=SHAPE, seq_len=2048)
    wide = CardRates(1e15, 5e14, 5e14, 1e15, 2e12)
    memory = (2.0 * 34 * 1024 * 2048 * 2 + 32.0 * PARAMS) / 1e12
    assert _step(work, wide).compute_s[()] == pytest.approx(_step(work).compute_s[()] - memory / 2)


def test_longer_sequences_pay_for_attention_at_the_kernels_measured_rate():
    short = _step(Workload(params=PARAMS, shape=SHAPE, seq_len=2048))
    long = _step(Workload(params=PARAMS, shape=SHAPE, seq_len=8192))
    # Per token the matmuls are the same; attention grows with s but runs faster at 8k.
    assert long.compute_s[()] / 4 > short.compute_s[()] - 32.0 * PARAMS / 1e12
    ratio = attention_efficiency(8192, 128) / attention_efficiency(2048, 128)
    assert 1.1 < ratio < 1.5


def test_an_entered_mfu_replaces_the_per_card_model():
    work = Workload(params=PARAMS, shape=SHAPE, seq_len=2048)
    entered = CardRates(1e15, 5e14, 5e14, 1e15, 1e12, mfu=0.4)
    step = _step(work, entered)
    assert step.mfu[()] == pytest.approx(0.4)
    assert step.compute_s[()] == pytest.approx(6 * PARAMS * 2048 / 1e15 / 0.4)


def test_a_card_of_a_multi_card_job_runs_at_the_multi_card_share():
    work = Workload(params=PARAMS, shape=SHAPE, seq_len=2048, zero_stage=0)
    alone = _step(work)
    # Two data-parallel replicas: the same per-card work, at the fitted share of the speed.
    pair = _step(work, split=(1, 1, 1, 1, 2, 1, 1))
    assert pair.compute_s[()] == pytest.approx(
        alone.compute_s[()] / _value("multi_card_compute_share")
    )
    assert pair.scaling[()] < 1.0  # and the gradient all-reduce on top


def test_matmul_weights_leave_out_the_input_embedding():
    untied = ModelShape(32, 4096, 32, ffn_hidden=14336, vocab=128256, mlp="gated", kv_heads=8)
    layers, output = matmul_params(8.03e9, untied)
    assert output == 128256 * 4096
    assert layers == pytest.approx(8.03e9 - 2 * 128256 * 4096)
    tied = ModelShape(
        16, 2048, 32, ffn_hidden=8192, vocab=128256, mlp="gated", tied_embeddings=True
    )
    assert matmul_params(1.236e9, tied) == pytest.approx((1.236e9 - 128256 * 2048, 128256 * 2048))
    assert matmul_params(7e9, ModelShape(32, 4096, 32)) == (7e9, 0.0)  # no vocabulary given


def _measurements(section: str) -> list[tuple[dict, dict]]:
    rows = []
    for path in sorted(RESULTS.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        rows += [(row, data["peaks"]) for row in data[section] if row["status"] == "ok"]
    return rows


def test_the_attention_curve_reproduces_the_committed_kernel_measurements():
    rows = [
        (row, peaks)
        for row, peaks in _measurements("attention")
        if row["backends"] == "default_fused" and row["mode"] == "fwd_bwd"
    ]
    assert len(rows) == 12
    for row, peaks in rows:
        measured = row["tflops"] / peaks["bf16_dense_tflops"]
        modeled = attention_efficiency(row["seq_len"], row["head_dim"])
        assert modeled == pytest.approx(measured, rel=0.06), row


def test_the_gemm_rate_reproduces_the_committed_gemm_measurements():
    errors = []
    for row, peaks in _measurements("gemm"):
        if row["dtype"] != "bf16" or min(row["m"], row["n"], row["k"]) < 2048:
            continue
        rate = peaks["bf16_dense_tflops"] * 1e12 * _value("gemm_efficiency_nvidia")
        modeled_s = row["flops"] / rate + _value("gemm_call_overhead_us") * 1e-6
        errors.append(abs(modeled_s / (row["time_ms"] * 1e-3) - 1))
    assert len(errors) == 80
    assert np.median(errors) < 0.05 and max(errors) < 0.15


def test_the_stacks_differ_in_traffic_not_in_matmuls():
    megatron, plain = traffic_defaults("megatron"), traffic_defaults("plain_pytorch")
    assert plain.per_activation_byte > megatron.per_activation_byte
    assert plain.weight_bytes_per_param > megatron.weight_bytes_per_param == 0


@settings(max_examples=20, deadline=None)
@given(
    nodes=st.integers(1, 64),
    seq_len=st.sampled_from([2048, 8192, 32768]),
    precision=st.sampled_from(["bf16", "fp8"]),
)
def test_no_split_beats_the_per_card_ceiling(nodes, seq_len, precision):
    # The ceiling bounds deadline mode's search: it must hold for every split it may pick.
    workload = TrainingWorkload(
        params=13e9,
        tokens=1e12,
        seq_len=seq_len,
        precision=precision,
        global_batch_tokens=4 * 2**20,
        shape=ModelShape(40, 5120, 40),
    )
    option = pd.DataFrame([{**H100_SXM, "cards": 8 * nodes}])
    row = plan_capacity(workload, option).iloc[0]
    frame = prepare_options(option, workload)
    ceiling = mfu_ceiling(
        step_workload(workload), card_rates(frame), traffic_defaults(workload.software_stack)
    )
    assert row["mfu"] * row["scaling"] <= ceiling[0] + 1e-12


def test_an_h200_trains_faster_than_an_h100_of_the_same_peak():
    workload = TrainingWorkload(
        params=3.2e9,
        tokens=1e12,
        seq_len=8192,
        global_batch_sequences=64,
        shape=ModelShape(28, 3072, 24, kv_heads=8, ffn_hidden=8192, vocab=128256, mlp="gated"),
    )
    h100 = {**H100_SXM, "cards": 8, "memory_bandwidth_tbs": 3.35}
    h200 = {**h100, "accelerator": "H200 SXM 141GB", "memory_gb": 141, "memory_bandwidth_tbs": 4.8}
    plan = plan_capacity(workload, pd.DataFrame([h100, h200]))
    assert plan.iloc[1]["days"] < plan.iloc[0]["days"]

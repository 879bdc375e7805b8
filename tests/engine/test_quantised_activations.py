"""FP8/FP4 training keeps the linear layers' inputs quantised for the weight gradient
(engine.memory, engine.training_precision; docs/capacity-planning.md §3 "Quantised saved
inputs", docs/decisions/0022): fewer activation bytes, so the splits NVIDIA publishes come
closer to the planner's memory wall (still above it: what is left out is on the safe side)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.memory import ModelShape, activation_bytes_per_card, activation_bytes_per_layer
from engine.parallelism import FixedParallelism
from engine.training_precision import saved_gemm_input_bytes
from tests.support.capacity_inputs import plan_shape

ROOT = Path(__file__).resolve().parents[2]
# Llama 3 70B (Meta's model card): 80 layers, 8,192 wide, 64 heads, 8 KV heads, 28,672 gated.
LLAMA3_70B = ModelShape(80, 8192, 64, kv_heads=8, ffn_hidden=28672, vocab=128256, mlp="gated")
S, B, H = 8192, 1, 8192


def _per_sbh(gemm_input_bytes: float, recompute: str = "selective", tp: int = 1) -> float:
    per_layer = activation_bytes_per_layer(
        S, B, H, 64, tp, recompute=recompute, gemm_input_bytes=gemm_input_bytes,
        **LLAMA3_70B.activation_terms(),
    )  # fmt: skip
    return float(per_layer) / (S * B * H)


def test_bf16_inputs_are_korthikantis_bytes():
    # 10 kept whole + Q 2 + K, V 4·1,024/8,192 + attention output 2 + gate, up, product 6·3.5.
    assert _per_sbh(2.0) == pytest.approx(10 + 2 + 0.5 + 2 + 21)
    default = activation_bytes_per_layer(S, B, H, 64, 1, recompute="selective")
    assert float(default) == pytest.approx(34 * S * B * H)


@pytest.mark.parametrize(("q", "expected"), [(1.0, 31.0), (0.5625, 28.15625)])
def test_quantised_inputs_shrink_only_the_gemm_inputs(q: float, expected: float):
    # Attention and MLP inputs (2 + 2) and the down projection's input (2 · 3.5) at q bytes;
    # the attention output stays 16-bit for the attention backward, its quantised copy on top.
    by_hand = (10 - 4 + 2 * q) + 2 + 0.5 + (2 + q) + (4 * 3.5 + q * 3.5)
    assert by_hand == pytest.approx(expected)
    assert _per_sbh(q) == pytest.approx(expected)
    # Tensor and sequence parallelism split all of it; full recomputation keeps the input only.
    assert _per_sbh(q, tp=4) == pytest.approx(expected / 4)
    assert _per_sbh(q, recompute="full") == pytest.approx(_per_sbh(2.0, recompute="full")) == 2.0


def test_the_card_total_passes_the_bytes_through():
    args = (S, 1, 80, H, 64, 1, 4, 32)
    terms = {"recompute": "selective", **LLAMA3_70B.activation_terms()}
    bf16 = activation_bytes_per_card(*args, **terms)
    fp8 = activation_bytes_per_card(*args, gemm_input_bytes=1.0, **terms)
    assert float(fp8) / float(bf16) == pytest.approx(31.0 / 35.5)


def test_saved_input_bytes_by_precision_and_stack():
    fmt = np.array(["nvfp4", "mxfp4"], dtype=object)
    assert list(saved_gemm_input_bytes("bf16", "megatron", 1.0, fmt)) == [2.0, 2.0]
    assert list(saved_gemm_input_bytes("fp8", "megatron", 1.0, fmt)) == [1.0, 1.0]
    assert list(saved_gemm_input_bytes("fp8", "megatron_2024", 1.0, fmt)) == [1.0, 1.0]
    # Plain PyTorch keeps its bf16 inputs (no Transformer Engine).
    assert list(saved_gemm_input_bytes("fp8", "plain_pytorch", 1.0, fmt)) == [2.0, 2.0]
    assert list(saved_gemm_input_bytes("fp4", "megatron", 1.0, fmt)) == [0.5625, 0.53125]
    # The paper's recipe keeps 16 % of the layers in bf16.
    mixed = saved_gemm_input_bytes("fp4", "megatron", 0.84, fmt)
    assert mixed[0] == pytest.approx(0.84 * 0.5625 + 0.16 * 2.0)


def _gb300() -> dict:
    path = ROOT / "inventory" / "fixtures" / "accelerators.csv"
    with path.open(encoding="utf-8") as f:
        row = next(r for r in csv.DictReader(f) if r["model"].startswith("GB300"))
    numbers = ("dense_bf16_tflops", "dense_fp8_tflops", "dense_fp4_tflops", "memory_gb")
    numbers += ("memory_bandwidth_tbs", "tdp_w", "intra_node_interconnect_gbs")
    card = {name: float(row[name]) for name in (*numbers, "nvlink_domain_cards")}
    return {**card, "accelerator": row["model"], "vendor": row["vendor"]}


def _published_split(precision: str) -> pd.Series:
    return plan_shape(
        _gb300(), LLAMA3_70B, 64, precision,
        global_batch_sequences=256,
        micro_batch=1,
        parallelism=FixedParallelism(tp=1, pp=4, vp=5, cp=1),
        fp4_bf16_layer_share=0.0 if precision == "fp4" else None,  # the recipe keeps none
    )  # fmt: skip


@pytest.mark.parametrize(("precision", "q"), [("fp8", 1.0), ("fp4", 0.5625)])
def test_nvidias_gb300_split_for_llama3_70b_needs_less(precision: str, q: float):
    # NVIDIA Megatron-Bridge, scripts/performance/configs/llama/llama3_workload_base_configs.py:
    # LLAMA3_70B_PRETRAIN_CONFIG_GB300_FP8_MX_V2 and _NVFP4_V2 run Llama 3 70B on 64 GB300 at
    # TP 1 × PP 4 × VP 5, micro-batch 1, GBS 256, 8,192 tokens. Counted in bf16 the planner
    # needed 219 GB of activations for it (323 GB per card of 279); quantised inputs take off
    # the GEMM inputs' share (selective recomputation, Megatron's default).
    plan, bf16 = _published_split(precision), _published_split("bf16")
    ratio = _per_sbh(q) / _per_sbh(2.0)
    assert plan["activation_bytes_per_card"] == pytest.approx(
        ratio * bf16["activation_bytes_per_card"]
    )
    assert plan["activation_bytes_per_card"] < 0.9 * bf16["activation_bytes_per_card"]
    # Still above the usable memory: the rest (a dropout-free recipe's masks, FP8/FP4 primary
    # weights) is not modeled (docs/decisions/0022); the planner stays on the safe side.
    assert not plan["feasible"]

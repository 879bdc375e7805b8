"""Card rows and option frames for the capacity planner's tests (pure Python: no Django)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from engine.capacity import TrainingWorkload, plan_capacity
from engine.memory import ModelShape

A100_80GB = {
    "accelerator": "A100 SXM4 80GB",
    "vendor": "NVIDIA",
    "dense_bf16_tflops": 312.0,
    "memory_gb": 80.0,
    "tdp_w": 400.0,
}
A100_40GB = {**A100_80GB, "accelerator": "A100 SXM4 40GB", "memory_gb": 40.0}
H100_SXM = {
    "accelerator": "H100 SXM5 80GB",
    "vendor": "NVIDIA",
    "dense_bf16_tflops": 989.0,
    "dense_fp8_tflops": 1979.0,
    "memory_gb": 80.0,
    "tdp_w": 700.0,
}


def options(*rows: dict) -> pd.DataFrame:
    """An options frame from dicts (one row per option)."""
    return pd.DataFrame(list(rows))


def plan_shape(
    card: dict, shape: ModelShape, cards: int, precision: str, **workload: Any
) -> pd.Series:
    """One option's plan for a model of `shape` on `cards` of `card`: 10¹² tokens of 8,192,
    effective time and utilization 1; `workload` adds or overrides TrainingWorkload fields."""
    fields = {"tokens": 1e12, "seq_len": 8192, "global_batch_sequences": 512, **workload}
    work = TrainingWorkload(params=float(shape.params), precision=precision, shape=shape, **fields)
    option = {**card, "cards": cards, "effective_time": 1.0, "utilization": 1.0}
    return plan_capacity(work, pd.DataFrame([option])).iloc[0]

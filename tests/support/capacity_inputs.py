"""Card rows and option frames for the capacity planner's tests (pure Python: no Django)."""

from __future__ import annotations

import pandas as pd

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

"""Cards and a model shape for the serving model's tests (pure Python: no Django)."""

from __future__ import annotations

import math

from engine.inference.memory import AttentionShape

# Vendor datasheet figures, as in the project's card catalog (inventory/fixtures).
A100_40GB = {
    "accelerator": "A100 SXM4 40GB",
    "memory_gb": 40.0,
    "memory_bandwidth_tbs": 1.555,
    "dense_bf16_tflops": 312.0,
    "dense_fp8_tflops": math.nan,
    "dense_int8_tops": 624.0,
    "tdp_w": 400.0,
    "rental_price_per_card_hour": 1.10,
    "list_price": 10_000.0,
}
H100_SXM = {
    "accelerator": "H100 SXM5 80GB",
    "memory_gb": 80.0,
    "memory_bandwidth_tbs": 3.35,
    "dense_bf16_tflops": 989.0,
    "dense_fp8_tflops": 1979.0,
    "dense_int8_tops": 1979.0,
    "tdp_w": 700.0,
    "rental_price_per_card_hour": 2.50,
    "list_price": 30_000.0,
}
H200 = {
    **H100_SXM,
    "accelerator": "H200 SXM 141GB",
    "memory_gb": 141.0,
    "memory_bandwidth_tbs": 4.8,
    "rental_price_per_card_hour": 3.20,
}
# Llama-3-70B / Llama-3.3-70B (Meta's published config.json): 80 layers, hidden 8,192,
# 64 query heads, 8 KV heads (grouped-query attention), head dimension 128.
LLAMA3_70B = AttentionShape(layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128)
LLAMA3_70B_PARAMS = 70.6e9

# The same model as the inference estimate API's body fields.
LLAMA_70B = {
    "model_params": 70.6e9,
    "layers": 80,
    "hidden_size": 8192,
    "attention_heads": 64,
    "kv_heads": 8,
    "head_dim": 128,
}
# The planner's Inference tab: a 70B chat model in FP8 on H100 or L4 (the tab's query string).
TAB_QUERY = {
    "model_params": "70e9",
    "weight_precision": "fp8",
    "kv_precision": "fp8",
    "input_tokens": "1000",
    "output_tokens": "500",
    "requests_per_s": "10",
    "tpot_ms": "50",
    "accelerator": ["H100 SXM5 80GB", "L4"],
}

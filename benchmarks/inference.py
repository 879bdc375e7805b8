"""Benchmark the serving model: 1,000 inference options evaluated at once.

Every card model of the catalog (24 today) × tensor-parallel degrees 1, 2, 4, 8 × 14 context
lengths (1k to 128k tokens) = 1,344 options for Llama-3-70B in FP8 at 20 requests/s with a
50 ms TPOT bound, on the default engine (TensorRT-LLM): memory, the step-time model's batch
within the bound (a bisection), replicas, energy, cost and the band, then the best degree per
card model and the Pareto front. Target: < 1 s for 1,000 options. Also times a bare-numpy
ceiling (the textbook roofline's arithmetic on plain arrays, no DataFrame, no validation, none
of the engine terms) and prints the ratio.

Run from the repository root:
    .venv/bin/python benchmarks/inference.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a plain script

from engine.inference import InferenceWorkload, evaluate_inference
from engine.inference.memory import AttentionShape
from engine.inference.sizing import choose
from inventory.catalog import catalog_rows

CONTEXTS = [1024 * k for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)]
LLAMA_70B = AttentionShape(layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128)
PARAMS = 70.6e9
INPUT, OUTPUT = 512, 512


def card_models() -> pd.DataFrame:
    frame = pd.DataFrame(catalog_rows()).rename(columns={"name": "accelerator"})
    return frame.astype({"dense_fp8_tflops": float, "dense_int8_tops": float})


def engine_run(cards: pd.DataFrame) -> int:
    """Every context length through the engine; returns the options evaluated."""
    evaluated = 0
    for context in CONTEXTS:
        w = InferenceWorkload(
            params=PARAMS,
            input_tokens=INPUT,
            output_tokens=OUTPUT,
            context_tokens=context,
            requests_per_s=20,
            tpot_ms=50,
            weight_precision="fp8",
            kv_precision="fp8",
            shape=LLAMA_70B,
        )
        frame = evaluate_inference(cards, w)
        choose(frame)
        evaluated += len(frame)
    return evaluated


def bare_numpy(cards: pd.DataFrame) -> int:
    """The same core arithmetic on plain arrays: the ceiling the engine is compared with."""
    memory = cards["memory_gb"].to_numpy()[:, None, None] * 1e9
    bandwidth = cards["memory_bandwidth_tbs"].to_numpy()[:, None, None] * 1e12 * 0.7
    fp8 = cards["dense_fp8_tflops"].to_numpy()
    peak = np.where(np.isfinite(fp8), fp8, cards["dense_bf16_tflops"].to_numpy())
    peak = peak[:, None, None] * 1e12 * 0.5
    tp = np.array([1, 2, 4, 8], dtype=float)[None, :, None]
    context = np.array(CONTEXTS, dtype=float)[None, None, :]
    kv = 2 * 80 * np.maximum(8 / tp, 1) * 128 * 1.0
    weights = PARAMS / tp
    batch = np.floor(np.maximum(memory * 0.9 - weights - 34 * 8192 * 8192 / tp, 0) / (kv * context))
    prefill = 2 * PARAMS * INPUT / (tp * peak)
    fixed, per_seq = weights / bandwidth, kv * (INPUT + OUTPUT / 2) / bandwidth
    compute = 2 * PARAMS / (tp * peak)
    by_tpot = np.minimum(
        (0.05 - fixed) / (per_seq + prefill / OUTPUT), 0.05 / (compute + prefill / OUTPUT)
    )
    batch = np.floor(np.clip(np.minimum(batch, by_tpot), 0, None))
    step = np.maximum(fixed + per_seq * batch, compute * batch)
    tpot = step + batch * prefill / OUTPUT
    with np.errstate(divide="ignore", invalid="ignore"):
        replicas = np.ceil(20 * OUTPUT / (batch / tpot))
    cost = replicas * tp * cards["rental_price_per_card_hour"].to_numpy()[:, None, None]
    return int(np.isfinite(cost).sum() + (~np.isfinite(cost)).sum())


def timed(fn, cards: pd.DataFrame, repeats: int) -> tuple[list[float], int]:
    times, count = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        count = fn(cards)
        times.append(time.perf_counter() - start)
    return times, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    repeats = parser.parse_args().repeats
    cards = card_models()
    engine_times, options = timed(engine_run, cards, repeats)
    bare_times, bare_options = timed(bare_numpy, cards, repeats)
    engine_s, bare_s = statistics.median(engine_times), statistics.median(bare_times)
    print(f"options: {options} (bare numpy: {bare_options})")
    print(f"engine: {engine_s:.4f} s median, {min(engine_times):.4f} s best of {repeats}")
    print(f"bare numpy: {bare_s * 1e3:.3f} ms median; engine / bare = {engine_s / bare_s:,.0f}x")
    print(f"target < 1 s: {'met' if engine_s < 1.0 else 'MISSED'}")


if __name__ == "__main__":
    main()

"""Benchmark the capacity planner's "choose for me" search.

10 card models × 50 card counts, every valid (tp, pp, virtual stages, cp, dp, micro-batch)
split of each count evaluated (memory wall, step-time model, effective time), the fastest
fitting split kept per option, then outcomes, the 10th-90th percentile band, ranking and the
Pareto front. Target: < 5 s. Deadline mode (exact smallest-card search): target < 2 s.

Run from the repository root:
    .venv/bin/python benchmarks/planner.py [--repeats 5] [--exhaustive]
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

from engine.capacity import (
    TrainingWorkload,
    cards_for_deadline,
    evaluate_splits,
    plan_capacity,
    prepare_options,
)

# Ten card models from the shared catalog (spec/accelerators.csv).
CARD_MODELS = pd.DataFrame(
    [
        ("NVIDIA", "V100 SXM2 32GB", 125, np.nan, 32, 300),
        ("NVIDIA", "A100 SXM4 40GB", 312, np.nan, 40, 400),
        ("NVIDIA", "A100 SXM4 80GB", 312, np.nan, 80, 400),
        ("NVIDIA", "H100 SXM5 80GB", 989, 1979, 80, 700),
        ("NVIDIA", "H20 96GB", 148, 296, 96, 400),
        ("NVIDIA", "H200 SXM 141GB", 989, 1979, 141, 700),
        ("NVIDIA", "B200 180GB", 2250, 4500, 180, 1000),
        ("AMD", "MI300X", 1307, 2615, 192, 750),
        ("Huawei", "Ascend 910B", 320, np.nan, 64, 400),
        ("Intel", "Gaudi 3", 1835, 1835, 128, 900),
    ],
    columns=[
        "vendor",
        "accelerator",
        "dense_bf16_tflops",
        "dense_fp8_tflops",
        "memory_gb",
        "tdp_w",
    ],
)
# 50 card counts, whole 8-card nodes from 64 to 16,384 cards.
CARD_COUNTS = (np.round(np.linspace(64, 16384, 50) / 8) * 8).astype(int)
DEADLINE_TARGET_S = 2.0
WORKLOAD = TrainingWorkload(params=70e9, tokens=2e12, global_batch_sequences=2048, seq_len=4096)


def build_options() -> pd.DataFrame:
    """Cross product card model × card count, with a site and a rental price."""
    grid = CARD_MODELS.merge(pd.DataFrame({"cards": CARD_COUNTS}), how="cross")
    grid["pue"] = 1.3
    grid["tariff_per_kwh"] = 0.10
    grid["grid_carbon_g_per_kwh"] = 400.0
    grid["rental_price_per_card_hour"] = grid["dense_bf16_tflops"] / 300.0
    return grid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--exhaustive", action="store_true", help="also time deadline mode without the split bound"
    )
    args = parser.parse_args()
    options = build_options()
    frame = prepare_options(options, WORKLOAD)
    splits = evaluate_splits(WORKLOAD, frame, frame["cards"].to_numpy(np.int64))

    plan_capacity(WORKLOAD, options)  # warm-up (imports, caches)
    seconds: list[float] = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        plan = plan_capacity(WORKLOAD, options)
        seconds.append(time.perf_counter() - start)
    median = statistics.median(seconds)
    print(f"options: {len(options)} ({len(CARD_MODELS)} card models x {len(CARD_COUNTS)} counts)")
    print(f"splits evaluated: {len(splits)} ({int(splits['fits_memory'].sum())} fit in memory)")
    print(
        f"feasible options: {int(plan['feasible'].sum())}, Pareto front: "
        f"{int(plan['on_pareto_front'].sum())}"
    )
    print(f"seconds: median {median:.3f}, best {min(seconds):.3f} over {args.repeats} runs")
    print(f"options/s: {len(options) / median:,.0f}; splits/s: {len(splits) / median:,.0f}")

    deadlines = options.drop(columns="cards").drop_duplicates("accelerator")
    deadlines = deadlines.merge(pd.DataFrame({"deadline_days": [15.0, 30.0, 60.0]}), how="cross")
    deadline_seconds: list[float] = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        by_deadline = plan_capacity(WORKLOAD, deadlines)
        deadline_seconds.append(time.perf_counter() - start)
    median = statistics.median(deadline_seconds)
    print(
        f"deadline mode: {len(deadlines)} options ({int(by_deadline['feasible'].sum())} "
        f"feasible): median {median:.3f} s, best {min(deadline_seconds):.3f} s over "
        f"{args.repeats} runs; {median / DEADLINE_TARGET_S:.2f} of the "
        f"{DEADLINE_TARGET_S:g} s target"
    )
    if args.exhaustive:  # the search without the split bound, same load, same answers
        prepared = prepare_options(deadlines, WORKLOAD)
        start = time.perf_counter()
        exhaustive = cards_for_deadline(WORKLOAD, prepared, exhaustive=True)
        elapsed = time.perf_counter() - start
        same = np.array_equal(exhaustive, by_deadline["cards"].to_numpy(np.float64), equal_nan=True)
        print(f"exhaustive deadline search alone: {elapsed:.3f} s (same answers: {same})")


if __name__ == "__main__":
    main()

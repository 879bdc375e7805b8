"""The latency–throughput curve of each option: TPOT and tokens/s as the batch grows.

The roofline of serving: throughput rises with the batch while decoding is memory-bound and
flattens past the compute crossover, while the time per output token keeps growing. Uses the
step coefficients evaluate_inference stores (roofline.py), so the curve is the same model.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, cast

import numpy as np
import pandas as pd

from engine.inference import roofline

MAX_POINTS = 40  # batch values per option: a geometric grid from 1 to the maximum batch


class CurveOption(Protocol):
    """The columns of an evaluate_inference option row the curve reads."""

    accelerator: str
    tp: int
    max_batch: float
    step_fixed_s: float
    step_memory_s: float
    step_compute_s: float
    prefill_ms: float


def batch_grid(max_batch: int, points: int = MAX_POINTS) -> np.ndarray:
    if max_batch < 1:
        return np.empty(0, dtype=np.int64)
    grid = np.geomspace(1, max_batch, num=min(points, max_batch))
    return np.unique(np.round(grid).astype(np.int64))


def latency_throughput_curve(options: pd.DataFrame, output_tokens: int) -> pd.DataFrame:
    """One row per (option, batch): accelerator, tp, batch, tpot_ms, tokens/s per card."""
    parts = []
    servable = options[options["max_batch"] >= 1].itertuples(index=False)
    for row in cast(Iterable[CurveOption], servable):
        batch = batch_grid(int(row.max_batch))
        step = roofline.step_seconds(batch, row.step_fixed_s, row.step_memory_s, row.step_compute_s)
        tpot = roofline.tpot_seconds(batch, step, row.prefill_ms / 1e3, output_tokens)
        parts.append(
            pd.DataFrame(
                {
                    "accelerator": row.accelerator,
                    "tp": row.tp,
                    "batch": batch,
                    "tpot_ms": tpot * 1e3,
                    "tokens_per_s_per_card": batch / tpot / row.tp,
                }
            )
        )
    columns = ["accelerator", "tp", "batch", "tpot_ms", "tokens_per_s_per_card"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)

"""The latency–throughput curve of each option: TPOT and tokens/s as the batch grows.

The roofline of serving: throughput rises with the batch while decoding is memory-bound and
flattens past the compute crossover, while the time per output token keeps growing. Uses the
step terms evaluate_inference stores in each option row (sizing.STEP_COLUMNS), so the curve is
the same model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.inference import roofline
from engine.inference.sizing import terms_from_columns

MAX_POINTS = 40  # batch values per option: a geometric grid from 1 to the maximum batch


def batch_grid(max_batch: int, points: int = MAX_POINTS) -> np.ndarray:
    if max_batch < 1:
        return np.empty(0, dtype=np.int64)
    grid = np.geomspace(1, max_batch, num=min(points, max_batch))
    return np.unique(np.round(grid).astype(np.int64))


def latency_throughput_curve(options: pd.DataFrame, output_tokens: int) -> pd.DataFrame:
    """One row per (option, batch): accelerator, tp, batch, tpot_ms, tokens/s per card."""
    parts = []
    servable = options[options["max_batch"] >= 1].reset_index(drop=True)
    for index in range(len(servable)):
        row = servable.iloc[[index]]
        batch = batch_grid(int(row["max_batch"].iloc[0])).astype(np.float64)
        terms = terms_from_columns(row)
        prefill_s = row["prefill_ms"].to_numpy(dtype=float) / 1e3
        tpot = roofline.tpot_seconds(terms, batch, prefill_s, output_tokens)
        tp = int(row["tp"].iloc[0])
        parts.append(
            pd.DataFrame(
                {
                    "accelerator": row["accelerator"].iloc[0],
                    "tp": tp,
                    "batch": batch.astype(np.int64),
                    "tpot_ms": tpot * 1e3,
                    "tokens_per_s_per_card": batch / tpot / tp,
                }
            )
        )
    columns = ["accelerator", "tp", "batch", "tpot_ms", "tokens_per_s_per_card"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)

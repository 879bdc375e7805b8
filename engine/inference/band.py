"""The honest band around a serving estimate, from the model's own track record.

On every calibration row of engine/data/published_serving_runs.json the model's figure is
divided by the published one (r = modeled / published). Per kind of figure (tokens/s, TPOT,
TTFT) and per engine family (the serving engines, whose figures are end to end under load; the
PyTorch loops, timed kernel by kernel), the 10th and 90th percentile of ln r say how far off
the model usually is. Those residuals are in-sample: the constants were fitted on the same
rows, which makes them look smaller than they are on a new case. They are therefore widened by
sqrt(n / (n − k)), n calibration rows and k fitted constants (engines.FITTED_CONSTANTS), the
correction a residual spread gets for the parameters fitted to it. A published figure then lies
between modeled / r_high and modeled / r_low; the held-out rows, never used to fit, test that
(engine/data/track_record.json, "serving": band coverage by role).

RATIO_QUANTILES is the committed result of engine.inference.track_record.band_quantiles on the
calibration rows; tests/engine/inference/test_serving_track_record.py recomputes it.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

Group = Literal["throughput", "tpot", "ttft"]
Family = Literal["serving", "pytorch"]
GROUPS: tuple[Group, ...] = ("throughput", "tpot", "ttft")
FAMILIES: tuple[Family, ...] = ("serving", "pytorch")
ENGINE_FAMILY: dict[str, Family] = {
    "tensorrt-llm": "serving",
    "vllm": "serving",
    "sglang": "serving",
    "plain-pytorch": "pytorch",
    "pytorch-compiled": "pytorch",
}
LOW_QUANTILE, HIGH_QUANTILE = 0.10, 0.90

# (low, high) ratio of modeled / published per (group, family), rounded to 3 places.
RATIO_QUANTILES: dict[tuple[Group, Family], tuple[float, float]] = {
    ("throughput", "serving"): (0.87, 1.157),
    ("tpot", "serving"): (0.972, 1.073),
    ("ttft", "serving"): (0.976, 1.167),
    ("throughput", "pytorch"): (0.914, 1.01),
    ("tpot", "pytorch"): (0.931, 1.039),
    ("ttft", "pytorch"): (0.951, 1.066),
}

# Option column -> the group whose band it carries.
BAND_COLUMNS: dict[str, Group] = {
    "capacity_tokens_per_s": "throughput",
    "replica_tokens_per_s": "throughput",
    "tpot_ms": "tpot",
    "ttft_ms": "ttft",
}


def band(
    modeled: NDArray[np.float64], group: Group, engine: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(low, high) where the true figure falls 8 times in 10, given the modeled one."""
    r_low, r_high = RATIO_QUANTILES[(group, ENGINE_FAMILY[engine])]
    return modeled / r_high, modeled / r_low

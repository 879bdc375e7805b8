"""The honest band around a serving estimate, from the model's own track record.

On every dense calibration row of engine/data/published_serving_runs.json (the
mixture-of-experts rows fit nothing: track_record.py) the model's figure is compared with the
published one: the score is |ln(modeled / published)|. Per regime (tokens/s,
TPOT and other decode times, TTFT and other prefill times) the band's half-width in log space
is a split-conformal quantile of those scores (Vovk et al. 2005; Angelopoulos & Bates 2021):
the ceil((n + 1)(1 − α))-th smallest of the regime's n scores, α = 0.2, which holds a new
exchangeable score with probability at least 1 − α whatever their distribution.

The calibration rows are not exchangeable with new ones: the engines' k constants were fitted
on them, so their residuals are smaller than a new case's. For a least-squares fit with k
constants on n rows the mean leverage is k / n: an in-sample residual has variance σ²(1 − k/n)
and a new case's error σ²(1 + k/n). The quantile is therefore widened by
sqrt((n + k) / (n − k)) (n all calibration rows, k = engines.FITTED_CONSTANTS). A published
figure then lies between modeled / factor and modeled × factor. The held-out rows, never used
to fit the constants or to make the band, test it (engine/data/track_record.json, "serving").

RATIO_FACTORS is the committed result of engine.inference.track_record.band_factors on the
calibration rows; tests/engine/inference/test_serving_track_record.py recomputes it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

Group = Literal["throughput", "tpot", "ttft"]
GROUPS: tuple[Group, ...] = ("throughput", "tpot", "ttft")
MISS_RATE = 0.2  # α: the band misses a new figure at most 1 time in 5 (nominal 80 %)

# Per regime: the published figure lies within modeled ÷ factor .. modeled × factor
# (3 places; band_factors on the 66 dense calibration rows, 26 fitted constants).
RATIO_FACTORS: dict[Group, float] = {
    "throughput": 1.184,
    "tpot": 1.103,
    "ttft": 1.134,
}

# Option column -> the regime whose band it carries.
BAND_COLUMNS: dict[str, Group] = {
    "capacity_tokens_per_s": "throughput",
    "replica_tokens_per_s": "throughput",
    "tpot_ms": "tpot",
    "ttft_ms": "ttft",
}


def conformal_quantile(scores: Sequence[float], miss_rate: float = MISS_RATE) -> float:
    """The ceil((n + 1)(1 − α))-th smallest score; inf when n is too small for that rank."""
    rank = math.ceil((len(scores) + 1) * (1.0 - miss_rate))
    return math.inf if rank > len(scores) else sorted(scores)[rank - 1]


def fitting_widening(rows: int, fitted_constants: int) -> float:
    """sqrt((n + k) / (n − k)): a new case's error spread over an in-sample residual's."""
    return math.sqrt((rows + fitted_constants) / (rows - fitted_constants))


def band(
    modeled: NDArray[np.float64], group: Group, engine: str = ""
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(low, high) where the true figure falls 8 times in 10 (or more), given the modeled one.

    The same for every engine: per engine there are too few calibration rows for a finite
    conformal quantile (`engine` is kept for the callers)."""
    factor = RATIO_FACTORS[group]
    return modeled / factor, modeled * factor

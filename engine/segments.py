"""Segment reductions (sum, min, max, count) over integer group codes, with numpy only.

The engine reduces node groups to pools and pools to scopes many times; sorting the codes
once and reusing the order keeps each reduction a single ``bincount`` or ``reduceat``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


class Segments:
    """Rows labelled by ``codes`` in ``range(n_segments)``; every segment must be non-empty."""

    def __init__(self, codes: ArrayLike, n_segments: int) -> None:
        self.codes = np.asarray(codes, dtype=np.int64)
        self.n_segments = n_segments
        self.counts = np.bincount(self.codes, minlength=n_segments)
        if (self.counts == 0).any():
            raise ValueError("every segment needs at least one row")
        self.starts = np.r_[0, np.cumsum(self.counts)[:-1]]
        self._order: np.ndarray | None = None
        self._already_sorted = bool((self.codes[1:] >= self.codes[:-1]).all())

    def _sorted(self, values: ArrayLike) -> np.ndarray:
        """``values`` in segment order (rows are often already grouped: then no sort at all)."""
        array = np.asarray(values)
        if self._already_sorted:
            return array
        if self._order is None:
            self._order = np.argsort(self.codes, kind="stable")
        return array[self._order]

    def sum(self, values: ArrayLike) -> np.ndarray:
        return np.bincount(
            self.codes, weights=np.asarray(values, dtype=float), minlength=self.n_segments
        )

    def min(self, values: ArrayLike) -> np.ndarray:
        return np.minimum.reduceat(self._sorted(values), self.starts)

    def max(self, values: ArrayLike) -> np.ndarray:
        return np.maximum.reduceat(self._sorted(values), self.starts)

    def any(self, mask: ArrayLike) -> np.ndarray:
        return (
            np.bincount(
                self.codes, weights=np.asarray(mask, dtype=float), minlength=self.n_segments
            )
            > 0
        )

    def bitwise_or(self, bits: ArrayLike) -> np.ndarray:
        return np.bitwise_or.reduceat(self._sorted(np.asarray(bits, dtype=np.int64)), self.starts)


def distinct_per_segment(codes: ArrayLike, labels: ArrayLike, n_segments: int) -> np.ndarray:
    """Number of distinct non-negative ``labels`` within each segment."""
    codes_arr = np.asarray(codes, dtype=np.int64)
    labels_arr = np.asarray(labels, dtype=np.int64)
    span = int(labels_arr.max(initial=0)) + 1
    pairs = np.unique(codes_arr * span + labels_arr)
    return np.bincount(pairs // span, minlength=n_segments)

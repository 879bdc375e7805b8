"""Enumeration of tensor × pipeline × data parallel splits (n = t · p · d), vectorised.

A split is valid when
- t divides n, t <= cards per node (tensor-parallel traffic stays on NVLink) and t divides the
  attention heads (Megatron-LM shards whole heads);
- p <= layers (a stage holds at least one layer);
- d = n / (t · p) is whole and d × micro-batch <= global batch (every replica gets a micro-batch);
- fixed degrees, when the caller gives them, are respected.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from planner.engine.limits import check_grid


@dataclass(frozen=True)
class FixedParallelism:
    """Degrees the caller fixed; None lets the planner choose."""

    tp: int | None = None
    pp: int | None = None
    dp: int | None = None

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1")

    @property
    def model_parallel_cards(self) -> int | None:
        """t · p when both are fixed: deadline search then moves in steps of t · p cards."""
        if self.tp is None or self.pp is None:
            return None
        return self.tp * self.pp


def enumerate_splits(
    cards: ArrayLike,
    cards_per_node: ArrayLike,
    *,
    layers: int,
    heads: int,
    global_batch: int,
    micro_batch: int = 1,
    fixed: FixedParallelism | None = None,
) -> pd.DataFrame:
    """All valid splits for each entry of `cards`.

    Returns one row per (entry, split) with columns row (position in `cards`), tp, pp, dp,
    micro_batches (per step and replica: global batch // (dp · micro_batch)).
    """
    fixed = fixed or FixedParallelism()
    n = np.atleast_1d(np.asarray(cards, dtype=np.int64))
    per_node = np.broadcast_to(np.asarray(cards_per_node, dtype=np.int64), n.shape)
    max_tp = int(per_node.max(initial=1))
    # Size the (entry × TP × PP) grid before allocating any part of it.
    tp_count = 1 if fixed.tp is not None else max_tp
    check_grid("cards_per_node", tp_count)
    check_grid("layers", n.size * tp_count * (1 if fixed.pp is not None else layers))
    tp_candidates = (
        np.array([fixed.tp], dtype=np.int64)
        if fixed.tp is not None
        else np.arange(1, max_tp + 1, dtype=np.int64)
    )
    pp_candidates = (
        np.array([fixed.pp], dtype=np.int64)
        if fixed.pp is not None
        else np.arange(1, layers + 1, dtype=np.int64)
    )
    n3 = n[:, None, None]
    t3 = tp_candidates[None, :, None]
    p3 = pp_candidates[None, None, :]
    model_parallel = t3 * p3
    dp3 = np.where(n3 % model_parallel == 0, n3 // model_parallel, 0)
    valid = (
        (dp3 >= 1)
        & (t3 <= per_node[:, None, None])
        & (heads % t3 == 0)
        & (p3 <= layers)
        & (dp3 * micro_batch <= global_batch)
    )
    if fixed.dp is not None:
        valid &= dp3 == fixed.dp
    row, ti, pi = np.nonzero(valid)
    tp = tp_candidates[ti]
    pp = pp_candidates[pi]
    dp = n[row] // (tp * pp)
    return pd.DataFrame(
        {
            "row": row,
            "tp": tp,
            "pp": pp,
            "dp": dp,
            "micro_batches": global_batch // (dp * micro_batch),
        }
    )


def no_split_reason(
    cards: int,
    cards_per_node: int,
    *,
    layers: int,
    heads: int,
    global_batch: int,
    micro_batch: int,
    fixed: FixedParallelism | None = None,
) -> str:
    """Why `cards` admits no valid split (for the option's reason string)."""
    fixed = fixed or FixedParallelism()
    if fixed.tp is not None and fixed.tp > cards_per_node:
        return f"tp={fixed.tp} exceeds {cards_per_node} cards per node"
    if fixed.tp is not None and heads % fixed.tp:
        return f"tp={fixed.tp} does not divide the {heads} attention heads"
    if fixed.pp is not None and fixed.pp > layers:
        return f"pp={fixed.pp} exceeds the {layers} layers"
    fixed_product = int(np.prod([v for v in (fixed.tp, fixed.pp, fixed.dp) if v is not None]))
    if cards % fixed_product:
        return f"{cards} cards are not a multiple of the fixed parallel degrees ({fixed_product})"
    if fixed.tp is not None and fixed.pp is not None and fixed.dp is not None:
        return f"{cards} cards != tp×pp×dp = {fixed_product}"
    return (
        f"no TP×PP×DP split of {cards} cards with TP <= {cards_per_node} per node dividing "
        f"{heads} heads, PP <= {layers} layers and DP × micro-batch <= global batch "
        f"{global_batch}"
    )

"""Enumeration of tensor × pipeline × data parallel splits (n = t · p · d), vectorised.

A split is valid when
- t divides n, t <= the cards that share NVLink (tensor-parallel traffic stays on NVLink) and t
  divides the attention heads (Megatron-LM shards whole heads). Those cards are the card's
  NVLink domain where the catalog knows it (8 on an HGX board, 72 on a GB200/GB300 NVL72 rack),
  else the node (:func:`scale_up_cards`);
- p <= layers (a stage holds at least one layer);
- d = n / (t · p) is whole and d × micro-batch <= global batch (every replica gets a micro-batch);
- fixed degrees, when the caller gives them, are respected;
- for a mixture of experts, the expert-parallel degree ep divides both the routed experts and
  d (expert parallelism is carved out of data parallelism, as in Megatron-Core and DeepSeek-V3:
  each of the ep ranks holds experts/ep experts of every MoE layer); a dense model has ep = 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from engine.limits import check_grid


def scale_up_cards(cards_per_node: ArrayLike, nvlink_domain_cards: ArrayLike) -> NDArray[np.int64]:
    """Cards one tensor-parallel (or expert-parallel) group may span on NVLink: the card's
    NVLink domain where known (NaN or missing: unknown), else the node, as before domains."""
    node = np.asarray(cards_per_node, dtype=np.float64)
    domain = np.asarray(nvlink_domain_cards, dtype=np.float64)
    known = np.isfinite(domain) & (domain >= 1)
    return np.where(known, np.floor(np.where(known, domain, 1.0)), node).astype(np.int64)


def _reach_text(cards_per_node: int, nvlink_domain_cards: int | None) -> str:
    """The cards tensor parallelism may span, as the messages name them."""
    if nvlink_domain_cards:
        return (
            f"{nvlink_domain_cards} cards of one NVLink domain (tensor parallelism stays on NVLink)"
        )
    return f"{cards_per_node} cards per node (tensor parallelism stays inside a node)"


@dataclass(frozen=True)
class FixedParallelism:
    """Degrees the caller fixed; None lets the planner choose."""

    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int | None = None
    vp: int | None = None
    ep: int | None = None  # expert parallelism, inside dp: not a factor of the card count

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "cp", "vp", "ep"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1")

    @property
    def product(self) -> int:
        """tp · pp · cp · dp of the degrees that are fixed (1 when none is): every card count
        must be a multiple of it."""
        return int(np.prod([v for v in (self.tp, self.pp, self.cp, self.dp) if v is not None]))

    def split_errors(
        self, *, cards: int | None, cards_per_node: int, nvlink_domain_cards: int | None = None
    ) -> dict[str, str]:
        """Why the fixed degrees cannot split `cards` cards (None: not known yet) on nodes of
        `cards_per_node` (tensor parallelism inside the NVLink domain when it is known),
        keyed by the API's field names (tp_degree, ...)."""
        errors: dict[str, str] = {}
        reach = nvlink_domain_cards or cards_per_node
        if self.tp is not None and (self.tp > reach or reach % self.tp):
            errors["tp_degree"] = (
                f"Must divide the {_reach_text(cards_per_node, nvlink_domain_cards)}."
            )
        if cards is None:
            return errors
        fixed = [(name, getattr(self, name)) for name in ("tp", "pp", "cp", "dp")]
        given = [(name, value) for name, value in fixed if value is not None]
        if not given:
            return errors
        named = " × ".join(f"{name}={value}" for name, value in given)
        last = f"{given[-1][0]}_degree"
        if cards % self.product:
            errors.setdefault(last, f"{named} = {self.product} must divide the {cards} cards.")
        elif len(given) == len(fixed) and self.product != cards:
            errors.setdefault(last, f"{named} = {self.product} must equal the {cards} cards.")
        return errors

    @property
    def model_parallel_cards(self) -> int | None:
        """t · p when both are fixed: deadline search then moves in steps of t · p cards."""
        if self.tp is None or self.pp is None:
            return None
        return self.tp * self.pp * (self.cp or 1)


# Candidate degrees the search tries beyond tensor and pipeline parallelism.
CONTEXT_PARALLEL_CANDIDATES: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
VIRTUAL_STAGE_CANDIDATES: tuple[int, ...] = (1, 2, 4, 8)
MICRO_BATCH_CANDIDATES: tuple[int, ...] = (1, 2, 4)
# Ring attention needs chunks long enough to hide the K/V exchange (Llama 3: 8k per rank).
MIN_TOKENS_PER_CONTEXT_RANK = 4096


@dataclass(frozen=True)
class BatchRule:
    """Global batch in sequences; with `max_sequences` above it, the batch grows with data
    parallelism until each replica runs `per_stage` micro-batches per pipeline stage."""

    sequences: int
    max_sequences: int | None = None
    per_stage: float = 1.0

    @property
    def largest(self) -> int:
        return max(self.sequences, self.max_sequences or 0)


def _model_parallel_grid(
    n: NDArray[np.int64],
    per_node: NDArray[np.int64],
    *,
    layers: int,
    heads: int,
    seq_len: int,
    fixed: FixedParallelism,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Valid (entry, tp, pp, cp) cells of the dense grid, sized before allocation."""
    max_tp = int(per_node.max(initial=1))
    cps = (
        [fixed.cp]
        if fixed.cp is not None
        else [
            c
            for c in CONTEXT_PARALLEL_CANDIDATES
            if c == 1 or seq_len // c >= MIN_TOKENS_PER_CONTEXT_RANK
        ]
    )
    tp_count = 1 if fixed.tp is not None else max_tp
    check_grid("cards_per_node", tp_count)
    check_grid("layers", n.size * tp_count * (1 if fixed.pp is not None else layers) * len(cps))
    tps = [fixed.tp] if fixed.tp is not None else list(range(1, max_tp + 1))
    pps = [fixed.pp] if fixed.pp is not None else list(range(1, layers + 1))
    t = np.array(tps, dtype=np.int64)[None, :, None, None]
    p = np.array(pps, dtype=np.int64)[None, None, :, None]
    c = np.array(cps, dtype=np.int64)[None, None, None, :]
    n4 = n[:, None, None, None]
    model = t * p * c
    node4 = per_node[:, None, None, None]
    valid = (n4 % model == 0) & (t <= node4) & (node4 % t == 0) & (heads % t == 0)
    valid &= (p <= layers) & (seq_len % c == 0)
    if fixed.dp is not None:
        valid &= n4 == model * fixed.dp
    row, ti, pi, ci = np.nonzero(valid)
    return row, t.ravel()[ti], p.ravel()[pi], c.ravel()[ci]


def expert_parallel_candidates(experts: int, fixed: int | None = None) -> list[int]:
    """Expert-parallel degrees to try: the divisors of the routed experts (1 when dense)."""
    if fixed is not None:
        return [fixed]
    return [e for e in range(1, max(experts, 1) + 1) if experts % e == 0]


def enumerate_splits(
    cards: ArrayLike,
    cards_per_node: ArrayLike,
    *,
    layers: int,
    heads: int,
    global_batch: int | BatchRule,
    micro_batch: int | None = 1,
    fixed: FixedParallelism | None = None,
    seq_len: int = 1,
    experts: int = 1,
) -> pd.DataFrame:
    """All valid splits for each entry of `cards`; `cards_per_node` is how far tensor
    parallelism reaches on NVLink (:func:`scale_up_cards`: the NVLink domain, else the node).

    Returns one row per (entry, split) with columns row (position in `cards`), tp, pp, vp
    (virtual stages), cp, dp, ep (expert parallel, inside dp), micro_batch (sequences),
    global_batch (sequences, grown when the batch rule lets it) and micro_batches (per step
    and replica). `micro_batch` None lets the search try MICRO_BATCH_CANDIDATES; context
    parallelism is tried when `seq_len` is long; expert parallelism when `experts` > 1.
    """
    fixed = fixed or FixedParallelism()
    rule = global_batch if isinstance(global_batch, BatchRule) else BatchRule(int(global_batch))
    n = np.atleast_1d(np.asarray(cards, dtype=np.int64))
    per_node = np.broadcast_to(np.asarray(cards_per_node, dtype=np.int64), n.shape)
    row, tp, pp, cp = _model_parallel_grid(
        n, per_node, layers=layers, heads=heads, seq_len=seq_len, fixed=fixed
    )
    vps = np.array([fixed.vp] if fixed.vp else VIRTUAL_STAGE_CANDIDATES, dtype=np.int64)
    mbs = np.array(MICRO_BATCH_CANDIDATES if micro_batch is None else [micro_batch], np.int64)
    cells = row.size * vps.size * mbs.size
    check_grid("microbatches", cells)
    pick = np.repeat(np.arange(row.size), vps.size * mbs.size)
    vp = np.tile(np.repeat(vps, mbs.size), row.size)
    mb = np.tile(mbs, row.size * vps.size)
    row, tp, pp, cp = row[pick], tp[pick], pp[pick], cp[pick]
    dp = n[row] // (tp * pp * cp)
    keep = (dp * mb <= rule.largest) & ((vp == 1) | ((pp > 1) & (pp * vp <= layers)))
    row, tp, pp, vp, cp, dp, mb = (x[keep] for x in (row, tp, pp, vp, cp, dp, mb))
    batch = np.full(row.size, rule.sequences, dtype=np.int64)
    if rule.max_sequences:
        wanted = np.ceil(dp * mb * pp * rule.per_stage).astype(np.int64)
        batch = np.clip(wanted, rule.sequences, max(rule.max_sequences, rule.sequences))
    keep = dp * mb <= batch
    frame: pd.DataFrame = pd.DataFrame(
        {"row": row, "tp": tp, "pp": pp, "vp": vp, "cp": cp, "dp": dp, "micro_batch": mb}
    )[keep]
    frame["global_batch"] = batch[keep]
    frame["micro_batches"] = frame["global_batch"] // (frame["dp"] * frame["micro_batch"])
    return _with_expert_parallel(frame.reset_index(drop=True), experts, fixed.ep)


def _with_expert_parallel(frame: pd.DataFrame, experts: int, fixed: int | None) -> pd.DataFrame:
    """Each split once per expert-parallel degree that divides its dp and the experts."""
    eps = np.array(expert_parallel_candidates(experts, fixed), dtype=np.int64)
    check_grid("microbatches", len(frame) * eps.size)
    repeated = frame.loc[frame.index.repeat(eps.size)].reset_index(drop=True)
    repeated["ep"] = np.tile(eps, len(frame))
    keep = (repeated["dp"] % repeated["ep"] == 0) & (experts % repeated["ep"] == 0)
    return repeated[keep.to_numpy()].reset_index(drop=True)


def no_split_reason(
    cards: int,
    cards_per_node: int,
    *,
    layers: int,
    heads: int,
    global_batch: int,
    micro_batch: int | None,
    fixed: FixedParallelism | None = None,
    nvlink_domain_cards: int | None = None,
) -> str:
    """Why `cards` admits no valid split (for the option's reason string); tensor parallelism
    spans the NVLink domain when it is known, else the node."""
    fixed = fixed or FixedParallelism()
    reach = nvlink_domain_cards or cards_per_node
    where = "in one NVLink domain" if nvlink_domain_cards else "per node"
    if fixed.tp is not None and fixed.tp > reach:
        return f"tp={fixed.tp} exceeds {reach} cards {where}"
    if fixed.tp is not None and heads % fixed.tp:
        return f"tp={fixed.tp} does not divide the {heads} attention heads"
    if fixed.pp is not None and fixed.pp > layers:
        return f"pp={fixed.pp} exceeds the {layers} layers"
    fixed_product = fixed.product
    if cards % fixed_product:
        return f"{cards} cards are not a multiple of the fixed parallel degrees ({fixed_product})"
    if fixed.tp is not None and fixed.pp is not None and fixed.dp is not None:
        named = "tp×pp×cp×dp" if fixed.cp is not None else "tp×pp×dp"
        return f"{cards} cards != {named} = {fixed_product}"
    return (
        f"no TP×PP×DP split of {cards} cards with TP <= {reach} {where} dividing "
        f"{heads} heads, PP <= {layers} layers and DP × micro-batch <= global batch "
        f"{global_batch}"
    )

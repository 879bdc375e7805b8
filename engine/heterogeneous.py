"""Heterogeneous pools and the bucket effect (docs/efficiency-model.md, bucket effect).

A pool holds card-model groups ``i`` with ``n_i`` cards of effective speed ``s_i`` (peak
dense FLOP/s × MFU). ``W = Σ n_i·s_i`` is what the cards could deliver with no bucket
loss; each strategy's heterogeneity factor is ``h = throughput / W``:

* ``synchronous_uniform``: equal shares, everyone waits for the slowest card at each
  step's barrier: ``throughput = (Σ n_i) · min s_i · mixing_penalty``.
* ``static_proportional``: each step's ``M`` micro-batches are apportioned to the groups
  in proportion to ``n_i·s_i`` with the largest-remainder rule (floor every exact share,
  then give the leftover micro-batches to the largest fractional parts; ties to the first
  group). The step lasts ``max_i r_i / (n_i·s_i)``, so ``balance = (M/W) / max_i(r_i/(n_i·s_i))``
  and ``throughput = W · balance · mixing_penalty``. With very few micro-batches rounding can
  lose more than proportional shares gain; the planner then keeps equal shares, so this
  strategy is never below ``synchronous_uniform``.
* ``dynamic_fine_grained``: many small pieces balance perfectly but each runs less
  efficiently: ``throughput = W · granularity_penalty · mixing_penalty``.
* ``split_homogeneous``: one job per card model; no bucket loss (``h = 1``), but every job
  is smaller: the engine evaluates scaling and effective time at each group's size
  (smaller jobs communicate less and fail less often, yet each finishes later).

The mixing penalty is 1 for a single card model, ``mixing_penalty_same_vendor`` for
several models of one vendor and ``mixing_penalty_cross_vendor`` across vendors. It
applies to every strategy that runs one job across unlike cards, since the collectives
cross unlike NICs and software stacks whatever the work split.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from engine.defaults import DEFAULTS, STRATEGIES, validate_overrides
from engine.factors import vendor_codes
from engine.segments import Segments, distinct_per_segment

SYNC, STATIC, DYNAMIC, SPLIT = range(4)

# Why-strings per (strategy, mix) with mix 0 = one card model, 1 = one vendor, 2 = several vendors.
_MIX_NOTE = (
    "",
    " The mixing penalty applies because unlike cards share the collectives.",
    " Across vendors the mixing penalty is larger: collectives cross unlike NICs and "
    "software stacks.",
)
_STRATEGY_WHY = (
    "One synchronous job: every card waits at each step's barrier for the slowest card, "
    "which costs little here because the speeds are close.",
    "Split each step's micro-batches in proportion to card speed so fast cards are not left "
    "waiting at the barrier for the slowest; whole micro-batches leave only a small "
    "rounding imbalance.",
    "Cut the work into many small pieces that cards pull as they finish; this balances "
    "unlike cards, but each small piece runs less efficiently.",
    "Run separate homogeneous jobs per card model: no barrier waits for the slowest card and "
    "no mixed collectives; each job is smaller, so it scales better but trains one model "
    "more slowly.",
)
_HOMOGENEOUS_WHY = "Single card model: no bucket effect; run one synchronous job across the pool."


_SPLIT_MIX_NOTE = (
    "",
    " A joint job would also pay the mixing penalty on collectives between unlike cards.",
    " Across vendors a joint job pays a larger mixing penalty: collectives cross unlike NICs and "
    "software stacks.",
)


def why_text(strategy: int, mix: int) -> str:
    """Human-readable reason to recommend ``STRATEGIES[strategy]`` for mix class ``mix``."""
    if mix == 0:
        return _HOMOGENEOUS_WHY
    return _STRATEGY_WHY[strategy] + (_SPLIT_MIX_NOTE if strategy == SPLIT else _MIX_NOTE)[mix]


WHY_TABLE: tuple[str, ...] = tuple(why_text(s, mix) for s in range(4) for mix in range(3))
_WHY_CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(WHY_TABLE))
_WHY_CODES = np.array([_WHY_CATEGORIES.index(text) for text in WHY_TABLE], dtype=np.int64)


@dataclass(frozen=True)
class BucketArrays:
    """Per-pool bucket-effect results (arrays of length ``n_pools``)."""

    total_cards: np.ndarray
    total_speed: np.ndarray  # W = Σ n_i s_i, in the caller's speed unit
    min_speed: np.ndarray
    models: np.ndarray  # distinct card models
    vendors: np.ndarray  # distinct vendors
    mix_class: np.ndarray  # 0 one model, 1 several models one vendor, 2 several vendors
    mixing_penalty: np.ndarray
    microbatches: np.ndarray  # M, whole micro-batches per step across the job
    static_balance: np.ndarray  # largest-remainder balance before the equal-share fallback
    heterogeneity: np.ndarray  # (n_pools, 4): h per strategy in STRATEGIES order


def bucket_arrays(
    group_pool: ArrayLike,
    n_pools: int,
    cards: ArrayLike,
    speed: ArrayLike,
    model_code: ArrayLike,
    vendor_code: ArrayLike,
    microbatches: ArrayLike,
    mixing_penalty_same_vendor: ArrayLike,
    mixing_penalty_cross_vendor: ArrayLike,
    granularity_penalty: ArrayLike,
) -> BucketArrays:
    """Heterogeneity factors of every strategy for many pools at once.

    Rows are card-model groups (one per pool and card model) labelled by ``group_pool``
    in ``range(n_pools)``; per-pool arguments (micro-batches and penalties) have length
    ``n_pools`` or are scalars.
    """
    pool = np.asarray(group_pool, dtype=np.int64)
    segments = Segments(pool, n_pools)
    n = np.asarray(cards, dtype=float)
    s = np.asarray(speed, dtype=float)
    weight = n * s
    total_cards = segments.sum(n)
    total_speed = segments.sum(weight)
    min_speed = segments.min(s)
    models = distinct_per_segment(pool, model_code, n_pools)
    vendors = distinct_per_segment(pool, vendor_code, n_pools)
    mix_class = np.where(models <= 1, 0, np.where(vendors <= 1, 1, 2))
    penalty = np.select(
        [mix_class == 0, mix_class == 1],
        [1.0, np.broadcast_to(np.asarray(mixing_penalty_same_vendor, dtype=float), (n_pools,))],
        np.broadcast_to(np.asarray(mixing_penalty_cross_vendor, dtype=float), (n_pools,)),
    )

    # Largest-remainder apportionment of M whole micro-batches by speed share.
    micro = np.maximum(
        1.0, np.floor(np.broadcast_to(np.asarray(microbatches, dtype=float), (n_pools,)))
    )
    exact = micro[pool] * weight / total_speed[pool]
    floor = np.floor(exact)
    leftover = np.rint(micro - segments.sum(floor)).astype(np.int64)
    order = np.lexsort((-(exact - floor), pool))
    rank = np.empty_like(pool)
    rank[order] = np.arange(pool.size) - segments.starts[pool[order]]
    rounded = floor + (rank < leftover[pool])
    step_time = segments.max(rounded / weight)
    balance = (micro / total_speed) / step_time

    equal_share = total_cards * min_speed / total_speed
    heterogeneity = np.column_stack(
        [
            equal_share * penalty,
            np.maximum(balance, equal_share) * penalty,
            np.broadcast_to(np.asarray(granularity_penalty, dtype=float), (n_pools,)) * penalty,
            np.ones(n_pools),
        ]
    )
    return BucketArrays(
        total_cards=total_cards,
        total_speed=total_speed,
        min_speed=min_speed,
        models=models,
        vendors=vendors,
        mix_class=mix_class,
        mixing_penalty=penalty,
        microbatches=micro,
        static_balance=balance,
        heterogeneity=heterogeneity,
    )


def recommend_strategy(
    delivered: np.ndarray, allowed: np.ndarray, mix_class: np.ndarray, tolerance: float = 1e-9
) -> np.ndarray:
    """Code of the best allowed strategy per pool (rows of ``delivered``), earliest on near-ties.

    One-model pools always get ``synchronous_uniform``: all strategies coincide there.
    """
    scored = np.where(allowed, delivered, -np.inf)
    best = scored.max(axis=1, keepdims=True)
    near_best = scored >= best * (1.0 - tolerance)
    return np.where(mix_class == 0, SYNC, np.argmax(near_best, axis=1))


def why_categorical(strategy: np.ndarray, mix_class: np.ndarray) -> pd.Categorical[str]:
    """The human-readable reasons as a categorical column (one string per distinct case)."""
    return pd.Categorical.from_codes(
        _WHY_CODES[strategy * 3 + mix_class], categories=pd.Index(list(_WHY_CATEGORIES))
    )


@dataclass(frozen=True)
class CardGroup:
    """Cards of one model in a pool, for the stateless bucket-effect calculator."""

    accelerator: str
    vendor: str
    cards: int
    peak_tflops: float
    mfu: float


@dataclass(frozen=True)
class StrategyResult:
    strategy: str
    heterogeneity: float  # throughput / Σ n_i s_i
    throughput_tflops: float  # model TFLOP/s, before scaling and failure losses


@dataclass(frozen=True)
class BucketEffectResult:
    strategies: tuple[StrategyResult, ...]
    recommended: str
    why: str
    total_cards: int
    ideal_tflops: float  # Σ n_i s_i
    mixing_penalty: float
    static_balance: float
    microbatches: int


def bucket_effect(
    groups: Sequence[CardGroup],
    *,
    microbatches: int | None = None,
    must_span_pool: bool = False,
    overrides: Mapping[str, object] | None = None,
) -> BucketEffectResult:
    """Bucket-effect calculator for one pool (no scaling or failure model: see ``evaluate_pool``).

    ``microbatches`` defaults to ``microbatches_per_replica`` × replicas of the default job shape.
    Split jobs are credited with ``h = 1`` here; the full engine also applies their smaller
    size's scaling and effective time.
    """
    if not groups:
        raise ValueError("a pool needs at least one card group")
    settings = validate_overrides(overrides, "pool")

    def setting(key: str) -> float:
        return float(settings.get(key, DEFAULTS[key].value))

    if any(g.cards <= 0 or g.peak_tflops <= 0 or not 0 < g.mfu <= 1 for g in groups):
        raise ValueError("every group needs cards > 0, peak_tflops > 0 and mfu in (0, 1]")
    total_cards = sum(g.cards for g in groups)
    if microbatches is None:
        replicas = max(
            1.0, total_cards / (setting("tensor_parallel") * setting("pipeline_parallel"))
        )
        microbatches = round(setting("microbatches_per_replica") * replicas)
    models = pd.factorize(pd.Index([g.accelerator for g in groups]))[0]
    result = bucket_arrays(
        np.zeros(len(groups), dtype=np.int64),
        1,
        [g.cards for g in groups],
        [g.peak_tflops * g.mfu for g in groups],
        models,
        vendor_codes([g.vendor for g in groups]),
        microbatches,
        setting("mixing_penalty_same_vendor"),
        setting("mixing_penalty_cross_vendor"),
        setting("granularity_penalty"),
    )
    h = result.heterogeneity[0]
    delivered = h * result.total_speed[0]
    allowed = np.array([True, True, True, not must_span_pool])
    chosen = int(
        recommend_strategy(delivered[np.newaxis, :], allowed[np.newaxis, :], result.mix_class)[0]
    )
    return BucketEffectResult(
        strategies=tuple(
            StrategyResult(name, float(h[i]), float(delivered[i]))
            for i, name in enumerate(STRATEGIES)
        ),
        recommended=STRATEGIES[chosen],
        why=why_text(chosen, int(result.mix_class[0])),
        total_cards=int(total_cards),
        ideal_tflops=float(result.total_speed[0]),
        mixing_penalty=float(result.mixing_penalty[0]),
        static_balance=float(result.static_balance[0]),
        microbatches=int(result.microbatches[0]),
    )

"""The bucket effect: card-model groups, the four strategies, and the one actually run.

A mixed pool runs one joint job under a synchronous, static or dynamic split (each with
its heterogeneity factor ``h``, kernel: ``heterogeneous.bucket_arrays``), or one job per
card model (``split_homogeneous``). Each strategy's delivered PFLOP/s includes scaling and
failures; the best allowed one is recommended, and a strategy given per pool wins.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine.defaults import FACTOR_FLOOR, STRATEGIES
from engine.heterogeneous import SPLIT, BucketArrays, bucket_arrays, recommend_strategy
from engine.scaling import ScalingArrays, modeled_scaling_arrays
from engine.segments import Segments
from engine.steps.context import PoolContext
from engine.steps.effective_time import FailureModel
from engine.steps.mfu import CardSpeed

_JOINT = 3  # the first three strategies run one joint job


@dataclass
class CardModels:
    """One row per (pool, card model): cards, mean speed and the slowest node's links."""

    pool: np.ndarray
    code: np.ndarray
    cards: np.ndarray
    speed: np.ndarray
    cards_per_node: np.ndarray
    nvlink: np.ndarray
    vendor: np.ndarray
    scale_up: np.ndarray  # cards of the smallest NVLink domain (else node) of the model


@dataclass
class Strategies:
    """Every strategy's outcome per pool, and the one run (split or joint column)."""

    bucket: BucketArrays
    heterogeneity: np.ndarray  # pools × joint strategies
    delivered: np.ndarray  # TFLOP/s, pools × STRATEGIES
    largest_split_job: np.ndarray  # TFLOP/s
    recommended: np.ndarray
    strategy: np.ndarray
    is_split: np.ndarray
    chosen_h: np.ndarray
    chosen_model: np.ndarray  # modeled scaling of the strategy run, before h
    modeled_time: np.ndarray  # failure-model effective time of the strategy run


def card_models(ctx: PoolContext, speed: CardSpeed) -> CardModels:
    n_models = max(len(ctx.accelerators), 1)
    group, keys = pd.factorize(ctx.group_pool * n_models + ctx.accelerator_code, sort=True)
    segments = Segments(group, keys.size)
    cards = segments.sum(ctx.cards)
    return CardModels(
        pool=keys // n_models,
        code=keys % n_models,
        cards=cards,
        speed=segments.sum(ctx.cards * speed.group_speed) / cards,
        cards_per_node=segments.min(ctx.cards_per_node),
        nvlink=segments.min(ctx.nvlink),
        vendor=segments.min(ctx.vendor),
        scale_up=segments.min(ctx.scale_up),
    )


def rescaled(arrays: ScalingArrays, speed_factor: np.ndarray) -> np.ndarray:
    """Scaling when cards run ``speed_factor`` times faster: compute and bubble shrink, comm not."""
    compute = arrays.compute_s / speed_factor
    bubble = arrays.bubble_s / speed_factor
    scaling: np.ndarray = np.clip(
        compute / (compute + arrays.tp_comm_s + arrays.dp_exposed_s + bubble), FACTOR_FLOOR, 1.0
    )
    return scaling


def strategies(
    ctx: PoolContext,
    speed: CardSpeed,
    shape: dict[str, np.ndarray],
    joint: ScalingArrays,
    failures: FailureModel,
) -> Strategies:
    models = card_models(ctx, speed)
    bucket = bucket_arrays(
        models.pool,
        ctx.n_pools,
        models.cards,
        models.speed,
        models.code,
        models.vendor,
        np.rint(joint.microbatches_per_replica * joint.data_parallel),
        ctx.setting("mixing_penalty_same_vendor"),
        ctx.setting("mixing_penalty_cross_vendor"),
        ctx.setting("granularity_penalty"),
    )
    h = bucket.heterogeneity
    # Cards progress at W·h/N under each joint strategy, so rescale compute against comm.
    joint_scaling = np.column_stack([rescaled(joint, h[:, j]) for j in range(_JOINT)])
    split_scaled, split_delivered, largest = _split_jobs(ctx, models, shape, failures)
    delivered = np.column_stack(
        [
            speed.pool_speed * h[:, j] * joint_scaling[:, j] * failures.joint.effective_time
            for j in range(_JOINT)
        ]
        + [split_delivered]
    )
    recommended, strategy = _choose(ctx, delivered, bucket.mix_class)
    is_split = strategy == SPLIT
    column = np.minimum(strategy, _JOINT - 1)[:, np.newaxis]
    with np.errstate(divide="ignore", invalid="ignore"):
        split_time = split_delivered / split_scaled
    return Strategies(
        bucket=bucket,
        heterogeneity=h,
        delivered=delivered,
        largest_split_job=largest,
        recommended=recommended,
        strategy=strategy,
        is_split=is_split,
        chosen_h=np.where(is_split, 1.0, np.take_along_axis(h, column, axis=1)[:, 0]),
        chosen_model=np.where(
            is_split,
            split_scaled / speed.pool_speed,
            np.take_along_axis(joint_scaling, column, axis=1)[:, 0],
        ),
        modeled_time=np.where(is_split, split_time, failures.joint.effective_time),
    )


def _split_jobs(
    ctx: PoolContext, models: CardModels, shape: dict[str, np.ndarray], failures: FailureModel
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """split_homogeneous: one job per card model, at most job_cards each.

    Returns per pool the scaled TFLOP/s, that after failures, and the largest job's.
    """
    job_cards = np.minimum(models.cards, ctx.job_cards[models.pool])
    split = modeled_scaling_arrays(
        job_cards,
        models.speed,
        models.cards_per_node,
        nvlink_bidir_gbs=models.nvlink,
        scale_up_cards=models.scale_up,
        **{name: value[models.pool] for name, value in shape.items()},
    )
    time = failures.for_jobs(job_cards, models.pool).effective_time
    per_pool = Segments(models.pool, ctx.n_pools)
    ideal = models.cards * models.speed
    return (
        per_pool.sum(ideal * split.scaling),
        per_pool.sum(ideal * split.scaling * time),
        per_pool.max(job_cards * models.speed * split.scaling * time),
    )


def _choose(
    ctx: PoolContext, delivered: np.ndarray, mix_class: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The recommended strategy and the one run: the pool's given strategy, else the advice."""
    pools = ctx.pools
    must_span = (
        pools["must_span_pool"].fillna(False).to_numpy(dtype=bool)
        if "must_span_pool" in pools.columns
        else np.zeros(ctx.n_pools, dtype=bool)
    )
    allowed = np.column_stack([np.ones((ctx.n_pools, _JOINT), dtype=bool), ~must_span])
    recommended = recommend_strategy(delivered, allowed, mix_class)
    if "strategy" not in pools.columns:
        return recommended, recommended
    given = pd.Index(STRATEGIES).get_indexer(pd.Index(pools["strategy"])).astype(np.int64)
    ctx.require(
        (given >= 0) | pools["strategy"].isna().to_numpy(),
        f"strategy must be one of {', '.join(STRATEGIES)}",
    )
    return recommended, np.where(given >= 0, given, recommended)

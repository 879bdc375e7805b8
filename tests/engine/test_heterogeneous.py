"""Heterogeneous pools and the bucket effect (Zheng 2024; docs)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.defaults import DEFAULTS, STRATEGIES
from engine.evaluate import evaluate_pools
from engine.heterogeneous import CardGroup, bucket_arrays, bucket_effect
from tests.support.engine_rows import A100, ASCEND_910B, H100, group

SYNC, STATIC, DYNAMIC, SPLIT = range(4)


def seed_003_pools(strategy: str | None) -> pd.DataFrame:
    groups = pd.DataFrame(
        [
            group("2000 A100", A100, 2000),
            group("A100+H100", A100, 1000),
            group("A100+H100", H100, 1000),
            group("A100+910B", A100, 1000),
            group("A100+910B", ASCEND_910B, 1000),
        ]
    )
    pools = pd.DataFrame({"pool_id": ["2000 A100", "A100+H100", "A100+910B"], "strategy": strategy})
    return evaluate_pools(groups, pools)


def delivered(result: pd.DataFrame) -> pd.Series:
    """Model PFLOP/s delivered by the strategy in use (peak × mfu × scaling × effective time)."""
    return result.peak_pflops * result.mfu * result.scaling * result.effective_time


def test_seed_003_one_synchronous_job_on_old_plus_new_cards_delivers_less_than_all_old():
    result = seed_003_pools("synchronous_uniform")
    old_only = delivered(result).loc["2000 A100"]
    assert delivered(result).loc["A100+H100"] < old_only
    assert delivered(result).loc["A100+910B"] < old_only
    # The same comparison from the per-strategy columns.
    assert result.loc["A100+H100", "delivered_pflops_synchronous_uniform"] < old_only
    # Although the mixed pools hold at least as much peak compute.
    assert (
        result.loc[["A100+H100", "A100+910B"], "peak_pflops"]
        >= result.loc["2000 A100", "peak_pflops"]
    ).all()


def test_seed_003_cross_vendor_mix_is_hit_harder_than_same_vendor():
    result = seed_003_pools("synchronous_uniform")
    assert result.loc["A100+910B", "mixing_penalty"] < result.loc["A100+H100", "mixing_penalty"] < 1
    assert result.loc["2000 A100", "mixing_penalty"] == 1


def test_synchronous_uniform_factor_is_slowest_card_times_count_times_penalty():
    result = seed_003_pools(None).loc["A100+H100"]
    mfu = float(DEFAULTS["mfu_default_nvidia"].value)
    ideal = 1000 * 312 * mfu + 1000 * 989 * mfu
    expected = 2000 * 312 * mfu * float(DEFAULTS["mixing_penalty_same_vendor"].value) / ideal
    assert result["h_synchronous_uniform"] == pytest.approx(expected)


def test_mixed_pools_are_not_recommended_a_synchronous_job_and_say_why():
    result = seed_003_pools(None)
    assert result.loc["2000 A100", "recommended_strategy"] == "synchronous_uniform"
    for pool in ("A100+H100", "A100+910B"):
        assert result.loc[pool, "recommended_strategy"] != "synchronous_uniform"
        assert result.loc[pool, "strategy"] == result.loc[pool, "recommended_strategy"]
    assert "slowest" in result.loc["A100+H100", "strategy_why"]
    assert "vendors" in result.loc["A100+910B", "strategy_why"]
    assert "no bucket effect" in result.loc["2000 A100", "strategy_why"]


def test_split_jobs_are_smaller_and_must_span_pool_excludes_them():
    groups = pd.DataFrame([group("p", A100, 1000), group("p", H100, 1000)])
    free = evaluate_pools(groups, pd.DataFrame({"pool_id": ["p"]})).iloc[0]
    spanning = evaluate_pools(
        groups, pd.DataFrame({"pool_id": ["p"], "must_span_pool": [True]})
    ).iloc[0]
    assert free["recommended_strategy"] == "split_homogeneous"
    assert free["split_largest_job_pflops"] < free["delivered_pflops_split_homogeneous"]
    assert spanning["recommended_strategy"] != "split_homogeneous"
    best_joint = max(spanning[f"delivered_pflops_{s}"] for s in STRATEGIES[:3])
    assert spanning[f"delivered_pflops_{spanning['recommended_strategy']}"] == best_joint


def test_homogeneous_pool_has_no_bucket_loss():
    result = bucket_effect([CardGroup("H100", "NVIDIA", 512, 989.0, 0.5)])
    by_name = {s.strategy: s for s in result.strategies}
    assert by_name["synchronous_uniform"].heterogeneity == pytest.approx(1.0)
    assert by_name["static_proportional"].heterogeneity == pytest.approx(1.0)
    assert by_name["dynamic_fine_grained"].heterogeneity == pytest.approx(
        float(DEFAULTS["granularity_penalty"].value)
    )
    assert result.recommended == "synchronous_uniform"


def test_static_rounding_uses_largest_remainder():
    # Speeds 1 : 1 : 2 with 5 micro-batches: exact 1.25, 1.25, 2.5 → floors 1, 1, 2 → the
    # leftover goes to the largest remainder (the third group): 1, 1, 3 → step = max(1, 1, 1.5).
    result = bucket_arrays(
        [0, 0, 0], 1, [1, 1, 1], [1.0, 1.0, 2.0], [0, 1, 2], [0, 0, 0], 5, 1.0, 1.0, 0.5
    )
    assert result.static_balance[0] == pytest.approx((5 / 4) / 1.5)


def test_static_proportional_with_many_micro_batches_recovers_almost_all_speed():
    result = bucket_effect(
        [
            CardGroup("A100", "NVIDIA", 1000, 312.0, 0.5),
            CardGroup("H100", "NVIDIA", 1000, 989.0, 0.5),
        ],
        microbatches=4096,
    )
    assert result.static_balance > 0.99
    static = next(s for s in result.strategies if s.strategy == "static_proportional")
    assert static.heterogeneity == pytest.approx(result.static_balance * result.mixing_penalty)


pool_groups = st.lists(
    st.tuples(
        st.integers(0, 5),  # card model
        st.integers(0, 2),  # vendor
        st.integers(1, 4096),  # cards
        st.floats(1.0, 2000.0),  # effective TFLOP/s per card
    ),
    min_size=1,
    max_size=6,
)


@given(
    pools=st.lists(pool_groups, min_size=1, max_size=5),
    microbatches=st.integers(1, 5000),
    same=st.floats(0.01, 1.0),
    cross=st.floats(0.01, 1.0),
    granularity=st.floats(0.01, 1.0),
)
def test_static_proportional_is_never_below_synchronous_uniform(
    pools, microbatches, same, cross, granularity
):
    rows = [(pool, *g) for pool, groups in enumerate(pools) for g in groups]
    pool, model, vendor, cards, speed = (np.array(column) for column in zip(*rows, strict=True))
    result = bucket_arrays(
        pool,
        len(pools),
        cards,
        speed,
        model,
        vendor,
        microbatches,
        same,
        min(same, cross),
        granularity,
    )
    h = result.heterogeneity
    assert (h[:, STATIC] >= h[:, SYNC] - 1e-12).all()
    assert ((h > 0) & (h <= 1 + 1e-12)).all()
    assert ((result.static_balance > 0) & (result.static_balance <= 1 + 1e-12)).all()

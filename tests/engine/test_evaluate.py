"""The vectorised entry point: factors, provenance, product and attribution per pool."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.defaults import COOLING_TYPES, FACTOR_FLOOR, UnknownDefaultError
from engine.evaluate import NodeGroup, evaluate_pool, evaluate_pools
from engine.factors import FACTOR_NAMES, EngineInputError
from tests.support.engine_rows import A100, ASCEND_910B, H100, V100, group

FACTORS = list(FACTOR_NAMES)


def h100_nodes(nodes: int) -> NodeGroup:
    return NodeGroup("H100 SXM5 80GB", "NVIDIA", 989.0, nodes, 8, nvlink_bidir_gbs=900.0)


def test_seed_000_best_practice_product_is_about_0_51():
    # PUE 1.1, MFU 70%, 90% speed-up on 10,000 cards, 99% effective time, 90% utilization.
    result = evaluate_pool(
        [h100_nodes(1250)],
        speedup={8: 8.0, 10_000: 9_000.0},
        pue=1.1,
        mfu=0.70,
        productive_h=99.0,
        wall_h=100.0,
        utilization_measured=0.90,
    )
    expected = 1 / 1.1 * 0.70 * 0.90 * 0.99 * 0.90
    assert result.product == pytest.approx(expected, rel=1e-9)
    assert result.product == pytest.approx(0.51, abs=0.005)
    # PUE and MFU were typed in (entered); the rest comes from this period's data.
    assert {name: f.provenance for name, f in result.factors.items()} == {
        **dict.fromkeys(FACTORS, "measured"),
        "energy": "entered",
        "mfu": "entered",
    }
    assert sum(result.lost_share_by_factor.values()) == pytest.approx(1 - expected)


def test_enterprise_defaults_land_below_half():
    # Baidu 2024: enterprises use less than 50% of their compute effectively.
    result = evaluate_pool([h100_nodes(128)])
    assert result.product < 0.5
    assert {f.provenance for f in result.factors.values()} <= {"default", "modeled"}


def test_provenance_and_defaults_used_follow_the_inputs():
    groups = pd.DataFrame([group("given", H100, 64), group("blank", H100, 64)])
    pools = pd.DataFrame(
        {
            "pool_id": ["given", "blank"],
            "pue": [1.2, math.nan],
            "utilization_planned": [0.8, math.nan],
            "productive_h": [90.0, math.nan],
            "wall_h": [100.0, math.nan],
        }
    )
    result = evaluate_pools(groups, pools)
    assert result.loc["given", "energy_provenance"] == "entered"
    assert result.loc["given", "energy_defaults"] == ""
    assert result.loc["blank", "energy_provenance"] == "default"
    assert "pue_air" in result.loc["blank", "energy_defaults"]
    assert result.loc["given", "utilization_provenance"] == "modeled"
    assert result.loc["blank", "utilization_provenance"] == "default"
    assert result.loc["given", "effective_time"] == pytest.approx(0.9)
    assert result.loc["given", "effective_time_basis"] == "job_logs"
    assert "mtbf_card_hours" in result.loc["blank", "effective_time_defaults"]
    assert result.loc["blank", "scaling_provenance"] == "modeled"


def test_metered_mfu_and_failures_are_used_for_the_pool():
    result = evaluate_pool(
        [h100_nodes(128)],
        model_params=70e9,
        job_tokens_per_s=1.0e6,
        failure_count=10,
        failure_exposure_card_hours=500_000.0,
    )
    assert result.factors["mfu"].value == pytest.approx(6 * 70e9 * 1e6 / (1024 * 989e12))
    assert result.factors["mfu"].basis == "job_throughput"
    assert result.row["mtbf_card_hours"] == pytest.approx(50_000)
    assert str(result.row["mtbf_card_basis"]) == "failures_measured"


@pytest.mark.parametrize(
    ("failures", "exposure_card_hours"),
    [(0, 500_000.0), (3, 9_999.0)],  # a bound only; too few card-hours to say anything
)
def test_too_little_failure_history_keeps_the_default_mtbf(failures, exposure_card_hours):
    result = evaluate_pool(
        [h100_nodes(128)], failure_count=failures, failure_exposure_card_hours=exposure_card_hours
    )
    assert str(result.row["mtbf_card_basis"]) == "cooling_adjusted_default"
    default = evaluate_pool([h100_nodes(128)]).row["mtbf_card_hours"]
    assert result.row["mtbf_card_hours"] == pytest.approx(default)


def test_a_pool_that_cannot_progress_is_flagged_and_floored():
    result = evaluate_pool([h100_nodes(4096)], mtbf_card_hours=500.0, restart_h=2.0)
    assert result.row["effective_time_stalled"]
    assert result.factors["effective_time"].value == FACTOR_FLOOR
    shares = result.lost_share_by_factor
    assert max(shares, key=shares.get) == "effective_time"


def test_one_pool_at_a_time_equals_the_batch():
    groups = pd.DataFrame(
        [
            group("a", A100, 512),
            group("b", H100, 256),
            group("b", A100, 256),
            group("c", ASCEND_910B, 64),
        ]
    )
    pools = pd.DataFrame(
        {
            "pool_id": ["a", "b", "c"],
            "cooling": ["air", "direct_liquid", None],
            "pue": [np.nan, 1.15, np.nan],
        }
    )
    batch = evaluate_pools(groups, pools)
    for pool_id in pools.pool_id:
        alone = evaluate_pools(groups[groups.pool_id == pool_id], pools[pools.pool_id == pool_id])
        pd.testing.assert_series_equal(
            batch.loc[pool_id, FACTORS + ["product"]].astype(float),
            alone.loc[pool_id, FACTORS + ["product"]].astype(float),
        )


def test_entered_values_out_of_range_are_rejected_with_the_column_and_pool():
    groups = pd.DataFrame([group("p1", H100, 8)])
    with pytest.raises(EngineInputError, match=r"PUE.*p1"):
        evaluate_pools(groups, pd.DataFrame({"pool_id": ["p1"], "pue": [0.9]}))
    with pytest.raises(EngineInputError, match="node_groups.pool_id"):
        evaluate_pools(groups, pd.DataFrame({"pool_id": ["other"]}))
    with pytest.raises(ValueError, match="dp_overlap_share"):
        evaluate_pools(groups, pd.DataFrame({"pool_id": ["p1"], "dp_overlap_share": [1.5]}))
    with pytest.raises(ValueError, match="strategy"):
        evaluate_pools(groups, pd.DataFrame({"pool_id": ["p1"], "strategy": ["round_robin"]}))


def test_scalar_calculator_rejects_unknown_override_keys():
    with pytest.raises(UnknownDefaultError, match="pue_swamp"):
        from engine.factors import energy_factor

        energy_factor(overrides={"pue_swamp": 1.2})


CARDS = [A100, H100, V100, ASCEND_910B]
optional_share = st.one_of(st.just(math.nan), st.floats(0.0, 1.0))
pool_strategy = st.fixed_dictionaries(
    {
        "groups": st.lists(
            st.tuples(st.integers(0, 3), st.integers(1, 512)), min_size=1, max_size=3
        ),
        "cooling": st.sampled_from(COOLING_TYPES),
        "pue": st.one_of(st.just(math.nan), st.floats(1.0, 2.5)),
        "mfu": st.one_of(st.just(math.nan), st.floats(0.01, 1.0)),
        "utilization_measured": optional_share,
        "mtbf_card_hours": st.one_of(st.just(math.nan), st.floats(10.0, 1e6)),
        "checkpoint_save_h": st.floats(0.0, 2.0),
        "strategy": st.sampled_from(
            [
                None,
                "synchronous_uniform",
                "static_proportional",
                "dynamic_fine_grained",
                "split_homogeneous",
            ]
        ),
    }
)


@given(pools=st.lists(pool_strategy, min_size=1, max_size=6))
def test_every_factor_is_in_0_1_product_is_below_each_and_attribution_sums(pools):
    groups = pd.DataFrame(
        [
            group(i, CARDS[card], nodes * 8)
            for i, pool in enumerate(pools)
            for card, nodes in pool["groups"]
        ]
    )
    frame = pd.DataFrame([{k: v for k, v in pool.items() if k != "groups"} for pool in pools])
    result = evaluate_pools(groups, frame.assign(pool_id=range(len(pools))))
    factors = result[FACTORS].to_numpy()
    assert ((factors > 0) & (factors <= 1)).all()
    assert (result["product"].to_numpy() <= factors.min(axis=1) + 1e-12).all()
    shares = result[[f"lost_share_{name}" for name in FACTORS]].to_numpy()
    np.testing.assert_allclose(shares.sum(axis=1), 1 - result["product"], atol=1e-12)
    card_hours = result[[f"lost_{name}_card_hours" for name in FACTORS]].sum(axis=1)
    np.testing.assert_allclose(
        card_hours, (1 - result["product"]) * result["card_hours"], rtol=1e-9
    )
    assert result["strategy_why"].notna().all()
    for name in FACTORS:
        assert set(result[f"{name}_provenance"].astype(str)) <= {
            "measured",
            "entered",
            "modeled",
            "default",
        }


@given(
    nodes=st.lists(st.integers(1, 4000), min_size=2, max_size=8, unique=True),
    cooling=st.sampled_from(COOLING_TYPES),
)
def test_effective_time_falls_as_the_pool_grows(nodes, cooling):
    ordered = sorted(nodes)
    groups = pd.DataFrame([group(i, H100, n * 8) for i, n in enumerate(ordered)])
    result = evaluate_pools(
        groups, pd.DataFrame({"pool_id": range(len(ordered)), "cooling": cooling})
    )
    assert (np.diff(result["effective_time"].to_numpy()) <= 1e-12).all()

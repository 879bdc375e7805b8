"""Aggregation across scopes and waste attribution (docs/efficiency-model.md)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.aggregate import aggregate_factors, aggregate_scopes, attribute_waste
from engine.defaults import PROVENANCES
from engine.evaluate import evaluate_pools
from engine.factors import FACTOR_NAMES
from tests.support.engine_rows import A100, H100, V100, group

FACTORS = list(FACTOR_NAMES)


@given(big=st.floats(0.01, 1.0), small=st.floats(0.01, 1.0), hours=st.floats(1.0, 1000.0))
def test_a_1000_h100_pool_outweighs_10_v100(big, small, hours):
    groups = pd.DataFrame([group("h100", H100, 1000), group("v100", V100, 10, cards_per_node=2)])
    pools = pd.DataFrame(
        {"pool_id": ["h100", "v100"], "utilization_measured": [big, small], "duration_h": hours}
    )
    fleet = aggregate_factors(evaluate_pools(groups, pools)).iloc[0]
    weight_big, weight_small = 1000 * 989.0, 10 * 125.0
    expected = (weight_big * big + weight_small * small) / (weight_big + weight_small)
    assert fleet["utilization"] == pytest.approx(expected, rel=1e-9)
    if abs(big - small) > 1e-6:
        assert abs(fleet["utilization"] - big) < abs(fleet["utilization"] - (big + small) / 2)


def scoped_results() -> pd.DataFrame:
    groups = pd.DataFrame(
        [
            group("p1", H100, 1024),
            group("p2", A100, 256),
            group("p2", H100, 256),
            group("p3", V100, 64),
            group("p4", A100, 512),
        ]
    )
    pools = pd.DataFrame(
        {
            "pool_id": ["p1", "p2", "p3", "p4"],
            "site_id": ["north", "north", "south", "south"],
            "cluster_id": ["n1", "n2", "s1", "s1"],
            "cooling": ["direct_liquid", "air", "air", "immersion"],
            "pue": [math.nan, 1.3, math.nan, math.nan],
            "utilization_measured": [0.9, math.nan, 0.4, 0.75],
            "duration_h": [720.0, 720.0, 360.0, 720.0],
            "cost_per_card_hours": [2.5, 1.5, math.nan, 1.2],
        }
    )
    return evaluate_pools(groups, pools)


def test_two_headline_numbers_are_what_they_say():
    fleet = aggregate_factors(scoped_results()).iloc[0]
    assert fleet["aggregate_of_products"] == pytest.approx(
        fleet["effective_pflop_days"] / fleet["peak_pflop_days"]
    )
    assert fleet["product_of_aggregates"] == pytest.approx(
        np.prod([fleet[name] for name in FACTORS])
    )
    lost = sum(fleet[f"lost_share_{name}"] for name in FACTORS)
    assert lost == pytest.approx(fleet["lost_share"])
    assert fleet["lost_share"] == pytest.approx(1 - fleet["aggregate_of_products"])


def test_levels_roll_up_consistently():
    results = scoped_results()
    levels = aggregate_scopes(results)
    assert len(levels["cluster"]) == 3 and len(levels["site"]) == 2 and len(levels["fleet"]) == 1
    sites, fleet = levels["site"], levels["fleet"].iloc[0]
    for name in FACTORS + ["aggregate_of_products"]:
        rolled = (sites[name] * sites["peak_pflop_days"]).sum() / sites["peak_pflop_days"].sum()
        assert rolled == pytest.approx(fleet[name])
    assert sites["lost_energy_card_hours"].sum() == pytest.approx(fleet["lost_energy_card_hours"])
    north = sites.set_index("site_id").loc["north"]
    assert north["pools"] == 2
    assert north["cards"] == 1024 + 512


def test_provenance_shares_cover_the_weight():
    fleet = aggregate_factors(scoped_results()).iloc[0]
    for name in FACTORS:
        shares = [fleet[f"{name}_share_{kind}"] for kind in PROVENANCES]
        assert sum(shares) == pytest.approx(1.0)
    # p1 (1,024 H100) dominates the fleet and its utilization is measured.
    assert fleet["utilization_provenance"] == "measured"


def test_money_is_summed_only_where_priced():
    south = aggregate_factors(scoped_results(), "site_id").set_index("site_id").loc["south"]
    results = scoped_results()
    priced = results.loc["p4"]
    assert south["lost_mfu_money"] == pytest.approx(priced["lost_mfu_card_hours"] * 1.2)


def test_attribution_is_proportional_to_minus_log_of_each_factor():
    factors = {
        "energy": 1 / 1.4,
        "mfu": 0.55,
        "scaling": 0.8,
        "effective_time": 0.9,
        "utilization": 0.5,
    }
    result = attribute_waste(
        factors, card_hours=1000.0, peak_pflop_days=50.0, cost_per_card_hours=2.0
    )
    product = np.prod(list(factors.values()))
    assert result.product == pytest.approx(product)
    assert sum(f.share for f in result.factors) == pytest.approx(1 - product)
    by_name = {f.factor: f for f in result.factors}
    ratio = by_name["utilization"].share / by_name["mfu"].share
    assert ratio == pytest.approx(math.log(0.5) / math.log(0.55))
    assert by_name["mfu"].card_hours == pytest.approx(by_name["mfu"].share * 1000.0)
    assert by_name["mfu"].pflop_days == pytest.approx(by_name["mfu"].share * 50.0)
    assert by_name["mfu"].money == pytest.approx(by_name["mfu"].card_hours * 2.0)


@given(st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=8))
def test_attribution_shares_sum_to_the_lost_share(values):
    result = attribute_waste(
        {f"f{i}": v for i, v in enumerate(values)}, card_hours=1.0, peak_pflop_days=1.0
    )
    assert sum(f.share for f in result.factors) == pytest.approx(result.lost_share, abs=1e-12)
    assert all(f.share >= 0 for f in result.factors)

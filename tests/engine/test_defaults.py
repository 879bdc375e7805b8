"""The one table of defaults and the override layering site → cluster → pool."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from engine.defaults import (
    DEFAULTS,
    DefaultOutOfRangeError,
    UnknownDefaultError,
    layer_overrides,
    resolve_overrides,
)
from engine.evaluate import evaluate_pools
from tests.support.engine_rows import H100, group


@pytest.mark.parametrize("key", sorted(DEFAULTS))
def test_every_default_is_documented_and_inside_its_own_range(key):
    entry = DEFAULTS[key]
    assert len(entry.source) > 20
    assert entry.unit
    if entry.is_categorical:
        assert entry.value in entry.choices
    else:
        assert entry.low <= entry.value <= entry.high


def test_liquid_cooling_defaults_follow_seed_000():
    assert DEFAULTS["cooling_performance_direct_liquid"].value == pytest.approx(1.10)
    assert 1 - DEFAULTS["failure_rate_direct_liquid"].value == pytest.approx(0.65, abs=0.05)
    assert (
        DEFAULTS["mixing_penalty_cross_vendor"].value
        < DEFAULTS["mixing_penalty_same_vendor"].value
        < 1
    )


def test_the_most_specific_layer_wins():
    resolved = resolve_overrides(
        site={"pue_air": 1.3, "mtbf_card_hours": 30_000},
        cluster={"mtbf_card_hours": 40_000},
        pool={"utilization_planned": 0.8, "pue_air": None},
    )
    assert (resolved["pue_air"].value, resolved["pue_air"].layer) == (1.3, "site")
    assert (resolved["mtbf_card_hours"].value, resolved["mtbf_card_hours"].layer) == (
        40_000,
        "cluster",
    )
    assert (resolved["utilization_planned"].value, resolved["utilization_planned"].layer) == (
        0.8,
        "pool",
    )
    assert resolved["restart_h"].layer == "table"


def test_unknown_keys_and_bad_values_name_the_key():
    with pytest.raises(UnknownDefaultError, match="pue_swamp"):
        resolve_overrides(site={"pue_swamp": 1.2})
    with pytest.raises(DefaultOutOfRangeError, match="utilization_planned"):
        resolve_overrides(pool={"utilization_planned": 1.5})
    with pytest.raises(DefaultOutOfRangeError, match="cooling"):
        resolve_overrides(cluster={"cooling": "swamp"})
    with pytest.raises(DefaultOutOfRangeError, match="restart_h"):
        resolve_overrides(cluster={"restart_h": "soon"})


def test_layered_frames_feed_the_engine_and_keep_table_values_visible():
    pools = pd.DataFrame(
        {
            "pool_id": ["p1", "p2"],
            "site_id": ["s1", "s2"],
            "cluster_id": ["c1", "c2"],
            "utilization_planned": [0.8, math.nan],
        }
    )
    sites = pd.DataFrame({"pue_air": [1.3, math.nan]}, index=["s1", "s2"])
    clusters = pd.DataFrame(
        {"pue_air": [1.25, math.nan], "restart_h": [0.1, math.nan]}, index=["c1", "c2"]
    )
    layered = layer_overrides(pools, sites, clusters)
    assert layered["pue_air"].tolist()[0] == 1.25  # cluster beats site
    assert math.isnan(layered["pue_air"].tolist()[1])  # nothing set: the table value applies
    result = evaluate_pools(pd.DataFrame([group("p1", H100, 8), group("p2", H100, 8)]), layered)
    assert result.loc["p1", "energy"] == pytest.approx(1 / 1.25)
    assert result.loc["p2", "energy"] == pytest.approx(1 / DEFAULTS["pue_air"].value)
    assert "pue_air" not in result.loc["p1", "energy_defaults"]
    assert "pue_air" in result.loc["p2", "energy_defaults"]
    assert result.loc["p1", "restart_h"] == 0.1


def test_layered_frames_reject_unknown_columns():
    pools = pd.DataFrame({"pool_id": ["p1"], "site_id": ["s1"]})
    with pytest.raises(UnknownDefaultError, match="colour"):
        layer_overrides(pools, pd.DataFrame({"colour": [1.0]}, index=["s1"]))
    with pytest.raises(ValueError, match="one row per site"):
        layer_overrides(pools, pd.DataFrame({"pue_air": [1.2, 1.3]}, index=["s1", "s1"]))

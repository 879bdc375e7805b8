"""The fleet's effective-time step (pools without job logs): production-practice defaults."""

from __future__ import annotations

import pandas as pd
import pytest

from engine.defaults import DEFAULTS
from engine.evaluate import evaluate_pools
from tests.support.engine_rows import A100, ASCEND_910B, H100, group

GROWTH_H = 11 / 3600  # restart_growth_h_per_doubling
BASE_H = 2.5 / 60  # restart_h


def _evaluate(groups: list[dict], pools: list[dict]) -> pd.DataFrame:
    return evaluate_pools(pd.DataFrame(groups), pd.DataFrame(pools))


def test_a_pool_of_one_generation_takes_its_fleet_mtbf_and_a_restart_grown_to_its_size():
    result = _evaluate(
        [
            group("hopper", H100, 16_384),
            group("ampere", A100, 1_024),
            group("ascend", ASCEND_910B, 2_048),
            group("mixed", H100, 512),
            group("mixed", A100, 512),
        ],
        [{"pool_id": p} for p in ("hopper", "ampere", "ascend", "mixed")],
    )
    mtbf = result["mtbf_card_hours"]
    assert mtbf["hopper"] == DEFAULTS["mtbf_card_hours_hopper"].value == 50_000
    assert mtbf["ampere"] == DEFAULTS["mtbf_card_hours_ampere"].value == 29_500
    # No published figure for the generation, or two generations: the general default.
    assert mtbf["ascend"] == mtbf["mixed"] == DEFAULTS["mtbf_card_hours"].value
    used = result["effective_time_defaults"]
    assert "mtbf_card_hours_hopper" in used["hopper"]
    assert "mtbf_card_hours_hopper" not in used["mixed"]
    assert "mtbf_card_hours," in used["mixed"] + ","
    # 16,384 cards: four doublings above 1,024; 1,024 cards: the base alone.
    assert result.loc["hopper", "restart_h"] == pytest.approx(BASE_H + 4 * GROWTH_H)
    assert result.loc["ampere", "restart_h"] == pytest.approx(BASE_H)
    assert "restart_growth_h_per_doubling" in used["hopper"]
    assert "restart_growth_h_per_doubling" not in used["ampere"]
    # Asynchronous saves: the job loses seconds, not minutes, to saving.
    assert result.loc["hopper", "checkpoint_save_h"] * 3600 == pytest.approx(10)


def test_entered_figures_beat_the_generation_and_the_growth():
    result = _evaluate(
        [group("site_mtbf", H100, 16_384), group("entered_restart", H100, 16_384)],
        [
            {"pool_id": "site_mtbf", "mtbf_card_hours": 20_000.0},
            {"pool_id": "entered_restart", "restart_h": 0.25},
        ],
    )
    assert result.loc["site_mtbf", "mtbf_card_hours"] == 20_000
    assert result.loc["entered_restart", "restart_h"] == 0.25  # used as given
    used = result.loc["entered_restart", "effective_time_defaults"]
    assert "restart_growth_h_per_doubling" not in used


def test_a_16384_h100_pool_keeps_90_percent_effective_time_by_default():
    # Llama 3's fleet (Dubey et al. 2024 §3.3.4, "higher than 90 %") at its size.
    result = _evaluate([group("llama", H100, 16_384)], [{"pool_id": "llama"}])
    assert result.loc["llama", "effective_time"] >= 0.90

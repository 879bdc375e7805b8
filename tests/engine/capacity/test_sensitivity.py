"""Tornado data (factor lifted to best practice) and lever ROI."""

from __future__ import annotations

import pytest

from engine.capacity import TrainingWorkload, plan_capacity
from engine.sensitivity import BEST_PRACTICE, Lever, lever_roi, sensitivity
from tests.support.capacity_inputs import A100_80GB, options

GPT3 = TrainingWorkload(params=175e9, tokens=300e9, flops_per_param_token=8)
SITE = {
    "pue": 1.5,
    "tariff_per_kwh": 0.1,
    "grid_carbon_g_per_kwh": 500.0,
    "rental_price_per_card_hour": 1.5,
}


@pytest.fixture(scope="module")
def plan():
    return plan_capacity(
        GPT3,
        options(
            {**A100_80GB, **SITE, "cards": 1024, "mfu": 0.40, "utilization": 0.5},
            {**A100_80GB, **SITE, "cards": 2048, "mfu": 0.75, "utilization": 0.95},
            {**A100_80GB, **SITE, "cards": 2048, "cooling_type": "direct_liquid", "pue": 1.05},
        ),
    )


def test_each_factor_lift_saves_what_its_ratio_says(plan):
    tornado = sensitivity(plan, GPT3.flops)
    first = plan.iloc[0]
    rows = tornado[tornado["option_id"] == plan.index[0]].set_index("factor")
    assert list(rows.index[-1:]) == ["combined"]
    assert rows.loc["utilization", "days_saved"] == pytest.approx(first["days"] * (1 - 0.5 / 0.9))
    assert rows.loc["mfu", "days_saved"] == pytest.approx(first["days"] * (1 - 0.40 / 0.70))
    # PUE changes energy money, never days.
    assert rows.loc["energy", "days_saved"] == 0
    assert rows.loc["energy", "cost_saved"] > 0
    assert rows.loc["energy", "target"] == pytest.approx(1 / 1.1)
    # Sorted by money saved (the tornado's order), combined last.
    individual = rows.drop(index="combined")
    assert list(individual["cost_saved"]) == sorted(individual["cost_saved"], reverse=True)


def test_combined_beats_every_single_factor(plan):
    tornado = sensitivity(plan, GPT3.flops)
    for _, rows in tornado.groupby("option_id"):
        combined = rows[rows["factor"] == "combined"].iloc[0]
        single = rows[rows["factor"] != "combined"]
        assert combined["days_saved"] >= single["days_saved"].max() - 1e-9
        assert combined["cost_saved"] >= single["cost_saved"].max() - 1e-9


def test_factors_already_above_best_practice_save_nothing(plan):
    tornado = sensitivity(plan, GPT3.flops)
    rows = tornado[tornado["option_id"] == plan.index[1]].set_index("factor")
    assert rows.loc["mfu", "days_saved"] == 0  # 0.75 > 0.70 is never lowered
    assert rows.loc["utilization", "days_saved"] == 0
    assert (tornado["days_saved"] >= -1e-9).all()
    assert (tornado["cost_saved"] >= -1e-6).all()


def test_best_practice_targets_come_from_the_published_sources():
    assert (
        BEST_PRACTICE.pue,
        BEST_PRACTICE.mfu,
        BEST_PRACTICE.effective_time,
        BEST_PRACTICE.utilization,
        BEST_PRACTICE.scaling,
    ) == (1.1, 0.70, 0.99, 0.90, 0.90)


def test_lever_roi_payback(plan):
    levers = [
        Lever.colocation(one_off_cost=1e6, utilization=0.9),
        Lever.mfu_upgrade(one_off_cost=5e5, mfu=0.6),
        Lever.faster_checkpoints(one_off_cost=2e5, checkpoint_save_hours=0.001, restart_hours=0.01),
        Lever.liquid_cooling(one_off_cost=3e6),
    ]
    roi = lever_roi(plan, levers, GPT3.flops)
    assert len(roi) == len(levers) * len(plan)
    colocation = roi[(roi["lever"] == "colocation") & (roi["option_id"] == plan.index[0])].iloc[0]
    assert colocation["days_after"] == pytest.approx(colocation["days_before"] * 0.5 / 0.9)
    assert colocation["savings_per_year"] == pytest.approx(
        colocation["savings_per_run"] * 365 / colocation["days_before"]
    )
    assert colocation["payback_years"] == pytest.approx(1e6 / colocation["savings_per_year"])
    checkpoints = roi[roi["lever"] == "faster_checkpoints"]
    assert (checkpoints["days_saved"] > 0).all()  # modeled effective time goes up
    liquid = roi[roi["lever"] == "liquid_cooling"].set_index("option_id")
    assert liquid.loc[plan.index[0], "savings_per_year"] > 0
    # Already liquid-cooled: nothing to gain, payback never.
    assert liquid.loc[plan.index[2], "savings_per_year"] == 0
    assert liquid.loc[plan.index[2], "payback_years"] == float("inf")

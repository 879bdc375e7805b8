"""Energy, MFU and utilization factors and their provenance (docs/efficiency-model.md)."""

from __future__ import annotations

import pytest

from engine.defaults import DEFAULTS
from engine.factors import (
    EngineInputError,
    energy_factor,
    mfu_factor,
    mfu_from_throughput,
    utilization_factor,
)


def test_energy_from_meter_readings_wins_over_an_entered_pue():
    result = energy_factor(pue=1.5, facility_kwh=1_150.0, it_kwh=1_000.0, cooling="air")
    assert result.value == pytest.approx(1 / 1.15)
    assert (result.provenance, result.basis) == ("measured", "metered_kwh")


def test_energy_from_entered_pue():
    result = energy_factor(pue=1.1)
    assert result.value == pytest.approx(1 / 1.1)
    assert (result.provenance, result.basis) == ("entered", "pue_entered")


@pytest.mark.parametrize("cooling", ["air", "rear_door", "direct_liquid", "immersion"])
def test_energy_falls_back_to_the_cooling_default(cooling):
    result = energy_factor(cooling=cooling)
    assert result.value == pytest.approx(1 / float(DEFAULTS[f"pue_{cooling}"].value))
    assert result.provenance == "default"
    assert result.defaults_used == (f"pue_{cooling}",)


def test_cooling_default_pues_sit_in_the_published_ranges():
    assert 1.2 <= DEFAULTS["pue_air"].value <= 1.5
    assert 1.05 <= DEFAULTS["pue_direct_liquid"].value <= 1.2
    assert 1.02 <= DEFAULTS["pue_immersion"].value <= 1.05
    assert (
        DEFAULTS["pue_immersion"].value
        < DEFAULTS["pue_direct_liquid"].value
        < DEFAULTS["pue_air"].value
    )


def test_overridden_cooling_pue_is_not_reported_as_a_default():
    result = energy_factor(cooling="air", overrides={"pue_air": 1.3})
    assert result.value == pytest.approx(1 / 1.3)
    assert result.defaults_used == ()


def test_pue_below_one_is_rejected():
    with pytest.raises(EngineInputError, match="PUE"):
        energy_factor(facility_kwh=900.0, it_kwh=1_000.0)


def test_megatron_gpt3_throughput_gives_an_mfu_of_140_over_312():
    # 1,024 A100 at 140 TFLOP/s each, k = 8: tokens/s = 140e12 · 1024 / (8 · 175e9).
    tokens_per_s = 140e12 * 1024 / (8 * 175e9)
    mfu = float(mfu_from_throughput(175e9, tokens_per_s, 1024, 312.0, 8))
    assert mfu == pytest.approx(140 / 312)


def test_mfu_from_job_throughput_is_measured_and_wins_over_entered():
    result = mfu_factor(
        peak_tflops=989.0, vendor="NVIDIA", mfu=0.3, model_params=70e9, tokens_per_s=1e6, cards=1024
    )
    assert result.value == pytest.approx(6 * 70e9 * 1e6 / (1024 * 989e12))
    assert (result.provenance, result.basis) == ("measured", "job_throughput")


def test_default_mfu_uses_vendor_fallback_and_the_liquid_cooling_bonus():
    air = mfu_factor(peak_tflops=989.0, vendor="nvidia", cooling="air")
    liquid = mfu_factor(peak_tflops=989.0, vendor="nvidia", cooling="direct_liquid")
    assert air.value == pytest.approx(float(DEFAULTS["mfu_default_nvidia"].value))
    assert liquid.value == pytest.approx(
        air.value * float(DEFAULTS["cooling_performance_direct_liquid"].value)
    )
    assert air.provenance == "default"
    assert "mfu_default_nvidia" in air.defaults_used


def test_catalog_mfu_beats_the_vendor_fallback_and_unknown_vendors_get_other():
    catalog = mfu_factor(peak_tflops=320.0, vendor="Huawei", card_default_mfu=0.33)
    assert catalog.value == pytest.approx(0.33)
    assert "mfu_default_huawei" not in catalog.defaults_used
    unknown = mfu_factor(peak_tflops=100.0, vendor="Acme")
    assert unknown.value == pytest.approx(float(DEFAULTS["mfu_default_other"].value))


def test_impossible_mfu_is_rejected():
    with pytest.raises(EngineInputError, match="MFU"):
        mfu_factor(peak_tflops=100.0, model_params=1e12, tokens_per_s=1e9, cards=8)


def test_utilization_precedence_and_provenance():
    measured = utilization_factor(
        measured_share=0.7, allocated_card_hours=10.0, available_card_hours=100.0, planned=0.9
    )
    assert (measured.value, measured.provenance) == (0.7, "measured")
    records = utilization_factor(allocated_card_hours=40.0, available_card_hours=100.0, planned=0.9)
    assert (records.value, records.basis) == (pytest.approx(0.4), "allocated_card_hours")
    planned = utilization_factor(planned=0.9)
    assert (planned.value, planned.provenance) == (0.9, "modeled")
    default = utilization_factor()
    assert (default.value, default.provenance) == (DEFAULTS["utilization_planned"].value, "default")


def test_zero_utilization_is_floored_to_stay_a_factor():
    result = utilization_factor(measured_share=0.0)
    assert 0 < result.value < 1e-5

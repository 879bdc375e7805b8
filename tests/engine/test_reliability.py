"""Failures, checkpoints and effective training time (docs/efficiency-model.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.defaults import DEFAULTS, FACTOR_FLOOR
from engine.reliability import (
    cooling_adjusted_mtbf_card_hours,
    daly_interval_h,
    effective_time_arrays,
    effective_training_time,
    mtbf_card_from_failures,
    mtbf_from_interruptions,
    mtbf_job_h,
    young_interval_h,
)

LLAMA3_GPUS = 16_384
LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54


def test_llama3_interruptions_give_a_job_mtbf_of_about_3_09_hours():
    mtbf = float(mtbf_from_interruptions(LLAMA3_INTERRUPTIONS, LLAMA3_DAYS * 24))
    assert mtbf == pytest.approx(3.09, abs=0.005)


def test_llama3_job_mtbf_spread_evenly_is_about_50000_hours_per_gpu():
    per_gpu = float(mtbf_card_from_failures(LLAMA3_INTERRUPTIONS, LLAMA3_DAYS * 24 * LLAMA3_GPUS))
    assert per_gpu == pytest.approx(50_000, rel=0.02)
    # And dividing it back by the job size returns the job figure.
    assert float(mtbf_job_h(per_gpu, LLAMA3_GPUS)) == pytest.approx(
        LLAMA3_DAYS * 24 / LLAMA3_INTERRUPTIONS
    )


def test_research_cluster_mttf_of_7_9_hours_on_1024_gpus_is_about_8000_hours_per_gpu():
    # One failure per 7.9 wall hours of a 1,024-GPU job = 7.9 · 1,024 card-hours per failure.
    per_gpu = float(mtbf_card_from_failures(100, 100 * 7.9 * 1024))
    assert per_gpu == pytest.approx(8_000, rel=0.02)
    assert float(mtbf_job_h(per_gpu, 1024)) == pytest.approx(7.9)


def test_default_mtbf_lies_between_the_two_published_fleet_rates():
    # RSC-1's A100s (Kokolis et al. 2024, ~29,500 h) and Llama 3's H100s (~50,700 h).
    research = float(DEFAULTS["mtbf_card_hours_research"].value)
    hopper = float(DEFAULTS["mtbf_card_hours_hopper"].value)
    assert research < float(DEFAULTS["mtbf_card_hours"].value) < hopper


def test_young_interval_is_sqrt_of_two_delta_m():
    save_h, mtbf = 0.05, LLAMA3_DAYS * 24 / LLAMA3_INTERRUPTIONS
    assert float(young_interval_h(save_h, mtbf)) == pytest.approx(
        math.sqrt(2 * save_h * mtbf), rel=1e-12
    )
    assert float(young_interval_h(save_h, mtbf)) == pytest.approx(0.556, abs=0.001)


@given(
    save_h=st.floats(1e-4, 1.0),
    mtbf=st.floats(0.5, 1e4),
    restart_h=st.floats(0.0, 2.0),
)
def test_young_interval_minimises_the_first_order_lost_share(save_h, mtbf, restart_h):
    tau = float(young_interval_h(save_h, mtbf))
    for other in (tau * 0.8, tau * 1.25):
        lost_at_young = save_h / tau + (tau / 2 + restart_h) / mtbf
        lost_at_other = save_h / other + (other / 2 + restart_h) / mtbf
        assert lost_at_young <= lost_at_other + 1e-12


def test_daly_interval_formula_by_hand():
    save_h, mtbf = 0.1, 2.0
    ratio = save_h / (2 * mtbf)
    expected = math.sqrt(2 * save_h * mtbf) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - save_h
    assert float(daly_interval_h(save_h, mtbf)) == pytest.approx(expected, rel=1e-12)


def test_daly_interval_is_mtbf_when_saving_takes_two_mtbf_or_more():
    assert float(daly_interval_h(4.0, 2.0)) == 2.0
    assert float(daly_interval_h(10.0, 2.0)) == 2.0


@pytest.mark.parametrize("save_over_mtbf", [1e-4, 1e-3, 1e-2, 0.05, 0.1])
def test_daly_interval_matches_the_exact_exponential_optimum_better_than_young(save_over_mtbf):
    mtbf = 3.0
    save_h = save_over_mtbf * mtbf
    taus = np.linspace(1e-4, 3 * mtbf, 600_001)
    # Daly's expected wall time per unit of work is proportional to (e^((τ+δ)/M) − 1) / τ.
    exact = taus[np.argmin(np.expm1((taus + save_h) / mtbf) / taus)]
    daly = float(daly_interval_h(save_h, mtbf))
    young = float(young_interval_h(save_h, mtbf))
    assert abs(daly - exact) <= 1e-3 * exact + 2e-5
    assert abs(daly - exact) <= abs(young - exact)


def test_lost_share_matches_the_spec_formula():
    result = effective_training_time(
        2048,
        mtbf_card_hours=20_000,
        checkpoint_save_h=0.05,
        restart_h=0.25,
        checkpoint_interval_h=1.0,
    )
    mtbf = 20_000 / 2048
    lost = 0.05 / 1.0 + (1.0 / 2 + 0.25) / mtbf
    assert result.mtbf_job_h == pytest.approx(mtbf)
    assert result.lost_share == pytest.approx(lost)
    assert result.effective_time == pytest.approx(1 - lost)
    assert result.interval_rule == "given"
    assert (
        result.lost_checkpoint_share + result.lost_rework_share + result.lost_restart_share
        == pytest.approx(lost)
    )


def test_a_job_that_cannot_progress_is_floored_and_flagged():
    result = effective_training_time(
        100_000, mtbf_card_hours=1_000, checkpoint_save_h=0.5, restart_h=1.0
    )
    assert result.lost_share >= 1
    assert result.stalled
    assert result.effective_time == FACTOR_FLOOR


def test_liquid_cooling_lengthens_the_default_mtbf_by_the_failure_rate_factor():
    air = float(cooling_adjusted_mtbf_card_hours(20_000, "air"))
    liquid = float(cooling_adjusted_mtbf_card_hours(20_000, "direct_liquid"))
    factor = float(DEFAULTS["failure_rate_direct_liquid"].value)
    assert liquid == pytest.approx(air / factor)
    assert liquid > air
    default_air = effective_training_time(4096, cooling="air")
    default_liquid = effective_training_time(4096, cooling="direct_liquid")
    assert default_liquid.effective_time > default_air.effective_time


def test_an_entered_mtbf_is_not_adjusted_for_cooling():
    entered = effective_training_time(1024, mtbf_card_hours=30_000, cooling="immersion")
    assert entered.mtbf_card_hours == 30_000


def test_scalar_wrapper_rejects_unknown_rule():
    with pytest.raises(ValueError, match="interval_rule"):
        effective_training_time(8, interval_rule="weekly")


card_counts = st.lists(st.integers(1, 200_000), min_size=2, max_size=30)
reliability_inputs = {
    "mtbf_card": st.floats(100.0, 1e6),
    "save_h": st.floats(0.0, 1.0),
    "restart_h": st.floats(0.0, 3.0),
    "interval": st.one_of(st.just(math.nan), st.floats(0.01, 24.0)),
    "use_daly": st.booleans(),
}


@given(cards=card_counts, **reliability_inputs)
def test_effective_time_is_a_factor_and_never_rises_with_more_cards(
    cards, mtbf_card, save_h, restart_h, interval, use_daly
):
    ordered = np.sort(np.asarray(cards, dtype=float))
    result = effective_time_arrays(ordered, mtbf_card, save_h, restart_h, interval, use_daly)
    assert ((result.effective_time > 0) & (result.effective_time <= 1)).all()
    assert (np.diff(result.effective_time) <= 1e-12).all()
    assert (result.stalled == (result.lost_share >= 1)).all()

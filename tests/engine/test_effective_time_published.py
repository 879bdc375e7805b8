"""Effective time (Meta's ETTR, Google's runtime goodput) against published figures (issue 27).

Production practice is the default: asynchronous checkpoints blocking seconds, automated
restarts that grow with the job, the MTBF of the card generation's production fleets. The
research-cluster preset (``site_kind="research"``) takes Meta's RSC figures. Each test names
its source and tolerance; no constant was fitted to any of these cases.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.defaults import DEFAULTS
from engine.reliability import (
    default_mtbf_card_hours,
    default_restart_h,
    effective_training_time,
    mtbf_job_h,
)

H100 = "H100 SXM5 80GB"
A100 = "A100 SXM4 80GB"
MINUTE_H = 1 / 60

# Dubey et al. 2024, "The Llama 3 Herd of Models", §3.3.4: a 54-day snapshot of pre-training
# on 16,384 H100 had 466 job interruptions, 419 of them unexpected; "higher than 90 %
# effective training time".
LLAMA3_GPUS, LLAMA3_DAYS = 16_384, 54
LLAMA3_UNEXPECTED, LLAMA3_ALL = 419, 466

# Kokolis et al. 2024, "Revisiting Reliability in Large-Scale Machine Learning Research
# Clusters" (arXiv:2410.21680v2, HPCA 2025), §IV: RSC-1 fails at r_f = 6.50 per 1,000
# node-days (8 A100 per node); the ETTR estimates take a restart overhead u0 of 5 minutes.
RSC1_FAILURES_PER_NODE_DAY = 6.50 / 1000
RSC_CARDS_PER_NODE = 8


def _llama3_mtbf_card_hours(interruptions: int) -> float:
    return LLAMA3_DAYS * 24 * LLAMA3_GPUS / interruptions


def test_the_default_save_blocks_seconds_and_the_default_restart_takes_minutes():
    # PyTorch async DCP: 6-14 s of visible downtime for 7B-13B models (PyTorch blog 2024).
    assert 6 <= DEFAULTS["checkpoint_save_h"].value * 3600 <= 14
    assert DEFAULTS["restart_h"].value * 60 == pytest.approx(2.5)
    assert DEFAULTS["restart_h_research"].value * 60 == pytest.approx(5.0)
    assert "PyTorch blog" in DEFAULTS["checkpoint_save_h"].source
    assert "Kokolis" in DEFAULTS["restart_h_research"].source


def test_restart_grows_with_the_job_by_megascale_communicator_set_up():
    # MegaScale (Jiang et al. 2024 §3.5): communicator set-up under 5 s on 2,048 GPUs and
    # under 30 s on more than 10,000: (30 - 5) s / log2(10,000 / 2,048) ≈ 11 s per doubling.
    assert DEFAULTS["restart_growth_h_per_doubling"].value * 3600 == pytest.approx(
        (30 - 5) / math.log2(10_000 / 2_048), rel=0.05
    )
    at_1k, at_16k = default_restart_h(["production", "production"], [1024, 16_384])
    assert at_1k == pytest.approx(2.5 * MINUTE_H)
    assert at_16k == pytest.approx(2.5 * MINUTE_H + 4 * 11 / 3600)  # four doublings


def test_llama3_with_its_measured_interruption_rate_keeps_its_published_effective_time():
    # Issue 27 target >= 0.88; Llama 3 publishes "higher than 90 %". By hand, 419 unexpected
    # interruptions: M = 54·24/419 = 3.093 h, δ = 10 s, τ = sqrt(2δM) = 0.131 h,
    # lost = 2·δ/τ + R/M = 0.0424 + (150 + 4·11) s / 3.093 h = 0.0424 + 0.0174 = 0.060.
    for interruptions in (LLAMA3_UNEXPECTED, LLAMA3_ALL):
        result = effective_training_time(
            LLAMA3_GPUS,
            mtbf_card_hours=_llama3_mtbf_card_hours(interruptions),
            accelerator=H100,
        )
        assert result.mtbf_job_h == pytest.approx(LLAMA3_DAYS * 24 / interruptions)
        assert result.ettr >= 0.90
    unexpected = effective_training_time(
        LLAMA3_GPUS, mtbf_card_hours=_llama3_mtbf_card_hours(LLAMA3_UNEXPECTED)
    )
    assert unexpected.lost_share == pytest.approx(0.0424 + 0.0174, abs=0.001)


def test_a_10000_card_hopper_job_with_the_production_defaults_keeps_90_percent():
    # Issue 27 target. MTBF per card: Llama 3's H100 fleet (mtbf_card_hours_hopper, 50,000 h).
    result = effective_training_time(10_000, accelerator=H100)
    assert result.mtbf_card_hours == 50_000
    assert result.mtbf_basis == "default for Hopper cards (mtbf_card_hours_hopper)"
    assert result.effective_time >= 0.90


def test_bytedance_9600_h100_three_month_job_within_5_points_of_its_97_percent():
    # Held out (no default was chosen with it): ByteRobust (Wan et al. 2025, SOSP '25),
    # 97 % cumulative ETTR over three months on 9,600 H100; its own failure rate is not
    # published, so the production defaults stand in. Tolerance ±0.05.
    result = effective_training_time(9_600, accelerator=H100, site_kind="production")
    assert result.ettr == pytest.approx(0.97, abs=0.05)


def test_research_preset_mtbf_is_rsc1_node_failure_rate_per_gpu():
    per_gpu = RSC_CARDS_PER_NODE * 24 / RSC1_FAILURES_PER_NODE_DAY  # ≈ 29,538 h
    assert DEFAULTS["mtbf_card_hours_research"].value == pytest.approx(per_gpu, rel=0.01)
    # Kokolis et al. §IV projects a 1.8 h MTTF at 16,384 GPUs and 0.23 h at 131,072.
    preset = float(default_mtbf_card_hours(["research"], [""])[0][0])
    assert float(mtbf_job_h(preset, 16_384)) == pytest.approx(1.8, abs=0.05)
    assert float(mtbf_job_h(preset, 131_072)) == pytest.approx(0.23, abs=0.01)


def _research(cards: int, interval_min: float, extra_restart_min: float = 0.0) -> float:
    """The research preset for an A100 job as Kokolis et al. state their scenarios:
    checkpoint writes not blocking (their assumption), a given interval, and any queueing
    after a failure added to the preset's restart."""
    restart = float(default_restart_h(["research"], [cards])[0]) + extra_restart_min * MINUTE_H
    return effective_training_time(
        cards,
        site_kind="research",
        accelerator=A100,
        checkpoint_save_h=0.0,
        restart_h=restart,
        checkpoint_interval_h=interval_min * MINUTE_H,
    ).ettr


@pytest.mark.parametrize(
    ("cards", "interval_min", "queue_min", "published"),
    [
        # §IV (Fig. 9 text): RSC-1 given to one 16,000-GPU job, hourly checkpoints → 0.7,
        (16_000, 60, 0.0, 0.70),
        # and checkpoints every 5 minutes → 0.93.
        (16_000, 5, 0.0, 0.93),
        # Observation 10: an 8,000-GPU job (half of RSC-1) with 30-minute checkpoints and one
        # minute of queueing after each failure reaches 0.9.
        (8_000, 30, 1.0, 0.90),
    ],
)
def test_research_preset_reproduces_metas_published_ettr_within_5_points(
    cards, interval_min, queue_min, published
):
    assert _research(cards, interval_min, queue_min) == pytest.approx(published, abs=0.05)


@pytest.mark.parametrize("cards", [2_048, 4_096])
def test_research_preset_keeps_rsc1_2k_to_4k_jobs_above_0_9_with_hourly_checkpoints(cards):
    # Observation 10 (measured): jobs of 2,048-4,096 GPUs running over a day on RSC-1 with
    # hourly checkpoints reach an ETTR above 0.9.
    assert _research(cards, 60) > 0.90


@given(cards=st.integers(1, 200_000), rule=st.sampled_from(["young", "daly"]))
def test_the_research_preset_never_gives_more_effective_time_than_production(cards, rule):
    production = effective_training_time(cards, accelerator=A100, interval_rule=rule)
    research = effective_training_time(
        cards, accelerator=A100, interval_rule=rule, site_kind="research"
    )
    assert research.effective_time <= production.effective_time + 1e-12


def test_unpublished_generations_take_the_production_default_unless_research():
    mtbf, basis = default_mtbf_card_hours(
        ["unknown", "production", "research"], np.array(["blackwell"] * 3)
    )
    assert list(mtbf) == [38_700, 38_700, 29_500]  # not declared is production practice
    # The general default is the geometric mean of the two fleet-wide published rates.
    assert mtbf[0] == pytest.approx(math.sqrt(29_538 * 50_677), rel=0.01)
    assert basis[2] == "research-cluster preset (mtbf_card_hours_research)"


def test_an_unknown_preset_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="site_kind must be one of unknown, production, research"):
        effective_training_time(8, site_kind="garage")

"""Scalar entry for POST /api/v1/estimates/training/: same code, field-named errors."""

from __future__ import annotations

import pytest

from engine.capacity import estimate_training

A100 = {"name": "A100 SXM4 80GB", "dense_bf16_tflops": 312, "memory_gb": 80, "tdp_w": 400}


def _payload(**extra) -> dict:
    return {
        "model_params": 175e9,
        "tokens": 300e9,
        "flops_per_param_token": 8,
        "accelerator": A100,
        "cards": 1024,
        "achieved_tflops_per_card": 140,
        **extra,
    }


def test_megatron_reference_through_the_scalar_entry():
    result = estimate_training(_payload(pue=1.2, tariff_per_kwh=0.1, price_per_card_hour=1.5))
    assert result["total_flops"] == pytest.approx(4.2e23)
    assert result["days"] == pytest.approx(34, rel=0.05)
    assert result["cards"] == 1024
    assert result["card_hours"] == pytest.approx(1024 * result["days"] * 24)
    assert result["memory"]["state_bytes"] == pytest.approx(2.8e12)
    assert result["memory"]["min_cards"] >= 35
    assert result["energy_mwh"]["facility"] == pytest.approx(1.2 * result["energy_mwh"]["it"])
    assert result["cost"]["basis"] == "rental"
    assert result["cost"]["compute"] == pytest.approx(1.5 * result["card_hours"])
    factors = result["factors"]
    assert factors["scaling"] == factors["effective_time"] == factors["utilization"] == 1.0
    assert factors["provenance"]["mfu"] == "entered"  # a typed throughput
    assert factors["provenance"]["utilization"] == "default"  # not given: 1 for a plain estimate
    given = estimate_training(_payload(utilization=0.7))["factors"]
    assert given["utilization"] == 0.7
    assert given["provenance"]["utilization"] == "entered"
    assert result["feasible"]


def test_deadline_mode_returns_cards():
    result = estimate_training({**_payload(), "cards": None, "deadline_days": 34})
    assert result["cards"] == pytest.approx(1024, rel=0.05)
    assert result["days"] <= 34


def test_zero_stage_and_dp_degree_shape_memory():
    base = _payload(model_params=7.5e9, tokens=1e11, flops_per_param_token=6, cards=64)
    stage0 = estimate_training({**base, "zero_stage": 0, "dp_degree": 64})
    stage3 = estimate_training({**base, "zero_stage": 3, "dp_degree": 64})
    assert stage0["memory"]["state_per_card_bytes"] == pytest.approx(120e9, rel=0.05)
    assert stage3["memory"]["state_per_card_bytes"] == pytest.approx(1.9e9, rel=0.05)
    assert stage0["parallelism"]["dp"] == 64


# Field errors are the serializer's: tests/planner/api/test_training_estimate.py (400 by field).


def test_fp8_uses_the_fp8_peak():
    h100 = {
        "name": "H100",
        "dense_bf16_tflops": 989,
        "dense_fp8_tflops": 1979,
        "memory_gb": 80,
        "tdp_w": 700,
    }
    bf16 = estimate_training(
        {**_payload(), "accelerator": h100, "achieved_tflops_per_card": None, "mfu": 0.4}
    )
    fp8 = estimate_training(
        {
            **_payload(),
            "accelerator": h100,
            "achieved_tflops_per_card": None,
            "mfu": 0.4,
            "precision": "fp8",
        }
    )
    assert fp8["days"] == pytest.approx(bf16["days"] * 989 / 1979)

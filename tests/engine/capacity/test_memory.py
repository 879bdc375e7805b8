"""Memory wall: training state (Alibaba Cloud 2024, ZeRO) and activations (Korthikanti 2022)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.memory import (
    ModelShape,
    activation_bytes_per_card,
    activation_bytes_per_layer,
    min_cards_for_state,
    model_state_bytes_per_card,
    training_state_bytes,
)

GB = 1e9


def test_seed_001_175b_training_state_is_about_2800_gb():
    assert training_state_bytes(175e9) / GB == pytest.approx(2800, rel=0.05)


def test_seed_001_175b_needs_at_least_35_a100_80gb_cards():
    assert min_cards_for_state(175e9, 80, usable_share=1.0) == 35
    # With memory reserved for the framework it takes more, never fewer.
    assert min_cards_for_state(175e9, 80) >= 35


@pytest.mark.parametrize(("stage", "expected_gb"), [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_7_5b_on_64_dp_cards(stage: int, expected_gb: float):
    per_card = training_state_bytes(7.5e9, zero_stage=stage, dp_degree=64) / GB
    assert per_card == pytest.approx(expected_gb, rel=0.05)


@given(
    params=st.floats(1e6, 1e13),
    dp=st.integers(1, 4096),
)
def test_zero_stages_never_increase_memory(params: float, dp: int):
    per_stage = [training_state_bytes(params, s, dp) for s in range(4)]
    assert all(a >= b for a, b in zip(per_stage, per_stage[1:], strict=False))
    assert per_stage[0] == pytest.approx(16 * params)


def test_zero_stage_out_of_range_is_rejected():
    with pytest.raises(ValueError, match="zero_stage"):
        training_state_bytes(1e9, zero_stage=4)


def test_tensor_and_pipeline_split_the_state():
    whole = model_state_bytes_per_card(175e9, 1, 1, 1, 0)
    assert model_state_bytes_per_card(175e9, 8, 16, 1, 0) == pytest.approx(whole / 128)


def test_korthikanti_per_layer_formulas():
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    attention = 5 * a * s / h
    none = activation_bytes_per_layer(s, b, h, a, 1, sequence_parallel=False)
    assert none == pytest.approx(sbh * (34 + attention))
    tp_only = activation_bytes_per_layer(s, b, h, a, t, sequence_parallel=False)
    assert tp_only == pytest.approx(sbh * (10 + 24 / t + attention / t))
    tp_sp = activation_bytes_per_layer(s, b, h, a, t, sequence_parallel=True)
    assert tp_sp == pytest.approx(sbh * (34 + attention) / t)
    selective = activation_bytes_per_layer(s, b, h, a, t, recompute="selective")
    assert selective == pytest.approx(sbh * 34 / t)
    full = activation_bytes_per_layer(s, b, h, a, t, recompute="full")
    assert full == pytest.approx(2 * sbh)
    assert full < selective < tp_sp < tp_only < none


def test_korthikanti_gpt3_first_stage_holds_about_all_layers():
    # 1F1B: the first of p stages holds p micro-batches of L/p layers = L layers' worth.
    per_layer = activation_bytes_per_layer(2048, 1, 12288, 96, 8)
    per_card = activation_bytes_per_card(2048, 1, 96, 12288, 96, 8, 16, 64)
    assert per_card == pytest.approx(per_layer * 96)
    # Fewer micro-batches than stages: only m are in flight.
    assert activation_bytes_per_card(2048, 1, 96, 12288, 96, 8, 16, 4) == pytest.approx(
        per_layer * 6 * 4
    )


def test_shape_inference_reproduces_gpt3_175b():
    assert ModelShape.infer(175e9) == ModelShape(layers=96, hidden=12288, heads=96)


@given(st.floats(1e7, 2e12))
def test_inferred_shape_matches_parameter_count(params: float):
    shape = ModelShape.infer(params)
    assert 12 * shape.layers * shape.hidden**2 == pytest.approx(params, rel=0.6)
    assert shape.hidden % shape.heads == 0


def test_vectorised_over_arrays():
    result = training_state_bytes(np.array([1e9, 2e9]), np.array([0, 3]), np.array([1, 2]))
    assert result.tolist() == pytest.approx([16e9, 16e9])

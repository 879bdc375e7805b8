"""Serving definitions of the factors for inference pools (engine.inference.serving)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.inference import InferenceWorkload, evaluate_inference
from engine.inference.serving import (
    availability,
    bytes_per_token,
    pool_mbu,
    serving_factors,
    serving_utilization,
)
from tests.support.inference_inputs import H100_SXM, LLAMA3_70B, LLAMA3_70B_PARAMS


def test_pool_mbu_at_capacity_is_the_models_mbu():
    w = InferenceWorkload(
        params=LLAMA3_70B_PARAMS, input_tokens=1000, output_tokens=1000, cards=8, tp=2,
        weight_precision="fp8", kv_precision="fp8", shape=LLAMA3_70B,
    )  # fmt: skip
    row = evaluate_inference(pd.DataFrame([H100_SXM]), w).iloc[0]
    kv_read = row["kv_bytes_per_token_per_card"] * (1000 + 1000 / 2)
    per_token = bytes_per_token(row["weight_gb_per_card"] * 1e9, 2, row["batch"], kv_read)
    mbu = pool_mbu(row["capacity_tokens_per_s"], per_token, row["cards"], 3.35)
    assert mbu == pytest.approx(row["mbu"], rel=1e-9)


def test_availability_of_a_replica_falls_with_its_size():
    # 8 cards of 50,000 h MTBF stop together: replica MTBF 6,250 h, 4 h repairs.
    assert availability(50_000, 8, 4) == pytest.approx(6250 / 6254)
    assert availability(50_000, 1, 4) > availability(50_000, 8, 4)


def test_unknown_capacity_is_no_data_not_zero():
    assert np.isnan(serving_utilization(100.0, 0.0))
    assert np.isnan(serving_utilization(100.0, np.nan))
    assert serving_utilization(500.0, 1000.0) == pytest.approx(0.5)
    assert serving_utilization(5000.0, 1000.0) == 1.0


def test_factors_have_no_pipeline_scaling_and_multiply():
    factors = serving_factors(pue=1.25, mbu=0.6, availability_share=0.99, utilization=0.5)
    assert factors["scaling"] == 1.0
    assert factors["energy"] == pytest.approx(0.8)
    assert factors["effective_serving_utilization"] == pytest.approx(0.8 * 0.6 * 0.99 * 0.5)


@given(
    load=st.floats(0.0, 1.0),
    capacity=st.floats(1.0, 1e6),
    per_token=st.floats(1e3, 1e10),
    cards=st.integers(1, 1000),
    bandwidth=st.floats(0.1, 10.0),
)
def test_mbu_at_capacity_times_utilization_is_the_served_traffic(
    load, capacity, per_token, cards, bandwidth
):
    served = load * capacity
    at_capacity = pool_mbu(capacity, per_token, cards, bandwidth)
    combined = at_capacity * serving_utilization(served, capacity)
    assert combined == pytest.approx(pool_mbu(served, per_token, cards, bandwidth), rel=1e-9)

"""Deadline mode inverts time mode: fewest cards that meet the deadline."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.capacity import TrainingWorkload, plan_capacity
from engine.memory import ModelShape
from engine.parallelism import FixedParallelism
from tests.support.capacity_inputs import A100_80GB, H100_SXM, options

SMALL = TrainingWorkload(params=7e9, tokens=1e12, shape=ModelShape(32, 4096, 32))


def _days_at(workload: TrainingWorkload, option: dict, cards: int) -> float:
    """Days at `cards`, or inf when that count has no split that fits."""
    row = plan_capacity(workload, options({**option, "cards": cards})).iloc[0]
    return float(row["days"]) if row["feasible"] else np.inf


@settings(max_examples=12, deadline=None)
@given(cards=st.integers(16, 2048), card=st.sampled_from([A100_80GB, H100_SXM]))
def test_round_trip_with_modeled_factors(cards: int, card: dict):
    days = _days_at(SMALL, card, cards)
    if not np.isfinite(days):
        return  # no split for this count: nothing to invert
    row = plan_capacity(SMALL, options({**card, "deadline_days": days})).iloc[0]
    assert row["feasible"], row["reason"]
    found = int(row["cards"])
    assert found <= cards  # never more than the count that made it
    assert _days_at(SMALL, card, found) <= days
    assert _days_at(SMALL, card, found - 1) > days


@settings(max_examples=15, deadline=None)
@given(cards=st.integers(1, 5000))
def test_round_trip_is_exact_when_factors_are_fixed(cards: int):
    fixed = {**A100_80GB, "mfu": 0.5, "scaling": 0.9, "effective_time": 0.95, "utilization": 0.8}
    workload = TrainingWorkload(params=1e9, tokens=1e11, global_batch_sequences=8192)
    days = float(plan_capacity(workload, options({**fixed, "cards": cards})).iloc[0]["days"])
    row = plan_capacity(workload, options({**fixed, "deadline_days": days})).iloc[0]
    assert row["feasible"], row["reason"]
    # Same days at most, one fewer card misses: only float rounding may pick n - 1.
    assert int(row["cards"]) in (cards - 1, cards)
    assert row["days"] <= days


def test_seed_002_deadline_34_days_needs_about_1024_a100_at_140_tflops():
    workload = TrainingWorkload(params=175e9, tokens=300e9, flops_per_param_token=8)
    row = plan_capacity(
        workload,
        options(
            {
                **A100_80GB,
                "deadline_days": 34,
                "achieved_tflops_per_card": 140.0,
                "scaling": 1.0,
                "effective_time": 1.0,
                "utilization": 1.0,
            }
        ),
    ).iloc[0]
    assert row["cards"] == pytest.approx(1024, rel=0.05)
    assert row["days"] <= 34


def test_granularity_steps_in_whole_nodes():
    row = plan_capacity(
        SMALL, options({**A100_80GB, "deadline_days": 20, "card_granularity": 8})
    ).iloc[0]
    assert row["feasible"]
    cards = int(row["cards"])
    assert cards % 8 == 0
    assert _days_at(SMALL, A100_80GB, cards) <= 20
    assert _days_at(SMALL, A100_80GB, cards - 8) > 20


def test_fixed_tp_pp_moves_in_steps_of_the_model_parallel_group():
    workload = TrainingWorkload(
        params=7e9,
        tokens=1e12,
        shape=ModelShape(32, 4096, 32),
        parallelism=FixedParallelism(tp=4, pp=2),
    )
    row = plan_capacity(workload, options({**A100_80GB, "deadline_days": 15})).iloc[0]
    assert row["feasible"]
    assert (row["tp"], row["pp"]) == (4, 2)
    assert int(row["cards"]) % 8 == 0
    assert _days_at(workload, A100_80GB, int(row["cards"]) - 8) > 15


def test_unreachable_deadline_is_infeasible_with_reason():
    row = plan_capacity(SMALL, options({**A100_80GB, "deadline_days": 0.001}), max_cards=4096).iloc[
        0
    ]
    assert not row["feasible"]
    assert "not reachable" in row["reason"]

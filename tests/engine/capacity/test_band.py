"""The honest range (10th–90th percentile of the defaults' uncertainty) and its tornado."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.capacity import TrainingWorkload, plan_capacity
from engine.capacity.band import uncertainty_tornado
from engine.defaults import DEFAULTS
from engine.memory import ModelShape
from engine.parallelism import FixedParallelism
from tests.support.capacity_inputs import H100_SXM

WORKLOAD = TrainingWorkload(params=70e9, tokens=2e12, seq_len=4096, global_batch_sequences=1024)
PRICED = {**H100_SXM, "rental_price_per_card_hour": 2.0}


@settings(max_examples=20, deadline=None)
@given(
    nodes=st.integers(8, 2048),
    mfu=st.one_of(st.none(), st.floats(0.2, 0.7)),
    site_kind=st.sampled_from(["unknown", "production", "research"]),
    asynchronous=st.booleans(),
)
def test_a_band_always_contains_its_central_estimate(nodes, mfu, site_kind, asynchronous):
    option = {**PRICED, "cards": 8 * nodes, "site_kind": site_kind}
    option["checkpoint_async"] = int(asynchronous)
    if mfu is not None:
        option["mfu"] = mfu
    row = plan_capacity(WORKLOAD, pd.DataFrame([option])).iloc[0]
    if not row["feasible"]:
        return
    assert row["days_low"] <= row["days"]
    assert row["cost_low"] <= row["total_cost"]
    if row["band_note"]:
        assert pd.isna(row["days_high"])
    else:
        assert row["days"] <= row["days_high"]
        assert row["total_cost"] <= row["cost_high"]


def test_entered_figures_carry_no_default_uncertainty():
    entered = {"mfu": 0.45, "scaling": 0.9, "effective_time": 0.95, "cards": 1024}
    row = plan_capacity(WORKLOAD, pd.DataFrame([{**PRICED, **entered}])).iloc[0]
    assert row["days_low"] == row["days"] == row["days_high"]
    modeled = plan_capacity(WORKLOAD, pd.DataFrame([{**PRICED, "cards": 1024}])).iloc[0]
    assert modeled["days_low"] < modeled["days"] < modeled["days_high"]


def test_tornado_shows_the_model_matters_most_on_a_small_job_and_failures_grow_with_scale():
    options = pd.DataFrame(
        [{**PRICED, "cards": cards, "site_kind": "research"} for cards in (256, 16_384)]
    )
    plan = plan_capacity(WORKLOAD, options)
    tornado = uncertainty_tornado(plan)
    first = tornado.groupby("option_id")["uncertainty"].first()
    assert first.loc[0] == "mfu"
    mtbf = tornado[tornado["uncertainty"] == "mtbf"].set_index("option_id")["swing_days"]
    share = mtbf / plan["days"]  # of each option's days
    assert share.loc[1] > 5 * share.loc[0]
    assert (tornado["days_low"] <= tornado["days_high"]).all()


def test_the_models_own_error_spans_the_calibrated_percentiles():
    # With every other figure entered, the band is the calibration residuals' 10th-90th
    # percentile of published ÷ modeled throughput (defaults model_ratio_p10 and _p90).
    row = plan_capacity(
        WORKLOAD, pd.DataFrame([{**PRICED, "cards": 1024, "scaling": 0.9, "effective_time": 1}])
    ).iloc[0]
    low, high = DEFAULTS["model_ratio_p10"].value, DEFAULTS["model_ratio_p90"].value
    assert row["mfu_provenance"] == "modeled"
    assert row["days_low"] == pytest.approx(row["days"] / high, rel=0.02)
    assert row["days_high"] == pytest.approx(row["days"] / low, rel=0.02)


@settings(max_examples=20, deadline=None)
@given(replicas=st.integers(1, 24), more=st.integers(1, 24))
def test_more_cards_never_slower_in_running_time_at_a_fixed_split_family(replicas, more):
    workload = TrainingWorkload(
        params=13e9,
        tokens=1e12,
        seq_len=4096,
        global_batch_sequences=1536,
        micro_batch=1,
        shape=ModelShape(40, 5120, 40),
        parallelism=FixedParallelism(tp=8, pp=4, cp=1, vp=2),
    )
    cards = (32 * replicas, 32 * (replicas + more))
    plan = plan_capacity(workload, pd.DataFrame([{**H100_SXM, "cards": n} for n in cards]))
    assert plan["feasible"].all(), plan["reason"].tolist()
    assert plan.iloc[1]["running_days"] * plan.iloc[1]["effective_time"] < (
        plan.iloc[0]["running_days"] * plan.iloc[0]["effective_time"]
    )


def test_asynchronous_saves_scale_only_an_entered_save():
    """The default save (10 s) is already an asynchronous save's blocking copy: ticking
    asynchronous leaves it; an entered synchronous save blocks only its copy's share
    (6.3 s of 148.8 s, the PyTorch blog's 7B figure in the defaults table)."""
    option = {**PRICED, "cards": 16_384, "site_kind": "production"}

    def effective_time(**extra) -> float:
        row = plan_capacity(WORKLOAD, pd.DataFrame([{**option, **extra}])).iloc[0]
        return float(row["effective_time"])

    assert effective_time(checkpoint_async=1) == effective_time(checkpoint_async=0)
    synchronous_h = 148.8 / 3600
    copy_h = synchronous_h * DEFAULTS["checkpoint_async_stall_share"].value
    assert copy_h == pytest.approx(6.3 / 3600)
    entered_async = effective_time(checkpoint_save_hours=synchronous_h, checkpoint_async=1)
    as_its_copy = effective_time(checkpoint_save_hours=copy_h, checkpoint_async=0)
    assert entered_async == pytest.approx(as_its_copy)
    assert entered_async > effective_time(checkpoint_save_hours=synchronous_h)

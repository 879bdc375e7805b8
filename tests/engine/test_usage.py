"""Measured utilization and effective time (engine.usage), checked by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.usage import (
    bucket_edges,
    measured_mfu,
    measured_utilization,
    split_intervals,
    usage_interval,
)

H100 = "H100 SXM5 80GB"


def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


# The hand example: cluster alpha, 16 H100 cards (2 nodes x 8) in service for two days,
# 2024-03-01 00:00 to 2024-03-03 00:00 UTC = 48 h, so 16 x 48 = 768 in-service card-hours.
#   J1 team-a  8 cards  03-01 20:00 -> 03-02 08:00 (12 h) completed: 96 card-h
#              split at midnight: day 1 4 h x 8 = 32, day 2 8 h x 8 = 64
#   J2 team-b  4 cards  03-01 00:00 -> 03-01 06:00 ( 6 h) node_fail: 24 card-h, all lost
#   J3 team-b  8 cards  03-02 12:00 -> 03-03 00:00 (12 h) completed: 96 card-h
# sreport for the two days: Down 12 card-h (the failed node, 4 cards x 3 h),
# PLND Down 48 card-h (maintenance, 8 cards x 6 h); both spread evenly: 6 and 24 per day.
USAGE = pd.DataFrame(
    {
        "cluster": ["alpha"] * 3,
        "account": ["team-a", "team-b", "team-b"],
        "accelerator_model": [H100] * 3,
        "cards": [8.0, 4.0, 8.0],
        "start": [ts("2024-03-01 20:00"), ts("2024-03-01 00:00"), ts("2024-03-02 12:00")],
        "end": [ts("2024-03-02 08:00"), ts("2024-03-01 06:00"), ts("2024-03-03 00:00")],
        "duration_h": [12.0, 6.0, 12.0],
        "state": pd.Categorical(["completed", "node_fail", "completed"]),
    }
)
INVENTORY = pd.DataFrame(
    {
        "cluster": ["alpha"],
        "accelerator_model": [H100],
        "cards": [16.0],
        "in_service_from": [pd.NaT],
        "in_service_until": [pd.NaT],
    }
)
DOWNTIME = pd.DataFrame(
    {
        "cluster": ["alpha"],
        "tres_name": ["gres/gpu"],
        "period_start": [ts("2024-03-01")],
        "period_end": [ts("2024-03-03")],
        "down_card_hours": [12.0],
        "planned_down_card_hours": [48.0],
    }
)
PERIOD = {"period_start": "2024-03-01", "period_end": "2024-03-03"}


def test_hand_example_whole_period():
    row = measured_utilization(
        USAGE, INVENTORY, frequency="total", downtime=DOWNTIME, **PERIOD
    ).iloc[0]
    # C = 768 - 48 planned down = 720; A = 96 + 24 + 96 = 216; L = 24 (node_fail); D = 12
    assert row["available_card_hours"] == pytest.approx(720)
    assert row["allocated_card_hours"] == pytest.approx(216)
    assert row["lost_card_hours"] == pytest.approx(24)
    assert row["down_card_hours"] == pytest.approx(12)
    assert row["allocation_share"] == pytest.approx(216 / 720)  # 0.30
    # utilization = (A + D) / C = 228 / 720 = 0.3167
    assert row["utilization"] == pytest.approx(228 / 720)
    # effective_time = (A - L) / (A + D) = 192 / 228 = 0.8421
    assert row["effective_time"] == pytest.approx(192 / 228)
    # their product is the productive share (A - L) / C = 192 / 720 = 0.2667
    assert row["utilization"] * row["effective_time"] == pytest.approx(row["productive_share"])
    assert row["productive_share"] == pytest.approx(192 / 720)


def test_hand_example_per_day_splits_the_job_across_midnight():
    days = measured_utilization(USAGE, INVENTORY, frequency="day", downtime=DOWNTIME, **PERIOD)
    # day 1: C = 384 - 24 = 360, A = 32 (J1's first 4 h) + 24 (J2) = 56, L = 24, D = 6
    # day 2: C = 360, A = 64 (J1's last 8 h) + 96 (J3) = 160, L = 0, D = 6
    assert days["allocated_card_hours"].tolist() == pytest.approx([56, 160])
    assert days["available_card_hours"].tolist() == pytest.approx([360, 360])
    assert days["utilization"].tolist() == pytest.approx([62 / 360, 166 / 360])
    assert days["effective_time"].tolist() == pytest.approx([32 / 62, 160 / 166])
    assert days["bucket_start"].tolist() == [ts("2024-03-01"), ts("2024-03-02")]


def test_without_sreport_the_rule_is_one_minus_lost_over_allocated():
    row = measured_utilization(USAGE, INVENTORY, frequency="total", **PERIOD).iloc[0]
    # C = 768, A = 216, L = 24, D = 0: utilization 216/768, effective_time 1 - 24/216
    assert row["utilization"] == pytest.approx(216 / 768)
    assert row["effective_time"] == pytest.approx(1 - 24 / 216)


def test_teams_get_a_share_of_the_scope():
    teams = measured_utilization(
        USAGE, INVENTORY, frequency="total", by=("account",), downtime=DOWNTIME, **PERIOD
    ).set_index("account")
    # team-a: A = 96, D share = 12 x 96/216 = 5.33; team-b: A = 120, L = 24, D = 6.67
    assert teams.loc["team-a", "down_card_hours"] == pytest.approx(12 * 96 / 216)
    assert teams.loc["team-b", "effective_time"] == pytest.approx(
        (120 - 24) / (120 + 12 * 120 / 216)
    )
    # both measured against the cluster's 720 available card-hours, so they add up
    assert teams["available_card_hours"].tolist() == pytest.approx([720, 720])
    assert teams["utilization"].sum() == pytest.approx(228 / 720)


def test_inventory_in_service_dates_and_groups_without_usage():
    inventory = pd.DataFrame(
        {
            "cluster": ["alpha", "alpha"],
            "accelerator_model": [H100, "A100 SXM4 80GB"],
            "cards": [16.0, 8.0],
            # The A100s arrive at noon on day 2: 8 cards x 12 h = 96 card-h.
            "in_service_from": [pd.NaT, ts("2024-03-02 12:00")],
            "in_service_until": [pd.NaT, pd.NaT],
        }
    )
    frame = measured_utilization(
        USAGE, inventory, frequency="total", by=("cluster", "accelerator_model"), **PERIOD
    ).set_index("accelerator_model")
    assert frame.loc["A100 SXM4 80GB", "in_service_card_hours"] == pytest.approx(96)
    assert frame.loc["A100 SXM4 80GB", "allocated_card_hours"] == 0
    assert frame.loc[H100, "in_service_card_hours"] == pytest.approx(768)


def test_running_jobs_use_time_held_so_far():
    usage = USAGE.iloc[[0]].assign(end=pd.NaT, duration_h=6.0, state="running")
    row = measured_utilization(usage, INVENTORY, frequency="total", **PERIOD).iloc[0]
    assert row["allocated_card_hours"] == pytest.approx(48)


def test_a_running_jobs_end_keeps_its_fractional_seconds_whatever_the_columns_resolution():
    # Microsecond starts beside second-resolution ends (all missing): one resolution, no warning.
    usage = pd.DataFrame(
        {
            "start": pd.Series([ts("2024-03-01 08:00:00.250")]).astype("datetime64[us, UTC]"),
            "end": pd.Series([pd.NaT], dtype="datetime64[s, UTC]"),
            "duration_h": [0.5 / 3600],
        }
    )
    start, end = usage_interval(usage)
    assert end.iloc[0] == ts("2024-03-01 08:00:00.750")
    assert end.iloc[0] - start.iloc[0] == pd.Timedelta(milliseconds=500)


def test_month_buckets_and_dst_days():
    edges = bucket_edges("2024-01-15", "2024-03-10", "month")
    assert [e.strftime("%m-%d") for e in edges] == ["01-15", "02-01", "03-01", "03-10"]
    berlin = bucket_edges("2024-03-30", "2024-04-01", "day", tz="Europe/Berlin")
    hours = np.diff(berlin.asi8) / 3.6e9
    assert hours.tolist() == [24.0, 23.0]  # clocks go forward on 31 March
    weeks = bucket_edges("2024-03-06", "2024-03-20", "week")
    assert [e.day for e in weeks] == [6, 11, 18, 20]  # ISO weeks start on Monday


@settings(max_examples=60, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(
            st.integers(min_value=-500, max_value=2000),  # start, hours after period start
            st.integers(min_value=0, max_value=900),  # length, hours
            st.floats(min_value=0.125, max_value=64),  # cards
        ),
        min_size=1,
        max_size=30,
    ),
    frequency=st.sampled_from(["day", "week", "month"]),
)
def test_bucket_split_conserves_card_hours(jobs, frequency):
    period_start, period_end = ts("2024-01-01"), ts("2024-03-01")
    start = pd.Series([period_start + pd.Timedelta(hours=s) for s, _, _ in jobs])
    end = pd.Series([period_start + pd.Timedelta(hours=s + n) for s, n, _ in jobs])
    cards = np.array([c for _, _, c in jobs])
    edges = bucket_edges(period_start, period_end, frequency)
    split = split_intervals(start, end, edges)
    got = np.bincount(split.row, weights=split.hours * cards[split.row], minlength=len(jobs))
    clipped_h = (
        (np.minimum(end, period_end) - np.maximum(start, period_start)).dt.total_seconds() / 3600
    ).clip(lower=0)
    assert got == pytest.approx((clipped_h * cards).to_numpy())
    assert (split.hours > 0).all()


def test_measured_mfu_weights_by_card_hours_and_peak():
    usage = pd.DataFrame(
        {
            "cluster": ["c", "c", "c"],
            "accelerator_model": [H100, H100, H100],
            "cards": [8.0, 8.0, 8.0],
            "card_hours": [10.0, 30.0, 5.0],
            # job 1: 6 x 7e9 x 7,000 tokens/s / (8 x 989e12) = 0.03716
            "model_params": [7e9, np.nan, np.nan],
            "tokens_per_s": [7_000.0, np.nan, np.nan],
            "mfu": [np.nan, 0.5, np.nan],  # job 2 entered, job 3 unmeasured
            "gpu_utilization": [0.9, 0.7, np.nan],
        }
    )
    out = measured_mfu(usage, {H100: 989.0}).iloc[0]
    job1 = 6 * 7e9 * 7_000 / (8 * 989e12)
    assert out["mfu"] == pytest.approx((job1 * 10 + 0.5 * 30) / 40)
    assert out["gpu_utilization"] == pytest.approx((0.9 * 10 + 0.7 * 30) / 40)
    assert out["measured_card_hours"] == 40

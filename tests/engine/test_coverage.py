"""The coverage rule: measured figures count only when usage covers >= 50 % of card-days."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from engine.coverage import (
    MIN_COVERED_SHARE,
    clip_inventory,
    coverage_of,
    covered_windows,
    measured_applies,
)

UTC = dt.UTC
START = dt.datetime(2026, 11, 1, tzinfo=UTC)
END = dt.datetime(2026, 12, 1, tzinfo=UTC)  # 30 days


def _inventory(clusters=(1,), cards=8.0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cluster": list(clusters),
            "cards": [cards] * len(clusters),
            "in_service_from": pd.to_datetime(["2026-01-01"] * len(clusters), utc=True),
            "in_service_until": pd.Series([pd.NaT] * len(clusters), dtype="datetime64[us, UTC]"),
        }
    )


def _windows(rows) -> pd.DataFrame:
    spans = pd.DataFrame(rows, columns=["cluster", "first", "last"])
    return covered_windows(spans, START, END)


@pytest.mark.parametrize(
    ("covered", "expected"),
    [(0.0, False), (0.49, False), (0.4999, False), (0.5, True), (0.51, True), (1.0, True)],
)
def test_rule_at_0_49_50_and_100_percent(covered, expected):
    assert bool(measured_applies(covered * 720.0, 720.0)) is expected


def test_rule_without_cards_is_not_measured():
    assert not measured_applies(0.0, 0.0)
    assert MIN_COVERED_SHARE == 0.5


def _coverage_for_days(days: float):
    last = START + dt.timedelta(days=days)
    rows = [(1, START, last)] if days > 0 else []
    return coverage_of(_inventory(), _windows(rows), START, END)


@pytest.mark.parametrize(
    ("days", "share", "measured"),
    [(0, 0.0, False), (14, 14 / 30, False), (15, 0.5, True), (30, 1.0, True)],
)
def test_coverage_of_whole_days(days, share, measured):
    coverage = _coverage_for_days(days)
    assert coverage.share == pytest.approx(share)
    assert coverage.uses_measured is measured
    assert coverage.period_card_hours == pytest.approx(8 * 720.0)
    assert coverage.covered_days == pytest.approx(days)


def test_boundary_just_below_half_is_planned():
    # 359 of 720 card-hours (49.9 %): a record ending at 23:00 on day 15 snaps to midnight,
    # so test the card-hour rule directly at the hour just below the boundary.
    assert not measured_applies(359.0, 720.0)
    assert measured_applies(360.0, 720.0)


def test_window_snaps_to_utc_midnight_and_clips_to_the_period():
    rows = [(1, dt.datetime(2026, 11, 2, 8, tzinfo=UTC), dt.datetime(2026, 11, 19, 17, tzinfo=UTC))]
    windows = _windows(rows)
    assert windows.loc[0, "covered_from"] == pd.Timestamp("2026-11-02", tz="UTC")
    assert windows.loc[0, "covered_until"] == pd.Timestamp("2026-11-20", tz="UTC")
    outside = _windows(
        [(1, dt.datetime(2026, 9, 1, tzinfo=UTC), dt.datetime(2027, 1, 5, tzinfo=UTC))]
    )
    assert outside.loc[0, "covered_from"] == pd.Timestamp(START)
    assert outside.loc[0, "covered_until"] == pd.Timestamp(END)
    assert _windows(
        [(1, dt.datetime(2026, 8, 1, tzinfo=UTC), dt.datetime(2026, 8, 2, tzinfo=UTC))]
    ).empty


def test_text_and_reason_name_days_and_clusters():
    inventory = _inventory(clusters=(1, 2, 3, 4, 5))
    rows = [
        (c, dt.datetime(2026, 11, 2, tzinfo=UTC), dt.datetime(2026, 11, 19, tzinfo=UTC))
        for c in (1, 2, 3, 4)
    ]
    coverage = coverage_of(inventory, _windows(rows), START, END)
    assert coverage.text() == "usage covers 17 of 30 days, 4 of 5 clusters"
    assert coverage.clusters_covered == 4
    assert coverage.share == pytest.approx(4 * 17 / (5 * 30))
    assert "below the 50 % rule" in coverage.reason().replace("50%", "50 %")
    empty = coverage_of(inventory, _windows([]), START, END)
    assert empty.share == 0.0
    assert empty.reason().startswith("no usage records in the period")
    assert empty.as_dict()["uses_measured"] is False


def test_clip_inventory_gives_uncovered_clusters_no_hours():
    inventory = _inventory(clusters=(1, 2))
    rows = [(1, dt.datetime(2026, 11, 2, tzinfo=UTC), dt.datetime(2026, 11, 19, tzinfo=UTC))]
    clipped = clip_inventory(inventory, _windows(rows))
    first = clipped.iloc[0]
    assert first["in_service_from"] == pd.Timestamp("2026-11-02", tz="UTC")
    assert first["in_service_until"] == pd.Timestamp("2026-11-19", tz="UTC")
    second = clipped.iloc[1]
    assert second["in_service_until"] <= second["in_service_from"]
    assert list(clipped["cards"]) == [8.0, 8.0]


def test_clip_inventory_keeps_a_later_commissioning():
    inventory = _inventory()
    inventory["in_service_from"] = pd.to_datetime(["2026-11-10"], utc=True)
    rows = [(1, START, END)]
    clipped = clip_inventory(inventory, _windows(rows))
    assert clipped.iloc[0]["in_service_from"] == pd.Timestamp("2026-11-10", tz="UTC")
    coverage = coverage_of(inventory, _windows(rows), START, END)
    assert coverage.share == pytest.approx(1.0)
    assert coverage.covered_days == pytest.approx(21)


def test_cost_per_effective_pflop_day_is_undefined_when_nothing_was_delivered():
    from engine.cost import cost_per_effective_pflop_day
    from engine.defaults import FACTOR_FLOOR

    cost = pd.Series([1000.0, 1000.0, 1000.0])
    peak = pd.Series([10.0, 10.0, 10.0])
    # Delivered: half the peak; an idle pool's floored sliver; nothing at all.
    effective = pd.Series([5.0, 10.0 * FACTOR_FLOOR * 0.8, 0.0])
    ratio = cost_per_effective_pflop_day(cost, effective, peak)
    assert ratio.iloc[0] == pytest.approx(200.0)
    assert ratio.iloc[1:].isna().all()

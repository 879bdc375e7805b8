"""Coverage counts from the cluster's commissioning, not the period's start: the days of a
cluster in service for 20 of 30 days are 20, and covering all of them is full coverage."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from engine.coverage import coverage_of, covered_windows

UTC = dt.UTC
START = dt.datetime(2026, 11, 1, tzinfo=UTC)
END = dt.datetime(2026, 12, 1, tzinfo=UTC)


def test_a_cluster_commissioned_mid_period_counts_its_days_from_then():
    inventory = pd.DataFrame(
        {
            "cluster": [1],
            "cards": [8.0],
            "in_service_from": pd.to_datetime(["2026-11-11"], utc=True),
            "in_service_until": pd.Series([pd.NaT], dtype="datetime64[us, UTC]"),
        }
    )
    spans = pd.DataFrame({"cluster": [1], "first": [START], "last": [END]})
    coverage = coverage_of(inventory, covered_windows(spans, START, END), START, END)
    assert (coverage.covered_days, coverage.period_days) == (pytest.approx(20), pytest.approx(20))
    assert coverage.share == pytest.approx(1.0)
    assert coverage.text() == "usage covers 20 of 20 days"
    half = pd.DataFrame({"cluster": [1], "first": [START], "last": [START + dt.timedelta(days=20)]})
    partial = coverage_of(inventory, covered_windows(half, START, END), START, END)
    assert partial.text() == "usage covers 10 of 20 days"  # 11th to 21st of the 20 in service

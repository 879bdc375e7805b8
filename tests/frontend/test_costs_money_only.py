"""The chargeback's money-only cost run (issue 18) gives exactly the full run's money.

A weekly or daily Costs page charges per calendar month, so it runs the cost model a second
time; that run only needs each pool-month's money, not the engine's factors. Compared here
value for value (no tolerance) with the full run on the dashboard data
(tests/support/usage_data.py), over a period wider than the usage records so that hours
without records (priced at the engine's utilization) are in it too.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from tests.support.usage_data import aware

pytestmark = pytest.mark.django_db

# A month before and after the records: uncovered hours on both sides.
WIDE_START = dt.date(2024, 5, 1)
WIDE_END = dt.date(2024, 10, 1)


def both_runs(granularity: str, cluster_ids, idle_rule: str = "proportional"):
    """(full, money-only) pool costs of one scope, fed as the Costs page feeds them."""
    from accounting.rollups import rollup_usage_frame
    from accounting.selectors import AccountingScope, pool_costs, scope_inputs

    scope = AccountingScope(
        period_start=aware(WIDE_START),
        period_end=aware(WIDE_END),
        granularity=granularity,
        cluster_ids=cluster_ids,
        group_by=("site", "cluster", "pool"),
        idle_rule=idle_rule,
    )
    usage = rollup_usage_frame(
        cluster_ids,
        scope.period_start,
        scope.period_end,
        keys=["pool", "team"],
        edges=scope.edges(),
        granularity=granularity,
    )
    inputs = scope_inputs(scope)
    full = pool_costs(scope, usage, inputs=inputs)
    light = pool_costs(scope, usage, inputs=inputs, money_only=True)
    return scope, full, light


@pytest.mark.parametrize("granularity", ["month", "week"])
@pytest.mark.parametrize("cluster", [None, "train-ascend"])
def test_money_only_units_equal_the_full_runs(usage, granularity, cluster):
    from accounting.selectors.costs import MONEY_ONLY_COLUMNS
    from inventory.models import Cluster

    cluster_ids = None if cluster is None else (Cluster.objects.get(name=cluster).pk,)
    _, full, light = both_runs(granularity, cluster_ids)
    assert list(light.units.columns) == list(MONEY_ONLY_COLUMNS)
    # Both kinds of unit are compared: hours with records and hours without.
    assert full.units["covered"].any() and (~full.units["covered"]).any()
    assert full.units["total_cost"].notna().all() and (full.units["total_cost"] > 0).all()
    pd.testing.assert_frame_equal(
        light.units, full.units[list(MONEY_ONLY_COLUMNS)], check_exact=True
    )
    assert light.warnings == full.warnings
    pd.testing.assert_frame_equal(light.usage, full.usage, check_exact=True)


@pytest.mark.parametrize("idle_rule", ["proportional", "even", "none"])
def test_money_only_chargeback_equals_the_full_runs(usage, idle_rule):
    from accounting.selectors import chargeback_frames

    scope, full, light = both_runs("month", None, idle_rule)
    full_rows, full_bills = chargeback_frames(scope, full)
    light_rows, light_bills = chargeback_frames(scope, light)
    assert len(full_rows) > 0 and (full_rows["chargeback_cost"] > 0).any()
    pd.testing.assert_frame_equal(light_rows, full_rows, check_exact=True)
    pd.testing.assert_frame_equal(light_bills, full_bills, check_exact=True)


def test_a_weekly_pages_chargeback_equals_the_monthly_pages(usage):
    """The weekly page's chargeback (money-only run) is the monthly page's (full run)."""
    from frontend.dashboards import usage_selectors
    from frontend.dashboards.dashboard_query import DashboardQuery, shared_cache

    params = {"start": WIDE_START.isoformat(), "end": WIDE_END.isoformat(), "idle_rule": "even"}
    shared_cache().clear()
    monthly_view = DashboardQuery.of_params(params)
    usage_selectors.costs_page(monthly_view)  # its charts make the full monthly run ...
    monthly = usage_selectors.chargeback(monthly_view)  # ... which its chargeback reuses
    kinds = [key[1:3] for key in usage_selectors.view_memo(monthly_view) if key[0] == "pool-costs"]
    assert kinds == [("month", False)]
    shared_cache().clear()  # else the weekly view reads the monthly one's cached frame
    weekly_view = DashboardQuery.of_params({**params, "granularity": "week"})
    weekly = usage_selectors.chargeback(weekly_view)
    assert len(monthly) > 0
    pd.testing.assert_frame_equal(weekly, monthly, check_exact=True)
    # It came from a money-only run: the full monthly run was never made for this view.
    kinds = [key[1:3] for key in usage_selectors.view_memo(weekly_view) if key[0] == "pool-costs"]
    assert kinds == [("month", True)]

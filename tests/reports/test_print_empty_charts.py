"""The print page: a chart without data is a "—" with the reason, never an empty axis; card-hours
read as whole numbers with thousands separators."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from reports import content, periods
from reports.charts import render_charts
from reports.render import render_html
from tests.support.builders import APR, MAR
from tests.support.builders import fleet_monthly_schedule as make_schedule

pytestmark = pytest.mark.django_db

JUNE_2023 = periods.Period(
    dt.datetime(2023, 6, 1, tzinfo=dt.UTC), dt.datetime(2023, 7, 1, tzinfo=dt.UTC)
)


def test_a_period_without_usage_draws_no_chart_and_says_why(report_fleet):
    numbers = content.build_numbers(make_schedule(), JUNE_2023)
    assert render_charts(numbers) == {}
    html = render_html(numbers, mode="print")
    assert "<img" not in html
    assert "— Chart not drawn: no usage records in this period or the previous one." in html
    assert "— Chart not drawn: no usage records in this period." in html
    assert "— Chart not drawn: no cost data in this period" in html


def test_usage_without_a_price_draws_no_chargeback_bars_at_zero(report_fleet):
    numbers = content.build_numbers(make_schedule(), periods.Period(MAR, APR))
    teams = numbers["chargeback"]["teams"]
    assert teams and "chargeback" in render_charts(numbers)
    for team in teams:  # the usage is there, only its price is unknown
        team["used_cost"] = team["idle_cost_share"] = team["chargeback_cost"] = None
    assert "chargeback" not in render_charts(numbers)
    html = render_html(numbers, mode="print")
    assert "— Chart not drawn: no price in the inventory for this usage." in html


def test_card_hours_are_whole_numbers_with_thousands_separators(report_fleet):
    numbers = content.build_numbers(make_schedule(), periods.Period(MAR, APR))
    html = render_html(numbers, mode="print")
    charts = render_charts(numbers)
    assert {"factors", "utilization", "chargeback", "waste"} <= set(charts)
    alpha = next(r for r in numbers["utilization"]["cluster"] if r["name"] == "alpha")
    # alpha: 16 cards × 24 h × 31 days available in March.
    assert f"{16 * 24 * 31:,}" in html and f"{alpha['available_card_hours']:,.0f}" == "11,904"
    cells = re.findall(r'<td class="num">([0-9][0-9,.]*)</td>', html)
    assert cells and not [c for c in cells if "." in c]

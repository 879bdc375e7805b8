"""Usage and Costs dashboards in a real headless Chromium: Plotly charts render, a filter
change redraws them, accessible basics, screenshots "usage" and "costs"."""

from __future__ import annotations

import pytest

from tests.support import usage_data
from tests.support.browser import TABLET, assert_accessible_basics, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUERY = f"start={usage_data.PERIOD_START}&end={usage_data.PERIOD_END}"


@pytest.fixture
def usage_records(browser_planner):
    from accounting.rollups import refresh_usage_rollups
    from inventory.services import load_demo_fleet

    load_demo_fleet()
    usage_data.load_usage(count=60)
    refresh_usage_rollups()


def trace_count(page, dom_id: str) -> int:
    return page.evaluate(f"() => document.getElementById('{dom_id}').data.length")


def test_usage_page_renders_its_charts_and_follows_the_filter(
    browser_page, usage_records, screenshot
):
    page = browser_page
    page.goto(f"/usage/?{QUERY}")
    for key in ("usage-utilization", "usage-team-heatmap", "usage-breakdown"):
        page.wait_for_selector(f"#chart-{key} .main-svg")
    assert trace_count(page, "chart-usage-utilization") == 3  # one line per cluster
    assert_accessible_basics(page)
    screenshot(page, "usage")

    page.get_by_label("Group by").select_option("team")
    page.get_by_label("Granularity").select_option("month")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url(lambda url: "group_by=team" in url)
    page.wait_for_selector("#chart-usage-utilization .main-svg")
    names = page.evaluate(
        "() => document.getElementById('chart-usage-utilization').data.map(t => t.name)"
    )
    assert "team-a" in names and "(no account)" in names
    title = page.evaluate(
        "() => document.getElementById('chart-usage-utilization').layout.title.text"
    )
    assert title == "Measured utilization per team"
    link = page.get_by_role("link", name="CSV").first
    assert "group_by=team" in link.get_attribute("href")


def test_costs_page_renders_its_charts_and_the_sortable_table(
    browser_page, usage_records, screenshot
):
    page = browser_page
    page.goto(f"/costs/?{QUERY}")
    for key in ("costs-breakdown", "costs-pflop-day", "costs-chargeback"):
        page.wait_for_selector(f"#chart-{key} .main-svg")
    # Ownership, energy and PUE overhead, in one panel per currency (EUR and USD sites).
    assert trace_count(page, "chart-costs-breakdown") == 3 * 2
    assert "in proportion to their used card-hours" in page.inner_text(".idle-rule")
    assert_accessible_basics(page)
    screenshot(page, "costs")

    page.get_by_role("link", name="Team").click()
    teams = page.locator("table.sortable tbody th").all_inner_texts()
    assert teams == sorted(teams)

    page.get_by_label("Group by").select_option("site")
    page.get_by_label("Idle cost rule").select_option("none")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url(lambda url: "idle_rule=none" in url)
    page.wait_for_selector("#chart-costs-breakdown .main-svg")
    bars = page.evaluate(
        "() => document.getElementById('chart-costs-breakdown').data.flatMap(t => t.x)"
    )
    # Each site in its currency's panel (Frankfurt in EUR, Ulanqab in USD).
    assert sorted(set(bars)) == ["Frankfurt DC1 (air)", "Ulanqab DC2 (liquid)"]
    assert "(idle, not charged)" in page.inner_text("table.sortable")


def test_costs_page_on_a_tablet(page_factory, browser_planner, usage_records, screenshot):
    page = page_factory(TABLET)
    log_in(page, browser_planner.username, "pw-" + browser_planner.username)
    page.goto(f"/costs/?{QUERY}")
    page.wait_for_selector("#chart-costs-pflop-day .main-svg")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= TABLET["width"]
    screenshot(page, "costs-tablet")

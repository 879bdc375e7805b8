"""Filters tell the truth (issue 14): every filter form shows the values in effect, defaults
included, so pressing Show without touching anything changes nothing, in a real Chromium."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.support import usage_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOWN = """() => Object.fromEntries(
  [...document.querySelectorAll('form.filters select, form.filters input[name]')]
    .filter(e => e.name && e.type !== 'hidden').map(e => [e.name, e.value]))"""
CHART_DATA = """(id) => JSON.stringify(document.getElementById(id).data.map(
  t => [t.name, t.x, t.y]))"""


@pytest.fixture
def usage_records(browser_planner):
    from accounting.rollups import refresh_usage_rollups
    from inventory.services import load_demo_fleet

    load_demo_fleet()
    usage_data.load_usage(count=60)
    refresh_usage_rollups()


def _snapshot(page, charts: list[str]) -> dict:
    for chart in charts:
        page.wait_for_selector(f"#chart-{chart} .main-svg")
    return {
        "shown": page.evaluate(SHOWN),
        "charts": {chart: page.evaluate(CHART_DATA, f"chart-{chart}") for chart in charts},
        "tables": page.locator("main table").all_inner_texts(),
        "subtitle": page.inner_text(".subtitle"),
    }


@pytest.mark.parametrize(
    ("path", "charts", "defaults"),
    [
        (
            "/costs/",
            ["costs-breakdown", "costs-pflop-day", "costs-chargeback"],
            {"group_by": "cluster", "granularity": "month", "idle_rule": "proportional"},
        ),
        (
            "/usage/",
            ["usage-utilization", "usage-team-heatmap"],
            {"group_by": "cluster", "granularity": "week"},
        ),
    ],
)
def test_show_without_a_change_changes_nothing(browser_page, usage_records, path, charts, defaults):
    page = browser_page
    page.goto(path)
    before = _snapshot(page, charts)
    # The form shows the values applied: the defaults, and the default period's days.
    for name, value in defaults.items():
        assert before["shown"][name] == value, name
        assert f"per {defaults['granularity']}" in before["subtitle"]
    assert before["shown"]["start"] and before["shown"]["end"]
    assert before["shown"]["start"] in before["subtitle"]
    page.get_by_role("button", name="Show").click()
    page.wait_for_url(lambda url: "granularity=" in url)
    after = _snapshot(page, charts)
    assert after == before


def test_new_schedule_form_selects_the_zone_it_will_use(client, django_user_model):
    from tests.support.builders import make_user

    admin = make_user("zone-admin", "admin", is_staff=True)
    client.force_login(admin)
    html = client.get(reverse("reports:schedule-create")).content.decode()
    assert '<option value="UTC" selected>' in html

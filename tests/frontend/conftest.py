"""Fixtures of the browser app's tests: a computed plan and its owner, and the dashboards' usage
(tests/support/usage_data.py) on the demo fleet. The browser fixtures (Chromium through
Playwright) are shared ones: tests/support/fixtures/browser.py."""

from __future__ import annotations

import pytest

from tests.support import usage_data
from tests.support.builders import make_user, plan_payload, usd_to_eur_rate
from tests.support.inline import run_plan_inline


@pytest.fixture
def owner(db):
    return make_user("plan-owner", "planner")


@pytest.fixture
def plan(owner, demo_fleet, django_capture_on_commit_callbacks):
    """The demo payload (Baidu 2023 on A100/H100 at two sites plus the mixed pool), computed."""
    from planner import plans

    usd_to_eur_rate()  # the catalog's USD cards priced at the EUR site
    body = plan_payload()
    with django_capture_on_commit_callbacks(execute=False):
        created = plans.create_plan(owner=owner, **body)
    run_plan_inline(created.pk)
    created.refresh_from_db()
    assert created.status == "succeeded"
    return created


@pytest.fixture
def usage(demo_fleet):
    """The dashboards' usage (tests/support/usage_data.py) imported and rolled up."""
    from accounting.rollups import refresh_usage_rollups

    counts = usage_data.load_usage()
    refresh_usage_rollups()
    return counts

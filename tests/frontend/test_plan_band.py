"""The planner page shows each option's honest range (10th–90th percentile) on days and cost."""

from __future__ import annotations

import pytest

from tests.support.builders import make_user, plan_payload, usd_to_eur_rate
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db


@pytest.fixture
def plan(demo_fleet, django_capture_on_commit_callbacks):
    from planner import plans

    usd_to_eur_rate()
    owner = make_user("band-owner", "planner")
    with django_capture_on_commit_callbacks(execute=False):
        created = plans.create_plan(owner=owner, **plan_payload())
    run_plan_inline(created.pk)
    created.refresh_from_db()
    assert created.status == "succeeded"
    return created


def test_stored_options_carry_a_band_around_days_and_cost(plan):
    rows = [row for row in plan.results["options"] if row["feasible"]]
    assert rows
    for row in rows:
        assert row["days_low"] <= row["days"]
        assert row["days_high"] is None or row["days"] <= row["days_high"]
        if row["total_cost"] is not None and row["cost_low"] is not None:
            assert row["cost_low"] <= row["total_cost"]


def test_the_options_table_shows_the_band(client, viewer, plan):
    client.force_login(viewer)
    html = client.get(f"/planner/{plan.pk}/").content.decode()
    row = next(r for r in plan.results["options"] if r["feasible"] and r["days_high"])
    band = f"{row['days_low']:.1f}–{row['days_high']:.1f}"
    assert band in html
    assert "10th–90th percentile of the defaults" in html

"""Run now and preview for a day far outside the accepted years (issue #28): year 9999 or 0001
has no report period (its end, or its start in a zone east of UTC, is not a date Python
holds), so the API and the preview answer 400, and the run page its form again, with the
accepted range instead of a 500."""

from __future__ import annotations

import pytest

from tests.support.builders import finance_monthly_schedule

pytestmark = pytest.mark.django_db

RANGE = "Must be a date from 2000-01-01 to 2100-12-31."
DAYS = ["9999-12-31", "9999-01-01", "0001-01-01", "1999-12-31", "2101-01-01"]


@pytest.fixture
def schedule(report_fleet):
    # Berlin: 0001-01-01 00:00 local is still 0000-12-31 in UTC.
    return finance_monthly_schedule(timezone="Europe/Berlin")


@pytest.mark.parametrize("day", DAYS)
def test_the_api_refuses_run_and_preview_of_a_day_out_of_range(
    client_for, fleet_admin, schedule, day
):
    from reports.models import Report

    client = client_for(fleet_admin)
    base = f"/api/v1/report-schedules/{schedule.pk}"
    run = client.post(f"{base}/run/", {"day": day, "deliver": False}, format="json")
    assert run.status_code == 400 and run.json() == {"day": [RANGE]}
    preview = client.get(f"{base}/preview/", {"day": day})
    assert preview.status_code == 400 and preview.json() == {"day": [RANGE]}
    assert not Report.objects.exists()


@pytest.mark.parametrize("day", DAYS)
def test_the_pages_refuse_run_and_preview_of_a_day_out_of_range(client, fleet_admin, schedule, day):
    client.force_login(fleet_admin)
    run = client.post(f"/reports/schedules/{schedule.pk}/run/", {"day": day})
    # The run page shows the form again with the error (200, as for any invalid form).
    assert run.status_code == 200 and RANGE in run.content.decode()
    preview = client.get(f"/reports/schedules/{schedule.pk}/preview/", {"day": day})
    assert preview.status_code == 400 and preview.content.decode() == f"day: {RANGE}"


def test_a_day_in_range_still_previews(client_for, fleet_admin, schedule):
    preview = client_for(fleet_admin).get(
        f"/api/v1/report-schedules/{schedule.pk}/preview/", {"day": "2024-03-15"}
    )
    assert preview.status_code == 200

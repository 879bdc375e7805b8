"""The report archive's time range (issue #18): presets fit to the reports' periods, a custom
range that keeps the reports whose period overlaps it, and a clear 400 for a bad range."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.utils import timezone

from reports import services
from reports.models import Report, ReportSchedule

pytestmark = pytest.mark.django_db


def _day(text: str) -> dt.datetime:
    return timezone.make_aware(dt.datetime.fromisoformat(text))


@pytest.fixture
def monthly_reports() -> ReportSchedule:
    schedule = services.save_schedule(
        ReportSchedule(
            name="Finance monthly",
            frequency="monthly",
            timezone="UTC",
            template="cost_chargeback",
            recipient_addresses=["finance@example.com"],
            formats=["xlsx"],
        )
    )
    for start, end in (
        ("2024-01-01", "2024-02-01"),
        ("2024-02-01", "2024-03-01"),
        ("2024-03-01", "2024-04-01"),
    ):
        Report.objects.create(
            schedule=schedule, period_start=_day(start), period_end=_day(end), status="generated"
        )
    return schedule


def _listed_periods(html: str) -> list[str]:
    return re.findall(r"<td>(\d{4}-\d\d-\d\d[^<]*)</td>", html)


def test_fit_to_data_spans_the_reports_periods(client, viewer, monthly_reports):
    client.force_login(viewer)
    html = client.get("/reports/").content.decode()
    fit = re.search(r'<a href="\?([^"]+)" data-preset="data"', html)
    assert fit, "no fit-to-data preset"
    assert fit.group(1).replace("&amp;", "&") == "start=2024-01-01&end=2024-04-01"
    assert 'data-preset="last-30"' in html
    assert "zoom a chart" not in html  # the archive has no chart to zoom


def test_a_range_keeps_the_reports_overlapping_it(client, viewer, monthly_reports):
    client.force_login(viewer)
    whole = client.get("/reports/")
    assert whole.context["paginator"].count == 3
    february = client.get("/reports/", {"start": "2024-02-01", "end": "2024-03-01"})
    assert february.status_code == 200
    reports = list(february.context["rows"])
    assert [r.period_start.date() for r in reports] == [dt.date(2024, 2, 1)]
    # A range that only touches the edges of January and March overlaps them too.
    middle = client.get("/reports/", {"start": "2024-01-31", "end": "2024-03-02"})
    assert middle.context["paginator"].count == 3
    # The preset in effect is marked; the dates stay in the form.
    fit = client.get("/reports/", {"start": "2024-01-01", "end": "2024-04-01"}).content.decode()
    assert re.search(r'data-preset="data"[^>]*aria-current="true"', fit)
    assert 'value="2024-01-01"' in fit


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"start": "2024-03-01", "end": "2024-02-01"}, "The period must end after it starts."),
        ({"start": "yesterday"}, "Enter a valid date."),
    ],
)
def test_a_bad_range_is_a_400_naming_the_field(client, viewer, monthly_reports, params, message):
    client.force_login(viewer)
    response = client.get("/reports/", params)
    assert response.status_code == 400
    assert message in response.content.decode()

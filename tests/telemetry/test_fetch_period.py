"""A fetch covers 1 to 92 local days (LIMITS["telemetry_days"]), whoever queues it: the service
refuses a longer or reversed period before any row exists, the API answers it with a 400."""

from __future__ import annotations

import datetime as dt

import pytest

pytestmark = pytest.mark.django_db
START = dt.date(2026, 1, 1)


@pytest.fixture
def cluster(db):
    from inventory.models import Cluster, Site

    site = Site.objects.create(name="P DC", cooling_type="air", pue=1.3, currency="USD")
    return Cluster.objects.create(site=site, name="p1", commissioned_on=START)


def test_a_quarter_is_queued_a_day_more_is_refused_with_why(cluster):
    from telemetry import services
    from telemetry.models import TelemetryFetch

    quarter = services.queue_fetch(cluster, START, START + dt.timedelta(days=91))
    assert (quarter.period_end - quarter.period_start).days + 1 == 92
    with pytest.raises(services.FetchPeriodError) as refused:
        services.queue_fetch(cluster, START, START + dt.timedelta(days=92))
    assert str(refused.value) == (
        "2026-01-01 to 2026-04-03 is 93 days; a fetch covers 1 to 92 days "
        "(one fetch covers at most a quarter): fetch a longer period in parts."
    )
    with pytest.raises(services.FetchPeriodError, match="before the start"):
        services.queue_fetch(cluster, START, START - dt.timedelta(days=1))
    assert list(TelemetryFetch.objects.values_list("pk", flat=True)) == [quarter.pk]


def test_the_api_answers_a_long_fetch_with_the_same_reason(client_for, planner, cluster):
    response = client_for(planner).post(
        "/api/v1/telemetry/fetches/",
        {"cluster": cluster.pk, "start": "2026-01-01", "end": "2026-04-03"},
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "end": [
            "2026-01-01 to 2026-04-03 is 93 days; a fetch covers 1 to 92 days "
            "(one fetch covers at most a quarter): fetch a longer period in parts."
        ]
    }


def test_a_number_beyond_a_double_is_a_400_not_a_500(client_for, planner, cluster):
    response = client_for(planner).generic(
        "POST",
        "/api/v1/telemetry/fetches/",
        '{"cluster": 1e400, "start": "2026-01-01", "end": "2026-01-02"}',
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "out of range" in response.json()["detail"]

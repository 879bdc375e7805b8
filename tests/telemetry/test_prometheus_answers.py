"""A fetch against Prometheus answers a real one would not give the suite's TSDB: no series,
refusals with error texts, a page that is not JSON, an answer too large, a redirect to another
origin. Served by a stub on loopback (tests/support/net.py); the fetch runs as the worker runs
it (telemetry.services.run_fetch). What a viewer reads is a fixed text and a status code."""

from __future__ import annotations

import json

import pytest

from tests.support.net import StubHttpServer

pytestmark = pytest.mark.django_db
DAY = "2026-03-02"


@pytest.fixture
def cluster(db):
    from inventory.models import Cluster, Site

    site = Site.objects.create(name="A DC", cooling_type="air", pue=1.3, currency="USD")
    return Cluster.objects.create(site=site, name="a1", commissioned_on="2026-01-01")


def fetch_with(cluster, url: str, token: str | None = None):
    """One Prometheus fetch of DAY from ``url``, run to its end; the fetch row after it."""
    from telemetry import services
    from telemetry.models import PrometheusSource, TelemetryFetch

    source, _ = PrometheusSource.objects.update_or_create(cluster=cluster, defaults={"url": url})
    source.set_token(token)
    source.save()
    fetch = TelemetryFetch.objects.create(
        cluster=cluster, kind="prometheus", period_start=DAY, period_end=DAY
    )
    services.run_fetch(fetch.pk, str(fetch.run_id))
    fetch.refresh_from_db()
    return fetch


def answer(status: int, body: dict | bytes, **headers: str):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return status, {"Content-Type": "application/json", **headers}, data


def no_series(seen):
    kind = "matrix" if seen.path.endswith("query_range") else "vector"
    return answer(200, {"status": "success", "data": {"resultType": kind, "result": []}})


def test_a_prometheus_with_no_series_is_no_data_not_a_failure(cluster):
    from telemetry.models import GpuDay

    with StubHttpServer(no_series) as prometheus:
        fetch = fetch_with(cluster, prometheus.url)
    assert fetch.status == "succeeded", fetch.error
    assert fetch.warnings == ["No DCGM samples in the period."]
    assert (fetch.gpu_days, fetch.job_days) == (0, 0)
    assert not GpuDay.objects.exists()


def test_a_refused_query_shows_the_status_and_error_type_not_the_text(cluster):
    refusal = {"status": "error", "errorType": "bad_data", "error": "parse error: db-07 SECRET"}
    with StubHttpServer(lambda seen: answer(400, refusal)) as prometheus:
        fetch = fetch_with(cluster, prometheus.url)
    assert fetch.status == "failed"
    assert fetch.error == f"Prometheus at {prometheus.url} refused a query (HTTP 400, bad_data)."


def test_a_page_that_is_not_json_is_named_by_its_status_only(cluster):
    page = b"<html>Internal error on backend db-07.corp: SECRET</html>"
    with StubHttpServer(lambda seen: (500, {"Content-Type": "text/html"}, page)) as prometheus:
        fetch = fetch_with(cluster, prometheus.url)
    assert fetch.status == "failed"
    assert "HTTP 500, not JSON" in fetch.error and "SECRET" not in fetch.error


def test_an_answer_over_the_cap_fails_the_fetch(cluster, settings):
    settings.FLEETWISE_OUTBOUND_MAX_RESPONSE_BYTES = 2**20
    huge = {"status": "success", "data": {"resultType": "vector", "result": ["x" * 2**21]}}
    with StubHttpServer(lambda seen: answer(200, huge)) as prometheus:
        fetch = fetch_with(cluster, prometheus.url)
    assert fetch.status == "failed"
    assert fetch.error == (
        f"Prometheus at {prometheus.url} answered more than the 1 MiB allowed for one answer."
    )


def test_a_redirect_elsewhere_is_not_followed_and_the_token_stays_home(cluster):
    with StubHttpServer(no_series) as elsewhere:
        moved = answer(302, b"", Location=f"{elsewhere.url}/api/v1/query")
        with StubHttpServer(lambda seen: moved) as prometheus:
            fetch = fetch_with(cluster, prometheus.url, token="t0ken")
        assert prometheus.seen[0].headers["Authorization"] == "Bearer t0ken"
    assert elsewhere.seen == []
    assert fetch.status == "failed"
    assert "HTTP 302, a redirect to another address (not followed)" in fetch.error

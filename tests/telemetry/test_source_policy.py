"""A Prometheus URL is checked by the outbound policy when it is saved (the API and the admin
form answer each refused form with its reason), credentials never enter a URL, and a URL
stored with them before is never shown: not by the sources API, nor in a fetch's error (API
and CSV), nor in the log."""

from __future__ import annotations

import importlib
import logging

import pytest

from tests.support.builders import make_user

pytestmark = pytest.mark.django_db
SOURCES = "/api/v1/telemetry/sources/"
ADMIN_ADD = "/admin/telemetry/prometheussource/add/"
SECRET = "s3cret-pw"

# Each way an admin could point the worker at an address it must not reach, and the reason.
REFUSED = [
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata address"),
    ("http://metadata.google.internal/computeMetadata/v1/", "cloud metadata service"),
    ("http://127.0.0.1:9090", "loopback"),
    ("http://0x7f000001:9090", "loopback"),
    ("http://2130706433:9090", "loopback"),
    ("http://10.20.30.40:9090", "private or internal"),
    ("gopher://93.184.216.34:70/", "not an http:// or https:// URL"),
    (f"http://admin:{SECRET}@93.184.216.34:9090", "token field"),
]


@pytest.fixture
def cluster(db):
    from inventory.models import Cluster, Site

    site = Site.objects.create(name="S DC", cooling_type="air", pue=1.3, currency="USD")
    return Cluster.objects.create(site=site, name="s1", commissioned_on="2026-01-01")


@pytest.fixture
def no_loopback(settings):
    settings.FLEETWISE_OUTBOUND_ALLOW_LOOPBACK = False  # the production default
    settings.FLEETWISE_OUTBOUND_ALLOWED_NETWORKS = []


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_the_api_refuses_each_address_form_with_its_reason(
    client_for, fleet_admin, cluster, no_loopback, url, why
):
    response = client_for(fleet_admin).post(
        SOURCES, {"cluster": cluster.pk, "url": url}, format="json"
    )
    assert response.status_code == 400, response.content
    (message,) = response.json()["url"]
    assert why in message
    assert SECRET not in message


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_the_admin_form_refuses_each_address_form(client, cluster, no_loopback, url, why):
    from telemetry.models import PrometheusSource

    client.force_login(make_user("root", is_staff=True, is_superuser=True))
    response = client.post(
        ADMIN_ADD,
        {"cluster": cluster.pk, "url": url, "label_selector": "", "enabled": "on",
         "scrape_interval_s": 60, "step_s": 300, "timeout_s": 30, "node_overhead": 0.8},
    )  # fmt: skip
    assert response.status_code == 200  # the form again, with the reason
    errors = response.context["adminform"].form.errors["url"]
    assert any(why in error for error in errors)
    assert not PrometheusSource.objects.exists()


def test_an_allowed_network_is_accepted_when_an_admin_lists_it(
    client_for, fleet_admin, cluster, settings
):
    settings.FLEETWISE_OUTBOUND_ALLOWED_NETWORKS = ["10.20.0.0/16"]
    response = client_for(fleet_admin).post(
        SOURCES, {"cluster": cluster.pk, "url": "http://10.20.30.40:9090"}, format="json"
    )
    assert response.status_code == 201, response.content


@pytest.fixture
def legacy_source(cluster):
    """A source saved before credentials in URLs were refused (no validation ran then)."""
    from telemetry.models import PrometheusSource

    return PrometheusSource.objects.create(
        cluster=cluster, url=f"http://bob:{SECRET}@127.0.0.1:9/prom"
    )


def test_stored_credentials_never_reach_the_api_a_fetch_error_or_the_log(
    client_for, fleet_admin, viewer, legacy_source, caplog
):
    from telemetry import services
    from telemetry.models import TelemetryFetch

    shown = client_for(fleet_admin).get(f"{SOURCES}{legacy_source.pk}/").json()
    assert shown["url"] == "http://[redacted]@127.0.0.1:9/prom"
    fetch = TelemetryFetch.objects.create(
        cluster=legacy_source.cluster, kind="prometheus",
        period_start="2026-03-02", period_end="2026-03-02",
    )  # fmt: skip
    with caplog.at_level(logging.INFO):
        services.run_fetch(fetch.pk, str(fetch.run_id))
    fetch.refresh_from_db()
    assert fetch.status == "failed" and "token field" in fetch.error
    # An error stored by an older release, quoting the URL in full:
    TelemetryFetch.objects.filter(pk=fetch.pk).update(
        error=f"Prometheus at {legacy_source.url} is unreachable: ConnectionError"
    )
    viewer_client = client_for(viewer)
    as_json = viewer_client.get(f"/api/v1/telemetry/fetches/{fetch.pk}/")
    as_csv = viewer_client.get("/api/v1/telemetry/fetches/", {"format": "csv"})
    assert as_json.status_code == 200 and as_csv.status_code == 200
    csv_text = b"".join(as_csv.streaming_content if as_csv.streaming else [as_csv.content])
    for text in (as_json.content.decode(), csv_text.decode(), caplog.text):
        assert SECRET not in text
    assert "http://[redacted]@127.0.0.1:9/prom" in as_json.json()["error"]


def test_the_log_filter_redacts_credentials_of_any_url(caplog):
    from core.logredact import RedactTokensFilter

    record = logging.LogRecord(
        "telemetry", logging.ERROR, __file__, 1, "fetch of %s failed", (f"https://u:{SECRET}@p/",),
        None,
    )  # fmt: skip
    RedactTokensFilter().filter(record)
    assert record.getMessage() == "fetch of https://[redacted]@p/ failed"


def test_the_migration_drops_credentials_from_stored_urls_and_errors(legacy_source):
    from django.apps import apps

    from telemetry.models import PrometheusSource, TelemetryFetch

    fetch = TelemetryFetch.objects.create(
        cluster=legacy_source.cluster, kind="prometheus", period_start="2026-03-02",
        period_end="2026-03-02", error=f"Prometheus at {legacy_source.url} is unreachable",
    )  # fmt: skip
    migration = importlib.import_module("telemetry.migrations.0006_source_url_without_credentials")
    migration.drop_credentials(apps, None)
    assert PrometheusSource.objects.get().url == "http://127.0.0.1:9/prom"
    fetch.refresh_from_db()
    assert fetch.error == "Prometheus at http://[redacted]@127.0.0.1:9/prom is unreachable"

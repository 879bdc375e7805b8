"""Low findings of the hostile-input review: tokens out of access logs, the API schema behind a
role, cluster deletes that need a confirmation, analyses of deleted objects that fail, and the
compose file publishing gunicorn on loopback only."""

from __future__ import annotations

import datetime as dt
import logging
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.logredact import RedactTokensFilter, redact
from tests.accounting.conftest import alpha, import_text, sacct_text  # noqa: F401
from tests.test_compose import resolved_config

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "Zm9vYmFyLXNlY3JldC10b2tlbi0xMjM0NTY3ODkw"


# --- Tokens in access logs ----------------------------------------------------------------------


def test_redact_masks_export_link_tokens_and_token_parameters():
    line = f'"GET /api/v1/export/{TOKEN}/?format=csv&token={TOKEN} HTTP/1.1" 200 12'
    cleaned = redact(line)
    assert TOKEN not in cleaned
    assert cleaned.startswith('"GET /api/v1/export/[redacted]/?format=csv&token=[redacted] ')
    assert redact("/api/v1/sites/?format=csv") == "/api/v1/sites/?format=csv"


def test_runserver_and_request_loggers_never_write_the_token(caplog):
    from django.conf import settings

    assert "redact_tokens" in settings.LOGGING["loggers"]["django.server"]["filters"]
    assert "redact_tokens" in settings.LOGGING["loggers"]["django.request"]["filters"]
    record = logging.LogRecord(
        "django.server", logging.INFO, __file__, 1, '"%s" %s %s',
        (f"GET /api/v1/export/{TOKEN}/ HTTP/1.1", "200", "42"), None,
    )  # fmt: skip
    assert RedactTokensFilter().filter(record)
    assert TOKEN not in record.getMessage() and "[redacted]" in record.getMessage()

    with caplog.at_level(logging.INFO, logger="django.request"):
        logging.getLogger("django.request").warning("Gone: %s", f"/api/v1/export/{TOKEN}/")
    assert caplog.records and TOKEN not in caplog.text


@pytest.mark.django_db
def test_a_real_fetch_logs_no_token(client_for, planner, caplog):
    response = client_for(planner).post(
        "/api/v1/export-tokens/", {"name": "s", "url": "/api/v1/sites/"}, format="json"
    )
    clear = response.json()["token"]
    client_for(planner).delete(f"/api/v1/export-tokens/{response.json()['id']}/")
    with caplog.at_level(logging.INFO):
        assert client_for(None).get(f"/api/v1/export/{clear}/").status_code == 410
    assert "export/[redacted]/" in caplog.text and clear not in caplog.text


def test_gunicorn_access_log_redacts_tokens_and_credentials():
    settings = runpy.run_path(str(ROOT / "platform" / "gunicorn.conf.py"))
    from gunicorn.config import Config

    logger = settings["logger_class"](Config())
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": f"/api/v1/export/{TOKEN}/?key={TOKEN}",
        "PATH_INFO": f"/api/v1/export/{TOKEN}/",
        "QUERY_STRING": f"key={TOKEN}",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_REFERER": f"https://sheets.example/?token={TOKEN}",
        "REMOTE_ADDR": "10.0.0.1",
    }
    request = SimpleNamespace(headers=[("AUTHORIZATION", f"Token {TOKEN}")])
    response = SimpleNamespace(status="200 OK", sent=10, headers=[])
    atoms = logger.atoms(response, request, environ, dt.timedelta(seconds=1))
    assert all(TOKEN not in str(value) for value in atoms.values())
    assert atoms["r"] == "GET /api/v1/export/[redacted]/?key=[redacted] HTTP/1.1"
    assert atoms["{authorization}i"] == "[redacted]"


# --- The API schema and docs need a role ---------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/schema/", "/api/v1/docs/", "/api/v1/redoc/"])
def test_schema_and_docs_need_a_role(client_for, no_role_user, viewer, path):
    assert client_for(no_role_user).get(path).status_code == 403
    assert client_for(None).get(path).status_code == 401
    assert client_for(viewer).get(path).status_code == 200


# --- Deleting a cluster with usage data needs a confirmation ----------------------------------


@pytest.mark.django_db
def test_cluster_delete_names_what_it_would_delete_until_confirmed(
    client_for,
    planner,
    alpha,  # noqa: F811
    import_text,  # noqa: F811
):
    from accounting.models import ImportJob, UsageRecord
    from inventory.models import Cluster, Pool

    import_text(alpha, sacct_text())
    records = UsageRecord.objects.filter(cluster=alpha).count()
    assert records > 0
    client = client_for(planner)
    url = f"/api/v1/clusters/{alpha.pk}/"
    refused = client.delete(url)
    assert refused.status_code == 409
    detail = refused.json()["detail"]
    assert f"{records:,} usage records" in detail and "1 import job" in detail
    assert "1 pool" in detail and "?cascade=true" in detail
    assert refused.json()["would_delete"]["usage records"] == records
    assert Cluster.objects.filter(pk=alpha.pk).exists()
    assert UsageRecord.objects.filter(cluster=alpha).count() == records

    assert client.delete(url, QUERY_STRING="cascade=yes").status_code == 409
    assert client.delete(url + "?cascade=true").status_code == 204
    assert not Cluster.objects.filter(pk=alpha.pk).exists()
    assert not UsageRecord.objects.exists() and not ImportJob.objects.exists()
    assert not Pool.objects.filter(cluster_id=alpha.pk).exists()


@pytest.mark.django_db
def test_deleting_an_object_nothing_depends_on_needs_no_confirmation(client_for, planner):
    from inventory.models import Site

    site = Site.objects.create(name="Empty")
    assert client_for(planner).delete(f"/api/v1/sites/{site.pk}/").status_code == 204


@pytest.mark.django_db
def test_analysis_of_a_deleted_cluster_fails_with_the_reason(alpha):  # noqa: F811
    from planner.models import Analysis
    from planner.tasks import run_analysis

    end = dt.datetime(2024, 3, 2, tzinfo=dt.UTC)
    analysis = Analysis.objects.create(
        scope="cluster",
        object_id=alpha.pk,
        scope_label=str(alpha),
        period_start=end - dt.timedelta(days=1),
        period_end=end,
    )
    alpha.delete()
    run_analysis(analysis.pk, str(analysis.run_id))
    analysis.refresh_from_db()
    assert analysis.status == "failed" and analysis.results is None
    assert f"cluster analysed (id {analysis.object_id}) was deleted" in analysis.error


# --- docker-compose publishes gunicorn on loopback only -------------------------------------------


def test_compose_publishes_the_web_port_on_loopback_only():
    services = resolved_config()["services"]
    published = services["web"]["ports"]
    assert published
    for port in published:
        host_ip = port.get("host_ip") if isinstance(port, dict) else port.split(":")[0]
        assert host_ip == "127.0.0.1", port
    assert all("ports" not in service for name, service in services.items() if name != "web")


@pytest.mark.django_db
def test_the_schema_documents_the_delete_confirmation():
    import io

    import yaml
    from django.core.management import call_command

    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    operation = yaml.safe_load(out.getvalue())["paths"]["/api/v1/clusters/{id}/"]["delete"]
    assert "cascade" in [p["name"] for p in operation["parameters"]]
    assert "409" in operation["responses"]

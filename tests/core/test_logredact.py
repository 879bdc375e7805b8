"""Tokens never reach a log: export-link tokens and token parameters are redacted in the
runserver, request and gunicorn access logs (`core.logredact`, platform/gunicorn.conf.py)."""

from __future__ import annotations

import datetime as dt
import logging
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.logredact import RedactTokensFilter, redact

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "Zm9vYmFyLXNlY3JldC10b2tlbi0xMjM0NTY3ODkw"


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

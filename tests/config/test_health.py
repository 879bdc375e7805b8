"""/healthz/: public, and tells only whether the database answers. /healthz/worker/: public,
and tells whether some worker consumed beat's pulse lately (core/jobs/pulse.py)."""

import datetime as dt

import pytest
from django.utils import timezone

from core.jobs.pulse import record_pulse

pytestmark = pytest.mark.django_db


def test_healthz_is_public_and_says_ok(client):
    response = client.get("/healthz/")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_healthz_stays_ok_while_no_worker_consumes(client):
    record_pulse("celery@a", now=timezone.now() - dt.timedelta(hours=1))
    assert client.get("/healthz/").status_code == 200  # the load balancer keeps the web up


def test_worker_check_before_any_pulse(client):
    response = client.get("/healthz/worker/")
    assert response.status_code == 503
    assert response.json() == {"status": "no worker pulse yet", "pulse_age_s": None}
    assert "no-cache" in response["Cache-Control"]


def test_worker_check_with_a_fresh_pulse(client, settings):
    settings.FLEETWISE_WORKER_STALE_AFTER_S = 180
    record_pulse("celery@a", now=timezone.now() - dt.timedelta(seconds=20))
    response = client.get("/healthz/worker/")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and 20 <= body["pulse_age_s"] < 180


def test_worker_check_with_a_stale_pulse(client, settings):
    settings.FLEETWISE_WORKER_STALE_AFTER_S = 180
    record_pulse("celery@a", now=timezone.now() - dt.timedelta(seconds=600))
    response = client.get("/healthz/worker/")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "worker not consuming" and body["pulse_age_s"] >= 600


def test_worker_check_is_read_only(client):
    assert client.post("/healthz/worker/").status_code == 405

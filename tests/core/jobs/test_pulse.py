"""The worker pulse (core/jobs/pulse.py): fresh, stale and never-seen, read by
`/healthz/worker/` and `manage.py worker_health`, and sent by beat. A real worker that stops
consuming: tests/core/jobs/test_broker_restart_mid_task.py."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from core.jobs.models import WorkerPulse
from core.jobs.pulse import NEVER, OK, STALE, pulse_health, record_pulse

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 3, 2, 12, 0, tzinfo=dt.UTC)


def test_no_pulse_yet_is_not_ok_and_has_no_age():
    health = pulse_health(now=NOW, stale_after_s=180)
    assert (health.status, health.age_s, health.ok) == (NEVER, None, False)


def test_the_newest_pulse_of_any_worker_decides():
    record_pulse("celery@a", now=NOW - dt.timedelta(seconds=600))
    record_pulse("celery@b", now=NOW - dt.timedelta(seconds=30))
    assert pulse_health(now=NOW, stale_after_s=180) == pulse_health(now=NOW, stale_after_s=30)
    assert pulse_health(now=NOW, stale_after_s=180).status == OK
    stale = pulse_health(now=NOW, stale_after_s=29)
    assert (stale.status, stale.age_s, stale.ok) == (STALE, 30.0, False)


def test_one_row_per_worker_moves_forward():
    record_pulse("celery@a", now=NOW - dt.timedelta(minutes=5))
    record_pulse("celery@a", now=NOW)
    assert list(WorkerPulse.objects.values_list("hostname", "consumed_at")) == [("celery@a", NOW)]


def test_the_stale_limit_comes_from_the_settings(settings):
    record_pulse("celery@a", now=timezone.now() - dt.timedelta(seconds=100))
    settings.FLEETWISE_WORKER_STALE_AFTER_S = 60
    assert pulse_health().status == STALE
    settings.FLEETWISE_WORKER_STALE_AFTER_S = 180
    assert pulse_health().status == OK


@pytest.mark.parametrize(("age_s", "status"), [(None, NEVER), (500, STALE)], ids=["never", "stale"])
def test_the_command_fails_without_a_recent_pulse(settings, age_s, status):
    settings.FLEETWISE_WORKER_STALE_AFTER_S = 180
    if age_s is not None:
        record_pulse("celery@a", now=timezone.now() - dt.timedelta(seconds=age_s))
    with pytest.raises(CommandError, match=status):
        call_command("worker_health")


def test_the_command_passes_with_a_recent_pulse():
    record_pulse("celery@a")
    out = StringIO()
    call_command("worker_health", stdout=out)
    assert out.getvalue().startswith(OK)


def test_the_pulse_task_records_the_worker_that_ran_it():
    from core.jobs.pulse import worker_pulse

    ran_on = worker_pulse.apply().get()  # eager: the request's host name
    assert WorkerPulse.objects.get().hostname == ran_on
    assert pulse_health().ok


def test_beat_sends_the_pulse_and_it_expires_at_the_next(settings):
    from config.celery_app import app

    entry = settings.CELERY_BEAT_SCHEDULE["worker-pulse"]
    assert entry["task"] == "core.worker_pulse"
    assert entry["schedule"] == settings.FLEETWISE_WORKER_PULSE_S == 60.0
    assert entry["options"]["expires"] == entry["schedule"]
    assert entry["schedule"] < settings.FLEETWISE_WORKER_STALE_AFTER_S
    app.loader.import_default_modules()
    task = app.tasks["core.worker_pulse"]
    assert task.acks_late is False  # not counted by the poison-task ledger, not redelivered

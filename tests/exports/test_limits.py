"""A user may have only a few background exports queued or running at once (issue #28,
Medium 7): beyond ``FLEETWISE_MAX_OPEN_EXPORTS_PER_USER`` the API answers 429 with
``Retry-After`` and a message saying when to try again; others, and finished jobs, are not
counted against them. The retry estimate is the median run of recent exports less the age of
the user's oldest open one (core/jobs/limits.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from core.jobs.status import JobStatus

JOBS = "/api/v1/export-jobs/"
URL = "/api/v1/sites/"

pytestmark = pytest.mark.django_db


def _open_exports(owner, count: int, **fields) -> None:
    from exports.models import ExportJob

    for _ in range(count):
        ExportJob.objects.create(owner=owner, path=URL, status=JobStatus.QUEUED, **fields)


def test_a_third_export_is_refused_with_when_to_retry(client_for, viewer, planner, settings):
    from exports.models import ExportJob

    settings.FLEETWISE_MAX_OPEN_EXPORTS_PER_USER = 2
    client = client_for(viewer)
    assert client.post(JOBS, {"url": URL}, format="json").status_code == 202
    assert client.post(JOBS, {"url": URL}, format="json").status_code == 202

    refused = client.post(JOBS, {"url": URL}, format="json")
    assert refused.status_code == 429
    body = refused.json()
    # No export has finished yet: one minute assumed (core.jobs.limits.DEFAULT_RUN_S = 60 s).
    assert 59 <= body["retry_after_s"] <= 60
    assert refused["Retry-After"] == str(body["retry_after_s"])
    assert (body["limit"], body["open_jobs"]) == (2, 2)
    assert "You already have 2 background exports queued or running" in body["detail"]
    assert "the limit is 2 per user" in body["detail"]
    assert "Try again in about 1 minute" in body["detail"]
    assert ExportJob.objects.filter(owner=viewer).count() == 2

    # Another user is not held back by the viewer's exports.
    assert client_for(planner).post(JOBS, {"url": URL}, format="json").status_code == 202


def test_finished_exports_do_not_count(client_for, viewer, settings):
    from exports.models import ExportJob

    settings.FLEETWISE_MAX_OPEN_EXPORTS_PER_USER = 1
    for status in (JobStatus.SUCCEEDED, JobStatus.FAILED):
        ExportJob.objects.create(owner=viewer, path=URL, status=status)
    client = client_for(viewer)
    assert client.post(JOBS, {"url": URL}, format="json").status_code == 202
    assert client.post(JOBS, {"url": URL}, format="json").status_code == 429
    ExportJob.objects.filter(owner=viewer, status=JobStatus.QUEUED).update(
        status=JobStatus.SUCCEEDED
    )
    assert client.post(JOBS, {"url": URL}, format="json").status_code == 202


def test_retry_after_is_the_typical_run_less_the_oldest_open_jobs_age(client_for, viewer, settings):
    from exports.models import ExportJob

    settings.FLEETWISE_MAX_OPEN_EXPORTS_PER_USER = 1
    now = timezone.now()
    for duration_s in (300.0, 600.0, 900.0):  # the median: 600 s
        ExportJob.objects.create(
            owner=viewer,
            path=URL,
            status=JobStatus.SUCCEEDED,
            duration_s=duration_s,
            finished_at=now,
        )
    _open_exports(viewer, 1, started_at=now - dt.timedelta(seconds=120))

    refused = client_for(viewer).post(JOBS, {"url": URL}, format="json")
    assert refused.status_code == 429
    # 600 s typical − 120 s already running = 480 s (a second or two may pass meanwhile).
    assert 478 <= int(refused["Retry-After"]) <= 480
    assert "Try again in about 8 minutes" in refused.json()["detail"]


def test_a_long_overdue_job_still_gives_a_short_positive_wait(client_for, viewer, settings):
    settings.FLEETWISE_MAX_OPEN_EXPORTS_PER_USER = 1
    _open_exports(viewer, 1, started_at=timezone.now() - dt.timedelta(hours=5))
    refused = client_for(viewer).post(JOBS, {"url": URL}, format="json")
    assert refused.status_code == 429 and refused["Retry-After"] == "10"


def test_zero_means_no_limit(client_for, viewer, settings):
    settings.FLEETWISE_MAX_OPEN_EXPORTS_PER_USER = 0
    _open_exports(viewer, 5)
    assert client_for(viewer).post(JOBS, {"url": URL}, format="json").status_code == 202


def test_the_schema_documents_the_429():
    from tests.support.openapi import validated_schema

    operation = validated_schema()["paths"][JOBS]["post"]
    assert "429" in operation["responses"]

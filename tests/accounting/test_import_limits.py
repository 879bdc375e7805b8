"""A user may have only a few usage imports queued or running at once (issue #28, Medium 7):
beyond ``FLEETWISE_MAX_OPEN_IMPORTS_PER_USER`` the API and the upload page answer 429 with
``Retry-After`` and when to try again, and nothing of the file is stored."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from accounting.models import ImportJob
from core.jobs.status import JobStatus
from tests.support.alpha_usage import sacct_text

pytestmark = pytest.mark.django_db

API = "/api/v1/usage-records/import/"
PAGE = "/usage/import/"


def _upload() -> SimpleUploadedFile:
    return SimpleUploadedFile("sacct.txt", sacct_text().encode(), content_type="text/plain")


def _fields(cluster) -> dict:
    return {"cluster": cluster.pk, "kind": "sacct", "timezone": "UTC", "file": _upload()}


def _in_flight(user, cluster, *statuses: str) -> None:
    for status in statuses:
        ImportJob.objects.create(kind="sacct", cluster=cluster, created_by=user, status=status)


def test_the_api_refuses_a_third_import_in_flight(client_for, planner, alpha, settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.FLEETWISE_MAX_OPEN_IMPORTS_PER_USER = 2
    _in_flight(planner, alpha, JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.FAILED)

    refused = client_for(planner).post(API, _fields(alpha), format="multipart")
    assert refused.status_code == 429
    body = refused.json()
    assert refused["Retry-After"] == str(body["retry_after_s"]) and body["retry_after_s"] >= 10
    assert "You already have 2 usage imports queued or running" in body["detail"]
    assert "Try again in about" in body["detail"]
    assert ImportJob.objects.count() == 3  # nothing stored for the refused upload
    assert not (tmp_path / "media").exists()

    ImportJob.objects.filter(status=JobStatus.RUNNING).update(status=JobStatus.SUCCEEDED)
    accepted = client_for(planner).post(API, _fields(alpha), format="multipart")
    assert accepted.status_code == 202, accepted.content


def test_the_upload_page_says_when_to_retry(client, planner, fleet_admin, alpha, settings):
    settings.FLEETWISE_MAX_OPEN_IMPORTS_PER_USER = 1
    _in_flight(planner, alpha, JobStatus.QUEUED)
    client.force_login(planner)

    response = client.post(PAGE, _fields(alpha))
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 10
    html = response.content.decode().replace("&#x27;", "'")
    assert "You already have 1 usage import queued or running" in html
    assert "Try again in about" in html
    assert ImportJob.objects.count() == 1

    # The limit is per user: an administrator's own upload goes through.
    client.force_login(fleet_admin)
    assert client.post(PAGE, _fields(alpha)).status_code == 302

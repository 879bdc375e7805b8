"""Uploaded and generated files are not kept for ever (issue #28, Medium 7).

The beat task ``core.apply_retention`` deletes the files of jobs finished more than
``FLEETWISE_FILE_RETENTION_DAYS`` (30) ago, a failed job's after
``FLEETWISE_FAILED_FILE_RETENTION_DAYS`` (7), files no row refers to, and clusters deleted
longer ago than ``FLEETWISE_DELETED_RETENTION_DAYS``; the rows stay and the pages say "file
expired" (410 for a download, a message on the import page) instead of failing. The health
page shows an administrator the bytes stored and the disk's free space.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.utils import timezone

from accounting.models import ImportJob
from core.jobs.status import JobStatus
from core.retention.models import ExpiredFile
from core.retention.tasks import apply_retention_task
from exports.models import ExportJob

pytestmark = pytest.mark.django_db

DAY = dt.timedelta(days=1)


@pytest.fixture
def media(settings, tmp_path) -> Path:
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.FLEETWISE_FILE_RETENTION_DAYS = 30
    settings.FLEETWISE_FAILED_FILE_RETENTION_DAYS = 7
    settings.FLEETWISE_DELETED_RETENTION_DAYS = 30
    return tmp_path / "media"


def _import(cluster, status: str, finished_days_ago: float, body: bytes = b"x" * 100):
    job = ImportJob.objects.create(kind="csv", cluster=cluster, source_name="u.csv", status=status)
    job.file.save("usage.csv", ContentFile(body))
    finished = timezone.now() - finished_days_ago * DAY
    ImportJob.objects.filter(pk=job.pk).update(finished_at=finished)
    return job


def _export(owner, finished_days_ago: float) -> ExportJob:
    job = ExportJob.objects.create(owner=owner, path="/api/v1/sites/", status="succeeded")
    job.file.save("export.xlsx", ContentFile(b"PK" * 50))
    ExportJob.objects.filter(pk=job.pk).update(finished_at=timezone.now() - finished_days_ago * DAY)
    return job


def _report(generated_days_ago: float):
    from reports.models import Report
    from tests.support.builders import fleet_monthly_schedule

    start = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
    report = Report.objects.create(
        schedule=fleet_monthly_schedule(),
        period_start=start,
        period_end=start + 31 * DAY,
        status="delivered",
        numbers={},
    )
    report.csv_file.save("report.csv", ContentFile(b"a,b\n1,2\n"))
    Report.objects.filter(pk=report.pk).update(
        generated_at=timezone.now() - generated_days_ago * DAY
    )
    return report


def test_files_past_their_period_are_deleted_and_the_rows_say_so(
    media, alpha, viewer, django_capture_on_commit_callbacks
):
    old = _import(alpha, JobStatus.SUCCEEDED, 31)
    failed = _import(alpha, JobStatus.FAILED, 8)
    recent = _import(alpha, JobStatus.SUCCEEDED, 10)
    recent_failure = _import(alpha, JobStatus.FAILED, 6)
    running = _import(alpha, JobStatus.RUNNING, 60)  # a worker may be reading it
    export = _export(viewer, 31)
    report = _report(31)
    gone = [Path(job.file.path) for job in (old, failed, export)] + [Path(report.csv_file.path)]
    kept = [Path(job.file.path) for job in (recent, recent_failure, running)]

    with django_capture_on_commit_callbacks(execute=True):  # files go once the rows commit
        done = apply_retention_task()

    assert done["expired_files"] == {
        "accounting.ImportJob": 2,
        "exports.ExportJob": 1,
        "reports.Report": 1,
    }
    assert not any(path.exists() for path in gone)
    assert all(path.exists() for path in kept)
    old.refresh_from_db()
    assert not old.file and old.status == JobStatus.SUCCEEDED  # the row and results stay
    expired = ExpiredFile.objects.get(model_label="accounting.ImportJob", object_id=old.pk)
    assert (expired.size_bytes, expired.kept_days) == (100, 30)
    assert ExpiredFile.objects.get(object_id=failed.pk, field="file").kept_days == 7
    # A second run finds nothing more to do.
    assert apply_retention_task()["expired_files"] == {}


def test_pages_and_the_api_say_the_file_expired(
    media, alpha, viewer, planner, client_for, import_text
):
    job = _import(alpha, JobStatus.FAILED, 8)
    job.created_by = planner
    job.save(update_fields=["created_by"])
    export = _export(viewer, 31)
    report = _report(31)
    apply_retention_task()

    retry = client_for(planner).post(f"/api/v1/import-jobs/{job.pk}/retry/")
    assert retry.status_code == 400
    assert "The file was deleted on" in str(retry.json()) and "Upload it again" in str(retry.json())
    page = client_for(planner).get(f"/usage/import/{job.pk}/").content.decode()
    assert "file expired: The file was deleted on" in page and "kept 7 days" in page

    download = client_for(viewer).get(f"/api/v1/export-jobs/{export.pk}/download/")
    assert download.status_code == 410 and "kept 30 days" in download.json()["detail"]

    page = client_for(viewer).get(f"/reports/{report.pk}/download/csv/")
    assert page.status_code == 410 and "still shows its figures" in page.content.decode()
    api = client_for(viewer).get(f"/api/v1/reports/{report.pk}/download/csv/")
    assert api.status_code == 410 and "The file was deleted on" in api.json()["detail"]


def test_files_no_row_refers_to_are_deleted_after_the_period(media, alpha):
    referenced = _import(alpha, JobStatus.SUCCEEDED, 1)
    orphan = media / "usage-imports" / "2024" / "01" / "orphan.csv"
    young_orphan = media / "exports" / "2024" / "01" / "young.xlsx"
    elsewhere = media / "not-ours" / "keep.txt"
    forty_days_ago = (timezone.now() - 40 * DAY).timestamp()
    for path in (orphan, young_orphan, elsewhere):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"data")
    for path in (orphan, elsewhere, Path(referenced.file.path)):
        os.utime(path, (forty_days_ago, forty_days_ago))

    assert apply_retention_task()["orphaned_files"] == 1
    assert not orphan.exists()
    assert young_orphan.exists() and elsewhere.exists()
    assert Path(referenced.file.path).exists()  # its job finished a day ago


def test_clusters_deleted_long_enough_ago_are_purged(media, alpha, import_text):
    from accounting.models import UsageRecord
    from inventory import deletion
    from inventory.models import Cluster
    from tests.support.alpha_usage import sacct_text

    import_text(alpha, sacct_text())
    deletion.delete(alpha, confirm=deletion.CONFIRM_USAGE)
    assert apply_retention_task()["purged_inventory"] == {}
    Cluster.all_objects.filter(pk=alpha.pk).update(deleted_at=timezone.now() - 31 * DAY)

    assert apply_retention_task()["purged_inventory"] == {"clusters": 1}
    assert not Cluster.all_objects.filter(pk=alpha.pk).exists()
    assert not UsageRecord._base_manager.exists()


def test_beat_runs_it_hourly_with_documented_defaults():
    from django.conf import settings

    from config.celery_app import app

    entry = settings.CELERY_BEAT_SCHEDULE["apply-retention"]
    assert (entry["task"], entry["schedule"]) == ("core.apply_retention", 3600.0)
    assert settings.TASK_KINDS["core.apply_retention"] == "periodic"
    app.loader.import_default_modules()
    assert "core.apply_retention" in app.tasks
    defaults = (
        settings.FLEETWISE_FILE_RETENTION_DAYS,
        settings.FLEETWISE_FAILED_FILE_RETENTION_DAYS,
        settings.FLEETWISE_DELETED_RETENTION_DAYS,
    )
    assert defaults == (30.0, 7.0, 30.0)


def test_the_health_page_shows_an_administrator_the_disk(
    media, alpha, viewer, fleet_admin, client_for
):
    from django.core.cache import cache

    cache.clear()
    _import(alpha, JobStatus.SUCCEEDED, 1, body=b"u" * 1000)
    _export(viewer, 1)  # 100 bytes

    body = client_for(fleet_admin).get("/healthz/").json()
    disk = body["disk"]
    assert body["status"] == "ok"
    assert disk["by_folder_bytes"]["usage-imports"] == 1000
    assert disk["by_folder_bytes"]["exports"] == 100
    assert disk["files_bytes"] == 1100
    assert 0 < disk["free_bytes"] <= disk["total_bytes"]
    for user in (None, viewer):
        assert client_for(user).get("/healthz/").json() == {"status": "ok"}

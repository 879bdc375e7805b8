"""A usage import whose database connection is terminated mid-file is retried, not failed,
and lands exactly once (issue #28, Medium 5).

The drop reaches the import as psycopg's own error from its raw ``COPY`` (not Django's
``OperationalError``): the retry rule (core.jobs.transient) must recognise it. A real Celery
worker (in a thread) runs the import; the fault injection setting ``IMPORT_CHUNK_DELAY_S``
holds it after its first chunk while another connection calls ``pg_terminate_backend`` on the
import's own backend. PostgreSQL only: SQLite has no server connection to terminate.
"""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.utils import timezone

from accounting import services
from accounting.models import ImportJob, UsageRecord
from core.jobs.status import JobStatus
from tests.support.builders import alpha_cluster
from tests.support.polling import wait_for_status, wait_until
from tests.support.workers import usage_csv

LINES = 1_500
CHUNK_LINES = 500  # three chunks: the connection dies between the first and the second
PAUSE_S = 3.0

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("terminates a PostgreSQL backend (run with DATABASE_URL=postgres://...)")


def _import_backend() -> list[int]:
    """The backend inside the import's transaction: it has written rows and sits idle in its
    transaction while the import pauses (the heartbeat and progress connections autocommit)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%%' "
            "AND backend_xid IS NOT NULL"
        )
        return [pid for (pid,) in cursor.fetchall()]


def _terminate(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        return bool(cursor.fetchone()[0])


def test_import_survives_a_terminated_connection_and_lands_once(
    postgres, celery_worker, settings, monkeypatch, tmp_path
):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.IMPORT_CHUNK_DELAY_S = PAUSE_S
    monkeypatch.setattr(services, "CHUNK_LINES", CHUNK_LINES)
    cluster = alpha_cluster()
    upload = SimpleUploadedFile("usage.csv", usage_csv(cluster.name, LINES))
    job = services.create_import_job(kind="csv", cluster=cluster, upload=upload)
    run_id = job.run_id

    def first_chunk_written() -> list[int]:
        row = ImportJob.objects.get(pk=job.pk)
        return _import_backend() if row.status == JobStatus.RUNNING and row.lines_read else []

    (pid,) = wait_until(first_chunk_written, timeout_s=60, what="the import's first chunk")
    terminated_at = timezone.now()
    assert _terminate(pid)

    done = wait_for_status(lambda: ImportJob.objects.get(pk=job.pk), "the import", timeout_s=120)

    assert (done.status, done.error) == (JobStatus.SUCCEEDED, "")  # retried, not given up on
    assert done.run_id == run_id
    assert done.started_at > terminated_at  # a second run of the same job did the work
    assert (done.records_created, done.records_updated) == (LINES, 0)
    assert UsageRecord.objects.filter(cluster=cluster).count() == LINES
    assert UsageRecord.objects.values("record_key").distinct().count() == LINES
    assert set(UsageRecord.objects.values_list("import_job_id", flat=True)) == {job.pk}

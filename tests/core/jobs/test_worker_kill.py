"""A worker killed (SIGKILL) in the middle of an analysis, a usage import and a report: the job
is delivered again and completes exactly once, and a half-done import is never visible.

Real `celery worker` processes (solo pool: the SIGKILL takes the task with it, as a lost
machine would) on a queue private to this test run. The first worker is slowed by a fault
injection setting so the kill lands mid-task; a fresh worker then finishes the job, brought
back either by core.jobs.recovery (the beat task, called here every half second) or, on Redis
only, by the broker's own redelivery after its visibility timeout. "Exactly once" is checked
in the database: one set of parts/records/reports, and one succeeded task result of the step
that writes the outcome (each guarded step reports in its result whether it did the work).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from accounting.models import ImportJob, UsageRecord
from config.celery_app import app
from core.jobs.recovery import recover_stalled
from core.jobs.status import JobStatus
from planner.models import Analysis, AnalysisPart
from tests.support.builders import mailbox
from tests.support.workers import WORKER_SETTINGS, database_url, usage_csv, wait_until

ROOT = Path(__file__).resolve().parents[3]
QUEUE = f"killtest-{os.getpid()}"
ON_REDIS = settings.CELERY_BROKER_URL.startswith("redis")
STALLED_AFTER_S = 3.0
# Redis variant: the fresh worker hands out messages unacknowledged for this long again.
SHORT_VISIBILITY_S = 4

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


class Workers:
    """Worker subprocesses of one test; every one still running is killed at the end."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": WORKER_SETTINGS,
            "DATABASE_URL": database_url(),
            "FLEETWISE_CELERY_QUEUE": QUEUE,
            "DJANGO_MEDIA_ROOT": settings.MEDIA_ROOT,
            "FLEETWISE_TEST_EMAIL_DIR": str(self.tmp_path / "emails"),
            "FLEETWISE_HEARTBEAT_DIR": settings.FLEETWISE_HEARTBEAT_DIR,
            "FLEETWISE_HEARTBEAT_INTERVAL_S": "0.5",
            **extra,
        }

    def start(self, name: str, **extra: str) -> tuple[subprocess.Popen, Path]:
        log_path = self.tmp_path / f"{name}.log"
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "config",
                    "worker",
                    "--pool",
                    "solo",
                    "--queues",
                    QUEUE,
                    "--hostname",
                    f"{name}-{os.getpid()}@%h",
                    "--loglevel",
                    "INFO",
                    "--without-heartbeat",
                    "--without-gossip",
                    "--without-mingle",
                ],
                cwd=ROOT,
                env=self.env(**extra),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs.append((proc, log_path))
        return proc, log_path

    def close(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


@pytest.fixture
def workers(tmp_path, settings):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.FLEETWISE_HEARTBEAT_DIR = str(tmp_path / "heartbeats")
    settings.FLEETWISE_STALLED_AFTER_S = STALLED_AFTER_S
    (tmp_path / "emails").mkdir()
    previous_queue = app.conf.task_default_queue
    app.conf.task_default_queue = QUEUE  # what this process sends goes to the test's workers
    pool = Workers(tmp_path)
    try:
        yield pool
    finally:
        pool.close()
        app.conf.task_default_queue = previous_queue
        # Nothing left to purge is fine.
        with app.connection_for_write() as conn, contextlib.suppress(Exception):
            conn.default_channel.queue_purge(QUEUE)


def kill_when_running(proc: subprocess.Popen, log_path: Path, task_name: str, ready) -> None:
    """SIGKILL the worker once it runs ``task_name`` and ``ready()`` holds."""
    wait_until(
        lambda: f"Task {task_name}[" in log_path.read_text() and ready(),
        90,
        f"{task_name} on the doomed worker:\n{log_path.read_text()[-3000:]}",
    )
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def task_results(name: str) -> list[dict]:
    from django_celery_results.models import TaskResult

    rows = TaskResult.objects.filter(task_name=name, status="SUCCESS")
    return [json.loads(row.result) for row in rows]


MECHANISMS = [
    "recovery",
    pytest.param(
        "redelivery",
        marks=pytest.mark.skipif(not ON_REDIS, reason="only Redis redelivers unacked messages"),
    ),
]


# -- analysis -------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_analysis_killed_mid_part_completes_once(workers, mechanism):
    from inventory.models import Cluster
    from inventory.services import load_demo_fleet
    from planner import services

    load_demo_fleet()
    clusters = sorted(Cluster.objects.values_list("pk", flat=True))
    assert len(clusters) >= 3
    doomed, log = workers.start("doomed", FLEETWISE_ANALYSIS_PART_DELAY_S="120")
    analysis = services.start_analysis(scope="fleet")
    run_id = str(analysis.run_id)

    def mid_part() -> bool:
        row = Analysis.objects.get(pk=analysis.pk)
        return row.status == "running" and row.heartbeat_at is not None

    kill_when_running(doomed, log, "planner.analysis_part", mid_part)
    killed = Analysis.objects.get(pk=analysis.pk)
    assert killed.status == "running" and killed.parts_done == 0
    assert not AnalysisPart.objects.filter(analysis=analysis).exists()

    extra = {"FLEETWISE_BROKER_VISIBILITY_TIMEOUT_S": str(SHORT_VISIBILITY_S)}
    workers.start("fresh", **(extra if mechanism == "redelivery" else {}))
    done = wait_until(
        lambda: Analysis.objects.filter(pk=analysis.pk, status="succeeded").first(),
        120,
        "the analysis to succeed",
        recover=mechanism == "recovery",
    )
    time.sleep(2 * STALLED_AFTER_S)  # room for a duplicate to show up, if there were one
    if mechanism == "recovery":
        recover_stalled()  # a finished job is never re-sent
        time.sleep(1)

    done.refresh_from_db()
    assert str(done.run_id) == run_id  # the same run finished, not a restarted one
    assert (done.status, done.progress, done.parts_done) == ("succeeded", 100, len(clusters))
    parts = AnalysisPart.objects.filter(analysis=done)
    assert sorted(parts.values_list("cluster_id", flat=True)) == clusters
    assert set(parts.values_list("run_id", flat=True)) == {done.run_id}
    finals = [r for r in task_results("planner.finalize_analysis") if r.get("status")]
    assert finals == [{"analysis_id": done.pk, "status": "succeeded"}]
    # One result, of this run: its pools are the fleet's pools, each counted once.
    from inventory.models import Pool

    pool_names = [row["pool"] for row in done.results["pools"]]
    assert sorted(pool_names) == sorted(Pool.objects.values_list("name", flat=True))


# -- usage import ---------------------------------------------------------------------------

IMPORT_LINES = 120_000  # three parser chunks of 50,000 lines


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_import_killed_mid_file_shows_nothing_then_completes_once(workers, mechanism):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from accounting import services
    from inventory.models import Cluster
    from inventory.services import load_demo_fleet

    load_demo_fleet()
    cluster = Cluster.objects.get(name="train-hetero")
    doomed, log = workers.start("doomed", FLEETWISE_IMPORT_CHUNK_DELAY_S="120")
    upload = SimpleUploadedFile("usage.csv", usage_csv(cluster.name, IMPORT_LINES))
    job = services.create_import_job(kind="csv", cluster=cluster, upload=upload)

    def first_chunk_written() -> bool:
        row = ImportJob.objects.get(pk=job.pk)
        if row.status != JobStatus.RUNNING:
            return False
        if connection.vendor == "postgresql":
            # Progress comes over a side connection once the first chunk is written.
            return row.lines_read > 0
        # SQLite: no progress until commit; the first chunk takes well under these seconds.
        return (timezone.now() - row.started_at).total_seconds() > 8

    kill_when_running(doomed, log, "accounting.run_import", first_chunk_written)
    # Written but never committed: nothing of the file is visible.
    assert UsageRecord.objects.count() == 0
    assert ImportJob.objects.get(pk=job.pk).status == JobStatus.RUNNING

    extra = {"FLEETWISE_BROKER_VISIBILITY_TIMEOUT_S": str(SHORT_VISIBILITY_S)}
    workers.start("fresh", **(extra if mechanism == "redelivery" else {}))
    seen_counts: set[int] = set()

    def finished():
        seen_counts.add(UsageRecord.objects.count())  # all or nothing, at every look
        return ImportJob.objects.filter(pk=job.pk, status=JobStatus.SUCCEEDED).first()

    done = wait_until(finished, 180, "the import to succeed", recover=mechanism == "recovery")
    time.sleep(2 * STALLED_AFTER_S)
    if mechanism == "recovery":
        recover_stalled()
        time.sleep(1)

    done.refresh_from_db()
    assert seen_counts <= {0, IMPORT_LINES}
    assert str(done.run_id) == str(job.run_id)
    assert (done.records_created, done.records_updated) == (IMPORT_LINES, 0)
    assert UsageRecord.objects.count() == IMPORT_LINES
    assert UsageRecord.objects.values("record_key").distinct().count() == IMPORT_LINES
    assert set(UsageRecord.objects.values_list("import_job_id", flat=True)) == {job.pk}
    # The worker stores the task's result after the task has marked the job: under load, later.
    succeeded = wait_until(
        lambda: [r for r in task_results("accounting.run_import") if r.get("status")],
        60,
        "the import task's stored result",
    )
    assert len(succeeded) == 1 and succeeded[0]["records_created"] == IMPORT_LINES


# -- report ---------------------------------------------------------------------------------


def test_report_killed_mid_generation_makes_one_report_and_one_email(workers, tmp_path):
    from inventory.services import load_demo_fleet
    from reports import periods
    from reports import services as reports
    from reports.models import Report, ReportSchedule, ReportStatus

    load_demo_fleet()
    mailbox("finance@example.com")  # a fleet report goes only to an account that sees it all
    schedule = reports.save_schedule(
        ReportSchedule(
            name="Fleet monthly",
            frequency="monthly",
            timezone="UTC",
            template="cost_chargeback",
            recipient_addresses=["finance@example.com"],
            formats=["html_email", "xlsx", "csv"],
        )
    )
    march = periods.Period(
        dt.datetime(2024, 3, 1, tzinfo=dt.UTC), dt.datetime(2024, 4, 1, tzinfo=dt.UTC)
    )
    doomed, log = workers.start("doomed", FLEETWISE_REPORT_GENERATE_DELAY_S="120")
    report, queued = reports.run_now(schedule, march)
    assert queued

    def claimed() -> bool:
        return Report.objects.filter(pk=report.pk, status=ReportStatus.GENERATING).exists()

    kill_when_running(doomed, log, "reports.generate_report", claimed)
    assert Report.objects.get(pk=report.pk).status == ReportStatus.GENERATING

    # Redelivery alone cannot finish it: the dead worker's claim is fresh for 30 minutes.
    # The recovery sees the claim's heartbeat stop and gives it back.
    workers.start("fresh")
    emails = tmp_path / "emails"
    done = wait_until(
        lambda: Report.objects.filter(pk=report.pk, status=ReportStatus.DELIVERED).first(),
        120,
        "the report to be delivered",
        recover=True,
    )
    time.sleep(2 * STALLED_AFTER_S)
    recover_stalled()
    time.sleep(1)

    done.refresh_from_db()
    assert Report.objects.count() == 1
    assert done.status == ReportStatus.DELIVERED and done.delivery_attempts == 1
    assert done.recipients == ["finance@example.com"]
    assert len(list(emails.iterdir())) == 1
    message = next(emails.iterdir()).read_text()
    assert "finance@example.com" in message
    generated = [r for r in task_results("reports.generate_report") if r["generated"]]
    assert len(generated) == 1

"""Poison-task quarantine and worker limits.

A task whose worker process dies while running it (SIGKILL here, as the OOM killer would)
is delivered again, and after FLEETWISE_TASK_MAX_WORKER_DEATHS deaths it is not run any
more: its job is failed with the reason, its message acknowledged, and the next task runs.
The end-to-end test uses a real prefork worker (the production pool) and kills its child.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from celery.exceptions import TimeLimitExceeded
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from accounting.models import ImportJob
from config.celery_app import app
from core.jobs import quarantine
from core.jobs.models import TaskDelivery
from core.jobs.status import JobStatus
from tests.support.workers import WORKER_SETTINGS, database_url, usage_csv, wait_until

ROOT = Path(__file__).resolve().parents[3]
QUEUE = f"poisontest-{os.getpid()}"
REASON = "worker died while running this task twice: quarantined"


@pytest.fixture
def import_job(demo_fleet, settings, tmp_path):
    from accounting import services
    from inventory.models import Cluster

    settings.FLEETWISE_HEARTBEAT_DIR = str(tmp_path / "heartbeats")  # SQLite beats: files

    cluster = Cluster.objects.get(name="train-hetero")
    upload = SimpleUploadedFile("usage.csv", usage_csv(cluster.name, 10))
    return services.create_import_job(kind="csv", cluster=cluster, upload=upload, queue=False)


def as_worker_runs_it(task, *args):
    """Call the task the way Celery's tracer does: with a worker's request pushed."""
    task.push_request(args=args, called_directly=False, is_eager=False, id="t-1")
    try:
        return task(*args)
    finally:
        task.pop_request()


# -- the ledger, without a worker ---------------------------------------------------------------


@pytest.mark.django_db
def test_a_finished_delivery_leaves_no_count(import_job):
    from accounting.tasks import run_import

    result = as_worker_runs_it(run_import, import_job.pk, str(import_job.run_id))
    assert result["status"] == "succeeded"
    assert not TaskDelivery.objects.exists()


@pytest.mark.django_db
def test_two_deaths_quarantine_the_third_delivery(import_job):
    from accounting.tasks import run_import

    args = (import_job.pk, str(import_job.run_id))
    ImportJob.objects.filter(pk=import_job.pk).update(status=JobStatus.RUNNING)
    # Two deliveries started and never ended: their worker processes died.
    assert quarantine.start_delivery("accounting.run_import", args, {})[1] == 0
    assert quarantine.start_delivery("accounting.run_import", args, {})[1] == 1
    result = as_worker_runs_it(run_import, *args)
    assert result == {"quarantined": REASON}
    job = ImportJob.objects.get(pk=import_job.pk)
    assert (job.status, job.error, job.records_created) == ("failed", REASON, 0)
    assert job.finished_at is not None
    assert not TaskDelivery.objects.exists()


@pytest.mark.django_db
def test_one_death_is_forgiven_and_the_count_is_per_task_and_arguments(import_job):
    from accounting.tasks import run_import

    args = (import_job.pk, str(import_job.run_id))
    quarantine.start_delivery("accounting.run_import", args, {})
    quarantine.start_delivery("accounting.run_import", (import_job.pk, "another-run"), {})
    quarantine.start_delivery("planner.compute_plan", args, {})
    assert as_worker_runs_it(run_import, *args)["status"] == "succeeded"
    assert TaskDelivery.objects.count() == 2  # the other keys are not this task's


@pytest.mark.django_db
def test_recovery_forgets_deaths_of_tasks_that_never_came_back():
    from django.utils import timezone

    from core.jobs.recovery import recover_stalled

    quarantine.start_delivery("reports.tick", [], {})
    quarantine.start_delivery("reports.generate_report", [7], {})
    TaskDelivery.objects.filter(task_name="reports.tick").update(
        last_started_at=timezone.now() - dt.timedelta(days=8)
    )
    recover_stalled()
    assert list(TaskDelivery.objects.values_list("task_name", flat=True)) == [
        "reports.generate_report"
    ]


@pytest.mark.django_db
def test_a_hard_time_limit_is_recorded_on_the_job(import_job):
    from accounting.tasks import run_import

    args = [import_job.pk, str(import_job.run_id)]
    ImportJob.objects.filter(pk=import_job.pk).update(status=JobStatus.RUNNING)
    quarantine._record_hard_time_limit(
        sender=run_import, exception=TimeLimitExceeded(3600), args=args, kwargs={}
    )
    job = ImportJob.objects.get(pk=import_job.pk)
    assert (job.status, job.error) == ("failed", "stopped at the hard time limit of 3600 s")


def test_time_limits_per_task_kind_and_the_memory_limit_per_child():
    import accounting.tasks  # noqa: F401 - registers the tasks
    import planner.tasks  # noqa: F401

    plan, part = app.tasks["planner.compute_plan"], app.tasks["planner.analysis_part"]
    assert (plan.time_limit, plan.soft_time_limit) == (600, 540)
    assert (part.time_limit, part.soft_time_limit) == (900, 810)
    assert app.tasks["accounting.run_import"].time_limit == 3600
    assert app.conf.worker_max_memory_per_child == 1024 * 1024
    assert settings.FLEETWISE_WORKER_MEMORY_LIMIT_MB == 4096


# -- a real prefork worker whose child is killed ------------------------------------------------


def test_the_solo_pool_leaves_its_own_process_uncapped(settings):
    """The solo pool sends worker_process_init in the worker's own process: no cap there (in
    the tests that process also starts Chromium, which maps far more than it uses)."""
    from config.celery_app import limit_child_memory

    settings.FLEETWISE_WORKER_MEMORY_LIMIT_MB = 64
    before = resource.getrlimit(resource.RLIMIT_AS)
    limit_child_memory(sender="solo@test")
    assert resource.getrlimit(resource.RLIMIT_AS) == before


def children_of(pid: int) -> list[int]:
    """Child processes of ``pid``, whichever of its threads forked them (billiard's pool
    replaces a lost child from a supervisor thread)."""
    children: list[int] = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            children += [int(child) for child in listing.read_text().split()]
    return children


def address_space_limit(pid: int) -> int:
    """The soft RLIMIT_AS of a process, from /proc (bytes)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max address space"):
            return int(line.split()[3])
    raise AssertionError(f"no address space limit listed for {pid}")


def deliveries(task_name: str) -> int:
    row = TaskDelivery.objects.filter(task_name=task_name).first()
    return row.unfinished if row else 0


@pytest.fixture
def prefork_worker(tmp_path, settings):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    previous_queue = app.conf.task_default_queue
    app.conf.task_default_queue = QUEUE
    log_path = tmp_path / "worker.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": WORKER_SETTINGS,
        "DATABASE_URL": database_url(),
        "FLEETWISE_CELERY_QUEUE": QUEUE,
        "DJANGO_MEDIA_ROOT": settings.MEDIA_ROOT,
        "FLEETWISE_HEARTBEAT_DIR": str(tmp_path / "heartbeats"),
        "FLEETWISE_IMPORT_CHUNK_DELAY_S": "120",  # the import runs until it is killed
    }
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "prefork"]
    command += ["--concurrency", "1", "--queues", QUEUE, "--loglevel", "INFO"]
    command += ["--hostname", f"poison-{os.getpid()}@%h", "--without-heartbeat"]
    command += ["--without-gossip", "--without-mingle"]
    with log_path.open("w") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc, log_path
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for child in children_of(proc.pid):
            os.kill(child, signal.SIGKILL)
        app.conf.task_default_queue = previous_queue
        # Nothing left to purge is fine.
        with app.connection_for_write() as conn, contextlib.suppress(Exception):
            conn.default_channel.queue_purge(QUEUE)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_task_that_kills_its_worker_twice_is_quarantined_and_the_next_task_runs(
    prefork_worker,
):
    from accounting import services
    from inventory.models import Cluster
    from inventory.services import load_demo_fleet
    from planner import services as planner_services
    from planner.models import Analysis

    worker, log_path = prefork_worker
    load_demo_fleet()
    cluster = Cluster.objects.get(name="train-hetero")
    upload = SimpleUploadedFile("usage.csv", usage_csv(cluster.name, 10))
    job = services.create_import_job(kind="csv", cluster=cluster, upload=upload)

    def log_tail() -> str:
        return log_path.read_text()[-3000:]

    for death in (1, 2):
        wait_until(
            lambda death=death: deliveries("accounting.run_import") == death,
            90,
            f"delivery {death} of the import:\n{log_tail()}",
        )
        for child in children_of(worker.pid):  # each child runs under the memory limit
            assert address_space_limit(child) == settings.FLEETWISE_WORKER_MEMORY_LIMIT_MB * 2**20
        for child in children_of(worker.pid):
            os.kill(child, signal.SIGKILL)  # as the OOM killer would
    failed = wait_until(
        lambda: ImportJob.objects.filter(pk=job.pk, status="failed").first(),
        90,
        f"the import to be quarantined:\n{log_tail()}",
    )
    assert failed.error == REASON
    assert not TaskDelivery.objects.exists()

    # The worker goes on: the next task (an analysis) runs to the end on it.
    analysis = planner_services.start_analysis(scope="fleet")
    done = wait_until(
        lambda: Analysis.objects.filter(pk=analysis.pk, status="succeeded").first(),
        120,
        f"the next task to run:\n{log_tail()}",
    )
    assert done.finished_at > failed.finished_at - dt.timedelta(seconds=1)
    assert worker.poll() is None
    assert ImportJob.objects.get(pk=job.pk).status == "failed"  # never run again

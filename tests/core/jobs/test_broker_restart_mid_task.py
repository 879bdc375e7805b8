"""Redis (the broker) crashes and comes back while a real worker runs a task: the worker
outlives it, finishes the task, and runs what is queued after (issue #28); and a worker that
is alive but consumes nothing fails the worker health check.

Without config/celery_redis.py the worker exits here with "Unrecoverable error:
AttributeError: 'NoneType' object has no attribute 'hostname'" (docs/decisions/0006). The
worker is a real `celery worker` process (prefork, as in production) on a redis-server this
test starts, kills and starts again; its settings are production's Redis branch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from config.celery_app import app
from core.jobs import lifecycle
from core.jobs.pulse import STALE, pulse_health, worker_pulse
from inventory.models import Pool, PoolTotalsCheck
from planner.models import Analysis
from tests.support.polling import wait_until
from tests.support.redis_server import RedisServer, redis_server
from tests.support.workers import WORKER_SETTINGS, broker_at, database_url

ROOT = Path(__file__).resolve().parents[3]
QUEUE = f"broker-restart-{os.getpid()}"
PART_DELAY_S = 5  # the analysis part the worker holds while Redis is down
WAIT_S = 90  # every wait below; each usually takes a few seconds (more when all workers are busy)
# Two children, one task in flight: the consumer still waits on Redis for a second (BRPOP) when
# Redis drops, which is what left kombu's channel half-closed (one child: no crash).
CONCURRENCY = 2

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


class Worker:
    """One `celery worker` subprocess consuming QUEUE on the test's Redis; its log on disk."""

    def __init__(self, broker_url: str, log_path: Path, **env: str) -> None:
        self.log_path = log_path
        self.name = f"outage-{os.getpid()}@%h"
        with log_path.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO"]
                + ["--concurrency", str(CONCURRENCY), "--queues", QUEUE, "--hostname", self.name]
                + ["--without-mingle"],
                cwd=ROOT,
                env=self.env(broker_url, **env),
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    @staticmethod
    def env(broker_url: str, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": WORKER_SETTINGS,
            "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": broker_url,
            "FLEETWISE_CELERY_QUEUE": QUEUE,
            "DJANGO_MEDIA_ROOT": settings.MEDIA_ROOT,
            "FLEETWISE_HEARTBEAT_DIR": settings.FLEETWISE_HEARTBEAT_DIR,
            **extra,
        }

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_for_log(self, text: str, count: int = 1) -> None:
        wait_until(
            lambda: self.log().count(text) >= count or self.proc.poll() is not None,
            timeout_s=WAIT_S,
            what=f"{text!r} ×{count} in the worker's log",
            interval_s=0.2,
        )
        assert self.proc.poll() is None, f"the worker exited:\n{self.log()[-4000:]}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # in case a test left it stopped
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture
def broker(tmp_path, settings) -> Iterator[RedisServer]:
    """A private Redis; this process publishes to it, on the test's own queue."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    previous_queue = app.conf.task_default_queue
    app.conf.task_default_queue = QUEUE
    try:
        with redis_server(tmp_path / "redis.log") as server, broker_at(server.url()):
            yield server
    finally:
        app.conf.task_default_queue = previous_queue


@pytest.fixture
def start_worker(broker, tmp_path) -> Iterator:
    workers: list[Worker] = []

    def start(**env: str) -> Worker:
        worker = Worker(broker.url(), tmp_path / f"worker-{len(workers)}.log", **env)
        workers.append(worker)
        worker.wait_for_log(" ready.")
        return worker

    yield start
    for worker in workers:
        worker.stop()


def wait_for_job(model, pk: int, status: str = "succeeded"):
    return wait_until(
        lambda: model.objects.filter(pk=pk, status=status).first(),
        timeout_s=WAIT_S,
        what=f"{model.__name__} {pk} to be {status}",
        interval_s=0.2,
    )


def test_the_worker_outlives_a_broker_restart_mid_task(broker, start_worker, demo_fleet):
    from planner import services

    worker = start_worker(FLEETWISE_ANALYSIS_PART_DELAY_S=str(PART_DELAY_S))
    pool = Pool.objects.get(name="mixed-a100-h100")
    analysis = services.start_analysis(scope="pool", object_id=pool.pk)
    # Received: the message is the worker's unacknowledged one while the part sleeps.
    worker.wait_for_log("Task planner.analysis_part[")

    broker.stop()
    worker.wait_for_log("Connection to broker lost")
    broker.start()
    worker.wait_for_log("Connected to", count=2)  # the consumer reconnected

    check = lifecycle.queue(PoolTotalsCheck(pool=pool))
    assert wait_for_job(PoolTotalsCheck, check.pk).result["cards"] == 2000
    # The task that was running when Redis went away finished, and its analysis too.
    assert wait_for_job(Analysis, analysis.pk).parts_done == 1
    assert worker.proc.poll() is None
    assert "Unrecoverable error" not in worker.log()


def test_a_worker_that_stops_consuming_fails_the_health_check(
    broker, start_worker, client, settings
):
    from core.jobs.models import WorkerPulse

    worker = start_worker()
    worker_pulse.delay()
    wait_until(lambda: pulse_health().ok, timeout_s=WAIT_S, what="the first pulse")
    assert WorkerPulse.objects.get().hostname.startswith(f"outage-{os.getpid()}@")
    assert client.get("/healthz/worker/").status_code == 200

    worker.proc.send_signal(signal.SIGSTOP)  # alive, but takes nothing from the queue
    try:
        stopped_at = WorkerPulse.objects.get().consumed_at
        settings.FLEETWISE_WORKER_STALE_AFTER_S = 2.0
        worker_pulse.delay()  # beat's next pulse waits in the queue
        health = wait_until(
            pulse_health, lambda h: h.status == STALE, timeout_s=WAIT_S, what="a stale pulse"
        )
        # Stale means older than 2 s; the age is reported to 0.1 s, so 2.04 s reads 2.0.
        assert worker.proc.poll() is None and health.age_s >= 2.0
        answer = client.get("/healthz/worker/")
        assert (answer.status_code, answer.json()["status"]) == (503, STALE)
    finally:
        worker.proc.send_signal(signal.SIGCONT)

    # Consuming again: the waiting pulse runs and the check recovers.
    settings.FLEETWISE_WORKER_STALE_AFTER_S = 180.0
    wait_until(
        lambda: WorkerPulse.objects.filter(consumed_at__gt=stopped_at).exists(),
        timeout_s=WAIT_S,
        what="the waiting pulse to run",
    )
    assert client.get("/healthz/worker/").status_code == 200

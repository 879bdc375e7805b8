"""The abstract durable job every job model extends, the worker's delivery ledger and pulses."""

from __future__ import annotations

import uuid

from django.db import models

from core.jobs.status import JobStatus


class DurableJob(models.Model):
    """A unit of background work with one current run.

    A run is identified by ``run_id``; a task writes only while its run id is current
    (core.jobs.lifecycle), so a late or redelivered task of a superseded run never overwrites
    a newer outcome. A failed run keeps the earlier result fields and says why in ``error``.
    """

    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0, help_text="0 to 100.")
    run_id = models.UUIDField(default=uuid.uuid4, editable=False)
    error = models.TextField(blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life of a worker running it (recovery)."
    )

    class Meta:
        abstract = True


class TaskDelivery(models.Model):
    """One job task's deliveries that started and never finished: each is a worker that died
    while running it (SIGKILL, the OOM killer, a hard time limit). Deleted when a delivery
    finishes; at ``FLEETWISE_TASK_MAX_WORKER_DEATHS`` the task is quarantined."""

    key = models.CharField(max_length=64, unique=True, help_text="sha256 of task name and args")
    task_name = models.CharField(max_length=200)
    args = models.CharField(max_length=500, blank=True)
    unfinished = models.PositiveIntegerField(default=0)
    last_started_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "task deliveries"

    def __str__(self) -> str:
        return f"{self.task_name}{self.args}: {self.unfinished} unfinished"


class WorkerPulse(models.Model):
    """When a worker last ran the pulse task that beat sends (core.jobs.pulse): a worker that
    is alive but no longer takes tasks from the queue stops refreshing its row."""

    hostname = models.CharField(max_length=255, unique=True, help_text="Celery's node name.")
    consumed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hostname} at {self.consumed_at:%Y-%m-%d %H:%M:%S}"

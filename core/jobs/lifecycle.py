"""The one lifecycle of every durable job (core.jobs.models.DurableJob).

queue (a new run id) -> mark_running -> progress / heartbeat -> finish | fail. Every write
after ``queue`` is guarded by the run id: once a newer run superseded a run, or the job was
deleted, the old run's writes change nothing and return False. ``fail`` leaves the result
fields of the last successful run as they are and records why in ``error``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.db import models, transaction
from django.db.models import QuerySet
from django.utils import timezone

from core.jobs.dispatch import send_or_defer
from core.jobs.status import OPEN, JobStatus

MAX_ERROR_CHARS = 4000  # a traceback's last line is enough; pages show it whole


def _has(model: type[models.Model], name: str) -> bool:
    return any(f.name == name for f in model._meta.concrete_fields)


def current_run(model: type[models.Model], pk: int, run_id: Any) -> QuerySet:
    """The job's row while ``run_id`` is its current run; empty once superseded or deleted."""
    return model.objects.filter(pk=pk, run_id=run_id)


def reset_run(job: models.Model) -> None:
    """Give the (unsaved) job a fresh queued run; earlier results stay until it succeeds."""
    job.run_id = uuid.uuid4()
    job.status = JobStatus.QUEUED
    job.progress = 0
    job.error = ""
    job.queued_at = timezone.now()
    job.started_at = job.finished_at = job.heartbeat_at = None


def queue(job: models.Model, *, new_run: bool = True) -> models.Model:
    """Save the job queued (under a new run id unless ``new_run`` is False, e.g. just created)
    and send its task after commit; a broker outage leaves it queued and marked deferred."""
    if new_run:
        reset_run(job)
    elif job.queued_at is None:
        job.queued_at = timezone.now()
    job.save()
    send_or_defer(job)
    return job


def mark_running(model: type[models.Model], pk: int, run_id: Any, **extra: Any) -> bool:
    """A worker took the run (again: a redelivery of a running run is fine). False when the
    run is finished, superseded or gone."""
    now = timezone.now()
    changes = {"status": JobStatus.RUNNING, "started_at": now, "progress": 5, **extra}
    if _has(model, "heartbeat_at"):
        changes["heartbeat_at"] = now
    rows = current_run(model, pk, run_id).filter(status__in=OPEN)
    return bool(rows.update(**changes))


def progress(model: type[models.Model], pk: int, run_id: Any, percent: float, **extra) -> bool:
    """Move the bar (0..99; 100 is finish's) while the run is running: a redelivered part of
    a finished run never moves it back."""
    value = max(0, min(99, int(percent)))
    rows = current_run(model, pk, run_id).filter(status=JobStatus.RUNNING)
    return bool(rows.update(progress=value, **extra))


def heartbeat(model: type[models.Model], pk: int, run_id: Any) -> bool:
    """One sign of life of the running run (core.jobs.recovery keeps beating in a thread)."""
    rows = current_run(model, pk, run_id).filter(status=JobStatus.RUNNING)
    return bool(rows.update(heartbeat_at=timezone.now()))


def finish(
    model: type[models.Model],
    pk: int,
    run_id: Any,
    apply: Callable[[models.Model], None] | None = None,
    **results: Any,
) -> bool:
    """Store the run's results and mark it succeeded, under a row lock; ``apply`` may set more
    fields on the locked row. False (nothing written) when the run is no longer current."""
    now = timezone.now()
    with transaction.atomic():
        job = current_run(model, pk, run_id).select_for_update().first()
        if job is None or job.status == JobStatus.SUCCEEDED:
            return False  # superseded, deleted, or a redelivered copy of a finished run
        for name, value in results.items():
            setattr(job, name, value)
        job.status = JobStatus.SUCCEEDED
        job.progress = 100
        job.error = ""
        job.finished_at = now
        if _has(model, "succeeded_at"):
            job.succeeded_at = now
        job.duration_s = (now - (job.started_at or now)).total_seconds()
        if apply is not None:
            apply(job)
        job.save()
    return True


def fail(model: type[models.Model], pk: int, run_id: Any, reason: str, **extra: Any) -> bool:
    """Record why the run failed; the earlier result fields are kept as they were."""
    rows = current_run(model, pk, run_id).exclude(status=JobStatus.SUCCEEDED)
    changes = {"status": JobStatus.FAILED, "error": reason[:MAX_ERROR_CHARS]}
    return bool(rows.update(**changes, finished_at=timezone.now(), **extra))

"""Live Slurm source tasks: one pull by id and run id, and the beat step that queues the due
ones (config.settings: CELERY_BEAT_SCHEDULE "slurmrestd-pulls", every minute)."""

from __future__ import annotations

import logging

from celery import shared_task

from core.jobs.recovery import DURABLE_TASK_OPTIONS, heartbeat
from core.jobs.transient import raise_if_transient

logger = logging.getLogger(__name__)

PULL_TASK = "accounting.pull_slurmrestd"
DUE_TASK = "accounting.pull_due_slurmrestd"


@shared_task(name=PULL_TASK, **DURABLE_TASK_OPTIONS)
def pull_slurmrestd(source_id: int, run_id: str) -> dict:
    """Pull one source's jobs since its cursor and upsert them as usage records."""
    from django.utils import timezone

    from accounting.slurmrestd import services
    from accounting.slurmrestd_source import SlurmrestdSource

    try:
        # While it beats, core.jobs.recovery leaves the pull alone; killed, it is re-sent.
        with heartbeat(SlurmrestdSource, source_id, run_id):
            return services.run_pull(source_id, run_id)
    except Exception as exc:
        raise_if_transient(exc)  # Celery retries; the rolled-back run upserts the same rows
        logger.exception("slurmrestd pull of source %s run %s failed", source_id, run_id)
        source = SlurmrestdSource.objects.filter(pk=source_id, run_id=run_id).first()
        if source is not None:
            services.record_failure(source, run_id, f"{type(exc).__name__}: {exc}", timezone.now())
        return {"failed": str(exc)}


@shared_task(name=DUE_TASK, ignore_result=True)
def pull_due_slurmrestd() -> dict:
    """Beat, every minute: queue a pull of each enabled source whose next attempt has come
    (its interval after a success, its back-off after a failure)."""
    from accounting.slurmrestd import services

    return {"queued": services.queue_due_pulls()}

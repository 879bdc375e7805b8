"""Kubernetes source tasks: one fetch by id and run id, and the beat step that queues the due
ones (config.settings: CELERY_BEAT_SCHEDULE "kubernetes-fetches", every minute)."""

from __future__ import annotations

import logging

from celery import shared_task

from core.jobs.recovery import DURABLE_TASK_OPTIONS, heartbeat
from core.jobs.transient import raise_if_transient

logger = logging.getLogger(__name__)

FETCH_TASK = "telemetry.fetch_kubernetes"
DUE_TASK = "telemetry.fetch_due_kubernetes"


@shared_task(name=FETCH_TASK, **DURABLE_TASK_OPTIONS)
def fetch_kubernetes(source_id: int, run_id: str) -> dict:
    """Read one source's window of pod GPU requests and replace its usage records."""
    from django.utils import timezone

    from telemetry.kubernetes import services
    from telemetry.kubernetes.models import KubernetesSource

    try:
        with heartbeat(KubernetesSource, source_id, run_id):
            return services.run_fetch(source_id, run_id)
    except Exception as exc:
        raise_if_transient(exc)  # Celery retries; the rolled-back run writes the same rows
        logger.exception("Kubernetes fetch of source %s run %s failed", source_id, run_id)
        source = KubernetesSource.objects.filter(pk=source_id, run_id=run_id).first()
        if source is not None:
            services.record_failure(source, run_id, f"{type(exc).__name__}: {exc}", timezone.now())
        return {"failed": str(exc)}


@shared_task(name=DUE_TASK, ignore_result=True)
def fetch_due_kubernetes() -> dict:
    """Beat, every minute: queue a fetch of each enabled source whose next attempt has come."""
    from telemetry.kubernetes import services

    return {"queued": services.queue_due_fetches()}

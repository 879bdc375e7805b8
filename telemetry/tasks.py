"""Telemetry tasks: a fetch by id and run id (on demand), and the daily schedule."""

from __future__ import annotations

import datetime as dt
import logging

from celery import shared_task

from core.jobs.recovery import DURABLE_TASK_OPTIONS, TRANSIENT, heartbeat

# Registered with the worker from here (the app's tasks module is the one autodiscovered).
from telemetry.kubernetes.tasks import fetch_due_kubernetes, fetch_kubernetes  # noqa: F401

logger = logging.getLogger(__name__)


@shared_task(name="telemetry.run_fetch", **DURABLE_TASK_OPTIONS)
def run_fetch(fetch_id: int, run_id: str) -> dict:
    """Query (or parse) one fetch's telemetry and replace its days' rollups."""
    from telemetry import jobs, services
    from telemetry.models import TelemetryFetch

    try:
        # While it beats, core.jobs.recovery leaves the fetch alone; killed, it is re-sent.
        with heartbeat(TelemetryFetch, fetch_id, run_id):
            return services.run_fetch(fetch_id, run_id)
    except TRANSIENT:
        raise  # Celery retries; a rerun replaces the same days
    except Exception as exc:
        logger.exception("telemetry fetch %s run %s failed", fetch_id, run_id)
        jobs.fail(fetch_id, run_id, f"{type(exc).__name__}: {exc}")
        return {"failed": str(exc)}


@shared_task(name="telemetry.fetch_yesterday", ignore_result=True)
def fetch_yesterday() -> dict:
    """Beat, daily: each enabled source fetches the last two local days (yesterday complete,
    the day before refreshed for late samples)."""
    from django.utils import timezone

    from telemetry import services
    from telemetry.models import PrometheusSource

    today = timezone.localdate()
    queued = 0
    for source in PrometheusSource.objects.filter(enabled=True).select_related("cluster"):
        services.queue_fetch(
            source.cluster, today - dt.timedelta(days=2), today - dt.timedelta(days=1)
        )
        queued += 1
    return {"queued": queued}

"""Running live sources (core.live_sources): which are due, queueing a read, recording a
failed one with its back-off, and the two Celery tasks of a source kind.

One read of a source is one run of its row (core.jobs): the beat step queues each enabled
source whose next attempt has come, the read task runs the kind's body under a heartbeat,
and a read that fails keeps what was stored, says why and waits longer (doubling, capped).
Used by the slurmrestd pulls (accounting.slurmrestd) and the Kubernetes fetches
(telemetry.kubernetes).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from celery import shared_task
from django.apps import apps
from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.module_loading import import_string

from core.jobs import lifecycle
from core.jobs.dispatch import send_or_defer
from core.jobs.recovery import DURABLE_TASK_OPTIONS, heartbeat
from core.jobs.status import JobStatus
from core.jobs.transient import raise_if_transient
from core.live_sources import LiveSource
from inventory.models import hidden_cluster_ids

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 6 * 3600
# The fields a new run sets (a read never saves the settings an admin may be editing).
RUN_FIELDS = (
    "run_id", "status", "progress", "error", "queued_at", "started_at", "finished_at",
    "heartbeat_at",
)  # fmt: skip


def backoff_s(failures: int, interval_s: int, max_backoff_s: int = MAX_BACKOFF_S) -> int:
    """Seconds to wait after ``failures`` failed reads in a row: the interval, doubled per
    further failure, capped at ``max_backoff_s`` (or the interval, when that is longer)."""
    if failures <= 0:
        return interval_s
    cap = max(interval_s, max_backoff_s)
    doublings = min(failures - 1, 32)  # 2**32 intervals is past any cap
    return int(min(cap, interval_s * 2**doublings))


def due_sources(model: type[LiveSource], now: dt.datetime) -> QuerySet:
    """Enabled sources whose next attempt has come and that hold no live run (a run queued
    longer than the stall threshold ago is taken for lost and queued again)."""
    lost_before = now - dt.timedelta(seconds=settings.FLEETWISE_STALLED_AFTER_S)
    return (
        model.objects.filter(enabled=True)
        .exclude(cluster_id__in=hidden_cluster_ids())  # a deleted cluster is not read
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .exclude(status=JobStatus.RUNNING)
        .exclude(status=JobStatus.QUEUED, queued_at__gt=lost_before)
    )


def queue_run(source: LiveSource) -> bool:
    """Give the source a new run and send its task after commit; False when another caller
    queued it first (the row's run changed since it was read)."""
    previous = source.run_id
    lifecycle.reset_run(source)
    changes = {name: getattr(source, name) for name in RUN_FIELDS}
    if not type(source).objects.filter(pk=source.pk, run_id=previous).update(**changes):
        return False
    send_or_defer(source)
    return True


def queue_due(model: type[LiveSource], now: dt.datetime | None = None) -> int:
    """The beat's step: queue every due source of a kind; how many were queued."""
    now = now or timezone.now()
    return sum(queue_run(source) for source in due_sources(model, now))


def record_failure(source: LiveSource, run_id: Any, reason: str, now: dt.datetime) -> bool:
    """The run failed: why, when, one more failure in a row and the next try after back-off;
    the cursor and the stored records stay as they were."""
    failures = source.consecutive_failures + 1
    wait = dt.timedelta(seconds=backoff_s(failures, source.interval_s))
    return lifecycle.fail(
        type(source), source.pk, run_id, reason, last_error=reason[: lifecycle.MAX_ERROR_CHARS],
        last_failure_at=now, consecutive_failures=failures, next_attempt_at=now + wait,
    )  # fmt: skip


def live_source_tasks(
    *, read_task: str, due_task: str, model: str, run: str, what: str
) -> tuple[Callable[..., dict], Callable[[], dict]]:
    """A source kind's two tasks: one read by id and run id (``run``, a dotted path to the
    body), and the beat step that queues the due ones. ``model`` is "app_label.Model"."""

    @shared_task(name=read_task, **DURABLE_TASK_OPTIONS)
    def read(source_id: int, run_id: str) -> dict:
        source_model = apps.get_model(model)
        try:
            # While it beats, core.jobs.recovery leaves the read alone; killed, it is re-sent.
            with heartbeat(source_model, source_id, run_id):
                return import_string(run)(source_id, run_id)
        except Exception as exc:
            raise_if_transient(exc)  # Celery retries; the rolled-back run writes the same rows
            logger.exception("%s of source %s run %s failed", what, source_id, run_id)
            source = source_model.objects.filter(pk=source_id, run_id=run_id).first()
            if source is not None:
                record_failure(source, run_id, f"{type(exc).__name__}: {exc}", timezone.now())
            return {"failed": str(exc)}

    @shared_task(name=due_task, ignore_result=True)
    def queue_due_reads() -> dict:
        """Beat, every minute: queue a read of each enabled source whose next attempt has
        come (its interval after a success, its back-off after a failure)."""
        return {"queued": queue_due(apps.get_model(model))}

    return read, queue_due_reads

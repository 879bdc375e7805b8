"""Sending worker jobs so that a broker outage never loses one or hangs a request.

Every job the app queues is a database row of a registered kind (core.jobs.registry) in
status "queued"; its task takes ``(pk, run_id)`` (``(pk,)`` for a kind without run ids).
``send_or_defer`` sends that task once the transaction commits. When the broker cannot be
reached (short timeouts, see CELERY_BROKER_* settings), the row keeps its queued status and
gets ``WORKERS_UNAVAILABLE`` as its note in ``error``, which the API and pages show as is.
``dispatch_pending()`` sends such rows again: after the next successful send, from the
``config.dispatch_pending`` beat task every minute, and from ``manage.py dispatch_pending``.
"""

from __future__ import annotations

import importlib
import logging

from celery import current_app, shared_task
from django.db import models, transaction
from kombu.exceptions import OperationalError as BrokerError

from core.jobs.registry import JobKind, kind_of, kinds

logger = logging.getLogger(__name__)

WORKERS_UNAVAILABLE = (
    "Queued, workers unavailable: the task broker cannot be reached right now. "
    "The request is saved and starts as soon as the broker is back."
)
# One quick retry: a request answers within seconds even when the broker host is gone.
PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5}
# What a broker outage raises: kombu wraps the transport's errors; sockets may leak through.
UNREACHABLE = (BrokerError, ConnectionError, TimeoutError, OSError)


class _Deferrable(dict):
    """Model label -> name of the task that runs one of its jobs (read from the registry)."""

    def __missing__(self, label: str) -> str:
        for kind in kinds():
            if kind.label == label:
                return kind.task
        raise KeyError(label)

    def __iter__(self):
        return iter([kind.label for kind in kinds()])


DEFERRABLE = _Deferrable()


def send_task(name: str, *args) -> None:
    """Publish one task by name (one quick retry); raises one of UNREACHABLE on an outage."""
    importlib.import_module(f"{name.split('.')[0]}.tasks")  # registers the task by name
    current_app.tasks[name].apply_async(args, retry=True, retry_policy=PUBLISH_RETRY_POLICY)


def _kind(job: models.Model) -> JobKind:
    kind = kind_of(type(job))
    if kind is None:
        raise ValueError(f"{type(job).__name__} is not a registered job kind (core.jobs.registry)")
    return kind


def _mark_deferred(kind: JobKind, pk: int, run_id) -> None:
    rows = kind.model.objects.filter(pk=pk)
    if kind.guarded:
        rows = rows.filter(run_id=run_id)
    rows.update(error=WORKERS_UNAVAILABLE)


def send_now(job: models.Model) -> bool:
    """Send the job's task now; on a broker outage mark it deferred. True when sent."""
    kind = _kind(job)
    run_id = getattr(job, "run_id", None)
    try:
        send_task(kind.task, *kind.args(job.pk, run_id))
    except UNREACHABLE as exc:
        logger.warning("broker unreachable, %s %s deferred: %s", kind.label, job.pk, exc)
        _mark_deferred(kind, job.pk, run_id)
        job.error = WORKERS_UNAVAILABLE
        return False
    if job.error == WORKERS_UNAVAILABLE:
        job.error = ""
    # The broker answers: anything deferred earlier can go too.
    dispatch_pending()
    return True


def send_or_defer(job: models.Model) -> None:
    """Send the job's task after the current transaction commits (never before: the worker
    must find the row), or mark the job deferred when the broker cannot be reached."""
    _kind(job)  # fail now, in the request, for a model that is not a job kind
    transaction.on_commit(lambda: send_now(job))


def pending_count() -> int:
    return sum(kind.model.objects.filter(error=WORKERS_UNAVAILABLE).count() for kind in kinds())


def _send_waiting(kind: JobKind, limit: int) -> tuple[int, bool]:
    """Send the kind's deferred jobs: (how many were sent, whether the broker answered)."""
    sent = 0
    fields = ("pk", "run_id") if kind.guarded else ("pk",)
    waiting = kind.model.objects.filter(error=WORKERS_UNAVAILABLE).order_by("pk")
    for values in list(waiting.values_list(*fields)[:limit]):
        pk, run_id = values[0], (values[1] if kind.guarded else None)
        # Claim the row first so two dispatchers never send the same run twice.
        claimed = kind.model.objects.filter(pk=pk, error=WORKERS_UNAVAILABLE)
        if kind.guarded:
            claimed = claimed.filter(run_id=run_id)
        if not claimed.update(error=""):
            continue
        try:
            send_task(kind.task, *kind.args(pk, run_id))
        except UNREACHABLE as exc:
            _mark_deferred(kind, pk, run_id)
            logger.warning("broker still unreachable: %s", exc)
            return sent, False
        sent += 1
    return sent, True


def dispatch_pending(limit: int = 500) -> dict[str, int]:
    """Send every deferred job; stops at the first broker failure. Counts sent and left."""
    sent = 0
    for kind in kinds():
        kind_sent, reachable = _send_waiting(kind, limit)
        sent += kind_sent
        if not reachable:
            return {"sent": sent, "waiting": pending_count()}
    if sent:
        logger.info("dispatched %s deferred job(s)", sent)
    # Nothing was waiting (the usual case) costs one query per job kind, no counts.
    return {"sent": sent, "waiting": pending_count() if sent else 0}


# The task keeps its historical name: beat schedules stored in the database refer to it.
@shared_task(name="config.dispatch_pending", ignore_result=True)
def dispatch_pending_task() -> dict[str, int]:
    """Beat runs this every minute: deferred jobs go out once the broker is back."""
    return dispatch_pending()

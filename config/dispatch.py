"""Sending worker jobs so that a broker outage never loses one or hangs a request.

Every job the app queues (an analysis run, a plan computation, a usage import) is a database
row in status "queued" with a `run_id`; its task takes `(pk, run_id)`. `send_or_defer` sends
that task once the transaction commits. When the broker cannot be reached (short timeouts,
see CELERY_BROKER_* settings), the row keeps status "queued" and gets
`WORKERS_UNAVAILABLE` as its note in `error`, which the API and pages show as is.
`dispatch_pending()` sends such rows again: after the next successful send, from the
`config.dispatch_pending` beat task every minute, and from `manage.py dispatch_pending`.
"""

from __future__ import annotations

import importlib
import logging

from celery import current_app, shared_task
from django.apps import apps
from django.db import models, transaction
from kombu.exceptions import OperationalError as BrokerError

logger = logging.getLogger(__name__)

WORKERS_UNAVAILABLE = (
    "Queued, workers unavailable: the task broker cannot be reached right now. "
    "The request is saved and starts as soon as the broker is back."
)
# Model (app_label.ModelName) -> name of the task that takes (pk, run_id).
DEFERRABLE = {
    "planner.Analysis": "planner.run_analysis",
    "planner.Plan": "planner.compute_plan",
    "accounting.ImportJob": "accounting.run_import",
    "accounting.RollupRefresh": "accounting.run_rollup_refresh",
}
# One quick retry: a request answers within seconds even when the broker host is gone.
PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5}
# What a broker outage raises: kombu wraps the transport's errors; sockets may leak through.
UNREACHABLE = (BrokerError, ConnectionError, TimeoutError, OSError)


def _label(model: type[models.Model]) -> str:
    return f"{model._meta.app_label}.{model.__name__}"


def _send(label: str, pk: int, run_id: str) -> None:
    importlib.import_module(f"{label.split('.')[0]}.tasks")  # registers the task by name
    task = current_app.tasks[DEFERRABLE[label]]
    task.apply_async((pk, run_id), retry=True, retry_policy=PUBLISH_RETRY_POLICY)


def send_now(job: models.Model) -> bool:
    """Send the job's task now; on a broker outage mark it deferred. True when sent."""
    label = _label(type(job))
    pk, run_id = job.pk, str(job.run_id)
    try:
        _send(label, pk, run_id)
    except UNREACHABLE as exc:
        logger.warning("broker unreachable, %s %s deferred: %s", label, pk, exc)
        type(job).objects.filter(pk=pk, run_id=run_id).update(error=WORKERS_UNAVAILABLE)
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
    if _label(type(job)) not in DEFERRABLE:
        raise ValueError(f"{_label(type(job))} has no task in config.dispatch.DEFERRABLE")
    transaction.on_commit(lambda: send_now(job))


def pending_count() -> int:
    return sum(
        apps.get_model(label).objects.filter(error=WORKERS_UNAVAILABLE).count()
        for label in DEFERRABLE
    )


def dispatch_pending(limit: int = 500) -> dict[str, int]:
    """Send every deferred job; stops at the first broker failure. Counts sent and left."""
    sent = 0
    for label in DEFERRABLE:
        model = apps.get_model(label)
        waiting = model.objects.filter(error=WORKERS_UNAVAILABLE).order_by("pk")
        for pk, run_id in list(waiting.values_list("pk", "run_id")[:limit]):
            # Claim the row first so two dispatchers never send the same run twice.
            claimed = model.objects.filter(pk=pk, run_id=run_id, error=WORKERS_UNAVAILABLE)
            if not claimed.update(error=""):
                continue
            try:
                _send(label, pk, str(run_id))
            except UNREACHABLE as exc:
                model.objects.filter(pk=pk, run_id=run_id, error="").update(
                    error=WORKERS_UNAVAILABLE
                )
                logger.warning("broker still unreachable: %s", exc)
                return {"sent": sent, "waiting": pending_count()}
            sent += 1
    if sent:
        logger.info("dispatched %s deferred job(s)", sent)
    # Nothing was waiting (the usual case) costs one query per job type, no counts.
    return {"sent": sent, "waiting": pending_count() if sent else 0}


@shared_task(name="config.dispatch_pending", ignore_result=True)
def dispatch_pending_task() -> dict[str, int]:
    """Beat runs this every minute: deferred jobs go out once the broker is back."""
    return dispatch_pending()

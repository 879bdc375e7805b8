"""Poison-task quarantine: a task that kills its worker is not delivered forever.

Tasks ack late and are rejected back to the queue when their worker process is lost
(``reject_on_worker_lost``); core.jobs.recovery re-sends jobs whose heartbeat stopped. Both are
right for a machine that died, and wrong for a task that itself kills the process (the OOM
killer, a native crash): it would take down worker after worker, and the queue behind it.

So every delivery of a late-acking task is counted in the database (:class:`TaskDelivery`,
keyed by task name and arguments, the same on both brokers and across re-sends): +1 when it
starts, the row deleted when it ends in any way Python sees (success, error, retry). A
count that survives is a worker that died mid-task. A delivery that finds
``FLEETWISE_TASK_MAX_WORKER_DEATHS`` such deaths does not run: its job row is marked failed
with the reason and the message is acknowledged, so the next task runs.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from celery import Task, signals
from celery.exceptions import TimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, IntegrityError
from django.utils import timezone

from core.jobs.registry import kind_of_task

logger = logging.getLogger(__name__)

# A death older than this with no delivery since is forgotten (a message that never came back).
LEDGER_MAX_AGE = dt.timedelta(days=7)


def delivery_key(task_name: str, args: tuple | list, kwargs: dict) -> str:
    payload = json.dumps([task_name, list(args), kwargs], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def times_text(count: int) -> str:
    return {1: "once", 2: "twice"}.get(count, f"{count} times")


def start_delivery(task_name: str, args: tuple | list, kwargs: dict) -> tuple[str, int]:
    """Count this delivery as started; returns its key and the deliveries that died before."""
    from django.db.models import F

    from core.jobs.models import TaskDelivery

    key = delivery_key(task_name, args, kwargs)
    now = timezone.now()
    rows = TaskDelivery.objects.filter(key=key)
    if not rows.update(unfinished=F("unfinished") + 1, last_started_at=now):
        try:
            TaskDelivery.objects.create(
                key=key,
                task_name=task_name,
                args=json.dumps(list(args), default=str)[:500],
                unfinished=1,
                last_started_at=now,
            )
        except IntegrityError:  # a duplicate delivery created it meanwhile
            rows.update(unfinished=F("unfinished") + 1, last_started_at=now)
    unfinished = rows.values_list("unfinished", flat=True).first() or 1
    return key, unfinished - 1


def finish_delivery(key: str) -> None:
    from core.jobs.models import TaskDelivery

    TaskDelivery.objects.filter(key=key).delete()


def prune_ledger(now: dt.datetime, max_age: dt.timedelta = LEDGER_MAX_AGE) -> int:
    """Forget deaths of tasks never delivered again (the recover_stalled beat task calls this)."""
    from core.jobs.models import TaskDelivery

    return TaskDelivery.objects.filter(last_started_at__lt=now - max_age).delete()[0]


def record_failure(task_name: str, args: tuple | list, reason: str) -> bool:
    """Mark the task's job failed with ``reason`` (if it is still open); True when one was."""
    kind = kind_of_task(task_name)
    if kind is None or not args:
        return False
    model = kind.model
    rows = model.objects.filter(pk=args[0], status__in=kind.open_statuses)
    if kind.guarded and len(args) > 1:
        rows = rows.filter(run_id=args[1])
    fields = {field.name for field in model._meta.fields}
    changes: dict[str, Any] = {"status": "failed", "error": reason}
    if "finished_at" in fields:
        changes["finished_at"] = timezone.now()
    if "claimed_at" in fields:
        changes["claimed_at"] = None
    return bool(rows.update(**changes))


def _best_effort(step: Callable[[], Any], what: str) -> Any:
    """Bookkeeping must never break the task it watches: a database error is logged."""
    try:
        return step()
    except DatabaseError:
        logger.warning("task delivery ledger: %s failed", what, exc_info=True)
        return None


class QuarantineTask(Task):
    """The base of every task (``Celery(task_cls=...)``): late-acking tasks run under the
    delivery ledger; direct and eager calls run as they are."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = self.request
        if request.called_directly:
            return super().__call__(*args, **kwargs)
        # From here on as Celery's tracer calls a task: its request is already pushed.
        if not self.acks_late or request.is_eager:
            return self.run(*args, **kwargs)
        started = _best_effort(lambda: start_delivery(self.name, args, kwargs), "start")
        if started is None:
            return self.run(*args, **kwargs)
        key, deaths = started
        limit = settings.FLEETWISE_TASK_MAX_WORKER_DEATHS
        if limit and deaths >= limit:
            return self._quarantine(key, args, deaths)
        try:
            return self.run(*args, **kwargs)
        finally:
            _best_effort(lambda: finish_delivery(key), "finish")

    def _quarantine(self, key: str, args: tuple, deaths: int) -> dict[str, str]:
        reason = f"worker died while running this task {times_text(deaths)}: quarantined"
        recorded = _best_effort(lambda: record_failure(self.name, args, reason), "record")
        logger.error("%s%s: %s (job marked failed: %s)", self.name, list(args), reason, recorded)
        _best_effort(lambda: finish_delivery(key), "finish")
        return {"quarantined": reason}


@signals.task_failure.connect
def _record_hard_time_limit(sender=None, exception=None, args=None, kwargs=None, **_) -> None:
    """A task stopped at its hard time limit (its process killed): say so on its job row."""
    if not isinstance(exception, TimeLimitExceeded) or sender is None:
        return
    name, args = sender.name, list(args or [])
    reason = f"stopped at the hard time limit of {sender.time_limit or exception} s"
    _best_effort(lambda: record_failure(name, args, reason), "record time limit")
    _best_effort(lambda: finish_delivery(delivery_key(name, args, kwargs or {})), "finish")

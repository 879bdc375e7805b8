"""Worker pulse: whether some worker still takes tasks from the queue.

A worker process can be alive and answer pings while it consumes nothing (a consumer stuck on
a dead broker socket, a stopped process, a reconnect that never finished). So the check goes
through the queue itself: beat sends ``core.worker_pulse`` every ``FLEETWISE_WORKER_PULSE_S``;
the worker that runs it records when (:class:`~core.jobs.models.WorkerPulse`, one row per
node name). The newest pulse older than ``FLEETWISE_WORKER_STALE_AFTER_S`` means no worker
consumed for that long (or beat is down: either way queued jobs wait). ``/healthz/worker/``
and ``manage.py worker_health`` report it (docs/deployment.md, "When a worker dies").
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from celery import shared_task
from django.conf import settings
from django.utils import timezone

OK = "ok"
STALE = "worker not consuming"
NEVER = "no worker pulse yet"


@dataclass(frozen=True)
class PulseHealth:
    """The worker check's answer: ``status`` is OK, STALE or NEVER."""

    status: str
    age_s: float | None  # seconds since the newest pulse; None before the first

    @property
    def ok(self) -> bool:
        return self.status == OK


def record_pulse(hostname: str, now: dt.datetime | None = None) -> None:
    """The worker ``hostname`` consumed a pulse at ``now``."""
    from core.jobs.models import WorkerPulse

    consumed_at = now or timezone.now()
    WorkerPulse.objects.update_or_create(hostname=hostname, defaults={"consumed_at": consumed_at})


def pulse_health(now: dt.datetime | None = None, stale_after_s: float | None = None) -> PulseHealth:
    """Whether some worker consumed a pulse within ``stale_after_s`` (default: the setting)."""
    from core.jobs.models import WorkerPulse

    limit_s = settings.FLEETWISE_WORKER_STALE_AFTER_S if stale_after_s is None else stale_after_s
    newest = WorkerPulse.objects.order_by("-consumed_at").values_list("consumed_at", flat=True)
    last = newest.first()
    if last is None:
        return PulseHealth(NEVER, None)
    age_s = max(0.0, ((now or timezone.now()) - last).total_seconds())
    return PulseHealth(OK if age_s <= limit_s else STALE, round(age_s, 1))


# Early ack: a pulse is worth nothing once late, so it is neither redelivered nor counted in
# the poison-task ledger (core.jobs.quarantine counts late-acking tasks only).
@shared_task(name="core.worker_pulse", bind=True, ignore_result=True, acks_late=False)
def worker_pulse(self) -> str:
    """Beat sends this; the worker that runs it records that it consumes."""
    hostname = self.request.hostname or "unknown"
    record_pulse(hostname)
    return hostname

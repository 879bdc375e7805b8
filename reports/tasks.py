"""Report tasks: the beat tick, generation and delivery. They take ids, ack late, and are
idempotent (the claims in `reports.services`), so redelivery never doubles a report or a mail.
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings

from core.jobs.recovery import DURABLE_TASK_OPTIONS, heartbeat
from reports import services
from reports.models import Report, ReportStatus

logger = logging.getLogger(__name__)


@shared_task(name="reports.tick", **DURABLE_TASK_OPTIONS)
def tick() -> dict:
    """Run by celery beat every minute: create and queue the reports that are due."""
    return {"created": services.tick()}


@shared_task(name="reports.generate_report", **DURABLE_TASK_OPTIONS)
def generate_report(report_id: int) -> dict:
    # The claim's time is the heartbeat: killed mid-generation, core.jobs.recovery re-sends it.
    with heartbeat(Report, report_id):
        outcome = services.generate(report_id)
    if outcome.status == ReportStatus.GENERATED:
        # Also when another worker generated it: deliver's own claim keeps it to one e-mail.
        deliver_report.delay(report_id)
    return {"report_id": report_id, "generated": outcome.done, "status": outcome.status}


def delivery_countdown_s(retries: int) -> int:
    """Back-off before the next attempt: Celery's exponential back-off with full jitter (what
    ``retry_backoff``/``retry_jitter`` compute), up to base × 2^retries s, at most an hour.
    The task's own retry options already serve transient database errors (seconds, see
    DURABLE_TASK_OPTIONS); an SMTP refusal waits minutes, so its countdown comes from the
    same Celery function with the delivery base."""
    base_s = max(1, round(settings.REPORTS_DELIVERY_RETRY_BASE_S))
    return get_exponential_backoff_interval(base_s, retries, 3600, full_jitter=True)


@shared_task(bind=True, name="reports.deliver_report", **DURABLE_TASK_OPTIONS)
def deliver_report(self, report_id: int) -> dict:
    """Send the e-mail; an SMTP failure is recorded on the report, then retried with back-off."""
    outcome = services.deliver(report_id)
    if outcome.status == ReportStatus.DELIVERY_FAILED:
        if self.request.retries < settings.REPORTS_DELIVERY_MAX_RETRIES:
            raise self.retry(
                countdown=delivery_countdown_s(self.request.retries),
                max_retries=settings.REPORTS_DELIVERY_MAX_RETRIES,
            )
        logger.error("report %s: delivery failed after %s retries", report_id, self.request.retries)
    return {"report_id": report_id, "delivered": outcome.done, "status": outcome.status}

"""Beat evaluates every rule; usage imports and analyses queue an evaluation too."""

from __future__ import annotations

from celery import shared_task

from alerts import services


@shared_task(name="alerts.evaluate_alerts", ignore_result=True, soft_time_limit=600, time_limit=660)
def evaluate_alerts() -> int:
    return services.evaluate_all()

"""The retention beat task (config.settings: CELERY_BEAT_SCHEDULE, hourly)."""

from __future__ import annotations

import logging

from celery import shared_task

from core.retention.sweeps import apply_retention

logger = logging.getLogger(__name__)


@shared_task(name="core.apply_retention", ignore_result=True)
def apply_retention_task() -> dict[str, object]:
    """Delete files and rows past their retention period (idempotent: a second run finds
    nothing more to do)."""
    done = apply_retention()
    logger.info("retention: %s", done)
    return done

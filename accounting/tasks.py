"""Import tasks: take ids, are idempotent, ack late, retry on transient database errors."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import InterfaceError, OperationalError

from accounting import services

logger = logging.getLogger(__name__)

TRANSIENT = (OperationalError, InterfaceError)


@shared_task(
    name="accounting.run_import",
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=TRANSIENT,
    retry_backoff=2,
    retry_backoff_max=60,
    max_retries=5,
)
def run_import(import_job_id: int, run_id: str) -> dict:
    """Import one uploaded usage file (all-or-nothing) and record the outcome on its job."""
    try:
        return services.run_import_job(import_job_id, run_id)
    except TRANSIENT:
        raise  # Celery retries these; the rolled-back run re-imports the whole file
    except Exception as exc:
        logger.exception("usage import %s run %s failed", import_job_id, run_id)
        services.fail(import_job_id, run_id, f"{type(exc).__name__}: {exc}")
        return {"failed": str(exc)}

"""Celery task: build a large XLSX export in the background."""

from __future__ import annotations

from celery import shared_task

from exports import services


@shared_task(name="exports.build_export", acks_late=True, reject_on_worker_lost=True)
def build_export(job_id: int) -> dict:
    job = services.build_xlsx(job_id)
    return {"job_id": job.pk, "status": job.status, "rows": job.rows_written}

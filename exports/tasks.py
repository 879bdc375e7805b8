"""Celery task: build a large XLSX export in the background."""

from __future__ import annotations

from celery import shared_task

from core.jobs.recovery import DURABLE_TASK_OPTIONS, heartbeat
from exports import services
from exports.models import ExportJob


@shared_task(name="exports.build_export", **DURABLE_TASK_OPTIONS)
def build_export(job_id: int, run_id: str | None = None) -> dict:
    # While it beats, core.jobs.recovery leaves the export alone; killed, it is re-sent.
    with heartbeat(ExportJob, job_id, run_id):
        job = services.build_xlsx(job_id, run_id)
    return {"job_id": job.pk, "status": job.status, "rows": job.rows_written}

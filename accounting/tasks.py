"""Import tasks: take ids, are idempotent, ack late, retry on transient database errors."""

from __future__ import annotations

import logging

from celery import shared_task

from accounting import services
from config.recovery import DURABLE_TASK_OPTIONS, TRANSIENT, heartbeat

logger = logging.getLogger(__name__)


@shared_task(name="accounting.run_import", **DURABLE_TASK_OPTIONS)
def run_import(import_job_id: int, run_id: str) -> dict:
    """Import one uploaded usage file (all-or-nothing) and record the outcome on its job."""
    try:
        # While it beats, config.recovery leaves the import alone; killed, it is re-sent.
        with heartbeat("accounting.ImportJob", import_job_id, run_id):
            return services.run_import_job(import_job_id, run_id)
    except TRANSIENT:
        raise  # Celery retries these; the rolled-back run re-imports the whole file
    except Exception as exc:
        logger.exception("usage import %s run %s failed", import_job_id, run_id)
        services.fail(import_job_id, run_id, f"{type(exc).__name__}: {exc}")
        return {"failed": str(exc)}


@shared_task(name="accounting.refresh_usage_rollups", **DURABLE_TASK_OPTIONS)
def refresh_usage_rollups(cluster_ids: list[int] | None = None) -> dict:
    """Rebuild the daily usage rollups of these clusters (idempotent: a full rebuild), then
    precompute the dashboards' default views."""
    from accounting.rollups import refresh_usage_rollups as refresh
    from accounting.rollups import run_refresh_hooks

    counts = refresh(cluster_ids)
    run_refresh_hooks(cluster_ids)
    return {"clusters": counts.clusters, "records": counts.records, "rows": counts.rows}


@shared_task(name="accounting.run_rollup_refresh", **DURABLE_TASK_OPTIONS)
def run_rollup_refresh(refresh_id: int, run_id: str) -> dict:
    """One queued :class:`~accounting.models.RollupRefresh` (sent by config.dispatch): rebuild
    the rollups, precompute the dashboards' default views, record the outcome. A redelivered
    or re-sent run of a refresh that already succeeded does nothing."""
    from django.utils import timezone

    from accounting.models import ImportStatus, RollupRefresh
    from accounting.rollups import refresh_usage_rollups as refresh
    from accounting.rollups import run_refresh_hooks

    job = RollupRefresh.objects.filter(pk=refresh_id, run_id=run_id).first()
    if job is None or job.status == ImportStatus.SUCCEEDED:
        return {"skipped": refresh_id}
    current = RollupRefresh.objects.filter(pk=refresh_id, run_id=run_id)
    current.update(status=ImportStatus.RUNNING, started_at=timezone.now(), error="")
    try:
        counts = refresh(job.cluster_ids)
    except TRANSIENT:
        raise  # Celery retries; the refresh is a full rebuild, so a rerun is harmless
    except Exception as exc:
        logger.exception("rollup refresh %s failed", refresh_id)
        current.update(
            status=ImportStatus.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            finished_at=timezone.now(),
        )
        return {"failed": str(exc)}
    current.update(
        status=ImportStatus.SUCCEEDED,
        records=counts.records,
        rows=counts.rows,
        finished_at=timezone.now(),
    )
    run_refresh_hooks(job.cluster_ids)
    return {"clusters": counts.clusters, "records": counts.records, "rows": counts.rows}

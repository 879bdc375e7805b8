"""Import tasks: take ids, are idempotent, ack late, retry on transient database errors."""

from __future__ import annotations

import logging

from celery import shared_task

from accounting import services
from accounting.models import ImportJob
from accounting.slurmrestd.tasks import pull_due_slurmrestd, pull_slurmrestd  # noqa: F401
from core.jobs import lifecycle as jobs
from core.jobs.recovery import DURABLE_TASK_OPTIONS, heartbeat
from core.jobs.transient import raise_if_transient

logger = logging.getLogger(__name__)


@shared_task(name="accounting.run_import", **DURABLE_TASK_OPTIONS)
def run_import(import_job_id: int, run_id: str) -> dict:
    """Import one uploaded usage file (all-or-nothing) and record the outcome on its job."""
    try:
        # While it beats, core.jobs.recovery leaves the import alone; killed, it is re-sent.
        with heartbeat(ImportJob, import_job_id, run_id):
            return services.run_import_job(import_job_id, run_id)
    except Exception as exc:
        # Celery retries a transient one (a raw psycopg COPY error too); the rolled-back
        # run re-imports the whole file under the same run id, so it lands once.
        raise_if_transient(exc)
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
    """One queued :class:`~accounting.models.RollupRefresh` (sent by core.jobs.dispatch):
    rebuild the rollups, precompute the dashboards' default views, record the outcome. A
    redelivered or re-sent run of a refresh that already succeeded does nothing."""
    from accounting.models import RollupRefresh
    from accounting.rollups import refresh_usage_rollups as refresh
    from accounting.rollups import run_refresh_hooks

    job = jobs.current_run(RollupRefresh, refresh_id, run_id).first()
    if job is None or not jobs.mark_running(RollupRefresh, refresh_id, run_id, error=""):
        return {"skipped": refresh_id}
    try:
        with heartbeat(RollupRefresh, refresh_id, run_id):
            counts = refresh(job.cluster_ids)
    except Exception as exc:
        raise_if_transient(exc)  # Celery retries; a full rebuild is harmless twice
        logger.exception("rollup refresh %s failed", refresh_id)
        jobs.fail(RollupRefresh, refresh_id, run_id, f"{type(exc).__name__}: {exc}")
        return {"failed": str(exc)}
    jobs.finish(RollupRefresh, refresh_id, run_id, records=counts.records, rows=counts.rows)
    run_refresh_hooks(job.cluster_ids)
    return {"clusters": counts.clusters, "records": counts.records, "rows": counts.rows}

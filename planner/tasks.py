"""Analysis tasks: take ids, are idempotent, ack late, retry on transient database errors.

A run fans out one `analysis_part` per cluster (a Celery group); each part stores its rows
in AnalysisPart (unique per run and cluster, so a redelivered part overwrites, never doubles),
and the part that completes the set queues `finalize_analysis`.
"""

from __future__ import annotations

import logging

from celery import group, shared_task
from django.db import transaction

from core.faults import injected_pause
from core.jobs.recovery import DURABLE_TASK_OPTIONS, TRANSIENT, heartbeat
from planner import analysis as engine_bridge
from planner import services
from planner.models import Analysis, AnalysisPart, Plan

logger = logging.getLogger(__name__)


def _fail_on_error(analysis_id: int, run_id: str, exc: Exception) -> None:
    if isinstance(exc, TRANSIENT):
        raise exc  # Celery retries these
    logger.exception("analysis %s run %s failed", analysis_id, run_id)
    services.fail(analysis_id, run_id, f"{type(exc).__name__}: {exc}")


@shared_task(name="planner.run_analysis", **DURABLE_TASK_OPTIONS)
def run_analysis(analysis_id: int, run_id: str) -> dict:
    """Coordinator: find the clusters in scope and fan out one part per cluster."""
    analysis = services.current_run(analysis_id, run_id).first()
    if analysis is None:
        return {"skipped": "superseded or deleted"}
    try:
        cluster_ids = services.clusters_in_scope(analysis.scope, analysis.object_id)
        if not services.mark_running(analysis_id, run_id, len(cluster_ids)):
            return {"skipped": "already finished"}
        if not cluster_ids:
            finalize_analysis.delay(analysis_id, run_id)
            return {"parts": 0}
        group(analysis_part.s(analysis_id, run_id, cid) for cid in cluster_ids).apply_async()
        return {"parts": len(cluster_ids)}
    except Exception as exc:
        _fail_on_error(analysis_id, run_id, exc)
        return {"failed": str(exc)}


@shared_task(name="planner.analysis_part", **DURABLE_TASK_OPTIONS)
def analysis_part(analysis_id: int, run_id: str, cluster_id: int) -> dict:
    """Evaluate the pools of one cluster (restricted to one pool for a pool-scope analysis)."""
    analysis = services.current_run(analysis_id, run_id).first()
    if analysis is None:
        return {"skipped": "superseded or deleted"}
    try:
        # While it beats, core.jobs.recovery leaves the run alone; killed, its part is re-sent.
        with heartbeat(Analysis, analysis_id, run_id):
            pool_rows, inputs = engine_bridge.evaluate_cluster(analysis, cluster_id)
            injected_pause("ANALYSIS_PART_DELAY_S")
        with transaction.atomic():
            AnalysisPart.objects.update_or_create(
                analysis_id=analysis_id,
                run_id=run_id,
                cluster_id=cluster_id,
                defaults={"pool_rows": pool_rows, "inputs": inputs},
            )
            # Lock the analysis row so exactly one part sees the set complete.
            locked = services.current_run(analysis_id, run_id).select_for_update().first()
            if locked is None:
                return {"skipped": "superseded"}
            done = AnalysisPart.objects.filter(analysis_id=analysis_id, run_id=run_id).count()
            services.record_progress(analysis_id, run_id, done, locked.parts_total)
            complete = done >= locked.parts_total
        if complete:
            finalize_analysis.delay(analysis_id, run_id)
        return {"cluster_id": cluster_id, "pools": len(pool_rows)}
    except Exception as exc:
        _fail_on_error(analysis_id, run_id, exc)
        return {"failed": str(exc)}


@shared_task(name="planner.finalize_analysis", **DURABLE_TASK_OPTIONS)
def finalize_analysis(analysis_id: int, run_id: str) -> dict:
    """Aggregate the parts to the analysis scope and store the result."""
    analysis = services.current_run(analysis_id, run_id).first()
    if analysis is None or analysis.status == "succeeded":
        return {"skipped": "superseded or already finished"}
    try:
        parts = list(AnalysisPart.objects.filter(analysis_id=analysis_id, run_id=run_id))
        with heartbeat(Analysis, analysis_id, run_id):
            results, snapshot = engine_bridge.summarise(analysis, parts)
        services.finish(analysis_id, run_id, results=results, input_snapshot=snapshot)
        return {"analysis_id": analysis_id, "status": "succeeded"}
    except Exception as exc:
        _fail_on_error(analysis_id, run_id, exc)
        return {"failed": str(exc)}


@shared_task(name="planner.compute_plan", **DURABLE_TASK_OPTIONS)
def compute_plan(plan_id: int, run_id: str) -> dict:
    """Evaluate a capacity plan's options, rank them, and store results with progress."""
    from planner import plans  # imported here so this task stays an append-only addition

    plan = plans.current_run(plan_id, run_id).first()
    if plan is None:
        return {"skipped": "superseded or deleted"}
    if not plans.mark_running(plan_id, run_id):
        return {"skipped": "already finished"}
    try:
        # While it beats, core.jobs.recovery leaves the plan alone; killed, it is re-sent.
        with heartbeat(Plan, plan_id, run_id):
            results, summary, snapshot = plans.compute(
                plan, on_progress=lambda percent: plans.record_progress(plan_id, run_id, percent)
            )
        plans.finish(plan_id, run_id, results=results, summary=summary, snapshot=snapshot)
        return {"plan_id": plan_id, "options": summary["options"]}
    except Exception as exc:
        if isinstance(exc, TRANSIENT):
            raise  # Celery retries these
        logger.exception("plan %s run %s failed", plan_id, run_id)
        plans.fail(plan_id, run_id, f"{type(exc).__name__}: {exc}")
        return {"failed": str(exc)}

"""Celery tasks of the inventory app; they take ids and are safe to run twice."""

from __future__ import annotations

import logging

from celery import shared_task

from core.jobs import lifecycle
from core.jobs.recovery import DURABLE_TASK_OPTIONS
from core.jobs.transient import raise_if_transient
from inventory.models import Pool, PoolTotalsCheck
from inventory.selectors import pool_totals, pools_with_node_groups

logger = logging.getLogger(__name__)


def totals_of(pool_id: int) -> dict:
    """A pool's nameplate totals as the worker check reports them."""
    pool = pools_with_node_groups(Pool.objects.filter(pk=pool_id)).get()
    totals = pool_totals(pool)
    return {
        "pool_id": pool.pk,
        "pool": pool.name,
        "cards": totals.cards,
        "nodes": totals.nodes,
        "peak_pflops": round(totals.peak_pflops, 6),
        "it_power_kw": round(totals.it_power_kw, 3),
        "mix": {m.accelerator: m.cards for m in totals.mix},
        "heterogeneous": totals.is_heterogeneous,
    }


@shared_task(name="inventory.recompute_pool_totals", **DURABLE_TASK_OPTIONS)
def recompute_pool_totals(check_id: int, run_id: str) -> dict:
    """Recompute a pool's nameplate totals (the worker round-trip check) onto its job row."""
    check = lifecycle.current_run(PoolTotalsCheck, check_id, run_id).first()
    if check is None or not lifecycle.mark_running(PoolTotalsCheck, check_id, run_id):
        return {"skipped": "superseded, finished or deleted"}
    try:
        result = totals_of(check.pool_id)
    except Exception as exc:
        raise_if_transient(exc)  # Celery retries these
        logger.exception("totals check %s failed", check_id)
        lifecycle.fail(PoolTotalsCheck, check_id, run_id, f"{type(exc).__name__}: {exc}")
        return {"failed": str(exc)}
    lifecycle.finish(PoolTotalsCheck, check_id, run_id, result=result)
    return result

"""Celery tasks of the inventory app; they take ids and are safe to run twice."""

from __future__ import annotations

from celery import shared_task

from inventory.models import Pool
from inventory.selectors import pool_totals, pools_with_node_groups


@shared_task(name="inventory.recompute_pool_totals", acks_late=True)
def recompute_pool_totals(pool_id: int) -> dict:
    """Recompute a pool's nameplate totals (the worker round-trip check)."""
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

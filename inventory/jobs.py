"""The inventory's job kind (core.jobs.registry), registered from InventoryConfig.ready."""

from __future__ import annotations

from core.jobs.registry import JobKind, register


def register_jobs() -> None:
    from inventory.models import PoolTotalsCheck

    register(JobKind(model=PoolTotalsCheck, task="inventory.recompute_pool_totals"))

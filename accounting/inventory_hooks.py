"""What accounting tells the inventory about deleting clusters and pools (inventory.deletion).

* The measured data a delete must name before it is confirmed: usage records and serving
  loads, with the period they cover (hidden ones too: a cluster whose deleted pool holds
  the records must not be deleted outright, taking them along unconfirmed).
* After a delete or a restore the cluster's daily usage rollups are rebuilt (the managers of
  accounting.models already hide or show the rows at once; the rebuild keeps the sums right).
* Before a deleted pool is purged, its usage records go with it (a hard delete of a pool
  would only unmap them, and they would show up again as unmapped usage of the cluster).

Registered from AccountingConfig.ready.
"""

from __future__ import annotations

from django.db.models import Count, Max, Min
from django.db.models.functions import Coalesce

from inventory.deletion import Measured, register_measured
from inventory.models import Cluster, Pool
from inventory.signals import inventory_hidden, inventory_purging, inventory_restored


def _owner_filter(obj) -> dict[str, object] | None:
    if isinstance(obj, Cluster):
        return {"cluster": obj}
    if isinstance(obj, Pool):
        return {"pool": obj}
    return None


def usage_records_of(obj) -> Measured | None:
    from accounting.models import UsageRecord

    owner = _owner_filter(obj)
    if owner is None:
        return None
    found = UsageRecord._base_manager.filter(**owner).aggregate(
        count=Count("pk"), first=Min("start"), last=Max(Coalesce("end", "start"))
    )
    return Measured("usage records", found["count"], found["first"], found["last"])


def serving_loads_of(obj) -> Measured | None:
    from accounting.models import ServingLoad

    owner = {"pool__cluster": obj} if isinstance(obj, Cluster) else _owner_filter(obj)
    if owner is None:
        return None
    found = ServingLoad._base_manager.filter(**owner).aggregate(
        count=Count("pk"), first=Min("period_start"), last=Max("period_end")
    )
    return Measured("serving loads", found["count"], found["first"], found["last"])


def _refresh_rollups(sender, cluster_id: int, **kwargs) -> None:
    from accounting.rollups import queue_refresh

    queue_refresh([cluster_id])


def _purge_pool_usage(sender, instance, **kwargs) -> None:
    from accounting.models import UsageDailyRollup, UsageRecord

    if isinstance(instance, Pool):
        UsageRecord._base_manager.filter(pool=instance).delete()
        UsageDailyRollup._base_manager.filter(pool=instance).delete()


def connect() -> None:
    register_measured("usage records", usage_records_of)
    register_measured("serving loads", serving_loads_of)
    inventory_hidden.connect(_refresh_rollups, dispatch_uid="accounting-rollups-on-hide")
    inventory_restored.connect(_refresh_rollups, dispatch_uid="accounting-rollups-on-restore")
    inventory_purging.connect(_purge_pool_usage, dispatch_uid="accounting-purge-pool-usage")

"""Inventory edits, usage imports and serving loads mark the analyses (and plans) that used
them stale."""

from __future__ import annotations

import contextlib

from django.core.exceptions import ObjectDoesNotExist
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from accounting.models import ServingLoad
from accounting.signals import usage_imported
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site
from planner.plans import connect_rate_signals, mark_plans_stale
from planner.services import mark_stale

# (level, id) a plan's `inventory_refs` may name, for each inventory model.
PLAN_LEVELS = {
    Site: lambda obj: ("site", obj.pk),
    Cluster: lambda obj: ("cluster", obj.pk),
    Pool: lambda obj: ("pool", obj.pk),
    NodeGroup: lambda obj: ("pool", obj.pool_id),
    AcceleratorModel: lambda obj: ("accelerator", obj.pk),
}

# (level, id of the object at that level) for each inventory model.
LEVELS = {
    Site: lambda obj: ("site", obj.pk),
    Cluster: lambda obj: ("cluster", obj.pk),
    Pool: lambda obj: ("pool", obj.pk),
    NodeGroup: lambda obj: ("pool", obj.pool_id),
    AcceleratorModel: lambda obj: ("catalog", None),
}


# How a stale reason names each kind of inventory object.
KINDS = {
    Site: "site",
    Cluster: "cluster",
    Pool: "pool",
    NodeGroup: "node group",
    AcceleratorModel: "catalog card",
}


def change_reason(sender, instance, **kwargs) -> str:
    """What changed, e.g. "Pool mixed-a100-h100 (cluster train-hetero) was edited after
    this run." (named now: after a delete the object is gone)."""
    deleted = kwargs.get("signal") is post_delete
    action = "deleted" if deleted else "added" if kwargs.get("created") else "edited"
    name = f"{KINDS[sender]} {instance.name}"
    parent = {Pool: "cluster", NodeGroup: "pool", Cluster: "site"}.get(sender)
    if parent is not None:
        with contextlib.suppress(ObjectDoesNotExist):  # its parent went first in a cascade
            name += f" ({parent} {getattr(instance, parent).name})"
    return f"{name[0].upper()}{name[1:]} was {action} after this run."


def _on_change(sender, instance, **kwargs) -> None:
    if kwargs.get("raw"):
        return  # fixture loading
    reason = change_reason(sender, instance, **kwargs)
    level, object_id = LEVELS[sender](instance)
    if sender in (Pool, Cluster) and kwargs.get("signal") is post_delete:
        # The object is gone; its parent still knows which analyses used it.
        level, object_id = (
            ("cluster", instance.cluster_id) if sender is Pool else ("site", instance.site_id)
        )
    # After commit, so a rolled-back edit flags nothing.
    transaction.on_commit(lambda: mark_stale(level, [object_id], reason))
    plan_level, plan_object_id = PLAN_LEVELS[sender](instance)
    transaction.on_commit(lambda: _mark_plans(sender, plan_level, plan_object_id))


def _mark_plans(sender, level: str, object_id: int | None) -> None:
    mark_plans_stale(level, [object_id])
    if sender is NodeGroup:
        # A node group also changes its cluster's card total, which spreads the cluster's
        # opex over its cards: every pool option of that cluster is affected.
        cluster_ids = Pool.objects.filter(pk=object_id).values_list("cluster_id", flat=True)
        mark_plans_stale("cluster", list(cluster_ids))


def _on_usage_imported(sender, cluster_id: int, reason: str, **kwargs) -> None:
    # In the import's transaction: a rolled-back import leaves its analyses as they were.
    mark_stale("cluster", [cluster_id], reason)


def _on_serving_load(sender, instance, **kwargs) -> None:
    """A serving load changes its pool's serving utilization: that pool's analyses are stale."""
    if kwargs.get("raw"):
        return
    deleted = kwargs.get("signal") is post_delete
    action = "deleted" if deleted else "added" if kwargs.get("created") else "edited"
    with contextlib.suppress(ObjectDoesNotExist):  # the pool went first in a cascade
        reason = f"A serving load of pool {instance.pool.name} was {action} after this run."
        transaction.on_commit(lambda: mark_stale("pool", [instance.pool_id], reason))


def connect() -> None:
    usage_imported.connect(_on_usage_imported, dispatch_uid="planner.stale.usage_imported")
    connect_rate_signals()  # an exchange rate change marks the plans it reprices stale
    for signal, name in ((post_save, "save"), (post_delete, "delete")):
        uid = f"planner.stale.ServingLoad.{name}"
        signal.connect(_on_serving_load, sender=ServingLoad, dispatch_uid=uid)
    for model in LEVELS:
        uid = f"planner.stale.{model.__name__}"
        post_save.connect(_on_change, sender=model, dispatch_uid=uid + ".save")
        post_delete.connect(_on_change, sender=model, dispatch_uid=uid + ".delete")

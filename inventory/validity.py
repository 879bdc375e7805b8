"""Error boundary for stored inventory: find the objects whose numbers are out of range.

Rows saved before a range existed (or written around the forms) must not break a report for
everyone: reports leave the affected clusters out and name the object and field instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from inventory.models import Cluster, NodeGroup, Pool
from inventory.ranges import range_errors


def _describe(kind: str, name: str, errors: dict[str, str]) -> str:
    fields = "; ".join(f"{field}: {message.rstrip('.')}" for field, message in errors.items())
    return f"{kind} {name}: {fields}"


def invalid_clusters(cluster_ids: Iterable[int]) -> dict[int, str]:
    """Cluster id → a message naming the first bad object (site, cluster, pool, node group)."""
    ids = sorted({int(cluster_id) for cluster_id in cluster_ids})
    if not ids:
        return {}
    found: dict[int, str] = {}
    clusters = Cluster.objects.filter(pk__in=ids).select_related("site")
    sites: dict[int, str | None] = {}
    for cluster in clusters:
        if cluster.site_id not in sites:
            errors = range_errors(cluster.site)
            site = cluster.site.name
            sites[cluster.site_id] = _describe("site", site, errors) if errors else None
        if message := sites[cluster.site_id]:
            found[cluster.pk] = message
        elif errors := range_errors(cluster):
            found[cluster.pk] = _describe("cluster", str(cluster), errors)
    for pool in Pool.objects.filter(cluster_id__in=ids):
        if pool.cluster_id not in found and (errors := range_errors(pool)):
            found[pool.cluster_id] = _describe("pool", pool.name, errors)
    for group in NodeGroup.objects.filter(pool__cluster_id__in=ids).select_related("pool"):
        cluster_id = group.pool.cluster_id
        if cluster_id not in found and (errors := range_errors(group)):
            found[cluster_id] = _describe("node group", group.name, errors)
    return found

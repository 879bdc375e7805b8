"""Read-side queries: derived totals of pools, clusters and sites, without N+1 queries."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Prefetch, QuerySet

from engine.cost import DEFAULT_POWER
from inventory.models import Cluster, NodeGroup, Pool, Site


@dataclass(frozen=True)
class AcceleratorMix:
    accelerator_id: int
    accelerator: str
    vendor: str
    cards: int
    peak_pflops: float
    it_power_kw: float
    card_power_kw: float


@dataclass(frozen=True)
class Totals:
    """Nameplate totals of a set of node groups. IT power counts what the cost model charges:
    the cards' TDP plus each node's own draw (CPUs, memory, NICs, fans; `DEFAULT_POWER`)."""

    cards: int = 0
    nodes: int = 0
    peak_pflops: float = 0.0
    it_power_kw: float = 0.0
    card_power_kw: float = 0.0
    mix: tuple[AcceleratorMix, ...] = field(default_factory=tuple)

    @property
    def node_power_kw(self) -> float:
        return self.it_power_kw - self.card_power_kw

    @property
    def is_heterogeneous(self) -> bool:
        return len(self.mix) > 1


def node_groups_queryset() -> QuerySet[NodeGroup]:
    return NodeGroup.objects.select_related("accelerator")


def pools_with_node_groups(queryset: QuerySet[Pool] | None = None) -> QuerySet[Pool]:
    """Pools with their node groups and accelerators prefetched (two extra queries in all)."""
    queryset = Pool.objects.all() if queryset is None else queryset
    return queryset.select_related("cluster__site").prefetch_related(
        Prefetch("node_groups", queryset=node_groups_queryset())
    )


def totals_of(node_groups) -> Totals:
    """Sum node groups already in memory (use with prefetched querysets)."""
    by_model: dict[int, dict] = {}
    nodes = 0
    for group in node_groups:
        nodes += group.node_count
        accel = group.accelerator
        entry = by_model.setdefault(
            accel.id,
            {
                "accelerator": accel.name,
                "vendor": accel.vendor,
                "cards": 0,
                "tflops": 0.0,
                "card_w": 0.0,
                "node_w": 0.0,
            },
        )
        cards = group.node_count * group.cards_per_node
        entry["cards"] += cards
        entry["tflops"] += cards * accel.dense_bf16_tflops
        entry["card_w"] += cards * accel.tdp_w
        entry["node_w"] += group.node_count * DEFAULT_POWER.node_overhead_w
    mix = tuple(
        AcceleratorMix(
            accelerator_id=accel_id,
            accelerator=entry["accelerator"],
            vendor=entry["vendor"],
            cards=entry["cards"],
            peak_pflops=entry["tflops"] / 1000.0,
            it_power_kw=(entry["card_w"] + entry["node_w"]) / 1000.0,
            card_power_kw=entry["card_w"] / 1000.0,
        )
        for accel_id, entry in sorted(by_model.items(), key=lambda item: item[1]["accelerator"])
    )
    return Totals(
        cards=sum(m.cards for m in mix),
        nodes=nodes,
        peak_pflops=sum(m.peak_pflops for m in mix),
        it_power_kw=sum(m.it_power_kw for m in mix),
        card_power_kw=sum(m.card_power_kw for m in mix),
        mix=mix,
    )


def pool_totals(pool: Pool) -> Totals:
    """Totals of one pool; uses the prefetch cache when the pool came from a prefetching query."""
    return totals_of(pool.node_groups.all())


def fleet_totals() -> Totals:
    return totals_of(node_groups_queryset())


def clusters_with_pools(queryset: QuerySet[Cluster] | None = None) -> QuerySet[Cluster]:
    queryset = Cluster.objects.all() if queryset is None else queryset
    return queryset.select_related("site").prefetch_related(
        Prefetch("pools", queryset=pools_with_node_groups())
    )


def cluster_totals_prefetched(cluster: Cluster) -> Totals:
    """Totals of a cluster fetched through `clusters_with_pools` (no extra queries)."""
    return totals_of(group for pool in cluster.pools.all() for group in pool.node_groups.all())


def sites_with_clusters(queryset: QuerySet[Site] | None = None) -> QuerySet[Site]:
    """Sites with clusters, pools, node groups and accelerators prefetched (four extra queries)."""
    queryset = Site.objects.all() if queryset is None else queryset
    return queryset.prefetch_related(Prefetch("clusters", queryset=clusters_with_pools()))


def site_totals_prefetched(site: Site) -> Totals:
    """Totals of a site fetched through `sites_with_clusters` (no extra queries)."""
    return totals_of(
        group
        for cluster in site.clusters.all()
        for pool in cluster.pools.all()
        for group in pool.node_groups.all()
    )

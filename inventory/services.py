"""Write-side inventory operations (HackSoft style: business logic lives here)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import models, transaction

from inventory.catalog import load_catalog
from inventory.models import (
    AcceleratorModel,
    CoolingType,
    Fabric,
    NodeGroup,
    Pool,
    PoolPurpose,
    Site,
)
from inventory.models import Cluster as ClusterModel


@dataclass(frozen=True)
class DemoGroup:
    name: str
    accelerator: str
    node_count: int
    cards_per_node: int = 8


# Two sites in two currencies (Frankfurt in EUR), three clusters, one heterogeneous training
# pool (A100 + H100), one inference pool.
DEMO_SITES = [
    {
        "name": "Frankfurt DC1 (air)",
        "location": "Frankfurt am Main, DE",
        "cooling_type": CoolingType.AIR,
        "pue": 1.5,
        "tariff_per_kwh": 0.18,
        "currency": "EUR",
        "grid_carbon_g_per_kwh": 380.0,
    },
    {
        "name": "Ulanqab DC2 (liquid)",
        "location": "Ulanqab, Inner Mongolia, CN",
        "cooling_type": CoolingType.DIRECT_LIQUID,
        "pue": 1.1,
        "tariff_per_kwh": 0.06,
        "currency": "USD",
        "grid_carbon_g_per_kwh": 550.0,
    },
]

DEMO_CLUSTERS = [
    {
        "site": "Ulanqab DC2 (liquid)",
        "name": "train-hetero",
        "fabric": Fabric.INFINIBAND,
        "inter_node_bandwidth_gbps_per_card": 400.0,
        "commissioned_on": dt.date(2023, 9, 1),
        "capital_cost_per_card": 38000.0,
        "amortization_years": 5.0,
        "yearly_opex": 2_500_000.0,
        "pools": [
            {
                "name": "mixed-a100-h100",
                "purpose": PoolPurpose.TRAINING,
                "planned_utilization": 0.7,
                "groups": [
                    DemoGroup("a100-nodes", "A100 SXM4 80GB", 125),
                    DemoGroup("h100-nodes", "H100 SXM5 80GB", 125),
                ],
            }
        ],
    },
    {
        "site": "Ulanqab DC2 (liquid)",
        "name": "train-ascend",
        "fabric": Fabric.ROCE,
        "inter_node_bandwidth_gbps_per_card": 200.0,
        "commissioned_on": dt.date(2024, 3, 1),
        "capital_cost_per_card": 22000.0,
        "amortization_years": 5.0,
        "yearly_opex": 800_000.0,
        "pools": [
            {
                "name": "ascend-910b",
                "purpose": PoolPurpose.TRAINING,
                "planned_utilization": 0.6,
                "groups": [DemoGroup("910b-nodes", "Ascend 910B", 64)],
            }
        ],
    },
    {
        "site": "Frankfurt DC1 (air)",
        "name": "inference-eu",
        "fabric": Fabric.ETHERNET,
        "inter_node_bandwidth_gbps_per_card": 100.0,
        "commissioned_on": dt.date(2024, 6, 1),
        "rental_price_per_card_hour": 1.0,
        "pools": [
            {
                "name": "serving-l40s",
                "purpose": PoolPurpose.INFERENCE,
                "planned_utilization": 0.45,
                "groups": [DemoGroup("l40s-nodes", "L40S", 32, 4)],
            }
        ],
    },
]


M = TypeVar("M", bound=models.Model)


def _upsert(model: type[M], lookup: dict[str, Any], values: dict[str, Any]) -> M:
    """Create the row, or save it only where ``values`` differ: an unchanged row is not saved
    (no new version, history entry or "edited after this run" on the analyses that used it)."""
    row, created = model.objects.get_or_create(**lookup, defaults=values)
    if created:
        return row
    changed = False
    for name, value in values.items():
        field = model._meta.get_field(name)
        wanted = value.pk if field.is_relation and value is not None else value
        if getattr(row, field.attname) != wanted:
            setattr(row, name, value)
            changed = True
    if changed:
        row.save()
    return row


@transaction.atomic
def load_demo_fleet() -> dict[str, int]:
    """Create or refresh the demo fleet; running it twice changes nothing (no row is saved)."""
    load_catalog(AcceleratorModel)
    accelerators = {a.name: a for a in AcceleratorModel.objects.all()}
    sites = {}
    for values in DEMO_SITES:
        values = dict(values)
        site = _upsert(Site, {"name": values.pop("name")}, values)
        sites[site.name] = site
    counts = {"sites": len(sites), "clusters": 0, "pools": 0, "node_groups": 0}
    for values in DEMO_CLUSTERS:
        values = dict(values)
        pools = values.pop("pools")
        site = sites[values.pop("site")]
        cluster = _upsert(ClusterModel, {"site": site, "name": values.pop("name")}, values)
        counts["clusters"] += 1
        for pool_values in pools:
            pool_values = dict(pool_values)
            groups = pool_values.pop("groups")
            pool = _upsert(Pool, {"cluster": cluster, "name": pool_values.pop("name")}, pool_values)
            counts["pools"] += 1
            for group in groups:
                _upsert(
                    NodeGroup,
                    {"pool": pool, "name": group.name},
                    {
                        "accelerator": accelerators[group.accelerator],
                        "node_count": group.node_count,
                        "cards_per_node": group.cards_per_node,
                    },
                )
                counts["node_groups"] += 1
    return counts

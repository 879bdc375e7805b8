"""A small fleet with two months of usage (February and March 2024), for report content tests.

Site "Report DC" (air, PUE 1.3, 0.10 USD/kWh); cluster "alpha": one pool "h100" of 2 × 8 H100
(16 cards); cluster "beta": one pool "a100" of 1 × 8 A100 (8 cards). Both commissioned
2024-01-01. Usage, every day of February and March:

    alpha  team-a  12 cards × 20 h (March: 8 cards × 16 h); team-c one node_fail job, 2 × 2 h
    beta   team-b  6 cards × 20 h (both months)

so alpha is busier in February than in March, and beta is steady.
"""

from __future__ import annotations

import datetime as dt

import pytest

# The browser fixtures (Debian's Chromium through Playwright) shared with the frontend tests.
from tests.frontend.conftest import (  # noqa: F401
    browser_planner,
    chromium,
    page_factory,
    screenshot,
)

FEB = dt.datetime(2024, 2, 1, tzinfo=dt.UTC)
MAR = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
APR = dt.datetime(2024, 4, 1, tzinfo=dt.UTC)


def _usage_rows(cluster, pool, accelerator, team, cards, hours, start_day, days, prefix, state):
    from accounting.models import UsageRecord

    rows = []
    for offset in range(days):
        start = start_day + dt.timedelta(days=offset, hours=1)
        end = start + dt.timedelta(hours=hours)
        rows.append(
            UsageRecord(
                cluster=cluster,
                pool=pool,
                record_key=f"{prefix}-{offset}",
                job_id=f"{prefix}-{offset}",
                account=team,
                accelerator=accelerator,
                cards=cards,
                start=start,
                end=end,
                duration_h=hours,
                card_hours=cards * hours,
                state=state,
            )
        )
    return rows


@pytest.fixture
def report_fleet(db):
    """The fleet of the module docstring; returns {"alpha": Cluster, "beta": Cluster, ...}."""
    from accounting.models import UsageRecord
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    load_catalog(AcceleratorModel)
    h100 = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    a100 = AcceleratorModel.objects.get(name="A100 SXM4 80GB")
    site = Site.objects.create(
        name="Report DC", cooling_type="air", pue=1.3, tariff_per_kwh=0.10, currency="USD"
    )
    clusters = {}
    pools = {}
    for name, pool_name, accel, nodes in [("alpha", "h100", h100, 2), ("beta", "a100", a100, 1)]:
        cluster = Cluster.objects.create(
            site=site,
            name=name,
            commissioned_on=dt.date(2024, 1, 1),
            capital_cost_per_card=30_000.0,
            amortization_years=5.0,
        )
        pool = Pool.objects.create(cluster=cluster, name=pool_name, planned_utilization=0.7)
        NodeGroup.objects.create(
            pool=pool,
            name=f"{pool_name}-nodes",
            accelerator=accel,
            node_count=nodes,
            cards_per_node=8,
        )
        clusters[name], pools[name] = cluster, pool
    rows = []
    alpha, beta = clusters["alpha"], clusters["beta"]
    rows += _usage_rows(
        alpha, pools["alpha"], h100, "team-a", 12, 20, FEB, 29, "a-feb", "completed"
    )
    rows += _usage_rows(alpha, pools["alpha"], h100, "team-a", 8, 16, MAR, 31, "a-mar", "completed")
    rows += _usage_rows(alpha, pools["alpha"], h100, "team-c", 2, 2, FEB, 60, "a-fail", "node_fail")
    rows += _usage_rows(beta, pools["beta"], a100, "team-b", 6, 20, FEB, 60, "b", "completed")
    UsageRecord.objects.bulk_create(rows)
    return {"site": site, **clusters, "pools": pools}


@pytest.fixture(autouse=True)
def report_media(settings, tmp_path):
    """Report files go to a fresh folder per test (never into var/media)."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"

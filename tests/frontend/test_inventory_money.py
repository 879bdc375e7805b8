"""Inventory pages show money with its currency and thousands separators (issue 18), and the
Fleet page has no developer controls."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_cluster_costs_read_as_money(client, planner, demo_fleet):
    from inventory.models import Cluster

    cluster = Cluster.objects.exclude(capital_cost_per_card=None).first()
    cluster.capital_cost_per_card, cluster.yearly_opex = 32_000.0, 1_500_000.0
    cluster.save()
    client.force_login(planner)
    page = client.get(f"/inventory/clusters/{cluster.pk}/").content.decode()
    currency = cluster.site.currency
    assert f"32,000 {currency}" in page and f"1,500,000 {currency} a year" in page
    assert "32000.0" not in page and "1500000.0" not in page


def test_the_fleet_page_has_no_worker_check_column(client, planner, demo_fleet):
    client.force_login(planner)
    page = client.get("/").content.decode()
    assert "Worker check" not in page and "Recompute on worker" not in page

"""IT power on the inventory pages is what the cost model charges: the cards' TDP plus each
node's own draw (CPUs, memory, NICs, fans), not the cards alone."""

from __future__ import annotations

import pandas as pd
import pytest

from engine.cost import DEFAULT_POWER, energy_and_cost
from inventory.models import Pool
from inventory.selectors import pool_totals

pytestmark = pytest.mark.django_db


def test_a_pools_it_power_is_the_cost_models_full_load_draw(demo_fleet):
    pool = Pool.objects.prefetch_related("node_groups__accelerator").filter(
        node_groups__isnull=False
    )[0]
    totals = pool_totals(pool)
    groups = list(pool.node_groups.all())
    card_kw = sum(g.node_count * g.cards_per_node * g.accelerator.tdp_w for g in groups) / 1e3
    node_kw = sum(g.node_count for g in groups) * DEFAULT_POWER.node_overhead_w / 1e3
    assert totals.card_power_kw == pytest.approx(card_kw)
    assert totals.node_power_kw == pytest.approx(node_kw) and node_kw > 0
    assert totals.it_power_kw == pytest.approx(card_kw + node_kw)
    # One hour with every card busy at its full TDP: the cost model draws the same IT power.
    hour = pd.DataFrame(
        {
            "card_hours": [float(g.node_count * g.cards_per_node) for g in groups],
            "allocated_card_hours": [float(g.node_count * g.cards_per_node) for g in groups],
            "tdp_w": [float(g.accelerator.tdp_w) for g in groups],
            "cards_per_node": [float(g.cards_per_node) for g in groups],
            "busy_load_share": 1.0,
            "pue": 1.0,
        }
    )
    assert energy_and_cost(hour)["it_energy_mwh"].sum() * 1e3 == pytest.approx(totals.it_power_kw)


def test_the_pool_page_shows_cards_and_nodes(client, viewer, demo_fleet):
    pool = Pool.objects.filter(node_groups__isnull=False).first()
    client.force_login(viewer)
    html = client.get(f"/inventory/pools/{pool.pk}/").content.decode()
    totals = pool_totals(pool)
    assert f"<dd>{totals.card_power_kw:.1f}</dd>" in html
    assert f"{totals.it_power_kw:.1f}</dd>" in html
    assert "of which nodes" in html

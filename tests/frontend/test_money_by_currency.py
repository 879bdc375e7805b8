"""Money in two currencies is never added (issue 14): per currency on Fleet and in the stored
summary, converted to a reporting currency only with a dated rate that each figure names (an
entered rate, else the shipped ECB reference rate with its source)."""

from __future__ import annotations

import datetime as dt
import re
from types import SimpleNamespace

import pytest
from django.utils import timezone

from tests.support.builders import hand_card

pytestmark = pytest.mark.django_db

START = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
END = dt.datetime(2026, 11, 3, tzinfo=dt.UTC)


@pytest.fixture
def two_currency_analysis(db):
    from inventory.models import Cluster, NodeGroup, Pool, Site
    from planner import analysis as bridge
    from planner.models import Analysis

    card = hand_card()
    parts = []
    analysis = Analysis.objects.create(scope="fleet", period_start=START, period_end=END)
    for name, currency in (("paris", "EUR"), ("austin", "USD")):
        site = Site.objects.create(name=name, pue=1.5, tariff_per_kwh=0.10, currency=currency)
        cluster = Cluster.objects.create(
            site=site,
            name=f"{name}-1",
            commissioned_on=dt.date(2026, 1, 1),
            capital_cost_per_card=35_040.0,
            amortization_years=4.0,
        )
        pool = Pool.objects.create(cluster=cluster, name="p", planned_utilization=0.5)
        NodeGroup.objects.create(
            pool=pool, name="n", accelerator=card, node_count=1, cards_per_node=8
        )
        rows, inputs = bridge.evaluate_cluster(analysis, cluster.pk)
        parts.append(SimpleNamespace(cluster_id=cluster.pk, pool_rows=rows, inputs=inputs))
    results, _ = bridge.summarise(analysis, parts)
    Analysis.objects.filter(pk=analysis.pk).update(
        status="succeeded", results=results, succeeded_at=timezone.now()
    )
    return Analysis.objects.get(pk=analysis.pk)


def _money_lines(html: str, label: str) -> list[str]:
    cell = re.search(rf"{label}</dt><dd>(.*?)</dd>", html, re.S).group(1)
    return [re.sub(r"<[^>]+>", "", line).strip() for line in cell.split("<br>")]


def test_the_summary_keeps_money_per_currency(two_currency_analysis):
    summary = two_currency_analysis.results["summary"]
    assert summary["currency"] is None
    assert summary["total_cost"] is None and summary["lost_mfu_money"] is None
    money = {row["currency"]: row for row in summary["money_by_currency"]}
    assert set(money) == {"EUR", "USD"}
    pools = {p["currency"]: p for p in two_currency_analysis.results["pools"]}
    for currency in ("EUR", "USD"):
        assert money[currency]["total_cost"] == pytest.approx(pools[currency]["total_cost"])


def test_fleet_shows_each_currency_and_never_a_mixed_sum(two_currency_analysis, client, viewer):
    client.force_login(viewer)
    html = client.get("/").content.decode()
    assert "mixed currencies" not in html and "None" not in html
    costs = _money_lines(html, "Cost this period")
    assert [line.split()[-1] for line in costs] == ["EUR", "USD"]
    lost = _money_lines(html, "Lost most to")
    assert all(line.split()[-1] in {"EUR", "USD"} for line in lost) and len(lost) == 2


def test_a_reporting_currency_converts_only_with_a_rate_and_names_it(
    two_currency_analysis, client, viewer
):
    """No rate entered: the shipped ECB reference rate of 2024-11-25 (USD 1.0495 per EUR),
    named with its day and source; an entered rate replaces it; a currency the ECB does not
    publish (AED) has no rate, and the page says so."""
    from inventory.currency import ExchangeRate

    summary = two_currency_analysis.results["summary"]
    money = {row["currency"]: row["lost_money"] for row in summary["money_by_currency"]}
    client.force_login(viewer)
    html = client.get("/", {"currency": "AED"}).content.decode()
    assert "No rate to AED for EUR, USD: figures stay per currency." in html
    html = client.get("/", {"currency": "USD"}).content.decode()
    assert (
        "converted at EUR→USD 1.0495 of 2024-11-25 (ECB euro reference rate, shipped with "
        "Fleetwise)" in html
    )
    converted = _money_lines(html, "Money lost in USD")[0]
    assert converted.startswith(f"{round(money['EUR'] * 1.0495 + money['USD']):,} USD")
    ExchangeRate.objects.create(
        from_currency="EUR", to_currency="USD", rate=1.08, valid_on=dt.date(2026, 11, 1)
    )
    html = client.get("/", {"currency": "USD"}).content.decode()
    converted = _money_lines(html, "Money lost in USD")[0]
    assert "converted at EUR→USD 1.08 of 2026-11-01" in converted and "ECB" not in converted
    expected = round(money["EUR"] * 1.08 + money["USD"])
    assert converted.startswith(f"{expected:,} USD")

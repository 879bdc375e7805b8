"""Costs and reports convert with the planner's rate lookup (issue 31, "Exchange rates that work
out of the box"): with no rate entered, a EUR site's money is converted at the shipped ECB euro
reference rate, labelled with its day and source; an entered rate replaces it.

Worked by hand: two rented clusters at sites with a zero tariff, 8 cards each, busy every hour
of December 2024 (30 days from the 1st, 720 h): EUR 8 × 720 × 2.00 = 11,520 EUR; USD
8 × 720 × 1.00 = 5,760 USD. The ECB's reference rate of 25 November 2024 is USD 1.0495 per EUR,
so the USD total is 11,520 × 1.0495 + 5,760 = 17,850.24; at an entered 1.10, 18,432.
"""

from __future__ import annotations

import datetime as dt
import re

import pytest

pytestmark = pytest.mark.django_db

START = dt.datetime(2024, 12, 1, tzinfo=dt.UTC)
QUERY = {"start": "2024-12-01", "end": "2024-12-31", "currency": "USD"}  # 30 days
SHIPPED_NOTE = (
    "converted at EUR→USD 1.0495 of 2024-11-25 (ECB euro reference rate, shipped with Fleetwise)"
)
SHIPPED_REPORT_NOTE = (
    "EUR → USD at 1.05 (rate of 2024-11-25, ECB euro reference rate, shipped with Fleetwise)"
)
SHIPPED_TOTAL_USD = 17_850.24
ENTERED_TOTAL_USD = 18_432.0


def _busy_rented_cluster(name: str, currency: str, price_per_card_hour: float) -> None:
    from accounting.models import UsageRecord
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    load_catalog(AcceleratorModel)
    site = Site.objects.create(name=f"{name} DC", pue=1.2, tariff_per_kwh=0.0, currency=currency)
    cluster = Cluster.objects.create(
        site=site,
        name=name,
        commissioned_on=dt.date(2024, 1, 1),
        rental_price_per_card_hour=price_per_card_hour,
    )
    pool = Pool.objects.create(cluster=cluster, name="p", planned_utilization=0.5)
    NodeGroup.objects.create(
        pool=pool,
        name="n",
        accelerator=AcceleratorModel.objects.get(name="H100 SXM5 80GB"),
        node_count=1,
        cards_per_node=8,
    )
    UsageRecord.objects.bulk_create(
        UsageRecord(
            cluster=cluster,
            pool=pool,
            record_key=f"{name}-{day}",
            job_id=f"{name}-{day}",
            account=f"team-{name}",
            cards=8,
            start=START + dt.timedelta(days=day),
            end=START + dt.timedelta(days=day + 1),
            duration_h=24,
            card_hours=8 * 24,
            state="completed",
        )
        for day in range(30)
    )


@pytest.fixture
def euro_and_dollar(db):
    from accounting.rollups import refresh_usage_rollups

    _busy_rented_cluster("euro", "EUR", 2.0)
    _busy_rented_cluster("dollar", "USD", 1.0)
    refresh_usage_rollups()


def _enter_rate() -> None:
    from inventory.currency import ExchangeRate

    ExchangeRate.objects.create(
        from_currency="EUR",
        to_currency="USD",
        rate=1.10,
        valid_on=dt.date(2024, 12, 1),
        source="finance desk",
    )


def _converted_row(html: str) -> list[str]:
    row = re.search(r'<tr class="converted".*?</tr>', html, re.S).group(0)
    return [
        re.sub(r"<[^>]+>", "", cell).strip()
        for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
    ]


def _number(text: str) -> float:
    return float(re.sub(r"[^\d.\-]", "", text))


def test_costs_converts_at_the_shipped_rate_with_its_day_and_source(
    euro_and_dollar, client, viewer
):
    client.force_login(viewer)
    cells = _converted_row(client.get("/costs/", QUERY).content.decode())
    # Total in USD | | used | idle share | no usage records | chargeback | share | notes
    assert cells[0] == "Total in USD"
    assert _number(cells[5]) == pytest.approx(SHIPPED_TOTAL_USD, abs=0.5)  # shown whole
    assert SHIPPED_NOTE in cells[-1]


def test_an_entered_rate_replaces_the_shipped_one_on_costs(euro_and_dollar, client, viewer):
    _enter_rate()
    client.force_login(viewer)
    cells = _converted_row(client.get("/costs/", QUERY).content.decode())
    assert _number(cells[5]) == pytest.approx(ENTERED_TOTAL_USD, abs=0.5)
    assert "converted at EUR→USD 1.1 of 2024-12-01" in cells[-1]
    assert "ECB" not in cells[-1]


def test_costs_without_any_rate_stays_per_currency_and_says_why(euro_and_dollar, client, viewer):
    client.force_login(viewer)
    html = client.get("/costs/", QUERY | {"currency": "AED"}).content.decode()  # not in the ECB
    cells = _converted_row(html)
    assert cells[1].startswith("— no exchange rate from EUR, USD to AED")
    assert "none in the shipped ECB reference rates" in cells[1]


def _report_numbers(schedule) -> dict:
    from reports import content, periods

    return content.build_numbers(schedule, periods.Period(START, START + dt.timedelta(days=30)))


def test_a_report_converts_at_the_shipped_rate_and_an_entered_rate_replaces_it(euro_and_dollar):
    from tests.support.builders import fleet_monthly_schedule

    schedule = fleet_monthly_schedule(reporting_currency="USD")
    numbers = _report_numbers(schedule)
    assert numbers["reporting_currency"]["converted"] is True
    assert numbers["reporting_currency"]["notes"] == SHIPPED_REPORT_NOTE
    total = next(f for f in numbers["summary"]["figures"] if f["name"] == "total_cost")
    assert total["value"] == pytest.approx(SHIPPED_TOTAL_USD)
    assert total["conversion"] == SHIPPED_REPORT_NOTE

    _enter_rate()
    numbers = _report_numbers(schedule)
    assert numbers["reporting_currency"]["notes"] == "EUR → USD at 1.1 (rate of 2024-12-01)"
    total = next(f for f in numbers["summary"]["figures"] if f["name"] == "total_cost")
    assert total["value"] == pytest.approx(ENTERED_TOTAL_USD)

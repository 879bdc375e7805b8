"""One money path (issue 14): a fleet worked by hand costs the same on the Fleet page, the
Costs page, a report, its XLSX and the API, each checked against the hand figure.

The fleet: one site (PUE 1.5, 0.10 EUR per facility kWh), one cluster bought at 35,040 EUR a
card over 4 years with 70,080 EUR of yearly opex, one pool of 1 node × 8 cards of 400 W TDP.
One day, 2026-11-02 (UTC), one job holds 4 of the 8 cards all day (sacct through the importer).

By hand (the cost model's documented power defaults: a busy card draws 75 % of TDP, an idle
one 15 %, plus 2,000 W per 8-card node = 250 W per card):

    card-hours          8 × 24 = 192; allocated 4 × 24 = 96; idle 96
    ownership / card-h  35,040 / (4 × 8,760) + (70,080 / 8) / 8,760 = 1.00 + 1.00 = 2.00
    compute cost        2.00 × 192                                   = 384.00 EUR
    IT energy           busy 0.55 kW × 96 + idle 0.31 kW × 96         = 82.56 kWh
    facility energy     82.56 × 1.5                                   = 123.84 kWh
    energy cost         123.84 × 0.10                                 = 12.384 EUR
    total cost          384.00 + 12.384                               = 396.384 EUR
"""

from __future__ import annotations

import datetime as dt
import io
import re
from types import SimpleNamespace

import pytest
from django.urls import reverse
from django.utils import timezone
from openpyxl import load_workbook

from tests.support.builders import hand_card

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 2)
START = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
END = dt.datetime(2026, 11, 3, tzinfo=dt.UTC)
HAND_TOTAL_EUR = 396.384
HAND_COMPUTE_EUR = 384.0
HAND_ENERGY_EUR = 12.384
SACCT = (
    "JobID|JobIDRaw|Cluster|Partition|Account|User|Submit|Start|End|Elapsed|State|NNodes|"
    "AllocTRES|NodeList|TRESUsageInAve\n"
    "101|101|hand|p|team-a|ann|2026-11-01T23:00:00|2026-11-02T00:00:00|2026-11-03T00:00:00|"
    "1-00:00:00|COMPLETED|1|billing=4,cpu=32,gres/gpu=4,node=1|n001|\n"
)


@pytest.fixture
def hand_fleet(db):
    from accounting import services
    from inventory.models import Cluster, NodeGroup, Pool, Site

    card = hand_card()
    site = Site.objects.create(name="Hand DC", pue=1.5, tariff_per_kwh=0.10, currency="EUR")
    cluster = Cluster.objects.create(
        site=site,
        name="hand",
        commissioned_on=dt.date(2026, 1, 1),
        capital_cost_per_card=35_040.0,
        amortization_years=4.0,
        yearly_opex=70_080.0,
    )
    pool = Pool.objects.create(cluster=cluster, name="hand-pool", planned_utilization=0.5)
    NodeGroup.objects.create(pool=pool, name="n", accelerator=card, node_count=1, cards_per_node=8)
    job = services.create_import_job(
        kind="sacct", cluster=cluster, source_name="day.sacct", queue=False, timezone_name="UTC"
    )
    counts = services.import_file(job, io.BytesIO(SACCT.encode()))
    assert counts.records_created == 1
    return cluster


def _fleet_analysis():
    from planner import analysis as bridge
    from planner.models import Analysis

    analysis = Analysis.objects.create(scope="fleet", period_start=START, period_end=END)
    from inventory.models import Cluster

    cluster_id = Cluster.objects.get(name="hand").pk
    rows, inputs = bridge.evaluate_cluster(analysis, cluster_id)
    part = SimpleNamespace(cluster_id=cluster_id, pool_rows=rows, inputs=inputs)
    results, snapshot = bridge.summarise(analysis, [part])
    Analysis.objects.filter(pk=analysis.pk).update(
        status="succeeded", results=results, succeeded_at=timezone.now()
    )
    return Analysis.objects.get(pk=analysis.pk)


def test_the_analysis_prices_the_day_by_hand(hand_fleet):
    pool = _fleet_analysis().results["pools"][0]
    assert pool["utilization"] == pytest.approx(0.5)
    assert pool["compute_cost"] == pytest.approx(HAND_COMPUTE_EUR)
    assert pool["energy_cost"] == pytest.approx(HAND_ENERGY_EUR)
    assert pool["total_cost"] == pytest.approx(HAND_TOTAL_EUR)


def test_fleet_page_shows_the_hand_cost(hand_fleet, client, viewer):
    _fleet_analysis()
    client.force_login(viewer)
    html = client.get(reverse("frontend:home")).content.decode()
    cost = re.search(r"Cost this period</dt><dd>(.*?)</dd>", html, re.S).group(1)
    assert re.sub(r"<[^>]+>", "", cost).split() == ["396", "EUR"]


def test_costs_page_shows_the_hand_cost(hand_fleet, client, viewer):
    from accounting.rollups import refresh_usage_rollups

    refresh_usage_rollups()
    client.force_login(viewer)
    params = {"start": DAY.isoformat(), "end": (DAY + dt.timedelta(days=1)).isoformat()}
    html = client.get(reverse("frontend:costs"), params).content.decode()
    footer = html.split("<tfoot>")[1].split("</tfoot>")[0]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", footer)
    # Total row: card-hours, used cost, idle share, no usage records, total, share, currency.
    used, idle, uncovered, total = (float(cell.replace(",", "")) for cell in cells[1:5])
    assert total == 396 and cells[6] == "EUR"  # the chargeback total: the whole cost
    assert used + idle + uncovered == total
    download = client.get(reverse("frontend:chart-data", args=["costs-breakdown", "csv"]), params)
    text = download.content.decode()
    header, row = text.splitlines()[:2]
    values = dict(zip(header.split(","), row.split(","), strict=True))
    parts = ("ownership_cost", "it_energy_cost", "pue_overhead_cost")
    assert sum(float(values[name]) for name in parts) == pytest.approx(HAND_TOTAL_EUR)
    assert float(values["ownership_cost"]) == pytest.approx(HAND_COMPUTE_EUR)


def test_api_gives_the_hand_cost(hand_fleet, client_for, viewer):
    client = client_for(viewer)
    query = {
        "start": DAY.isoformat(),
        "end": (DAY + dt.timedelta(days=1)).isoformat(),
        "granularity": "total",
    }
    costs = client.get("/api/v1/accounting/costs/", query)
    assert costs.status_code == 200, costs.content
    (total,) = costs.json()["totals"]
    assert total["currency"] == "EUR"
    assert total["total_cost"] == pytest.approx(HAND_TOTAL_EUR)
    analysis = _fleet_analysis()
    stored = client.get(f"/api/v1/analyses/{analysis.pk}/").json()
    summary = stored["results"]["summary"]
    assert summary["total_cost"] == pytest.approx(HAND_TOTAL_EUR)
    assert summary["money_by_currency"][0]["total_cost"] == pytest.approx(HAND_TOTAL_EUR)


def test_report_and_its_xlsx_give_the_hand_cost(hand_fleet):
    from reports import content, periods, services
    from reports.models import ReportSchedule
    from reports.render import render_xlsx

    schedule = services.save_schedule(
        ReportSchedule(
            name="Hand daily",
            frequency="daily",
            timezone="UTC",
            template="efficiency_review",
            recipient_addresses=["finance@example.com"],
            formats=["xlsx"],
        )
    )
    numbers = content.build_numbers(schedule, periods.Period(START, END))
    (total,) = numbers["costs"]["totals"]
    assert (total["currency"], total["total_cost"]) == ("EUR", pytest.approx(HAND_TOTAL_EUR))
    workbook = load_workbook(io.BytesIO(render_xlsx(numbers)))
    sheet = workbook["Costs by cluster"]
    header = [cell.value for cell in sheet[1]]
    (row,) = [
        dict(zip(header, r, strict=True)) for r in sheet.iter_rows(min_row=2, values_only=True)
    ]
    assert row["name"] == "hand"
    assert row["total_cost"] == pytest.approx(HAND_TOTAL_EUR)
    assert row["currency"] == "EUR"

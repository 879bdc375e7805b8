"""Money that adds up on every screen (issue 31, items 2 and 6).

* Costs: per currency the chargeback table's columns sum to its total (used + idle share +
  hours without usage records, which no team pays), checked from the page's own numbers
  against sums worked out by hand;
* one name per definition of cost per effective PFLOP-day;
* a series of one point drawn so it reads (a marker with its value, an axis from 0);
* Fleet: "Money lost" of a fleet in two currencies is shown per currency, or says why not.

The two clusters are priced by hand: rented cards at sites with a zero tariff, so every
card-hour, busy or idle, costs the rental price (EUR 2.00, USD 1.00).
"""

from __future__ import annotations

import datetime as dt
import re
from types import SimpleNamespace

import pandas as pd
import plotly.graph_objects as go
import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db

START = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
QUERY = {"start": "2024-03-01", "end": "2024-03-31"}  # 30 days: 720 h, one monthly bill


def _rented_cluster(name: str, currency: str, rate: float):
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    load_catalog(AcceleratorModel)
    site = Site.objects.create(name=f"{name} DC", pue=1.2, tariff_per_kwh=0.0, currency=currency)
    cluster = Cluster.objects.create(
        site=site, name=name, commissioned_on=dt.date(2024, 1, 1), rental_price_per_card_hour=rate
    )
    pool = Pool.objects.create(cluster=cluster, name="p", planned_utilization=0.5)
    NodeGroup.objects.create(
        pool=pool,
        name="n",
        accelerator=AcceleratorModel.objects.get(name="H100 SXM5 80GB"),
        node_count=1,
        cards_per_node=8,
    )
    return cluster, pool


def _daily_jobs(cluster, pool, days: int, jobs: dict[str, int]) -> list:
    """One 8-card job a day per team, ``jobs[team]`` hours long, on the first ``days`` days."""
    from accounting.models import UsageRecord

    return [
        UsageRecord(
            cluster=cluster,
            pool=pool,
            record_key=f"{cluster.name}-{team}-{day}",
            job_id=f"{cluster.name}-{team}-{day}",
            account=team,
            cards=8,
            start=START + dt.timedelta(days=day),
            end=START + dt.timedelta(days=day, hours=hours),
            duration_h=hours,
            card_hours=8 * hours,
            state="completed",
        )
        for day in range(days)
        for team, hours in jobs.items()
    ]


@pytest.fixture
def two_bills(db):
    """EUR: 8 cards at 2.00, records on 20 of 30 days (team-a 6 h, team-b 3 h a day);
    USD: 8 cards at 1.00, records on all 30 days (team-c 12 h a day)."""
    from accounting.models import UsageRecord
    from accounting.rollups import refresh_usage_rollups

    euro, euro_pool = _rented_cluster("euro", "EUR", 2.0)
    dollar, dollar_pool = _rented_cluster("dollar", "USD", 1.0)
    UsageRecord.objects.bulk_create(
        _daily_jobs(euro, euro_pool, 20, {"team-a": 6, "team-b": 3})
        + _daily_jobs(dollar, dollar_pool, 30, {"team-c": 12})
    )
    refresh_usage_rollups()


# Worked by hand. EUR: 8 cards × 720 h × 2.00 = 11,520 in total; the 10 days without records
# are 8 × 240 h × 2.00 = 3,840 (no team pays them); team-a used 8 × 6 h × 20 = 960 card-hours
# (1,920), team-b 480 (960); the covered 20 days cost 7,680, so the idle cost is
# 7,680 − 2,880 = 4,800, shared 2:1 (proportional): team-a 3,200, team-b 1,600.
# USD: 8 × 720 × 1.00 = 5,760; team-c used 8 × 12 × 30 = 2,880 and pays the idle 2,880 too.
EXPECTED_TOTALS = {
    "EUR": {"used": 2_880.0, "idle": 4_800.0, "uncovered": 3_840.0, "total": 11_520.0},
    "USD": {"used": 2_880.0, "idle": 2_880.0, "uncovered": 0.0, "total": 5_760.0},
}
EXPECTED_ROWS = {
    ("team-a", "EUR"): (1_920.0, 3_200.0, 0.0, 5_120.0),
    ("team-b", "EUR"): (960.0, 1_600.0, 0.0, 2_560.0),
    ("(no usage records, not charged)", "EUR"): (0.0, 0.0, 3_840.0, 3_840.0),
    ("team-c", "USD"): (2_880.0, 2_880.0, 0.0, 5_760.0),
}


def _number(text: str) -> float:
    return float(re.sub(r"[^\d.\-]", "", text))


def _cells(row_html: str) -> list[str]:
    return [
        re.sub(r"<[^>]+>", "", cell).strip()
        for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row_html, re.S)
    ]


def _chargeback_table(html: str) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
    """(body rows, Total rows, "Charged to teams" rows) of the page's chargeback table."""
    table = re.search(r'<table class="dashboard-table sortable">(.*?)</table>', html, re.S)
    body = re.search(r"<tbody>(.*?)</tbody>", table.group(1), re.S).group(1)
    foot = re.search(r"<tfoot>(.*?)</tfoot>", table.group(1), re.S).group(1)
    rows = [_cells(row) for row in re.findall(r"<tr.*?</tr>", body, re.S)]
    totals = [
        _cells(row) for row in re.findall(r'<tr class="chargeback-total".*?</tr>', foot, re.S)
    ]
    charged = [
        _cells(row) for row in re.findall(r'<tr class="chargeback-charged".*?</tr>', foot, re.S)
    ]
    return rows, totals, charged


def test_the_chargeback_columns_add_up_to_the_total_per_currency(two_bills, client, viewer):
    client.force_login(viewer)
    html = client.get("/costs/", QUERY).content.decode()
    rows, totals, charged = _chargeback_table(html)
    # Team | used card-h | used | idle share | no usage records | total | share % | currency
    found = {(row[0], row[7]): tuple(_number(cell) for cell in row[2:6]) for row in rows}
    assert found == EXPECTED_ROWS  # the page rounds to whole units; the hand sums are whole
    for row in rows:  # each row: used + idle share + no usage records = its total
        used, idle, uncovered, total = (_number(cell) for cell in row[2:6])
        assert used + idle + uncovered == pytest.approx(total, abs=1.0)
    by_currency = {row[7]: [_number(cell) for cell in row[2:6]] for row in totals}
    for currency, expected in EXPECTED_TOTALS.items():
        used, idle, uncovered, total = by_currency[currency]
        assert (used, idle, uncovered, total) == pytest.approx(tuple(expected.values()))
        assert used + idle + uncovered == pytest.approx(total, abs=1.0)  # as the page rounds
    # What the teams pay: the total less the money of hours without records.
    assert {row[-1]: _number(row[-3]) for row in charged} == {"EUR": 7_680.0, "USD": 5_760.0}
    assert "No usage records (not charged)" in html


def test_the_chargeback_api_adds_up_the_same_way(two_bills, client, viewer):
    client.force_login(viewer)
    answer = client.get("/api/v1/accounting/chargeback/", {**QUERY, "granularity": "month"})
    report = answer.json()
    for currency, expected in EXPECTED_TOTALS.items():
        rows = [row for row in report["rows"] if row["currency"] == currency]
        parts = sum(r["used_cost"] + r["idle_cost_share"] + r["uncovered_cost"] for r in rows)
        assert parts == pytest.approx(expected["total"])
        assert sum(r["uncovered_cost"] for r in rows) == pytest.approx(expected["uncovered"])
        [bill] = [total for total in report["totals"] if total["currency"] == currency]
        assert bill["total_cost"] == pytest.approx(expected["total"])


def test_the_report_chargeback_adds_up_the_same_way(two_bills):
    from reports import content, periods
    from reports import services as report_services
    from reports.models import ReportSchedule

    schedule = report_services.save_schedule(
        ReportSchedule(
            name="Monthly chargeback",
            frequency="monthly",
            timezone="UTC",
            template="cost_chargeback",
            recipient_addresses=["finance@example.com"],
            formats=["html_email"],
        )
    )
    numbers = content.build_numbers(schedule, periods.Period(START, START + dt.timedelta(days=30)))
    teams = numbers["chargeback"]["teams"]
    for currency, expected in EXPECTED_TOTALS.items():
        rows = [row for row in teams if row["currency"] == currency]
        assert sum(row["used_cost"] for row in rows) == pytest.approx(expected["used"])
        assert sum(row["idle_cost_share"] for row in rows) == pytest.approx(expected["idle"])
        assert sum(row["uncovered_cost"] for row in rows) == pytest.approx(expected["uncovered"])
        assert sum(row["chargeback_cost"] for row in rows) == pytest.approx(expected["total"])


# -- cost per effective PFLOP-day: one name per definition, a single point that reads ---------


def test_costs_names_its_definition_of_cost_per_effective_pflop_day(two_bills, client, viewer):
    from frontend.charts import REGISTRY

    client.force_login(viewer)
    html = client.get("/costs/", QUERY).content.decode()
    assert "Cost per effective PFLOP-day (training definitions)" in html
    # Never the bare name, which the analyses use for another figure on inference pools.
    bare = re.compile(r"[Cc]ost per effective PFLOP-day(?! \((?:training|serving) definitions\))")
    assert bare.findall(html) == []
    spec = REGISTRY["costs-pflop-day"]
    assert spec.title == "Cost per effective PFLOP-day (training definitions)"
    assert "cost per million tokens" in spec.description  # the analyses' serving figure


def _pflop_frame() -> pd.DataFrame:
    """EUR: one cluster with one known month (2,973.1); USD: two clusters over two months."""
    from frontend.dashboards.usage_selectors import ALL_CLUSTERS

    months = [dt.date(2026, 10, 1), dt.date(2026, 11, 1)]
    rows = [
        ("inference-eu", "EUR", months[0], None),
        ("inference-eu", "EUR", months[1], 2_973.1),
        (ALL_CLUSTERS, "EUR", months[0], None),
        (ALL_CLUSTERS, "EUR", months[1], 2_973.1),
    ]
    for cluster, values in (
        ("a", (400.0, 450.0)),
        ("b", (250.0, 260.0)),
        (ALL_CLUSTERS, (300, 310)),
    ):
        rows += [
            (cluster, "USD", month, value) for month, value in zip(months, values, strict=True)
        ]
    frame = pd.DataFrame(rows, columns=["cluster", "currency", "bucket_start", "cost"])
    return frame.assign(
        cost_per_effective_pflop_day=frame.pop("cost").astype(float),
        total_cost=1.0,
        effective_pflop_days=1.0,
    )


def test_a_single_point_is_a_marker_with_its_value_on_an_axis_from_zero():
    from frontend.dashboards.costs import pflop_day_figure

    figure = pflop_day_figure(_pflop_frame())
    go.Figure(figure)  # plotly validates the plain figure
    layout = figure["layout"]
    euro = [trace for trace in figure["data"] if trace["name"].endswith("(EUR)")]
    # One cluster in EUR: "all clusters" would repeat it; its one known month is one marker.
    assert [trace["name"] for trace in euro] == ["inference-eu (EUR)"]
    [trace] = euro
    assert trace["mode"] == "markers+text"
    assert list(trace["y"]) == [2_973.1] and trace["text"] == ["2,973 EUR"]
    assert list(trace["x"]) == ["inference-eu"]
    x_key = "xaxis" if trace.get("xaxis", "x") == "x" else f"xaxis{trace['xaxis'][1:]}"
    y_key = "yaxis" if trace.get("yaxis", "y") == "y" else f"yaxis{trace['yaxis'][1:]}"
    assert layout[y_key]["range"] == pytest.approx([0.0, 2_973.1 * 1.3])
    assert layout[x_key]["type"] == "category"
    assert layout[x_key]["title"]["text"] == "Cluster (from 2026-11-01)"
    # Two months in USD: lines over dates, autoranged as usual.
    dollar = [trace for trace in figure["data"] if trace["name"].endswith("(USD)")]
    assert len(dollar) == 3 and all(trace["mode"] == "lines+markers" for trace in dollar)


def test_stacked_currency_panels_leave_room_for_the_titles():
    from frontend.dashboards.costs import chargeback_figure

    frame = pd.DataFrame(
        {
            "team": ["a", "(no usage records, not charged)", "c"],
            "currency": ["EUR", "EUR", "USD"],
            "used_card_hours": [10.0, 0.0, 5.0],
            "used_cost": [20.0, 0.0, 5.0],
            "idle_cost_share": [5.0, 0.0, 5.0],
            "uncovered_cost": [0.0, 40.0, 0.0],
            "chargeback_cost": [25.0, 40.0, 10.0],
            "share_of_total_pct": [38.5, 61.5, 100.0],
        }
    )
    figure = chargeback_figure(frame)
    go.Figure(figure)
    layout = figure["layout"]
    height = layout["height"]
    plot = height - layout["margin"]["t"] - layout["margin"]["b"]
    upper, lower = sorted((layout["yaxis"]["domain"], layout["yaxis2"]["domain"]), reverse=True)
    gap_px = (upper[0] - lower[1]) * plot
    assert gap_px >= 90  # tick labels + the upper axis title + the lower panel's title
    names = [trace["name"] for trace in figure["data"] if trace.get("showlegend")]
    assert names == ["Used", "Idle share", "No usage records (not charged)"]  # once each


# -- Fleet: money lost per currency, or the reason beside the dash -----------------------------

DAY = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)


@pytest.fixture
def mixed_fleet(db):
    """A fleet analysis over a EUR cluster, a USD cluster and an unpriced GBP cluster."""
    from inventory.models import Cluster, NodeGroup, Pool, Site
    from planner import analysis as bridge
    from planner.models import Analysis
    from tests.support.builders import hand_card

    card = hand_card()
    analysis = Analysis.objects.create(
        scope="fleet", period_start=DAY, period_end=DAY + dt.timedelta(days=1)
    )
    parts = []
    for name, currency, priced in (
        ("paris", "EUR", True),
        ("austin", "USD", True),
        ("london", "GBP", False),
    ):
        site = Site.objects.create(name=name, pue=1.5, tariff_per_kwh=0.10, currency=currency)
        cluster = Cluster.objects.create(
            site=site,
            name=f"{name}-1",
            commissioned_on=dt.date(2026, 1, 1),
            capital_cost_per_card=35_040.0 if priced else None,
            amortization_years=4.0 if priced else None,
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


def _money_cells(html: str) -> list[list[str]]:
    """The "Money lost" cell of each factor step, top to bottom, one string per line."""
    table = re.search(r'<table class="factor-table">(.*?)</table>', html, re.S).group(1)
    cells = []
    body = re.search(r"<tbody>(.*?)</tbody>", table, re.S).group(1)
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):  # the factor steps' rows
        money = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[-1]
        cells.append(
            [" ".join(re.sub(r"<[^>]+>", " ", line).split()) for line in money.split("<br>")]
        )
    return cells


def test_fleet_money_lost_per_factor_is_per_currency(mixed_fleet, client, viewer):
    from planner.analysis import WATERFALL_ORDER

    client.force_login(viewer)
    html = client.get("/").content.decode()
    summary = mixed_fleet.results["summary"]
    money = {row["currency"]: row["lost_by_factor"] for row in summary["money_by_currency"]}
    assert set(money) == {"EUR", "GBP", "USD"}
    cells = _money_cells(html)
    assert len(cells) == len(WATERFALL_ORDER)
    for factor, lines in zip(WATERFALL_ORDER, cells, strict=True):
        assert lines == [
            f"{money['EUR'][factor]:,.0f} EUR",
            "— GBP, no prices",
            f"{money['USD'][factor]:,.0f} USD",
        ], factor
    assert money["EUR"]["utilization"] > 0  # a priced figure, not a placeholder
    assert "mixed currencies" not in html


def test_an_unpriced_factor_says_why_beside_the_dash():
    from frontend.dashboards.analyses import _with_money_lines
    from frontend.dashboards.money import NO_MONEY_REASON

    steps = [
        {"measure": "relative", "factor": "mfu", "lost_money": None},
        {"measure": "total", "factor": "", "lost_money": None},
    ]
    rows = [
        {"currency": "EUR", "lost_by_factor": {"mfu": None}},
        {"currency": "USD", "lost_by_factor": {"mfu": 12.5}},
    ]
    unpriced, total = _with_money_lines([dict(step) for step in steps], rows)
    assert unpriced["money_lines"] == [
        {"currency": "EUR", "value": None, "note": "no prices"},
        {"currency": "USD", "value": 12.5, "note": ""},
    ]
    assert "money_lines" not in total  # the totals have no money column
    [no_rows, _] = _with_money_lines([dict(step) for step in steps], [])
    assert no_rows["money_lines"] == [] and no_rows["money_reason"] == NO_MONEY_REASON

"""A report's advice prices a loss at what the lost card-hours cost (issue 31, item 1).

The walk's case: a week on a nearly idle cluster (99 % of its card-hours idle) where one node
failure cost 856 card-hours. Those card-hours cost about 1,170 EUR, about 5,000 EUR a month
at the week's rate; the report used to say "about 140,307 EUR a month" (the −ln attribution
of the whole bill's lost share, extrapolated).

The cluster here is priced by hand: rented at 1.3668 EUR per card-hour at a site with a zero
tariff, so every card-hour, busy or idle, costs exactly 1.3668 EUR.
"""

from __future__ import annotations

import datetime as dt

import pytest

from reports import content, losses, periods
from reports import services as report_services
from reports.models import ReportSchedule

RATE_EUR = 1.3668  # per card-hour: 856 card-hours × 1.3668 = 1,169.98 EUR
CARDS = 64 * 8  # 512 cards
START = dt.datetime(2026, 11, 16, tzinfo=dt.UTC)  # a Monday
END = START + dt.timedelta(days=7)  # 168 h
LOST_CARD_HOURS = 8 * 107  # one 8-card job killed by a node failure after 107 h = 856
DAILY_CARD_HOURS = 8 * 1  # one 8-card, one-hour job a day: the rest of the week's work


@pytest.fixture
def idle_week(db):
    """The EUR cluster with a week of usage: 856 card-hours lost, 99 % of the week idle."""
    from accounting.models import UsageRecord
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    load_catalog(AcceleratorModel)
    site = Site.objects.create(name="Walk DC", pue=1.3, tariff_per_kwh=0.0, currency="EUR")
    cluster = Cluster.objects.create(
        site=site,
        name="walk",
        commissioned_on=dt.date(2026, 1, 1),
        rental_price_per_card_hour=RATE_EUR,
    )
    pool = Pool.objects.create(cluster=cluster, name="l40s", planned_utilization=0.5)
    NodeGroup.objects.create(
        pool=pool,
        name="nodes",
        accelerator=AcceleratorModel.objects.get(name="H100 SXM5 80GB"),
        node_count=64,
        cards_per_node=8,
    )
    failed_start = START + dt.timedelta(hours=10)
    records = [
        UsageRecord(
            cluster=cluster,
            pool=pool,
            record_key="job-node-fail",
            job_id="job-node-fail",
            account="research",
            cards=8,
            start=failed_start,
            end=failed_start + dt.timedelta(hours=107),
            duration_h=107,
            card_hours=LOST_CARD_HOURS,
            state="node_fail",
        )
    ]
    for day in range(7):
        begin = START + dt.timedelta(days=day, hours=2)
        records.append(
            UsageRecord(
                cluster=cluster,
                pool=pool,
                record_key=f"job-{day}",
                job_id=f"job-{day}",
                account="research",
                cards=8,
                start=begin,
                end=begin + dt.timedelta(hours=1),
                duration_h=1,
                card_hours=DAILY_CARD_HOURS,
                state="completed",
            )
        )
    UsageRecord.objects.bulk_create(records)
    return cluster


def _weekly_numbers(frequency: str = "weekly", end: dt.datetime = END) -> dict:
    schedule = report_services.save_schedule(
        ReportSchedule(
            name=f"{frequency} review",
            frequency=frequency,
            timezone="UTC",
            template="efficiency_review",
            recipient_addresses=["ops@example.com"],
            formats=["html_email"],
        )
    )
    return content.build_numbers(schedule, periods.Period(START, end))


def test_the_walks_loss_is_the_cost_of_its_lost_card_hours(idle_week):
    numbers = _weekly_numbers()
    [cost] = numbers["costs"]["clusters"]
    # Hand sums: 512 cards × 168 h = 86,016 card-hours at 1.3668 EUR = 117,566.67 EUR.
    assert cost["total_cost"] == pytest.approx(CARDS * 168 * RATE_EUR)
    assert cost["allocated_card_hours"] == pytest.approx(LOST_CARD_HOURS + 7 * DAILY_CARD_HOURS)
    advice = {row["factor"]: row for row in numbers["recommendations"]}
    lost = advice["effective_time"]
    # 856 card-hours × 1.3668 EUR = 1,169.98 EUR, never more.
    assert lost["lost_card_hours"] == pytest.approx(856.0)
    assert lost["lost_cost"] == pytest.approx(1_169.98, abs=0.01)
    # A week extrapolated to 730 h at the week's rate: × 730 / 168 = 4.345 → 5,083.95 EUR.
    assert lost["lost_cost_per_month"] == pytest.approx(1_169.98 * 730 / 168, abs=0.01)
    month_bill = cost["total_cost"] * 730 / 168
    assert lost["lost_cost_per_month"] <= month_bill
    assert "856 card-hours lost to failed and preempted jobs" in lost["text"]
    assert "which cost 1,170 EUR in these 7 days" in lost["text"]
    assert "about 5,084 EUR a month at this period's rate (extrapolated, × 4.35)" in lost["text"]
    # The idle cards: 86,016 − 912 = 85,104 card-hours × 1.3668 = 116,320.15 EUR.
    idle = advice["utilization"]
    assert idle["lost_card_hours"] == pytest.approx(85_104.0)
    assert idle["lost_cost"] == pytest.approx(85_104 * RATE_EUR, rel=1e-9)
    assert idle["text"].startswith("Utilization is the biggest loss in cluster walk: 99% of")
    assert numbers["recommendations"][0]["factor"] == "utilization"


def test_a_month_long_report_gives_the_period_figure_without_extrapolating(idle_week):
    numbers = _weekly_numbers("monthly", START + dt.timedelta(days=30))
    lost = {row["factor"]: row for row in numbers["recommendations"]}["effective_time"]
    assert lost["lost_cost"] == pytest.approx(1_169.98, abs=0.01)
    assert lost["lost_cost_per_month"] is None
    assert "in these 30 days" in lost["text"] and "a month" not in lost["text"]


# A cost-report row as the accounting API gives it, worked by hand: 1,000 in-service
# card-hours (200 of them without usage records), 300 allocated, 60 lost; 2,000 in total,
# 400 of it the uncovered hours, 1,000 the idle cards: busy rate (1,600 − 1,000) / 300 = 2.
ROW = {
    "total_cost": 2_000.0,
    "uncovered_cost": 400.0,
    "card_hours": 1_000.0,
    "uncovered_card_hours": 200.0,
    "allocated_card_hours": 300.0,
    "lost_card_hours": 60.0,
    "idle_cost": 1_000.0,
    "energy_overhead_cost": 90.0,
    "factors": {"scaling": 0.9, "mfu": 0.5},
}


def test_the_waterfall_losses_fit_inside_the_covered_bill():
    assert losses.busy_rate(ROW) == pytest.approx(2.0)
    week = {name: losses.priced_loss(name, ROW, 168.0) for name in losses.WATERFALL}
    assert week["utilization"].card_hours == pytest.approx(500.0)  # 800 covered − 300
    assert week["utilization"].cost == pytest.approx(1_000.0)
    assert week["effective_time"].cost == pytest.approx(60 * 2.0)
    assert week["scaling"].cost == pytest.approx(240 * 0.1 * 2.0)  # 240 productive × (1 − 0.9)
    assert week["mfu"].cost == pytest.approx(240 * 0.9 * 0.5 * 2.0)
    assert week["energy"].cost == pytest.approx(90.0)
    along = sum(week[name].cost for name in ("utilization", "effective_time", "scaling", "mfu"))
    assert along == pytest.approx(1_000 + 120 + 48 + 216)
    assert along <= ROW["total_cost"] - ROW["uncovered_cost"]
    assert week["mfu"].per_month == pytest.approx(216 * 730 / 168)


def test_a_month_is_never_more_than_the_months_bill():
    # A loss larger than its bill (inconsistent input) is still capped at the bill's month.
    row = {**ROW, "idle_cost": 5_000.0}
    loss = losses.priced_loss("utilization", row, 24.0)
    assert loss.per_month == pytest.approx(2_000 * 730 / 24)
    assert losses.priced_loss("utilization", row, 31 * 24.0).per_month is None


def test_nothing_ran_means_no_price_for_busy_losses():
    row = {**ROW, "allocated_card_hours": 0.0, "lost_card_hours": 0.0}
    assert losses.priced_loss("effective_time", row, 168.0) is None
    assert losses.priced_loss("utilization", {**ROW, "idle_cost": None}, 168.0) is None

"""An inventory without usage shows "no data" everywhere: no zeros, no floors, no advice.

The cluster "alpha" (16 H100, planned utilization 70 %; `tests.support.builders.alpha_cluster`),
with no usage imported, then with usage for part of a 30-day period. Every surface is checked:
the stored analysis, Fleet, the analysis page, Usage, Costs, the accounting API and a report.
"""

from __future__ import annotations

import datetime as dt
import re

import pytest

from accounting.models import UsageRecord
from accounting.selectors.uncovered import UNCOVERED_TEAM
from planner import services
from reports import content, periods
from reports import services as report_services
from reports.models import ReportSchedule
from tests.support.inline import run_analysis_inline

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster(alpha):
    return alpha


START = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
END = dt.datetime(2024, 3, 31, tzinfo=dt.UTC)  # 30 days
QUERY = {"start": "2024-03-01", "end": "2024-03-31"}
NO_DATA_NOTE = "No usage data for cluster alpha in this period"
# What a floor, a ratio over zero or a None leaking into a page would look like.
INVENTED = re.compile(r"1e-0?6|0\.000001|\b(?:inf|nan|NaN|None)\b|n/a")


def _analysis(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        analysis = services.start_analysis(scope="fleet", period_start=START, period_end=END)
    return run_analysis_inline(analysis)


def _jobs(cluster, days: int) -> None:
    """One 8-card, 12-hour job a day on the first ``days`` days of the period."""
    pool = cluster.pools.get()
    UsageRecord.objects.bulk_create(
        UsageRecord(
            cluster=cluster,
            pool=pool,
            record_key=f"job-{day}",
            job_id=f"job-{day}",
            account="team-a",
            cards=8,
            start=START + dt.timedelta(days=day),
            end=START + dt.timedelta(days=day, hours=12),
            duration_h=12,
            card_hours=96,
            state="completed",
        )
        for day in range(days)
    )


def _report_numbers() -> dict:
    """The numbers of a monthly efficiency review of the fleet over the period."""
    schedule = report_services.save_schedule(
        ReportSchedule(
            name="Monthly",
            frequency="monthly",
            timezone="UTC",
            template="efficiency_review",
            recipient_addresses=["ops@example.com"],
            formats=["html_email"],
        )
    )
    return content.build_numbers(schedule, periods.Period(START, END))


def _text(response) -> str:
    assert response.status_code == 200
    return response.content.decode()


def test_analysis_without_usage_is_planned_and_says_why(
    cluster, django_capture_on_commit_callbacks
):
    analysis = _analysis(django_capture_on_commit_callbacks)
    pool = analysis.results["pools"][0]
    assert pool["utilization"] == pytest.approx(0.7)  # the plan, not a floored zero
    assert pool["utilization_provenance"] == "modeled"
    assert pool["utilization_reason"] == (
        "no usage records in the period: the planned value is used"
    )
    coverage = analysis.results["summary"]["coverage"]
    assert coverage["share"] == 0.0 and coverage["clusters_covered"] == 0


@pytest.mark.parametrize(
    ("days", "measured", "reason"),
    [
        (14, False, "usage covers 14 of 30 days (47% of card-days, below the 50% rule)"),
        (15, True, "measured over the covered days: usage covers 15 of 30 days"),
        (30, True, "measured over the covered days: usage covers 30 of 30 days"),
    ],
)
def test_coverage_rule_decides_measured_or_planned(
    cluster, django_capture_on_commit_callbacks, days, measured, reason
):
    _jobs(cluster, days)
    pool = _analysis(django_capture_on_commit_callbacks).results["pools"][0]
    assert pool["utilization_reason"].startswith(reason)
    if measured:
        # 96 card-hours a day over 16 cards × 24 h, over the covered days only.
        assert pool["utilization"] == pytest.approx(96 / 384)
        assert pool["utilization_provenance"] == "measured"
    else:
        assert pool["utilization"] == pytest.approx(0.7)
        assert pool["utilization_provenance"] == "modeled"


def test_fleet_and_analysis_pages_show_the_reason(
    cluster, client, viewer, django_capture_on_commit_callbacks
):
    analysis = _analysis(django_capture_on_commit_callbacks)
    client.force_login(viewer)
    for url in ("/", f"/analyses/{analysis.pk}/"):
        page = _text(client.get(url))
        assert "Usage coverage:" in page
        assert "no usage records in the period: the planned value is used" in page


def test_usage_and_costs_pages_say_no_data(cluster, client, viewer):
    client.force_login(viewer)
    for url in ("/usage/", "/costs/"):
        page = _text(client.get(url, QUERY))
        assert NO_DATA_NOTE in page
        if url == "/usage/":
            assert "No data for this selection yet." in page
        # Figures only: scripts and the filter choices (an idle rule is called "none") aside.
        body = re.sub(r"<(script|select).*?</\1>", "", page.split("<main", 1)[-1], flags=re.S)
        assert not INVENTED.search(body)


def test_api_prices_the_cards_but_measures_nothing_without_usage(
    cluster, client, viewer, django_capture_on_commit_callbacks
):
    # The cards cost money whether or not usage was imported: Costs prices them as the
    # analysis does, but every figure that needs records is no data (null), never 0.
    analysis_cost = _analysis(django_capture_on_commit_callbacks).results["pools"][0]
    client.force_login(viewer)
    utilization = client.get("/api/v1/accounting/utilization/", QUERY).json()
    assert utilization["rows"] == []
    assert utilization["coverage_notes"][0].startswith(NO_DATA_NOTE)
    costs = client.get("/api/v1/accounting/costs/", {**QUERY, "granularity": "total"}).json()
    assert costs["warnings"][0].startswith(NO_DATA_NOTE)
    [total] = costs["totals"]
    assert total["total_cost"] == pytest.approx(analysis_cost["total_cost"], rel=1e-9)
    assert total["uncovered_cost"] == pytest.approx(total["total_cost"], rel=1e-12)
    for name in (
        "allocated_card_hours",
        "idle_cost",
        "lost_cost",
        "effective_pflop_days",
        "effective_utilization",
        "cost_per_effective_pflop_day",
        "cost_per_allocated_card_hour",
    ):
        assert total[name] is None, name
    assert set(total["factors"].values()) == {None}
    assert set(total["factor_provenance"].values()) == {"no data"}


def test_report_without_usage_has_no_figures_and_no_advice(cluster):
    numbers = _report_numbers()
    assert numbers["recommendations"] == []
    assert numbers["summary"]["effective_utilization"] is None
    figures = {row["name"]: row["value"] for row in numbers["summary"]["figures"]}
    assert figures["idle_card_hours"] is None and figures["idle_cost"] is None
    assert figures["total_cost"] > 0  # what the cards cost: priced from the inventory
    assert numbers["idle"]["idle_card_hours"] is None
    assert any(warning.startswith(NO_DATA_NOTE) for warning in numbers["warnings"])


def test_report_advice_rests_on_measured_factors_and_says_so(cluster):
    _jobs(cluster, 20)
    numbers = _report_numbers()
    advice = numbers["recommendations"]
    assert advice, "20 of 30 days measured: the idle cards are a measured loss"
    # MFU and scaling are defaults and modeled here: never the ground for advice.
    assert {row["factor"] for row in advice} <= {"utilization", "effective_time", "energy"}
    assert advice[0]["rests_on"] == "usage covers 20 of 30 days"
    assert "Measured: usage covers 20 of 30 days." in advice[0]["text"]


def test_usage_chart_leaves_a_gap_where_a_cluster_has_no_data():
    import math

    import pandas as pd

    from frontend.dashboards.usage import utilization_figure

    days = pd.to_datetime(["2024-03-01", "2024-03-02", "2024-03-03"])
    frame = pd.DataFrame(
        {
            "cluster": ["alpha", "beta", "beta", "alpha"],
            "bucket_start": [days[0], days[0], days[1], days[2]],
            "utilization_pct": [40.0, 10.0, 20.0, 50.0],
            "allocated_card_hours": [1.0, 1.0, 1.0, 1.0],
            "available_card_hours": [2.0, 2.0, 2.0, 2.0],
        }
    )
    alpha_trace = utilization_figure(frame)["data"][0]
    assert alpha_trace["name"] == "alpha"
    assert alpha_trace["y"][0] == 40.0 and alpha_trace["y"][2] == 50.0
    assert math.isnan(alpha_trace["y"][1])  # no data on day 2: a gap, not 0 %


def test_partial_coverage_gives_one_utilization_on_every_surface(
    cluster, client, viewer, django_capture_on_commit_callbacks
):
    _jobs(cluster, 20)  # 20 of 30 days: measured over those 20 days
    expected = 96 / 384
    pool = _analysis(django_capture_on_commit_callbacks).results["pools"][0]
    assert pool["utilization"] == pytest.approx(expected)
    client.force_login(viewer)
    api = client.get("/api/v1/accounting/utilization/", {**QUERY, "granularity": "total"}).json()
    assert [row["utilization"] for row in api["rows"]] == [pytest.approx(expected)]
    costs = client.get("/api/v1/accounting/costs/", {**QUERY, "granularity": "total"}).json()
    assert costs["rows"][0]["factors"]["utilization"] == pytest.approx(expected)
    numbers = _report_numbers()
    assert numbers["summary"]["factors"][-1]["value"] == pytest.approx(expected)
    assert numbers["summary"]["factors"][-1]["name"] == "utilization"


def test_partial_coverage_prices_the_whole_period_on_every_surface(
    cluster, client, viewer, django_capture_on_commit_callbacks
):
    # 20 of 30 days covered: the cards of the 10 others cost money too. The analysis, the
    # cost API, the chargeback and a report agree on the period's cost; the uncovered third
    # is priced at the measured utilization and charged to no team.
    _jobs(cluster, 20)
    analysis_cost = _analysis(django_capture_on_commit_callbacks).results["pools"][0]["total_cost"]
    client.force_login(viewer)
    query = {**QUERY, "granularity": "total"}
    [costs] = client.get("/api/v1/accounting/costs/", query).json()["totals"]
    assert costs["total_cost"] == pytest.approx(analysis_cost, rel=1e-9)
    assert costs["uncovered_card_hours"] == pytest.approx(16 * 24 * 10)
    assert costs["card_hours"] == pytest.approx(16 * 24 * 30)
    assert 0 < costs["uncovered_cost"] < costs["total_cost"]
    assert costs["allocated_card_hours"] == pytest.approx(96 * 20)  # measured only
    chargeback = client.get("/api/v1/accounting/chargeback/", query).json()
    charged = {row["team"]: row["chargeback_cost"] for row in chargeback["rows"]}
    assert charged[UNCOVERED_TEAM] == pytest.approx(costs["uncovered_cost"])
    assert sum(charged.values()) == pytest.approx(analysis_cost, rel=1e-9)
    figures = {row["name"]: row["value"] for row in _report_numbers()["summary"]["figures"]}
    assert figures["total_cost"] == pytest.approx(analysis_cost, rel=1e-9)


def test_usage_table_without_sreport_shows_downtime_as_unknown_not_zero(client, viewer, demo_fleet):
    from accounting.models import SreportUtilization
    from accounting.rollups import refresh_usage_rollups
    from tests.support import usage_data

    usage_data.load_usage(count=20)
    SreportUtilization.objects.all().delete()  # job records only, no sreport report
    refresh_usage_rollups()
    client.force_login(viewer)
    html = client.get("/usage/", {"start": "2024-06-01", "end": "2024-09-01"}).content.decode()
    assert "Down and planned down are unknown" in html
    rows = html.split('class="dashboard-table"')[1].split("</tbody>")[0]
    # Each cluster row: allocated, idle, then Down and planned down as "—".
    unknown = rows.count('<td class="num">—</td><td class="num">—</td>')
    assert unknown == rows.count('<tr><th scope="row">') == 3

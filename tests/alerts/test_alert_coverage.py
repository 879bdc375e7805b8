"""An alert reads its usage figure over the same covered hours as the Usage and Costs pages:
coverage counts from the cluster's commissioning (not the window's start) up to the export's
as-of time (not the midnight after it), by the one coverage rule (`accounting.coverage`)."""

from __future__ import annotations

import datetime as dt

import pytest

from accounting import selectors
from accounting.rollups import refresh_usage_rollups, rollup_usage_frame
from alerts.metrics import read
from alerts.models import AlertRule
from inventory.models import Cluster
from tests.support.running_exports import ORDINARY_AS_OF, ordinary_export

pytestmark = pytest.mark.django_db
UTC = dt.UTC
COMMISSIONED = dt.date(2024, 3, 1)
# The ordinary export: 192 + 224 allocated card-hours of 16 × 24 (03-01) + 16 × 22 (03-02, up
# to the as-of time 22:00): 46 covered hours, all after the commissioning.
ALLOCATED = 192.0 + 224.0
AVAILABLE = 16 * 24.0 + 16 * 22.0


@pytest.fixture
def commissioned_alpha(alpha, import_text):
    """Alpha commissioned on 2024-03-01 with the ordinary export (as of 2024-03-02 22:00)."""
    Cluster.objects.filter(pk=alpha.pk).update(commissioned_on=COMMISSIONED)
    import_text(alpha, ordinary_export())
    refresh_usage_rollups([alpha.pk])
    return alpha


def rule(cluster: Cluster, metric: str, window_days: int, **extra) -> AlertRule:
    fields = {
        "name": f"alpha {metric}",
        "metric": metric,
        "scope": "cluster",
        "object_id": cluster.pk,
        "direction": "above",
        "threshold": 0.9,
        "window_days": window_days,
    }
    return AlertRule.objects.create(**{**fields, **extra})


def page_utilization(cluster: Cluster, start: dt.datetime, end: dt.datetime) -> float:
    """The Usage page's figure for the period: the report fed from the daily rollups."""
    scope = selectors.AccountingScope(start, end, "total", cluster_ids=(cluster.pk,))
    usage = rollup_usage_frame(
        scope.cluster_ids, start, end, keys=[], edges=scope.edges(), granularity="total"
    )
    (row,) = selectors.measured_utilization(scope, ["cluster"], usage=usage).to_dict("records")
    return row["utilization"]


@pytest.mark.parametrize(
    ("now", "window_days"),
    [
        # 02-25 to 03-03: 4 days before the commissioning, the 2 h after the as-of time.
        (dt.datetime(2024, 3, 3, tzinfo=UTC), 7),
        # 02-26 to 03-04: a whole day after the as-of day too (46 of 72 in-service hours).
        (dt.datetime(2024, 3, 4, tzinfo=UTC), 7),
    ],
)
def test_the_alert_reads_the_dashboards_figure_over_the_covered_hours(
    commissioned_alpha, now, window_days
):
    start = now - dt.timedelta(days=window_days)
    assert start.date() < COMMISSIONED and now > ORDINARY_AS_OF
    reading = read(rule(commissioned_alpha, "utilization", window_days), now)
    # Counted from the window's start, 46 of 168 hours would be covered (27 %): no data.
    assert reading.value == pytest.approx(ALLOCATED / AVAILABLE)
    scope = selectors.AccountingScope(start, now, "total", cluster_ids=(commissioned_alpha.pk,))
    (api_row,) = selectors.utilization_report(scope)["rows"]
    assert api_row["available_card_hours"] == pytest.approx(AVAILABLE)
    assert reading.value == pytest.approx(api_row["utilization"])
    assert reading.value == pytest.approx(page_utilization(commissioned_alpha, start, now))


def test_the_idle_cost_alert_equals_the_costs_figure(commissioned_alpha):
    now, days = dt.datetime(2024, 3, 4, tzinfo=UTC), 7
    reading = read(rule(commissioned_alpha, "idle_cost", days, threshold=1, currency="USD"), now)
    scope = selectors.AccountingScope(
        now - dt.timedelta(days=days), now, "total", cluster_ids=(commissioned_alpha.pk,)
    )
    (total,) = selectors.cost_report(scope)["totals"]
    assert total["factors"]["utilization"] == pytest.approx(ALLOCATED / AVAILABLE)
    assert reading.value is not None and reading.value > 0
    assert reading.value == pytest.approx(total["idle_cost"])


def test_a_team_budget_equals_its_chargeback(commissioned_alpha):
    now, days = dt.datetime(2024, 3, 4, tzinfo=UTC), 7
    budget = rule(
        commissioned_alpha,
        "chargeback",
        days,
        scope="team",
        object_id=None,
        team="team-b",
        threshold=1,
        currency="USD",
    )
    scope = selectors.AccountingScope(now - dt.timedelta(days=days), now, "total")
    rows = selectors.chargeback_report(scope)["rows"]
    (team_b,) = [row for row in rows if row["team"] == "team-b"]
    assert read(budget, now).value == pytest.approx(team_b["chargeback_cost"])


def test_too_little_of_the_in_service_hours_covered_is_no_data(commissioned_alpha):
    # 03-01 to 03-11: 46 of 240 in-service card-hours covered (19 %), under the 50 % rule.
    reading = read(
        rule(commissioned_alpha, "utilization", 10), dt.datetime(2024, 3, 11, tzinfo=UTC)
    )
    assert reading.value is None
    assert "19%" in reading.reason and "1.9 of 10 days" in reading.reason

"""The figure a rule watches, read now: a value, or no value and the reason.

Usage figures (utilization, idle cost, chargeback) are the accounting reports over the
rule's trailing window, so they equal the Usage and Costs pages' figures for that period:
the same covered hours (each cluster's covered window, from its commissioning to the as-of
time of its latest export, `accounting.coverage`). They are read only where the usage
covers at least half of the in-service card-hours of the clusters it reaches (the coverage
rule of docs/efficiency-model.md); below that the rule has no data. Factor figures come from
the scope's latest successful analysis. Money is read in the rule's currency only.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.utils import timezone

from accounting.coverage import coverage_windows
from accounting.selectors.chargeback import chargeback_report
from accounting.selectors.costs import cost_report
from accounting.selectors.frames import AccountingScope, inventory_frame
from accounting.selectors.utilization import measured_utilization
from alerts.models import ANALYSIS_METRICS, AlertRule, Metric
from core.scopes import Scope
from engine.coverage import MIN_COVERED_SHARE, coverage_of
from inventory.models import Cluster, Pool
from planner.models import Analysis

# The analysis summary's key of each factor metric.
SUMMARY_KEYS = {Metric.EFFECTIVE_UTILIZATION: "aggregate_of_products"}


@dataclass(frozen=True)
class Reading:
    value: float | None
    reason: str = ""

    @property
    def has_data(self) -> bool:
        return self.value is not None


def read(rule: AlertRule, now: dt.datetime | None = None) -> Reading:
    """The rule's figure now (no data: a reason instead of a value)."""
    if rule.metric in ANALYSIS_METRICS:
        return _analysis_factor(rule)
    end = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    clusters = _cluster_ids(rule)
    if clusters is not None and not clusters:
        return Reading(None, "The scope has no clusters.")
    start = end - dt.timedelta(days=rule.window_days)
    short = _short_coverage(clusters, start, end)
    if short:
        return Reading(None, short)
    scope = AccountingScope(
        period_start=start,
        period_end=end,
        granularity="total",
        cluster_ids=tuple(clusters) if clusters is not None else None,
        team=rule.team if rule.scope == Scope.TEAM else None,
        group_by=("pool",) if rule.scope == Scope.POOL else ("cluster",),
    )
    readers = {
        Metric.UTILIZATION: _utilization,
        Metric.IDLE_COST: _idle_cost,
        Metric.CHARGEBACK: _chargeback,
    }
    return readers[rule.metric](rule, scope)


def _cluster_ids(rule: AlertRule) -> list[int] | None:
    """The clusters of the rule's scope; None for every cluster (fleet and team rules)."""
    if rule.scope == Scope.SITE:
        return list(Cluster.objects.filter(site_id=rule.object_id).values_list("pk", flat=True))
    if rule.scope == Scope.CLUSTER:
        return list(Cluster.objects.filter(pk=rule.object_id).values_list("pk", flat=True))
    if rule.scope == Scope.POOL:
        return list(Pool.objects.filter(pk=rule.object_id).values_list("cluster_id", flat=True))
    return None


def _short_coverage(clusters: list[int] | None, start: dt.datetime, end: dt.datetime) -> str:
    """Why the usage cannot speak for [start, end) ("" when it can), by the one coverage rule.

    The share is the covered card-hours over the in-service card-hours (from each cluster's
    commissioning, not the window's start) of the clusters whose usage reaches the window:
    a cluster with no usage there is no data, left out as on the Usage page.
    """
    windows = coverage_windows(clusters, start, end)
    if windows.empty:
        return f"No usage records from {start:%Y-%m-%d} to {end:%Y-%m-%d}."
    inventory = inventory_frame(clusters)
    reached = inventory[inventory["cluster"].isin(windows["cluster"])]
    coverage = coverage_of(reached, windows, start, end)
    if coverage.period_card_hours <= 0:
        return f"No cards in service from {start:%Y-%m-%d} to {end:%Y-%m-%d}."
    if not coverage.uses_measured:
        return (
            f"The usage covers {coverage.share or 0.0:.0%} of the window's in-service "
            f"card-hours ({coverage.text()}), under the {MIN_COVERED_SHARE:.0%} the coverage "
            "rule needs."
        )
    return ""


def _utilization(rule: AlertRule, scope: AccountingScope) -> Reading:
    by = ["pool"] if rule.scope == Scope.POOL else ["cluster"]
    if rule.scope == Scope.TEAM:
        by.append("account")
    frame = measured_utilization(scope, by)
    if rule.scope == Scope.POOL and not frame.empty:
        frame = frame[frame["pool"] == rule.object_id]
    if frame.empty:
        return Reading(None, "No cards or usage in the scope.")
    available = frame["available_card_hours"].sum()
    if available <= 0:
        return Reading(None, "No available card-hours in the window.")
    used = frame["allocated_card_hours"].sum() + frame["down_card_hours"].sum()
    return Reading(float(used / available))


def _money(rows: list[dict], column: str, currency: str) -> Reading:
    in_currency = [row for row in rows if row.get("currency") == currency]
    if not in_currency:
        return Reading(None, f"No figures in {currency} for this scope.")
    values = [row[column] for row in in_currency if row.get(column) is not None]
    if not values:
        return Reading(None, f"No {column.replace('_', ' ')} in {currency}.")
    return Reading(float(sum(values)))


def _idle_cost(rule: AlertRule, scope: AccountingScope) -> Reading:
    report = cost_report(scope)
    rows = report["totals"]
    if rule.scope == Scope.POOL:
        rows = [row for row in report["rows"] if row.get("pool") == rule.object_id]
    return _money(rows, "idle_cost", rule.currency)


def _chargeback(rule: AlertRule, scope: AccountingScope) -> Reading:
    report = chargeback_report(scope)
    rows = [row for row in report["rows"] if row.get("team") == rule.team]
    return _money(rows, "chargeback_cost", rule.currency)


def _analysis_factor(rule: AlertRule) -> Reading:
    if rule.scope == Scope.TEAM:
        return Reading(None, "Analyses are per fleet, site, cluster or pool, not per team.")
    object_id = None if rule.scope == Scope.FLEET else rule.object_id
    analysis = (
        Analysis.objects.filter(scope=rule.scope, object_id=object_id, results__isnull=False)
        .order_by("-succeeded_at")
        .first()
    )
    summary = ((analysis.results or {}).get("summary") or {}) if analysis else {}
    value = summary.get(SUMMARY_KEYS.get(rule.metric, rule.metric))
    if value is None:
        return Reading(None, "No successful analysis of this scope with this factor.")
    return Reading(float(value))

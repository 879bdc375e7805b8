"""Read side of reports: querysets for lists and the few direct queries the content needs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.db.models import Count, Max, Min, Q, QuerySet
from django.utils import timezone

from access.scoping import team_reports_filter, visible_teams
from accounting.models import UsageRecord
from inventory.models import Cluster
from reports.models import Report, ReportSchedule

FAILURE_STATES = ("failed", "node_fail", "preempted")


def schedules_queryset(user=None) -> QuerySet[ReportSchedule]:
    """Schedules with what a list shows, in a constant number of queries; with ``user``,
    only those it may read (a team-scoped user: its teams' team-scope schedules)."""
    schedules = ReportSchedule.objects.select_related("site", "cluster", "owner")
    if user is not None:
        schedules = schedules.filter(team_reports_filter(visible_teams(user)))
    return schedules.prefetch_related("recipient_users")


def schedule_choices(user) -> QuerySet[ReportSchedule]:
    """Names of the schedules ``user`` may read, for a filter menu."""
    schedules = ReportSchedule.objects.filter(team_reports_filter(visible_teams(user)))
    return schedules.order_by("name").only("pk", "name")


def reports_queryset(user=None) -> QuerySet[Report]:
    reports = Report.objects.select_related("schedule", "requested_by")
    if user is not None:
        reports = reports.filter(team_reports_filter(visible_teams(user), "schedule__"))
    return reports


def period_extent(reports: QuerySet[Report]) -> tuple[dt.date | None, dt.date | None]:
    """First and last day the reports' periods cover (local dates; None without reports)."""
    bounds = reports.aggregate(first=Min("period_start"), end=Max("period_end"))
    if bounds["first"] is None:
        return None, None
    first = timezone.localdate(bounds["first"])
    last = timezone.localdate(bounds["end"] - dt.timedelta(microseconds=1))
    return first, last


def overlapping(
    reports: QuerySet[Report], start: dt.date | None = None, end: dt.date | None = None
) -> QuerySet[Report]:
    """Reports whose period overlaps [start, end) (days, end exclusive; either may be open)."""
    if start is not None:
        reports = reports.filter(period_end__gt=_day_start(start))
    if end is not None:
        reports = reports.filter(period_start__lt=_day_start(end))
    return reports


def _day_start(day: dt.date) -> dt.datetime:
    return timezone.make_aware(dt.datetime.combine(day, dt.time()))


def site_cluster_ids(site_id: int) -> tuple[int, ...]:
    return tuple(
        Cluster.objects.filter(site_id=site_id).order_by("pk").values_list("pk", flat=True)
    )


def team_cluster_ids(team: str, start: dt.datetime, end: dt.datetime) -> tuple[int, ...]:
    """Clusters where ``team`` held cards during [start, end)."""
    ids = (
        UsageRecord.objects.filter(account=team, start__lt=end)
        .filter(Q(end__gt=start) | Q(end__isnull=True))
        .values_list("cluster_id", flat=True)
        .distinct()
    )
    return tuple(sorted(ids))


def job_state_counts(
    cluster_ids: Sequence[int] | None, team: str | None, start: dt.datetime, end: dt.datetime
) -> list[dict]:
    """Failed, node_fail and preempted jobs per cluster that ended inside [start, end)."""
    records = UsageRecord.objects.filter(state__in=FAILURE_STATES, end__gte=start, end__lt=end)
    if cluster_ids is not None:
        records = records.filter(cluster_id__in=cluster_ids)
    if team is not None:
        records = records.filter(account=team)
    rows = (
        records.values("cluster__name", "state")
        .annotate(jobs=Count("pk"))
        .order_by("cluster__name", "state")
    )
    return [
        {"cluster": row["cluster__name"], "state": row["state"], "jobs": row["jobs"]}
        for row in rows
    ]

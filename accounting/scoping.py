"""Team scoping of accounting's own tables and reports (the rules live in `access.scoping`)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Exists, Max, Min, OuterRef, Q, QuerySet

from access.scoping import allowed_accounts, scope_rows, visible_teams
from accounting.models import UsageRecord


def scope_report(report: dict[str, Any], teams: frozenset[str] | None) -> dict[str, Any]:
    """An accounting report (utilization, chargeback) with only the given teams' rows; a
    chargeback's ``charged_cost`` per bucket is then what those rows charge."""
    if teams is None:
        return report
    rows = scope_rows(report.get("rows", []), teams)
    scoped = {**report, "rows": rows}
    if report.get("coverage"):
        scoped["coverage"] = scope_coverage(report["coverage"], teams)
    totals = report.get("totals")
    if totals and "charged_cost" in totals[0]:
        charged: dict[tuple, float] = {}
        for row in rows:
            key = (row.get("currency"), row.get("bucket_start"))
            charged[key] = charged.get(key, 0.0) + (row.get("chargeback_cost") or 0.0)
        scoped["totals"] = [
            {**total, "charged_cost": charged.get((total["currency"], total["bucket_start"]), 0.0)}
            for total in totals
        ]
    return scoped


def scope_import_jobs(queryset: QuerySet, user) -> QuerySet:
    """Import jobs a user may see and retry: for a scoped user, only jobs holding no other
    team's records, and jobs without records (failed, queued) only when they started them."""
    teams = visible_teams(user)
    if teams is None:
        return queryset
    records = UsageRecord.objects.filter(import_job=OuterRef("pk"))
    foreign = records.exclude(account__in=allowed_accounts(teams))
    return queryset.exclude(Exists(foreign)).filter(
        Exists(records) | Q(created_by_id=getattr(user, "pk", None))
    )


def scope_coverage(coverage: list[dict[str, Any]], teams: frozenset[str]) -> list[dict[str, Any]]:
    """Per-cluster coverage rows counting only these teams' records (no other team's size)."""
    spans = {
        row["cluster_id"]: row
        for row in UsageRecord.objects.filter(
            cluster_id__in=[row["cluster_id"] for row in coverage],
            account__in=allowed_accounts(teams),
        )
        .values("cluster_id")
        .annotate(
            records=Count("pk"), first_start=Min("start"), last_start=Max("start"), last=Max("end")
        )
    }
    scoped = []
    for row in coverage:
        span = spans.get(row["cluster_id"])
        if span is None:
            continue  # none of the user's records there: not even that the cluster has data
        times = [t for t in (span["last_start"], span["last"]) if t is not None]
        scoped.append(
            {
                **row,
                "records": span["records"],
                "first_start": span["first_start"],
                "last_time": max(times),
            }
        )
    return scoped


class ImportJobsAdminMixin:
    """Import jobs that hold no other team's records (:func:`scope_import_jobs`), in /admin/."""

    def get_queryset(self, request):
        return scope_import_jobs(super().get_queryset(request), request.user)

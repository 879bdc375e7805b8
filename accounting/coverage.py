"""Which part of a period the usage data covers, per cluster (the database side of the rule).

The rule itself, the covered windows and the clipping of the inventory are pure
(:mod:`engine.coverage`); this module reads the spans of the usage records and
sreport periods and words the per-cluster notes the pages and reports show.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pandas as pd
from django.db.models import Max, Min, OuterRef, Q, Subquery

from accounting.models import ImportJob, ImportKind, SreportUtilization, UsageRecord
from engine.coverage import (
    MIN_COVERED_SHARE,
    SPAN_COLUMNS,
    WINDOW_COLUMNS,
    Coverage,
    coverage_of,
    covered_windows,
)
from inventory.models import Cluster

# What `with_coverage` adds to each pool row of an analysis.
COVERAGE_COLUMNS = ("coverage_share", "coverage_text", "utilization_reason")


def _record_edge(order: str) -> Subquery:
    """A cluster's first or last record time, read from the (cluster, time) index: one seek
    per cluster instead of a scan of every record (the pages' coldest query)."""
    field = order.lstrip("-")
    records = UsageRecord.objects.filter(cluster_id=OuterRef("pk"), **{f"{field}__isnull": False})
    return Subquery(records.order_by(order).values(field)[:1])


def _latest_as_of() -> Subquery:
    """A cluster's latest import as-of time (accounting.imports.as_of), in the same query."""
    jobs = ImportJob.objects.filter(cluster_id=OuterRef("pk"), as_of__isnull=False)
    return Subquery(jobs.order_by("-as_of").values("as_of")[:1])


def usage_spans(cluster_ids: Sequence[int] | None) -> pd.DataFrame:
    """Per cluster: ``first`` record start or sreport start, ``last`` end (start if running),
    and ``as_of``, the latest as-of time of its imports, up to which running records count
    (NaT when none says one)."""
    clusters = Cluster.objects.all()
    reports = SreportUtilization.objects.all()
    if cluster_ids is not None:
        clusters = clusters.filter(pk__in=cluster_ids)
        reports = reports.filter(cluster_id__in=cluster_ids)
    rows: list[dict] = []
    as_of: dict[int, dt.datetime] = {}
    for row in clusters.annotate(
        first=_record_edge("start"),
        last_start=_record_edge("-start"),
        last_end=_record_edge("-end"),
        as_of=_latest_as_of(),
    ).values("pk", "first", "last_start", "last_end", "as_of"):
        if row["first"] is None:
            continue  # no usage records
        last = max(t for t in (row["last_start"], row["last_end"]) if t is not None)
        rows.append({"cluster": row["pk"], "first": row["first"], "last": last})
        if row["as_of"] is not None:
            as_of[row["pk"]] = row["as_of"]
    # An sreport stretches a window of usage records; alone it has no jobs to measure.
    with_records = {row["cluster"] for row in rows}
    for row in reports.values("cluster_id").annotate(
        first=Min("period_start"), last=Max("period_end")
    ):
        if row["cluster_id"] in with_records:
            rows.append({"cluster": row["cluster_id"], "first": row["first"], "last": row["last"]})
    if not rows:
        return pd.DataFrame(columns=list(SPAN_COLUMNS))
    frame = pd.DataFrame.from_records(rows)
    frame["first"] = pd.to_datetime(frame["first"], utc=True)
    frame["last"] = pd.to_datetime(frame["last"], utc=True)
    spans = frame.groupby("cluster", as_index=False)
    spans = spans.agg(first=("first", "min"), last=("last", "max"))
    spans["as_of"] = pd.to_datetime(spans["cluster"].map(as_of), utc=True)
    return spans


def coverage_windows(
    cluster_ids: Sequence[int] | None, period_start: dt.datetime, period_end: dt.datetime
) -> pd.DataFrame:
    """``cluster, covered_from, covered_until`` inside the period (rule in the engine module).

    The usage covers a cluster up to the latest as-of time of its imports, to the instant
    (the export saw the cluster until then, running jobs included: they count up to it too,
    accounting.parsing.as_of), not to the end of that day: the as-of day's available hours
    run through the as-of time only (`engine.coverage.window_end`).
    """
    spans = usage_spans(cluster_ids)
    if spans.empty:
        return pd.DataFrame(columns=list(WINDOW_COLUMNS))
    return covered_windows(spans[list(SPAN_COLUMNS)], period_start, period_end)


def with_coverage(pools: pd.DataFrame, coverage: Coverage, source: str = "") -> pd.DataFrame:
    """The pool frame with its cluster's coverage and why utilization is what it is
    (``source``: the usage source when not Slurm, `accounting.usage_sources`)."""
    return pools.assign(
        coverage_share=coverage.share,
        coverage_text=coverage.text(),
        utilization_reason=coverage.reason(source),
    )


def coverage_notes(
    inventory: pd.DataFrame,
    windows: pd.DataFrame,
    period_start: dt.datetime,
    period_end: dt.datetime,
) -> list[str]:
    """One sentence per cluster not fully covered: no data, or over which days figures run.

    ``inventory``: :func:`accounting.selectors.inventory_frame` rows (with ``cluster_name``).
    """
    # Every row's covered card-hours are at most its in-service ones: when the fleet's sums are
    # equal, every cluster is covered whole (one pass instead of one per cluster).
    fleet = coverage_of(inventory, windows, period_start, period_end)
    if fleet.period_card_hours > 0 and fleet.covered_card_hours == fleet.period_card_hours:
        return []
    notes: list[str] = []
    for cluster_id, rows in inventory.groupby("cluster", sort=False):
        own = windows[windows["cluster"] == cluster_id]
        coverage = coverage_of(rows, own, period_start, period_end)
        share = coverage.share
        if share is None or share >= 1.0 - 1e-9:
            continue
        name = rows["cluster_name"].iloc[0] if "cluster_name" in rows else cluster_id
        if coverage.covered_card_hours <= 0:
            notes.append(
                f"No usage data for cluster {name} in this period: its utilization, idle "
                "cost and losses are shown as no data, not as zero; its cost is priced from "
                "the inventory at the planned utilization and not charged to teams."
            )
        else:
            notes.append(
                f"Cluster {name}: {coverage.text()}; its utilization, idle cost and losses "
                "are over the covered days only; the cost of the other days is not charged "
                "to teams."
            )
    return sorted(notes)


def scope_coverage_summary(rows: pd.DataFrame) -> dict[str, Any] | None:
    """An analysis's coverage from its pool rows: card-day share, clusters covered, why."""
    if "coverage_share" not in rows or rows.empty:
        return None
    card_hours = rows["card_hours"].astype("float64")
    share = rows["coverage_share"].astype("float64").fillna(0.0)
    total_h = float(card_hours.sum())
    clusters = int(rows["cluster_id"].nunique())
    covered = int(rows.loc[share > 0, "cluster_id"].nunique())
    measured = int(
        rows.loc[rows["utilization_provenance"].astype(str) == "measured", "cluster_id"].nunique()
    )
    scope_share = float((share * card_hours).sum()) / total_h if total_h > 0 else None
    if clusters == 1:
        text, reason = str(rows["coverage_text"].iloc[0]), str(rows["utilization_reason"].iloc[0])
    else:
        text = (
            f"usage covers {scope_share or 0.0:.0%} of the period's card-days, "
            f"{covered} of {clusters} clusters"
        )
        reason = (
            f"utilization is measured in {measured} of {clusters} clusters (those whose usage "
            f"covers at least {MIN_COVERED_SHARE:.0%} of their card-days) and planned elsewhere"
        )
    return {
        "share": scope_share,
        "clusters": clusters,
        "clusters_covered": covered,
        "clusters_measured": measured,
        "text": text,
        "reason": reason,
    }


def import_stale_reason(job: ImportJob) -> str:
    """Why an import makes analyses stale, e.g. "usage imported for cluster alpha, 2026-11-02
    to 2026-11-19" (the span of the rows this import wrote)."""
    if job.kind == ImportKind.SREPORT:
        what, rows, first, last = (
            "sreport",
            SreportUtilization.objects,
            "period_start",
            "period_end",
        )
    else:
        what, rows, first, last = "usage", UsageRecord.objects, "start", "end"
    span = rows.filter(import_job=job).aggregate(first=Min(first), last=Max(last))
    reason = f"{what} imported for cluster {job.cluster.name}"
    if span["first"] is not None and span["last"] is not None:
        last_day = (span["last"] - dt.timedelta(microseconds=1)).date()
        reason += f", {span['first'].date():%Y-%m-%d} to {last_day:%Y-%m-%d}"
    return reason + "."


def record_spans(
    cluster_ids: Sequence[int], start: dt.datetime, end: dt.datetime
) -> dict[int, tuple[dt.datetime, dt.datetime]]:
    """Per cluster, the part of [start, end) its usage records cover (one query): from the
    first record to the last end, or to ``end`` while a job still runs. Clusters without
    records there are absent."""
    records = UsageRecord.objects.filter(cluster_id__in=cluster_ids, start__lt=end).filter(
        Q(end__gt=start) | Q(end__isnull=True)
    )
    spans = (
        records.values("cluster_id")
        .annotate(first=Min("start"), last_start=Max("start"), last_end=Max("end"))
        .order_by()
    )
    held = _running_held_until(records)
    windows = {}
    for span in spans:
        ends = [span["last_start"], span["last_end"], held.get(span["cluster_id"])]
        last = max(t for t in ends if t is not None)
        windows[span["cluster_id"]] = (max(start, span["first"]), min(end, last))
    return windows


def _running_held_until(records) -> dict[int, dt.datetime]:
    """Per cluster, how far its running records count: start + duration_h, which the import
    clipped at the export's as-of time (a running job never counts past what was exported)."""
    held: dict[int, dt.datetime] = {}
    running = records.filter(end__isnull=True).values_list("cluster_id", "start", "duration_h")
    for cluster_id, begun, duration_h in running.iterator():
        until = begun + dt.timedelta(hours=duration_h)
        held[cluster_id] = max(until, held.get(cluster_id, until))
    return held

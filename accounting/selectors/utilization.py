"""Measured utilization and effective time per scope and bucket, and coverage rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from django.db.models import Count, Max, Min

from accounting import usage_sources
from accounting.models import UsageRecord
from accounting.selectors.frames import (
    GROUP_COLUMNS,
    AccountingScope,
    ScopeInputs,
    add_labels,
    assign_accounting_pools,
    scope_inputs,
    usage_frame,
)
from core.frames import json_rows
from engine.usage import measured_utilization as engine_measured_utilization


def measured_utilization(
    scope: AccountingScope,
    by: Sequence[str],
    usage: pd.DataFrame | None = None,
    inputs: ScopeInputs | None = None,
) -> pd.DataFrame:
    """The engine's measured utilization over the scope, grouped by engine columns ``by``.

    ``usage``: a usage frame already filtered to the scope (the dashboards pass one rebuilt
    from `accounting.rollups`); by default the records are read. ``inputs``: inventory,
    downtime and sites already read for this scope's clusters and period (any granularity).
    """
    edges = scope.edges()
    inputs = inputs or scope_inputs(scope)
    inventory = inputs.inventory
    if usage is None:
        usage = usage_frame(
            scope.cluster_ids,
            scope.period_start,
            scope.period_end,
            accelerator_id=scope.accelerator_id,
            team=scope.team,
        )
    usage = assign_accounting_pools(usage, inventory)
    usage["site"] = usage["cluster"].map(inputs.sites())
    downtime = inputs.downtime
    if inventory.empty and usage.empty:
        return pd.DataFrame()
    return engine_measured_utilization(
        usage,
        inventory,
        period_start=edges[0],
        period_end=edges[-1],
        frequency=scope.granularity,  # type: ignore[arg-type]
        by=list(by),
        downtime=downtime if len(downtime) else None,
        tz=scope.tz,
    )


def utilization_report(scope: AccountingScope, inputs: ScopeInputs | None = None) -> dict[str, Any]:
    """Measured utilization and effective time per ``scope.group_by`` × bucket.

    ``utilization`` = (allocated + Down) ÷ available card-hours and ``effective_time`` =
    (allocated − lost) ÷ (allocated + Down), the engine's rule (Down is charged to effective
    time, not twice); ``allocation_share`` is the plain allocated ÷ available.
    """
    group_by = list(dict.fromkeys(scope.group_by))
    if scope.team is not None and "team" not in group_by:
        group_by.append("team")
    by = [GROUP_COLUMNS[name] for name in group_by]
    inputs = inputs or scope_inputs(scope)
    result = measured_utilization(scope, by, inputs=inputs)
    rows: list[dict[str, Any]] = []
    if not result.empty:
        labelled = add_labels(result, by)
        labelled["provenance"] = "measured"
        rows = json_rows(labelled)
    return {
        "period_start": scope.period_start,
        "period_end": scope.period_end,
        "granularity": scope.granularity,
        "group_by": group_by,
        "rows": rows,
        "coverage": coverage_rows(scope.cluster_ids),
        "coverage_notes": inputs.notes,
    }


def coverage_rows(cluster_ids: Sequence[int] | None) -> list[dict[str, Any]]:
    """Per cluster: how many records, the time span they cover and where they came from
    ("measured (Slurm)", "measured (Kubernetes)")."""
    records = UsageRecord.objects.all()
    if cluster_ids is not None:
        records = records.filter(cluster_id__in=cluster_ids)
    spans = (
        records.values("cluster_id", "cluster__name")
        .annotate(first_start=Min("start"), last_start=Max("start"), last_end=Max("end"))
        .order_by("cluster__name")
    )
    rows = list(spans.annotate(records=Count("pk")))
    sources = usage_sources.source_names([row["cluster_id"] for row in rows])
    return [
        {
            "cluster_id": row["cluster_id"],
            "cluster": row["cluster__name"],
            "records": row["records"],
            "first_start": row["first_start"],
            "last_time": max(t for t in (row["last_start"], row["last_end"]) if t is not None),
            "provenance": f"measured ({sources[row['cluster_id']]})",
        }
        for row in rows
    ]

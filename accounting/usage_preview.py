"""A usage file's preview before it is imported: what it holds and where it would go.

Like the inventory import's per-row preview, it reads the whole file with the same parser
and options as the import, stores nothing, and answers: card models found → this cluster's
cards (and which names need a gres alias), partitions → pools, accounts → teams, the time
span, counts and skipped lines; or the bad lines when the file would be refused.
"""

from __future__ import annotations

from typing import IO, Any

import pandas as pd

from accounting import services
from accounting.imports.as_of import as_of_text, note_as_of
from accounting.imports.rows import ImportCounts, cluster_context, gres_aliases
from accounting.imports.sreport import sreport_chunks
from accounting.imports.summary import skipped_lines
from accounting.models import ImportJob, ImportKind
from accounting.parsing import (
    SacctStats,
    SreportStats,
    TableStats,
    UsageValidationError,
)
from accounting.parsing.aliases import card_family, normalize_gres_type
from accounting.parsing.sreport_header import ACCOUNT_UTILIZATION
from inventory.models import NodeGroup, Pool

MAX_PREVIEW_ROWS = 50


def preview_usage(job: ImportJob, source: str | IO[bytes]) -> dict[str, Any]:
    """Preview of an unsaved import job's file (sacct, sreport, CSV or XLSX)."""
    if job.kind == ImportKind.SREPORT:
        return _preview_sreport(job, source, cluster_context(job.cluster))
    context = cluster_context(job.cluster)
    stats: SacctStats | TableStats = SacctStats() if job.kind == ImportKind.SACCT else TableStats()
    # Each chunk is folded into the running groups, so memory follows the groups, not the file.
    usage = _grouped(None)
    starts: list[pd.Timestamp] = []
    ends: list[pd.Timestamp] = []
    running = 0
    try:
        for chunk in services._usage_chunks(job, source, context, lambda _: None, stats):
            usage = _grouped(pd.concat([usage, _grouped(chunk)], ignore_index=True))
            starts.append(chunk["start"].min())
            ends.append(_held_until(chunk).max())
            running += int((chunk["state"].astype("object") == "running").sum())
    except UsageValidationError as exc:
        return {"valid": False, "issues": [str(issue) for issue in exc.issues]}
    first_start = pd.Series(starts, dtype="datetime64[us, UTC]").min()
    last_end = pd.Series(ends, dtype="datetime64[us, UTC]").max()
    partitions = set(usage["partition"]) | set(context.pool_by_partition)
    counts = ImportCounts()
    note_as_of(job, stats.as_of, counts)
    return {
        "valid": True,
        "records": int(usage["records"].sum()),
        "running": running,
        "card_hours": float(usage["card_hours"].sum()),
        "first_start": _iso(first_start),
        "last_end": _iso(last_end),
        "as_of": _iso(counts.as_of),
        "as_of_source": counts.as_of_source,
        "as_of_text": as_of_text(counts.as_of, counts.as_of_source),
        "warnings": counts.warnings,
        "cards": _cards(usage, context),
        "partitions": _partitions(usage, context),
        "teams": _teams(usage),
        "skipped": skipped_lines(stats, partitions) if isinstance(stats, SacctStats) else [],
    }


GROUP_KEYS = ["gres_type", "accelerator_model", "partition", "account"]
SREPORT_FIGURES = (
    "allocated_card_hours",
    "down_card_hours",
    "planned_down_card_hours",
    "idle_card_hours",
    "planned_card_hours",
    "reported_card_hours",
)


def _preview_sreport(job: ImportJob, source: str | IO[bytes], context) -> dict[str, Any]:
    """An sreport file read as the import reads it: its report, period and figures per TRES
    (cluster utilization) or per team (AccountUtilizationByUser)."""
    stats = SreportStats()
    try:
        frames = list(sreport_chunks(job, source, context, stats))
    except UsageValidationError as exc:
        return {"valid": False, "issues": [str(issue) for issue in exc.issues]}
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    teams = stats.report == ACCOUNT_UTILIZATION
    figure = "used_card_hours" if teams else "allocated_card_hours"
    return {
        "valid": True,
        "report": stats.report,
        "time_unit": stats.time_unit,
        "records": len(rows),
        "card_hours": float(rows[figure].sum()) if len(rows) else 0.0,
        "first_start": _iso(rows["period_start"].min()) if len(rows) else None,
        "last_end": _iso(rows["period_end"].max()) if len(rows) else None,
        "tres": [] if teams or rows.empty else _tres_rows(rows),
        "teams": _teams(rows.assign(records=1, card_hours=rows[figure])) if teams else [],
        "cards": [],
        "partitions": [],
        "skipped": [],
        "warnings": stats.warnings,
    }


def _tres_rows(rows: pd.DataFrame) -> list[dict[str, Any]]:
    sums = rows.groupby("tres_name")[list(SREPORT_FIGURES)].sum()
    return [{"tres_name": name, **row.to_dict()} for name, row in sums.iterrows()]


def _held_until(chunk: pd.DataFrame) -> pd.Series:
    """Each record's end; a running one's is as far as it counts (its start + duration_h)."""
    held = chunk["start"] + pd.to_timedelta(chunk["duration_h"], unit="h")
    return chunk["end"].fillna(held)


def _grouped(frame: pd.DataFrame | None) -> pd.DataFrame:
    """Records and card-hours per gres type, card, partition and account ("" for none)."""
    if frame is None:
        return pd.DataFrame(columns=[*GROUP_KEYS, "records", "card_hours"])
    keys = frame[GROUP_KEYS].astype("object").fillna("")
    counts = frame["records"] if "records" in frame else pd.Series(1, index=frame.index)
    summed = pd.DataFrame({"records": counts, "card_hours": frame["card_hours"]})
    return summed.groupby([keys[k] for k in GROUP_KEYS]).sum().reset_index()


def _iso(moment) -> str | None:
    return None if pd.isna(moment) else pd.Timestamp(moment).isoformat()


def _cards(usage: pd.DataFrame, context) -> list[dict[str, Any]]:
    """Each gres type found → its card in this cluster, or why it needs a gres alias."""
    cluster_models = sorted(
        set(
            NodeGroup.objects.filter(pool__cluster=context.cluster).values_list(
                "accelerator__name", flat=True
            )
        )
    )

    catalog = gres_aliases(context.cluster)
    rows = []
    grouped = usage.assign(gres_type=usage["gres_type"].replace("", "(untyped)")).groupby(
        "gres_type"
    )
    for gres_type, group in list(grouped)[:MAX_PREVIEW_ROWS]:
        model = group.loc[group["accelerator_model"] != "", "accelerator_model"]
        resolved = str(model.iloc[0]) if len(model) else None
        default = catalog.get(normalize_gres_type(str(gres_type)))
        family = card_family(default) if default else None
        candidates = [m for m in cluster_models if family and card_family(m) == family]
        if resolved and resolved in cluster_models:
            status = "ok"
        elif resolved:
            status = "not in this cluster"
        elif len(candidates) > 1:
            status = "ambiguous: choose the card with a gres alias for this cluster"
        else:
            status = "unknown: add a gres alias"
        rows.append(
            {
                "gres_type": str(gres_type),
                "card": resolved,
                "status": status,
                "candidates": candidates or cluster_models,
                "records": int(group["records"].sum()),
                "card_hours": float(group["card_hours"].sum()),
            }
        )
    return rows


def _partitions(usage: pd.DataFrame, context) -> list[dict[str, Any]]:
    pools = dict(Pool.objects.filter(cluster=context.cluster).values_list("pk", "name"))
    out = []
    for partition, group in list(usage.groupby("partition"))[:MAX_PREVIEW_ROWS]:
        pool_id = context.pool_by_partition.get(str(partition).lower(), context.single_pool)
        out.append(
            {
                "partition": partition,
                "pool": pools.get(pool_id) if pool_id is not None else None,
                "records": int(group["records"].sum()),
                "card_hours": float(group["card_hours"].sum()),
            }
        )
    return out


def _teams(usage: pd.DataFrame) -> list[dict[str, Any]]:
    sums = usage.groupby("account")[["records", "card_hours"]].sum()
    top = sums.sort_values("card_hours", ascending=False).head(MAX_PREVIEW_ROWS)
    return [
        {"team": team, "records": int(row["records"]), "card_hours": float(row["card_hours"])}
        for team, row in top.iterrows()
    ]

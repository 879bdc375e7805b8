"""A usage file's preview before it is imported: what it holds and where it would go.

Like the inventory import's per-row preview, it reads the whole file with the same parser
and options as the import, stores nothing, and answers: card models found → this cluster's
cards (and which names need a gres alias), partitions → pools, accounts → teams, the time
span, counts and skipped lines; or the bad lines when the file would be refused.
"""

from __future__ import annotations

from typing import IO, Any

import pandas as pd

from accounting.imports.summary import skipped_lines
from accounting.models import ImportJob, ImportKind
from accounting.parsing import SacctStats, TableStats, UsageValidationError
from accounting.parsing.aliases import card_family, normalize_gres_type
from inventory.models import NodeGroup, Pool

MAX_PREVIEW_ROWS = 50


def preview_usage(job: ImportJob, source: str | IO[bytes]) -> dict[str, Any]:
    """Preview of an unsaved import job's file (sacct, CSV or XLSX)."""
    from accounting import services

    if job.kind == ImportKind.SREPORT:
        raise services.ImportInputError({"kind": "Preview reads job files: sacct, CSV or XLSX."})
    context = services.cluster_context(job.cluster)
    stats: SacctStats | TableStats = SacctStats() if job.kind == ImportKind.SACCT else TableStats()
    frames: list[pd.DataFrame] = []
    columns = ["gres_type", "accelerator_model", "partition", "account", "start", "end"]
    try:
        for chunk in services._usage_chunks(job, source, context, lambda _: None, stats):
            frames.append(chunk[[*columns, "card_hours"]])
    except UsageValidationError as exc:
        return {"valid": False, "issues": [str(issue) for issue in exc.issues]}
    usage = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
    partitions = set(usage["partition"].dropna()) | set(context.pool_by_partition)
    return {
        "valid": True,
        "records": len(usage),
        "card_hours": float(usage["card_hours"].sum()) if len(usage) else 0.0,
        "first_start": _iso(usage["start"].min()) if len(usage) else None,
        "last_end": _iso(usage["end"].max()) if len(usage) else None,
        "cards": _cards(usage, context),
        "partitions": _partitions(usage, context),
        "teams": _teams(usage),
        "skipped": skipped_lines(stats, partitions) if isinstance(stats, SacctStats) else [],
    }


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
    from accounting.services import gres_aliases

    catalog = gres_aliases(context.cluster)
    rows = []
    grouped = usage.assign(gres_type=usage["gres_type"].fillna("(untyped)")).groupby(
        "gres_type", dropna=False
    )
    for gres_type, group in list(grouped)[:MAX_PREVIEW_ROWS]:
        model = group["accelerator_model"].dropna()
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
                "records": len(group),
                "card_hours": float(group["card_hours"].sum()),
            }
        )
    return rows


def _partitions(usage: pd.DataFrame, context) -> list[dict[str, Any]]:
    pools = dict(Pool.objects.filter(cluster=context.cluster).values_list("pk", "name"))
    out = []
    for partition, group in list(usage.groupby(usage["partition"].fillna("")))[:MAX_PREVIEW_ROWS]:
        pool_id = context.pool_by_partition.get(str(partition).lower(), context.single_pool)
        out.append(
            {
                "partition": partition,
                "pool": pools.get(pool_id) if pool_id is not None else None,
                "records": len(group),
                "card_hours": float(group["card_hours"].sum()),
            }
        )
    return out


def _teams(usage: pd.DataFrame) -> list[dict[str, Any]]:
    sums = usage.groupby(usage["account"].fillna(""))["card_hours"].agg(["size", "sum"])
    return [
        {"team": team, "records": int(row["size"]), "card_hours": float(row["sum"])}
        for team, row in sums.sort_values("sum", ascending=False).head(MAX_PREVIEW_ROWS).iterrows()
    ]

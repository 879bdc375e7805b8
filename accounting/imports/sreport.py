"""Store an sreport file: cluster utilization rows, or AccountUtilizationByUser team usage.

Utilization rows are checked against the inventory before they are stored: Reported
card-hours more than :data:`REPORTED_TOLERANCE_SHARE` above what the cluster's node groups
can give in the period means the report is not about these cards (a CPU or billing report,
another cluster, a wrong time unit), and the file is refused naming both numbers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

import pandas as pd

from accounting.imports import rows as import_rows
from accounting.imports import writers
from accounting.models import ImportJob, SreportUtilization
from accounting.parsing import (
    LineIssue,
    ParseProgress,
    SreportStats,
    UsageValidationError,
    iter_sreport_chunks,
)
from accounting.parsing.sreport_accounts import account_usage_frame
from accounting.parsing.sreport_header import ACCOUNT_UTILIZATION
from accounting.selectors import inventory_frame
from engine.usage import in_service_by_bucket

if TYPE_CHECKING:
    from accounting.imports.rows import ClusterContext, ImportCounts, ProgressCallback

# sreport rounds each figure, and a node added mid-period is not in our inventory history.
REPORTED_TOLERANCE_SHARE = 0.05
SREPORT_VALUE_FIELDS: tuple[str, ...] = (
    "accelerator_id",
    "allocated_card_hours",
    "down_card_hours",
    "planned_down_card_hours",
    "idle_card_hours",
    "planned_card_hours",
    "reported_card_hours",
)


def sreport_chunks(
    job: ImportJob,
    source: str | IO[bytes],
    context: ClusterContext,
    stats: SreportStats,
    **reader_options: Any,
) -> Iterator[pd.DataFrame]:
    """The job's sreport file in blocks, read with the job's options (import and preview)."""
    options = job.parse_options or {}
    return iter_sreport_chunks(
        source,
        columns=options.get("columns"),
        time_unit=options.get("time_unit"),
        period_start=job.report_period_start,
        period_end=job.report_period_end,
        aliases=context.aliases,
        timezone=job.timezone,
        stats=stats,
        **reader_options,
    )


def import_sreport(
    job: ImportJob,
    source: str | IO[bytes],
    context: ClusterContext,
    counts: ImportCounts,
    report: ProgressCallback | None,
) -> None:
    """Parse and store one sreport file inside the caller's transaction."""
    stats = SreportStats()
    last_block: list[ParseProgress] = []
    chunks = sreport_chunks(
        job,
        source,
        context,
        stats,
        max_errors=import_rows.MAX_ISSUES,
        progress=lambda block: last_block.__setitem__(slice(None), [block]),
    )
    store = _UtilizationStore(job, context, counts)
    writer = None
    for chunk in chunks:
        if stats.report == ACCOUNT_UTILIZATION:
            writer = writer or writers.usage_writer(context.cluster.pk, job.pk)
            _write_team_usage(chunk, context, job, writer)
        else:
            store.add(chunk)
        if report is not None and last_block:
            block = last_block[0]
            report(
                import_rows.ImportProgress(
                    block.bytes_read, block.total_bytes, block.lines_read, stats.rows
                )
            )
    if writer is not None:
        writer.close()
        counts.records_read = writer.written
        counts.records_created = writer.created
        counts.records_updated = writer.updated
        counts.records_unchanged = writer.unchanged
        counts.warnings.append(
            "AccountUtilizationByUser gives each user's card-hours per account over the whole "
            "period, stored as one usage record each; do not also import sacct jobs for it."
        )
    if last_block:
        counts.bytes_read = last_block[0].bytes_read
        counts.lines_read = last_block[0].lines_read
    counts.warnings.extend(stats.warnings)


def _write_team_usage(chunk: pd.DataFrame, context: ClusterContext, job: ImportJob, writer) -> None:
    usage = account_usage_frame(chunk)
    lines = usage["source_line"].to_numpy()
    issues = import_rows.ClusterNameCheck().issues(usage["cluster"], lines)
    rows, too_long = import_rows.usage_rows(usage, context, job.pk)
    if issues or too_long:
        raise UsageValidationError(issues + too_long)
    writer.write(rows)


def available_card_hours(inventory: pd.DataFrame, model: str | None, start, end) -> float | None:
    """In-service card-hours of ``inventory`` (or of one card model in it) over [start, end)."""
    if model is not None and model in set(inventory["accelerator_model"]):
        inventory = inventory[inventory["accelerator_model"] == model]
    if inventory.empty:
        return None
    edges = pd.DatetimeIndex([pd.Timestamp(start), pd.Timestamp(end)]).as_unit("us")
    hours = in_service_by_bucket(inventory, edges, ["cluster"])
    return float(hours["in_service_card_hours"].sum())


class _UtilizationStore:
    """Upserts cluster utilization rows; refuses overlapping periods and impossible totals."""

    def __init__(self, job: ImportJob, context: ClusterContext, counts: ImportCounts) -> None:
        self.job, self.context, self.counts = job, context, counts
        self.inventory = inventory_frame([context.cluster.pk])
        self.stored = {
            (row["tres_name"], row["period_start"], row["period_end"]): row
            for row in SreportUtilization.objects.filter(cluster_id=context.cluster.pk).values(
                "tres_name", "period_start", "period_end", *SREPORT_VALUE_FIELDS
            )
        }

    def add(self, chunk: pd.DataFrame) -> None:
        lines = chunk["source_line"].to_numpy()
        issues = import_rows.ClusterNameCheck().issues(chunk["cluster"], lines)
        changed: list[SreportUtilization] = []
        for position, row in enumerate(chunk.itertuples(index=False)):
            problem = self._problem(row)
            if problem:
                issues.append(LineIssue(int(lines[position]), *problem))
                continue
            record = self._changed(row)
            if record is not None:
                changed.append(record)
        if issues:
            limit = import_rows.MAX_ISSUES
            raise UsageValidationError(issues[:limit], truncated=len(issues) > limit)
        SreportUtilization.objects.bulk_create(
            changed,
            batch_size=writers.UPSERT_BATCH_ROWS,
            update_conflicts=True,
            unique_fields=["cluster", "tres_name", "period_start", "period_end"],
            update_fields=[*SREPORT_VALUE_FIELDS, "import_job"],
        )

    def _problem(self, row) -> tuple[str, str] | None:
        start, end = row.period_start.to_pydatetime(), row.period_end.to_pydatetime()
        for key in self.stored:
            same_tres = key[0] == row.tres_name
            if same_tres and key[1] < end and start < key[2] and key[1:] != (start, end):
                return (
                    "Cluster",
                    f"the period overlaps the stored report {key[1]:%Y-%m-%d %H:%M} to "
                    f"{key[2]:%Y-%m-%d %H:%M} for {row.tres_name}; delete that one first",
                )
        model = row.accelerator_model if isinstance(row.accelerator_model, str) else None
        available = available_card_hours(self.inventory, model, start, end)
        if available is None:
            self.counts.warnings.append(
                f"{row.tres_name}: the inventory has no cards for this cluster, so Reported "
                f"({row.reported_card_hours:,.0f} card-hours) was not checked"
            )
        elif row.reported_card_hours > available * (1 + REPORTED_TOLERANCE_SHARE):
            return (
                "Reported",
                f"Reported {row.reported_card_hours:,.0f} card-hours is more than "
                f"{REPORTED_TOLERANCE_SHARE:.0%} above the {available:,.0f} card-hours the "
                f"inventory of {self.context.cluster.name} has in this period: is this a GPU "
                "report of this cluster, in hours?",
            )
        return None

    def _changed(self, row) -> SreportUtilization | None:
        start, end = row.period_start.to_pydatetime(), row.period_end.to_pydatetime()
        model = row.accelerator_model
        values = {
            "accelerator_id": self.context.accelerator_ids.get(model)
            if isinstance(model, str)
            else None,
            **{name: float(getattr(row, name)) for name in SREPORT_VALUE_FIELDS[1:]},
        }
        key = (row.tres_name, start, end)
        previous = self.stored.get(key)
        self.counts.records_read += 1
        if previous is None:
            self.counts.records_created += 1
        elif any(previous[name] != values[name] for name in SREPORT_VALUE_FIELDS):
            self.counts.records_updated += 1
        else:
            self.counts.records_unchanged += 1
            return None
        self.stored[key] = {"tres_name": row.tres_name, "period_start": start, "period_end": end}
        self.stored[key].update(values)
        return SreportUtilization(
            cluster_id=self.context.cluster.pk,
            tres_name=row.tres_name,
            period_start=start,
            period_end=end,
            import_job_id=self.job.pk,
            **values,
        )

"""Usage imports: stream a parser's chunks into the database, one transaction per file.

A file is all-or-nothing: the pure parsers (`accounting.parsing`) yield validated chunks and
raise `UsageValidationError` ("line N, column X: reason") when any line is bad; every chunk
is written inside one `transaction.atomic()`, so a bad line anywhere stores nothing.

Writes are bulk upserts keyed on ``(cluster, record_key)``, never a save per row:

* PostgreSQL: ``COPY`` each chunk into a temporary table, then one
  ``INSERT ... SELECT ... ON CONFLICT DO UPDATE ... WHERE (...) IS DISTINCT FROM (...)``,
  which also tells created, updated and unchanged rows apart (``RETURNING xmax = 0``).
* SQLite: ``executemany`` of the same upsert in batches of :data:`UPSERT_BATCH_ROWS`.

Memory stays constant: one parser chunk (:data:`CHUNK_LINES` input lines) at a time.
Re-importing a file changes nothing (same keys, same values: rows are counted unchanged).

What a chunk becomes is in :mod:`accounting.imports.rows`, how it is written in
:mod:`accounting.imports.writers`; this module drives one file through them. An upload is a
durable job (core.jobs.lifecycle: queued on commit, run on a worker, run_id-guarded finish,
a failure keeping the data already stored).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import queue
import threading
import time
import uuid
import zoneinfo
from collections.abc import Callable, Iterator
from typing import IO, Any

import pandas as pd
from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.utils.text import get_valid_filename

from accounting import usage_sources
from accounting.coverage import import_stale_reason
from accounting.imports.as_of import fallback_as_of, note_as_of, store_as_of
from accounting.imports.rows import (
    MAX_ISSUES,
    ClusterContext,
    ClusterNameCheck,
    ImportCounts,
    ImportInputError,
    ImportProgress,
    ProgressCallback,
    cluster_context,
    usage_rows,
)
from accounting.imports.teams import TeamCheck, upload_refusal
from accounting.imports.upload_check import upload_layout_problem
from accounting.imports.writers import usage_writer
from accounting.models import ImportJob, ImportKind
from accounting.parsing import (
    ParseProgress,
    SacctStats,
    TableStats,
    UsageValidationError,
    iter_csv_chunks,
    iter_sacct_chunks,
    iter_slurm_json_chunks,
    iter_xlsx_chunks,
)
from accounting.parsing.layouts import LayoutError, layout_options
from accounting.parsing.slurm_json import is_slurm_json
from accounting.parsing.tabular import DEFAULT_MAX_XLSX_INFLATED_BYTES
from accounting.reader_limits import configure_readers, upload_text_problem
from accounting.signals import usage_imported
from core.faults import injected_pause
from core.jobs import lifecycle as jobs
from core.jobs.dispatch import send_or_defer
from core.jobs.limits import check_open_jobs
from core.jobs.status import JobStatus
from core.retention.files import expired_file
from core.uploads.archive import UnsafeArchive, check_xlsx_archive
from inventory.models import Cluster

logger = logging.getLogger(__name__)

DEFAULT_MAX_UPLOAD_BYTES = 1024 * 2**20
CHUNK_LINES = 50_000
# The worker writes progress at most this often (seconds) or per this many percent.
PROGRESS_INTERVAL_S = 0.5


class ImportSuperseded(Exception):
    """A newer run of the same import job exists: roll this run back and stop."""


def max_upload_bytes() -> int:
    """Upload size limit (setting ``FLEETWISE_USAGE_UPLOAD_MAX_BYTES``, default 1 GiB)."""
    return int(getattr(settings, "FLEETWISE_USAGE_UPLOAD_MAX_BYTES", DEFAULT_MAX_UPLOAD_BYTES))


# -- the import ----------------------------------------------------------------------------


def _usage_chunks(
    job: ImportJob,
    source: str | IO[bytes],
    context: ClusterContext,
    on_block: Callable[[ParseProgress], None],
    stats: SacctStats | TableStats,
) -> Iterator[pd.DataFrame]:
    options: dict[str, Any] = {
        "aliases": context.aliases,
        "partition_models": context.partition_models,
        "default_model": context.default_model,
        "timezone": job.timezone,
        "as_of": fallback_as_of(job),
        "chunk_lines": CHUNK_LINES,
        "max_errors": MAX_ISSUES,
        "progress": on_block,
        "stats": stats,
    }
    if job.kind == ImportKind.SACCT and is_slurm_json(source):
        # `sacct --json` or a slurmrestd /slurmdb/vX/jobs response: the same rules, as JSON.
        return iter_slurm_json_chunks(source, cluster=context.cluster.name, **options)
    if job.kind == ImportKind.SACCT:
        layout = job.parse_options or {}
        return iter_sacct_chunks(
            source,
            cluster=context.cluster.name,
            columns=layout.get("columns"),
            delimiter=layout.get("delimiter"),
            gpuutil_summed=layout.get("gpuutil", "summed") == "summed",
            **options,
        )
    if job.kind == ImportKind.CSV:
        return iter_csv_chunks(source, **options)
    if job.kind == ImportKind.XLSX:
        return iter_xlsx_chunks(source, **options)
    raise ValueError(f"not a usage-record kind: {job.kind}")


_DONE = object()


def prefetched(chunks: Iterator[pd.DataFrame], depth: int = 1) -> Iterator[pd.DataFrame]:
    """Iterate ``chunks`` in a background thread, ``depth`` chunks ahead of the consumer.

    The parser (numpy/pandas, releasing the GIL in its C loops) reads and validates the next
    chunk while this thread waits on the database. Memory stays bounded: at most
    ``depth`` + 2 chunks exist at once. A parser error is re-raised here, in order; when the
    consumer stops early the parser thread stops too and the parser is closed.
    """
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(item: object) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for chunk in chunks:
                if not offer((chunk, None)):
                    return
        except BaseException as exc:  # re-raised in the consumer
            offer((_DONE, exc))
            return
        offer((_DONE, None))

    worker = threading.Thread(target=produce, name="usage-parser", daemon=True)
    worker.start()
    try:
        while True:
            item, error = handoff.get()
            if item is _DONE:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        worker.join()
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def _import_usage(
    job: ImportJob,
    source: str | IO[bytes],
    context: ClusterContext,
    counts: ImportCounts,
    report: ProgressCallback | None,
) -> None:
    stats: SacctStats | TableStats = SacctStats() if job.kind == ImportKind.SACCT else TableStats()
    last_block: list[ParseProgress] = []

    def on_block(block: ParseProgress) -> None:
        last_block[:] = [block]

    writer = usage_writer(context.cluster.pk, job.pk)
    cluster_names = (
        ClusterNameCheck()
        if job.kind == ImportKind.SACCT
        else ClusterNameCheck(expected=context.cluster.name, column="cluster")
    )
    unknown_gres: set[str] = set()
    gpu_partitions = set(context.pool_by_partition)
    teams = TeamCheck.for_job(job)  # the creator's teams now: no other team's usage
    for chunk in prefetched(_usage_chunks(job, source, context, on_block, stats)):
        gpu_partitions.update(chunk["partition"].dropna().unique())
        issues = cluster_names.issues(chunk["cluster"], chunk["source_line"].to_numpy())
        issues += teams.issues(chunk) if teams is not None else []
        rows, too_long = usage_rows(chunk, context, job.pk)
        if issues or too_long:
            raise UsageValidationError(issues + too_long)
        unknown = rows["accelerator_id"].isna().to_numpy()
        if unknown.any() and len(unknown_gres) < 20:
            unknown_gres.update(rows.loc[unknown, "gres_type"].replace("", "(untyped)").unique())
        writer.write(rows)
        if report is not None and last_block:
            block = last_block[0]
            report(
                ImportProgress(
                    block.bytes_read, block.total_bytes, block.lines_read, writer.written
                )
            )
    writer.close()
    if last_block:
        counts.bytes_read = last_block[0].bytes_read
        counts.lines_read = last_block[0].lines_read
    counts.records_read = writer.written
    counts.records_created = writer.created
    counts.records_updated = writer.updated
    counts.records_unchanged = writer.unchanged
    note_as_of(job, stats.as_of, counts)
    if isinstance(stats, SacctStats):
        from accounting.imports.summary import gpu_source_warnings, skip_warnings, skipped_lines

        counts.records_skipped = stats.skipped_never_started + stats.skipped_without_gpu
        counts.skipped = skipped_lines(stats, gpu_partitions)
        counts.warnings.extend(skip_warnings(counts.skipped) + gpu_source_warnings(stats))
    else:
        counts.records_skipped = stats.skipped_pending
    if unknown_gres:
        counts.warnings.append(
            "Card model unknown for gres types "
            + ", ".join(sorted(unknown_gres)[:20])
            + ": add gres aliases or partition mappings, then import again."
        )


def import_file(
    job: ImportJob,
    source: str | IO[bytes],
    *,
    progress: ProgressCallback | None = None,
    before_commit: Callable[[ImportCounts], None] | None = None,
    queue_rollup_refresh: bool = True,
) -> ImportCounts:
    """Import one file into ``job.cluster`` in one transaction; returns what changed.

    Raises :class:`~accounting.parsing.UsageValidationError` (nothing stored) when any line
    is bad. ``before_commit`` runs inside the transaction after the last chunk (the worker
    records the outcome there, so data and status commit together). Imports into one
    cluster are serialized by a row lock on the cluster (PostgreSQL).
    ``queue_rollup_refresh``: False for a caller that rebuilds the rollups itself once its
    files are in (a bulk loader), instead of a worker refresh per file.
    """
    # An upload is held to the upload limit while read too; a command's file to lines only.
    configure_readers(max_bytes=max_upload_bytes() if job.file else None)
    context = cluster_context(job.cluster)
    counts = ImportCounts()
    with transaction.atomic():
        list(Cluster.all_objects.select_for_update().filter(pk=job.cluster_id).values_list("pk"))
        if job.kind == ImportKind.SREPORT:
            from accounting.imports.sreport import import_sreport

            import_sreport(job, source, context, counts, progress)
        else:
            _import_usage(job, source, context, counts, progress)
            store_as_of(job, counts)
        if counts.records_created or counts.records_updated:
            # Analyses of this cluster now have new measured inputs: say which.
            usage_imported.send(
                ImportJob, cluster_id=job.cluster_id, reason=import_stale_reason(job)
            )
            from accounting.rollups import queue_refresh

            if queue_rollup_refresh:
                queue_refresh([job.cluster_id])  # the dashboards' daily sums, after the commit
        if before_commit is not None:
            before_commit(counts)
    return counts


# -- import jobs (uploads run by a worker) -------------------------------------------------


def _validate_timezone(name: str, errors: dict[str, str]) -> None:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        errors["timezone"] = f'Unknown time zone "{name}"; use an IANA name such as UTC.'


def _refuse_when_busy(user) -> None:
    """A user with too many imports in flight is refused (429) before the file is looked at."""
    limit = settings.FLEETWISE_MAX_OPEN_IMPORTS_PER_USER
    check_open_jobs(ImportJob, "created_by", user, limit=limit, what="usage import")


@transaction.atomic
def create_import_job(
    *,
    kind: str,
    cluster: Cluster,
    upload=None,
    source_name: str = "",
    size_bytes: int | None = None,
    timezone_name: str = "UTC",
    exported_at: dt.datetime | None = None,
    report_period_start: dt.datetime | None = None,
    report_period_end: dt.datetime | None = None,
    parse_options: dict[str, Any] | None = None,
    user=None,
    queue: bool = True,
) -> ImportJob:
    """Record an import (an uploaded file, or a path for the command) and queue its run;
    ``parse_options`` (columns, columns_preset, delimiter, time_unit) are checked by
    :func:`accounting.parsing.layouts.layout_options`. JobLimitReached: the user is busy."""
    _refuse_when_busy(user)
    errors: dict[str, str] = {}
    try:
        layout = layout_options(kind, **(parse_options or {}))
    except LayoutError as exc:
        errors.update(exc.errors)
    if kind not in ImportKind.values:
        errors["kind"] = f"Must be one of {', '.join(ImportKind.values)}."
    _validate_timezone(timezone_name, errors)
    # One source kind per cluster (docs/kubernetes-usage.md): refused now, not in the worker.
    if refusal := usage_sources.upload_refusal(cluster):
        errors["cluster"] = refusal
    if upload is not None:
        size = upload.size or 0
        if problem := _file_problem(upload, kind, size):
            errors["file"] = problem
    else:
        size = size_bytes or 0
    if (report_period_start is None) != (report_period_end is None):
        errors["report_period_end"] = "Give both ends of the report period, or neither."
    elif report_period_start and report_period_end and report_period_end <= report_period_start:
        errors["report_period_end"] = "The report period must end after it starts."
    if not errors and upload is not None:
        # Kind, layout, delimiter and header: answered now, not by the worker (a 400).
        period_given = report_period_start is not None
        if refused := upload_layout_problem(upload, kind, layout, period_given=period_given):
            errors["file"] = refused
    if errors:
        raise ImportInputError(errors)
    job = ImportJob(
        kind=kind,
        cluster=cluster,
        source_name=(source_name or getattr(upload, "name", "") or "")[:255],
        size_bytes=size,
        timezone=timezone_name,
        exported_at=exported_at,
        report_period_start=report_period_start,
        report_period_end=report_period_end,
        parse_options=layout,
        created_by=user if user is not None and user.is_authenticated else None,
    )
    if upload is not None:
        _refuse_other_teams(job, upload)
        # A fresh, safe name: the user's file name only survives as a readable suffix.
        try:
            safe_name = get_valid_filename(os.path.basename(job.source_name))[-80:]
        except SuspiciousFileOperation:
            safe_name = "usage"
        job.file.save(f"{uuid.uuid4().hex}-{safe_name}", upload, save=False)
    job.save()
    if queue:
        _queue(job)
    return job


def _file_problem(upload, kind: str, size: int) -> str | None:
    """Why an uploaded file is refused at once (empty, too large, not text, an unsafe XLSX)."""
    if size == 0:
        return "The file is empty."
    if size > max_upload_bytes():
        return f"The file is larger than {max_upload_bytes() // 2**20} MB."
    if problem := upload_text_problem(upload, kind):
        return f"The file is {problem}."
    if kind == ImportKind.XLSX:
        # Refuse a zip bomb (or a non-workbook) now, not in the worker after storing it.
        try:
            check_xlsx_archive(upload, max_uncompressed_bytes=DEFAULT_MAX_XLSX_INFLATED_BYTES)
        except UnsafeArchive as exc:
            return f"The XLSX file was refused: {exc}."
    return None


def _refuse_other_teams(job: ImportJob, upload) -> None:
    """A team-scoped creator's file may hold only their teams' usage (400 naming the others)."""

    def chunks() -> Iterator[pd.DataFrame]:
        stats = SacctStats() if job.kind == ImportKind.SACCT else TableStats()
        return _usage_chunks(job, upload, cluster_context(job.cluster), lambda _: None, stats)

    refusal = upload_refusal(job, upload, chunks)
    if refusal:
        raise ImportInputError({"file": refusal})


def _queue(job: ImportJob) -> None:
    # After commit; a broker outage leaves it queued and marked, sent when the broker is back.
    send_or_defer(job)


@transaction.atomic
def retry_import(job: ImportJob) -> ImportJob:
    """Run a failed (or stuck) import again under a new run_id; its file is kept."""
    job = ImportJob.objects.select_for_update().get(pk=job.pk)
    if not job.file:
        expired = expired_file(job, "file")
        if expired is not None:  # the retention task deleted it (core.retention)
            raise ImportInputError({"file": f"{expired.message} Upload it again."})
        raise ImportInputError({"file": "This import came from the command line; run it again."})
    job.issues = []
    return jobs.queue(job)


def current_run(job_id: int, run_id: str):
    """The import job rows of this run only: empty once a newer run superseded it."""
    return jobs.current_run(ImportJob, job_id, run_id)


def mark_running(job_id: int, run_id: str) -> bool:
    return jobs.mark_running(ImportJob, job_id, run_id, progress=1)


class ProgressRecorder:
    """Writes an import's progress where other sessions can see it during the transaction.

    On PostgreSQL it uses a second, autocommit connection (the import's own transaction is
    invisible until it commits). SQLite allows one writer at a time, so there the progress
    jumps from 1 to 100 when the transaction commits.
    """

    def __init__(self, job_id: int, run_id: str) -> None:
        self.job_id, self.run_id = job_id, run_id
        self.side = (
            connections.create_connection(DEFAULT_DB_ALIAS)
            if connection.vendor == "postgresql"
            else None
        )
        self.last_write = 0.0
        self.last_percent = -1

    def __call__(self, progress: ImportProgress) -> None:
        self.write(progress)
        injected_pause("IMPORT_CHUNK_DELAY_S")

    def write(self, progress: ImportProgress) -> None:
        if self.side is None:
            return
        now = time.monotonic()
        percent = max(1, progress.percent)
        if percent == self.last_percent or now - self.last_write < PROGRESS_INTERVAL_S:
            return
        self.last_write, self.last_percent = now, percent
        table = self.side.ops.quote_name(ImportJob._meta.db_table)
        with self.side.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET progress = %s, bytes_read = %s, lines_read = %s "  # noqa: S608  # nosec B608
                "WHERE id = %s AND run_id = %s AND status = %s",
                [
                    percent,
                    progress.bytes_read,
                    progress.lines_read,
                    self.job_id,
                    uuid.UUID(self.run_id),
                    JobStatus.RUNNING,
                ],
            )

    def close(self) -> None:
        if self.side is not None:
            self.side.close()


def record_success(job_id: int, run_id: str, counts: ImportCounts) -> None:
    """Record success inside the import's transaction; a superseded run rolls back."""
    recorded = jobs.finish(
        ImportJob,
        job_id,
        run_id,
        issues=[],
        warnings=counts.warnings,
        bytes_read=counts.bytes_read,
        lines_read=counts.lines_read,
        records_read=counts.records_read,
        records_created=counts.records_created,
        records_updated=counts.records_updated,
        records_unchanged=counts.records_unchanged,
        records_skipped=counts.records_skipped,
        skipped_lines=counts.skipped,
    )
    if not recorded:
        # Superseded, or a redelivered copy of a run that already succeeded: roll back.
        raise ImportSuperseded


def fail(job_id: int, run_id: str, reason: str, issues: list[str] | None = None) -> None:
    """Record why a run failed; usage stored by earlier imports stays as it was."""
    jobs.fail(ImportJob, job_id, run_id, reason, issues=issues or [])


def run_import_job(job_id: int, run_id: str) -> dict[str, Any]:
    """What the worker does for one run: import, then record success or why it failed.

    Idempotent: a finished or superseded run is skipped, and a redelivered run re-imports
    the same file, which upserts the same rows.
    """
    job = current_run(job_id, run_id).select_related("cluster").first()
    if job is None:
        return {"skipped": "superseded or deleted"}
    if job.status == JobStatus.SUCCEEDED:
        return {"skipped": "already finished"}
    if not mark_running(job_id, run_id):
        return {"skipped": "already finished"}
    job.refresh_from_db(fields=["status", "started_at", "progress"])
    recorder = ProgressRecorder(job_id, run_id)
    try:
        with job.file.open("rb") as handle:
            counts = import_file(
                job,
                handle,
                progress=recorder,
                before_commit=lambda counts: record_success(job_id, run_id, counts),
            )
    except UsageValidationError as exc:
        fail(job_id, run_id, str(exc), [str(issue) for issue in exc.issues])
        return {"failed": "validation", "issues": len(exc.issues)}
    except ImportSuperseded:
        return {"skipped": "superseded"}
    finally:
        recorder.close()
    return {
        "import_job_id": job_id,
        "status": "succeeded",
        "records_created": counts.records_created,
        "records_updated": counts.records_updated,
        "records_unchanged": counts.records_unchanged,
    }

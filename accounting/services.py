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

The upload lifecycle (queue on commit, run on a worker, progress, run_id-guarded finish,
failure keeping the data already stored) follows `planner.services` for analyses.
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
import logging
import os
import queue
import threading
import time
import uuid
import zoneinfo
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import pandas as pd
from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.text import get_valid_filename

from accounting.coverage import import_stale_reason
from accounting.models import (
    GresAlias,
    ImportJob,
    ImportKind,
    ImportStatus,
    PartitionMapping,
    UsageRecord,
)
from accounting.parsing import (
    DEFAULT_GRES_ALIASES,
    LineIssue,
    ParseProgress,
    SacctStats,
    TableStats,
    UsageValidationError,
    iter_csv_chunks,
    iter_sacct_chunks,
    iter_xlsx_chunks,
    normalize_gres_type,
)
from accounting.parsing.aliases import fit_aliases_to_cluster
from accounting.parsing.archive import UnsafeArchive, check_xlsx_archive
from accounting.parsing.layouts import LayoutError, layout_options
from accounting.parsing.tabular import DEFAULT_MAX_XLSX_INFLATED_BYTES
from accounting.reader_limits import configure_readers, upload_text_problem
from config.dispatch import send_or_defer
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool
from planner import services as planner_services

logger = logging.getLogger(__name__)

DEFAULT_MAX_UPLOAD_BYTES = 1024 * 2**20
CHUNK_LINES = 50_000
UPSERT_BATCH_ROWS = 5_000
MAX_ISSUES = 50
# The worker writes progress at most this often (seconds) or per this many percent.
PROGRESS_INTERVAL_S = 0.5


class ImportInputError(ValueError):
    """A bad import request; ``errors`` maps each field to why (a 400 in the API)."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{key}: {value}" for key, value in errors.items()))
        self.errors = errors


class ImportSuperseded(Exception):
    """A newer run of the same import job exists: roll this run back and stop."""


def max_upload_bytes() -> int:
    """Upload size limit (setting ``FLEETWISE_USAGE_UPLOAD_MAX_BYTES``, default 1 GiB)."""
    return int(getattr(settings, "FLEETWISE_USAGE_UPLOAD_MAX_BYTES", DEFAULT_MAX_UPLOAD_BYTES))


@dataclass(frozen=True)
class ImportProgress:
    """Cumulative progress of one import: feed ``bytes_read`` to a bar, ``percent`` to a job."""

    bytes_read: int
    total_bytes: int | None
    lines_read: int
    records_written: int

    @property
    def percent(self) -> int:
        if not self.total_bytes:
            return 0
        return min(99, int(100 * self.bytes_read / self.total_bytes))


ProgressCallback = Callable[[ImportProgress], None]


@dataclass
class ImportCounts:
    """What one import did. ``records_read`` counts records after in-file de-duplication."""

    bytes_read: int = 0
    lines_read: int = 0
    records_read: int = 0
    records_created: int = 0
    records_updated: int = 0
    records_unchanged: int = 0
    records_skipped: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# -- lookups -------------------------------------------------------------------------------


def find_cluster(reference: str | int) -> Cluster:
    """A cluster by id, by ``name`` (when unique) or by ``site/name``."""
    text = str(reference).strip()
    if text.isdecimal():
        cluster = Cluster.objects.select_related("site").filter(pk=int(text)).first()
        if cluster is None:
            raise ImportInputError({"cluster": f"No cluster with id {text}."})
        return cluster
    site_name, _, cluster_name = text.rpartition("/")
    matches = Cluster.objects.select_related("site").filter(name=cluster_name.strip())
    if site_name:
        matches = matches.filter(site__name=site_name.strip())
    found = list(matches[:2])
    if not found:
        raise ImportInputError({"cluster": f'No cluster named "{text}".'})
    if len(found) > 1:
        raise ImportInputError(
            {"cluster": f'Several sites have a cluster named "{text}"; write "site/name".'}
        )
    return found[0]


def gres_aliases(cluster: Cluster | None = None) -> dict[str, str]:
    """The parser's default alias table with the user's rows (GresAlias) winning; with a
    cluster, its own rows win over the rows for all clusters."""
    table = {normalize_gres_type(key): model for key, model in DEFAULT_GRES_ALIASES.items()}
    rows = GresAlias.objects.filter(cluster__isnull=True)
    if cluster is not None:
        rows = rows | GresAlias.objects.filter(cluster=cluster)
    ordered = rows.order_by(F("cluster_id").asc(nulls_first=True))
    for gres_type, model in ordered.values_list("gres_type", "accelerator__name"):
        table[normalize_gres_type(gres_type)] = model
    return table


@dataclass(frozen=True)
class ClusterContext:
    """What the import needs to know about the target cluster, read once per file."""

    cluster: Cluster
    aliases: dict[str, str]
    partition_models: dict[str, str]
    default_model: str | None
    accelerator_ids: dict[str, int]
    pool_by_partition: dict[str, int]
    pool_by_accelerator: dict[int, int]
    single_pool: int | None


def cluster_context(cluster: Cluster) -> ClusterContext:
    """Partition → pool/card rules and the alias table for one cluster.

    A record's pool is, in order: the PartitionMapping row of its partition; the pool named
    like the partition (case-insensitive); the only pool of the cluster holding its card
    model; the cluster's only pool; else unknown (null).
    """
    pools = dict(Pool.objects.filter(cluster=cluster).values_list("name", "pk"))
    pool_by_partition = {name.lower(): pk for name, pk in pools.items()}
    partition_models: dict[str, str] = {}
    for partition, pool_id, model in PartitionMapping.objects.filter(cluster=cluster).values_list(
        "partition", "pool_id", "accelerator__name"
    ):
        if pool_id is not None:
            pool_by_partition[partition.lower()] = pool_id
        if model:
            partition_models[partition] = model
    holders: dict[int, set[int]] = {}
    models_in_cluster: set[str] = set()
    for pool_id, accelerator_id, name in NodeGroup.objects.filter(
        pool__cluster=cluster
    ).values_list("pool_id", "accelerator_id", "accelerator__name"):
        holders.setdefault(accelerator_id, set()).add(pool_id)
        models_in_cluster.add(name)
    own = GresAlias.objects.filter(Q(cluster__isnull=True) | Q(cluster=cluster))
    user_keys = {normalize_gres_type(key) for key in own.values_list("gres_type", flat=True)}
    return ClusterContext(
        cluster=cluster,
        aliases=fit_aliases_to_cluster(gres_aliases(cluster), models_in_cluster, keep=user_keys),
        partition_models=partition_models,
        # Untyped gres/gpu=N in a one-model cluster can only be that model.
        default_model=next(iter(models_in_cluster)) if len(models_in_cluster) == 1 else None,
        accelerator_ids=dict(AcceleratorModel.objects.values_list("name", "pk")),
        pool_by_partition=pool_by_partition,
        pool_by_accelerator={
            accelerator: next(iter(ids)) for accelerator, ids in holders.items() if len(ids) == 1
        },
        single_pool=next(iter(pools.values())) if len(pools) == 1 else None,
    )


# -- chunk -> database rows ----------------------------------------------------------------

# Database columns of UsageRecord written by an import, in upsert order.
USAGE_DB_COLUMNS: tuple[str, ...] = (
    "cluster_id",
    "record_key",
    "pool_id",
    "job_id",
    "job_label",
    "parent_job_id",
    "account",
    "user",
    "partition",
    "accelerator_id",
    "gres_type",
    "mig_profile",
    "cards",
    "nodes",
    "submit",
    "start",
    "end",
    "duration_h",
    "card_hours",
    "state",
    "scheduler_state",
    "gpu_utilization",
    "tokens_per_s",
    "model_params",
    "mfu",
    "import_job_id",
)
UPSERT_KEY: tuple[str, str] = ("cluster_id", "record_key")
# Columns whose change makes a row "updated"; import_job_id follows along without counting.
COMPARED_COLUMNS: tuple[str, ...] = tuple(
    c for c in USAGE_DB_COLUMNS if c not in (*UPSERT_KEY, "import_job_id")
)
TEXT_COLUMNS: tuple[str, ...] = (
    "record_key",
    "job_id",
    "job_label",
    "parent_job_id",
    "account",
    "user",
    "partition",
    "gres_type",
    "mig_profile",
    "state",
    "scheduler_state",
)
DATETIME_COLUMNS: tuple[str, ...] = ("submit", "start", "end")
# The usage chunk's column for each database column that is renamed or derived.
CHUNK_COLUMN_LABELS = {"record_key": "JobID", "account": "Account", "user": "User"}


def _max_lengths() -> dict[str, int]:
    return {
        name: UsageRecord._meta.get_field(name).max_length
        for name in TEXT_COLUMNS
        if UsageRecord._meta.get_field(name).max_length
    }


class _ClusterNameCheck:
    """Every record of one file must come from one cluster.

    Slurm output (sacct, sreport) may name the cluster as Slurm knows it, which can differ
    from the inventory's name, so only consistency is checked. A CSV or XLSX file is written
    for Fleetwise: its ``cluster`` column must name the cluster being imported into.
    """

    def __init__(self, expected: str | None = None, column: str = "Cluster") -> None:
        self.expected = expected
        self.name: str | None = expected
        self.column = column

    def issues(self, names: pd.Series, lines: np.ndarray) -> list[LineIssue]:
        if names.empty:
            return []
        if self.name is None:
            self.name = str(names.iloc[0])
        other = (names != self.name).to_numpy()
        if self.expected is not None:
            reason = "'{name}' is not the cluster being imported into ('" + self.name + "')"
        else:
            reason = (
                "the file mixes scheduler clusters ('" + self.name + "' and '{name}'); "
                "import one cluster per file (sacct -M <name>)"
            )
        return [
            LineIssue(int(line), self.column, reason.format(name=name))
            for line, name in zip(lines[other][:MAX_ISSUES], names[other][:MAX_ISSUES], strict=True)
        ]


def usage_rows(chunk: pd.DataFrame, context: ClusterContext, import_job_id: int | None):
    """A parser chunk → (frame of :data:`USAGE_DB_COLUMNS`, issues of values too long).

    Duplicate ``record_key`` values inside the chunk keep the last one (a later line of
    the same run wins, as a later import would).
    """
    chunk = chunk.drop_duplicates("record_key", keep="last")
    accelerator_id = chunk["accelerator_model"].map(context.accelerator_ids).astype("Int64")
    pool_id = chunk["partition"].str.lower().map(context.pool_by_partition).astype("Int64")
    pool_id = pool_id.fillna(accelerator_id.map(context.pool_by_accelerator).astype("Int64"))
    if context.single_pool is not None:
        pool_id = pool_id.fillna(context.single_pool)
    rows = pd.DataFrame(
        {
            "cluster_id": np.full(len(chunk), context.cluster.pk, dtype=np.int64),
            "record_key": chunk["record_key"],
            "pool_id": pool_id,
            "job_id": chunk["job_id"],
            "job_label": chunk["job_label"],
            "parent_job_id": chunk["parent_job_id"],
            "account": chunk["account"],
            "user": chunk["user"],
            "partition": chunk["partition"],
            "accelerator_id": accelerator_id,
            "gres_type": chunk["gres_type"],
            "mig_profile": chunk["mig_profile"],
            "cards": chunk["cards"],
            "nodes": chunk["nodes"],
            "submit": chunk["submit"],
            "start": chunk["start"],
            "end": chunk["end"],
            "duration_h": chunk["duration_h"],
            "card_hours": chunk["card_hours"],
            "state": chunk["state"].astype("str"),
            "scheduler_state": chunk["scheduler_state"],
            "gpu_utilization": chunk["gpu_utilization"],
            "tokens_per_s": chunk["tokens_per_s"],
            "model_params": chunk["model_params"],
            "mfu": chunk["mfu"],
            "import_job_id": pd.array([import_job_id] * len(chunk), dtype="Int64"),
        }
    ).reset_index(drop=True)
    lines = chunk["source_line"].to_numpy()
    issues: list[LineIssue] = []
    for name, limit in _max_lengths().items():
        text = rows[name].fillna("")
        rows[name] = text
        too_long = (text.str.len() > limit).to_numpy()
        for position in np.flatnonzero(too_long)[:MAX_ISSUES]:
            column = CHUNK_COLUMN_LABELS.get(name, name)
            issues.append(
                LineIssue(int(lines[position]), column, f"longer than {limit} characters")
            )
    return rows, issues


def _sqlite_datetimes(values: pd.Series) -> list[str | None]:
    """UTC datetimes as Django's SQLite backend stores them (``str(naive datetime)``)."""
    naive = values.dt.tz_convert("UTC").dt.tz_localize(None)
    whole = naive.dt.strftime("%Y-%m-%d %H:%M:%S")
    fractional = naive.dt.strftime("%Y-%m-%d %H:%M:%S.%f")
    text = whole.where(naive.dt.microsecond.fillna(0).to_numpy() == 0, fractional)
    return text.astype(object).where(values.notna(), None).tolist()


def _python_column(values: pd.Series) -> list[Any]:
    """One column as DB-API parameters: NaN/NA/NaT → None, numpy scalars → Python."""
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        return _sqlite_datetimes(values)
    as_object = values.astype(object)
    return as_object.where(values.notna(), None).tolist()


class UsageWriter:
    """Upserts usage rows chunk by chunk inside the caller's transaction."""

    def __init__(self, db_connection) -> None:
        self.connection = db_connection
        self.quote = db_connection.ops.quote_name
        self.table = self.quote(UsageRecord._meta.db_table)
        self.created = 0
        self.updated = 0
        self.written = 0

    def _set_clause(self, excluded: str) -> str:
        return ", ".join(
            f"{self.quote(c)} = {excluded}.{self.quote(c)}"
            for c in USAGE_DB_COLUMNS
            if c not in UPSERT_KEY
        )

    def _row(self, prefix: str) -> str:
        return "(" + ", ".join(f"{prefix}.{self.quote(c)}" for c in COMPARED_COLUMNS) + ")"

    def write(self, rows: pd.DataFrame) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Finish counting; called once after the last chunk."""

    @property
    def unchanged(self) -> int:
        return self.written - self.created - self.updated


class PostgresUsageWriter(UsageWriter):
    """COPY into a temporary table, then one INSERT ... ON CONFLICT per chunk.

    Cheap to send: the constant cluster and import ids are SQL literals, not COPY columns,
    and times travel as integer microseconds (formatting datetimes as text costs more than
    the rest of the CSV). Foreign keys are checked per statement (``SET CONSTRAINTS ALL
    IMMEDIATE``) instead of all at COMMIT, so the server checks them while the next chunk is
    being parsed.
    """

    STAGE = "accounting_usage_stage"

    def __init__(self, db_connection, cluster_id: int, import_job_id: int | None) -> None:
        super().__init__(db_connection)
        quote = self.quote
        self.copy_columns = [
            c for c in USAGE_DB_COLUMNS if c not in ("cluster_id", "import_job_id")
        ]
        staged = ", ".join(
            f"0::bigint AS {quote(c)}" if c in DATETIME_COLUMNS else quote(c)
            for c in self.copy_columns
        )
        with db_connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(f"DROP TABLE IF EXISTS {self.STAGE}")
            cursor.execute(
                f"CREATE TEMPORARY TABLE {self.STAGE} ON COMMIT DROP AS "  # noqa: S608  # nosec B608
                f"SELECT {staged} FROM {self.table} WITH NO DATA"
            )
        text_columns = ", ".join(quote(c) for c in TEXT_COLUMNS)
        self.copy_sql = (
            f"COPY {self.STAGE} ({', '.join(quote(c) for c in self.copy_columns)}) "
            f"FROM STDIN WITH (FORMAT csv, FORCE_NOT_NULL ({text_columns}))"
        )
        literals = {
            "cluster_id": str(int(cluster_id)),
            "import_job_id": "NULL" if import_job_id is None else str(int(import_job_id)),
        }
        select = ", ".join(
            literals[c]
            if c in literals
            else f"TIMESTAMPTZ 'epoch' + s.{quote(c)} * INTERVAL '1 microsecond'"
            if c in DATETIME_COLUMNS
            else f"s.{quote(c)}"
            for c in USAGE_DB_COLUMNS
        )
        columns = ", ".join(quote(c) for c in USAGE_DB_COLUMNS)
        key = ", ".join(quote(c) for c in UPSERT_KEY)
        self.upsert_sql = (
            # Identifiers only, from model metadata and quoted; the rows go through COPY.
            f"WITH changed AS (INSERT INTO {self.table} AS t ({columns}) "  # noqa: S608  # nosec B608
            f"SELECT {select} FROM {self.STAGE} AS s "
            f"ON CONFLICT ({key}) DO UPDATE SET {self._set_clause('EXCLUDED')} "
            f"WHERE {self._row('t')} IS DISTINCT FROM {self._row('EXCLUDED')} "
            "RETURNING (xmax = 0) AS inserted) "
            "SELECT COUNT(*) FILTER (WHERE inserted), COUNT(*) FILTER (WHERE NOT inserted) "
            "FROM changed"
        )

    def write(self, rows: pd.DataFrame) -> None:
        if rows.empty:
            return
        staged = rows[self.copy_columns].copy()
        for name in DATETIME_COLUMNS:
            staged[name] = _epoch_microseconds(staged[name])
        buffer = io.StringIO()
        staged.to_csv(buffer, header=False, index=False, na_rep="", lineterminator="\n")
        with self.connection.cursor() as cursor:
            with cursor.cursor.copy(self.copy_sql) as copy:
                copy.write(buffer.getvalue())
            cursor.execute(self.upsert_sql)
            created, updated = cursor.fetchone()
            cursor.execute(f"TRUNCATE {self.STAGE}")
        self.created += created
        self.updated += updated
        self.written += len(rows)


def _epoch_microseconds(values: pd.Series) -> pd.Series:
    """Aware datetimes → integer microseconds since 1970 UTC (nullable)."""
    naive = values.astype("datetime64[us, UTC]").dt.tz_localize(None)
    micros = naive.to_numpy().view("int64")
    return pd.Series(pd.array(micros, dtype="Int64"), index=values.index).mask(values.isna())


class SqliteUsageWriter(UsageWriter):
    """``executemany`` of an upsert in batches; SQLite counts changed rows, not no-op ones."""

    def __init__(self, db_connection, cluster_id: int) -> None:
        super().__init__(db_connection)
        self.cluster_id = cluster_id
        columns = ", ".join(self.quote(c) for c in USAGE_DB_COLUMNS)
        placeholders = ", ".join(["%s"] * len(USAGE_DB_COLUMNS))
        key = ", ".join(self.quote(c) for c in UPSERT_KEY)
        self.upsert_sql = (
            f"INSERT INTO {self.table} ({columns}) VALUES ({placeholders}) "  # noqa: S608  # nosec B608
            f"ON CONFLICT ({key}) DO UPDATE SET {self._set_clause('excluded')} "
            f"WHERE {self._row(self.table)} IS NOT {self._row('excluded')}"
        )
        self.rows_before = self._count()
        self.changed = 0

    def _count(self) -> int:
        return UsageRecord.objects.filter(cluster_id=self.cluster_id).count()

    def write(self, rows: pd.DataFrame) -> None:
        if rows.empty:
            return
        columns = [_python_column(rows[name]) for name in USAGE_DB_COLUMNS]
        records = zip(*columns, strict=True)
        with self.connection.cursor() as cursor:
            while batch := list(itertools.islice(records, UPSERT_BATCH_ROWS)):
                cursor.executemany(self.upsert_sql, batch)
                self.changed += max(cursor.rowcount, 0)
        self.written += len(rows)

    def close(self) -> None:
        self.created = self._count() - self.rows_before
        self.updated = self.changed - self.created


def usage_writer(cluster_id: int, import_job_id: int | None) -> UsageWriter:
    if connection.vendor == "postgresql":
        return PostgresUsageWriter(connection, cluster_id, import_job_id)
    if connection.vendor == "sqlite":
        return SqliteUsageWriter(connection, cluster_id)
    raise NotImplementedError(f"usage import does not support {connection.vendor}")


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
        "as_of": job.exported_at,
        "chunk_lines": CHUNK_LINES,
        "max_errors": MAX_ISSUES,
        "progress": on_block,
        "stats": stats,
    }
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
        _ClusterNameCheck()
        if job.kind == ImportKind.SACCT
        else _ClusterNameCheck(expected=context.cluster.name, column="cluster")
    )
    unknown_gres: set[str] = set()
    gpu_partitions = set(context.pool_by_partition)
    for chunk in prefetched(_usage_chunks(job, source, context, on_block, stats)):
        gpu_partitions.update(chunk["partition"].dropna().unique())
        issues = cluster_names.issues(chunk["cluster"], chunk["source_line"].to_numpy())
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
) -> ImportCounts:
    """Import one file into ``job.cluster`` in one transaction; returns what changed.

    Raises :class:`~accounting.parsing.UsageValidationError` (nothing stored) when any line
    is bad. ``before_commit`` runs inside the transaction after the last chunk (the worker
    records the outcome there, so data and status commit together). Imports into one
    cluster are serialized by a row lock on the cluster (PostgreSQL).
    """
    # An upload is held to the upload limit while read too; a command's file to lines only.
    configure_readers(max_bytes=max_upload_bytes() if job.file else None)
    context = cluster_context(job.cluster)
    counts = ImportCounts()
    with transaction.atomic():
        list(Cluster.objects.select_for_update().filter(pk=job.cluster_id).values_list("pk"))
        if job.kind == ImportKind.SREPORT:
            from accounting.imports.sreport import import_sreport

            import_sreport(job, source, context, counts, progress)
        else:
            _import_usage(job, source, context, counts, progress)
        if counts.records_created or counts.records_updated:
            # Analyses of this cluster now have new measured inputs: say which.
            planner_services.mark_stale("cluster", [job.cluster_id], import_stale_reason(job))
            from accounting.rollups import queue_refresh

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
    """Record an import (an uploaded file, or a path for the command) and queue its run.

    ``parse_options`` (columns, columns_preset, delimiter, time_unit) are checked by
    :func:`accounting.parsing.layouts.layout_options`.
    """
    errors: dict[str, str] = {}
    try:
        layout = layout_options(kind, **(parse_options or {}))
    except LayoutError as exc:
        errors.update(exc.errors)
    if kind not in ImportKind.values:
        errors["kind"] = f"Must be one of {', '.join(ImportKind.values)}."
    _validate_timezone(timezone_name, errors)
    if upload is not None:
        size = upload.size or 0
        if size == 0:
            errors["file"] = "The file is empty."
        elif size > max_upload_bytes():
            errors["file"] = f"The file is larger than {max_upload_bytes() // 2**20} MB."
        elif problem := upload_text_problem(upload, kind):
            errors["file"] = f"The file is {problem}."
        elif kind == ImportKind.XLSX:
            # Refuse a zip bomb (or a non-workbook) now, not in the worker after storing it.
            try:
                check_xlsx_archive(upload, max_uncompressed_bytes=DEFAULT_MAX_XLSX_INFLATED_BYTES)
            except UnsafeArchive as exc:
                errors["file"] = f"The XLSX file was refused: {exc}."
    else:
        size = size_bytes or 0
    if (report_period_start is None) != (report_period_end is None):
        errors["report_period_end"] = "Give both ends of the report period, or neither."
    elif report_period_start and report_period_end and report_period_end <= report_period_start:
        errors["report_period_end"] = "The report period must end after it starts."
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


def _queue(job: ImportJob) -> None:
    # After commit; a broker outage leaves it queued and marked, sent when the broker is back.
    send_or_defer(job)


@transaction.atomic
def retry_import(job: ImportJob) -> ImportJob:
    """Run a failed (or stuck) import again under a new run_id; its file is kept."""
    job = ImportJob.objects.select_for_update().get(pk=job.pk)
    if not job.file:
        raise ImportInputError({"file": "This import came from the command line; run it again."})
    job.run_id = uuid.uuid4()
    job.status = ImportStatus.QUEUED
    job.progress = 0
    job.error = ""
    job.issues = []
    job.started_at = job.finished_at = None
    job.save()
    _queue(job)
    return job


def current_run(job_id: int, run_id: str):
    """The import job rows of this run only: empty once a newer run superseded it."""
    return ImportJob.objects.filter(pk=job_id, run_id=run_id)


def mark_running(job_id: int, run_id: str) -> bool:
    return bool(
        current_run(job_id, run_id)
        .filter(status__in=[ImportStatus.QUEUED, ImportStatus.RUNNING])
        .update(status=ImportStatus.RUNNING, started_at=timezone.now(), progress=1)
    )


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
        if settings.IMPORT_CHUNK_DELAY_S:  # fault injection (tests): room to kill the worker
            time.sleep(settings.IMPORT_CHUNK_DELAY_S)

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
                    ImportStatus.RUNNING,
                ],
            )

    def close(self) -> None:
        if self.side is not None:
            self.side.close()


def record_success(job_id: int, run_id: str, counts: ImportCounts) -> None:
    """Record success inside the import's transaction; a superseded run rolls back."""
    job = current_run(job_id, run_id).select_for_update().first()
    if job is None or job.status == ImportStatus.SUCCEEDED:
        # Superseded, or a redelivered copy of a run that already succeeded: roll back.
        raise ImportSuperseded
    now = timezone.now()
    job.status = ImportStatus.SUCCEEDED
    job.progress = 100
    job.error = ""
    job.issues = []
    job.warnings = counts.warnings
    job.bytes_read = counts.bytes_read
    job.lines_read = counts.lines_read
    job.records_read = counts.records_read
    job.records_created = counts.records_created
    job.records_updated = counts.records_updated
    job.records_unchanged = counts.records_unchanged
    job.records_skipped = counts.records_skipped
    job.skipped_lines = counts.skipped
    job.finished_at = now
    job.duration_s = (now - (job.started_at or now)).total_seconds()
    job.save()


def fail(job_id: int, run_id: str, reason: str, issues: list[str] | None = None) -> None:
    """Record why a run failed; usage stored by earlier imports stays as it was."""
    now = timezone.now()
    current_run(job_id, run_id).update(
        status=ImportStatus.FAILED,
        error=reason[:4000],
        issues=issues or [],
        finished_at=now,
    )


def run_import_job(job_id: int, run_id: str) -> dict[str, Any]:
    """What the worker does for one run: import, then record success or why it failed.

    Idempotent: a finished or superseded run is skipped, and a redelivered run re-imports
    the same file, which upserts the same rows.
    """
    job = current_run(job_id, run_id).select_related("cluster").first()
    if job is None:
        return {"skipped": "superseded or deleted"}
    if job.status == ImportStatus.SUCCEEDED:
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

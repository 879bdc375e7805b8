"""Usage import, the writers: bulk upserts keyed on ``(cluster, record_key)``.

PostgreSQL COPYs each chunk into a temporary table, then runs one INSERT ... ON CONFLICT
that tells created, updated and unchanged rows apart; SQLite runs ``executemany`` of the
same upsert in batches of :data:`UPSERT_BATCH_ROWS`. Both write inside the caller's
transaction (one per file, :func:`accounting.services.import_file`).
"""

from __future__ import annotations

import io
import itertools
from typing import Any

import pandas as pd
from django.db import connection

from accounting.imports.rows import (
    COMPARED_COLUMNS,
    DATETIME_COLUMNS,
    TEXT_COLUMNS,
    UPSERT_KEY,
    USAGE_DB_COLUMNS,
)
from accounting.models import UsageRecord

UPSERT_BATCH_ROWS = 5_000


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
        return UsageRecord._base_manager.filter(cluster_id=self.cluster_id).count()

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

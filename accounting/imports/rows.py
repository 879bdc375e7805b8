"""Usage import, the rows: what a file's records become before they are written.

The cluster lookups (find_cluster, the alias table, partition -> pool/card rules read once
per file), and a parser chunk turned into a frame of UsageRecord columns with the issues of
values that do not fit (:func:`usage_rows`). Written by :mod:`accounting.imports.writers`,
driven by :mod:`accounting.services`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from django.db.models import F, Q

from accounting.models import GresAlias, PartitionMapping, UsageRecord
from accounting.parsing import DEFAULT_GRES_ALIASES, LineIssue, normalize_gres_type
from accounting.parsing.aliases import fit_aliases_to_cluster
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool

MAX_ISSUES = 50


class ImportInputError(ValueError):
    """A bad import request; ``errors`` maps each field to why (a 400 in the API)."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{key}: {value}" for key, value in errors.items()))
        self.errors = errors


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
    # The export's as-of time and where it came from (accounting.imports.as_of).
    as_of: dt.datetime | None = None
    as_of_source: str = ""


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
    "node_list",
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
    "node_list",
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


class ClusterNameCheck:
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
            "node_list": chunk["node_list"],
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
    # Text columns are NOT NULL: absent text is "" (PostgreSQL's COPY does this by itself).
    rows[list(TEXT_COLUMNS)] = rows[list(TEXT_COLUMNS)].fillna("")
    for name, limit in _max_lengths().items():
        text = rows[name]
        too_long = (text.str.len() > limit).to_numpy()
        for position in np.flatnonzero(too_long)[:MAX_ISSUES]:
            column = CHUNK_COLUMN_LABELS.get(name, name)
            issues.append(
                LineIssue(int(lines[position]), column, f"longer than {limit} characters")
            )
    return rows, issues

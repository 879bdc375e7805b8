"""Scope, queries and frames of the accounting read side (plain columns, no model instances)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from django.conf import settings
from django.db import connection
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast

from accounting.coverage import coverage_notes, coverage_windows
from accounting.models import SreportUtilization, UsageRecord
from engine.coverage import clip_inventory
from engine.usage import bucket_edges
from inventory.models import Cluster, NodeGroup, Pool, Site

GRANULARITIES: tuple[str, ...] = ("day", "week", "month", "total")
UTILIZATION_GROUPS: tuple[str, ...] = ("cluster", "pool", "accelerator", "team", "site")
COST_GROUPS: tuple[str, ...] = ("cluster", "pool", "site")
MAX_BUCKETS = 5_000
NO_ACCOUNT = "(no account)"
UNKNOWN = "(unknown)"
# API group name -> column of the engine frames.
GROUP_COLUMNS = {
    "cluster": "cluster",
    "pool": "pool",
    "accelerator": "accelerator_model",
    "team": "account",
    "site": "site",
}


class AccountingQueryError(ValueError):
    """A query the data cannot answer; ``errors`` maps the field to why (a 400)."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{key}: {value}" for key, value in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class AccountingScope:
    """What to report on. Times are aware; ``cluster_ids`` None means every cluster."""

    period_start: dt.datetime
    period_end: dt.datetime
    granularity: str = "month"
    cluster_ids: tuple[int, ...] | None = None
    accelerator_id: int | None = None
    team: str | None = None
    group_by: tuple[str, ...] = ("cluster",)
    idle_rule: str = "proportional"
    tz: str = field(default_factory=lambda: settings.TIME_ZONE)

    def edges(self) -> pd.DatetimeIndex:
        edges = bucket_edges(self.period_start, self.period_end, self.granularity, self.tz)
        if len(edges) - 1 > MAX_BUCKETS:
            raise AccountingQueryError(
                {"granularity": f"More than {MAX_BUCKETS} buckets; choose a coarser one."}
            )
        return edges


# -- querysets -> frames -------------------------------------------------------------------


def usage_records_queryset() -> QuerySet[UsageRecord]:
    """Usage records with their cluster, pool and card in the same query (list endpoints)."""
    return UsageRecord.objects.select_related("cluster", "pool", "accelerator")


def _frame(queryset: QuerySet, columns: dict[str, str], times: Sequence[str] = ()) -> pd.DataFrame:
    """Run ``queryset.values_list`` through a raw cursor: rows straight into pandas.

    Skipping the per-value converters matters at 10⁵ rows: times are read as text (a cast
    in SQL) and parsed once, vectorised, instead of one Python datetime per value.
    """
    text_of = {name: f"_{name}_text" for name in times}
    if text_of:
        queryset = queryset.annotate(
            **{alias: Cast(columns[name], TextField()) for name, alias in text_of.items()}
        )
    fields = [text_of.get(name, field) for name, field in columns.items()]
    sql, params = queryset.values_list(*fields).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    frame = pd.DataFrame.from_records(rows, columns=list(columns))
    for name in times:
        frame[name] = pd.to_datetime(frame[name], utc=True, format="ISO8601").astype(
            "datetime64[us, UTC]"
        )
    return frame


def _utc_midnight(values: pd.Series) -> pd.Series:
    return pd.to_datetime(values, utc=True).astype("datetime64[us, UTC]")


def inventory_frame(
    cluster_ids: Sequence[int] | None, accelerator_id: int | None = None
) -> pd.DataFrame:
    """One row per node group with cards: the capacity side of measured utilization."""
    groups = NodeGroup.objects.all()
    if cluster_ids is not None:
        groups = groups.filter(pool__cluster_id__in=cluster_ids)
    if accelerator_id is not None:
        groups = groups.filter(accelerator_id=accelerator_id)
    frame = _frame(
        groups.order_by("pk"),
        {
            "pool": "pool_id",
            "cluster": "pool__cluster_id",
            "cluster_name": "pool__cluster__name",
            "site": "pool__cluster__site_id",
            "pool_name": "pool__name",
            "pool_purpose": "pool__purpose",
            "commissioned_on": "pool__cluster__commissioned_on",
            "accelerator_id": "accelerator_id",
            "accelerator_model": "accelerator__name",
            "tdp_w": "accelerator__tdp_w",
            "peak_tflops": "accelerator__dense_bf16_tflops",
            "nodes": "node_count",
            "cards_per_node": "cards_per_node",
        },
    )
    frame["cards"] = (frame["nodes"] * frame["cards_per_node"]).astype("float64")
    frame["in_service_from"] = _utc_midnight(frame["commissioned_on"])
    frame["in_service_until"] = pd.Series(pd.NaT, index=frame.index, dtype="datetime64[us, UTC]")
    return frame[frame["cards"] > 0].reset_index(drop=True)


USAGE_FRAME_COLUMNS = {
    "cluster": "cluster_id",
    "pool": "pool_id",
    "accelerator_id": "accelerator_id",
    "accelerator_model": "accelerator__name",
    "account": "account",
    "start": "start",
    "end": "end",
    "duration_h": "duration_h",
    "cards": "cards",
    "card_hours": "card_hours",
    "state": "state",
    "gpu_utilization": "gpu_utilization",
    "tokens_per_s": "tokens_per_s",
    "model_params": "model_params",
    "mfu": "mfu",
}


USAGE_FLOAT_COLUMNS = (
    "duration_h",
    "cards",
    "card_hours",
    "gpu_utilization",
    "tokens_per_s",
    "model_params",
    "mfu",
)


def usage_frame(
    cluster_ids: Sequence[int] | None,
    period_start: dt.datetime,
    period_end: dt.datetime,
    *,
    accelerator_id: int | None = None,
    team: str | None = None,
) -> pd.DataFrame:
    """Usage records overlapping [period_start, period_end) as the engine's usage frame."""
    records = UsageRecord.objects.filter(start__lt=period_end).filter(
        Q(end__gt=period_start) | Q(end__isnull=True)
    )
    if cluster_ids is not None:
        records = records.filter(cluster_id__in=cluster_ids)
    if accelerator_id is not None:
        records = records.filter(accelerator_id=accelerator_id)
    if team is not None:
        records = records.filter(account="" if team == NO_ACCOUNT else team)
    frame = _frame(records.order_by(), USAGE_FRAME_COLUMNS, times=("start", "end"))
    frame["account"] = frame["account"].replace("", NO_ACCOUNT)
    return typed_usage_frame(frame)


def typed_usage_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The usage frame's dtypes whatever the source (records, rollups, an empty result):
    nullable integer ids, float measures."""
    for name in ("pool", "accelerator_id"):
        frame[name] = frame[name].astype("Int64")
    for name in USAGE_FLOAT_COLUMNS:
        frame[name] = frame[name].astype("float64")
    return frame


def assign_accounting_pools(usage: pd.DataFrame, inventory: pd.DataFrame) -> pd.DataFrame:
    """Give records without a pool the pool their cards most likely ran in.

    The largest pool of the cluster holding the record's card model, else the cluster's
    largest pool; records of clusters without inventory keep no pool.
    """
    missing = usage["pool"].isna()
    if not missing.any() or inventory.empty:
        return usage
    pool_cards = (
        inventory.groupby(["cluster", "pool", "accelerator_model"], as_index=False)["cards"]
        .sum()
        .sort_values(["cards", "pool"])
    )
    by_model = pool_cards.drop_duplicates(["cluster", "accelerator_model"], keep="last")
    by_cluster = (
        pool_cards.groupby(["cluster", "pool"], as_index=False)["cards"]
        .sum()
        .sort_values(["cards", "pool"])
        .drop_duplicates("cluster", keep="last")
    )
    model_pool = pd.MultiIndex.from_frame(by_model[["cluster", "accelerator_model"]])
    keys = pd.MultiIndex.from_frame(usage[["cluster", "accelerator_model"]].astype(object))
    position = model_pool.get_indexer(keys)
    guess = pd.Series(
        np.where(position >= 0, by_model["pool"].to_numpy()[np.maximum(position, 0)], np.nan),
        index=usage.index,
    )
    guess = guess.fillna(usage["cluster"].map(by_cluster.set_index("cluster")["pool"]))
    usage = usage.copy()
    usage["pool"] = usage["pool"].astype("float64").fillna(guess).astype("Int64")
    return usage


def downtime_frame(
    cluster_ids: Sequence[int] | None, period_start: dt.datetime, period_end: dt.datetime
) -> pd.DataFrame:
    """sreport rows overlapping the period (Down and PLND Down card-hours)."""
    rows = SreportUtilization.objects.filter(
        period_start__lt=period_end, period_end__gt=period_start
    )
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    frame = _frame(
        rows.order_by(),
        {
            "cluster": "cluster_id",
            "tres_name": "tres_name",
            "period_start": "period_start",
            "period_end": "period_end",
            "down_card_hours": "down_card_hours",
            "planned_down_card_hours": "planned_down_card_hours",
        },
        times=("period_start", "period_end"),
    )
    for name in ("down_card_hours", "planned_down_card_hours"):
        frame[name] = frame[name].astype("float64")
    return frame


# -- measured utilization ------------------------------------------------------------------


@dataclass
class ScopeInputs:
    """What every report of one scope reads besides usage: read once, shared by the calls.

    ``inventory`` has hours in service only inside each cluster's covered window (hours
    outside it are no data, not idle: `engine.coverage`); ``notes`` say which
    clusters that left out (from the uncut inventory). ``uncut_inventory`` is that uncut
    inventory when some cluster is not fully covered (None otherwise): its other hours still
    cost money (`accounting.selectors.uncovered`).
    """

    inventory: pd.DataFrame
    downtime: pd.DataFrame
    site_of_cluster: dict[int, int] | None = None  # read on first use
    notes: list[str] = field(default_factory=list)
    uncut_inventory: pd.DataFrame | None = None
    # Inventory reads of the cost runs (any granularity), by key: made once per scope.
    reads: dict[tuple, Any] = field(default_factory=dict)

    def read_once(self, key: tuple, read: Callable[[], Any]) -> Any:
        if key not in self.reads:
            self.reads[key] = read()
        return self.reads[key]

    def sites(self) -> dict[int, int]:
        if self.site_of_cluster is None:
            self.site_of_cluster = dict(Cluster.objects.values_list("pk", "site_id"))
        return self.site_of_cluster


def scope_inputs(scope: AccountingScope) -> ScopeInputs:
    inventory = inventory_frame(scope.cluster_ids, scope.accelerator_id)
    windows = coverage_windows(scope.cluster_ids, scope.period_start, scope.period_end)
    notes = coverage_notes(inventory, windows, scope.period_start, scope.period_end)
    return ScopeInputs(
        clip_inventory(inventory, windows) if len(inventory) else inventory,
        downtime_frame(scope.cluster_ids, scope.period_start, scope.period_end),
        notes=notes,
        uncut_inventory=inventory if notes else None,
    )


def add_labels(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Add names next to ids: cluster and pool names, site names, team/accelerator labels."""
    frame = frame.copy()
    if "cluster" in columns:
        names = dict(Cluster.objects.values_list("pk", "name"))
        frame["cluster_id"] = frame["cluster"].astype("Int64")
        frame["cluster"] = frame["cluster_id"].map(names).astype(object).fillna(UNKNOWN)
    if "pool" in columns:
        names = dict(Pool.objects.values_list("pk", "name"))
        frame["pool_id"] = frame["pool"].astype("Int64")
        frame["pool"] = frame["pool_id"].map(names).astype(object).fillna(UNKNOWN)
    if "site" in columns:
        names = dict(Site.objects.values_list("pk", "name"))
        frame["site_id"] = frame["site"].astype("Int64")
        frame["site"] = frame["site_id"].map(names).astype(object).fillna(UNKNOWN)
    if "accelerator_model" in columns:
        frame["accelerator"] = frame["accelerator_model"].fillna(UNKNOWN)
        frame = frame.drop(columns="accelerator_model")
    if "account" in columns:
        frame["team"] = frame["account"].fillna(NO_ACCOUNT)
        frame = frame.drop(columns="account")
    return frame

"""Read side of accounting: usage records → pandas → the engine's vectorised functions.

* :func:`utilization_report`: measured utilization (factor 5) and effective time (factor 4)
  per cluster / pool / accelerator / team / site and day / week / month, from usage records
  against the inventory (node groups × hours in service since the cluster's commissioning,
  minus sreport planned downtime), with :func:`planner.engine.usage.measured_utilization`.
* :func:`cost_report` and :func:`chargeback_report`: money per pool and bucket with
  :func:`planner.engine.cost.energy_and_cost`, the five factors from
  :func:`planner.engine.evaluate.evaluate_pools` fed with the measured values, money lost per
  factor (:func:`~planner.engine.cost.waste_by_factor`) and chargeback per team.
* :func:`apply_measured_usage`: what the stored analyses (`planner.analysis`) use to replace
  modeled utilization, effective time and MFU with measured ones when usage covers enough
  of the period (`accounting.coverage`).

Every query reads plain columns (no model instances) and every computation is vectorised.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Min, Q, QuerySet, TextField
from django.db.models.functions import Cast

from accounting.coverage import coverage_notes, coverage_windows, with_coverage
from accounting.models import SreportUtilization, UsageRecord
from config.frames import json_rows, json_value
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site
from inventory.validity import invalid_clusters
from planner.engine.cost import (
    IDLE_RULES,
    chargeback,
    cost_per_effective_pflop_day,
    waste_by_factor,
)
from planner.engine.coverage import clip_inventory, coverage_of
from planner.engine.evaluate import evaluate_pools
from planner.engine.factors import FACTOR_NAMES
from planner.engine.usage import allocated_by_bucket, bucket_edges, measured_mfu
from planner.engine.usage import measured_utilization as engine_measured_utilization
from planner.inputs import node_group_frame, pool_frame, price_pools

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
    outside it are no data, not idle: `planner.engine.coverage`); ``notes`` say which
    clusters that left out (from the uncut inventory).
    """

    inventory: pd.DataFrame
    downtime: pd.DataFrame
    site_of_cluster: dict[int, int] | None = None  # read on first use
    notes: list[str] = field(default_factory=list)

    def sites(self) -> dict[int, int]:
        if self.site_of_cluster is None:
            self.site_of_cluster = dict(Cluster.objects.values_list("pk", "site_id"))
        return self.site_of_cluster


def scope_inputs(scope: AccountingScope) -> ScopeInputs:
    inventory = inventory_frame(scope.cluster_ids, scope.accelerator_id)
    windows = coverage_windows(scope.cluster_ids, scope.period_start, scope.period_end)
    return ScopeInputs(
        clip_inventory(inventory, windows) if len(inventory) else inventory,
        downtime_frame(scope.cluster_ids, scope.period_start, scope.period_end),
        notes=coverage_notes(inventory, windows, scope.period_start, scope.period_end),
    )


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


def _labels(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Add names next to ids: cluster and pool names, site names, team/accelerator labels."""
    frame = frame.copy()
    if "cluster" in columns:
        names = dict(Cluster.objects.values_list("pk", "name"))
        frame["cluster_id"] = frame["cluster"].astype("Int64")
        frame["cluster"] = frame["cluster_id"].map(names).fillna(UNKNOWN)
    if "pool" in columns:
        names = dict(Pool.objects.values_list("pk", "name"))
        frame["pool_id"] = frame["pool"].astype("Int64")
        frame["pool"] = frame["pool_id"].map(names).fillna(UNKNOWN)
    if "site" in columns:
        names = dict(Site.objects.values_list("pk", "name"))
        frame["site_id"] = frame["site"].astype("Int64")
        frame["site"] = frame["site_id"].map(names).fillna(UNKNOWN)
    if "accelerator_model" in columns:
        frame["accelerator"] = frame["accelerator_model"].fillna(UNKNOWN)
        frame = frame.drop(columns="accelerator_model")
    if "account" in columns:
        frame["team"] = frame["account"].fillna(NO_ACCOUNT)
        frame = frame.drop(columns="account")
    return frame


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
        labelled = _labels(result, by)
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
    """Per cluster: how many records, and the time span they cover."""
    records = UsageRecord.objects.all()
    if cluster_ids is not None:
        records = records.filter(cluster_id__in=cluster_ids)
    spans = (
        records.values("cluster_id", "cluster__name")
        .annotate(first_start=Min("start"), last_start=Max("start"), last_end=Max("end"))
        .order_by("cluster__name")
    )
    return [
        {
            "cluster_id": row["cluster_id"],
            "cluster": row["cluster__name"],
            "records": row["records"],
            "first_start": row["first_start"],
            "last_time": max(t for t in (row["last_start"], row["last_end"]) if t is not None),
        }
        for row in spans.annotate(records=Count("pk"))
    ]


# -- measured inputs for the stored analyses -----------------------------------------------


def _measured_mfu(usage: pd.DataFrame, inventory: pd.DataFrame) -> pd.DataFrame:
    """Measured MFU per (pool, card model) from jobs with an MFU or a throughput."""
    known = usage[usage["accelerator_model"].notna() & usage["pool"].notna()]
    has_measure = known["mfu"].notna() | (
        known["tokens_per_s"].notna() & known["model_params"].notna()
    )
    known = known[has_measure]
    if known.empty:
        return pd.DataFrame(columns=["pool", "accelerator_model", "mfu"])
    peak = inventory.drop_duplicates("accelerator_model").set_index("accelerator_model")
    peaks = dict(peak["peak_tflops"].astype(float))
    for name, value in AcceleratorModel.objects.filter(
        name__in=set(known["accelerator_model"]) - set(peaks)
    ).values_list("name", "dense_bf16_tflops"):
        peaks[name] = value
    known = known.assign(pool=known["pool"].astype("int64"))
    mfu = measured_mfu(known, peaks, by=("pool", "accelerator_model"))
    valid = (mfu["measured_card_hours"] > 0) & (mfu["mfu"] > 0) & (mfu["mfu"] <= 1)
    return mfu.loc[valid, ["pool", "accelerator_model", "mfu"]]


def measured_pool_inputs(
    usage: pd.DataFrame,
    inventory: pd.DataFrame,
    downtime: pd.DataFrame | None,
    edges: pd.DatetimeIndex,
    frequency: str,
    tz: str,
) -> pd.DataFrame:
    """Per pool × bucket: the engine's measured pool columns from usage records.

    ``utilization_measured`` = (A + D) ÷ C and ``allocated_card_h`` = A; effective time goes
    in as job logs, ``productive_h`` = A − L over ``wall_h`` = A + D (card-hours: the engine
    uses only their ratio); ``failure_count`` (node_fail jobs) over
    ``failure_exposure_card_h`` = A gives the measured MTBF.
    """
    utilization = engine_measured_utilization(
        usage,
        inventory,
        period_start=edges[0],
        period_end=edges[-1],
        frequency=frequency,  # type: ignore[arg-type]
        by=["cluster", "pool"],
        downtime=downtime if downtime is not None and len(downtime) else None,
        tz=tz,
    )
    utilization = utilization[utilization["pool"].notna()].copy()
    utilization["pool"] = utilization["pool"].astype("int64")
    allocated = utilization["allocated_card_hours"]
    held = allocated + utilization["down_card_hours"]
    utilization["utilization_measured"] = utilization["utilization"].clip(0.0, 1.0)
    utilization["allocated_card_h"] = allocated
    utilization["productive_h"] = (allocated - utilization["lost_card_hours"]).clip(lower=0.0)
    utilization["wall_h"] = held.where(held > 0)
    utilization.loc[utilization["wall_h"].isna(), "productive_h"] = np.nan
    failures = usage[usage["state"].astype(str) == "node_fail"]
    counts = failures.groupby("pool").size() if len(failures) else pd.Series(dtype="float64")
    if frequency == "total":
        utilization["failure_count"] = (
            utilization["pool"].map(counts.rename(index=int)).fillna(0.0).astype(float)
        )
        utilization["failure_exposure_card_h"] = allocated.where(allocated > 0)
    return utilization


def apply_measured_usage(
    pools: pd.DataFrame,
    groups: pd.DataFrame,
    cluster_id: int,
    period_start: dt.datetime,
    period_end: dt.datetime,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Feed measured values into `planner.analysis` pool and node-group frames.

    Only when the usage data covers enough of the period (the rule of
    :mod:`planner.engine.coverage`), computed over the covered days: utilization (provenance
    ``measured``), effective time from the work lost to failed, node_fail and preempted jobs
    and to Down hours, measured MTBF from node failures, and MFU from jobs that carry one
    (filling node groups without an entered MFU). The pools always get ``coverage_share``,
    ``coverage_text`` and ``utilization_reason``; below the rule nothing else changes.
    """
    if pools.empty:
        return pools, groups
    inventory = inventory_frame([cluster_id])
    if inventory.empty:
        return pools, groups
    windows = coverage_windows([cluster_id], period_start, period_end)
    coverage = coverage_of(inventory, windows, period_start, period_end)
    pools = with_coverage(pools, coverage)
    if not coverage.uses_measured:
        return pools, groups
    inventory = clip_inventory(inventory, windows)
    usage = assign_accounting_pools(usage_frame([cluster_id], period_start, period_end), inventory)
    downtime = downtime_frame([cluster_id], period_start, period_end)
    edges = bucket_edges(period_start, period_end, "total")
    measured = measured_pool_inputs(usage, inventory, downtime, edges, "total", "UTC")
    columns = [
        "utilization_measured",
        "allocated_card_h",
        "productive_h",
        "wall_h",
        "failure_count",
        "failure_exposure_card_h",
    ]
    measured = measured.set_index("pool")[columns]
    pools = pools.copy()
    for name in columns:
        pools[name] = pools["pool_id"].map(measured[name]).astype("float64")
    # The engine checks allocated_card_h <= cards × duration_h over the whole period.
    card_h = groups.assign(cards=groups["nodes"] * groups["cards_per_node"]).groupby("pool_id")[
        "cards"
    ].sum() * pools.set_index("pool_id")["duration_h"].astype(float)
    pools["allocated_card_h"] = np.minimum(
        pools["allocated_card_h"], pools["pool_id"].map(card_h).to_numpy()
    )
    mfu = _measured_mfu(usage, inventory)
    return pools, fill_measured_mfu(groups, mfu)


def fill_measured_mfu(groups: pd.DataFrame, mfu: pd.DataFrame) -> pd.DataFrame:
    """Node groups without an entered MFU take the one measured from jobs (flagged as such)."""
    if not len(mfu) or not len(groups):
        return groups
    measured_mfu_of = mfu.set_index(["pool", "accelerator_model"])["mfu"]
    keys = pd.MultiIndex.from_arrays([groups["pool_id"], groups["accelerator"]])
    measured = pd.Series(measured_mfu_of.reindex(keys).to_numpy(), index=groups.index)
    return groups.assign(
        mfu_from_jobs=(groups["mfu"].isna() & measured.notna()).astype("float64"),
        mfu=groups["mfu"].fillna(measured),
    )


# -- costs and chargeback -------------------------------------------------------------------


@dataclass
class PoolCosts:
    """Per pool × bucket (index ``unit``): labels, measured figures, factors and money."""

    units: pd.DataFrame
    edges: pd.DatetimeIndex
    usage: pd.DataFrame
    warnings: list[str]


LOST_COST_PREFIX = "lost_cost_"


def pool_costs(
    scope: AccountingScope, usage: pd.DataFrame | None = None, inputs: ScopeInputs | None = None
) -> PoolCosts:
    """Money of every pool in scope per bucket, with the engine's factors (measured inputs).

    A pool's cost is over its in-service card-hours (idle cards cost as much as busy ones),
    at the cluster's ownership or rental price plus energy at the site's tariff and PUE.
    ``usage`` and ``inputs`` as in :func:`measured_utilization` (every team's usage).
    """
    edges = scope.edges()
    inputs = inputs or scope_inputs(scope)
    warnings: list[str] = list(inputs.notes)
    inventory = inputs.inventory
    if usage is None:
        usage = usage_frame(
            scope.cluster_ids,
            scope.period_start,
            scope.period_end,
            accelerator_id=scope.accelerator_id,
        )
    # Error boundary: a cluster with out-of-range inventory is named and left out, not fatal.
    invalid = invalid_clusters(inventory["cluster"].unique())
    if invalid:
        notes = sorted({*invalid.values()})
        warnings.extend(f"{note}; left out until corrected." for note in notes)
        inventory = inventory[~inventory["cluster"].isin(list(invalid))]
        usage = usage[~usage["cluster"].isin(list(invalid))].reset_index(drop=True)
    usage = assign_accounting_pools(usage, inventory)
    orphan = usage["pool"].isna()
    if orphan.any():
        warnings.append(
            f"{usage.loc[orphan, 'card_hours'].sum():,.0f} card-hours of usage in clusters "
            "without inventory are left out of costs."
        )
        usage = usage[~orphan].reset_index(drop=True)
    empty = PoolCosts(pd.DataFrame(), edges, usage, warnings)
    if inventory.empty:
        return empty
    downtime = inputs.downtime
    measured = measured_pool_inputs(usage, inventory, downtime, edges, scope.granularity, scope.tz)
    measured = measured[measured["in_service_card_hours"] > 0].reset_index(drop=True)
    if measured.empty:
        return empty

    # The engine's pool inputs (site, cluster and pool settings with their overrides).
    cluster_ids = sorted(inventory["cluster"].unique().tolist())
    pools = pool_frame([int(cluster_id) for cluster_id in cluster_ids], None, 1.0)
    pools = pools[pools["pool_id"].isin(measured["pool"])]
    groups = node_group_frame(pools["pool_id"].tolist())
    if scope.accelerator_id is not None:
        name = AcceleratorModel.objects.get(pk=scope.accelerator_id).name
        groups = groups[groups["accelerator"] == name]
    mfu = _measured_mfu(usage, inventory)
    groups = fill_measured_mfu(groups, mfu)

    # One engine "pool" per pool × bucket.
    units = measured.merge(pools, left_on="pool", right_on="pool_id", how="inner")
    units["unit"] = np.arange(len(units))
    units["duration_h"] = units["bucket_hours"]
    cards_of_pool = (
        groups.assign(cards=groups["nodes"] * groups["cards_per_node"])
        .groupby("pool_id")["cards"]
        .sum()
    )
    full_card_h = units["pool_id"].map(cards_of_pool) * units["duration_h"]
    units["allocated_card_h"] = np.minimum(units["allocated_card_h"], full_card_h)
    unit_groups = groups.merge(units[["unit", "pool_id"]], on="pool_id").drop(columns="pool_id")
    engine_pools = units.drop(columns=["pool_id"]).rename(columns={"unit": "pool_id"})
    engine_pools = engine_pools.drop(
        columns=[c for c in ("cluster", "pool", "site") if c in engine_pools], errors="ignore"
    )
    evaluated = evaluate_pools(
        unit_groups.rename(columns={"unit": "pool_id"}), engine_pools.set_index("pool_id")
    )

    # Money per unit, on the one money path (`planner.inputs.price_pools`).
    in_service = units["in_service_card_hours"]
    allocated = units["allocated_card_hours"]
    over = allocated > in_service * (1 + 1e-9)
    if over.any():
        warnings.append(
            f"{int(over.sum())} pool-period(s) hold more allocated card-hours than the "
            "inventory provides; cost is taken over the allocated card-hours there."
        )
    card_hours = np.maximum(in_service, allocated)
    cost_input, costs = price_pools(
        units,
        groups,
        card_hours=card_hours,
        allocated_card_hours=allocated,
        pue=units["unit"].map(evaluated["pue"]),
        effective_utilization=units["unit"].map(evaluated["product"]),
    )
    lost_share = units["unit"].map(evaluated["lost_share"])
    shares = pd.DataFrame(
        {
            name: (units["unit"].map(evaluated[f"lost_share_{name}"]) / lost_share).fillna(0.0)
            for name in FACTOR_NAMES
        }
    )
    waste = waste_by_factor(
        costs.assign(card_hours=cost_input["card_hours"]),
        shares,
        effective_utilization=cost_input["effective_utilization"],
    )
    factor_columns = {name: units["unit"].map(evaluated[name]) for name in FACTOR_NAMES}
    provenance = {
        f"{name}_provenance": units["unit"].map(evaluated[f"{name}_provenance"]).astype(str)
        for name in FACTOR_NAMES
    }
    result = pd.concat(
        [
            units[
                [
                    "unit",
                    "cluster_id",
                    "pool_id",
                    "site_id",
                    "currency",
                    "bucket_start",
                    "bucket_end",
                    "bucket_hours",
                    "in_service_card_hours",
                    "available_card_hours",
                    "lost_card_hours",
                    "down_card_hours",
                ]
            ],
            pd.DataFrame({"card_hours": card_hours, "allocated_card_hours": allocated}),
            costs,
            waste[[c for c in waste.columns if c.startswith(LOST_COST_PREFIX)] + ["lost_cost"]],
            pd.DataFrame(factor_columns),
            pd.DataFrame(provenance),
        ],
        axis=1,
    )
    return PoolCosts(result, edges, usage, warnings)


SUMMED_COST_COLUMNS: tuple[str, ...] = (
    "card_hours",
    "allocated_card_hours",
    "lost_card_hours",
    "down_card_hours",
    "it_energy_mwh",
    "facility_energy_mwh",
    "compute_cost",
    "energy_cost",
    "energy_overhead_cost",
    "idle_cost",
    "total_cost",
    "co2_tonnes",
    "peak_pflop_days",
    "effective_pflop_days",
    "lost_cost",
    *(f"{LOST_COST_PREFIX}{name}" for name in FACTOR_NAMES),
)


def _summed_costs(units: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Sum money and card-hours by ``keys``; ratios recomputed from the sums.

    Factors are aggregated card-hour-weighted by peak FLOPs (weight = peak PFLOP-days, spec
    §1), each with the provenance that carries most of the weight.
    """
    grouped = units.groupby(keys, dropna=False, sort=True)
    summed = grouped[list(SUMMED_COST_COLUMNS)].sum()
    weight = units["peak_pflop_days"]
    total_weight = summed["peak_pflop_days"].where(summed["peak_pflop_days"] > 0)
    factors: dict[str, pd.Series] = {}
    provenance: dict[str, pd.Series] = {}
    by = [units[k] for k in keys]
    # One grouped sum for the five factors (a pivot table per factor costs ~5 ms each).
    weighted = units[list(FACTOR_NAMES)].mul(weight, axis=0).groupby(by, sort=True).sum()
    for name in FACTOR_NAMES:
        factors[name] = weighted[name].reindex(summed.index) / total_weight
        table = (
            weight.groupby([*by, units[f"{name}_provenance"]], sort=True)
            .sum()
            .unstack(fill_value=0.0)
        )
        provenance[name] = table.fillna(0.0).idxmax(axis=1).reindex(summed.index)
    summed = summed.reset_index()
    allocated = summed["allocated_card_hours"]
    effective = summed["effective_pflop_days"]
    summed["cost_per_allocated_card_hour"] = summed["total_cost"] / allocated.where(allocated > 0)
    peak = summed["peak_pflop_days"]
    summed["cost_per_effective_pflop_day"] = cost_per_effective_pflop_day(
        summed["total_cost"], effective, peak
    )
    summed["effective_utilization"] = effective / peak.where(peak > 0)
    lost_columns = [f"{LOST_COST_PREFIX}{name}" for name in FACTOR_NAMES]
    summed["lost_cost_by_factor"] = [
        dict(zip(FACTOR_NAMES, values, strict=True))
        for values in summed[lost_columns].itertuples(index=False, name=None)
    ]
    summed["factors"] = [
        dict(zip(FACTOR_NAMES, values, strict=True))
        for values in zip(*(factors[name].to_numpy() for name in FACTOR_NAMES), strict=True)
    ]
    summed["factor_provenance"] = [
        dict(zip(FACTOR_NAMES, values, strict=True))
        for values in zip(*(provenance[name].to_numpy() for name in FACTOR_NAMES), strict=True)
    ]
    return summed.drop(columns=lost_columns)


def _cost_groups(scope: AccountingScope) -> list[str]:
    return [name for name in dict.fromkeys(scope.group_by) if name in COST_GROUPS]


def cost_rows_frame(scope: AccountingScope, costs: PoolCosts) -> pd.DataFrame:
    """The rows of :func:`cost_report` as a frame, before JSON (the dashboards chart it)."""
    if costs.units.empty:
        return pd.DataFrame()
    group_by = _cost_groups(scope)
    id_columns = [f"{name}_id" for name in group_by]
    keys = [*id_columns, "currency", "bucket_start", "bucket_end"]
    summed = _summed_costs(costs.units, keys)
    return _labels(summed.rename(columns={c: c[:-3] for c in id_columns}), group_by)


def cost_report(
    scope: AccountingScope, usage: pd.DataFrame | None = None, costs: PoolCosts | None = None
) -> dict[str, Any]:
    """Money per ``scope.group_by`` × bucket and totals per currency (spec §7).

    ``costs``: :func:`pool_costs` of this scope already computed (shared with a chargeback).
    """
    costs = costs if costs is not None else pool_costs(scope, usage)
    group_by = _cost_groups(scope)
    rows: list[dict[str, Any]] = []
    totals: list[dict[str, Any]] = []
    if not costs.units.empty:
        rows = json_rows(cost_rows_frame(scope, costs))
        totals = json_rows(_summed_costs(costs.units, ["currency"]))
    return {
        "period_start": scope.period_start,
        "period_end": scope.period_end,
        "granularity": scope.granularity,
        "group_by": group_by,
        "factor_names": list(FACTOR_NAMES),
        "rows": rows,
        "totals": totals,
        "warnings": costs.warnings,
    }


def chargeback_report(
    scope: AccountingScope, usage: pd.DataFrame | None = None, costs: PoolCosts | None = None
) -> dict[str, Any]:
    """Chargeback per team and bucket: used card-hours at cost plus an idle share.

    Each pool's used card-hours are priced at its ``used_cost_per_card_hour`` (ownership +
    busy energy); its idle cost is shared by ``scope.idle_rule`` (none, proportional, even;
    :func:`planner.engine.cost.chargeback`). Per currency and bucket, the charges sum to the
    total cost of the pools in scope. With ``scope.team`` only that team's rows are listed,
    the totals still cover every team. ``costs`` as in :func:`cost_report` (its usage must
    carry the teams).
    """
    if scope.idle_rule not in IDLE_RULES:
        raise AccountingQueryError({"idle_rule": f"Must be one of {', '.join(IDLE_RULES)}."})
    costs = costs if costs is not None else pool_costs(scope, usage)
    rows: list[dict[str, Any]] = []
    totals: list[dict[str, Any]] = []
    units = costs.units
    if not units.empty:
        usage = costs.usage
        team_usage = allocated_by_bucket(usage, costs.edges, ["pool", "account"])
        team_usage["pool"] = team_usage["pool"].astype("int64")
        unit_of = units.set_index(["pool_id", "bucket_start"])["unit"]
        bucket_starts = costs.edges.tz_convert(scope.tz)[:-1]
        keys = pd.MultiIndex.from_arrays(
            [team_usage["pool"], bucket_starts[team_usage["_bucket"].to_numpy()]]
        )
        team_usage["unit"] = unit_of.reindex(keys).to_numpy()
        team_usage = team_usage[team_usage["unit"].notna()].copy()
        team_usage["unit"] = team_usage["unit"].astype("int64")
        # Records beyond the inventory were capped in pool_costs: scale the teams alike.
        used_total = team_usage.groupby("unit")["allocated_card_hours"].transform("sum")
        capped = team_usage["unit"].map(units.set_index("unit")["allocated_card_hours"])
        scale = (capped / used_total.where(used_total > 0)).clip(upper=1.0).fillna(1.0)
        team_usage["used_card_hours"] = team_usage["allocated_card_hours"] * scale
        pool_rows = units[
            ["unit", "currency", "bucket_start", "bucket_end", "total_cost"]
            + ["used_cost_per_card_hour", "allocated_card_hours"]
        ]
        # One bill per currency and bucket, all charged in one pass.
        bill_keys = ["currency", "bucket_start"]
        charged = chargeback(
            team_usage[["unit", "account", "used_card_hours"]],
            pool_rows,
            pool_keys=("unit",),
            team_column="account",
            idle_rule=scope.idle_rule,  # type: ignore[arg-type]
            scope_keys=bill_keys,
        )
        bills = pool_rows.groupby(bill_keys, sort=True).agg(
            bucket_end=("bucket_end", "first"), total_cost=("total_cost", "sum")
        )
        charged = charged.rename(columns={"account": "team"})
        charged["team"] = charged["team"].fillna(NO_ACCOUNT)
        bill_of_row = pd.MultiIndex.from_frame(charged[bill_keys])
        bill_total = bills["total_cost"].reindex(bill_of_row).to_numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            charged["share_of_total"] = np.where(
                bill_total != 0, charged["chargeback_cost"].to_numpy() / bill_total, np.nan
            )
        charged["bucket_end"] = bills["bucket_end"].reindex(bill_of_row).to_numpy()
        if scope.team is not None:
            charged = charged[charged["team"] == scope.team]
        charged_by_bill = charged.groupby(bill_keys, sort=True)["chargeback_cost"].sum()
        # Rows bill by bill in time order, as the report always listed them.
        charged = charged.sort_values(bill_keys, kind="stable")
        columns = [
            c for c in charged.columns if c not in ("currency", "bucket_start", "bucket_end")
        ]
        rows = json_rows(charged[[*columns, "currency", "bucket_start", "bucket_end"]])
        totals = [
            {
                "currency": currency,
                "bucket_start": json_value(bucket_start),
                "bucket_end": json_value(bill["bucket_end"]),
                "total_cost": float(bill["total_cost"]),
                "charged_cost": float(charged_by_bill.get((currency, bucket_start), 0.0)),
            }
            for (currency, bucket_start), bill in bills.iterrows()
        ]
    return {
        "period_start": scope.period_start,
        "period_end": scope.period_end,
        "granularity": scope.granularity,
        "idle_rule": scope.idle_rule,
        "rows": rows,
        "totals": totals,
        "warnings": costs.warnings,
    }


__all__ = [
    "COST_GROUPS",
    "GRANULARITIES",
    "UTILIZATION_GROUPS",
    "AccountingQueryError",
    "AccountingScope",
    "apply_measured_usage",
    "chargeback_report",
    "cost_report",
    "usage_records_queryset",
    "utilization_report",
]

"""Measured pool inputs (utilization, effective time, MFU) that replace modeled ones."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

from accounting import usage_sources
from accounting.coverage import coverage_windows, with_coverage
from accounting.selectors.frames import (
    assign_accounting_pools,
    downtime_frame,
    inventory_frame,
    usage_frame,
)
from engine.coverage import clip_inventory, coverage_of
from engine.usage import bucket_edges, measured_mfu
from engine.usage import measured_utilization as engine_measured_utilization
from inventory.models import AcceleratorModel, Pool
from inventory.pool_models import PARAMS_TOLERANCE, model_counts


def measured_group_mfu(usage: pd.DataFrame, inventory: pd.DataFrame) -> pd.DataFrame:
    """Measured MFU per (pool, card model) from jobs with an MFU or a throughput."""
    known = usage[usage["accelerator_model"].notna() & usage["pool"].notna()]
    known = with_active_params(known.assign(pool=known["pool"].astype("int64")))
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
    mfu = measured_mfu(known, peaks, by=("pool", "accelerator_model"))
    valid = (mfu["measured_card_hours"] > 0) & (mfu["mfu"] > 0) & (mfu["mfu"] <= 1)
    return mfu.loc[valid, ["pool", "accelerator_model", "mfu"]]


def with_active_params(jobs: pd.DataFrame) -> pd.DataFrame:
    """Jobs with the parameter counts of the catalog model their pool names (inventory.
    pool_models): ``model_active_params``, a mixture of experts' active count (NaN for a dense
    or unnamed pool: ``model_params`` as entered), so a throughput MFU counts the FLOPs a token
    really takes; and ``model_params`` filled with the model's total where the job gave none.

    Only for a job whose ``model_params`` agrees with that model's total or active count
    (within PARAMS_TOLERANCE), or is missing; any other count is another model run on the
    pool, which keeps its own N.
    """
    names = dict(
        Pool.objects.filter(pk__in=jobs["pool"].unique().tolist())
        .exclude(model_name="")
        .values_list("pk", "model_name")
    )
    by_name = {name: model_counts(name) for name in set(names.values())}
    named = {pk: count for pk, name in names.items() if (count := by_name[name]) is not None}
    total = jobs["pool"].map({pk: count.total for pk, count in named.items()}).astype("float64")
    moe = {pk: count.active for pk, count in named.items() if count.is_moe}
    active = jobs["pool"].map(moe).astype("float64")
    # A job that states no model size on a pool that names its model trains that model.
    entered = jobs["model_params"].astype("float64").fillna(total)
    # Publishers round their counts (671 B for 671.0 B; 37 B for 37.6 B): the pool's tolerance.
    # Any other count is another model run on the pool (a 7 B fine-tune): it keeps its own N.
    agrees = ((entered - total).abs() <= PARAMS_TOLERANCE * total) | (
        (entered - active).abs() <= PARAMS_TOLERANCE * active
    )
    return jobs.assign(model_params=entered, model_active_params=active.where(agrees))


# The engine's pool columns that measured_pool_inputs fills from usage records.
ENGINE_MEASURED_COLUMNS: tuple[str, ...] = (
    "utilization_measured",
    "allocated_card_hours",
    "productive_h",
    "wall_h",
    "failure_count",
    "failure_exposure_card_hours",
)


def measured_pool_inputs(
    usage: pd.DataFrame,
    inventory: pd.DataFrame,
    downtime: pd.DataFrame | None,
    edges: pd.DatetimeIndex,
    frequency: str,
    tz: str,
) -> pd.DataFrame:
    """Per pool × bucket: the engine's measured pool columns from usage records.

    ``utilization_measured`` = (A + D) ÷ C and ``allocated_card_hours`` = A; effective time goes
    in as job logs, ``productive_h`` = A − L over ``wall_h`` = A + D (card-hours: the engine
    uses only their ratio); ``failure_count`` (node_fail jobs) over
    ``failure_exposure_card_hours`` = A gives the measured MTBF.
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
    utilization["allocated_card_hours"] = allocated
    utilization["productive_h"] = (allocated - utilization["lost_card_hours"]).clip(lower=0.0)
    utilization["wall_h"] = held.where(held > 0)
    utilization.loc[utilization["wall_h"].isna(), "productive_h"] = np.nan
    failures = usage[usage["state"].astype(str) == "node_fail"]
    counts = failures.groupby("pool").size() if len(failures) else pd.Series(dtype="float64")
    if frequency == "total":
        utilization["failure_count"] = (
            utilization["pool"].map(counts.rename(index=int)).fillna(0.0).astype(float)
        )
        utilization["failure_exposure_card_hours"] = allocated.where(allocated > 0)
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
    :mod:`engine.coverage`), computed over the covered days: utilization (provenance
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
    source = usage_sources.source_names([cluster_id])[cluster_id]
    pools = with_coverage(pools, coverage, "" if source == usage_sources.SLURM else source)
    if not coverage.uses_measured:
        return pools, groups
    inventory = clip_inventory(inventory, windows)
    usage = assign_accounting_pools(usage_frame([cluster_id], period_start, period_end), inventory)
    downtime = downtime_frame([cluster_id], period_start, period_end)
    edges = bucket_edges(period_start, period_end, "total")
    measured = measured_pool_inputs(usage, inventory, downtime, edges, "total", "UTC")
    columns = list(ENGINE_MEASURED_COLUMNS)
    measured = measured.set_index("pool")[columns]
    pools = pools.copy()
    for name in columns:
        pools[name] = pools["pool_id"].map(measured[name]).astype("float64")
    # The engine checks allocated_card_hours <= cards × duration_h over the whole period.
    card_hours = groups.assign(cards=groups["nodes"] * groups["cards_per_node"]).groupby("pool_id")[
        "cards"
    ].sum() * pools.set_index("pool_id")["duration_h"].astype(float)
    pools["allocated_card_hours"] = np.minimum(
        pools["allocated_card_hours"], pools["pool_id"].map(card_hours).to_numpy()
    )
    mfu = measured_group_mfu(usage, inventory)
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

"""Reading telemetry rollups: per pool / card model / day, per team and job, measured factors.

Means are weighted by the hours they cover; a figure nobody measured is None with a reason
(no data is not zero). Team and job rows are scoped by the user's teams (access.scoping).
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
from django.db.models import Sum

from access.scoping import scope_records
from telemetry.clocks import NO_MAX_CLOCK
from telemetry.models import GpuDay, JobDay, PrometheusSource
from telemetry.rollups import JOB_FIGURES

PROVENANCE = "telemetry"
GPU_GROUPS = ("pool", "accelerator", "node_group", "day", "hostname")
MEANS = ("tensor_active", "gr_engine_active", "sm_active", "dram_active", "gpu_util", "power_w")


def _gpu_frame(cluster_ids, start: dt.date, end: dt.date) -> pd.DataFrame:
    rows = GpuDay.objects.filter(day__gte=start, day__lte=end)
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    columns = [
        "day", "cluster_id", "pool_id", "pool__name", "accelerator_id", "accelerator__name",
        "node_group_id", "node_group__name", "hostname", "gpu", "covered_h", *MEANS,
        "sm_clock_mhz", "max_sm_clock_mhz", "energy_kwh", "idle_h",
    ]  # fmt: skip
    frame = pd.DataFrame(list(rows.values_list(*columns)), columns=columns)
    frame = frame.astype(dict.fromkeys((*MEANS, "sm_clock_mhz", "max_sm_clock_mhz"), "float64"))
    frame["mfu_proxy"] = frame["tensor_active"] * frame["sm_clock_mhz"] / frame["max_sm_clock_mhz"]
    return frame


def _weighted(frame: pd.DataFrame, keys: list[str], column: str) -> pd.Series:
    """Σ x × covered_h ÷ Σ covered_h over the rows where x was measured."""
    measured = frame[column].notna()
    hours = frame["covered_h"].where(measured, 0.0)
    weighted = (frame[column].fillna(0.0) * hours).groupby([frame[k] for k in keys]).sum()
    total = hours.groupby([frame[k] for k in keys]).sum()
    return weighted / total.where(total > 0)


def gpu_rollup(cluster_ids, start: dt.date, end: dt.date, group_by=("pool",)) -> list[dict]:
    """Rows per ``group_by`` (of GPU_GROUPS): GPUs, hours covered, mean activities and power,
    MFU proxy, measured energy (kWh) and idle GPU-hours."""
    frame = _gpu_frame(cluster_ids, start, end)
    if frame.empty:
        return []
    names = {"pool": "pool__name", "accelerator": "accelerator__name",
             "node_group": "node_group__name"}  # fmt: skip
    keys = []
    for name in group_by:
        column = names.get(name, name)
        frame[column] = frame[column].fillna("(unmapped)") if column in names.values() else (
            frame[column]
        )  # fmt: skip
        keys.append(column)
    grouped = frame.groupby(keys)
    out = pd.DataFrame(
        {
            "gpus": grouped.apply(lambda g: len(g.drop_duplicates(["hostname", "gpu"]))),
            "covered_gpu_hours": grouped["covered_h"].sum(),
            "energy_kwh": grouped["energy_kwh"].sum(min_count=1),
            "idle_gpu_hours": grouped["idle_h"].sum(min_count=1),
        }
    )
    for column in (*MEANS, "mfu_proxy"):
        out[column] = _weighted(frame, keys, column)
    out = out.reset_index().rename(columns={v: k for k, v in names.items()})
    rows = []
    for row in out.to_dict("records"):
        row = {
            k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in row.items()
        }
        row["provenance"] = PROVENANCE
        row["reasons"] = {
            name: (NO_MAX_CLOCK if name == "mfu_proxy" else "not exported by dcgm-exporter")
            for name in (*MEANS, "mfu_proxy") if row[name] is None
        }  # fmt: skip
        rows.append(row)
    return rows


def _job_frame(user, cluster_ids, start: dt.date, end: dt.date) -> pd.DataFrame:
    rows = scope_records(JobDay.objects.filter(day__gte=start, day__lte=end), user)
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    columns = ["day", "cluster_id", "pool_id", "pool__name", "account", "job_id", *JOB_FIGURES]
    return pd.DataFrame(list(rows.values_list(*columns)), columns=columns)


def _activity_rows(frame: pd.DataFrame, keys: list[str]) -> list[dict[str, Any]]:
    out = frame.groupby(keys, dropna=False)[list(JOB_FIGURES)].sum().reset_index()
    allocated = out["allocated_card_hours"].where(out["allocated_card_hours"] > 0)
    out["activity"] = out["active_card_hours"] / allocated
    out["tensor_activity"] = out["tensor_card_hours"] / allocated
    out["idle_share"] = out["idle_card_hours"] / allocated
    out = out.astype(object).where(out.notna(), None)
    return [{**row, "provenance": PROVENANCE} for row in out.to_dict("records")]


def team_activity(user, cluster_ids, start: dt.date, end: dt.date) -> list[dict]:
    """Per team: allocated vs. active card-hours, idle-but-allocated card-hours, energy."""
    frame = _job_frame(user, cluster_ids, start, end)
    return [] if frame.empty else _activity_rows(frame, ["account"])


def wasted_allocation(user, cluster_ids, start: dt.date, end: dt.date, limit: int = 50):
    """The jobs holding the most idle-but-allocated card-hours, most first."""
    frame = _job_frame(user, cluster_ids, start, end)
    if frame.empty:
        return []
    rows = _activity_rows(frame, ["cluster_id", "job_id", "account", "pool__name"])
    rows.sort(key=lambda r: (-(r["idle_card_hours"] or 0.0), r["job_id"]))
    return [r for r in rows if (r["idle_card_hours"] or 0) > 0][:limit]


def daily_activity(user, cluster_ids, start: dt.date, end: dt.date, scope: str = "pool"):
    """Per day and pool (or team): allocated and active card-hours (the Usage page's lines)."""
    frame = _job_frame(user, cluster_ids, start, end)
    key = "pool__name" if scope == "pool" else "account"
    return [] if frame.empty else _activity_rows(frame, ["day", key])


NO_JOBS = (
    "no Slurm job joined with telemetry (usage records with NodeList) in the period: the MFU "
    "proxy over allocated time is unknown"
)


def _allocated_proxy(frame: pd.DataFrame, start: dt.date, end: dt.date) -> pd.DataFrame:
    """Per pool: the MFU proxy over the cards' allocated time, and those card-hours.

    Tensor activity of the jobs' card-hours × the clock ratio weighted by tensor work
    (Σ tensor × ratio × h ÷ Σ tensor × h = pool proxy ÷ pool tensor activity): the all-time
    proxy counts unallocated hours as zero, which the utilization factor already counts.
    """
    jobs = JobDay.objects.filter(day__gte=start, day__lte=end, pool_id__in=set(frame["pool_id"]))
    sums = pd.DataFrame(
        list(
            jobs.values("pool_id").annotate(
                alloc=Sum("allocated_card_hours"), tensor=Sum("tensor_card_hours")
            )
        ),
        columns=["pool_id", "alloc", "tensor"],
    ).set_index("pool_id")
    frame = frame[frame["tensor_active"].notna() & frame["mfu_proxy"].notna()]
    clock_ratio = _weighted(frame, ["pool_id"], "mfu_proxy") / _weighted(
        frame, ["pool_id"], "tensor_active"
    ).where(lambda v: v > 0)
    tensor = sums["tensor"] / sums["alloc"].where(sums["alloc"] > 0)
    return pd.DataFrame({"mfu_allocated": tensor * clock_ratio.reindex(tensor.index),
                         "allocated_card_hours": sums["alloc"]})  # fmt: skip


def _finite(value) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def measured_factors(pool_ids, start: dt.date, end: dt.date) -> dict[int, dict[str, Any]]:
    """Per pool: the telemetry MFU proxy (over all covered hours, and over the allocated time
    for the analyses), GPU-hours covered and measured IT energy (GPU energy × (1 + the
    source's node overhead)), days ``start``–``end`` inclusive; pools without samples are
    absent."""
    frame = _gpu_frame(None, start, end)
    frame = frame[frame["pool_id"].isin(list(pool_ids))]
    if frame.empty:
        return {}
    overhead = dict(PrometheusSource.objects.values_list("cluster_id", "node_overhead"))
    frame["it_energy_kwh"] = frame["energy_kwh"] * (1 + frame["cluster_id"].map(overhead).fillna(0))
    frame["energy_h"] = frame["covered_h"].where(frame["energy_kwh"].notna(), 0.0)
    mfu = _weighted(frame, ["pool_id"], "mfu_proxy")
    allocated = _allocated_proxy(frame, start, end)
    sums = frame.groupby("pool_id")[["energy_kwh", "it_energy_kwh", "covered_h", "energy_h"]].sum(
        min_count=1
    )
    result = {}
    for pool_id, row in sums.iterrows():
        value = _finite(mfu.get(pool_id))
        on_allocated = allocated.loc[pool_id] if pool_id in allocated.index else None
        result[int(pool_id)] = {
            "mfu": value,
            "mfu_reason": NO_MAX_CLOCK if value is None else "",
            "mfu_allocated": None
            if on_allocated is None
            else _finite(on_allocated["mfu_allocated"]),
            "allocated_card_hours": 0.0
            if on_allocated is None
            else float(on_allocated["allocated_card_hours"]),
            "gpu_energy_kwh": row["energy_kwh"],
            "it_energy_kwh": row["it_energy_kwh"],
            "covered_gpu_hours": row["covered_h"],
            "energy_covered_gpu_hours": row["energy_h"],  # hours of GPUs with the counter
            "provenance": PROVENANCE,
        }
        if result[int(pool_id)]["mfu_allocated"] is None and value is not None:
            result[int(pool_id)]["mfu_reason"] = NO_JOBS
    return result


def activity_factors(scope):
    """For ``accounting.selectors.chargeback_report(activity=...)``: each team row's measured
    engine activity (active ÷ allocated card-hours of its pool, team and bucket); 1 (charged
    by allocation) where nothing was measured."""
    start = scope.period_start.astimezone(ZoneInfo(scope.tz)).date()
    end = scope.period_end.astimezone(ZoneInfo(scope.tz)).date()
    rows = JobDay.objects.filter(day__gte=start, day__lt=end)
    if scope.cluster_ids is not None:
        rows = rows.filter(cluster_id__in=scope.cluster_ids)
    columns = ["day", "pool_id", "account", "active_card_hours", "allocated_card_hours"]
    measured = pd.DataFrame(list(rows.values_list(*columns)), columns=columns)

    def factor(team_usage: pd.DataFrame, bucket_starts: pd.DatetimeIndex) -> pd.Series:
        ones = pd.Series(1.0, index=team_usage.index)
        if measured.empty:
            return ones
        starts = np.asarray(bucket_starts.tz_localize(None).normalize(), dtype="datetime64[D]")
        days = np.asarray(pd.to_datetime(measured["day"]), dtype="datetime64[D]")
        frame = measured.assign(_bucket=np.searchsorted(starts, days, side="right") - 1)
        sums = frame.groupby(["pool_id", "account", "_bucket"])[
            ["active_card_hours", "allocated_card_hours"]
        ].sum()
        ratio = sums["active_card_hours"] / sums["allocated_card_hours"].where(
            sums["allocated_card_hours"] > 0
        )
        keys = pd.MultiIndex.from_arrays(
            [team_usage["pool"].astype("int64"), team_usage["account"].fillna(""),
             team_usage["_bucket"].astype("int64")]
        )  # fmt: skip
        return pd.Series(ratio.reindex(keys).to_numpy(), index=team_usage.index).fillna(1.0)

    return factor

"""Measured utilization and effective time from usage records, vectorised.

Definitions: docs/efficiency-model.md (utilization, effective training time).

Inputs are plain DataFrames (no Django):

* ``usage``: the chunks of :mod:`accounting.parsing` (or rows from the database) with at least
  ``cluster``, ``start``, ``end`` (NaT while running), ``duration_h``, ``cards``, ``state``, and
  any grouping columns (``accelerator_model``, ``account``, ``partition``, ``pool``).
* ``inventory``: one row per group of cards in service: ``cluster``, ``cards``,
  ``in_service_from``, ``in_service_until`` (NaT = open-ended), and grouping columns such as
  ``accelerator_model`` or ``pool``. Available card-hours = cards × hours in service.
* ``downtime`` (optional): :func:`accounting.parsing.sreport.iter_sreport_chunks` rows,
  ``cluster``, ``period_start``, ``period_end``, ``down_card_hours``,
  ``planned_down_card_hours``. Each report is spread evenly over its period.

Jobs that span bucket boundaries are split by interval overlap arithmetic (``np.repeat`` over
the buckets each job touches), never by a per-job loop.

The rule, with A = allocated, L = lost, D = unplanned Down, C = available card-hours:

* ``available_card_hours`` C = in-service card-hours − planned downtime (sreport PLND Down).
* ``lost_card_hours`` L = card-hours of jobs that ended failed, node_fail or preempted (whole
  job: we do not know its last checkpoint; weights per state are a parameter).
* ``allocation_share`` = A / C: the plain "allocated ÷ available".
* ``effective_time`` = (A − L) / (A + D) = 1 − (L + D) / (A + D): failed work and failed
  nodes both count as time the workload lost.
* ``utilization`` = (A + D) / C: Down hours are charged to effective time, not twice, so
  ``utilization × effective_time = (A − L) / C`` (``productive_share``) exactly. Without
  sreport data D = 0, so ``utilization = A / C`` and ``effective_time = 1 − L / A``.
  Hand ``utilization`` to the engine as the *measured share* of the utilization factor.

For a dimension the inventory does not have (``account`` = team), a team's figures are its
share of the enclosing inventory scope: C is the scope's, and D is split in proportion to
allocated card-hours, so team utilizations add up to the scope's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import numpy as np
import pandas as pd

from engine.factors import mfu_from_throughput

Frequency = Literal["day", "week", "month", "total"]
MICROSECONDS_PER_HOUR = 3_600_000_000
# Lost-work weight per end state: the whole job's card-hours (no checkpoint data in sacct).
DEFAULT_LOST_STATE_WEIGHTS: dict[str, float] = {"failed": 1.0, "node_fail": 1.0, "preempted": 1.0}


@dataclass(frozen=True)
class IntervalSplit:
    """Interval ``row`` overlaps bucket ``bucket`` for ``hours`` (parallel arrays)."""

    row: np.ndarray
    bucket: np.ndarray
    hours: np.ndarray


def _utc_micros(
    values: pd.Series | pd.DatetimeIndex | np.ndarray | Sequence[object],
) -> np.ndarray:
    """Datetimes (tz-aware, or naive meaning UTC) -> int64 microseconds; NaT -> min int64."""
    series = pd.Series(pd.to_datetime(pd.Series(values), utc=True))
    return series.dt.tz_convert(None).to_numpy().astype("datetime64[us]").astype(np.int64)


def _timestamp_utc(moment: datetime | pd.Timestamp | str, tz: str) -> pd.Timestamp:
    stamp = pd.Timestamp(moment)
    return (
        stamp.tz_localize(tz).tz_convert("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    )


def bucket_edges(
    period_start: datetime | pd.Timestamp | str,
    period_end: datetime | pd.Timestamp | str,
    frequency: Frequency,
    tz: str = "UTC",
) -> pd.DatetimeIndex:
    """Bucket boundaries (UTC) covering exactly [period_start, period_end).

    Days, ISO weeks (Monday) and calendar months start at local midnight in ``tz``, so a
    DST day has 23 or 25 hours. The first and last buckets are clipped to the period.
    Naive period bounds are read in ``tz``.
    """
    start = _timestamp_utc(period_start, tz)
    end = _timestamp_utc(period_end, tz)
    if not end > start:
        raise ValueError("period_end must be after period_start")
    if frequency == "total":
        return pd.DatetimeIndex([start, end]).as_unit("us")
    local_start = start.tz_convert(tz).tz_localize(None).normalize()
    local_end = end.tz_convert(tz).tz_localize(None)
    if frequency == "day":
        first, step = local_start, "D"
    elif frequency == "week":
        first, step = local_start - pd.Timedelta(days=local_start.weekday()), "7D"
    elif frequency == "month":
        first, step = local_start.replace(day=1), "MS"
    else:
        raise ValueError(f"frequency must be day, week, month or total, not {frequency!r}")
    local = pd.date_range(first, local_end, freq=step)
    inner = local.tz_localize(tz, ambiguous=False, nonexistent="shift_forward").tz_convert("UTC")
    inner = inner[(inner > start) & (inner < end)]
    return pd.DatetimeIndex([start, *inner, end]).as_unit("us")


def split_intervals(
    start: pd.Series | np.ndarray, end: pd.Series | np.ndarray, edges: pd.DatetimeIndex
) -> IntervalSplit:
    """Overlap of each interval [start, end) with each bucket of ``edges``, vectorised.

    Each interval is repeated once per bucket it touches; intervals outside the edges or of
    zero length produce no rows.
    """
    edge_us = _utc_micros(edges)
    start_us = np.maximum(_utc_micros(start), edge_us[0])
    end_us = np.minimum(_utc_micros(end), edge_us[-1])
    valid = end_us > start_us
    first = np.searchsorted(edge_us, start_us, side="right") - 1
    last = np.searchsorted(edge_us, end_us, side="left") - 1
    counts = np.where(valid, last - first + 1, 0)
    rows = np.repeat(np.arange(len(start_us)), counts)
    # Position of each repeated row inside its interval's run of buckets.
    run_starts = np.repeat(np.cumsum(counts) - counts, counts)
    buckets = np.repeat(first, counts) + (np.arange(counts.sum()) - run_starts)
    lo = np.maximum(start_us[rows], edge_us[buckets])
    hi = np.minimum(end_us[rows], edge_us[buckets + 1])
    return IntervalSplit(rows, buckets, (hi - lo) / MICROSECONDS_PER_HOUR)


def _bucket_frame(edges: pd.DatetimeIndex, tz: str) -> pd.DataFrame:
    local = edges.tz_convert(tz)
    return pd.DataFrame(
        {
            "_bucket": np.arange(len(edges) - 1),
            "bucket_start": local[:-1],
            "bucket_end": local[1:],
            "bucket_hours": (_utc_micros(edges[1:]) - _utc_micros(edges[:-1]))
            / MICROSECONDS_PER_HOUR,
        }
    )


def usage_interval(usage: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(start, end) in UTC; running jobs end at start + duration_h (the time held so far)."""
    start = pd.to_datetime(usage["start"], utc=True)
    held = pd.to_timedelta(usage["duration_h"].astype("float64"), unit="h")
    end = pd.to_datetime(usage["end"], utc=True).dt.as_unit("us")
    # One resolution on both sides: pandas 4 refuses a fill value of another one.
    return start, end.fillna((start + held).dt.as_unit("us"))


def allocated_by_bucket(
    usage: pd.DataFrame,
    edges: pd.DatetimeIndex,
    keys: Sequence[str],
    lost_state_weights: Mapping[str, float] = DEFAULT_LOST_STATE_WEIGHTS,
) -> pd.DataFrame:
    """Allocated and lost card-hours per ``keys`` × bucket (``_bucket`` = bucket index).

    A job's card-hours (cards × duration_h) are placed over [start, end) in proportion to the
    overlap, so suspended time (duration_h < end − start) never inflates the total.
    """
    start, end = usage_interval(usage)
    split = split_intervals(start, end, edges)
    span_h = ((end - start).dt.total_seconds() / 3600.0).to_numpy()
    duration_h = usage["duration_h"].to_numpy(dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        held_share = np.where(span_h > 0, np.minimum(duration_h / span_h, 1.0), 0.0)
    cards = usage["cards"].to_numpy(dtype="float64")
    lost_weight = (
        usage["state"]
        .astype("object")
        .map(dict(lost_state_weights))
        .fillna(0.0)
        .to_numpy(dtype="float64")
    )
    card_hours = cards[split.row] * split.hours * held_share[split.row]
    pieces = pd.DataFrame({key: usage[key].to_numpy()[split.row] for key in keys})
    pieces["_bucket"] = split.bucket
    pieces["allocated_card_hours"] = card_hours
    pieces["lost_card_hours"] = card_hours * lost_weight[split.row]
    return (
        pieces.groupby([*keys, "_bucket"], dropna=False, observed=True, sort=False)
        .sum()
        .reset_index()
    )


def in_service_by_bucket(
    inventory: pd.DataFrame, edges: pd.DatetimeIndex, keys: Sequence[str]
) -> pd.DataFrame:
    """In-service card-hours per ``keys`` × bucket from cards × hours in service."""
    far_past = pd.Series(edges[0], index=inventory.index)
    far_future = pd.Series(edges[-1], index=inventory.index)
    start = (
        pd.to_datetime(inventory["in_service_from"], utc=True).fillna(far_past)
        if "in_service_from" in inventory
        else far_past
    )
    end = (
        pd.to_datetime(inventory["in_service_until"], utc=True).fillna(far_future)
        if "in_service_until" in inventory
        else far_future
    )
    split = split_intervals(start, end, edges)
    pieces = pd.DataFrame({key: inventory[key].to_numpy()[split.row] for key in keys})
    pieces["_bucket"] = split.bucket
    pieces["in_service_card_hours"] = (
        inventory["cards"].to_numpy(dtype="float64")[split.row] * split.hours
    )
    return pieces.groupby([*keys, "_bucket"], dropna=False, sort=False).sum().reset_index()


def downtime_by_bucket(downtime: pd.DataFrame, edges: pd.DatetimeIndex) -> pd.DataFrame:
    """Down and planned-down card-hours per cluster × bucket, spread evenly over each report.

    Only GPU rows count: cpu, billing or gres/gpumem hours are no card-hours. Per cluster,
    untyped ``gres/gpu`` rows are used when present (typed rows are subsets of them);
    otherwise the typed ``gres/gpu:TYPE`` rows are summed.
    """
    frame = downtime
    if "tres_name" in frame:
        tres = frame["tres_name"].fillna("gres/gpu").astype("str")
        untyped = (tres == "gres/gpu").to_numpy()
        typed = tres.str.match(r"^gres/gpu:[^=,]+$").to_numpy(dtype=bool)
        has_untyped = pd.Series(untyped).groupby(frame["cluster"].to_numpy()).transform("any")
        frame = frame.loc[untyped | (typed & ~has_untyped.to_numpy())]
    frame = frame.reset_index(drop=True)
    split = split_intervals(frame["period_start"], frame["period_end"], edges)
    period_h = (frame["period_end"] - frame["period_start"]).dt.total_seconds().to_numpy() / 3600.0
    share = split.hours / period_h[split.row]
    pieces = pd.DataFrame(
        {"cluster": frame["cluster"].to_numpy()[split.row], "_bucket": split.bucket}
    )
    for column in ("down_card_hours", "planned_down_card_hours"):
        pieces[column] = frame[column].to_numpy(dtype="float64")[split.row] * share
    return pieces.groupby(["cluster", "_bucket"], sort=False).sum().reset_index()


def measured_utilization(
    usage: pd.DataFrame,
    inventory: pd.DataFrame,
    *,
    period_start: datetime | pd.Timestamp | str,
    period_end: datetime | pd.Timestamp | str,
    frequency: Frequency = "month",
    by: Sequence[str] = ("cluster",),
    downtime: pd.DataFrame | None = None,
    tz: str = "UTC",
    lost_state_weights: Mapping[str, float] = DEFAULT_LOST_STATE_WEIGHTS,
) -> pd.DataFrame:
    """Measured utilization and effective time per ``by`` × bucket (rule in the module doc).

    Returns one row per group and bucket with ``by`` columns, ``bucket_start``/``bucket_end``
    (tz-aware in ``tz``), ``bucket_hours``, and float64 ``in_service_card_hours``,
    ``planned_down_card_hours``, ``available_card_hours``, ``allocated_card_hours``,
    ``lost_card_hours``, ``down_card_hours``, ``allocation_share``, ``utilization``,
    ``effective_time``, ``productive_share``. Ratios are NaN where the denominator is 0.
    """
    by = list(by)
    if "cluster" not in inventory:
        raise ValueError("inventory needs a cluster column")
    missing = [key for key in by if key not in usage]
    if missing:
        raise ValueError(
            f"usage has no column {missing}: every grouping column must be on the usage records "
            "(map partitions to pools before calling)"
        )
    edges = bucket_edges(period_start, period_end, frequency, tz)
    inventory_keys = ["cluster", *[key for key in by if key in inventory and key != "cluster"]]
    team_keys = [key for key in by if key not in inventory]
    fine_keys = inventory_keys + team_keys

    capacity = in_service_by_bucket(inventory, edges, inventory_keys)
    if downtime is not None and len(downtime):
        down = downtime_by_bucket(downtime, edges)
        # Split a cluster's downtime over its inventory groups by their in-service hours.
        cluster_hours = capacity.groupby(["cluster", "_bucket"])["in_service_card_hours"].transform(
            "sum"
        )
        capacity["_cluster_share"] = capacity["in_service_card_hours"] / cluster_hours
        capacity = capacity.merge(down, on=["cluster", "_bucket"], how="left")
        for column in ("down_card_hours", "planned_down_card_hours"):
            capacity[column] = capacity[column].fillna(0.0) * capacity["_cluster_share"].fillna(0.0)
        capacity = capacity.drop(columns="_cluster_share")
    else:
        capacity["down_card_hours"] = 0.0
        capacity["planned_down_card_hours"] = 0.0

    allocated = allocated_by_bucket(usage, edges, fine_keys, lost_state_weights)
    if team_keys:
        # Teams: their share of the scope's downtime, in proportion to allocated hours.
        allocated = allocated.merge(
            capacity[[*inventory_keys, "_bucket", "down_card_hours"]],
            on=[*inventory_keys, "_bucket"],
            how="left",
        )
        scope_allocated = allocated.groupby([*inventory_keys, "_bucket"], dropna=False)[
            "allocated_card_hours"
        ].transform("sum")
        with np.errstate(divide="ignore", invalid="ignore"):
            team_share = (allocated["allocated_card_hours"] / scope_allocated).fillna(0.0)
        allocated["down_card_hours"] = allocated["down_card_hours"].fillna(0.0) * team_share
        capacity = capacity.drop(columns="down_card_hours")

    scope_keys = [key for key in by if key in inventory_keys]
    capacity_columns = ["in_service_card_hours", "planned_down_card_hours"]
    if not team_keys:
        capacity_columns.append("down_card_hours")
    scope = (
        capacity.groupby([*scope_keys, "_bucket"], sort=False)[capacity_columns].sum().reset_index()
    )
    usage_columns = ["allocated_card_hours", "lost_card_hours"] + (
        ["down_card_hours"] if team_keys else []
    )
    used = (
        allocated.groupby([*by, "_bucket"], dropna=False, sort=False)[usage_columns]
        .sum()
        .reset_index()
    )
    for key in scope_keys:
        if scope[key].dtype != used[key].dtype:
            # An all-empty key (records without a card model) reads as float: compare as objects.
            scope[key], used[key] = scope[key].astype(object), used[key].astype(object)
    result = scope.merge(used, on=[*scope_keys, "_bucket"], how="right" if team_keys else "outer")
    numeric = capacity_columns + usage_columns
    result[numeric] = result[numeric].astype("float64").fillna(0.0)
    result = result.merge(_bucket_frame(edges, tz), on="_bucket", how="left")

    result["available_card_hours"] = (
        result["in_service_card_hours"] - result["planned_down_card_hours"]
    ).clip(lower=0.0)
    a = result["allocated_card_hours"]
    lost = result["lost_card_hours"]
    d = result["down_card_hours"]
    c = result["available_card_hours"].where(result["available_card_hours"] > 0)
    result["allocation_share"] = a / c
    result["utilization"] = (a + d) / c
    result["effective_time"] = ((a - lost) / (a + d).where(a + d > 0)).clip(lower=0.0)
    result["productive_share"] = (a - lost) / c
    ordered = [
        *by,
        "bucket_start",
        "bucket_end",
        "bucket_hours",
        "in_service_card_hours",
        "planned_down_card_hours",
        "available_card_hours",
        "allocated_card_hours",
        "lost_card_hours",
        "down_card_hours",
        "allocation_share",
        "utilization",
        "effective_time",
        "productive_share",
    ]
    return result.sort_values([*by, "bucket_start"]).reset_index(drop=True)[ordered]


def peak_weighted_mean(
    values: pd.Series,
    card_hours: pd.Series,
    peak_tflops: pd.Series,
    groups: pd.DataFrame | None = None,
) -> pd.Series | float:
    """Aggregate a factor card-hour-weighted by peak FLOPs, NaN values ignored (docs: Aggregation).

    A pool of 1,000 H100 weighs more than 10 V100: weight = card_hours × peak_tflops.
    With ``groups`` (columns to group by) returns one value per group.
    """
    weight = (card_hours * peak_tflops).where(values.notna(), 0.0)
    weighted = values.fillna(0.0) * weight
    if groups is None:
        total = float(weight.sum())
        return float(weighted.sum()) / total if total > 0 else float("nan")
    keys = [groups[column] for column in groups.columns]
    total_weight = weight.groupby(keys).sum()
    return weighted.groupby(keys).sum() / total_weight.where(total_weight > 0)


def measured_mfu(
    usage: pd.DataFrame,
    peak_tflops_by_model: Mapping[str, float],
    *,
    by: Sequence[str] = ("cluster", "accelerator_model"),
    flops_per_param_token: float = 6.0,
) -> pd.DataFrame:
    """Measured MFU and GPU utilization per group from job records.

    Per job: the entered ``mfu`` if given, else ``k · N · tokens_per_s / (cards · peak)``,
    where ``N`` is the optional ``model_active_params`` column (a mixture of experts multiplies
    each token through its active parameters only), NaN or absent → ``model_params``.
    Aggregated card-hour-weighted by peak FLOPs over the jobs that carry a measurement.
    Returns ``by`` columns, ``mfu``, ``gpu_utilization``, ``measured_card_hours`` (float64).
    """
    peak = usage["accelerator_model"].map(dict(peak_tflops_by_model)).astype("float64")
    params = usage["model_params"].astype("float64")
    if "model_active_params" in usage:
        params = usage["model_active_params"].astype("float64").fillna(params)
    from_throughput = pd.Series(
        mfu_from_throughput(
            params,
            usage["tokens_per_s"],
            usage["cards"],
            peak,
            flops_per_param_token,
        ),
        index=usage.index,
    )
    job_mfu = usage["mfu"].astype("float64").fillna(from_throughput)
    job_mfu = job_mfu.where(np.isfinite(job_mfu))
    groups = usage[list(by)]
    card_hours = usage["card_hours"].astype("float64")
    result = pd.DataFrame(
        {
            "mfu": peak_weighted_mean(job_mfu, card_hours, peak, groups),
            "gpu_utilization": peak_weighted_mean(
                usage["gpu_utilization"].astype("float64"), card_hours, peak, groups
            ),
            "measured_card_hours": card_hours.where(job_mfu.notna(), 0.0)
            .groupby([groups[column] for column in groups.columns])
            .sum(),
        }
    )
    return result.reset_index()

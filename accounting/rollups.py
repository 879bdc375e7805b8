"""Daily usage rollups: a year of usage records summed once, read by the dashboards per request.

:func:`refresh_usage_rollups` splits every record of a cluster over the local days it ran with
the engine's own :func:`~engine.usage.allocated_by_bucket` and stores one
:class:`~accounting.models.UsageDailyRollup` row per day × pool × card × team. The split is
linear in the records and in time, so the rows of the days of a week or month add up to what
the reports compute from the raw records for that bucket.

:func:`rollup_usage_frame` turns rollup rows back into the engine's usage frame: per row one
"pseudo job" that holds ``allocated − lost`` card-hours over its whole day (state completed)
and one that holds the lost card-hours (state failed). Fed to
:func:`accounting.selectors.measured_utilization`, :func:`~accounting.selectors.cost_report`
or :func:`~accounting.selectors.chargeback_report` (their ``usage`` argument) this gives the
reports' numbers for periods made of whole local days, from a few thousand rows instead of
10⁵-10⁶ records. Pools of unmapped records are still guessed per request (from the current
inventory), so inventory edits need no refresh.

Known difference: the measured MFU of a job counts on the day it started (the reports take
every job overlapping the period), so a job that started before the period is left out.
"""

from __future__ import annotations

import datetime as dt
import logging
import zoneinfo
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Min, Q, Sum
from django.utils import timezone
from django.utils.module_loading import import_string

from accounting.models import RollupRefresh, UsageDailyRollup, UsageRecord
from accounting.selectors import NO_ACCOUNT, USAGE_FRAME_COLUMNS, _frame, typed_usage_frame
from core.jobs.status import JobStatus
from engine.factors import mfu_from_throughput
from engine.usage import allocated_by_bucket, bucket_edges, usage_interval
from inventory.models import AcceleratorModel, Cluster

logger = logging.getLogger(__name__)

RECORDS_PER_CHUNK = 200_000
WRITE_BATCH_ROWS = 5_000
ROLLUP_KEYS = ("pool", "accelerator_id", "account")
VALUE_COLUMNS = (
    "allocated_card_hours",
    "lost_card_hours",
    "gpu_busy_card_hours",
    "gpu_measured_card_hours",
    "mfu_card_hours",
    "mfu_weighted_card_hours",
)
# Rollup key -> UsageDailyRollup column, for the grouped read.
KEY_FIELDS = {"pool": "pool_id", "accelerator": "accelerator_id", "team": "account"}
# Report granularity -> the stored column whose rows fall in one bucket (total: none).
BUCKET_FIELDS = {"day": "day", "week": "week", "month": "month", "total": None}


@dataclass
class RefreshCounts:
    clusters: int = 0
    records: int = 0
    rows: int = 0


# -- refresh ---------------------------------------------------------------------------------


def _record_chunks(cluster_id: int) -> tuple[int, list[tuple[int, int]]]:
    """The cluster's record count and pk ranges of about RECORDS_PER_CHUNK records each."""
    pks = np.fromiter(
        UsageRecord.objects.filter(cluster_id=cluster_id)
        .order_by("pk")
        .values_list("pk", flat=True)
        .iterator(chunk_size=50_000),
        dtype=np.int64,
    )
    if not len(pks):
        return 0, []
    starts = pks[::RECORDS_PER_CHUNK]
    ends = np.append(pks[RECORDS_PER_CHUNK::RECORDS_PER_CHUNK] - 1, pks[-1])
    return len(pks), list(zip(starts.tolist(), ends.tolist(), strict=True))


def _day_edges(usage: pd.DataFrame, tz: str) -> pd.DatetimeIndex:
    start, end = usage_interval(usage)
    first = start.min().tz_convert(tz).normalize()
    last = max(end.max(), start.max()).tz_convert(tz).normalize() + pd.Timedelta(days=1)
    return bucket_edges(first, last, "day", tz)


def _job_mfu(usage: pd.DataFrame) -> pd.Series:
    """Each record's MFU: the entered one, else from throughput (as the reports compute it)."""
    peaks = dict(AcceleratorModel.objects.values_list("pk", "dense_bf16_tflops"))
    peak = usage["accelerator_id"].astype("float64").map(peaks).astype("float64")
    from_throughput = pd.Series(
        mfu_from_throughput(usage["model_params"], usage["tokens_per_s"], usage["cards"], peak),
        index=usage.index,
    )
    mfu = usage["mfu"].astype("float64").fillna(from_throughput)
    return mfu.where(np.isfinite(mfu))


def daily_rollup_frame(usage: pd.DataFrame, tz: str) -> pd.DataFrame:
    """Usage records (the selectors' usage frame) → one row per day × pool × card × team."""
    if usage.empty:
        return pd.DataFrame(columns=["day", *ROLLUP_KEYS, *VALUE_COLUMNS])
    keys = list(ROLLUP_KEYS)
    edges = _day_edges(usage, tz)
    days = pd.Series(edges.tz_convert(tz)[:-1].date)
    parts = [allocated_by_bucket(usage, edges, keys)]
    measured = usage[usage["gpu_utilization"].notna()]
    if len(measured):
        # Cards × gpuutil through the same split: Σ gpuutil × card-hours per day.
        busy = allocated_by_bucket(
            measured.assign(cards=measured["cards"] * measured["gpu_utilization"]), edges, keys
        )
        parts.append(
            busy[[*keys, "_bucket", "allocated_card_hours"]].rename(
                columns={"allocated_card_hours": "gpu_busy_card_hours"}
            )
        )
        held = allocated_by_bucket(measured, edges, keys)
        parts.append(
            held[[*keys, "_bucket", "allocated_card_hours"]].rename(
                columns={"allocated_card_hours": "gpu_measured_card_hours"}
            )
        )
    job_mfu = _job_mfu(usage)
    with_mfu = usage[job_mfu.notna()]
    if len(with_mfu):
        start_day = pd.to_datetime(with_mfu["start"], utc=True).dt.tz_convert(tz).dt.date
        position = pd.Index(days).get_indexer(start_day)
        card_hours = with_mfu["card_hours"].astype("float64")
        mfu_part = with_mfu[keys].assign(
            _bucket=position,
            mfu_card_hours=card_hours,
            mfu_weighted_card_hours=card_hours * job_mfu[with_mfu.index],
        )
        parts.append(mfu_part[mfu_part["_bucket"] >= 0])
    frame = pd.concat(parts, ignore_index=True)
    for column in VALUE_COLUMNS:
        frame[column] = frame[column].astype("float64").fillna(0.0) if column in frame else 0.0
    frame = (
        frame.groupby([*keys, "_bucket"], dropna=False, sort=True)[list(VALUE_COLUMNS)]
        .sum()
        .reset_index()
    )
    frame["day"] = days.to_numpy()[frame["_bucket"].to_numpy()]
    return frame.drop(columns="_bucket")


def _cluster_usage(cluster_id: int, first_pk: int, last_pk: int) -> pd.DataFrame:
    records = UsageRecord.objects.filter(cluster_id=cluster_id, pk__gte=first_pk, pk__lte=last_pk)
    return typed_usage_frame(
        _frame(records.order_by(), USAGE_FRAME_COLUMNS, times=("start", "end"))
    )


def refresh_cluster(
    cluster_id: int, tz: str | None = None, advance: Callable[[int], None] | None = None
) -> tuple[int, int]:
    """Rebuild one cluster's rollup rows; returns (records read, rows written)."""
    tz = tz or settings.TIME_ZONE
    with transaction.atomic():
        # One refresh (or import) of a cluster at a time (row lock on PostgreSQL).
        list(Cluster.objects.select_for_update().filter(pk=cluster_id).values_list("pk"))
        total, chunks = _record_chunks(cluster_id)
        frames = []
        for first_pk, last_pk in chunks:
            usage = _cluster_usage(cluster_id, first_pk, last_pk)
            frames.append(daily_rollup_frame(usage, tz))
            if advance is not None:
                advance(len(usage))
        UsageDailyRollup.objects.filter(cluster_id=cluster_id).delete()
        if not frames:
            return 0, 0
        keys = ["day", *ROLLUP_KEYS]
        rollup = (
            pd.concat(frames, ignore_index=True)
            .groupby(keys, dropna=False, sort=True)[list(VALUE_COLUMNS)]
            .sum()
            .reset_index()
        )
        now = timezone.now()
        pools = rollup["pool"].astype("object").where(rollup["pool"].notna(), None)
        cards = rollup["accelerator_id"].astype("object").where(rollup["accelerator_id"].notna())
        values = rollup[list(VALUE_COLUMNS)].to_numpy(dtype="float64").tolist()
        objects = [
            UsageDailyRollup(
                day=day,
                week=day - dt.timedelta(days=day.weekday()),
                month=day.replace(day=1),
                cluster_id=cluster_id,
                pool_id=None if pool is None else int(pool),
                accelerator_id=None if card is None or pd.isna(card) else int(card),
                account="" if account == NO_ACCOUNT else account,
                refreshed_at=now,
                **dict(zip(VALUE_COLUMNS, row, strict=True)),
            )
            for day, pool, card, account, row in zip(
                rollup["day"], pools, cards, rollup["account"], values, strict=True
            )
        ]
        UsageDailyRollup.objects.bulk_create(objects, batch_size=WRITE_BATCH_ROWS)
        return total, len(objects)


def refresh_usage_rollups(
    cluster_ids: Sequence[int] | None = None,
    *,
    progress: Callable[[int], None] | None = None,
    on_cluster: Callable[[int, int], None] | None = None,
) -> RefreshCounts:
    """Rebuild the rollups of these clusters (all when None), one transaction per cluster.

    ``progress(records)`` is called after each chunk of records; ``on_cluster(cluster_id,
    record_count)`` before each cluster (for a progress bar's total).
    """
    ids = list(
        Cluster.objects.order_by("pk").values_list("pk", flat=True)
        if cluster_ids is None
        else Cluster.objects.filter(pk__in=cluster_ids).order_by("pk").values_list("pk", flat=True)
    )
    counts = RefreshCounts()
    for cluster_id in ids:
        if on_cluster is not None:
            on_cluster(cluster_id, UsageRecord.objects.filter(cluster_id=cluster_id).count())
        records, rows = refresh_cluster(cluster_id, advance=progress)
        counts.clusters += 1
        counts.records += records
        counts.rows += rows
    if ids:
        analyze_rollups()
    return counts


def analyze_rollups() -> None:
    """Gather the rollup table's statistics now (PostgreSQL): a refresh rewrites its rows and
    the dashboards' GROUP BY is planned from them. Stale statistics (autovacuum off, or not
    yet run after the refresh) planned a year's weekly sum as a sort (11 ms, 18 ms per
    month and team) instead of a hash (6 and 7 ms; benchmarks/README.md, Pages)."""
    if connection.vendor != "postgresql":
        return  # SQLite plans without table statistics unless ANALYZE is run by hand
    with connection.cursor() as cursor:
        cursor.execute(f'ANALYZE "{UsageDailyRollup._meta.db_table}"')


def queue_refresh(cluster_ids: Sequence[int] | None) -> RollupRefresh:
    """Refresh these clusters' rollups on a worker once the current transaction commits.

    The request is a :class:`~accounting.models.RollupRefresh` row written in the caller's
    transaction (it commits with the import) and queued by `core.jobs.lifecycle.queue`: a
    broker that is down marks it deferred and `dispatch_pending` sends it later, so neither
    the import fails nor the refresh is lost. Until then the dashboards show the rollups as
    stale (:func:`rollup_status`).
    """
    from core.jobs import lifecycle as jobs

    ids = None if cluster_ids is None else sorted({int(pk) for pk in cluster_ids})
    return jobs.queue(RollupRefresh(cluster_ids=ids), new_run=False)


def run_refresh_hooks(cluster_ids: Sequence[int] | None) -> None:
    """Call ``settings.USAGE_ROLLUP_REFRESH_HOOKS`` (the dashboards precompute their default
    views); a failing hook is logged, it never undoes the refresh."""
    for dotted in getattr(settings, "USAGE_ROLLUP_REFRESH_HOOKS", ()):
        try:
            import_string(dotted)(cluster_ids)
        except Exception:
            logger.exception("usage rollup refresh hook %s failed", dotted)


# -- read ------------------------------------------------------------------------------------


def _local_days(start: dt.datetime, end: dt.datetime, tz: str) -> tuple[dt.date, dt.date]:
    """Local days touching [start, end): first day and the day after the last one."""
    zone = zoneinfo.ZoneInfo(tz)
    first = start.astimezone(zone).date()
    local_end = end.astimezone(zone)
    last = local_end.date()
    if local_end.timetz().replace(tzinfo=None) != dt.time():
        last += dt.timedelta(days=1)
    return first, last


def rollup_usage_frame(
    cluster_ids: Sequence[int] | None,
    period_start: dt.datetime,
    period_end: dt.datetime,
    *,
    accelerator_id: int | None = None,
    team: str | None = None,
    keys: Sequence[str] = ("pool", "accelerator", "team"),
    tz: str | None = None,
    edges: pd.DatetimeIndex | None = None,
    granularity: str | None = None,
) -> pd.DataFrame:
    """The selectors' usage frame rebuilt from rollups (pseudo jobs, see the module doc).

    ``keys`` (pool, accelerator, team) are the columns the caller groups by; the others are
    summed away in SQL. ``accelerator`` is needed to guess the pool of unmapped records, so
    it comes along with ``pool``. With the report's bucket ``edges`` (whole local days) the
    days are summed per bucket first: one pseudo job per bucket instead of one per day. With
    their ``granularity`` too (day, week, month, total) that sum runs in SQL on the stored
    week / month columns, so a year of team rows comes back as ~50 weeks, not 366 days.
    """
    tz = tz or settings.TIME_ZONE
    wanted = set(keys)
    if "pool" in wanted:
        wanted.add("accelerator")
    first_day, end_day = _local_days(period_start, period_end, tz)
    rows = UsageDailyRollup.objects.filter(day__gte=first_day, day__lt=end_day)
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    if accelerator_id is not None:
        rows = rows.filter(accelerator_id=accelerator_id)
    if team is not None:
        rows = rows.filter(account="" if team == NO_ACCOUNT else team)
    bucket_field = BUCKET_FIELDS.get(granularity or "", "day") if edges is not None else "day"
    group = [
        *([bucket_field] if bucket_field else []),
        "cluster_id",
        *(KEY_FIELDS[k] for k in ("pool", "accelerator", "team") if k in wanted),
    ]
    # A bucket's first day stands for the bucket (every day of the group falls in it).
    first_day = {} if bucket_field == "day" else {"_day": Min("day")}
    summed = (
        rows.values(*group)
        .order_by()
        .annotate(
            **first_day,
            _allocated=Sum("allocated_card_hours"),
            _lost=Sum("lost_card_hours"),
            _mfu_h=Sum("mfu_card_hours"),
            _mfu_w=Sum("mfu_weighted_card_hours"),
        )
    )
    columns = {
        "day": "day" if bucket_field == "day" else "_day",
        "cluster": "cluster_id",
        "pool": "pool_id",
        "accelerator_id": "accelerator_id",
        "account": "account",
        "allocated": "_allocated",
        "lost": "_lost",
        "mfu_h": "_mfu_h",
        "mfu_w": "_mfu_w",
    }
    columns = {name: field for name, field in columns.items() if field in group or field[0] == "_"}
    frame = _frame(summed, columns)
    # Summed per bucket in SQL: one row per bucket and key already.
    return _pseudo_jobs(frame, tz, edges, one_row_per_bucket=bucket_field != "day")


def _day_spans(days: pd.Series, tz: str) -> tuple[pd.Series, pd.Series]:
    """[start, end) in UTC of local calendar days (23 or 25 hours on DST days)."""
    # Each distinct day once (a year has 366; rows repeat them per pool and team).
    codes, distinct = pd.factorize(days)
    local_day = pd.to_datetime(pd.Series(distinct).astype(str)).dt.tz_localize(
        tz, ambiguous=False, nonexistent="shift_forward"
    )
    start = local_day.dt.tz_convert("UTC").astype("datetime64[us, UTC]")
    end = (
        (local_day + pd.Timedelta(days=1))
        .dt.tz_localize(None)
        .dt.tz_localize(tz, ambiguous=False, nonexistent="shift_forward")
        .dt.tz_convert("UTC")
        .astype("datetime64[us, UTC]")
    )
    return (
        pd.Series(start.to_numpy()[codes], index=days.index, dtype=start.dtype),
        pd.Series(end.to_numpy()[codes], index=days.index, dtype=end.dtype),
    )


def _pseudo_jobs(
    frame: pd.DataFrame,
    tz: str,
    edges: pd.DatetimeIndex | None = None,
    *,
    one_row_per_bucket: bool = False,
) -> pd.DataFrame:
    """Rollup sums → usage rows the engine splits back into exactly those card-hours.

    ``one_row_per_bucket``: the rows were summed per bucket of ``edges`` already (in SQL).
    """
    for name in ("pool", "accelerator_id"):
        frame[name] = (
            frame[name].astype("Int64")
            if name in frame
            else pd.Series(pd.NA, index=frame.index, dtype="Int64")
        )
    if "account" not in frame:
        frame["account"] = NO_ACCOUNT
    frame["account"] = frame["account"].replace("", NO_ACCOUNT)
    names = dict(AcceleratorModel.objects.values_list("pk", "name"))
    frame["accelerator_model"] = frame["accelerator_id"].map(names).astype("object")
    frame["accelerator_model"] = frame["accelerator_model"].where(frame["accelerator_id"].notna())
    start, end = _day_spans(frame["day"], tz)
    if edges is not None and len(frame):
        # Days inside one bucket become one pseudo job over the (period-clipped) bucket.
        edge_us = edges.as_unit("us").asi8
        bucket = np.searchsorted(edge_us, start.astype("int64").to_numpy(), side="right") - 1
        inside = (bucket >= 0) & (bucket < len(edges) - 1)
        frame = frame[inside].assign(_bucket=bucket[inside])
        if one_row_per_bucket:  # the key columns typed as the sum below types them
            frame = frame.infer_objects()
        else:
            keys = ["cluster", "pool", "accelerator_id", "accelerator_model", "account", "_bucket"]
            sums = ["allocated", "lost", "mfu_h", "mfu_w"]
            frame = frame.groupby(keys, dropna=False, sort=False)[sums].sum().reset_index()
        bounds = pd.Series(edges.as_unit("us")).astype("datetime64[us, UTC]")
        start = pd.Series(bounds.to_numpy()[frame["_bucket"].to_numpy()], index=frame.index)
        end = pd.Series(bounds.to_numpy()[frame["_bucket"].to_numpy() + 1], index=frame.index)
    hours = (end - start).dt.total_seconds() / 3600.0
    allocated = frame["allocated"].astype("float64").fillna(0.0)
    lost = frame["lost"].astype("float64").fillna(0.0).clip(upper=allocated)
    base = frame[["cluster", "pool", "accelerator_id", "accelerator_model", "account"]].assign(
        start=start, end=end, duration_h=hours, tokens_per_s=np.nan, model_params=np.nan
    )
    kept = base.assign(
        cards=(allocated - lost) / hours, state="completed", mfu=np.nan, gpu_utilization=np.nan
    )
    failed = base.assign(cards=lost / hours, state="failed", mfu=np.nan, gpu_utilization=np.nan)
    failed = failed[lost > 0]
    mfu_hours = frame["mfu_h"].astype("float64").fillna(0.0)
    has_mfu = mfu_hours > 0
    # Zero-length rows: they carry an MFU and its card-hour weight, never allocated hours.
    measured = base[has_mfu].assign(
        end=start[has_mfu],
        duration_h=0.0,
        cards=0.0,
        state="completed",
        mfu=frame.loc[has_mfu, "mfu_w"].astype("float64") / mfu_hours[has_mfu],
        gpu_utilization=np.nan,
    )
    usage = pd.concat([kept, failed], ignore_index=True)
    usage["card_hours"] = usage["cards"] * usage["duration_h"]
    if len(measured):
        measured = measured.assign(card_hours=mfu_hours[has_mfu].to_numpy())
        usage = pd.concat([usage, measured], ignore_index=True)
    return typed_usage_frame(usage[[*USAGE_FRAME_COLUMNS]])


# -- state -----------------------------------------------------------------------------------


def rollup_status(cluster_ids: Sequence[int] | None = None) -> dict:
    """What the rollups cover, and whether a cluster imported usage after its last refresh."""
    from accounting.models import ImportJob, ImportKind

    rows = UsageDailyRollup.objects.all()
    jobs = ImportJob.objects.filter(status=JobStatus.SUCCEEDED).exclude(kind=ImportKind.SREPORT)
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
        jobs = jobs.filter(cluster_id__in=cluster_ids)
    per_cluster = {
        row["cluster_id"]: row
        for row in rows.values("cluster_id")
        .order_by()
        .annotate(first=Min("day"), last=Max("day"), refreshed=Max("refreshed_at"))
    }
    changed = (
        jobs.filter(Q(records_created__gt=0) | Q(records_updated__gt=0))
        .values("cluster_id")
        .order_by()
        .annotate(last=Max("finished_at"))
    )
    stale = sorted(
        row["cluster_id"]
        for row in changed
        if row["last"] is not None
        and (
            row["cluster_id"] not in per_cluster
            or row["last"] > per_cluster[row["cluster_id"]]["refreshed"]
        )
    )
    firsts = [row["first"] for row in per_cluster.values()]
    lasts = [row["last"] for row in per_cluster.values()]
    refreshed = [row["refreshed"] for row in per_cluster.values()]
    return {
        "first_day": min(firsts) if firsts else None,
        "last_day": max(lasts) if lasts else None,
        "refreshed_at": max(refreshed) if refreshed else None,
        "stale_cluster_ids": stale,
    }

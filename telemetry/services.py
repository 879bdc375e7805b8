"""Writing telemetry: queue a fetch, run it (query or parse, roll up, replace the days).

A run writes nothing until everything it needs is in memory; then, in one transaction, it
replaces its cluster's GpuDay and JobDay rows of the fetched days and marks itself
succeeded. A failure (Prometheus unreachable, a bad export) leaves earlier rollups intact.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounting.models import UsageRecord
from core.uploads.sniff import SNIFF_BYTES, peek_head
from engine.limits import LIMITS
from inventory.models import Cluster
from planner.services import mark_stale
from telemetry import jobs, promql, rollups
from telemetry.clocks import MAX_SM_CLOCK_MHZ, model_matches
from telemetry.export_json import is_json, read_json_export
from telemetry.export_text import ExportError, read_export
from telemetry.fetch import Telemetry, fetch_prometheus
from telemetry.fetch import telemetry_from_samples as from_samples
from telemetry.hostlist import HostlistError, expand_hostlist
from telemetry.models import FetchKind, GpuDay, HostPattern, JobDay, TelemetryFetch
from telemetry.prometheus import PrometheusClient, PrometheusError

GPU_DAY_COLUMNS = (
    "tensor_active", "gr_engine_active", "sm_active", "dram_active", "gpu_util", "power_w",
    "sm_clock_mhz", "energy_kwh", "idle_h", "covered_h",
)  # fmt: skip


def period_days(start: dt.date, end: dt.date) -> list[dt.date]:
    return [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]


class FetchPeriodError(ValueError):
    """A fetch period that is empty or longer than one fetch may cover."""


def check_fetch_period(start: dt.date, end: dt.date) -> None:
    days = (end - start).days + 1
    limit = LIMITS["telemetry_days"]
    if days < 1:
        raise FetchPeriodError(f"The end ({end.isoformat()}) is before the start.")
    if not limit.contains(days):
        raise FetchPeriodError(
            f"{start.isoformat()} to {end.isoformat()} is {days} days; a fetch covers "
            f"{limit.low:g} to {limit.high:g} days ({limit.why}): fetch a longer period in parts."
        )


def queue_fetch(
    cluster: Cluster,
    start: dt.date,
    end: dt.date,
    *,
    kind: str = FetchKind.PROMETHEUS,
    upload=None,
    user=None,
) -> TelemetryFetch:
    """A queued fetch of these local days (inclusive); its task runs after commit.

    Raises FetchPeriodError beyond ``LIMITS["telemetry_days"]`` (a quarter: bounded work per
    job), whoever asks: the API refuses the same period as a 400 before it gets here.
    """
    check_fetch_period(start, end)
    fetch = TelemetryFetch(cluster=cluster, kind=kind, period_start=start, period_end=end)
    fetch.created_by = user if user is not None and user.is_authenticated else None
    if upload is not None:
        fetch.source_name = getattr(upload, "name", "")[:255]
        fetch.file.save(fetch.source_name or "export.txt", upload, save=False)
    return jobs.queue(fetch)


def host_mapping(cluster: Cluster, hostnames) -> pd.DataFrame:
    """Host -> node group, pool, card (id and name) by the cluster's patterns, first match wins."""
    patterns = list(
        HostPattern.objects.filter(cluster=cluster).select_related("node_group__accelerator")
    )
    rows = []
    for host in sorted(set(hostnames)):
        match = next((p for p in patterns if p.matches(host)), None)
        group = match.node_group if match else None
        rows.append(
            {
                "host": host,
                "node_group_id": group.pk if group else None,
                "pool_id": group.pool_id if group else None,
                "accelerator_id": group.accelerator_id if group else None,
                "accelerator_name": group.accelerator.name if group else None,
            }
        )
    return pd.DataFrame(
        rows, columns=["host", "node_group_id", "pool_id", "accelerator_id", "accelerator_name"]
    )


def map_gpu_days(cluster: Cluster, gpu_days: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """GPU days with their node group, pool and card, and warnings (unmapped hosts, modelName
    that is not the node group's card)."""
    mapping = host_mapping(cluster, gpu_days[promql.HOST_LABEL].unique())
    frame = gpu_days.merge(mapping, left_on=promql.HOST_LABEL, right_on="host", how="left")
    warnings: list[str] = []
    unmapped = sorted(mapping.loc[mapping["node_group_id"].isna(), "host"])
    if unmapped:
        warnings.append(
            f"{len(unmapped)} host(s) match no host pattern (no pool or card): "
            + ", ".join(unmapped[:10])
        )
    names = frame[[promql.HOST_LABEL, promql.MODEL_LABEL, "accelerator_name"]].dropna()
    for (host, model, card), _ in names.groupby(list(names.columns)):
        if model and not model_matches(model, card):
            warnings.append(f"{host}: dcgm-exporter reports '{model}', its node group holds {card}")
    frame["max_sm_clock_mhz"] = frame["accelerator_name"].map(MAX_SM_CLOCK_MHZ)
    return frame, warnings[:50]


def jobs_frame(cluster: Cluster, start_s: int, end_s: int, now_s: int) -> tuple[pd.DataFrame, int]:
    """Usage records of the cluster overlapping [start_s, end_s) with their hosts expanded;
    and how many records had an unreadable NodeList."""
    start = dt.datetime.fromtimestamp(start_s, dt.UTC)
    end = dt.datetime.fromtimestamp(end_s, dt.UTC)
    records = (
        UsageRecord.objects.filter(cluster=cluster, start__lt=end)
        .exclude(end__lte=start)
        .exclude(node_list="")
    )
    values = list(
        records.values_list("job_id", "account", "pool_id", "cards", "start", "end", "node_list")
    )
    frame = pd.DataFrame(
        values, columns=["job_id", "account", "pool_id", "cards", "start", "end", "node_list"]
    )
    bad = 0
    hosts = []
    for text in frame["node_list"]:
        try:
            hosts.append(expand_hostlist(text))
        except HostlistError:
            hosts.append([])
            bad += 1
    frame["hosts"] = hosts
    epoch = pd.Timestamp(0, tz="UTC")
    second = pd.Timedelta(seconds=1)
    frame["start_s"] = ((pd.to_datetime(frame["start"], utc=True) - epoch) // second).astype(
        "int64"
    )
    ends = (pd.to_datetime(frame["end"], utc=True) - epoch) // second
    frame["end_s"] = ends.fillna(now_s).astype("int64")  # running jobs: until now
    frame["account"] = frame["account"].fillna("")
    return frame.drop(columns=["start", "end", "node_list"]), bad


def collect(fetch: TelemetryFetch, jobs_in: pd.DataFrame, progress) -> Telemetry:
    """Everything the fetch needs, in memory: from Prometheus or from the uploaded export."""
    tz = settings.TIME_ZONE
    days = period_days(fetch.period_start, fetch.period_end)
    if fetch.kind == FetchKind.UPLOAD:
        with fetch.file.open("rb") as handle:
            read = read_json_export if is_json(peek_head(handle, SNIFF_BYTES)) else read_export
            samples = read(handle)  # in blocks: memory follows the samples, not the file
        return from_samples(samples, days, tz, jobs_in)
    source = fetch.cluster.prometheus_source
    client = PrometheusClient(source.url, source.token(), timeout_s=source.timeout_s)
    try:
        return fetch_prometheus(client, days, tz, source, jobs_in, progress)
    finally:
        client.close()


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as dicts with None where a figure is missing (NULL in the database, not NaN)."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def _gpu_day_rows(fetch: TelemetryFetch, frame: pd.DataFrame) -> list[GpuDay]:
    return [
        GpuDay(
            day=row["day"],
            cluster_id=fetch.cluster_id,
            fetch_id=fetch.pk,
            node_group_id=row["node_group_id"],
            pool_id=row["pool_id"],
            accelerator_id=row["accelerator_id"],
            hostname=row[promql.HOST_LABEL],
            gpu=str(row[promql.GPU_LABEL]),
            uuid=row.get(promql.UUID_LABEL) or "",
            model_name=row.get(promql.MODEL_LABEL) or "",
            max_sm_clock_mhz=row["max_sm_clock_mhz"],
            **{name: row[name] for name in GPU_DAY_COLUMNS},
        )  # fmt: skip
        for row in _records(frame)
    ]


def _job_day_rows(fetch: TelemetryFetch, frame: pd.DataFrame) -> list[JobDay]:
    return [
        JobDay(
            day=row["day"],
            cluster_id=fetch.cluster_id,
            fetch_id=fetch.pk,
            pool_id=row["pool_id"],
            account=row["account"] or "",
            job_id=row["job_id"],
            **{name: float(row[name]) for name in rollups.JOB_FIGURES},
        )  # fmt: skip
        for row in _records(frame)
    ]


def fetch_jobs(fetch: TelemetryFetch) -> tuple[pd.DataFrame, list[str]]:
    """The usage records overlapping the fetch's days, with their hosts; and warnings."""
    bounds = rollups.day_bounds_s(
        period_days(fetch.period_start, fetch.period_end), settings.TIME_ZONE
    )
    now_s = int(timezone.now().timestamp())
    jobs_in, bad = jobs_frame(fetch.cluster, bounds[0][0], bounds[-1][1], now_s)
    warnings = [f"{bad} usage record(s) with an unreadable NodeList were left out."] if bad else []
    return jobs_in, warnings


def build_rows(fetch: TelemetryFetch, telemetry: Telemetry) -> tuple[list, list, list[str]]:
    """GpuDay and JobDay rows (unsaved) and the warnings of one fetch."""
    gpu_days, warnings = (
        map_gpu_days(fetch.cluster, telemetry.gpu_days)
        if len(telemetry.gpu_days)
        else (telemetry.gpu_days, ["No DCGM samples in the period."])
    )
    gpu_rows = _gpu_day_rows(fetch, gpu_days) if len(gpu_days) else []
    job_rows = _job_day_rows(fetch, telemetry.job_days) if len(telemetry.job_days) else []
    return gpu_rows, job_rows, warnings


def stale_reason(fetch: TelemetryFetch) -> str:
    """E.g. "telemetry fetched for cluster c1, 2026-03-02 to 2026-03-03." (local days)."""
    return (
        f"telemetry fetched for cluster {fetch.cluster.name}, "
        f"{fetch.period_start.isoformat()} to {fetch.period_end.isoformat()}."
    )


def run_fetch(pk: int, run_id: str) -> dict[str, Any]:
    """The worker's body for one run of a fetch (idempotent: the days are replaced)."""
    fetch = jobs.current_run(pk, run_id).select_related("cluster").first()
    if fetch is None or not jobs.mark_running(pk, run_id):
        return {"skipped": pk}
    try:
        jobs_in, job_warnings = fetch_jobs(fetch)
        telemetry = collect(fetch, jobs_in, lambda share: jobs.progress(pk, run_id, 0.9 * share))
        gpu_rows, job_rows, warnings = build_rows(fetch, telemetry)
        warnings += job_warnings
    except (PrometheusError, ExportError) as exc:
        jobs.fail(pk, run_id, str(exc))
        return {"failed": str(exc)}
    days = period_days(fetch.period_start, fetch.period_end)
    with transaction.atomic():
        GpuDay.objects.filter(cluster=fetch.cluster, day__in=days).delete()
        JobDay.objects.filter(cluster=fetch.cluster, day__in=days).delete()
        GpuDay.objects.bulk_create(gpu_rows, batch_size=2000)
        JobDay.objects.bulk_create(job_rows, batch_size=2000)
        done = jobs.finish(
            pk, run_id, warnings=warnings, gpu_days=len(gpu_rows), job_days=len(job_rows),
            gpus=len({(r.hostname, r.gpu) for r in gpu_rows}),
        )  # fmt: skip
        if not done:
            transaction.set_rollback(True)  # superseded: a newer run owns these days
            return {"skipped": pk}
        # Analyses of this cluster read the rollups (MFU proxy, IT energy): say what changed.
        mark_stale("cluster", [fetch.cluster_id], stale_reason(fetch))
    return {"gpu_days": len(gpu_rows), "job_days": len(job_rows), "warnings": len(warnings)}

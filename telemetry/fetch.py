"""Telemetry of a cluster's days, from Prometheus (server-side aggregation) or a text export
(its samples read by telemetry.export_text).

Both give the same two frames (telemetry.rollups): GPU days, and per-host series at the
source's step. Prometheus is asked one day at a time (bounded answers, progress per day).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from telemetry import promql, rollups
from telemetry.prometheus import PrometheusClient

LABELS = (promql.HOST_LABEL, promql.GPU_LABEL, promql.UUID_LABEL, promql.MODEL_LABEL)


@dataclass
class Telemetry:
    gpu_days: pd.DataFrame
    job_days: pd.DataFrame


def _jobs_of_day(jobs: pd.DataFrame, start_s: int, end_s: int) -> pd.DataFrame:
    return jobs[(jobs["start_s"] < end_s) & (jobs["end_s"] > start_s)]


def fetch_prometheus(
    client: PrometheusClient,
    days: list[dt.date],
    tz: str,
    source,
    jobs: pd.DataFrame,
    progress: Callable[[float], None] | None = None,
) -> Telemetry:
    """Per local day: the per-GPU queries at the day's end, then the per-host range queries
    joined with the day's jobs at once (one day of host series in memory at a time). A
    Prometheus failure raises PrometheusError; nothing is kept."""
    gpu_frames, job_frames = [], []
    scrape_s, step_s, selector = source.scrape_interval_s, source.step_s, source.label_selector
    for index, (day, (start_s, end_s)) in enumerate(
        zip(days, rollups.day_bounds_s(days, tz), strict=True)
    ):
        gpu_frames.append(_gpu_day(client, day, start_s, end_s, scrape_s, selector))
        hosts = _host_day(client, start_s, end_s, step_s, scrape_s, selector)
        day_jobs = rollups.job_days(hosts, _jobs_of_day(jobs, start_s, end_s), step_s, tz)
        job_frames.append(day_jobs[day_jobs["day"] == day])
        if progress is not None:
            progress((index + 1) / len(days))
    gpu_days = pd.concat(gpu_frames, ignore_index=True) if gpu_frames else pd.DataFrame()
    job_days = pd.concat(job_frames, ignore_index=True) if job_frames else pd.DataFrame()
    return Telemetry(rollups.finish_gpu_days(gpu_days, scrape_s), job_days)


def _gpu_day(client, day, start_s: int, end_s: int, scrape_s: int, selector: str):
    key = list(rollups.GPU_KEY)
    merged: pd.DataFrame | None = None
    for column, query in promql.daily_queries(end_s - start_s, scrape_s, selector).items():
        answer = client.instant(query, end_s)
        if answer.empty:
            continue
        keep = [c for c in LABELS if c in answer] if merged is None else key
        part = answer[[*keep, "value"]].rename(columns={"value": column})
        part = part.drop_duplicates(key)
        merged = part if merged is None else merged.merge(part, on=key, how="outer")
    if merged is None:
        return pd.DataFrame()
    return merged.assign(day=day)


def _host_day(client, start_s: int, end_s: int, step_s: int, scrape_s: int, selector: str):
    """Per host and step: engine, tensor, idle share, power (the engine query sets the grid;
    the others are aligned on an integer host × time key)."""
    merged: pd.DataFrame | None = None
    hosts: pd.Index | None = None
    for column, query in promql.host_queries(step_s, scrape_s, selector).items():
        answer = client.range(query, start_s + step_s, end_s, step_s, (promql.HOST_LABEL,))
        if merged is None:
            if answer.empty:
                return pd.DataFrame()
            merged = answer.rename(columns={"value": column, promql.HOST_LABEL: "host"})
            hosts = pd.Index(merged["host"].unique())
            merged.index = _host_time_key(hosts.get_indexer(merged["host"]), merged["t"])
            continue
        key = _host_time_key(hosts.get_indexer(answer[promql.HOST_LABEL]), answer["t"])
        merged[column] = pd.Series(answer["value"].to_numpy(), index=key).reindex(merged.index)
    return merged.reset_index(drop=True) if merged is not None else pd.DataFrame()


def _host_time_key(codes, t) -> pd.Index:
    return pd.Index(np.asarray(codes, np.int64) * (2**33) + np.asarray(t, np.int64))


def telemetry_from_samples(
    samples: pd.DataFrame, days: Iterable[dt.date], tz: str, jobs: pd.DataFrame
) -> Telemetry:
    """The same rollups as from Prometheus, computed from raw samples (an uploaded export);
    the step of the job join is the export's scrape interval."""
    times = samples.loc[samples["metric"] == promql.GR_ENGINE].sort_values("t")
    gaps = times.groupby(list(rollups.GPU_KEY))["t"].diff().dropna()
    scrape_s = float(gaps.median()) if len(gaps) else 60.0
    step = max(1, round(scrape_s))
    wanted = set(days)
    gpu_days = rollups.gpu_days_from_samples(samples, scrape_s, tz)
    gpu_days = gpu_days[gpu_days["day"].isin(wanted)]
    hosts = rollups.host_series_from_samples(samples, step)
    job_days = rollups.job_days(hosts, jobs, step, tz)
    job_days = job_days[job_days["day"].isin(wanted)] if len(job_days) else job_days
    return Telemetry(gpu_days.reset_index(drop=True), job_days.reset_index(drop=True))

"""Telemetry of a cluster's days, from Prometheus (server-side aggregation) or a text export.

Both give the same two frames (telemetry.rollups): GPU days, and per-host series at the
source's step. Prometheus is asked one day at a time (bounded answers, progress per day).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from telemetry import promql, rollups
from telemetry.prometheus import PrometheusClient

# Bounds of one uploaded export: size, samples, series.
MAX_UPLOAD_BYTES = 256 * 1024 * 1024
MAX_UPLOAD_SAMPLES = 5_000_000
LABELS = (promql.HOST_LABEL, promql.GPU_LABEL, promql.UUID_LABEL, promql.MODEL_LABEL)


class ExportError(ValueError):
    """An uploaded export that cannot be used (the message names the line or the limit)."""


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


_HEAD = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _bad_lines(mask, line_numbers: np.ndarray, reason: str) -> None:
    mask = np.asarray(mask, dtype=bool)
    if mask.any():
        first = ", ".join(str(n) for n in line_numbers[mask][:5])
        raise ExportError(f"Not an OpenMetrics / Prometheus text export: line {first}: {reason}")


def _series_table(heads: pd.Index) -> pd.DataFrame:
    """Each distinct ``name{labels}`` once: its metric name and the four GPU labels."""
    rows = []
    for head in heads:
        match = _HEAD.match(head)
        if match is None:
            rows.append((None, *[""] * len(LABELS)))
            continue
        labels = dict(_LABEL.findall(match.group("labels") or ""))
        rows.append((match.group("name"), *(labels.get(name, "") for name in LABELS)))
    return pd.DataFrame(rows, columns=["metric", *LABELS])


def parse_export(text: str) -> pd.DataFrame:
    """DCGM samples of an OpenMetrics / Prometheus text export, all or nothing: a long frame
    (metric, Hostname, gpu, UUID, modelName, t, value). Samples need timestamps (seconds in
    OpenMetrics, milliseconds in the Prometheus text format). Each distinct series is parsed
    once and the values vectorised: prometheus_client's parser takes ~0.5 ms per sample."""
    if len(text) > MAX_UPLOAD_BYTES:
        raise ExportError(f"The export is larger than {MAX_UPLOAD_BYTES // 2**20} MiB.")
    openmetrics = text.rstrip().endswith("# EOF")
    lines = pd.Series(text.splitlines(), dtype=object)
    keep = ~(lines.str.startswith("#") | (lines.str.strip() == "")).to_numpy()
    numbers = np.flatnonzero(keep) + 1
    # name{labels} value timestamp: the last two fields split off (labels may hold spaces).
    parts = lines[keep].str.rsplit(" ", n=2, expand=True).reindex(columns=[0, 1, 2])
    codes, heads = pd.factorize(parts[0].fillna(""))
    table = _series_table(pd.Index(heads))
    _bad_lines(table["metric"].isna().to_numpy()[codes], numbers, "not a sample with a timestamp")
    # OpenMetrics names counters ..._total; dcgm-exporter's text format does not.
    table["metric"] = table["metric"].str.removesuffix("_total")
    wanted = table["metric"].isin(promql.FIELDS).to_numpy()[codes]
    if wanted.sum() > MAX_UPLOAD_SAMPLES:
        raise ExportError(f"More than {MAX_UPLOAD_SAMPLES} DCGM samples.")
    if not wanted.any():
        raise ExportError("The export holds no DCGM_FI_* samples.")
    parts, codes, numbers = parts[wanted], codes[wanted], numbers[wanted]
    values = pd.to_numeric(parts[1], errors="coerce").to_numpy()
    _bad_lines(np.isnan(values) & (parts[1].str.lower() != "nan"), numbers, "not a number")
    stamps = pd.to_numeric(parts[2], errors="coerce").to_numpy()
    _bad_lines(np.isnan(stamps), numbers, "a sample without a timestamp")
    frame = table.iloc[codes].reset_index(drop=True)
    frame["t"] = stamps if openmetrics else stamps / 1000.0
    frame["value"] = values
    missing = (frame[promql.HOST_LABEL] == "") | (frame[promql.GPU_LABEL] == "")
    _bad_lines(missing, numbers, "a DCGM sample needs the Hostname and gpu labels")
    return frame


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

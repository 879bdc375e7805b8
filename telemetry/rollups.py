"""Daily rollups from DCGM samples and Slurm jobs, vectorised (pandas/numpy, no Django).

Two inputs make them. ``gpu days``: one row per GPU and local day (means of the gauges,
sample and idle-sample counts, the energy counter's increase); Prometheus computes these
itself (telemetry.promql.daily_queries), an uploaded export through :func:`gpu_days_from_samples`.
``host series``: per host and step, the mean engine/tensor activity, idle share and power of
its GPUs; :func:`job_days` joins them with the jobs that held the host (Slurm NodeList × time).
A sample at time t stands for the interval (t - step, t], and a day is (00:00, 24:00] local.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from telemetry import promql

GPU_KEY = [promql.HOST_LABEL, promql.GPU_LABEL]
_KEY_SHIFT = np.int64(2**33)  # epoch seconds stay below 2^33 until the year 2242


def local_day(t_s: pd.Series | np.ndarray, tz: str) -> np.ndarray:
    """The local day whose (00:00, 24:00] holds each epoch second (a midnight sample ends a day)."""
    stamps = pd.to_datetime(np.asarray(t_s, dtype=np.float64) * 1e3 - 1, unit="ms", utc=True)
    return np.asarray(stamps.tz_convert(tz).normalize().tz_localize(None).date)


def day_bounds_s(days: list, tz: str) -> list[tuple[int, int]]:
    """(start, end) epoch seconds of each local day (DST days are 23 or 25 hours)."""
    starts = pd.DatetimeIndex([pd.Timestamp(d) for d in days]).tz_localize(tz)
    ends = (pd.DatetimeIndex([pd.Timestamp(d) for d in days]) + pd.Timedelta(days=1)).tz_localize(
        tz
    )
    return [(int(s.timestamp()), int(e.timestamp())) for s, e in zip(starts, ends, strict=True)]


def counter_increase(samples: pd.DataFrame) -> pd.Series:
    """Per sample, the counter's increase since the previous sample of its series; after a
    reset (a drop) the new value is the increase, as Prometheus' increase() counts it."""
    ordered = samples.sort_values([*GPU_KEY, "t"])
    diff = ordered.groupby(GPU_KEY, sort=False)["value"].diff()
    diff = diff.where(diff >= 0, ordered["value"])
    first = ~ordered.duplicated(GPU_KEY)
    return diff.mask(first).reindex(samples.index)


def gpu_days_from_samples(samples: pd.DataFrame, scrape_s: float, tz: str) -> pd.DataFrame:
    """GPU-day rows from raw samples (columns metric, Hostname, gpu, UUID, modelName, t, value)
    with the columns :func:`finish_gpu_days` expects, as Prometheus answers them."""
    samples = samples.assign(day=local_day(samples["t"], tz))
    key = [*GPU_KEY, "day"]
    labels = samples.drop_duplicates(key)[[*key, promql.UUID_LABEL, promql.MODEL_LABEL]].set_index(
        key
    )
    out = [labels]
    for column, metric in promql.GAUGES.items():
        rows = samples[samples["metric"] == metric]
        out.append(rows.groupby(key)["value"].mean().rename(column))
    engine = samples[samples["metric"] == promql.GR_ENGINE]
    out.append(engine.groupby(key)["value"].size().rename("samples"))
    idle = engine["value"] < promql.IDLE_ENGINE_ACTIVITY
    out.append(idle.groupby([engine[k] for k in key]).sum().rename("idle_samples"))
    energy = samples[samples["metric"] == promql.ENERGY]
    increase = counter_increase(energy)
    out.append(increase.groupby([energy[k] for k in key]).sum(min_count=1).rename("energy_mj"))
    frame = pd.concat(out, axis=1).reset_index()
    return finish_gpu_days(frame, scrape_s)


def finish_gpu_days(frame: pd.DataFrame, scrape_s: float) -> pd.DataFrame:
    """Counts to hours, percent to fraction, mJ to kWh; GPUs without engine samples dropped
    (all of them when Prometheus answered no series: no data, not an error)."""
    samples = frame["samples"] if "samples" in frame else pd.Series(np.nan, index=frame.index)
    frame = frame[samples.fillna(0) > 0].assign(samples=samples)
    for column in promql.GAUGES:
        if column not in frame:
            frame[column] = np.nan
        frame[column] = frame[column] * promql.SCALE.get(column, 1.0)
    if "idle_samples" not in frame:
        frame["idle_samples"] = 0.0
    frame["covered_h"] = frame["samples"] * scrape_s / 3600.0
    frame["idle_h"] = frame["idle_samples"].fillna(0.0) * scrape_s / 3600.0
    frame["energy_kwh"] = frame.get("energy_mj", np.nan) / 3.6e9
    return frame.drop(columns=["samples", "idle_samples", "energy_mj"], errors="ignore")


def host_series_from_samples(samples: pd.DataFrame, step_s: int) -> pd.DataFrame:
    """Per host and step (t rounded up to the step grid): mean engine, tensor, idle, power."""
    grid = (np.ceil(samples["t"].to_numpy() / step_s) * step_s).astype(np.int64)
    samples = samples.assign(t=grid)
    columns = {}
    for name, metric in (
        ("engine", promql.GR_ENGINE),
        ("tensor", promql.TENSOR),
        ("power_w", promql.POWER),
    ):
        rows = samples[samples["metric"] == metric]
        columns[name] = rows.groupby([promql.HOST_LABEL, "t"])["value"].mean()
    engine = samples[samples["metric"] == promql.GR_ENGINE]
    idle = (engine["value"] < promql.IDLE_ENGINE_ACTIVITY).astype(float)
    columns["idle"] = idle.groupby([engine[promql.HOST_LABEL], engine["t"]]).mean()
    return pd.DataFrame(columns).reset_index().rename(columns={promql.HOST_LABEL: "host"})


def _job_host_day_pieces(jobs: pd.DataFrame, tz: str) -> pd.DataFrame:
    """One row per job × host × local day it overlaps, with that day's [start, end) seconds."""
    pieces = jobs.explode("hosts").dropna(subset=["hosts"]).rename(columns={"hosts": "host"})
    pieces = pieces[pieces["end_s"] > pieces["start_s"]].reset_index(drop=True)
    first = pd.to_datetime(pieces["start_s"], unit="s", utc=True).dt.tz_convert(tz)
    last = pd.to_datetime(pieces["end_s"] - 1, unit="s", utc=True).dt.tz_convert(tz)
    first_day = first.dt.tz_localize(None).dt.normalize()
    n_days = (last.dt.tz_localize(None).dt.normalize() - first_day).dt.days.to_numpy() + 1
    pieces = pieces.loc[pieces.index.repeat(n_days)].reset_index(drop=True)
    offset = np.concatenate([np.arange(n) for n in n_days]) if len(n_days) else np.array([])
    day = np.repeat(first_day.to_numpy(), n_days) + offset.astype("timedelta64[D]")
    day_index = pd.DatetimeIndex(day)
    day_start = day_index.tz_localize(tz).as_unit("s").asi8
    day_end = (day_index + pd.Timedelta(days=1)).tz_localize(tz).as_unit("s").asi8
    pieces["day"] = day_index.date
    pieces["a"] = np.maximum(pieces["start_s"].to_numpy(), day_start)
    pieces["b"] = np.minimum(pieces["end_s"].to_numpy(), day_end)
    return pieces


def job_days(host_series: pd.DataFrame, jobs: pd.DataFrame, step_s: int, tz: str) -> pd.DataFrame:
    """JobDay rows: jobs (job_id, account, pool_id, cards, start_s, end_s, hosts) × host series.

    A job's cards are spread evenly over its hosts; on a host it shares with other jobs its
    activity is the host's mean (dcgm-exporter has no Slurm job label without job mapping).
    """
    columns = ["day", "job_id", "account", "pool_id", *JOB_FIGURES]
    if jobs.empty or host_series.empty:
        return pd.DataFrame(columns=columns)
    jobs = jobs.assign(cards_per_host=jobs["cards"] / jobs["hosts"].map(len).clip(lower=1))
    pieces = _job_host_day_pieces(jobs, tz)
    hosts = pd.Index(host_series["host"].unique())
    pieces["host_code"] = hosts.get_indexer(pieces["host"])
    pieces = pieces[pieces["host_code"] >= 0]
    series = host_series.assign(host_code=hosts.get_indexer(host_series["host"]))
    series = series.sort_values(["host_code", "t"])
    keys = series["host_code"].to_numpy(np.int64) * _KEY_SHIFT + series["t"].to_numpy(np.int64)
    codes = pieces["host_code"].to_numpy(np.int64) * _KEY_SHIFT
    # Points with a < t <= b: the samples standing for the job's time on that host.
    lo = np.searchsorted(keys, codes + pieces["a"].to_numpy(np.int64), side="right")
    hi = np.searchsorted(keys, codes + pieces["b"].to_numpy(np.int64), side="right")
    weight = pieces["cards_per_host"].to_numpy() * step_s / 3600.0
    sums = {"allocated_card_hours": (hi - lo) * weight}
    for name, column in (("engine", "active_card_hours"), ("tensor", "tensor_card_hours"),
                         ("idle", "idle_card_hours"), ("power_w", "energy_kwh")):  # fmt: skip
        cumulative = np.concatenate([[0.0], np.nancumsum(series[name].to_numpy(np.float64))])
        sums[column] = (cumulative[hi] - cumulative[lo]) * weight
    sums["energy_kwh"] = sums["energy_kwh"] / 1000.0
    pieces = pieces.assign(**sums)
    grouped = pieces.groupby(["day", "job_id", "account", "pool_id"], dropna=False)
    result = grouped[list(JOB_FIGURES)].sum().reset_index()
    return result[result["allocated_card_hours"] > 0][columns]


JOB_FIGURES = (
    "allocated_card_hours",
    "active_card_hours",
    "tensor_card_hours",
    "idle_card_hours",
    "energy_kwh",
)

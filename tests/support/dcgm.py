"""A generated dcgm-exporter history in OpenMetrics text, and the Slurm jobs that ran on it.

Two days (2026-03-02 and 03, UTC) sampled every 60 s, in dcgm-exporter's label format, on one
cluster with two pools, two GPUs per host:

    host     pool   card (modelName)                 jobs (team, cards, time)
    gpu-h01  train  H100 SXM5  "NVIDIA H100 80GB HBM3"  101 vision 2+2 (with h02) day 1 00-12,
                                                     102 nlp 2, day 1 12:00 - day 2 12:00 (idle)
    gpu-h02  train  H100 SXM5                          101 (see above)
    gpu-a01  train  A100 SXM4  "NVIDIA A100-SXM4-40GB"  103 nlp 2, day 1 06-18; GPU 0's energy
                                                     counter resets at day 1 20:00
    gpu-l01  serve  L40S       "NVIDIA L40S"           104 vision 2, day 2 00-24

A GPU in a job is busy at the job's (engine, tensor) activity, otherwise at zero; job 102
holds its GPUs and computes nothing. Power = 100 W + 500 W × engine activity. SM clocks are
a fixed share of each card's published maximum. Each sample at t stands for (t - 60 s, t].
DCGM_FI_PROF_SM_ACTIVE is left out (off by default in dcgm-exporter).
"""

from __future__ import annotations

import datetime as dt
import zlib

import numpy as np
import pytest

DAY1 = dt.date(2026, 3, 2)
DAY2 = dt.date(2026, 3, 3)
START_S = int(dt.datetime(2026, 3, 2, tzinfo=dt.UTC).timestamp())
STEP_S = 60
SAMPLES = 2 * 1440 + 1  # day 1 00:00 through day 2 24:00
H = 3600

HOSTS = {
    "gpu-h01": ("NVIDIA H100 80GB HBM3", 1980 * 0.9),
    "gpu-h02": ("NVIDIA H100 80GB HBM3", 1980 * 0.9),
    "gpu-a01": ("NVIDIA A100-SXM4-40GB", 1410 * 0.8),
    "gpu-l01": ("NVIDIA L40S", 2520 * 0.5),
}
# job id, team, partition, gres, cards, hosts (NodeList), start h, end h, engine, tensor
JOBS = [
    ("101", "vision", "train", "h100", 4, "gpu-h[01-02]", 0, 12, 0.8, 0.5),
    ("102", "nlp", "train", "h100", 2, "gpu-h01", 12, 36, 0.0, 0.0),
    ("103", "nlp", "train", "a100", 2, "gpu-a01", 6, 18, 0.6, 0.3),
    ("104", "vision", "serve", "l40s", 2, "gpu-l01", 24, 48, 0.4, 0.1),
]
RESET = ("gpu-a01", 0, 20 * H)  # host, gpu, seconds after day 1 00:00


def _activity(host: str, mid_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    engine = np.zeros(len(mid_s))
    tensor = np.zeros(len(mid_s))
    for _, _, _, _, _, nodes, start_h, end_h, busy, tensor_busy in JOBS:
        if host not in _hosts(nodes):
            continue
        inside = (mid_s >= start_h * H) & (mid_s < end_h * H)
        engine[inside], tensor[inside] = busy, tensor_busy
    return engine, tensor


def _hosts(node_list: str) -> list[str]:
    if node_list == "gpu-h[01-02]":
        return ["gpu-h01", "gpu-h02"]
    return [node_list]


def _labels(host: str, gpu: int) -> str:
    model = HOSTS[host][0]
    uuid = f"GPU-{zlib.crc32(f'{host}/{gpu}'.encode()):08x}-0000-0000-0000-000000000000"
    return (
        f'gpu="{gpu}",UUID="{uuid}",pci_bus_id="00000000:{gpu + 0x18:02X}:00.0",'
        f'device="nvidia{gpu}",modelName="{model}",Hostname="{host}",'
        'DCGM_FI_DRIVER_VERSION="535.129.03"'
    )


def series() -> dict[str, list[tuple[str, np.ndarray]]]:
    """Metric -> [(labels, values at each sample)]."""
    offsets = np.arange(SAMPLES) * STEP_S
    mid = offsets - STEP_S / 2
    out: dict[str, list[tuple[str, np.ndarray]]] = {}
    for host, (_, clock) in HOSTS.items():
        engine, tensor = _activity(host, mid)
        power = 100.0 + 500.0 * engine
        for gpu in (0, 1):
            labels = _labels(host, gpu)
            energy = 5.0e9 + np.cumsum(power * STEP_S * 1000.0)
            if (host, gpu) == RESET[:2]:
                k = RESET[2] // STEP_S
                energy[k:] = np.cumsum(power[k:] * STEP_S * 1000.0)
            values = {
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": engine,
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": tensor,
                "DCGM_FI_PROF_DRAM_ACTIVE": engine / 2,
                "DCGM_FI_DEV_GPU_UTIL": np.where(engine > 0, 100.0, 0.0),
                "DCGM_FI_DEV_POWER_USAGE": power,
                "DCGM_FI_DEV_SM_CLOCK": np.full(SAMPLES, clock),
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": energy,
            }
            for metric, array in values.items():
                out.setdefault(metric, []).append((labels, array))
    return out


def openmetrics() -> str:
    """The whole history as OpenMetrics text (timestamps in seconds, ``# EOF`` at the end).
    The energy counter keeps dcgm-exporter's name, so it is typed ``unknown`` (an OpenMetrics
    counter would have to end in ``_total``)."""
    times = [str(START_S + k * STEP_S) for k in range(SAMPLES)]
    lines: list[str] = []
    for metric, items in series().items():
        kind = "unknown" if metric.endswith("ENERGY_CONSUMPTION") else "gauge"
        lines.append(f"# TYPE {metric} {kind}")
        for labels, values in items:
            text = np.char.mod("%.10g", values)
            lines.extend(f"{metric}{{{labels}}} {v} {t}" for v, t in zip(text, times, strict=True))
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def sacct_text() -> str:
    """The four jobs as sacct --parsable2 text with NodeList."""
    header = (
        "JobID|JobIDRaw|Cluster|Partition|Account|User|Submit|Start|End|Elapsed|State|NNodes|"
        "AllocTRES|NodeList"
    )
    lines = [header]
    day = dt.datetime(2026, 3, 2)
    for job, team, partition, gres, cards, nodes, start_h, end_h, _, _ in JOBS:
        start, end = day + dt.timedelta(hours=start_h), day + dt.timedelta(hours=end_h)
        hours = end_h - start_h
        n_nodes = len(_hosts(nodes))
        tres = f"billing=8,cpu=8,gres/gpu:{gres}={cards},gres/gpu={cards},node={n_nodes}"
        lines.append(
            f"{job}|{job}|c1|{partition}|{team}|u{job}|{start:%Y-%m-%dT%H:%M:%S}|"
            f"{start:%Y-%m-%dT%H:%M:%S}|{end:%Y-%m-%dT%H:%M:%S}|{hours:02d}:00:00|COMPLETED|"
            f"{n_nodes}|{tres}|{nodes}"
        )
    return "\n".join(lines) + "\n"


# -- the scenario's figures, worked out by hand ---------------------------------------------------
#
# Power = 100 W + 500 W × engine activity; two GPUs per host; 60 s samples. Energy from
# Prometheus' increase() extrapolates the first sample interval of the window linearly, so a
# fetch's energy is asserted to 0.1 % (an upload's exactly).

# (host, day) -> engine, tensor, power W, energy kWh, idle h, GPU_UTIL share  (per GPU)
GPU_DAYS = {
    ("gpu-h01", DAY1): (0.4, 0.25, 300.0, 7.2, 12.0, 0.5),
    ("gpu-h01", DAY2): (0.0, 0.0, 100.0, 2.4, 24.0, 0.0),
    ("gpu-h02", DAY1): (0.4, 0.25, 300.0, 7.2, 12.0, 0.5),
    ("gpu-h02", DAY2): (0.0, 0.0, 100.0, 2.4, 24.0, 0.0),
    # GPU 0's counter resets at 20:00: the day's energy is still 12 h × 400 W + 12 h × 100 W.
    ("gpu-a01", DAY1): (0.3, 0.15, 250.0, 6.0, 12.0, 0.5),
    ("gpu-a01", DAY2): (0.0, 0.0, 100.0, 2.4, 24.0, 0.0),
    ("gpu-l01", DAY1): (0.0, 0.0, 100.0, 2.4, 24.0, 0.0),
    ("gpu-l01", DAY2): (0.4, 0.1, 300.0, 7.2, 0.0, 1.0),
}
# (job, day) -> allocated, active (engine), tensor, idle card-hours, energy kWh
JOB_DAYS = {
    ("101", DAY1): (48.0, 38.4, 24.0, 0.0, 24.0),  # 4 cards × 12 h at 500 W
    ("102", DAY1): (24.0, 0.0, 0.0, 24.0, 2.4),  # 2 cards × 12 h, idle, 100 W
    ("102", DAY2): (24.0, 0.0, 0.0, 24.0, 2.4),
    ("103", DAY1): (24.0, 14.4, 7.2, 0.0, 9.6),  # 2 cards × 12 h at 400 W
    ("104", DAY2): (48.0, 19.2, 4.8, 0.0, 14.4),  # 2 cards × 24 h at 300 W
}


def fetch_from(cluster, url):
    from telemetry import services
    from telemetry.models import PrometheusSource, TelemetryFetch

    PrometheusSource.objects.update_or_create(cluster=cluster, defaults={"url": url})
    fetch = TelemetryFetch.objects.create(
        cluster=cluster, kind="prometheus", period_start=DAY1, period_end=DAY2
    )
    result = services.run_fetch(fetch.pk, str(fetch.run_id))
    fetch.refresh_from_db()
    return fetch, result


def assert_gpu_days(cluster, energy_rel=1e-3):
    from telemetry.models import GpuDay

    rows = list(GpuDay.objects.filter(cluster=cluster).select_related("pool", "accelerator"))
    assert len(rows) == 16  # 8 GPUs × 2 days
    for row in rows:
        engine, tensor, power, energy, idle, util = GPU_DAYS[(row.hostname, row.day)]
        assert row.covered_h == pytest.approx(24.0)
        assert row.gr_engine_active == pytest.approx(engine, abs=1e-9)
        assert row.tensor_active == pytest.approx(tensor, abs=1e-9)
        assert row.power_w == pytest.approx(power)
        assert row.energy_kwh == pytest.approx(energy, rel=energy_rel)
        assert row.idle_h == pytest.approx(idle)
        assert row.sm_active is None  # not exported: no data, not zero
        assert row.gpu_util == pytest.approx(util, abs=1e-9)  # DCGM percent -> fraction
    by_host = {r.hostname: (r.pool.name, r.accelerator.name) for r in rows}
    assert by_host == {
        "gpu-h01": ("train", "H100 SXM5 80GB"),
        "gpu-h02": ("train", "H100 SXM5 80GB"),
        "gpu-a01": ("train", "A100 SXM4 40GB"),
        "gpu-l01": ("serve", "L40S"),
    }


def assert_job_days(cluster):
    from telemetry.models import JobDay

    rows = {(r.job_id, r.day): r for r in JobDay.objects.filter(cluster=cluster)}
    assert set(rows) == set(JOB_DAYS)
    for key, (allocated, active, tensor, idle, energy) in JOB_DAYS.items():
        row = rows[key]
        assert row.allocated_card_hours == pytest.approx(allocated)
        assert row.active_card_hours == pytest.approx(active)
        assert row.tensor_card_hours == pytest.approx(tensor)
        assert row.idle_card_hours == pytest.approx(idle)
        assert row.energy_kwh == pytest.approx(energy)
    assert rows[("102", DAY1)].account == "nlp"
    assert rows[("101", DAY1)].pool.name == "train"

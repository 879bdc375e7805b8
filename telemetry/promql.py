"""The PromQL Fleetwise sends: dcgm-exporter's field names and the queries built from them.

Only names from :data:`FIELDS` and a validated label selector ever reach a query string.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError

from core.outbound import validate_base_url

# dcgm-exporter metric names (its default counters file; SM_ACTIVE is off by default there).
TENSOR = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
GR_ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
DRAM = "DCGM_FI_PROF_DRAM_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
POWER = "DCGM_FI_DEV_POWER_USAGE"
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"

# GpuDay column <- gauge averaged over the day (GPU_UTIL is percent, scaled to a fraction).
GAUGES: dict[str, str] = {
    "tensor_active": TENSOR,
    "gr_engine_active": GR_ENGINE,
    "sm_active": SM_ACTIVE,
    "dram_active": DRAM,
    "gpu_util": GPU_UTIL,
    "power_w": POWER,
    "sm_clock_mhz": SM_CLOCK,
}
FIELDS = (*GAUGES.values(), ENERGY)
SCALE = {"gpu_util": 0.01}
# A GPU is idle while its graphics-engine activity is below this (docs/telemetry.md).
IDLE_ENGINE_ACTIVITY = 0.05
# dcgm-exporter's labels of one GPU (namespace/pod appear only with Kubernetes mapping).
HOST_LABEL, GPU_LABEL, UUID_LABEL, MODEL_LABEL = "Hostname", "gpu", "UUID", "modelName"

_MATCHER = r'[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"[^"\\{}]*"'
_SELECTOR = re.compile(rf"^\s*{_MATCHER}(\s*,\s*{_MATCHER})*\s*$")


def validate_label_selector(value: str) -> None:
    """Matchers like ``cluster="a", job=~"dcgm.*"`` only: nothing else enters a query."""
    if value and not _SELECTOR.match(value):
        raise ValidationError('Label matchers only, e.g. cluster="a", job=~"dcgm.*".')


def validate_prometheus_url(value: str) -> None:
    validate_base_url(
        value, what="the Prometheus base URL, e.g. https://prometheus.example.org:9090"
    )


def series(metric: str, selector: str = "") -> str:
    return f"{metric}{{{selector}}}" if selector else metric


def daily_queries(window_s: int, scrape_s: int, selector: str = "") -> dict[str, str]:
    """Instant queries at a day's end over ``window_s``: one value per GPU and column.

    The window is 1 ms short of the day: Prometheus 2 includes a sample lying exactly on
    the window's start, which belongs to the day before.
    """
    window_ms = int(window_s) * 1000 - 1
    window = f"[{window_ms}ms]"
    queries = {name: f"avg_over_time({series(m, selector)}{window})" for name, m in GAUGES.items()}
    engine = series(GR_ENGINE, selector)
    queries["samples"] = f"count_over_time({engine}{window})"
    # Subquery at the scrape interval: how many of the day's samples were idle.
    queries["idle_samples"] = (
        f"count_over_time(({engine} < {IDLE_ENGINE_ACTIVITY})[{window_ms}ms:{int(scrape_s)}s])"
    )
    # increase() handles counter resets (a driver reload or a reboot restarts the counter).
    queries["energy_mj"] = f"increase({series(ENERGY, selector)}{window})"
    return queries


def host_queries(step_s: int, scrape_s: int, selector: str = "") -> dict[str, str]:
    """Range queries: per host and step, the mean over the step and over the host's GPUs
    (joined with Slurm jobs). Every sample counts, whatever the step."""
    window = f"[{int(step_s) * 1000 - 1}ms]"
    engine = series(GR_ENGINE, selector)
    by_host = f"avg by ({HOST_LABEL})"
    idle = f"({engine} < bool {IDLE_ENGINE_ACTIVITY}){window[:-1]}:{int(scrape_s)}s]"
    return {
        "engine": f"{by_host} (avg_over_time({engine}{window}))",
        "tensor": f"{by_host} (avg_over_time({series(TENSOR, selector)}{window}))",
        "idle": f"{by_host} (avg_over_time({idle}))",
        "power_w": f"{by_host} (avg_over_time({series(POWER, selector)}{window}))",
    }

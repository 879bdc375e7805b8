"""What the training track record's dense and mixture-of-experts parts share: a run's cards as
the planner's option row, the row and statistics types, rounding, and the summary of a group
of rows (engine/track_record.py, engine/moe_runs.py)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

RUNNING = {"effective_time": 1.0, "utilization": 1.0}
# The data file's card fields -> plan_capacity option columns.
CARD_COLUMNS: Mapping[str, str] = {
    "accelerator": "accelerator",
    "vendor": "vendor",
    "dense_bf16_tflops": "dense_bf16_tflops",
    "dense_fp8_tflops": "dense_fp8_tflops",
    "memory_gb": "memory_gb",
    "memory_bandwidth_tbs": "memory_bandwidth_tbs",
    "tdp_w": "tdp_w",
    "nvlink_gbs": "intra_node_interconnect_gbs",
    "inter_node_gbit_s_per_card": "inter_node_bandwidth_gbps_per_card",
    "fabric": "fabric",
}
FIGURE_UNITS: Mapping[str, str] = {
    "percent_of_peak": "% of peak",
    "mfu_percent": "% MFU",
    "tflops_per_gpu": "TFLOP/s per GPU",
    "tokens_per_s_per_gpu": "tokens/s per GPU",
    "gpu_hours_per_trillion_tokens": "GPU-hours per 10¹² tokens",
}
SIGNIFICANT_DIGITS = 4
ERROR_DECIMALS = 1
BAND_MEANING = (
    "inside the band: the published figure lies between the planner's 10th and 90th "
    "percentile (days_high and days_low of plan_capacity, turned into throughput)"
)


class TrackRecordRow(TypedDict):
    """One published run against today's planner; modeled figures None when not modeled."""

    id: str
    name: str
    role: str
    stack: str
    cards: int
    accelerator: str
    precision: str
    figure: str  # the published figure's kind (FIGURE_UNITS)
    unit: str
    published: float
    modeled: float | None
    modeled_low: float | None
    modeled_high: float | None
    error_percent: float | None
    inside_band: bool | None
    split: str
    reason: str  # why not modeled; "" when modeled
    source: str


class TrackRecordStats(TypedDict):
    """Statistics of one group of rows (all runs, or one role)."""

    runs: int
    modeled: int
    not_modeled: int
    median_abs_error_percent: float | None
    worst_error_percent: float | None  # signed: the error of largest size
    worst_run: str | None
    mean_signed_error_percent: float | None
    inside_band: int
    band_coverage_percent: float | None
    median_band_half_width_percent: float | None  # (high − low) ÷ 2 ÷ modeled, bounded bands


def base_row(run: Mapping[str, Any]) -> TrackRecordRow:
    """A published run's row before it is modeled: what the run file states."""
    figure = run["published"]
    source = run["source"]
    return {
        "id": str(run["id"]),
        "name": str(run["name"]),
        "role": str(run["role"]),
        "stack": str(run["stack"]),
        "cards": int(run["cards"]["count"]),
        "accelerator": str(run["cards"]["accelerator"]),
        "precision": str(run["precision"]),
        "figure": str(figure["kind"]),
        "unit": FIGURE_UNITS[figure["kind"]],
        "published": float(figure["value"]),
        "modeled": None,
        "modeled_low": None,
        "modeled_high": None,
        "error_percent": None,
        "inside_band": None,
        "split": "",
        "reason": "",
        "source": str(source["citation"]),
    }


def option_of(run: Mapping[str, Any]) -> dict[str, Any]:
    """The planner's option row: the cards, their links, the documented stack options."""
    cards = run["cards"]
    option = {
        column: cards[field]
        for field, column in CARD_COLUMNS.items()
        if cards.get(field) is not None
    }
    return {**option, **(run.get("planner_options") or {}), "cards": int(cards["count"]), **RUNNING}


def significant(value: float) -> float:
    """A figure to SIGNIFICANT_DIGITS (the file does not move with floating point)."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def summarize(rows: Sequence[TrackRecordRow]) -> TrackRecordStats:
    """Median absolute, worst and mean signed error and band coverage of the modeled rows."""
    modeled = [row for row in rows if row["error_percent"] is not None]
    errors = [float(cast(float, row["error_percent"])) for row in modeled]
    inside = sum(1 for row in modeled if row["inside_band"])
    worst = max(modeled, key=lambda row: abs(cast(float, row["error_percent"])), default=None)
    half_widths = [
        100.0 * (row["modeled_high"] - row["modeled_low"]) / 2.0 / row["modeled"]
        for row in modeled
        if row["modeled"] and row["modeled_low"] is not None and row["modeled_high"] is not None
    ]

    def rounded(value: float) -> float:
        return round(value, ERROR_DECIMALS)

    return {
        "runs": len(rows),
        "modeled": len(modeled),
        "not_modeled": len(rows) - len(modeled),
        "median_abs_error_percent": (
            rounded(statistics.median(abs(e) for e in errors)) if errors else None
        ),
        "worst_error_percent": worst["error_percent"] if worst else None,
        "worst_run": worst["id"] if worst else None,
        "mean_signed_error_percent": rounded(statistics.fmean(errors)) if errors else None,
        "inside_band": inside,
        "band_coverage_percent": rounded(100.0 * inside / len(modeled)) if modeled else None,
        "median_band_half_width_percent": (
            rounded(statistics.median(half_widths)) if half_widths else None
        ),
    }


class RecordPart(TypedDict):
    """A part of the track record apart from the dense runs (the mixture-of-experts runs, the
    FP4 runs): its rows and the summary by role."""

    runs_file: str
    section: str
    error: str
    band: str
    rows: list[TrackRecordRow]
    summary: dict[str, TrackRecordStats]


def record_part(
    rows: list[TrackRecordRow], groups: Sequence[str], section: str, error: str
) -> RecordPart:
    """The part's rows with their summary for each group ("all" or a role)."""
    return {
        "runs_file": "engine/data/published_training_runs.json",
        "section": section,
        "error": error,
        "band": BAND_MEANING,
        "rows": rows,
        "summary": {
            group: summarize([row for row in rows if group == "all" or row["role"] == group])
            for group in groups
        },
    }

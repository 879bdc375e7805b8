"""The planner's track record as its page shows it: engine/data/track_record.json, as
benchmarks/fidelity.py --write committed it (tests/engine/test_track_record.py keeps the file
in step with the model). Read from the file on each request, never recomputed on one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from engine.track_record import ROLE_LABELS, format_figure, format_number, load_track_record

BAND_WORDS = {True: "yes", False: "no", None: "—"}


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f} %"


def _plain(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} %"


def _summary_row(group: str, stats: dict[str, Any]) -> dict[str, Any]:
    return {
        **stats,
        "group": group,
        "label": ROLE_LABELS[group],
        "median_text": _plain(stats["median_abs_error_percent"]),
        "worst_text": _signed(stats["worst_error_percent"]),
        "mean_text": _signed(stats["mean_signed_error_percent"]),
        "coverage_text": _plain(stats["band_coverage_percent"]),
        "half_width_text": _plain(stats.get("median_band_half_width_percent")),
    }


# The mixture-of-experts training runs' summary groups (engine/moe_runs.py MOE_SUMMARY_GROUPS).
MOE_GROUP_LABELS = {
    "all": "Mixture of experts: all runs",
    "check": "Mixture of experts: calibration check",
    "held_back": "Mixture of experts: held back",
}

# The FP4 training runs' summary groups (engine/track_record.py FP4_SUMMARY_GROUPS).
FP4_GROUP_LABELS = {
    "all": "FP4 (NVFP4): all runs",
    "calibration": "FP4 (NVFP4): calibration",
    "held_back": "FP4 (NVFP4): held back",
}

# Summary groups that are not an engine: the mixture-of-experts rows, apart from the dense.
SERVING_GROUP_NAMES = {"moe": "Mixture of experts"}


def _serving_label(group: str) -> str:
    """ "plain-pytorch held_out" -> "plain-pytorch: held out"; "moe calibration" ->
    "Mixture of experts: calibration"; "all" -> "All figures"."""
    engine, _, role = group.rpartition(" ")
    label = {"all": "All figures", "calibration": "Calibration", "held_out": "Held out"}[role]
    engine = SERVING_GROUP_NAMES.get(engine, engine)
    return f"{engine}: {label.lower()}" if engine else label


def _serving_summary_row(group: str, stats: dict[str, Any]) -> dict[str, Any]:
    return {
        **stats,
        "label": _serving_label(group),
        "median_text": _plain(stats["median_abs_error_percent"]),
        "worst_text": _signed(stats["worst_error_percent"]),
        "coverage_text": _plain(stats["band_coverage_percent"]),
    }


def _serving_row(row: dict[str, Any]) -> dict[str, Any]:
    unit = row["unit"]
    band = ""
    if row["modeled"] is not None and row.get("modeled_low") is not None:
        band = (
            f"{format_number(row['modeled_low'], unit)}–{format_number(row['modeled_high'], unit)}"
        )
    return {
        **row,
        "role_label": ROLE_LABELS[row["role"]],
        "cards_text": f"{row['cards']:,}",
        "published_text": format_figure(row["published"], unit),
        "modeled_text": format_figure(row["modeled"], unit),
        "error_text": _signed(row["error_percent"]),
        "band_text": BAND_WORDS[row["inside_band"]],
        "band_range": band,
    }


def _serving_page(serving: dict[str, Any] | None) -> dict[str, Any] | None:
    """The serving figures' summary and rows, as the training part (None: none recorded)."""
    if not serving:
        return None
    return {
        "summary": [_serving_summary_row(g, dict(s)) for g, s in serving["summary"].items()],
        "rows": [_serving_row(dict(row)) for row in serving["rows"]],
        "error_meaning": serving["error"],
        "band_meaning": serving["band"],
        "runs_file": serving["runs_file"],
    }


def _table_row(row: dict[str, Any]) -> dict[str, Any]:
    unit = row["unit"]
    band = ""
    if row["modeled"] is not None:
        low = "—" if row["modeled_low"] is None else format_number(row["modeled_low"], unit)
        band = f"{low}–{format_number(row['modeled_high'], unit)}"
    return {
        **row,
        "role_label": ROLE_LABELS[row["role"]],
        "cards_text": f"{row['cards']:,}",
        "published_text": format_figure(row["published"], unit),
        "modeled_text": format_figure(row["modeled"], unit),
        "error_text": _signed(row["error_percent"]),
        "band_text": BAND_WORDS[row["inside_band"]],
        "band_range": band,
    }


def _part_page(part: dict[str, Any] | None, labels: Mapping[str, str]) -> dict[str, Any] | None:
    """A part of the training record apart from the dense runs (the mixture-of-experts runs,
    the FP4 runs): its summary and rows, as the dense part (None: none recorded)."""
    if not part:
        return None
    return {
        "summary": [
            {**_summary_row(g, dict(s)), "label": labels[g]} for g, s in part["summary"].items()
        ],
        "rows": [_table_row(dict(row)) for row in part["rows"]],
        "error_meaning": part["error"],
        "band_meaning": part["band"],
        "runs_file": part["runs_file"],
        "section": part["section"],
    }


def track_record_page() -> dict[str, Any]:
    """The summary by role and one row per published run, with display text."""
    record = load_track_record()
    return {
        "summary": [_summary_row(g, dict(s)) for g, s in record["summary"].items()],
        "rows": [_table_row(dict(row)) for row in record["rows"]],
        "error_meaning": record["error"],
        "band_meaning": record["band"],
        "runs_file": record["runs_file"],
        "fp4": _part_page(cast(dict[str, Any] | None, record.get("fp4")), FP4_GROUP_LABELS),
        "moe": _part_page(cast(dict[str, Any] | None, record.get("moe")), MOE_GROUP_LABELS),
        "serving": _serving_page(record.get("serving")),
    }

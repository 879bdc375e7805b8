"""The planner's public track record: published training runs through today's planner.

Each run of ``engine/data/published_training_runs.json`` gives only what the planner takes —
the model's shape, the global batch, the cards and their links, the precision — as
tests/engine/capacity/test_published_runs.py does; the planner chooses its own split.
Effective time and utilization are fixed to 1: throughput is what is compared, failures and
queueing are other factors. The modeled throughput (tokens per second per card) is converted
to the published figure's convention (MFU or % of peak under the paper's FLOP count, TFLOP/s
per GPU, or tokens/s per GPU), and each row says how far it is from the published figure and
whether the figure lies inside the planner's 10th–90th percentile band (``days_low`` and
``days_high`` of plan_capacity, turned into throughput).

``compute_track_record`` returns the rows and a summary (median and worst error, mean signed
error, band coverage; for all runs, the calibration runs and the held-out runs);
benchmarks/fidelity.py writes it to ``engine/data/track_record.json``, which the "How accurate
is the planner?" page shows and tests/engine/test_track_record.py keeps in step with the model.
The mixture-of-experts training runs (the runs file's "moe_runs", engine/moe_runs.py) are the
file's "moe" part, their own group with their own summary (calibration check, held back); the
FP4 (NVFP4) training runs (the runs file's "fp4_runs", engine/training_precision.py) its "fp4"
part, dense runs through the same ``model_run`` summarized apart (``compute_fp4_record``); the
serving model's record (engine/inference/track_record.py: published serving figures through
the serving model) is its "serving" part.
Figures are rounded (``SIGNIFICANT_DIGITS``, ``ERROR_DECIMALS`` of engine/track_record_rows.py,
shared with the MoE part) so the file does not change with the last bits of floating point.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

import pandas as pd

from engine.capacity import PlannerInputError, TrainingWorkload, plan_capacity
from engine.inference.track_record import ServingRecord, ServingStats, compute_serving_record
from engine.memory import ModelShape
from engine.moe_runs import MoeRecord, compute_moe_record
from engine.track_record_rows import (
    BAND_MEANING,
    ERROR_DECIMALS,
    RecordPart,
    TrackRecordRow,
    TrackRecordStats,
    base_row,
    option_of,
    record_part,
    significant,
    summarize,
)

DATA_DIR = Path(__file__).resolve().parent / "data"
RUNS_PATH = DATA_DIR / "published_training_runs.json"
TRACK_RECORD_PATH = DATA_DIR / "track_record.json"
SCHEMA = 1

Role = Literal["calibration", "held_out"]
ROLES: tuple[Role, ...] = ("calibration", "held_out")
SUMMARY_GROUPS: tuple[str, ...] = ("all", *ROLES)
# The FP4 runs' roles: calibration runs by the rule each states, the rest held back.
FP4_SUMMARY_GROUPS: tuple[str, ...] = ("all", "calibration", "held_back")
ROLE_LABELS: Mapping[str, str] = {
    "all": "All runs",
    "calibration": "Calibration",
    "held_out": "Held out",
    # The mixture-of-experts runs' roles (engine/moe_runs.py).
    "check": "Calibration check",
    "held_back": "Held back",
}

# Any token count: throughput does not depend on it once effective time is fixed.
TOKENS = 1e12
ERROR_MEANING = (
    "(modeled − published) ÷ published, in %: negative means the planner models the run "
    "slower than it ran (pessimistic), positive faster"
)


Fp4Record = RecordPart  # the track record's FP4 training part


class TrackRecord(TypedDict):
    schema: int
    generated_by: str
    runs_file: str
    error: str
    band: str
    rows: list[TrackRecordRow]
    summary: dict[str, TrackRecordStats]
    moe: MoeRecord
    serving: ServingRecord
    fp4: Fp4Record


# --------------------------------------------------------------------------------------------
# Reading and writing
# --------------------------------------------------------------------------------------------


def load_runs(path: Path = RUNS_PATH) -> list[dict[str, Any]]:
    """The published runs of the data file, in file order."""
    document = json.loads(path.read_text(encoding="utf-8"))
    return list(document["runs"])


def load_fp4_runs(path: Path = RUNS_PATH) -> list[dict[str, Any]]:
    """The published FP4 training runs of the data file ("fp4_runs"), in file order."""
    document = json.loads(path.read_text(encoding="utf-8"))
    return list(document["fp4_runs"])


def load_track_record(path: Path = TRACK_RECORD_PATH) -> TrackRecord:
    """The committed track record (written by benchmarks/fidelity.py --write)."""
    return cast(TrackRecord, json.loads(path.read_text(encoding="utf-8")))


def dumps(record: TrackRecord) -> str:
    """The file text of a track record (stable: the test compares it with a recomputation)."""
    return json.dumps(record, indent=1, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------
# FLOP conventions
# --------------------------------------------------------------------------------------------


def flops_per_token(figure: Mapping[str, Any], model: Mapping[str, Any]) -> float:
    """Training FLOPs per token as the published figure counts them (data file "conventions")."""
    flops = figure["flops"]
    convention = flops["convention"]
    layers, hidden = float(model["layers"]), float(model["hidden"])
    seq_len = float(model["seq_len"])
    if convention == "narayanan_eq3":
        passes = 96.0 if flops["recompute_counted"] else 72.0
        vocab = float(flops["vocab_counted"])
        return (
            passes
            * layers
            * hidden**2
            * (1 + seq_len / (6 * hidden) + vocab / (16 * layers * hidden))
        )
    if convention == "megatron_core":
        gated = 1.5 if model["gated_mlp"] else 1.0
        kv_share = float(model["kv_heads"]) / float(model["heads"])
        return (
            12
            * layers
            * hidden**2
            * (
                1
                + float(model["ffn_hidden"]) / hidden * gated
                + kv_share
                + seq_len / hidden
                + float(model["vocab"]) / (2 * layers * hidden)
            )
        )
    raise ValueError(f"no FLOP count for convention {convention!r}")


def to_figure(tokens_per_s: float, run: Mapping[str, Any]) -> float:
    """Tokens per second per card in the published figure's convention."""
    figure = run["published"]
    kind = figure["kind"]
    if kind == "tokens_per_s_per_gpu":
        return tokens_per_s
    achieved_tflops = tokens_per_s * flops_per_token(figure, run["model"]) / 1e12
    if kind == "tflops_per_gpu":
        return achieved_tflops
    if kind in ("percent_of_peak", "mfu_percent"):
        return 100.0 * achieved_tflops / float(run["cards"]["dense_bf16_tflops"])
    raise ValueError(f"unknown figure kind {kind!r}")


# --------------------------------------------------------------------------------------------
# One run through the planner
# --------------------------------------------------------------------------------------------


def shape_of(model: Mapping[str, Any]) -> ModelShape:
    """The run's full shape: grouped-query attention, the MLP's width and kind, the vocabulary
    and whether the embeddings are tied."""
    heads = int(model["heads"])
    kv_heads = int(model.get("kv_heads") or heads)
    return ModelShape(
        int(model["layers"]),
        int(model["hidden"]),
        heads,
        kv_heads=None if kv_heads == heads else kv_heads,
        ffn_hidden=int(model["ffn_hidden"]),
        vocab=int(model["vocab"]),
        tied_embeddings=bool(model.get("tied_embeddings", False)),
        mlp="gated" if model.get("gated_mlp") else "plain",
    )


def workload_of(run: Mapping[str, Any]) -> TrainingWorkload:
    """The planner's workload: shape, sequence, batch, precision (fp16 has the bf16 peak) and
    what the run states of its recipe (micro-batch, recomputation, software stack, the layers
    an fp4 run keeps in bf16, the gradients' and the optimizer state's precisions)."""
    model = run["model"]
    training = run.get("training") or {}
    micro_batch = training.get("micro_batch")
    return TrainingWorkload(
        params=float(model["params"]),
        tokens=TOKENS,
        flops_per_param_token=int(training.get("flops_per_param_token", 6)),
        zero_stage=int(training.get("zero_stage", 1)),
        precision=run["precision"] if run["precision"] in ("fp8", "fp4") else "bf16",
        fp4_bf16_layer_share=training.get("fp4_bf16_layer_share"),
        seq_len=int(model["seq_len"]),
        global_batch_sequences=int(run["global_batch_sequences"]),
        micro_batch=None if micro_batch is None else int(micro_batch),
        recompute=training.get("recompute"),
        software_stack=str(training.get("software_stack", "megatron")),
        shape=shape_of(model),
        gradient_precision=str(training.get("gradient_precision", "bf16")),
        optimizer_state_precision=str(training.get("optimizer_state_precision", "fp32")),
    )


def _split(row: pd.Series) -> str:
    parts = [f"{name.upper()} {int(row[name])}" for name in ("tp", "pp", "vp", "cp", "dp")]
    return " × ".join(parts) + f", micro-batch {int(row['micro_batch'])}"


def model_run(run: Mapping[str, Any]) -> TrackRecordRow:
    """One run through today's planner, in the published figure's convention."""
    row = base_row(run)
    if run.get("not_modeled"):
        return {**row, "reason": str(run["not_modeled"])}
    try:
        planned = plan_capacity(workload_of(run), pd.DataFrame([option_of(run)])).iloc[0]
    except PlannerInputError as exc:
        return {**row, "reason": f"the planner refuses the inputs: {exc.errors}"}
    if not planned["feasible"]:
        return {**row, "reason": f"no feasible split: {planned['reason']}"}
    cards = float(run["cards"]["count"])
    days = float(planned["days"])
    tokens_per_s = TOKENS / (days * 86_400.0 * cards)
    modeled = to_figure(tokens_per_s, run)
    high_days, low_days = float(planned["days_high"]), float(planned["days_low"])
    low = modeled * days / high_days if math.isfinite(high_days) else None
    high = modeled * days / low_days
    published = float(run["published"]["value"])
    modeled_r, high_r = significant(modeled), significant(high)
    low_r = significant(low) if low is not None else None
    return {
        **row,
        "modeled": modeled_r,
        "modeled_low": low_r,
        "modeled_high": high_r,
        "error_percent": round(100.0 * (modeled_r - published) / published, ERROR_DECIMALS),
        "inside_band": (low_r is None or low_r <= published) and published <= high_r,
        "split": _split(planned),
    }


# --------------------------------------------------------------------------------------------
# The whole record
# --------------------------------------------------------------------------------------------


def compute_track_record(runs: Sequence[Mapping[str, Any]] | None = None) -> TrackRecord:
    """Every published run through today's planner, and the summary by role; the mixture-of-
    experts runs apart ("moe"), the serving figures ("serving") and the FP4 runs ("fp4", last:
    benchmarks/fidelity.py --write-fp4 rewrites it alone)."""
    rows = [model_run(run) for run in (load_runs() if runs is None else runs)]
    summary = {
        group: summarize([row for row in rows if group == "all" or row["role"] == group])
        for group in SUMMARY_GROUPS
    }
    return {
        "schema": SCHEMA,
        "generated_by": "benchmarks/fidelity.py --write",
        "runs_file": "engine/data/published_training_runs.json",
        "error": ERROR_MEANING,
        "band": BAND_MEANING,
        "rows": rows,
        "summary": summary,
        "moe": compute_moe_record(),
        "serving": compute_serving_record(),
        "fp4": compute_fp4_record(),
    }


def compute_fp4_record(runs: Sequence[Mapping[str, Any]] | None = None) -> Fp4Record:
    """Every published FP4 training run through today's planner, and the summary by role
    (apart from the dense summary, whose band is fitted on the dense calibration runs)."""
    rows = [model_run(run) for run in (load_fp4_runs() if runs is None else runs)]
    return record_part(rows, FP4_SUMMARY_GROUPS, "fp4_runs", ERROR_MEANING)


# --------------------------------------------------------------------------------------------
# Plain-text table (benchmarks/fidelity.py)
# --------------------------------------------------------------------------------------------


def format_number(value: float, unit: str) -> str:
    """A figure in its unit's precision: percentages to 0.1, throughputs whole, grouped."""
    return f"{value:.1f}" if unit.startswith("%") else f"{value:,.0f}"


def format_figure(value: float | None, unit: str) -> str:
    return "—" if value is None else f"{format_number(value, unit)} {unit}"


def format_table(record: TrackRecord) -> str:
    """The rows and the summary as a plain-text table."""
    return format_rows(record["rows"], record["summary"])


def format_moe_table(moe: MoeRecord) -> str:
    """The mixture-of-experts rows and their summary as a plain-text table."""
    return format_rows(moe["rows"], moe["summary"])


def format_fp4_table(fp4: Fp4Record) -> str:
    """The FP4 training rows and their summary as a plain-text table."""
    return format_rows(fp4["rows"], fp4["summary"])


def format_rows(rows: Sequence[TrackRecordRow], summary: Mapping[str, TrackRecordStats]) -> str:
    """Rows and a summary by group as a plain-text table."""
    head = ("run", "cards", "stack", "published", "modeled", "error", "band", "role")
    lines = [" | ".join(head), " | ".join("-" * len(h) for h in head)]
    for row in rows:
        error = row["error_percent"]
        lines.append(
            " | ".join(
                (
                    row["name"],
                    f"{row['cards']:,} × {row['accelerator']} ({row['precision']})",
                    row["stack"],
                    format_figure(row["published"], row["unit"]),
                    format_figure(row["modeled"], row["unit"])
                    + ("" if row["modeled"] is not None else f" ({row['reason']})"),
                    "—" if error is None else f"{error:+.1f} %",
                    {True: "inside", False: "outside", None: "—"}[row["inside_band"]],
                    row["role"],
                )
            )
        )
        lines.append(f"    source: {row['source']}")
    lines.append("")
    for group, stats in summary.items():
        lines.append(f"{ROLE_LABELS[group]}: {format_stats(stats)}")
    return "\n".join(lines)


def format_serving_table(serving: ServingRecord) -> str:
    """The serving rows and their summary as a plain-text table."""
    head = ("run", "cards", "engine", "published", "modeled", "error", "band", "role")
    lines = [" | ".join(head), " | ".join("-" * len(h) for h in head)]
    for row in serving["rows"]:
        error, unit = row["error_percent"], row["unit"]
        modeled = "—" if row["modeled"] is None else f"{row['modeled']:,.4g} {unit}"
        lines.append(
            " | ".join(
                (
                    row["id"],
                    f"{row['cards']} × {row['accelerator']} (TP{row['tp']}, {row['precision']})",
                    row["engine"],
                    f"{row['published']:,.4g} {unit}",
                    modeled + ("" if row["modeled"] is not None else f" ({row['reason']})"),
                    "—" if error is None else f"{error:+.1f} %",
                    {True: "inside", False: "outside", None: "—"}[row["inside_band"]],
                    row["role"],
                )
            )
        )
    lines.append("")
    for group, stats in serving["summary"].items():
        lines.append(f"{group}: {format_serving_stats(stats)}")
    return "\n".join(lines)


def format_serving_stats(stats: ServingStats) -> str:
    def pct(value: float | None, sign: bool = False) -> str:
        return "—" if value is None else (f"{value:+.1f} %" if sign else f"{value:.1f} %")

    return (
        f"{stats['modeled']} of {stats['runs']} modeled; median |error| "
        f"{pct(stats['median_abs_error_percent'])}, worst "
        f"{pct(stats['worst_error_percent'], True)} ({stats['worst_run'] or '—'}), inside the "
        f"band {stats['inside_band']} of {stats['modeled']} "
        f"({pct(stats['band_coverage_percent'])})"
    )


def format_stats(stats: TrackRecordStats) -> str:
    def pct(value: float | None, sign: bool = False) -> str:
        return "—" if value is None else (f"{value:+.1f} %" if sign else f"{value:.1f} %")

    worst = pct(stats["worst_error_percent"], True)
    mean = pct(stats["mean_signed_error_percent"], True)
    return (
        f"{stats['modeled']} of {stats['runs']} runs modeled; median |error| "
        f"{pct(stats['median_abs_error_percent'])}, worst {worst} ({stats['worst_run'] or '—'}), "
        f"mean signed {mean}, inside the 10th–90th band {stats['inside_band']} of "
        f"{stats['modeled']} ({pct(stats['band_coverage_percent'])}), median half-width "
        f"{pct(stats['median_band_half_width_percent'])}"
    )

"""Published mixture-of-experts training runs through the planner (``moe_runs`` of
engine/data/published_training_runs.json), and their part of the track record.

Each run gives the model (a catalog name or an engine.moe shape), the sequence, the batch, the
cards and their links, the precision and the recipe's MoE terms it states; the planner chooses
its own split, expert parallelism included. Effective time and utilization are fixed to 1
(failures and queueing are other factors). A figure is GPU-hours per trillion tokens (what
DeepSeek publishes) or training tokens per second per GPU (NVIDIA's NeMo and Megatron-Bridge
performance tables); the modeled figure is put in the published one's unit.

Roles, by a rule written before the fit (``calibration_ids``, docs/decisions/0016): "check" is
the calibration subset, one run per model family and card generation (the earliest software
version where several exist, then the first listed; DeepSeek-V2 never), the only runs the MoE
constant engine.moe_kernels.MOE_EXPERT_GEMM_OVERHEAD_US was fitted on; "held_back" runs are
only compared, never used to set a default (benchmarks/calibrate.py fits on the dense "runs").

``compute_moe_record`` is the track record's "moe" part (engine/track_record.py): the rows and
the summary by role. Its error is a throughput error, as the dense rows' — (modeled −
published) ÷ published tokens per second; a GPU-hours figure is the inverse of a throughput,
so its error is published ÷ modeled GPU-hours − 1 (DeepSeek-V3's 154,600 modeled against
180,000 published GPU-hours: −14.1 % in GPU-hours, +16.4 % in throughput).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from engine.capacity import PlannerInputError, TrainingWorkload, plan_capacity
from engine.capacity.workload import workload_from_spec
from engine.track_record_rows import (
    ERROR_DECIMALS,
    RecordPart,
    TrackRecordRow,
    base_row,
    option_of,
    record_part,
    significant,
)

RUNS_PATH = Path(__file__).resolve().parent / "data" / "published_training_runs.json"
TOKENS = 1e12
MOE_ROLES: tuple[str, ...] = ("check", "held_back")
MOE_SUMMARY_GROUPS: tuple[str, ...] = ("all", *MOE_ROLES)
RECIPE_FIELDS: tuple[str, ...] = (
    "zero_stage",
    "moe_a2a_overlap",
    "moe_mtp_depth",
    "moe_capacity_factor",
    "micro_batch",
)
# Issue 32 keeps DeepSeek-V2 back whatever the rule picks (its card count is not published).
NEVER_CALIBRATES: tuple[str, ...] = ("deepseek-v2-pretraining-h800",)
CARD_GENERATIONS: tuple[tuple[str, str], ...] = (
    ("GB200", "Blackwell"),
    ("B200", "Blackwell"),
    ("H100", "Hopper"),
    ("H200", "Hopper"),
    ("H800", "Hopper"),
)
GPU_HOURS = "gpu_hours_per_trillion_tokens"
TOKENS_PER_S = "tokens_per_s_per_gpu"
MOE_FIGURES: tuple[str, ...] = (GPU_HOURS, TOKENS_PER_S)
MOE_ERROR_MEANING = (
    "(modeled − published) ÷ published throughput, in %: negative means the planner models the "
    "run slower than it ran (pessimistic), positive faster; a GPU-hours figure is the inverse "
    "of a throughput, so its error is published ÷ modeled GPU-hours − 1"
)


MoeRecord = RecordPart  # the track record's mixture-of-experts part


def load_moe_runs(path: Path = RUNS_PATH) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["moe_runs"]
    return runs


def card_generation(accelerator: str) -> str:
    """ "B200 180GB" -> "Blackwell"; an unlisted card is its own generation."""
    return next((gen for name, gen in CARD_GENERATIONS if name in accelerator), accelerator)


def model_family(run: Mapping[str, Any]) -> str:
    """The catalog model, or a shape's run name up to its first space ("DeepSeek-V2")."""
    return str(run["model"].get("catalog") or str(run["name"]).split(" ")[0])


def software_version(run: Mapping[str, Any]) -> str:
    """The container release in the stack's name ("Megatron-Bridge (NeMo 25.11)" -> "25.11");
    "" (earliest) when it names none."""
    found = re.search(r"\d\d\.\d\d", str(run["stack"]))
    return found.group(0) if found else ""


def calibration_ids(runs: Sequence[Mapping[str, Any]]) -> set[str]:
    """The calibration subset's rule: per (model family, card generation) the run of the
    earliest software version, the first listed among equals; NEVER_CALIBRATES excepted."""
    chosen: dict[tuple[str, str], tuple[tuple[str, int], str]] = {}
    for index, run in enumerate(runs):
        if run["id"] in NEVER_CALIBRATES:
            continue
        key = (model_family(run), card_generation(str(run["cards"]["accelerator"])))
        rank = (software_version(run), index)
        if key not in chosen or rank < chosen[key][0]:
            chosen[key] = (rank, str(run["id"]))
    return {run_id for _, run_id in chosen.values()}


def workload_of(run: Mapping[str, Any]) -> TrainingWorkload:
    """The planner's workload of a run, read as the API reads a payload."""
    model = run["model"]
    spec: dict[str, Any] = {
        "tokens": TOKENS,
        "precision": run["precision"],
        "seq_len": int(model["seq_len"]),
        "global_batch_sequences": int(run["global_batch_sequences"]),
        **({"model": model["catalog"]} if model.get("catalog") else dict(model["shape"])),
    }
    training = run.get("training") or {}
    spec.update({key: training[key] for key in RECIPE_FIELDS if key in training})
    return workload_from_spec(spec)


def to_moe_figure(gpu_hours_per_trillion: float, kind: str) -> float:
    """GPU-hours per trillion tokens in a published figure's unit."""
    if kind == GPU_HOURS:
        return gpu_hours_per_trillion
    if kind == TOKENS_PER_S:
        return 1e12 / (gpu_hours_per_trillion * 3600.0)
    raise ValueError(f"unknown MoE figure kind {kind!r}")


def throughput_error_percent(published: float, modeled: float, kind: str) -> float:
    """The signed throughput error of a modeled figure (module docstring)."""
    if kind == GPU_HOURS:
        return 100.0 * (published / modeled - 1.0)
    return 100.0 * (modeled - published) / published


def _band(fast_gpu_hours: float, slow_gpu_hours: float, kind: str) -> tuple[float | None, ...]:
    """The band's low and high figure in the published unit; None: unbounded (the slow end
    of the band is infinite when a run may not finish)."""
    fast = to_moe_figure(fast_gpu_hours, kind)
    slow = to_moe_figure(slow_gpu_hours, kind) if math.isfinite(slow_gpu_hours) else None
    return (fast, slow) if kind == GPU_HOURS else (slow, fast)


def model_moe_run(run: Mapping[str, Any]) -> dict[str, Any]:
    """The modeled figure of a run in the published unit, its error in that unit (GPU-hours:
    negative is fewer hours), the band's figures and the chosen split; or why not modeled."""
    try:
        workload = workload_of(run)
        planned = plan_capacity(workload, pd.DataFrame([option_of(run)])).iloc[0]
    except PlannerInputError as exc:
        return {"id": run["id"], "modeled": None, "reason": f"the planner refuses: {exc.errors}"}
    published = float(run["published"]["value"])
    if not planned["feasible"]:
        return {"id": run["id"], "modeled": None, "reason": str(planned["reason"])}
    kind = str(run["published"]["kind"])
    gpu_hours_per_day = 24.0 * float(run["cards"]["count"]) * (1e12 / TOKENS)
    days, days_low, days_high = (float(planned[c]) for c in ("days", "days_low", "days_high"))
    modeled = to_moe_figure(days * gpu_hours_per_day, kind)
    band = _band(days_low * gpu_hours_per_day, days_high * gpu_hours_per_day, kind)
    return {
        "id": run["id"],
        "role": run["role"],
        "published": published,
        "modeled": modeled,
        "modeled_low": band[0],
        "modeled_high": band[1],
        "error_percent": 100.0 * (modeled - published) / published,
        "split": {name: int(planned[name]) for name in ("tp", "pp", "vp", "cp", "dp", "ep")},
        "micro_batch": int(planned["micro_batch"]),
        "total_params": workload.params,
        "active_params": workload.flops_params,
    }


def split_text(split: Mapping[str, int], micro_batch: int) -> str:
    """ "TP 1 × PP 32 × VP 1 × CP 1 × DP 64 (EP 32), micro-batch 1"."""
    parts = " × ".join(f"{name.upper()} {split[name]}" for name in ("tp", "pp", "vp", "cp", "dp"))
    return f"{parts} (EP {split['ep']}), micro-batch {micro_batch}"


def moe_track_record_row(run: Mapping[str, Any]) -> TrackRecordRow:
    """One MoE run as a track-record row: figures rounded as the dense rows'."""
    row = base_row(run)
    result = model_moe_run(run)
    if result["modeled"] is None:
        return {**row, "reason": str(result["reason"])}
    modeled = significant(result["modeled"])
    low, high = (
        None if result[key] is None else significant(result[key])
        for key in ("modeled_low", "modeled_high")
    )
    published = row["published"]
    return {
        **row,
        "modeled": modeled,
        "modeled_low": low,
        "modeled_high": high,
        "error_percent": round(
            throughput_error_percent(published, modeled, row["figure"]), ERROR_DECIMALS
        ),
        "inside_band": (low is None or low <= published) and (high is None or published <= high),
        "split": split_text(result["split"], result["micro_batch"]),
    }


def compute_moe_record(runs: Sequence[Mapping[str, Any]] | None = None) -> MoeRecord:
    """Every published MoE run through today's planner, and the summary by role."""
    rows = [moe_track_record_row(run) for run in (load_moe_runs() if runs is None else runs)]
    return record_part(rows, MOE_SUMMARY_GROUPS, "moe_runs", MOE_ERROR_MEANING)

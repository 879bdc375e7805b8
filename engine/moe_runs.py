"""Published mixture-of-experts training runs through the planner (``moe_runs`` of
engine/data/published_training_runs.json).

Each run gives the model (a catalog name or an engine.moe shape), the sequence, the batch, the
cards and their links, the precision and the recipe's MoE terms it states; the planner chooses
its own split, expert parallelism included. The figure compared is GPU-hours per trillion
tokens at full effective time and utilization (failures and queueing are other factors).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from engine.capacity import TrainingWorkload, plan_capacity
from engine.capacity.workload import workload_from_spec
from engine.track_record import option_of

RUNS_PATH = Path(__file__).resolve().parent / "data" / "published_training_runs.json"
TOKENS = 1e12
MOE_ROLES: tuple[str, ...] = ("check", "held_back")
RECIPE_FIELDS: tuple[str, ...] = ("zero_stage", "moe_a2a_overlap", "moe_mtp_depth", "micro_batch")


def load_moe_runs(path: Path = RUNS_PATH) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["moe_runs"]
    return runs


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


def model_moe_run(run: Mapping[str, Any]) -> dict[str, Any]:
    """The modeled GPU-hours per trillion tokens of a run, its error and the chosen split."""
    workload = workload_of(run)
    planned = plan_capacity(workload, pd.DataFrame([option_of(run)])).iloc[0]
    published = float(run["published"]["value"])
    if not planned["feasible"]:
        return {"id": run["id"], "modeled": None, "reason": str(planned["reason"])}
    cards = float(run["cards"]["count"])
    gpu_hours = float(planned["days"]) * 24.0 * cards * (1e12 / TOKENS)
    split = {name: int(planned[name]) for name in ("tp", "pp", "vp", "cp", "dp", "ep")}
    return {
        "id": run["id"],
        "role": run["role"],
        "published": published,
        "modeled": gpu_hours,
        "error_percent": 100.0 * (gpu_hours - published) / published,
        "split": split,
        "micro_batch": int(planned["micro_batch"]),
        "total_params": workload.params,
        "active_params": workload.flops_params,
    }

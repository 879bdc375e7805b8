"""The serving model's track record: published serving figures through today's model.

Each run of engine/data/published_serving_runs.json gives what the model takes (the model's
shape, the cards, the tensor-parallel degree, the precisions, the engine) and a scenario:

    max_load      evaluate_inference with the cards given: capacity tokens/s of all of them
    concurrency   evaluate_inference with the batch capped at the requests in flight: TPOT, TTFT
    static_batch  `batch` requests started together: one prefill of batch × prompt tokens, then
                  output − 1 decode steps (end-to-end latency, or tokens/s of one sequence)
    decode_step   one decode step at the given batch and context (the step terms of the option)
    prefill       one forward pass over batch × prompt tokens

and each row says how far the model is from the published figure, whether the figure lies in
the model's calibrated band (band.py), the run's role (calibration rows fit the engines'
constants and the band; held-out rows never do) and its source. ``compute_serving_record``
returns the rows and a summary (median and worst error, band coverage) for all rows, each role
and each engine; engine/track_record.py puts it in engine/data/track_record.json under
"serving".

The mixture-of-experts runs (a model with a "moe" part, moe_serving.py) are modeled but kept
apart: they fit neither the engines' constants nor the band, and the summary holds them in
their own groups ("moe calibration", "moe held_out"), so "all", each role and each engine
describe the dense model the band was made for.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypedDict, cast

import numpy as np
import pandas as pd

from engine.inference import band, engines, moe_serving, roofline
from engine.inference.memory import AttentionShape
from engine.inference.sizing import InferenceWorkload, evaluate_inference, terms_from_columns

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
RUNS_PATH = DATA_DIR / "published_serving_runs.json"
RUNS_FILE = "engine/data/published_serving_runs.json"
ROLES = ("calibration", "held_out")
MOE_GROUP = "moe"  # the summary's groups of mixture-of-experts rows: "moe <role>"
SIGNIFICANT_DIGITS = 4
ERROR_DECIMALS = 1

# Published metric -> (unit, band group, whether larger is faster).
METRICS: Mapping[str, tuple[str, band.Group]] = {
    "output_tokens_per_s": ("tokens/s", "throughput"),
    "tokens_per_s_per_sequence": ("tokens/s per sequence", "throughput"),
    "tpot_ms": ("ms TPOT", "tpot"),
    "e2e_latency_ms": ("ms end to end", "tpot"),
    "decode_step_ms": ("ms per decode step", "tpot"),
    "ttft_ms": ("ms TTFT", "ttft"),
    "prefill_ms": ("ms prefill", "ttft"),
}
ERROR_MEANING = (
    "(modeled − published) ÷ published, in %: for tokens/s positive means the model is "
    "optimistic (faster than published); for times (ms) positive means pessimistic (slower)"
)
BAND_MEANING = (
    "inside the band: the published figure lies between the modeled one divided and multiplied "
    "by its regime's factor (tokens/s, TPOT, TTFT): a split-conformal 80 % quantile of "
    "|ln(modeled ÷ published)| over the calibration rows, widened for the constants fitted on "
    "them (band.py)"
)


class ServingRow(TypedDict):
    id: str
    role: str
    engine: str
    model: str
    accelerator: str
    cards: int
    tp: int
    moe: bool  # a mixture-of-experts model: summarized apart, never in the band's fit
    precision: str  # weights / KV cache
    scenario: str
    metric: str
    unit: str
    published: float
    modeled: float | None
    modeled_low: float | None
    modeled_high: float | None
    error_percent: float | None
    inside_band: bool | None
    reason: str  # why not modeled; "" when modeled
    source: str
    url: str


class ServingStats(TypedDict):
    runs: int
    modeled: int
    median_abs_error_percent: float | None
    worst_error_percent: float | None
    worst_run: str | None
    inside_band: int
    band_coverage_percent: float | None


class ServingRecord(TypedDict):
    runs_file: str
    error: str
    band: str
    band_factors: dict[str, float]  # regime -> the published figure within modeled ×/÷ it
    rows: list[ServingRow]
    summary: dict[str, ServingStats]


@cache
def load_document(path: Path = RUNS_PATH) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(path.read_text(encoding="utf-8")))


def load_runs(path: Path = RUNS_PATH) -> list[dict[str, Any]]:
    return list(load_document(path)["runs"])


# --------------------------------------------------------------------------------------------
# One run through the model
# --------------------------------------------------------------------------------------------


def shape_of(model: Mapping[str, Any]) -> AttentionShape:
    return AttentionShape(
        layers=int(model["layers"]),
        hidden=int(model["hidden"]),
        heads=int(model["heads"]),
        kv_heads=int(model["kv_heads"]),
        head_dim=int(model["head_dim"]),
        ffn_hidden=int(model["ffn_hidden"]),
        vocab=int(model["vocab"]),
        tied_embeddings=bool(model["tied_embeddings"]),
    )


def card_frame(name: str, card: Mapping[str, Any]) -> pd.DataFrame:
    row = {"accelerator": name, "tdp_w": 700.0, "rental_price_per_card_hour": 1.0}
    for key, value in card.items():
        if key != "source":
            row[key] = math.nan if value is None else float(value)
    return pd.DataFrame([row])


def workload_of(run: Mapping[str, Any], document: Mapping[str, Any]) -> InferenceWorkload:
    """The run as the model's input: the cards given, the scenario's token counts and batch."""
    model = document["models"][run["model"]]
    scenario = run["scenario"]
    kind = scenario["kind"]
    batch: int | None = None
    if kind == "concurrency":
        batch = max(1, round(float(scenario["concurrency"])))
    elif kind in ("static_batch", "decode_step", "prefill"):
        batch = int(scenario["batch"])
    if kind == "decode_step":  # the context is the prompt; one output token
        input_tokens, output_tokens = int(scenario["context"]), 1
    elif kind == "prefill":
        input_tokens, output_tokens = int(scenario["input_tokens"]), 1
    else:
        input_tokens, output_tokens = int(scenario["input_tokens"]), int(scenario["output_tokens"])
    return InferenceWorkload(
        params=float(model["params"]),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        weight_precision=str(run["weight_precision"]),
        kv_precision=str(run["kv_precision"]),
        cards=int(run["cards"]),
        tp=int(run["tp"]),
        batch=batch,
        engine=str(run["engine"]),
        overrides=dict(run.get("overrides") or {}),
        # An MoE run gives its MoE shape (and no dense one) and its expert layout.
        **{"shape": shape_of(model), **moe_serving.run_fields(run, model)},
    )


def is_moe(run: Mapping[str, Any], document: Mapping[str, Any] | None = None) -> bool:
    """Whether the run's model is a mixture of experts (its record has a "moe" part)."""
    doc = load_document() if document is None else document
    return bool(doc["models"][run["model"]].get("moe"))


def modeled_figure(run: Mapping[str, Any], option: pd.DataFrame) -> float:
    """The model's figure in the published metric, from the run's one option row."""
    scenario, metric = run["scenario"], run["published"]["metric"]
    kind = scenario["kind"]
    row = option.iloc[0]
    if kind == "max_load":
        return float(row["capacity_tokens_per_s"])
    if kind == "concurrency":  # output tokens/s at the given load: what the cards serve
        return float(row["tokens_per_s" if metric == "output_tokens_per_s" else metric])
    terms = terms_from_columns(option)
    batch = float(scenario["batch"])
    if kind == "decode_step":
        return float(roofline.step_seconds(terms, batch)[0]) * 1e3
    prompt = batch * float(scenario["input_tokens"])
    prefill_s = float(roofline.prefill_seconds(terms, prompt)[0])
    if kind == "prefill":
        return prefill_s * 1e3
    output = float(scenario["output_tokens"])
    total_s = prefill_s + (output - 1.0) * float(roofline.step_seconds(terms, batch)[0])
    return total_s * 1e3 if metric == "e2e_latency_ms" else output / total_s


def _significant(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def model_run(run: Mapping[str, Any], document: Mapping[str, Any] | None = None) -> ServingRow:
    """One run through today's model, with its error and whether it lies in the band."""
    doc = load_document() if document is None else document
    row = _base_row(run, doc)
    if run.get("not_modeled"):
        return {**row, "reason": str(run["not_modeled"])}
    option = evaluate_inference(
        card_frame(run["card"], doc["cards"][run["card"]]), workload_of(run, doc)
    )
    served = run["scenario"]["kind"] in ("max_load", "concurrency")
    if served and not bool(option["feasible"].iloc[0]):
        return {**row, "reason": f"the model finds it infeasible: {option['reason'].iloc[0]}"}
    modeled = modeled_figure(run, option)
    low, high = band.band(np.array([modeled]), METRICS[run["published"]["metric"]][1])
    published = float(run["published"]["value"])
    modeled_r, low_r, high_r = _significant(modeled), _significant(low[0]), _significant(high[0])
    return {
        **row,
        "modeled": modeled_r,
        "modeled_low": low_r,
        "modeled_high": high_r,
        "error_percent": round(100.0 * (modeled_r - published) / published, ERROR_DECIMALS),
        "inside_band": low_r <= published <= high_r,
    }


def _base_row(run: Mapping[str, Any], document: Mapping[str, Any]) -> ServingRow:
    metric = run["published"]["metric"]
    source = document["sources"][run["source"]]
    return {
        "id": str(run["id"]),
        "role": str(run["role"]),
        "engine": str(run["engine"]),
        "model": str(run["model"]),
        "accelerator": str(run["card"]),
        "cards": int(run["cards"]),
        "tp": int(run["tp"]),
        "moe": is_moe(run, document),
        "precision": f"{run['weight_precision']} / {run['kv_precision']}",
        "scenario": str(run["scenario"]["kind"]),
        "metric": str(metric),
        "unit": METRICS[metric][0],
        "published": float(run["published"]["value"]),
        "modeled": None,
        "modeled_low": None,
        "modeled_high": None,
        "error_percent": None,
        "inside_band": None,
        "reason": "",
        "source": str(source["citation"]),
        "url": str(source["url"]),
    }


# --------------------------------------------------------------------------------------------
# The whole record
# --------------------------------------------------------------------------------------------


def ratio(row: ServingRow) -> float:
    """modeled ÷ published of a modeled row."""
    return float(cast(float, row["modeled"])) / row["published"]


def band_factors(rows: Sequence[ServingRow]) -> dict[band.Group, float]:
    """Per regime, the factor the published figure lies within (band.py): the split-conformal
    quantile of |ln(modeled ÷ published)| over the given calibration rows of that regime,
    widened by sqrt((n + k) / (n − k)) for the k constants fitted on all n of them. Dense
    rows only: the mixture-of-experts rows never fit the constants nor the band."""
    modeled = [r for r in rows if r["modeled"] is not None and not r["moe"]]
    widen = band.fitting_widening(len(modeled), engines.FITTED_CONSTANTS)
    result: dict[band.Group, float] = {}
    for group in band.GROUPS:
        scores = [abs(math.log(ratio(r))) for r in modeled if METRICS[r["metric"]][1] == group]
        result[group] = round(math.exp(band.conformal_quantile(scores) * widen), 3)
    return result


def summarize(rows: Sequence[ServingRow]) -> ServingStats:
    modeled = [row for row in rows if row["error_percent"] is not None]
    errors = [abs(float(cast(float, row["error_percent"]))) for row in modeled]
    worst = max(modeled, key=lambda row: abs(cast(float, row["error_percent"])), default=None)
    inside = sum(1 for row in modeled if row["inside_band"])
    return {
        "runs": len(rows),
        "modeled": len(modeled),
        "median_abs_error_percent": (
            round(statistics.median(errors), ERROR_DECIMALS) if errors else None
        ),
        "worst_error_percent": worst["error_percent"] if worst else None,
        "worst_run": worst["id"] if worst else None,
        "inside_band": inside,
        "band_coverage_percent": (
            round(100.0 * inside / len(modeled), ERROR_DECIMALS) if modeled else None
        ),
    }


def summary_groups(rows: Sequence[ServingRow]) -> dict[str, ServingStats]:
    """Of the dense rows: all, each role, and each engine within each role; then the
    mixture-of-experts rows of each role ("moe <role>"), apart from the dense figures."""
    dense = [r for r in rows if not r["moe"]]
    groups: dict[str, ServingStats] = {"all": summarize(dense)}
    for role in ROLES:
        groups[role] = summarize([r for r in dense if r["role"] == role])
    for engine in sorted({r["engine"] for r in dense}):
        for role in ROLES:
            part = [r for r in dense if r["engine"] == engine and r["role"] == role]
            if part:
                groups[f"{engine} {role}"] = summarize(part)
    for role in ROLES:
        part = [r for r in rows if r["moe"] and r["role"] == role]
        if part:
            groups[f"{MOE_GROUP} {role}"] = summarize(part)
    return groups


def compute_serving_record(runs: Sequence[Mapping[str, Any]] | None = None) -> ServingRecord:
    rows = [model_run(run) for run in (load_runs() if runs is None else runs)]
    return {
        "runs_file": RUNS_FILE,
        "error": ERROR_MEANING,
        "band": BAND_MEANING,
        "band_factors": {str(group): factor for group, factor in band.RATIO_FACTORS.items()},
        "rows": rows,
        "summary": summary_groups(rows),
    }

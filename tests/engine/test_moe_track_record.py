"""The mixture-of-experts runs in the planner's track record (engine/moe_runs.py, the "moe"
part of engine/data/track_record.json): the committed part matches today's planner, each row
says what it compares or why it cannot, the summary is what the rows say, and no held-back run
feeds a calibration."""

from __future__ import annotations

import copy
import importlib.util
import json
import math
from pathlib import Path

import pytest

from engine.moe_runs import (
    GPU_HOURS,
    MOE_FIGURES,
    MOE_ROLES,
    MOE_SUMMARY_GROUPS,
    TOKENS_PER_S,
    calibration_ids,
    compute_moe_record,
    load_moe_runs,
    moe_track_record_row,
    throughput_error_percent,
    to_moe_figure,
)
from engine.track_record import load_runs, load_track_record

ROOT = Path(__file__).resolve().parents[2]
RUNS = load_moe_runs()
BY_ID = {run["id"]: run for run in RUNS}


@pytest.fixture(scope="module")
def committed():
    return load_track_record()["moe"]


def test_the_committed_moe_part_matches_todays_planner(committed):
    recomputed = json.loads(json.dumps(compute_moe_record(), ensure_ascii=False))
    assert recomputed == committed, "run benchmarks/fidelity.py --write and commit the file"


def test_every_moe_run_states_what_the_planner_takes_and_its_source():
    assert len(RUNS) >= 8
    assert len({run["id"] for run in RUNS}) == len(RUNS)
    for run in RUNS:
        assert run["role"] in MOE_ROLES, run["id"]
        assert run["published"]["kind"] in MOE_FIGURES and run["published"]["value"] > 0
        assert run["cards"]["count"] >= 1 and run["cards"]["accelerator"], run["id"]
        assert run["precision"] in ("bf16", "fp8"), run["id"]
        assert run["global_batch_sequences"] >= 1 and run["model"]["seq_len"] >= 1, run["id"]
        assert run["source"]["citation"].strip(), run["id"]
    # The calibration subset by its written rule (DeepSeek-V3 on 2,048 H800 among it); every
    # other run is held back (docs/decisions/0016-moe-calibration.md).
    assert {r["id"] for r in RUNS if r["role"] == "check"} == calibration_ids(RUNS)
    assert "deepseek-v3-pretraining-2048-h800" in calibration_ids(RUNS)


def test_the_nvidia_tables_are_transcribed_as_published():
    # NVIDIA Megatron-Bridge performance summary archive (docs/performance-summary-archive.md),
    # 26.02 container, Qwen3_235B_a22B on DGX-H100: 256 GPUs, FP8, GBS 8192, seq 4096, 1,633
    # tokens/s/GPU; NeMo Framework performance summary, NeMo 25.02, DGX-B200, Mixtral-8x7B:
    # 64 GPUs, FP8, GBS 256, seq 4096, 15,457 tokens/s/GPU.
    qwen = BY_ID["mbridge-2602-qwen3-235b-a22b-256-h100-fp8"]
    assert (qwen["cards"]["count"], qwen["global_batch_sequences"]) == (256, 8192)
    assert qwen["published"] == {"kind": TOKENS_PER_S, "value": 1633}
    assert "1,633 tokens/s/GPU" in qwen["source"]["citation"]
    mixtral = BY_ID["nemo-2502-mixtral-8x7b-64-b200-fp8"]
    assert (mixtral["cards"]["count"], mixtral["global_batch_sequences"]) == (64, 256)
    assert mixtral["published"]["value"] == 15457 and mixtral["model"]["seq_len"] == 4096
    # Force-balanced routing is what the Megatron-Bridge tables state: capacity factor 1.
    for run in RUNS:
        if run["stack"].startswith("Megatron-Bridge"):
            assert run["training"]["moe_capacity_factor"] == 1.0, run["id"]
            assert "force-balance" in run["training"]["note"], run["id"]


def test_gpu_hours_and_tokens_per_second_by_hand():
    # 180K GPU-hours per trillion tokens is 10¹² ÷ (180,000 × 3,600 s) tokens/s per GPU.
    assert to_moe_figure(180_000, TOKENS_PER_S) == pytest.approx(1543.21, abs=0.01)
    assert to_moe_figure(180_000, GPU_HOURS) == 180_000
    # Fewer modeled GPU-hours than published is a faster model: +20 % throughput.
    assert throughput_error_percent(120_000, 100_000, GPU_HOURS) == pytest.approx(20.0)
    assert throughput_error_percent(1_000, 900, TOKENS_PER_S) == pytest.approx(-10.0)


def test_rows_follow_the_runs_and_each_error_is_what_its_figures_say(committed):
    assert [row["id"] for row in committed["rows"]] == [run["id"] for run in RUNS]
    for row in committed["rows"]:
        run = BY_ID[row["id"]]
        assert row["published"] == run["published"]["value"] and row["role"] == run["role"]
        assert row["source"] == run["source"]["citation"]
        if row["modeled"] is None:
            assert row["reason"] and row["error_percent"] is None, row["id"]
            continue
        published, modeled = row["published"], row["modeled"]
        speedup = published / modeled if row["figure"] == GPU_HOURS else modeled / published
        assert row["error_percent"] == pytest.approx(100 * (speedup - 1), abs=0.051), row["id"]
        low, high = row["modeled_low"], row["modeled_high"]
        assert (low is None or low <= modeled) and (high is None or modeled <= high)
        inside = (low is None or low <= published) and (high is None or published <= high)
        assert row["inside_band"] == inside, row["id"]
        assert "EP " in row["split"] and row["reason"] == ""


def _median(values):
    ordered, n = sorted(values), len(values)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


@pytest.mark.parametrize("group", MOE_SUMMARY_GROUPS)
def test_the_moe_summary_is_what_its_rows_say(committed, group):
    rows = [r for r in committed["rows"] if group == "all" or r["role"] == group]
    modeled = [r for r in rows if r["error_percent"] is not None]
    errors = [r["error_percent"] for r in modeled]
    stats = committed["summary"][group]
    assert (stats["runs"], stats["modeled"]) == (len(rows), len(modeled))
    assert stats["not_modeled"] == len(rows) - len(modeled)
    assert stats["median_abs_error_percent"] == pytest.approx(
        _median([abs(e) for e in errors]), abs=0.051
    )
    worst = max(errors, key=abs)
    assert stats["worst_error_percent"] == worst
    assert next(r for r in rows if r["id"] == stats["worst_run"])["error_percent"] == worst
    assert stats["mean_signed_error_percent"] == pytest.approx(sum(errors) / len(errors), abs=0.051)
    assert stats["inside_band"] == sum(1 for r in modeled if r["inside_band"])


def test_the_dense_summary_holds_no_moe_run():
    record = load_track_record()
    moe_ids = {run["id"] for run in RUNS}
    assert not moe_ids & {row["id"] for row in record["rows"]}
    assert record["summary"]["all"]["runs"] == len(record["rows"])


def test_a_run_the_planner_cannot_evaluate_says_why():
    # DeepSeek-V3's 671B parameters on one 8-card H800 node: no split fits 8 × 80 GB.
    run = copy.deepcopy(BY_ID["deepseek-v3-pretraining-2048-h800"])
    run["cards"]["count"] = 8
    row = moe_track_record_row(run)
    assert row["modeled"] is None and row["error_percent"] is None
    assert row["inside_band"] is None and row["reason"].strip()
    # A shape the planner refuses (more experts per token than experts) says so too.
    bad = copy.deepcopy(BY_ID["deepseek-v2-pretraining-h800"])
    bad["model"]["shape"]["experts_per_token"] = 999
    refused = moe_track_record_row(bad)
    assert refused["modeled"] is None and "refuses" in refused["reason"]


def test_held_back_figures_never_move_the_model():
    # Doubling every held-back published figure changes their errors, never a modeled value.
    runs = copy.deepcopy(RUNS)
    for run in runs:
        if run["role"] == "held_back":
            run["published"]["value"] *= 2
    moved = compute_moe_record(runs)
    base = compute_moe_record(RUNS)
    for before, after in zip(base["rows"], moved["rows"], strict=True):
        assert after["modeled"] == before["modeled"], before["id"]
        assert (after["modeled_low"], after["modeled_high"]) == (
            before["modeled_low"],
            before["modeled_high"],
        )
    assert moved["summary"]["check"] == base["summary"]["check"]


def _calibrate_module():
    path = ROOT / "benchmarks" / "calibrate.py"
    spec = importlib.util.spec_from_file_location("calibrate_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_calibration_reads_a_held_back_or_moe_run():
    calibration = _calibrate_module().calibration_runs()
    assert calibration and all(run["role"] == "calibration" for run in calibration)
    held_back = {run["id"] for run in RUNS if run["role"] == "held_back"}
    assert not {run["id"] for run in calibration} & {run["id"] for run in RUNS}
    # The fits read the dense runs only; no held-back id hides among them.
    assert not held_back & {run["id"] for run in load_runs()}
    # No default of the MoE model names a held-back run as its source.
    sources = (ROOT / "engine" / "moe_training.py").read_text(encoding="utf-8")
    sources += (ROOT / "engine" / "defaults.py").read_text(encoding="utf-8")
    for run_id in held_back:
        assert run_id not in sources, run_id


def test_the_band_bounds_are_finite_or_open():
    for row in compute_moe_record()["rows"]:
        for key in ("modeled", "modeled_low", "modeled_high"):
            assert row[key] is None or math.isfinite(row[key]), (row["id"], key)

"""The planner's track record (engine/track_record.py): the committed file matches today's
model, every run says where its figure comes from and what it is for, and the summary is
what its rows say."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from engine.defaults import DEFAULTS
from engine.track_record import (
    ROLES,
    RUNS_PATH,
    TRACK_RECORD_PATH,
    compute_track_record,
    dumps,
    flops_per_token,
    load_runs,
    load_track_record,
    model_run,
    summarize,
)

ROOT = Path(__file__).resolve().parents[2]
RUNS = load_runs()


@pytest.fixture(scope="module")
def recomputed():
    return compute_track_record()


def test_the_committed_track_record_matches_todays_planner(recomputed):
    committed = TRACK_RECORD_PATH.read_text(encoding="utf-8")
    assert dumps(recomputed) == committed, (
        "engine/data/track_record.json is out of step with the planner or the published runs: "
        "run benchmarks/fidelity.py --write and commit the file"
    )


def test_every_run_has_a_source_a_role_and_a_figure():
    assert len(RUNS) >= 30
    ids = [run["id"] for run in RUNS]
    assert len(ids) == len(set(ids))
    for run in RUNS:
        assert run["source"]["citation"].strip(), run["id"]
        assert run["role"] in ROLES, run["id"]
        assert run["published"]["value"] > 0, run["id"]
        assert run["name"] and run["stack"] and run["cards"]["count"] >= 1, run["id"]


def test_both_roles_are_present_and_about_a_third_is_held_out():
    roles = [run["role"] for run in RUNS]
    assert set(roles) == set(ROLES)
    held_out = roles.count("held_out") / len(roles)
    assert 0.25 <= held_out <= 0.45
    # Held-out runs span the eras and stacks, not one paper.
    stacks = {run["stack"] for run in RUNS if run["role"] == "held_out"}
    assert len(stacks) >= 4


def test_the_runs_the_issue_names_are_there():
    ids = {run["id"] for run in RUNS}
    assert sum(i.startswith("megatron-sc21-") for i in ids) == 10
    assert {"megascale-175b-12288", "megascale-megatron-baseline-175b-12288"} <= ids
    assert {"llama3-405b-8192-8k", "llama3-405b-16384-8k", "llama3-405b-16384-128k"} <= ids
    assert sum(i.startswith("measured-") for i in ids) == 8


def test_measured_runs_carry_the_committed_measurement():
    measured = [run for run in RUNS if run["id"].startswith("measured-")]
    for run in measured:
        ref = run["source"]["measurement"]
        data = json.loads((ROOT / ref["file"]).read_text(encoding="utf-8"))
        (row,) = (
            r
            for r in data[ref["section"]]
            if r["model"] == ref["model"]
            and r["seq_len"] == ref["seq_len"]
            and r["variant"] == ref["variant"]
        )
        assert run["published"]["value"] == pytest.approx(row[ref["field"]], abs=0.05)
        # The planner models the step as measure.py ran it: micro-batch and checkpointing.
        training = run["training"]
        assert training["micro_batch"] == row["micro_batch"]
        assert training["recompute"] == ("full" if row["activation_checkpointing"] else "selective")
        assert training["software_stack"] == "plain_pytorch"
        assert run["cards"]["count"] == 1
        assert run["stack"] == "plain PyTorch"
        assert data["env"]["gpu_name"].split()[1] in run["cards"]["accelerator"]


def test_rows_follow_the_runs_and_not_modeled_rows_say_why():
    record = load_track_record()
    assert [row["id"] for row in record["rows"]] == [run["id"] for run in RUNS]
    for row in record["rows"]:
        if row["modeled"] is None:
            assert row["reason"], row["id"]
            assert row["error_percent"] is None and row["inside_band"] is None
        else:
            assert row["reason"] == ""
            expected = 100 * (row["modeled"] - row["published"]) / row["published"]
            assert row["error_percent"] == pytest.approx(expected, abs=0.051)
            low, high = row["modeled_low"], row["modeled_high"]
            assert low <= row["modeled"] <= high
            assert row["inside_band"] == (low <= row["published"] <= high)
    assert any(row["modeled"] is None for row in record["rows"])  # PaLM on TPU v4 at least


def _independent_stats(rows):
    errors = [row["error_percent"] for row in rows if row["error_percent"] is not None]
    modeled = [row for row in rows if row["error_percent"] is not None]
    ordered = sorted(abs(e) for e in errors)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    worst = max(errors, key=abs)
    inside = sum(1 for row in modeled if row["inside_band"] is True)
    return {
        "runs": len(rows),
        "modeled": n,
        "median": median,
        "worst": worst,
        "mean": sum(errors) / n,
        "inside": inside,
        "coverage": 100 * inside / n,
    }


@pytest.mark.parametrize("group", ["all", *ROLES])
def test_the_summary_is_what_the_rows_say(group):
    record = load_track_record()
    rows = [r for r in record["rows"] if group == "all" or r["role"] == group]
    stats = record["summary"][group]
    expected = _independent_stats(rows)
    assert stats["runs"] == expected["runs"]
    assert stats["modeled"] == expected["modeled"]
    assert stats["not_modeled"] == expected["runs"] - expected["modeled"]
    assert stats["median_abs_error_percent"] == pytest.approx(expected["median"], abs=0.051)
    assert stats["worst_error_percent"] == expected["worst"]
    assert (
        next(r for r in rows if r["id"] == stats["worst_run"])["error_percent"]
        == (expected["worst"])
    )
    assert stats["mean_signed_error_percent"] == pytest.approx(expected["mean"], abs=0.051)
    assert stats["inside_band"] == expected["inside"]
    assert stats["band_coverage_percent"] == pytest.approx(expected["coverage"], abs=0.051)


def test_summarize_without_modeled_rows_has_no_statistics():
    record = load_track_record()
    palm = [row for row in record["rows"] if row["id"] == "palm-540b-6144"]
    stats = summarize(palm)
    assert stats["runs"] == 1 and stats["modeled"] == 0 and stats["not_modeled"] == 1
    assert stats["median_abs_error_percent"] is None and stats["worst_run"] is None
    assert stats["band_coverage_percent"] is None


def test_flop_conventions_match_the_published_formulas():
    model = {"layers": 96, "hidden": 12288, "seq_len": 2048, "heads": 96, "kv_heads": 96}
    eq3 = {
        "flops": {"convention": "narayanan_eq3", "recompute_counted": True, "vocab_counted": 51200}
    }
    layers, h, s, v = 96, 12288, 2048, 51200
    # Narayanan et al. 2021, eq. 3 per step, divided by the tokens of the step.
    assert flops_per_token(eq3, model) == pytest.approx(
        96 * layers * h**2 * (1 + s / (6 * h) + v / (16 * layers * h))
    )
    gpt3 = {**model, "ffn_hidden": 4 * h, "vocab": 131072, "gated_mlp": False, "seq_len": 4096}
    core = {"flops": {"convention": "megatron_core"}}
    # For an MHA model with a 4h MLP the Megatron-Core count is 72·l·h²·(1 + s/6h + V/12lh).
    assert flops_per_token(core, gpt3) == pytest.approx(
        72 * layers * h**2 * (1 + 4096 / (6 * h) + 131072 / (12 * layers * h))
    )


def test_a_run_the_planner_cannot_fit_is_kept_with_the_reason():
    run = next(r for r in RUNS if r["id"] == "megatron-sc21-1.7b")
    tiny = {**run, "cards": {**run["cards"], "count": 1, "memory_gb": 4}}
    row = model_run(tiny)
    assert row["modeled"] is None and row["error_percent"] is None
    assert "memory" in row["reason"]


def test_modeled_figures_agree_with_the_calibration_tests_conventions(recomputed):
    # tests/engine/capacity/test_published_runs.py holds these runs within 10-12 %.
    rows = {row["id"]: row for row in recomputed["rows"]}
    for run_id in ("megatron-sc21-145.6b", "megascale-175b-12288", "llama3-405b-8192-8k"):
        row = rows[run_id]
        assert abs(row["error_percent"]) <= 12.0, row


def test_held_out_statistics_use_only_held_out_rows(recomputed):
    held = [r for r in recomputed["rows"] if r["role"] == "held_out"]
    errors = [r["error_percent"] for r in held if r["error_percent"] is not None]
    assert recomputed["summary"]["held_out"]["mean_signed_error_percent"] == pytest.approx(
        statistics.fmean(errors), abs=0.051
    )


def _tolerance_percent(run_id: str) -> float:
    document = json.loads(RUNS_PATH.read_text(encoding="utf-8"))
    run = next(r for r in document["runs"] if r["id"] == run_id)
    return float(run.get("tolerance_percent", document["tolerance_percent"]))


def test_every_modeled_run_is_within_the_tolerance_its_data_states():
    for row in load_track_record()["rows"]:
        if row["error_percent"] is not None:
            assert abs(row["error_percent"]) <= _tolerance_percent(row["id"]), row


@pytest.mark.parametrize("group", ["all", *ROLES])
def test_the_record_meets_the_accuracy_the_docs_promise(group):
    # docs/capacity-planning.md §4a: median |error| ≤ 8 %, no bias beyond ±5 %, and a
    # 10th-90th band that holds at least three runs in four with a median half-width ≤ 20 %.
    stats = load_track_record()["summary"][group]
    assert stats["median_abs_error_percent"] <= 8.0
    assert abs(stats["mean_signed_error_percent"]) <= 5.0
    assert stats["band_coverage_percent"] >= 75.0
    assert stats["median_band_half_width_percent"] <= 20.0


def test_one_card_runs_are_within_15_percent_of_the_measurement():
    rows = [row for row in load_track_record()["rows"] if row["id"].startswith("measured-")]
    assert len(rows) == 8 and all(row["modeled"] is not None for row in rows)
    for row in rows:
        assert abs(row["error_percent"]) <= 15.0, row
    # The same runs on an H200 (4.8 TB/s) model faster than on an H100 (3.35 TB/s).
    by_id = {row["id"]: row["modeled"] for row in rows}
    for shape in ("llama-3.2-1b-2048", "llama-3.2-3b-8192", "llama-3.2-1b-8192"):
        assert by_id[f"measured-h200-{shape}"] > by_id[f"measured-h100-{shape}"]


def test_the_band_is_the_calibration_runs_residual_percentiles():
    # model_ratio_p10/_p90 are the split-conformal bounds of published ÷ modeled over the
    # calibration runs only (benchmarks/calibrate.py band): the ⌊0.1·(n + 1)⌋-th and
    # ⌈0.9·(n + 1)⌉-th smallest ratio, which hold a new run with probability ≥ 80 %.
    rows = load_track_record()["rows"]
    ratios = sorted(
        row["published"] / row["modeled"]
        for row in rows
        if row["role"] == "calibration" and row["modeled"] is not None
    )
    assert len(ratios) >= 19  # fewer runs than that leave no rank inside the 10 % tails

    def rank(k: int) -> float:
        return ratios[k - 1]  # k-th smallest, 1-based

    n = len(ratios)
    low, high = rank(math.floor(0.1 * (n + 1))), rank(math.ceil(0.9 * (n + 1)))
    assert DEFAULTS["model_ratio_p10"].value == pytest.approx(low, abs=0.0015)
    assert DEFAULTS["model_ratio_p90"].value == pytest.approx(high, abs=0.0015)

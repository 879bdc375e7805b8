"""The serving model against published serving figures (engine/inference/track_record.py).

Every row comes from engine/data/published_serving_runs.json, whose runs cite their source;
the figures here are computed from that file and today's model, never copied from an output.
The issue's targets (median |error| <= 10 %, worst <= 25 %, band coverage >= 75 %) are checked
on the dense calibration rows and, apart, on the dense held-out rows the fit never saw. The
mixture-of-experts rows fit nothing and are summarized apart ("moe <role>"); their figures are
stated below as they are today.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from engine.inference import band, engines
from engine.inference.track_record import (
    METRICS,
    MOE_GROUP,
    ROLES,
    band_factors,
    compute_serving_record,
    load_document,
    load_runs,
)
from engine.track_record import load_track_record

ROOT = Path(__file__).resolve().parents[3]
DOCUMENT = load_document()
RUNS = load_runs()


@pytest.fixture(scope="module")
def record():
    return compute_serving_record()


def _rows(record, role, moe=False):
    """The modeled rows of a role, dense (the band's and the targets') or mixture of experts."""
    return [
        r
        for r in record["rows"]
        if r["role"] == role and r["error_percent"] is not None and r["moe"] == moe
    ]


def test_the_committed_serving_record_is_todays_model(record):
    assert load_track_record()["serving"] == json.loads(json.dumps(record)), (
        "engine/data/track_record.json's serving part is out of step: run "
        "benchmarks/fidelity.py --write"
    )


def test_every_run_cites_a_source_and_gives_a_full_shape():
    ids = [run["id"] for run in RUNS]
    assert len(ids) == len(set(ids)) and len(ids) >= 90
    for run in RUNS:
        source = DOCUMENT["sources"][run["source"]]
        assert source["citation"].strip() and source["url"].strip(), run["id"]
        model = DOCUMENT["models"][run["model"]]
        for key in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab"):
            assert int(model[key]) > 0, (run["id"], key)
        assert run["engine"] in engines.ENGINES, run["id"]
        assert run["published"]["metric"] in METRICS, run["id"]
        assert run["published"]["value"] > 0, run["id"]
        assert run["card"] in DOCUMENT["cards"], run["id"]
        assert run["tp"] <= run["cards"], run["id"]


def test_about_a_third_is_held_back_across_sources():
    roles = [run["role"] for run in RUNS]
    assert set(roles) == set(ROLES)
    assert 0.3 <= roles.count("held_out") / len(roles) <= 0.45
    held_sources = {run["source"] for run in RUNS if run["role"] == "held_out"}
    assert len(held_sources) >= 6


def test_the_named_sources_are_all_there():
    sources = {run["source"] for run in RUNS}
    assert {"trtllm-0.17", "trtllm-1.0", "trtllm-online-0.14", "gpt-fast"} <= sources
    assert {"llm-analysis-ft", "mlperf-5.0-h100", "measured-h100", "measured-h200"} <= sources
    assert any(source.startswith("vllm-") for source in sources)
    # The cases: 405B FP8 on 8 H100 and 8 H200, Llama-3.3-70B FP8 on H200 TP1 and on
    # 2 H100, gpt-fast's 7B on one A100.
    ids = {run["id"] for run in RUNS}
    assert {"trtllm10-405b-h100-tp8-1000-1000", "trtllm10-405b-h200-tp8-1000-1000"} <= ids
    assert {"trtllm10-70b-h200-tp1-1000-1000", "trtllm10-70b-h100-tp2-1000-1000"} <= ids
    assert "gpt-fast-7b-tp1-bf16" in ids


def test_measured_rows_carry_the_committed_gpu_measurements():
    measured = [run for run in RUNS if "measurement" in run]
    assert len(measured) >= 20
    for run in measured:
        ref = run["measurement"]
        data = json.loads((ROOT / ref["file"]).read_text(encoding="utf-8"))
        key = "context" if ref["section"] != "prefill" else "prompt_len"
        (row,) = (
            r
            for r in data[ref["section"]]
            if r["model"] == ref["model"] and r["batch"] == ref["batch"] and r[key] == ref[key]
        )
        assert row["status"] == "ok" and row["cuda_graph" if key == "context" else "phase"]
        assert run["published"]["value"] == pytest.approx(row[ref["field"]], abs=1e-3)
        assert run["engine"] == "plain-pytorch" and run["cards"] == 1
        assert data["env"]["gpu_name"].split()[1] in run["card"]


def test_not_modeled_rows_say_why_and_modeled_rows_add_up(record):
    for row in record["rows"]:
        if row["modeled"] is None:
            assert row["reason"], row["id"]
            continue
        expected = 100 * (row["modeled"] - row["published"]) / row["published"]
        assert row["error_percent"] == pytest.approx(expected, abs=0.051), row["id"]
        assert row["modeled_low"] <= row["modeled"] <= row["modeled_high"], row["id"]
        inside = row["modeled_low"] <= row["published"] <= row["modeled_high"]
        assert row["inside_band"] == inside, row["id"]


def test_the_band_is_the_calibration_rows_conformal_quantile_widened_for_the_fit(record):
    calibration = [r for r in record["rows"] if r["role"] == "calibration"]
    recomputed = band_factors(calibration)
    dense = [r for r in calibration if not r["moe"]]
    assert len(dense) == 66 and len(dense) < len(calibration)  # the 66 of band.py's widening
    assert band_factors(dense) == recomputed  # the MoE rows are not in the band
    assert recomputed == pytest.approx(band.RATIO_FACTORS, abs=0.0015), (
        f"band.RATIO_FACTORS is out of step with the calibration rows: commit {recomputed}"
    )
    for group, factor in band.RATIO_FACTORS.items():
        assert 1.0 < factor < 1.5, group


def test_the_conformal_rank_and_the_widening_by_hand():
    # 9 scores, α = 0.2: rank ceil(10 × 0.8) = 8; 3 scores: rank 4 > 3, no finite quantile.
    assert band.conformal_quantile([0.09, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08]) == 0.08
    assert band.conformal_quantile([0.01, 0.02, 0.03]) == float("inf")
    # 66 rows, 26 constants: sqrt(92 / 40) = 1.5166
    assert band.fitting_widening(66, 26) == pytest.approx(1.5166, abs=1e-4)


def test_the_held_out_rows_are_not_in_the_band(record):
    modeled = [r for r in record["rows"] if r["modeled"] is not None]
    assert band_factors(modeled) != band.RATIO_FACTORS  # all rows would give another band


@pytest.mark.parametrize("role", ROLES)
def test_median_error_is_within_10_percent(record, role):
    errors = [abs(r["error_percent"]) for r in _rows(record, role)]
    assert statistics.median(errors) <= 10.0


@pytest.mark.parametrize("role", ROLES)
def test_worst_error_is_within_25_percent(record, role):
    worst = max(_rows(record, role), key=lambda r: abs(r["error_percent"]))
    assert abs(worst["error_percent"]) <= 25.0, (worst["id"], worst["error_percent"])


@pytest.mark.parametrize("role", ROLES)
def test_the_band_holds_the_published_figure_in_three_cases_of_four(record, role):
    rows = _rows(record, role)
    inside = sum(1 for r in rows if r["inside_band"])
    assert inside / len(rows) >= 0.75


def test_the_band_holds_at_least_two_thirds_of_the_held_out_figures(record):
    rows = _rows(record, "held_out")
    assert sum(1 for r in rows if r["inside_band"]) / len(rows) >= 2 / 3


def test_the_summary_is_what_the_rows_say(record):
    for group, stats in record["summary"].items():
        if group in ROLES:
            rows = [r for r in record["rows"] if r["role"] == group and not r["moe"]]
        elif group == "all":
            rows = [r for r in record["rows"] if not r["moe"]]
        elif group.startswith(f"{MOE_GROUP} "):
            role = group.split(" ")[1]
            rows = [r for r in record["rows"] if r["moe"] and r["role"] == role]
        else:
            engine, role = group.split(" ")
            rows = [
                r
                for r in record["rows"]
                if r["engine"] == engine and r["role"] == role and not r["moe"]
            ]
        modeled = [r for r in rows if r["error_percent"] is not None]
        assert stats["runs"] == len(rows) and stats["modeled"] == len(modeled)
        errors = sorted(abs(r["error_percent"]) for r in modeled)
        assert stats["median_abs_error_percent"] == pytest.approx(
            statistics.median(errors), abs=0.051
        )
        assert stats["inside_band"] == sum(1 for r in modeled if r["inside_band"])


def test_the_moe_rows_are_modeled_and_summarized_apart(record):
    moe_runs = [run for run in RUNS if DOCUMENT["models"][run["model"]].get("moe")]
    moe_rows = [r for r in record["rows"] if r["moe"]]
    assert len(moe_runs) == len(moe_rows) == 43
    assert all(r["modeled"] is not None for r in moe_rows), "every MoE run is modeled"
    assert {f"{MOE_GROUP} {role}" for role in ROLES} <= set(record["summary"])
    dense_modeled = sum(1 for r in record["rows"] if r["modeled"] is not None and not r["moe"])
    assert record["summary"]["all"]["modeled"] == dense_modeled


@pytest.mark.parametrize(
    ("role", "median", "worst", "worst_run", "inside", "modeled"),
    [
        # The MoE model as it is today (engine/data/track_record.json, "serving"): with the
        # hidden-state traffic every card pays around the experts (defaults.py), Mixtral at
        # TP 2-8 with long outputs is within 20 % but one row (+22 % on 2 H200, 1,000 / 1,000),
        # Qwen3-235B at 128 in / 2,048 out on H200 pessimistic by 34 %; DeepSeek-R1 at its
        # published concurrency within 20 %: the held-out rows do not meet the dense targets.
        ("calibration", 6.0, -34.4, "trtllm10-qwen3-235b-a22b-h200-tp8-128-2048", 27, 28),
        ("held_out", 13.4, 22.2, "trtllm017-mixtral-8x7b-h200-tp2-1000-1000", 12, 15),
    ],
)
def test_the_moe_groups_error_as_it_is_today(
    record, role, median, worst, worst_run, inside, modeled
):
    rows = _rows(record, role, moe=True)
    assert len(rows) == modeled
    errors = [abs(r["error_percent"]) for r in rows]
    assert statistics.median(errors) == pytest.approx(median, abs=0.051)
    top = max(rows, key=lambda r: abs(r["error_percent"]))
    assert (top["id"], top["error_percent"]) == (worst_run, pytest.approx(worst, abs=0.051))
    assert sum(1 for r in rows if r["inside_band"]) == inside
    stats = record["summary"][f"{MOE_GROUP} {role}"]
    assert (stats["median_abs_error_percent"], stats["worst_error_percent"]) == (median, worst)

"""Blackwell in the training track record (docs/decisions/0017-blackwell-calibration.md): the
dense FP8 rows of NVIDIA's Megatron-Bridge 25.11 table on DGX-B200, DGX-GB200 and DGX-GB300
are split by the written rule (per model the GB200 row calibrates, every B200 and GB300 row is
held back), the one Blackwell constant is the calibration rows' optimum, the held-back rows are
within the tolerance their data states, and Ampere and Hopper cards never read the constant."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import pytest

from engine import defaults
from engine.reliability import card_generation
from engine.track_record import RUNS_PATH, load_runs, load_track_record, model_run

ROOT = Path(__file__).resolve().parents[2]
KEY = "gemm_efficiency_blackwell"
RUNS = load_runs()
BLACKWELL = [
    run for run in RUNS if card_generation([run["cards"]["accelerator"]])[0] == "blackwell"
]
SOURCE = "Megatron-Bridge, 'Performance' summary archive"


def _set(monkeypatch: pytest.MonkeyPatch, value: float) -> None:
    entry = dataclasses.replace(defaults.DEFAULTS[KEY], value=value)
    monkeypatch.setitem(defaults.DEFAULTS, KEY, entry)  # type: ignore[arg-type]


def test_the_blackwell_rows_follow_the_written_rule():
    # Eight rows of the 25.11 table: Llama 3 8B / 70B / 3.1 405B on GB200 and GB300, 8B and
    # 405B on B200; per model the GB200 row calibrates, the others are held back.
    assert len(BLACKWELL) == 8
    systems = {"GB200": 3, "GB300": 3, "B200": 2}
    for system, count in systems.items():
        on = [r for r in BLACKWELL if r["cards"]["accelerator"].split()[0] == system]
        assert len(on) == count, system
    for run in BLACKWELL:
        system = run["cards"]["accelerator"].split()[0]
        expected = "calibration" if system == "GB200" else "held_out"
        assert run["role"] == expected, run["id"]
        assert "before fitting" in run["role_rule"] and "0017" in run["role_rule"]
        citation = run["source"]["citation"]
        assert SOURCE in citation and "25.11 NeMo Container" in citation, run["id"]
        assert f"{run['published']['value']:,} tokens/s/GPU" in citation, run["id"]
        assert run["precision"] == "fp8" and run["stack"] == "Megatron-Core/NeMo"
    models = {run["model"]["params"] for run in BLACKWELL if run["role"] == "calibration"}
    assert len(models) == 3  # one calibration row per model


def _catalog_domain(prefix: str) -> int:
    path = ROOT / "inventory" / "fixtures" / "accelerators.csv"
    with path.open(encoding="utf-8") as handle:
        (row,) = (r for r in csv.DictReader(handle) if r["model"].startswith(prefix))
    return int(row["nvlink_domain_cards"])


def test_nvl72_rows_plan_with_the_catalogs_72_card_nvlink_domain():
    for run in BLACKWELL:
        system = run["cards"]["accelerator"].split()[0]
        options = run.get("planner_options") or {}
        if system in ("GB200", "GB300"):
            assert options["nvlink_domain_cards"] == _catalog_domain(system) == 72, run["id"]
        else:
            assert "nvlink_domain_cards" not in options  # DGX B200: the 8-GPU node
            assert _catalog_domain("B200") == 8


def _tolerance(run: dict) -> float:
    document = json.loads(RUNS_PATH.read_text(encoding="utf-8"))
    return float(run.get("tolerance_percent", document["tolerance_percent"]))


def test_held_back_blackwell_rows_are_within_their_stated_tolerance():
    rows = {row["id"]: row for row in load_track_record()["rows"]}
    for run in BLACKWELL:
        row = rows[run["id"]]
        assert row["modeled"] is not None, row["reason"]
        assert abs(row["error_percent"]) <= _tolerance(run), row
        if _tolerance(run) > 15.0:
            assert len(run["tolerance_note"]) > 80, run["id"]


def _calibration_loss(monkeypatch: pytest.MonkeyPatch, value: float) -> float:
    """Sum of squared log(modeled ÷ published) over the Blackwell calibration rows only."""
    _set(monkeypatch, value)
    loss = 0.0
    for run in BLACKWELL:
        if run["role"] != "calibration":
            continue
        row = model_run(run)
        loss += math.log(row["modeled"] / row["published"]) ** 2
    return loss


def test_the_blackwell_constant_is_the_calibration_rows_optimum(monkeypatch):
    # Fitted on the three GB200 rows only (0017): its 0.01 neighbours fit no better (1 % slack
    # for unrelated model changes), and 0.1 either way fits clearly worse.
    fitted = float(defaults.DEFAULTS[KEY].value)
    at_fit = _calibration_loss(monkeypatch, fitted)
    for neighbour in (fitted - 0.01, fitted + 0.01):
        assert at_fit <= 1.01 * _calibration_loss(monkeypatch, neighbour), neighbour
    for far in (fitted - 0.1, fitted + 0.1):
        assert _calibration_loss(monkeypatch, far) > at_fit + 0.01, far


def test_hopper_and_ampere_rows_never_read_the_blackwell_constant(monkeypatch):
    others = [r for r in RUNS if r["id"] in ("bridge2511-llama3-70b-64", "megatron-sc21-145.6b")]
    before = [model_run(run)["modeled"] for run in others]
    _set(monkeypatch, 0.3)
    assert [model_run(run)["modeled"] for run in others] == before
    blackwell = next(r for r in BLACKWELL if r["role"] == "calibration")
    assert model_run(blackwell)["modeled"] != load_track_record_row(blackwell["id"])["modeled"]


def load_track_record_row(run_id: str) -> dict:
    return next(row for row in load_track_record()["rows"] if row["id"] == run_id)

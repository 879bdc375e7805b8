"""MTBF defaults by card generation as well as site kind (issue 17, effective time at scale)."""

from __future__ import annotations

import pandas as pd
import pytest

from engine.capacity import TrainingWorkload, plan_capacity
from engine.defaults import DEFAULTS
from engine.reliability import card_generation, default_mtbf_card_hours

WORKLOAD = TrainingWorkload(params=7e9, tokens=2e11, seq_len=4096, global_batch_sequences=512)
CARD = {"dense_bf16_tflops": 312, "memory_gb": 80, "tdp_w": 400, "vendor": "NVIDIA"}


def test_catalog_names_map_to_their_generation():
    names = ["A100 SXM4 80GB", "A10", "H100 SXM5 80GB", "H20", "H200 NVL", "B200", "Ascend 910B"]
    assert list(card_generation([*names, "MI300X"])) == [
        "ampere",
        "ampere",
        "hopper",
        "hopper",
        "hopper",
        "blackwell",
        "ascend_910b",
        "",
    ]


def test_the_research_preset_beats_the_generation_and_unpublished_generations_fall_back():
    mtbf, basis = default_mtbf_card_hours(
        ["unknown", "research", "unknown", "unknown", "production"],
        ["hopper", "hopper", "ampere", "blackwell", "ascend_910b"],
    )
    # Llama 3 (H100, ~50,700 h per GPU) and Kokolis et al. 2024 (RSC-1 A100, ~29,500 h).
    assert list(mtbf) == [50_000, 29_500, 29_500, 38_700, 38_700]
    assert basis[0] == "default for Hopper cards (mtbf_card_hours_hopper)"
    assert basis[1] == "research-cluster preset (mtbf_card_hours_research)"
    assert "Blackwell" in basis[3] and basis[3].startswith("default for a production fleet")
    assert "Ascend 910B" in basis[4] and basis[4].startswith("default for a production fleet")
    assert "Dubey" in DEFAULTS["mtbf_card_hours_hopper"].source
    assert "Kokolis" in DEFAULTS["mtbf_card_hours_ampere"].source


def test_the_plan_reports_the_generation_default_and_an_entered_mtbf_as_entered():
    options = pd.DataFrame(
        [
            {**CARD, "accelerator": "H100 SXM5 80GB", "cards": 1024},
            {**CARD, "accelerator": "A100 SXM4 80GB", "cards": 1024},
            {**CARD, "accelerator": "B200", "cards": 1024},
            {**CARD, "accelerator": "A100 SXM4 80GB", "cards": 1024, "mtbf_card_hours": 30_000},
        ]
    )
    rows = plan_capacity(WORKLOAD, options).set_index("option_id")
    assert list(rows["mtbf_card_hours"]) == pytest.approx([50_000, 29_500, 38_700, 30_000])
    assert list(rows["mtbf_provenance"]) == ["default", "default", "default", "entered"]
    assert "Ampere" in rows.loc[1, "mtbf_basis"] and "Blackwell" in rows.loc[2, "mtbf_basis"]
    # Same card figures otherwise: the Hopper default fails least, the Ampere one most.
    assert (
        rows.loc[0, "effective_time"]
        > rows.loc[2, "effective_time"]
        > rows.loc[1, "effective_time"]
    )

"""Measured MFU of a mixture of experts (issue #32): a job's throughput MFU is scored on the
active parameters when its row carries them (`model_active_params`), else on `model_params`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.usage import measured_mfu

H100 = "H100 SXM5 80GB"
PEAK_TFLOPS = (
    989.0  # H100 SXM5 dense BF16 (NVIDIA H100 datasheet), as in tests/engine/test_usage.py
)
# DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" (arXiv:2412.19437): 671B total, 37B active.
TOTAL = 671e9
ACTIVE = 37e9


def jobs(active: list[float] | None) -> pd.DataFrame:
    """Two 8-card jobs of 10 card-hours at 2,000 tokens/s, both entered as 671B."""
    frame = pd.DataFrame(
        {
            "cluster": ["c", "c"],
            "accelerator_model": [H100, H100],
            "cards": [8.0, 8.0],
            "card_hours": [10.0, 10.0],
            "model_params": [TOTAL, TOTAL],
            "tokens_per_s": [2_000.0, 2_000.0],
            "mfu": [np.nan, np.nan],
            "gpu_utilization": [np.nan, np.nan],
        }
    )
    return frame if active is None else frame.assign(model_active_params=active)


def mfu_of(params: float) -> float:
    return 6 * params * 2_000.0 / (8 * PEAK_TFLOPS * 1e12)


def test_no_active_column_or_nan_active_scores_the_job_on_model_params() -> None:
    without = measured_mfu(jobs(None), {H100: PEAK_TFLOPS}).iloc[0]
    nan_active = measured_mfu(jobs([np.nan, np.nan]), {H100: PEAK_TFLOPS}).iloc[0]
    assert without["mfu"] == pytest.approx(mfu_of(TOTAL))
    assert nan_active["mfu"] == pytest.approx(without["mfu"])
    assert nan_active["measured_card_hours"] == without["measured_card_hours"] == 20.0


def test_an_moe_job_is_scored_on_its_active_parameters() -> None:
    out = measured_mfu(jobs([ACTIVE, ACTIVE]), {H100: PEAK_TFLOPS}).iloc[0]
    assert out["mfu"] == pytest.approx(mfu_of(ACTIVE))  # 0.056, not 1.02 (> 1) on the total
    assert out["mfu"] == pytest.approx(mfu_of(TOTAL) * ACTIVE / TOTAL)


def test_active_fills_only_the_jobs_that_carry_it() -> None:
    out = measured_mfu(jobs([ACTIVE, np.nan]), {H100: PEAK_TFLOPS}).iloc[0]
    assert out["mfu"] == pytest.approx((mfu_of(ACTIVE) + mfu_of(TOTAL)) / 2)

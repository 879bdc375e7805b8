"""Deadline mode's pruning (issue 27): the split bound skips counts that cannot meet the
deadline, and the search still returns what the exhaustive search (every count the ceiling
lets through goes through the full split search) returns, count for count."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import engine.capacity.deadline as deadline
from engine.capacity import TrainingWorkload, cards_for_deadline, evaluate_splits, prepare_options
from engine.capacity.split_bound import reaches, shape_terms
from engine.memory import ModelShape
from engine.parallelism import FixedParallelism
from tests.support.capacity_inputs import A100_40GB, A100_80GB, H100_SXM, options

# A GB200 NVL72 rack as its trays give it: 4 cards a tray, one NVLink domain of 72
# (NVIDIA GB200 NVL72 datasheet: 72 Blackwell GPUs, 186 GB HBM3e each, 2.25 PFLOPS dense BF16).
GB200 = {
    "accelerator": "GB200",
    "vendor": "NVIDIA",
    "dense_bf16_tflops": 2250.0,
    "dense_fp8_tflops": 4500.0,
    "memory_gb": 186.0,
    "tdp_w": 1200.0,
    "cards_per_node": 4,
    "nvlink_domain_cards": 72,
}
CARDS = (A100_40GB, A100_80GB, H100_SXM, GB200)
# Small enough that the exhaustive search of every example stays well under a second.
MAX_CARDS = 3_000
# The benchmark's workload (benchmarks/planner.py): 70B on 2T tokens.
BENCHMARK = TrainingWorkload(params=70e9, tokens=2e12, global_batch_sequences=2048, seq_len=4096)


@st.composite
def workloads(draw: st.DrawFn) -> TrainingWorkload:
    params = draw(st.sampled_from([1.3e9, 7e9, 13e9, 34e9, 70e9]))
    seq_len = draw(st.sampled_from([2048, 4096, 16384]))
    fixed = draw(
        st.sampled_from([FixedParallelism(), FixedParallelism(tp=2), FixedParallelism(pp=4, vp=2)])
    )
    shape = ModelShape(32, 4096, 32) if draw(st.booleans()) and params == 7e9 else None
    return TrainingWorkload(
        params=params,
        tokens=draw(st.sampled_from([2e10, 1e11, 5e11])),
        seq_len=seq_len,
        global_batch_sequences=draw(st.sampled_from([256, 1024, 1536])),
        max_batch_tokens=draw(st.sampled_from([None, 16 * 1024 * 1024])),
        micro_batch=draw(st.sampled_from([None, 1, 2])),
        zero_stage=draw(st.sampled_from([0, 1, 3])),
        precision=draw(st.sampled_from(["bf16", "fp8"])),
        flops_per_param_token=draw(st.sampled_from([6, 8])),
        parallelism=fixed,
        shape=shape,
    )


@st.composite
def deadline_options(draw: st.DrawFn) -> pd.DataFrame:
    """One to four options: a card, a deadline, and now and then an entered factor."""
    rows = []
    for _ in range(draw(st.integers(1, 4))):
        row = {**draw(st.sampled_from(CARDS)), "deadline_days": draw(st.floats(0.5, 120.0))}
        row["card_granularity"] = draw(st.sampled_from([1, 1, 8]))
        extra = draw(st.sampled_from(["none", "none", "scaling", "mfu", "effective_time"]))
        if extra == "scaling":
            row["scaling"] = draw(st.floats(0.5, 1.0))
        elif extra == "mfu":
            row["achieved_tflops_per_card"] = row["dense_bf16_tflops"] * draw(st.floats(0.2, 0.6))
        elif extra == "effective_time":
            row["effective_time"] = draw(st.floats(0.7, 1.0))
        rows.append(row)
    return options(*rows)


def _both(workload: TrainingWorkload, frame: pd.DataFrame, max_cards: int) -> tuple:
    pruned = cards_for_deadline(workload, frame, max_cards=max_cards)
    exhaustive = cards_for_deadline(workload, frame, max_cards=max_cards, exhaustive=True)
    return pruned, exhaustive


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(workload=workloads(), rows=deadline_options())
def test_pruned_search_answers_as_the_exhaustive_one(workload, rows):
    frame = prepare_options(rows, workload)
    frame = frame[frame["peak_tflops"].notna()]  # as plan_capacity: FP8 needs an FP8 peak
    assume(not frame.empty)
    pruned, exhaustive = _both(workload, frame, MAX_CARDS)
    np.testing.assert_array_equal(pruned, exhaustive)  # NaN (no count) included


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    workload=workloads(),
    card=st.sampled_from(CARDS),
    cards=st.integers(2, 4096),
    mfu=st.sampled_from([None, 0.35]),
)
def test_split_bound_admits_the_best_split_and_no_better(workload, card, cards, mfu):
    row = {**card, "deadline_days": 30.0}
    if mfu is not None:
        row["achieved_tflops_per_card"] = card["dense_bf16_tflops"] * mfu
    frame = prepare_options(options(row), workload)
    assume(frame["peak_tflops"].notna().all())  # FP8 on an A100: no peak, no plan
    splits = evaluate_splits(workload, frame, np.array([cards]))
    fitting = splits[splits["fits_memory"]]
    terms = shape_terms(workload, frame)
    assert terms is not None
    if fitting.empty:  # nothing fits: the bound proves that no efficiency is reached
        nothing = np.array([1e-9])
        assert not reaches(workload, frame, terms, np.array([0]), np.array([cards]), nothing)[0]
        return
    best = float((fitting["mfu"] * fitting["scaling_modeled"]).max())
    one, count = np.array([0]), np.array([cards])
    may = [
        reaches(workload, frame, terms, one, count, np.array([e]))[0] for e in (best, best * 1.001)
    ]
    assert may == [True, False]  # admits the best split, and finds no split better than it


# Two of the benchmark's card models (NVIDIA B200 and Intel Gaudi 3 datasheets: dense BF16
# 2,250 and 1,835 TFLOPS, 180 and 128 GB, 1,000 and 900 W).
B200 = {
    "accelerator": "B200 180GB",
    "vendor": "NVIDIA",
    "dense_bf16_tflops": 2250.0,
    "dense_fp8_tflops": 4500.0,
    "memory_gb": 180.0,
    "tdp_w": 1000.0,
}
GAUDI_3 = {
    "accelerator": "Gaudi 3",
    "vendor": "Intel",
    "dense_bf16_tflops": 1835.0,
    "dense_fp8_tflops": 1835.0,
    "memory_gb": 128.0,
    "tdp_w": 900.0,
}


def test_benchmark_deadlines_answer_as_before_with_a_fraction_of_the_search(monkeypatch):
    rows = [{**card, "deadline_days": days} for card in (B200, GAUDI_3) for days in (15, 30, 60)]
    frame = prepare_options(options(*rows), BENCHMARK)
    searched: list[int] = []
    search = deadline.best_split_per_option

    def counted(workload, part, cards):
        searched.append(len(cards))
        return search(workload, part, cards)

    monkeypatch.setattr(deadline, "best_split_per_option", counted)
    pruned = cards_for_deadline(BENCHMARK, frame)
    pruned_counts, searched[:] = sum(searched), []
    exhaustive = cards_for_deadline(BENCHMARK, frame, exhaustive=True)
    np.testing.assert_array_equal(pruned, exhaustive)
    assert np.isfinite(pruned).all()
    # The exhaustive search checks thousands of counts here; the bound leaves a few dozen.
    assert pruned_counts * 20 < sum(searched)


@pytest.mark.parametrize("scaling", [np.nan, 0.9])
def test_entered_scaling_keeps_the_ceiling_test(scaling):
    """An entered scaling replaces the modeled one in days: the split bound (modeled) is not
    applied, and the answers still match."""
    rows = options({**H100_SXM, "deadline_days": 20.0, "scaling": scaling})
    workload = TrainingWorkload(params=13e9, tokens=3e11)
    frame = prepare_options(rows, workload)
    pruned, exhaustive = _both(workload, frame, 4_096)
    np.testing.assert_array_equal(pruned, exhaustive)
    assert np.isfinite(pruned).all()


def test_options_without_any_split_beside_ones_with_splits():
    """tp = 8 fixed: nodes of 4 cards admit no split, so that option (the last: it has no
    shape) finds no count, while the 8-card nodes' options do, as in the exhaustive search;
    eight options make the doubling probes large enough for the split bound."""
    workload = TrainingWorkload(params=7e9, tokens=2e11, parallelism=FixedParallelism(tp=8))
    rows = [{**H100_SXM, "deadline_days": 2.0**k, "cards_per_node": 8} for k in range(2, 9)]
    rows.append({**H100_SXM, "deadline_days": 10.0, "cards_per_node": 4})
    pruned, exhaustive = _both(workload, prepare_options(options(*rows), workload), 4_096)
    np.testing.assert_array_equal(pruned, exhaustive)
    assert np.isfinite(pruned[:-1]).all() and np.isnan(pruned[-1])
